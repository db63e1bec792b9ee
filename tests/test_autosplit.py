"""``analyse tune --vary split_points=auto``: the split search against exhaustive grids of small
pipelined models (every split and per-stage proportion pair of a BERT-base out of memory at its
default proportions; every split of a three-stage MLP), its per-stage report (cycles and memory
of your split and the chosen one, each with its interval or the sentence saying why there is
none), the cost model against brute force, and its refusals (tests/hostile.py). Simulations run
on the session's cluster."""

from __future__ import annotations

import itertools
import json
import math

import hostile
import numpy as np
import pytest

from analyser.core.intervals import OUTSIDE
from analyser.sim.tune import TuneError, build_space, load_results, tune
from analyser.sim.tune.autosplit import (
    MAX_SCORED,
    WINDOW,
    BlockCosts,
    _balanced,
    model_blocks,
    model_share,
    score_partitions,
)

#: Per-stage proportions searched: 0.05 slows the stages whose matmuls then plan in several
#: passes, 0.6 is the target's default.
AMPS = (0.05, 0.6)
BUDGET = 16


def _start() -> dict:
    """A BERT-base on two IPUs, split after encoder layer 2 (stage 1 holds three quarters of
    the encoder): small enough that the whole space of two stages is cheap to simulate."""
    from engine.config import RunConfig

    return RunConfig.from_dict(
        {
            "model": "bert-base",
            "seq_length": 32,
            "micro_batch_size": 2,
            "num_ipus": 2,
            "strategy": "pipelined",
            "split_points": ["encoder.layer.3"],
            "gradient_accumulation": 16,
            "precision": "16.16",
            "loss_scaling": 128.0,
        }
    ).to_dict()


@pytest.fixture(scope="module")
def searched(sim_cluster, tmp_path_factory):
    """The auto search, then every split of whole blocks at the default proportion on both
    IPUs (a grid of the splits alone; the whole grid with the proportions is the test of a
    start out of memory below) on the same service: the grid reuses the search's answers. The
    answers' cache is shared by the suite's workers (tests/shared_files.py): the worker that
    comes second searches the same way, answered from it."""
    from shared_files import shared_folder

    from analyser.sim.service import SimulationService

    cluster = sim_cluster._cluster
    address = cluster.scheduler_address if cluster is not None else sim_cluster.scheduler
    with (
        shared_folder(tmp_path_factory, "autosplit-cache") as (cache, _),
        SimulationService(scheduler=address, cache_dir=cache, security=sim_cluster.security) as svc,
    ):
        start = _start()
        auto_space = build_space(
            start,
            ["split_points=auto", "amp=" + ",".join(map(str, AMPS))],
            [],
            "throughput",
        )
        auto = tune(auto_space, svc, budget=BUDGET)
        blocks = model_blocks(start)
        grid_space = build_space(
            start,
            [
                "split_points=" + ",".join(blocks[1:]),
                "available_memory_proportion_per_ipu=0.6+0.6",
            ],
            [],
            "throughput",
        )
        grid = tune(grid_space, svc, budget=10_000, strategy="grid")
    return auto, grid, blocks


def test_auto_split_finds_the_best_split(searched):
    auto, grid, blocks = searched
    grid_best = grid.best
    assert grid_best is not None and len(grid.rows) >= len(blocks) - 1
    best = auto.best
    assert best is not None
    # the best split of the grid, found by the search within its budget (which searched the
    # proportions too, so it can only do as well or better)
    found = best.figures["throughput_samples_per_s"]
    optimum = grid_best.figures["throughput_samples_per_s"]
    assert found >= optimum * (1 - 1e-9), (best.config, grid_best.config)
    assert best.config["split_points"] == grid_best.config["split_points"]
    assert len(auto.rows) <= BUDGET < (len(blocks) - 1) * len(AMPS) ** 2
    # and it beats the user's split, which is not the optimum here
    assert found > auto.start.figures["throughput_samples_per_s"]
    assert auto.split is not None and auto.split["chosen_id"] == best.id


def test_the_report_compares_each_stage_with_its_interval(searched):
    auto, _, _ = searched
    rep = auto.split
    assert rep["budget"] == BUDGET - 1 and rep["tried"] <= rep["budget"]
    assert rep["stages"] == 2 and rep["proportions"] == list(AMPS)
    assert rep["partitions_scored"] == math.comb(rep["blocks"] - 1, 1)
    assert rep["model_basis"] == "cycles"
    assert rep["user"]["split_points"] == ["encoder.layer.3"]
    assert rep["chosen"]["split_points"] != rep["user"]["split_points"]
    for side in (rep["user"], rep["chosen"]):
        assert [s["stage"] for s in side["stages"]] == [0, 1]
        cycles = [s["cycles"] for s in side["stages"]]
        assert all(c > 0 for c in cycles)
        # balance: the longest stage over the mean
        assert side["balance"] == pytest.approx(max(cycles) / np.mean(cycles))
        for s in side["stages"]:
            iv = s["cycles_interval"]
            assert iv["value"] == s["cycles"]
            ranged = iv["low"] is not None and iv["high"] is not None
            assert ranged or iv["note"].startswith(OUTSIDE), iv
            if ranged:
                assert iv["low"] <= s["cycles"] <= iv["high"] and iv["level"]
            assert s["max_tile_bytes"] <= side["sram_per_tile"] and s["oom_tiles"] == 0
            assert s["memory"]["statement"]  # the published memory facts' bound, or why not
    # the chosen split is the better balanced one
    assert rep["chosen"]["balance"] < rep["user"]["balance"]
    ch = rep["throughput_change"]
    assert ch["value"] == pytest.approx(
        rep["chosen"]["throughput_samples_per_s"] / rep["user"]["throughput_samples_per_s"] - 1
    )


def test_the_split_search_writes_a_folder_the_report_reads(searched, tmp_path):
    from analyser.sim.tune import write_results

    auto, _, _ = searched
    meta = write_results(auto, tmp_path / "t", best_k=1)
    table = load_results(tmp_path / "t")  # the folder passes its untrusted-input checks
    assert set(meta["dimensions"]) >= {"split_points", "available_memory_proportion_per_ipu"}
    assert json.loads((tmp_path / "t" / "tune.json").read_text())["auto_split"]["chosen_id"] == (
        auto.best.id
    )
    origins = set(table.frame["origin"])
    assert origins == {"start", "split"}
    from analyser.reports.tune import write_tune_report

    html = write_tune_report(tmp_path / "t", tmp_path / "t" / "report.html").read_text()
    assert "Pipeline split: yours and the chosen one" in html
    for side in ("user", "chosen"):
        for st in auto.split[side]["stages"]:
            assert f"{st['cycles']:,}" in html  # each stage's cycles, yours and the chosen
    # a per-stage proportion pair is a column of the table like any varied option
    split = table.frame[table.frame["origin"] == "split"]
    assert split["available_memory_proportion_per_ipu"].str.fullmatch(r"[0-9.]+\+[0-9.]+").all()


@pytest.mark.slow
def test_a_start_out_of_memory_gets_the_best_split_and_proportions_that_fit(sim_cluster, tmp_path):
    """BERT-base at sequence length 128 on tiles of 350,000 bytes: the start's split is out of
    memory, and so is every split at the default proportion on both IPUs. The search balances
    the memory (no cycles without an execution), and finds the optimum of the exhaustive grid
    of every split and proportion pair: a split that fits only with a low proportion on IPU 0
    and runs fastest with the default one on IPU 1 (the per-stage choice beats both uniform
    ones)."""
    from analyser.sim.service import SimulationService

    cluster = sim_cluster._cluster
    address = cluster.scheduler_address if cluster is not None else sim_cluster.scheduler
    # the tile size was chosen for BERT without dropout (its dropped activations move where
    # the per-stage optimum lies); the search, not dropout, is what this test checks. Chosen
    # again when the planner took PopLibs' matmul orientations (2026-12-04: every stage's
    # fullest tile moved): between the fullest tile of the split after encoder.layer.7 at
    # 0.05 / 0.6 (346,694 bytes) and every split's at 0.6 / 0.6 (367,658 at the least)
    start = dict(
        _start(),
        seq_length=128,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        target_overrides={"sram_per_tile": 350_000},
    )
    pairs = ["+".join(map(str, p)) for p in itertools.product(AMPS, repeat=2)]
    with SimulationService(
        scheduler=address, cache_dir=tmp_path / "cache", security=sim_cluster.security
    ) as svc:
        amps = "amp=" + ",".join(map(str, AMPS))
        auto = tune(build_space(start, ["splits=auto", amps], [], "throughput"), svc, budget=12)
        assert not auto.start.figures["fits"]
        assert auto.split["model_basis"] == "memory"
        splits = ",".join(model_blocks(start)[1:])
        grid = tune(
            build_space(
                start,
                [
                    "split_points=" + splits,
                    "available_memory_proportion_per_ipu=" + ",".join(pairs),
                ],
                [],
                "throughput",
            ),
            svc,
            budget=100,
            strategy="grid",
        )
    assert grid.best is not None and auto.best is not None
    # at the default proportion on both IPUs nothing fits
    uniform = [
        r for r in grid.rows if r.config.get("available_memory_proportion_per_ipu") == [0.6, 0.6]
    ]
    assert uniform and not any(r.figures.get("fits") for r in uniform)
    assert auto.best.config["split_points"] == grid.best.config["split_points"]
    best_amps = auto.best.config["available_memory_proportion_per_ipu"]
    assert best_amps == grid.best.config["available_memory_proportion_per_ipu"]
    assert len(set(best_amps)) == 2  # a per-stage choice, not one proportion for both
    assert auto.best.figures["throughput_samples_per_s"] == pytest.approx(
        grid.best.figures["throughput_samples_per_s"]
    )
    assert len(auto.rows) <= 12 < len(grid.rows)
    user = auto.split["user"]
    assert not user["fits"] and user["throughput_samples_per_s"] is None
    assert sum(s["oom_tiles"] for s in user["stages"]) > 0
    assert all(s["cycles"] is None for s in user["stages"])  # no execution out of memory
    chosen = auto.split["chosen"]
    assert chosen["fits"] and chosen["proportions"] == best_amps
    assert all(s["max_tile_bytes"] <= 350_000 for s in chosen["stages"])


def _mlp_on_three_ipus(sim_cluster, **options) -> tuple[str, dict]:
    """The session cluster's scheduler address and the MLP pipelined over three IPUs (split at
    layers.1 and layers.2, GA 8, plus ``options``) as a run configuration."""
    from engine.config import RunConfig

    cluster = sim_cluster._cluster
    address = cluster.scheduler_address if cluster is not None else sim_cluster.scheduler
    start = {
        "model": "mlp",
        "num_ipus": 3,
        "strategy": "pipelined",
        "split_points": ["layers.1", "layers.2"],
        "gradient_accumulation": 8,
        **options,
    }
    return address, RunConfig.from_dict(start).to_dict()


def test_three_stages_climb_every_boundary_to_the_grid_optimum(sim_cluster, tmp_path):
    """The MLP on three IPUs (7 blocks, 15 splits): the search moves both boundaries and ends
    at the grid's optimum."""
    from analyser.sim.service import SimulationService

    address, start = _mlp_on_three_ipus(sim_cluster, micro_batch_size=16)
    blocks = model_blocks(start)
    with SimulationService(
        scheduler=address, cache_dir=tmp_path / "cache", security=sim_cluster.security
    ) as svc:
        auto = tune(build_space(start, ["splits=auto", "amp=0.6"], [], "throughput"), svc, budget=9)
        pairs = ["+".join(p) for p in itertools.combinations(blocks[1:], 2)]
        grid = tune(
            build_space(start, ["split_points=" + ",".join(pairs)], [], "throughput"),
            svc,
            budget=100,
            strategy="grid",
        )
    assert len(auto.rows) <= 9 < len(grid.rows)
    assert auto.best.config["split_points"] == grid.best.config["split_points"]
    order = {b: i for i, b in enumerate(blocks)}
    for r in auto.rows:
        sp = [order[s] for s in r.config["split_points"]]
        assert len(sp) == 2 and sp[0] < sp[1]  # every candidate is a partition of the blocks
    assert len(auto.split["chosen"]["stages"]) == 3


def test_an_interrupted_split_search_reports_what_it_simulated(sim_cluster, tmp_path):
    """Ctrl-C during the split search: the tune returns interrupted, with the report of the
    splits answered before it (your split against the best of them)."""
    from analyser.sim.service import SimulationService

    address, start = _mlp_on_three_ipus(sim_cluster)

    def progress(state):
        if state["phase"] == "split" and state["tried"] >= 3:
            raise KeyboardInterrupt

    with SimulationService(
        scheduler=address, cache_dir=tmp_path / "cache", security=sim_cluster.security
    ) as svc:
        space = build_space(start, ["splits=auto"], [], "throughput")
        result = tune(space, svc, budget=12, progress=progress)
    assert result.interrupted and result.exit_code == 130
    rep = result.split
    assert rep is not None and 1 <= rep["tried"] < 11
    assert rep["user"]["split_points"] == ["layers.1", "layers.2"]
    simulated = {r.id for r in result.rows}
    assert rep["chosen"]["id"] in simulated


def _brute(costs: BlockCosts, stages: int) -> float:
    n = len(costs.names)
    best = math.inf
    for b in itertools.combinations(range(1, n), stages - 1):
        edges = (0, *b, n)
        pace = max(costs.cycles[a:z].sum() for a, z in itertools.pairwise(edges))
        best = min(best, pace)
    return best


@pytest.mark.parametrize(("n", "stages"), [(9, 2), (9, 3), (12, 4)])
def test_the_cost_model_ranks_the_balanced_partition_first(n, stages, monkeypatch):
    rng = np.random.default_rng(n * stages)
    costs = BlockCosts(
        [f"b.{i}" for i in range(n)],
        rng.uniform(1, 10, n),
        rng.uniform(1, 10, n),
        np.ones(stages),
        tiles_per_ipu=1,
        sram_per_tile=10**9,
        basis="cycles",
    )
    bounds, pace, scored = score_partitions(costs, stages)
    assert scored == math.comb(n - 1, stages - 1) == len(bounds)
    assert pace[0] == pytest.approx(_brute(costs, stages))
    assert np.all(np.diff(pace) >= 0)  # best first
    # beyond the scoring limit: partitions near the balanced one (the one cutting the running
    # total nearest equal shares), never worse than it, each a valid partition
    for limit in (5, 30):
        monkeypatch.setattr("analyser.sim.tune.autosplit.MAX_SCORED", limit)
        few_bounds, near, few = score_partitions(costs, stages)
        assert few <= max(limit, 2 * (stages - 1) * WINDOW + 1) or few == scored <= limit
        assert (few_bounds >= 1).all() and (few_bounds <= n - 1).all()
        assert (np.diff(few_bounds, axis=1) > 0).all()
        centre = _balanced(costs.cycles, stages)
        assert centre.tolist() in few_bounds.tolist()
        edges = (0, *centre.tolist(), n)
        pace_c = max(costs.cycles[a:z].sum() for a, z in itertools.pairwise(edges))
        assert _brute(costs, stages) - 1e-9 <= near[0] <= pace_c + 1e-9


@pytest.mark.parametrize(("n", "stages"), [(30, 16), (27, 8), (5, 5)])
def test_many_stages_score_a_bounded_neighbourhood(n, stages):
    rng = np.random.default_rng(n)
    w = rng.uniform(1, 5, n)
    costs = BlockCosts([f"b.{i}" for i in range(n)], w, w, np.ones(stages), 1, 10**9, "cycles")
    bounds, _, scored = score_partitions(costs, stages)
    assert 1 <= scored <= MAX_SCORED and len(bounds) == scored
    assert (np.diff(bounds, axis=1) > 0).all() and bounds.min() >= 1 and bounds.max() <= n - 1


def test_a_partition_predicted_out_of_memory_ranks_after_those_that_fit():
    costs = BlockCosts(
        [f"b.{i}" for i in range(4)],
        np.array([1.0, 1.0, 1.0, 1.0]),
        np.array([9.0, 1.0, 1.0, 1.0]),
        np.ones(2),
        tiles_per_ipu=1,
        sram_per_tile=10,
        basis="cycles",
    )
    bounds, _, _ = score_partitions(costs, 2)
    # the balanced split (2 + 2 blocks) puts 10 bytes on IPU 0's tile of 10: it fits; 3 + 1
    # does not (11 bytes) and ranks last although its cycles are no worse than 1 + 3's
    assert bounds[0].tolist() == [2] and bounds[-1].tolist() == [3]


def test_the_model_share_is_bounded():
    assert [model_share(b) for b in (1, 3, 9, 100)] == [1, 1, 3, 6]


@pytest.mark.parametrize(
    ("vary", "words"),
    [
        (["split_points=auto"], "no split points"),
        (["splits=auto", "splits=layers.2"], "varied twice"),
    ],
)
def test_auto_split_refusals_are_one_sentence(vary, words):
    from engine.config import RunConfig

    start = RunConfig.from_dict({"model": "mlp"}).to_dict()
    if "splits=layers.2" in vary:
        start = RunConfig.from_dict(
            {
                "model": "mlp",
                "num_ipus": 2,
                "strategy": "pipelined",
                "split_points": ["layers.3"],
                "gradient_accumulation": 4,
            }
        ).to_dict()
    with pytest.raises(TuneError) as err:
        build_space(start, vary, [], "throughput")
    msg = str(err.value)
    assert msg.startswith("--vary ") and words in msg and "\n" not in msg and msg.endswith(".")


def test_hostile_auto_split_specs(tmp_path, capsys):
    cases = hostile.auto_split_cases(tmp_path / "autosplit")
    hostile.assert_one_sentence_each(cases, capsys)
    assert not (tmp_path / "autosplit" / "never-written").exists()


def test_the_tune_report_shows_the_split_and_escapes_its_text(tmp_path):
    """A tune folder whose split report holds terminal escapes and HTML: the report shows the
    per-stage table with them made visible and inert."""
    import engine
    from analyser.reports.tune import write_tune_report
    from engine.config import RunConfig

    base = tmp_path / "base.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), base)
    folder = hostile.tune_folder(tmp_path / "t", base)
    meta = json.loads((folder / "tune.json").read_text())
    text = hostile.INJECTIONS["terminal"] + hostile.INJECTIONS["html"]
    meta["auto_split"] = hostile.auto_split_block(text=text)
    (folder / "tune.json").write_text(json.dumps(meta))
    html = write_tune_report(folder, tmp_path / "r.html").read_text()
    assert "Pipeline split: yours and the chosen one" in html
    assert "\x1b" not in html and "\x9b" not in html
    assert '<img src=x onerror="alert(1)">' not in html
    assert "1,000" in html and "2.00 KiB" in html  # the stage's cycles and fullest tile


def test_the_same_proportions_spelt_two_ways_are_not_a_change():
    """The split search states every stage's proportion; when they are the start's own, the
    best configuration's changes leave them out (the start says them by its default)."""
    from analyser.sim.tune.autosplit import with_split
    from analyser.sim.tune.results import diff_configs
    from engine.config import RunConfig

    start = RunConfig.from_dict(
        {
            "model": "mlp",
            "num_ipus": 2,
            "strategy": "pipelined",
            "split_points": ["layers.2"],
            "gradient_accumulation": 4,
        }
    ).to_dict()
    same = with_split(start, ["layers.4"], (0.6, 0.6))
    assert diff_configs(start, same) == {"split_points": [["layers.2"], ["layers.4"]]}
    other = with_split(start, ["layers.2"], (0.6, 0.3))
    assert set(diff_configs(start, other)) >= {"available_memory_proportion_per_ipu"}
