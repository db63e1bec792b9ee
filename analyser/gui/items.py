"""Graphics items shared by the reports' plots.

:class:`BatchedRectsItem` draws many filled rectangles the way pyqtgraph's ``BarGraphItem`` does:
each group's rectangles are written from numpy straight into a ``QRectF`` array (pyqtgraph's
``PrimitiveArray``) and drawn with one ``QPainter.drawRects`` call per brush, with no outline and
no antialiasing, so a redraw of millions of steps or tens of thousands of tile bars is a few C++
calls, never a Python loop over rectangles. The execution trace (one group per step type), the
pipeline chart (one per pass) and the memory report's stacked tile bars (one per category) all
draw with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from pyqtgraph.Qt import internals
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QPainter


class BatchedRectsItem(pg.GraphicsObject):
    """Filled rectangles, one ``drawRects`` call per group; later groups paint over earlier ones.

    ``set_groups([(brush, rects), ...])`` with ``rects`` an ``(n, 4)`` array of x, y, width,
    height in data coordinates. ``draw_calls`` (of the last paint) and ``n_rects`` are kept for
    tests and benchmarks.
    """

    def __init__(self) -> None:
        super().__init__()
        self._groups: list[tuple[QBrush, internals.PrimitiveArray]] = []
        self._bounds = QRectF()
        self.draw_calls = 0
        self.n_rects = 0

    def set_groups(
        self, groups: Sequence[tuple[QBrush, np.ndarray]], bounds: QRectF | None = None
    ) -> None:
        """Replace the rectangles. Empty groups are skipped. ``bounds`` (data coordinates)
        defaults to the union of the rectangles."""
        self.prepareGeometryChange()
        kept = []
        xmin = ymin = np.inf
        xmax = ymax = -np.inf
        total = 0
        for brush, rects in groups:
            if not len(rects):
                continue
            prim = internals.PrimitiveArray(QRectF, 4)
            prim.resize(len(rects))
            prim.ndarray()[:] = rects
            kept.append((brush, prim))
            xmin = min(xmin, float(rects[:, 0].min()))
            xmax = max(xmax, float((rects[:, 0] + rects[:, 2]).max()))
            ymin = min(ymin, float(rects[:, 1].min()))
            ymax = max(ymax, float((rects[:, 1] + rects[:, 3]).max()))
            total += len(rects)
        self._groups = kept
        self.n_rects = total
        if bounds is not None:
            self._bounds = bounds
        else:
            self._bounds = QRectF(xmin, ymin, xmax - xmin, ymax - ymin) if total else QRectF()
        self.update()

    def paint(self, painter: QPainter, *args) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        painter.setPen(Qt.PenStyle.NoPen)
        calls = 0
        for brush, prim in self._groups:
            painter.setBrush(brush)
            painter.drawRects(*prim.drawargs())
            calls += 1
        self.draw_calls = calls

    def boundingRect(self) -> QRectF:
        return self._bounds
