"""The Insights report's view-model: each profile's banner, memory summary (the histogram's
bins, the tile memory line) and insights, the top tiles' table and the insight list's rows,
built in one go off the GUI thread (:mod:`.insights` shapes them; :mod:`.views` hands them
over).

The list's order is the order of the insights when the view-model was built. Predicting
effects re-ranks a profile's insights (:func:`.insights.rerank`), which counts the re-ranking
on the document; the count is part of the report's request (its view options), so a re-ranked
profile gets a new view-model and never a cached one in the old order. The largest vertex
state and always-live variables are read when their tab is first shown
(:func:`.insights.largest_tables`). No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from analyser.core.units import MemoryUnits
from analyser.gui.model import data
from analyser.gui.model.document import Document
from analyser.gui.model.insights import InsightRow, banner_text, insight_rows, order_text

if TYPE_CHECKING:
    from analyser.core.memory import MemorySummary


@dataclass(frozen=True)
class InsightsSide:
    """One profile: "" alone, "A" or "B" compared."""

    tag: str
    name: str
    #: the fits / out-of-memory banner: ("ok" | "oom", its sentence in the units)
    banner: tuple[str, str]
    #: the analysis core's memory summary (histogram, SRAM per tile, top tiles, fits)
    memory: MemorySummary
    #: the profile's insights in their order when built
    insights: tuple[Any, ...]


@dataclass(frozen=True)
class InsightsView:
    """A (and B, compared with it): the banners, the histogram, the top tiles and the list."""

    sides: tuple[InsightsSide, ...]
    #: the top tiles of A (and B: a "profile" column says whose)
    top_tiles: pd.DataFrame
    #: how the list is ordered (A's memory fits or not)
    order_text: str
    #: the insight list's rows: A's tips, then those only B has
    rows: tuple[InsightRow, ...]

    @property
    def compare(self) -> bool:
        return len(self.sides) > 1

    @property
    def a(self) -> InsightsSide:
        return self.sides[0]

    @property
    def b(self) -> InsightsSide | None:
        return self.sides[1] if self.compare else None


def _side(tag: str, doc: Document, units: MemoryUnits) -> InsightsSide:
    return InsightsSide(
        tag, doc.name, banner_text(doc, units), data.memory(doc), tuple(data.insights(doc))
    )


def _top_tiles(sides: tuple[InsightsSide, ...]) -> pd.DataFrame:
    rows = []
    for side in sides:
        for t in side.memory.top_tiles:
            row: dict[str, Any] = {"ipu": t.ipu, "tile": t.tile, "bytes": t.bytes, "share": t.share}
            if side.tag:
                row["profile"] = side.tag
            rows.append(row)
    return pd.DataFrame(rows)


def build_insights_view(
    doc: Document,
    other: Document | None,
    units: MemoryUnits,
    ranking_a: int = 0,
    ranking_b: int = 0,
) -> InsightsView:
    """The Insights view-model of ``doc`` (compared with ``other``) in ``units``;
    ``ranking_a`` / ``ranking_b``: how many times each profile's insights were re-ranked
    (:func:`.insights.ranking`: they key the request, the builder reads the insights as
    they are)."""
    if other is None:
        sides: tuple[InsightsSide, ...] = (_side("", doc, units),)
    else:
        sides = (_side("A", doc, units), _side("B", other, units))
    rows = insight_rows(sides[0].insights, sides[1].insights if len(sides) > 1 else None)
    return InsightsView(sides, _top_tiles(sides), order_text(doc), tuple(rows))
