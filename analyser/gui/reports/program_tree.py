"""Program Tree: the control-program hierarchy (Sequence / Repeat / Call and leaf steps) as a
QTreeView over a model of /programs/nodes, coloured by step type with the trace's palette,
searchable by name (vectorised over all nodes, then next / previous). A step's own work per
execution (profile) and its executed cycles over the run with the waiting part (analysis core)
are separate columns; tile balance is shown for compute and exchange steps. With the details of the
selected step and the steps related to it (same operation). Compare mode shows A and B side by
side, each with its own search and details.

The report paints its view-model (:mod:`analyser.gui.model.program_tree_view`, built off the GUI
thread) and reads no document: a selected step's per-tile cycles are a small view-model of
their own, built on the pane's pool thread and painted into the details when they arrive."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import (
    QAbstractItemModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    QThreadPool,
)
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTreeView,
    QWidget,
)

from analyser.core.quantities import STEP_TYPES
from analyser.gui.model.cells import FormattedCells
from analyser.gui.model.document import Document
from analyser.gui.model.errors import problem_sentence

# the tree's columns and the compare-mode change live in the view-model (re-exported)
from analyser.gui.model.program_tree import COLUMN_SPECS as COLUMN_SPECS
from analyser.gui.model.program_tree import COLUMNS as COLUMNS
from analyser.gui.model.program_tree import DELTA_HEADER as DELTA_HEADER
from analyser.gui.model.program_tree import FIRST_STEP_TYPE as FIRST_STEP_TYPE
from analyser.gui.model.program_tree import KEYS as KEYS
from analyser.gui.model.program_tree import (
    ProgramTree,
    TileFigures,
    no_matches,
    node_details,
)
from analyser.gui.model.program_tree_view import (
    ProgramTreeSide,
    ProgramTreeView,
    build_program_tree_view,
    build_tile_figures,
)
from analyser.gui.model.views import ViewRequest
from analyser.gui.palette import hex_color
from analyser.gui.reports.base import Report, lay_out
from analyser.gui.widgets import KeyValueTree, PoolTask, Relay

Index = QModelIndex | QPersistentModelIndex
_ROOT = QModelIndex()
_R = Qt.ItemDataRole
_DISPLAY, _USER, _ALIGN = _R.DisplayRole, _R.UserRole, _R.TextAlignmentRole
_DECORATION, _FOREGROUND, _FONT = _R.DecorationRole, _R.ForegroundRole, _R.FontRole
#: The roles ProgramTreeModel.data answers.
_TREE_ROLES = frozenset({_DISPLAY, _USER, _ALIGN, _DECORATION, _FOREGROUND, _FONT})
_ALIGN_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
#: Cell keys are ``node * _KEY_STRIDE + column`` (more slots than columns: COLUMNS and delta).
_KEY_STRIDE = 64
assert len(COLUMNS) + 1 < _KEY_STRIDE
#: Formatted cells a model keeps (a few screens of the tree).
_TEXT_CACHE_CELLS = 20_000


def _bold_font() -> QFont:
    f = QFont()
    f.setBold(True)
    return f


class ProgramTreeModel(QAbstractItemModel):
    """Qt's tree model over a :class:`~analyser.gui.model.program_tree.ProgramTree` (the
    view-model: rows, children, column texts, search); internal ids are node ids + 1."""

    def __init__(self, tree: ProgramTree, parent=None) -> None:
        super().__init__(parent)
        self.tree = tree
        # index() / rowCount() read these for every shown row on each layout
        self._order_list = tree.order_list
        self._bounds_list = tree.bounds_list
        self._n_children: list[int] = np.diff(tree.bounds).tolist()
        # parent(), data() read these for every shown cell on each paint: Python lists (a
        # numpy scalar read and its int() cost more than the rest of the call)
        self._parents_list: list[int] = tree.parents.tolist()
        self._rows_list: list[int] = tree.row_in_parent.tolist()
        self._types_list: list[int] = tree.types.tolist()
        #: each cell's text by ``node * _KEY_STRIDE + column``, formatted once (cleared by
        #: set_delta; a change of units builds a new model)
        self._texts = FormattedCells(_TEXT_CACHE_CELLS)
        self._bold: QFont | None = None
        self._colors = {i: QColor(hex_color("step_types", t)) for i, t in enumerate(STEP_TYPES)}
        self.n = tree.n

    # the view-model's per-node arrays (names, types, cycles...) are read through it: see
    # _TREE_ATTRIBUTES below the class
    def children(self, node: int) -> np.ndarray:
        return self.tree.children(node)

    def column(self, key: str) -> int:
        """Column number of column ``key`` (see COLUMN_SPECS; ``"delta"`` in compare mode)."""
        return self.tree.column(key)

    def text(self, node: int, col: int) -> str:
        return self.tree.text(node, col)

    def search(self, text: str) -> np.ndarray:
        """Node ids whose name contains ``text`` (case-insensitive), in tree order."""
        return self.tree.search(text)

    def ancestors(self, node: int) -> list[int]:
        return self.tree.ancestors(node)

    def node_of(self, index: Index) -> int:
        """The node of ``index`` (-1 for the invalid index, whose internal id is 0)."""
        return int(index.internalId()) - 1

    def index_of(self, node: int, column: int = 0) -> QModelIndex:
        if node < 0:
            return QModelIndex()
        return self.createIndex(int(self.tree.row_in_parent[node]), column, node + 1)

    # -- QAbstractItemModel ----------------------------------------------------------------
    # QTreeView's layout calls index() and rowCount() once per shown row (7,000 rows each in a
    # compare first visit's two trees): each reads the parent's internal id alone (0 for the
    # invalid root index, node + 1 otherwise), no isValid() calls
    def index(self, row: int, column: int, parent: Index = _ROOT) -> QModelIndex:
        k = parent.internalId() - 1
        if k < 0:
            k = self.n
        lo = self._bounds_list[k]
        if not (0 <= row < self._bounds_list[k + 1] - lo) or not (
            0 <= column < len(self.tree.columns)
        ):
            return QModelIndex()
        return self.createIndex(row, column, self._order_list[lo + row] + 1)

    def parent(self, index: Index = _ROOT) -> QModelIndex:  # type: ignore[override]
        node = index.internalId() - 1
        if node < 0:
            return QModelIndex()
        up = self._parents_list[node]
        if up < 0:
            return QModelIndex()
        return self.createIndex(self._rows_list[up], 0, up + 1)

    def rowCount(self, parent: Index = _ROOT) -> int:
        k = parent.internalId() - 1
        if k < 0:
            k = self.n
        elif parent.column() != 0:
            return 0
        return self._n_children[k]

    def columnCount(self, parent: Index = _ROOT) -> int:
        return len(self.tree.columns)

    def set_delta(self, delta: np.ndarray | None) -> None:
        """Show the change of total cycles against the other profile (compare mode)."""
        self.beginResetModel()
        self.tree = self.tree.with_delta(delta)
        self._texts.clear()
        self.endResetModel()

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation != Qt.Orientation.Horizontal or section >= len(self.tree.columns):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.tree.columns[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.tree.tip(section)
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        # called for every role of every visible cell on each paint: unanswered roles return at
        # once and the Qt enums are module constants (an enum attribute lookup costs 0.6 us, an
        # alignment flag OR 2.8 us)
        if role not in _TREE_ROLES:
            return None
        node = index.internalId() - 1
        if node < 0:
            return None
        col = index.column()
        if role == _DISPLAY:
            return self._texts.text(node * _KEY_STRIDE + col, self.tree.text, node, col)
        if role == _USER:
            return node
        if role == _ALIGN:
            return _ALIGN_RIGHT if col >= 2 else None
        t = self._types_list[node]
        if (role == _DECORATION and col == 0) or (role == _FOREGROUND and col == 1):
            return self._colors.get(t)
        if role == _FONT and col == 0 and t < FIRST_STEP_TYPE:
            if self._bold is None:
                self._bold = _bold_font()
            return self._bold
        return None


#: The view-model's attributes the Qt model gives read-only (the pane and tests read them).
_TREE_ATTRIBUTES = (
    "names",
    "types",
    "parents",
    "ipus",
    "repeat",
    "cycles",
    "balance",
    "bytes",
    "code",
    "ops",
    "executions",
    "total",
    "wait",
    "delta",
    "columns",
    "units",
)
for _attr in _TREE_ATTRIBUTES:
    setattr(
        ProgramTreeModel,
        _attr,
        property(lambda self, _a=_attr: getattr(self.tree, _a), doc=f"The tree's ``{_attr}``."),
    )


class ProgramTreePane(QWidget):
    """One profile's tree (a side of the view-model) with search and details."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        #: the side of the view-model shown (None: nothing)
        self.side: ProgramTreeSide | None = None
        self.model: ProgramTreeModel | None = None
        #: the request for a selected step's per-tile cycles (see set_side)
        self._tiles_for: Callable[[int], ViewRequest] | None = None
        #: the latest per-tile figures received (for the selected step, or an earlier one)
        self._tiles: TileFigures | None = None
        # the per-tile cycles are read from the profile on this pool's thread, one at a time
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._relay = Relay(self)
        self._relay.done.connect(self._tiles_arrived)
        self._gen = 0
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
        self.matches = no_matches()
        self.match_pos = -1

    def set_side(
        self,
        side: ProgramTreeSide | None,
        tiles_for: Callable[[int], ViewRequest] | None = None,
    ) -> None:
        """Show ``side``'s tree (None: nothing); ``tiles_for(node)`` is the request for a
        selected step's per-tile cycles, built on the pane's pool thread."""
        self.side = side
        self._tiles_for = tiles_for
        self._tiles = None
        self._gen += 1  # per-tile cycles still being read are for a tree no longer shown
        self.title.setText(side.title if side is not None else "")
        self.title.setVisible(side is not None and bool(side.title))
        self.details.clear()
        if side is None:
            self.view.setModel(None)
            self.model = None
            return
        self.model = ProgramTreeModel(side.tree, self)
        self.view.setModel(self.model)
        self.view.selectionModel().currentChanged.connect(
            lambda cur, _prev: self._show_details(cur)
        )
        self.restore_view()

    def shutdown(self) -> None:
        self._gen += 1
        self._pool.waitForDone(10_000)

    def restore_view(self) -> None:
        """Initial view: first levels expanded, column widths, the heaviest step selected."""
        if self.model is None:
            return
        # Expand the first three levels (at most 256 nodes, about 500 rows shown: a wider node
        # stays collapsed), like PopVision's initial view; the selected step's path opens below.
        for node in self.model.tree.initially_expanded():
            self.view.expand(self.model.index_of(node))
        # Fixed widths from the header text: measuring every row's contents is slow on big trees.
        metrics = self.view.fontMetrics()
        self.view.setColumnWidth(0, 320)
        cols = self.model.columns
        # ... and at least as wide as a long figure ("1,023.99 KiB", "8,888,888,888"): a
        # header-wide column elided the bytes ("952.00 ..." at 1,600 px)
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
        start = self.model.tree.start_node()
        if start is not None:
            self.select_node(start)

    # -- search -----------------------------------------------------------------------------
    def _new_search(self, text: str) -> None:
        self.matches = self.model.search(text.strip()) if self.model is not None else no_matches()
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
        self.view.scrollTo(idx, QAbstractItemView.ScrollHint.PositionAtCenter)

    def resizeEvent(self, event) -> None:
        # a selection made before the pane had its size (compare mode splits it later) was
        # left half under the view's edge: keep the current row in view as the pane resizes
        super().resizeEvent(event)
        idx = self.view.currentIndex()
        if idx.isValid() and not self.view.viewport().rect().contains(self.view.visualRect(idx)):
            self.view.scrollTo(idx, QAbstractItemView.ScrollHint.PositionAtCenter)

    def selected_node(self) -> int:
        return self.model.node_of(self.view.currentIndex()) if self.model is not None else -1

    # -- details ----------------------------------------------------------------------------
    def _show_details(self, index: QModelIndex) -> None:
        node = self.model.node_of(index) if self.model is not None else -1
        self._fill_details(node)
        side = self.side
        if node < 0 or side is None or int(side.tree.types[node]) < FIRST_STEP_TYPE:
            return
        if self._tiles is not None and self._tiles.node == node:
            return
        request = self._tiles_for(node) if self._tiles_for is not None else None
        if request is None:
            return
        self._gen += 1
        if request.ready():  # read before (a revisit of the step): shown at once
            self._tiles_arrived(self._gen, request.build())
        else:
            self._pool.start(PoolTask(request.build, self._gen, self._relay))

    def _tiles_arrived(self, gen: int, result: object) -> None:
        """A step's per-tile cycles, read on the pool: shown when that step is still the one
        selected; a problem reading them is said in the details, the tree works on."""
        if gen != self._gen or self.side is None:
            return
        if isinstance(result, Exception):
            self.details.clear()
            self.details.add_section(
                "Details unavailable", [("Problem", problem_sentence(result, self.side.name))]
            )
            return
        if isinstance(result, TileFigures):
            self._tiles = result
            if result.node == self.selected_node():
                self._fill_details(result.node)

    def _fill_details(self, node: int) -> None:
        self.details.clear()
        side = self.side
        if node < 0 or side is None or self.model is None:
            return
        details = node_details(self.model.tree, side.operation_names, node, self._tiles)
        self.details.add_section(details.title, details.rows)
        if details.related is not None:
            sec = self.details.add_section(details.related_title, details.related)
            sec.setExpanded(details.related_expanded)

    @property
    def details_pending(self) -> bool:
        """True while the selected step's per-tile cycles are being read."""
        node = self.selected_node()
        side = self.side
        return (
            side is not None
            and node >= 0
            and int(side.tree.types[node]) >= FIRST_STEP_TYPE
            and (self._tiles is None or self._tiles.node != node)
        )


class ProgramTreeReport(Report):
    title = "Program Tree"
    key = "program_tree"
    data_needs = ("target", "program_nodes", "execution", "program_match_keys", "operation_names")
    view_builder = staticmethod(build_program_tree_view)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pane_a = ProgramTreePane()
        self.pane_b = ProgramTreePane()
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.pane_a)
        split.addWidget(self.pane_b)
        self.lay_out_with_empty_states()
        self.set_content(split)
        #: the view-model shown (None: nothing)
        self.view_model: ProgramTreeView | None = None

    @property
    def model(self) -> ProgramTreeModel | None:
        return self.pane_a.model

    def clear(self) -> None:
        self.view_model = None
        self.pane_a.set_side(None)
        self.pane_b.set_side(None)

    def shutdown(self) -> None:
        self.pane_a.shutdown()
        self.pane_b.shutdown()

    @property
    def details_pending(self) -> bool:
        """True while a pane's selected step's per-tile cycles are being read."""
        return self.pane_a.details_pending or (
            self.pane_b.isVisibleTo(self) and self.pane_b.details_pending
        )

    def show_view(self, view: ProgramTreeView) -> None:
        if view.message:
            self.show_message(view.message)
            return
        self.view_model = view
        self.pane_a.set_side(view.a, self._tiles_for(self.document))
        self.pane_b.setVisible(view.b is not None)
        self.pane_b.set_side(view.b, self._tiles_for(self.compare_doc))
        if view.b_of_a is not None:
            # Selecting a program in A selects the matching program of B (same name, k-th).
            self.pane_a.view.selectionModel().currentChanged.connect(self._follow_in_b)

    def _tiles_for(self, doc: Document | None) -> Callable[[int], ViewRequest] | None:
        """The request for a selected step's per-tile cycles in ``doc`` (built off the GUI
        thread by the pane)."""
        if doc is None:
            return None
        units = self.units
        return lambda node: ViewRequest(build_tile_figures, doc, None, units, (node,))

    def _follow_in_b(self, current, _previous) -> None:
        view = self.view_model
        node = self.pane_a.model.node_of(current) if self.pane_a.model is not None else -1
        if view is None or view.b_of_a is None or node < 0 or node >= len(view.b_of_a):
            return
        match = int(view.b_of_a[node])
        if match >= 0:
            self.pane_b.select_node(match)

    def chart_widget(self) -> QWidget:
        return self
