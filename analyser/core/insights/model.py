"""Data model of an insight and of its predicted (re-simulated) effect."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Metrics compared before / after a re-simulation (keys of analyser.core.Metrics).
EFFECT_KEYS: tuple[str, ...] = (
    "peak_memory_bytes",
    "max_tile_memory_bytes",
    "oom_tiles",
    "total_cycles",
    "cycles_per_sample",
    "throughput_samples_per_s",
)
#: The effects the text outputs list (the CLI's and the reports' effect tables).
SHOWN_EFFECTS: tuple[str, ...] = tuple(k for k in EFFECT_KEYS if k != "max_tile_memory_bytes")

SEVERITIES = ("critical", "warning", "info")


@dataclass(frozen=True)
class Evidence:
    """A number read from the profile and where to look at it (report > item)."""

    text: str
    where: str = ""


@dataclass
class Effect:
    """The predicted effect of an insight's change: the re-simulated metrics beside the
    original ones.

    ``status``: ``"fits"`` (re-simulated, fits), ``"oom"`` (re-simulated, does not fit),
    ``"error"`` (the engine refused the changed configuration), ``"unavailable"`` (no engine or
    the profile's run config cannot be re-simulated).
    """

    status: str
    message: str
    before: dict[str, float | None] = field(default_factory=dict)
    after: dict[str, float | None] = field(default_factory=dict)
    #: False when applying the change is not advised (it would cause or keep OOM, or is worse).
    recommended: bool = True
    #: Where ``before`` comes from: ``"resimulated"`` (the profile's own run config re-simulated
    #: by this engine, so the deltas hold the change's effect only) or ``"profile"`` (the
    #: profile's figures, when its configuration could not be re-simulated).
    baseline: str = "profile"
    #: One sentence on the baseline: why it was re-simulated and whether it matches the profile.
    baseline_note: str = ""
    #: How the verdict reads: ``"good"`` (do it), ``"neutral"`` (little effect, still OOM, or a
    #: memory tip that costs throughput) or ``"bad"`` (not recommended).
    tone: str = ""
    #: Per figure (:data:`EFFECT_KEYS`): ``before``, ``after`` and ``change`` intervals, the
    #: calibrated range at its level or why there is none (analyser.core.intervals.Interval.to_dict;
    #: docs/fidelity.md, "Calibrated intervals"). Empty when nothing was re-simulated.
    intervals: dict[str, dict[str, Any]] = field(default_factory=dict)

    def delta(self, key: str) -> float | None:
        """After minus before of figure ``key``; None when either is missing."""
        a, b = self.before.get(key), self.after.get(key)
        return None if a is None or b is None else b - a

    def rel(self, key: str) -> float | None:
        """The relative change of figure ``key``; None when either is missing or before is 0."""
        a, b = self.before.get(key), self.after.get(key)
        if a is None or b is None or a == 0:
            return None
        return (b - a) / abs(a)

    def to_dict(self) -> dict[str, Any]:
        """The effect as plain data, with its deltas."""
        d = asdict(self)
        d["deltas"] = {k: self.delta(k) for k in EFFECT_KEYS}
        return d


@dataclass
class Insight:
    """One finding with its evidence, recommended run-config change, trade-off and effect."""

    id: str
    title: str
    severity: str
    category: str  # "memory" or "throughput"
    summary: str
    evidence: list[Evidence] = field(default_factory=list)
    #: RunConfig field updates (dotted keys for nested fields); empty when no option exists.
    change: dict[str, Any] = field(default_factory=dict)
    trade_off: str = ""
    effect: Effect | None = None
    #: Rank within its category (lower first); memory tips follow the IPU memory guide's order.
    rank: int = 0
    #: Share of the run (0..1) the change can save at most, estimated from the profile; orders
    #: throughput tips that have no re-simulated effect (see analyser.core.insights.rank_insights).
    addresses: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The insight as plain data (the JSON output of ``analyse insights``)."""
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "category": self.category,
            "summary": self.summary,
            "evidence": [asdict(e) for e in self.evidence],
            "change": self.change,
            "trade_off": self.trade_off,
            "effect": self.effect.to_dict() if self.effect else None,
            "addresses": self.addresses,
            "benefit": benefit(self),
        }


def finding(
    title: str,
    severity: str,
    summary: str,
    evidence: list[Evidence] | None = None,
    change: dict[str, Any] | None = None,
    trade_off: str = "",
    *,
    id: str = "",
    addresses: float = 0.0,
) -> Insight:
    """The insight a rule returns: its id and category are stamped from the rule's ``@rule``
    (:meth:`analyser.core.insights.registry.Rule.run`); ``id`` only for a variant the rule
    declares in ``also``; ``addresses``: the share of the run its change can save at most
    (kept within 0 to 1; see :class:`Insight`)."""
    return Insight(
        id,
        title,
        severity,
        "",
        summary,
        list(evidence or []),
        dict(change or {}),
        trade_off,
        addresses=float(min(1.0, max(0.0, addresses))),
    )


def benefit(tip: Insight) -> float | None:
    """Predicted share of time per sample the tip saves (host-inclusive): from its re-simulated
    effect when it has one that fits, else the share of the run it addresses (an estimate from
    the profile). None for a tip re-simulated to an out-of-memory or rejected configuration."""
    eff = tip.effect
    if eff is not None and eff.status in ("oom", "error"):
        return None
    if eff is not None and eff.after:
        # the saving of host-inclusive time per sample (1 / throughput), else of device cycles
        rel = eff.rel("throughput_samples_per_s")
        if rel is not None and rel > -1:
            return rel / (1.0 + rel)
        rel = eff.rel("cycles_per_sample")
        if rel is not None:
            return -rel
    return tip.addresses
