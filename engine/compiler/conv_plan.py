"""PopLibs' convolution planner (poplin) as the engine runs it: partition search and cost model.

Matmuls and convolutions are planned as ``lib/poplin/ConvPlan.cpp`` ``createPlan`` /
``lib/poplin/ConvModel.cpp`` ``constructModel`` plan them on one IPU (two levels of hierarchy:
the IPU, split over its tiles, and the tile). Every op is a convolution of ``G`` conv groups,
a field of ``M`` output positions (batch x rows x row width; a matmul's rows), ``C`` input
channels, ``k`` kernel positions (square, ``kh`` rows) and ``N`` output channels.
The code keeps these letters for the sizes of :class:`ConvShapes` and PopLibs' own names for the
partition's splits and the vertex's channel groupings below (``pg`` ... ``po``, ``si`` / ``so``,
``cg`` / ``ci`` / ``co``); every other name says what it holds.

Partition (``PartitionVariables``): conv groups ``pg`` (all of them first, as before), field
``pf``, kernel rows ``pkh`` (the innermost kernel dimension is never split), input channels
``pi`` and output channels ``po`` in grains of the AMP vertex's ``inChansPerGroup`` and
``partialChansPerGroup`` (``getInChanGrainSizes`` / ``getOutChanGrainSizes``), with
``pg x pf x pkh x pi x po <= tiles`` (``getUsedTiles``). A plan that does not fit the available
memory proportion splits output or input channels serially (one kind at a time, as
``constructModel``'s ``m.equal(min(serial splits), 1)``). The search is numpy over a grid of
candidate partitions per op (powers of two clipped to each dimension's grains, all kernel-row
splits up to 4 and the kernel's height, and for the field every power of two plus "all the
tiles left"), not popsolver's branch and bound: the same objective over a subset of the space.

Cost of a candidate (``addEstimates``; tile-level sizes are the largest tile's):

- exchange (``addExchangeCycleEstimates``, ``ExchangeEstimator.hpp``): input elements of the
  tile's input range (``getMaxInputRangeSize``: (the output rows - 1) x stride plus the kernel
  rows on the tile, clipped to the whole input; a forward convolution's stride, 1 for the
  gradient passes, whose rows carry the forward's field) less the share already on the
  tile (1 / ``po``), at twice the exchange rate when ``po`` is even (supertile neighbours
  receive the same inputs); weights less 1 / ``pf``; the tile's partial sums (first reduction
  stage, always counted by the planner) and the later stages of the multi-stage reduction;
- partial sums: the AMP vertex estimate (``addPartialCalcCycleEstimate``,
  ``engine.compiler.vertex_costs.amp_partials_cycles``);
- reduction: ``estimateConvReduceCycles`` (``engine.compiler.reduction.conv_reduce``) over
  the reduction depth ``pkh x pi``, including the cast of float partials to a half output;
- rearrangements (``addTransformCycleEstimate``) of inputs, weights and outputs, by pass: a
  convolution's weight update rearranges all three, channel counts that are not whole grains
  pad (rearrange) inputs / weights / outputs, a forward or input-gradient convolution whose
  ``partialChansPerGroup`` is not ``weightsPerConvUnit`` regroups its output, a forward one its
  weights; copies at ``min(memcpy bytes per cycle, element bytes)`` x 4/5 or 3/5
  (``getScaleFactorForTransform``), exchanges at the exchange rate. A matmul (a fully
  connected pass) is planned in both orientations (``getSwapOperandCandidates``;
  ``swapOperands`` exchanges its rows and output columns, ``with_swapped_operands``): unswapped
  it rearranges its input, weights and output; swapped, only a weight update rearranges (its
  input and output);
- serial splits: the loop body's cycles x splits, plus dynamic slices of the inputs / weights
  (``getDynamicSlice1DEstimate``), the dynamic update of outputs (output channels) or the
  in-place add of partials and a final cast (input channels, ``getBinaryOp1DInPlaceEstimate``,
  ``estimateCastCycles``); a matmul's weights per tile exchanged and copied once before the
  loop (``addRearrangeBeforeSliceEstimate``); with output-channel splits, the inputs may be
  exchanged (and rearranged) once before the loop and kept through it
  (``broadcastInputBeforeLoop``).

Temporary memory (``addConvTempMemoryEstimate`` etc.): inputs + weights + partials on the
tile, the largest reduction stage, twice the largest rearranged tensor, the in-place partials,
and a serially split matmul's weights rearranged before the loop (added: they stay live through
it); plans above ``availableMemoryProportion x`` tile memory are infeasible (``runPlanner``);
when none fits, the bound doubles until one does (``createPlan``'s ``minimizeMemory``; the plan
may go out of memory).

Transforms (``ConvTransform``, in ``engine.compiler.conv_params``): matmuls' swapped operands
(``with_swapped_operands``), combine conv groups (``with_combined_groups``) and, for forward
convolutions with a strided 1 x 1 kernel or fewer input channels per group than one grain, the
expansion of both field dimensions (``with_expanded_dims``), each a further row of the op.

Not ported (documented in docs/engine.md): the vertical MAC and outer-product vertices, the
other expand-dims subsets (one dimension; convolutions whose expansion removes no waste), the out-channel flatten transform, taller AMP filters, multi-IPU levels, the gradient passes' strides and every dilation
(the engine's ops carry neither).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.compiler import reduction, vertex_costs
from engine.compiler.conv_candidates import (
    SLIC_WINDOW,
    Candidates,
    _cdiv,
    _concat,
    candidates,
)
from engine.compiler.conv_params import (
    ConvShapes,
    conv_shapes,
    with_combined_groups,
    with_expanded_dims,
    with_swapped_operands,
)

if TYPE_CHECKING:  # pragma: no cover
    from engine.targets import Target

#: ``ExchangeEstimator``: inputs shared by supertile neighbours go at twice the rate when the
#: output-channel split is a multiple of the tiles sharing an exchange bus (2).
TILES_PER_SHARED_EXCHANGE_BUS = 2
#: ``target.getMemcpyBytesPerCycle()``: one 64-bit load / store per cycle (PopLibs' IPU model
#: sets ``memcpyBytesPerCycle = dataPathWidth / 8``).
MEMCPY_BYTES_PER_CYCLE = vertex_costs.DATA_PATH_BITS // 8
#: ``getBinaryOp1DInPlaceEstimate``: worker overhead 58, ADD 1 + 2 cycles per vector.
ADD_IN_PLACE_WORKER_CYCLES = 58
ADD_IN_PLACE_CYCLES_PER_VECTOR = 3


@dataclass
class TileSizes:
    """The largest tile's share of each candidate (``ConvSizeVariables`` at the tile level)."""

    field: np.ndarray  # output positions
    kernel_positions: np.ndarray  # the kernel rows on the tile x the kernel's width
    kernel_width: np.ndarray
    in_groups: np.ndarray  # input-channel groups (grains of the vertex's inChansPerGroup)
    out_groups: np.ndarray  # output-channel groups (of partialChansPerGroup)
    conv_groups: np.ndarray
    conv_group_grains: np.ndarray  # groups of the vertex's convGroupsPerGroup
    inputs: np.ndarray  # input elements (the input range of the tile's outputs)
    weights: np.ndarray  # weight elements
    partials: np.ndarray  # partial sums the tile computes (before the reduction)
    kernel_zeros: np.ndarray  # SLIC's kernel padding to whole windows
    input_zeros: np.ndarray  # SLIC's input padding made real zeros
    depth: np.ndarray  # reduction depth: kernel-row x input-channel splits
    tiles: np.ndarray  # tiles the partition uses

    def take(self, idx: np.ndarray) -> TileSizes:
        return TileSizes(*(getattr(self, name)[idx] for name in TileSizes.__dataclass_fields__))

    def concat(self, other: TileSizes) -> TileSizes:
        return TileSizes(
            *(
                np.concatenate([getattr(self, name), getattr(other, name)])
                for name in TileSizes.__dataclass_fields__
            )
        )


def _tile_sizes(shapes: ConvShapes, cands: Candidates) -> TileSizes:
    """Largest tile's sizes of each candidate (``ConvSizeVariables`` at the tile level)."""
    op = cands.op
    in_grains, out_grains = _cdiv(shapes.C[op], cands.ci), _cdiv(shapes.N[op], cands.co)
    field = _cdiv(shapes.M[op], cands.pf)
    kernel_rows = _cdiv(shapes.kh[op], cands.pkh)
    in_groups = _cdiv(in_grains, cands.pi * cands.si)
    out_groups = _cdiv(out_grains, cands.po * cands.so)
    conv_group_grains = _cdiv(
        _cdiv(shapes.G[op], cands.cg), cands.pg
    )  # conv-group grains on the tile
    conv_groups = conv_group_grains * cands.cg
    row_width = shapes.width[op]
    is_conv = row_width > 0
    out_height = np.maximum(row_width, 1)  # square maps
    in_height, stride = np.maximum(shapes.in_width[op], 1), shapes.stride[op]
    image = out_height * out_height
    whole = field >= image
    rows = np.where(whole, out_height, _cdiv(field, np.maximum(row_width, 1)))
    cols = np.where(whole, out_height, np.minimum(field, np.maximum(row_width, 1)))
    # getMaxInputRangeSize: (outputs - 1) x stride + kernel, clipped to the whole input
    halo_rows = np.minimum((rows - 1) * stride + kernel_rows, in_height)
    halo_cols = np.minimum((cols - 1) * stride + shapes.kw[op], in_height)
    batch = np.where(whole, _cdiv(field, image), 1)
    in_field = np.where(is_conv, batch * halo_rows * halo_cols, field)
    # SLIC's tile-level transform (addTileLevelTransformEstimates / applyPadding): the kernel
    # width padded to whole 1 x 4 windows and the input's padding made real zeros (the
    # padding that keeps the output's size: (out - 1) x stride + kernel - in per dimension)
    slic = cands.chains > 0
    kernel_w = shapes.kw[op]
    kw_pad = np.where(slic, _cdiv(kernel_w, SLIC_WINDOW) * SLIC_WINDOW - kernel_w, 0)
    pad_h = np.maximum((out_height - 1) * stride + shapes.kh[op] - in_height, 0)
    pad_w = np.maximum((out_height - 1) * stride + kernel_w - in_height, 0) + kw_pad
    chans_in, chans_out = in_groups * cands.ci, out_groups * cands.co
    kernel_zeros = conv_groups * kernel_rows * kw_pad * chans_in * chans_out
    input_zeros = conv_groups * batch * ((rows + pad_h) * (cols + pad_w) - rows * cols) * chans_in
    input_zeros = np.where(slic & is_conv, input_zeros, 0)
    return TileSizes(
        field=field,
        kernel_positions=kernel_rows * shapes.kw[op],
        kernel_width=shapes.kw[op],
        in_groups=in_groups,
        out_groups=out_groups,
        conv_groups=conv_groups,
        conv_group_grains=conv_group_grains,
        inputs=np.maximum(
            _cdiv(in_field * in_groups * cands.ci * conv_groups, shapes.dup[op]),
            in_field * conv_groups,
        ),
        weights=kernel_rows
        * shapes.kw[op]
        * in_groups
        * cands.ci
        * out_groups
        * cands.co
        * conv_groups,
        partials=field * out_groups * cands.co * conv_groups,
        kernel_zeros=kernel_zeros,
        input_zeros=input_zeros,
        depth=cands.pkh * cands.pi,
        tiles=cands.pg * cands.pf * cands.pkh * cands.pi * cands.po,
    )


@dataclass
class PlanCosts:
    """The planner's estimate of each candidate (cycles of the largest tile) by term, and its
    temporary bytes per tile: the ``SinglePassEstimates`` the objective sums."""

    input_exchange: np.ndarray  # per loop iteration (0 when broadcast before the loop)
    weight_exchange: np.ndarray
    reduce_exchange: np.ndarray  # (n, 3): first stage (always counted) and later stages
    partial_calc: np.ndarray
    reduce: np.ndarray  # (n, 3) compute cycles per stage (stage 1 = cast when depth is 1)
    transform_copy: np.ndarray  # inputs and weights rearranged before the convolution
    transform_exchange: np.ndarray
    output_copy: np.ndarray  # outputs rearranged / regrouped after it
    output_exchange: np.ndarray
    serial_extra: np.ndarray  # dynamic slices / updates and in-place adds, per iteration
    output_cast: np.ndarray  # input-channel serial splits: the final cast, once
    before_slice_copy: np.ndarray  # a serially split matmul's weights rearranged, once
    before_slice_exchange: np.ndarray  # and exchanged, once
    broadcast_copy: np.ndarray  # broadcastInputBeforeLoop: the inputs rearranged, once
    broadcast_exchange: np.ndarray  # and exchanged (with their rearrangement's), once
    tile_transform: np.ndarray  # SLIC's padding of kernel and input on the tile
    total: np.ndarray  # the planner's totalCycles
    temp: np.ndarray  # totalTempBytes
    sizes: TileSizes


def _transform_flags(shapes: ConvShapes, cands: Candidates) -> tuple[np.ndarray, ...]:
    """``addTransformCycleEstimate``'s rearrange / regroup decisions per candidate (its op
    and its vertex's channel groupings)."""
    op = cands.op
    conv, role = shapes.conv[op], shapes.role[op]
    weight_update = conv & (role == "gw")
    fwd = conv & ((role == "fwd") | (role == "recomp"))
    pad_in = conv & (shapes.C[op] % cands.ci != 0)
    pad_out = conv & (shapes.N[op] % cands.co != 0)
    # a training matmul is a fully connected pass (FC_TRAINING_FWD / BWD / WU), planned
    # separately (PopLibs keeps the cheaper of the joint and the separate plans, createPlan:
    # separatePlanHasLowerCost): unswapped, its input, weights and output are rearranged
    # (swapOperands != isMatmulOrFullyConnectedLayer, != outputShouldBeSwapped); swapped,
    # FC_TRAINING_WU rearranges its input (the output gradient) and its output. The backward
    # pass's rearranged input (FC_TRAINING_BWD, not joint) is the transposed weights, charged
    # as the input gradient's PreArrange outside the planner (engine.compiler.plan)
    matmul = ~conv
    unswapped_mm = matmul & ~shapes.swap[op]
    matmul_wu = matmul & (role == "gw")
    combined = shapes.combine[op] > 1  # combineConvGroups rearranges all three
    expanded = shapes.expand[op]  # expandDims rearranges the inputs and the weights
    rearrange_in = weight_update | pad_in | matmul_wu | unswapped_mm | combined | expanded
    rearrange_w = weight_update | pad_in | pad_out | unswapped_mm | combined | expanded
    rearrange_out = weight_update | pad_out | matmul_wu | unswapped_mm | combined
    regroup_out = conv & ~weight_update & (cands.co != shapes.wpu)
    regroup_w = fwd & (cands.co % shapes.wpu != 0)
    return (
        rearrange_in,
        rearrange_w,
        rearrange_out,
        regroup_out & ~rearrange_out,
        regroup_w & ~rearrange_w,
    )


def _input_positions(shapes: ConvShapes, op: np.ndarray) -> np.ndarray:
    """Input positions of the whole convolution (batch x input rows x input width): the output
    field scaled by the input's size over the output's (square maps)."""
    width = shapes.width[op]
    return np.where(
        width > 0, shapes.M[op] * shapes.in_width[op] ** 2 // np.maximum(width**2, 1), shapes.M[op]
    )


@dataclass
class Rearrangements:
    """Cycles and temporary bytes per tile of a candidate's rearrangements (``_transform_costs``)."""

    copy: np.ndarray  # inputs and weights, copied on the tile
    exchange: np.ndarray  # inputs and weights, exchanged
    output_copy: np.ndarray
    output_exchange: np.ndarray
    temp: np.ndarray  # twice the largest rearranged tensor
    input_copy: np.ndarray  # the inputs' share of ``copy``
    input_exchange: np.ndarray  # the inputs' share of ``exchange``
    input_temp: np.ndarray  # the rearranged inputs' bytes (once)
    other_temp: np.ndarray  # ``temp`` without the inputs


def _transform_costs(shapes: ConvShapes, cands: Candidates, exchange_rate: float) -> Rearrangements:
    """Copy / exchange cycles and temporary bytes of the rearrangements (whole tensors of the
    IPU level spread over the tiles used)."""
    # each distinct (op, groupings, tiles) once, spread back (ResNet-50: 1,700 of 26,000)
    tiles = cands.pg * cands.pf * cands.pkh * cands.pi * cands.po
    first, rows = reduction.distinct_index(cands.op, cands.ci, cands.co, cands.cg, tiles)
    if len(first) < len(rows):
        r = _transform_costs(shapes, _take(cands, first), exchange_rate)
        return Rearrangements(*(getattr(r, n)[rows] for n in Rearrangements.__dataclass_fields__))
    op = cands.op
    rearrange_in, rearrange_w, rearrange_out, regroup_out, regroup_w = _transform_flags(
        shapes, cands
    )
    in_chans_padded = _cdiv(shapes.C[op], cands.ci) * cands.ci
    out_chans_padded = _cdiv(shapes.N[op], cands.co) * cands.co
    groups_padded = _cdiv(shapes.G[op], cands.cg) * cands.cg
    elem_bytes = shapes.eb
    reorder = min(MEMCPY_BYTES_PER_CYCLE, elem_bytes)
    gran = 2 if elem_bytes >= 4 else 4
    # the row's own sizes: a swapped matmul's (with_swapped_operands) field is the matmul's
    # output columns and its output channels the rows; a weight update's input so is the
    # output gradient
    out_ch = shapes.N[op]
    io_factor = np.where((shapes.C[op] * out_ch) % gran == 0, 4, 3)  # 5 / factor
    out_factor = np.where(out_ch % gran == 0, 4, 3)
    # the whole input (a weight gradient's activations once)
    in_bytes = _cdiv(
        _cdiv(_input_positions(shapes, op) * in_chans_padded * groups_padded, shapes.dup[op])
        * elem_bytes,
        tiles,
    )
    weight_bytes = _cdiv(
        shapes.kernel[op] * in_chans_padded * out_chans_padded * groups_padded * elem_bytes, tiles
    )
    out_bytes = _cdiv(shapes.M[op] * out_chans_padded * groups_padded, tiles) * elem_bytes
    copy = np.where(rearrange_in, _cdiv(in_bytes * 5, reorder * io_factor), 0)
    exchange = np.where(rearrange_in, _cdiv(in_bytes, exchange_rate), 0)
    input_copy, input_exchange = copy, exchange
    copy = copy + np.where(rearrange_w, _cdiv(weight_bytes * 5, reorder * io_factor), 0)
    exchange = exchange + np.where(rearrange_w, _cdiv(weight_bytes, exchange_rate), 0)
    regroup_w_rate = np.minimum(MEMCPY_BYTES_PER_CYCLE, cands.co * elem_bytes)
    regroup_w_bytes = (
        _cdiv(shapes.kernel[op] * in_chans_padded * out_chans_padded * groups_padded, tiles)
        * elem_bytes
    )
    copy = copy + np.where(regroup_w, _cdiv(regroup_w_bytes * 5, out_factor * regroup_w_rate), 0)
    out_copy = np.where(rearrange_out, _cdiv(out_bytes * 5, reorder * out_factor), 0)
    out_exch = np.where(rearrange_out, _cdiv(out_bytes, exchange_rate), 0).astype(np.int64)
    regroup_out_rate = np.minimum(MEMCPY_BYTES_PER_CYCLE, cands.co * elem_bytes)
    out_copy = out_copy + np.where(
        regroup_out, _cdiv(out_bytes * 5, regroup_out_rate * out_factor), 0
    )
    input_temp = np.where(rearrange_in, in_bytes, 0)
    other = np.maximum(
        np.where(rearrange_w | regroup_w, weight_bytes, 0),
        np.where(rearrange_out | regroup_out, out_bytes, 0),
    )
    return Rearrangements(
        copy=copy,
        exchange=exchange,
        output_copy=out_copy,
        output_exchange=out_exch,
        temp=2 * np.maximum(input_temp, other),
        input_copy=input_copy,
        input_exchange=input_exchange,
        input_temp=input_temp,
        other_temp=2 * other,
    )


def _dynamic_slice_cycles(
    target: Target, elements: np.ndarray, splits: np.ndarray, elem_bytes: int
) -> np.ndarray:
    """``getDynamicSlice1DEstimate`` of ``ceil(elements / splits)``; 0 without serial splits."""
    workers = int(target.workers_per_tile)
    size = _cdiv(elements, np.maximum(splits, 1))
    per_worker = _cdiv(size, workers)
    vector_width = (
        4 if elem_bytes == 1 else vertex_costs.DATA_PATH_BITS // (16 if elem_bytes == 2 else 32)
    )
    worker = (
        (76 + 72 + 2 * (per_worker // vector_width))
        if elem_bytes == 1
        else (39 + 24 + 2 * (per_worker // vector_width))
    )
    cycles = target.elementwise_supervisor_cycles + 14 + worker * workers
    return np.where(np.asarray(splits) > 1, cycles, 0).astype(np.int64)


def _partial_calc(
    target: Target, shapes: ConvShapes, cands: Candidates, sizes: TileSizes, field: np.ndarray
) -> np.ndarray:
    """``addPartialCalcCycleEstimate``: the candidate's vertex (AMP, or SLIC where
    ``cands.chains`` > 0) over ``field`` output positions of the tile's share (``sizes``: the tile
    sizes of the candidates ``cands``)."""
    op = cands.op
    width = shapes.width[op]
    field = np.broadcast_to(np.asarray(field, np.int64), op.shape)
    row_width = np.where(width > 0, np.minimum(width, field), field)
    out = _amp_calc(target, shapes, op, sizes, field, row_width)
    hmac = cands.hmac
    if hmac.any():
        for in_chans, out_chans in {
            (int(vertex_ci), int(vertex_co))
            for vertex_ci, vertex_co in zip(cands.ci[hmac], cands.co[hmac], strict=True)
        }:
            sel = hmac & (cands.ci == in_chans) & (cands.co == out_chans)
            out[sel] = vertex_costs.hmac_partials_cycles(
                target,
                field=field[sel],
                in_chans=in_chans,
                out_chans=out_chans,
                in_groups=sizes.in_groups[sel],
                out_groups=sizes.out_groups[sel],
                conv_groups=sizes.conv_groups[sel],
                acts_bytes=shapes.eb,
                partials_bytes=shapes.pb,
            )
    slic = cands.chains > 0
    if slic.any():
        for cg, chans, chains in {
            (int(vertex_ci), int(vertex_co), int(vertex_chains))
            for vertex_ci, vertex_co, vertex_chains in zip(
                cands.cg[slic], cands.ci[slic], cands.chains[slic], strict=True
            )
        }:
            sel = slic & (cands.cg == cg) & (cands.ci == chans) & (cands.chains == chains)
            out[sel] = vertex_costs.slic_partials_cycles(
                target,
                field=field[sel],
                row_width=row_width[sel],
                kernel_rows=_cdiv(sizes.kernel_positions[sel], sizes.kernel_width[sel]),
                kernel_width=sizes.kernel_width[sel],
                conv_group_groups=sizes.conv_group_grains[sel],
                conv_groups_per_group=cg,
                chans_per_group=chans,
                chains=chains,
                stride=shapes.stride[op[sel]],
                partials_bytes=shapes.pb,
            )
    return out


def _amp_calc(
    target: Target,
    shapes: ConvShapes,
    op: np.ndarray,
    sizes: TileSizes,
    field: np.ndarray,
    row_width: np.ndarray,
) -> np.ndarray:
    """The AMP vertex estimate of every candidate (``vertex_costs.amp_partials_cycles``)."""
    return vertex_costs.amp_partials_cycles(
        target,
        field=field,
        row_width=row_width,
        kernel_positions=sizes.kernel_positions,
        kernel_width=sizes.kernel_width,
        in_groups=sizes.in_groups,
        out_groups=sizes.out_groups,
        conv_groups=sizes.conv_groups,
        acts_bytes=shapes.eb,
        partials_bytes=shapes.pb,
        one_by_one=shapes.kernel[op] == 1,
    )


def estimate(shapes: ConvShapes, cands: Candidates, target: Target) -> PlanCosts:
    """The planner's estimate of every candidate (see the module docstring)."""
    op = cands.op
    sizes = _tile_sizes(shapes, cands)
    exchange_rate = float(target.exchange_bytes_per_cycle)
    elem_bytes, partials_bytes = shapes.eb, shapes.pb
    workers = int(target.workers_per_tile)
    in_rate = exchange_rate * np.where(cands.po % TILES_PER_SHARED_EXCHANGE_BUS == 0, 2, 1)
    inputs_moved = sizes.inputs - sizes.inputs // cands.po
    weights_moved = sizes.weights - sizes.weights // cands.pf
    input_exchange = np.ceil(inputs_moved * elem_bytes / in_rate).astype(np.int64)
    weight_exchange = np.ceil(weights_moved * elem_bytes / exchange_rate).astype(np.int64)
    depth = sizes.depth
    first = np.ceil(sizes.partials * partials_bytes / exchange_rate).astype(np.int64)
    reduce_exchange, reduce_cycles, reduce_temp = reduction.conv_reduce_estimates(
        target, sizes.partials, depth, cands.si, elem_bytes, partials_bytes, exchange_rate
    )
    reduce_exchange[:, 0] = first  # the planner counts the first stage whatever the depth
    partial = _partial_calc(target, shapes, cands, sizes, sizes.field)
    outputs = _cdiv(sizes.partials, depth)
    rearranged = _transform_costs(shapes, cands, exchange_rate)
    # SLIC's padding (applyPadding): the zeros' exchange cycles, kernel at the exchange
    # rate, inputs at the inputs' rate
    tile_transform = np.ceil(sizes.kernel_zeros * elem_bytes / exchange_rate).astype(np.int64)
    tile_transform = tile_transform + np.ceil(sizes.input_zeros * elem_bytes / in_rate).astype(
        np.int64
    )
    serial = cands.si * cands.so
    # serial splits: slices of inputs (input channels) and weights, update / add of outputs
    in_per_tile = _cdiv(_input_positions(shapes, op) * shapes.C[op] * shapes.G[op], sizes.tiles)
    w_per_tile = _cdiv(shapes.kernel[op] * shapes.C[op] * shapes.N[op] * shapes.G[op], sizes.tiles)
    extra = _dynamic_slice_cycles(target, in_per_tile, cands.si, elem_bytes)
    extra = extra + _dynamic_slice_cycles(target, w_per_tile, serial, elem_bytes)
    extra = extra + _dynamic_slice_cycles(target, outputs, cands.so, partials_bytes)
    partials_vector = vertex_costs.DATA_PATH_BITS // (8 * partials_bytes)
    add = target.elementwise_supervisor_cycles + workers * (
        ADD_IN_PLACE_WORKER_CYCLES
        + _cdiv(_cdiv(outputs, workers), partials_vector) * ADD_IN_PLACE_CYCLES_PER_VECTOR
    )
    extra = extra + np.where(cands.si > 1, add, 0)
    out_vector = vertex_costs.DATA_PATH_BITS // (8 * elem_bytes)
    out_cast = np.where(
        cands.si > 1,
        reduction.cast_partials_cycles(outputs, partials_vector, out_vector, workers),
        0,
    ).astype(np.int64)
    # broadcastInputBeforeLoop (addEstimates; only output-channel serial splits): the inputs'
    # exchange and rearrangement run once before the loop, and their bytes stay live through it
    once = cands.bibl
    broadcast_exchange = np.where(once, input_exchange + rearranged.input_exchange, 0)
    broadcast_copy = np.where(once, rearranged.input_copy, 0)
    input_exchange = np.where(once, 0, input_exchange)
    transform_copy = rearranged.copy - broadcast_copy
    transform_exchange = rearranged.exchange - np.where(once, rearranged.input_exchange, 0)
    per_iter = (
        extra
        + transform_copy
        + transform_exchange
        + rearranged.output_copy
        + rearranged.output_exchange
        + input_exchange
        + weight_exchange
        + reduce_exchange.sum(axis=1)
        + partial
        + reduce_cycles.sum(axis=1)
        + tile_transform
    )
    # a serially split fully connected pass (every matmul; not joint) rearranges its weights
    # once before the loop, so that each iteration's dynamic slice reads them well laid out
    # (addRearrangeBeforeSliceEstimate): an all-to-all exchange of the weights per tile
    # (ExchangeEstimator::getCycles) and one cycle per element; the rearranged copy stays
    # live through the loop, so its bytes add to the temporaries rather than taking their max
    before = ~shapes.conv[op] & (serial > 1)
    before_copy = np.where(before, w_per_tile, 0).astype(np.int64)
    before_exchange = np.where(before, np.ceil(w_per_tile * elem_bytes / exchange_rate), 0).astype(
        np.int64
    )
    before_bytes = np.where(before, w_per_tile * elem_bytes, 0).astype(np.int64)
    total = (
        per_iter * serial + out_cast + before_copy + before_exchange + broadcast_exchange
    ) + broadcast_copy
    tile_partials_bytes = sizes.partials * partials_bytes
    # the SLIC vertex's extra buffer (addConvTempMemoryEstimate): the partials of one conv
    # group grain + 200 bytes
    tile_partials_bytes = tile_partials_bytes + np.where(
        cands.chains > 0, _cdiv(tile_partials_bytes, sizes.conv_group_grains) + 200, 0
    )
    input_bytes = sizes.inputs * elem_bytes
    conv_temp = np.where(once, 0, input_bytes) + sizes.weights * elem_bytes + tile_partials_bytes
    conv_temp = conv_temp + (sizes.kernel_zeros + sizes.input_zeros) * elem_bytes
    in_place = np.where(cands.si > 1, outputs * partials_bytes, 0)
    transform_temp = np.where(once, rearranged.other_temp, rearranged.temp)
    broadcast_bytes = np.where(once, rearranged.input_temp + input_bytes, 0)
    temp = (
        broadcast_bytes
        + before_bytes
        + np.maximum.reduce([transform_temp, conv_temp, reduce_temp, before_bytes])
        + in_place
    )
    return PlanCosts(
        input_exchange=input_exchange,
        weight_exchange=weight_exchange,
        reduce_exchange=reduce_exchange,
        partial_calc=partial,
        reduce=reduce_cycles,
        transform_copy=transform_copy,
        transform_exchange=transform_exchange.astype(np.int64),
        output_copy=rearranged.output_copy,
        output_exchange=rearranged.output_exchange,
        serial_extra=extra,
        output_cast=out_cast,
        before_slice_copy=before_copy,
        before_slice_exchange=before_exchange,
        broadcast_copy=broadcast_copy.astype(np.int64),
        broadcast_exchange=broadcast_exchange.astype(np.int64),
        tile_transform=tile_transform,
        total=total.astype(np.int64),
        temp=temp.astype(np.int64),
        sizes=sizes,
    )


#: Serial splits tried for a partition whose temporaries do not fit (powers of two). PopLibs
#: bounds a serial split only by the channel grains (``constructModel``: serial x parallel
#: split <= grains); the engine goes up to 1,024 (a 4,096-column matmul at proportion 0.1
#: needs 128 once its weights rearranged before the loop stay live through it).
SERIAL_SPLITS = tuple(2**e for e in range(1, 11))


def _take(cands: Candidates, idx: np.ndarray) -> Candidates:
    return Candidates(*(getattr(cands, name)[idx] for name in Candidates.__dataclass_fields__))


def _with_serial(
    shapes: ConvShapes, cands: Candidates, costs: PlanCosts, over: np.ndarray, limit: float
) -> Candidates:
    """The candidates that do not fit, again with output- or input-channel serial splits (one
    kind at a time; output-channel ones with and without their inputs broadcast before the
    loop) of the powers of two nearest the split that brings the tile's operands and
    partials under ``limit`` less what stays live through the loop (and twice that), within the channel grains the parallel split
    leaves and at most ``SERIAL_SPLITS[-1]``."""
    idx = np.flatnonzero(over)
    sizes = costs.sizes
    weight_bytes, in_bytes, out_bytes = (
        sizes.weights[idx] * shapes.eb,
        sizes.inputs[idx] * shapes.eb,
        sizes.partials[idx] * shapes.pb,
    )
    # a matmul's weights rearranged before the loop stay live through it (estimate): twice
    # their bytes per tile are not available to one iteration
    op_idx = cands.op[idx]
    kept = _cdiv(
        shapes.kernel[op_idx] * shapes.C[op_idx] * shapes.N[op_idx] * shapes.G[op_idx],
        sizes.tiles[idx],
    )
    room = limit - np.where(shapes.conv[op_idx], 0, 2 * kept * shapes.eb)
    need_o = _cdiv(weight_bytes + out_bytes, np.maximum(room - in_bytes, 1))
    need_i = _cdiv(weight_bytes + in_bytes, np.maximum(room - 2 * out_bytes, 1))
    pow2 = 2 ** np.ceil(np.log2(np.maximum(np.stack([need_o, need_i]), 1))).astype(np.int64)
    splits = np.concatenate([pow2, 2 * pow2]).T.ravel()  # per candidate: out, in, 2 x out, 2 x in
    out_kind = np.tile(np.array([True, False, True, False]), len(idx))
    base = _take(cands, np.repeat(idx, 4))
    op = base.op
    left_o = _cdiv(_cdiv(shapes.N[op], base.co), base.po)
    left_i = _cdiv(_cdiv(shapes.C[op], base.ci), base.pi)
    base.so = np.where(out_kind, np.minimum(splits, left_o), 1)
    base.si = np.where(out_kind, 1, np.minimum(splits, left_i))
    fine = np.where(out_kind, splits <= 2 * left_o, splits <= 2 * left_i) & (base.so * base.si > 1)
    fine &= splits <= SERIAL_SPLITS[-1]
    kept_rows = _take(base, np.flatnonzero(fine))
    # output-channel splits also with their inputs broadcast before the loop (PopLibs' planner
    # chooses broadcastInputBeforeLoop where no input-channel split is serial)
    outer = _take(kept_rows, np.flatnonzero(kept_rows.so > 1))
    outer.bibl = np.ones(len(outer.op), bool)
    return _concat(kept_rows, outer)


def _with_serial_at(
    shapes: ConvShapes,
    target: Target,
    cands: Candidates,
    costs: PlanCosts,
    over: np.ndarray,
    limit: float,
) -> tuple[Candidates, PlanCosts]:
    """``cands`` and ``costs`` with the serial-split variants (``_with_serial``) of the
    candidates ``over`` for the bound ``limit``."""
    extra = _with_serial(shapes, cands, costs, over, limit)
    if not len(extra.op):
        return cands, costs
    return _concat(cands, extra), _concat_costs(costs, estimate(shapes, extra, target))


def search(
    shapes: ConvShapes, target: Target, compute_tiles: int, limit: float
) -> tuple[Candidates, PlanCosts, np.ndarray]:
    """The best plan of every op, as ``ConvPlan.cpp`` ``createPlan`` looks for it: the fastest
    candidate whose temporaries fit ``limit`` bytes per tile (ties: fewer tiles); where none
    fits, ``minimizeMemory``: the bound doubled until a candidate fits (the last bound tried
    the first at or above twice the tile's memory), the fastest within it; else the fastest of
    all (a proportion of 0: the least temporary memory, ``minimizeTileTempMemory``). Returns the chosen candidates, their costs and which ops found no plan within
    ``limit``."""
    cands = candidates(shapes, compute_tiles)
    costs = estimate(shapes, cands, target)
    # serial splits only cost more than the same partition without them: try them on the
    # partitions that do not fit yet would beat the best one that does
    n_ops = int(shapes.orig.max()) + 1 if len(shapes.orig) else 0
    best_fit = np.full(n_ops, np.iinfo(np.int64).max)
    fits = costs.temp <= limit
    np.minimum.at(best_fit, shapes.orig[cands.op[fits]], costs.total[fits])
    cands, costs = _with_serial_at(
        shapes,
        target,
        cands,
        costs,
        ~fits & (costs.total < best_fit[shapes.orig[cands.op]]),
        limit,
    )
    fits = costs.temp <= limit
    op = shapes.orig[cands.op]  # the op each candidate plans (transformed variants plan their op)
    any_fit = np.zeros(n_ops, bool)
    any_fit[op[fits]] = True
    # the bound of each op: ``limit`` where a candidate fits it, else the first doubling that
    # one fits (its serial splits sized for that bound), else none (the int64 maximum)
    bound = np.where(any_fit, float(limit), np.inf)
    step, ceiling = float(limit), 2.0 * float(target.sram_per_tile)
    while (~np.isfinite(bound)).any() and step < ceiling and limit > 0:
        step *= 2
        open_op = ~np.isfinite(bound)
        cands, costs = _with_serial_at(
            shapes,
            target,
            cands,
            costs,
            open_op[shapes.orig[cands.op]] & (costs.temp > step),
            step,
        )
        op = shapes.orig[cands.op]
        found = np.zeros(n_ops, bool)
        found[op[costs.temp <= step]] = True
        bound = np.where(open_op & found, step, bound)
    within = costs.temp <= bound[op]
    score = np.where(within | ~np.isfinite(bound[op]), costs.total, np.iinfo(np.int64).max // 4)
    if limit <= 0:  # runPlanner: a proportion of 0 plans for the least temporary memory
        score = costs.temp
    tiles = cands.pg * cands.pf * cands.pkh * cands.pi * cands.po
    order = np.lexsort((tiles, score, op))
    first = np.ones(len(order), bool)
    first[1:] = op[order][1:] != op[order][:-1]
    best = order[first]  # one per op, in op order
    return _take(cands, best), _take_costs(costs, best), ~any_fit


#: The per-candidate arrays of PlanCosts (all its fields but the tile sizes).
_COST_TERMS = tuple(name for name in PlanCosts.__dataclass_fields__ if name != "sizes")


def _concat_costs(first: PlanCosts, second: PlanCosts) -> PlanCosts:
    terms = {
        name: np.concatenate([getattr(first, name), getattr(second, name)]) for name in _COST_TERMS
    }
    return PlanCosts(**terms, sizes=first.sizes.concat(second.sizes))


def _take_costs(costs: PlanCosts, idx: np.ndarray) -> PlanCosts:
    terms = {name: getattr(costs, name)[idx] for name in _COST_TERMS}
    return PlanCosts(**terms, sizes=costs.sizes.take(idx))


def plan(
    amp: dict[str, np.ndarray],
    target: Target,
    compute_tiles: int,
    limit: float,
    partials_bytes: int,
) -> dict[str, np.ndarray]:
    """Plan the AMP ops ``amp`` (lowered columns) and give the cycles of their programs on the
    largest tile share (``*_lo``: the smaller share, where it differs), keyed as
    ``engine.compiler.plan`` lays them out. The programs carry what the chosen partition
    does: the partial-sum exchanges only where the reduction depth is above 1 (the planner's
    estimate, ``planner_cycles``, counts the first stage's exchange for every plan)."""
    n_ops = len(amp["M"])
    if n_ops == 0:
        return {}
    shapes = with_expanded_dims(
        with_combined_groups(with_swapped_operands(conv_shapes(amp, target, partials_bytes)))
    )
    cands, costs, none_fit = search(shapes, target, compute_tiles, limit)
    return programs(shapes, cands, costs, none_fit, target, compute_tiles)


def programs(
    shapes: ConvShapes,
    cands: Candidates,
    costs: PlanCosts,
    none_fit: np.ndarray,
    target: Target,
    compute_tiles: int,
) -> dict[str, np.ndarray]:
    """The programs' cycles of one chosen candidate per op (``cands``, ``costs`` in op order)."""
    partials_bytes = shapes.pb
    sizes = costs.sizes
    setup = int(target.exchange_setup_cycles)
    elem_bytes = shapes.eb
    serial = cands.si * cands.so
    tiles = sizes.tiles
    field = shapes.M[cands.op]
    remainder = field - (field // cands.pf) * cands.pf
    n_max = np.where(remainder > 0, remainder * (tiles // cands.pf), tiles)
    depth = sizes.depth
    reduces = depth > 1
    exch = (
        (
            costs.input_exchange
            + costs.weight_exchange
            + costs.transform_exchange
            + costs.tile_transform
        )
        * serial
        + costs.before_slice_exchange
        + costs.broadcast_exchange
    )
    inputs_moved = (sizes.inputs - sizes.inputs // cands.po) * elem_bytes
    weights_moved = (sizes.weights - sizes.weights // cands.pf) * elem_bytes
    # the smaller field share (floor) of the other tiles, for the main compute set
    field_lo = np.maximum(field // cands.pf, 1)
    compute_lo = _partial_calc(target, shapes, cands, sizes, field_lo)
    reduce_exchange = np.where(reduces[:, None], costs.reduce_exchange, 0) * serial[:, None]
    reduce_exchange = np.where(reduce_exchange > 0, reduce_exchange + setup, 0)
    reduce_compute = np.where(reduces[:, None], costs.reduce, 0) * serial[:, None]
    cast = np.where(reduces, 0, costs.reduce[:, 0]) * serial + costs.output_cast
    outputs = _cdiv(sizes.partials, depth)
    reduce_recv = np.zeros_like(reduce_exchange)
    size = sizes.partials
    stage_depth = reduction.stage_depths(depth)
    for stage in range(reduction.MAX_STAGES):
        reduce_recv[:, stage] = np.where(stage_depth[:, stage] > 0, size * partials_bytes, 0)
        size = _cdiv(size, np.maximum(stage_depth[:, stage], 1))
    out = {
        "pg": cands.pg,
        "pf": cands.pf,
        "pkh": cands.pkh,
        "pi": cands.pi,
        "po": cands.po,
        "si": cands.si,
        "so": cands.so,
        "s": serial,
        "gpt": np.where(
            cands.chains > 0, 1, sizes.conv_groups
        ),  # vertices per tile: one SLIC vertex
        "pk": depth,
        "tiles_used": np.minimum(tiles, compute_tiles),
        "n_max": np.minimum(n_max, tiles),
        "none_fit": none_fit,
        "planner_cycles": costs.total,
        "temp": costs.temp,
        "exch": exch + setup * serial,
        "recv": weights_moved * serial + inputs_moved * np.where(cands.bibl, 1, serial),
        "compute": (costs.partial_calc + costs.serial_extra) * serial,
        "compute_lo": (compute_lo + costs.serial_extra) * serial,
        "combine": shapes.combine[cands.op],
        "expand": shapes.expand[cands.op],
        "cg": cands.cg,
        "ci": cands.ci,
        "co": cands.co,
        "chains": cands.chains,
        "hmac": cands.hmac,
        "bibl": cands.bibl,
        "prearr": costs.transform_copy * serial + costs.before_slice_copy + costs.broadcast_copy,
        "red_ex_stages": reduce_exchange,
        "red_cs_stages": reduce_compute,
        "red_recv_stages": reduce_recv * serial[:, None],
        "red_ex": reduce_exchange.sum(axis=1),
        "red_cs": reduce_compute.sum(axis=1),
        "cast": cast,
        "out_ex": np.where(costs.output_exchange > 0, costs.output_exchange * serial + setup, 0),
        "out_copy": costs.output_copy * serial,
        "out_recv": costs.output_exchange * target.exchange_bytes_per_cycle,
        "n_w": sizes.weights,
        "swap": shapes.swap[cands.op],
        "n_in": sizes.inputs,
        "outputs": outputs,
    }
    return out
