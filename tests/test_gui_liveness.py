"""The Liveness Report with "All IPUs" lists every shown IPU's variables
(with an IPU column), in the Live variables, Step and Compare steps tabs; and
what the report shows comes from its Qt-free view-model (analyser.gui.model.liveness)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyser.core.liveness import live_in
from analyser.core.units import MemoryUnits


@pytest.fixture(scope="module")
def two_ipus(synthetic_profile) -> Path:
    return synthetic_profile(
        "two-ipus.h5", n_steps=3000, n_ipus=2, tiles=256, n_programs=200, seed=1, grad_accum=8
    )


@pytest.fixture
def doc(two_ipus):
    from analyser.gui.model.document import Document

    d = Document.open(two_ipus)
    yield d
    d.close()


@pytest.fixture
def shown(qtbot, two_ipus):
    """The Liveness report, shown at 1200 x 800, with the two-IPU profile open."""
    from analyser.gui.model.document import Document
    from analyser.gui.reports.liveness import LivenessReport

    report = LivenessReport()
    qtbot.addWidget(report)
    report.resize(1200, 800)
    report.show()
    doc = Document.open(two_ipus)
    try:
        report.set_document(doc)
        yield report, doc
    finally:
        report.close()
        doc.close()


def test_model_lists_every_shown_ipus_variables(doc):
    from analyser.gui.model import data
    from analyser.gui.model import liveness as lvm

    step = int(data.liveness(doc).peak_step[1])
    every = live_in(data.variables(doc), step, None)
    assert set(every["ipu"]) == {0, 1}  # the case of the issue: both IPUs hold live variables
    table = lvm.live_variables_table([("A", doc, step)], [0, 1], False, compare=False)
    assert sorted(table["name"]) == sorted(every["name"])
    assert set(table["ipu"]) == {0, 1}
    one = lvm.live_variables_table([("A", doc, step)], [1], False, compare=False)
    assert set(one["ipu"]) == {1} and len(one) == (every["ipu"] == 1).sum()
    rows = dict(lvm.step_rows(doc, step, [0, 1], MemoryUnits.BYTES))
    # the program's figures read from its columns alone, then from the whole table: the same
    assert not doc.is_cached("program_nodes")
    data.program_nodes(doc)
    assert dict(lvm.step_rows(doc, step, [0, 1], MemoryUnits.BYTES)) == rows
    assert "Program type" in rows
    lv = data.liveness(doc)
    for ipu in (0, 1):
        assert rows[f"Not-always-live (IPU {ipu})"] == f"{int(lv.not_always_live[ipu, step]):,} B"
    both = lvm.compare_steps_table(doc, step, 0, [0, 1], False)
    assert set(both["ipu"]) == {0, 1}
    assert set(both["live_at"]) <= {"both", f"step {step} only", "step 0 only"}
    at_step = both[both["live_at"] != "step 0 only"]
    assert len(at_step) == len(every)


def test_peak_labels_stack_and_name_both_profiles():
    from analyser.gui.model.liveness import Peak, peak_labels

    peaks = [
        Peak("A", 0, 10, 10, 1000, "fwd"),
        Peak("B", 0, 10, 11, 1000, "fwd"),
        Peak("A", 1, 30, 30, 990, "bwd"),
    ]
    labels = peak_labels(peaks, 1000.0, MemoryUnits.BYTES, compare=True)
    assert len(labels) == 2  # A and B peak at the same position: one label
    assert labels[0].text.startswith("peak A + B IPU 0: A step 10, B step 11 (fwd)")
    assert [lab.level for lab in labels] == [0, 1]  # similar heights stack


@pytest.mark.gui
def test_all_ipus_lists_every_ipus_variables(shown):
    report, doc = shown
    assert report.ipu_combo.currentText() == "All IPUs"
    lv = doc.analysis.liveness
    step = int(lv.peak_step[1])
    report.click_step(step, False)
    model = report.live_table.model
    ipus = {int(model.raw(r, model.column_of("ipu"))) for r in range(model.rowCount())}
    assert ipus == {0, 1}
    assert report.step_tree.value(f"Step {step}", "Not-always-live (IPU 1)")
    report.click_step(0, True)  # shift-click: compare two steps
    cmp = report.compare_table.model
    assert {int(cmp.raw(r, cmp.column_of("ipu"))) for r in range(cmp.rowCount())} == {0, 1}
    report.ipu_combo.setCurrentIndex(2)  # IPU 1 only
    report.click_step(step, False)
    ipus = {int(model.raw(r, model.column_of("ipu"))) for r in range(model.rowCount())}
    assert ipus == {1}


@pytest.mark.gui
def test_peak_labels_sit_above_the_curves_on_the_background(shown):
    """Seen in a real X server: a peak label drawn under the curves had its figures
    crossed by another IPU's lines. Labels are above every curve, on the chart background."""
    from PySide6.QtGui import QColor

    from analyser.gui.theme import chart_colors

    report, _doc = shown
    labels = report.peak_labels
    assert len(labels) == 2  # one per IPU
    items = report.plot.getPlotItem().listDataItems()
    top_curve = max(item.zValue() for item in items)
    background = QColor(chart_colors().background)
    for label in labels:
        assert label.zValue() > top_curve
        fill = label.fill.color()
        assert fill.rgb() == background.rgb() and fill.alpha() > 160


def test_showing_one_ipu_selects_its_own_peak(qtbot, walkthrough_profiles):
    """Liveness on IPU 1 kept IPU 0's peak step selected: showing one IPU selects its peak
    (walkthrough step 2: a pipeline of two stages, whose peaks are at different steps)."""
    from gui_helpers import open_documents, shown_report

    from analyser.gui.model import data
    from analyser.gui.reports.liveness import LivenessReport

    fixture = shown_report(qtbot, LivenessReport())
    report, docs = next(fixture)
    (doc,) = open_documents((report, docs), walkthrough_profiles["2-half"])
    report.ensure_refreshed()
    lv = data.liveness(doc)
    assert int(lv.peak_step[0]) != int(lv.peak_step[1])
    positions = report.positions("A", lv.n_steps)
    for ipu in (0, 1, 0):
        report.ipu_combo.setCurrentIndex(1 + ipu)  # "IPU n"
        assert report.steps == [int(positions[int(lv.peak_step[ipu])])], ipu
    next(fixture, None)
