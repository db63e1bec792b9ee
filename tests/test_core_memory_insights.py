"""Vertex state and exchange code insights (analyser.core.memory_insights), against the profile's
own tables (no Qt)."""

from __future__ import annotations

import numpy as np
import pytest

from analyser.core import Analysis
from analyser.core.memory_insights import EXCHANGE_CODE, EXCHANGE_TYPES, memory_insights
from analyser.core.quantities import MEMORY_CATEGORIES, STEP_TYPES
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    p = tmp_path_factory.mktemp("mem-insights") / "p.h5"
    write_profile(p, make_synthetic_profile(n_steps=1500, n_ipus=2, tiles=96, n_programs=150))
    with Analysis.open(p) as a:
        yield a


def test_totals_by_model_ipu_and_tile_are_the_stored_categories(analysis):
    a = analysis
    ins = memory_insights(a, n=10)
    by_cat = np.asarray(a.src.profile.array("/memory/by_category"), np.int64)
    state = by_cat[..., MEMORY_CATEGORIES.index("vertexInstanceState")]
    xcode = sum(by_cat[..., MEMORY_CATEGORIES.index(c)] for c in EXCHANGE_CODE)
    assert ins.model["vertex state"] == state.sum() and ins.model["exchange code"] == xcode.sum()
    np.testing.assert_array_equal(ins.per_ipu["vertex_state"], state.sum(axis=1))
    np.testing.assert_array_equal(ins.per_ipu["exchange_code"], xcode.sum(axis=1))
    np.testing.assert_array_equal(ins.per_ipu["largest_exchange_code_bytes"], xcode.max(axis=1))
    t = ins.per_ipu["largest_vertex_state_tile"].to_numpy()
    np.testing.assert_array_equal(state[np.arange(len(t)), t], state.max(axis=1))
    top = ins.top_tiles[ins.top_tiles["what"] == "vertex state"]
    assert len(top) == 10 and (np.diff(top["bytes"].to_numpy()) <= 0).all()
    assert top["bytes"].iloc[0] == state.max()
    assert state[top["ipu"].iloc[0], top["tile"].iloc[0]] == state.max()


def test_vertex_types_add_up_to_the_stored_state_and_say_where(analysis):
    a = analysis
    ins = memory_insights(a, n=10_000)
    v = ins.vertices
    # the types split each tile's stored state among them, so they add up to it (rounding)
    n_cells = len(v) * a.memory.num_ipus * a.memory.tiles_per_ipu
    assert abs(int(v["total_state_bytes"].sum()) - ins.model["vertex state"]) <= n_cells
    assert (np.diff(v["total_state_bytes"].to_numpy()) <= 0).all()
    vt = a.src.table("/graph/vertex_types")
    listed = dict(zip(vt["name"], vt["state_bytes"] * vt["instances"], strict=True))
    assert all(listed[r.vertex_type] == r.listed_state_bytes for r in v.itertuples())
    assert (v["largest_tile_bytes"] <= v["total_state_bytes"]).all()


def test_largest_exchanges_by_code_with_their_tiles(analysis):
    a = analysis
    ins = memory_insights(a, n=5)
    x = ins.exchanges
    nodes = a.src.table("/programs/nodes", ["name", "type", "code_bytes"])
    is_ex = np.isin(nodes["type"].to_numpy(), [STEP_TYPES.index(t) for t in EXCHANGE_TYPES])
    want = np.sort(nodes["code_bytes"].to_numpy()[is_ex])[::-1][:5]
    np.testing.assert_array_equal(x["code_bytes"].to_numpy(), want)
    ids = np.flatnonzero(is_ex)
    row = ids[np.argmax(nodes["code_bytes"].to_numpy()[ids])]
    on = np.asarray(a.src.profile.tile_cycles(np.array([row])))[0] > 0
    assert x["tiles"].iloc[0] == on.sum()
    if on.any():
        assert x["first_tile"].iloc[0] == np.argmax(on)
        assert x["code_per_tile"].iloc[0] == x["code_bytes"].iloc[0] // on.sum()
