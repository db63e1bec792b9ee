"""PopLibs' convolution planner (poplin) as the engine runs it: partition search and cost model.

Matmuls and convolutions are planned as ``lib/poplin/ConvPlan.cpp`` ``createPlan`` /
``lib/poplin/ConvModel.cpp`` ``constructModel`` plan them on one IPU (two levels of hierarchy:
the IPU, split over its tiles, and the tile). Every op is a convolution of ``G`` conv groups,
a field of ``M`` output positions (batch x rows x row width; a matmul's rows), ``C`` input
channels, ``k`` kernel positions (square, ``kh`` rows) and ``N`` output channels.

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
  (``getScaleFactorForTransform``), exchanges at the exchange rate. Matmuls are planned with
  the operands swapped where that removes the rearrangements (``getSwapOperandCandidates``),
  so they carry none;
- serial splits: the loop body's cycles x splits, plus dynamic slices of the inputs / weights
  (``getDynamicSlice1DEstimate``), the dynamic update of outputs (output channels) or the
  in-place add of partials and a final cast (input channels, ``getBinaryOp1DInPlaceEstimate``,
  ``estimateCastCycles``).

Temporary memory (``addConvTempMemoryEstimate`` etc.): inputs + weights + partials on the
tile, the largest reduction stage, twice the largest rearranged tensor, the in-place partials;
plans above ``availableMemoryProportion x`` tile memory are infeasible (``runPlanner``); when
none fits, the plan with the least temporary memory is taken (it may go out of memory).

Transforms (``ConvTransform``): combine conv groups (``with_combined_groups``) and, for forward
convolutions with a strided 1 x 1 kernel or fewer input channels per group than one grain, the
expansion of both field dimensions (``with_expanded_dims``), each a further row of the op.

Not ported (documented in docs/engine.md): the vertical MAC and outer-product vertices, the
other expand-dims subsets (one dimension; convolutions whose expansion removes no waste), the out-channel flatten transform, taller AMP filters, the broadcast of
inputs before a serial loop, multi-IPU levels, the gradient passes' strides and every dilation
(the engine's ops carry neither).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.compiler import reduction, vertex_costs

#: ``ExchangeEstimator``: inputs shared by supertile neighbours go at twice the rate when the
#: output-channel split is a multiple of the tiles sharing an exchange bus (2).
TILES_PER_SHARED_EXCHANGE_BUS = 2
#: ``target.getMemcpyBytesPerCycle()``: one 64-bit load / store per cycle (PopLibs' IPU model
#: sets ``memcpyBytesPerCycle = dataPathWidth / 8``).
MEMCPY_BYTES_PER_CYCLE = vertex_costs.DATA_PATH_BITS // 8
#: Candidate splits per dimension: powers of two up to 2^EXP_MAX (clipped to the grains).
EXP_MAX = 11
#: Kernel-row splits tried: these and the kernel's height.
KERNEL_SPLITS = (1, 2, 3, 4)
#: ``getBinaryOp1DInPlaceEstimate``: worker overhead 58, ADD 1 + 2 cycles per vector.
ADD_IN_PLACE_WORKER_CYCLES = 58
ADD_IN_PLACE_CYCLES_PER_VECTOR = 3
#: ``target.getConvUnitMaxPipelineDepth``: weights per conv unit = 4 x input load elements.
CONV_UNIT_PIPELINE_DEPTH = 4
#: HMAC input channels per group tried (``getConvVertexHMACCandidates`` lists every even
#: grouping up to the channels; the engine tries these powers of four, a subset).
HMAC_IN_CHANS = (16, 64, 256, 1024)
#: ``Plan::Slic::windowWidth``: the only SLIC kernel window PopLibs implements (1 x 4).
SLIC_WINDOW = 4


def _cdiv(a, b):
    return -(-np.asarray(a) // np.asarray(b))


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


def conv_shapes(a: dict, t, pb: int) -> ConvShapes:
    """The planner's sizes from the lowered AMP rows (``G, M, K, N, cin, kernel, row_width``)."""
    K = np.maximum(a["K"].astype(np.int64), 1)
    C = np.where(a["cin"] > 0, a["cin"], K).astype(np.int64)
    kernel = np.maximum(K // np.maximum(C, 1), 1)
    kw = np.maximum(np.round(np.sqrt(kernel)).astype(np.int64), 1)
    eb = int(np.asarray(a["db"]).max())
    conv = np.asarray(a.get("conv", np.zeros(len(K), bool)), bool)
    width = np.asarray(a.get("row_width", np.zeros(len(K))), np.int64)
    in_width = np.asarray(a.get("in_width", width), np.int64)
    in_width = np.where((width > 0) & (in_width > 0), in_width, width)
    stride = np.where(width > 0, np.maximum(np.round(in_width / np.maximum(width, 1)), 1), 1)
    stride = stride.astype(np.int64)
    return ConvShapes(
        G=np.maximum(a["G"].astype(np.int64), 1),
        M=np.maximum(a["M"].astype(np.int64), 1),
        C=np.maximum(C, 1),
        N=np.maximum(a["N"].astype(np.int64), 1),
        kernel=kernel,
        kh=_cdiv(kernel, kw),
        kw=kw,
        width=width,
        conv=conv,
        role=np.asarray(a.get("role", np.full(len(K), "fwd", object)), object),
        dup=np.where(kernel == 1, np.maximum(np.asarray(a.get("a_dup", 1)), 1), 1).astype(np.int64)
        * np.ones(len(K), np.int64),
        stride=stride,
        in_width=in_width,
        ci=vertex_costs.weights_per_conv_unit(t, eb),
        co=vertex_costs.conv_units(t, eb, pb),
        eb=eb,
        pb=pb,
        wpu=vertex_costs.weights_per_conv_unit(t, eb),
        orig=np.arange(len(K)),
        combine=np.ones(len(K), np.int64),
        expand=np.zeros(len(K), bool),
    )


def combine_factors(s: ConvShapes) -> dict[int, tuple[int, ...]]:
    """``getCombineConvGroupCandidates`` for one input channel per group (half: also 2): the
    factors from ``convInputLoadElems / cin`` up to ``16 / cin`` (half; float ``8 / cin``)
    by powers of two, per input channels per group (``{cin: factors}``)."""
    load = s.wpu // CONV_UNIT_PIPELINE_DEPTH  # convInputLoadElems
    top = 16 if s.eb == 2 else 8
    out = {}
    for ci in (1, 2) if s.eb == 2 else (1,):
        f, fs = max(load // ci, 1), []
        while f <= top // ci:
            fs.append(f)
            f *= 2
        out[ci] = tuple(fs)
    return out


def with_combined_groups(s: ConvShapes) -> ConvShapes:
    """``s`` and, for every grouped convolution with 1 (half: or 2) input channels per group,
    a row per ``combineConvGroups`` factor ``f``: ``ceil(G / f)`` groups of ``f x`` the
    input and output channels (block-diagonal weights, ConvModel.cpp ``combineConvGroups``),
    planned for the same op (``orig``) with its rearrangements."""
    rows, factors = [], []
    for ci, fs in combine_factors(s).items():
        sel = np.flatnonzero(s.conv & (s.G > 1) & (ci == s.C) & (s.combine == 1))
        for f in fs:
            rows.append(sel)
            factors.append(np.full(len(sel), f, np.int64))
    if not rows or not sum(len(r) for r in rows):
        return s
    idx = np.concatenate(rows)
    f = np.concatenate(factors)
    ext = {}
    for name in ConvShapes.__dataclass_fields__:
        v = getattr(s, name)
        ext[name] = np.concatenate([v, v[idx]]) if isinstance(v, np.ndarray) else v
    n = len(s.M)
    ext["G"][n:] = _cdiv(s.G[idx], f)
    ext["C"][n:] = s.C[idx] * f
    ext["N"][n:] = s.N[idx] * f
    ext["combine"][n:] = f
    return ConvShapes(**ext)


def with_expanded_dims(s: ConvShapes) -> ConvShapes:
    """``s`` and, for a forward convolution whose input is strided away by a 1 x 1 kernel or has
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
    fwd = (s.role == "fwd") | (s.role == "recomp")
    base = s.conv & fwd & (s.combine == 1) & ~s.expand & (s.width > 0)
    base &= s.in_width >= s.kh  # inputFieldShape >= kernelShape
    strided = (s.kernel == 1) & (s.stride > 1)
    idx = np.flatnonzero(base & (strided | ((s.ci > s.C) & (s.kernel > 1))))
    if not len(idx):
        return s
    ext = {}
    for name in ConvShapes.__dataclass_fields__:
        v = getattr(s, name)
        ext[name] = np.concatenate([v, v[idx]]) if isinstance(v, np.ndarray) else v
    n = len(s.M)
    ext["C"][n:] = s.C[idx] * s.kernel[idx]
    for name in ("kernel", "kh", "kw", "stride", "dup"):
        ext[name][n:] = 1
    ext["in_width"][n:] = s.width[idx]
    ext["expand"][n:] = True
    return ConvShapes(**ext)


@dataclass
class Candidates:
    """Flattened (op, partition) pairs: op index and the splits, serial splits included."""

    op: np.ndarray
    pg: np.ndarray
    pf: np.ndarray
    pkh: np.ndarray
    pi: np.ndarray
    po: np.ndarray
    si: np.ndarray  # input-channel serial splits
    so: np.ndarray  # output-channel serial splits
    cg: np.ndarray  # convGroupsPerGroup of the vertex (1: AMP)
    ci: np.ndarray  # inChansPerGroup of the vertex
    co: np.ndarray  # partialChansPerGroup of the vertex
    chains: np.ndarray  # SLIC: conv-unit chains (2 or 4); 0: the AMP vertex
    hmac: np.ndarray  # the HMAC vertex (chains 0)


def _dedup(op: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Indices of the first of each distinct (op, key) pair, sorted by op then key."""
    order = np.lexsort((key, op))
    o, k = op[order], key[order]
    new = np.ones(len(order), bool)
    new[1:] = (o[1:] != o[:-1]) | (k[1:] != k[:-1])
    return order[new]


def _grid(
    s: ConvShapes, T: int, op, pg, cg: int, ci: int, co: int, chains: int, hmac: bool = False
) -> Candidates:
    """The candidate partitions of rows ``op`` (an op may repeat, once per conv-group split
    ``pg``) for one vertex type (``cg`` conv groups, ``ci`` / ``co`` channels per group;
    ``chains`` > 0: SLIC, whose tile holds one group of input and of output channels): the
    distinct channel and kernel-row splits first, then the field splits of each."""
    e = 2 ** np.arange(10)
    ks = np.array((*KERNEL_SPLITS, 0))  # 0 stands for the kernel's own height
    ei, eo, kk = (x.ravel() for x in np.meshgrid(e, e, ks, indexing="ij"))
    Cg, Ng = _cdiv(s.C[op], ci), _cdiv(s.N[op], co)
    Tr = np.maximum(T // pg, 1)
    kh = s.kh[op]
    if chains:  # every input and output channel group on its own tiles
        ei = np.zeros_like(ei)
        eo = np.zeros_like(eo)
        pi = np.broadcast_to(Cg[:, None], (len(op), len(ei)))
        po = np.broadcast_to(Ng[:, None], (len(op), len(eo)))
        chan_ok = np.ones(pi.shape, bool)
    else:
        pi = np.minimum(ei[None, :], Cg[:, None])
        po = np.minimum(eo[None, :], Ng[:, None])
        chan_ok = (pi == np.minimum(ei, Cg[:, None])) & (po <= eo)
    pkh = np.minimum(np.where(kk == 0, kh[:, None], kk[None, :]), kh[:, None])
    rest = pi * po * pkh
    ok = (rest <= Tr[:, None]) & chan_ok
    row, col = np.nonzero(ok)
    pi, po, pkh, rest = pi[row, col], po[row, col], pkh[row, col], rest[row, col]
    keep = _dedup(row, (pi * 4096 + po) * 8 + pkh)
    row, pi, po, pkh, rest = row[keep], pi[keep], po[keep], pkh[keep], rest[keep]
    # field splits: powers of two and "all the tiles left"
    ef = np.r_[2 ** np.arange(EXP_MAX + 1), 0]
    M = s.M[op[row]]
    pf_max = np.minimum(np.maximum(Tr[row] // rest, 1), M)
    pf = np.where(ef[None, :] == 0, pf_max[:, None], np.minimum(ef[None, :], M[:, None]))
    ok = rest[:, None] * pf <= Tr[row][:, None]
    r2, col = np.nonzero(ok)
    pf = pf[r2, col]
    keep = _dedup(r2, pf)
    r2, pf = r2[keep], pf[keep]
    one = np.ones(len(r2), np.int64)
    rows = row[r2]
    return Candidates(
        op[rows],
        pg[rows],
        pf,
        pkh[r2],
        pi[r2],
        po[r2],
        one,
        one,
        one * cg,
        one * ci,
        one * co,
        one * chains,
        np.full(len(r2), hmac),
    )


def _group_splits(groups: np.ndarray, T: int) -> tuple[np.ndarray, np.ndarray]:
    """Conv-group splits tried per op (``PartitionVariables::convGroupSplit`` over the conv
    group grains): the powers of two below the grains, the grains themselves and as many as
    the tiles allow. Returns (row's op index, split)."""
    e = 2 ** np.arange(EXP_MAX + 1)
    cand = np.concatenate(
        [np.minimum(e[None, :], groups[:, None]), np.minimum(groups, T)[:, None]], axis=1
    )
    row, col = np.nonzero(np.ones(cand.shape, bool))
    split = cand[row, col]
    keep = _dedup(row, split)
    return row[keep], split[keep]


def slic_types(s: ConvShapes) -> tuple[tuple[int, int, int], ...]:
    """``getConvVertexSLICCandidates``: (convGroupsPerGroup, chansPerGroup, conv chains) of
    the SLIC vertices for half activations: groupings 1 x 4, 2 x 2, 4 x 1 and, with half
    partials and 16 conv units, 8 x 1 and 16 x 1; 4 chains with 16 conv units and half
    partials, 2 chains otherwise (float partials: 2 only). None for float activations."""
    if s.eb != 2:
        return ()
    units = s.co  # numConvUnits (partialChansPerGroup of the AMP vertex)
    half_partials = s.pb == 2
    chains = ((4,) if units == 16 else ()) + (2,) if half_partials else (2,)
    groupings = [(1, 4), (2, 2), (4, 1)]
    if half_partials and units == 16:
        groupings += [(8, 1), (16, 1)]
    return tuple((g, ch, n) for n in chains for g, ch in groupings)


def candidates(s: ConvShapes, T: int) -> Candidates:
    """Every candidate partition of every op within the tiles (numpy, no loop over ops).

    Dense convolutions and matmuls (batched ones included) keep every conv group on its own
    tiles (``pg = min(G, tiles)``) with the AMP vertex. Grouped convolutions (``G > 1``) also
    split their conv groups (``_group_splits``) and, where their shape allows, try the SLIC
    vertex (``slic_types``; a field of rows, stride at most 2, not a weight update) besides
    AMP, as ``getConvVertexTypeCandidates`` lists them."""
    n = len(s.M)
    ops = np.arange(n)
    grouped = s.conv & (s.G > 1)
    parts = []
    dense = ops[~grouped]
    if len(dense):
        parts.append(_grid(s, T, dense, np.minimum(s.G[dense], T), 1, s.ci, s.co, 0))
    gops = ops[grouped]
    if len(gops):
        row, pg = _group_splits(s.G[gops], T)
        parts.append(_grid(s, T, gops[row], pg, 1, s.ci, s.co, 0))
        slic_ok = (s.width[gops] > 0) & (s.role[gops] != "gw") & (s.stride[gops] <= 2)
        sops = gops[slic_ok]
        for cg, ch, chains in slic_types(s) if len(sops) else ():
            row, pg = _group_splits(_cdiv(s.G[sops], cg), T)
            parts.append(_grid(s, T, sops[row], pg, cg, ch, ch, chains))
        # the weight update: HMAC (partialChansPerGroup 1, or 2 with half partials)
        hops = gops[(s.role[gops] == "gw") & (s.width[gops] == 0) & (s.kernel[gops] == 1)]
        if len(hops):
            row, pg = _group_splits(s.G[hops], T)
            for ci in HMAC_IN_CHANS:
                parts.append(_grid(s, T, hops[row], pg, 1, ci, 1 if s.pb >= 4 else 2, 0, True))
    c = parts[0]
    for p in parts[1:]:
        c = _concat(c, p)
    return c


def _tile_sizes(s: ConvShapes, c: Candidates) -> dict:
    """Largest tile's sizes of each candidate (``ConvSizeVariables`` at the tile level)."""
    o = c.op
    Cg, Ng = _cdiv(s.C[o], c.ci), _cdiv(s.N[o], c.co)
    Ft = _cdiv(s.M[o], c.pf)
    kht = _cdiv(s.kh[o], c.pkh)
    Cgt = _cdiv(Cg, c.pi * c.si)
    Ngt = _cdiv(Ng, c.po * c.so)
    Ggt = _cdiv(_cdiv(s.G[o], c.cg), c.pg)  # conv-group grains on the tile
    Gt = Ggt * c.cg
    W = s.width[o]
    is_conv = W > 0
    H = np.maximum(W, 1)  # square maps
    Hi, st = np.maximum(s.in_width[o], 1), s.stride[o]
    image = H * H
    whole = Ft >= image
    rows = np.where(whole, H, _cdiv(Ft, np.maximum(W, 1)))
    cols = np.where(whole, H, np.minimum(Ft, np.maximum(W, 1)))
    # getMaxInputRangeSize: (outputs - 1) x stride + kernel, clipped to the whole input
    halo_rows = np.minimum((rows - 1) * st + kht, Hi)
    halo_cols = np.minimum((cols - 1) * st + s.kw[o], Hi)
    batch = np.where(whole, _cdiv(Ft, image), 1)
    in_field = np.where(is_conv, batch * halo_rows * halo_cols, Ft)
    # SLIC's tile-level transform (addTileLevelTransformEstimates / applyPadding): the kernel
    # width padded to whole 1 x 4 windows and the input's padding made real zeros (the
    # padding that keeps the output's size: (out - 1) x stride + kernel - in per dimension)
    slic = c.chains > 0
    kw = s.kw[o]
    kw_pad = np.where(slic, _cdiv(kw, SLIC_WINDOW) * SLIC_WINDOW - kw, 0)
    pad_h = np.maximum((H - 1) * st + s.kh[o] - Hi, 0)
    pad_w = np.maximum((H - 1) * st + kw - Hi, 0) + kw_pad
    chans_in, chans_out = Cgt * c.ci, Ngt * c.co
    kernel_zeros = Gt * kht * kw_pad * chans_in * chans_out
    input_zeros = Gt * batch * ((rows + pad_h) * (cols + pad_w) - rows * cols) * chans_in
    input_zeros = np.where(slic & is_conv, input_zeros, 0)
    return dict(
        Ft=Ft,
        kt=kht * s.kw[o],
        kwt=s.kw[o],
        Cgt=Cgt,
        Ngt=Ngt,
        Gt=Gt,
        Ggt=Ggt,
        n_in=np.maximum(_cdiv(in_field * Cgt * c.ci * Gt, s.dup[o]), in_field * Gt),
        n_w=kht * s.kw[o] * Cgt * c.ci * Ngt * c.co * Gt,
        n_out=Ft * Ngt * c.co * Gt,
        kernel_zeros=kernel_zeros,
        input_zeros=input_zeros,
        depth=c.pkh * c.pi,
        tiles=c.pg * c.pf * c.pkh * c.pi * c.po,
    )


@dataclass
class PlanCosts:
    """The planner's estimate of each candidate (cycles of the largest tile) by term, and its
    temporary bytes per tile: the ``SinglePassEstimates`` the objective sums."""

    input_exchange: np.ndarray
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
    tile_transform: np.ndarray  # SLIC's padding of kernel and input on the tile
    total: np.ndarray  # the planner's totalCycles
    temp: np.ndarray  # totalTempBytes
    sizes: dict


def _transform_flags(s: ConvShapes, c: Candidates) -> tuple[np.ndarray, ...]:
    """``addTransformCycleEstimate``'s rearrange / regroup decisions per candidate (its op
    and its vertex's channel groupings)."""
    o = c.op
    conv, role = s.conv[o], s.role[o]
    wu = conv & (role == "gw")
    fwd = conv & ((role == "fwd") | (role == "recomp"))
    pad_in = conv & (s.C[o] % c.ci != 0)
    pad_out = conv & (s.N[o] % c.co != 0)
    # a training matmul's weight update, planned separately (PopLibs keeps the cheaper of the
    # joint and the separate plans, createPlan: separatePlanHasLowerCost) with its operands
    # swapped: FC_TRAINING_WU rearranges its input (the output gradient) and its output
    mm_wu = ~conv & (role == "gw")
    comb = s.combine[o] > 1  # combineConvGroups rearranges all three
    exp = s.expand[o]  # expandDims rearranges the inputs and the weights
    r_in = wu | pad_in | mm_wu | comb | exp
    r_w = wu | pad_in | pad_out | comb | exp
    r_out = wu | pad_out | mm_wu | comb
    regroup_out = conv & ~wu & (c.co != s.wpu)
    regroup_w = fwd & (c.co % s.wpu != 0)
    return r_in, r_w, r_out, regroup_out & ~r_out, regroup_w & ~r_w


def _input_positions(s: ConvShapes, o: np.ndarray) -> np.ndarray:
    """Input positions of the whole convolution (batch x input rows x input width): the output
    field scaled by the input's size over the output's (square maps)."""
    w = s.width[o]
    return np.where(w > 0, s.M[o] * s.in_width[o] ** 2 // np.maximum(w**2, 1), s.M[o])


def _transform_costs(s: ConvShapes, c: Candidates, xb: float) -> dict:
    """Copy / exchange cycles and temporary bytes of the rearrangements (whole tensors of the
    IPU level spread over the tiles used)."""
    o = c.op
    r_in, r_w, r_out, reg_out, reg_w = _transform_flags(s, c)
    tiles = c.pg * c.pf * c.pkh * c.pi * c.po
    Cp = _cdiv(s.C[o], c.ci) * c.ci
    Np = _cdiv(s.N[o], c.co) * c.co
    Gp = _cdiv(s.G[o], c.cg) * c.cg
    eb = s.eb
    reorder = min(MEMCPY_BYTES_PER_CYCLE, eb)
    gran = 2 if eb >= 4 else 4
    # a matmul's weight update is planned with its operands swapped: its input is the output
    # gradient (C x N here) and its output channels are the weight gradient's rows (M)
    mm_wu = ~s.conv[o] & (s.role[o] == "gw")
    out_ch = np.where(mm_wu, s.M[o], s.N[o])
    f_io = np.where((s.C[o] * out_ch) % gran == 0, 4, 3)  # 5 / factor
    f_out = np.where(out_ch % gran == 0, 4, 3)
    # the whole input (a weight gradient's activations once)
    in_b = _cdiv(_cdiv(_input_positions(s, o) * Cp * Gp, s.dup[o]) * eb, tiles)
    in_b = np.where(mm_wu, _cdiv(Cp * Np * Gp * eb, tiles), in_b)
    w_b = _cdiv(s.kernel[o] * Cp * Np * Gp * eb, tiles)
    out_b = _cdiv(s.M[o] * Np * Gp, tiles) * eb
    copy = np.where(r_in, _cdiv(in_b * 5, reorder * f_io), 0)
    exch = np.where(r_in, _cdiv(in_b, xb), 0)
    copy = copy + np.where(r_w, _cdiv(w_b * 5, reorder * f_io), 0)
    exch = exch + np.where(r_w, _cdiv(w_b, xb), 0)
    regroup_w = np.minimum(MEMCPY_BYTES_PER_CYCLE, c.co * eb)
    w_regroup = _cdiv(s.kernel[o] * Cp * Np * Gp, tiles) * eb
    copy = copy + np.where(reg_w, _cdiv(w_regroup * 5, f_out * regroup_w), 0)
    out_copy = np.where(r_out, _cdiv(out_b * 5, reorder * f_out), 0)
    out_exch = np.where(r_out, _cdiv(out_b, xb), 0).astype(np.int64)
    regroup_o = np.minimum(MEMCPY_BYTES_PER_CYCLE, c.co * eb)
    out_copy = out_copy + np.where(reg_out, _cdiv(out_b * 5, regroup_o * f_out), 0)
    temp = np.maximum.reduce(
        [
            np.where(r_in, in_b, 0),
            np.where(r_w | reg_w, w_b, 0),
            np.where(r_out | reg_out, out_b, 0),
        ]
    )
    return dict(copy=copy, exch=exch, out_copy=out_copy, out_exch=out_exch, temp=2 * temp)


def _dynamic_slice_cycles(t, elements, splits, eb: int):
    """``getDynamicSlice1DEstimate`` of ``ceil(elements / splits)``; 0 without serial splits."""
    W = int(t.workers_per_tile)
    size = _cdiv(elements, np.maximum(splits, 1))
    per = _cdiv(size, W)
    vw = 4 if eb == 1 else vertex_costs.DATA_PATH_BITS // (16 if eb == 2 else 32)
    worker = (76 + 72 + 2 * (per // vw)) if eb == 1 else (39 + 24 + 2 * (per // vw))
    cycles = t.elementwise_supervisor_cycles + 14 + worker * W
    return np.where(np.asarray(splits) > 1, cycles, 0).astype(np.int64)


def _partial_calc(t, s: ConvShapes, c: Candidates, z: dict, field) -> np.ndarray:
    """``addPartialCalcCycleEstimate``: the candidate's vertex (AMP, or SLIC where
    ``c.chains`` > 0) over ``field`` output positions of the tile's share (``z``: the tile
    sizes of the candidates ``c``)."""
    o = c.op
    w = s.width[o]
    field = np.broadcast_to(np.asarray(field, np.int64), o.shape)
    row_width = np.where(w > 0, np.minimum(w, field), field)
    out = _amp_calc(t, s, o, z, field, row_width)
    hmac = c.hmac
    if hmac.any():
        for ci, co in {(int(a), int(b)) for a, b in zip(c.ci[hmac], c.co[hmac], strict=True)}:
            sel = hmac & (c.ci == ci) & (c.co == co)
            out[sel] = vertex_costs.hmac_partials_cycles(
                t,
                field=field[sel],
                in_chans=ci,
                out_chans=co,
                in_groups=z["Cgt"][sel],
                out_groups=z["Ngt"][sel],
                conv_groups=z["Gt"][sel],
                acts_bytes=s.eb,
                partials_bytes=s.pb,
            )
    slic = c.chains > 0
    if slic.any():
        for cg, ch, chains in {
            (int(a), int(b), int(d))
            for a, b, d in zip(c.cg[slic], c.ci[slic], c.chains[slic], strict=True)
        }:
            sel = slic & (c.cg == cg) & (c.ci == ch) & (c.chains == chains)
            out[sel] = vertex_costs.slic_partials_cycles(
                t,
                field=field[sel],
                row_width=row_width[sel],
                kernel_rows=_cdiv(z["kt"][sel], z["kwt"][sel]),
                kernel_width=z["kwt"][sel],
                conv_group_groups=z["Ggt"][sel],
                conv_groups_per_group=cg,
                chans_per_group=ch,
                chains=chains,
                stride=s.stride[o[sel]],
                partials_bytes=s.pb,
            )
    return out


def _amp_calc(t, s: ConvShapes, o: np.ndarray, z: dict, field, row_width) -> np.ndarray:
    """The AMP vertex estimate of every candidate (``vertex_costs.amp_partials_cycles``)."""
    return vertex_costs.amp_partials_cycles(
        t,
        field=field,
        row_width=row_width,
        kernel_positions=z["kt"],
        kernel_width=z["kwt"],
        in_groups=z["Cgt"],
        out_groups=z["Ngt"],
        conv_groups=z["Gt"],
        acts_bytes=s.eb,
        partials_bytes=s.pb,
        one_by_one=s.kernel[o] == 1,
    )


def estimate(s: ConvShapes, c: Candidates, t) -> PlanCosts:
    """The planner's estimate of every candidate (see the module docstring)."""
    o = c.op
    z = _tile_sizes(s, c)
    xb = float(t.exchange_bytes_per_cycle)
    eb, pb = s.eb, s.pb
    W = int(t.workers_per_tile)
    in_rate = xb * np.where(c.po % TILES_PER_SHARED_EXCHANGE_BUS == 0, 2, 1)
    n_in = z["n_in"] - z["n_in"] // c.po
    n_w = z["n_w"] - z["n_w"] // c.pf
    input_exchange = np.ceil(n_in * eb / in_rate).astype(np.int64)
    weight_exchange = np.ceil(n_w * eb / xb).astype(np.int64)
    depth = z["depth"]
    first = np.ceil(z["n_out"] * pb / xb).astype(np.int64)
    red_ex = reduction.conv_reduce_exchange(z["n_out"], depth, pb, xb)
    red_ex[:, 0] = first  # the planner counts the first stage whatever the depth
    partial = _partial_calc(t, s, c, z, z["Ft"])
    outputs = _cdiv(z["n_out"], depth)
    red, _, _ = reduction.conv_reduce(t, outputs, depth, c.si, eb, pb)
    tr = _transform_costs(s, c, xb)
    # SLIC's padding (applyPadding): the zeros' exchange cycles, kernel at the exchange
    # rate, inputs at the inputs' rate
    tile_tr = np.ceil(z["kernel_zeros"] * eb / xb).astype(np.int64)
    tile_tr = tile_tr + np.ceil(z["input_zeros"] * eb / in_rate).astype(np.int64)
    serial = c.si * c.so
    # serial splits: slices of inputs (input channels) and weights, update / add of outputs
    in_per_tile = _cdiv(_input_positions(s, o) * s.C[o] * s.G[o], z["tiles"])
    w_per_tile = _cdiv(s.kernel[o] * s.C[o] * s.N[o] * s.G[o], z["tiles"])
    extra = _dynamic_slice_cycles(t, in_per_tile, c.si, eb)
    extra = extra + _dynamic_slice_cycles(t, w_per_tile, serial, eb)
    extra = extra + _dynamic_slice_cycles(t, outputs, c.so, pb)
    vw_p = vertex_costs.DATA_PATH_BITS // (8 * pb)
    add = t.elementwise_supervisor_cycles + W * (
        ADD_IN_PLACE_WORKER_CYCLES + _cdiv(_cdiv(outputs, W), vw_p) * ADD_IN_PLACE_CYCLES_PER_VECTOR
    )
    extra = extra + np.where(c.si > 1, add, 0)
    vw_o = vertex_costs.DATA_PATH_BITS // (8 * eb)
    out_cast = np.where(c.si > 1, reduction.cast_partials_cycles(outputs, vw_p, vw_o, W), 0).astype(
        np.int64
    )
    per_iter = (
        extra
        + tr["copy"]
        + tr["exch"]
        + tr["out_copy"]
        + tr["out_exch"]
        + input_exchange
        + weight_exchange
        + red_ex.sum(axis=1)
        + partial
        + red.sum(axis=1)
        + tile_tr
    )
    total = per_iter * serial + out_cast
    partials_b = z["n_out"] * pb
    # the SLIC vertex's extra buffer (addConvTempMemoryEstimate): the partials of one conv
    # group grain + 200 bytes
    partials_b = partials_b + np.where(c.chains > 0, _cdiv(partials_b, z["Ggt"]) + 200, 0)
    conv_temp = (z["n_in"] + z["n_w"]) * eb + partials_b
    conv_temp = conv_temp + (z["kernel_zeros"] + z["input_zeros"]) * eb
    red_temp = reduction.conv_reduce_temp_bytes(outputs, depth, pb)
    in_place = np.where(c.si > 1, outputs * pb, 0)
    temp = np.maximum.reduce([tr["temp"], conv_temp, red_temp]) + in_place
    return PlanCosts(
        input_exchange=input_exchange,
        weight_exchange=weight_exchange,
        reduce_exchange=red_ex,
        partial_calc=partial,
        reduce=red,
        transform_copy=tr["copy"],
        transform_exchange=tr["exch"].astype(np.int64),
        output_copy=tr["out_copy"],
        output_exchange=tr["out_exch"],
        serial_extra=extra,
        output_cast=out_cast,
        tile_transform=tile_tr,
        total=total.astype(np.int64),
        temp=temp.astype(np.int64),
        sizes=z,
    )


#: Serial splits tried for a partition whose temporaries do not fit (powers of two).
SERIAL_SPLITS = (2, 4, 8, 16, 32, 64)


def _take(c: Candidates, idx: np.ndarray) -> Candidates:
    return Candidates(*(getattr(c, f)[idx] for f in Candidates.__dataclass_fields__))


def _with_serial(s: ConvShapes, c: Candidates, e: PlanCosts, over, limit: float) -> Candidates:
    """The candidates that do not fit, again with output- or input-channel serial splits (one
    kind at a time) of the powers of two nearest the split that brings the tile's operands and
    partials under ``limit`` (and twice that), within the channel grains the parallel split
    leaves and at most ``SERIAL_SPLITS[-1]``."""
    idx = np.flatnonzero(over)
    z = e.sizes
    w_b, in_b, out_b = z["n_w"][idx] * s.eb, z["n_in"][idx] * s.eb, z["n_out"][idx] * s.pb
    need_o = _cdiv(w_b + out_b, np.maximum(limit - in_b, 1))
    need_i = _cdiv(w_b + in_b, np.maximum(limit - 2 * out_b, 1))
    p2 = 2 ** np.ceil(np.log2(np.maximum(np.stack([need_o, need_i]), 1))).astype(np.int64)
    k = np.concatenate([p2, 2 * p2]).T.ravel()  # per candidate: out, in, 2 x out, 2 x in
    out_kind = np.tile(np.array([True, False, True, False]), len(idx))
    base = _take(c, np.repeat(idx, 4))
    o = base.op
    left_o = _cdiv(_cdiv(s.N[o], base.co), base.po)
    left_i = _cdiv(_cdiv(s.C[o], base.ci), base.pi)
    base.so = np.where(out_kind, np.minimum(k, left_o), 1)
    base.si = np.where(out_kind, 1, np.minimum(k, left_i))
    fine = np.where(out_kind, k <= 2 * left_o, k <= 2 * left_i) & (base.so * base.si > 1)
    fine &= k <= SERIAL_SPLITS[-1]
    return _take(base, np.flatnonzero(fine))


def search(s: ConvShapes, t, T: int, limit: float) -> tuple[Candidates, PlanCosts, np.ndarray]:
    """The best plan of every op: the fastest candidate whose temporaries fit ``limit`` bytes
    per tile (ties: fewer tiles), else the one with the least temporary memory. Returns the
    chosen candidates, their costs and which ops found no fitting plan."""
    c = candidates(s, T)
    e = estimate(s, c, t)
    # serial splits only cost more than the same partition without them: try them on the
    # partitions that do not fit yet would beat the best one that does
    n = int(s.orig.max()) + 1 if len(s.orig) else 0
    best_fit = np.full(n, np.iinfo(np.int64).max)
    fits = e.temp <= limit
    np.minimum.at(best_fit, s.orig[c.op[fits]], e.total[fits])
    extra = _with_serial(s, c, e, ~fits & (e.total < best_fit[s.orig[c.op]]), limit)
    if len(extra.op):
        e2 = estimate(s, extra, t)
        c = _concat(c, extra)
        e = _concat_costs(e, e2)
    fits = e.temp <= limit
    op = s.orig[c.op]  # the op each candidate plans (transformed variants plan their op)
    any_fit = np.zeros(n, bool)
    any_fit[op[fits]] = True
    score = np.where(fits, e.total, np.iinfo(np.int64).max // 4)
    score = np.where(any_fit[op], score, e.temp)
    tiles = c.pg * c.pf * c.pkh * c.pi * c.po
    order = np.lexsort((tiles, score, op))
    first = np.ones(len(order), bool)
    first[1:] = op[order][1:] != op[order][:-1]
    best = order[first]  # one per op, in op order
    return _take(c, best), _take_costs(e, best), ~any_fit


def _concat(a: Candidates, b: Candidates) -> Candidates:
    return Candidates(
        *(np.concatenate([getattr(a, f), getattr(b, f)]) for f in Candidates.__dataclass_fields__)
    )


def _concat_costs(a: PlanCosts, b: PlanCosts) -> PlanCosts:
    out = {}
    for f in PlanCosts.__dataclass_fields__:
        x, y = getattr(a, f), getattr(b, f)
        out[f] = (
            {k: np.concatenate([x[k], y[k]]) for k in x}
            if isinstance(x, dict)
            else np.concatenate([x, y])
        )
    return PlanCosts(**out)


def _take_costs(e: PlanCosts, idx: np.ndarray) -> PlanCosts:
    out = {}
    for f in PlanCosts.__dataclass_fields__:
        x = getattr(e, f)
        out[f] = {k: v[idx] for k, v in x.items()} if isinstance(x, dict) else x[idx]
    return PlanCosts(**out)


def plan(a: dict, t, T: int, limit: float, pb: int) -> dict:
    """Plan the AMP ops ``a`` (lowered columns) and give the cycles of their programs on the
    largest tile share (``*_lo``: the smaller share, where it differs), keyed as
    ``engine.compiler.plan`` lays them out. The programs carry what the chosen partition
    does: the partial-sum exchanges only where the reduction depth is above 1 (the planner's
    estimate, ``planner_cycles``, counts the first stage's exchange for every plan)."""
    n = len(a["M"])
    if n == 0:
        return {}
    s = with_expanded_dims(with_combined_groups(conv_shapes(a, t, pb)))
    c, e, none_fit = search(s, t, T, limit)
    return programs(s, c, e, none_fit, t, T)


def programs(s: ConvShapes, c: Candidates, e: PlanCosts, none_fit, t, T: int) -> dict:
    """The programs' cycles of one chosen candidate per op (``c``, ``e`` in op order)."""
    pb = s.pb
    z = e.sizes
    setup = int(t.exchange_setup_cycles)
    eb = s.eb
    serial = c.si * c.so
    tiles = z["tiles"]
    M = s.M[c.op]
    r = M - (M // c.pf) * c.pf
    n_max = np.where(r > 0, r * (tiles // c.pf), tiles)
    depth = z["depth"]
    reduces = depth > 1
    exch = (e.input_exchange + e.weight_exchange + e.transform_exchange + e.tile_transform) * serial
    recv = ((z["n_in"] - z["n_in"] // c.po) + (z["n_w"] - z["n_w"] // c.pf)) * eb
    # the smaller field share (floor) of the other tiles, for the main compute set
    Ft_lo = np.maximum(M // c.pf, 1)
    lo = _partial_calc(t, s, c, z, Ft_lo)
    red_ex = np.where(reduces[:, None], e.reduce_exchange, 0) * serial[:, None]
    red_ex = np.where(red_ex > 0, red_ex + setup, 0)
    red_cs = np.where(reduces[:, None], e.reduce, 0) * serial[:, None]
    cast = np.where(reduces, 0, e.reduce[:, 0]) * serial + e.output_cast
    outputs = _cdiv(z["n_out"], depth)
    red_recv = np.zeros_like(red_ex)
    size = z["n_out"]
    d = reduction.stage_depths(depth)
    for k in range(reduction.MAX_STAGES):
        red_recv[:, k] = np.where(d[:, k] > 0, size * pb, 0)
        size = _cdiv(size, np.maximum(d[:, k], 1))
    out = {
        "pg": c.pg,
        "pf": c.pf,
        "pkh": c.pkh,
        "pi": c.pi,
        "po": c.po,
        "si": c.si,
        "so": c.so,
        "s": serial,
        "gpt": np.where(c.chains > 0, 1, z["Gt"]),  # vertices per tile: one SLIC vertex
        "pk": depth,
        "tiles_used": np.minimum(tiles, T),
        "n_max": np.minimum(n_max, tiles),
        "none_fit": none_fit,
        "planner_cycles": e.total,
        "temp": e.temp,
        "exch": exch + setup * serial,
        "recv": recv * serial,
        "compute": (e.partial_calc + e.serial_extra) * serial,
        "compute_lo": (lo + e.serial_extra) * serial,
        "combine": s.combine[c.op],
        "expand": s.expand[c.op],
        "cg": c.cg,
        "ci": c.ci,
        "co": c.co,
        "chains": c.chains,
        "hmac": c.hmac,
        "prearr": e.transform_copy * serial,
        "red_ex_stages": red_ex,
        "red_cs_stages": red_cs,
        "red_recv_stages": red_recv * serial[:, None],
        "red_ex": red_ex.sum(axis=1),
        "red_cs": red_cs.sum(axis=1),
        "cast": cast,
        "out_ex": np.where(e.output_exchange > 0, e.output_exchange * serial + setup, 0),
        "out_copy": e.output_copy * serial,
        "out_recv": e.output_exchange * t.exchange_bytes_per_cycle,
        "n_w": z["n_w"],
        "n_in": z["n_in"],
        "outputs": outputs,
    }
    return out
