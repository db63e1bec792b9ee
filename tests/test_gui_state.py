"""State lost or stale. A theme switch keeps the selected tiles, the
selected liveness step and the trace's view and step; after "Stop comparing" Insights has no
empty column; "Stop comparing" is disabled with nothing compared; Open Recent drops a file that
failed to open."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gui_helpers import open_in, shown_window
from PySide6.QtWidgets import QMessageBox

from profiles import write_profile
from profiles.synthetic import make_synthetic_profile

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("state")
    paths = []
    for seed, ga in ((1, 8), (1, 16)):
        path = out / f"p{ga}.h5"
        write_profile(
            path,
            make_synthetic_profile(
                n_steps=3000, n_ipus=2, tiles=256, n_programs=200, seed=seed, grad_accum=ga
            ),
        )
        paths.append(path)
    return paths[0], paths[1]


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(
        QMessageBox, "critical", staticmethod(lambda parent, title, text, *a: said.append(text))
    )
    for w in shown_window(qtbot, tmp_path):
        w.said = said
        yield w


_open = open_in


def test_theme_switch_keeps_selections(qtbot, window, pair):
    assert not window.act_stop_compare.isEnabled()  # nothing open, nothing compared
    assert _open(qtbot, window, pair[0])
    assert not window.act_stop_compare.isEnabled()
    mem = window.show_report("memory")
    mem.set_selection(np.array([[0, 3], [1, 7]]))
    live = window.show_report("liveness")
    live.click_step(5, False)
    live.click_step(9, True)
    trace = window.show_report("trace")
    trace.timeline.set_x_range(1000, 50_000)
    trace.timeline.select_row(3, center=False)
    window.set_theme("dark")
    try:
        assert trace.timeline.selected_row == 3
        x0, x1 = trace.timeline.getPlotItem().getViewBox().viewRange()[0]
        assert x0 == pytest.approx(1000, abs=2000) and x1 == pytest.approx(50_000, rel=0.1)
        assert window.show_report("liveness").steps == [5, 9]
        assert window.show_report("memory").selection.tolist() == [[0, 3], [1, 7]]
        # a new document still starts afresh
        assert _open(qtbot, window, pair[1])
        assert window.show_report("memory").selection.size == 0
    finally:
        window.set_theme("light")


def test_stop_comparing_leaves_no_empty_insights_column(qtbot, window, pair):
    assert _open(qtbot, window, *pair)
    assert window.act_stop_compare.isEnabled()
    insights = window.show_report("insights")

    def labels():
        head = insights.list.headerItem()
        return [head.text(c) for c in range(insights.list.columnCount())]

    assert "In" in labels()  # compare mode: which profile a tip fires on
    window.stop_compare()
    assert not window.act_stop_compare.isEnabled()
    # the report fills when its view-model of A alone arrives
    qtbot.waitUntil(lambda: not insights.awaiting_view, timeout=30000)
    assert "In" not in labels() and "" not in labels()


def test_open_recent_drops_a_file_that_failed(qtbot, window, pair, tmp_path):
    good = tmp_path / "good.h5"
    good.write_bytes(pair[0].read_bytes())
    assert _open(qtbot, window, good)
    assert str(good.resolve()) in window.recent_files()
    good.write_bytes(b"not a profile any more\n" * 4)
    assert not _open(qtbot, window, good)
    assert window.said and str(good.resolve()) not in window.recent_files()


def test_help_menu_and_m_marks_the_selection(qtbot, window, pair):
    """Parity: Help > Keyboard and mouse lists the keys (M included), Help > Open demo
    profile offers the six walkthrough steps, and M in the trace pins a band over the
    selection (M again removes it)."""
    from PySide6.QtCore import Qt

    from analyser.gui.help import SHORTCUTS, shortcuts_html

    menus = {a.text(): a.menu() for a in window.menuBar().actions()}
    texts = [a.text() for a in menus["&Help"].actions()]
    assert "&Keyboard and mouse" in texts
    assert [a.text()[:2] for a in window.demo_menu.actions()] == [f"{i}-" for i in range(1, 7)]
    assert any(keys == "M" for _w, keys, _what in SHORTCUTS) and "Ctrl+PgDown" in shortcuts_html()
    assert _open(qtbot, window, pair[0])
    trace = window.show_report("trace")
    tl = trace.timeline
    tl.set_x_range(0, 20_000)
    tl.set_range(2000, 9000)
    assert tl.range_sel == (2000, 9000)
    tl.setFocus()
    qtbot.keyClick(tl, Qt.Key.Key_M)
    assert tl.marks is not None and tl.marks.spans() == [(2000, 9000)]
    tl.clear_range()
    tl.zoom(4)  # the mark stays while the view moves and the selection changes
    assert tl.marks.spans() == [(2000, 9000)]
    tl.set_range(2000, 9000)
    assert tl.mark_selection() is False and tl.marks.spans() == []


def test_units_preference_reaches_the_max_memory_line_and_the_stash_axis(qtbot, window, pair):
    """The max-memory line label and the Pipeline's stash axis kept KiB /
    MiB whatever the preference."""
    assert _open(qtbot, window, pair[0])
    window.set_units("kB")
    try:
        mem = window.show_report("memory")
        label = mem.plot_a.max_line.label.textItem.toPlainText()
        assert "kB" in label and "KiB" not in label
        pipe = window.show_report("pipeline")
        axis = pipe.bars.stash.getPlotItem().getAxis("left").labelText
        assert axis in ("kB", "MB", "GB")
    finally:
        window.set_units("KiB")
