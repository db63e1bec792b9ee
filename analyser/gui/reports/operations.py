"""Operations report (PopVision's Operations Summary): a sortable, filterable table of the
analysis core's operations DataFrame (cycles, FLOPs, memory, code) through a
QAbstractTableModel, filters by text / pass / IPU, and details of the selected operation (its
figures, variables, compute sets and programs). Compare mode joins A and B by operation name with
the change in cycles, memory and code, and lists operations added or removed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableView,
    QTabWidget,
    QWidget,
)

from analyser.core.quantities import VARIABLE_TABLE, columns, step_type_name
from analyser.core.units import fmt_bytes, fmt_count, fmt_pct
from analyser.gui.model import data
from analyser.gui.reports.base import Report, lay_out, shows_profile_problems
from analyser.gui.widgets import (
    RESIZE_PRECISION,
    DataFrameModel,
    FilterTable,
    KeyValueTree,
    compact_rows,
    connect_header_sort,
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
        bar = QHBoxLayout()
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(QLabel("Pass"))
        bar.addWidget(self.pass_combo)
        bar.addWidget(QLabel("IPU"))
        bar.addWidget(self.ipu_combo)
        bar.addWidget(self.count_label)

        self.summary_tree = KeyValueTree()
        self.vars_table = FilterTable("Filter variables")
        self.cs_table = FilterTable("Filter compute sets")
        self.progs_table = FilterTable("Filter programs")
        self.details = QTabWidget()
        self.details.addTab(self.summary_tree, "Summary")
        self.details.addTab(self.vars_table, "Variables")
        self.details.addTab(self.cs_table, "Compute sets")
        self.details.addTab(self.progs_table, "Programs")

        lay_out(self, [bar], self.view, self.details, (520, 280))
        self.frame = pd.DataFrame()

    def chart_widget(self) -> QWidget:
        return self.view

    # ------------------------------------------------------------------ table
    def _columns(self, compare: bool, executed: bool = True) -> list:
        if compare:
            return columns("operations_compared", self.units)
        if not executed:
            # a profile that did not fit never ran: no executions, total cycles or shares
            # (columns of zeros would read as measured); cycles are the compiler's estimate
            return columns(
                "operations",
                self.units,
                NOT_EXECUTED_COLUMNS,
                cycles="Cycles (estimate)",
            )
        return columns("operations", self.units)

    def compare_frame(self, doc: Any, cmp: Any) -> pd.DataFrame:
        """A and B operations joined by name (values from each document's operations table)."""
        keep = [
            "name",
            "type",
            "pass",
            "ipu",
            "total_cycles",
            "memory_bytes",
            "code_bytes",
            "flops",
        ]
        a = data.operations(doc)[keep]
        b = data.operations(cmp)[keep]
        m = a.merge(b, on="name", how="outer", suffixes=("_a", "_b"), indicator=True)
        for col in ("type", "pass", "ipu"):
            m[col] = (
                m[f"{col}_a"]
                .astype(object)
                .where(m[f"{col}_a"].notna(), m[f"{col}_b"].astype(object))
            )
        for col in ("total_cycles", "memory_bytes", "code_bytes", "flops"):
            m[f"{col}_a"] = m[f"{col}_a"].fillna(0).astype(np.int64)
            m[f"{col}_b"] = m[f"{col}_b"].fillna(0).astype(np.int64)
        m["status"] = (
            m["_merge"]
            .map({"both": "both", "left_only": "A only (removed)", "right_only": "B only (added)"})
            .astype(str)
        )
        m["total_cycles_delta"] = m["total_cycles_b"] - m["total_cycles_a"]
        with np.errstate(divide="ignore", invalid="ignore"):
            m["total_cycles_rel"] = np.where(
                m["total_cycles_a"] > 0,
                m["total_cycles_delta"] / m["total_cycles_a"].clip(lower=1),
                np.nan,
            )
        m = m.drop(columns=["_merge", "type_a", "type_b", "pass_a", "pass_b", "ipu_a", "ipu_b"])
        order = np.argsort(-np.abs(m["total_cycles_delta"].to_numpy()), kind="stable")
        return m.iloc[order].reset_index(drop=True)

    def clear(self) -> None:
        self.frame = pd.DataFrame()
        self.model.set_frame(self.frame)

    def show_documents(self, doc: Any, cmp: Any) -> None:
        if cmp is None:
            self.frame = data.operations(doc).reset_index()
        else:
            self.frame = self.compare_frame(doc, cmp)
        executed = bool(doc.has_execution)
        self.model.set_frame(self.frame, self._columns(cmp is not None, executed))
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
        sort_col = self.model.column_of(first if cmp is None else "total_cycles_delta")
        self._apply_filter()
        if cmp is None:
            self.view.horizontalHeader().setSortIndicator(sort_col, Qt.SortOrder.DescendingOrder)
        else:
            self.view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.view.resizeColumnsToContents()
        self.view.setColumnWidth(0, min(self.view.columnWidth(0), 320))
        if self.proxy.rowCount():
            self.view.selectRow(0)
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
            if "layer" in f:
                hay = hay + " " + f["layer"].astype(str)
            keep &= hay.str.contains(text, case=False, regex=False).to_numpy()
        if self.pass_combo.currentIndex() > 0:
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
        for tag, d in docs:
            ops = data.operations(d)
            hit = np.flatnonzero(ops["name"].to_numpy() == name)
            label = f"{tag}: {name}" if len(docs) > 1 else name
            if not hit.size:
                self.summary_tree.add_section(label, [("Status", "not in this profile")])
                continue
            op = int(hit[0])
            row = ops.iloc[op]
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
            self.summary_tree.add_section(label, rows)
            v = data.variables(d)
            v = v[v["op"].to_numpy() == op]
            cs = data.compute_sets(d)
            cs = cs[cs["op"].to_numpy() == op]
            nodes = data.program_nodes(d)
            progs = nodes[nodes["op"].to_numpy() == op][
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


def _ptype(code: int) -> str:
    return step_type_name(code)
