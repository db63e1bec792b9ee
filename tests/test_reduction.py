"""Reductions: PopLibs' multi-stage plans, their vertex costs (values worked by hand from
github.com/graphcore/poplibs ``lib/poplin/ConvReducePlan.cpp``,
``lib/poplin/PerformanceEstimation.hpp``, ``lib/popops/reduction/*``) and their stages in a
compiled program."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.compiler import reduction as red
from engine.config import RunConfig
from engine.targets import get_target
from profiles import schema

MK2 = get_target("mk2")


def test_multi_stage_plans_follow_getMultiStageReducePlan():
    # 1 stage below 16, 2 from 16, 3 from 125 (getNumReduceStages)
    assert red.multi_stage_reduce_plan(15) == ()
    assert red.multi_stage_reduce_plan(16) == (4,)
    # 128: 3 stages; int(128^(2/3)) = 25 -> plan(25, 2) = (5,) at 10 messages, 15.12 in all;
    # 26 -> (5,) at 10.2 + 128 / 26 = 15.123: the rounded-down plan wins
    assert red.multi_stage_reduce_plan(128) == (25, 5)
    assert red.multi_stage_reduce_plan(128, enable_multi_stage=False) == ()
    # the depth each stage reduces: ceil(remaining / next depth), then the rest
    assert red.stage_depths([1, 4, 16, 32, 128]).tolist() == [
        [0, 0, 0],
        [4, 0, 0],
        [4, 4, 0],
        [6, 6, 0],
        [6, 5, 5],
    ]


def test_reduce_vertex_cycles_worked_by_hand():
    # general path, 64 outputs, 4 partials, float partials -> half output: accumulator width
    # 4, 2 floats per 64-bit load: 3 cycles per loop; 16 loops, 3 per worker (16 = 2 x 6 + 4,
    # not ragged); (32 + (3 x 4 + 6) x 3) x 6 = 516
    assert red.reduce_vertex_cycles(64, 4, 6, False, True, False) == 516
    # single input, 64 outputs, 3 partials: 2 cycles per loop, outer loop 7:
    # (20 + (2 x 3 + 7) x 3) x 6 + 33 = 387
    assert red.reduce_vertex_cycles(64, 3, 6, False, True, True) == 387
    # ragged (65 outputs): 17 loops, 2 per worker plus the short remainder 2 x 4 + 13
    assert red.reduce_vertex_cycles(65, 4, 6, False, True, False) == (32 + 21 + 18 * 2) * 6


def test_conv_reduce_stages_and_the_cast_without_a_reduction():
    cycles, outs, depths = red.conv_reduce(MK2, [1000, 1000, 1000, 64], [1, 1, 32, 4], 1, 2, 4)
    # depth 1: float partials cast to half (estimateCastCycles: (max(ceil(167/2),
    # ceil(167/4)) + 26) x 6), one stage
    assert cycles[0].tolist() == [(84 + 26) * 6, 0, 0]
    # depth 32: two stages of 6, the outputs 32,000 -> 5,334 -> 889
    assert depths[2].tolist() == [6, 6, 0] and outs[2].tolist() == [5334, 889, 0]
    assert (cycles[2, :2] > 0).all()
    # half partials and half output, no reduction: nothing to do
    c2, _, _ = red.conv_reduce(MK2, [1000], [1], 1, 2, 2)
    assert c2.sum() == 0
    # exchange: stage 1 the tile's partials, stage 2 the first stage's outputs
    ex = red.conv_reduce_exchange([32000], [32], 4, 4.0)
    assert ex[0].tolist() == [32000, 5334, 0]


def test_batch_norm_statistics_spread_over_stages():
    T = MK2.tiles_per_ipu
    # batch norm at 4 x 4, micro-batch 64, 1,024 channels (half): 713 elements per tile, less
    # than a row of channels, so no on-tile stage; 1,024 partials per channel on 1,472 tiles:
    # an intermediate stage over the tiles, then the final one at the outputs
    e = 64 * 16 * 1024
    r = red.popops_reduce(MK2, [e], [1024], [2], [T], 2, T)
    used = r["tiles"][0]
    assert used[0] == 0 and used[1] > T // 2 and used[3] > 0
    assert (r["recv"][0, 1:][used[1:] > 0] > 0).all()
    # 16 x 16 maps, 64 channels: each tile holds whole rows, reduces them on tile first
    e2 = 64 * 256 * 64
    r2 = red.popops_reduce(MK2, [e2], [64], [2], [T], 2, T)
    assert r2["tiles"][0, 0] == T and r2["compute"][0, 0] > 0
    # a reduction whose partials fit a few tiles goes straight to the output stage
    r3 = red.popops_reduce(MK2, [4096], [64], [1], [8], 2, T)
    assert r3["tiles"][0, 1] == 0 and r3["tiles"][0, 3] > 0


@pytest.mark.parametrize(
    "depths",
    [
        [],
        [7],
        [0, 1, 1, 0, 3, 3, 3, 65535],
        list(range(40, 0, -3)) * 5,
        [-2, 5, 5, 1],  # a negative value: the sort's path
        [1, 1 << 16, 3],  # beyond the counted range: the sort's path
    ],
)
def test_distinct_depths_match_numpy_unique(depths):
    """The planner's distinct reduction depths (a count of each small value): the same values,
    inverse and dtypes as ``np.unique(return_inverse=True)``, and the same stage table."""
    a = np.asarray(depths, np.int64)
    uniq, inv = red._distinct_small(a)
    want_uniq, want_inv = np.unique(a, return_inverse=True)
    assert uniq.dtype == want_uniq.dtype and inv.dtype == want_inv.dtype
    assert np.array_equal(uniq, want_uniq) and np.array_equal(inv, want_inv)
    assert np.array_equal(uniq[inv], a)
    if len(a) and a.min() >= 0:
        table = red.stage_depths(a)
        for row, d in zip(table, a.tolist(), strict=True):
            assert np.array_equal(row, red.stage_depths([d])[0])


@pytest.mark.parametrize(
    "a, b",
    [
        ([3, 3, 0, 7, 3], [2, 2, 0, 1, 5]),
        ([], []),
        ([-1, 4, -1], [2, 2, 2]),  # a negative value: the sort's path
        ([1 << 40, 1 << 40, 5], [1 << 30, 1 << 30, 5]),  # a product beyond int64: the sort's path
    ],
)
def test_pair_key_is_equal_for_equal_pairs_only(a, b):
    """The key the planner groups its candidates' repeated rows by (AMP fields and row widths,
    reduction outputs, depths and serial splits)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    key = red.pair_key(a, b)
    assert key.shape == a.shape and key.dtype == np.int64
    for i in range(len(a)):
        for j in range(len(a)):
            assert (key[i] == key[j]) == (a[i] == a[j] and b[i] == b[j])


def test_reduce_estimates_of_distinct_rows_spread_to_every_row():
    """The planner's reduction figures computed once per distinct (partials, depth, serial
    split) are those of every row computed on its own."""
    rng = np.random.default_rng(7)
    partials = rng.choice([1, 64, 4096, 100_000], 500).astype(np.int64)
    depth = rng.choice([1, 2, 3, 16, 97], 500).astype(np.int64)
    serial = rng.choice([1, 2, 8], 500).astype(np.int64)
    exchange, cycles, temp = red.conv_reduce_estimates(MK2, partials, depth, serial, 2, 4, 4.0)
    outputs = -(-partials // depth)
    assert np.array_equal(exchange, red.conv_reduce_exchange(partials, depth, 4, 4.0))
    assert np.array_equal(cycles, red.conv_reduce(MK2, outputs, depth, serial, 2, 4)[0])
    assert np.array_equal(temp, red.conv_reduce_temp_bytes(outputs, depth, 4))


@pytest.fixture(scope="module")
def walkthrough_small():
    cfg = dict(model="resnet101", image_size=64, micro_batch_size=16, precision="16.16")
    return engine.compile(RunConfig.from_dict(cfg))


def test_compiled_reductions_forward_and_backward(walkthrough_small):
    c = walkthrough_small
    p = c.programs
    names = p.name.astype(str)
    op_names = np.asarray(c.ops.name).astype(str)
    exch = p.type == schema.code("program_type", "DoExchange")
    for suffix in ("bn1/fwd", "bn1/grad"):
        ops = np.flatnonzero(np.char.endswith(op_names, suffix))
        assert len(ops)
        rows = np.isin(p.op, ops)
        labels = {n.rsplit("/", 1)[-1] for n in names[rows]}
        assert "ReduceExchange" in labels and "Reduce" in labels, (suffix, labels)
        assert p.bytes_in[rows & exch].sum() > 0
    # convolutions at 2 x 2 (layer4) split their reduction and reduce partial sums
    l4 = np.flatnonzero(np.char.startswith(op_names, "layer4") & (c.ops.family == "amp"))
    rows = np.isin(p.op, l4)
    assert np.char.endswith(names[rows], "/Reduce").any()
