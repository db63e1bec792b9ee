"""BSP view of the Execution Trace: tiles x time for one IPU, each cell coloured by the BSP state
(compute, exchange, sync, idle) with the largest share of its time, paler when that share is
smaller, x linked with the timeline, with vertical zoom over the tiles. The numbers come from :mod:`analyser.trace.bsp`; this widget only
draws them."""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QThreadPool, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

from analyser.core.units import fmt_int, fmt_pct
from analyser.gui.axes import short_cycles, use_cycle_axis
from analyser.gui.model.trace import BSP_STATES, TYPES_OF_STATE, BspStates, bsp_states, dominant
from analyser.gui.palette import hex_color
from analyser.gui.plots import LightPlotWidget
from analyser.gui.reports.trace.lane_items import LANE_AXIS_PX
from analyser.gui.theme import chart_colors, style_plot
from analyser.gui.widgets import PoolTask, Relay, headed_column, wrapped_label

#: Wheel zoom factor over the tiles per wheel notch.
WHEEL_ZOOM = 1.25
#: Delay after a vertical zoom / pan before the cells are recomputed (ms).
REQUERY_MS = 60


def state_colors() -> list[str]:
    """``'#rrggbb'`` of each BSP state, from the palette (``bsp_states``)."""
    return [hex_color("bsp_states", s) for s in BSP_STATES]


class _TileViewBox(pg.ViewBox):
    """x follows the timeline (no mouse); the wheel zooms the tiles about the pointer (with or
    without Ctrl), drag pans them."""

    def __init__(self, owner: BspView) -> None:
        super().__init__(enableMenu=False)  # menus off: none to build
        self.owner = owner
        self.setMouseEnabled(x=False, y=True)

    def wheelEvent(self, ev, axis=None) -> None:
        delta = ev.delta() if hasattr(ev, "delta") else ev.angleDelta().y()
        if not delta:
            return
        y = self.mapSceneToView(ev.scenePos()).y()
        self.owner.zoom_tiles(WHEEL_ZOOM ** (delta / 120), y)
        ev.accept()


class BspView(QWidget):
    """Tiles x time cells of one IPU coloured by their dominant BSP state."""

    #: the plot's view box was resized (the Execution Trace lines it up with its timeline)
    plotResized = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        lay, self.label = headed_column(self)
        self.legend = wrapped_label(rich=True)
        lay.addWidget(self.legend)
        bar = QHBoxLayout()
        self.profile_label = QLabel("Profile:")
        self.profile_combo = QComboBox()
        self.profile_combo.addItems(["A", "B"])
        self.profile_combo.setToolTip("In compare mode: the BSP view of profile A or B")
        self.profile_combo.currentIndexChanged.connect(self._on_profile)
        for w in (self.profile_label, self.profile_combo):
            bar.addWidget(w)
            w.setVisible(False)
        self.tag = ""
        self._args = None
        bar.addWidget(QLabel("Tiles:"))
        self.tiles_edit = QLineEdit()
        self.tiles_edit.setPlaceholderText("e.g. 0-127")
        self.tiles_edit.setMaximumWidth(140)
        self.tiles_edit.setToolTip(
            "Tile range to show (first-last); the wheel over the view zooms the tiles about "
            "the pointer, drag pans them."
        )
        self.tiles_edit.returnPressed.connect(self._typed_range)
        bar.addWidget(self.tiles_edit)
        self.all_tiles_button = QPushButton("All tiles")
        self.all_tiles_button.clicked.connect(self.show_all_tiles)
        bar.addWidget(self.all_tiles_button)
        self.readout = QLabel("")
        self.readout.setTextFormat(Qt.TextFormat.RichText)
        bar.addWidget(self.readout, 1)
        lay.addLayout(bar)
        #: the view's plot, view box and image, built when first used (the view sits on a tab
        #: the Execution Trace does not open on: its pyqtgraph plot is ~15 ms of that report's
        #: first visit)
        self._parts: tuple[pg.PlotWidget, pg.ViewBox, pg.ImageItem] | None = None
        self.states: BspStates | None = None
        #: True when a timeline sets the cycle range (the report lines the two up)
        self.follow_timeline = False
        self._query: tuple[Any, int, float, float, int] | None = None
        self.n_tiles = 0
        self.tile_range: tuple[int, int] = (0, 0)
        self._requery = QTimer(self)
        self._requery.setSingleShot(True)
        self._requery.setInterval(REQUERY_MS)
        self._requery.timeout.connect(self._compute)
        self._setting_range = False
        # cells are computed in a pool thread (about 0.2 s for a whole 250,000-step IPU), the
        # newest request wins
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._gen = 0
        self._relay = Relay(self)
        self._relay.done.connect(self._on_done)
        self.set_legend()

    @property
    def plot(self) -> pg.PlotWidget:
        """The tiles x cycles plot (built on first use)."""
        return self._build()[0]

    @property
    def vb(self) -> pg.ViewBox:
        return self._build()[1]

    @property
    def image(self) -> pg.ImageItem:
        return self._build()[2]

    def _build(self) -> tuple[pg.PlotWidget, pg.ViewBox, pg.ImageItem]:
        if self._parts is None:
            plot = LightPlotWidget(viewBox=_TileViewBox(self))
            style_plot(plot)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.setLabel("left", "tile")
            plot.getPlotItem().getAxis("left").setWidth(LANE_AXIS_PX)
            plot.setLabel("bottom", "cycles")
            use_cycle_axis(plot, "bottom")
            vb = plot.getPlotItem().getViewBox()
            vb.invertY(True)
            vb.disableAutoRange()  # the tile range is ours (a new image must not reset it)
            image = pg.ImageItem(axisOrder="row-major")
            plot.addItem(image)
            self.layout().addWidget(plot, 1)
            plot.show()  # now, not when the layout's queued show comes round
            vb.sigYRangeChanged.connect(self._on_y_range)
            vb.sigResized.connect(self.plotResized)
            plot.scene().sigMouseMoved.connect(self._on_mouse)
            self._parts = (plot, vb, image)
        return self._parts

    def showEvent(self, event) -> None:
        self._build()  # shown: the plot is part of what is painted
        super().showEvent(event)

    # -- legend --------------------------------------------------------------------------------
    def set_legend(self) -> None:
        """One swatch per state in the colour the cells use for it (the same palette entry)."""
        parts = []
        for state, color in zip(BSP_STATES, state_colors(), strict=True):
            types = ", ".join(TYPES_OF_STATE[state]) or "no step, or a tile done early"
            parts.append(
                f"<span style='color:{color}; font-size:14px;'>&#9632;</span>&nbsp;"
                f"<span title='{html.escape(types)}'>{state}</span>"
            )
        self.legend.setText(
            "&nbsp;&nbsp; ".join(parts) + "&nbsp;&nbsp; <i>a cell takes the colour of the state "
            "with most of its cycles, paler when that share is smaller (hover: every share)</i>"
        )
        self.legend_colors = dict(zip(BSP_STATES, state_colors(), strict=True))

    # -- data ----------------------------------------------------------------------------------
    def show_range(
        self,
        trace: Any,
        ipu: int,
        t0: float,
        t1: float,
        width_px: int,
        trace_b: Any = None,
    ) -> None:
        """Show IPU ``ipu`` of ``trace`` (a TraceWindow) over cycles ``[t0, t1)`` in
        ``width_px`` buckets, keeping the tile range unless the IPU's tile count changed. In
        compare mode (``trace_b``), the Profile box picks A's or B's trace."""
        self._args = (trace, int(ipu), float(t0), float(t1), int(max(16, width_px)), trace_b)
        self.profile_combo.setVisible(trace_b is not None)
        self.profile_label.setVisible(trace_b is not None)
        use_b = trace_b is not None and self.profile_combo.currentIndex() == 1
        shown = trace_b if use_b else trace
        ipu = min(int(ipu), shown.n_ipus - 1)
        n_tiles = int(getattr(shown.profile, "tiles_per_ipu", 0) or 0)
        if n_tiles != self.n_tiles or self._query is None:
            self.n_tiles = n_tiles
            self.tile_range = (0, n_tiles)
        self.tag = ("B: " if use_b else "A: ") if trace_b is not None else ""
        self._query = (shown, ipu, float(t0), float(t1), int(max(16, width_px)))
        self._set_y(*self.tile_range)
        self._compute()

    def _on_profile(self, _index: int) -> None:
        if getattr(self, "_args", None) is not None and self._query is not None:
            self.show_range(*self._args[:5], trace_b=self._args[5])

    def clear(self, message: str = "") -> None:
        self._gen += 1
        self._query = None
        self._args = None
        self.states = None
        if self._parts is not None:
            self.image.clear()
        self.label.setText(message)

    def shutdown(self) -> None:
        """Forget pending work and wait for the running computation (the report closes)."""
        self._requery.stop()
        self._gen += 1
        self._pool.waitForDone(30_000)

    def wait_for_cells(self, msecs: int = 30_000) -> bool:
        """Block until the pending computation is shown (tests, screenshots)."""
        from PySide6.QtWidgets import QApplication

        self._requery.stop()
        done = self._pool.waitForDone(msecs)
        QApplication.processEvents()
        return done

    def _compute(self) -> None:
        if self._query is None:
            return
        trace, ipu, t0, t1, width = self._query
        tiles = self.tile_range
        rows = max(16, int(self.vb.height()) or 256)
        self._gen += 1

        def work() -> BspStates:
            return bsp_states(trace, ipu, t0, t1, buckets=min(width, 2048), tiles=tiles, rows=rows)

        self._pool.start(PoolTask(work, self._gen, self._relay))

    def _on_done(self, gen: int, result: object) -> None:
        if gen != self._gen or self._query is None:
            return  # a newer request is on its way, or the view was cleared
        if isinstance(result, Exception):
            self.label.setText(f"The BSP view could not be computed: {result}")
            return
        self.show_states(result)

    def show_states(self, m: BspStates) -> None:
        self.states = m
        colors = np.array([QColor(c).getRgb()[:3] for c in state_colors()], np.float32)
        background = np.array(QColor(chart_colors().background).getRgb()[:3], np.float32)
        rgb = dominant(m.shares, colors, background)  # [bucket, row, 3]
        self.image.setImage(np.ascontiguousarray(rgb.transpose(1, 0, 2)), autoLevels=False)
        a, b = int(m.tile_edges[0]), int(m.tile_edges[-1])
        self.image.setRect(pg.QtCore.QRectF(m.t0, a, m.t1 - m.t0, b - a))
        if not self.follow_timeline:  # in the Trace report, the timeline leads
            self.plot.setXRange(m.t0, m.t1, padding=0)
        self._set_y(a, b)
        self.tiles_edit.setText(f"{a}-{b - 1}")
        mean = m.mean_shares()
        rows = (
            f"{m.rows:,} rows of {(b - a) / m.rows:.1f} tiles" if m.rows < b - a else "a row each"
        )
        self.label.setText(
            f"{self.tag}BSP view of IPU {m.ipu}: {fmt_int(m.n_steps)} steps, tiles {a}-{b - 1} "
            f"({rows}), {m.buckets:,} time buckets of {short_cycles((m.t1 - m.t0) / m.buckets)} "
            "cycles; "
            + ", ".join(f"{s} {fmt_pct(mean[s])}" for s in BSP_STATES)
            + " of the tiles' time."
        )

    # -- tiles (vertical zoom) -----------------------------------------------------------------
    def _set_y(self, a: float, b: float) -> None:
        self._setting_range = True
        try:
            self.vb.setYRange(a, b, padding=0)
        finally:
            self._setting_range = False

    def set_tile_range(self, first: int, end: int) -> None:
        """Show tiles ``[first, end)`` (clamped to the IPU, at least one tile)."""
        n = max(1, self.n_tiles)
        first = int(np.clip(first, 0, n - 1))
        end = int(np.clip(end, first + 1, n))
        if (first, end) == self.tile_range and self.states is not None:
            return
        self.tile_range = (first, end)
        self._set_y(first, end)
        self._requery.start()

    def zoom_tiles(self, factor: float, about: float | None = None) -> None:
        """Zoom the tile axis by ``factor`` (> 1 zooms in) about tile ``about``."""
        a, b = self.tile_range
        about = (a + b) / 2 if about is None else float(np.clip(about, a, b))
        span = max(1.0, (b - a) / factor)
        lo = about - (about - a) * span / (b - a)
        lo = float(np.clip(lo, 0, max(0, self.n_tiles - span)))
        self.set_tile_range(int(np.floor(lo)), int(np.ceil(lo + span)))

    def show_all_tiles(self) -> None:
        self.set_tile_range(0, self.n_tiles)

    def _typed_range(self) -> None:
        text = self.tiles_edit.text().strip()
        try:
            parts = [int(p) for p in text.replace(" ", "").split("-")]
            first, last = (parts[0], parts[0]) if len(parts) == 1 else (parts[0], parts[1])
            if len(parts) > 2 or last < first:
                raise ValueError
        except ValueError:
            self.readout.setText(
                f"<span style='color:{hex_color('status', 'oom')}'>cannot read "
                f"{html.escape(text)!s} as a tile range; type e.g. 0-127.</span>"
            )
            return
        self.set_tile_range(first, last + 1)

    def _on_y_range(self, _vb, rng) -> None:
        if self._setting_range or self._query is None:
            return  # our own setYRange, or nothing shown
        lo, hi = sorted(rng)
        self.tile_range = (
            int(np.clip(np.floor(lo), 0, max(0, self.n_tiles - 1))),
            int(np.clip(np.ceil(hi), 1, self.n_tiles)),
        )
        self._requery.start()

    # -- hover ---------------------------------------------------------------------------------
    def cell_text(self, t: float, tile: float) -> str:
        """What the cell under cycle ``t`` and tile ``tile`` holds, in words."""
        m = self.states
        cell = m.cell(t, tile) if m is not None else None
        if cell is None:
            return ""
        b, r = cell
        a, z = int(m.tile_edges[r]), int(m.tile_edges[r + 1]) - 1
        tiles = f"tile {a}" if a == z else f"tiles {a}-{z}"
        t0, t1 = m.edges[b], m.edges[b + 1]
        shares = ", ".join(
            f"{s} {fmt_pct(float(m.shares[b, r, i]))}" for i, s in enumerate(BSP_STATES)
        )
        text = f"{tiles}, cycles {fmt_int(t0)}-{fmt_int(t1)}: {shares}"
        step = self._step_name(t)
        return f"{text}; step {step}" if step else text

    def _step_name(self, t: float) -> str:
        """Name of the step running at cycle ``t`` on the shown IPU ("" between steps)."""
        if self._query is None:
            return ""
        trace, ipu = self._query[0], self._query[1]
        try:
            row = trace.step_at(ipu, t)
            return str(trace.step_names(np.array([row]))[0]) if row is not None else ""
        except Exception:  # a read-out only: never an error over the view
            return ""

    def _on_mouse(self, pos) -> None:
        if self.states is None or not self.vb.sceneBoundingRect().contains(pos):
            return
        p = self.vb.mapSceneToView(pos)
        self.readout.setText(html.escape(self.cell_text(p.x(), p.y())))
