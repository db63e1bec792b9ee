"""Places in the reports named by evidence ("Memory Report > IPU 1 tile 221"): which report,
and what in it, so that the Insights report can open the place instead of naming it in plain
text. No Qt.

The analysis core writes an insight's evidence as ``"Report > item"`` (see
:class:`analyser.core.insights.model.Evidence`); the report part is matched to a report key
of the registry by its title (or the names the core uses for it), the item is left to that
report's :meth:`~analyser.gui.reports.base.Report.show_place`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Report names the evidence uses, lower case, to the report keys of the registry.
REPORT_NAMES: dict[str, str] = {
    "summary": "summary",
    "insights": "insights",
    "memory report": "memory",
    "memory": "memory",
    "liveness report": "liveness",
    "liveness": "liveness",
    "program tree": "program_tree",
    "operations": "operations",
    "execution trace": "trace",
    "pipeline": "pipeline",
    "pipeline view": "pipeline",
    "roofline": "roofline",
    "query": "query",
}

_TILE = re.compile(r"^IPU\s+(\d+)\s+tile\s+(\d+)$", re.IGNORECASE)


@dataclass(frozen=True)
class Place:
    """A report (its registry key) and what to show in it (``item``: the text after '>')."""

    report: str
    item: str = ""

    def tile(self) -> tuple[int, int] | None:
        """(IPU, tile) when the item names one tile ("IPU 1 tile 221")."""
        m = _TILE.match(self.item.strip())
        return (int(m.group(1)), int(m.group(2))) if m else None


def place_of(where: str) -> Place | None:
    """The place ``where`` names ("Memory Report > IPU 1 tile 221"), or None when its report
    part names no report."""
    report, _sep, item = where.partition(">")
    key = REPORT_NAMES.get(report.strip().lower())
    return Place(key, item.strip()) if key else None


def tile_place(ipu: int, tile: int) -> Place:
    """The Memory Report's place of one tile."""
    return Place("memory", f"IPU {int(ipu)} tile {int(tile)}")
