"""The Program Tree's Qt model answers what its view-model says: texts (formatted once and kept
until the compare deltas change), parents, fonts and colours."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import synthetic_documents
from PySide6.QtCore import QModelIndex, Qt

from analyser.core.units import NEW, MemoryUnits
from analyser.gui.model import program_tree as ptm
from analyser.gui.reports.program_tree import ProgramTreeModel

pytestmark = pytest.mark.gui

DISPLAY = Qt.ItemDataRole.DisplayRole


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    yield from synthetic_documents(
        tmp_path_factory, "qt-tree", 11, n_steps=300, n_ipus=2, tiles=32, n_programs=40
    )


def _walk(model: ProgramTreeModel, parent: QModelIndex | None = None):
    parent = QModelIndex() if parent is None else parent
    for row in range(model.rowCount(parent)):
        index = model.index(row, 0, parent)
        yield index
        yield from _walk(model, index)


def test_cells_parents_and_fonts_are_the_view_model(qapp, docs):
    tree = ptm.program_tree(docs[0], MemoryUnits.KIB)
    model = ProgramTreeModel(tree)
    seen = 0
    for _ in range(2):  # the second pass reads kept texts: the same
        for index in _walk(model):
            node = model.node_of(index)
            parent = model.parent(index)
            assert model.node_of(parent) == int(tree.parents[node])
            for col in range(model.columnCount()):
                cell = model.index(index.row(), col, parent)
                assert model.data(cell, DISPLAY) == tree.text(node, col)
                assert model.parent(cell) == parent
            bold = model.data(index, Qt.ItemDataRole.FontRole)
            assert (bold is not None and bold.bold()) == (tree.types[node] < ptm.FIRST_STEP_TYPE)
            seen += 1
    assert seen == 2 * tree.n


def test_new_deltas_are_shown_not_the_kept_texts(qapp, docs):
    a, b = docs
    tree = ptm.program_tree(b, MemoryUnits.KIB)
    model = ProgramTreeModel(tree)
    model.set_delta(ptm.matched_cycle_change(a, b))
    col = model.column("delta")
    leaves = [i for i in _walk(model) if tree.types[model.node_of(i)] >= ptm.FIRST_STEP_TYPE]
    cells = [model.index(i.row(), col, model.parent(i)) for i in leaves]
    before = [model.data(c, DISPLAY) for c in cells]
    assert any(t not in ("", NEW) for t in before)
    model.set_delta(np.full(tree.n, np.inf))
    assert [model.data(c, DISPLAY) for c in cells] == [NEW] * len(cells)
