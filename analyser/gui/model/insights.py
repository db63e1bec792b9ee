"""The Insights report's way to the analysis core: predictions (re-simulation on the
simulation service), their intervals and the effect's figures, named once here so that
``analyser.gui.reports`` reaches the core only through ``analyser.gui.model`` (an import
contract). No Qt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from analyser.core.insights import ORDER
from analyser.core.insights.model import EFFECT_KEYS, benefit
from analyser.core.intervals import change_note, range_text
from analyser.core.units import fmt_bytes, fmt_pct
from analyser.gui.model import data

if TYPE_CHECKING:
    from analyser.gui.model.document import Document

__all__ = [
    "EFFECT_KEYS",
    "InsightRow",
    "banner_text",
    "cancel_predictions",
    "change_note",
    "gain_text",
    "insight_rows",
    "largest_tables",
    "order_text",
    "predict",
    "range_text",
    "ranking",
    "rerank",
]


@dataclass(frozen=True)
class InsightRow:
    """One row of the Insights list: the tip, where it stands in compare mode ('' alone,
    "both", "resolved": A only, "new": B only), whose it is ("A" / "B") and B's severity when
    both profiles have it (each profile's own)."""

    tip: Any
    where: str
    owner: str
    severity_b: str | None = None

    @property
    def severity_text(self) -> str:
        """'critical', or 'critical → warning' when B's severity differs."""
        s = self.tip.severity
        return s if self.severity_b in (None, s) else f"{s} → {self.severity_b}"


def insight_rows(a: Sequence[Any], b: Sequence[Any] | None) -> list[InsightRow]:
    """The list's rows: A's tips in A's order (marked "both" or "resolved" against B), then
    the tips only B has ("new"), in B's order; A's alone without B."""
    if b is None:
        return [InsightRow(t, "", "A") for t in a]
    ids_a = {t.id for t in a}
    by_id_b = {t.id: t for t in b}
    rows = [
        InsightRow(t, "resolved", "A")
        if t.id not in by_id_b
        else InsightRow(t, "both", "A", by_id_b[t.id].severity)
        for t in a
    ]
    return rows + [InsightRow(t, "new", "B") for t in b if t.id not in ids_a]


#: The Gain column's tooltip: what its figure is (the ranking's benefit).
GAIN_TIP = (
    "Predicted gain: the share of time per sample the tip saves, re-simulated when its effect "
    "is predicted, else the share of the run it addresses (an estimate from the profile)"
)


def gain_text(tip: Any) -> tuple[str, str]:
    """(the Gain column's text, its tooltip): the ranking's predicted benefit of ``tip`` (the
    analysis core's ``benefit``), '' for a tip predicted to go out of memory or to fail."""
    value = benefit(tip)
    if value is None:
        return "", "Predicted not to fit (or refused): no gain"
    eff = tip.effect
    if tip.category == "memory" and (eff is None or not eff.after or value == 0.0):
        # a memory tip saves memory, not time: "0.0%" read as "useless" on the most urgent
        # tips of an out-of-memory profile (seen in the README's screenshot)
        return "", "A memory tip: it frees memory; its gain in time shows once predicted"
    how = "re-simulated" if eff is not None and eff.after else "estimate from the profile"
    return fmt_pct(value), f"{GAIN_TIP}. This one: {how}."


def order_text(doc: Document) -> str:
    """The sentence saying how the list is ordered (the analysis core's ``ORDER``, which
    ``analyse insights`` prints too)."""
    return ORDER["fits" if data.memory(doc).fits else "oom"]


def predict(
    analysis: Any, tips: list, progress: Callable[[int, int, str], None] | None = None
) -> list:
    """Re-simulate ``tips``' changes of ``analysis`` (``analyser.core.insights.
    predict_effects``) on the simulation service's workers (in the background, cancelled by
    :func:`cancel_predictions`); the effects are stored on the tips."""
    from analyser.core.insights import predict_effects
    from analyser.sim.service import get_service
    from analyser.sim.simulators import ServiceSimulator

    return predict_effects(analysis, tips, ServiceSimulator(get_service()), progress=progress)


def cancel_predictions() -> None:
    """Stop the re-simulations running on the simulation service."""
    from analyser.sim.service import get_service

    get_service().cancel_all()


def banner_text(doc: Document, units) -> tuple[str, str]:
    """(state, text) of the fits / OOM banner, from the analysis core's memory summary."""
    mem = data.memory(doc)
    share = fmt_pct(mem.share_used)
    used = fmt_bytes(mem.peak_memory_bytes, units)
    cap = fmt_bytes(mem.capacity_bytes, units)
    if mem.fits:
        return "ok", (
            f"Fits: {share} of memory used ({used} of {cap}); the fullest tile uses "
            f"{fmt_bytes(mem.max_tile_bytes, units)} of {fmt_bytes(mem.sram_per_tile, units)}."
        )
    per_ipu = mem.oom_tiles_per_ipu()
    where = ", ".join(f"IPU {i}: {int(n):,}" for i, n in enumerate(per_ipu) if n)
    return "oom", (
        f"Out of memory: {mem.n_oom_tiles:,} tiles exceed {fmt_bytes(mem.sram_per_tile, units)} "
        f"({where}); {share} of memory used ({used} of {cap})."
    )


#: The document's cache key of its re-rankings (see :func:`ranking`).
_RERANKS = "insights-reranks"


def _reranks() -> list[bool]:
    return []


def ranking(doc: Document) -> int:
    """How many times ``doc``'s insights were re-ranked (:func:`rerank`): part of the Insights
    view-model's request, so a re-ranked profile gets a view-model in its new order."""
    return len(doc.cached(_RERANKS, _reranks))


def rerank(doc: Document) -> None:
    """Re-order ``doc``'s insights by their predicted effects (the analysis core's
    ``rank_insights``) and count the re-ranking (GUI thread: the prediction's result)."""
    data.rerank_insights(doc)
    doc.cached(_RERANKS, _reranks).append(True)


def largest_tables(doc: Document, other: Document | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the largest vertex state, the largest always-live variables) of ``doc`` (and
    ``other``: a "profile" column says whose), read when their tab is first shown."""
    verts, alive = [], []
    for tag, d in [("", doc)] if other is None else [("A", doc), ("B", other)]:
        v = data.largest_vertices(d).copy()
        a = data.largest_always_live(d).copy()
        if tag:
            v["profile"], a["profile"] = tag, tag
        verts.append(v)
        alive.append(a)
    return pd.concat(verts, ignore_index=True), pd.concat(alive, ignore_index=True)
