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

from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from pyqtgraph.Qt import internals
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QWidget


class BatchedRectsItem(pg.GraphicsObject):
    """Filled rectangles, one ``drawRects`` call per group; later groups paint over earlier ones.

    ``set_groups([(brush, rects), ...])`` with ``rects`` an ``(n, 4)`` array of x, y, width,
    height in data coordinates. ``draw_calls`` (of the last paint) and ``n_rects`` are kept for
    tests and benchmarks.
    """

    #: a chart's static picture (widgets.cache_static_items caches it in charts that ask)
    STATIC_PICTURE = True

    def __init__(self) -> None:
        super().__init__()
        #: called at the start of each paint (None: nothing): an owner that draws at screen
        #: resolution refreshes its groups there (``set_groups(..., in_paint=True)``) once per
        #: paint, with the view's final range and width, instead of at every range change a
        #: layout pass makes on its way there
        self.before_paint: Callable[[], None] | None = None
        self._groups: list[tuple[QBrush, internals.PrimitiveArray]] = []
        self._bounds = QRectF()
        self.draw_calls = 0
        self.n_rects = 0

    def set_groups(
        self,
        groups: Sequence[tuple[QBrush, np.ndarray]],
        bounds: QRectF | None = None,
        in_paint: bool = False,
    ) -> None:
        """Replace the rectangles. Empty groups are skipped. ``bounds`` (data coordinates)
        defaults to the union of the rectangles. ``in_paint``: called from :attr:`before_paint`
        with the bounds unchanged (no geometry change announced, no repaint asked)."""
        if not in_paint:
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
        if not in_paint:
            self.update()

    def brushes(self) -> list[QBrush]:
        """The brushes of the groups drawn (empty groups left out)."""
        return [brush for brush, _prim in self._groups]

    def groups(self) -> list[tuple[QBrush, np.ndarray]]:
        """The groups drawn (empty ones left out): brush and a copy of its ``(n, 4)`` x, y,
        width, height."""
        return [(brush, np.array(prim.ndarray(), copy=True)) for brush, prim in self._groups]

    def paint(self, painter: QPainter, *args) -> None:
        if self.before_paint is not None:
            self.before_paint()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        painter.setPen(Qt.PenStyle.NoPen)
        calls = 0
        view = self.viewRect()
        for brush, prim in self._groups:
            painter.setBrush(brush)
            painter.drawRects(*self._clipped(prim, view).drawargs())
            calls += 1
        self.draw_calls = calls

    @staticmethod
    def _clipped(prim, view: QRectF | None):
        """``prim`` with every rectangle cut to the view widened by one view on each side: a
        rectangle thousands of million pixels wide (a whole-run host wait seen in a window of a
        few thousand cycles) overflows the painter's device coordinates and is not drawn at all.
        The rectangles themselves are kept whole (a copy is cut, only when one sticks out)."""
        if view is None or not view.isValid():
            return prim
        r = prim.ndarray()
        w, h = view.width(), view.height()
        lo_x, hi_x = view.left() - w, view.right() + w
        lo_y, hi_y = view.top() - h, view.bottom() + h
        x0, y0 = r[:, 0], r[:, 1]
        x1, y1 = x0 + r[:, 2], y0 + r[:, 3]
        if not ((x0 < lo_x).any() or (x1 > hi_x).any() or (y0 < lo_y).any() or (y1 > hi_y).any()):
            return prim
        cx0, cx1 = np.clip(x0, lo_x, hi_x), np.clip(x1, lo_x, hi_x)
        cy0, cy1 = np.clip(y0, lo_y, hi_y), np.clip(y1, lo_y, hi_y)
        out = internals.PrimitiveArray(QRectF, 4)
        out.resize(len(r))
        out.ndarray()[:] = np.column_stack([cx0, cy0, cx1 - cx0, cy1 - cy0])
        return out

    def boundingRect(self) -> QRectF:
        # cut to the view widened by one view on each side, as the painted rectangles: Qt maps
        # the bounds to device coordinates to decide whether to paint, and bounds thousands of
        # million pixels wide overflow there (the item was not painted at all)
        view = self.viewRect()
        if view is None or not view.isValid() or self._bounds.isEmpty():
            return self._bounds
        wide = view.adjusted(-view.width(), -view.height(), view.width(), view.height())
        cut = self._bounds.intersected(wide)
        return cut if not cut.isEmpty() else QRectF(self._bounds.topLeft(), self._bounds.topLeft())

    def viewRangeChanged(self) -> None:
        self.prepareGeometryChange()  # the bounds follow the view (boundingRect)
        super().viewRangeChanged()

    def dataBounds(self, ax: int, frac: float = 1.0, orthoRange=None):
        """The rectangles' whole extent along ``ax`` (for the view's auto-range, which the cut
        bounding rectangle would shrink to the view)."""
        b = self._bounds
        if b.isEmpty() and b.width() == 0 and b.height() == 0:
            return None
        return (b.left(), b.right()) if ax == 0 else (b.top(), b.bottom())


class SliceLabelsItem(pg.GraphicsObject):
    """Names drawn inside rectangles (Perfetto's slice titles): centred in the visible part of
    each rectangle, elided with "…" to its width, and left out where fewer than
    :attr:`MIN_CHARS` letters fit. Only the rectangles the caller passes are labelled (the
    visible ones wide enough for a label), so a paint is a few hundred ``drawText`` calls at
    most, at every zoom.

    ``set_labels(rects, texts, dark)``: ``rects`` an ``(n, 4)`` array of x, y, width, height in
    data coordinates; ``dark[i]`` True for a light fill (dark text), else white text.
    ``drawn`` (the labels of the last paint, elided) and ``drawn_px`` (the room each had, in
    pixels) are kept for tests.
    """

    #: Narrowest label in pixels (about three letters); narrower rectangles get none.
    MIN_PX = 22
    #: Fewest letters of an elided name worth drawing (with its "…").
    MIN_CHARS = 3
    #: Horizontal padding inside a rectangle, pixels.
    PAD_PX = 3

    def __init__(self, point_size: int = 8) -> None:
        super().__init__()
        self._rects = np.zeros((0, 4))
        self._texts: list[str] = []
        self._dark = np.zeros(0, dtype=bool)
        self.font = QFont()
        self.font.setPointSize(point_size)
        self._metrics = QFontMetrics(self.font)
        # the first elision loads the font's shaping data (tens of ms): here, not mid-zoom
        self._metrics.elidedText("warm up", Qt.TextElideMode.ElideRight, 30)
        #: elided names by (name, room in 4-pixel steps): pans and zooms show the same steps
        self._elided: dict[tuple[str, int], str] = {}
        self.drawn: list[str] = []
        self.drawn_px: list[float] = []
        self.setZValue(5)

    def set_labels(self, rects: np.ndarray, texts: Sequence[str], dark: np.ndarray) -> None:
        self.prepareGeometryChange()
        self._rects = np.asarray(rects, dtype=np.float64).reshape(-1, 4)
        self._texts = list(texts)
        self._dark = np.asarray(dark, dtype=bool)
        self.update()

    def boundingRect(self) -> QRectF:
        if not len(self._rects):
            return QRectF()
        r = self._rects
        x0, y0 = float(r[:, 0].min()), float(r[:, 1].min())
        x1, y1 = float((r[:, 0] + r[:, 2]).max()), float((r[:, 1] + r[:, 3]).max())
        return QRectF(x0, y0, x1 - x0, y1 - y0)

    def paint(self, painter: QPainter, *args) -> None:
        self.drawn = []
        self.drawn_px = []
        if not len(self._rects):
            return
        t = painter.transform()  # data -> device (scale and translation only)
        r = self._rects
        left = t.m11() * r[:, 0] + t.m31()
        right = t.m11() * (r[:, 0] + r[:, 2]) + t.m31()
        top = t.m22() * r[:, 1] + t.m32()
        bottom = t.m22() * (r[:, 1] + r[:, 3]) + t.m32()
        left, right = np.minimum(left, right), np.maximum(left, right)
        top, bottom = np.minimum(top, bottom), np.maximum(top, bottom)
        # only the part of the rectangle in view holds its label
        vb = self.getViewBox()
        if vb is not None:
            view = vb.viewRect()
            a = t.m11() * view.left() + t.m31()
            b = t.m11() * view.right() + t.m31()
            left = np.maximum(left, min(a, b))
            right = np.minimum(right, max(a, b))
        left = left + self.PAD_PX
        right = right - self.PAD_PX
        room = right - left
        fm = self._metrics
        keep = np.flatnonzero((room >= self.MIN_PX) & (bottom - top >= fm.height() * 0.8))
        if not len(keep):
            return
        painter.save()
        painter.resetTransform()
        painter.setFont(self.font)
        pens = (QPen(QColor(255, 255, 255)), QPen(QColor(20, 20, 20)))
        flags = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextSingleLine
        elide = Qt.TextElideMode.ElideRight
        if len(self._elided) > 20_000:
            self._elided.clear()
        for i in keep:  # the labels that fit: bounded by the visible pixels, not by steps
            key = (self._texts[i], int(room[i]) // 4)
            text = self._elided.get(key)
            if text is None:
                text = self._elided[key] = fm.elidedText(key[0], elide, key[1] * 4)
            if text != self._texts[i] and len(text) < self.MIN_CHARS + 1:
                continue  # too few letters before the ellipsis to tell names apart
            painter.setPen(pens[int(self._dark[i])])
            painter.drawText(QRectF(left[i], top[i], room[i], bottom[i] - top[i]), int(flags), text)
            self.drawn.append(text)
            self.drawn_px.append(float(room[i]))
        painter.restore()


class PointLabelsItem(pg.GraphicsObject):
    """Short texts centred on points, each drawn only where its box is wider on screen than the
    text (the pipeline chart's micro-batch numbers: thin boxes would print their numbers on top
    of each other). One item paints every label of a chart in its ``paint``: a pyqtgraph
    ``TextItem`` per label cost ~0.3 ms each to build and add, and was moved on every change of
    the view.

    ``set_labels(x, y, widths, texts)``: centres in data coordinates, each box's width in data
    units. :meth:`shown` gives the labels that fit at a scale; ``drawn`` (text, centre x and y in
    pixels, text width in pixels, of the last paint) is kept for tests.
    """

    #: Room in pixels a box needs beyond its text's width.
    PAD_PX = 6

    def __init__(self, color: QColor | None = None, font: QFont | None = None) -> None:
        super().__init__()
        self.font = QFont(font) if font is not None else QFont()
        self._metrics = QFontMetrics(self.font)
        self._pen = QPen(color if color is not None else QColor(255, 255, 255))
        self._x = np.zeros(0)
        self._y = np.zeros(0)
        self._w = np.zeros(0)
        self._adv = np.zeros(0)
        self.texts: list[str] = []
        self.drawn: list[tuple[str, float, float, float]] = []

    def set_labels(
        self, x: np.ndarray, y: np.ndarray, widths: np.ndarray, texts: Sequence[str]
    ) -> None:
        self.prepareGeometryChange()
        self._x = np.asarray(x, dtype=np.float64)
        self._y = np.asarray(y, dtype=np.float64)
        self._w = np.asarray(widths, dtype=np.float64)
        self.texts = list(texts)
        advances = {t: self._metrics.horizontalAdvance(t) for t in set(self.texts)}
        self._adv = np.array([advances[t] for t in self.texts], dtype=np.float64)
        self.update()

    def fits(self, px_per_unit: float) -> np.ndarray:
        """Indices of the labels whose box is wide enough at ``px_per_unit`` pixels per x
        unit."""
        return np.flatnonzero(self._w * abs(px_per_unit) >= self._adv + self.PAD_PX)

    def shown(self, px_per_unit: float) -> list[tuple[float, float, str]]:
        """(x, y, text) of the labels drawn at ``px_per_unit`` pixels per x unit."""
        return [
            (float(self._x[i]), float(self._y[i]), self.texts[i]) for i in self.fits(px_per_unit)
        ]

    def boundingRect(self) -> QRectF:
        if not len(self._x):
            return QRectF()
        x0 = float((self._x - self._w / 2).min())
        x1 = float((self._x + self._w / 2).max())
        y0, y1 = float(self._y.min()) - 0.5, float(self._y.max()) + 0.5
        return QRectF(x0, y0, x1 - x0, y1 - y0)

    def paint(self, painter: QPainter, *args) -> None:
        self.drawn = []
        t = painter.transform()  # data -> device (scale and translation only)
        keep = self.fits(t.m11())
        if not len(keep):
            return
        cx = t.m11() * self._x[keep] + t.m31()
        cy = t.m22() * self._y[keep] + t.m32()
        h = float(self._metrics.height())
        painter.save()
        painter.resetTransform()
        painter.setFont(self.font)
        painter.setPen(self._pen)
        flags = int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextSingleLine)
        for j, i in enumerate(keep):
            adv = float(self._adv[i])
            text = self.texts[i]
            painter.drawText(QRectF(cx[j] - adv / 2 - 1, cy[j] - h / 2, adv + 2, h), flags, text)
            self.drawn.append((text, float(cx[j]), float(cy[j]), adv))
        painter.restore()


class ArrowsItem(pg.GraphicsObject):
    """Arrows from (x0, y0) to (x1, y1) in data coordinates (Perfetto's flow arrows), one pen
    per group, heads drawn in pixels (they keep their size at every zoom). The caller passes
    the arrows of the visible window only, capped, so a paint is a few hundred lines.

    ``set_arrows([(pen, xy), ...])`` with ``xy`` an ``(n, 4)`` array of x0, y0, x1, y1."""

    #: Arrow head length and half width, pixels.
    HEAD_PX = (7.0, 3.5)

    def __init__(self) -> None:
        super().__init__()
        self._groups: list[tuple[QPen, np.ndarray]] = []
        self.n_arrows = 0
        self.setZValue(9)

    def set_arrows(self, groups: Sequence[tuple[QPen, np.ndarray]]) -> None:
        self.prepareGeometryChange()
        self._groups = [(pen, np.asarray(xy, dtype=np.float64)) for pen, xy in groups if len(xy)]
        self.n_arrows = sum(len(xy) for _p, xy in self._groups)
        self.update()

    def boundingRect(self) -> QRectF:
        if not self._groups:
            return QRectF()
        xy = np.concatenate([xy for _p, xy in self._groups])
        xs, ys = xy[:, [0, 2]], xy[:, [1, 3]]
        return QRectF(xs.min(), ys.min(), xs.max() - xs.min(), ys.max() - ys.min())

    def paint(self, painter: QPainter, *args) -> None:
        if not self._groups:
            return
        t = painter.transform()
        painter.save()
        painter.resetTransform()
        length, half = self.HEAD_PX
        for pen, xy in self._groups:
            x0 = t.m11() * xy[:, 0] + t.m31()
            y0 = t.m22() * xy[:, 1] + t.m32()
            x1 = t.m11() * xy[:, 2] + t.m31()
            y1 = t.m22() * xy[:, 3] + t.m32()
            dx, dy = x1 - x0, y1 - y0
            norm = np.maximum(np.hypot(dx, dy), 1e-9)
            ux, uy = dx / norm, dy / norm
            # the head's two barbs, from the tip back along the arrow and to each side
            bx, by = x1 - ux * length, y1 - uy * length
            lx, ly = bx - uy * half, by + ux * half
            rx, ry = bx + uy * half, by - ux * half
            # shafts and barbs as one path of segments (pyqtgraph fills it from numpy)
            xs = np.stack([x0, x1, x1, lx, x1, rx], axis=1).ravel()
            ys = np.stack([y0, y1, y1, ly, y1, ry], axis=1).ravel()
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawPath(pg.arrayToQPath(xs, ys, connect="pairs"))
        painter.restore()


#: pyqtgraph items that work out their bounds lazily from the view (in ``boundingRect``) and
#: call ``prepareGeometryChange`` there when the view's range or size changed
LAZY_BOUNDS = (pg.InfiniteLine, pg.LinearRegionItem)


def settle_item_bounds(root: QWidget) -> None:
    """Let the lines and bands of the shown plots under ``root`` work out their bounds now,
    before the window's next paint. Left to the paint (the first ``boundingRect`` after a
    range or size change), their ``prepareGeometryChange`` marked them dirty in the middle of
    it, and each plot holding one was painted a second time in a pass of its own (a compare
    first visit of the Execution Trace: the overview and both timelines)."""
    for view in root.findChildren(pg.GraphicsView):
        scene = view.scene()
        if view.isVisible() and scene is not None:
            # the view boxes' pending transforms first (what a paint does before drawing),
            # which drop the items' bounds
            scene.prepareForPaint()
            for item in scene.items():
                if isinstance(item, LAZY_BOUNDS) and item.isVisible():
                    item.boundingRect()
