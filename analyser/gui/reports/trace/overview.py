"""The Execution Trace's overview strip: the whole run above the lanes (Perfetto's overview).

A plain widget that paints one image and a band: it has no axis to show, no range to pan and
nothing to zoom, so it is not a pyqtgraph plot. As a plot (a graphics view, its scene, a
plot item, four axes and a view box) it cost about 10 ms to build and more to lay out and
paint on the report's first visit; as a widget it costs well under one."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QImage, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from analyser.gui.model.trace import TraceWindow
from analyser.gui.palette import busy_colors
from analyser.gui.theme import chart_colors

#: Pixels either side of a band edge where a press grabs the edge (resizes the window).
EDGE_GRAB_PX = 4
#: Pixels of the label column until the timeline says its own (see align_left).
DEFAULT_LABEL_PX = 120


def _lookup_table() -> list[int]:
    """The busy scale's colours at 256 levels, as the ``qRgb`` values of an indexed image."""
    stops = busy_colors()
    cmap = pg.ColorMap(np.linspace(0, 1, len(stops)), [QColor(c) for c in stops])
    lut = cmap.getLookupTable(nPts=256, alpha=False).astype(np.uint32)
    return [int(v) for v in (0xFF000000 | (lut[:, 0] << 16) | (lut[:, 1] << 8) | lut[:, 2])]


class OverviewStrip(QWidget):
    """The whole run in a strip above the lanes (Perfetto's overview): the busy share of each
    IPU per pixel (one row per IPU, labelled, from the sync grey when waiting to the compute
    blue when busy: the lanes' own colours for the two, where a heat map's dark navy meant
    waiting), the timeline's visible window outlined (a tint would change the colours under
    it). Click to centre the view there (and keep dragging to move it), drag the
    band to move it, drag its edges to resize it. Computed once per profile from the trace's
    pyramids (:meth:`TraceWindow.overview`)."""

    #: the user moved the window: (t0, t1) for the timeline
    windowRequested = Signal(float, float)

    #: Buckets of the overview (a few per pixel of a wide screen).
    BUCKETS = 1200

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.overview = None
        #: the busy shares as an indexed image (a row per IPU, a column per bucket)
        self.image: QImage | None = None
        #: the marked window (cycles), as the timeline last said
        self.band: tuple[float, float] = (0.0, 1.0)
        self._label_px = DEFAULT_LABEL_PX
        #: the drag under way: ("move", grab offset in cycles) or ("edge", 0 / 1)
        self._drag: tuple[str, float] | None = None
        self._font = QFont()
        self._font.setPointSize(8)
        # every pixel is painted (no background to fill first)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self.setFixedHeight(54)
        self.setMouseTracking(True)  # the cursor says what a press would do
        self.setToolTip(
            "The whole run: share of each IPU's time computing or exchanging (blue: busy; "
            "grey: waiting in syncs). Click to move the view there; drag the outlined window "
            "or its edges."
        )

    # -- data ------------------------------------------------------------------------------------
    def set_trace(self, trace: TraceWindow | None) -> None:
        self.overview = None if trace is None else trace.overview(self.BUCKETS)
        self.image = None
        if self.overview is not None:
            busy = np.asarray(self.overview.busy, dtype=np.float64)
            # the index as pyqtgraph's image with levels (0, 1) and a 256-colour table: the
            # share times 256, the full share the last colour
            idx = np.ascontiguousarray(np.clip(busy * 256.0, 0, 255).astype(np.uint8))
            rows, cols = idx.shape
            image = QImage(idx.data, cols, rows, cols, QImage.Format.Format_Indexed8)
            image.setColorTable(_lookup_table())
            self.image = image.copy()  # owns its pixels (idx goes with this call)
        self.update()

    def align_left(self, width: int) -> None:
        """Give the label column ``width`` pixels, as the timeline's lane labels, so the two
        start at the same x."""
        width = max(0, int(width))
        if width != self._label_px:
            self._label_px = width
            self.update()

    def show_window(self, t0: float, t1: float) -> None:
        """Mark the timeline's visible window."""
        band = (float(t0), float(t1))
        if band != self.band:
            self.band = band
            self.update()

    # -- geometry --------------------------------------------------------------------------------
    def plot_rect(self) -> QRectF:
        """Where the run is drawn (widget pixels): right of the label column, a pixel in from
        the edges (as the timelines' plots below)."""
        left = 1 + self._label_px
        return QRectF(left, 1, max(1, self.width() - left - 1), max(1, self.height() - 2))

    def cycle_at(self, x: float) -> float:
        """The cycle under widget x (clamped to the run)."""
        ov, r = self.overview, self.plot_rect()
        f = min(1.0, max(0.0, (x - r.left()) / r.width()))
        return ov.t0 + f * (ov.t1 - ov.t0)

    def x_of(self, cycle: float) -> float:
        """Widget x of ``cycle``."""
        ov, r = self.overview, self.plot_rect()
        return r.left() + (cycle - ov.t0) / max(ov.t1 - ov.t0, 1e-9) * r.width()

    def _hit(self, x: float) -> tuple[str, float] | None:
        """What a press at widget x grabs: a band edge, the band, or nothing."""
        a, b = (self.x_of(c) for c in self.band)
        if abs(x - a) <= EDGE_GRAB_PX:
            return ("edge", 0.0)
        if abs(x - b) <= EDGE_GRAB_PX:
            return ("edge", 1.0)
        if a < x < b:
            return ("move", self.cycle_at(x) - self.band[0])
        return None

    # -- painting --------------------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:
        colors = chart_colors()
        p = QPainter(self)
        try:
            p.fillRect(self.rect(), QColor(colors.background))
            r = self.plot_rect()
            if self._label_px > 8:
                p.setFont(self._font)
                p.setPen(QColor(colors.foreground))
                self._paint_labels(p)
            if self.image is None or self.overview is None:
                return
            p.drawImage(r, self.image)  # each bucket a block of pixels, not smoothed
            a, b = (min(max(self.x_of(c), r.left()), r.right()) for c in self.band)
            band = QRectF(a, r.top() + 1, max(b - a, 1.0), r.height() - 2)
            # outlined, not tinted: a tint would turn the busy blue into another colour
            for color, width in ((colors.background, 4), (colors.foreground, 2)):
                pen = QPen(QColor(color))
                pen.setWidth(width)
                p.setPen(pen)
                p.drawRect(band)
        finally:
            p.end()

    def row_labels(self) -> list[tuple[QRectF, str]]:
        """Where each IPU's row is named in the label column: "IPU n" per row when the rows are
        tall enough to read, else one "IPU 0-n" (or "Overview" before a profile opens)."""
        label = QRectF(0, 0, self._label_px - 4, self.height())
        rows = 0 if self.overview is None else int(np.asarray(self.overview.busy).shape[0])
        if rows == 0:
            return [(label, "Overview")]
        r = self.plot_rect()
        h = r.height() / rows
        if rows == 1 or h < 11:
            return [(label, "IPU 0" if rows == 1 else f"IPUs 0-{rows - 1}")]
        return [
            (QRectF(0, r.top() + i * h, self._label_px - 4, h), f"IPU {i}") for i in range(rows)
        ]

    def _paint_labels(self, p: QPainter) -> None:
        right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        for rect, text in self.row_labels():
            p.drawText(rect, right, text)

    # -- mouse -----------------------------------------------------------------------------------
    def mousePressEvent(self, event: QMouseEvent) -> None:
        if self.overview is None or event.button() != Qt.MouseButton.LeftButton:
            super().mousePressEvent(event)
            return
        x = event.position().x()
        if x < self.plot_rect().left():
            super().mousePressEvent(event)
            return
        event.accept()
        self._drag = self._hit(x)
        if self._drag is None:
            # a press beside the band centres the window there, and a drag carries on from it
            half = (self.band[1] - self.band[0]) / 2
            at = self.cycle_at(x)
            self._drag = ("move", half)
            self.windowRequested.emit(at - half, at + half)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        x = event.position().x()
        if self._drag is None:
            hit = self._hit(x) if self.overview is not None else None
            if hit is None:
                self.unsetCursor()
            elif hit[0] == "edge":
                self.setCursor(Qt.CursorShape.SizeHorCursor)
            else:
                self.setCursor(Qt.CursorShape.OpenHandCursor)
            return
        event.accept()
        at = self.cycle_at(x)
        kind, value = self._drag
        a, b = self.band
        if kind == "move":
            a, b = at - value, at - value + (b - a)
        else:
            # an edge dragged past the other swaps them; at least a pixel's worth of cycles
            a, b = (at, b) if value == 0.0 else (a, at)
            if b < a:
                a, b = b, a
                self._drag = ("edge", 1.0 - value)
            px = (self.overview.t1 - self.overview.t0) / self.plot_rect().width()
            b = max(b, a + px)
        self.windowRequested.emit(a, b)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._drag is not None and event.button() == Qt.MouseButton.LeftButton:
            self._drag = None
            event.accept()
            return
        super().mouseReleaseEvent(event)
