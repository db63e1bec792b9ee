"""Insights: findings with evidence, a recommended run-config change, its trade-off and the
predicted effect obtained by re-simulating the changed configuration with the engine.

    from analyser.core import Analysis
    from analyser.core.insights import find_insights, Thresholds
    with Analysis.open("base.h5") as a:
        for tip in find_insights(a, Thresholds().with_overrides(["ramp_share=0.3"]),
                                 resimulate=True):
            print(tip.title, tip.change, tip.effect.after)

Memory tips come first (critical when a tile is out of memory) in the IPU memory guide's order,
FP16 first when the model runs in FP32; throughput tips follow, most severe first.
"""

from __future__ import annotations

from analyser.core.insights.model import EFFECT_KEYS, Effect, Evidence, Insight
from analyser.core.insights.resimulate import (
    ProgressFn,
    find_fitting_combination,
    predict_effects,
)
from analyser.core.insights.rules import MEMORY_RULES, THROUGHPUT_RULES, Context
from analyser.core.insights.thresholds import ThresholdError, Thresholds

_SEV = {"critical": 0, "warning": 1, "info": 2}


def find_insights(
    analysis,
    thresholds: Thresholds | None = None,
    *,
    resimulate: bool = False,
    workers: int = 2,
    progress: ProgressFn | None = None,
) -> list[Insight]:
    """Every insight that fires on ``analysis`` (an :class:`analyser.core.Analysis`).

    With ``resimulate=True`` each insight with a run-config change gets its predicted
    :class:`Effect` (re-simulations run in up to ``workers`` processes; ``progress(done, total,
    insight_id)`` is called as they finish).
    """
    ctx = Context(analysis, thresholds or Thresholds())
    found: list[Insight] = []
    for rank, rule in enumerate(MEMORY_RULES):
        tip = rule(ctx)
        if tip is not None:
            tip.rank = rank
            found.append(tip)
    tput: list[Insight] = []
    for rank, rule in enumerate(THROUGHPUT_RULES):
        tip = rule(ctx)
        if tip is not None:
            tip.rank = rank
            tput.append(tip)
    tput.sort(key=lambda t: (_SEV.get(t.severity, 3), t.rank))
    found.extend(tput)
    if resimulate:
        predict_effects(analysis, found, workers=workers, progress=progress)
        combo = find_fitting_combination(analysis, found)
        if combo is not None:  # after the single memory tips it combines
            n_mem = sum(1 for t in found if t.category == "memory")
            found.insert(n_mem, combo)
    return found


__all__ = [
    "EFFECT_KEYS",
    "Effect",
    "Evidence",
    "Insight",
    "ThresholdError",
    "Thresholds",
    "find_fitting_combination",
    "find_insights",
    "predict_effects",
]
