"""Pipeline view (pytest-qt, offscreen): phases, shares, bottleneck, stash, compare mode."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gui_helpers import open_documents as _open
from gui_helpers import shown_report, write_synthetic_profiles

from analyser.core.quantities import QUANTITIES

pytestmark = pytest.mark.gui


@pytest.fixture(scope="session")
def pipe_paths(tmp_path_factory) -> tuple[Path, Path]:
    return write_synthetic_profiles(
        tmp_path_factory,
        "pipe",
        ((5, 4), (6, 16)),
        n_steps=16_000,
        n_ipus=2,
        tiles=32,
        n_programs=160,
    )


@pytest.fixture
def pipeline(qtbot):
    from analyser.gui.reports.pipeline import PipelineReport

    yield from shown_report(qtbot, PipelineReport(), (1200, 900))


def _check_chart(view, doc) -> None:
    """The view shows the analysis core's numbers for ``doc``."""
    ex = doc.analysis.execution
    c = view.data
    share = ex.phase_share()
    for phase, _a, _b in c.bands:
        if phase == "host" and c.host_wait_share is not None:
            # the host's time before the device: the host-inclusive metric, as the Summary
            expected = QUANTITIES["host_wait_share"].format(doc.analysis.metrics.host_wait_share)
            assert view.band_labels[phase].endswith(expected)
            continue
        assert view.band_labels[phase].endswith(f"{100 * share[phase]:.1f}%")
    assert np.array_equal(c.stage_cycles[: len(ex.stage_cycles)], ex.stage_cycles)
    assert c.bottleneck == int(np.argmax(ex.stage_cycles))
    assert c.imbalance == pytest.approx(ex.stage_imbalance)
    assert f"ramp-up + ramp-down {100 * (share['rampUp'] + share['rampDown']):.1f}%" in (
        view.header.text()
    )
    # one box per stage, micro-batch and pass, each inside the first host call
    assert view.boxes.n_rects == len(c.boxes) > 0
    assert (c.boxes["start"] >= c.t0).all() and (c.boxes["start"] < c.t1).all()


def test_phases_shares_and_bottleneck(qtbot, pipeline, pipe_paths):
    r, _ = pipeline
    (doc,) = _open(pipeline, pipe_paths[0])
    assert r.stack.currentWidget() is r.scroll
    c = r.view_a.data
    assert c.n_stages >= 2
    assert {"rampUp", "main", "rampDown"} <= {b[0] for b in c.bands}
    _check_chart(r.view_a, doc)
    assert f"Bottleneck: stage {c.bottleneck}" in r.view_a.header.text()
    # stash bytes per stage add up to the stash variables of the profile
    v = doc.analysis.src.table("/graph/variables", ["kind", "bytes"])
    from profiles.schema import code

    assert int(c.stash_bytes.sum()) == int(
        v.loc[v["kind"] == code("variable_kind", "stash"), "bytes"].sum()
    )
    assert not r.view_b.isVisible()


def test_compare_mode_table(qtbot, pipeline, pipe_paths):
    r, _ = pipeline
    a, b = _open(pipeline, *pipe_paths)
    assert r.view_b.isVisible() and r.table.isVisible()
    _check_chart(r.view_b, b)
    rows = {r.table.item(i, 0).text(): i for i in range(r.table.rowCount())}
    i = rows["ramp-up share of the run"]
    sa = 100 * a.analysis.execution.phase_share()["rampUp"]
    sb = 100 * b.analysis.execution.phase_share()["rampUp"]
    assert r.table.item(i, 1).text() == f"{sa:.1f}%"
    assert r.table.item(i, 2).text() == f"{sb:.1f}%"
    assert r.table.item(i, 3).text() == f"{sb - sa:+.1f} pts"
    # the run-option difference from the analysis core's comparison is named
    assert r.explain.isVisible() and "gradient_accumulation" in r.explain.text()


def test_walkthrough_pipeline_phases(qtbot, pipeline, walkthrough_profiles):
    """Steps 2-6 are pipelined over 2 IPUs: ramp-up, main and ramp-down are shown with the
    analysis core's shares; more gradient accumulation (step 3) lowers the ramp share."""
    from analyser.gui.reports.pipeline import theoretical_ramp_share

    r, _ = pipeline
    ramps = {}
    for step in ("2-half", "3-accumulate"):
        (doc,) = _open(pipeline, walkthrough_profiles[step])
        c = r.view_a.data
        assert c.n_stages == 2
        assert {"rampUp", "main", "rampDown"} <= {b[0] for b in c.bands}
        _check_chart(r.view_a, doc)
        ramps[step] = c.phase_share["rampUp"] + c.phase_share["rampDown"]
        ga = int(c.run_config["gradient_accumulation"])
        assert theoretical_ramp_share(2, ga) is not None
    assert ramps["3-accumulate"] < ramps["2-half"]
    # device iterations 4 (step 4): the chart is one pipeline run, the first device iteration,
    # not the whole host call (which would stretch every micro-batch box over all four)
    (doc,) = _open(pipeline, walkthrough_profiles["4-device-iterations"])
    c = r.view_a.data
    _check_chart(r.view_a, doc)
    steps = doc.profile.table("/execution/steps", ["iteration", "start", "cycles"])
    first = steps[steps["iteration"] == steps["iteration"].min()]
    assert c.t1 == float((first["start"] + first["cycles"]).max())
    assert c.t1 < 0.5 * doc.analysis.execution.total_cycles
    assert (c.boxes["end"] <= c.t1).all()
    ga = int(c.run_config["gradient_accumulation"])
    fwd = c.boxes[c.boxes["pass_name"] == "forward"]
    assert len(fwd) == 2 * ga  # one forward box per stage and micro-batch
    # bands in time order, without overlaps; the micro-batch numbers do not overprint
    starts = [a for _p, a, _z in c.bands]
    assert starts == sorted(starts)
    assert all(z <= a2 for (_p, _a, z), (_q, a2, _y) in zip(c.bands, c.bands[1:]))
    # the labels one item paints: every box's number is there, drawn where it fits
    labels = r.view_a.box_labels
    assert sorted(labels.texts) == sorted(
        str(m) if m >= 0 else "weight update" for m in c.boxes["micro_batch"]
    )
    r.view_a.chart.grab()
    shown = [(y, x, w) for _t, x, y, w in labels.drawn]
    assert len(shown) >= ga, "the micro-batch numbers fit at the initial zoom"
    vb = r.view_a.chart.getViewBox()
    (x0, x1), _ = vb.viewRange()
    assert len(labels.shown(vb.width() / (x1 - x0))) == len(shown)
    for (ya, xa, wa), (yb, xb, wb) in zip(sorted(shown), sorted(shown)[1:]):
        if ya == yb:  # same stage row: text extents (centred on the boxes) do not overlap
            assert xb - xa >= (wa + wb) / 2
    # zoomed out 50 times, no box is wide enough for its number: none is drawn
    r.view_a.chart.getViewBox().setLimits(xMin=None, xMax=None)
    r.view_a.chart.setXRange(x0, x0 + 50 * (x1 - x0), padding=0)
    r.view_a.chart.grab()
    assert labels.drawn == []
    # the OOM base step has no pipeline to draw
    _open(pipeline, walkthrough_profiles["1-base"])
    assert r.stack.currentWidget() is r.message


def _label_rects(view):
    return [
        (text, item.mapRectToScene(item.boundingRect()))
        for item, _a, _z, text in view.band_items
        if item.isVisible()
    ]


def test_walkthrough_host_wait_axis_labels_and_table(qtbot, pipeline, walkthrough_profiles):
    """Issue 14 defects 2 and 3 on walkthrough steps 3 and 4 compared: the host's time before
    the device (/execution/host) is drawn as a host-wait band and host lanes, not left blank;
    A and B share one cycle axis; no phase label prints on another; the table's host wait is
    the Summary's figure (the core's host-inclusive metric, the catalogue's format); no
    header or row label of the table is cut."""
    from PySide6.QtGui import QFontMetrics

    r, _ = pipeline
    a, b = _open(
        pipeline, walkthrough_profiles["3-accumulate"], walkthrough_profiles["4-device-iterations"]
    )
    for view, doc in ((r.view_a, a), (r.view_b, b)):
        c = view.data
        host = doc.analysis.src.table("/execution/host", ["start"])
        assert c.bands[0][0] == "host"
        assert c.bands[0][1] == float(host["start"].min()) < c.t0
        assert view.host_lanes == ("main",)
        assert view.host_boxes.n_rects == len(host)
        (x0, _x1), _ = view.chart.getViewBox().viewRange()
        assert x0 < c.t0, "the host band is in view before the device's first cycle"
        rects = _label_rects(view)
        assert {t for t, _r in rects} >= {view.band_labels[p] for p in ("host", "rampUp")}
        for i, (t1, r1) in enumerate(rects):
            for t2, r2 in rects[i + 1 :]:
                assert not r1.intersects(r2), (t1, t2)
    # one cycle axis (the x link maps ranges through the views' geometry: equal to rounding)
    assert r.view_a.chart.getViewBox().viewRange()[0] == pytest.approx(
        r.view_b.chart.getViewBox().viewRange()[0], rel=1e-12
    )
    r.view_a.chart.setXRange(1e6, 2e6, padding=0)
    assert r.view_b.chart.getViewBox().viewRange()[0] == pytest.approx([1e6, 2e6])
    # host wait: one source, one format
    q = QUANTITIES["host_wait_share"]
    rows = {r.table.item(i, 0).text(): i for i in range(r.table.rowCount())}
    i = rows[q.title]
    assert r.table.item(i, 1).text() == q.format(a.analysis.metrics.host_wait_share)
    assert r.table.item(i, 2).text() == q.format(b.analysis.metrics.host_wait_share)
    # nothing cut: every header and cell fits its column
    fm = QFontMetrics(r.table.font())
    hfm = QFontMetrics(r.table.horizontalHeader().font())
    for col in range(r.table.columnCount()):
        width = r.table.columnWidth(col)
        head = r.table.horizontalHeaderItem(col).text()
        assert hfm.horizontalAdvance(head) < width, head
        for row in range(r.table.rowCount()):
            assert fm.horizontalAdvance(r.table.item(row, col).text()) < width


def test_phase_labels_use_the_application_font(qtbot, pipeline):
    """Seen in a real X server (issue 23): the phase labels were drawn in a serif face
    (QFont("") resolved by fontconfig), unlike every other label."""
    from PySide6.QtWidgets import QApplication

    r, _ = pipeline
    font = r.view_a._band_font
    assert font.family() == QApplication.font().family()
    assert font.bold()


def test_phase_labels_do_not_overlap_with_a_loader_lane(qtbot, pipeline, walkthrough_profiles):
    """Seen in a real X server (issue 23): with the async loader's lane (step 6) the chart has
    one row more, the label rows (a fixed 0.2 of a lane apart) came closer than a line of text
    and "ramp-up 12.8%" printed over "host wait share (host-inclusive)"."""
    r, _ = pipeline
    r.resize(1380, 800)  # the window's size in the real X server
    _open(pipeline, walkthrough_profiles["2-half"], walkthrough_profiles["6-async"])
    qtbot.wait(50)
    assert r.view_b.host_lanes == ("main", "loader")
    for view in (r.view_a, r.view_b):
        line = view._band_metrics.height()
        # the text's own lines (the items' boxes have padding above and below)
        rects = [
            (t, rect.adjusted(0, (rect.height() - line) / 2, 0, -(rect.height() - line) / 2))
            for t, rect in _label_rects(view)
        ]
        assert {t for t, _r in rects} == set(view.band_labels.values())  # none hidden
        for i, (t1, r1) in enumerate(rects):
            for t2, r2 in rects[i + 1 :]:
                assert not r1.intersects(r2), (t1, t2)
