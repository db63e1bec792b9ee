"""The Summary report's view-model: every tree, the chart and the comparison, built in one go
off the GUI thread from :mod:`.summary`'s rows.

The report (:mod:`analyser.gui.reports.summary`) fills its trees and draws its chart from here
and reads nothing else; see :mod:`.views` for the hand-off. No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyser.core.units import MemoryUnits
from analyser.gui.model import data
from analyser.gui.model import summary as model
from analyser.gui.model.document import Document

#: The Comparison tab's text when the analysis core has no comparison module.
NO_COMPARISON_MODULE = (
    "The analysis core in this build has no comparison module; only the figures are compared."
)


@dataclass(frozen=True)
class TreeView:
    """One tree: its headers, its sections and the tooltip of every column header."""

    headers: tuple[str, ...]
    sections: tuple[model.Section, ...]
    header_tip: str = ""


@dataclass(frozen=True)
class SummaryView:
    """What the Summary shows for A (compared with B when ``compare``)."""

    compare: bool
    #: the figure tree (its headers' tips: :data:`analyser.gui.model.summary.HEADER_TIPS`)
    figures: TreeView
    imbalance: TreeView
    streamcopy: TreeView
    #: cycles by step type per IPU; None when neither profile ran (the tab says so)
    ipus: TreeView | None
    config: TreeView
    #: the chart's bars; None when neither profile ran
    chart: model.CyclesChart | None
    #: the Comparison tab (compare mode): HTML, or plain text when there is no comparison
    explanation_html: str = ""
    explanation_text: str = ""


def build_summary_view(doc: Document, other: Document | None, units: MemoryUnits) -> SummaryView:
    """The Summary view-model of ``doc`` (compared with ``other``) in ``units``."""
    compare = other is not None
    headers, sections = model.figure_sections(doc, other, units)

    def declared_tree(view: tuple, key: str) -> TreeView:
        heads, secs = view
        return TreeView(tuple(heads), tuple(secs), model.table_note(doc, other, key))

    ipu = model.ipu_view(doc, other, units)
    html = text = ""
    if other is not None:
        try:
            html = model.comparison_html(data.comparison(doc, other))
        except ModuleNotFoundError:
            text = NO_COMPARISON_MODULE
    return SummaryView(
        compare=compare,
        figures=TreeView(tuple(headers), tuple(sections)),
        imbalance=declared_tree(model.imbalance_view(doc, other), "imbalance_compute_sets"),
        streamcopy=declared_tree(model.stream_view(doc, other, units), "streamcopy"),
        ipus=None if ipu is None else declared_tree(ipu, "cycles_by_step_type"),
        config=TreeView(
            ("Option", "A", "B") if compare else ("Option", "Value"),
            tuple(model.config_sections(doc, other)),
        ),
        chart=model.cycles_chart(doc, other),
        explanation_html=html,
        explanation_text=text,
    )
