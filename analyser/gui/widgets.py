"""Small shared widgets and helpers for the reports: key/value trees, a DataFrame table model,
banners, plots and stacked bar charts drawn with one item per category."""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import (
    QAbstractTableModel,
    QCoreApplication,
    QEvent,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QRunnable,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QFont, QFontMetrics, QFontMetricsF, QPixmapCache
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsTextItem,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QStyle,
    QTableView,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from analyser.gui.model.cells import FormattedCells
from analyser.gui.model.labels import nice_name  # noqa: F401 (shared with the reports)
from analyser.gui.palette import hex_color
from analyser.gui.plots import LightPlotWidget
from analyser.gui.table_view import TextTableView
from analyser.gui.theme import chart_colors, emphasised, style_plot
from analyser.literal import html as lit

if TYPE_CHECKING:
    import pandas as pd

SORT_ROLE = Qt.ItemDataRole.UserRole + 1

Index = QModelIndex | QPersistentModelIndex
_DISPLAY_ROLE = Qt.ItemDataRole.DisplayRole
_ALIGN_ROLE = Qt.ItemDataRole.TextAlignmentRole
#: The roles DataFrameModel.data answers.
_MODEL_ROLES = frozenset({_DISPLAY_ROLE, _ALIGN_ROLE, SORT_ROLE, Qt.ItemDataRole.UserRole})
#: Numeric cells: right-aligned, vertically centred.
_ALIGN_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_ROOT = QModelIndex()
#: Formatted cells a DataFrameModel keeps (a few screens of a wide table).
_TEXT_CACHE_CELLS = 20_000


class Relay(QObject):
    """Carries results from pool threads to the GUI thread (queued signal): ``done(gen,
    result)``, ``gen`` telling the receiver whether the result is still wanted."""

    done = Signal(int, object)


class PoolTask(QRunnable):
    """Runs ``fn`` in a QThreadPool and emits its result (or the exception it raised, which the
    receiver shows, never lost in a thread) through ``relay.done`` with ``gen``."""

    def __init__(self, fn: Callable[[], Any], gen: int, relay: Relay) -> None:
        super().__init__()
        self.fn, self.gen, self.relay = fn, gen, relay

    def run(self) -> None:
        try:
            result = self.fn()
        except Exception as exc:
            result = exc
        self.relay.done.emit(self.gen, result)


# ---------------------------------------------------------------------------------------------
# Key / value tree (Summary, details panes)
# ---------------------------------------------------------------------------------------------
class KeyValueTree(QTreeWidget):
    """Sections of ``name | value [| value B | delta]`` rows. ``value(section, name, col)`` reads
    a cell back (tests use it to compare what is shown with the analysis core)."""

    def __init__(self, headers: Sequence[str] = ("Name", "Value"), parent: QWidget | None = None):
        super().__init__(parent)
        self.setAlternatingRowColors(True)
        self.setRootIsDecorated(True)
        self.setUniformRowHeights(True)
        self.set_headers(headers)

    def set_headers(self, headers: Sequence[str]) -> None:
        headers = list(headers)
        self.setColumnCount(len(headers))
        self.setHeaderLabels(headers)
        header = self.header()
        for i in range(len(headers)):
            header.setSectionResizeMode(i, QHeaderView.ResizeMode.ResizeToContents)
        # name | value: the value column takes the width; with several right-aligned figure
        # columns none stretches, so the last figures stay next to their names
        header.setStretchLastSection(len(headers) <= 2)

    def add_section(self, title: str, rows: Sequence[Sequence[Any]]) -> QTreeWidgetItem:
        section = QTreeWidgetItem([title])
        font = QFont(section.font(0))
        font.setBold(True)
        section.setFont(0, font)
        section.setFirstColumnSpanned(False)
        self.addTopLevelItem(section)
        for row in rows:
            item = QTreeWidgetItem([str(v) for v in row])
            if self.columnCount() > 2:
                for col in range(1, len(row)):
                    item.setTextAlignment(
                        col, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
            section.addChild(item)
        section.setExpanded(True)
        return section

    def section(self, title: str) -> QTreeWidgetItem | None:
        for i in range(self.topLevelItemCount()):
            item = self.topLevelItem(i)
            if item is not None and item.text(0) == title:
                return item
        return None

    def value(self, section: str, name: str, col: int = 1) -> str:
        sec = self.section(section)
        if sec is None:
            raise KeyError(section)
        for i in range(sec.childCount()):
            child = sec.child(i)
            if child is not None and child.text(0) == name:
                return child.text(col)
        raise KeyError(f"{section}/{name}")

    def names(self, section: str) -> list[str]:
        sec = self.section(section)
        if sec is None:
            return []
        return [c.text(0) for i in range(sec.childCount()) if (c := sec.child(i)) is not None]


def compact_rows(view: Any) -> None:
    """Rows as tall as the text needs (Qt's default table rows are about twice that), so a
    table shows as many rows as the key / value trees next to it."""
    height = view.fontMetrics().height() + 6
    header = view.verticalHeader()
    header.setMinimumSectionSize(height)
    header.setDefaultSectionSize(height)


def color_delta_item(item: QTreeWidgetItem, col: int, delta: float, higher_is_better: bool) -> None:
    if delta == 0 or not np.isfinite(delta):
        return
    good = (delta > 0) == higher_is_better
    item.setForeground(col, QColor(hex_color("compare", "decrease" if good else "increase")))


# ---------------------------------------------------------------------------------------------
# DataFrame table model (Operations, variables, details tabs)
# ---------------------------------------------------------------------------------------------
class DataFrameModel(QAbstractTableModel):
    """A read-only table over a pandas DataFrame.

    ``columns`` maps a DataFrame column to ``(header, formatter)``; formatting happens only for
    the rows Qt paints, once per cell: the text is kept until the next ``set_frame`` (a table
    repainted on each visit to its report formatted its ~300 visible cells again every time,
    about a tenth of a later visit to the Operations Report). The raw value
    is exposed under ``SORT_ROLE`` (and ``UserRole``).
    Sorting is done here with one numpy / pandas argsort (``sort``), not row comparisons in
    Python: a view connects its header to :func:`connect_header_sort`. Row ``r`` of the model
    shows frame row ``source_row(r)``.
    """

    def __init__(
        self,
        frame: pd.DataFrame | None = None,
        columns: Sequence[tuple[str, str, Callable[[Any], str] | None]] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        #: None until a frame is set: an empty table needs no pandas (the Execution Trace's
        #: range statistics start empty; importing pandas for them cost its first paint)
        self._frame: pd.DataFrame | None = None
        self._cols: list[tuple[str, str, Callable[[Any], str] | None]] = []
        self._values: list[np.ndarray] = []
        self._numeric: list[bool] = []
        self._n_rows = 0
        self._n_cols = 0
        self._order = np.zeros(0, np.int64)
        #: every frame row in the sorted order; ``_order`` is its rows the mask keeps
        self._sorted = np.zeros(0, np.int64)
        self._mask: np.ndarray | None = None
        #: formatted cells by ``frame row * columns + column`` (cleared by ``set_frame``)
        self._texts = FormattedCells(_TEXT_CACHE_CELLS)
        self.set_frame(frame, columns)

    def set_frame(
        self,
        frame: pd.DataFrame | None,
        columns: Sequence[tuple[str, str, Callable[[Any], str] | None]] | None = None,
    ) -> None:
        """Show ``frame`` (None: an empty table, no rows and no columns)."""
        self.beginResetModel()
        self._frame = frame
        if frame is None:
            self._cols, self._values, self._numeric = [], [], []
        else:
            from pandas.api.types import is_numeric_dtype  # loaded: a frame was given

            if columns is None:
                columns = [(c, str(c), None) for c in frame.columns]
            self._cols = [c for c in columns if c[0] in frame.columns]
            self._values = [frame[c[0]].to_numpy() for c in self._cols]
            self._numeric = [is_numeric_dtype(frame[c[0]]) for c in self._cols]
        self._n_cols = len(self._cols)
        self._texts.clear()
        self._sorted = np.arange(0 if frame is None else len(frame))
        self._mask = None
        self._apply_mask()
        self.endResetModel()

    def set_mask(self, keep: np.ndarray | None) -> None:
        """Show only the frame rows where ``keep`` is True (None: every row), in the current
        sort order: a filter in the model itself, not a proxy model in front of it (a proxy
        made a table's paint about a third slower: every cell's index mapped through Python's
        ``rowCount`` / ``columnCount``)."""
        mask = None if keep is None else np.asarray(keep, bool)
        if mask is not None and len(mask) != len(self._sorted):
            raise ValueError(f"a mask of {len(mask)} rows for a table of {len(self._sorted)}")
        self.beginResetModel()
        self._mask = mask
        self._apply_mask()
        self.endResetModel()

    def _apply_mask(self) -> None:
        order = self._sorted
        if self._mask is not None:
            order = order[self._mask[order]]
        self._order = order
        self._n_rows = len(order)

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        if not 0 <= column < self._n_cols or len(self._sorted) == 0:
            return
        self.layoutAboutToBeChanged.emit()
        values = self._values[column]
        if self._numeric[column] and values.dtype != object:
            idx = np.argsort(values, kind="stable")
        else:
            import pandas as pd  # loaded: the values came from a frame

            idx = pd.Series(values).astype(str).str.lower().argsort(kind="stable").to_numpy()
        if order == Qt.SortOrder.DescendingOrder:
            idx = idx[::-1]
        # the views' selection and current row stay on the same frame rows (Qt's persistent
        # indexes; else a sort left the highlighted row on another operation than the details)
        kept = self.persistentIndexList()
        frame_rows = [int(self._order[i.row()]) for i in kept]
        self._sorted = np.asarray(idx)
        self._apply_mask()
        if kept:
            where = np.full(len(self._sorted), -1, np.int64)
            where[self._order] = np.arange(len(self._order))
            moved = [
                self.index(int(where[f]), i.column()) if where[f] >= 0 else QModelIndex()
                for i, f in zip(kept, frame_rows, strict=True)
            ]
            self.changePersistentIndexList(kept, moved)
        self.layoutChanged.emit()

    def source_row(self, row: int) -> int:
        """Frame row (position) shown at model row ``row``."""
        return int(self._order[row])

    @property
    def frame(self) -> pd.DataFrame:
        """The frame shown (an empty one when none was set)."""
        if self._frame is None:
            import pandas as pd

            return pd.DataFrame()
        return self._frame

    def column_key(self, col: int) -> str:
        return self._cols[col][0]

    def column_of(self, key: str) -> int:
        return [c[0] for c in self._cols].index(key)

    def rowCount(self, parent: Index = _ROOT) -> int:
        return 0 if parent.isValid() else self._n_rows

    def columnCount(self, parent: Index = _ROOT) -> int:
        return 0 if parent.isValid() else self._n_cols

    def raw(self, row: int, col: int) -> Any:
        return self._values[col][self._order[row]]

    def text(self, row: int, col: int) -> str:
        """What frame row ``row`` (not a view row) shows in column ``col``."""
        value = self._values[col][row]
        fmt = self._cols[col][2]
        if fmt is not None:
            return fmt(value)
        if isinstance(value, float | np.floating):
            return f"{value:,.3g}"
        if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
            return f"{int(value):,}"
        return str(value)

    def widest_rows(self, col: int) -> list[int]:
        """Frame rows shown whose text in column ``col`` is likely the widest: the longest
        strings, or the largest and smallest numbers (vectorised; no formatting)."""
        shown = self._order
        values = self._values[col][shown] if len(shown) else self._values[col][:0]
        if not len(values):
            return []
        if self._numeric[col] and values.dtype != object:
            return [int(shown[i]) for i in _widest_numbers(values.astype(np.float64, copy=False))]
        import pandas as pd  # loaded: the values came from a frame

        lengths = pd.Series(values).astype(str).str.len().to_numpy()
        return [int(shown[i]) for i in np.argsort(lengths, kind="stable")[-3:]]

    def cell_text(self, row: int, col: int) -> str:
        """What model row ``row`` (a view row) shows in column ``col``: formatted once."""
        frame_row = int(self._order[row])
        return self._texts.text(frame_row * self._n_cols + col, self.text, frame_row, col)

    def numeric(self, col: int) -> bool:
        """True when column ``col`` holds numbers (shown right-aligned)."""
        return self._numeric[col]

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        # called for every role of every visible cell on each paint: roles this model does not
        # answer return at once, and the Qt enums are module constants (an enum attribute
        # lookup costs 0.6 us, an alignment flag OR 2.8 us)
        if role not in _MODEL_ROLES or not index.isValid():
            return None
        if role == _DISPLAY_ROLE:
            return self.cell_text(index.row(), index.column())
        row, col = int(self._order[index.row()]), index.column()
        if role == _ALIGN_ROLE:
            return _ALIGN_RIGHT if self._numeric[col] else None
        value = self._values[col][row]  # SORT_ROLE / UserRole
        if isinstance(value, np.generic):
            return value.item()
        return value if isinstance(value, int | float | str) else str(value)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        horizontal = orientation == Qt.Orientation.Horizontal
        if role == Qt.ItemDataRole.ToolTipRole and horizontal and section < len(self._cols):
            # the column's definition from the catalogue (quantities.columns' ColumnSpec.tip)
            return getattr(self._cols[section], "tip", "") or None
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if horizontal:
            return self._cols[section][1] if section < len(self._cols) else None
        return str(section + 1)


def connect_header_sort(view: Any, model: DataFrameModel) -> None:
    """Sort ``model`` (not a proxy) when the user clicks a header of ``view``."""
    header = view.horizontalHeader()
    view.setSortingEnabled(False)
    header.setSectionsClickable(True)
    header.setSortIndicatorShown(True)
    header.setSortIndicator(-1, Qt.SortOrder.AscendingOrder)  # rows start in the frame's order
    header.sortIndicatorChanged.connect(lambda col, order: model.sort(col, order))


# ---------------------------------------------------------------------------------------------
# Labels and plots
# ---------------------------------------------------------------------------------------------
def section_label(text: str) -> QLabel:
    """A section heading: semi-bold, 13 px, 6 px of room above it."""
    label = QLabel(text)
    label.setObjectName("sectionTitle")
    emphasised(label, 13, top=6)
    return label


def push_button(text: str, on_click: Callable[[], Any]) -> QPushButton:
    """A push button showing ``text`` that calls ``on_click`` when clicked."""
    button = QPushButton(text)
    button.clicked.connect(on_click)
    return button


def wrapped_label(text: str = "", rich: bool = False) -> QLabel:
    """A label that wraps its words to the width (rich text when ``rich``): a header, a note
    or an explanation beside a view."""
    label = QLabel(text)
    label.setWordWrap(True)
    if rich:
        label.setTextFormat(Qt.TextFormat.RichText)
    return label


def headed_column(owner: QWidget, text: str = "", margin: int = 4) -> tuple[QVBoxLayout, QLabel]:
    """Lay ``owner`` out as a column (``margin`` px around it) headed by a word-wrapped label
    showing ``text``; return the column, for the caller to add the rest, and the label."""
    column = QVBoxLayout(owner)
    column.setContentsMargins(margin, margin, margin, margin)
    label = wrapped_label(text)
    column.addWidget(label)
    return column, label


def chart_panel(chart: QWidget, legend: QWidget) -> QWidget:
    """A chart over its legend, without margins; the chart takes the height."""
    panel = QWidget()
    column = QVBoxLayout(panel)
    column.setContentsMargins(0, 0, 0, 0)
    column.addWidget(chart, 1)
    column.addWidget(legend)
    return panel


class ElidedLabel(QLabel):
    """A one-line read-out that gives way to its neighbours: when it does not fit, it ends in
    "…" (a cut-off figure read as a whole one in a real X server), and the whole text is its
    tooltip. :meth:`full_text` is what was set."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self.setText(text)

    def setText(self, text: str) -> None:
        """Show ``text``, elided to the label's width; the whole of it in the tooltip."""
        self._full = text
        self.setToolTip(text)
        self._elide()

    def full_text(self) -> str:
        """The text as set, before eliding."""
        return self._full

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        width = self.contentsRect().width()
        shown = QFontMetrics(self.font()).elidedText(
            self._full, Qt.TextElideMode.ElideRight, max(width, 1)
        )
        super().setText(shown if width > 0 else self._full)


class Banner(QLabel):
    """Coloured banner ("Fits: 61.2% of memory used" / "Out of memory on 123 tiles")."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.setWordWrap(True)
        self.state = ""

    def show_state(self, state: str, text: str) -> None:
        self.state = state
        self.setText(text)
        color = hex_color("status", state)
        self.setStyleSheet(
            f"QLabel#banner {{ background: {color}; color: white; border-radius: 4px;"
            " padding: 8px 12px; font-size: 14px; font-weight: 600; }"
        )


class LegendLabel(QLabel):
    """A chart legend as a plain Qt label under the plot (coloured squares and names).

    Kept outside the graphics scene: it never covers data, wraps to the width, and avoids
    pyqtgraph's LegendItem removal path (which crashes PySide6 6.12 at interpreter exit).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.entries: list[tuple[str, str]] = []
        self.swatches: list[str] = []

    #: The swatch of an entry: a square (a filled series), or a line as the series is drawn.
    SWATCHES = {"box": "&#9632;", "line": "&#9473;&#9473;", "dashed": "&#9477;&#9477;"}

    def set_entries(self, entries: Sequence[tuple[str, str] | tuple[str, str, str]]) -> None:
        """Show ``(name, colour)`` entries, or ``(name, colour, swatch)`` with a swatch of
        :attr:`SWATCHES` (a dashed series gets a dashed swatch: a square said "solid" beside
        "(B, dashed)" in a real X server)."""
        self.entries = [(e[0], e[1]) for e in entries]
        self.swatches = [e[2] if len(e) > 2 else "box" for e in entries]
        # an entry never wraps inside its name ("Global | exchange code" at 1,600 px): only
        # between entries (non-breaking spaces inside)
        parts = [
            f'<span style="color:{color}; font-size:14px;">{self.SWATCHES[swatch]}</span>'
            "&nbsp;" + lit(name).replace(" ", "&nbsp;")
            for (name, color), swatch in zip(self.entries, self.swatches)
        ]
        self.setText("&nbsp;&nbsp;&nbsp; ".join(parts))
        self.setVisible(bool(self.entries))


#: Item types whose picture changes only with their data, their size or the view's range:
#: axes (with the grid lines they draw), text (axis titles, plot titles), bars and curves; also
#: any item class with a true ``STATIC_PICTURE`` (``items.BatchedRectsItem``).
#: Hover-highlighted, movable or numerous items (lines, regions, markers) are left alone.
CACHED_ITEM_TYPES: tuple[type, ...] = (
    pg.AxisItem,
    QGraphicsTextItem,
    pg.BarGraphItem,
    pg.PlotCurveItem,
)
#: Room for the cached pictures (Qt's default, 10 MB, holds about two reports' charts).
PIXMAP_CACHE_KB = 192 * 1024


def cache_static_items(plot: pg.GraphicsView) -> None:
    """Paint ``plot``'s axes, texts, bars and curves from a picture cached in device
    coordinates (``QGraphicsItem.DeviceCoordinateCache``), from its next paint on and for items
    added later: a repaint at the same range and size (a later visit of the report, the layout
    passes of a first visit, a selection drawn over the chart) copies pixels instead of replaying
    thousands of rectangles, path vertices and glyphs. Any change of an item's data, size or of
    the view's range redraws its picture (``update()`` invalidates it)."""
    if QPixmapCache.cacheLimit() < PIXMAP_CACHE_KB:
        QPixmapCache.setCacheLimit(PIXMAP_CACHE_KB)
    # new items (a redraw replaces the bars, the curves) get it before their first paint
    # (weakly: the scene's signal must not keep the scene alive)
    ref = weakref.ref(plot.scene())
    plot.scene().sigPrepareForPaint.connect(lambda: _cache_items(ref()))


def _cache_items(scene) -> None:
    if scene is None:
        return
    # (NoCache -> DeviceCoordinateCache is no visual change: Qt schedules no repaint for it)
    device = QGraphicsItem.CacheMode.DeviceCoordinateCache
    for item in scene.items():
        static = isinstance(item, CACHED_ITEM_TYPES) or getattr(item, "STATIC_PICTURE", False)
        if static and item.cacheMode() != device:
            item.setCacheMode(device)


def settle_layouts(rounds: int = 2) -> None:
    """Lay out now what waits to be laid out: the layout requests a report's fill posted
    (new texts, a title, a table's rows, a plot's title row) are otherwise handled after the
    window's next paint, which then paints everything again at the new geometry (a compare-mode
    first visit of the Memory report painted its charts up to four times). A request handled here can
    post another (a label's new height resizes its parent): ``rounds`` passes."""
    for _ in range(rounds):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


def make_plot(
    left: str = "", bottom: str = "", parent: QWidget | None = None, mouse: bool = True
) -> pg.PlotWidget:
    plot = LightPlotWidget(parent=parent, enableMenu=False)  # no context-menu widgets to build
    style_plot(plot)
    item = plot.getPlotItem()
    item.showGrid(x=False, y=True, alpha=chart_colors().grid_alpha)
    if left:
        item.setLabel("left", left)
    if bottom:
        item.setLabel("bottom", bottom)
    item.setMenuEnabled(False)
    if not mouse:
        item.setMouseEnabled(x=False, y=False)
        item.hideButtons()
    plot.setMinimumHeight(160)
    cache_static_items(plot)
    return plot


def tile_curve(values: np.ndarray, profile: int = 0) -> pg.PlotDataItem:
    """One value per tile as steps over the tiles: profile A (``profile`` 0) filled, B (1) as
    an outline over it so both stay visible (palette ``compare``)."""
    color = hex_color("compare", "a" if profile == 0 else "b")
    x = np.arange(values.size + 1, dtype=float) - 0.5
    if profile == 0:
        brush = pg.mkColor(color)
        brush.setAlpha(150)
        return pg.PlotDataItem(
            x, values, stepMode="center", fillLevel=0, brush=brush, pen=pg.mkPen(color)
        )
    return pg.PlotDataItem(x, values, stepMode="center", pen=pg.mkPen(color, width=2))


def stacked_bars(
    plot: pg.PlotItem,
    x: np.ndarray,
    values: np.ndarray,
    colors: Sequence[str],
    names: Sequence[str],
    width: float = 0.8,
    horizontal: bool = False,
    legend: LegendLabel | None = None,
) -> list[pg.BarGraphItem]:
    """Draw ``values`` ([n, k]) as bars stacked over the k categories: one BarGraphItem per
    non-empty category, so n x k rectangles cost k draw items. Returns the items."""
    items = []
    entries: list[tuple[str, str]] = []
    values = np.asarray(values, dtype=np.float64)
    base = np.zeros(values.shape[0])
    for j in range(values.shape[1]):
        col = values[:, j]
        if not np.any(col):
            continue
        color = colors[j]
        brush = pg.mkBrush(color)
        pen = pg.mkPen(None)
        if horizontal:
            item = pg.BarGraphItem(
                x0=base.copy(), y=x, height=width, width=col, brush=brush, pen=pen
            )
        else:
            item = pg.BarGraphItem(
                x=x, y0=base.copy(), height=col, width=width, brush=brush, pen=pen
            )
        plot.addItem(item)
        items.append(item)
        entries.append((names[j], color))
        base = base + col
    if legend is not None:
        legend.set_entries(entries)
    return items


def tab_widget() -> QTabWidget:
    """A QTabWidget in document mode, as every report's tab widget is. Fusion draws a frame
    around the pages that the pages, each filling it, cover entirely: in every report but the
    Summary and the Memory Report the picture is the same pixel for pixel without it (their
    chart pages lose a one-pixel border). Drawing it took about a seventh of a later visit to the Operations
    Report, on the first paint and again on the one the item views' queued
    layout asks for; document mode draws no frame."""
    tabs = QTabWidget()
    tabs.setDocumentMode(True)
    return tabs


class LazyPage(QWidget):
    """A tab page whose content is built the first time it is needed: when the tab is shown, or
    when something reads an attribute the page itself does not have (that read goes to the
    content, built then). A report's first visit shows one tab of each tab widget; its other
    pages cost nothing until visited (the Memory Report's seven hidden pages
    were about half of its construction). Compare a tab's page with ``is`` against the
    LazyPage, which does not build it."""

    def __init__(self, build: Callable[[], QWidget], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._build = build
        self._content: QWidget | None = None
        # kept: layout() is typed as possibly None
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)

    def content(self) -> QWidget:
        """The page's content (built on the first call)."""
        if self._content is None:
            widget = self._build()
            self._layout.addWidget(widget)
            widget.show()  # now, not when the layout's queued show comes round
            self._content = widget
        return self._content

    def built(self) -> bool:
        """True once the content exists."""
        return self._content is not None

    def showEvent(self, event) -> None:
        self.content()
        super().showEvent(event)

    def __getattr__(self, name: str) -> Any:
        # only reached for names the page does not have itself: the content's
        if name in ("_build", "_content", "_layout") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.content(), name)


#: Rows measured when sizing table columns to their contents (all rows of a long table is slow).
RESIZE_PRECISION = 30


def _widest_numbers(v: np.ndarray) -> np.ndarray:
    """Positions of the values of ``v`` whose text may be the widest: the largest magnitude of
    each power of two and of ten, for each sign. A number's text is not widest at the largest
    value when a unit scales it (1,023.5 KiB is wider than 1.2 MiB, 999.9 kB than 1.0 MB), but
    it is at the top of a unit's range, which one of the bins holds (vectorised)."""
    idx = np.flatnonzero(np.isfinite(v) & (v != 0))
    if not idx.size:
        return np.flatnonzero(np.isfinite(v))[:1]
    mag = np.abs(v[idx])
    out = []
    for base in (np.log2, np.log10):
        key = np.floor(base(mag)) * 2 + (v[idx] < 0)  # a bin per magnitude and sign
        order = np.lexsort((mag, key))
        last = np.r_[key[order][1:] != key[order][:-1], True]
        out.append(idx[order[last]])
    return np.unique(np.concatenate(out))


def fit_columns(view: Any, model: DataFrameModel) -> None:
    """Size ``view``'s columns as ``view.resizeColumnsToContents()`` does, for a DataFrameModel
    shown directly or through a proxy: each column as wide as its header and the texts of the
    first ``RESIZE_PRECISION`` rows shown and of the rows with the longest values. Qt measures a cell by asking the model for each of its
    roles through Python (5,800 calls, 20-45 ms, for the compare-mode Operations table); this
    formats the texts once and measures them with the view's font metrics. Widths are those
    of Qt's item delegate: text plus the style's focus-frame margin and a pixel on each side,
    a pixel more with grid lines (tested against Qt's own). The last ``RESIZE_PRECISION`` rows
    are measured too (a totals row at the end was cut), and texts are measured at fractional
    advances rounded up, as the view elides them (a whole-pixel advance cut "704.72 KiB")."""
    source = view.model()
    total = source.rowCount()
    shown = sorted(
        {*range(min(total, RESIZE_PRECISION)), *range(max(0, total - RESIZE_PRECISION), total)}
    )
    rows = [
        model.source_row(source.mapToSource(source.index(r, 0)).row() if source is not model else r)
        for r in shown
    ]
    metrics = QFontMetricsF(view.font())
    style = view.style()
    margin = 2 * (style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1)
    grid = 1 if view.showGrid() else 0
    header = view.horizontalHeader()
    for col in range(model.columnCount()):
        # and the rows whose values are the longest (a long name far down the table was cut)
        extra = model.widest_rows(col)
        texts = {model.text(r, col) for r in (*rows, *extra)}
        cells = max((math.ceil(metrics.horizontalAdvance(t)) for t in texts), default=0)
        width = max(cells + margin + grid if rows else 0, header.sectionSizeHint(col))
        header.resizeSection(col, width)


class FilterTable(QWidget):
    """A sortable, filterable table over a DataFrame."""

    def __init__(self, placeholder: str = "Filter", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = DataFrameModel()
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setDynamicSortFilter(False)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setFilterKeyColumn(-1)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText(placeholder)
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.view = TextTableView()
        self.view.setModel(self.proxy)
        connect_header_sort(self.view, self.model)
        self.view.setAlternatingRowColors(True)
        self.view.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.view.verticalHeader().setVisible(False)
        compact_rows(self.view)
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        # columns as wide as their contents; a stretched last column would push its (right-
        # aligned) figures to the far edge, away from their rows' names
        self.view.horizontalHeader().setStretchLastSection(False)
        # Size columns from the first rows only: measuring every row of a long table is slow.
        self.view.horizontalHeader().setResizeContentsPrecision(RESIZE_PRECISION)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.filter)
        layout.addWidget(self.view)

    def set_frame(self, frame: pd.DataFrame | None, columns=None) -> None:
        self.model.set_frame(frame, columns)
        fit_columns(self.view, self.model)

    def visible_rows(self) -> int:
        return self.proxy.rowCount()
