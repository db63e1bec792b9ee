"""The Pipeline report's view-model: A's chart, B's when compared, and the analysis core's
explanation of their difference, built in one go off the GUI thread (:mod:`.pipeline` shapes
the charts; :mod:`.views` hands them over).

The critical paths the report marks come from their own view-model
(:mod:`analyser.viewmodels.critical_path`), computed in the background apart from this one
(seconds for a long run: the chart does not wait for them). No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analyser.core.units import MemoryUnits
from analyser.gui.model import data
from analyser.gui.model.document import Document
from analyser.gui.model.pipeline import PipelineChart


@dataclass(frozen=True)
class PipelineView:
    """What the Pipeline report draws for A (and B, compared with it, when B ran)."""

    name_a: str
    #: None when not comparing
    name_b: str | None
    a: PipelineChart
    #: B's chart when comparing and B ran (else only A is drawn)
    b: PipelineChart | None
    #: the analysis core's explanations of the difference (compared: ``Explanation``s)
    explanations: tuple[Any, ...] = ()
    #: the run options that differ, in words (compared)
    option_changes: str = ""


def build_pipeline_view(doc: Document, other: Document | None, units: MemoryUnits) -> PipelineView:
    """The Pipeline view-model of ``doc`` (compared with ``other``); ``units`` is the stash
    memory's, formatted by the report."""
    a = data.pipeline_chart(doc)
    if a is None:
        raise ValueError(f"{doc.name} has no pipeline chart: it has no execution.")
    b = data.pipeline_chart(other) if other is not None and other.has_execution else None
    if b is None or other is None:
        return PipelineView(doc.name, None if other is None else other.name, a, None)
    comparison = data.comparison(doc, other)
    diffs = [d for d in comparison.config_diffs if d.key != "name"]
    options = ", ".join(f"{d.key} {d.before!r} → {d.after!r}" for d in diffs) or "none"
    return PipelineView(doc.name, other.name, a, b, tuple(comparison.explanations), options)
