"""Operations report (PopVision's Operations Summary): a sortable, filterable table of the
analysis core's operations DataFrame (cycles, FLOPs, memory, code) through a
QAbstractTableModel, filters by text / pass / IPU, and details of the selected operation (its
figures, variables, compute sets, programs, and charts of its cycles by tile and memory by
category). A software-layer selector shows the same run as the framework's operations (PopTorch
/ PopART), model layers or Poplar programs; a column chooser hides columns (remembered per layer
in the settings). Compare mode joins A and B by name with the change in cycles, memory and
code, and lists rows added or removed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QTableView,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from analyser.core.quantities import VARIABLE_TABLE, columns, step_type_name
from analyser.core.units import axis_scale, fmt_bytes, fmt_count, fmt_pct
from analyser.gui.model import data
from analyser.gui.model.operations import SOFTWARE_LAYERS, software_layer_titles
from analyser.gui.palette import hex_color
from analyser.gui.reports.base import Report, lay_out, shows_profile_problems
from analyser.gui.widgets import (
    RESIZE_PRECISION,
    DataFrameModel,
    FilterTable,
    KeyValueTree,
    compact_rows,
    connect_header_sort,
    make_plot,
    tile_curve,
)

Index = QModelIndex | QPersistentModelIndex


class OperationFilter(QSortFilterProxyModel):
    """Text (name / type / layer) + pass + IPU filter, evaluated with numpy once per change."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._keep: np.ndarray | None = None

    def set_mask(self, keep: np.ndarray | None) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt >= 6.9 (invalidateFilter is deprecated)
            self.beginFilterChange()
            self._keep = keep
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:  # pragma: no cover - older Qt
            self._keep = keep
            self.invalidateFilter()

    def filterAcceptsRow(self, row: int, parent: Index) -> bool:
        if self._keep is None:
            return True
        return bool(self._keep[self.sourceModel().source_row(row)])


#: The operations table's columns for a profile that never ran (out of memory).
NOT_EXECUTED_COLUMNS = (
    "name",
    "type",
    "layer",
    "pass",
    "ipu",
    "stage",
    "memory_bytes",
    "temp_bytes",
    "code_bytes",
    "cycles",
    "flops",
    "tiles_used",
)
#: The catalogue's table (analyser.core.quantities.TABLES) of each software layer.
LAYER_TABLES = {
    "operations": "operations",
    "layers": "operation_layers",
    "programs": "operation_programs",
}
#: Columns that mean nothing for a profile that never ran (out of memory).
EXECUTED_ONLY = ("executions", "total_cycles", "cycles_share", "flops_per_cycle")


class OperationsReport(Report):
    title = "Operations"
    key = "operations"
    data_needs = ("target", "operations", "variables", "compute_sets", "program_nodes")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = DataFrameModel()
        self.proxy = OperationFilter(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setDynamicSortFilter(False)
        self.view = QTableView()
        self.view.setModel(self.proxy)
        connect_header_sort(self.view, self.model)
        self.view.setAlternatingRowColors(True)
        self.view.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QTableView.SelectionMode.SingleSelection)
        self.view.verticalHeader().setVisible(False)
        compact_rows(self.view)
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.view.horizontalHeader().setResizeContentsPrecision(RESIZE_PRECISION)
        self.view.selectionModel().currentRowChanged.connect(lambda cur, _p: self._show_details())

        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter operations by name, type or layer")
        self.filter_edit.setClearButtonEnabled(True)
        self.pass_combo = QComboBox()
        self.ipu_combo = QComboBox()
        self.count_label = QLabel("")
        self.filter_edit.textChanged.connect(lambda _t: self._apply_filter())
        self.pass_combo.currentIndexChanged.connect(lambda _i: self._apply_filter())
        self.ipu_combo.currentIndexChanged.connect(lambda _i: self._apply_filter())
        self.layer_combo = QComboBox()
        self.layer_combo.setToolTip(
            "Software layer: the framework's operations, the model's layers (modules), or the "
            "Poplar programs they lower to"
        )
        for key in SOFTWARE_LAYERS:
            self.layer_combo.addItem(software_layer_titles(None)[key], key)
        self.layer_combo.currentIndexChanged.connect(self._on_layer)
        self.columns_button = QToolButton()
        self.columns_button.setText("Columns")
        self.columns_button.setToolTip("Choose the columns shown (remembered)")
        self.columns_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.columns_menu = QMenu(self.columns_button)
        self.columns_button.setMenu(self.columns_menu)
        self.settings: Any = None
        self._hidden: dict[str, set[str]] = {}
        bar = QHBoxLayout()
        bar.addWidget(self.layer_combo)
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(QLabel("Pass"))
        bar.addWidget(self.pass_combo)
        bar.addWidget(QLabel("IPU"))
        bar.addWidget(self.ipu_combo)
        bar.addWidget(self.count_label)
        bar.addWidget(self.columns_button)

        self.summary_tree = KeyValueTree()
        self.vars_table = FilterTable("Filter variables")
        self.cs_table = FilterTable("Filter compute sets")
        self.progs_table = FilterTable("Filter programs")
        self.details = QTabWidget()
        self.details.addTab(self.summary_tree, "Summary")
        self.details.addTab(self.vars_table, "Variables")
        self.details.addTab(self.cs_table, "Compute sets")
        self.details.addTab(self.progs_table, "Programs")
        # cycles by tile and memory by category of the selected row: built and drawn only
        # when the tab is shown
        self.charts_panel = QWidget()
        QVBoxLayout(self.charts_panel).setContentsMargins(0, 0, 0, 0)
        self.tile_plot: Any = None
        self.memory_plot: Any = None
        self.charts_text = QLabel("")
        self.charts_text.setWordWrap(True)
        self.charts_panel.layout().addWidget(self.charts_text)
        self.details.addTab(self.charts_panel, "Charts")
        self._charts_stale = True
        self.details.currentChanged.connect(lambda _i: self._draw_charts())

        lay_out(self, [bar], self.view, self.details, (520, 280))
        self.frame = pd.DataFrame()

    def chart_widget(self) -> QWidget:
        return self.view

    # ------------------------------------------------------------------ table
    @property
    def layer(self) -> str:
        """The software layer shown: ``operations``, ``layers`` or ``programs``."""
        return str(self.layer_combo.currentData() or "operations")

    def set_layer(self, layer: str) -> None:
        self.layer_combo.setCurrentIndex(SOFTWARE_LAYERS.index(layer))

    def _columns(self, compare: bool, executed: bool = True) -> list:
        name = {"operations": "Operation", "layers": "Layer", "programs": "Program"}[self.layer]
        if compare:
            return columns("operations_compared", self.units, name=name)
        if self.layer == "operations" and not executed:
            # a profile that did not fit never ran: no executions, total cycles or shares
            # (columns of zeros would read as measured); cycles are the compiler's estimate
            return columns(
                "operations", self.units, NOT_EXECUTED_COLUMNS, cycles="Cycles (estimate)"
            )
        cols = columns(LAYER_TABLES[self.layer], self.units)
        if not executed:
            cols = [
                (k, "Cycles (estimate)" if k == "cycles" else t, f)
                for k, t, f in cols
                if k not in EXECUTED_ONLY
            ]
        return cols

    def layer_frame(self, doc: Any) -> pd.DataFrame:
        """``doc``'s table at the shown software layer (analysis core, cached)."""
        return data.operation_layer(doc, self.layer)

    def compare_frame(self, doc: Any, cmp: Any) -> pd.DataFrame:
        """A and B joined by name at the shown software layer (values from each document's
        table; rows of the same name summed)."""
        labels = [c for c in ("type", "pass", "ipu") if c in self.layer_frame(doc)]
        numbers = [
            c
            for c in ("total_cycles", "memory_bytes", "code_bytes", "flops")
            if c in self.layer_frame(doc)
        ]

        def prepared(d: Any) -> pd.DataFrame:
            f = self.layer_frame(d)[["name", *labels, *numbers]]
            if f["name"].duplicated().any():
                agg = {c: "first" for c in labels} | {c: "sum" for c in numbers}
                f = f.groupby("name", sort=False).agg(agg).reset_index()
            return f

        a, b = prepared(doc), prepared(cmp)
        m = a.merge(b, on="name", how="outer", suffixes=("_a", "_b"), indicator=True)
        for col in labels:
            m[col] = (
                m[f"{col}_a"]
                .astype(object)
                .where(m[f"{col}_a"].notna(), m[f"{col}_b"].astype(object))
            )
        for col in numbers:
            m[f"{col}_a"] = m[f"{col}_a"].fillna(0).astype(np.int64)
            m[f"{col}_b"] = m[f"{col}_b"].fillna(0).astype(np.int64)
        m["status"] = (
            m["_merge"]
            .map({"both": "both", "left_only": "A only (removed)", "right_only": "B only (added)"})
            .astype(str)
        )
        if "total_cycles" in numbers:
            m["total_cycles_delta"] = m["total_cycles_b"] - m["total_cycles_a"]
            with np.errstate(divide="ignore", invalid="ignore"):
                m["total_cycles_rel"] = np.where(
                    m["total_cycles_a"] > 0,
                    m["total_cycles_delta"] / m["total_cycles_a"].clip(lower=1),
                    np.nan,
                )
        else:
            m["total_cycles_delta"] = 0
            m["total_cycles_rel"] = np.nan
        m = m.drop(columns=["_merge", *[f"{c}_{t}" for c in labels for t in "ab"]])
        order = np.argsort(-np.abs(m["total_cycles_delta"].to_numpy()), kind="stable")
        return m.iloc[order].reset_index(drop=True)

    def clear(self) -> None:
        self.proxy.set_mask(None)
        self.frame = pd.DataFrame()
        self.model.set_frame(self.frame)

    def _on_layer(self, _index: int) -> None:
        """Show the chosen software layer; one the profile cannot give (a damaged program
        table) says why in a dialog and the layer shown before stays."""
        try:
            self.refresh()
            self._layer_shown = self.layer_combo.currentIndex()
        except Exception as exc:
            self.layer_combo.blockSignals(True)
            self.layer_combo.setCurrentIndex(getattr(self, "_layer_shown", 0))
            self.layer_combo.blockSignals(False)
            self.refresh()
            self.say_profile_problem(exc)

    def show_documents(self, doc: Any, cmp: Any) -> None:
        # the old mask is for the old frame's rows (a longer frame would read past its end)
        self.proxy.set_mask(None)
        titles = software_layer_titles(data.run_config(doc).get("framework"))
        for i, key in enumerate(SOFTWARE_LAYERS):
            self.layer_combo.setItemText(i, titles[key])
        if cmp is None:
            self.frame = self.layer_frame(doc).reset_index(drop=self.layer != "operations")
        else:
            self.frame = self.compare_frame(doc, cmp)
        executed = bool(doc.has_execution)
        self.model.set_frame(self.frame, self._columns(cmp is not None, executed))
        self._build_columns_menu()
        for combo, values in (
            (
                self.pass_combo,
                sorted({str(p) for p in self.frame.get("pass", pd.Series(dtype=str))}),
            ),
            (
                self.ipu_combo,
                sorted({int(i) for i in self.frame.get("ipu", pd.Series(dtype=int)).dropna()}),
            ),
        ):
            current = combo.currentText()
            combo.blockSignals(True)
            combo.clear()
            combo.addItems(["All"] + [str(v) for v in values])
            idx = combo.findText(current)
            combo.setCurrentIndex(idx if idx >= 0 else 0)
            combo.blockSignals(False)
        # most expensive first: total cycles, or memory when the profile never ran (OOM)
        first = "total_cycles" if executed else "memory_bytes"
        if first not in self.frame:
            first = "cycles"
        sort_col = self.model.column_of(first if cmp is None else "total_cycles_delta")
        self._apply_filter()
        if cmp is None:
            self.view.horizontalHeader().setSortIndicator(sort_col, Qt.SortOrder.DescendingOrder)
        else:
            self.view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.view.resizeColumnsToContents()
        self.view.setColumnWidth(0, min(self.view.columnWidth(0), 320))
        before = self.view.currentIndex()
        if self.proxy.rowCount():
            self.view.selectRow(0)
        if self.view.currentIndex() == before:  # else currentRowChanged showed them already
            self._show_details()

    def _apply_filter(self) -> None:
        f = self.frame
        if f.empty:
            self.proxy.set_mask(None)
            self.count_label.setText("")
            return
        keep = np.ones(len(f), bool)
        text = self.filter_edit.text().strip()
        if text:
            hay = f["name"].astype(str) + " " + f["type"].astype(str)
            for extra in ("layer", "operation"):
                if extra in f:
                    hay = hay + " " + f[extra].astype(str)
            keep &= hay.str.contains(text, case=False, regex=False).to_numpy()
        if self.pass_combo.currentIndex() > 0 and "pass" in f:
            keep &= (f["pass"].astype(str) == self.pass_combo.currentText()).to_numpy()
        if self.ipu_combo.currentIndex() > 0:
            keep &= (f["ipu"].astype(float) == float(self.ipu_combo.currentText())).to_numpy()
        self.proxy.set_mask(keep)
        self.count_label.setText(f"{int(keep.sum()):,} of {len(f):,}")

    def visible_names(self) -> list[str]:
        col = self.model.column_of("name")
        return [str(self.proxy.index(r, col).data()) for r in range(self.proxy.rowCount())]

    def select_operation(self, name: str) -> bool:
        col = self.model.column_of("name")
        for r in range(self.proxy.rowCount()):
            if self.proxy.index(r, col).data() == name:
                self.view.selectRow(r)
                return True
        return False

    def selected_name(self) -> str | None:
        idx = self.view.currentIndex()
        if not idx.isValid():
            return None
        src = self.proxy.mapToSource(idx)
        return str(self.model.raw(src.row(), self.model.column_of("name")))

    # ------------------------------------------------------------------ details
    @shows_profile_problems
    def _show_details(self) -> None:
        self.summary_tree.clear()
        name = self.selected_name()
        docs = [("A", self.document)] + (
            [("B", self.compare_doc)] if self.compare_doc is not None else []
        )
        if name is None or self.document is None:
            for t in (self.vars_table, self.cs_table, self.progs_table):
                t.set_frame(pd.DataFrame())
            return
        b = lambda v: fmt_bytes(v, self.units)  # noqa: E731
        vars_frames, cs_frames, prog_frames = [], [], []
        self._charts_stale = True
        for tag, d in docs:
            ops = data.operations(d)
            label = f"{tag}: {name}" if len(docs) > 1 else name
            op_ids, _progs = self.selection_of(d, name)
            if not op_ids.size and not _progs.size:
                self.summary_tree.add_section(label, [("Status", "not in this profile")])
                continue
            if self.layer == "operations":
                row = ops.iloc[int(op_ids[0])]
                rows = [
                    ("Type", str(row["type"])),
                    ("Layer", str(row["layer"])),
                    ("Pass", str(row["pass"])),
                    ("IPU", str(row["ipu"])),
                    ("Pipeline stage", str(row["stage"])),
                    ("Cycles (one execution)", fmt_count(int(row["cycles"]))),
                    ("Executions", fmt_count(int(row["executions"]))),
                    ("Total cycles", fmt_count(int(row["total_cycles"]))),
                    ("Share of cycles", fmt_pct(float(row["cycles_share"]))),
                    ("FLOPs", fmt_count(int(row["flops"]))),
                    ("FLOPs per cycle", f"{float(row['flops_per_cycle']):,.1f}"),
                    ("Bytes in / out", f"{b(int(row['bytes_in']))} / {b(int(row['bytes_out']))}"),
                    ("Memory (variables it owns)", b(int(row["memory_bytes"]))),
                    ("Temporary memory", b(int(row["temp_bytes"]))),
                    ("Code", b(int(row["code_bytes"]))),
                    ("Tiles", f"{int(row['tiles_used']):,} from tile {int(row['tile_start'])}"),
                ]
            else:  # a layer or a program: its row as the table shows it
                frame = self.layer_frame(d)
                row = frame[frame["name"].astype(str).to_numpy() == name].iloc[0]
                cols = self._columns(False, bool(d.has_execution))
                rows = [
                    (title, fmt(row[key]) if fmt is not None else str(row[key]))
                    for key, title, fmt in cols[1:]
                    if key in row.index
                ]
            self.summary_tree.add_section(label, rows)
            sel = np.isin
            v = data.variables(d)
            v = v[sel(v["op"].to_numpy(), op_ids)]
            cs = data.compute_sets(d)
            cs = cs[sel(cs["op"].to_numpy(), op_ids)]
            nodes = data.program_nodes(d)
            progs = nodes.iloc[_progs][
                ["name", "type", "ipu", "cycles", "tile_balance", "bytes"]
            ].copy()
            progs["type"] = [str(x) for x in progs["type"].map(lambda t: _ptype(int(t)))]
            if len(docs) > 1:
                v, cs, progs = (
                    v.assign(profile=tag),
                    cs.assign(profile=tag),
                    progs.assign(profile=tag),
                )
            vars_frames.append(v)
            cs_frames.append(cs)
            prog_frames.append(progs)
        cat = lambda fs: pd.concat(fs, ignore_index=True) if fs else pd.DataFrame()  # noqa: E731
        self.vars_table.set_frame(
            cat(vars_frames),
            columns("variables", self.units, VARIABLE_TABLE),
        )
        self.cs_table.set_frame(cat(cs_frames), columns("compute_sets", self.units))
        self.progs_table.set_frame(cat(prog_frames), columns("programs", self.units))
        self._draw_charts()

    def selection_of(self, doc: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(operation ids, program rows) of the row called ``name`` at the shown layer in
        ``doc``: an operation and its programs, a layer's operations and their programs, or a
        program and its operation."""
        ops = data.operations(doc)
        nodes = data.program_nodes(doc)
        node_op = nodes["op"].to_numpy()
        if self.layer == "programs":
            frame = self.layer_frame(doc)
            progs = frame["program"].to_numpy()[frame["name"].astype(str).to_numpy() == name]
            op_ids = np.unique(node_op[progs])
            return op_ids[op_ids >= 0].astype(np.int64), progs.astype(np.int64)
        key = "name" if self.layer == "operations" else "layer"
        op_ids = np.flatnonzero(ops[key].astype(str).to_numpy() == name)
        return op_ids.astype(np.int64), np.flatnonzero(np.isin(node_op, op_ids))

    # ------------------------------------------------------------------ charts
    def _draw_charts(self) -> None:
        """Cycles by tile (one execution of the selected row's programs, per IPU) and memory by
        category (its operations' variables by kind, temporary memory, code) for A and B;
        drawn only when the Charts tab is shown."""
        if not self._charts_stale or self.details.currentWidget() is not self.charts_panel:
            return
        self._charts_stale = False
        if self.tile_plot is None:
            self.tile_plot = make_plot(left="cycles", bottom="tile")
            self.tile_plot.setTitle("Cycles by tile (one execution of each program)", size="9pt")
            self.memory_plot = make_plot(left="", bottom="memory", mouse=False)
            self.memory_plot.setTitle("Memory by category (variables it owns, code)", size="9pt")
            lay = self.charts_panel.layout()
            lay.addWidget(self.tile_plot, 1)
            lay.addWidget(self.memory_plot, 1)
        tp, mp = self.tile_plot.getPlotItem(), self.memory_plot.getPlotItem()
        tp.clear()
        mp.clear()
        name = self.selected_name()
        if name is None or self.document is None:
            self.charts_text.setText("")
            return
        docs = [("A", self.document)] + (
            [("B", self.compare_doc)] if self.compare_doc is not None else []
        )
        lines = []
        categories: list[str] = []
        values: dict[str, pd.Series] = {}
        for k, (tag, d) in enumerate(docs):
            op_ids, progs = self.selection_of(d, name)
            color = hex_color("compare", "a" if k == 0 else "b")
            who = f"{tag}: " if len(docs) > 1 else ""
            by_ipu = data.tile_cycles_by_ipu(d, progs)
            for ipu, cycles in by_ipu.items():
                tp.addItem(tile_curve(cycles, k))
                busy = cycles[cycles > 0]
                lines.append(
                    f"{who}IPU {ipu}: {fmt_count(int(cycles.max()))} cycles on the slowest tile, "
                    f"{fmt_count(int(busy.size))} tiles busy"
                )
            mem = data.memory_by_category(d, op_ids)
            values[tag] = mem
            categories += [c for c in mem.index if c not in categories]
        tp.enableAutoRange()
        if not lines:
            lines.append("No program of this row runs on a tile.")
        self.charts_text.setText("; ".join(lines))
        # memory by category: horizontal bars, A (and B beside it)
        n = len(categories)
        width = 0.8 / max(len(values), 1)
        for k, mem in enumerate(values.values()):
            y = np.arange(n) - 0.4 + width * (k + 0.5)
            height = np.array([float(mem.get(c, 0)) for c in categories])
            color = hex_color("compare", "a" if k == 0 else "b")
            mp.addItem(
                pg.BarGraphItem(
                    x0=0, y=y, height=width * 0.9, width=height, brush=color, pen=pg.mkPen(None)
                )
            )
        mp.getAxis("left").setTicks([[(i, c) for i, c in enumerate(categories)], []])
        top = max((float(m.max()) for m in values.values() if len(m)), default=0.0)
        self.memory_plot.setVisible(bool(categories))
        if not categories:
            self.charts_text.setText(
                self.charts_text.text() + "; no memory is attributed to it (no variables, no code)."
            )
            return
        mp.getAxis("bottom").enableAutoSIPrefix(False)
        scale, unit = axis_scale(self.units, top)
        mp.getAxis("bottom").setScale(1.0 / scale)
        mp.setLabel("bottom", f"memory ({unit})" + ("  (A, B)" if len(values) > 1 else ""))
        mp.setYRange(-0.6, max(n - 0.4, 0.6), padding=0)
        mp.setXRange(0, top * 1.05 if top else 1, padding=0)

    # ------------------------------------------------------------------ columns
    def set_settings(self, settings: Any) -> None:
        """Where the hidden columns are remembered (the main window's QSettings)."""
        self.settings = settings
        self._hidden = {}
        if self.document is not None:
            self._build_columns_menu()

    def hidden_columns(self) -> set[str]:
        """Keys of the columns hidden at the shown layer (remembered per layer)."""
        layer = self.layer
        if layer not in self._hidden:
            saved = (
                self.settings.value(f"operations/hidden/{layer}", [])
                if self.settings is not None
                else []
            )
            if isinstance(saved, str):  # QSettings gives one value for a one-item list
                saved = [saved]
            self._hidden[layer] = {str(x) for x in (saved or [])}
        return self._hidden[layer]

    def set_column_hidden(self, key: str, hidden: bool) -> None:
        cols = self.hidden_columns()
        if hidden:
            cols.add(key)
        else:
            cols.discard(key)
        if self.settings is not None:
            self.settings.setValue(f"operations/hidden/{self.layer}", sorted(cols))
        self._apply_hidden()

    def _apply_hidden(self) -> None:
        hidden = self.hidden_columns()
        for c in range(self.model.columnCount()):
            key = self.model.column_key(c)
            self.view.setColumnHidden(c, c > 0 and key in hidden)

    def _build_columns_menu(self) -> None:
        self.columns_menu.clear()
        hidden = self.hidden_columns()
        for c in range(1, self.model.columnCount()):
            key = self.model.column_key(c)
            title = self.model.headerData(c, Qt.Orientation.Horizontal)
            action = self.columns_menu.addAction(str(title))
            action.setCheckable(True)
            action.setChecked(key not in hidden)
            action.toggled.connect(lambda on, k=key: self.set_column_hidden(k, not on))
        self._apply_hidden()


def _ptype(code: int) -> str:
    return step_type_name(code)
