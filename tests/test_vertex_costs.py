"""The engine's vertex costs against PopLibs' cycle estimators, transcribed here independently.

The reference functions below follow github.com/graphcore/poplibs line by line, with scalar
loops over workers and work-list entries as the C++ does (``lib/poplin/PerformanceEstimation.hpp``,
``lib/poplin/ConvUtilInternal.cpp`` ``partitionConvPartialByWorker``,
``lib/popops/PerformanceEstimation.cpp``; ``getReduceCycleEstimate``, shared with
tests/test_conv_plan.py, in tests/poplibs_costs.py); the engine's versions
(``engine.compiler.vertex_costs``) are vectorised numpy over whole arrays of tiles and plans.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from poplibs_costs import WORKERS, engine_amp, reduce_cycles

import engine
from engine.compiler import vertex_costs as vc
from engine.config import RunConfig
from engine.targets import get_target

MK2 = get_target("mk2")


# ---- PopLibs, transcribed ---------------------------------------------------------------------


def partition(elements: int, row_width: int, contexts: int = WORKERS) -> list[list[int]]:
    """partitionConvPartialByWorker for a field of rows: per worker, its runs' lengths."""
    out = []
    for i in range(contexts):
        begin, end = (i * elements) // contexts, ((i + 1) * elements) // contexts
        runs = []
        if begin != end:
            last = end - 1
            for row in range(begin // row_width, last // row_width + 1):
                x0 = begin % row_width if row == begin // row_width else 0
                x1 = last % row_width + 1 if row == last // row_width else row_width
                runs.append(x1 - x0)
        out.append(runs)
    return out


def nx1_worker(worklist, float_acts, float_partials, units):
    core = 8 if float_acts else 4
    extra = (
        1
        if (
            not float_acts
            and ((not float_partials and units == 16) or (float_partials and units == 8))
        )
        else 0
    )
    retention = 9
    cycles = 17 + (0 if float_partials else 1)
    for n in worklist:
        cycles += 3
        if n == 0:
            cycles += 17
        elif n == 1:
            cycles += 33 if float_acts else 29
        elif n == 2:
            cycles += 44 if float_acts else 33 + extra
        else:
            cycles += (45 if float_acts else 34) + (n - 3) * core
        cycles -= retention
    return cycles


def nx1_vertex(field, width, kh, kw, ig, og, cg, float_acts, float_partials, units, wpu):
    """addPartialCalcCycleEstimate, nx1 branch: inner loop + outer loop + zeroing."""
    passes = units // units  # outChansPerGroup = numConvUnits
    weight_bytes = wpu * (4 if float_acts else 2)
    loads = units * weight_bytes // (16 // 2)  # use128BitConvUnitLoad off: 16 / 2
    workers = [nx1_worker(w, float_acts, float_partials, units) for w in partition(field, width)]
    mx = max(WORKERS * c for c in workers)
    mn = min(WORKERS * c for c in workers)
    kernel_loop = max(mx, mn + 9) * passes * kh * kw
    innermost = loads + 15 + 3
    inner = kh * (14 + kw * (17 - 5 + passes * innermost)) + kernel_loop
    outer = (
        109
        + WORKERS * 9
        + WORKERS * (9 if float_partials else 10)
        + cg * (og * 17 + (og - 1) * 6 + 1)
        + (cg - 1) * 6
        + 1
        + cg * (16 + ig * (14 + og * (14 + inner)))
    )
    per_worker = (field * units + WORKERS - 1) // WORKERS
    zero = ((per_worker + 1) // 2 + 14 - 9) * WORKERS * og * cg
    return outer + zero


def one_by_one_inner(field, zeroing, float_acts, float_partials, units):
    core = 8 if float_acts else 4
    common = (not float_acts and units == 16) or float_partials
    zpg = 8 if (float_acts and units == 16) else (4 if float_partials else 2)
    ret = 7 if (not float_acts and (float_partials or units == 16)) else 0
    mx, mn = 0, None
    for runs in partition(field, field):
        c = 0
        if runs:
            n = runs[0]
            z = 1 if zeroing else 0
            if float_acts:
                c = {1: 47 + (2 + zpg) * z, 2: 46 + (2 + zpg * 2) * z}.get(
                    n, 46 + (2 + zpg * n) * z + (n - 3) * core
                )
            elif common:
                t = 1 if zeroing else 2
                c = {1: 31 + t, 2: 40 + t}.get(n, (37 if zeroing else 38) + (n - 3) * core)
            else:
                c = {1: 39 + (2 + zpg) * z, 2: 40 + (2 + zpg * 2) * z}.get(
                    n, 41 + (2 + zpg * n) * z + (n - 3) * core
                )
            c -= ret
        mx = max(mx, WORKERS * c)
        mn = WORKERS * c if mn is None else min(mn, WORKERS * c)
    return max(mx, mn + 14)


def one_by_one_vertex(field, ig, og, cg, float_acts, float_partials, units, wpu):
    """getConvPartial1x1SupervisorOuterLoopCycleEstimateHalfFloat."""
    with_zero = one_by_one_inner(field, True, float_acts, float_partials, units)
    without = one_by_one_inner(field, False, float_acts, float_partials, units)
    passes = 1
    loads = units * wpu * (4 if float_acts else 2) // 8
    c = int((not float_acts and units == 16) or float_partials)
    ret = (7, 3) if (not float_acts and (float_partials or units == 16)) else (0, 0)
    return (
        50
        + WORKERS * (ret[0] + ret[1] * (ig * cg - 1))
        + cg
        * (
            12
            + c
            + (ig - 1) * (15 - c + 1 + og * (19 + passes * (6 + loads + without)))
            + (10 + 1 + og * (19 - c + passes * (7 + loads + with_zero)))
        )
    )


def cast_1d(n, from_bytes, to_bytes):
    """getCast1DCycleEstimate with castWorkerCycles (float <-> half, uchar -> half)."""
    per = (n + WORKERS - 1) // WORKERS
    if from_bytes == 1:
        atoms, rem = per // 4, per % 4
        c = (14 + (atoms - 1) * 9) if atoms else 0
        c += {0: 2, 1: 12, 2: 14, 3: 22}[rem]
        worker = 4 + c
    else:
        load, store = 8 // from_bytes, 8 // to_bytes
        width = min(load * 2, store)
        per_vec = max(width // min(width, load), width // min(width, store))
        worker = 19 + per_vec * (per // width)
        rem = per % width
        for i in range(math.ceil(math.log2(width))):
            worker += 1 + (2 if rem & (1 << i) else 0)
    return 12 + WORKERS * (worker + 18)


# ---- the table --------------------------------------------------------------------------------

# (field, row width, kernel h, kernel w, in channels, out channels, conv groups, acts, partials)
AMP_SHAPES = [
    (4, 2, 3, 3, 64, 64, 1, 2, 4),  # 2 x 2 map, 3 x 3 kernel
    (16, 4, 3, 3, 64, 64, 1, 2, 4),  # 4 x 4
    (16, 4, 3, 3, 512, 512, 1, 2, 4),
    (64, 8, 3, 3, 128, 128, 1, 2, 4),
    (256, 16, 3, 3, 64, 64, 1, 2, 4),
    (196, 14, 3, 3, 256, 256, 1, 2, 4),
    (49, 7, 3, 3, 512, 512, 1, 2, 2),
    (3136, 56, 3, 3, 64, 64, 1, 2, 2),
    (100, 10, 7, 7, 16, 64, 1, 2, 4),
    (37, 12, 3, 3, 32, 32, 2, 2, 4),  # ragged rows
    (5, 8, 3, 3, 16, 16, 1, 2, 4),  # fewer outputs than workers
    (64, 8, 3, 3, 64, 64, 1, 4, 4),  # float
    (16, 4, 3, 3, 32, 64, 1, 4, 4),
    (4, 2, 1, 1, 64, 64, 1, 2, 4),  # 1 x 1 kernels / matmuls
    (16, 16, 1, 1, 256, 64, 1, 2, 4),
    (128, 128, 1, 1, 1024, 1024, 1, 2, 4),
    (512, 512, 1, 1, 768, 3072, 1, 2, 2),
    (7, 7, 1, 1, 64, 64, 1, 2, 2),
    (3, 3, 1, 1, 16, 16, 4, 2, 4),
    (2048, 2048, 1, 1, 64, 256, 1, 4, 4),
    (1, 1, 1, 1, 1024, 1000, 1, 2, 4),
    (20, 20, 1, 1, 128, 128, 1, 4, 4),
]


@pytest.mark.parametrize("shape", AMP_SHAPES)
def test_amp_vertex_cost_is_poplibs_estimate(shape):
    field, width, kh, kw, cin, cout, cg, ab, pb = shape
    units = vc.conv_units(MK2, ab, pb)
    wpu = vc.weights_per_conv_unit(MK2, ab)
    ig, og = -(-cin // wpu), -(-cout // units)
    got = engine_amp(MK2, field, width, kh, kw, ig, og, cg, ab, pb)
    if kh * kw == 1:
        want = one_by_one_vertex(field, ig, og, cg, ab == 4, pb == 4, units, wpu)
    else:
        want = nx1_vertex(field, width, kh, kw, ig, og, cg, ab == 4, pb == 4, units, wpu)
    assert got == want


def test_conv_units_reach_the_published_mac_rates():
    # 4 cycles per output for half (8 for float) x conv units x input channels per unit = MACs
    for ab, pb, partials in ((2, 2, "float16"), (2, 4, "float32"), (4, 4, "float32")):
        units = vc.conv_units(MK2, ab, pb)
        core = 8 if ab == 4 else 4
        rate = MK2.amp_rate("float32" if ab == 4 else "float16", partials)
        assert units * vc.weights_per_conv_unit(MK2, ab) == rate * core


@pytest.mark.parametrize(
    "out_size,depth,pb", [(8, 2, 4), (96, 4, 4), (1000, 3, 4), (13, 2, 2), (4096, 8, 2), (6, 16, 4)]
)
def test_conv_reduce_is_poplibs_estimate(out_size, depth, pb):
    got = int(vc.conv_reduce_cycles(MK2, np.array([out_size]), np.array([depth]), 2, pb)[0])
    assert got == reduce_cycles(out_size, depth, False, pb == 4)


@pytest.mark.parametrize("n", [1, 5, 6, 7, 24, 1000, 12345])
@pytest.mark.parametrize("src,dst", [(4, 2), (2, 4), (1, 2)])
def test_cast_is_poplibs_estimate(n, src, dst):
    assert int(vc.cast_cycles(MK2, np.array([n]), src, dst)[0]) == cast_1d(n, src, dst)


def test_small_maps_cost_several_times_the_mac_bound():
    # a 2 x 2 and a 4 x 4 map, 3 x 3 kernel, 64 -> 64 channels, on one tile
    rate = MK2.amp_rate("float16", "float32")
    ratios = [
        engine_amp(MK2, field, width, 3, 3, 4, 8, 1, 2, 4)
        / vc.amp_mac_bound(field, 9, 64, 64, 1, rate)
        for field, width in ((4, 2), (16, 4), (3136, 56))
    ]
    assert ratios[0] > 5 and ratios[1] > 3  # per-run and per-position overheads dominate
    assert ratios[2] < 1.5  # a large map approaches the MAC bound
    assert ratios[0] > ratios[1] > ratios[2]


def test_a_small_map_network_costs_more_per_mac_than_a_large_one():
    # the whole engine: ResNet-50 forward convolutions at 32 px (maps down to 1 x 1) against
    # 128 px; conv cycles per MAC grow as maps shrink
    per_mac = []
    for size in (32, 128):
        c = engine.compile(
            RunConfig.from_dict(
                dict(model="resnet50", image_size=size, micro_batch_size=4, mode="inference")
            )
        )
        conv = c.ops.type == "Conv"
        per_mac.append(c.ops.cycles[conv].sum() / (c.ops.flops[conv].sum() / 2))
    assert per_mac[0] > 1.5 * per_mac[1]
