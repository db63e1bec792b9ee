"""The Execution Trace report's view-model: A's trace window, B's when compared and B ran, and
the analysis core's explained comparison the range summary quotes, built in one go off the GUI
thread (:mod:`.views` hands it over).

A trace window (:class:`analyser.trace.TraceWindow`) is the level-of-detail index the timelines
draw from and query as the view pans and zooms (its own caches fill as it is read, which is
why it is shared, not copied). The differences lane and the critical path are computed in the
background from their own models (:mod:`.diff_lane`, :mod:`analyser.viewmodels.critical_path`).
No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyser.core.units import MemoryUnits
from analyser.gui.model import data
from analyser.gui.model.document import Document

if TYPE_CHECKING:
    from analyser.core.comparison import PairComparison
    from analyser.gui.model.trace import TraceWindow


@dataclass(frozen=True)
class TraceView:
    """What the Execution Trace shows for ``doc`` (and ``other``, compared with it)."""

    name_a: str
    #: None when not comparing
    name_b: str | None
    trace_a: TraceWindow
    #: B's trace when comparing and B ran (else only A's timeline is drawn)
    trace_b: TraceWindow | None
    #: the explained comparison of A with B (when ``trace_b``): the range summary's
    #: explanations
    explained: PairComparison | None


def build_trace_view(doc: Document, other: Document | None, units: MemoryUnits) -> TraceView:
    """The Execution Trace view-model of ``doc`` (compared with ``other``); ``units`` unused
    (the panels format bytes in the report's units) but part of every builder's signature."""
    trace_a = data.trace_window(doc)
    if trace_a is None:
        raise ValueError(f"{doc.name} has no execution trace: it has no execution.")
    trace_b = data.trace_window(other) if other is not None else None
    explained = data.comparison(doc, other) if other is not None and trace_b is not None else None
    return TraceView(doc.name, None if other is None else other.name, trace_a, trace_b, explained)
