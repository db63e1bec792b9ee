"""The Pipeline report's per-stage bars: busy cycles and stash memory per stage, of one profile
or of two side by side.

One profile: a bar per stage (wide: all its steps over the whole run; narrow: its
OnTileExecute compute), the bottleneck stage in the critical colour and labelled, and the stash
bytes per stage. Two profiles (compare mode): grouped bars, A left of each stage's centre and B
right of it, B's hatched (a pattern that also reads in grayscale), on ONE y axis per plot so that
A's and B's bars compare by eye, each profile's bottleneck labelled with its letter. Profiles
with different stage counts draw the stages they have (the other's are missing, not errors).

Every plot keeps one :class:`analyser.gui.items.BatchedRectsItem` for its bars and its
bottleneck labels across refreshes: a refresh replaces rectangle arrays and texts, it creates
no graphics items.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QHBoxLayout, QSizePolicy, QWidget

from analyser.core.units import MemoryUnits, axis_scale
from analyser.gui.axes import CycleAxis, fixed_prefix_axes
from analyser.gui.items import BatchedRectsItem
from analyser.gui.model.pipeline import PipelineChart
from analyser.gui.palette import hex_color, qcolor
from analyser.gui.plots import LightPlotWidget
from analyser.gui.reports.trace.critical import OutlineRectsItem
from analyser.gui.theme import chart_colors, label_fill, style_plot
from analyser.gui.widgets import cache_static_items

#: Bar widths (stage units): (all steps, compute) alone; halved when two profiles share a stage.
WIDE, NARROW = 0.6, 0.3
#: Offset of A's and B's bars from their stage's centre in compare mode.
COMPARE_OFFSET = 0.2
#: Room above the tallest bar for its label (share of the tallest bar).
HEADROOM = 1.15
LOAD_TITLE = "Busy cycles per stage, whole run (wide bar: all steps; narrow: compute)"
STASH_TITLE = "Stash memory per stage"
#: What the titles add in compare mode, on a line of their own (on the same line the busy
#: cycles' title was wider than half the report: pyqtgraph widens a plot to its title, and the
#: plot's right part was cut off)
COMPARE_NOTE = "A left, B right (hatched)"


def hatch_brush() -> QBrush:
    """The pattern drawn over profile B's bars: diagonal lines of the chart's background
    colour (cosmetic: the same pixels at every zoom), so B reads apart from A in grayscale."""
    color = QColor(chart_colors().background)
    color.setAlpha(230)
    return QBrush(color, Qt.BrushStyle.BDiagPattern)


def bar_rects(x: np.ndarray, heights: np.ndarray, width: float) -> np.ndarray:
    """``(n, 4)`` x, y, width, height of bars centred on ``x`` rising from 0."""
    rects = np.zeros((len(x), 4))
    rects[:, 0] = np.asarray(x, dtype=float) - width / 2
    rects[:, 2] = width
    rects[:, 3] = np.asarray(heights, dtype=float)
    return rects


class StageBarsView(QWidget):
    """Busy cycles and stash memory per stage of one profile, or of two side by side."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.load = self._plot(CycleAxis("left"))
        self.stash = self._plot(None)
        lay.addWidget(self.load)
        lay.addWidget(self.stash)
        self.load_bars = BatchedRectsItem()
        self.stash_bars = BatchedRectsItem()
        self.load.addItem(self.load_bars)
        self.stash.addItem(self.stash_bars)
        #: the bottleneck labels, by profile letter (only A's in single mode)
        self.marks = {p: pg.TextItem("", anchor=(0.5, 1)) for p in "AB"}
        for mark in self.marks.values():
            mark.setVisible(False)
            self.load.addItem(mark)
        #: the stages on the critical path: their wide bars outlined, each with its share
        self.path_outline = OutlineRectsItem(self._path_pen())
        self.path_outline.setZValue(5)
        self.load.addItem(self.path_outline)
        self._path_labels: list[pg.TextItem] = []
        #: the shares drawn: {(profile, stage): share of the call}
        self.path_shares: dict[tuple[str, int], float] = {}
        # not Ignored (its plots are): a box layout's height-for-width counts an Ignored
        # widget as 0 tall, and the report's body, sized by it, then overlapped its parts
        self.setMinimumHeight(170)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        #: the profiles drawn: ``[("A", chart), ("B", chart)]`` (one entry in single mode)
        self.profiles: list[tuple[str, PipelineChart]] = []
        #: x of each profile's bars relative to its stage's centre
        self.offsets: dict[str, float] = {}
        #: divisor and unit of the stash axis
        self.stash_scale: tuple[float, str] = (1.0, "")
        #: the bars drawn, by (plot, profile): ``("load", "A")`` the wide bars of all steps
        #: (``(n, 4)`` x, y, width, height, one per stage of that profile), ``("compute", "A")``
        #: the narrow ones, ``("stash", "A")`` the stash bars (in the axis' unit)
        self.drawn: dict[tuple[str, str], np.ndarray] = {}

    @staticmethod
    def _plot(left_axis: CycleAxis | None) -> pg.PlotWidget:
        plot = LightPlotWidget(
            enableMenu=False, axisItems={"left": left_axis} if left_axis is not None else None
        )
        style_plot(plot)
        plot.setMenuEnabled(False)
        fixed_prefix_axes(plot)  # labels without units: nothing to prefix
        # sized by the space available, not by pyqtgraph's size hints (see PipelineChartView)
        plot.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Ignored)
        plot.setMinimumHeight(170)
        cache_static_items(plot)
        return plot

    def show_profiles(
        self, a: PipelineChart, b: PipelineChart | None = None, units: MemoryUnits = MemoryUnits.KIB
    ) -> None:
        """Draw ``a`` alone, or ``a`` and ``b`` side by side (stash axis in ``units``)."""
        self.profiles = [("A", a)] + ([("B", b)] if b is not None else [])
        self.drawn = {}
        compared = b is not None
        self.offsets = {"A": -COMPARE_OFFSET, "B": COMPARE_OFFSET} if compared else {"A": 0.0}
        n = max(c.n_stages for _p, c in self.profiles)
        note = f"<br>{COMPARE_NOTE}" if compared else ""
        self.load.setTitle(LOAD_TITLE + note, size="9pt")
        self.stash.setTitle(STASH_TITLE + note, size="9pt")
        ticks = [[(s, f"stage {s}") for s in range(n)], []]
        for plot in (self.load, self.stash):
            plot.getPlotItem().getAxis("bottom").setTicks(ticks)
            plot.setXRange(-0.6, n - 0.4, padding=0)
        self._draw_load(compared)
        self._draw_stash(units, compared)

    def _draw_load(self, compared: bool) -> None:
        """Busy cycles per stage, the bottleneck marked per pipelined profile, a narrow bar
        for each stage's compute."""
        scale = 0.5 if compared else 1.0
        normal = QBrush(qcolor("passes", "forward"))
        critical = QBrush(qcolor("status", "critical"))
        compute = QBrush(qcolor("step_types", "OnTileExecute", 255).lighter(140))
        groups: list[tuple[QBrush, np.ndarray]] = []
        hatched: list[np.ndarray] = []
        top = 0.0
        for mark in self.marks.values():
            mark.setVisible(False)
        for p, c in self.profiles:
            x = np.arange(c.n_stages) + self.offsets[p]
            cycles = np.asarray(c.stage_cycles[: c.n_stages], dtype=float)
            wide = bar_rects(x, cycles, WIDE * scale)
            narrow = bar_rects(x, c.stage_compute_cycles[: c.n_stages], NARROW * scale)
            self.drawn[("load", p)], self.drawn[("compute", p)] = wide, narrow
            neck = np.zeros(c.n_stages, dtype=bool)
            if c.pipelined and len(cycles):
                neck[c.bottleneck] = True
            groups += [(normal, wide[~neck]), (critical, wide[neck]), (compute, narrow)]
            if p == "B":
                hatched.append(wide)
            if len(cycles):
                top = max(top, float(cycles.max()))
            if neck.any():
                self._mark(p, c, compared)
        groups += [(hatch_brush(), r) for r in hatched]
        self.load_bars.set_groups(groups)
        self.load.getPlotItem().getAxis("left").setWidth(64)
        self.load.setYRange(0, max(1.0, top) * HEADROOM, padding=0)

    @staticmethod
    def _path_pen():
        from PySide6.QtGui import QPen

        # the chart's foreground, dashed: it reads on the bottleneck's red bar as on the others
        pen = QPen(QColor(chart_colors().foreground))
        pen.setCosmetic(True)
        pen.setWidth(2)
        pen.setStyle(Qt.PenStyle.DashLine)
        return pen

    def show_path(self, shares: dict[str, dict[int, float]]) -> None:
        """Outline the wide bar of every stage on the critical path and write its share of
        the call inside it (``shares``: {profile letter: {stage: share}}; {} clears)."""
        self.path_shares = {}
        rects = []
        for p, by_stage in shares.items():
            wide = self.drawn.get(("load", p))
            if wide is None:
                continue
            for stage, share in sorted(by_stage.items()):
                if 0 <= stage < len(wide):
                    rects.append(wide[stage])
                    self.path_shares[(p, stage)] = share
        self.path_outline.pen = self._path_pen()
        self.path_outline.set_groups([(QBrush(), np.array(rects).reshape(-1, 4))])
        while len(self._path_labels) < len(self.path_shares):
            label = pg.TextItem("", anchor=(0.5, 0.5))
            label.setZValue(6)
            self.load.addItem(label)
            self._path_labels.append(label)
        # compared, the bars are half as wide: the short word
        word = "path" if len(self.profiles) > 1 else "critical path"
        for label, ((_p, _s), share), rect in zip(
            self._path_labels, self.path_shares.items(), rects, strict=False
        ):
            label.setText(f"{word} {100 * share:.1f}%")
            label.setColor(hex_color("status_text", "critical"))
            label.fill = label_fill()
            label.setPos(rect[0] + rect[2] / 2, rect[3] / 2)
            label.setVisible(True)
        for label in self._path_labels[len(self.path_shares) :]:
            label.setVisible(False)

    def _mark(self, p: str, c: PipelineChart, compared: bool) -> None:
        """Label profile ``p``'s bottleneck bar ("bottleneck"; compared, "A: bottleneck" left of
        the stage's centre and "B: bottleneck" right of it, so the two never overprint)."""
        mark = self.marks[p]
        mark.setColor(hex_color("status_text", "critical"))
        mark.setText(f"{p}: bottleneck" if compared else "bottleneck")
        mark.setAnchor((1, 1) if compared and p == "A" else (0, 1) if compared else (0.5, 1))
        mark.setPos(c.bottleneck, float(c.stage_cycles[c.bottleneck]))
        mark.setVisible(True)

    def _draw_stash(self, units: MemoryUnits, compared: bool) -> None:
        """Stash memory per stage on one axis for both profiles, in the units preference
        (it was MiB always)."""
        peak = max(
            (float(c.stash_bytes.max()) if len(c.stash_bytes) else 0.0) for _p, c in self.profiles
        )
        scale, unit = axis_scale(units, peak)
        self.stash_scale = (scale, unit)
        brush = QBrush(qcolor("variable_kinds", "stash"))
        groups: list[tuple[QBrush, np.ndarray]] = []
        hatched: list[np.ndarray] = []
        width = WIDE * (0.5 if compared else 1.0)
        for p, c in self.profiles:
            stash = np.asarray(c.stash_bytes[: c.n_stages], dtype=float) / scale
            rects = bar_rects(np.arange(len(stash)) + self.offsets[p], stash, width)
            self.drawn[("stash", p)] = rects
            groups.append((brush, rects))
            if p == "B":
                hatched.append(rects)
        groups += [(hatch_brush(), r) for r in hatched]
        self.stash_bars.set_groups(groups)
        self.stash.setLabel("left", unit)
        self.stash.setYRange(0, max(1.0, peak / scale * HEADROOM), padding=0)
