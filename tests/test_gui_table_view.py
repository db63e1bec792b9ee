"""TextTableView paints a DataFrameModel table's plain cells itself; the picture is Qt's own,
pixel for pixel (Qt's per-cell paint was half of a later Operations visit)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PySide6.QtCore import QSortFilterProxyModel, Qt
from PySide6.QtGui import QImage, QStandardItemModel
from PySide6.QtWidgets import QStyledItemDelegate

from analyser.gui.table_view import TextTableView
from analyser.gui.theme import apply_theme
from analyser.gui.widgets import DataFrameModel, compact_rows, fit_columns

pytestmark = pytest.mark.gui


def _frame(n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    names = [
        f"layer{i}.conv{i % 7}/gradInput" * (1 + i % 3) + (" with words" if i % 5 == 0 else "")
        for i in range(n)
    ]
    names[4] = "two\nlines"  # a line break: Qt's own paint
    names[6] = ""
    names[8] = "tiles × time (µs)"  # outside ASCII: Qt's own paint (another font may draw it)
    return pd.DataFrame(
        {
            "name": names,
            "cycles": rng.integers(0, 10**9, n),
            "share": rng.random(n) * 100,
            "kind": (["a", "bb", "ccc word"] * n)[:n],
        }
    )


COLUMNS = [
    ("name", "Name", None),
    ("cycles", "Cycles", None),
    ("share", "Share", lambda v: f"{v:.1f}%"),
    ("kind", "Kind", None),
]


def _view(qtbot, proxy: bool) -> TextTableView:
    model = DataFrameModel(_frame(), COLUMNS)
    view = TextTableView()
    qtbot.addWidget(view)
    if proxy:
        filt = QSortFilterProxyModel(view)
        filt.setSourceModel(model)
        filt.setFilterKeyColumn(-1)
        filt.setFilterFixedString("conv3")
        view.setModel(filt)
    else:
        view.setModel(model)
    view.setAlternatingRowColors(True)
    view.setSelectionBehavior(TextTableView.SelectionBehavior.SelectRows)
    view.verticalHeader().setVisible(False)
    compact_rows(view)
    view.resize(640, 360)
    fit_columns(view, model)
    view.setColumnWidth(0, 170)  # long names elided
    view.setColumnWidth(1, 70)  # some figures elided
    view.show()
    qtbot.waitExposed(view)
    return view


def _both(view: TextTableView, monkeypatch) -> tuple[QImage, QImage]:
    ours = view.grab().toImage()
    with monkeypatch.context() as m:
        m.setattr(TextTableView, "_fast_paint_possible", lambda self: False)
        theirs = view.grab().toImage()
    return ours, theirs


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("proxy", [False, True])
def test_cells_are_painted_as_qt_paints_them(qtbot, monkeypatch, proxy, theme):
    apply_theme(theme)
    try:
        view = _view(qtbot, proxy)
        view.selectRow(3)
        view.setFocus()
        states = [lambda: None, lambda: view.verticalScrollBar().setValue(7)]
        states.append(lambda: view.horizontalScrollBar().setValue(30))
        states.append(lambda: view.setColumnHidden(2, True))
        states.append(lambda: view.clearSelection())
        for change in states:
            change()
            ours, theirs = _both(view, monkeypatch)
            assert ours.size() == theirs.size()
            assert ours == theirs
    finally:
        apply_theme("light")


def test_plain_cells_skip_the_delegate(qtbot, monkeypatch):
    view = _view(qtbot, proxy=False)
    by_qt = []
    original = TextTableView._paint_by_qt

    def counting(self, painter, option, index, *rest):
        by_qt.append((index.row(), index.column()))
        return original(self, painter, option, index, *rest)

    monkeypatch.setattr(TextTableView, "_paint_by_qt", counting)
    view.clearSelection()
    view.setCurrentIndex(view.model().index(-1, -1))
    view.grab()
    assert by_qt == [(4, 0), (8, 0)]  # the line break and the non-ASCII text only
    view.selectRow(2)
    by_qt.clear()
    view.grab()
    assert sorted({r for r, _c in by_qt}) == [2, 4, 8]  # and the selected row


def test_other_models_and_delegates_are_painted_by_qt(qtbot, monkeypatch):
    calls = []
    monkeypatch.setattr(TextTableView, "_paint", lambda self, *a: calls.append(a))
    view = TextTableView()
    qtbot.addWidget(view)
    items = QStandardItemModel(3, 2)
    view.setModel(items)
    view.resize(200, 100)
    view.grab()
    assert calls == []
    view.setModel(DataFrameModel(_frame(10), COLUMNS))
    view.setItemDelegate(QStyledItemDelegate(view))  # the default type: still ours
    view.grab()
    assert len(calls) == 1

    class Custom(QStyledItemDelegate):
        pass

    view.setItemDelegate(Custom(view))
    view.grab()
    view.setItemDelegate(QStyledItemDelegate(view))
    view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    view.grab()
    view.setTextElideMode(Qt.TextElideMode.ElideRight)
    view.setWordWrap(True)
    view.grab()
    view.setWordWrap(False)
    view.grab()
    assert len(calls) == 2  # ours again
    view.setSpan(0, 0, 1, 2)
    view.grab()
    assert len(calls) == 2
