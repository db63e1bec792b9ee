"""The analysis core against brute-force pandas on synthetic profiles (fits and OOM)."""

from __future__ import annotations

import numpy as np
import pytest

from analyser.core import Analysis
from analyser.core import execution as execution_mod
from analyser.core import source as source_mod
from analyser.core.execution import _union_length
from profiles import open_profile, schema, write_profile
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="session")
def syn_paths(tmp_path_factory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("syn_core")
    fits = d / "fits.h5"
    oom = d / "oom.h5"
    write_profile(fits, make_synthetic_profile(n_steps=30_000, n_ipus=2, tiles=256, seed=3))
    write_profile(oom, make_synthetic_profile(n_steps=1000, n_ipus=2, tiles=256, seed=4, oom=True))
    return {"fits": fits, "oom": oom}


@pytest.fixture()
def fits(syn_paths):
    with Analysis.open(syn_paths["fits"]) as a:
        yield a


def _steps(path) -> object:
    with open_profile(path) as p:
        return p.steps()


def test_execution_matches_bruteforce(fits, syn_paths):
    ex = fits.execution
    df = _steps(syn_paths["fits"])
    assert ex.n_steps == len(df)
    g = df.groupby(["ipu", "type"])["cycles"].sum()
    for (ipu, typ), v in g.items():
        assert ex.cycles_by_type[ipu, typ] == v
    assert ex.cycles_by_type.sum() == df["cycles"].sum()
    assert ex.count_by_type.sum() == len(df)
    stream = df["type"].isin(
        [
            schema.PROGRAM_TYPES.index(n)
            for n in ("StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd")
        ]
    )
    rx = df[stream].groupby("ipu")["bytes_in"].sum()
    for ipu, v in rx.items():
        assert ex.streamcopy_rx_bytes[ipu] == v
    assert ex.program_cycles.sum() == df["cycles"].sum()
    assert ex.program_executions.sum() == len(df)
    # spans: the end of the last step of each IPU
    ends = (df["start"] + df["cycles"]).groupby(df["ipu"]).max()
    assert np.array_equal(ex.span_cycles, ends.to_numpy())
    # tile balance in [0, 1]
    assert ((ex.tile_balance >= 0) & (ex.tile_balance <= 1)).all()


def test_chunking_does_not_change_results(syn_paths):
    """Aggregating in 977-row chunks gives exactly the single-chunk figures."""
    with Analysis.open(syn_paths["fits"]) as a:
        whole = a.execution
    assert whole.n_steps < source_mod.STEP_CHUNK_ROWS  # one chunk above, many below
    with Analysis.open(syn_paths["fits"]) as a:
        src = a.src
        orig = src.iter_steps

        def small(columns, **kw):
            kw["chunk_rows"] = 977
            return orig(columns, **kw)

        src.iter_steps = small
        chunked = execution_mod.summarise_execution(src)
    assert np.array_equal(whole.cycles_by_type, chunked.cycles_by_type)
    assert np.array_equal(whole.streamcopy_tx_by_dest, chunked.streamcopy_tx_by_dest)
    assert np.array_equal(whole.phase_wall_cycles, chunked.phase_wall_cycles)
    assert np.array_equal(whole.stage_cycles, chunked.stage_cycles)


def test_phase_shares_partition_the_run(fits):
    ex = fits.execution
    share = ex.phase_share()
    assert all(v >= 0 for v in share.values())
    assert sum(share.values()) <= 1.0 + 1e-9
    assert 0 <= ex.ramp_share <= 1


def test_union_length():
    s = np.array([0, 5, 2, 20, 21])
    e = np.array([3, 10, 4, 25, 22])
    cover = np.zeros(30, bool)
    for a, b in zip(s, e):
        cover[a:b] = True
    assert _union_length(s, e) == cover.sum()
    assert _union_length(np.zeros(0, np.int64), np.zeros(0, np.int64)) == 0


def test_memory_summary(fits, syn_paths):
    m = fits.memory
    with open_profile(syn_paths["fits"]) as p:
        total = p.array("/memory/total")
        gaps = p.array("/memory/gaps")
        cat = p.array("/memory/by_category")
    assert m.peak_memory_bytes == total.sum()
    assert m.by_category.sum() == cat.sum() == total.sum()
    assert m.n_oom_tiles == int((total + gaps > m.sram_per_tile).sum())
    assert m.histogram_counts.sum() == total.size
    tops = [t.bytes for t in m.top_tiles]
    assert tops == sorted(tops, reverse=True)
    assert tops[0] == (total + gaps).max()
    assert 0 < m.share_used < 1


def test_oom_profile(syn_paths):
    with Analysis.open(syn_paths["oom"]) as a:
        assert a.execution is None
        m = a.metrics
        assert not m.fits and m.oom_tiles > 0
        assert m.total_cycles is None and m.throughput_samples_per_s is None
        assert (a.memory.tile_used > a.memory.sram_per_tile).sum() == m.oom_tiles
        assert sum(x.oom_tiles for x in m.ipus) == m.oom_tiles
        assert a.operations["total_cycles"].sum() == 0


def test_liveness_and_live_variables(fits):
    lv = fits.liveness
    assert lv.not_always_live.shape[0] == fits.target.num_ipus
    for i in range(fits.target.num_ipus):
        assert lv.peak_bytes[i] == lv.always_live[i] + lv.not_always_live[i].max()
    live = fits.peak_live_variables(0, n=50)
    step = int(lv.peak_step[0])
    assert ((live["live_start"] <= step) & (live["live_end"] >= step)).all()
    assert (~live["always_live"]).all() and (live["ipu"] == 0).all()


def test_operations_table(fits):
    ops = fits.operations
    ex = fits.execution
    with open_profile(fits.path) as p:
        prog_op = p.table("/programs/nodes", ["op"])["op"].to_numpy()
    assert ops["total_cycles"].sum() == ex.program_cycles[prog_op >= 0].sum()
    assert {
        "name",
        "type",
        "pass",
        "flops",
        "cycles",
        "total_cycles",
        "memory_bytes",
        "code_bytes",
        "executions",
    } <= set(ops.columns)
    assert str(ops["pass"].dtype) == "category"


def test_metrics_consistency(fits):
    m = fits.metrics
    ex = fits.execution
    assert m.total_cycles == ex.total_cycles
    assert m.streamcopy_rx_bytes == sum(x.streamcopy_rx_bytes for x in m.ipus)
    assert m.scalar("cycles") == m.total_cycles
    assert m.scalar("peak_memory") == m.peak_memory_bytes
    assert m.cycles_per_sample == pytest.approx(ex.total_cycles / ex.samples, rel=1e-6)
