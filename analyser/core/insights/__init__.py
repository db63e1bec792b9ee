"""Insights: findings with evidence, a recommended run-config change, its trade-off and the
predicted effect obtained by re-simulating the changed configuration with the engine.

    from analyser.core import Analysis
    from analyser.core.insights import find_insights, Thresholds
    with Analysis.open("base.h5") as a:
        for tip in find_insights(a, Thresholds().with_overrides(["ramp_share=0.3"]),
                                 simulator=InProcessSimulator()):  # analyser.sim
            print(tip.title, tip.change, tip.effect.after)

Out of memory: memory tips first (critical) in the IPU memory guide's order, FP16 first when the
model runs in FP32. Fits: throughput tips by severity (critical, warning, info) and by predicted
benefit within a severity, then the low-headroom memory tips (info: they cost throughput), then
tips re-simulated as not recommended (``rank_insights``; ``ORDER`` says it in a sentence).
"""

from __future__ import annotations

from analyser.core.insights.catalogue import all_rules, rules_of
from analyser.core.insights.context import Context
from analyser.core.insights.model import EFFECT_KEYS, Effect, Evidence, Insight, benefit
from analyser.core.insights.registry import CATEGORIES, Rule
from analyser.core.insights.resimulate import (
    ProgressFn,
    baseline_metrics,
    find_fitting_combination,
    predict_effects,
)
from analyser.core.insights.thresholds import ThresholdError, Thresholds
from analyser.core.simulator import Simulator

_SEV = {"critical": 0, "warning": 1, "info": 2}

#: How the list is ordered, in a sentence the CLI and the GUI show (unsaid, a warning above a
#: critical read as a mistake when the order was not said).
ORDER = {
    "fits": (
        "Ordered by severity (critical, warning, info), then by predicted gain (the re-simulated "
        "saving of time per sample, else the share of the run the tip addresses); low-headroom "
        "memory tips and tips predicted not to help come last."
    ),
    "oom": (
        "Out of memory: the memory tips come first in the IPU memory guide's order, then the "
        "rest by severity and predicted gain."
    ),
}

#: Said of every memory tip on a program that fits (it only fires for low headroom).
LOW_HEADROOM = "Low headroom only (the program fits; see the predicted effect on throughput)."


def rank_insights(analysis, insights: list[Insight]) -> list[Insight]:
    """The insights in the order a user should read them (a new list).

    Out of memory: the memory tips first, in the IPU memory guide's order (FP16 first for FP32
    models), ``memory.combined`` right after them, then the rest as below.

    Fits: the throughput tips by severity (critical first: the list's severity column reads
    top down), within a severity by predicted benefit (the re-simulated saving of
    time per sample when there is one, else the share of the run the tip addresses; catalogue
    order breaks ties), then the low-headroom memory tips (info: they cost throughput) by the
    same benefit, then every tip re-simulated as not recommended (slower, or would not fit).
    """

    def gain(tip: Insight) -> float:
        value = benefit(tip)
        return -1.0 if value is None else value

    def recommended(tip: Insight) -> bool:
        """Not re-simulated, or re-simulated and recommended."""
        return tip.effect is None or tip.effect.recommended

    def by_severity(tip: Insight) -> tuple:
        """Critical before warning before info; within one, the larger gain first."""
        return (_SEV.get(tip.severity, 3), -gain(tip), tip.rank)

    fits = bool(analysis.memory.fits)
    mem = [t for t in insights if t.category == "memory"]
    rest = [t for t in insights if t.category != "memory"]
    if not fits:
        combo = [t for t in mem if t.id == "memory.combined"]
        singles = sorted((t for t in mem if t.id != "memory.combined"), key=lambda t: t.rank)
        tput = sorted(rest, key=lambda t: (not recommended(t), *by_severity(t)))
        return singles + combo + tput
    good = sorted((t for t in rest if recommended(t)), key=by_severity)
    low = sorted((t for t in mem if recommended(t)), key=by_severity)
    worse = sorted(
        (t for t in insights if not recommended(t)),
        key=lambda t: (t.category == "memory", -gain(t), t.rank),
    )
    return good + low + worse


def _category_applies(ctx: Context, category: str) -> bool:
    """Whether ``category``'s rules run: the memory rules answer memory pressure (each declares
    ``memory_headroom``), the throughput rules read the execution (an out-of-memory profile has
    none)."""
    if category == "memory":
        return ctx.memory_pressure
    return ctx.analysis.execution is not None


def find_insights(
    analysis,
    thresholds: Thresholds | None = None,
    *,
    simulator: Simulator | None = None,
    progress: ProgressFn | None = None,
) -> list[Insight]:
    """Every insight that fires on ``analysis`` (an :class:`analyser.core.Analysis`), ranked by
    :func:`rank_insights`.

    Given a ``simulator`` (:class:`analyser.core.simulator.Simulator`, one of
    :mod:`analyser.sim`'s), each insight with a run-config change gets its predicted
    :class:`Effect` (re-simulated on it, the profile's own
    configuration re-simulated too as the baseline of the deltas; ``progress(done, total,
    insight_id)`` is called as they finish, then with ``insight_id == "memory.combined"`` while
    a fitting combination is searched for an out-of-memory profile).
    """
    ctx = Context(analysis, thresholds or Thresholds())
    found: list[Insight] = []
    for category in CATEGORIES:
        if not _category_applies(ctx, category):
            continue
        for rank, rule in enumerate(rules_of(category)):
            tip = rule.run(ctx)
            if tip is not None:
                tip.rank = rank
                if rule.share_of == "device trace":
                    # a share of the device trace -> of the host-inclusive time
                    tip.addresses *= ctx.device_share
                found.append(tip)
    if analysis.memory.fits:
        for t in found:
            if t.category == "memory":
                t.summary = f"{LOW_HEADROOM} {t.summary}"
    if simulator is not None:
        predict_effects(analysis, found, simulator, progress=progress)
        combo = find_fitting_combination(analysis, found, simulator, progress=progress)
        if combo is not None:
            found.append(combo)
    return rank_insights(analysis, found)


__all__ = [
    "EFFECT_KEYS",
    "ORDER",
    "Effect",
    "Evidence",
    "Insight",
    "Rule",
    "ThresholdError",
    "Thresholds",
    "all_rules",
    "baseline_metrics",
    "benefit",
    "find_fitting_combination",
    "find_insights",
    "predict_effects",
    "rank_insights",
]
