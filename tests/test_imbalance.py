"""Cycles lost to tile imbalance (analyser.core.imbalance): the slowest tile minus the
mean over the IPU's tiles, summed over executed compute steps, on a hand-built profile; in
``analyse summary`` (text and JSON) and the reports."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analyser.cli import main
from analyser.core import Analysis
from profiles import schema

TILES = 16


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A synthetic profile whose compute programs are rebuilt by hand: on each, tile 0 takes the
    program's cycles c, tile 1 takes c // 2 + 1, tile 2 takes 7, every other tile 0."""
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    d = make_synthetic_profile(n_steps=3000, n_ipus=2, tiles=TILES, n_programs=40)
    nodes, tc = d["/programs/nodes"], d["/programs"]["tile_cycles"]
    compute = np.flatnonzero(
        np.asarray(nodes["type"]) == schema.code("program_type", "OnTileExecute")
    )
    c = np.asarray(nodes["cycles"], np.int64)
    assert (c[compute] > 20).all()
    tc[compute] = 0
    tc[compute, 0] = c[compute]
    tc[compute, 1] = c[compute] // 2 + 1
    tc[compute, 2] = 7
    bal = np.asarray(nodes["tile_balance"], np.float32).copy()
    bal[compute] = tc[compute].sum(axis=1) / (c[compute] * TILES)
    nodes["tile_balance"] = bal
    path = tmp_path_factory.mktemp("imbalance") / "built.h5"
    write_profile(path, d)
    return path, d


def test_imbalance_is_the_slowest_tile_minus_the_mean(built):
    path, d = built
    steps = d["/execution/steps"]
    tc = d["/programs"]["tile_cycles"].astype(np.float64)
    is_compute = steps["type"] == schema.code("program_type", "OnTileExecute")
    prog = steps["program"][is_compute]
    ipu = steps["ipu"][is_compute]
    # by hand, step by step: max over the IPU's tiles minus their mean
    lost = tc[prog].max(axis=1) - tc[prog].mean(axis=1)
    want = np.bincount(ipu, lost, 2)
    with Analysis.open(path) as a:
        imb = a.imbalance
        np.testing.assert_allclose(imb.lost_cycles, want, rtol=1e-6)  # tile_balance is float32
        np.testing.assert_array_equal(
            imb.compute_cycles, np.bincount(ipu, steps["cycles"][is_compute], 2).astype(np.int64)
        )
        cs = imb.compute_sets
        assert cs["lost_cycles"].is_monotonic_decreasing
        np.testing.assert_allclose(cs["lost_cycles"].sum(), want.sum(), rtol=1e-6)
        first = cs.iloc[0]
        p = int(np.flatnonzero(d["/graph/compute_sets"]["name"] == first["name"])[0])
        program = int(d["/graph/compute_sets"]["program"][p])
        assert first["executions"] == int((prog == program).sum())
        assert first["max_cycles"] == tc[program].max()
        assert first["mean_cycles"] == pytest.approx(tc[program].mean(), rel=1e-6)


def test_summary_text_json_and_report(built, tmp_path, capsys):
    path, _ = built
    with Analysis.open(path) as a:
        lost = a.imbalance.lost_cycles
        top = a.imbalance.compute_sets.iloc[0]
    assert main(["summary", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["execution"]["imbalance"]
    assert [x["lost_cycles"] for x in d["ipus"]] == pytest.approx(lost.tolist())
    assert d["compute_sets"][0]["name"] == top["name"]
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "lost to tile imbalance" in out and f"{round(lost[0]):,}" in out
    assert main(["report", str(path), "-o", str(tmp_path / "r.md")]) == 0
    assert "lost to tile imbalance" in (tmp_path / "r.md").read_text()


def test_the_tile_imbalance_tip_names_the_compute_sets_to_balance(tmp_path):
    import engine
    from analyser.core.insights import find_insights
    from engine.config import RunConfig

    path = tmp_path / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    with Analysis.open(path) as a:
        tip = next(t for t in find_insights(a) if t.id == "throughput.tile_imbalance")
        lost = a.imbalance.lost_cycles
        a_names = set(a.imbalance.compute_sets["name"])
    names = tip.change["balance_compute_sets"]
    assert 1 <= len(names) <= 5 and "what-if" in tip.summary
    assert set(names) <= set(a_names)
    assert f"IPU 0 loses {round(lost[0]):,} cycles to tile imbalance" in tip.evidence[-1].text
