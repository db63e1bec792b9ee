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

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from engine.compiler.reduction import pair_key

if TYPE_CHECKING:  # pragma: no cover
    from engine.targets import Target

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


def _cdiv(numerator: ArrayLike, denominator: ArrayLike) -> np.ndarray:
    return -(-np.asarray(numerator) // np.asarray(denominator))


def conv_units(target: Target, acts_bytes: int, partials_bytes: int) -> int:
    """Conv units per tile, derived from the published AMP rate (see the module docstring)."""
    floats = acts_bytes >= 4
    rate = target.amp_rate("float32" if floats else "float16", _dtype(partials_bytes))
    core = AMP_CORE_CYCLES_FLOAT if floats else AMP_CORE_CYCLES_HALF
    return max(1, rate * core // weights_per_conv_unit(target, acts_bytes))


def weights_per_conv_unit(target: Target, acts_bytes: int) -> int:
    """Input channels one conv unit consumes (``inChansPerGroup`` of the AMP vertex)."""
    if acts_bytes >= 4:
        return int(target.amp_input_channel_group_float)
    return int(target.amp_input_channel_group_half)


def _dtype(nbytes: int) -> str:
    return "float32" if nbytes >= 4 else "float16"


def worker_runs(
    elements: ArrayLike, row_width: ArrayLike, workers: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``partitionConvPartialByWorker``: per worker (last axis), its output runs.

    ``elements`` output positions of a tile, laid out in rows of ``row_width``; worker ``i`` gets
    the flattened range ``[i E / W, (i + 1) E / W)``. Returns ``(count, first, middle, width,
    last)``: the number of runs, the first run's length, the number of whole rows between the
    first and the last run, the row width and the last run's length (0 when the worker has a
    single run).
    """
    elems = np.asarray(elements, np.int64)[..., None]
    widths = np.maximum(np.asarray(row_width, np.int64), 1)[..., None]
    worker = np.arange(workers, dtype=np.int64)
    begin = worker * elems // workers
    end = (worker + 1) * elems // workers
    empty = begin == end
    first_row = begin // widths
    last_row = np.maximum(end - 1, 0) // widths
    single = first_row == last_row
    first = np.where(empty, 0, np.where(single, end - begin, widths - begin % widths))
    last = np.where(empty | single, 0, (end - 1) % widths + 1)
    middle = np.where(empty | single, 0, last_row - first_row - 1)
    count = np.where(empty, 0, np.where(single, 1, 2 + middle))
    return count, first, middle, np.broadcast_to(widths, count.shape), last


def _nx1_run_cycles(outputs: ArrayLike, float_acts: bool, extra_stride: int) -> np.ndarray:
    """``getConvPartialnx1WorkerCycles``: cycles of one run of ``outputs`` outputs (``switch``)."""
    outputs = np.asarray(outputs, np.int64)
    if float_acts:
        return np.select(
            [outputs == 0, outputs == 1, outputs == 2], [17, 33, 44], 45 + (outputs - 3) * 8
        )
    return np.select(
        [outputs == 0, outputs == 1, outputs == 2],
        [17, 29, 33 + extra_stride],
        34 + (outputs - 3) * 4,
    )


def _nx1_worker_cycles(
    runs: tuple[np.ndarray, ...], float_acts: bool, float_partials: bool, extra_stride: int
) -> np.ndarray:
    """Cycles of one worker over its runs, the same for every kernel position."""
    count, first, middle, width, last = runs
    retention = 9  # convnx1WorkerRetentionSavings
    per_run = 3 - retention  # second tripack pointer and special stride, minus retention
    cycles = 17 + (0 if float_partials else 1) + count * per_run
    cycles = cycles + np.where(count > 0, _nx1_run_cycles(first, float_acts, extra_stride), 0)
    cycles = cycles + middle * _nx1_run_cycles(width, float_acts, extra_stride)
    return cycles + np.where(count > 1, _nx1_run_cycles(last, float_acts, extra_stride), 0)


def _1x1_worker_cycles(
    outputs: ArrayLike, zeroing: bool, float_acts: bool, float_partials: bool, units: int
) -> np.ndarray:
    """``getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat``, one worker with one run
    of ``outputs`` outputs (0 for a worker with no run)."""
    outputs = np.asarray(outputs, np.int64)
    zeroes = 1 if zeroing else 0
    common = (not float_acts and units == 16) or float_partials
    zero_per_group = 8 if (float_acts and units == 16) else (4 if float_partials else 2)
    retention = 7 if (not float_acts and (float_partials or units == 16)) else 0
    if float_acts:
        cycles = np.select(
            [outputs == 1, outputs == 2],
            [47 + (2 + zero_per_group) * zeroes, 46 + (2 + zero_per_group * 2) * zeroes],
            46 + (2 + zero_per_group * outputs) * zeroes + (outputs - 3) * AMP_CORE_CYCLES_FLOAT,
        )
    elif common:
        tail = 1 if zeroing else 2
        cycles = np.select(
            [outputs == 1, outputs == 2],
            [31 + tail, 40 + tail],
            (37 if zeroing else 38) + (outputs - 3) * AMP_CORE_CYCLES_HALF,
        )
    else:
        cycles = np.select(
            [outputs == 1, outputs == 2],
            [39 + (2 + zero_per_group) * zeroes, 40 + (2 + zero_per_group * 2) * zeroes],
            41 + (2 + zero_per_group * outputs) * zeroes + (outputs - 3) * AMP_CORE_CYCLES_HALF,
        )
    # a worker with no output run has an empty work list: no cycles
    return np.where(outputs > 0, cycles - retention, 0).astype(np.int64)


def _slowest(worker_cycles: np.ndarray, workers: int, tag: int) -> np.ndarray:
    """Supervisor view of a worker loop: the slowest worker x workers, and at least the fastest
    plus the cost of tagging it (``max(max, min + tag)``)."""
    total = workers * worker_cycles
    return np.maximum(total.max(axis=-1), total.min(axis=-1) + tag)


class _Amp(NamedTuple):
    """The figures of one AMP vertex estimate that are the same for every op and candidate."""

    workers: int  # workers per tile
    float_acts: bool
    float_partials: bool
    units: int  # conv units
    passes: int  # output-channel passes
    num_loads: int  # weight loads per conv-unit group
    out_chans: int


def amp_partials_cycles(
    target: Target,
    *,
    field: ArrayLike,
    row_width: ArrayLike,
    kernel_positions: ArrayLike,
    kernel_width: ArrayLike,
    in_groups: ArrayLike,
    out_groups: ArrayLike,
    conv_groups: ArrayLike,
    acts_bytes: int,
    partials_bytes: int,
    one_by_one: ArrayLike,
) -> np.ndarray:
    """Cycles of one AMP partials vertex on a tile (see the module docstring).

    ``field``: output positions on the tile; ``row_width``: their row width (the field is
    ``ceil(field / row_width)`` rows); ``kernel_positions`` on the tile and the kernel's width
    (rows of the kernel = ``ceil(kernel_positions / kernel_width)``); ``in_groups`` /
    ``out_groups``: input-channel groups of ``weights_per_conv_unit`` and output-channel groups
    of ``conv_units``; ``conv_groups`` on the tile; ``one_by_one``: the 1x1 vertex (kernel 1).
    """
    workers = int(target.workers_per_tile)
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
    *shaped, use_1x1 = np.broadcast_arrays(
        np.asarray(field, np.int64),
        np.asarray(row_width, np.int64),
        np.asarray(kernel_positions, np.int64),
        np.asarray(kernel_width, np.int64),
        np.asarray(in_groups, np.int64),
        np.asarray(out_groups, np.int64),
        np.asarray(conv_groups, np.int64),
        np.asarray(one_by_one, bool),
    )
    amp = _Amp(workers, float_acts, float_partials, units, passes, num_loads, out_chans)
    out = np.empty(use_1x1.shape, np.int64)
    for sel, vertex in ((use_1x1, _1x1_vertex_cycles), (~use_1x1, _nx1_vertex_cycles)):
        if sel.any():
            # the broadcast inputs at the rows this vertex computes
            at_field, at_width, at_positions, at_kernel_width, at_in, at_out, at_conv = (
                column[sel] for column in shaped
            )
            out[sel] = vertex(
                at_field, at_width, at_positions, at_kernel_width, at_in, at_out, at_conv, amp
            )
    return out


def _1x1_vertex_cycles(
    field: np.ndarray,
    row_width: np.ndarray,
    kernel_positions: np.ndarray,
    kernel_width: np.ndarray,
    in_groups: np.ndarray,
    out_groups: np.ndarray,
    conv_groups: np.ndarray,
    amp: _Amp,
) -> np.ndarray:
    """The 1x1 vertex (``ConvPartial1x1Out``): the field flattened to one run per worker."""
    worker = np.arange(amp.workers, dtype=np.int64)
    # the workers' runs depend on the field alone: each distinct field's figures once
    # (return_index keeps np.unique on its sort path, which does not import numpy.ma)
    fields, _, inverse = np.unique(field, return_index=True, return_inverse=True)
    elems = fields[:, None]
    runs_1x1 = (
        (worker + 1) * elems // amp.workers - worker * elems // amp.workers
    )  # worker_runs(field, field, W)'s single runs
    inner_zero = _slowest(
        _1x1_worker_cycles(runs_1x1, True, amp.float_acts, amp.float_partials, amp.units),
        amp.workers,
        14,
    )[inverse].reshape(field.shape)
    inner_acc = _slowest(
        _1x1_worker_cycles(runs_1x1, False, amp.float_acts, amp.float_partials, amp.units),
        amp.workers,
        14,
    )[inverse].reshape(field.shape)
    common = int((not amp.float_acts and amp.units == 16) or amp.float_partials)
    ret_first, ret_second = (7, 3) if (not amp.float_acts and common) else (0, 0)
    return (
        50
        + amp.workers * (ret_first + ret_second * (in_groups * conv_groups - 1))
        + conv_groups
        * (
            12
            + common
            + (in_groups - 1)
            * (15 - common + 1 + out_groups * (19 + amp.passes * (6 + amp.num_loads + inner_acc)))
            + (10 + 1 + out_groups * (19 - common + amp.passes * (7 + amp.num_loads + inner_zero)))
        )
    )


def _nx1_vertex_cycles(
    field: np.ndarray,
    row_width: np.ndarray,
    kernel_positions: np.ndarray,
    kernel_width: np.ndarray,
    in_groups: np.ndarray,
    out_groups: np.ndarray,
    conv_groups: np.ndarray,
    amp: _Amp,
) -> np.ndarray:
    """The nx1 vertex (``ConvPartialnx1``): every kernel position runs the workers over their
    output runs, plus zeroing of the partials."""
    extra_stride = int(
        (not amp.float_acts and not amp.float_partials and amp.units == 16)
        or (not amp.float_acts and amp.float_partials and amp.units == 8)
    )
    # the workers' runs depend on the field and its row width alone, which few distinct pairs
    # cover (ResNet-50's 8,700 nx1 candidates: 116): each pair's figures once, then spread
    row_width = np.broadcast_to(row_width, field.shape)
    _, first, inverse = np.unique(
        pair_key(field, row_width), return_index=True, return_inverse=True
    )
    worker = _nx1_worker_cycles(
        worker_runs(field.ravel()[first], row_width.ravel()[first], amp.workers),
        amp.float_acts,
        amp.float_partials,
        extra_stride,
    )
    per_position = (_slowest(worker, amp.workers, 9) * amp.passes)[inverse].reshape(field.shape)
    positions = np.maximum(kernel_positions, 1)
    kernel_rows = _cdiv(positions, np.maximum(kernel_width, 1))
    innermost = amp.num_loads + 15 + 3  # weight loads + filter-height-1 loads + 3
    inner = (
        kernel_rows * 14 + positions * (17 - 5 + amp.passes * innermost) + positions * per_position
    )
    zero_partials_retention = 9 if amp.float_partials else 10
    outer = (
        109
        + amp.workers * 9
        + amp.workers * zero_partials_retention
        + conv_groups * (out_groups * 17 + (out_groups - 1) * 6 + 1)
        + (conv_groups - 1) * 6
        + 1
        + conv_groups * (16 + in_groups * (14 + out_groups * (14 + inner)))
    )
    # zeroing of the partials (estimateZeroSupervisorCycles, float partials vector width)
    zero_elems = _cdiv(field * amp.out_chans, amp.workers)
    zero = (
        (_cdiv(zero_elems, DATA_PATH_BITS // 32) + 14 - 9) * amp.workers * out_groups * conv_groups
    )
    return outer + zero


def _slic_row_cycles(
    outputs: ArrayLike, implicit_zeroing: bool, half8: bool, float_partials: bool, stride: ArrayLike
) -> np.ndarray:
    """``getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat``: the cycles of one row
    of ``outputs`` outputs (``rowCycles``), before the passes over the input."""
    outputs = np.asarray(outputs, np.int64)
    threshold = 6 if half8 else 5  # loopDecisionThreshold
    if implicit_zeroing:
        short = 10 + np.where(outputs > 1, outputs, 0) + 3
        long = 15 + (outputs - 5)
    else:
        # 1 + (n - 1) + 2 + (4 - n) + 2 + (3 - (4 - n)) + 3 (unsigned in the C++) = n + 10
        short = 7 + np.where(outputs == 1, 6, outputs + 10)
        long = 15 + (outputs - 5) + (3 if half8 else 0)
    stride1 = np.where(outputs < threshold, short, long)
    stride2 = np.where(outputs < 3, 7 + np.where(outputs == 1, 3, 5) + 3, 15 + 2 * (outputs - 3))
    rows = np.where(np.asarray(stride) >= 2, stride2, stride1)
    return rows - (1 if float_partials else 0)


def _slic_inner_cycles(
    runs: tuple[np.ndarray, ...],
    field: ArrayLike,
    workers: int,
    conv_groups_per_group: int,
    chains: int,
    float_partials: bool,
    stride: ArrayLike,
    implicit: bool,
) -> np.ndarray:
    """``getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat`` over the workers'
    output runs (``worker_runs``): the slowest worker x workers, plus the merge copy of the
    two output halves (8 conv units, half partials) on the implicitly zeroing pass."""
    _, first, middle, width, last = runs
    half8 = chains == 2 and not float_partials
    passes = 1 if chains == 4 else 2  # inputDataPasses
    preamble = 2 + (2 if half8 else 3) + 1 + 2 + 4 + 2 + 2 + 1 + (1 if half8 else 0)
    preamble += 4 if conv_groups_per_group > 4 else 0
    per_run = (9 if half8 else 10) + (1 if implicit else 0) + (3 if float_partials else 0)
    strides = np.asarray(stride)[..., None]

    def run(outputs: ArrayLike) -> np.ndarray:
        return (
            per_run + _slic_row_cycles(outputs, implicit, half8, float_partials, strides) * passes
        )

    cycles = preamble + np.where(first > 0, run(first), 0)
    cycles = cycles + np.where(middle > 0, middle * run(width), 0)
    cycles = cycles + np.where(last > 0, run(last), 0) + (2 if half8 else 0)
    copy = 2 + 2 * np.asarray(field, np.int64) if (half8 and implicit) else 0
    return cycles.max(axis=-1) * workers + copy


def slic_weight_load_cycles(conv_groups_per_group: int, chans: int, workers: int) -> int:
    """``getConvPartialSlicSupervisorWeightLoadCycleEstimate`` (half activations, 1 x 4)."""
    if chans == 4:
        cycles = 6 + 6 + 6
    else:
        worker = (12 if conv_groups_per_group == 2 else 10) + (
            1 if conv_groups_per_group > 4 else 0
        )
        cycles = 9 + 6 + worker * workers + 6
    return cycles + 16


def slic_partials_cycles(
    target: Target,
    *,
    field: ArrayLike,
    row_width: ArrayLike,
    kernel_rows: ArrayLike,
    kernel_width: ArrayLike,
    conv_group_groups: ArrayLike,
    conv_groups_per_group: int,
    chans_per_group: int,
    chains: int,
    stride: ArrayLike,
    partials_bytes: int,
) -> np.ndarray:
    """Cycles of one SLIC partials vertex (``ConvPartial1x4SLIC``) on a tile, as
    ``addPartialCalcCycleEstimate``'s ``Plan::Slic`` case sums them: the workers' runs with
    and without implicit zeroing (``getConvPartialSlicInnerLoopCycles``), the weight loads
    and the supervisor's loops over conv-group grains and 1 x 4 sub-kernels
    (``getConvPartialSlicSupervisorOuterLoopCycleEstimateHalfFloat``). Half activations
    only (PopLibs has no float SLIC vertex)."""
    workers = int(target.workers_per_tile)
    float_partials = partials_bytes >= 4
    conv_groups_per_group, chans = int(conv_groups_per_group), int(chans_per_group)
    runs = worker_runs(field, row_width, workers)
    zeroing = _slic_inner_cycles(
        runs, field, workers, conv_groups_per_group, chains, float_partials, stride, True
    )
    inner = _slic_inner_cycles(
        runs, field, workers, conv_groups_per_group, chains, float_partials, stride, False
    )
    load = slic_weight_load_cycles(conv_groups_per_group, chans, workers)
    groups = np.asarray(conv_group_groups, np.int64)
    subs = np.asarray(kernel_rows, np.int64) * _cdiv(kernel_width, 4)  # numWeightBlocks
    half8 = chains == 2 and not float_partials

    def brnzdec(count: ArrayLike) -> np.ndarray:
        return 6 * (np.asarray(count) - 1) + 1

    group_body = 12 if half8 else 15
    sub_body: int | np.ndarray
    if conv_groups_per_group <= 4:
        sub_body = load + (0 if half8 else 3) + 2 + (0 if half8 else 1) + 6 + 1 + 6 + 1
    else:
        strides = conv_groups_per_group // 4
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


def _dense_dot_cycles(
    vector_width: int, float_acts: bool, float_partials: bool, size: ArrayLike
) -> np.ndarray:
    """``getDenseDotProductCycles``: one output's dot product over ``size`` input channels."""
    size = np.asarray(size, np.int64)
    per64 = 2 if float_acts else 4
    half_half = not float_acts and not float_partials
    out_chans = 2 if half_half else 1
    inner = 3 * out_chans + int(half_half) + 3 + 1
    widths = [1 << bit for bit in range(int(np.ceil(np.log2(vector_width))), -1, -1)]
    cycles = np.zeros(size.shape, np.int64)
    done = np.zeros(size.shape, bool)
    for width in widths:  # the widest vector that divides the channels
        hit = ~done & (size % width == 0)
        extra = out_chans if width < per64 else 0
        per_w = 1 if width >= per64 else 2
        cycles = np.where(
            hit, inner + extra + (size // width) * per_w - int(not float_acts), cycles
        )
        done |= hit
    return cycles


def hmac_partials_cycles(
    target: Target,
    *,
    field: ArrayLike,
    in_chans: int,
    out_chans: int,
    in_groups: ArrayLike,
    out_groups: ArrayLike,
    conv_groups: ArrayLike,
    acts_bytes: int,
    partials_bytes: int,
) -> np.ndarray:
    """Cycles of one HMAC partials vertex (``ConvPartialHorizontalMac``) on a tile whose field
    is one row of ``field`` outputs and whose kernel is 1 x 1 (the weight update's view),
    as ``addPartialCalcCycleEstimate``'s ``Plan::Hmac`` case sums them: one worker
    partition of ``ceil(field / workers)`` outputs (``estimateConvPartialHorizontalMac
    InnerLoopCycles`` of one row), ``getConvPartialHorizontalMacCycleEstimate``, the
    supervisor's loops (``...SupervisorOuterLoopCycleEstimate``) and the zeroing of the
    partials (``estimateZeroSupervisorCycles``; not with the non-zeroing 1 x 1 form)."""
    workers = int(target.workers_per_tile)
    float_acts, float_partials = acts_bytes >= 4, partials_bytes >= 4
    vector_width = int(target.vector_width_float if float_acts else target.vector_width_half)
    use1x1 = float_partials and not float_acts  # horizontalMacHas1x1Specialisation
    field = np.asarray(field, np.int64)
    in_groups, out_groups, conv_groups = (
        np.asarray(count, np.int64) for count in (in_groups, out_groups, conv_groups)
    )
    per_worker = _cdiv(
        field, workers
    )  # rowSplitFactor = W: one part row of ceil(width / W) outputs
    chans_per_loop = (
        _cdiv(out_chans, 2) if not float_partials else out_chans
    )  # half partials: 2 channels a loop
    retention = 15 if use1x1 else (0 if float_acts else 6)  # convHzmacWorkerRetentionSavings
    dot = _dense_dot_cycles(vector_width, float_acts, float_partials, in_chans)
    run = np.where(
        per_worker == 0,
        7,
        (13 if use1x1 else 19)
        + (
            1 + per_worker * (2 + dot)
            if (use1x1 and chans_per_loop == 1)
            else per_worker * (7 + chans_per_loop * dot)
        ),
    )
    worker = 16 - retention + run + 16  # + workerNonLoopOverhead
    inner = workers * worker  # one used context: max(max, min = 0)
    outer_ret = 15 if use1x1 else (0 if float_partials else 6)  # called with floatPartials
    outer = (
        (58 if float_acts else 65)
        - 10 * int(use1x1)
        + workers * (9 if float_partials else 10)
        + workers * outer_ret
        + conv_groups * (23 + in_groups * (15 + out_groups * (10 + inner)))
    )
    non_zeroing = use1x1 & (in_groups == 1) & (out_chans == 1)
    zero_worker = _cdiv(_cdiv(field * out_chans, workers), DATA_PATH_BITS // 32) + 14 - 9
    zero = np.where(non_zeroing, 0, zero_worker * workers * out_groups * conv_groups)
    return (outer + zero).astype(np.int64)


def amp_mac_bound(
    field: ArrayLike,
    kernel_positions: ArrayLike,
    in_chans: ArrayLike,
    out_chans: ArrayLike,
    conv_groups: ArrayLike,
    rate: int,
) -> np.ndarray:
    """MACs / (MACs per cycle) of the same tile work: the AMP lower bound."""
    macs = (
        np.asarray(field, np.int64)
        * np.asarray(kernel_positions, np.int64)
        * np.asarray(in_chans, np.int64)
        * np.asarray(out_chans, np.int64)
        * np.asarray(conv_groups, np.int64)
    )
    return _cdiv(macs, rate)


def conv_reduce_cycles(
    target: Target, out_size: ArrayLike, depth: ArrayLike, out_bytes: int, partials_bytes: int
) -> np.ndarray:
    """``getReduceCycleEstimate`` (general path): reduce ``depth`` partials of ``out_size``
    outputs on one tile; 0 when ``depth`` <= 1 (``engine.compiler.reduction`` holds the
    multi-stage plan around it)."""
    from engine.compiler.reduction import reduce_vertex_cycles

    depth = np.asarray(depth, np.int64)
    cycles = reduce_vertex_cycles(
        out_size, depth, int(target.workers_per_tile), out_bytes >= 4, partials_bytes >= 4, False
    )
    return np.where(depth > 1, cycles, 0).astype(np.int64)


def cast_cycles(target: Target, elements: ArrayLike, from_bytes: int, to_bytes: int) -> np.ndarray:
    """``getCast1DCycleEstimate``: cast ``elements`` on one tile (float <-> half on the
    auxiliary pipeline; 1-byte -> half as the unsigned-char -> half assembly)."""
    workers = int(target.workers_per_tile)
    elements = np.asarray(elements, np.int64)
    per_worker = _cdiv(elements, workers)
    if from_bytes == 1:
        # castWorkerCycles isCharFloat: 4 + workCycles(4, 14, 9, 12, 14, 22)
        atoms = per_worker // 4
        rem = per_worker % 4
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
        worker = 19 + per_vector * (per_worker // width)
        remaining = per_worker % width
        for bit in range(int(np.ceil(np.log2(width)))):
            worker = worker + 1 + 2 * ((remaining >> bit) & 1)
    return (12 + workers * (worker + 18)).astype(np.int64)


def elementwise_cycles(
    target: Target, elements: ArrayLike, passes: ArrayLike, elem_bytes: ArrayLike
) -> np.ndarray:
    """``BinaryOp1D`` / ``UnaryOp1D`` multi-vertex per vector pass: supervisor overhead +
    workers x (worker overhead + vectors per worker x cycles per vector)."""
    workers = int(target.workers_per_tile)
    elem_bytes = np.asarray(elem_bytes)
    vector_width = np.where(elem_bytes >= 4, target.vector_width_float, target.vector_width_half)
    vector_width = np.where(elem_bytes == 1, target.vector_width_float * 4, vector_width)
    elements = np.asarray(elements)
    passes = np.asarray(passes, np.float64)
    p_int = np.ceil(np.maximum(passes, 1e-9)).astype(np.int64)
    work = np.ceil(elements * passes / workers / vector_width).astype(np.int64)
    cyc = p_int * (
        target.elementwise_supervisor_cycles + workers * target.elementwise_worker_overhead_cycles
    )
    return np.where(
        elements > 0, cyc + workers * work * target.elementwise_cycles_per_vector, 0
    ).astype(np.int64)


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
