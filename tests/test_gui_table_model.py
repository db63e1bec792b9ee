"""DataFrameModel formats a cell once and keeps the text until its frame or columns change
(a table repainted on each visit formatted its visible cells every time)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PySide6.QtCore import Qt

import analyser.gui.widgets as widgets
from analyser.gui.widgets import DataFrameModel

pytestmark = pytest.mark.gui

DISPLAY = Qt.ItemDataRole.DisplayRole


def _counting(fmt):
    calls = []

    def f(v):
        calls.append(v)
        return fmt(v)

    return f, calls


def _shown(model: DataFrameModel, col: int) -> list[str]:
    return [model.data(model.index(r, col), DISPLAY) for r in range(model.rowCount())]


def test_each_cell_formatted_once_and_texts_follow_sort_and_mask():
    frame = pd.DataFrame({"name": ["c", "a", "b", "d"], "bytes": [3000, 1000, 2000, 4000]})
    kib, calls = _counting(lambda v: f"{v / 1000:.1f} kB")
    model = DataFrameModel(frame, [("name", "Name", None), ("bytes", "Bytes", kib)])
    for _ in range(3):  # three paints of the same cells
        assert _shown(model, 1) == ["3.0 kB", "1.0 kB", "2.0 kB", "4.0 kB"]
    assert len(calls) == 4
    model.sort(0)
    assert _shown(model, 0) == ["a", "b", "c", "d"]
    assert _shown(model, 1) == ["1.0 kB", "2.0 kB", "3.0 kB", "4.0 kB"]  # kept, re-ordered
    model.set_mask(np.array([True, False, True, False]))  # frame rows 0 and 2: "c", "b"
    assert _shown(model, 0) == ["b", "c"]
    assert _shown(model, 1) == ["2.0 kB", "3.0 kB"]
    assert len(calls) == 4  # sorting and filtering formatted nothing again


def test_new_frame_or_formatter_is_formatted_afresh():
    frame = pd.DataFrame({"bytes": [1024, 2048]})
    model = DataFrameModel(frame, [("bytes", "Bytes", lambda v: f"{v / 1024:g} KiB")])
    assert _shown(model, 0) == ["1 KiB", "2 KiB"]
    # a change of units re-sets the frame with new formatters: no text of the old units stays
    model.set_frame(frame, [("bytes", "Bytes", lambda v: f"{v / 1000:g} kB")])
    assert _shown(model, 0) == ["1.024 kB", "2.048 kB"]
    model.set_frame(pd.DataFrame({"bytes": [0]}), [("bytes", "Bytes", lambda v: f"{v} B")])
    assert _shown(model, 0) == ["0 B"]


def test_kept_texts_are_bounded(monkeypatch):
    monkeypatch.setattr(widgets, "_TEXT_CACHE_CELLS", 50)
    n = 400
    frame = pd.DataFrame({"i": np.arange(n), "j": np.arange(n) * 2})
    model = DataFrameModel(frame)
    for _ in range(2):  # a long scroll down the table, twice
        assert _shown(model, 1) == [f"{2 * i:,}" for i in range(n)]
        assert len(model._texts) <= 50


@pytest.mark.parametrize("unit", ["KiB", "kB"])
def test_the_widest_rows_hold_the_widest_text_when_a_unit_scales_the_numbers(unit):
    """The column width is measured on the rows :meth:`DataFrameModel.widest_rows` names: with
    memory in units, 1,023.50 KiB (or 999.99 kB) is wider than the largest value's 1.43 MiB,
    and was cut in the compared Operations table; every value's text is compared here."""
    from analyser.core.units import fmt_bytes

    rng = np.random.default_rng(0)
    values = np.r_[rng.integers(1, 1_500_000, 3000), 1_048_064, 999_990, -1_048_064, 0]
    rng.shuffle(values)
    model = DataFrameModel(
        pd.DataFrame({"bytes": values}), [("bytes", "Bytes", lambda v: fmt_bytes(v, unit))]
    )
    widest = max(len(model.text(r, 0)) for r in range(len(values)))
    assert max(len(model.text(r, 0)) for r in model.widest_rows(0)) == widest
    assert len(model.widest_rows(0)) <= 4 * 64  # a few per magnitude, not every row
