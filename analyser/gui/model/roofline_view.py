"""The Roofline report's view-model: everything it paints, built in one go off the GUI thread.

The report (:mod:`analyser.gui.reports.roofline`) draws each profile's points and roofs from
here and reads nothing else; see :mod:`.views` for the hand-off. No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyser.core.units import MemoryUnits
from analyser.gui.model import data
from analyser.gui.model.document import Document
from analyser.gui.model.operations import RooflinePoints, roofline_points


@dataclass(frozen=True)
class RooflineSide:
    """One profile of the chart: A (circles) or B (triangles)."""

    side: str
    name: str
    #: its operations and roofs; None for a profile without execution (nothing drawn)
    points: RooflinePoints | None

    @property
    def header(self) -> str:
        """Its line of the header above the chart."""
        if self.points is None:
            return f"{self.side}: {self.name} has no execution."
        return self.points.text


@dataclass(frozen=True)
class RooflineView:
    """The chart of A, or of A compared with B (``compare``)."""

    sides: tuple[RooflineSide, ...]
    compare: bool

    @property
    def limits(self) -> frozenset[str]:
        """The binding roofs of the points drawn (the legend's entries)."""
        return frozenset(lim for s in self.sides if s.points is not None for lim in s.points.limits)


def build_roofline_view(doc: Document, other: Document | None, units: MemoryUnits) -> RooflineView:
    """The Roofline view-model of ``doc`` (compared with ``other``); ``units`` unused (the
    chart shows FLOPs and bytes per cycle) but part of every builder's signature."""
    compare = other is not None
    sides = []
    for side, d in (("A", doc), ("B", other)):
        if d is None:
            continue
        r = data.roofline(d)
        prefix = f"{side}: {d.name}: " if compare else f"{d.name}: "
        pts = None if r is None else roofline_points(r, prefix)
        sides.append(RooflineSide(side, d.name, pts))
    return RooflineView(tuple(sides), compare)
