"""Charts repaint from cached pictures and a report's layout settles before its first paint
(later visits of the Memory and Liveness reports replayed every bar and curve;
a compare-mode first visit of the Memory report painted its charts three or four times)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QGraphicsItem, QLabel, QVBoxLayout, QWidget

pytestmark = pytest.mark.gui


def _painted_plot(qtbot):
    from analyser.gui.items import BatchedRectsItem
    from analyser.gui.widgets import make_plot

    plot = make_plot(left="bytes", bottom="tile")
    qtbot.addWidget(plot)
    bars = BatchedRectsItem()
    rects = np.column_stack([np.arange(500.0), np.zeros(500), np.ones(500), np.arange(500.0)])
    bars.set_groups([(QBrush(QColor("#4e79a7")), rects)])
    plot.getPlotItem().addItem(bars)
    plot.resize(400, 300)
    plot.show()
    qtbot.waitExposed(plot)
    plot.grab()
    return plot, bars


def test_a_repaint_at_the_same_range_copies_the_cached_picture(qtbot):
    plot, bars = _painted_plot(qtbot)
    device = QGraphicsItem.CacheMode.DeviceCoordinateCache
    assert bars.cacheMode() == device
    for name in ("left", "bottom"):
        assert plot.getPlotItem().getAxis(name).cacheMode() == device
    first = plot.grab().toImage()
    bars.draw_calls = 0
    again = plot.grab().toImage()
    assert bars.draw_calls == 0  # no rectangle replayed
    assert again == first  # the same picture
    # a new range draws the bars again, at the new scale
    plot.getPlotItem().setXRange(0, 100, padding=0)
    plot.grab()
    assert bars.draw_calls == 1


def test_items_added_later_are_cached_too(qtbot):
    import pyqtgraph as pg

    plot, _bars = _painted_plot(qtbot)
    curve = pg.PlotCurveItem(np.arange(10.0), np.arange(10.0))
    line = pg.InfiniteLine(pos=3.0)
    plot.getPlotItem().addItem(curve)
    plot.getPlotItem().addItem(line)
    plot.grab()
    assert curve.cacheMode() == QGraphicsItem.CacheMode.DeviceCoordinateCache
    # a line that highlights on hover is drawn directly
    assert line.cacheMode() == QGraphicsItem.CacheMode.NoCache


def test_settle_layouts_lays_out_before_the_event_loop_runs(qtbot):
    from analyser.gui.widgets import settle_layouts

    top = QWidget()
    qtbot.addWidget(top)
    layout = QVBoxLayout(top)
    title, below = QLabel("one line"), QLabel("below")
    layout.addWidget(title)
    layout.addWidget(below)
    layout.addStretch(1)
    top.resize(300, 300)
    top.show()
    qtbot.waitExposed(top)
    y = below.y()
    title.setText("\n".join(["a taller title"] * 5))  # posts a layout request
    assert below.y() == y
    settle_layouts()
    assert below.y() > y + 30
