"""The modelled per-tile memory layout (analyser.core.memory_layout), checked for the invariants
of an allocation (no Qt)."""

from __future__ import annotations

import numpy as np
import pytest

from analyser.core import Analysis
from analyser.core.memory_layout import (
    ALIGN,
    INTERLEAVED,
    NON_INTERLEAVED,
    OVERFLOWED,
    tile_layout,
    tile_variable_bytes,
)
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    out = tmp_path_factory.mktemp("layout")
    opened = {}
    import engine
    from engine.config import RunConfig

    p = out / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), p)  # the engine's own, consistent, figures
    opened["engine"] = Analysis.open(p)
    for name, kw in (("fit", {}), ("oom", {"oom": True})):
        p = out / f"{name}.h5"
        data = make_synthetic_profile(n_steps=1500, n_ipus=2, tiles=64, n_programs=80, seed=4, **kw)
        write_profile(p, data)
        opened[name] = Analysis.open(p)
    yield opened
    for a in opened.values():
        a.close()


def _overlaps(b) -> int:
    """Pairs of blocks that share an address while both are live."""
    s, e = b["start"].to_numpy(), b["end"].to_numpy()
    ls, le = b["live_start"].to_numpy(), b["live_end"].to_numpy()
    addr = (s[:, None] < e[None, :]) & (s[None, :] < e[:, None])
    time = (ls[:, None] <= le[None, :]) & (ls[None, :] <= le[:, None])
    both = addr & time & (b["bytes"].to_numpy()[:, None] > 0)
    np.fill_diagonal(both, False)
    return int(both.sum())


@pytest.mark.parametrize("name", ["engine", "fit", "oom"])
def test_layout_is_an_allocation_of_what_the_profile_stores(analyses, name):
    a = analyses[name]
    mem = a.memory
    top = mem.top_tiles[0]
    for ipu, tile in {(0, 0), (mem.num_ipus - 1, 37), (int(top.ipu), int(top.tile))}:
        lay = tile_layout(a, ipu, tile)
        b = lay.blocks
        # no two blocks live at the same time share an address
        assert _overlaps(b) == 0
        # every byte the profile holds for the tile is placed: the categories as stored, the
        # variables as their tile mapping spreads them
        cats = a.tile_breakdown(ipu, "category")
        by_cat = dict(zip(cats[1], cats[0][tile], strict=True))
        code = b[b["category"] != "variable"]
        for cat, n in by_cat.items():
            if cat != "variable":
                assert int(code.loc[code["category"] == cat, "bytes"].sum()) == n
        want = tile_variable_bytes(a.variables, ipu, tile)
        assert int(b.loc[b["category"] == "variable", "bytes"].sum()) == int(
            want["tile_bytes"].sum()
        )
        # the peak of the live blocks is the profile's tile total (always-live + peak
        # not-always-live), where the profile's figures agree with its variables (the engine's;
        # the synthetic generator draws the two independently)
        assert lay.profile_total == int(mem.tile_total[ipu][tile])
        if name == "engine":
            assert int(lay.live_bytes().max()) == lay.profile_total
        # code sits from address 0 in non-interleaved memory (or overflows), variables aligned
        assert code["start"].min() == 0
        assert set(code["region"]) <= {NON_INTERLEAVED, OVERFLOWED}
        var = b[b["category"] == "variable"]
        assert (var["start"] % ALIGN == 0).all()
        inter = var[var["region"] == INTERLEAVED]
        assert (inter["start"] >= lay.non_interleaved).all() and (inter["end"] <= lay.sram).all()
        # always-live variables come first and never share their addresses
        always = var[var["always_live"]]
        if len(always) and len(var) > len(always):
            assert always["start"].min() == lay.non_interleaved
        if lay.top_address > lay.sram:  # what lies above the tile's end says it overflowed
            assert (b.loc[b["end"] > lay.sram, "region"] == OVERFLOWED).all()


def test_block_at_names_the_variable_under_an_address(analyses):
    a = analyses["fit"]
    lay = tile_layout(a, 0, 5)
    var = lay.blocks[(lay.blocks["category"] == "variable") & ~lay.blocks["always_live"]]
    row = var.iloc[0]
    mid = (int(row["start"]) + int(row["end"])) // 2
    hit = lay.block_at(mid, int(row["live_start"]))
    assert hit is not None and hit["name"] == row["name"]
    free = lay.sram - 1
    assert lay.block_at(free, 0) is None or lay.block_at(free, 0)["end"] > free
    assert 0 <= lay.free_bytes() <= lay.sram


def test_steps_are_named_as_the_liveness_steps(analyses):
    a = analyses["engine"]
    lay = tile_layout(a, 0, 0)
    names = a.src.column("/liveness/steps", "name")
    assert len(lay.step_names) == lay.n_steps == len(names)
    assert lay.step_name(lay.peak_step()) == str(names[lay.peak_step()])
    assert lay.step_name(lay.n_steps) == ""
