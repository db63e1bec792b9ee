"""Reductions as PopLibs plans and costs them, vectorised over arrays of reductions.

Two families, both from github.com/graphcore/poplibs:

Convolution partial sums (``conv_reduce``)
    When a convolution plan splits the reduction (input channels, kernel rows) over ``depth``
    tiles, the partial sums are reduced in one to three stages. ``lib/poplin/ConvReducePlan.cpp``
    ``getMultiStageReducePlan`` (``enableMultiStageReduce``, on by default in
    ``lib/poplin/ConvOptions.hpp``): 1 stage below depth 16, 2 from 16, 3 from 125, each
    intermediate depth chosen by ``getMultiStageReducePlanAndCost`` (the fewest messages per
    tile). Per stage, ``lib/poplin/PerformanceEstimation.hpp`` ``estimateConvReduceCycles``:
    the outputs shrink by the stage's depth, the single-input reduce vertex is used when the
    stage's outputs are a multiple of the accumulator width and its partials take less than
    1/16 of the tile (``checkPartialsSizeForSingleInputReduce``, ``ConvReducePlan.hpp``), and
    the vertex costs ``getReduceCycleEstimate``; a depth of 1 costs only the cast of float
    partials to a half output (``estimateCastCycles``). The exchange of each stage after the
    first is ``lib/poplin/ConvModel.cpp`` ``addExchangeCycleEstimates``'s
    "partialSumExchangeCycleEstimate".

Cross-tile reductions of other ops (``popops_reduce``: batch-norm statistics forward and
backward, global pooling, LAMB norms)
    ``lib/popops/reduction/Reduction.cpp`` ``reductionWithOutput``: each tile first reduces its
    own elements per output column (``inputToIntermediateNoExchange``, no exchange), then,
    while ``calculateNextStep`` (``ReductionPlan.cpp``) says the fan-in is high and the data
    left is more than 64 x the outputs (``reductionFactorThresholdToAddMoreStages``), an
    ``intermediateToIntermediate`` stage spreads the partials over the tiles
    (``calculateSplit``: pieces of at least 64 elements and 2 rows, columns in grains of twice
    the partials' vector width, ``findGrainSizeForOp``), and a final ``intermediateToOutput``
    stage reduces what is left at the outputs' tiles. Vertices: the strided reduce
    (``lib/popops/reduction/CycleEstimationFunctions.cpp``
    ``getCyclesEstimateForStridedReduce``), one per worker over a share of the columns.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:  # pragma: no cover
    from engine.targets import Target

#: Data path width in bits (``target.getDataPathWidth()``).
DATA_PATH_BITS = 64
#: ``reductionFactorThresholdToAddMoreStages`` (lib/popops/reduction/ReductionPlan.hpp).
MORE_STAGES_FACTOR = 64
#: ``calculateSplit``'s minimum piece: rows and elements (ReductionStages.cpp
#: ``intermediateToIntermediate``: ``calculateSplit(..., grainSize, grainSize, 2, 64, tiles)``).
MIN_PIECE_ROWS = 2
MIN_PIECE_SIZE = MORE_STAGES_FACTOR
#: Stages of the multi-stage convolution reduction are at most 3 (getNumReduceStages).
MAX_STAGES = 3


def _cdiv(numerator: ArrayLike, denominator: ArrayLike) -> np.ndarray:
    return -(-np.asarray(numerator) // np.asarray(denominator))


# ---- poplin: convolution partial sums --------------------------------------------------------


def num_reduce_stages(depth: int, enable_multi_stage: bool = True) -> int:
    """``getNumReduceStages``: 1 below a depth of 16, 2 from 16, 3 from 125."""
    if not enable_multi_stage:
        return 1
    if depth >= 125:
        return 3
    if depth >= 16:
        return 2
    return 1


def _plan_and_cost(depth: int, stages: int) -> tuple[tuple[int, ...], float]:
    """``getMultiStageReducePlanAndCost``: intermediate depths and messages per tile."""
    if stages == 1:
        return (), float(depth)
    down = int(math.pow(float(depth), (stages - 1.0) / stages))
    plan_d, cost_d = _plan_and_cost(down, stages - 1)
    cost_d += depth / down if down else math.inf
    rounded_up = down + 1
    plan_u, cost_u = _plan_and_cost(rounded_up, stages - 1)
    cost_u += depth / rounded_up
    if cost_d < cost_u:
        return (down, *plan_d), cost_d
    return (rounded_up, *plan_u), cost_u


@lru_cache(maxsize=4096)
def multi_stage_reduce_plan(depth: int, enable_multi_stage: bool = True) -> tuple[int, ...]:
    """``getMultiStageReducePlan``: the partials' depth after each intermediate stage."""
    return _plan_and_cost(int(depth), num_reduce_stages(int(depth), enable_multi_stage))[0]


def pair_key(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One int64 per (a, b) pair, equal for equal pairs only (a and b non-negative ints, within
    range; otherwise ``(a, b)``'s row number among the distinct pairs, by a sort)."""
    if not a.size:
        return np.zeros(a.shape, np.int64)
    a_max, b_max = int(a.max()), int(b.max())
    if min(int(a.min()), int(b.min())) >= 0 and (a_max + 1) * (b_max + 1) < 1 << 62:
        return a * (b_max + 1) + b
    return np.unique(np.stack([a.ravel(), b.ravel()], axis=1), axis=0, return_inverse=True)[
        1
    ].reshape(a.shape)


def distinct_index(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For 1-D int columns of one length: the index of the first of each distinct row, and
    each row's index among the distinct rows (in ``pair_key`` order)."""
    key = cols[0]
    for column in cols[1:]:
        key = pair_key(key, column)
    # (return_index keeps np.unique on its sort path, which does not import numpy.ma)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def distinct_rows(*cols: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The distinct rows of 1-D int columns of one length, and each row's index among them."""
    first, inverse = distinct_index(*cols)
    return tuple(column[first] for column in cols), inverse


def _distinct_small(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` of a 1-D int64 array; for values in a small
    non-negative range by a count of each value instead of a sort (the planner's candidates'
    reduction depths: tens of thousands of rows, tens of distinct depths)."""
    if not len(a) or a.min() < 0 or a.max() >= 1 << 16:
        return np.unique(a, return_inverse=True)
    uniq = np.flatnonzero(np.bincount(a))
    index = np.zeros(int(uniq[-1]) + 1, np.int64)
    index[uniq] = np.arange(len(uniq))
    return uniq, index[a]


def stage_depths(depth: ArrayLike) -> np.ndarray:
    """Per reduction (rows) the depth each of up to three stages reduces (0: no stage), as
    ``estimateConvReduceCycles`` walks the plan: ``ceil(remaining / d)`` per intermediate
    depth ``d``, then the rest."""
    depth = np.asarray(depth, np.int64).ravel()
    uniq, inv = _distinct_small(depth)
    table = np.zeros((len(uniq), MAX_STAGES), np.int64)
    for row, total in enumerate(uniq.tolist()):
        if total <= 1:
            continue
        remaining = total
        stage = 0
        for nxt in multi_stage_reduce_plan(total):
            this = -(-remaining // nxt)
            remaining = -(-remaining // this)
            table[row, stage] = this
            stage += 1
        if remaining > 1:
            table[row, stage] = remaining
    return table[inv]


def reduce_vertex_cycles(
    out_size: ArrayLike,
    partials: ArrayLike,
    workers: int,
    float_out: ArrayLike,
    float_partials: ArrayLike,
    single_input: ArrayLike,
) -> np.ndarray:
    """``getReduceCycleEstimate``: the ReduceAdd vertex reducing ``partials`` inputs into
    ``out_size`` outputs on one tile (constrained partials off: ``enableFastReduce`` false)."""
    out_size = np.asarray(out_size, np.int64)
    partials = np.asarray(partials, np.int64)
    float_out = np.asarray(float_out, bool)
    float_partials = np.asarray(float_partials, bool)
    acc = np.where(float_partials, 4, 8)
    in_dp = np.where(float_partials, DATA_PATH_BITS // 32, DATA_PATH_BITS // 16)
    # single input: 1-2 cycle inner loop
    per_loop_s = acc // np.minimum(acc, in_dp)
    loops_s = out_size // acc
    per_worker_s = loops_s // workers + (loops_s % workers > 0)
    outer = np.where(float_partials, np.where(float_out, 8, 7), np.where(float_out, 10, 9))
    single = (20 + (per_loop_s * partials + outer) * per_worker_s) * workers + 33
    # general (supervisor) path
    per_loop = acc // np.minimum(acc, in_dp) + 1
    loops = out_size // acc
    for bit in range(3):  # ceilLog2(accVectorWidth) <= 3
        loops = loops + np.where(bit < np.log2(acc), (out_size >> bit) & 1, 0)
    per_worker = loops // workers
    rem = loops % workers > 0
    ragged = (out_size & (acc - 1)) > 0
    cycles = 32 + np.where(rem & ragged, 2 * partials + np.where(float_partials, 13, 11), 0)
    per_worker = per_worker + (rem & ~ragged)
    tail = np.where(float_out, np.where(float_partials, 7, 9), np.where(float_partials, 6, 8))
    general = (cycles + (per_loop * partials + tail) * per_worker) * workers
    return np.where(np.asarray(single_input, bool), single, general).astype(np.int64)


def cast_partials_cycles(
    out_size: ArrayLike, partials_vw: int, out_vw: int, workers: int
) -> np.ndarray:
    """``estimateCastCycles`` (PerformanceEstimation.hpp): cast the partials to the output."""
    per_worker = _cdiv(np.asarray(out_size, np.int64), workers)
    return (np.maximum(_cdiv(per_worker, partials_vw), _cdiv(per_worker, out_vw)) + 26) * workers


def conv_reduce(
    target: Target,
    out_size: ArrayLike,
    depth: ArrayLike,
    in_serial: ArrayLike,
    out_bytes: int,
    partials_bytes: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``estimateConvReduceCycles`` stage by stage, vectorised: returns ``(cycles, outputs,
    depths)``, each (n, 3): the compute cycles of each stage, the outputs per tile each stage
    produces, and the depth it reduces (0: no stage). ``out_size`` = outputs per tile after the
    whole reduction; a depth of 1 yields the partials' cast (stage 1) unless the types match or
    input channels are split serially (the cast then follows the serial loop)."""
    workers = int(target.workers_per_tile)
    out_size = np.asarray(out_size, np.int64).ravel()
    depth = np.asarray(depth, np.int64).ravel()
    in_serial = np.broadcast_to(np.asarray(in_serial, np.int64), depth.shape)
    float_out, float_partials = out_bytes >= 4, partials_bytes >= 4
    depths = stage_depths(depth)  # (n, 3)
    n_rows = len(depth)
    cycles = np.zeros((n_rows, MAX_STAGES), np.int64)
    outs = np.zeros((n_rows, MAX_STAGES), np.int64)
    size = out_size * np.maximum(depth, 1)
    remaining = np.maximum(depth, 1)
    fast = 4 if float_partials else 8  # widthForFastReduce
    bank = int(target.bank_bytes)
    sram = int(target.sram_per_tile)
    for stage in range(MAX_STAGES):
        has = depths[:, stage] > 0
        stage_depth = np.maximum(depths[:, stage], 1)
        remaining = np.where(has, _cdiv(remaining, stage_depth), remaining)
        last = remaining == 1
        size = np.where(has, _cdiv(size, stage_depth), size)
        exchanged = (stage_depth - 1) * size * partials_bytes
        small = _cdiv(exchanged, bank) * bank < sram // 16
        single = (size % fast == 0) & small
        vertex = reduce_vertex_cycles(
            size,
            stage_depth - single,
            workers,
            np.where(last, float_out, float_partials),
            float_partials,
            single,
        )
        cycles[:, stage] = np.where(has, vertex, 0)
        outs[:, stage] = np.where(has, size, 0)
    if float_out != float_partials:
        partials_vector = DATA_PATH_BITS // (8 * partials_bytes)
        out_vector = DATA_PATH_BITS // (8 * out_bytes)
        cast = (depth == 1) & (in_serial <= 1)
        cycles[:, 0] = np.where(
            cast, cast_partials_cycles(out_size, partials_vector, out_vector, workers), cycles[:, 0]
        )
        outs[:, 0] = np.where(cast, out_size, outs[:, 0])
    return cycles, outs, depths


def conv_reduce_estimates(
    target: Target,
    partials_per_tile: np.ndarray,
    depth: np.ndarray,
    in_serial: np.ndarray,
    out_bytes: int,
    partials_bytes: int,
    exchange_rate: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The planner's reduction figures of each candidate: ``conv_reduce_exchange``, the
    cycles of ``conv_reduce`` (over the outputs the depth leaves) and
    ``conv_reduce_temp_bytes``, which depend on the partials, the depth and the serial split
    alone: each distinct triple once (ResNet-50's 26,000 candidates: 1,300), then spread."""
    (partials, depth, in_serial), rows = distinct_rows(partials_per_tile, depth, in_serial)
    outputs = _cdiv(partials, depth)
    return (
        conv_reduce_exchange(partials, depth, partials_bytes, exchange_rate)[rows],
        conv_reduce(target, outputs, depth, in_serial, out_bytes, partials_bytes)[0][rows],
        conv_reduce_temp_bytes(outputs, depth, partials_bytes)[rows],
    )


def conv_reduce_exchange(
    partials_per_tile: ArrayLike, depth: ArrayLike, result_bytes: int, exchange_rate: float
) -> np.ndarray:
    """Exchange cycles per stage of the partial-sum reduction (n, 3): stage 1 receives the
    tile's partial sums (``reduceFirstStageExchangeCycles``), each later stage the outputs of
    the one before (``partialSumExchangeCycleEstimate``); 0 where no stage runs."""
    partials = np.asarray(partials_per_tile, np.int64).ravel()
    depths = stage_depths(depth)
    out = np.zeros(depths.shape, np.int64)
    size = partials.copy()
    for stage in range(MAX_STAGES):
        has = depths[:, stage] > 0
        out[:, stage] = np.where(
            has, np.ceil(size * result_bytes / exchange_rate).astype(np.int64), 0
        )
        size = np.where(has, _cdiv(size, np.maximum(depths[:, stage], 1)), size)
    return out


def conv_reduce_temp_bytes(
    outputs_per_tile: ArrayLike, depth: ArrayLike, element_bytes: int
) -> np.ndarray:
    """``addReduceCycleEstimate``'s temporary bytes: the largest stage input on a tile."""
    outputs = np.asarray(outputs_per_tile, np.int64).ravel()
    depths = stage_depths(depth)
    size = outputs * np.maximum(np.asarray(depth, np.int64).ravel(), 1)
    best = np.zeros(len(outputs), np.int64)
    for stage in range(MAX_STAGES):
        has = depths[:, stage] > 0
        best = np.where(has, np.maximum(best, size * element_bytes), best)
        size = np.where(has, _cdiv(size, np.maximum(depths[:, stage], 1)), size)
    return np.where(np.asarray(depth).ravel() > 1, best, 0)


# ---- popops: cross-tile reductions of other ops ----------------------------------------------


def strided_reduce_cycles(
    partials: ArrayLike,
    outputs: ArrayLike,
    stride: ArrayLike,
    float_partials: bool,
    float_out: bool,
) -> np.ndarray:
    """``getCyclesEstimateForStridedReduce`` for ADD (not an update): one worker reducing
    ``partials`` rows of ``outputs`` columns, rows ``stride`` elements apart."""
    partials = np.maximum(np.asarray(partials, np.int64), 1)
    outputs = np.asarray(outputs, np.int64)
    acc = 4 if float_partials else 8
    in_vector = DATA_PATH_BITS // (32 if float_partials else 16)
    if float_partials:
        post = 3 + 2  # ADD: inner loop completion 3, store 2 (not update, not log-add)
    else:
        post = 1 + (6 if float_out else 7)
    outer = 3 + post + (3 + 1 * (partials - 1))
    per_loop = np.gcd(min(acc, in_vector), np.maximum(np.asarray(stride, np.int64), 1))
    cycles = 5 + 11 + outer * _cdiv(outputs, per_loop)
    return np.where(outputs > 0, cycles, 0).astype(np.int64)


def _tile_reduce(
    rows: ArrayLike,
    cols: ArrayLike,
    workers: int,
    reductions: ArrayLike,
    float_partials: bool,
    float_out: bool,
) -> np.ndarray:
    """A tile reducing ``rows`` x ``cols`` partials per reduction: the columns split over the
    workers in grains of the partials' vector width (``splitOutputRegionsForWorkers``), one
    strided-reduce vertex each; ``reductions`` vertices run one after the other."""
    grain = 2 if float_partials else 4
    per_worker = _cdiv(_cdiv(np.asarray(cols, np.int64), workers), grain) * grain
    per_worker = np.minimum(per_worker, cols)
    one = strided_reduce_cycles(rows, per_worker, cols, float_partials, float_out)
    return np.where(np.asarray(rows) > 1, one * workers * reductions, 0).astype(np.int64)


#: Stages of a popops reduction the engine lays out: the on-tile stage, up to two intermediate
#: stages and the final stage (each intermediate stage cuts the fan-in at least in half).
POPOPS_STAGES = 4


def popops_reduce(
    target: Target,
    elements: ArrayLike,
    cols: ArrayLike,
    reductions: ArrayLike,
    tiles: ArrayLike,
    in_bytes: ArrayLike,
    compute_tiles: int,
) -> dict[str, np.ndarray]:
    """The stages of a popops reduction of ``elements`` (laid out linearly over ``tiles``
    tiles, rows of ``cols`` output columns) into ``cols`` outputs, ``reductions`` at once
    (batch norm reduces the sum and the sum of squares together: ``reduceMany``). Returns
    per op and stage (n, POPOPS_STAGES): ``compute`` cycles, ``recv`` bytes per tile, ``tiles``
    taking part (0: no stage); stage 0 is the on-tile reduction (no exchange)."""
    workers = int(target.workers_per_tile)
    elems = np.asarray(elements, np.int64)
    cols = np.maximum(np.asarray(cols, np.int64), 1)
    n_reductions = np.asarray(reductions, np.int64)
    tiles_used = np.maximum(np.asarray(tiles, np.int64), 1)
    n_ops = len(elems)
    compute = np.zeros((n_ops, POPOPS_STAGES), np.int64)
    recv = np.zeros((n_ops, POPOPS_STAGES), np.int64)
    used = np.zeros((n_ops, POPOPS_STAGES), np.int64)
    elems_per_tile = _cdiv(elems, tiles_used)
    # stage 0: each tile reduces its own rows of each column (inputToIntermediateNoExchange)
    local = elems_per_tile > cols
    rows0 = np.where(local, _cdiv(elems_per_tile, cols), 1)
    cols_per_tile = np.minimum(elems_per_tile, cols)
    float_in = np.broadcast_to(np.asarray(in_bytes) >= 4, elems.shape)
    stage0 = np.where(
        float_in,
        _tile_reduce(rows0, cols, workers, n_reductions, True, True),
        _tile_reduce(rows0, cols, workers, n_reductions, False, True),
    )
    compute[:, 0] = np.where(local, stage0, 0)
    used[:, 0] = np.where(local, tiles_used, 0)
    depth = np.maximum(_cdiv(tiles_used * cols_per_tile, cols), 1)
    holders = tiles_used.copy()
    active = depth > 1
    grain = 2 * (DATA_PATH_BITS // 32)  # findGrainSizeForOp: ADD, float partials
    for stage in range(1, POPOPS_STAGES - 1):
        total = holders * cols_per_tile
        to_output = (depth < 2 * math.sqrt(compute_tiles)) & (holders > compute_tiles * 3 // 4)
        more = active & ~to_output & (total > cols * MORE_STAGES_FACTOR)
        ideal = np.maximum(total // compute_tiles, 1)
        avg_split = np.maximum(np.sqrt(total / cols).astype(np.int64), 1)
        min_cols = np.maximum(grain, (cols_per_tile // grain) // avg_split * grain)
        pieces = np.clip(cols // min_cols, 1, compute_tiles)
        piece_width = _cdiv(cols, pieces)
        depth_split = np.maximum(depth * piece_width // ideal, 1)
        depth_split = np.where(
            depth * piece_width // depth_split < MIN_PIECE_SIZE,
            np.maximum(depth * piece_width // MIN_PIECE_SIZE, 1),
            depth_split,
        )
        depth_split = np.where(
            depth // depth_split < MIN_PIECE_ROWS,
            np.maximum(depth // MIN_PIECE_ROWS, 1),
            depth_split,
        )
        rows = _cdiv(depth, depth_split)
        per_tile = _cdiv(
            pieces * depth_split, compute_tiles
        )  # pieces a tile takes when there are more than tiles
        compute[:, stage] = np.where(
            more, _tile_reduce(rows, piece_width, workers, n_reductions, True, True) * per_tile, 0
        )
        recv[:, stage] = np.where(more, rows * piece_width * 4 * n_reductions * per_tile, 0)
        used[:, stage] = np.where(more, np.minimum(pieces * depth_split, compute_tiles), 0)
        depth = np.where(more, depth_split, depth)
        cols_per_tile = np.where(more, piece_width, cols_per_tile)
        holders = np.where(more, np.minimum(pieces * depth_split, compute_tiles), holders)
        active = more & (depth > 1)
        if not active.any():
            break
    # final stage: what is left reduced at the outputs, spread in grains of 8 (balanced)
    groups = _cdiv(cols, 8)
    out_tiles = np.minimum(groups, compute_tiles)
    width = np.minimum(_cdiv(groups, out_tiles) * 8, cols)
    fin = depth > 1
    last = POPOPS_STAGES - 1
    compute[:, last] = np.where(
        fin, _tile_reduce(depth, width, workers, n_reductions, True, True), 0
    )
    recv[:, last] = np.where(fin, depth * width * 4 * n_reductions, 0)
    used[:, last] = np.where(fin, out_tiles, 0)
    return {"compute": compute, "recv": recv, "tiles": used}
