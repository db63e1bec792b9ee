"""Side panels of the Execution Trace: visible-range summary, step details, search (the BSP view
is in bsp.py)."""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from analyser.core.quantities import columns
from analyser.core.units import (
    MISSING,
    MemoryUnits,
    fmt_bytes,
    fmt_change,
    fmt_int,
    fmt_pct,
    fmt_pts_delta,
)
from analyser.gui.axes import use_cycle_axis
from analyser.gui.model.trace import (
    STATISTICS_BY,
    STEP_TYPES,
    RangeStatistics,
    RangeSummary,
    SearchResult,
    TraceWindow,
)
from analyser.gui.palette import qcolor
from analyser.gui.plots import LightPlotWidget
from analyser.gui.theme import style_plot
from analyser.gui.widgets import FilterTable, compact_rows, headed_column, wrapped_label

#: Most search hits listed in the results table (the total is always shown).
MAX_LISTED_HITS = 2000


def _item(text: str, align_right: bool = False, color: QColor | None = None) -> QTableWidgetItem:
    it = QTableWidgetItem(text)
    it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if align_right:
        it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if color is not None:
        it.setForeground(QBrush(color))
    return it


def _table(headers: list[str]) -> QTableWidget:
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setAlternatingRowColors(True)
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    t.horizontalHeader().setStretchLastSection(True)
    compact_rows(t)
    return t


#: Titles of the range statistics' groupings.
STATISTICS_TITLES = {"name": "step name", "operation": "operation"}


class RangeSummaryPanel(QWidget):
    """Cycles by step type, tile balance and StreamCopy of the visible or selected range (A, B,
    delta), and the range's steps aggregated by step name or operation (profile A; a sortable,
    filterable table: Perfetto's area-selection statistics)."""

    #: the memory units preference (the report sets it)
    units: MemoryUnits = MemoryUnits.KIB

    #: the grouping of the statistics changed (the report recomputes them)
    groupingChanged = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        lay, self.header = headed_column(self)
        self.explain = wrapped_label(rich=True)
        self.explain.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.table = _table(["", "cycles", "share", "steps"])
        header = self.table.horizontalHeader()
        # labels and figures side by side (not a stretched label column pushing the figures
        # to the far edge)
        header.setStretchLastSection(False)
        # the range's steps by name / operation beside the table of step types
        stats = QWidget()
        stats_lay = QVBoxLayout(stats)
        stats_lay.setContentsMargins(0, 0, 0, 0)
        by_row = QHBoxLayout()
        self.stats_label = QLabel("Steps in the range by")
        self.stats_label.setWordWrap(True)  # a long profile name must not widen the panel
        by_row.addWidget(self.stats_label)
        self.stats_by = QComboBox()
        for key in STATISTICS_BY:
            self.stats_by.addItem(STATISTICS_TITLES[key], key)
        self.stats_by.currentIndexChanged.connect(
            lambda _i: self.groupingChanged.emit(self.stats_by.currentData())
        )
        by_row.addWidget(self.stats_by)
        # compare mode: whose steps (A or B) the table lists
        self.stats_of = QComboBox()
        self.stats_of.currentIndexChanged.connect(lambda _i: self._show_compared())
        self.stats_of.hide()
        by_row.addWidget(self.stats_of)
        self._compared: tuple = ()
        by_row.addStretch(1)
        stats_lay.addLayout(by_row)
        self.stats_table = FilterTable("Filter by name or type")
        stats_lay.addWidget(self.stats_table, 1)
        self.statistics: RangeStatistics | None = None
        # in compare mode the explanations sit beside the tables, which keep their height
        row = QSplitter(Qt.Orientation.Horizontal)
        row.setChildrenCollapsible(False)
        row.addWidget(self.table)
        # the steps' table keeps room for its columns and rows (it read one row wide and cut
        # at 1,600 px in compare mode)
        stats.setMinimumWidth(420)
        row.addWidget(stats)
        # the explanations scroll in a column of readable width instead of wrapping one word
        # per line
        self.explain_box = QScrollArea()
        self.explain_box.setWidgetResizable(True)
        self.explain_box.setFrameShape(QFrame.Shape.NoFrame)
        self.explain_box.setWidget(self.explain)
        self.explain_box.setMinimumWidth(300)
        self.explain_box.setMaximumWidth(460)
        self.explain_box.hide()
        row.addWidget(self.explain_box)
        row.setStretchFactor(0, 2)
        row.setStretchFactor(1, 3)
        row.setStretchFactor(2, 2)
        # the three keep their widths (above) inside a scroll area: a window narrower than
        # them scrolls this panel instead of growing past the screen (their 1,321 px in
        # compare mode made a 1,280-px window 1,515 px wide)
        fit = QScrollArea()
        fit.setWidgetResizable(True)
        fit.setFrameShape(QFrame.Shape.NoFrame)
        fit.setWidget(row)
        lay.addWidget(fit, 1)
        self.summaries: list[RangeSummary] = []
        #: "Visible range" or "Selected range" (what the figures are of)
        self.what = "Visible range"

    @property
    def grouping(self) -> str:
        """The statistics' grouping: "name" or "operation"."""
        return self.stats_by.currentData()

    def set_compared_statistics(
        self, a: RangeStatistics, b: RangeStatistics | None, names: tuple[str, str]
    ) -> None:
        """Compare mode: the range's steps of A and of B; a box chooses which are listed."""
        self._compared = ((a, f"A: {names[0]}"), (b, f"B: {names[1]}"))
        labels = [label for _s, label in self._compared]
        if [self.stats_of.itemText(i) for i in range(self.stats_of.count())] != labels:
            self.stats_of.blockSignals(True)
            self.stats_of.clear()
            self.stats_of.addItems(labels)
            self.stats_of.blockSignals(False)
        self.stats_of.show()
        self._show_compared()

    def _show_compared(self) -> None:
        if self._compared:
            stats, label = self._compared[max(0, self.stats_of.currentIndex())]
            self.set_statistics(stats, label, compared=True)

    def set_statistics(
        self, stats: RangeStatistics | None, profile: str = "", compared: bool = False
    ) -> None:
        """The range's steps by name or operation (None: clear). Columns and formats from the
        catalogue (``analyser.core.quantities.TABLES["range_statistics"]``)."""
        if not compared:  # a single profile: no A / B box
            self._compared = ()
            self.stats_of.hide()
        self.statistics = stats
        if stats is None:
            self.stats_table.set_frame(None)
            return
        first = "Step name" if stats.by == "name" else "Operation"
        self.stats_table.set_frame(stats.table, columns("range_statistics", name=first))
        of = f" of {profile}" if profile else ""
        self.stats_label.setText(
            f"{stats.n_steps:,} steps{of} in the range ({len(stats.table):,} "
            f"{'names' if stats.by == 'name' else 'operations'}), by"
        )

    def set_pending(self, t0: float, t1: float, what: str = "Visible range") -> None:
        """Say that the summary of [t0, t1] is being computed (it reads every visible step in
        the background; on a large trace that takes a moment): the previous figures stay,
        greyed, instead of an empty or silently stale table."""
        self.header.setText(
            f"Summarising cycles {fmt_int(max(t0, 0))} .. {fmt_int(t1)} in the background…"
        )
        self.table.setEnabled(False)
        self.stats_table.setEnabled(False)
        self.what = what

    def set_summaries(
        self, a: list[RangeSummary], b: list[RangeSummary] | None = None, names=("A", "B")
    ) -> None:
        """One summary per IPU of profile A (and, in compare mode, of profile B)."""
        self.summaries = list(a) + list(b or [])
        self.table.setEnabled(True)
        self.stats_table.setEnabled(True)
        compare = b is not None
        b = b or []
        if compare:
            headers = ["", f"A: {names[0]}", f"B: {names[1]}", "B − A"]
        else:
            headers = ["", "cycles", "share of busy", "steps"]
        self.table.clear()
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)

        def total(ss, fn):
            return sum(fn(s) for s in ss) if ss else None

        span = a[0].span if a else 0
        t0, t1 = (fmt_int(a[0].t0), fmt_int(a[0].t1)) if a else (MISSING, MISSING)
        self.header.setText(
            f"{self.what} {t0} .. {t1}"
            f" ({fmt_int(span)} cycles) on {len(a)} IPU(s): steps overlapping the range, cycles"
            " clipped to it."
        )
        rows: list[tuple[str, list[str], QColor | None]] = []
        types = [t for t in STEP_TYPES if any(t in s.cycles_by_type for s in a + b)]
        busy_a = total(a, lambda s: s.busy_cycles) or 0
        busy_b = total(b, lambda s: s.busy_cycles)
        for t in types:
            ca = total(a, lambda s, t=t: s.cycles_by_type.get(t, 0))
            color = qcolor("step_types", t)
            if compare:
                cb = total(b, lambda s, t=t: s.cycles_by_type.get(t, 0))
                rows.append((t, [fmt_int(ca), fmt_int(cb), fmt_change(ca, cb)], color))
            else:
                na = total(a, lambda s, t=t: s.steps_by_type.get(t, 0))
                share = fmt_pct(ca / busy_a if busy_a else None)
                rows.append((t, [fmt_int(ca), share, fmt_int(na)], color))
        if compare:
            busy = [fmt_int(busy_a), fmt_int(busy_b), fmt_change(busy_a, busy_b)]
        else:
            busy = [fmt_int(busy_a), "", fmt_int(total(a, lambda s: s.n_steps))]
        rows.append(("busy cycles (all IPUs)", busy, None))
        for i, sa in enumerate(a):
            sb = b[i] if i < len(b) else None
            bal = [fmt_pct(sa.tile_balance)]
            if compare:
                balance_b = sb.tile_balance if sb else None
                bal += [fmt_pct(balance_b), fmt_pts_delta(sa.tile_balance, balance_b)]
            else:
                bal += ["", ""]
            rows.append((f"IPU {sa.ipu} tile balance", bal, None))
            for direction in ("received", "sent"):
                dests = set(sa.streamcopy[direction]) | set(sb.streamcopy[direction] if sb else {})
                for dest in sorted(dests):
                    va = sa.streamcopy[direction].get(dest, 0)
                    if compare:
                        vb = sb.streamcopy[direction].get(dest, 0) if sb else None
                        u = self.units
                        vals = [fmt_bytes(va, u), fmt_bytes(vb, u), fmt_change(va, vb, u.value)]
                    else:
                        vals = [fmt_bytes(va, self.units), "", ""]
                    rows.append((f"IPU {sa.ipu} StreamCopy {direction} · {dest}", vals, None))
        self.table.setRowCount(len(rows))
        for r, (label, vals, color) in enumerate(rows):
            self.table.setItem(r, 0, _item(label, color=color))
            for c, v in enumerate(vals):
                self.table.setItem(r, c + 1, _item(v, align_right=True))
        # the figures keep their width: in compare mode (A, B, B - A) the statistics beside
        # them squeezed the table to its first letters behind a scroll bar
        header = self.table.horizontalHeader()
        needed = sum(header.sectionSize(c) for c in range(self.table.columnCount()))
        needed += 2 * self.table.frameWidth() + self.table.verticalScrollBar().sizeHint().width()
        self.table.setMinimumWidth(min(needed, 760))

    def set_explanations(self, comparison) -> None:
        """The analysis core's explained comparison (``PairComparison``) of the whole runs, or
        None outside compare mode."""
        self.explanations = [] if comparison is None else list(comparison.explanations)
        if comparison is None:
            self.explain_box.hide()
            return
        diffs = [d for d in comparison.config_diffs if d.key != "name"]
        options = ", ".join(f"{d.key} {d.before!r} → {d.after!r}" for d in diffs) or "none"
        items = "".join(f"<li>{html.escape(e.text)}</li>" for e in self.explanations[:8])
        more = "".join(f"<li>{html.escape(t)}</li>" for t in comparison.other_deltas[:3])
        self.explain.setText(
            f"<b>Whole runs (analysis core):</b> run options that differ: {html.escape(options)}."
            + (f"<ul style='margin:2px'>{items}{more}</ul>" if items or more else "")
        )
        self.explain_box.show()

    def value(self, label: str, column: int = 1) -> str:
        """Text of the row whose first column is ``label`` (for tests)."""
        for r in range(self.table.rowCount()):
            if self.table.item(r, 0).text() == label:
                return self.table.item(r, column).text()
        raise KeyError(label)


class StepDetailsPanel(QWidget):
    """Every field of the selected step, and its per-tile cycles."""

    #: the memory units preference (the report sets it)
    units: MemoryUnits = MemoryUnits.KIB

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        self.table = _table(["field", "value"])
        lay.addWidget(self.table, 2)
        # the per-tile plot is built when the panel is first shown or a step selected (it sits
        # in a tab behind the range summary: a pyqtgraph plot no first visit of the trace
        # needs)
        self._plot: pg.PlotWidget | None = None
        self._slot = QWidget()
        lay.addWidget(self._slot, 3)
        self.details: dict | None = None
        self.show_details(None)

    @property
    def plot(self) -> pg.PlotWidget:
        """The per-tile cycles plot (built on first use)."""
        if self._plot is None:
            plot = LightPlotWidget(enableMenu=False)
            style_plot(plot)
            plot.setLabel("bottom", "tile")
            plot.setLabel("left", "cycles")
            use_cycle_axis(plot, "left")
            plot.setMenuEnabled(False)
            self._curve = pg.PlotDataItem(
                stepMode="center",
                fillLevel=0,
                brush=qcolor("step_types", "OnTileExecute", 160),
                pen=None,
            )
            plot.addItem(self._curve)
            plot.setTitle("")  # the title's row, as with a step without per-tile cycles
            self.layout().replaceWidget(self._slot, plot)
            self._slot.deleteLater()
            self._plot = plot
        return self._plot

    @property
    def curve(self) -> pg.PlotDataItem:
        """The plot's step curve of the selected step's per-tile cycles."""
        self.plot  # noqa: B018 - builds it
        return self._curve

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.plot  # noqa: B018 - the empty plot's axes show before a step is selected

    def show_details(self, details: dict | None, tile_cycles: np.ndarray | None = None) -> None:
        self.details = details
        if details is None:
            self.table.setRowCount(1)
            self.table.setItem(0, 0, _item("no step selected"))
            self.table.setItem(0, 1, _item("click a step in the timeline or a search result"))
            if self._plot is not None:
                self.curve.setData([], [])
                self.plot.setTitle("")
            return
        self.table.setRowCount(len(details))
        for r, (k, v) in enumerate(details.items()):
            if isinstance(v, float):
                text = fmt_pct(v) if k == "tile balance" else f"{v:,.3f}"
            elif isinstance(v, int) and not isinstance(v, bool):
                text = (
                    fmt_bytes(v, self.units) + f" ({v:,} B)"
                    if k.startswith("bytes") and v
                    else f"{v:,}"
                )
            else:
                text = str(v)
            self.table.setItem(r, 0, _item(k))
            self.table.setItem(
                r, 1, _item(text, color=qcolor("step_types", text) if k == "type" else None)
            )
        if tile_cycles is not None and len(tile_cycles):
            self.curve.setData(np.arange(len(tile_cycles) + 1), tile_cycles.astype(np.float64))
            self.curve.setBrush(qcolor("step_types", details.get("type", ""), 170))
            self.plot.setTitle(f"cycles per tile of {details['name'][:60]}", size="9pt")
        else:
            self.curve.setData([], [])
            self.plot.setTitle("")  # a host event (or a step without per-tile cycles)


class SearchPanel(QWidget):
    """Search steps by program, operation, module path or source over the whole trace."""

    activated = Signal(int)  # global row
    #: the search box is done with the keys: Enter found steps, or Esc (the trace takes the
    #: focus back, so W / A / S / D drive it instead of typing into the box)
    finished = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        row = QHBoxLayout()
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("Search steps by program, operation, module or source file…")
        self.edit.setClearButtonEnabled(True)
        self.button = QPushButton("Find")
        self.prev_button = QPushButton("◀")
        self.next_button = QPushButton("▶")
        for w in (self.prev_button, self.next_button):
            w.setFixedWidth(32)
        row.addWidget(self.edit, 1)
        row.addWidget(self.button)
        row.addWidget(self.prev_button)
        row.addWidget(self.next_button)
        lay.addLayout(row)
        self.status = QLabel("")
        lay.addWidget(self.status)
        self.table = _table(["#", "IPU", "start", "cycles", "name"])
        self.table.cellDoubleClicked.connect(lambda r, _c: self._activate(r))
        self.table.cellClicked.connect(lambda r, _c: self._activate(r))
        lay.addWidget(self.table)
        self.trace: TraceWindow | None = None
        self.result: SearchResult | None = None
        self.current = -1
        self.edit.returnPressed.connect(self._on_enter)
        self.edit.installEventFilter(self)
        self.button.clicked.connect(self.run)
        self.next_button.clicked.connect(lambda: self.step(1))
        self.prev_button.clicked.connect(lambda: self.step(-1))

    def _on_enter(self) -> None:
        res = self.run()
        if res is not None and res.total:
            self.finished.emit()

    def eventFilter(self, obj, event) -> bool:
        if (
            obj is self.edit
            and event.type() == QEvent.Type.KeyPress
            and event.key() == Qt.Key.Key_Escape
        ):
            self.finished.emit()
            return True
        return super().eventFilter(obj, event)

    def set_trace(self, trace: TraceWindow | None) -> None:
        self.trace = trace
        self.result = None
        self.table.setRowCount(0)
        self.status.setText("")

    def run(self, text: str | None = None) -> SearchResult | None:
        if text is not None:
            self.edit.setText(text)
        if self.trace is None:
            return None
        text = self.edit.text().strip()
        if not text:
            self.status.setText("Type part of a step name.")
            return None
        res = self.trace.search(text, limit=MAX_LISTED_HITS)
        self.result = res
        self.current = -1
        n = len(res.rows)
        self.status.setText(
            f"{res.total:,} steps match “{text}”"
            + (f" (first {n:,} listed)" if res.total > n else "")
            + ("." if res.total else ": no step has that name.")
        )
        names = self.trace.programs["name"]
        self.table.setUpdatesEnabled(False)
        self.table.setRowCount(n)
        for i in range(n):
            self.table.setItem(i, 0, _item(f"{i + 1}", True))
            self.table.setItem(i, 1, _item(str(int(res.ipu[i])), True))
            self.table.setItem(i, 2, _item(f"{int(res.start[i]):,}", True))
            self.table.setItem(i, 3, _item(f"{int(res.cycles[i]):,}", True))
            self.table.setItem(i, 4, _item(str(names[int(res.program[i])])))
        self.table.setUpdatesEnabled(True)
        if n:
            self.step(1)
        return res

    def step(self, delta: int) -> None:
        if self.result is None or not len(self.result.rows):
            return
        self.current = (self.current + delta) % len(self.result.rows)
        self._activate(self.current)

    def _activate(self, i: int) -> None:
        if self.result is None or not 0 <= i < len(self.result.rows):
            return
        self.current = i
        self.table.selectRow(i)
        self.activated.emit(int(self.result.rows[i]))
