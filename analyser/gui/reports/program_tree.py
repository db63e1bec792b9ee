"""Program Tree: the control-program hierarchy (Sequence / Repeat / Call and leaf steps) as a
QTreeView over a model of /programs/nodes, coloured by step type with the trace's palette,
searchable by name (vectorised over all nodes, then next / previous). A step's own work per
execution (profile) and its executed cycles over the run with the waiting part (analysis core)
are separate columns; tile balance is shown for compute and exchange steps. With the details of the
selected step and the steps related to it (same operation). Compare mode shows A and B side by
side, each with its own search and details."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from PySide6.QtCore import (
    QAbstractItemModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
)
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTreeView,
    QWidget,
)

from analyser.core.quantities import STEP_TYPES, TABLES
from analyser.core.units import NEW, fmt_bytes, fmt_count, fmt_pct, fmt_signed_int
from analyser.gui.model import data
from analyser.gui.model.errors import problem_sentence
from analyser.gui.palette import hex_color
from analyser.gui.reports.base import Report, lay_out
from analyser.gui.widgets import KeyValueTree

Index = QModelIndex | QPersistentModelIndex
_ROOT = QModelIndex()
_R = Qt.ItemDataRole
_DISPLAY, _USER, _ALIGN = _R.DisplayRole, _R.UserRole, _R.TextAlignmentRole
_DECORATION, _FOREGROUND, _FONT = _R.DecorationRole, _R.ForegroundRole, _R.FontRole
#: The roles ProgramTreeModel.data answers.
_TREE_ROLES = frozenset({_DISPLAY, _USER, _ALIGN, _DECORATION, _FOREGROUND, _FONT})
_ALIGN_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


def _bold_font() -> QFont:
    f = QFont()
    f.setBold(True)
    return f


#: The tree's columns (the catalogue, analyser.core.quantities.TABLES["program_tree"]); the last
#: one, "delta", only in compare mode.
_COLUMNS = tuple(TABLES["program_tree"].values())
COLUMN_SPECS = tuple((c.key, c.title, c.tip) for c in _COLUMNS if c.key != "delta")
COLUMNS = tuple(h for _k, h, _t in COLUMN_SPECS)
KEYS = tuple(k for k, _h, _t in COLUMN_SPECS)
DELTA_HEADER = TABLES["program_tree"]["delta"].title
#: Step types whose tile balance means something (compute and exchange).
BALANCED_TYPES = frozenset(
    STEP_TYPES.index(t) for t in ("OnTileExecute", "DoExchange", "GlobalExchange")
)
#: Step types that can wait (their executed cycles can exceed own work x executions).
WAITING_TYPES = frozenset(
    STEP_TYPES.index(t) for t in ("Sync", "SyncAns", "StreamCopyBegin", "GlobalExchange")
)


class ProgramTreeModel(QAbstractItemModel):
    """Tree model over the program-node table (pre-order rows with a parent column).

    Children lists are built once with numpy (a stable sort by parent), so the model answers
    ``index`` / ``parent`` / ``rowCount`` in O(1); internal ids are node ids + 1.
    """

    def __init__(
        self,
        nodes: pd.DataFrame,
        executions: np.ndarray | None,
        total: np.ndarray | None,
        units,
        parent=None,
        wait: np.ndarray | None = None,
    ) -> None:
        super().__init__(parent)
        self.units = units
        self.names = nodes["name"].to_numpy().astype(str)
        self.types = nodes["type"].to_numpy().astype(np.int64)
        self.parents = nodes["parent"].to_numpy().astype(np.int64)
        self.ipus = nodes["ipu"].to_numpy()
        self.repeat = nodes["repeat"].to_numpy()
        self.cycles = nodes["cycles"].to_numpy()
        self.balance = nodes["tile_balance"].to_numpy()
        self.bytes = nodes["bytes"].to_numpy()
        self.code = nodes["code_bytes"].to_numpy()
        self.ops = nodes["op"].to_numpy().astype(np.int64)
        n = len(nodes)
        self.executions = executions if executions is not None and len(executions) == n else None
        self.total = total if total is not None and len(total) == n else None
        self.wait = wait if wait is not None and len(wait) == n else None
        #: Compare mode (B pane): change of total cycles against the matching program of A
        #: (NaN when A has no such program); adds a column.
        self.delta: np.ndarray | None = None
        self.columns: tuple[str, ...] = COLUMNS
        # children of each node (index n = the invisible root), in row (execution) order
        key = np.where(self.parents < 0, n, self.parents)
        order = np.argsort(key, kind="stable")
        counts = np.bincount(key, minlength=n + 1)
        bounds = np.concatenate(([0], np.cumsum(counts)))
        self._order = order
        self._bounds = bounds
        # the same as Python lists for index() / rowCount(), which the view calls for every
        # shown row on each layout (a numpy scalar per call costs more than the call itself)
        self._order_list: list[int] = order.tolist()
        self._bounds_list: list[int] = bounds.tolist()
        self.row_in_parent = np.empty(n, np.int64)
        self.row_in_parent[order] = np.arange(n) - bounds[key[order]]
        self._colors = {i: QColor(hex_color("step_types", t)) for i, t in enumerate(STEP_TYPES)}
        self.n = n

    def children(self, node: int) -> np.ndarray:
        k = self.n if node < 0 else node
        return self._order[self._bounds[k] : self._bounds[k + 1]]

    def node_of(self, index: Index) -> int:
        return int(index.internalId()) - 1 if index.isValid() else -1

    def index_of(self, node: int, column: int = 0) -> QModelIndex:
        if node < 0:
            return QModelIndex()
        return self.createIndex(int(self.row_in_parent[node]), column, node + 1)

    # -- QAbstractItemModel ----------------------------------------------------------------
    def index(self, row: int, column: int, parent: Index = _ROOT) -> QModelIndex:
        k = parent.internalId() - 1 if parent.isValid() else self.n
        lo = self._bounds_list[k]
        if not (0 <= row < self._bounds_list[k + 1] - lo) or not (0 <= column < len(self.columns)):
            return QModelIndex()
        return self.createIndex(row, column, self._order_list[lo + row] + 1)

    def parent(self, index: Index = _ROOT) -> QModelIndex:  # type: ignore[override]
        node = self.node_of(index)
        if node < 0:
            return QModelIndex()
        return self.index_of(int(self.parents[node]))

    def rowCount(self, parent: Index = _ROOT) -> int:
        if parent.isValid() and parent.column() != 0:
            return 0
        k = parent.internalId() - 1 if parent.isValid() else self.n
        return self._bounds_list[k + 1] - self._bounds_list[k]

    def columnCount(self, parent: Index = _ROOT) -> int:
        return len(self.columns)

    def set_delta(self, delta: np.ndarray | None) -> None:
        """Show the change of total cycles against the other profile (compare mode)."""
        self.beginResetModel()
        self.delta = delta
        self.columns = COLUMNS + ((DELTA_HEADER,) if delta is not None else ())
        self.endResetModel()

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal or section >= len(self.columns):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.columns[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            if section < len(COLUMN_SPECS):
                return COLUMN_SPECS[section][2]
            return "Change of executed cycles against the program of A with the same name"
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        # called for every role of every visible cell on each paint: unanswered roles return at
        # once and the Qt enums are module constants (an enum attribute lookup costs 0.6 us, an
        # alignment flag OR 2.8 us; issue 15)
        if role not in _TREE_ROLES:
            return None
        node = self.node_of(index)
        if node < 0:
            return None
        col = index.column()
        if role == _DISPLAY:
            return self.text(node, col)
        if role == _USER:
            return node
        if role == _ALIGN:
            return _ALIGN_RIGHT if col >= 2 else None
        t = int(self.types[node])
        if (role == _DECORATION and col == 0) or (role == _FOREGROUND and col == 1):
            return self._colors.get(t)
        if role == _FONT and col == 0 and t < 3:
            return _bold_font()
        return None

    def column(self, key: str) -> int:
        """Column number of column ``key`` (see COLUMN_SPECS; ``"delta"`` in compare mode)."""
        return len(KEYS) if key == "delta" else KEYS.index(key)

    def text(self, node: int, col: int) -> str:
        t = int(self.types[node])
        leaf = t >= 3
        key = KEYS[col] if col < len(KEYS) else "delta"
        if key == "name":
            return self.names[node]
        if key == "type":
            return STEP_TYPES[t] if 0 <= t < len(STEP_TYPES) else str(t)
        if key == "ipu":
            return "all" if self.ipus[node] < 0 else str(int(self.ipus[node]))
        if key == "repeat":
            return fmt_count(int(self.repeat[node])) if t == 1 else ""
        if key == "cycles":
            return fmt_count(int(self.cycles[node])) if leaf else ""
        if key == "balance":
            return fmt_pct(float(self.balance[node])) if t in BALANCED_TYPES else ""
        if key == "executions":
            return (
                fmt_count(int(self.executions[node]))
                if self.executions is not None and leaf
                else ""
            )
        if key == "total":
            return fmt_count(int(self.total[node])) if self.total is not None and leaf else ""
        if key == "wait":
            if self.wait is None or not leaf:
                return ""
            w = int(self.wait[node])
            return fmt_count(w) if w or t in WAITING_TYPES else ""
        if key == "bytes":
            return fmt_bytes(int(self.bytes[node]), self.units) if self.bytes[node] else ""
        if key == "code":
            return fmt_bytes(int(self.code[node]), self.units) if self.code[node] else ""
        if key == "delta" and self.delta is not None and leaf:
            d = self.delta[node]
            return NEW if np.isinf(d) else fmt_signed_int(d)
        return ""

    def search(self, text: str) -> np.ndarray:
        """Node ids whose name contains ``text`` (case-insensitive), in tree order."""
        if not text:
            return np.zeros(0, np.int64)
        hits = pd.Series(self.names).str.contains(text, case=False, regex=False).to_numpy()
        return np.flatnonzero(hits)

    def ancestors(self, node: int) -> list[int]:
        out = []
        p = int(self.parents[node])
        while p >= 0:
            out.append(p)
            p = int(self.parents[p])
        return out[::-1]


class ProgramTreePane(QWidget):
    """One document's tree with search and details."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.doc: Any = None
        self.model: ProgramTreeModel | None = None
        self.units = None
        self.title = QLabel("")
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("Search programs by name (Enter: next match)")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.returnPressed.connect(self.next_match)
        self.search_edit.textChanged.connect(self._new_search)
        self.prev_button = QPushButton("Previous")
        self.next_button = QPushButton("Next")
        self.prev_button.clicked.connect(self.previous_match)
        self.next_button.clicked.connect(self.next_match)
        self.match_label = QLabel("")
        bar = QHBoxLayout()
        bar.addWidget(self.search_edit, 1)
        bar.addWidget(self.prev_button)
        bar.addWidget(self.next_button)
        bar.addWidget(self.match_label)
        self.view = QTreeView()
        self.view.setUniformRowHeights(True)
        self.view.setAlternatingRowColors(True)
        self.view.header().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.details = KeyValueTree()
        lay_out(self, [self.title, bar], self.view, self.details, (520, 260))
        self.matches = np.zeros(0, np.int64)
        self.match_pos = -1

    def set_document(
        self, doc: Any, units, title: str = "", delta: np.ndarray | None = None
    ) -> None:
        """Show ``doc``'s program tree (``delta``: compare mode's change column of B)."""
        self.doc = doc
        self.units = units
        self.title.setText(title)
        self.title.setVisible(bool(title))
        self.details.clear()
        if doc is None:
            self.view.setModel(None)
            self.model = None
            return
        nodes = data.program_nodes(doc)
        ex = data.execution(doc)
        self.model = ProgramTreeModel(
            nodes,
            None if ex is None else ex.program_executions,
            None if ex is None else ex.program_cycles,
            units,
            self,
            wait=data.program_wait_cycles(doc),
        )
        if delta is not None:
            self.model.set_delta(delta)
        self.view.setModel(self.model)
        self.view.selectionModel().currentChanged.connect(
            lambda cur, _prev: self._show_details(cur)
        )
        self.restore_view()

    def restore_view(self) -> None:
        """Initial view: first levels expanded, column widths, the heaviest step selected."""
        if self.model is None:
            return
        # Expand the first three levels (at most 256 nodes), like PopVision's initial view.
        frontier = self.model.children(-1)
        budget = 256
        for _level in range(3):
            frontier = frontier[:budget]
            budget -= len(frontier)
            for node in frontier:
                self.view.expand(self.model.index_of(int(node)))
            if budget <= 0 or not len(frontier):
                break
            frontier = np.concatenate([self.model.children(int(n)) for n in frontier])
        # Fixed widths from the header text: measuring every row's contents is slow on big trees.
        metrics = self.view.fontMetrics()
        self.view.setColumnWidth(0, 320)
        cols = self.model.columns
        # ... and at least as wide as a long figure ("1,023.99 KiB", "8,888,888,888"): a
        # header-wide column elided the bytes ("952.00 ..." at 1,600 px, issue 23 defect 9)
        figure = metrics.horizontalAdvance("8,888,888,888") + 16
        for c in range(1, len(cols)):
            self.view.setColumnWidth(c, max(figure, metrics.horizontalAdvance(cols[c]) + 36))
        self.view.setColumnWidth(1, 120)
        header = self.view.header()
        if cols[-1] == DELTA_HEADER:
            # compare mode (half the width): the change right after the name, where it is seen
            # without scrolling sideways
            self.view.setColumnWidth(0, 260)
            header.moveSection(header.visualIndex(len(cols) - 1), 1)
        elif header.visualIndex(0) != 0 or any(
            header.visualIndex(c) != c for c in range(len(cols))
        ):
            for c in range(len(cols)):
                header.moveSection(header.visualIndex(c), c)
        self._new_search(self.search_edit.text())
        # Start on the step with the most cycles over the run (or the root).
        if self.model.total is not None and self.model.n:
            self.select_node(int(np.argmax(self.model.total)))
        elif self.model.n:
            self.select_node(0)

    # -- search -----------------------------------------------------------------------------
    def _new_search(self, text: str) -> None:
        self.matches = (
            self.model.search(text.strip()) if self.model is not None else np.zeros(0, np.int64)
        )
        self.match_pos = -1
        self.match_label.setText(f"{len(self.matches):,} matches" if text.strip() else "")

    def next_match(self) -> None:
        self._step_match(1)

    def previous_match(self) -> None:
        self._step_match(-1)

    def _step_match(self, delta: int) -> None:
        if not len(self.matches):
            return
        self.match_pos = (self.match_pos + delta) % len(self.matches)
        self.select_node(int(self.matches[self.match_pos]))
        self.match_label.setText(f"{self.match_pos + 1} of {len(self.matches):,}")

    def select_node(self, node: int) -> None:
        model = self.model
        if model is None:
            return
        for a in model.ancestors(node):
            self.view.expand(model.index_of(a))
        idx = model.index_of(node)
        self.view.setCurrentIndex(idx)
        self.view.scrollTo(idx)

    def selected_node(self) -> int:
        return self.model.node_of(self.view.currentIndex()) if self.model is not None else -1

    # -- details ----------------------------------------------------------------------------
    def _show_details(self, index: QModelIndex) -> None:
        try:
            self._fill_details(index)
        except Exception as exc:  # a damaged profile: the details say why, the tree works on
            self.details.clear()
            name = self.doc.name if self.doc is not None else "the profile"
            self.details.add_section(
                "Details unavailable", [("Problem", problem_sentence(exc, name))]
            )

    def _fill_details(self, index: QModelIndex) -> None:
        self.details.clear()
        model, doc = self.model, self.doc
        node = model.node_of(index) if model is not None else -1
        if node < 0 or doc is None:
            return
        rows = [
            (model.columns[c], model.text(node, c))
            for c in range(len(model.columns))
            if model.text(node, c)
        ]
        path = " > ".join(model.names[a] for a in model.ancestors(node))
        rows.append(("Path", path or "(root)"))
        names = data.operation_names(doc)
        op = int(model.ops[node])
        rows.append(("Operation", str(names[op]) if 0 <= op < len(names) else "-"))
        rows.append(("Children", fmt_count(model.rowCount(model.index_of(node)))))
        t = int(model.types[node])
        if t >= 3:
            tc = data.program_tile_cycles(doc, node)
            used = tc[tc > 0]
            if used.size:
                rows.append(("Tiles used", fmt_count(int(used.size))))
                rows.append(
                    (
                        "Cycles per tile (min / mean / max)",
                        f"{int(used.min()):,} / {used.mean():,.0f} / {int(used.max()):,}",
                    )
                )
        self.details.add_section(model.names[node], rows)
        if op >= 0:
            related = np.flatnonzero((model.ops == op) & (np.arange(model.n) != node))
            cyc = model.column("cycles")
            rel_rows = [
                (model.names[r], model.text(r, 1), model.text(r, cyc)) for r in related[:200]
            ]
            sec = self.details.add_section(
                f"Related steps (same operation, {len(related):,})", rel_rows
            )
            sec.setExpanded(len(related) <= 50)


class ProgramTreeReport(Report):
    title = "Program Tree"
    key = "program_tree"
    data_needs = ("target", "program_nodes", "execution", "program_match_keys")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pane_a = ProgramTreePane()
        self.pane_b = ProgramTreePane()
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.pane_a)
        split.addWidget(self.pane_b)
        self.lay_out_with_empty_states()
        self.set_content(split)
        self._b_of_a: np.ndarray | None = None

    @property
    def model(self) -> ProgramTreeModel | None:
        return self.pane_a.model

    def clear(self) -> None:
        self.pane_a.set_document(None, self.units, "")
        self.pane_b.set_document(None, self.units, "")
        self._b_of_a = None

    def show_documents(self, doc: Any, cmp: Any) -> None:
        self.pane_a.set_document(doc, self.units, f"A: {doc.name}" if cmp is not None else "")
        self.pane_b.setVisible(cmp is not None)
        # B's change column is set before B's tree is shown (one layout of B's view, not two)
        delta = matched_cycle_change(doc, cmp) if cmp is not None else None
        self.pane_b.set_document(
            cmp, self.units, f"B: {cmp.name}" if cmp is not None else "", delta=delta
        )
        self._b_of_a = None
        if cmp is not None and self.pane_b.model is not None:
            # Selecting a program in A selects the matching program of B (same name, k-th).
            ka, kb = data.program_match_keys(doc), data.program_match_keys(cmp)
            pos_b = pd.Series(np.arange(len(kb)), index=kb)
            self._b_of_a = pos_b.reindex(ka).fillna(-1).astype(np.int64).to_numpy()
            self.pane_a.view.selectionModel().currentChanged.connect(self._follow_in_b)

    def _follow_in_b(self, current, _previous) -> None:
        node = self.pane_a.model.node_of(current) if self.pane_a.model is not None else -1
        if self._b_of_a is None or node < 0 or node >= len(self._b_of_a):
            return
        match = int(self._b_of_a[node])
        if match >= 0:
            self.pane_b.select_node(match)

    def chart_widget(self) -> QWidget:
        return self


def matched_cycle_change(doc_a: Any, doc_b: Any) -> np.ndarray | None:
    """Per program of B: its total cycles over the run minus those of the program of A with the
    same name (the k-th of that name matches the k-th), NaN when A has none; None when either
    profile has no execution. Totals come from the analysis core (program_cycles)."""
    ea, eb = data.execution(doc_a), data.execution(doc_b)
    if ea is None or eb is None:
        return None
    ka, kb = data.program_match_keys(doc_a), data.program_match_keys(doc_b)
    a_total = pd.Series(ea.program_cycles.astype(np.float64), index=ka)
    matched = a_total.reindex(kb).to_numpy()
    return eb.program_cycles.astype(np.float64) - matched
