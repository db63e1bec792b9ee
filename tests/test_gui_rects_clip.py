"""Rectangles far wider than the view are still drawn (clipped to the view before drawing): a
host wait of 20.4G cycles seen in a window of a few thousand cycles."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gui


@pytest.mark.parametrize("x0", [1e10, 12_345.0])
def test_a_rectangle_much_wider_than_the_view_is_drawn(qtbot, x0):
    import pyqtgraph as pg
    from PySide6.QtGui import QBrush, QColor

    from analyser.gui.items import BatchedRectsItem

    plot = pg.PlotWidget()
    qtbot.addWidget(plot)
    plot.resize(640, 240)
    item = BatchedRectsItem()
    colour = QColor(200, 30, 40)
    # one long rectangle (the host's wait, 0 to 20.4G cycles) in lane 0 and a short one in lane 1
    rects = np.array([[0.0, 0.0, 2.04e10, 0.8], [x0 + 10, 1.0, 20.0, 0.8]])
    item.set_groups([(QBrush(colour), rects)])
    plot.addItem(item)
    plot.setXRange(x0, x0 + 59, padding=0)
    plot.setYRange(0, 2, padding=0)
    plot.show()
    qtbot.waitExposed(plot)
    image = plot.grab().toImage()
    if x0 == 1e10:
        image.save(f"/tmp/shots/rects_clip_{int(x0)}.png")
    vb = plot.getPlotItem().getViewBox()
    # sample the middle of each lane, across the view
    for y in (0.4, 1.4):
        hits = 0
        for fx in np.linspace(0.2, 0.8, 7):
            if y == 1.4 and not 0.2 <= fx <= 0.5:
                continue
            p = vb.mapViewToScene(pg.Point(x0 + fx * 59, y))
            p = plot.mapFromScene(p)
            c = image.pixelColor(p.x(), p.y())
            hits += (c.red(), c.green(), c.blue()) == (200, 30, 40)
        assert hits > 0, f"lane at y={y} not drawn"
