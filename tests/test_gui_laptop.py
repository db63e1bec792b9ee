"""The window on a laptop (pytest-qt, offscreen): it shrinks to a 1,280 x 720 screen whatever
report was visited, a report wider or taller than the room left scrolls instead of widening the
window, and the keys of the report list and the reports still arrive."""

from __future__ import annotations

import pytest
from gui_helpers import open_in, shown_window
from PySide6.QtWidgets import QApplication

pytestmark = pytest.mark.gui

#: The screen of a small laptop, and the room a window has on it under a title bar and a panel.
SCREEN = (1280, 720)
ROOM = (1280, 680)


@pytest.fixture
def window(qtbot, tmp_path):
    yield from shown_window(qtbot, tmp_path, size=(1400, 880))


def _visit_every_report(qtbot, w) -> None:
    for key in w.report_keys:
        r = w.show_report(key)
        qtbot.waitUntil(lambda r=r: not r.needs_refresh, timeout=30_000)
        QApplication.processEvents()


@pytest.mark.parametrize("compare", [False, True], ids=["one", "compare"])
def test_the_window_shrinks_to_a_1280_x_720_screen_after_every_report(
    qtbot, window, walkthrough_profiles, compare
):
    """The window could not shrink below 1,242 x 782 (the largest report's minimum): taller
    than a 1,366 x 768 laptop's screen. Its minimum now fits the room on a 1,280 x 720 screen
    after every report was shown, alone and compared, and a resize to that room is obeyed."""
    w = window
    paths = [walkthrough_profiles["4-device-iterations"]]
    if compare:
        paths.append(walkthrough_profiles["5-8bit-io"])
    assert open_in(qtbot, w, *paths)
    _visit_every_report(qtbot, w)
    hint = w.minimumSizeHint()
    assert hint.width() <= ROOM[0] and hint.height() <= ROOM[1], hint
    w.resize(*ROOM)
    qtbot.waitUntil(lambda: w.size().toTuple() == ROOM)
    # each report is at most scrolled at this size: never cut, never the window's problem
    for key in w.report_keys:
        r = w.show_report(key)
        scroll = w.stack.scroll_area(r)
        assert scroll is not None and scroll.widget() is r
        qtbot.waitUntil(lambda s=scroll: s.viewport().width() > 0)
        # the report is laid out at least at its minimum (scrolled when that is larger) ...
        assert r.width() >= r.minimumSizeHint().width()
        # ... and at 1,280 px every report fits the width: no sideways scrolling
        assert r.minimumSizeHint().width() <= scroll.viewport().width(), key
        # the Memory Report's A, B and B - A charts fit above its details (no scrolling)
        if key == "memory":
            assert r.minimumSizeHint().height() <= scroll.maximumViewportSize().height()
        # a report whose minimum fits the height is not made taller than the room (given its
        # preferred height, the trace's B timeline was pushed below the screen)
        room = scroll.maximumViewportSize().height()
        if r.minimumSizeHint().height() <= room:
            qtbot.waitUntil(lambda r=r, room=room: r.height() <= room)
    assert w.stack.currentWidget() is r


def _cut_texts(view, model, rows) -> list[tuple[int, str]]:
    """(column, text) of the cells of ``rows`` that the view draws cut ("…")."""
    margin = view.style().pixelMetric(view.style().PixelMetric.PM_FocusFrameHMargin, None, view)
    view._check_font()
    cut = []
    for col in range(model.columnCount()):
        room = view.columnWidth(col) - 2 * (margin + 1)
        for r in rows:
            text = model.text(r, col)
            if view._prepared(text, room)[0].text() != text:
                cut.append((col, text))
    return cut


def test_a_wide_window_shows_operations_whole(qtbot, tmp_path, walkthrough_profiles):
    """At 2,560 px the compared Operations table showed "Code B 592.25 ..." and layer names cut
    at 320 px with half the table's width free: every name and figure is whole."""
    fixture = shown_window(qtbot, tmp_path, size=(2560, 1400))
    w = next(fixture)
    assert open_in(
        qtbot, w, walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"]
    )
    r = w.show_report("operations")
    qtbot.waitUntil(lambda: r.model.rowCount() > 0, timeout=30_000)
    rows = [r.model.source_row(i) for i in range(r.model.rowCount())]  # all 1,582
    assert _cut_texts(r.view, r.model, rows) == []
    next(fixture, None)


# ---------------------------------------------------------------------------------------------
# Keyboard only
# ---------------------------------------------------------------------------------------------
def _focused():
    return QApplication.focusWidget()


def test_after_a_search_the_trace_keys_drive_the_trace_again(qtbot, tmp_path, walkthrough_profiles):
    """After Ctrl+F and Enter, W / A / S / D typed into the search box, and Esc kept the focus
    there. Enter on a search with hits hands the focus to the timeline (the hit selected), so
    W zooms; Ctrl+F again and Esc hand it back too, the typed text kept."""
    from PySide6.QtCore import Qt

    fixture = shown_window(qtbot, tmp_path)
    w = next(fixture)
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w)
    assert open_in(qtbot, w, walkthrough_profiles["2-half"])
    r = w.show_report("trace")
    tl = r.timeline
    qtbot.waitUntil(lambda: tl.trace is not None, timeout=30_000)
    qtbot.keyClick(w, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: _focused() is r.search.edit)
    qtbot.keyClicks(r.search.edit, "conv1")
    with qtbot.waitSignal(tl.stepSelected, timeout=30_000):
        qtbot.keyClick(r.search.edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: _focused() is tl)
    before = tl.x_range()
    qtbot.keyClick(_focused(), Qt.Key.Key_W)
    assert tl.x_range()[1] - tl.x_range()[0] < before[1] - before[0]
    assert r.search.edit.text() == "conv1"  # W zoomed, it was not typed
    qtbot.keyClick(w, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: _focused() is r.search.edit)
    qtbot.keyClick(r.search.edit, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: _focused() is tl)
    assert r.search.edit.text() == "conv1"
    next(fixture, None)


@pytest.mark.parametrize(("key", "plot"), [("memory", "plot_a"), ("liveness", "plot")])
def test_charts_other_than_the_trace_answer_the_trace_keys(
    qtbot, tmp_path, walkthrough_profiles, key, plot
):
    """Only the Execution Trace answered keys: a chart with the focus now zooms with W / S,
    pans with A / D and shows everything again with Home, as the trace does."""
    from PySide6.QtCore import Qt

    fixture = shown_window(qtbot, tmp_path)
    w = next(fixture)
    assert open_in(qtbot, w, walkthrough_profiles["2-half"])
    r = w.show_report(key)
    chart = getattr(r, plot)
    qtbot.waitUntil(lambda: chart.isVisible() and bool(chart.getPlotItem().items))
    vb = chart.getPlotItem().getViewBox()
    (x0, x1), _ = vb.viewRange()
    qtbot.keyClick(chart, Qt.Key.Key_W)
    (a, b), _ = vb.viewRange()
    assert b - a < (x1 - x0) * 0.9
    qtbot.keyClick(chart, Qt.Key.Key_D)
    (c, d), _ = vb.viewRange()
    assert c > a and d - c == pytest.approx(b - a, rel=1e-6)
    qtbot.keyClick(chart, Qt.Key.Key_S)
    qtbot.keyClick(chart, Qt.Key.Key_Home)
    (e, f), _ = vb.viewRange()
    assert e <= x0 + (x1 - x0) * 0.02 and f >= x1 - (x1 - x0) * 0.02
    next(fixture, None)


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------
def test_a_loading_profile_shows_its_progress_not_no_profile_open(
    qtbot, tmp_path, walkthrough_profiles, monkeypatch
):
    """While a profile loaded (94 s for a 10M-step one) the window said "No profile open. Use
    File > Open...". It now shows the file's name, a progress bar of the load's steps and the
    step under way, and the report once the load is done."""
    import threading

    from analyser.gui.model import data

    fixture = shown_window(qtbot, tmp_path)
    w = next(fixture)
    gate = threading.Event()
    real = data.warm

    def slow_warm(doc, needs, step=None):
        gate.wait(30)  # the load holds here until the test has looked
        real(doc, needs, step)

    monkeypatch.setattr(data, "warm", slow_warm)
    path = walkthrough_profiles["2-half"]
    with qtbot.waitSignal(w.loadFinished, timeout=60_000) as done:
        w.open_files([path])
        qtbot.waitUntil(lambda: w.stack.currentWidget() is w.loading)
        panel = w.loading
        assert path.name in panel.title.text() and "No profile open" not in panel.title.text()
        qtbot.waitUntil(lambda: panel.progress.maximum() > 1)  # the steps are known
        assert panel.progress.value() == 0 and panel.step.text().startswith(f"reading {path.name}")
        assert w.progress.maximum() == panel.progress.maximum()
        gate.set()
    assert done.args == [True]
    qtbot.waitUntil(lambda: w.stack.currentWidget() is w.current_report())
    next(fixture, None)


def test_a_failed_load_goes_back_to_the_empty_state(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    monkeypatch.setattr(QMessageBox, "critical", lambda *a, **k: None)
    fixture = shown_window(qtbot, tmp_path)
    w = next(fixture)
    bad = tmp_path / "broken.h5"
    bad.write_bytes(b"not a profile\n" * 20)
    with qtbot.waitSignal(w.loadFinished, timeout=30_000) as done:
        w.open_files([bad])
    assert done.args == [False]
    assert w.stack.currentWidget() is w.empty_panel
    next(fixture, None)


def test_ctrl_e_exports_the_trace_with_a_title_and_legend_but_no_tabs(
    qtbot, tmp_path, walkthrough_profiles
):
    """Ctrl+E saved the shown widget alone: the tab bar and the scroll bars in, no title or
    legend. The image is the title, the plots (overview, A, B, the differences lane) and the
    legend, one under the other, and nothing else."""
    from PySide6.QtGui import QColor, QImage

    from analyser.gui.theme import chart_colors

    fixture = shown_window(qtbot, tmp_path)
    w = next(fixture)
    a, b = walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"]
    assert open_in(qtbot, w, a, b)
    r = w.show_report("trace")
    qtbot.waitUntil(lambda: r.timeline_b.trace is not None, timeout=30_000)
    path = r.export_image(tmp_path / "trace.png")
    image = QImage(str(path))
    parts = [p for p in r.export_parts() if p.isVisible()]
    assert r.tabs not in parts and len(parts) == 4  # overview, A, B, the lane
    plots = sum(p.height() for p in parts) + r.legend.height()
    title = image.height() - plots
    assert 16 <= title <= 60, title
    assert image.width() == max(p.width() for p in [*parts, r.legend])
    background = QColor(chart_colors().background)
    ink = sum(image.pixelColor(x, y) != background for y in range(title) for x in range(0, 400, 2))
    assert ink > 50  # the title is written
    next(fixture, None)
