"""Pipeline view (pytest-qt, offscreen): phases, shares, bottleneck, stash, compare mode."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from gui_helpers import open_documents as _open
from gui_helpers import shown_report, wait_until_idle, write_synthetic_profiles

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


def _drawn_by_item(item) -> np.ndarray:
    """Every rectangle a BatchedRectsItem draws with a solid brush (the hatch is drawn over)."""
    from PySide6.QtCore import Qt

    solid = [r for brush, r in item.groups() if brush.style() == Qt.BrushStyle.SolidPattern]
    return np.concatenate(solid) if solid else np.zeros((0, 4))


def _contains_rows(big: np.ndarray, rows: np.ndarray) -> bool:
    return all(np.isclose(big, row).all(axis=1).any() for row in rows)


def _assert_stacked(*widgets) -> None:
    """``widgets`` lie one under the other in that order, none over the next, each at least
    its minimum height (a height-for-width layout squeezed them over each other once)."""
    for upper, lower in itertools.pairwise(widgets):
        assert upper.geometry().bottom() < lower.geometry().top(), (upper, lower)
    for w in widgets:
        assert w.height() >= w.minimumHeight(), w


def test_compare_mode_grouped_stage_bars(qtbot, pipeline, pipe_paths):
    """Compare mode draws the per-stage bars of A and B in one plot each (four plots in all,
    not six): A left of each stage's centre, B right and hatched, on one y axis covering both,
    each profile's bottleneck marked with its letter; the timelines of A and B are adjacent,
    above the bars. Back to one profile, the bars are A's alone, centred."""
    import pyqtgraph as pg
    from PySide6.QtCore import Qt

    r, _ = pipeline
    a, b = _open(pipeline, *pipe_paths)
    bars = r.bars
    assert len(r.findChildren(pg.PlotWidget)) == 4
    charts = {"A": r.view_a.data, "B": r.view_b.data}
    docs = {"A": a, "B": b}
    assert [p for p, _c in bars.profiles] == ["A", "B"]
    scale, unit = bars.stash_scale
    load_items, stash_items = _drawn_by_item(bars.load_bars), _drawn_by_item(bars.stash_bars)
    for p, c in charts.items():
        wide, narrow, stash = (bars.drawn[(k, p)] for k in ("load", "compute", "stash"))
        assert len(wide) == len(narrow) == len(stash) == c.n_stages
        # the analysis core's busy cycles, compute cycles and stash bytes of each stage
        assert np.allclose(wide[:, 3], c.stage_cycles[: c.n_stages])
        ex = docs[p].analysis.execution
        assert np.allclose(wide[: len(ex.stage_cycles), 3], ex.stage_cycles)
        assert np.allclose(narrow[:, 3], c.stage_compute_cycles[: c.n_stages])
        assert np.allclose(stash[:, 3] * scale, c.stash_bytes[: c.n_stages])
        # A left of the stage's centre, B right of it, side by side without overlapping
        centre = wide[:, 0] + wide[:, 2] / 2
        stages = np.arange(c.n_stages)
        assert (centre < stages).all() if p == "A" else (centre > stages).all()
        assert ((wide[:, 0] >= stages - 0.5) & (wide[:, 0] + wide[:, 2] <= stages + 0.5)).all()
        left_of_centre = wide[:, 0] + wide[:, 2] <= stages + 1e-9
        right_of_centre = wide[:, 0] >= stages - 1e-9
        assert left_of_centre.all() if p == "A" else right_of_centre.all()
        # what the items draw
        assert _contains_rows(load_items, wide) and _contains_rows(load_items, narrow)
        assert _contains_rows(stash_items, stash)
        # the bottleneck marked per profile, on its bar
        mark = bars.marks[p]
        assert mark.isVisible() and mark.textItem.toPlainText() == f"{p}: bottleneck"
        assert mark.pos().x() == c.bottleneck
        assert mark.pos().y() == pytest.approx(float(c.stage_cycles[c.bottleneck]))
    # B is hatched, A is not
    hatched = [
        r_ for brush, r_ in bars.load_bars.groups() if brush.style() == Qt.BrushStyle.BDiagPattern
    ]
    assert len(hatched) == 1 and np.allclose(hatched[0], bars.drawn[("load", "B")])
    assert "A left, B right (hatched)" in bars.load.getPlotItem().titleLabel.text
    assert "A left, B right (hatched)" in bars.stash.getPlotItem().titleLabel.text
    # one y axis per plot covering both profiles' bars
    top = max(float(c.stage_cycles.max()) for c in charts.values())
    (_x0, _x1), (y0, y1) = bars.load.getViewBox().viewRange()
    assert y0 <= 0 and y1 >= top
    peak = max(float(c.stash_bytes.max()) for c in charts.values())
    (_x0, _x1), (y0, y1) = bars.stash.getViewBox().viewRange()
    assert y0 <= 0 and y1 >= peak / scale
    assert bars.stash.getPlotItem().getAxis("left").labelText == unit
    # stage ticks at the stages' centres
    ticks = bars.load.getPlotItem().getAxis("bottom")._tickLevels[0]
    assert ticks == [(s, f"stage {s}") for s in range(max(c.n_stages for c in charts.values()))]
    # chart A, chart B, then the bars, the explanation and the table
    qtbot.waitUntil(lambda: r.view_b.isVisible())
    _assert_stacked(r.view_a, r.view_b, r.bars, r.explain, r.table)
    # one profile again: A's bars alone, centred on the stages, no B mark
    _open(pipeline, pipe_paths[0])
    assert [p for p, _c in bars.profiles] == ["A"] and ("load", "B") not in bars.drawn
    wide = bars.drawn[("load", "A")]
    assert np.allclose(wide[:, 0] + wide[:, 2] / 2, np.arange(len(wide)))
    assert not bars.marks["B"].isVisible()
    assert bars.marks["A"].textItem.toPlainText() == "bottleneck"
    assert "hatched" not in bars.load.getPlotItem().titleLabel.text
    assert not any(
        brush.style() == Qt.BrushStyle.BDiagPattern for brush, _r in bars.load_bars.groups()
    )
    _assert_stacked(r.view_a, r.bars)
    # compared again while shown (a refill of a laid-out body): laid out again, no overlap
    _open(pipeline, *pipe_paths)
    _assert_stacked(r.view_a, r.view_b, r.bars, r.explain, r.table)


def _chart(n_stages: int, cycles, stash):
    from analyser.gui.model.pipeline import PipelineChart

    cycles = np.asarray(cycles, dtype=float)
    return PipelineChart(
        n_stages=n_stages,
        stage_ipu=list(range(n_stages)),
        boxes=None,
        bands=[],
        phase_share={},
        stage_cycles=cycles,
        stage_compute_cycles=cycles / 2,
        bottleneck=int(np.argmax(cycles)),
        imbalance=float(cycles.max() / cycles.mean()),
        stash_bytes=np.asarray(stash, dtype=np.int64),
        t0=0.0,
        t1=1.0,
        run_config={},
    )


def test_stage_bars_with_different_stage_counts(qtbot):
    """A compared with a B of more stages (or one stage, not pipelined): the stages a profile
    lacks have no bars (not an error), the ticks and the x range cover the most stages, and
    only a pipelined profile's bottleneck is marked."""
    from analyser.core.units import MemoryUnits
    from analyser.gui.reports.pipeline_bars import StageBarsView

    view = StageBarsView()
    qtbot.addWidget(view)
    a = _chart(2, [5e6, 9e6], [3 << 20, 0])
    b = _chart(3, [4e6, 4e6, 7e6], [1 << 20, 2 << 20, 0])
    view.show_profiles(a, b, MemoryUnits.KIB)
    assert len(view.drawn[("load", "A")]) == 2 and len(view.drawn[("load", "B")]) == 3
    assert view.load.getPlotItem().getAxis("bottom")._tickLevels[0][-1] == (2, "stage 2")
    (x0, x1), _ = view.load.getViewBox().viewRange()
    assert x0 < 0 - 0.4 and x1 > 2 + 0.4
    assert view.marks["A"].pos().x() == 1 and view.marks["B"].pos().x() == 2
    # one axis: A's 3 MiB peak sets it for both, in MiB (from 1 MiB: it read "3,000 KiB")
    assert view.stash_scale == (1024.0**2, "MiB")
    assert np.allclose(view.drawn[("stash", "B")][:, 3], [1, 2, 0])
    # B of one stage: one bar, not pipelined, no mark
    view.show_profiles(a, _chart(1, [8e6], [1 << 10]), MemoryUnits.BYTES)
    assert len(view.drawn[("load", "B")]) == 1
    assert view.marks["A"].isVisible() and not view.marks["B"].isVisible()
    assert view.stash_scale == (1.0, "bytes")
    assert view.stash.getPlotItem().getAxis("left").labelText == "bytes"


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
    """On walkthrough steps 3 and 4 compared: the host's time before
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
    # A's chart, B's, the per-stage bars, the explanation and the table, none over the next
    _assert_stacked(r.view_a, r.view_b, r.bars, r.explain, r.table)
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


def test_phase_labels_follow_a_pan_when_painted(qtbot, pipeline, pipe_paths):
    """The phase labels are laid out once per paint for the view's final range (the range
    changes and resizes of a fill only mark them stale): a pan into the middle of the main
    band puts its label at the view's new left edge by the next paint."""
    r, _ = pipeline
    _open(pipeline, pipe_paths[0])
    view = r.view_a
    main = next(t for t in view.band_items if t[3] == view.band_labels["main"])
    _label, a, z, _text = main
    middle = (a + z) / 2
    view.chart.setXRange(middle, middle + (z - a), padding=0)
    view.chart.grab()
    (x0, _x1), _ = view.chart.getViewBox().viewRange()
    assert main[0].isVisible() and main[0].pos().x() == pytest.approx(x0)
    assert not view._labels_stale
    # bands wholly left of the view are hidden
    for item, _a, z_, _t in view.band_items:
        if z_ <= x0:
            assert not item.isVisible()


def test_phase_labels_use_the_application_font(qtbot, pipeline):
    """Seen in a real X server: the phase labels were drawn in a serif face
    (QFont("") resolved by fontconfig), unlike every other label."""
    from PySide6.QtWidgets import QApplication

    r, _ = pipeline
    font = r.view_a._band_font
    assert font.family() == QApplication.font().family()
    assert font.bold()


def test_phase_labels_do_not_overlap_with_a_loader_lane(qtbot, pipeline, walkthrough_profiles):
    """Seen in a real X server: with the async loader's lane (step 6) the chart has
    one row more, the label rows (a fixed 0.2 of a lane apart) came closer than a line of text
    and "ramp-up 12.8%" printed over "host wait share (host-inclusive)"."""
    r, _ = pipeline
    r.resize(1380, 800)  # the window's size in the real X server
    with qtbot.waitSignal(r.pathShown, timeout=30_000):  # the paths' text in both headers
        _open(pipeline, walkthrough_profiles["2-half"], walkthrough_profiles["6-async"])
    wait_until_idle(qtbot)  # laid out with it and painted: the labels fitted in the paint
    assert r.view_b.host_lanes == ("main", "loader")
    # with this pair's long explanation the body was once sized shorter than its parts
    _assert_stacked(r.view_a, r.view_b, r.bars, r.explain, r.table)
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
