"""Cycle estimates shared by the tests that check the engine's costs against PopLibs
(tests/test_vertex_costs.py, tests/test_conv_plan.py).

:func:`reduce_cycles` follows github.com/graphcore/poplibs ``lib/poplin/PerformanceEstimation.hpp``
``getReduceCycleEstimate`` line by line, with scalar loops as the C++ has them; :func:`engine_amp`
is the engine's AMP vertex cost (``engine.compiler.vertex_costs.amp_partials_cycles``) of one tile,
the form in which both files compare it.
"""

from __future__ import annotations

import math

import numpy as np

from engine.compiler import vertex_costs as vc

#: Worker contexts per tile.
WORKERS = 6


def reduce_cycles(out_size, partials, float_out, float_partials, single=False):
    """getReduceCycleEstimate: ``partials`` partial sums into ``out_size`` outputs on one tile
    (``single``: the single-input vertex)."""
    acc = 4 if float_partials else 8
    in_dp = 64 // ((4 if float_partials else 2) * 8)
    if single:
        per_loop = acc // min(acc, in_dp)
        loops = out_size // acc
        per_worker = loops // WORKERS + (1 if loops % WORKERS else 0)
        outer = (8 if float_out else 7) if float_partials else (10 if float_out else 9)
        return (20 + (per_loop * partials + outer) * per_worker) * WORKERS + 33
    cycles = 32
    per_loop = acc // min(acc, in_dp) + 1
    loops = out_size // acc
    for i in range(math.ceil(math.log2(acc))):
        if out_size & (1 << i):
            loops += 1
    per_worker = loops // WORKERS
    if loops % WORKERS:
        if out_size & (acc - 1):
            cycles += 2 * partials + (13 if float_partials else 11)
        else:
            per_worker += 1
    tail = (7 if float_partials else 9) if float_out else (6 if float_partials else 8)
    return (cycles + (per_loop * partials + tail) * per_worker) * WORKERS


def engine_amp(target, field, row_width, kernel_h, kernel_w, ig, og, cg, ab, pb, one_by_one=None):
    """The engine's AMP vertex cycles of one tile: a field of ``field`` outputs in rows of
    ``row_width``, a ``kernel_h`` x ``kernel_w`` kernel, ``ig`` / ``og`` / ``cg`` input, output and
    conv groups, ``ab`` / ``pb`` bytes per activation and partial; ``one_by_one`` (the 1 x 1
    vertex) by default where the kernel has one position."""
    if one_by_one is None:
        one_by_one = kernel_h * kernel_w == 1
    return int(
        vc.amp_partials_cycles(
            target,
            field=np.array([field]),
            row_width=np.array([row_width]),
            kernel_positions=np.array([kernel_h * kernel_w]),
            kernel_width=np.array([kernel_w]),
            in_groups=np.array([ig]),
            out_groups=np.array([og]),
            conv_groups=np.array([cg]),
            acts_bytes=ab,
            partials_bytes=pb,
            one_by_one=np.array([one_by_one]),
        )[0]
    )


# ---- SLIC (ConvPartial1x4SLIC), transcribed ------------------------------------------------
# lib/poplin/PerformanceEstimation.hpp, half activations, line by line with the C++'s loops.


def worker_partition(field: int, row_width: int, workers: int = WORKERS) -> list[list[int]]:
    """partitionConvPartialByWorker of a tile's ``field`` outputs in rows of ``row_width``:
    worker ``i`` takes the flattened range [i E / W, (i + 1) E / W), cut at row ends; each
    entry is one run's width (xEnd - xBegin), empty runs dropped."""
    out = []
    for i in range(workers):
        begin, end = i * field // workers, (i + 1) * field // workers
        runs, x = [], begin
        while x < end:
            stop = min(end, (x // row_width + 1) * row_width)
            runs.append(stop - x)
            x = stop
        out.append(runs)
    return out


def slic_inner_loop(partition, chains, cg, float_partials, stride, implicit_zeroing):
    """getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat."""
    input_passes = 1 if chains == 4 else 2
    half8 = chains == 2 and not float_partials
    threshold = 6 if half8 else 5
    max_worker = 0
    preamble = 2 + (2 if half8 else 3) + 1 + 2 + 4 + 2 + 2 + 1 + (1 if half8 else 0)
    if cg > 4:
        preamble += 4
    cumulative = 0
    for worker in partition:
        cycles = preamble
        for n in worker:
            cycles += 9 if half8 else 10
            if implicit_zeroing:
                cycles += 1
            row = 0
            if stride == 1:
                if n < threshold:
                    if implicit_zeroing:
                        row += 10 + (n if n > 1 else 0) + 3
                    else:
                        row += 7
                        if n == 1:
                            row += 6
                        else:  # unsigned arithmetic in the C++: the terms sum to n + 10
                            row += (1 + (n - 1) + 2 + (4 - n) + 2 + (3 - (4 - n)) + 3) % 2**32
                else:
                    row += 15 + (n - 5) + (0 if implicit_zeroing else (3 if half8 else 0))
            else:
                row += 7 + (3 if n == 1 else 5) + 3 if n < 3 else 15 + 2 * (n - 3)
            if float_partials:
                row -= 1
            cycles += (3 if float_partials else 0) + row * input_passes
            cumulative += n
        cycles += 2 if half8 else 0
        max_worker = max(max_worker, cycles)
    copy = 2 + 2 * cumulative if (half8 and implicit_zeroing) else 0
    return max_worker * WORKERS + copy


def slic_weight_load(cg, chans):
    """getConvPartialSlicSupervisorWeightLoadCycleEstimate (window width 4, half)."""
    cycles = 0
    if chans == 4:
        cycles += 6 + 6 + 6
    else:
        worker = 12 if cg == 2 else 10
        if cg > 4:
            worker += 1
        cycles += 9 + 6 + worker * WORKERS + 6
    return cycles + 16


def slic_outer_loop(zeroing, inner, load, groups, subs, chains, cg, float_partials):
    """getConvPartialSlicSupervisorOuterLoopCycleEstimateHalfFloat."""

    def brnzdec(n):
        return 6 * (n - 1) + 1

    half8 = chains == 2 and not float_partials
    preamble = 25 if half8 else 28
    group_body = 12 if half8 else 15
    if cg <= 4:
        sub_body = load + (0 if half8 else 3) + 2 + (0 if half8 else 1) + 6 + 1 + 6 + 1
    else:
        strides = cg // 4
        stride_body = load + 6 + 1 + 6 + 2 + 6
        sub_body = stride_body * strides + brnzdec(strides) + 2 + 2 + 6 + 3 + 2
        group_body += 2 + 6
        inner *= strides
    return (
        preamble
        + group_body * groups
        + brnzdec(groups)
        + sub_body * subs
        + brnzdec(subs)
        + groups * zeroing
        + groups * (subs - 1) * inner
    )


def slic_cycles(field, row_width, kernel_h, kernel_w, groups, cg, chans, chains, pb, stride=1):
    """addPartialCalcCycleEstimate, Plan::Slic: one SLIC vertex over ``groups`` conv-group
    grains of ``cg`` groups, ``chans`` channels, a ``kernel_h`` x ``kernel_w`` kernel."""
    part = worker_partition(field, row_width)
    fp = pb == 4
    zeroing = slic_inner_loop(part, chains, cg, fp, stride, True)
    inner = slic_inner_loop(part, chains, cg, fp, stride, False)
    subs = -(-kernel_w // 4) * kernel_h
    load = slic_weight_load(cg, chans)
    return slic_outer_loop(zeroing, inner, load, groups, subs, chains, cg, fp)


# ---- HMAC (ConvPartialHorizontalMac), transcribed -----------------------------------------


def dense_dot(vw, float_acts, float_partials, size):
    """getDenseDotProductCycles."""
    per64 = 2 if float_acts else 4
    half_half = not float_acts and not float_partials
    out_chans = 2 if half_half else 1
    inner = (1 + 2) * out_chans + half_half + 3 + 1
    i = math.ceil(math.log2(vw))
    while i >= 0:
        w = 1 << i
        if size % w == 0:
            per = 1 if w >= per64 else 2
            extra = out_chans if w < per64 else 0
            return inner + extra + (size // w) * per - (not float_acts)
        i -= 1
    raise AssertionError("unreachable")


def hmac_cycles(field, ci, co, ig, og, cg, ab, pb, vw=4):
    """addPartialCalcCycleEstimate, Plan::Hmac, for a 1 x 1 kernel over one row of
    ``field`` outputs (batch 1), ``ci`` / ``co`` channels per group, ``ig`` / ``og`` / ``cg``
    input, output and conv groups on the tile."""
    fa, fp = ab == 4, pb == 4
    use1x1 = fp and not fa
    # estimateConvPartialHorizontalMacInnerLoopCycles: one row split into W parts
    rows = 1
    split = WORKERS // math.gcd(WORKERS, rows)
    max_part = (rows * split + WORKERS - 1) // WORKERS
    whole, part = max_part // split, max_part % split
    sizes = [field] * whole + ([part * (field + split - 1) // split] if part else [])
    partitions = [[sizes]]  # one context, one kernel position
    # getConvPartialHorizontalMacSupervisorInnerLoopCycleEstimate
    used = len(partitions)
    max_w, min_w = 0, (0 if used < WORKERS else 2**64)
    for context in partitions:
        this = 0
        for conv_sizes in context:
            # getConvPartialHorizontalMacCycleEstimate
            c = 16 - (15 if use1x1 else (0 if fa else 6))
            oc = co if fp else (co + 1) // 2
            for n in conv_sizes:
                if n == 0:
                    c += 7
                else:
                    c += 13 if use1x1 else 19
                    if use1x1 and oc == 1:
                        c += 1 + n * (2 + dense_dot(vw, fa, fp, ci))
                    else:
                        c += n * (7 + oc * dense_dot(vw, fa, fp, ci))
            this += c
        this += 16
        max_w, min_w = max(max_w, WORKERS * this), min(min_w, WORKERS * this)
    inner = max(max_w, min_w)
    outer = (
        (58 if fa else 65)
        - use1x1 * 10
        + WORKERS * (9 if fp else 10)
        + WORKERS * (15 if use1x1 else (0 if fp else 6))
        + cg * (23 + ig * (15 + og * (10 + inner)))
    )
    if use1x1 and ig == 1 and co == 1:
        zero = 0
    else:  # estimateZeroSupervisorCycles, float partials' vector width
        per = (field * co + WORKERS - 1) // WORKERS
        zero = ((per + 1) // 2 + 14 - 9) * WORKERS * og * cg
    return outer + zero
