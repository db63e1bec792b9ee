"""The Execution Trace's critical path: the "Critical path" check box, the sentence beside it,
and the highlight drawn on each timeline.

The path comes from the Qt-free view-model :mod:`analyser.viewmodels.critical_path`, computed
once per document in this module's own pool thread (the first time the box is ticked, or
taken from the document's cache when the Pipeline computed it first) and handed over whole.
On each redraw a timeline's :class:`CriticalPathOverlay` draws, for its visible window only,
the pixels of each lane where the path mostly is, outlined in the palette's critical colour,
the rest of every visible lane dimmed (:func:`~analyser.viewmodels.critical_path.pixel_runs`:
numpy over the segments in view, never a loop over steps). A profile without a path shows the one sentence why in place of the
highlight.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QObject, Qt, QThreadPool, Signal
from PySide6.QtGui import QBrush, QColor, QPainter, QPen
from PySide6.QtWidgets import QCheckBox, QLabel

from analyser.gui.items import BatchedRectsItem
from analyser.gui.model.timeline import host_rects
from analyser.gui.palette import qcolor
from analyser.gui.theme import chart_colors
from analyser.gui.widgets import PoolTask, Relay
from analyser.viewmodels.critical_path import (
    CriticalPathView,
    cached_view,
    of_document,
    pixel_runs,
)

#: Opacity (0-255) of the veil over the steps off the path.
VEIL_ALPHA = 165
#: Width of the path's outline in pixels.
OUTLINE_PX = 2


def _rects(runs: np.ndarray, top: float, height: float) -> np.ndarray:
    """``(n, 4)`` rectangles of runs (start, end, row y) from ``top`` of the row, ``height``
    of it."""
    rects = np.empty((len(runs), 4))
    rects[:, 0] = runs[:, 0]
    rects[:, 1] = runs[:, 2] + top
    rects[:, 2] = runs[:, 1] - runs[:, 0]
    rects[:, 3] = height
    return rects


class OutlineRectsItem(BatchedRectsItem):
    """Rectangles drawn as outlines only (one ``drawRects`` call per group, no fill)."""

    def __init__(self, pen: QPen) -> None:
        super().__init__()
        self.pen = pen

    def paint(self, painter: QPainter, *args) -> None:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        painter.setPen(self.pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        view = self.viewRect()
        for _brush, prim in self._groups:
            painter.drawRects(*self._clipped(prim, view).drawargs())
        self.draw_calls = len(self._groups)


class CriticalPathOverlay:
    """The critical path's highlight on one timeline (``timeline.critical``)."""

    def __init__(self, timeline) -> None:
        self.timeline = timeline
        self.view: CriticalPathView | None = None
        plot = timeline.getPlotItem()
        self.veil_item = BatchedRectsItem()
        self.veil_item.setZValue(5)  # over the steps, under the flows' arrows and the selection
        self.outline_item = OutlineRectsItem(self._pen())
        self.outline_item.setZValue(6)
        plot.addItem(self.veil_item, ignoreBounds=True)
        plot.addItem(self.outline_item, ignoreBounds=True)
        #: (start, end, row y) of the runs drawn by the last redraw (tests read them)
        self.runs: tuple[np.ndarray, np.ndarray, np.ndarray] = (np.zeros(0),) * 3

    @staticmethod
    def _pen() -> QPen:
        pen = QPen(qcolor("status", "critical"))
        pen.setCosmetic(True)
        pen.setWidth(OUTLINE_PX)
        return pen

    @property
    def active(self) -> bool:
        return self.view is not None and self.view.available and self.timeline.trace is not None

    def set_path(self, view: CriticalPathView | None) -> None:
        """Highlight ``view``'s path (None: no highlight) and redraw."""
        self.view = view
        self.outline_item.pen = self._pen()  # the theme may have changed
        if self.timeline.trace is not None:
            self.redraw(*self.timeline.x_range(), self.timeline.pixel_width())
        else:
            self.clear()

    def clear(self) -> None:
        self.veil_item.set_groups([])
        self.outline_item.set_groups([])
        self.runs = (np.zeros(0),) * 3

    def _lanes(self) -> np.ndarray | None:
        """The lane of every path step under the timeline's grouping (None: flat)."""
        group = self.timeline.group
        if group == "flat":
            return None
        fn, _cols = self.timeline.trace._lane_fn(group)
        v = self.view
        return np.asarray(fn({"start": v.start, "stage": v.stage, "program": v.program}))

    def redraw(self, t0: float, t1: float, width: int) -> None:
        """Draw the path's steps of the visible window ``[t0, t1)`` (``width`` pixels)."""
        if not self.active or not t1 > t0:
            self.clear()
            return
        tl, v = self.timeline, self.view
        key = "flat" if tl.group == "flat" else (tl.group, id(tl.trace))
        seg = v.segments(key, None if tl.group == "flat" else self._lanes)
        layout = tl.lane_layout
        xs0, xs1, ys, rows_y = [], [], [], []
        for ipu in layout.ipus_between(*tl.y_range()):  # the IPUs in view, not the steps
            block = layout.block(("ipu", ipu))
            if block is not None:
                rows_y.append(layout.row_y(block.key, np.arange(len(block.labels))))
            sl = v.window(seg, ipu, t0, t1)
            y = layout.lane_y(ipu, seg.lane[sl])
            shown = np.isfinite(y)
            xs0.append(seg.start[sl][shown].astype(np.float64))
            xs1.append(seg.end[sl][shown].astype(np.float64))
            ys.append(y[shown])
        lanes_y = np.concatenate(rows_y) if rows_y else np.zeros(0)
        if not xs0:
            self.clear()
            return
        on, off = pixel_runs(
            np.concatenate(xs0),
            np.concatenate(xs1),
            np.concatenate(ys),
            lanes_y[np.isfinite(lanes_y)],
            t0,
            t1,
            width,
        )
        self.runs = (on[:, 0], on[:, 1], on[:, 2])
        veil_color = QColor(chart_colors().background)
        veil_color.setAlpha(VEIL_ALPHA)
        self.veil_item.set_groups([(QBrush(veil_color), _rects(off, 0.0, 1.0))])
        self.outline_item.set_groups(
            [(QBrush(), _rects(on, 0.06, 0.88)), (QBrush(), self._host_rects())]
        )

    def _host_links(self) -> tuple[np.ndarray, dict]:
        """Which host events (rows of the timeline's host lanes) are links of the path: the
        main lane's before the call (preparing the samples, waiting for the loader, the
        call's round trip), and those links by kind."""
        host = self.timeline.host
        links = {lv.key.split(".", 1)[1]: lv for lv in self.view.links if lv.kind == "host"}
        if not len(host) or not links:
            return np.zeros(len(host), dtype=bool), links
        kind = host["kind"]
        mask = (host["lane"] == "main") & (host["start"] < 0)
        return mask & np.isin(kind, list(links)), links

    def _host_rects(self) -> np.ndarray:
        mask, _links = self._host_links()
        if not mask.any():
            return np.zeros((0, 4))
        return host_rects(self.timeline.lane_layout, self.timeline.host.take(mask))[0]

    def host_note(self, row: int) -> str:
        """The tooltip's line for host event ``row`` (of the timeline's host lanes) when it
        is a link of the path, else ""."""
        if not self.active:
            return ""
        mask, links = self._host_links()
        if not 0 <= row < mask.size or not mask[row]:
            return ""
        return "On the critical path: " + links[str(self.timeline.host["kind"][row])].describe()

    def note(self, row: int) -> str:
        """The tooltip's and the side panel's line for step ``row`` ("" off the path)."""
        if not self.active:
            return ""
        return self.view.row_note(row, self.timeline.restricted)


class CriticalPathControl(QObject):
    """The report's "Critical path" check box and sentence, and the path's background build."""

    #: The path (or the reason there is none) is shown on the timelines and in the sentence.
    shown = Signal()

    def __init__(self, report) -> None:
        super().__init__(report)
        self.report = report
        self.box = QCheckBox("&Critical path")
        self.box.setToolTip(
            "Highlight the chain of steps across the IPUs, syncs and the host that sets the "
            "length of the call (Alt+C); hover a step for its link's share"
        )
        self.box.toggled.connect(self._on_toggled)
        self.label = QLabel("")
        self.label.setWordWrap(True)
        self.label.hide()
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._relay = Relay(self)
        self._relay.done.connect(self._on_built)
        self._gen = 0
        #: the views shown, A's then B's (None: not computed yet / no B)
        self.views: tuple[CriticalPathView | None, CriticalPathView | None] = (None, None)

    def _docs(self):
        r = self.report
        other = r.compare_doc if r.trace_b is not None else None
        return r.document, other

    def refresh(self) -> None:
        """The documents or the run changed: show the path again (computed if need be)."""
        self._gen += 1
        if not self.box.isChecked() or self.report.trace is None:
            self._apply(None, None)
            self.label.hide()
            return
        doc, other = self._docs()
        a = cached_view(doc)
        b = cached_view(other) if other is not None else None
        if a is not None and (other is None or b is not None):
            self._apply(a, b)
            return
        self.label.setText("Critical path: finding it (once per profile)…")
        self.label.show()
        gen = self._gen
        self._pool.start(
            PoolTask(
                lambda: (of_document(doc), of_document(other) if other is not None else None),
                gen,
                self._relay,
            )
        )

    def _on_toggled(self, _on: bool) -> None:
        self.refresh()

    def _on_built(self, gen: int, result: object) -> None:
        if gen != self._gen or self.report.trace is None:
            return
        if isinstance(result, Exception):  # of_document gives reasons, not exceptions
            self.label.setText(f"Critical path: it could not be computed ({result}).")
            self.label.show()
            self.shown.emit()
            return
        self._apply(*result)

    def _apply(self, a: CriticalPathView | None, b: CriticalPathView | None) -> None:
        self.views = (a, b)
        r = self.report
        r.timeline.critical.set_path(a)
        if r._timeline_b is not None:
            r._timeline_b.critical.set_path(b)
        if a is None:
            return
        lines = [self._sentence(a, r.timeline, "A: " if b is not None else "")]
        if b is not None:
            lines.append(self._sentence(b, r.timeline_b, "B: "))
        self.label.setText("\n".join(lines))
        self.label.show()
        self.shown.emit()

    @staticmethod
    def _sentence(view: CriticalPathView, timeline, prefix: str) -> str:
        if not view.available:  # every reason names the critical path
            return f"{prefix}{view.reason}"
        text = view.headline(span=timeline.restricted)
        return f"{prefix}{text} (outlined in red, the other steps dimmed)"

    def cancel(self) -> None:
        """A path still being computed is of documents no longer shown: dropped on arrival."""
        self._gen += 1

    def shutdown(self) -> None:
        self.cancel()
        self._pool.waitForDone(30_000)
