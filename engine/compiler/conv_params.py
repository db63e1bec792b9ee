"""The convolution planner's view of each op (PopLibs' ``ConvParams``, ``lib/poplin/ConvParams.cpp``,
as ``engine.compiler.conv_plan`` plans it): sizes, vertex grains and pass of every op, arrays over
the ops, and the transformed variants of an op the planner also tries (``ConvTransform``: conv
groups combined, both field dimensions expanded), each a further row planned for its op.

The sizes keep the planner's letters (``engine.compiler.conv_plan``'s docstring): ``G`` conv
groups, ``M`` output positions, ``C`` input and ``N`` output channels, ``kh`` x ``kw`` kernel;
``ci`` / ``co`` are the AMP vertex's ``inChansPerGroup`` / ``partialChansPerGroup``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from engine.compiler import vertex_costs

if TYPE_CHECKING:  # pragma: no cover
    from engine.targets import Target

#: ``target.getConvUnitMaxPipelineDepth``: weights per conv unit = 4 x input load elements.
CONV_UNIT_PIPELINE_DEPTH = 4


def _cdiv(numerator: ArrayLike, denominator: ArrayLike) -> np.ndarray:
    return -(-np.asarray(numerator) // np.asarray(denominator))


@dataclass
class ConvShapes:
    """The planner's view of each op (arrays over ops): sizes, grains and pass."""

    G: np.ndarray
    M: np.ndarray  # output field (batch x positions)
    C: np.ndarray  # input channels
    N: np.ndarray  # output channels
    kernel: np.ndarray  # kernel positions
    kh: np.ndarray  # kernel rows
    kw: np.ndarray  # kernel width
    width: np.ndarray  # output row width (0: a matmul's 1-D field)
    conv: np.ndarray  # a convolution (else a matmul)
    role: np.ndarray  # "fwd" / "gi" / "gw" / "recomp"
    dup: np.ndarray  # rows of operand A that repeat one input (a weight gradient's kernel)
    stride: np.ndarray  # output stride (forward convolutions; 1 otherwise)
    in_width: np.ndarray  # input row width (square maps; the output's when stride 1)
    ci: int  # inChansPerGroup
    co: int  # partialChansPerGroup
    eb: int  # input / output element bytes
    pb: int  # partials bytes (vertex and inter-tile)
    wpu: int  # weightsPerConvUnit
    orig: np.ndarray  # the op each row plans (rows past the ops: transformed variants)
    combine: np.ndarray  # combineConvGroupsFactor of the row (1: none)
    expand: np.ndarray  # the row is its op with both field dimensions expanded (expandDims)
    swap: np.ndarray  # the row is its matmul with the operands swapped (swapOperands)


def conv_shapes(amp: dict[str, np.ndarray], target: Target, partials_bytes: int) -> ConvShapes:
    """The planner's sizes from the lowered AMP rows (``G, M, K, N, cin, kernel, row_width``)."""
    inner = np.maximum(amp["K"].astype(np.int64), 1)
    in_chans = np.where(amp["cin"] > 0, amp["cin"], inner).astype(np.int64)
    kernel = np.maximum(inner // np.maximum(in_chans, 1), 1)
    kernel_w = np.maximum(np.round(np.sqrt(kernel)).astype(np.int64), 1)
    elem_bytes = int(np.asarray(amp["db"]).max())
    conv = np.asarray(amp.get("conv", np.zeros(len(inner), bool)), bool)
    width = np.asarray(amp.get("row_width", np.zeros(len(inner))), np.int64)
    in_width = np.asarray(amp.get("in_width", width), np.int64)
    in_width = np.where((width > 0) & (in_width > 0), in_width, width)
    stride = np.where(width > 0, np.maximum(np.round(in_width / np.maximum(width, 1)), 1), 1)
    stride = stride.astype(np.int64)
    return ConvShapes(
        G=np.maximum(amp["G"].astype(np.int64), 1),
        M=np.maximum(amp["M"].astype(np.int64), 1),
        C=np.maximum(in_chans, 1),
        N=np.maximum(amp["N"].astype(np.int64), 1),
        kernel=kernel,
        kh=_cdiv(kernel, kernel_w),
        kw=kernel_w,
        width=width,
        conv=conv,
        role=np.asarray(amp.get("role", np.full(len(inner), "fwd", object)), object),
        dup=np.where(kernel == 1, np.maximum(np.asarray(amp.get("a_dup", 1)), 1), 1).astype(
            np.int64
        )
        * np.ones(len(inner), np.int64),
        stride=stride,
        in_width=in_width,
        ci=vertex_costs.weights_per_conv_unit(target, elem_bytes),
        co=vertex_costs.conv_units(target, elem_bytes, partials_bytes),
        eb=elem_bytes,
        pb=partials_bytes,
        wpu=vertex_costs.weights_per_conv_unit(target, elem_bytes),
        orig=np.arange(len(inner)),
        combine=np.ones(len(inner), np.int64),
        expand=np.zeros(len(inner), bool),
        swap=np.zeros(len(inner), bool),
    )


def _append_rows(shapes: ConvShapes, idx: np.ndarray) -> ConvShapes:
    """``shapes`` with copies of its rows ``idx`` appended (the vertex grains and element sizes, one
    value for every row, unchanged)."""
    rows = {
        name: np.concatenate([value, value[idx]])
        for name in ConvShapes.__dataclass_fields__
        if isinstance(value := getattr(shapes, name), np.ndarray)
    }
    return ConvShapes(
        **rows, ci=shapes.ci, co=shapes.co, eb=shapes.eb, pb=shapes.pb, wpu=shapes.wpu
    )


def with_swapped_operands(shapes: ConvShapes) -> ConvShapes:
    """``shapes`` and, for every matmul, a row with its operands swapped (PopLibs
    ``lib/poplin/ConvPlan.cpp`` ``swapOperands``: the batch and the output channels exchanged,
    so the field is the matmul's output columns ``N`` and the output channels its rows ``M``),
    planned for the same op (``orig``). ``getSwapOperandCandidates`` tries both orientations for
    a fully connected pass (PopART and TensorFlow plan every training matmul as one,
    ``fullyConnectedPass``), the swapped one first; ``addTransformCycleEstimate`` charges the
    unswapped one the rearrangement of its input, weights and output
    (``conv_plan._transform_flags``)."""
    idx = np.flatnonzero(~shapes.conv & (shapes.combine == 1) & ~shapes.expand & ~shapes.swap)
    if not len(idx):
        return shapes
    out = _append_rows(shapes, idx)
    n_rows = len(shapes.M)
    out.M[n_rows:] = shapes.N[idx]
    out.N[n_rows:] = shapes.M[idx]
    out.dup[n_rows:] = 1
    out.swap[n_rows:] = True
    return out


def combine_factors(shapes: ConvShapes) -> dict[int, tuple[int, ...]]:
    """``getCombineConvGroupCandidates`` for one input channel per group (half: also 2): the
    factors from ``convInputLoadElems / cin`` up to ``16 / cin`` (half; float ``8 / cin``)
    by powers of two, per input channels per group (``{cin: factors}``)."""
    load = shapes.wpu // CONV_UNIT_PIPELINE_DEPTH  # convInputLoadElems
    top = 16 if shapes.eb == 2 else 8
    by_in_chans = {}
    for in_chans in (1, 2) if shapes.eb == 2 else (1,):
        factor, factors = max(load // in_chans, 1), []
        while factor <= top // in_chans:
            factors.append(factor)
            factor *= 2
        by_in_chans[in_chans] = tuple(factors)
    return by_in_chans


def with_combined_groups(shapes: ConvShapes) -> ConvShapes:
    """``shapes`` and, for every grouped convolution with 1 (half: or 2) input channels per group,
    a row per ``combineConvGroups`` factor ``f``: ``ceil(G / f)`` groups of ``f x`` the
    input and output channels (block-diagonal weights, ConvModel.cpp ``combineConvGroups``),
    planned for the same op (``orig``) with its rearrangements."""
    row_sets, row_factors = [], []
    for in_chans, factors in combine_factors(shapes).items():
        selected = np.flatnonzero(
            shapes.conv & (shapes.G > 1) & (in_chans == shapes.C) & (shapes.combine == 1)
        )
        for factor in factors:
            row_sets.append(selected)
            row_factors.append(np.full(len(selected), factor, np.int64))
    if not row_sets or not sum(len(selected) for selected in row_sets):
        return shapes
    idx = np.concatenate(row_sets)
    factor_of_row = np.concatenate(row_factors)
    out = _append_rows(shapes, idx)
    n_rows = len(shapes.M)
    out.G[n_rows:] = _cdiv(shapes.G[idx], factor_of_row)
    out.C[n_rows:] = shapes.C[idx] * factor_of_row
    out.N[n_rows:] = shapes.N[idx] * factor_of_row
    out.combine[n_rows:] = factor_of_row
    return out


def with_expanded_dims(shapes: ConvShapes) -> ConvShapes:
    """``shapes`` and, for a forward convolution whose input is strided away by a 1 x 1 kernel or has
    fewer channels (per conv group) than one input-channel grain, a row with both field dimensions
    expanded (``getExpandDimsCandidates`` / ``expandDim``, ConvPlan.cpp and ConvModel.cpp):
    the kernel's positions become input channels (``C x kernel``), the kernel 1 x 1, the
    stride 1 and the input field the output's (``ConvTransforms.cpp``
    ``expandSpatialDimMultiStageImpl`` subsamples the strided input), planned for the same op
    (``orig``) with its inputs and
    weights rearranged (``addTransformCycleEstimate``: ``rearrangeInput`` and
    ``rearrangeWeights`` when ``expandDims`` is set). PopLibs lists every subset of the
    dimensions whose expansion changes the parameters (and whose input is at least the
    kernel); the engine tries the full expansion of these two kinds of convolution, where it
    removes the strided-away inputs or the padded channels from every tile."""
    fwd = (shapes.role == "fwd") | (shapes.role == "recomp")
    base = shapes.conv & fwd & (shapes.combine == 1) & ~shapes.expand & (shapes.width > 0)
    base &= shapes.in_width >= shapes.kh  # inputFieldShape >= kernelShape
    strided = (shapes.kernel == 1) & (shapes.stride > 1)
    idx = np.flatnonzero(base & (strided | ((shapes.ci > shapes.C) & (shapes.kernel > 1))))
    if not len(idx):
        return shapes
    out = _append_rows(shapes, idx)
    n_rows = len(shapes.M)
    out.C[n_rows:] = shapes.C[idx] * shapes.kernel[idx]
    for column in (out.kernel, out.kh, out.kw, out.stride, out.dup):
        column[n_rows:] = 1
    out.in_width[n_rows:] = shapes.width[idx]
    out.expand[n_rows:] = True
    return out
