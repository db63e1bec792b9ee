"""Qt-free parts of the GUI: tile-list parsing, units, per-tile details (analyser.viewmodels.tile_details)."""

from __future__ import annotations

import numpy as np
import pytest

from analyser.core.analysis import Analysis
from analyser.core.units import MemoryUnits, axis_scale, fmt_bytes
from analyser.gui.model.errors import TileSelectionError
from analyser.gui.model.selection import format_tile_list, parse_tile_list, toggle_pair
from analyser.viewmodels import tile_details


def test_tile_list_parsing_round_trip():
    pairs = parse_tile_list("0-3, 1000 ,1:5-6", num_ipus=2, tiles_per_ipu=1472)
    assert pairs.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [0, 1000], [1, 5], [1, 6]]
    assert format_tile_list(pairs, single_ipu=0) == "0-3, 1000, 1:5-6"
    assert parse_tile_list("7", 2, 16, default_ipu=1).tolist() == [[1, 7]]
    assert toggle_pair(pairs, 0, 2).tolist() == [[0, 0], [0, 1], [0, 3], [0, 1000], [1, 5], [1, 6]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "type tiles"),
        ("abc", "cannot read"),
        ("9-3", "runs backwards"),
        ("3:1", "IPU 3 does not exist"),
        ("1472", "tile 1472 does not exist"),
    ],
)
def test_tile_list_errors_are_one_sentence(text, message):
    with pytest.raises(TileSelectionError, match=message):
        parse_tile_list(text, 2, 1472)


def test_units():
    assert fmt_bytes(1536, MemoryUnits.KIB) == "1.50 KiB"
    assert fmt_bytes(1500, MemoryUnits.KB) == "1.50 kB"
    assert fmt_bytes(1536, MemoryUnits.BYTES) == "1,536 B"
    assert axis_scale(MemoryUnits.KIB, 600 * 1024) == (1024.0, "KiB")
    # a stash axis up to 3,000 KiB reads in MiB (its ticks were "3000")
    assert axis_scale(MemoryUnits.KIB, 3000 * 1024) == (1024.0**2, "MiB")
    assert axis_scale(MemoryUnits.KB, 3_000_000) == (1000.0**2, "MB")
    assert axis_scale(MemoryUnits.BYTES, 10) == (1.0, "bytes")


@pytest.fixture(scope="module")
def analysis(synthetic_profile):
    path = synthetic_profile(n_steps=2000, n_ipus=2, tiles=128, n_programs=150, seed=3)
    with Analysis.open(path) as a:
        yield a


def test_variable_bytes_on_tiles_add_up(analysis):
    """Spreading each variable evenly over its tiles (remainder first) conserves its bytes."""
    v = analysis.variables
    for ipu in range(analysis.target.num_ipus):
        tiles = np.arange(analysis.target.tiles_per_ipu)
        frame = tile_details.tile_variables(analysis, ipu, tiles)
        on = v[(v["ipu"] == ipu) & (v["bytes"] > 0)]
        assert int(frame["bytes_on_selection"].sum()) == int(on["bytes"].sum())
        assert set(frame["name"]) == set(on["name"])


def test_tile_details_cover_the_selected_tiles(analysis):
    tiles = np.array([0, 5, 64])
    cs = tile_details.tile_compute_sets(analysis, 0, tiles)
    table = analysis.src.table("/graph/compute_sets")
    table = table[table["ipu"] == 0]
    s, c = table["tile_start"].to_numpy(), table["tile_count"].to_numpy()
    touching = ((s[:, None] <= tiles) & (tiles < (s + c)[:, None])).any(axis=1)
    assert len(cs) == int(touching.sum())
    rows = tile_details.tile_memory_rows(analysis, 1, tiles, "category")
    np.testing.assert_array_equal(rows["total"], analysis.memory.tile_total[1, tiles])
    vt = tile_details.tile_vertices(analysis, 0, tiles)
    assert int(vt["instances_on_selection"].sum()) == int(cs["vertices_on_selection"].sum())
    ex = tile_details.tile_exchanges(analysis, 0, tiles)
    assert (ex["cycles_on_selection"] > 0).all()
    grid = tile_details.floor_plan(analysis, np.arange(analysis.target.tiles_per_ipu, dtype=float))
    xy = tile_details.tile_xy(analysis)
    assert grid[xy[5, 0], xy[5, 1]] == 5.0
    assert np.isfinite(grid).sum() == analysis.target.tiles_per_ipu
