"""The Memory Report's view-model: each profile's per-tile chart for the report's four choices
(the IPU shown, the breakdown, the tile order, the gaps: its view options, as the Operations
report's layer is), its target's size and its tiles out of memory, built in one go off the GUI
thread (:mod:`.memory` shapes the charts; :mod:`.views` hands them over).

A choice changed is a new request: the report builds that view-model there and then (the
choice is taken at once) and a revisit finds it cached. The charts are frozen; the report
picks their colours from the theme. What the report's tabs and the selected tiles' details
show is still asked of :mod:`.memory` when they are shown. No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyser.core.units import MemoryUnits
from analyser.gui.model import data
from analyser.gui.model.document import Document
from analyser.gui.model.memory import TileChart, build_chart


@dataclass(frozen=True)
class MemorySide:
    """One profile: "A" or "B"."""

    tag: str
    name: str
    num_ipus: int
    tiles_per_ipu: int
    #: tiles over their memory (the compared totals' row)
    n_oom_tiles: int
    #: the IPUs its chart shows
    shown_ipus: tuple[int, ...]
    chart: TileChart


@dataclass(frozen=True)
class MemoryView:
    """A (and B, compared with it) for the report's choices."""

    a: MemorySide
    b: MemorySide | None
    #: the IPU selector's entries after "All IPUs" (the larger target's IPUs)
    n_ipus: int
    #: the IPU selector's index the charts show (0: all IPUs; a choice past the IPUs of the
    #: profiles shown falls back to 0)
    ipu_index: int

    def side(self, doc_tag: str) -> MemorySide | None:
        """The side called ``doc_tag`` ("A" / "B"), None when not shown."""
        return self.a if doc_tag == "A" else self.b


def _shown_ipus(ipu_index: int, num_ipus: int) -> tuple[int, ...]:
    if ipu_index <= 0:
        return tuple(range(num_ipus))
    return (ipu_index - 1,) if ipu_index - 1 < num_ipus else ()


def _side(
    tag: str, doc: Document, ipu_index: int, breakdown: str | None, physical: bool, gaps: bool
) -> MemorySide:
    target = data.target(doc)
    ipus = _shown_ipus(ipu_index, int(target.num_ipus))
    return MemorySide(
        tag,
        doc.name,
        int(target.num_ipus),
        int(target.tiles_per_ipu),
        int(data.memory(doc).n_oom_tiles),
        ipus,
        build_chart(doc, ipus, breakdown, physical, gaps),
    )


def build_memory_view(
    doc: Document,
    other: Document | None,
    units: MemoryUnits,
    ipu_index: int = 0,
    breakdown: str | None = "category",
    physical: bool = False,
    gaps: bool = False,
) -> MemoryView:
    """The Memory Report's view-model of ``doc`` (compared with ``other``) for the IPU
    selector's ``ipu_index`` (0: all), the ``breakdown`` (None: one total), the ``physical``
    tile order and the ``gaps`` between blocks; ``units`` unused (the report scales the
    charts) but part of every builder's signature."""
    n = int(data.target(doc).num_ipus)
    if other is not None:
        n = max(n, int(data.target(other).num_ipus))
    index = ipu_index if 0 <= ipu_index <= n else 0
    a = _side("A", doc, index, breakdown, physical, gaps)
    b = None if other is None else _side("B", other, index, breakdown, physical, gaps)
    return MemoryView(a, b, n, index)
