"""The story of a sequence of profiles (e.g. the walkthrough): for each step to the next, the
run options changed, the insight of the earlier profile that recommended the change (with its
predicted, re-simulated effect), and the measured effect.

When no insight recommended a change, the rule that would have is evaluated with its thresholds
relaxed to zero, so the story says how far below its threshold the profile was (e.g. "what is
paid once per host call takes 0.3% of the run; threshold 5%") and, with re-simulation, what the
model predicts for it (little gain, plainly).

    from analyser.core.transitions import explain_transitions
    story = explain_transitions(analyses, insights_per_profile, simulator=InProcessSimulator())
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analyser.core.analysis import Analysis
from analyser.core.comparison import COSMETIC_KEYS, config_diffs
from analyser.core.insights import (
    Insight,
    Thresholds,
    all_rules,
    find_insights,
    predict_effects,
)
from analyser.core.quantities import QUANTITIES
from analyser.core.simulator import Simulator
from analyser.core.units import fmt_bytes, fmt_delta_pct, fmt_pct

#: Thresholds set to zero to ask a rule "how much would you address?" when it did not fire.
_RELAXED = {
    "offload_share": 0.0,
    "ramp_share": 0.0,
    "weight_update_share": 0.0,
    "host_call_share": 0.0,
    "input_stream_share": 0.0,
    "host_wait_moderate": 0.0,
    "io_stream_share": 0.0,
    "allreduce_share": 0.0,
    "fp32_matmul_share": 0.0,
}


@dataclass
class TipLink:
    """An insight of the earlier profile whose change goes the way the step went."""

    key: str  # the run option
    insight: Insight
    fired: bool  # False: found only with the thresholds relaxed (it did not fire)
    position: int | None  # 1-based place in the earlier profile's ranked list (None: not fired)
    thresholds: list[tuple[str, float]] = field(default_factory=list)  # what it stayed below

    def to_dict(self) -> dict[str, Any]:
        """The link as plain data (the report's step-by-step section)."""
        t = self.insight
        eff = t.effect
        return {
            "key": self.key,
            "id": t.id,
            "title": t.title,
            "summary": t.summary,
            "fired": self.fired,
            "position": self.position,
            "change": t.change,
            "thresholds": [{"name": n, "value": v} for n, v in self.thresholds],
            "predicted": eff.to_dict() if eff is not None else None,
        }


@dataclass
class Transition:
    """One step of a sequence of profiles: what changed, the insights behind it, the effect."""

    a: str
    b: str
    changes: list[tuple[str, Any, Any]]
    links: list[TipLink]
    uncovered: list[str]  # changed options no insight addresses
    measured: dict[str, tuple[Any, Any]]
    text: list[str]

    def to_dict(self) -> dict[str, Any]:
        """The transition as plain data (the report's step-by-step section)."""
        return {
            "a": self.a,
            "b": self.b,
            "changes": [{"key": k, "before": x, "after": y} for k, x, y in self.changes],
            "insights": [lk.to_dict() for lk in self.links],
            "uncovered": self.uncovered,
            "measured": {k: {"before": x, "after": y} for k, (x, y) in self.measured.items()},
            "text": self.text,
        }


def _same_way(tip_value: Any, before: Any, after: Any) -> bool:
    if tip_value == after:
        return True
    nums = (int, float)
    if all(isinstance(v, nums) and not isinstance(v, bool) for v in (tip_value, before, after)):
        return (tip_value - before) * (after - before) > 0
    return False


def _links(a: Analysis, tips: list[Insight], key: str, before: Any, after: Any) -> list[TipLink]:
    out = [
        TipLink(key, t, True, n)
        for n, t in enumerate(tips, 1)
        if key in t.change and _same_way(t.change[key], before, after)
    ]
    return out[:1]


def _relaxed_link(a: Analysis, key: str, before: Any, after: Any) -> TipLink | None:
    if a.execution is None:
        return None
    relaxed = Thresholds().with_overrides(_RELAXED)
    for t in find_insights(a, relaxed):
        if (
            t.category == "throughput"
            and key in t.change
            and _same_way(t.change[key], before, after)
        ):
            used = [(n, getattr(Thresholds(), n)) for n in _RELAXED]
            return TipLink(key, t, False, None, _thresholds_of(t.id, used))
    return None


def _thresholds_of(iid: str, used: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The pairs of ``used`` that insight ``iid``'s rule reads (its ``@rule`` declaration: the
    one source of which thresholds a rule compares against)."""
    names = next((r.thresholds for r in all_rules() if iid in r.ids), ())
    return [(n, v) for n, v in used if n in names]


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return {True: "true", False: "false", None: "none"}[v]
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return f'"{v}"' if isinstance(v, str) else str(v)


def _measured(a: Analysis, b: Analysis) -> dict[str, tuple[Any, Any]]:
    ma, mb = a.metrics, b.metrics
    return {
        "oom_tiles": (ma.oom_tiles, mb.oom_tiles),
        "peak_memory_bytes": (ma.peak_memory_bytes, mb.peak_memory_bytes),
        "cycles_per_sample": (ma.cycles_per_sample, mb.cycles_per_sample),
        "throughput_samples_per_s": (ma.throughput_samples_per_s, mb.throughput_samples_per_s),
        "host_wait_share": (ma.host_wait_share, mb.host_wait_share),
    }


def _measured_text(m: dict[str, tuple[Any, Any]]) -> str:
    (oa, ob), (pa, pb) = m["oom_tiles"], m["peak_memory_bytes"]
    (ca, cb), (ta, tb) = m["cycles_per_sample"], m["throughput_samples_per_s"]
    parts = []
    if oa and not ob:
        parts.append(f"now fits (OOM tiles {oa:,} → 0), peak memory {fmt_bytes(pb)}")
    elif ob and not oa:
        parts.append(f"no longer fits ({ob:,} tiles out of memory)")
    else:
        parts.append(f"peak memory {fmt_delta_pct(pa, pb)}")
    if ca and cb:
        parts.append(f"cycles per sample {fmt_delta_pct(ca, cb)}")
        parts.append(f"throughput {fmt_delta_pct(ta, tb)} ({tb:,.1f} samples/s)")
    elif cb:
        parts.append(f"{tb:,.1f} samples/s")
    wa, wb = m["host_wait_share"]
    if wa is not None and wb is not None and abs((wb or 0) - (wa or 0)) >= 0.005:
        parts.append(f"{QUANTITIES['host_wait_share'].label} {fmt_pct(wa)} → {fmt_pct(wb)}")
    return "Measured: " + ", ".join(parts) + "."


def _predicted_text(t: Insight) -> str:
    eff = t.effect
    if eff is None:
        return "not re-simulated"
    return eff.message.rstrip(".")


def explain_transitions(
    analyses: list[Analysis],
    insights: list[list[Insight] | None] | None = None,
    *,
    simulator: Simulator | None = None,
) -> list[Transition]:
    """One :class:`Transition` per consecutive pair of ``analyses``.

    ``insights[i]`` are profile i's ranked insights (found here when missing). Given a
    ``simulator`` (:mod:`analyser.sim`'s) the insights a transition links to get their predicted effect (in place,
    against a re-simulated baseline); only those are re-simulated.
    """
    given = list(insights) if insights is not None else [None] * len(analyses)
    tips = [t if t is not None else find_insights(a) for t, a in zip(given, analyses, strict=False)]
    out: list[Transition] = []
    todo: dict[int, list[Insight]] = {}
    for i in range(len(analyses) - 1):
        a, b = analyses[i], analyses[i + 1]
        changes = [
            (d.key, d.before, d.after) for d in config_diffs(a, b) if d.key not in COSMETIC_KEYS
        ]
        links: list[TipLink] = []
        uncovered: list[str] = []
        for key, x, y in changes:
            found = _links(a, tips[i], key, x, y) or [
                lk for lk in [_relaxed_link(a, key, x, y)] if lk is not None
            ]
            if not found:
                uncovered.append(key)
            for lk in found:
                if lk.insight.id not in {k.insight.id for k in links}:
                    links.append(lk)
                    if lk.insight.change and lk.insight.effect is None:
                        todo.setdefault(i, []).append(lk.insight)
        out.append(Transition(a.name, b.name, changes, links, uncovered, _measured(a, b), []))
    if simulator is not None:
        for i, batch in todo.items():
            predict_effects(analyses[i], batch, simulator)
    for tr in out:
        tr.text = _story(tr)
    return out


def _story(tr: Transition) -> list[str]:
    lines = []
    main = [(k, x, y) for k, x, y in tr.changes if k not in tr.uncovered] or tr.changes
    change = "; ".join(f"{k} {_fmt(x)} → {_fmt(y)}" for k, x, y in main)
    lines.append(f"Change: {change or 'none'}.")
    for lk in tr.links:
        t = lk.insight
        if lk.fired:
            proposed = ", ".join(f"{k} = {_fmt(v)}" for k, v in t.change.items())
            lines.append(
                f"Recommended by insight {lk.position} of {tr.a}, “{t.title}” ({t.id}), which "
                f"proposed {proposed}. Predicted: {_predicted_text(t)}."
            )
        else:
            limits = ", ".join(f"{n} {fmt_pct(v, 0)}" for n, v in lk.thresholds)
            pred = ""
            if t.effect is not None and t.effect.after:
                rel = t.effect.rel("cycles_per_sample")
                small = rel is not None and rel > -0.01
                msg = _predicted_text(t)
                if msg.startswith("little effect"):
                    msg = msg.split(": ", 1)[-1]
                pred = (
                    " Re-simulated anyway, the model predicts "
                    + ("little gain" if small else "a gain")
                    + f": {msg}."
                )
            why = t.evidence[0].text.rstrip(".") if t.evidence else ""
            lines.append(
                f"No insight recommended it: “{t.title}” ({t.id}) stays below its threshold"
                + (f" ({limits})" if limits else "")
                + f": {t.summary.rstrip('.')}."
                + (f" Evidence: {why}." if why else "")
                + pred
            )
    if tr.uncovered and tr.links:
        extra = ", ".join(tr.uncovered)
        lines.append(f"Also changed (no insight addresses it): {extra}.")
    elif tr.uncovered:
        lines.append("No insight addresses this change.")
    lines.append(_measured_text(tr.measured))
    return lines
