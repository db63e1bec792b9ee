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
