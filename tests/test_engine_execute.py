"""engine.execute on hand-built execution plans: schedules, timing invariants, I/O, collectives.

These tests need no compiler: they build small :class:`ExecutionPlan` objects directly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from engine.errors import ConfigError
from engine.execute import (
    ExecutionPlan,
    HostModel,
    IpuPlan,
    LeafPrograms,
    Links,
    StagePlan,
    build_activity,
    execute_plan,
    program_stages,
)
from profiles.schema import code

T = {
    n: code("program_type", n)
    for n in (
        "OnTileExecute",
        "StreamCopyBegin",
        "StreamCopyMid",
        "GlobalExchange",
        "Sync",
        "Call",
        "Sequence",
        "Repeat",
    )
}
PH = {n: code("phase", n) for n in ("rampUp", "main", "rampDown", "weightUpdate", "host")}
D_HOST = code("destination", "host")
D_REMOTE = code("destination", "remoteBuffer")
CLOCK = 1.325e9
TILES = 8
#: The :class:`ExecutionPlan` fields :func:`make_plan` fixes (its ``**kw`` override them): a
#: 64 x 64 RGB image in, a 4-byte label, 40 bytes out per micro-batch of 4.
PLAN_DEFAULTS = dict(
    tiles_per_ipu=TILES,
    micro_batch=4,
    input_bytes_per_sample=3 * 64 * 64,
    label_bytes_per_sample=4,
    output_bytes_per_micro_batch=40,
)


def make_plan(
    S=2,
    G=8,
    DI=1,
    schedule="grouped",
    ops=4,
    op_cycles=1000,
    R=1,
    remote=0,
    grads=10**6,
    training=True,
    **kw,
) -> ExecutionPlan:
    """S stages of ``ops`` compute sets each (forward and backward), one update per IPU."""
    n = S * 2 * ops + S
    tc = np.full((n, TILES), op_cycles, np.int32)
    tc[:, 0] = op_cycles // 2  # one idle-ish tile: balance < 1
    leaves = LeafPrograms(
        name=np.array([f"cs{i}" for i in range(n)], dtype=object),
        type=np.full(n, T["OnTileExecute"], np.uint8),
        ipu=np.zeros(n, np.int16),
        op=np.arange(n, dtype=np.int32),
        cycles=tc.max(axis=1).astype(np.int64),
        tile_cycles=tc,
        bytes=np.zeros(n, np.int64),
        code_bytes=np.zeros(n, np.int64),
        tile_balance=(tc.mean(axis=1) / tc.max(axis=1)).astype(np.float32),
    )
    stages, ipus, k = [], [], 0
    for s in range(S):
        f = np.arange(k, k + ops)
        b = np.arange(k + ops, k + 2 * ops)
        k += 2 * ops
        leaves.ipu[f] = leaves.ipu[b] = s
        stages.append(StagePlan(s, f, b, activation_bytes=65536, gradient_bytes=65536))
    for s in range(S):
        leaves.ipu[k] = s
        ipus.append(
            IpuPlan(np.array([k]), gradient_bytes=grads, weight_bytes=grads, remote_bytes=remote)
        )
        k += 1
    links = Links(
        clock_hz=CLOCK,
        ipu_link_bytes_per_cycle=32e9 / CLOCK,
        host_link_bytes_per_cycle=12.5e9 / CLOCK,
        streaming_bytes_per_cycle=16e9 / CLOCK,
        external_sync_cycles=40,
        internal_sync_cycles=90,
        exchange_setup_cycles=100,
    )
    return ExecutionPlan(
        leaves=leaves,
        stages=stages,
        ipus=ipus,
        links=links,
        schedule=schedule if S > 1 else "single",
        gradient_accumulation=G,
        device_iterations=DI,
        replicas=R,
        training=training,
        **(PLAN_DEFAULTS | kw),
    )


def check_invariants(e, n_ipus):
    s = e.steps
    off = e.attrs["ipu_offsets"]
    assert off[0] == 0 and off[-1] == e.num_steps and len(off) == n_ipus + 1
    assert (np.diff(off) > 0).all()
    ends = []
    for i in range(n_ipus):
        sl = slice(off[i], off[i + 1])
        assert (s["ipu"][sl] == i).all()
        st, cy = s["start"][sl], s["cycles"][sl]
        assert st[0] == 0
        assert (np.diff(st) >= 0).all()
        # one contiguous timeline per IPU: waits are Sync / StreamCopyBegin steps
        assert (st[1:] == (st + cy)[:-1]).all()
        ends.append(st[-1] + cy[-1])
    assert len(set(ends)) == 1 and ends[0] == e.attrs["total_cycles"]
    assert (s["cycles"] >= 0).all()
    # steps reference leaf programs only, never control nodes
    ptype = e.nodes["type"][s["program"]]
    assert not np.isin(ptype, [T["Sequence"], T["Repeat"], T["Call"]]).any()
    # program table: pre-order (a parent precedes its children), per-tile cycles per program
    parent = e.nodes["parent"]
    assert (parent < np.arange(len(parent))).all()
    assert e.tile_cycles.shape == (len(parent), TILES)
    leaf = e.leaf_node
    assert (leaf >= 0).all() and len(np.unique(leaf)) == len(leaf)


@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sequential"])
def test_schedules_keep_timeline_invariants(schedule):
    e = execute_plan(make_plan(S=3, G=6, DI=2, schedule=schedule))
    check_invariants(e, 3)
    a = e.attrs
    assert a["samples"] == 4 * 6 * 2
    assert a["cycles_per_sample"] == pytest.approx(a["total_cycles"] / a["samples"])
    # device-only throughput from the device trace; host-inclusive adds the host time outside it
    assert a["device_throughput"] == pytest.approx(a["samples"] * CLOCK / a["total_cycles"])
    seconds = a["total_cycles"] / CLOCK + a["host_seconds"]
    assert a["throughput"] == pytest.approx(a["samples"] / seconds)
    # every micro-batch runs forward and backward on every stage, every iteration
    s = e.steps
    comp = s["type"] == T["OnTileExecute"]
    per = np.bincount(s["stage"][comp & (s["phase"] != PH["weightUpdate"])], minlength=3)
    assert (per == 6 * 2 * 2 * 4).all()  # G x DI x (fwd + bwd) x ops


def test_program_stages_and_minimum_accumulation():
    assert program_stages(4, True) == 7 and program_stages(4, False) == 4
    with pytest.raises(ConfigError, match="at least 3"):
        build_activity(2, 2, "grouped", True)
    build_activity(2, 2, "sequential", True)  # no pipeline, no minimum


@pytest.mark.parametrize("S,G", [(2, 3), (2, 8), (4, 16), (3, 40)])
def test_grouped_phases_follow_fill_main_flush(S, G):
    a = build_activity(S, G, "grouped", True)
    P = 2 * S - 1
    counts = np.bincount(a.row_phase, minlength=3)
    assert counts[PH["rampUp"]] == P - 1
    assert counts[PH["main"]] == G - (P - 1)
    assert counts[PH["rampDown"]] == P - 1
    # ramp share of pipeline cycles = 2(P-1)/(G+P-1) exactly
    ramp = (counts[PH["rampUp"]] + counts[PH["rampDown"]]) / a.n_rows
    assert ramp == pytest.approx(2 * (P - 1) / (G + P - 1))
    # stash depth: the backward of micro-batch m on stage s runs 2(S-1-s) cycles after its forward
    for s in range(S):
        f = a.row[(a.stage == s) & (a.pass_ == 0)]
        b = a.row[(a.stage == s) & (a.pass_ == 1)]
        assert (b - f == 2 * (S - 1 - s)).all()


def test_ramp_share_of_time_is_bounded_by_the_cycle_formula():
    # balanced stages: ramp cycles run fewer stages, so they are no longer than main cycles
    for G in (3, 8, 32):
        e = execute_plan(
            make_plan(
                S=2,
                G=G,
                input_bytes_per_sample=0,
                label_bytes_per_sample=0,
                output_bytes_per_micro_batch=0,
            )
        )
        s = e.steps
        ip0 = s["ipu"] == 0
        pipe = ip0 & np.isin(s["phase"], [PH["rampUp"], PH["main"], PH["rampDown"]])
        ramp = ip0 & np.isin(s["phase"], [PH["rampUp"], PH["rampDown"]])
        share = s["cycles"][ramp].sum() / s["cycles"][pipe].sum()
        formula = 2 * 2 / (G + 2)
        assert share <= formula + 1e-9
        assert share >= 0.5 * formula


def test_pipeline_cycle_is_bound_by_the_longest_stage():
    no_io = dict(input_bytes_per_sample=0, label_bytes_per_sample=0, output_bytes_per_micro_batch=0)
    slow = make_plan(S=2, G=16, **no_io)
    slow.leaves.cycles[slow.stages[1].forward] *= 3
    fast = make_plan(S=2, G=16, **no_io)
    e_slow, e_fast = execute_plan(slow), execute_plan(fast)
    extra = 2 * 4 * 1000  # 4 forward ops, 2000 more cycles each, on stage 1
    rows = 16 + 3 - 1  # pipeline cycles in which stage 1 runs a forward: G of them
    d = e_slow.attrs["total_cycles"] - e_fast.attrs["total_cycles"]
    assert d >= 16 * extra  # every cycle in which stage 1 runs waits for it
    assert d <= rows * extra
    # the fast IPU absorbs the difference in its Sync steps
    s = e_slow.steps
    sync0 = s["cycles"][(s["ipu"] == 0) & (s["type"] == T["Sync"])].sum()
    sync1 = s["cycles"][(s["ipu"] == 1) & (s["type"] == T["Sync"])].sum()
    assert sync0 > sync1


def test_interleaved_is_slower_than_grouped_when_backward_is_longer():
    g = make_plan(S=3, G=12)
    for st in g.stages:
        g.leaves.cycles[st.backward] *= 2
    i = make_plan(S=3, G=12, schedule="interleaved")
    for st in i.stages:
        i.leaves.cycles[st.backward] *= 2
    g.stages[0].forward = g.stages[0].forward  # same work
    assert execute_plan(i).attrs["total_cycles"] > execute_plan(g).attrs["total_cycles"]


def test_sequential_runs_one_ipu_at_a_time():
    e = execute_plan(make_plan(S=3, G=4, schedule="sequential"))
    s = e.steps
    # (the weight update runs on every IPU at once, after the micro-batches)
    comp = (s["type"] == T["OnTileExecute"]) & (s["phase"] != PH["weightUpdate"])
    iv = [
        (s["start"][comp & (s["ipu"] == i)], (s["start"] + s["cycles"])[comp & (s["ipu"] == i)])
        for i in range(3)
    ]
    for a in range(3):
        for b in range(a + 1, 3):
            sa, ea = iv[a]
            sb, eb = iv[b]
            # no compute step of IPU a overlaps one of IPU b
            lo = np.searchsorted(sb, ea, side="left")
            hi = np.searchsorted(eb, sa, side="right")
            assert (lo <= hi).all()


def test_recomputation_adds_forward_cycles_to_backward():
    base = make_plan(S=2, G=8)
    rec = make_plan(S=2, G=8)
    for st in rec.stages:
        st.recompute = st.forward.copy()
    e0, e1 = execute_plan(base), execute_plan(rec)
    c0 = (e0.steps["type"] == T["OnTileExecute"]).sum()
    c1 = (e1.steps["type"] == T["OnTileExecute"]).sum()
    assert c1 - c0 == 2 * 8 * 4  # stages x micro-batches x forward ops
    assert e1.attrs["total_cycles"] > e0.attrs["total_cycles"]


def test_input_and_label_bytes_are_exact():
    e = execute_plan(make_plan(S=2, G=8, DI=4))
    s = e.steps
    mid = (s["type"] == T["StreamCopyMid"]) & (s["dest"] == D_HOST)
    rx0 = s["bytes_in"][mid & (s["ipu"] == 0)].sum()
    rx1 = s["bytes_in"][mid & (s["ipu"] == 1)].sum()
    assert rx0 == 4 * 8 * 4 * 3 * 64 * 64
    assert rx1 == 4 * 8 * 4 * 4  # labels go to the loss stage's IPU


@pytest.mark.parametrize(
    "mode,n,expected_copies",
    [("all", 1, 8 * 4), ("final", 1, 1), ("sum", 1, 1), ("every-n", 2, 8 * 2)],
)
def test_output_modes_send_back_the_right_bytes(mode, n, expected_copies):
    e = execute_plan(make_plan(S=2, G=8, DI=4, output_mode=mode, output_every_n=n))
    s = e.steps
    out = (s["type"] == T["StreamCopyMid"]) & (s["dest"] == D_HOST) & (s["bytes_out"] > 0)
    assert s["bytes_out"][out].sum() == expected_copies * 40
    assert (s["ipu"][out] == 1).all()
    check_invariants(e, 2)


def test_replication_adds_an_all_reduce_amortised_by_accumulation():
    def allreduce_share(G, R):
        e = execute_plan(make_plan(S=2, G=G, R=R))
        s = e.steps
        gx = (s["type"] == T["GlobalExchange"]) & (s["phase"] == PH["weightUpdate"])
        return s["cycles"][gx & (s["ipu"] == 0)].sum() / e.attrs["total_cycles"], e

    none, _ = allreduce_share(8, 1)
    r4_g8, e = allreduce_share(8, 4)
    r4_g64, _ = allreduce_share(64, 4)
    assert none == 0 and r4_g8 > 0
    assert r4_g64 < r4_g8  # amortised by gradient accumulation
    assert e.attrs["samples"] == 4 * 8 * 4


def test_replicated_tensor_sharding_splits_remote_traffic_and_adds_collectives():
    plain = execute_plan(make_plan(S=2, G=8, R=4, remote=8 * 10**6))
    rts = execute_plan(make_plan(S=2, G=8, R=4, remote=8 * 10**6, replicated_tensor_sharding=True))

    def remote_in(e):
        s = e.steps
        return s["bytes_in"][(s["type"] == T["StreamCopyMid"]) & (s["dest"] == D_REMOTE)].sum()

    assert remote_in(rts) * 4 == remote_in(plain)
    names = set(rts.nodes["name"])
    assert {"replicas.ReduceScatter", "replicas.AllGather"} <= names
    assert "replicas.AllReduce" in set(plain.nodes["name"])


def test_offloading_streams_optimiser_state_at_each_update():
    on = execute_plan(make_plan(S=2, G=8, DI=3, remote=4 * 10**6))
    off = execute_plan(make_plan(S=2, G=8, DI=3, remote=0))
    s = on.steps
    rb = (s["type"] == T["StreamCopyMid"]) & (s["dest"] == D_REMOTE)
    assert (s["phase"][rb] == PH["weightUpdate"]).all()
    assert s["bytes_in"][rb & (s["ipu"] == 0)].sum() == 3 * 4 * 10**6  # in, every update
    assert s["bytes_out"][rb & (s["ipu"] == 0)].sum() == 3 * 4 * 10**6  # and back out
    assert not ((off.steps["dest"] == D_REMOTE).any())
    assert on.attrs["total_cycles"] > off.attrs["total_cycles"]


def test_io_tiles_overlap_stream_copies_with_compute():
    plain = execute_plan(make_plan(S=2, G=8, io_tiles=0))
    io = execute_plan(make_plan(S=2, G=8, io_tiles=2))
    s = io.steps
    mid = (s["type"] == T["StreamCopyMid"]) & (s["dest"] == D_HOST) & (s["ipu"] == 0)
    assert (
        s["bytes_in"][mid].sum()
        == plain.steps["bytes_in"][
            (plain.steps["type"] == T["StreamCopyMid"]) & (plain.steps["ipu"] == 0)
        ].sum()
    )
    assert io.attrs["total_cycles"] < plain.attrs["total_cycles"]


def test_prefetch_hides_the_host_stream_latency():
    def begin_cycles(depth):
        e = execute_plan(make_plan(S=2, G=8, host=HostModel(prefetch_depth=depth)))
        s = e.steps
        b = (s["type"] == T["StreamCopyBegin"]) & (s["phase"] != PH["host"])
        return s["cycles"][b].sum()

    assert begin_cycles(3) < begin_cycles(1)


def test_host_model_sync_async_and_device_iterations():
    def run(**kw):
        host = HostModel(**{k: v for k, v in kw.items() if k in HostModel.__dataclass_fields__})
        rest = {k: v for k, v in kw.items() if k not in HostModel.__dataclass_fields__}
        return execute_plan(make_plan(S=2, G=8, host=host, **rest))

    sync = run(decode_augment_s=200e-6)
    asyn = run(decode_augment_s=200e-6, loader="async")
    assert asyn.attrs["host_seconds"] < sync.attrs["host_seconds"]
    assert asyn.attrs["throughput"] > sync.attrs["throughput"]
    # the host wait is the first step of the call on every IPU
    s = sync.steps
    first = s["program"][sync.attrs["ipu_offsets"][:-1]]
    assert (sync.nodes["type"][first] == T["StreamCopyBegin"]).all()
    # more device iterations per call: the fixed call overhead is amortised
    di1 = run(decode_augment_s=0.0, DI=1)
    di4 = run(decode_augment_s=0.0, DI=4)
    assert di4.attrs["cycles_per_sample"] < di1.attrs["cycles_per_sample"]
    assert di4.attrs["throughput"] > di1.attrs["throughput"]


def test_inference_and_single_ipu():
    e = execute_plan(make_plan(S=1, G=1, DI=5, training=False, output_mode="all"))
    check_invariants(e, 1)
    s = e.steps
    assert not (s["phase"] == PH["weightUpdate"]).any()
    assert (s["type"] == T["OnTileExecute"]).sum() == 5 * 4
    e = execute_plan(make_plan(S=1, G=4, DI=2))
    check_invariants(e, 1)
    assert not (e.steps["type"] == T["Sync"]).any()  # no external syncs on one IPU


def test_vectorised_generation_scales_to_many_steps():
    e = execute_plan(make_plan(S=4, G=64, DI=20, ops=10))
    assert e.num_steps > 100_000
    check_invariants(e, 4)


def test_offloaded_accumulators_stream_around_every_backward():
    plan = make_plan(S=2, G=8, DI=2)
    plan.stages[0].remote_bytes_per_micro_batch = 10**5
    e = execute_plan(plan)
    s = e.steps
    rb = (s["type"] == T["StreamCopyMid"]) & (s["dest"] == D_REMOTE) & (s["ipu"] == 0)
    assert s["bytes_in"][rb].sum() == 8 * 2 * 10**5
    assert s["bytes_out"][rb].sum() == 8 * 2 * 10**5
    check_invariants(e, 2)


def test_inference_pipeline_streams_the_device_iterations_through_one_pipeline():
    e = execute_plan(make_plan(S=3, G=1, DI=10, training=False, output_mode="all"))
    check_invariants(e, 3)
    s = e.steps
    comp = s["type"] == T["OnTileExecute"]
    # every micro-batch (one per iteration) runs its forward on every stage, no backward
    assert comp.sum() == 10 * 3 * 4
    assert sorted(set(s["iteration"][comp].tolist())) == list(range(10))
    # filled and flushed once per host call: P - 1 = 2 ramp-up cycles in all (one row-closing
    # external sync each; the syncs that close a cycle's ToDeviceStream fragment not counted)
    ext = e.nodes["sync"][s["program"]] == code("sync_kind", "external")
    ext &= ~np.char.endswith(e.nodes["name"][s["program"]].astype(str), "toDeviceStream.sync")
    ramp_up = (s["ipu"] == 0) & ext & (s["phase"] == PH["rampUp"])
    assert ramp_up.sum() == 2
    with pytest.raises(ConfigError, match="device_iterations"):
        execute_plan(make_plan(S=3, G=1, DI=2, training=False))


def test_program_tree_control_nodes_and_calls():
    e = execute_plan(make_plan(S=2, G=8, DI=4))
    n = e.nodes
    name = list(n["name"])
    rep = dict(zip(name, n["repeat"]))
    assert rep["deviceIterations"] == 4
    assert rep["pipeline.main"] == 8 - 2  # G - (P - 1)
    kids = lambda i: [name[k] for k in np.flatnonzero(n["parent"] == i)]  # noqa: E731
    ramp_up = name.index("pipeline.rampUp")
    assert kids(ramp_up) == ["rampUp.cycle0", "rampUp.cycle1"]
    roots = {name[i] for i in np.flatnonzero(n["parent"] == -1)}
    calls = [x for x, t in zip(name, n["type"]) if t == T["Call"]]
    assert calls and all(c.removeprefix("Call ") in roots for c in calls)
    # every executed program is a leaf under a function root, with per-tile cycles stored once
    progs = np.unique(e.steps["program"])
    assert (e.tile_cycles[progs].max(axis=1) >= 0).all()
    comp = progs[n["type"][progs] == T["OnTileExecute"]]
    assert (e.tile_cycles[comp].max(axis=1) == n["cycles"][comp]).all()


def test_link_costs_follow_ipu_facts():
    from engine.execute.costs import external_sync_cycles, ring_allreduce_cycles

    # PopLibs' test utilities' hop formula: 48 cycles for 2 IPUs and 240 for 16 IPUs at 1.6 GHz
    assert external_sync_cycles(2, 15e-9, 1.6e9) == 48
    assert external_sync_cycles(16, 15e-9, 1.6e9) == 240
    links = make_plan().links
    one = ring_allreduce_cycles(10**8, 2, links)
    assert ring_allreduce_cycles(10**8, 1, links) == 0
    # the data term tends to 2 x bytes / link rate as replicas grow
    assert (
        one
        < ring_allreduce_cycles(10**8, 8, links)
        < 2 * 10**8 / links.ipu_link_bytes_per_cycle * 1.1
    )


@settings(max_examples=25, deadline=None)
@given(
    args=hs.fixed_dictionaries(
        {
            "S": hs.integers(1, 4),
            "DI": hs.integers(1, 3),
            "R": hs.integers(1, 3),
            "schedule": hs.sampled_from(["grouped", "interleaved", "sequential"]),
            "output_mode": hs.sampled_from(["all", "final", "sum", "every-n"]),
            "training": hs.booleans(),
        }
    ),
    extra=hs.integers(0, 5),
)
def test_random_plans_keep_the_invariants(args, extra):
    S, training = args["S"], args["training"]
    G = (2 * S - 1 + extra) if training else 1
    if not training and S > 1 and args["schedule"] != "sequential" and args["DI"] < S:
        args["DI"] = S
    plan = make_plan(**args, G=G, output_every_n=1, ops=2)
    e = execute_plan(plan)
    check_invariants(e, S)
    s = e.steps
    comp = (s["type"] == T["OnTileExecute"]) & (s["phase"] != PH["weightUpdate"])
    passes = 2 if training else 1
    DI = plan.device_iterations
    assert comp.sum() == G * DI * S * passes * 2
    rx0 = s["bytes_in"][(s["type"] == T["StreamCopyMid"]) & (s["dest"] == D_HOST) & (s["ipu"] == 0)]
    assert rx0.sum() == plan.micro_batch * G * DI * plan.input_bytes_per_sample + (
        plan.micro_batch * G * DI * plan.label_bytes_per_sample if (training and S == 1) else 0
    )


@pytest.mark.parametrize("negative", [False, True])
def test_per_tile_cycles_from_the_compact_layout_match_the_dense_array(negative):
    """With the compiler's compact layout (a range of tiles, its first n_max at ``cycles``, the
    rest at ``cycles_min``), execute hands the writer the per-tile cycles as runs, never laid out
    whole; they hold the dense array's values, the added programs' rows included. A negative
    count (no runs can say it) still gives the dense array."""
    from profiles.runs import RunRows

    rng = np.random.default_rng(5)
    plan = make_plan(S=2, G=4, R=2)
    lv = plan.leaves
    n = len(lv)
    lv.tile_start = rng.integers(0, TILES, n)
    lv.tile_count = rng.integers(0, TILES + 3, n)  # some run past the last tile
    lv.n_max = rng.integers(0, TILES, n)
    lv.cycles_min = rng.integers(0, 500, n)
    lv.cycles = rng.integers(500, 1000, n)
    if negative:
        lv.tile_count[3] = -2
    e = execute_plan(plan)
    dense = np.asarray(lv._expand_compact(np.arange(n), TILES))
    lv.tile_start = None
    lv.tile_cycles = dense
    ref = execute_plan(plan)
    assert isinstance(ref.tile_cycles, np.ndarray)
    assert isinstance(e.tile_cycles, np.ndarray if negative else RunRows)
    got = np.asarray(e.tile_cycles)
    assert got.dtype == ref.tile_cycles.dtype == np.int32
    np.testing.assert_array_equal(got, ref.tile_cycles)
    added = ref.nodes["type"] == T["GlobalExchange"]  # programs execute adds on all tiles
    assert added.any() and (got[added].max(axis=1) == ref.nodes["cycles"][added]).all()
