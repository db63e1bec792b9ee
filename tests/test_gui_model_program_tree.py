"""The Program Tree's view-model without Qt: rows and children cover every
node once, the columns are the profile's and the core's figures (own work x executions + waits
= executed cycles), compare deltas are B - A, search and details."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import synthetic_documents

from analyser.core.units import NEW, MemoryUnits
from analyser.gui.model import program_tree as ptm


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    yield from synthetic_documents(
        tmp_path_factory, "model-tree", 9, n_steps=800, n_ipus=2, tiles=64, n_programs=80
    )


def _int(text: str) -> int:
    return int(text.replace(",", "")) if text else 0


def test_rows_cover_every_node_once_under_its_parent(docs):
    tree = ptm.program_tree(docs[0], MemoryUnits.KIB)
    seen = []
    stack = [-1]
    while stack:
        node = stack.pop()
        kids = tree.children(node)
        assert len(kids) == tree.n_children(node)
        for row, child in enumerate(kids):
            assert tree.parents[child] == node
            assert tree.row_in_parent[child] == row
        seen += kids.tolist()
        stack += kids.tolist()
    assert sorted(seen) == list(range(tree.n))
    # pre-order rows: children in row (execution) order; the path runs down from the top
    for node in range(tree.n):
        assert (np.diff(tree.children(node)) > 0).all()
        parent = int(tree.parents[node])
        above = [*tree.ancestors(parent), parent] if parent >= 0 else []
        assert tree.ancestors(node) == above
    # the initial view: the first three levels, level by level, within the node and row budgets
    depth = np.array([len(tree.ancestors(n)) for n in range(tree.n)])
    width = np.array([len(tree.children(n)) for n in range(tree.n)])
    top = len(tree.children(-1))
    uncapped = tree.initially_expanded(10**9, rows=10**9)
    assert sorted(uncapped) == [n for n in range(tree.n) if depth[n] < 3 and width[n]]
    assert top + width[uncapped].sum() > 60  # so the 60-row case below leaves nodes collapsed
    for budget, rows in ((2, 10**9), (10, 10**9), (256, 10**9), (256, top + 3), (256, 60)):
        out = tree.initially_expanded(budget, rows=rows)
        assert len(out) <= budget and len(set(out)) == len(out)
        shown = top + int(width[out].sum())
        assert shown <= max(rows, top)
        opened = set(out)
        for n in range(tree.n):
            parent = int(tree.parents[n])
            if n in opened:  # a node with children, its parent open, in the first three levels
                assert width[n] and depth[n] < 3 and (parent < 0 or parent in opened)
            elif width[n] and depth[n] < 3 and (parent < 0 or parent in opened):
                # left collapsed: the budget ran out, or its children did not fit in the rows
                assert len(out) == budget or width[n] > rows - shown


def test_cycle_and_byte_columns_are_the_profile_and_the_core(docs):
    doc = docs[0]
    tree = ptm.program_tree(doc, MemoryUnits.BYTES)
    ex = doc.analysis.execution
    nodes = doc.analysis.src.table("/programs/nodes")
    col = {k: tree.column(k) for k in ("cycles", "executions", "total", "wait", "bytes", "ipu")}
    steps = np.flatnonzero(tree.types >= ptm.FIRST_STEP_TYPE)
    assert steps.size
    for node in steps:
        own = _int(tree.text(node, col["cycles"]))
        runs = _int(tree.text(node, col["executions"]))
        total = _int(tree.text(node, col["total"]))
        wait = _int(tree.text(node, col["wait"]))
        assert own == nodes["cycles"].iloc[node] and total == ex.program_cycles[node]
        assert own * runs + wait == total or (wait == 0 and own * runs >= total)
        b = tree.text(node, col["bytes"])
        assert (b == "") == (nodes["bytes"].iloc[node] == 0)
    control = np.flatnonzero(tree.types < ptm.FIRST_STEP_TYPE)
    for node in control:  # control flow has no cycles of its own
        assert tree.text(node, col["cycles"]) == tree.text(node, col["total"]) == ""
    assert tree.start_node() == int(np.argmax(ex.program_cycles))
    # shares: tile balance as a percentage, for compute and exchange steps only
    bal = tree.column("balance")
    for node in steps:
        text = tree.text(node, bal)
        assert (text != "") == (int(tree.types[node]) in ptm.BALANCED_TYPES)
        if text:
            assert 0.0 <= float(text.rstrip("%")) <= 100.0


def test_compare_delta_is_b_minus_a_by_name(docs):
    a, b = docs
    delta = ptm.matched_cycle_change(a, b)
    match = ptm.b_of_a(a, b)
    ca, cb = a.analysis.execution.program_cycles, b.analysis.execution.program_cycles
    for node_a, node_b in enumerate(match):
        if node_b >= 0:
            assert delta[node_b] == cb[node_b] - ca[node_a]
    unmatched = np.setdiff1d(np.arange(len(cb)), match[match >= 0])
    assert np.isnan(delta[unmatched]).all()
    plain = ptm.program_tree(b, MemoryUnits.KIB)
    tree = plain.with_delta(delta)
    assert tree.columns[-1] == ptm.DELTA_HEADER and tree.column("delta") == len(tree.columns) - 1
    assert plain.columns == ptm.COLUMNS and plain.delta is None  # a new tree; this one unchanged
    leaf = next(int(n) for n in np.flatnonzero(tree.types >= 3) if not np.isnan(delta[n]))
    assert _int(tree.text(leaf, tree.column("delta"))) == int(delta[leaf])
    assert tree.with_delta(np.full(tree.n, np.inf)).text(leaf, tree.column("delta")) == NEW
    assert tree.with_delta(None).columns == ptm.COLUMNS
    with pytest.raises(ValueError):  # read-only: the view-model is never changed in place
        tree.delta[leaf] = 0.0
    with pytest.raises(ValueError):
        tree.cycles[leaf] = 0


def test_search_and_details(docs):
    doc = docs[0]
    tree = ptm.program_tree(doc, MemoryUnits.KIB)
    name = tree.names[tree.n // 2]
    hits = tree.search(name.upper()[1:])
    assert tree.n // 2 in hits and all(name.upper()[1:] in tree.names[h].upper() for h in hits)
    assert (np.diff(hits) > 0).all() and tree.search("").size == 0
    node = tree.start_node()
    names = tuple(str(n) for n in doc.analysis.src.column("/graph/operations", "name"))
    pending = ptm.node_details(tree, names, node)
    assert dict(pending.rows)["Cycles per tile (min / mean / max)"] == ptm.TILES_PENDING
    figures = ptm.tile_figures(doc, node)
    per_tile = doc.analysis.src.profile.tile_cycles([node])[0]
    used = per_tile[per_tile > 0]
    assert figures.used == used.size and figures.high == (used.max() if used.size else 0)
    details = ptm.node_details(tree, names, node, figures)
    rows = dict(details.rows)
    if used.size:
        assert rows["Tiles used"] == f"{used.size:,}"
    op = int(tree.ops[node])
    assert rows["Operation"] == (names[op] if op >= 0 else "-")
    assert details.title == tree.names[node]
    assert rows["Children"] == str(tree.n_children(node))
    path = rows["Path"].split(" > ")
    assert path == [tree.names[a] for a in tree.ancestors(node)] or path == ["(root)"]
    if tree.ops[node] >= 0:
        same = int(((tree.ops == tree.ops[node]) & (np.arange(tree.n) != node)).sum())
        assert details.related_title.endswith(f", {same:,})")
        assert len(details.related) == min(same, ptm.RELATED_SHOWN)
