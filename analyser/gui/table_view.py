"""A QTableView that paints the plain cells of a :class:`~analyser.gui.widgets.DataFrameModel`
itself.

Qt paints a table cell by cell through its item delegate: seven calls into the Python model
for the cell's roles, then the style's item-view element, which lays the text out with a
QTextLayout about four times (the check, decoration and text rectangles, the elision, the
draw). For the Operations Report's ~300 visible cells that was about half of a later visit
to the report: 45 us a cell.

Most cells are plain: not selected, not the current cell of a focused table, one line of
ASCII text. Those are painted here as Qt would paint them (:meth:`QTableView.paintEvent` and
the common style's ``CE_ItemViewItem``, Qt 6 ``qtableview.cpp`` / ``qcommonstyle.cpp``): the
alternate-row fill, the text in the palette's text colour, elided on the right as Qt elides
it, aligned as the model says in the cell less the style's focus-frame margin and centred
vertically as Qt centres a laid-out line, drawn from a QStaticText kept per text and width.
Every other cell (selected, current with focus, a line break or tab, a character outside
ASCII, whose glyphs may come from another font with another line height) goes through Qt's
own delegate, and the grid is drawn as Qt draws it. A configuration this does not cover (a
proxy that is not a filter over a DataFrameModel, a custom delegate, another elide mode, word
wrap, spans, hidden rows, right-to-left) is painted by Qt entirely. The tests compare both
paints pixel by pixel (tests/test_gui_table_view.py).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QLineF, QModelIndex, QPointF, QRect, QSortFilterProxyModel, Qt
from PySide6.QtGui import (
    QColor,
    QFontMetricsF,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
    QStaticText,
)
from PySide6.QtWidgets import (
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QWidget,
)

from analyser.gui.model.cells import FormattedCells

#: Prepared texts a view keeps (cleared when its font changes, or past this many).
_STATIC_TEXTS = 5_000
_SELECTED = QStyle.StateFlag.State_Selected
_HAS_FOCUS = QStyle.StateFlag.State_HasFocus
_ALTERNATE = QStyleOptionViewItem.ViewItemFeature.Alternate


class TextTableView(QTableView):
    """A QTableView whose plain cells over a DataFrameModel (shown directly or through a
    QSortFilterProxyModel) are painted without the item delegate; see the module's text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        # one line a row: a long text is cut where its cell ends ("..."), as a spreadsheet
        # does, not after the last whole word that fits (Qt's default for tables wraps words)
        self.setWordWrap(False)
        #: ``(text, cell width) -> (prepared text, its width)`` (texts elided to the width)
        self._texts = FormattedCells(_STATIC_TEXTS)
        self._texts_font = ""
        self._line_height = 0
        self._metrics = QFontMetricsF(self.font())
        self._spans = False

    def setSpan(self, row: int, column: int, row_span: int, column_span: int) -> None:
        """As QTableView's; a table with spans is then painted by Qt."""
        self._spans = True
        super().setSpan(row, column, row_span, column_span)

    # ------------------------------------------------------------------ what can be painted
    def _source(self) -> tuple[Any, QSortFilterProxyModel | None]:
        """The DataFrameModel shown (it answers ``cell_text`` and ``numeric``) and the filter
        in front of it, if any."""
        model = self.model()
        if _is_text_model(model):
            return model, None
        if isinstance(model, QSortFilterProxyModel) and _is_text_model(model.sourceModel()):
            return model.sourceModel(), model
        return None, None

    def _fast_paint_possible(self) -> bool:
        return (
            not self.isRightToLeft()
            and not self._spans
            and not self.wordWrap()
            and type(self.itemDelegate()) is QStyledItemDelegate
            and not self.verticalHeader().sectionsHidden()
            and self.textElideMode() == Qt.TextElideMode.ElideRight
        )

    def _prepared(self, text: str, width: int) -> tuple[QStaticText, float]:
        """``text`` prepared for drawing in ``width`` pixels, elided as Qt elides it."""
        return self._texts.text((text, width), self._prepare, text, width)

    def _prepare(self, text: str, width: int) -> tuple[QStaticText, float]:
        shown = text
        if self._metrics.horizontalAdvance(text) > width:
            shown = self._metrics.elidedText(text, Qt.TextElideMode.ElideRight, width)
        static = QStaticText(shown)
        static.setTextFormat(Qt.TextFormat.PlainText)
        static.prepare(font=self.font())
        return static, static.size().width()

    def _check_font(self) -> None:
        key = self.font().key()
        if key != self._texts_font:
            self._texts.clear()
            self._texts_font = key
            self._metrics = QFontMetricsF(self.font())
            # the height Qt's QTextLayout gives one line of this font, as it centres it
            probe = QStaticText("Xg")
            probe.prepare(font=self.font())
            self._line_height = round(probe.size().height())

    # ------------------------------------------------------------------ paint
    def paintEvent(self, event: QPaintEvent) -> None:
        source, proxy = self._source()
        header, vheader = self.horizontalHeader(), self.verticalHeader()
        if (
            source is None
            or not self._fast_paint_possible()
            or header.count() == 0
            or vheader.count() == 0
        ):
            super().paintEvent(event)
            return
        self._check_font()
        painter = QPainter(self.viewport())
        try:
            self._paint(painter, event, source, proxy)
        finally:
            painter.end()

    def _paint(
        self,
        painter: QPainter,
        event: QPaintEvent,
        source: Any,
        proxy: QSortFilterProxyModel | None,
    ) -> None:
        header, vheader = self.horizontalHeader(), self.verticalHeader()
        style = self.style()
        option = QStyleOptionViewItem()
        self.initViewItemOption(option)
        group = _color_group(self, option)
        alternate_brush = option.palette.brush(group, QPalette.ColorRole.AlternateBase)
        text_color = option.palette.color(group, QPalette.ColorRole.Text)
        margin = style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, self) + 1
        grid = 1 if self.showGrid() else 0
        alternate = self.alternatingRowColors()
        x_end = header.length() - header.offset() - 1
        y_end = vheader.length() - vheader.offset() - 1
        selection = _selection_ranges(self)
        current = self.currentIndex()
        focus = current.isValid() and (self.hasFocus() or self.viewport().hasFocus())
        focus_row, focus_col = (current.row(), current.column()) if focus else (-1, -1)
        line_height = self._line_height
        view_model = self.model()
        columns = _visible_columns(self)
        # PySide6's stubs omit QRegion's __len__ and __getitem__, which iterate it at run time
        for part in event.region():  # type: ignore[attr-defined]
            dirty = QRect(part)
            dirty.setBottom(min(dirty.bottom(), y_end))
            dirty.setRight(min(dirty.right(), x_end))
            if not dirty.isValid():
                continue
            top = vheader.visualIndexAt(dirty.top())
            bottom = vheader.visualIndexAt(dirty.bottom())
            if bottom == -1:
                bottom = vheader.count() - 1
            if top == -1 or top > bottom:
                continue
            # (column, x, width, text width, right-aligned) of the columns in the dirty area
            cols = [
                (c, x, w, w - 2 * margin, source.numeric(c))
                for c, x, w in columns
                if x + w + grid > dirty.left() and x <= dirty.right()
            ]
            rows = []
            for visual in range(top, bottom + 1):
                row = vheader.logicalIndex(visual)
                y, h = self.rowViewportPosition(row), self.rowHeight(row) - grid
                source_row = row if proxy is None else proxy.mapToSource(proxy.index(row, 0)).row()
                rows.append((row, y, h, source_row))
                odd = alternate and bool(visual & 1)
                chosen = _columns_selected(selection, row)
                special = chosen | {focus_col} if row == focus_row else chosen
                ty = y + (h - line_height) // 2
                painter.setPen(text_color)
                for col, x, w, room, right in cols:
                    text = source.cell_text(source_row, col)
                    if col in special or not (text.isascii() and text.isprintable()):
                        # selected, current with focus, a line break or tab, or a character
                        # another font may draw: Qt's own paint
                        self._paint_by_qt(
                            painter,
                            option,
                            view_model.index(row, col),
                            QRect(x, y, w, h),
                            odd,
                            col in chosen,
                            row == focus_row and col == focus_col,
                        )
                        painter.setPen(text_color)
                        continue
                    if odd:
                        painter.fillRect(x, y, w, h, alternate_brush)
                    if not text:
                        continue
                    static, width = self._prepared(text, room)
                    tx = x + w - margin - width if right else x + margin
                    painter.drawStaticText(QPointF(tx, ty), static)
            if grid:
                self._paint_grid(painter, option, dirty, rows, [c[:3] for c in cols])

    def _paint_by_qt(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex,
        cell: QRect,
        odd: bool,
        selected: bool,
        focus: bool,
    ) -> None:
        """One cell as QTableView paints it: the row panel, then the item delegate."""
        opt = QStyleOptionViewItem(option)
        opt.rect = cell
        if selected:
            opt.state |= _SELECTED
        if focus:
            opt.state |= _HAS_FOCUS
        if odd:
            opt.features |= _ALTERNATE
        else:
            opt.features &= ~_ALTERNATE
        opt.palette.setCurrentColorGroup(QPalette.ColorGroup.Normal)
        self.style().drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewRow, opt, painter, self)
        self.itemDelegateForIndex(index).paint(painter, opt, index)

    def _paint_grid(
        self, painter: QPainter, option: QStyleOptionViewItem, dirty: QRect, rows: list, cols: list
    ) -> None:
        """The grid as QTableView (Qt 6) draws it: a line under each row across the dirty area,
        one right of each column down it, and the top and left lines where the style asks for
        them when the headers are hidden."""
        style = self.style()
        hint = style.styleHint(QStyle.StyleHint.SH_Table_GridLineColor, option, self)
        painter.setPen(QPen(QColor.fromRgb(hint & 0xFFFFFFFF), 0, self.gridStyle()))
        for _row, y, h, _source_row in rows:
            painter.drawLine(QLineF(dirty.left(), y + h, dirty.right(), y + h).translated(0.5, 0.5))
        for _col, x, w in cols:
            painter.drawLine(QLineF(x + w, dirty.top(), x + w, dirty.bottom()).translated(0.5, 0.5))
        if not style.styleHint(QStyle.StyleHint.SH_Table_AlwaysDrawLeftTopGridLines, option, self):
            return
        if self.horizontalHeader().isHidden() and rows and rows[0][1] == dirty.top():
            painter.drawLine(dirty.left(), rows[0][1], dirty.right(), rows[0][1])
        if self.verticalHeader().isHidden() and cols and cols[0][1] == dirty.left():
            painter.drawLine(cols[0][1], dirty.top(), cols[0][1], dirty.bottom())


def _is_text_model(model: Any) -> bool:
    """A DataFrameModel (duck-typed: widgets.py builds its tables from this module)."""
    return hasattr(model, "cell_text") and hasattr(model, "numeric")


def _color_group(view: QTableView, option: QStyleOptionViewItem) -> QPalette.ColorGroup:
    """The palette group the common style paints an item in."""
    if not view.isEnabled():
        return QPalette.ColorGroup.Disabled
    if not option.state & QStyle.StateFlag.State_Active:
        return QPalette.ColorGroup.Inactive
    return QPalette.ColorGroup.Normal


def _visible_columns(view: QTableView) -> list[tuple[int, int, int]]:
    """``(column, x, width less the grid line)`` of each shown column, in visual order."""
    header = view.horizontalHeader()
    grid = 1 if view.showGrid() else 0
    out = []
    for visual in range(header.count()):
        col = header.logicalIndex(visual)
        if header.isSectionHidden(col):
            continue
        out.append((col, view.columnViewportPosition(col), view.columnWidth(col) - grid))
    return out


def _selection_ranges(view: QTableView) -> list[tuple[int, int, int, int]]:
    """``(top, bottom, left, right)`` of each selected range."""
    model = view.selectionModel()
    if model is None:
        return []
    return [(r.top(), r.bottom(), r.left(), r.right()) for r in model.selection().toList()]


def _columns_selected(ranges: list[tuple[int, int, int, int]], row: int) -> set[int]:
    """The columns selected in ``row``."""
    out: set[int] = set()
    for top, bottom, left, right in ranges:
        if top <= row <= bottom:
            out.update(range(left, right + 1))
    return out
