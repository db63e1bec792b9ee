"""widgets.fit_columns sizes a DataFrameModel table's columns as Qt's resizeColumnsToContents
does, without asking the model for every role of every cell."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PySide6.QtCore import QSortFilterProxyModel, Qt
from PySide6.QtWidgets import QTableView

from analyser.gui.widgets import RESIZE_PRECISION, DataFrameModel, fit_columns

pytestmark = pytest.mark.gui


def _frame(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "name": [f"layer{i}.conv{i % 7}/gradInput" * (1 + i % 3) for i in range(n)],
            "cycles": rng.integers(0, 10**9, n),
            "share": rng.random(n) * 100,
            "kind": ["a", "bb", "ccc", "a long header beats me"][:1] * n,
            "bytes": rng.integers(0, 10**7, n),
        }
    )


@pytest.mark.parametrize("grid", [True, False])
@pytest.mark.parametrize("proxy", [True, False])
def test_widths_are_qt_own(qtbot, grid, proxy):
    cols = [
        ("name", "Operation", None),
        ("cycles", "Total cycles", None),
        ("share", "Share (%)", lambda v: f"{v:.1f}%"),
        ("kind", "A header wider than its values", None),
        ("bytes", "Bytes", lambda v: f"{v / 1024:,.2f} KiB"),
    ]
    model = DataFrameModel(_frame(RESIZE_PRECISION * 3), cols)
    model.sort(1, Qt.SortOrder.DescendingOrder)  # shown rows are not the frame order
    views = []
    for _ in range(2):
        view = QTableView()
        qtbot.addWidget(view)
        view.setShowGrid(grid)
        if proxy:
            p = QSortFilterProxyModel(view)
            p.setSourceModel(model)
            view.setModel(p)
        else:
            view.setModel(model)
        view.horizontalHeader().setResizeContentsPrecision(RESIZE_PRECISION)
        view.resize(900, 400)
        views.append(view)
    qt_view, ours = views
    qt_view.resizeColumnsToContents()
    fit_columns(ours, model)
    qt = [qt_view.columnWidth(c) for c in range(len(cols))]
    got = [ours.columnWidth(c) for c in range(len(cols))]
    assert all(abs(a - b) <= 1 for a, b in zip(qt, got)), (qt, got)
    assert got[3] == ours.horizontalHeader().sectionSizeHint(3)  # the header is the widest


def test_an_empty_table_gets_its_headers_widths(qtbot):
    model = DataFrameModel(pd.DataFrame({"x": []}), [("x", "A header", None)])
    view = QTableView()
    qtbot.addWidget(view)
    view.setModel(model)
    fit_columns(view, model)
    assert view.columnWidth(0) == view.horizontalHeader().sectionSizeHint(0)


def test_a_mask_filters_rows_in_the_sort_order_without_a_proxy(qtbot):
    """DataFrameModel.set_mask: the rows kept, in the current sort order, through sorts and a
    cleared mask; a new frame drops the old mask (its rows are not the new frame's)."""
    frame = pd.DataFrame({"name": list("edcba"), "v": [5, 1, 4, 2, 3]})
    model = DataFrameModel(frame, [("name", "Name", None), ("v", "V", None)])
    shown = lambda: [model.index(r, 0).data() for r in range(model.rowCount())]  # noqa: E731
    model.set_mask(np.array([True, False, True, True, False]))  # e, c, b
    assert shown() == ["e", "c", "b"]
    model.sort(1, Qt.SortOrder.DescendingOrder)  # by v: e 5, c 4, b 2
    assert shown() == ["e", "c", "b"] and model.raw(2, 1) == 2
    model.sort(0, Qt.SortOrder.AscendingOrder)
    assert shown() == ["b", "c", "e"]
    model.set_mask(None)
    assert shown() == ["a", "b", "c", "d", "e"]
    model.set_mask(np.array([False] * 5))
    assert model.rowCount() == 0
    model.set_frame(frame.head(2), [("name", "Name", None)])
    assert shown() == ["e", "d"]
    with pytest.raises(ValueError, match="a mask of 5 rows for a table of 2"):
        model.set_mask(np.ones(5, bool))  # a mask made for another frame


def test_a_sort_keeps_the_selection_on_the_same_row_of_the_frame(qtbot):
    """Sorting from the header moves the view's current row with its frame row (the details
    shown beside the table stay those of the highlighted row)."""
    frame = pd.DataFrame({"name": list("edcba"), "v": [5, 1, 4, 2, 3]})
    model = DataFrameModel(frame, [("name", "Name", None), ("v", "V", None)])
    view = QTableView()
    qtbot.addWidget(view)
    view.setModel(model)
    model.set_mask(np.array([True, True, True, False, True]))  # e, d, c, a
    view.selectRow(1)  # d
    model.sort(1, Qt.SortOrder.AscendingOrder)  # d 1, a 3, c 4, e 5
    assert view.currentIndex().data() == "d" and view.currentIndex().row() == 0
    model.sort(0, Qt.SortOrder.DescendingOrder)  # e, d, c, a
    assert view.currentIndex().data() == "d" and view.currentIndex().row() == 1


def test_fitted_columns_never_cut_the_texts_they_were_fitted_to(qtbot):
    """ "Total 704.72 ...", "Code B 592.25 ..." even at 2,560 px: the widths came from whole-pixel
    advances while the view elides at fractional ones, so a text a fraction of a pixel wider
    than its whole-pixel width was cut. Every text the columns were fitted to is drawn whole,
    the last rows' (a totals row) as well as the first ones'."""
    from analyser.gui.widgets import FilterTable

    n = RESIZE_PRECISION * 4
    values = [f"{v:,.2f} KiB" for v in np.linspace(300.01, 999.99, n)]
    values[-1] = "123,456,789.99 KiB"  # a wide total at the end
    frame = pd.DataFrame({"profile": ["A"] * n, "total": values, "code": values[::-1]})
    table = FilterTable()
    qtbot.addWidget(table)
    table.resize(2400, 600)
    table.show()
    table.set_frame(
        frame, [("profile", "Profile", None), ("total", "Total", None), ("code", "Code B", None)]
    )
    view = table.view
    margin = view.style().pixelMetric(view.style().PixelMetric.PM_FocusFrameHMargin, None, view) + 1
    view._check_font()
    rows = [*range(RESIZE_PRECISION), *range(n - RESIZE_PRECISION, n)]
    for col in (1, 2):
        room = view.columnWidth(col) - 2 * margin
        for r in rows:
            text = table.model.text(r, col)
            static, _w = view._prepared(text, room)
            assert static.text() == text, (col, r, text, view.columnWidth(col))
