"""The Execution Trace's BSP view (pytest-qt, offscreen): state colours at every zoom level, a
legend that matches the cells, vertical zoom over the tiles."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import open_documents as _open
from gui_helpers import shown_report, shut_down_trace
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QWheelEvent

from analyser.gui.theme import chart_colors
from analyser.trace.bsp import STATE_OF_TYPE, dominant
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def path(synthetic_profile):
    return synthetic_profile("bsp.h5", n_steps=8_000, n_ipus=2, tiles=64, n_programs=150)


@pytest.fixture
def report(qtbot, path):
    from analyser.gui.reports.trace import TraceReport

    fixture = shown_report(qtbot, TraceReport(), (1200, 800), before_close=shut_down_trace)
    r, docs = next(fixture)
    _open((r, docs), path)
    r.tabs.setCurrentWidget(r.bsp)
    r.update_bsp()
    assert r.bsp.wait_for_cells()
    yield r
    next(fixture, None)


def _rgb(view, t: float, tile: float) -> tuple[int, int, int]:
    """Colour of the image cell under cycle ``t`` and tile ``tile``."""
    m = view.states
    b, r = m.cell(t, tile)
    return tuple(int(x) for x in view.image.image[r, b, :3])


def _legend(view) -> dict[str, tuple[int, int, int]]:
    return {k: QColor(c).getRgb()[:3] for k, c in view.legend_colors.items()}


def test_whole_run_is_drawn_by_state(report):
    """The whole run (every step in view) is drawn, not refused, and each cell is the legend's
    colour of its largest state, mixed with the background by how far that state dominates."""
    bsp = report.bsp
    m = bsp.states
    assert m is not None and m.t0 == pytest.approx(report.timeline.x_range()[0])
    assert m.n_steps == report.trace.step_count(0)
    assert "too many" not in bsp.label.text().lower()
    legend = _legend(bsp)
    assert list(legend) == ["compute", "exchange", "sync", "idle"]
    for name in legend:  # every state is in the legend text, with its swatch
        assert name in bsp.legend.text()
    colors = np.array(list(legend.values()), float)
    background = np.array(QColor(chart_colors().background).getRgb()[:3], float)
    b, r = m.buckets // 3, m.rows // 2
    want = dominant(m.shares[b : b + 1, r : r + 1], colors, background)[0, 0].astype(float)
    assert np.abs(np.array(bsp.image.image[r, b, :3], float) - want).max() <= 1
    top = int(np.argmax(m.shares[b, r]))
    if m.shares[b, r, top] > 0.999:  # wholly one state: exactly its legend colour
        assert np.abs(want - colors[top]).max() <= 1
    assert "compute" in bsp.label.text() and "%" in bsp.label.text()


def test_sync_steps_are_drawn_in_the_legends_sync_colour(report):
    """'the BSP legend says dark = idle but Sync steps are drawn bright'.
    Zoomed on a Sync step the cells have exactly the legend's sync colour; on a compute step,
    the compute colour on the working tiles."""
    tw = report.trace
    lo, hi = tw.access.ipu_rows(0)
    d = tw.access.read(lo, hi, ("program", "start", "cycles"))
    state = STATE_OF_TYPE[tw.programs["type"][d["program"]]]
    legend = _legend(report.bsp)
    for st, name in ((2, "sync"), (0, "compute")):
        i = int(np.flatnonzero((state == st) & (d["cycles"] > 50))[0])
        a, c = float(d["start"][i]), float(d["cycles"][i])
        report.timeline.set_x_range(a, a + c)
        report.update_bsp()
        assert report.bsp.wait_for_cells()
        tiles = tw.access.tile_cycles(np.array([d["program"][i]]))[0]
        tile = int(np.argmax(tiles))
        assert _rgb(report.bsp, a + 1, tile + 0.5) == legend[name]
    assert legend["sync"] != legend["idle"]


def test_vertical_zoom_over_tiles(qtbot, report):
    """The wheel zooms the tiles about the pointer, the range box takes a typed range, the axis
    is in tile ids, and each row is then one tile."""
    bsp = report.bsp
    assert bsp.tile_range == (0, 64)
    bsp.tiles_edit.setText("16-31")
    bsp.tiles_edit.returnPressed.emit()
    qtbot.waitUntil(lambda: bsp.states.tile_edges[0] == 16 and bsp.states.tile_edges[-1] == 32)
    assert bsp.states.rows == 16  # one row per tile
    y0, y1 = bsp.vb.viewRange()[1]
    assert (round(y0), round(y1)) == (16, 32)  # the axis reads tile ids
    # the wheel zooms in about the tile under the pointer
    vb = bsp.vb
    scene = vb.mapViewToScene(QPointF(sum(report.timeline.x_range()) / 2, 20.0))
    pos = bsp.plot.mapFromScene(scene)
    ev = QWheelEvent(
        QPointF(pos),
        QPointF(bsp.plot.mapToGlobal(pos)),
        QPoint(0, 0),
        QPoint(0, 240),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.ControlModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    bsp.plot.viewport().setFocus()
    from PySide6.QtWidgets import QApplication

    QApplication.sendEvent(bsp.plot.viewport(), ev)
    qtbot.waitUntil(lambda: bsp.states.tile_edges[-1] - bsp.states.tile_edges[0] < 16)
    a, b = bsp.tile_range
    assert a <= 20 < b and b - a < 16
    # a bad range says so in one sentence and keeps the view
    bsp.tiles_edit.setText("40-x")
    bsp.tiles_edit.returnPressed.emit()
    assert "cannot read" in bsp.readout.text() and bsp.tile_range == (a, b)
    bsp.all_tiles_button.click()
    qtbot.waitUntil(lambda: bsp.states.tile_edges[-1] - bsp.states.tile_edges[0] == 64)
    # hovering names the cell's tiles and shares
    t = sum(report.timeline.x_range()) / 2
    text = bsp.cell_text(t, 5.5)
    assert text.startswith("tile") and "compute" in text and "idle" in text
    row = report.trace.step_at(0, t)
    if row is not None:  # and names the step running there
        assert text.endswith(f"step {report.trace.step_details(row)['name']}")


def test_compare_mode_shows_a_or_b(qtbot, tmp_path, path):
    """In compare mode the Profile box picks A's or B's BSP view (same cycles and tiles)."""
    from analyser.gui.model.document import Document
    from analyser.gui.reports.trace import TraceReport

    other = tmp_path / "b.h5"
    write_profile(other, make_synthetic_profile(n_steps=3_000, n_ipus=2, tiles=64, n_programs=90))
    r = TraceReport()
    qtbot.addWidget(r)
    r.resize(1100, 760)
    r.show()
    a, b = Document.open(path), Document.open(other)
    try:
        r.set_document(a, b)
        r.tabs.setCurrentWidget(r.bsp)
        r.update_bsp()
        assert r.bsp.wait_for_cells()
        assert r.bsp.profile_combo.isVisible()
        assert r.bsp.label.text().startswith("A: ")
        t0, t1 = r.timeline.x_range()
        lo, hi = r.trace.row_range(0, t0, t1)
        assert 0 < r.bsp.states.n_steps <= hi - lo
        n_a = r.bsp.states.n_steps
        r.bsp.profile_combo.setCurrentIndex(1)
        assert r.bsp.wait_for_cells()
        assert r.bsp.label.text().startswith("B: ")
        want = r.trace_b.access.read(*r.trace_b.access.ipu_rows(0), ("start", "cycles"))
        inside = (want["start"] < t1) & (want["start"] + want["cycles"] > t0) & (want["cycles"] > 0)
        assert 0 < r.bsp.states.n_steps <= int(inside.sum()) and r.bsp.states.n_steps != n_a
        assert (r.bsp.states.t0, r.bsp.states.t1) == (t0, t1)
    finally:
        r.shutdown()
        r.close()
        a.close()
        b.close()
