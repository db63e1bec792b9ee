"""Operations report (PopVision's Operations Summary): a sortable, filterable table of the
analysis core's operations DataFrame (cycles, FLOPs, memory, code) through a
QAbstractTableModel, filters by text / pass / IPU, and details of the selected operation (its
figures, variables, compute sets, programs, and charts of its cycles by tile and memory by
category). A software-layer selector shows the same run as the framework's operations (PopTorch
/ PopART), model layers or Poplar programs; a column chooser hides columns (remembered per layer
in the settings). Compare mode joins A and B by name with the change in cycles, memory and
code, and lists rows added or removed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from analyser.core.quantities import VARIABLE_TABLE, columns
from analyser.core.units import axis_scale
from analyser.gui.model import operations as ops_model

# the table's definitions live in the view-model (re-exported for the report's users)
from analyser.gui.model.operations import EXECUTED_ONLY as EXECUTED_ONLY
from analyser.gui.model.operations import LAYER_TABLES as LAYER_TABLES
from analyser.gui.model.operations import NOT_EXECUTED_COLUMNS as NOT_EXECUTED_COLUMNS
from analyser.gui.model.operations import SOFTWARE_LAYERS, software_layer_titles
from analyser.gui.model.operations_view import OperationsView, build_operations_view
from analyser.gui.palette import hex_color
from analyser.gui.reports.base import Report, lay_out, shows_profile_problems
from analyser.gui.table_view import TextTableView
from analyser.gui.widgets import (
    RESIZE_PRECISION,
    DataFrameModel,
    FilterTable,
    KeyValueTree,
    compact_rows,
    connect_header_sort,
    fit_columns,
    make_plot,
    tab_widget,
    tile_curve,
)

if TYPE_CHECKING:
    from analyser.gui.model.document import Document

Index = QModelIndex | QPersistentModelIndex


#: Width the operation names' column keeps when the figures take the rest of the table.
NAME_COLUMN_PX = 320


class OperationsReport(Report):
    title = "Operations"
    key = "operations"
    data_needs = ("target", "operations", "variables", "compute_sets", "program_nodes")
    view_builder = staticmethod(build_operations_view)
    default_view_options = ("operations",)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = DataFrameModel()
        self.view = TextTableView()
        self.view.setModel(self.model)  # filtered by the model's own mask, no proxy
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
        self.details = tab_widget()
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
        self._tables_stale = True
        self.details.currentChanged.connect(lambda _i: self._on_details_tab())

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

    def layer_frame(self, doc: Document) -> pd.DataFrame:
        """``doc``'s table at the shown software layer (analysis core, cached)."""
        return ops_model.layer_frame(doc, self.layer)

    def compare_frame(self, doc: Document, cmp: Document) -> pd.DataFrame:
        """A and B joined by name at the shown software layer (the view-model's
        :func:`~analyser.gui.model.operations.compare_frame`)."""
        return ops_model.compare_frame(doc, cmp, self.layer)

    def clear(self) -> None:
        self.model.set_mask(None)
        self.frame = pd.DataFrame()
        self.model.set_frame(self.frame)

    def view_options(self) -> tuple[str]:
        return (self.layer,)

    def _on_layer(self, _index: int) -> None:
        """Show the chosen software layer; one the profile cannot give (a damaged program
        table) says why in a dialog and the layer shown before stays (its view-model built
        here, then: the choice is taken back at once, not when a background build fails)."""
        try:
            if self.document is not None:
                self.view_request(self.document, self.compare_doc).build()
            self.refresh()
            self._layer_shown = self.layer_combo.currentIndex()
        except Exception as exc:
            self.layer_combo.blockSignals(True)
            self.layer_combo.setCurrentIndex(getattr(self, "_layer_shown", 0))
            self.layer_combo.blockSignals(False)
            self.refresh()
            self.say_profile_problem(exc)

    def show_view(self, view: OperationsView) -> None:
        # the old mask is for the old frame's rows (a longer frame would read past its end)
        self.model.set_mask(None)
        for i, title in enumerate(view.layer_titles):
            self.layer_combo.setItemText(i, title)
        self.frame = view.frame
        self.model.set_frame(self.frame, list(view.columns))
        self._build_columns_menu()
        passes, ipus = view.passes, view.ipus
        for combo, values in ((self.pass_combo, passes), (self.ipu_combo, ipus)):
            current = combo.currentText()
            combo.blockSignals(True)
            combo.clear()
            combo.addItems(["All", *values])
            idx = combo.findText(current)
            combo.setCurrentIndex(idx if idx >= 0 else 0)
            combo.blockSignals(False)
        # most expensive first: total cycles, or memory when the profile never ran (OOM)
        sort_col = self.model.column_of(view.sort_key)
        self._apply_filter()
        if not view.compare:
            self.view.horizontalHeader().setSortIndicator(sort_col, Qt.SortOrder.DescendingOrder)
        else:
            self.view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        fit_columns(self.view, self.model)
        # the names take what the figures leave of the width (at least 320 px): cut to 320
        # on a wide screen, they hid the layer names' ends with the room beside them free
        names = self.view.columnWidth(0)
        figures = sum(self.view.columnWidth(c) for c in range(1, self.model.columnCount()))
        room = self.view.viewport().width() - figures
        self.view.setColumnWidth(0, min(names, max(NAME_COLUMN_PX, room)))
        before = self.view.currentIndex()
        if self.model.rowCount():
            self.view.selectRow(0)
        if self.view.currentIndex() == before:  # else currentRowChanged showed them already
            self._show_details()

    def _apply_filter(self) -> None:
        keep = ops_model.filter_mask(
            self.frame,
            self.filter_edit.text().strip(),
            self.pass_combo.currentText() if self.pass_combo.currentIndex() > 0 else None,
            self.ipu_combo.currentText() if self.ipu_combo.currentIndex() > 0 else None,
        )
        selected = self.selected_name()
        self.model.set_mask(keep)
        if selected is not None:
            self.select_operation(selected)  # still shown: still selected
        self.count_label.setText(
            "" if keep is None else f"{int(keep.sum()):,} of {len(self.frame):,}"
        )

    def visible_names(self) -> list[str]:
        col = self.model.column_of("name")
        return [str(self.model.index(r, col).data()) for r in range(self.model.rowCount())]

    def select_operation(self, name: str) -> bool:
        col = self.model.column_of("name")
        for r in range(self.model.rowCount()):
            if self.model.index(r, col).data() == name:
                self.view.selectRow(r)
                return True
        return False

    def selected_name(self) -> str | None:
        idx = self.view.currentIndex()
        if not idx.isValid():
            return None
        return str(self.model.raw(idx.row(), self.model.column_of("name")))

    # ------------------------------------------------------------------ details
    def _tagged_docs(self) -> list[tuple[str, Any]]:
        """("A", the document) and, when comparing, ("B", the compared one)."""
        other = [("B", self.compare_doc)] if self.compare_doc is not None else []
        return [("A", self.document), *other]

    @shows_profile_problems
    def _show_details(self) -> None:
        self.summary_tree.clear()
        name = self.selected_name()
        docs = self._tagged_docs()
        if name is None or self.document is None:
            for t in (self.vars_table, self.cs_table, self.progs_table):
                t.set_frame(pd.DataFrame())
            self._tables_stale = False
            return
        self._charts_stale = True
        self._tables_stale = True
        for d in ops_model.row_details(docs, self.layer, name, self.units, tables=False):
            self.summary_tree.add_section(d.label, d.rows)
        self._fill_tables()
        self._draw_charts()

    @shows_profile_problems
    def _fill_tables(self) -> None:
        """The selected row's variables, compute sets and programs (A's and B's), filled when
        one of their tabs is shown: a first visit shows the Summary tab, and reading the
        variables and compute sets of both profiles cold took a third of a compare-mode first
        visit."""
        tables = (self.vars_table, self.cs_table, self.progs_table)
        if not self._tables_stale or self.details.currentWidget() not in tables:
            return
        self._tables_stale = False
        name = self.selected_name()
        if name is None or self.document is None:
            return
        docs = self._tagged_docs()
        details = ops_model.row_details(docs, self.layer, name, self.units)
        self.vars_table.set_frame(
            ops_model.joined([d.variables for d in details]),
            columns("variables", self.units, VARIABLE_TABLE),
        )
        self.cs_table.set_frame(
            ops_model.joined([d.compute_sets for d in details]),
            columns("compute_sets", self.units),
        )
        self.progs_table.set_frame(
            ops_model.joined([d.programs for d in details]), columns("programs", self.units)
        )

    def _on_details_tab(self) -> None:
        self._fill_tables()
        self._draw_charts()

    def selection_of(self, doc: Document, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(operation ids, program rows) of the row called ``name`` at the shown layer in
        ``doc`` (the view-model's :func:`~analyser.gui.model.operations.selection_of`)."""
        return ops_model.selection_of(doc, self.layer, name)

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
        docs = self._tagged_docs()
        charts = ops_model.row_charts(docs, self.layer, name)
        for k, _ipu, cycles in charts.tile_cycles:
            tp.addItem(tile_curve(cycles, k))
        tp.enableAutoRange()
        self.charts_text.setText(charts.text)
        # memory by category: horizontal bars, A (and B beside it)
        categories = charts.categories
        for k, (y, values, height) in enumerate(charts.memory_bars()):
            color = hex_color("compare", "a" if k == 0 else "b")
            mp.addItem(
                pg.BarGraphItem(
                    x0=0, y=y, height=height, width=values, brush=color, pen=pg.mkPen(None)
                )
            )
        mp.getAxis("left").setTicks([[(i, c) for i, c in enumerate(categories)], []])
        top = charts.top()
        self.memory_plot.setVisible(bool(categories))
        if not categories:
            self.charts_text.setText(
                self.charts_text.text() + "; no memory is attributed to it (no variables, no code)."
            )
            return
        n = len(categories)
        mp.getAxis("bottom").enableAutoSIPrefix(False)
        scale, unit = axis_scale(self.units, top)
        mp.getAxis("bottom").setScale(1.0 / scale)
        mp.setLabel("bottom", f"memory ({unit})" + ("  (A, B)" if len(docs) > 1 else ""))
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
