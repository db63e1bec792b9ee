"""The engine's what-if ``balance_compute_sets`` (engine/compiler/balance.py) and the
``throughput.tile_imbalance`` insight that re-simulates with it."""

from __future__ import annotations

import numpy as np
import pytest

from profiles import schema


def _worst(compiled, n: int = 3) -> np.ndarray:
    p = compiled.programs
    ote = np.flatnonzero(p.type == schema.code("program_type", "OnTileExecute"))
    return ote[np.argsort(compiled.tile_balance(ote), kind="stable")[:n]]


def test_a_balanced_compute_set_gives_every_tile_its_mean():
    from engine.compiler import compile_program
    from engine.config import RunConfig

    base = compile_program(RunConfig(model="mlp"))
    rows = _worst(base)
    names = [str(n) for n in base.programs.name[rows]]
    # the heaviest compute set too, whose mean is many cycles
    p = base.programs
    ote = np.flatnonzero(p.type == schema.code("program_type", "OnTileExecute"))
    heavy = ote[np.argmax(p.cycles[ote])]
    rows = np.append(rows, heavy)
    names.append(str(p.name[heavy]))
    bal = compile_program(RunConfig(model="mlp", balance_compute_sets=names))
    t = base.compute_tiles
    before = base.tile_cycles(rows).astype(np.int64)
    after = bal.tile_cycles(rows).astype(np.int64)
    work = before.sum(axis=1)
    np.testing.assert_array_equal(after.sum(axis=1), work)  # the work is kept exactly
    mean = work / t
    # every compute tile does the mean, in whole cycles
    assert (np.abs(after[:, :t] - mean[:, None]) < 1).all()
    np.testing.assert_array_equal(bal.programs.cycles[rows], -(-work // t))
    assert (bal.programs.cycles[rows] <= base.programs.cycles[rows]).all()
    assert (bal.programs.cycles[rows] < base.programs.cycles[rows]).any()
    # nothing else moved
    other = np.setdiff1d(np.arange(len(p)), rows)
    np.testing.assert_array_equal(bal.programs.cycles[other], base.programs.cycles[other])
    np.testing.assert_array_equal(bal.tile_cycles(other), base.tile_cycles(other))


def test_an_unknown_compute_set_is_one_sentence():
    from engine.compiler import compile_program
    from engine.config import RunConfig
    from engine.errors import ConfigError

    with pytest.raises(ConfigError, match=r"did you mean 'layers\.1/fwd/Relu'"):
        compile_program(RunConfig(model="mlp", balance_compute_sets=["layers.1/fwd/Rel"]))
    with pytest.raises(ConfigError, match="balance_compute_sets"):
        RunConfig.from_dict({"model": "mlp", "balance_compute_sets": ["  "]})


def test_the_insight_re_simulates_the_balanced_run(tmp_path):
    """On walkthrough step 5 (imbalanced layer4 convolutions, flagged with a stricter balance
    threshold) the re-simulated gain is positive, at most the measured upper bound, and the
    predicted effect carries its interval."""
    import engine
    from analyser.cli.demo import walkthrough_configs
    from analyser.core import Analysis
    from analyser.core.insights import Thresholds, find_insights
    from analyser.sim.simulators import InProcessSimulator
    from engine.config import RunConfig

    cfg = next(c for c in walkthrough_configs() if c.stem == "5-8bit-io")
    path = tmp_path / "w5.h5"
    engine.simulate_to_file(RunConfig.from_toml(cfg), path)
    th = Thresholds().with_overrides({"tile_balance": 0.9, "heavy_compute_share": 0.005})
    with Analysis.open(path) as a:
        tips = find_insights(a, th, simulator=InProcessSimulator(tmp_path / "cache"))
        tip = next(t for t in tips if t.id == "throughput.tile_imbalance")
        names = tip.change["balance_compute_sets"]
        cs = a.imbalance.compute_sets
        bound = float(cs.loc[cs["name"].isin(names), "lost_cycles"].sum())
    assert 1 <= len(names) <= 5 and "re-simulates" in tip.summary
    eff = tip.effect
    assert eff.status == "fits", eff.message
    gain = eff.before["total_cycles"] - eff.after["total_cycles"]
    assert 0 < gain <= bound
    change = eff.intervals["total_cycles"]["change"]
    assert change["value"] < 0
    if change["low"] is None:  # the table does not validate this run: it says why
        assert change["high"] is None and change["level"] is None
        assert change["note"].startswith("outside the validated range: ")
    else:
        assert change["low"] <= change["value"] <= change["high"] and change["level"] == 0.8
