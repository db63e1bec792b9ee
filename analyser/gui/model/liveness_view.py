"""The Liveness Report's view-model: each profile's curves, peaks and step names, and A's and
B's steps aligned by program when comparing, built in one go off the GUI thread (:mod:`.views`
hands it over).

What the chart draws (the IPU shown, always-live included or not) is chosen from it without
another build; the selected step's details (its rows, live variables, vertices, per-tile
cycles) are still asked of :mod:`.liveness` when a step is selected. No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyser.core.units import MemoryUnits
from analyser.gui.model import data
from analyser.gui.model.document import Document

if TYPE_CHECKING:
    from analyser.core.liveness import LivenessSummary, StepAlignment


@dataclass(frozen=True)
class LivenessSide:
    """One profile of the chart: "A" or "B"."""

    tag: str
    name: str
    #: the analysis core's curves per IPU, peaks and step names
    summary: LivenessSummary
    #: IPUs of the profile's target
    num_ipus: int

    @property
    def n_steps(self) -> int:
        return self.summary.n_steps


@dataclass(frozen=True)
class LivenessView:
    """A (and B, compared with it) with, when comparing, their steps aligned by program."""

    a: LivenessSide
    b: LivenessSide | None
    alignment: StepAlignment | None

    def side(self, doc_tag: str) -> LivenessSide | None:
        """The side called ``doc_tag`` ("A" / "B"), None when not shown."""
        return self.a if doc_tag == "A" else self.b

    @property
    def rebuilt_names(self) -> tuple[str, ...]:
        """The profiles whose curve was summed from their variables' lifetimes."""
        return tuple(s.name for s in (self.a, self.b) if s is not None and s.summary.rebuilt)


def _side(tag: str, doc: Document) -> LivenessSide:
    return LivenessSide(tag, doc.name, data.liveness(doc), int(data.target(doc).num_ipus))


def build_liveness_view(doc: Document, other: Document | None, units: MemoryUnits) -> LivenessView:
    """The Liveness view-model of ``doc`` (compared with ``other``); ``units`` unused (the
    report scales the curves) but part of every builder's signature."""
    if other is None:
        return LivenessView(_side("A", doc), None, None)
    return LivenessView(_side("A", doc), _side("B", other), data.liveness_alignment(doc, other))
