"""Vertex cycle costs with the structure of PopLibs' own estimators, vectorised over arrays.

Every function takes numpy arrays (any broadcastable shape: ops, or ops x plan candidates) and
returns the cycles of ONE vertex run on one tile, as PopLibs' cycle estimators compute them
(github.com/graphcore/poplibs). Sources, by function:

AMP convolution / matmul partials (``amp_partials_cycles``)
    ``lib/poplin/ConvModel.cpp`` ``addPartialCalcCycleEstimate`` (the planner's tile cost):
    the 1x1 vertex (``ConvPartial1x1Out``) when the kernel is 1 (``canUse1x1Vertex``; matmuls and
    1x1 convolutions, their field flattened to one row), otherwise the nx1 vertex
    (``ConvPartialnx1``) plus zeroing of the partials. ``lib/poplin/PerformanceEstimation.hpp``:
    ``getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat``,
    ``getConvPartial1x1SupervisorOuterLoopCycleEstimateHalfFloat``,
    ``getConvPartialnx1WorkerCycles``, ``getConvPartialnx1SupervisorKernelLoopCycleEstimateHalfFloat``,
    ``getConvPartialnx1SupervisorInnerLoopCycleEstimateHalfFloat``,
    ``getConvPartialnx1SupervisorOuterLoopCycleEstimateHalfFloat``,
    ``getConvPartialAmpSupervisorWeightLoadCycleEstimate``, ``estimateZeroSupervisorCycles`` /
    ``getZeroSupervisorVertexCycleEstimate`` and the retention savings at the top of that file.
    The output field of a tile is split between the workers as ``partitionConvPartialByWorker``
    (``lib/poplin/ConvUtilInternal.cpp``) does: equal contiguous ranges of the flattened
    (rows x row width) field, each worker's range cut into row segments ("output runs").
    Structure: per conv group x input-channel group x output-channel group x kernel position x
    output-channel pass, the slowest worker's runs (per run: a fixed cost plus 4 cycles per
    output for half, 8 for float), plus the supervisor's weight loads and loop overheads.

SLIC partials (``slic_partials_cycles``, grouped convolutions)
    ``lib/poplin/ConvModel.cpp`` ``addPartialCalcCycleEstimate`` (``Plan::Slic``) and
    ``lib/poplin/PerformanceEstimation.hpp``: ``getConvPartialSlicInnerLoopCycles``,
    ``getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat``,
    ``getConvPartialSlicSupervisorWeightLoadCycleEstimate``,
    ``getConvPartialSlicSupervisorOuterLoopCycleEstimateHalfFloat``: the 1 x 4 window
    vertex of ``ConvPartial1x4SLIC*.S`` over conv-group grains of 1, 2, 4, 8 or 16 groups.

HMAC partials (``hmac_partials_cycles``, grouped convolutions' weight updates)
    ``lib/poplin/ConvModel.cpp`` ``addPartialCalcCycleEstimate`` (``Plan::Hmac``) and
    ``lib/poplin/PerformanceEstimation.hpp``: ``estimateConvPartialHorizontalMacInnerLoopCycles``,
    ``getConvPartialHorizontalMacSupervisorInnerLoopCycleEstimate``,
    ``getConvPartialHorizontalMacCycleEstimate``, ``getDenseDotProductCycles``,
    ``getConvPartialHorizontalMacSupervisorOuterLoopCycleEstimate``,
    ``estimateZeroSupervisorCycles``: the horizontal MAC vertex (no conv-unit padding of
    the output channels) for a 1 x 1 kernel over a one-row field.

Convolution partial-sum reduction (``conv_reduce_cycles``)
    ``lib/poplin/PerformanceEstimation.hpp`` ``getReduceCycleEstimate`` (the general,
    not-single-input path: one reduction stage).

Cast (``cast_cycles``)
    ``lib/popops/PerformanceEstimation.cpp`` ``getCast1DCycleEstimate`` and ``castWorkerCycles``
    (float <-> half on the auxiliary pipeline; unsigned char -> half).

Element-wise (``elementwise_cycles``)
    ``lib/popops/popopsCycleEstimators.cpp`` ``BinaryOp1D`` / ``UnaryOp1D`` multi-vertices:
    ``basicOpSupervisorOverhead`` (11) + workers x (worker overhead + ceil(elements per worker /
    vector width) x cycles per vector), per vector pass.

Hardware figures come from the target (``engine.targets``): workers per tile, vector widths
(64-bit data path), AMP MACs per cycle, input channels per conv unit (``amp_input_channel_group_*``:
the conv-unit pipeline depth 4 x input load elements per cycle, as ``getConvUnitWeightHeight``
computes ``weightsPerConvUnit``) and the conv units' coefficient load bytes per cycle. The number
of conv units is derived so that PopLibs' core loop (4 cycles per output for half, 8 for float)
reaches the published MACs per cycle: ``units = MACs/cycle x core cycles / weights per unit``
(Mk2: 16 half / half, 8 half / float, 16 float).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: PopLibs ConvOptions default ``use128BitConvUnitLoad = false`` (lib/poplin/ConvOptions.hpp):
#: the planner halves the target's coefficient load bytes per cycle.
USE_128BIT_CONV_UNIT_LOAD = False
#: Core loop cycles per output element of the AMP vertices (PerformanceEstimation.hpp:
#: ``coreCycles = floatActivations ? 8 : 4``).
AMP_CORE_CYCLES_HALF = 4
AMP_CORE_CYCLES_FLOAT = 8
#: Data path width in bits (PopLibs ``target.getDataPathWidth()``, 64 on every IPU; the target's
#: vector widths are elements per 64-bit vector).
DATA_PATH_BITS = 64


def _cdiv(a, b):
    return -(-np.asarray(a) // np.asarray(b))


def conv_units(target, acts_bytes: int, partials_bytes: int) -> int:
    """Conv units per tile, derived from the published AMP rate (see the module docstring)."""
    floats = acts_bytes >= 4
    rate = target.amp_rate("float32" if floats else "float16", _dtype(partials_bytes))
    core = AMP_CORE_CYCLES_FLOAT if floats else AMP_CORE_CYCLES_HALF
    return max(1, rate * core // weights_per_conv_unit(target, acts_bytes))


def weights_per_conv_unit(target, acts_bytes: int) -> int:
    """Input channels one conv unit consumes (``inChansPerGroup`` of the AMP vertex)."""
    if acts_bytes >= 4:
        return int(target.amp_input_channel_group_float)
    return int(target.amp_input_channel_group_half)


def _dtype(nbytes: int) -> str:
    return "float32" if nbytes >= 4 else "float16"


def worker_runs(elements, row_width, workers: int):
    """``partitionConvPartialByWorker``: per worker (last axis), its output runs.

    ``elements`` output positions of a tile, laid out in rows of ``row_width``; worker ``i`` gets
    the flattened range ``[i E / W, (i + 1) E / W)``. Returns ``(count, first, middle, width,
    last)``: the number of runs, the first run's length, the number of whole rows between the
    first and the last run, the row width and the last run's length (0 when the worker has a
    single run).
    """
    e = np.asarray(elements, np.int64)[..., None]
    w = np.maximum(np.asarray(row_width, np.int64), 1)[..., None]
    i = np.arange(workers, dtype=np.int64)
    begin = i * e // workers
    end = (i + 1) * e // workers
    empty = begin == end
    r0 = begin // w
    r1 = np.maximum(end - 1, 0) // w
    single = r0 == r1
    first = np.where(empty, 0, np.where(single, end - begin, w - begin % w))
    last = np.where(empty | single, 0, (end - 1) % w + 1)
    middle = np.where(empty | single, 0, r1 - r0 - 1)
    count = np.where(empty, 0, np.where(single, 1, 2 + middle))
    return count, first, middle, np.broadcast_to(w, count.shape), last


def _nx1_run_cycles(n, float_acts: bool, extra_stride: int):
    """``getConvPartialnx1WorkerCycles``: cycles of one run of ``n`` outputs (``switch``)."""
    n = np.asarray(n, np.int64)
    if float_acts:
        return np.select([n == 0, n == 1, n == 2], [17, 33, 44], 45 + (n - 3) * 8)
    return np.select([n == 0, n == 1, n == 2], [17, 29, 33 + extra_stride], 34 + (n - 3) * 4)


def _nx1_worker_cycles(runs, float_acts: bool, float_partials: bool, extra_stride: int):
    """Cycles of one worker over its runs, the same for every kernel position."""
    count, first, middle, width, last = runs
    retention = 9  # convnx1WorkerRetentionSavings
    per_run = 3 - retention  # second tripack pointer and special stride, minus retention
    cycles = 17 + (0 if float_partials else 1) + count * per_run
    cycles = cycles + np.where(count > 0, _nx1_run_cycles(first, float_acts, extra_stride), 0)
    cycles = cycles + middle * _nx1_run_cycles(width, float_acts, extra_stride)
    return cycles + np.where(count > 1, _nx1_run_cycles(last, float_acts, extra_stride), 0)


def _1x1_worker_cycles(n, zeroing: bool, float_acts: bool, float_partials: bool, units: int):
    """``getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat``, one worker with one run
    of ``n`` outputs (0 for a worker with no run)."""
    n = np.asarray(n, np.int64)
    z = 1 if zeroing else 0
    common = (not float_acts and units == 16) or float_partials
    zero_per_group = 8 if (float_acts and units == 16) else (4 if float_partials else 2)
    retention = 7 if (not float_acts and (float_partials or units == 16)) else 0
    if float_acts:
        c = np.select(
            [n == 1, n == 2],
            [47 + (2 + zero_per_group) * z, 46 + (2 + zero_per_group * 2) * z],
            46 + (2 + zero_per_group * n) * z + (n - 3) * AMP_CORE_CYCLES_FLOAT,
        )
    elif common:
        tail = 1 if zeroing else 2
        c = np.select(
            [n == 1, n == 2],
            [31 + tail, 40 + tail],
            (37 if zeroing else 38) + (n - 3) * AMP_CORE_CYCLES_HALF,
        )
    else:
        c = np.select(
            [n == 1, n == 2],
            [39 + (2 + zero_per_group) * z, 40 + (2 + zero_per_group * 2) * z],
            41 + (2 + zero_per_group * n) * z + (n - 3) * AMP_CORE_CYCLES_HALF,
        )
    # a worker with no output run has an empty work list: no cycles
    return np.where(n > 0, c - retention, 0).astype(np.int64)


def _slowest(worker_cycles, workers: int, tag: int):
    """Supervisor view of a worker loop: the slowest worker x workers, and at least the fastest
    plus the cost of tagging it (``max(max, min + tag)``)."""
    total = workers * worker_cycles
    return np.maximum(total.max(axis=-1), total.min(axis=-1) + tag)


class _Amp(NamedTuple):
    """The figures of one AMP vertex estimate that are the same for every op and candidate."""

    W: int  # workers per tile
    float_acts: bool
    float_partials: bool
    units: int  # conv units
    passes: int  # output-channel passes
    num_loads: int  # weight loads per conv-unit group
    out_chans: int


def amp_partials_cycles(
    target,
    *,
    field,
    row_width,
    kernel_positions,
    kernel_width,
    in_groups,
    out_groups,
    conv_groups,
    acts_bytes: int,
    partials_bytes: int,
    one_by_one,
):
    """Cycles of one AMP partials vertex on a tile (see the module docstring).

    ``field``: output positions on the tile; ``row_width``: their row width (the field is
    ``ceil(field / row_width)`` rows); ``kernel_positions`` on the tile and the kernel's width
    (rows of the kernel = ``ceil(kernel_positions / kernel_width)``); ``in_groups`` /
    ``out_groups``: input-channel groups of ``weights_per_conv_unit`` and output-channel groups
    of ``conv_units``; ``conv_groups`` on the tile; ``one_by_one``: the 1x1 vertex (kernel 1).
    """
    W = int(target.workers_per_tile)
    float_acts = acts_bytes >= 4
    float_partials = partials_bytes >= 4
    units = conv_units(target, acts_bytes, partials_bytes)
    out_chans = units  # partialChansPerGroup = numConvUnits: one output-channel pass per group
    passes = out_chans // units
    weight_bytes_per_unit = weights_per_conv_unit(target, acts_bytes) * acts_bytes
    coeff = int(target.amp_coeff_load_bytes_per_cycle)
    if not USE_128BIT_CONV_UNIT_LOAD:
        coeff //= 2
    num_loads = units * weight_bytes_per_unit // coeff  # filter height 1
    # every input at the common shape; each vertex's formula only where it is the one used
    args = np.broadcast_arrays(
        np.asarray(field, np.int64),
        np.asarray(row_width, np.int64),
        np.asarray(kernel_positions, np.int64),
        np.asarray(kernel_width, np.int64),
        np.asarray(in_groups, np.int64),
        np.asarray(out_groups, np.int64),
        np.asarray(conv_groups, np.int64),
        np.asarray(one_by_one, bool),
    )
    use_1x1 = args[-1]
    k = _Amp(W, float_acts, float_partials, units, passes, num_loads, out_chans)
    out = np.empty(use_1x1.shape, np.int64)
    for sel, vertex in ((use_1x1, _1x1_vertex_cycles), (~use_1x1, _nx1_vertex_cycles)):
        if sel.any():
            f, rw, kp, kw, IG, OG, CG = (x[sel] for x in args[:-1])
            out[sel] = vertex(f, rw, kp, kw, IG, OG, CG, k)
    return out


def _1x1_vertex_cycles(field, row_width, kernel_positions, kernel_width, IG, OG, CG, k: _Amp):
    """The 1x1 vertex (``ConvPartial1x1Out``): the field flattened to one run per worker."""
    i = np.arange(k.W, dtype=np.int64)
    e = field[..., None]
    runs_1x1 = (i + 1) * e // k.W - i * e // k.W  # worker_runs(field, field, W)'s single runs
    inner_zero = _slowest(
        _1x1_worker_cycles(runs_1x1, True, k.float_acts, k.float_partials, k.units), k.W, 14
    )
    inner_acc = _slowest(
        _1x1_worker_cycles(runs_1x1, False, k.float_acts, k.float_partials, k.units), k.W, 14
    )
    common = int((not k.float_acts and k.units == 16) or k.float_partials)
    ret_first, ret_second = (7, 3) if (not k.float_acts and common) else (0, 0)
    return (
        50
        + k.W * (ret_first + ret_second * (IG * CG - 1))
        + CG
        * (
            12
            + common
            + (IG - 1) * (15 - common + 1 + OG * (19 + k.passes * (6 + k.num_loads + inner_acc)))
            + (10 + 1 + OG * (19 - common + k.passes * (7 + k.num_loads + inner_zero)))
        )
    )


def _nx1_vertex_cycles(field, row_width, kernel_positions, kernel_width, IG, OG, CG, k: _Amp):
    """The nx1 vertex (``ConvPartialnx1``): every kernel position runs the workers over their
    output runs, plus zeroing of the partials."""
    extra_stride = int(
        (not k.float_acts and not k.float_partials and k.units == 16)
        or (not k.float_acts and k.float_partials and k.units == 8)
    )
    worker = _nx1_worker_cycles(
        worker_runs(field, row_width, k.W), k.float_acts, k.float_partials, extra_stride
    )
    per_position = _slowest(worker, k.W, 9) * k.passes
    K = np.maximum(kernel_positions, 1)
    kernel_rows = _cdiv(K, np.maximum(kernel_width, 1))
    innermost = k.num_loads + 15 + 3  # weight loads + filter-height-1 loads + 3
    inner = kernel_rows * 14 + K * (17 - 5 + k.passes * innermost) + K * per_position
    zero_partials_retention = 9 if k.float_partials else 10
    outer = (
        109
        + k.W * 9
        + k.W * zero_partials_retention
        + CG * (OG * 17 + (OG - 1) * 6 + 1)
        + (CG - 1) * 6
        + 1
        + CG * (16 + IG * (14 + OG * (14 + inner)))
    )
    # zeroing of the partials (estimateZeroSupervisorCycles, float partials vector width)
    zero_elems = _cdiv(field * k.out_chans, k.W)
    zero = (_cdiv(zero_elems, DATA_PATH_BITS // 32) + 14 - 9) * k.W * OG * CG
    return outer + zero


def _slic_row_cycles(n, implicit_zeroing: bool, half8: bool, float_partials: bool, stride):
    """``getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat``: the cycles of one row
    of ``n`` outputs (``rowCycles``), before the passes over the input."""
    n = np.asarray(n, np.int64)
    threshold = 6 if half8 else 5  # loopDecisionThreshold
    if implicit_zeroing:
        short = 10 + np.where(n > 1, n, 0) + 3
        long = 15 + (n - 5)
    else:
        # 1 + (n - 1) + 2 + (4 - n) + 2 + (3 - (4 - n)) + 3 (unsigned in the C++) = n + 10
        short = 7 + np.where(n == 1, 6, n + 10)
        long = 15 + (n - 5) + (3 if half8 else 0)
    stride1 = np.where(n < threshold, short, long)
    stride2 = np.where(n < 3, 7 + np.where(n == 1, 3, 5) + 3, 15 + 2 * (n - 3))
    rows = np.where(np.asarray(stride) >= 2, stride2, stride1)
    return rows - (1 if float_partials else 0)


def _slic_inner_cycles(runs, field, W: int, cg: int, chains: int, fp: bool, stride, implicit):
    """``getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat`` over the workers'
    output runs (``worker_runs``): the slowest worker x workers, plus the merge copy of the
    two output halves (8 conv units, half partials) on the implicitly zeroing pass."""
    _, first, middle, width, last = runs
    half8 = chains == 2 and not fp
    passes = 1 if chains == 4 else 2  # inputDataPasses
    preamble = 2 + (2 if half8 else 3) + 1 + 2 + 4 + 2 + 2 + 1 + (1 if half8 else 0)
    preamble += 4 if cg > 4 else 0
    per_run = (9 if half8 else 10) + (1 if implicit else 0) + (3 if fp else 0)
    st = np.asarray(stride)[..., None]

    def run(n):
        return per_run + _slic_row_cycles(n, implicit, half8, fp, st) * passes

    cycles = preamble + np.where(first > 0, run(first), 0)
    cycles = cycles + np.where(middle > 0, middle * run(width), 0)
    cycles = cycles + np.where(last > 0, run(last), 0) + (2 if half8 else 0)
    copy = 2 + 2 * np.asarray(field, np.int64) if (half8 and implicit) else 0
    return cycles.max(axis=-1) * W + copy


def slic_weight_load_cycles(cg: int, chans: int, W: int) -> int:
    """``getConvPartialSlicSupervisorWeightLoadCycleEstimate`` (half activations, 1 x 4)."""
    if chans == 4:
        cycles = 6 + 6 + 6
    else:
        worker = (12 if cg == 2 else 10) + (1 if cg > 4 else 0)
        cycles = 9 + 6 + worker * W + 6
    return cycles + 16


def slic_partials_cycles(
    target,
    *,
    field,
    row_width,
    kernel_rows,
    kernel_width,
    conv_group_groups,
    conv_groups_per_group: int,
    chans_per_group: int,
    chains: int,
    stride,
    partials_bytes: int,
):
    """Cycles of one SLIC partials vertex (``ConvPartial1x4SLIC``) on a tile, as
    ``addPartialCalcCycleEstimate``'s ``Plan::Slic`` case sums them: the workers' runs with
    and without implicit zeroing (``getConvPartialSlicInnerLoopCycles``), the weight loads
    and the supervisor's loops over conv-group grains and 1 x 4 sub-kernels
    (``getConvPartialSlicSupervisorOuterLoopCycleEstimateHalfFloat``). Half activations
    only (PopLibs has no float SLIC vertex)."""
    W = int(target.workers_per_tile)
    fp = partials_bytes >= 4
    cg, chans = int(conv_groups_per_group), int(chans_per_group)
    runs = worker_runs(field, row_width, W)
    zeroing = _slic_inner_cycles(runs, field, W, cg, chains, fp, stride, True)
    inner = _slic_inner_cycles(runs, field, W, cg, chains, fp, stride, False)
    load = slic_weight_load_cycles(cg, chans, W)
    groups = np.asarray(conv_group_groups, np.int64)
    subs = np.asarray(kernel_rows, np.int64) * _cdiv(kernel_width, 4)  # numWeightBlocks
    half8 = chains == 2 and not fp

    def brnzdec(n):
        return 6 * (n - 1) + 1

    group_body = 12 if half8 else 15
    if cg <= 4:
        sub_body = load + (0 if half8 else 3) + 2 + (0 if half8 else 1) + 6 + 1 + 6 + 1
    else:
        strides = cg // 4
        stride_body = load + 6 + 1 + 6 + 2 + 6
        sub_body = stride_body * strides + brnzdec(strides) + 2 + 2 + 6 + 3 + 2
        group_body += 2 + 6
        inner = inner * strides
    cycles = (
        (25 if half8 else 28)
        + group_body * groups
        + brnzdec(groups)
        + sub_body * subs
        + brnzdec(subs)
        + groups * zeroing
        + groups * (subs - 1) * inner
    )
    return np.asarray(cycles, np.int64)


def _dense_dot_cycles(vw: int, float_acts: bool, float_partials: bool, size):
    """``getDenseDotProductCycles``: one output's dot product over ``size`` input channels."""
    size = np.asarray(size, np.int64)
    per64 = 2 if float_acts else 4
    half_half = not float_acts and not float_partials
    out_chans = 2 if half_half else 1
    inner = 3 * out_chans + int(half_half) + 3 + 1
    widths = [1 << i for i in range(int(np.ceil(np.log2(vw))), -1, -1)]
    cycles = np.zeros(size.shape, np.int64)
    done = np.zeros(size.shape, bool)
    for w in widths:  # the widest vector that divides the channels
        hit = ~done & (size % w == 0)
        extra = out_chans if w < per64 else 0
        per_w = 1 if w >= per64 else 2
        cycles = np.where(hit, inner + extra + (size // w) * per_w - int(not float_acts), cycles)
        done |= hit
    return cycles


def hmac_partials_cycles(
    target,
    *,
    field,
    in_chans: int,
    out_chans: int,
    in_groups,
    out_groups,
    conv_groups,
    acts_bytes: int,
    partials_bytes: int,
):
    """Cycles of one HMAC partials vertex (``ConvPartialHorizontalMac``) on a tile whose field
    is one row of ``field`` outputs and whose kernel is 1 x 1 (the weight update's view),
    as ``addPartialCalcCycleEstimate``'s ``Plan::Hmac`` case sums them: one worker
    partition of ``ceil(field / workers)`` outputs (``estimateConvPartialHorizontalMac
    InnerLoopCycles`` of one row), ``getConvPartialHorizontalMacCycleEstimate``, the
    supervisor's loops (``...SupervisorOuterLoopCycleEstimate``) and the zeroing of the
    partials (``estimateZeroSupervisorCycles``; not with the non-zeroing 1 x 1 form)."""
    W = int(target.workers_per_tile)
    fa, fp = acts_bytes >= 4, partials_bytes >= 4
    vw = int(target.vector_width_float if fa else target.vector_width_half)
    use1x1 = fp and not fa  # horizontalMacHas1x1Specialisation
    field = np.asarray(field, np.int64)
    IG, OG, CG = (np.asarray(x, np.int64) for x in (in_groups, out_groups, conv_groups))
    n = _cdiv(field, W)  # rowSplitFactor = W: one part row of ceil(width / W) outputs
    oc = _cdiv(out_chans, 2) if not fp else out_chans  # half partials: 2 channels a loop
    retention = 15 if use1x1 else (0 if fa else 6)  # convHzmacWorkerRetentionSavings
    dot = _dense_dot_cycles(vw, fa, fp, in_chans)
    run = np.where(
        n == 0,
        7,
        (13 if use1x1 else 19)
        + (1 + n * (2 + dot) if (use1x1 and oc == 1) else n * (7 + oc * dot)),
    )
    worker = 16 - retention + run + 16  # + workerNonLoopOverhead
    inner = W * worker  # one used context: max(max, min = 0)
    outer_ret = 15 if use1x1 else (0 if fp else 6)  # called with floatPartials
    outer = (
        (58 if fa else 65)
        - 10 * int(use1x1)
        + W * (9 if fp else 10)
        + W * outer_ret
        + CG * (23 + IG * (15 + OG * (10 + inner)))
    )
    non_zeroing = use1x1 & (IG == 1) & (out_chans == 1)
    zero_worker = _cdiv(_cdiv(field * out_chans, W), DATA_PATH_BITS // 32) + 14 - 9
    zero = np.where(non_zeroing, 0, zero_worker * W * OG * CG)
    return (outer + zero).astype(np.int64)


def amp_mac_bound(field, kernel_positions, in_chans, out_chans, conv_groups, rate: int):
    """MACs / (MACs per cycle) of the same tile work: the AMP lower bound."""
    macs = (
        np.asarray(field, np.int64)
        * np.asarray(kernel_positions, np.int64)
        * np.asarray(in_chans, np.int64)
        * np.asarray(out_chans, np.int64)
        * np.asarray(conv_groups, np.int64)
    )
    return _cdiv(macs, rate)


def conv_reduce_cycles(target, out_size, depth, out_bytes: int, partials_bytes: int):
    """``getReduceCycleEstimate`` (general path): reduce ``depth`` partials of ``out_size``
    outputs on one tile; 0 when ``depth`` <= 1 (``engine.compiler.reduction`` holds the
    multi-stage plan around it)."""
    from engine.compiler.reduction import reduce_vertex_cycles

    depth = np.asarray(depth, np.int64)
    cycles = reduce_vertex_cycles(
        out_size, depth, int(target.workers_per_tile), out_bytes >= 4, partials_bytes >= 4, False
    )
    return np.where(depth > 1, cycles, 0).astype(np.int64)


def cast_cycles(target, n, from_bytes: int, to_bytes: int):
    """``getCast1DCycleEstimate``: cast ``n`` elements on one tile (float <-> half on the
    auxiliary pipeline; 1-byte -> half as the unsigned-char -> half assembly)."""
    W = int(target.workers_per_tile)
    n = np.asarray(n, np.int64)
    per = _cdiv(n, W)
    if from_bytes == 1:
        # castWorkerCycles isCharFloat: 4 + workCycles(4, 14, 9, 12, 14, 22)
        atoms = per // 4
        rem = per % 4
        work = np.where(atoms > 0, 14 + (atoms - 1) * 9, 0) + np.select(
            [rem == 0, rem == 1, rem == 2], [2, 12, 14], 22
        )
        worker = 4 + work
    else:
        data_path = DATA_PATH_BITS // 8
        from_load = data_path // from_bytes
        to_store = data_path // to_bytes
        width = min(from_load * 2, to_store * 1)  # two read ports, one write port
        load = width // min(width, from_load)
        store = width // min(width, to_store)
        per_vector = max(load, store)
        worker = 19 + per_vector * (per // width)
        remaining = per % width
        for i in range(int(np.ceil(np.log2(width)))):
            worker = worker + 1 + 2 * ((remaining >> i) & 1)
    return (12 + W * (worker + 18)).astype(np.int64)


def elementwise_cycles(target, n, passes, db):
    """``BinaryOp1D`` / ``UnaryOp1D`` multi-vertex per vector pass: supervisor overhead +
    workers x (worker overhead + vectors per worker x cycles per vector)."""
    W = int(target.workers_per_tile)
    db = np.asarray(db)
    vw = np.where(db >= 4, target.vector_width_float, target.vector_width_half)
    vw = np.where(db == 1, target.vector_width_float * 4, vw)
    n = np.asarray(n)
    passes = np.asarray(passes, np.float64)
    p_int = np.ceil(np.maximum(passes, 1e-9)).astype(np.int64)
    work = np.ceil(n * passes / W / vw).astype(np.int64)
    cyc = p_int * (
        target.elementwise_supervisor_cycles + W * target.elementwise_worker_overhead_cycles
    )
    return np.where(n > 0, cyc + W * work * target.elementwise_cycles_per_vector, 0).astype(
        np.int64
    )


__all__ = [
    "amp_mac_bound",
    "amp_partials_cycles",
    "cast_cycles",
    "conv_reduce_cycles",
    "conv_units",
    "elementwise_cycles",
    "hmac_partials_cycles",
    "slic_partials_cycles",
    "slic_weight_load_cycles",
    "weights_per_conv_unit",
    "worker_runs",
]
