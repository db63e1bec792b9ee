"""Execution Trace report (pytest-qt, offscreen): zoom, pan, select, search, level of detail,
compare mode."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gui_helpers import open_documents as _open
from gui_helpers import shown_report, shut_down_trace, wait_until_idle, write_synthetic_profiles
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent, QWheelEvent
from PySide6.QtWidgets import QApplication

from analyser.trace.window import HOST_EVENTS, NT, TraceWindow
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile, write_synthetic_profile

pytestmark = pytest.mark.gui

#: How long a test waits for a paint or a signal: generous, because a full suite beside other
#: work on two cores once took over 3 s for a compare-mode first paint (a wait ends as soon as
#: the signal comes, so this costs nothing when all is well).
WAIT_MS = 20_000


@pytest.fixture(scope="session")
def big_path(tmp_path_factory) -> Path:
    """The 1,000,000-step synthetic profile, written once per test run and shared by the
    trace tests of every worker (tests/shared_files.py)."""
    from shared_files import built_once

    def build(folder: Path) -> None:
        write_synthetic_profile(
            folder / "trace-1m.h5", n_steps=1_000_000, n_ipus=4, tiles=1472, n_programs=5000
        )

    return built_once(tmp_path_factory, "trace-1m", build) / "trace-1m.h5"


@pytest.fixture(scope="session")
def small_paths(tmp_path_factory) -> tuple[Path, Path]:
    return write_synthetic_profiles(
        tmp_path_factory,
        "synthetic",
        ((1, 4), (2, 8)),
        n_steps=20_000,
        n_ipus=2,
        tiles=64,
        n_programs=200,
    )


@pytest.fixture
def report(qtbot):
    from analyser.gui.reports.trace import TraceReport

    yield from shown_report(qtbot, TraceReport(), (1200, 800), before_close=shut_down_trace)


def _click_step(qtbot, timeline, x: float, y: float) -> None:
    vb = timeline.getPlotItem().getViewBox()
    scene = vb.mapViewToScene(QPointF(x, y))
    pos = timeline.mapFromScene(scene)
    qtbot.mouseClick(timeline.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))


def test_level_of_detail_on_a_million_steps(qtbot, report, big_path):
    r, _ = report
    _open(report, big_path)
    tl = r.timeline
    assert tl.trace.step_count() == 1_000_000
    assert tl.n_steps_visible == 1_000_000  # the whole run is in view ...
    width = tl.pixel_width()
    lanes = sum(len(v) for v in tl.ipu_lanes.values())
    # ... drawn with rectangles bounded by pixels x types x lanes, not by steps
    assert 0 < tl.n_rects <= (width + 3) * NT * lanes
    assert tl.n_rects < 1_000_000 / 20
    tl.grab()  # paint: one drawRects call per step type present
    assert 0 < tl.items.draw_calls <= len(tl.items._groups) <= NT
    for group in ("stage", "operation", "program"):
        r.group_combo.setCurrentIndex(r.group_combo.findData(group))
        lanes = sum(len(v) for v in tl.ipu_lanes.values())
        assert lanes >= tl.trace.n_ipus
        assert tl.n_rects <= (width + 3) * NT * lanes
    # many lanes: they scroll vertically and only the IPUs in view are read
    assert tl.n_lanes > tl.visible_lanes()
    assert tl.scrollbar.isVisible()
    assert 0 < len(tl.results) < tl.trace.n_ipus
    last_ipu = tl.trace.n_ipus - 1
    assert last_ipu not in tl.results
    lo, hi = tl.trace.access.ipu_rows(last_ipu)
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        tl.select_row(lo + (hi - lo) // 2)  # a step of the last IPU: the view scrolls to it
    assert last_ipu in tl.results
    r.group_combo.setCurrentIndex(0)


def test_zoom_and_pan_with_keyboard_and_wheel(qtbot, report, small_paths):
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    t0, t1 = tl.x_range()
    tl.setFocus()
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(tl, Qt.Key.Key_W)
    z0, z1 = tl.x_range()
    assert z1 - z0 == pytest.approx((t1 - t0) / 1.6, rel=1e-3)
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(tl, Qt.Key.Key_D)
    p0, p1 = tl.x_range()
    assert p0 > z0 and p1 - p0 == pytest.approx(z1 - z0, rel=1e-6)
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(tl, Qt.Key.Key_A)
    assert tl.x_range()[0] == pytest.approx(z0, rel=1e-6, abs=1.0)
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(tl, Qt.Key.Key_S)
    # the mouse wheel zooms the cycle axis only, around the cursor
    before = tl.x_range()
    y_before = tl.y_range()
    vb = tl.getPlotItem().getViewBox()
    c = vb.viewRect().center()
    at = tl.mapFromScene(vb.mapViewToScene(c))
    wheel = QWheelEvent(
        QPointF(at),
        QPointF(tl.viewport().mapToGlobal(at)),
        QPoint(0, 0),
        QPoint(0, 120),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        QApplication.sendEvent(tl.viewport(), wheel)
    after = tl.x_range()
    assert after[1] - after[0] < 0.95 * (before[1] - before[0])
    assert after[0] < c.x() < after[1]
    assert tl.y_range() == pytest.approx(y_before)
    # dragging with the left button pans (the window keeps its width)
    before = tl.x_range()
    start = QPointF(at)
    end = QPointF(at.x() - 200, at.y())
    vp = tl.viewport()
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        for kind, pos, button, buttons in (
            (QEvent.Type.MouseButtonPress, start, left, left),
            (QEvent.Type.MouseMove, (start + end) / 2, none, left),
            (QEvent.Type.MouseMove, end, none, left),
            (QEvent.Type.MouseButtonRelease, end, left, none),
        ):
            ev = QMouseEvent(
                kind, pos, vp.mapToGlobal(pos), button, buttons, Qt.KeyboardModifier.NoModifier
            )
            QApplication.sendEvent(vp, ev)
    after = tl.x_range()
    assert after[0] > before[0]
    assert after[1] - after[0] == pytest.approx(before[1] - before[0], rel=1e-6)
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(tl, Qt.Key.Key_Home)
    h0, h1 = tl.x_range()
    full = tl.full_range()
    assert h0 <= full[0] and h1 >= full[1]
    # zoomed in far enough, rows are read and every visible step is drawn
    mid = (full[0] + full[1]) / 2
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        tl.set_x_range(mid, mid + (full[1] - full[0]) / 2000)
    assert all(res.source == "rows" for res in tl.results.values())
    # how the view is drawn is in the read-out's tooltip, not its text ("10,873 rects
    # (level 1)" in the header said nothing to a user)
    assert "rows" in r.status.toolTip() and "rect" not in r.status.full_text()


def _redrawn_after(qtbot, tl, action) -> None:
    """Run ``action`` and wait until the timeline has redrawn since (state, not a signal caught
    in a window of time: robust when the machine is loaded)."""
    before = tl.redraw_count
    action()
    qtbot.waitUntil(lambda: tl.redraw_count > before, timeout=15_000)


def test_click_selects_a_step_and_shows_its_details(qtbot, report, small_paths):
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    tw: TraceWindow = tl.trace
    # the whole-run summary reads rows in the background: let it finish so that the clicks
    # below do not compete with it (they would still work, only more slowly)
    assert r.wait_for_summary(30_000)
    # zoom on a known step of IPU 1 and click its middle
    lo, hi = tw.access.ipu_rows(1)
    row = lo + (hi - lo) // 2
    d = tw.step_details(row)
    span = max(d["cycles"] * 4, 50)
    _redrawn_after(qtbot, tl, lambda: tl.set_x_range(d["start"] - span / 2, d["start"] + span / 2))
    y = tl.ipu_base[1] + 0.5
    _click_step(qtbot, tl, d["start"] + d["cycles"] / 2, y)
    qtbot.waitUntil(lambda: tl.selected_row == row, timeout=15_000)
    assert r.details.details["name"] == d["name"]
    assert r.details.details["start"] == d["start"]
    assert r.tabs.currentWidget() is r.details
    assert tl.highlight.isVisible()
    xs, _ = r.details.curve.getData()
    assert len(xs) == tw.tile_cycles_of_step(row).size + 1
    # double-click fits the view to the step
    _redrawn_after(qtbot, tl, lambda: tl.zoom(0.05))  # far out first
    vb = tl.getPlotItem().getViewBox()
    pos = tl.mapFromScene(vb.mapViewToScene(QPointF(d["start"] + d["cycles"] / 2, y)))
    at = QPoint(pos.x(), pos.y())

    def double_click() -> None:
        qtbot.mouseClick(tl.viewport(), Qt.MouseButton.LeftButton, pos=at)
        qtbot.mouseDClick(tl.viewport(), Qt.MouseButton.LeftButton, pos=at)
        qtbot.mouseRelease(tl.viewport(), Qt.MouseButton.LeftButton, pos=at)  # as a real one

    def fitted() -> bool:
        a, b = tl.x_range()
        return a < d["start"] and d["end"] < b and b - a <= max(d["cycles"] * 1.5, 200)

    _redrawn_after(qtbot, tl, double_click)
    qtbot.waitUntil(fitted, timeout=15_000)
    # hovering names the step; zoomed out, it counts the steps under the cursor instead
    assert tl.describe_at(d["start"] + d["cycles"] / 2, y).startswith(f"{d['type']}: {d['name']}")
    _redrawn_after(qtbot, tl, tl.reset_zoom)
    assert "steps around cycle" in tl.describe_at(d["start"], y)


def test_search_finds_steps_across_the_whole_trace(qtbot, report, small_paths):
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    tw = tl.trace
    # zoom into the very start so the match at the end of IPU 1 is not visible
    full = tl.full_range()
    tl.set_x_range(full[0], full[0] + (full[1] - full[0]) / 1000)
    last_row = tw.step_count() - 1
    name = tw.step_details(last_row)["name"]
    r.tabs.setCurrentWidget(r.search)
    with qtbot.waitSignal(tl.stepSelected, timeout=WAIT_MS):
        res = r.search.run(name.lower())
    assert res.total == tw.search(name).total > 0
    assert r.search.table.rowCount() == len(res.rows)
    assert f"{res.total:,} steps match" in r.search.status.text()
    # step through to the last hit: the view moves there and selects it
    target = int(res.rows[-1])
    with qtbot.waitSignal(tl.stepSelected, timeout=WAIT_MS) as sig:
        r.search.step(-1)  # wraps to the last hit
    assert sig.args == [target]
    d = tw.step_details(target)
    a, b = tl.x_range()
    assert a <= d["start"] <= b
    r.search.run("zz-no-such-step")
    assert "no step has that name" in r.search.status.text()


def test_range_summary_and_bsp_follow_the_view(qtbot, report, small_paths):
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    full = tl.full_range()
    t0 = full[0] + (full[1] - full[0]) * 0.4
    t1 = t0 + (full[1] - full[0]) / 300
    tl.set_x_range(t0, t1)
    r.tabs.setCurrentWidget(r.bsp)
    qtbot.waitUntil(lambda: r.bsp.states is not None and r.bsp.states.t0 == tl.x_range()[0])
    with qtbot.waitSignal(r.summaryReady, timeout=10_000):
        r.update_details()  # the summary is computed in the background ...
        # ... and says so meanwhile (the previous figures greyed, never an unexplained blank)
        assert r.summary.header.text().startswith("Summarising")
        assert not r.summary.table.isEnabled()
    assert r.summary.header.text().startswith("Visible range")
    assert r.summary.table.isEnabled() and r.summary.table.rowCount() > 0
    a, b = tl.x_range()
    want = [tl.trace.range_summary(i, a, b) for i in range(tl.trace.n_ipus)]
    total = sum(s.cycles_by_type.get("OnTileExecute", 0) for s in want)
    assert r.summary.value("OnTileExecute") == f"{total:,}"
    assert r.bsp.states.tile_edges[-1] - r.bsp.states.tile_edges[0] == 64
    assert r.bsp.image.image is not None
    # a cycle sits at the same x (window pixels) in the timeline and in the BSP view below it
    from PySide6.QtCore import QPointF

    def x_in_report(plot_widget, t):
        vb = plot_widget.getPlotItem().getViewBox()
        pos = plot_widget.mapFromScene(vb.mapViewToScene(QPointF(t, 0)))
        return plot_widget.mapTo(r, pos).x()

    for t in (a, (a + b) / 2, b):
        assert abs(x_in_report(tl, t) - x_in_report(r.bsp.plot, t)) <= 2


def test_compare_mode_shows_both_runs_with_deltas(qtbot, report, small_paths):
    r, _ = report
    a, _b = _open(report, *small_paths)
    assert r.timeline_b.isVisible() and r.timeline_b.trace is not None
    # the range summary follows the first paint
    qtbot.waitUntil(
        lambda: r.summary.table.horizontalHeaderItem(1).text() == f"A: {a.name}", timeout=WAIT_MS
    )
    assert r.summary.table.columnCount() == 4
    # the two timelines share the cycle axis
    with qtbot.waitSignal(r.timeline_b.redrawn, timeout=WAIT_MS):
        r.timeline.zoom(3.0)
    assert r.timeline_b.x_range() == pytest.approx(r.timeline.x_range())
    with qtbot.waitSignal(r.summaryReady, timeout=10_000):
        r.update_details()
    t0, t1 = r.timeline.x_range()
    ca = sum(
        s.busy_cycles for s in (r.trace.range_summary(i, t0, t1) for i in range(r.trace.n_ipus))
    )
    cb = sum(
        s.busy_cycles for s in (r.trace_b.range_summary(i, t0, t1) for i in range(r.trace_b.n_ipus))
    )
    assert r.summary.value("busy cycles (all IPUs)", 1) == f"{ca:,}"
    assert r.summary.value("busy cycles (all IPUs)", 2) == f"{cb:,}"
    delta = r.summary.value("busy cycles (all IPUs)", 3)
    assert delta.startswith(f"{cb - ca:+,}")
    # the A / B / B - A figures keep their width beside the statistics (they were squeezed to
    # their first letters behind a scroll bar in a 1400-pixel window)
    r.window().resize(1400, 880)
    wait_until_idle(qtbot)  # laid out at the new size
    table = r.summary.table
    header = table.horizontalHeader()
    widths = sum(header.sectionSize(c) for c in range(table.columnCount()))
    assert table.width() >= min(widths, 760)


def test_compare_read_out_past_the_end_of_a_run_names_no_negative_range(qtbot, report, small_paths):
    """In compare mode the header's figures are A's; a view past the end of A's run (B's
    longer run panned to its end) says so instead of a range whose start is after its end."""
    r, _ = report
    _open(report, *small_paths)
    lo, hi = r.timeline.full_range()
    r.timeline.windowChanged.emit(hi + 10.0, hi + 500.0)
    # the label may elide a long header; its tooltip holds the whole text first
    text = r.status.toolTip().split("\n")[0]
    assert text.startswith("A: no cycles of the run in view")
    assert f"after its end at {hi:,.0f}" in text
    r.timeline.windowChanged.emit(lo - 500.0, lo - 10.0)
    assert f"before its start at {lo:,.0f}" in r.status.toolTip()
    # a view that overlaps the run reads the overlap, start before end
    r.timeline.windowChanged.emit(lo, (lo + hi) / 2)
    a_text, b_text = r.status.toolTip().removeprefix("A: ").split(" cycles")[0].split(" – ")
    assert float(a_text.replace(",", "")) < float(b_text.replace(",", ""))


def test_oom_profile_shows_a_message(qtbot, report, tmp_path):
    r, _ = report
    path = tmp_path / "oom.h5"
    write_profile(path, make_synthetic_profile(n_steps=0, n_ipus=1, tiles=16, oom=True))
    _open(report, path)
    assert r.stack.currentWidget() is r.message
    assert "no execution trace" in r.message.label.text()


def test_compare_mode_on_walkthrough_steps_4_and_5(qtbot, report, walkthrough_profiles):
    """DI 4 -> 8-bit input: the trace shows both runs and the StreamCopy bytes received by IPU 0
    over the whole run halve exactly."""
    r, _ = report
    _open(report, walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"])
    assert r.timeline_b.isVisible()
    r.timeline.reset_zoom()  # both runs: drawn by the fill already, so no redraw is scheduled
    qtbot.waitUntil(lambda: not r.timeline._timer.isActive(), timeout=WAIT_MS)
    lo = min(r.timeline.full_range()[0], r.timeline_b.full_range()[0])
    hi = max(r.timeline.full_range()[1], r.timeline_b.full_range()[1])
    r.timeline.set_x_range(lo, hi + 1)
    with qtbot.waitSignal(r.summaryReady, timeout=10_000):
        r.update_details()
    sa = r.trace.range_summary(0, lo, hi + 1)
    sb = r.trace_b.range_summary(0, lo, hi + 1)
    rx_a = sa.streamcopy["received"].get("host", 0)
    rx_b = sb.streamcopy["received"].get("host", 0)
    assert rx_a > 0
    text_a = r.summary.value("IPU 0 StreamCopy received · host", 1)
    text_b = r.summary.value("IPU 0 StreamCopy received · host", 2)
    assert text_a and text_b and text_a != text_b
    assert rx_b * 2 == rx_a  # uint8 instead of float16 input: exactly half the bytes
    r.timeline.grab()
    assert r.timeline.items.draw_calls > 0 and r.timeline_b.n_rects > 0
    # the analysis core's explanation of the difference is shown with the figures
    assert r.summary.explain.isVisible()
    assert "eight_bit_input" in r.summary.explain.text()
    assert any(e.metric == "streamcopy_rx_bytes" for e in r.summary.explanations)


def test_in_the_main_window_documents_can_change_under_the_trace(qtbot, tmp_path, small_paths):
    """Open, compare and close profiles while the trace is shown: no exception in the event loop
    (pytest-qt fails the test on one), the views follow the workspace."""
    from PySide6.QtCore import QSettings

    from analyser.gui.main_window import MainWindow

    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    a, b = small_paths
    with qtbot.waitSignal(w.loadFinished, timeout=60_000):
        w.open_files([a])
    trace = w.show_report("trace")
    qtbot.waitUntil(lambda: trace.trace is not None and trace.timeline.n_rects > 0)
    trace.timeline.zoom(4.0)
    with qtbot.waitSignal(w.loadFinished, timeout=60_000):
        w.compare_with(b)
    qtbot.waitUntil(lambda: trace.trace_b is not None and trace.timeline_b.isVisible())
    assert trace.compare_doc.path == b
    pipeline = w.show_report("pipeline")
    qtbot.waitUntil(lambda: pipeline.view_b.isVisible())
    w.show_report("trace")
    with qtbot.waitSignal(w.loadFinished, timeout=60_000):
        w.open_files([b])
    qtbot.waitUntil(lambda: trace.trace_b is None and trace.document.path == b)
    w.close_document()
    qtbot.waitUntil(lambda: trace.stack.currentWidget() is trace.message)
    w.shutdown()
    w.pool.waitForDone(30_000)


def test_cycle_axis_reads_in_units_not_scientific_notation(qtbot, report, small_paths):
    from analyser.gui.axes import format_cycles, short_cycles

    assert format_cycles([0, 5e7, 1e8, 1.5e8], 5e7) == ["0", "50M", "100M", "150M"]
    assert format_cycles([1e9, 1.25e9], 2.5e8) == ["1.00G", "1.25G"]
    assert format_cycles([2000, 2500], 500) == ["2.0k", "2.5k"]
    # zoomed in far from zero, ticks are exact counts
    assert format_cycles([120_000_000, 120_000_020], 20) == ["120,000,000", "120,000,020"]
    assert short_cycles(244_769_168) == "245M" and short_cycles(980) == "980"
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    axis = tl.getPlotItem().getAxis("bottom")
    (x0, x1), _ = tl.getPlotItem().getViewBox().viewRange()
    assert x0 >= tl.full_range()[0] - 1  # the whole run starts at its first cycle
    for spacing, values in axis.tickValues(x0, x1, tl.pixel_width()):
        for text in axis.tickStrings(values, 1.0, spacing):
            assert "e+" not in text and "e-" not in text


def test_trace_keys_from_the_view_box_and_zoom_about_the_cursor(qtbot, report, small_paths):
    """After choosing a grouping in the View box (which keeps the focus),
    Home shows the whole run instead of putting the box back to Flat, W / S zoom the timeline;
    W / S zoom about the cursor, as the wheel does."""
    from PySide6.QtGui import QCursor

    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    combo = r.group_combo
    combo.setFocus()
    combo.setCurrentIndex(combo.findData("operation"))
    full = tl.x_range()
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(combo, Qt.Key.Key_W)
    assert combo.currentData() == "operation"
    assert tl.x_range()[1] - tl.x_range()[0] < (full[1] - full[0]) * 0.7
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(combo, Qt.Key.Key_Home)
    assert combo.currentData() == "operation"
    assert tl.x_range() == pytest.approx(full)
    # the cursor a fifth of the way across the plot: the cycle under it stays under it
    vb = tl.getPlotItem().getViewBox()
    rect = vb.viewRect()
    x = rect.left() + rect.width() * 0.2
    at = tl.viewport().mapToGlobal(
        tl.mapFromScene(vb.mapViewToScene(QPointF(x, rect.center().y())))
    )
    QCursor.setPos(at)
    assert tl.cursor_cycle() == pytest.approx(x, rel=0.02)
    tl.setFocus()
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(tl, Qt.Key.Key_W)
    z0, z1 = tl.x_range()
    assert z1 - z0 == pytest.approx((full[1] - full[0]) / 1.6, rel=1e-3)
    assert (x - z0) / (z1 - z0) == pytest.approx((x - full[0]) / (full[1] - full[0]), abs=0.02)
    # panning stops at the run's first cycle (defect 6: it went before cycle 0)
    for _ in range(8):
        qtbot.keyClick(tl, Qt.Key.Key_A)
    qtbot.waitUntil(lambda: tl.x_range()[0] <= full[0] + 1, timeout=WAIT_MS)
    assert tl.x_range()[0] >= tl.trace.full_extent()[0] - 1e-6


# -- the host lanes (profile format 1.2, /execution/host) ------------------------------------------
@pytest.fixture(scope="module")
def host_paths(tmp_path_factory) -> dict[str, Path]:
    """A tiny engine-written mlp run with a sync and an async loader, and the sync one with its
    /execution/host removed (a profile without a host timeline)."""
    import shutil

    import h5py

    import engine
    from engine.config import RunConfig

    out = tmp_path_factory.mktemp("gui-host")
    paths = {}
    for mode in ("sync", "async"):
        paths[mode] = out / f"{mode}.h5"
        cfg = RunConfig(model="mlp", micro_batch_size=8, gradient_accumulation=2, loader_mode=mode)
        engine.simulate_to_file(cfg, paths[mode])
    paths["none"] = out / "none.h5"
    shutil.copy(paths["sync"], paths["none"])
    with h5py.File(paths["none"], "a") as f:
        del f["execution/host"]
    return paths


def _host_rects(tl) -> dict[str, np.ndarray]:
    """The host lane's drawn rectangles per event kind (x, y, width, height), by x."""
    from analyser.gui.palette import qcolor

    out = {}
    for brush, prim in tl.host_items._groups:
        kind = next(k for k in HOST_EVENTS if qcolor("host_events", k) == brush.color())
        rects = np.array(prim.ndarray(), dtype=np.float64)
        out[kind] = rects[np.argsort(rects[:, 0])]
    return out


def test_host_lane_is_drawn_selectable_and_reaches_before_cycle_0(qtbot, report, host_paths):
    r, _ = report
    _open(report, host_paths["sync"])
    tl = r.timeline
    host = tl.trace.host_lane()
    assert len(host) and set(host["lane"]) == {"main"}  # sync: the main process prepares
    assert tl.host_lanes == ("main",)
    assert (tl.host_base + 0.5, "Host · main") in tl.lane_axis._labels
    # one rectangle per host event, in its kind's colour, at its start and length, in its lane
    drawn = _host_rects(tl)
    assert set(drawn) == set(host["kind"])
    for kind, rects in drawn.items():
        rows = host.take(host["kind"] == kind)
        rows = rows.take(np.argsort(rows["start"], kind="stable"))
        np.testing.assert_array_equal(rects[:, 0], rows["start"])
        np.testing.assert_array_equal(rects[:, 2], rows["end"] - rows["start"])
        assert ((rects[:, 1] > tl.host_base) & (rects[:, 1] + rects[:, 3] < tl.n_lanes)).all()
    assert "Host:" in r.legend.text() and all(k in r.legend.text() for k in drawn)
    # the preparation before the call is reachable: the view may pan back to its start
    first = int(host["start"].min())
    assert first < 0
    vb = tl.getPlotItem().getViewBox()
    assert vb.state["limits"]["xLimits"][0] == pytest.approx(first)
    assert tl.x_range()[0] >= 0  # Home still shows the device run
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        tl.set_x_range(first, 0)
    assert tl.x_range()[0] == pytest.approx(first, abs=1)
    # clicking the prepare event selects it and the details name its fields
    i = int(np.flatnonzero(host["kind"] == "prepare")[0])
    row = host.row(i)
    _click_step(qtbot, tl, (row["start"] + row["end"]) / 2, tl.host_base + 0.5)
    assert tl.selected_host == i and tl.selected_row is None
    d = r.details.details
    assert (d["kind"], d["lane"], d["start"]) == ("prepare", "host main", row["start"])
    assert d["cycles"] == row["end"] - row["start"] and d["samples"] == row["samples"] > 0
    assert r.tabs.currentWidget() is r.details
    # an async loader prepares in its own lane beside the device
    _open(report, host_paths["async"])
    assert r.timeline.host_lanes == ("main", "loader")
    assert set(_host_rects(r.timeline)) == set(r.timeline.trace.host_lane()["kind"])


def test_no_host_lane_without_a_host_timeline(qtbot, report, host_paths):
    r, _ = report
    _open(report, host_paths["none"])
    tl = r.timeline
    assert tl.trace.host_lane().empty
    assert tl.host_lanes == () and tl.host_items.n_rects == 0
    assert not any("Host" in text for _y, text in tl.lane_axis._labels)
    assert "Host:" not in r.legend.text()
    # the run starts at its first cycle: no panning before it
    vb = tl.getPlotItem().getViewBox()
    assert vb.state["limits"]["xLimits"][0] == pytest.approx(tl.full_range()[0])


def _drag(qtbot, widget, start: QPointF, end: QPointF, modifiers=Qt.KeyboardModifier.NoModifier):
    """A left-button drag from ``start`` to ``end`` (viewport pixels) as real mouse events."""
    vp = widget.viewport()
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    for kind, pos, button, buttons in (
        (QEvent.Type.MouseButtonPress, start, left, left),
        (QEvent.Type.MouseMove, (start + end) / 2, none, left),
        (QEvent.Type.MouseMove, end, none, left),
        (QEvent.Type.MouseButtonRelease, end, left, none),
    ):
        ev = QMouseEvent(kind, pos, vp.mapToGlobal(pos), button, buttons, modifiers)
        QApplication.sendEvent(vp, ev)


def _view_x(tl, t: float, y: float | None = None) -> QPointF:
    """Viewport pixel of cycle ``t`` (at lane height ``y``, default the middle of the view)."""
    vb = tl.getPlotItem().getViewBox()
    y = sum(tl.y_range()) / 2 if y is None else y
    return QPointF(tl.mapFromScene(vb.mapViewToScene(QPointF(t, y))))


def test_step_names_are_drawn_inside_slices_that_fit(qtbot, report, small_paths):
    """Perfetto's slice titles: a single step wide enough gets its name (elided to fit), a
    narrow one none, and a zoomed-out run is not covered with text."""
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    tl.grab()  # paint
    full = tl.full_range()
    # zoomed out, a pixel holds many steps: no aggregate is labelled
    assert len(tl.labels.drawn) <= sum(len(v) for v in tl.ipu_lanes.values()) * 5
    row = int(np.argmax(tl.trace.access.read(0, 5000, ("cycles",))["cycles"]))
    d = tl.trace.step_details(row)
    # the names of steps in row blocks not read yet come once the view rests (read in the
    # background, then redrawn): the pan / zoom itself never waits for them
    assert not tl.trace.access.is_cached("program", row)
    with qtbot.waitSignal(tl.namesReady, timeout=15_000):
        tl.set_x_range(d["start"] - d["cycles"], d["end"] + d["cycles"])
        tl.redraw()
        assert not len(tl.labels._texts)
    assert tl.trace.access.is_cached("program", row)
    tl.grab()
    assert tl.labels.drawn, "a step a third of the view wide shows its name"
    names = set(tl.trace.programs["name"].astype(str))
    for text in tl.labels.drawn:
        stem = text.removesuffix("…")
        assert any(n.startswith(stem) for n in names), text
    assert d["name"] in tl.labels.drawn or any(
        t.endswith("…") and d["name"].startswith(t[:-1]) for t in tl.labels.drawn
    )
    # a name is drawn only where it has MIN_PX pixels of the step in view, and only steps
    # that wide in all are considered
    from analyser.gui.items import SliceLabelsItem

    assert min(tl.labels.drawn_px) >= SliceLabelsItem.MIN_PX
    x0, x1 = tl.x_range()
    px = tl.pixel_width() / (x1 - x0)
    assert (tl.labels._rects[:, 2] * px >= SliceLabelsItem.MIN_PX - 1e-6).all()
    # the names follow the zoom: out again, fewer names
    _redrawn_after(qtbot, tl, lambda: tl.set_x_range(*full))
    tl.grab()
    assert len(tl.labels.drawn) < 200


def test_drag_on_the_time_axis_selects_a_range_with_statistics(qtbot, report, small_paths):
    """Perfetto's area selection: a drag on the time axis (or Shift + drag over the lanes)
    selects cycles, shown as a band with its duration; the summary tab becomes the selected
    range's, with its steps by name or operation (sortable); F fits it; Esc clears it."""
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    x0, x1 = tl.x_range()
    axis = tl.getPlotItem().getAxis("bottom")
    ay = tl.mapFromScene(axis.sceneBoundingRect().center()).y()
    a, b = x0 + (x1 - x0) * 0.2, x0 + (x1 - x0) * 0.45
    pa, pb = _view_x(tl, a), _view_x(tl, b)
    with qtbot.waitSignal(tl.rangeSelected, timeout=WAIT_MS) as sig:
        _drag(qtbot, tl, QPointF(pa.x(), ay), QPointF(pb.x(), ay))
    t0, t1 = sig.args
    px = (x1 - x0) / tl.pixel_width()
    assert t0 == pytest.approx(a, abs=3 * px) and t1 == pytest.approx(b, abs=3 * px)
    assert tl.x_range() == pytest.approx((x0, x1))  # the drag did not pan
    assert tl.band.isVisible() and tl.band.getRegion() == pytest.approx((t0, t1))
    assert "cycles" in tl.band_label.textItem.toPlainText()
    assert r.tabs.tabText(r.tabs.indexOf(r.summary)) == "Selected range"
    qtbot.waitUntil(
        lambda: r.summary.statistics is not None and r.summary.statistics.t0 == t0, timeout=15_000
    )
    assert r.summary.header.text().startswith("Selected range")
    want = tl.trace.range_statistics(t0, t1)
    table = r.summary.stats_table
    assert table.visible_rows() == len(want.table)
    model = table.view.model()
    assert model.index(0, 0).data() == want.table["name"].iat[0]
    # sortable: by steps, ascending
    table.view.sortByColumn(2, Qt.SortOrder.AscendingOrder)
    steps = [int(model.index(i, 2).data().replace(",", "")) for i in range(model.rowCount())]
    assert steps == sorted(steps)
    # by operation
    r.summary.stats_by.setCurrentIndex(1)
    qtbot.waitUntil(lambda: r.summary.statistics.by == "operation", timeout=15_000)
    assert table.view.model().headerData(0, Qt.Orientation.Horizontal) == "Operation"
    # F fits the range, Esc clears it
    tl.setFocus()
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(tl, Qt.Key.Key_F)
    f0, f1 = tl.x_range()
    assert f0 < t0 < t1 < f1 and (f1 - f0) < 1.5 * (t1 - t0)
    with qtbot.waitSignal(tl.rangeCleared, timeout=WAIT_MS):
        qtbot.keyClick(tl, Qt.Key.Key_Escape)
    assert not tl.band.isVisible()
    assert r.tabs.tabText(r.tabs.indexOf(r.summary)) == "Visible range"
    # Shift + drag over the lanes selects too; a plain drag still pans
    c0, c1 = tl.x_range()
    p0, p1 = _view_x(tl, c0 + (c1 - c0) * 0.3), _view_x(tl, c0 + (c1 - c0) * 0.6)
    with qtbot.waitSignal(tl.rangeSelected, timeout=WAIT_MS):
        _drag(qtbot, tl, p0, p1, Qt.KeyboardModifier.ShiftModifier)
    assert tl.x_range() == pytest.approx((c0, c1))


def test_f_fits_the_selected_step(qtbot, report, small_paths):
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    tl.select_row(10, center=False)
    d = tl.trace.step_details(10)
    tl.setFocus()
    with qtbot.waitSignal(tl.redrawn, timeout=WAIT_MS):
        qtbot.keyClick(tl, Qt.Key.Key_F)
    f0, f1 = tl.x_range()
    assert f0 < d["start"] < d["end"] < f1
    assert f1 - f0 <= max(1.5 * d["cycles"], d["cycles"] + 40)


def test_time_axis_in_cycles_or_time_at_the_ipu_clock(qtbot, report, small_paths):
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    axis = tl.getPlotItem().getAxis("bottom")
    x0, x1 = tl.x_range()
    width = tl.pixel_width()

    def labels():
        return [t for _s, ticks in axis.tickStrings_levels(x0, x1, width) for t in ticks]

    axis.tickStrings_levels = lambda a, b, w: [
        (s, axis.tickStrings(v, 1.0, s)) for s, v in axis.tickValues(a, b, w)
    ]
    assert not any(t.endswith("s") for t in labels())
    r.axis_combo.setCurrentIndex(1)
    clock = tl.trace.clock_hz
    assert axis.clock_hz == clock
    texts = labels()
    assert texts and all(t == "0" or t.endswith((" ms", " µs", " s")) for t in texts)
    # ticks at round times: the major ticks' values are whole multiples of their spacing
    spacing, values = axis.tickValues(x0, x1, width)[0]
    secs = np.asarray(values) / clock
    step = spacing / clock
    assert np.allclose(secs / step, np.round(secs / step))
    # the band's duration reads in both
    tl.set_range(x0 + (x1 - x0) * 0.1, x0 + (x1 - x0) * 0.2)
    assert "cycles" in tl.band_label.textItem.toPlainText()
    assert (
        "ms" in tl.band_label.textItem.toPlainText() or "µs" in tl.band_label.textItem.toPlainText()
    )
    r.axis_combo.setCurrentIndex(0)
    assert axis.clock_hz is None and tl.getPlotItem().getAxis("bottom").labelText == "cycles"


def _overview_mouse(ov, kind, x: float) -> None:
    """A left-button press, move (button held) or release on the overview strip at x."""
    types = {"press": QEvent.Type.MouseButtonPress, "move": QEvent.Type.MouseMove}
    etype = types.get(kind, QEvent.Type.MouseButtonRelease)
    pos = QPointF(x, ov.height() / 2)
    left = Qt.MouseButton.LeftButton
    button = Qt.MouseButton.NoButton if kind == "move" else left
    buttons = Qt.MouseButton.NoButton if kind == "release" else left
    event = QMouseEvent(
        etype, pos, ov.mapToGlobal(pos), button, buttons, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(ov, event)


def test_overview_strip_shows_the_whole_run_and_moves_the_view(qtbot, report, small_paths):
    """The overview above the lanes: the whole run's active share per IPU (one image row per
    IPU, the heat map's colours), the visible window marked; a click there centres the view
    (keeping its width), dragging the band moves it, dragging an edge resizes it."""
    r, _ = report
    _open(report, small_paths[0])
    tl, ov = r.timeline, r.overview
    full = tl.full_range()
    assert ov.overview.busy.shape == (tl.trace.n_ipus, ov.BUCKETS)
    assert (ov.image.width(), ov.image.height()) == (ov.BUCKETS, tl.trace.n_ipus)
    # the run starts where the timeline's lanes start (the label columns are as wide)
    assert ov.plot_rect().left() == pytest.approx(
        ov.mapFromGlobal(tl.mapToGlobal(QPoint(0, 0))).x() + tl.lane_axis.width() + 1, abs=2
    )
    # the image's colour follows the busy share: the busiest bucket gets the table's last
    # colour, an idle one its first
    busy = ov.overview.busy
    hot = np.unravel_index(np.argmax(busy), busy.shape)
    cold = np.unravel_index(np.argmin(busy), busy.shape)
    assert busy[hot] > 0.9 and busy[cold] < 0.1
    table = ov.image.colorTable()
    assert ov.image.pixelIndex(int(hot[1]), int(hot[0])) >= 230
    assert ov.image.pixelIndex(int(cold[1]), int(cold[0])) <= 25
    assert table[0] != table[-1]
    span = (full[1] - full[0]) / 20
    _redrawn_after(qtbot, tl, lambda: tl.set_x_range(full[0], full[0] + span))
    assert ov.band == pytest.approx(tl.x_range())
    # a click at 3/4 of the run centres the view there, keeping its width
    target = full[0] + 0.75 * (full[1] - full[0])
    px = (ov.overview.t1 - ov.overview.t0) / ov.plot_rect().width()
    x = ov.x_of(target)
    _redrawn_after(
        qtbot,
        tl,
        lambda: qtbot.mouseClick(ov, Qt.MouseButton.LeftButton, pos=QPoint(round(x), 20)),
    )
    a, b = tl.x_range()
    assert (a + b) / 2 == pytest.approx(target, abs=3 * px)
    assert b - a == pytest.approx(span, rel=1e-6)
    assert ov.band == pytest.approx((a, b))
    # dragging the band by its middle moves the timeline by as many cycles as the mouse
    mid = ov.x_of((a + b) / 2)
    _overview_mouse(ov, "press", mid)
    _redrawn_after(qtbot, tl, lambda: _overview_mouse(ov, "move", mid - 100))
    _overview_mouse(ov, "release", mid - 100)
    a2, b2 = tl.x_range()
    assert b2 - a2 == pytest.approx(span, rel=1e-6)
    assert a2 == pytest.approx(a - 100 * px, abs=2 * px)
    # dragging the right edge widens the window; the left edge stays
    right = ov.x_of(b2)
    _overview_mouse(ov, "press", right + 1)
    _redrawn_after(qtbot, tl, lambda: _overview_mouse(ov, "move", right + 60))
    _overview_mouse(ov, "release", right + 60)
    a3, b3 = tl.x_range()
    assert a3 == pytest.approx(a2, abs=px)
    assert b3 == pytest.approx(b2 + 60 * px, abs=2 * px)
    # the strip draws the band where the timeline's window is (the picture, not a model)
    shot = ov.grab().toImage()
    inside, outside = ov.x_of((a3 + b3) / 2), ov.x_of(b3) + 30
    assert shot.pixelColor(round(inside), 2) != shot.pixelColor(round(outside), 2) or (
        shot.pixelColor(round(inside), ov.height() - 3)
        != shot.pixelColor(round(outside), ov.height() - 3)
    )


def test_run_selector_jumps_to_and_keeps_the_view_in_one_host_call(qtbot, report, small_paths):
    r, _ = report
    _open(report, small_paths[0])
    tl = r.timeline
    runs = tl.trace.runs()
    assert len(runs) > 2 and r.run_combo.count() == len(runs) + 1
    assert r.run_combo.isEnabled()
    _redrawn_after(qtbot, tl, lambda: r.run_combo.setCurrentIndex(3))
    a, b = runs[2]
    assert tl.x_range() == pytest.approx((a, b))
    # panning stops at the run's ends; Home shows the run
    tl.setFocus()
    _redrawn_after(qtbot, tl, lambda: qtbot.keyClick(tl, Qt.Key.Key_W))
    for _ in range(8):
        qtbot.keyClick(tl, Qt.Key.Key_D)
    qtbot.waitUntil(lambda: tl.x_range()[1] == pytest.approx(b), timeout=WAIT_MS)
    _redrawn_after(qtbot, tl, lambda: qtbot.keyClick(tl, Qt.Key.Key_Home))
    assert tl.x_range() == pytest.approx((a, b))
    # the whole trace again
    _redrawn_after(qtbot, tl, lambda: r.run_combo.setCurrentIndex(0))
    f0, f1 = tl.full_range()
    assert tl.x_range()[0] <= f0 and tl.x_range()[1] >= f1


def test_flow_arrows_for_cross_ipu_exchanges_and_syncs(
    qtbot, report, walkthrough_profiles, monkeypatch
):
    """Arrows from the sending IPU's step to the receiving IPU's (exchanges) and from the last
    IPU to reach an external sync to the others, for the visible window only; a toggle hides
    them; zoomed out past FLOW_ROWS steps none are drawn."""
    r, _ = report
    _open(report, walkthrough_profiles["2-half"])
    tl = r.timeline
    fl = tl.trace.flows(*tl.full_range())
    assert len(fl) and {"exchange", "sync"} <= set(fl.kind)
    # around the first exchange
    i = int(np.flatnonzero(fl.kind == "exchange")[0])
    a, b = float(fl.x0[i]), float(fl.x1[i])
    # queried in the background once the view rests, then drawn
    with qtbot.waitSignal(tl.flowsReady, timeout=15_000):
        tl.set_x_range(a - (b - a), b + (b - a))
    assert tl.flows is not None and not tl.flows.too_many
    assert tl.flows_item.n_arrows == len(tl.flows) >= 1
    x0, x1 = tl.x_range()
    assert ((tl.flows.x0 >= x0 - (x1 - x0)) & (tl.flows.x0 <= x1)).all()  # the window's only
    xy = np.concatenate([xy for _p, xy in tl.flows_item._groups])
    # from one IPU's lane to another's
    assert (np.abs(xy[:, 1] - xy[:, 3]) >= 1).all()
    tl.grab()
    r.flows_box.setChecked(False)
    assert tl.flows_item.n_arrows == 0
    r.flows_box.setChecked(True)
    assert tl.flows_item.n_arrows >= 1
    # zoomed out: too many steps for flows
    from analyser.gui.reports.trace import timeline

    monkeypatch.setattr(timeline, "FLOW_ROWS", 2000)
    assert tl.trace.step_count() > timeline.FLOW_ROWS
    with qtbot.waitSignal(tl.flowsReady, timeout=15_000):
        tl.reset_zoom()
    assert tl.flows.too_many and tl.flows_item.n_arrows == 0
    # a small pan inside the kept window reuses the kept flows (no new query)
    x0, x1 = tl.x_range()
    _redrawn_after(qtbot, tl, lambda: tl.set_x_range(x0 + (x1 - x0) * 0.01, x1))
    assert tl.flows is not None and not tl._flow_timer.isActive()


def _click_label(qtbot, tl, y: float) -> None:
    """Click the lane label at lane height ``y`` (the left axis)."""
    axis = tl.lane_axis
    vb = tl.getPlotItem().getViewBox()
    scene_y = vb.mapViewToScene(QPointF(0, y)).y()
    pos = tl.mapFromScene(QPointF(axis.sceneBoundingRect().center().x(), scene_y))
    qtbot.mouseClick(tl.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))


def test_lane_groups_fold_and_unfold_and_are_remembered_per_document(
    qtbot, report, small_paths, host_paths
):
    """A click on an IPU's lane label folds its lanes into one (all its steps drawn there) and
    unfolds them again; the host lanes fold likewise; the folds are kept per document."""
    r, _ = report
    a, b = _open(report, small_paths[0], small_paths[1])
    r.set_document(a)
    r.group_combo.setCurrentIndex(r.group_combo.findData("operation"))
    tl = r.timeline
    lanes0 = len(tl.ipu_lanes[0])
    assert lanes0 >= 2
    n_lanes, steps = tl.n_lanes, tl.n_steps_visible
    assert tl.lane_axis._labels[0][1].startswith("▾ IPU 0")
    _redrawn_after(qtbot, tl, lambda: _click_label(qtbot, tl, 0.5))
    assert tl.n_lanes == n_lanes - lanes0 + 1
    assert tl.lane_axis._labels[0][1] == f"▸ IPU 0 · {lanes0} lanes"
    assert tl.n_steps_visible == steps  # every step still drawn, in the one lane
    ys = np.concatenate([prim.ndarray()[:, 1] for _b, prim in tl.items._groups])
    assert (ys[ys < 1] >= 0).any() and tl.ipu_base[1] == 1
    # a step of the folded IPU is still found under the pointer
    x0, x1 = tl.x_range()
    assert tl.describe_at((x0 + x1) / 2, 0.5)
    # remembered per document: B has its own folds, A's come back with A
    r.set_document(b)
    assert tl.lane_axis._labels[0][1].startswith("▾ IPU 0")
    r.set_document(a)
    assert tl.lane_axis._labels[0][1].startswith("▸ IPU 0")
    _redrawn_after(qtbot, tl, lambda: _click_label(qtbot, tl, 0.5))
    assert tl.n_lanes == n_lanes
    # the host lanes (main and loader) fold into one
    _open(report, host_paths["async"])
    assert tl.host_lanes == ("main", "loader")
    before = tl.n_lanes
    _redrawn_after(qtbot, tl, lambda: _click_label(qtbot, tl, tl.host_base + 0.5))
    assert tl.n_lanes == before - 1 and tl.host_folded
    assert (tl.host_base + 0.5, "▸ Host · 2 lanes") in tl.lane_axis._labels
    rects = np.concatenate([prim.ndarray() for _b, prim in tl.host_items._groups])
    assert np.allclose(rects[:, 1], rects[0, 1])  # one lane
    row = int(np.argmax(tl.host["end"] - tl.host["start"]))
    mid = float(tl.host["start"][row] + tl.host["end"][row]) / 2
    assert tl.host_at(mid, tl.host_base + 0.5) is not None


def test_compare_mode_range_statistics_of_a_and_of_b(qtbot, report, small_paths):
    """In compare mode the selected range's steps are listed for A or for B (a box)."""
    r, _ = report
    a, b = _open(report, *small_paths)
    tl = r.timeline
    x0, x1 = tl.x_range()
    t0, t1 = x0 + (x1 - x0) * 0.3, x0 + (x1 - x0) * 0.4
    tl.set_range(t0, t1)
    assert r.timeline_b.range_sel == pytest.approx((t0, t1))  # B shows the same band
    qtbot.waitUntil(
        lambda: r.summary.statistics is not None and r.summary.statistics.t0 == t0, timeout=15_000
    )
    box = r.summary.stats_of
    assert box.isVisible() and [box.itemText(i) for i in range(2)] == [
        f"A: {a.name}",
        f"B: {b.name}",
    ]
    want_a = tl.trace.range_statistics(t0, t1)
    want_b = r.timeline_b.trace.range_statistics(t0, t1)
    assert r.summary.statistics.n_steps == want_a.n_steps
    box.setCurrentIndex(1)
    assert r.summary.statistics.n_steps == want_b.n_steps != want_a.n_steps
    assert r.summary.stats_label.text().startswith(f"{want_b.n_steps:,} steps of B: {b.name}")
    assert r.summary.stats_table.visible_rows() == len(want_b.table)
    # one profile again: no box
    r.set_document(a)
    qtbot.waitUntil(lambda: not box.isVisible(), timeout=15_000)


def test_b_timeline_and_bsp_plot_are_built_when_first_needed_and_only_once(
    qtbot, report, small_paths
):
    """One profile opens without B's timeline or the BSP tab's plot (each a
    pyqtgraph plot of the first visit's cost); the BSP plot is built when its tab is first
    shown and B's timeline on the first comparison, each once."""
    from analyser.gui.reports.trace.timeline import TimelineView

    r, _ = report
    _open(report, small_paths[0])
    assert r._timeline_b is None and r.bsp._parts is None
    assert len(r.findChildren(TimelineView)) == 1
    r.tabs.setCurrentWidget(r.bsp)
    qtbot.waitUntil(lambda: r.bsp.states is not None)
    plot = r.bsp.plot
    assert plot.isVisible() and r.bsp.image.image is not None  # the cells of the view
    r.tabs.setCurrentWidget(r.summary)
    r.tabs.setCurrentWidget(r.bsp)
    assert r.bsp.plot is plot
    r.flows_box.setChecked(False)  # a choice made before B's timeline exists
    _open(report, *small_paths)
    tl_b = r.timeline_b
    assert tl_b.isVisible() and tl_b.trace is not None and not tl_b.show_flows
    assert tl_b.x_range() == pytest.approx(r.timeline.x_range())  # x-linked to A's
    _open(report, small_paths[0])
    assert not r.timeline_b_box.isVisible()
    _open(report, *small_paths)
    assert r.timeline_b is tl_b and len(r.findChildren(TimelineView)) == 2


def test_a_pinned_lane_stays_on_top_while_the_others_scroll(qtbot, report, small_paths):
    """Perfetto's pinned tracks: the lane menu or P pins a lane to the top;
    scrolling moves only the other lanes under it; the pins are kept across a theme switch (a
    restyle shows the same trace again); unpinning puts the lane back in its place."""
    from PySide6.QtGui import QCursor

    from analyser.gui.model.timeline import PIN

    r, _ = report
    _open(report, small_paths[0])
    r.group_combo.setCurrentIndex(r.group_combo.findData("program"))
    tl = r.timeline
    n0, n1 = len(tl.ipu_lanes[0]), len(tl.ipu_lanes[1])
    assert tl.ipu_base == {0: 0, 1: n0} and n1 >= 3
    # the menu of IPU 1's third lane pins it: it moves to the top, marked
    ipu1, lane = tl.lane_at(n0 + 2.5)
    assert ipu1 == 1
    menu = tl.lane_menu(n0 + 2.5)
    name = tl.ipu_lanes[1][2]
    assert menu.actions()[0].text().startswith("Pin to top: IPU 1 · ")
    assert [a.text() for a in menu.actions()][1] == "Fold IPU 1"
    _redrawn_after(qtbot, tl, menu.actions()[0].trigger)
    assert tl.pinned == [("ipu", 1, name)]
    assert tl.lane_at(0.5) == (1, lane) and tl.ipu_base == {0: 1, 1: 1 + n0}
    assert tl.lane_axis._labels[0][1].startswith(PIN + "IPU 1 · ")
    # fewer rows than lanes: the other lanes scroll, the pinned one stays at the top
    tl.visible_lanes = lambda: 6
    tl._fit_lanes()
    assert tl.scrollbar.isVisible() and tl.scrollbar.maximum() == n0 + n1 - 6
    _redrawn_after(qtbot, tl, lambda: tl.scrollbar.setValue(tl.scrollbar.maximum()))
    assert tl.lane_at(0.5) == (1, lane)  # still on top
    assert tl.lane_at(5.5)[0] == 1 and tl.lane_at(1.5)[0] == 1  # the last lanes of IPU 1
    assert len(tl.lane_axis._labels) == 6  # the scrolled-away lanes have no label
    assert tl.lane_axis._labels[0][1].startswith(PIN)
    ys = np.concatenate([prim.ndarray()[:, 1] for _b, prim in tl.items._groups])
    assert (ys < 1).any() and (ys > 1).any() and (ys >= 0).all()
    assert set(tl.results) == {1}  # IPU 0 scrolled away: not read
    # a step of a scrolled-away lane: selecting it scrolls its lane back into view
    lo, _hi = tl.trace.access.ipu_rows(0)
    _redrawn_after(qtbot, tl, lambda: tl.select_row(lo, center=False))
    assert tl.highlight.isVisible() and 1 <= tl.highlight.rect().top() < 6
    assert 0 in tl.results and tl.lane_at(0.5) == (1, lane)
    # kept across a theme switch (the report shows the same trace again)
    r.restyle()
    assert tl.pinned == [("ipu", 1, name)] and tl.lane_axis._labels[0][1].startswith(PIN)
    # P over a lane pins it too (under the first); P again unpins it
    del tl.visible_lanes
    tl._fit_lanes()
    vb = tl.getPlotItem().getViewBox()
    x0, x1 = tl.x_range()
    at = vb.mapViewToScene(QPointF((x0 + x1) / 2, 1.5))
    QCursor.setPos(tl.viewport().mapToGlobal(tl.mapFromScene(at)))
    second = tl.pin_key()
    assert second is not None and second[:2] == ("ipu", 0)
    tl.setFocus()
    qtbot.keyClick(tl, Qt.Key.Key_P)
    assert tl.pinned == [("ipu", 1, name), second]
    assert tl.lane_axis._labels[1][1].startswith(PIN + "IPU 0 · ")
    qtbot.keyClick(tl, Qt.Key.Key_P)  # the pointer is over the second pinned lane
    assert tl.pinned == [("ipu", 1, name)]
    _redrawn_after(qtbot, tl, lambda: tl.lane_menu(0.5).actions()[0].trigger())
    # the lanes in their order again (scrolled to the selected step's lane)
    assert tl.pinned == [] and tl.ipu_base[1] - tl.ipu_base[0] == n0
    assert not any(text.startswith(PIN) for _y, text in tl.lane_axis._labels)
    # the keyboard and mouse reference (Help menu) says so
    from analyser.gui.help import SHORTCUTS

    assert any(keys.startswith("P,") and "pin" in what for _w, keys, what in SHORTCUTS)


@pytest.fixture(scope="module")
def short_and_long(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("gui-trace-lengths")
    paths = (out / "short.h5", out / "long.h5")
    for path, n_steps in zip(paths, (4_000, 20_000)):
        write_profile(path, make_synthetic_profile(n_steps=n_steps, n_ipus=2, tiles=64, seed=1))
    return paths


def test_compare_home_shows_both_runs_when_they_differ_in_length(qtbot, report, short_and_long):
    """Seen in a real X server (2-half vs 6-async): after zooming in, Home on the shorter A
    stayed where it was, because A's Home knew only A's run. Home on either timeline shows the
    whole of both runs, and the header says its figures are A's."""
    r, _ = report
    _open(report, *short_and_long)
    (a0, a1), (b0, b1) = r.timeline.full_range(), r.timeline_b.full_range()
    assert b1 > 2 * a1  # A is the shorter run
    lo, hi = min(a0, b0), max(a1, b1)
    for tl in (r.timeline, r.timeline_b):
        r.timeline.set_x_range(lo + (hi - lo) * 0.4, lo + (hi - lo) * 0.5)
        qtbot.keyClick(tl, Qt.Key.Key_Home)
        for view in (r.timeline, r.timeline_b):
            x0, x1 = view.x_range()
            slack = (hi - lo) * 1e-3  # a cycle or two of axis rounding
            assert x0 <= lo + slack and x1 >= hi - slack, (tl is r.timeline, (x0, x1), (lo, hi))
    with qtbot.waitSignal(r.timeline.windowChanged, timeout=WAIT_MS):
        r.timeline.zoom(2.0)
    assert r.status.full_text().startswith("A: ")


def test_the_window_read_out_ends_in_an_ellipsis_when_cut(qtbot):
    """Seen at 1,600 px in a real X server: the read-out beside the legend was cut mid-word
    ("4,662 rec"), which reads as a complete figure. It ends in "…" and keeps its whole text
    in the tooltip."""
    from analyser.gui.widgets import ElidedLabel

    label = ElidedLabel()
    qtbot.addWidget(label)
    text = "0 – 18,860,981 cycles (18.9M) · 19,352 steps · 4,662 rects (level of detail)"
    label.setText(text)
    label.resize(120, 20)
    label.show()
    assert label.text().endswith("…") and len(label.text()) < len(text)
    assert label.full_text() == text and label.toolTip() == text
    label.resize(2000, 20)
    assert label.text() == text


def test_compare_mode_fits_a_1280_pixel_window(qtbot, report, small_paths):
    """At 1,280 px a compare-mode trace made the window 1,515 px wide (the range panel's three
    parts at their minimum widths and an unwrapped legend): the report's minimum width leaves
    room for the side list, the panel scrolls instead and the legend wraps."""
    r, _ = report
    _open(report, *small_paths)
    qtbot.waitUntil(lambda: r.summary.table.columnCount() == 4, timeout=WAIT_MS)
    r.summary.explain_box.show()  # as when the explained comparison has arrived
    r.summary.table.setMinimumWidth(760)  # the most its figures claim (large runs' A, B, B - A)
    wait_until_idle(qtbot)  # the layouts told of both
    assert r.minimumSizeHint().width() <= 1280 - 200, r.minimumSizeHint().width()
    assert r.legend.wordWrap()


def test_the_range_summary_of_a_fill_waits_for_the_first_paint(qtbot, report, small_paths):
    """The visible-range summary (a thread reading every visible row) is
    scheduled after the report's first paint following a fill, not while the fill's first
    paint is still to come; after it, the summary is computed as before."""
    r, _ = report
    r.set_document(None)
    with qtbot.waitSignal(r.summaryReady, timeout=10_000):
        _open(report, small_paths[0])  # shown: fills at once, the paint comes from the loop
        assert r._details_after_paint
        assert not r._detail_timer.isActive()
    assert not r._details_after_paint
    assert r.summary.header.text().startswith("Visible range")
