"""Compile invariants: memory accounting, precision, cycle bounds, scaling, OOM, walkthrough."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.compiler.compile_plan import CompilePlan
from engine.compiler.plan import plan_amp
from engine.config import RunConfig
from engine.targets import get_target
from profiles import schema
from tests.run_configs import walkthrough_model

WEIGHT = schema.code("variable_kind", "weight")
ACT = schema.code("variable_kind", "activation")


def rn50(**kw) -> RunConfig:
    base = dict(model="resnet50", image_size=128, micro_batch_size=4, precision="16.16")
    base.update(kw)
    return RunConfig.from_dict(base)


def walkthrough(precision: str) -> RunConfig:
    return RunConfig.from_dict(walkthrough_model(gradient_accumulation=3, precision=precision))


@pytest.fixture(scope="session")
def small():
    return engine.compile(rn50(gradient_accumulation=2, optimiser="adam"))


@pytest.fixture(scope="session")
def wt32():
    return engine.compile(walkthrough("32.32"))


@pytest.fixture(scope="session")
def wt16():
    return engine.compile(walkthrough("16.16"))


def _check_sums(c):
    m = c.memory
    assert (m.by_category.sum(axis=2) == m.total).all()
    assert (m.by_region.sum(axis=2) == m.total).all()
    assert (m.by_liveness.sum(axis=2) == m.total).all()
    assert (m.by_category >= 0).all() and (m.gaps >= 0).all()
    # the not-always-live column is each tile's peak over the liveness steps
    assert (m.by_liveness[:, :, 1] == c.liveness.per_tile.dense().max(axis=1)).all()
    assert (c.liveness.not_always_live == c.liveness.per_tile.dense().sum(axis=2)).all()


def test_category_sums_equal_totals(small, wt16):
    _check_sums(small)
    _check_sums(wt16)


def test_oom_flag_agrees_with_per_tile_numbers(small, wt32, wt16):
    for c in (small, wt32, wt16):
        m = c.memory
        over = m.total + m.gaps > m.sram_per_tile
        assert c.oom == bool(over.any())
        assert {tuple(x) for x in m.oom_tiles} == {tuple(x) for x in np.argwhere(over)}


def test_fp16_halves_weight_bytes(wt32, wt16):
    w32 = wt32.variables.bytes[wt32.variables.kind == WEIGHT].sum()
    w16 = wt16.variables.bytes[wt16.variables.kind == WEIGHT].sum()
    assert w32 == 2 * w16 > 0


def test_no_operation_faster_than_its_flops_over_peak(small, wt16):
    for c in (small, wt16):
        t = c.target
        cfg = c.config
        peak_per_cycle = 2 * t.amp_rate(cfg.compute_dtype, cfg.partials_dtype) * t.tiles_per_ipu
        amp = c.ops.family == "amp"
        assert amp.any()
        assert (c.ops.cycles[amp] * peak_per_cycle >= c.ops.flops[amp]).all()
        total_peak = 2 * t.amp_macs_half_half * t.tiles_per_ipu
        assert (c.ops.cycles * total_peak >= c.ops.flops).all()


def test_doubling_micro_batch_doubles_activations_and_compute():
    a = engine.compile(rn50(image_size=224, micro_batch_size=8))
    b = engine.compile(rn50(image_size=224, micro_batch_size=16))
    act = [c.variables.bytes[c.variables.kind == ACT].sum() for c in (a, b)]
    assert act[1] == pytest.approx(2 * act[0], rel=0.01)
    cyc = []
    for c in (a, b):
        p = c.programs
        cs = (p.type == schema.code("program_type", "OnTileExecute")) & (
            p.pass_ != schema.code("pass", "update")
        )
        cyc.append(p.cycles[cs].sum())
    # fixed per-vertex and per-exchange overheads do not scale with the batch, and with twice
    # the field PopLibs' planner splits the reduction less (fewer partial-sum reductions)
    assert 1.6 < cyc[1] / cyc[0] <= 2.05


def _amp_problems():
    c = engine.compile(rn50())
    keys = ("G", "M", "K", "N", "cin", "kernel", "row_width", "a_dup", "db", "b_weight")
    amp = c.ops.family == "amp"
    # rebuild the AMP problems from the lowered graph of the same config
    from engine.compiler.lowering import lower
    from engine.models import build_model

    L = lower(build_model(c.config), c.config, CompilePlan.resolve(c.config, c.target))
    sel = L["amp"]
    assert sel.sum() == amp.sum()
    return {k: L[k][sel] for k in keys}


def test_more_tiles_never_costs_more_than_the_exchange_added():
    t = get_target("mk2")
    a = _amp_problems()
    limit = 0.6 * t.sram_per_tile
    rate = t.amp_rate("float16", "float16")

    def total(p):
        return p["compute"] + p["exch"] + p["red_ex"] + p["red_cs"]

    for lo, hi in ((368, 736), (736, 1472)):
        p_lo = plan_amp(a, t, lo, limit, rate, 2)
        p_hi = plan_amp(a, t, hi, limit, rate, 2)
        assert (total(p_hi) <= total(p_lo) + p_hi["exch"]).all()
        assert (p_hi["tiles_used"] <= hi).all()


def test_large_fp16_matmul_reaches_a_sensible_fraction_of_peak():
    t = get_target("mk2")
    n = 4096
    a = {
        k: np.array([v])
        for k, v in dict(G=1, M=n, K=n, N=n, cin=n, kernel=1, a_dup=1, db=2, b_weight=True).items()
    }
    for partials, pb in (("float16", 2), ("float32", 4)):
        rate = t.amp_rate("float16", partials)
        p = plan_amp(a, t, t.tiles_per_ipu, 0.6 * t.sram_per_tile, rate, pb)
        cycles = p["compute"] + p["exch"] + p["red_ex"] + p["red_cs"]
        achieved = 2 * n**3 / (cycles[0] / t.clock_hz)
        frac = achieved / t.peak_flops("float16", partials)
        assert 0.4 < frac <= 1.0, frac


def test_programs_and_segments_are_consistent(small):
    p, s = small.programs, small.segments
    assert (np.diff(p.segment) >= 0).all()
    for i in range(len(s)):
        rows = s.programs(i)
        assert (p.segment[rows] == i).all()
        assert (p.stage[rows] == s.stage[i]).all()
    dense = small.tile_cycles()
    assert dense.shape == (len(p), small.tiles_per_ipu)
    assert (dense.max(axis=1) == p.cycles).all()
    bal = small.tile_balance()
    assert np.allclose(
        bal, np.where(p.cycles > 0, dense.mean(axis=1) / np.maximum(p.cycles, 1), 0), atol=1e-5
    )


def test_optimiser_state_and_offloading(small):
    st = schema.code("variable_kind", "optimiserState")
    v = small.variables
    on_chip = v.bytes[(v.kind == st) & v.always_live].sum()
    assert on_chip > 0  # Adam keeps two moments on chip by default on one IPU
    off = engine.compile(
        rn50(gradient_accumulation=2, optimiser="adam", offload_optimiser_state="on")
    )
    v2 = off.variables
    assert v2.bytes[(v2.kind == st) & v2.always_live].sum() == 0
    assert v2.remote_bytes[v2.kind == st].sum() == on_chip
    assert off.memory.total.sum() < small.memory.total.sum()
    assert off.io.remote_bytes[0] == on_chip


def test_recomputation_lowers_the_liveness_peak():
    base = engine.compile(rn50(micro_batch_size=8))
    ck = engine.compile(
        rn50(
            micro_batch_size=8,
            recomputation="checkpoints",
            recompute_checkpoints=["layer1", "layer2", "layer3"],
        )
    )
    assert ck.liveness.not_always_live.max() < base.liveness.not_always_live.max()
    assert ck.ops.cycles.sum() > base.ops.cycles.sum()  # the forward runs again


def test_walkthrough_step1_fp32_does_not_fit(wt32):
    assert wt32.oom
    assert len(wt32.memory.oom_tiles) > 0
    assert wt32.stages == 2 and list(wt32.stage_ipu) == [0, 1]
    assert wt32.io.input_bytes_per_sample == 3 * 64 * 64 * 4


def test_walkthrough_step2_fp16_fits(wt16):
    assert not wt16.oom
    assert len(wt16.memory.oom_tiles) == 0


def test_outlining_shares_code_and_leaves_cycles_alone():
    on = engine.compile(walkthrough("16.16"))
    off = engine.compile(walkthrough("16.16").model_copy(update={"outlining": False}))
    cat = schema.MEMORY_CATEGORIES
    for name in ("vertexInstanceState", "internalExchangeCode", "controlCode"):
        k = cat.index(name)
        assert on.memory.by_category[..., k].sum() < off.memory.by_category[..., k].sum()
    var = cat.index("variable")
    assert on.programs.cycles.sum() == off.programs.cycles.sum()
    assert on.memory.by_category[..., var].sum() > 0


def test_available_memory_proportion_bounds_plan_temporaries():
    hi = engine.compile(rn50(available_memory_proportion=0.6))
    lo = engine.compile(rn50(available_memory_proportion=0.05))
    amp = hi.ops.family == "amp"
    limit = 0.05 * lo.target.sram_per_tile
    per_tile_lo = lo.ops.temp_bytes[amp] / np.maximum(lo.ops.tiles_used[amp], 1)
    # plans that fit at the low proportion stay under it; some need serial splits to do so
    assert (per_tile_lo <= limit + 1).mean() > 0.9
    assert lo.ops.cycles[amp].sum() >= hi.ops.cycles[amp].sum()
    # a large matmul needs serial splits under a small proportion: less memory, more cycles
    t = get_target("mk2")
    n = 4096
    a = {
        k: np.array([v])
        for k, v in dict(G=1, M=n, K=n, N=n, cin=n, kernel=1, a_dup=1, db=2, b_weight=True).items()
    }
    rate = t.amp_rate("float16", "float16")
    p6 = plan_amp(a, t, t.tiles_per_ipu, 0.6 * t.sram_per_tile, rate, 2)
    # (at 0.1 nothing fits: the weights a serially split matmul rearranges before its loop,
    # 22.8 KB per tile, stay live through it, PopLibs' addRearrangeBeforeSliceEstimate)
    p1 = plan_amp(a, t, t.tiles_per_ipu, 0.15 * t.sram_per_tile, rate, 2)
    assert p1["s"][0] > p6["s"][0] >= 1
    assert p1["temp"][0] <= 0.15 * t.sram_per_tile < p6["temp"][0]
    cyc = [p["compute"][0] + p["exch"][0] + p["red_ex"][0] + p["red_cs"][0] for p in (p6, p1)]
    assert cyc[1] > cyc[0]


def test_mixed_precision_keeps_fp32_master_weights_and_casts():
    mixed = engine.compile(rn50(precision="16.32"))
    full = engine.compile(rn50(precision="32.32"))
    wm = mixed.variables.bytes[mixed.variables.kind == WEIGHT].sum()
    wf = full.variables.bytes[full.variables.kind == WEIGHT].sum()
    assert wm == wf
    assert np.char.endswith(mixed.programs.name.astype(str), "/Cast").any()
    assert not np.char.endswith(full.programs.name.astype(str), "/Cast").any()


def test_inference_and_other_targets_compile():
    inf = engine.compile(rn50(mode="inference", target="mk1"))
    assert inf.tiles_per_ipu == 1216
    assert set(inf.segments.kind) == {"forward"}
    assert inf.memory.total.shape == (1, 1216)
    passes = set(inf.programs.pass_.tolist())
    assert passes == {schema.code("pass", "forward")}


def test_replicated_tensor_sharding_divides_optimiser_state():
    base = dict(optimiser="adam", replication_factor=4, gradient_accumulation=2)
    plain = engine.compile(rn50(**base))
    rts = engine.compile(rn50(**base, replicated_tensor_sharding=True))
    st = schema.code("variable_kind", "optimiserState")
    a = plain.variables.bytes[plain.variables.kind == st].sum()
    b = rts.variables.bytes[rts.variables.kind == st].sum()
    assert b == pytest.approx(a / 4, rel=0.01)


def test_liveness_rises_through_forward_and_falls_through_backward(small):
    lv = small.liveness
    nal = lv.not_always_live[0]
    fwd = small.segment_programs("forward")
    bwd = small.segment_programs("backward")
    step_of_prog = {int(p): i for i, p in enumerate(lv.step_program)}
    last_fwd = max(step_of_prog[int(p)] for p in fwd if int(p) in step_of_prog)
    last_bwd = max(step_of_prog[int(p)] for p in bwd if int(p) in step_of_prog)
    peak = int(lv.peak_step[0])
    # the peak sits around the turn from forward to backward, above both ends and far above
    # the end (at micro-batch 4 the first convolution's plan temporaries, which PopLibs'
    # planner lets grow up to the available memory proportion, are most of the start: its
    # 7 x 7, stride-2 input ranges on 3 channels padded to 16)
    assert abs(peak - last_fwd) < 0.25 * len(nal)
    assert nal[peak] > nal[0]
    assert nal[peak] > 4 * nal[last_bwd]


def test_an_oom_profile_hands_its_per_tile_cycles_over_as_runs(wt32):
    """Without an execution, the default tree's per-tile cycles come as runs (not a programs x
    tiles array built from three int64 temporaries) holding the compile's dense values."""
    from engine.compiled import default_tree
    from engine.profile_data import profile_data
    from profiles.runs import RunRows

    assert wt32.oom
    tc = profile_data(wt32)["/programs"]["tile_cycles"]
    assert isinstance(tc, RunRows)
    leaf = default_tree(wt32).leaf
    rows = np.flatnonzero(leaf >= 0)
    dense = np.zeros((len(leaf), wt32.tiles_per_ipu), np.int32)
    dense[rows] = wt32.tile_cycles(leaf[rows])
    np.testing.assert_array_equal(np.asarray(tc), dense)


def test_a_fresh_run_never_imports_numpy_ma(tmp_path):
    """Walkthrough step 4 (pipelined over two IPUs, device iterations, PopTorch's host streams)
    compiled, executed and written in a fresh process: numpy.ma, which ``np.unique``'s hash
    path imports and the run does not otherwise need, stays unimported."""
    import subprocess
    import sys
    from pathlib import Path

    toml = Path(__file__).resolve().parents[1] / "assets/runs/walkthrough/4-device-iterations.toml"
    code = (
        "import sys, engine\n"
        "from engine.config import RunConfig\n"
        f"cfg = RunConfig.from_toml({str(toml)!r})\n"
        f"engine.simulate_to_file(cfg, {str(tmp_path / 'run.h5')!r})\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False", done.stdout + done.stderr[-2000:]
