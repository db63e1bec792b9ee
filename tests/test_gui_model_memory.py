"""The Memory Report's view-model without Qt: the stacked chart adds up to the
analysis core's per-tile totals, compare deltas are B - A, the Totals tab's shares sum to 100%,
the tile map and the selected tiles' tables say which tile is which."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import synthetic_documents

from analyser.core.units import MemoryUnits
from analyser.gui.model import memory as mm


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    yield from synthetic_documents(
        tmp_path_factory, "model-memory", 5, n_steps=600, n_ipus=2, tiles=64, n_programs=60
    )


@pytest.mark.parametrize("breakdown", [None, "category", "region", "liveness"])
@pytest.mark.parametrize("physical", [False, True])
def test_stacks_add_up_to_the_core_per_tile_totals(docs, breakdown, physical):
    a = docs[0]
    mem = a.analysis.memory
    for gaps in (False, True):
        chart = mm.build_chart(a, [0, 1], breakdown, physical, gaps)
        assert chart.values.shape[0] == 2 * chart.tiles_per_ipu
        assert len(chart.names) == len(chart.color_keys) == chart.values.shape[1]
        expected = mem.tile_total + (mem.tile_gaps if gaps else 0)
        np.testing.assert_array_equal(chart.totals, expected[chart.ipu_of, chart.tile_of])
        # every tile once per IPU, in the chosen order
        for ipu in (0, 1):
            tiles = chart.tile_of[chart.ipu_of == ipu]
            assert sorted(tiles.tolist()) == list(range(chart.tiles_per_ipu))
            if not physical:
                assert tiles.tolist() == list(range(chart.tiles_per_ipu))
        # the drawn stack: the last level is the total, each bar's heights add up to it
        edges, cum = chart.stack(1024.0)
        assert edges.size == chart.values.shape[0] + 1
        np.testing.assert_allclose(cum[:, -1], chart.totals / 1024.0)
        groups, bounds = mm.stack_rects(edges, cum, chart.present())
        heights = np.zeros(chart.values.shape[0])
        for j, rects in groups:
            assert chart.values[:, j].any() and (rects[:, 3] > 0).all()
            np.add.at(heights, (rects[:, 0] + 0.5).astype(int), rects[:, 3])
        np.testing.assert_allclose(heights, chart.totals / 1024.0)
        assert bounds[3] == pytest.approx(max(chart.top() / 1024.0, 0) or 1.0)


def test_one_ipu_and_positions(docs):
    chart = mm.build_chart(docs[0], [1], "category", False, False)
    assert chart.ipus == (1,) and set(chart.ipu_of.tolist()) == {1}
    pos = chart.positions_of(np.array([[1, 3], [1, 7], [0, 5]]))
    assert pos.tolist() == [3, 7]  # IPU 0 is not shown
    assert chart.positions_of(mm.no_tiles()).size == 0
    assert chart.position_at(2.4) == 2 and chart.position_at(2.6) == 3
    assert chart.position_at(-0.6) is None and chart.position_at(chart.tiles_per_ipu) is None


def test_compare_deltas_are_b_minus_a(docs):
    a, b = (mm.build_chart(d, [0, 1], "category", False, False) for d in docs)
    delta = mm.tile_delta(a, b)
    np.testing.assert_array_equal(delta, b.totals - a.totals)
    bars = mm.delta_bars(delta, 1024.0)
    x_up, h_up = bars.increase
    x_down, h_down = bars.decrease
    assert (h_up > 0).all() and (h_down < 0).all()
    assert x_up.size + x_down.size == int(np.count_nonzero(delta))
    np.testing.assert_allclose(h_up, delta[x_up.astype(int)] / 1024.0)
    assert bars.span == pytest.approx(np.abs(delta).max() / 1024.0)
    rows = mm.compare_totals(a, b)
    assert rows[-1] == ("Total", int(a.values.sum()), int(b.values.sum()))
    for name, va, vb in rows[:-1]:
        j = a.names.index(name)
        assert (va, vb) == (int(a.values[:, j].sum()), int(b.values[:, j].sum()))
    _headers, _title, text = mm.compare_totals_section(a, b, 1, 4, MemoryUnits.BYTES)
    assert text[-1] == ("Out-of-memory tiles", "1", "4", "+3")


def test_totals_shares_sum_to_100_percent(docs):
    chart = mm.build_chart(docs[0], [0, 1], "region", False, True)
    headers, title, rows = mm.totals_section(chart, MemoryUnits.BYTES)
    assert headers == ("Class", "Bytes", "Share") and title == "Memory of IPU 0, IPU 1"
    assert [r[0] for r in rows] == [*chart.names, "Total"]
    shares = [float(r[2].rstrip("%")) for r in rows[:-1]]
    assert sum(shares) == pytest.approx(100.0, abs=0.05 * len(shares))
    assert rows[-1][1].replace(",", "").split()[0] == str(int(chart.values.sum()))


def test_tile_map_and_fullest_tile(docs):
    a = docs[0]
    mem = a.analysis.memory
    ipu, tile = mm.fullest_tile(a, [0, 1])
    assert mem.tile_used[ipu, tile] == mem.tile_used.max()
    assert mm.fullest_tile(a, []) is None
    plans = mm.floor_plans([("A", a)], [0, 1], gaps=True)
    assert [p.ipu for p in plans] == [0, 1]
    for plan in plans:
        share = mem.tile_used[plan.ipu] / mem.sram_per_tile
        np.testing.assert_allclose(plan.grid[plan.xy[:, 0], plan.xy[:, 1]], share)
        assert plan.n_oom == int((mem.tile_used[plan.ipu] > mem.sram_per_tile).sum())
        for t in (0, 17, len(plan.xy) - 1):
            assert plan.tile_at(*plan.xy[t]) == t
        assert plan.tile_at(-1, 0) is None
    both = mm.floor_plans([("A", a), ("B", docs[1])], [1, 0], gaps=False)
    assert [p.ipu for p in both] == [1, 1] and "(B: " in both[1].title
    hi = mm.map_levels(plans)
    assert hi >= 1.0
    stops = mm.map_stops(2.0, 5)
    assert stops == sorted(stops) and stops[4] == pytest.approx(0.5) and stops[-1] == 1.0
    assert len(mm.map_stops(1.0, 5)) == 5
    assert (1.0, "100%") in mm.map_ticks(1.7)


def test_largest_variables_and_selected_tiles(docs):
    a, b = docs
    frame, first = mm.variables_table([("A", a, [0, 1]), ("B", b, [0, 1])], compare=True)
    assert set(frame["profile"]) == {"A", "B"}
    bars = mm.largest_variables(first, 10)
    assert len(bars.y) == 10 and (np.diff(bars.sizes) <= 0).all()
    assert bars.y[0] == 9 and bars.bar_at(9.2) == 0 and bars.bar_at(8.5) is None
    masks = bars.by_kind()
    assert sum(int(m.sum()) for _k, m in masks) == 10
    assert mm.largest_variables(first.head(0)) is None
    sel = np.array([[0, 1], [0, 2], [1, 5]])
    for table in mm.DETAIL_TABLES:
        f = mm.selected_tiles_table([("A", a), ("B", b)], sel, table, "region")
        if len(f):
            assert set(f["ipu"]) <= {0, 1} and set(f["profile"]) <= {"A", "B"}
    tiles = mm.selected_tiles_table([("A", a)], sel, "tiles", None)
    assert "profile" not in tiles and sorted(zip(tiles["ipu"], tiles["tile"])) == [
        (0, 1),
        (0, 2),
        (1, 5),
    ]
    assert mm.selected_tiles_table([("A", a)], mm.no_tiles(), "tiles", None).empty
    assert mm.one_tile(1, 5).tolist() == [[1, 5]]


def test_tile_memory_map_blocks(docs):
    from analyser.gui.model import data

    a = docs[0]
    ipu, tile = mm.fullest_tile(a, [0, 1])
    layout = data.tile_layout(a, ipu, tile)
    b = layout.blocks
    blocks = mm.layout_blocks(layout, 1024.0)
    assert blocks.rects.shape == (len(b), 4)
    np.testing.assert_allclose(blocks.rects[:, 1], b["start"] / 1024.0)
    np.testing.assert_allclose(blocks.rects[:, 3], b["bytes"] / 1024.0)
    np.testing.assert_array_equal(blocks.rects[:, 2], b["live_end"] - b["live_start"] + 1)
    # every block in exactly one colour group; neighbours in address differ in shade
    masks = [m for _g, _n, _dark, m in blocks.colour_groups()]
    np.testing.assert_array_equal(np.sum(masks, axis=0), np.ones(len(b)))
    by_address = blocks.shade[np.argsort(b["start"].to_numpy(), kind="stable")]
    assert (by_address[1:] != by_address[:-1]).all()
    keys = set(mm.legend_keys([layout]))
    assert {(g, n) for g, n, _d, _m in blocks.colour_groups()} == keys
    row = b.iloc[0]
    assert mm.block_rect(row, 1024.0) == pytest.approx(tuple(blocks.rects[0]))
    assert mm.block_text(layout, row, MemoryUnits.BYTES).startswith(f"{row['name']} (")
    title = mm.layout_title(layout, MemoryUnits.KIB, "A: ")
    assert title.startswith(f"A: IPU {ipu}, tile {tile}: ") and f"{len(b):,} blocks." in title


def test_memory_insights_tables_carry_both_profiles(docs):
    from analyser.gui.model import data

    items = [("A: ", data.memory_insights(docs[0])), ("B: ", data.memory_insights(docs[1]))]
    for table in ("vertices", "exchanges", "top_tiles"):
        both = mm.insights_table(items, table, compare=True)
        sizes = [len(getattr(ins, table)) for _t, ins in items]
        assert len(both) == sum(sizes)
        assert both["profile"].tolist() == ["A"] * sizes[0] + ["B"] * sizes[1]
        one = mm.insights_table(items[:1], table, compare=False)
        assert "profile" not in one and len(one) == sizes[0]
    assert mm.insights_table([], "vertices", compare=False).empty
