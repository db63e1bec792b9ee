"""PopLibs' convolution planner in the engine against a scalar transcription of its estimate.

``ref_estimate`` below follows github.com/graphcore/poplibs ``lib/poplin/ConvModel.cpp``
(``addEstimates``: ``addExchangeCycleEstimates`` with ``ExchangeEstimator.hpp``,
``addReduceCycleEstimate``, ``addTransformCycleEstimate``, ``addConvTempMemoryEstimate``, the
serial-split terms), ``lib/poplin/ConvReducePlan.cpp`` and ``lib/poplin/PerformanceEstimation.hpp``
(``estimateConvReduceCycles``, ``getReduceCycleEstimate`` in tests/poplibs_costs.py,
``estimateCastCycles``) line by line, with scalar loops as the C++ has them; the engine's
``engine.compiler.conv_plan`` is numpy over whole arrays of ops x candidate partitions. The AMP vertex term (``addPartialCalcCycleEstimate``)
is the engine's ``vertex_costs.amp_partials_cycles`` (tests/poplibs_costs.py ``engine_amp``), which
tests/test_vertex_costs.py checks against its own transcription.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from poplibs_costs import WORKERS, engine_amp, hmac_cycles, reduce_cycles, slic_cycles

from engine.compiler import conv_plan as cp
from engine.compiler import vertex_costs as vc
from engine.targets import get_target

MK2 = get_target("mk2")
T = MK2.tiles_per_ipu
LIMIT = 0.6 * MK2.sram_per_tile


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---- PopLibs, transcribed ---------------------------------------------------------------------


def plan_and_cost(depth: int, stages: int):
    if stages == 1:
        return [], float(depth)
    down = int(math.pow(depth, (stages - 1.0) / stages))
    p_d, c_d = plan_and_cost(down, stages - 1)
    c_d += depth / down
    p_u, c_u = plan_and_cost(down + 1, stages - 1)
    c_u += depth / (down + 1)
    return ([down, *p_d], c_d) if c_d < c_u else ([down + 1, *p_u], c_u)


def multi_stage_plan(depth: int) -> list[int]:
    stages = 3 if depth >= 125 else 2 if depth >= 16 else 1
    return plan_and_cost(depth, stages)[0]


def cast_estimate(n, vw_in, vw_out):
    per = (n + WORKERS - 1) // WORKERS
    return (max(cdiv(per, vw_in), cdiv(per, vw_out)) + 26) * WORKERS


def conv_reduce(out_size, depth, in_serial, float_out, float_partials, pbytes):
    """estimateConvReduceCycles."""
    if depth == 0:
        return 0
    if depth == 1:
        if float_out == float_partials or in_serial > 1:
            return 0
        return cast_estimate(out_size, 2 if float_partials else 4, 2 if float_out else 4)
    remaining, size, cycles = depth, out_size * depth, 0
    fast = 4 if float_partials else 8
    bank, mem = MK2.bank_bytes, MK2.sram_per_tile

    def stage(d, out_float):
        exchanged = (d - 1) * size * pbytes
        small = cdiv(exchanged, bank) * bank < mem // 16
        single = size % fast == 0 and small
        return reduce_cycles(size, d - single, out_float, float_partials, single)

    for d in multi_stage_plan(depth):
        this = cdiv(remaining, d)
        remaining = cdiv(remaining, this)
        size = cdiv(size, this)
        cycles += stage(this, float_out if remaining == 1 else float_partials)
    if remaining > 1:
        size = cdiv(size, remaining)
        cycles += stage(remaining, float_out)
    return cycles


def remaining_exchange(partial_sums, depth, pbytes):
    """partialSumExchangeCycleEstimate (stages after the first)."""
    if depth <= 1:
        return 0
    remaining, size, cycles, first = depth, partial_sums, 0, True
    for d in multi_stage_plan(depth):
        if not first:
            cycles += cdiv(size * pbytes * 16, 4 * 16)
        this = cdiv(remaining, d)
        size = cdiv(size, this)
        remaining = cdiv(remaining, this)
        first = False
    if remaining > 1 and not first:
        cycles += cdiv(size * pbytes * 16, 4 * 16)
    return cycles


def reduce_temp(outputs, depth, pbytes):
    if depth <= 1:
        return 0
    remaining, n, best = depth, outputs * depth, 0
    for d in multi_stage_plan(depth):
        this = cdiv(remaining, d)
        best = max(best, n * pbytes)
        n = cdiv(n, this)
        remaining = cdiv(remaining, this)
    return best


def dynamic_slice(elements, splits, eb):
    if splits == 1:
        return 0
    size = cdiv(elements, splits)
    per = (size + WORKERS - 1) // WORKERS
    vw = 64 // (16 if eb == 2 else 32)
    return 11 + 1 + 6 + 1 + 6 + (39 + (24 + 2 * (per // vw))) * WORKERS


def ref_estimate(shape: dict, part: dict, eb: int, pb: int) -> tuple[int, int]:
    """(totalCycles, totalTempBytes) of one partition, as addEstimates sums them. ``part``
    may name the vertex (``cg`` convGroupsPerGroup, ``ci`` / ``co`` channels per group,
    ``chains`` > 0 for SLIC; by default the AMP vertex) and a ``combine`` factor
    (combineConvGroups: ceil(G / f) groups of f x the channels, every operand rearranged)."""
    G, M, C, N, k, width = (shape[x] for x in ("G", "M", "C", "N", "kernel", "width"))
    swap = part.get("swap", False)
    if swap:  # ConvPlan.cpp swapOperands: the batch (a matmul's rows) and the output channels
        M, N, shape = N, M, dict(shape, dup=1)
    expand = part.get("expand", False)
    if expand:  # expandDim of both field dimensions: the kernel into the input channels
        C, k, shape = C * k, 1, dict(shape, in_width=width, dup=1)
    combine = part.get("combine", 1)
    G, C, N = cdiv(G, combine), C * combine, N * combine
    role, conv, dup = shape["role"], shape["conv"], shape.get("dup", 1)
    ci = part.get("ci", vc.weights_per_conv_unit(MK2, eb))
    co = part.get("co", vc.conv_units(MK2, eb, pb))
    cg, chains = part.get("cg", 1), part.get("chains", 0)
    kw = max(round(math.sqrt(k)), 1)
    kh = cdiv(k, kw)
    pg, pf, pkh, pi, po, si, so = (part[x] for x in ("pg", "pf", "pkh", "pi", "po", "si", "so"))
    Ft, kht = cdiv(M, pf), cdiv(kh, pkh)
    Cgt, Ngt = cdiv(cdiv(C, ci), pi * si), cdiv(cdiv(N, co), po * so)
    Ggt = cdiv(cdiv(G, cg), pg)  # conv-group grains on the tile
    Gt = Ggt * cg
    Hi = shape.get("in_width", width)
    st = max(round(Hi / width), 1) if width > 0 else 1
    kernel_zeros = input_zeros = 0
    if width > 0:  # the tile's input range (getMaxInputRangeSize, square maps)
        H = width
        if Ft >= H * H:
            rows, cols, b = H, H, cdiv(Ft, H * H)
        else:
            rows, cols, b = cdiv(Ft, H), min(Ft, H), 1
        in_field = b * min((rows - 1) * st + kht, Hi) * min((cols - 1) * st + kw, Hi)
        if chains:  # applyPadding: kernel width to whole 1 x 4 windows, input padding
            kw_pad = cdiv(kw, 4) * 4 - kw
            pad_h = max((H - 1) * st + kh - Hi, 0)
            pad_w = max((H - 1) * st + kw - Hi, 0) + kw_pad
            kernel_zeros = Gt * kht * kw_pad * Cgt * ci * Ngt * co
            input_zeros = Gt * b * ((rows + pad_h) * (cols + pad_w) - rows * cols) * Cgt * ci
    else:
        in_field = Ft
    in_pos = M * Hi * Hi // (width * width) if width > 0 else M
    n_in = max(cdiv(in_field * Cgt * ci * Gt, dup), in_field * Gt)
    n_w = kht * kw * Cgt * ci * Ngt * co * Gt
    n_out = Ft * Ngt * co * Gt
    tiles = pg * pf * pkh * pi * po
    depth = pkh * pi
    # exchange
    rate16 = 4 * 16 * (2 if po % 2 == 0 else 1)
    ex_in = cdiv((n_in - n_in // po) * eb * 16, rate16)
    ex = cdiv((n_w - n_w // pf) * eb * 16, 4 * 16)
    ex += cdiv(n_out * pb * 16, 4 * 16) + remaining_exchange(n_out, depth, pb)
    # vertex
    ex += cdiv(kernel_zeros * eb * 16, 4 * 16) + cdiv(input_zeros * eb * 16, rate16)
    row_width = min(width, Ft) if width > 0 else Ft
    if part.get("hmac"):
        calc = hmac_cycles(Ft, ci, co, Cgt, Ngt, Gt, eb, pb)
    elif chains:
        calc = slic_cycles(Ft, row_width, kht, kw, Ggt, cg, ci, chains, pb, stride=st)
    else:
        calc = engine_amp(MK2, Ft, row_width, kht, kw, Cgt, Ngt, Gt, eb, pb, one_by_one=k == 1)
    outputs = cdiv(n_out, depth)
    red = conv_reduce(outputs, depth, si, eb == 4, pb == 4, pb)
    # rearrangements
    wu = conv and role == "gw"
    # a matmul is a fully connected pass: unswapped, swapOperands != isMatmulOrFullyConnected
    # rearranges its input and weights and != outputShouldBeSwapped its output; FC_TRAINING_WU
    # (not joint) rearranges input and output whatever the orientation
    mm_wu = not conv and role == "gw"
    mm_plain = not conv and not swap
    pad_in, pad_out = conv and C % ci != 0, conv and N % co != 0
    r_in = wu or pad_in or mm_wu or mm_plain
    r_w = wu or pad_in or pad_out or mm_plain
    r_out = wu or pad_out or mm_wu or mm_plain
    if combine > 1:
        r_in = r_w = r_out = True
    if expand:  # addTransformCycleEstimate: expandDims rearranges inputs and weights
        r_in = r_w = True
    wpu = vc.weights_per_conv_unit(MK2, eb)  # the next layer's assumed input grouping
    regroup_out = conv and not wu and co != wpu and not r_out
    regroup_w = conv and role == "fwd" and co % wpu != 0 and not r_w
    gran = 2 if eb == 4 else 4
    out_ch = N
    f_io = 4 if (C * out_ch) % gran == 0 else 3
    f_o = 4 if out_ch % gran == 0 else 3
    Cp, Np, Gp = cdiv(C, ci) * ci, cdiv(N, co) * co, cdiv(G, cg) * cg
    reorder = min(8, eb)
    in_b = cdiv(cdiv(in_pos * Cp * Gp, dup) * eb, tiles)
    w_b = cdiv(k * Cp * Np * Gp * eb, tiles)
    out_b = cdiv(M * Np * Gp, tiles) * eb
    copy = xch = out_copy = out_x = temp_tr = 0
    in_copy = cdiv(in_b * 5, reorder * f_io) if r_in else 0
    in_xch = cdiv(in_b, 4) if r_in else 0
    in_tr = in_b if r_in else 0
    if r_w:
        copy += cdiv(w_b * 5, reorder * f_io)
        xch += cdiv(w_b, 4)
        temp_tr = max(temp_tr, w_b)
    elif regroup_w:
        copy += cdiv(cdiv(k * Cp * Np * Gp, tiles) * eb * 5, f_o * min(8, co * eb))
        temp_tr = max(temp_tr, w_b)
    if r_out:
        out_copy += cdiv(out_b * 5, reorder * f_o)
        out_x += cdiv(out_b, 4)
    elif regroup_out:
        out_copy += cdiv(out_b * 5, min(8, co * eb) * f_o)
    if r_out or regroup_out:
        temp_tr = max(temp_tr, out_b)
    # serial splits
    extra = dynamic_slice(cdiv(in_pos * C * G, tiles), si, eb)
    extra += dynamic_slice(cdiv(k * C * N * G, tiles), si * so, eb)
    extra += dynamic_slice(outputs, so, pb)
    if si > 1:
        vw = 64 // (8 * pb)
        extra += 11 + WORKERS * (58 + cdiv(cdiv(outputs, WORKERS), vw) * 3)
    out_cast = cast_estimate(outputs, 64 // (8 * pb), 64 // (8 * eb)) if si > 1 else 0
    # broadcastInputBeforeLoop (output-channel serial splits only): the inputs' exchange and
    # rearrangement once, outside the loop; their bytes (rearranged and as used) live through it
    bibl = part.get("bibl", False)
    once = ex_in + in_copy + in_xch if bibl else 0
    loop_in = 0 if bibl else ex_in + in_copy + in_xch
    total = (extra + copy + xch + loop_in + out_copy + out_x + ex + calc + red) * si * so
    total += out_cast + once
    # addRearrangeBeforeSliceEstimate: a serially split fully connected pass (not joint)
    # exchanges and rearranges its weights per tile once, and keeps the copy through the loop
    before = 0
    if not conv and si * so > 1:
        w_tile = cdiv(k * C * N * G, tiles)
        total += cdiv(w_tile * eb * 16, 4 * 16) + w_tile
        before = w_tile * eb
    partials = n_out * pb
    if chains:  # the SLIC vertex's buffer: one conv-group grain's partials + 200 bytes
        partials += cdiv(partials, Ggt) + 200
    conv_temp = (0 if bibl else n_in) * eb + n_w * eb + partials + (kernel_zeros + input_zeros) * eb
    tr = temp_tr if bibl else max(temp_tr, in_tr)
    temp = before + max(2 * tr, conv_temp, reduce_temp(outputs, depth, pb), before)
    temp += in_tr + n_in * eb if bibl else 0
    temp += outputs * pb if si > 1 else 0
    return total, temp


# ---- shapes ---------------------------------------------------------------------------------


def conv(hw, cin, cout, k=9, role="fwd", batch=64, stride=1):
    if role == "gw":
        return dict(G=1, M=cin * k, C=batch * hw * hw, N=cout, kernel=1, width=0, dup=k)
    M = batch * hw * hw
    if role == "gi":
        cin, cout = cout, cin
    return dict(G=1, M=M, C=cin, N=cout, kernel=k, width=hw, in_width=hw * stride)


SHAPES = [
    # (shape, role, conv, acts bytes, partials bytes)
    (conv(2, 512, 512), "fwd", True, 2, 2),
    (conv(2, 512, 512), "fwd", True, 2, 4),
    (conv(2, 2048, 512, k=1), "fwd", True, 2, 2),
    (conv(2, 512, 2048, k=1), "fwd", True, 2, 4),
    (conv(2, 512, 512, role="gi"), "gi", True, 2, 2),
    (conv(2, 512, 512, role="gw"), "gw", True, 2, 2),
    (conv(2, 1024, 2048, k=1, role="gw"), "gw", True, 2, 4),
    (conv(4, 256, 256), "fwd", True, 2, 2),
    (conv(4, 256, 256), "fwd", True, 2, 4),
    (conv(4, 1024, 256, k=1), "fwd", True, 2, 2),
    (conv(4, 256, 1024, k=1, role="gi"), "gi", True, 2, 2),
    (conv(4, 256, 256, role="gw"), "gw", True, 2, 4),
    (conv(4, 256, 256), "fwd", True, 4, 4),
    (conv(8, 128, 128), "fwd", True, 2, 2),
    (conv(8, 128, 128, role="gw"), "gw", True, 2, 2),
    (conv(16, 64, 64), "fwd", True, 2, 2),
    (conv(16, 64, 64), "fwd", True, 4, 4),
    (conv(32, 3, 64, k=49, batch=4), "fwd", True, 2, 2),  # padded input channels
    (conv(2, 512, 10, k=1), "fwd", True, 2, 2),  # padded output channels
    (conv(2, 256, 512, stride=2), "fwd", True, 2, 2),  # 4 x 4 -> 2 x 2, stride 2
    (conv(2, 1024, 2048, k=1, stride=2), "fwd", True, 2, 4),  # stride-2 downsample
    (dict(G=1, M=512, C=1024, N=4096, kernel=1, width=0), "fwd", False, 2, 2),
    (dict(G=1, M=1024, C=4096, N=1024, kernel=1, width=0), "gi", False, 2, 4),
    (dict(G=1, M=1024, C=512, N=1024, kernel=1, width=0), "gw", False, 2, 2),
    (dict(G=64, M=128, C=64, N=128, kernel=1, width=0), "fwd", False, 2, 2),
    (dict(G=1, M=4096, C=4096, N=4096, kernel=1, width=0), "fwd", False, 2, 2),  # serial
]


def _a(shape: dict, role: str, is_conv: bool, eb: int) -> dict:
    k = shape["kernel"]
    return {
        "G": np.array([shape["G"]]),
        "M": np.array([shape["M"]]),
        "K": np.array([shape["C"] * k]),
        "N": np.array([shape["N"]]),
        "cin": np.array([shape["C"]]),
        "kernel": np.array([k]),
        "row_width": np.array([shape["width"]]),
        "a_dup": np.array([shape.get("dup", k)]),
        "in_width": np.array([shape.get("in_width", shape["width"])]),
        "db": np.array([eb]),
        "conv": np.array([is_conv]),
        "role": np.array([role], object),
    }


def _chosen(p: dict) -> dict:
    part = {x: int(p[x][0]) for x in ("pg", "pf", "pkh", "pi", "po", "si", "so")}
    return dict(part, expand=bool(p["expand"][0]), swap=bool(p["swap"][0]), bibl=bool(p["bibl"][0]))


@pytest.mark.parametrize(("shape", "role", "is_conv", "eb", "pb"), SHAPES)
def test_planner_estimate_matches_poplibs_transcription(shape, role, is_conv, eb, pb):
    sh = dict(shape, role=role, conv=is_conv)
    p = cp.plan(_a(shape, role, is_conv, eb), MK2, T, LIMIT, pb)
    part = _chosen(p)
    total, temp = ref_estimate(sh, part, eb, pb)
    assert int(p["planner_cycles"][0]) == total, part
    assert int(p["temp"][0]) == temp, part
    assert part["pg"] * part["pf"] * part["pkh"] * part["pi"] * part["po"] <= T
    assert temp <= LIMIT  # every shape here has a plan that fits


def _expandable(shape: dict, role: str, is_conv: bool, eb: int) -> bool:
    """The engine's expandDims candidates: a forward convolution with a strided 1 x 1 kernel, or
    with fewer input channels (per group) than one grain and a larger kernel."""
    if not (is_conv and role == "fwd" and shape["width"] > 0):
        return False
    k, ci = shape["kernel"], vc.weights_per_conv_unit(MK2, eb)
    strided = shape.get("in_width", shape["width"]) > shape["width"]
    return (k == 1 and strided) or (shape["C"] < ci and k > 1)


@pytest.mark.parametrize("i", [0, 5, 7, 10, 13, 17, 19, 20, 21])
def test_search_finds_the_cheapest_power_of_two_partition(i):
    """No partition of powers of two (what the engine's grid holds besides "all tiles left")
    that fits is cheaper, by the transcription, than the plan the engine chose, with and
    without the expansion of the field dimensions where the engine tries it."""
    shape, role, is_conv, eb, pb = SHAPES[i]
    sh = dict(shape, role=role, conv=is_conv)
    p = cp.plan(_a(shape, role, is_conv, eb), MK2, T, LIMIT, pb)
    best = int(p["planner_cycles"][0])
    ci, co = vc.weights_per_conv_unit(MK2, eb), vc.conv_units(MK2, eb, pb)
    pg = min(shape["G"], T)
    tr = T // pg

    def pows(limit):
        return sorted({min(2**e, limit) for e in range(12)})

    for expand in (False, True) if _expandable(shape, role, is_conv, eb) else (False,):
        k = 1 if expand else shape["kernel"]
        C = shape["C"] * shape["kernel"] if expand else shape["C"]
        kh = cdiv(k, max(round(math.sqrt(k)), 1))
        for pi in pows(cdiv(C, ci)):
            for po in pows(cdiv(shape["N"], co)):
                for pkh in range(1, kh + 1):
                    for pf in pows(shape["M"]):
                        if pi * po * pkh * pf > tr:
                            continue
                        part = dict(pg=pg, pf=pf, pkh=pkh, pi=pi, po=po, si=1, so=1)
                        total, temp = ref_estimate(sh, dict(part, expand=expand), eb, pb)
                        if temp <= LIMIT:
                            assert best <= total, (part, expand)


@pytest.mark.parametrize("i", [17, 20])
def test_expanded_dims_remove_strided_inputs_and_padded_channels(i):
    """A 7 x 7 stem of 3 channels and a stride-2 1 x 1 downsample: the expansion of both field
    dimensions (PopLibs' expandDims) is a candidate; the chosen plan is the cheaper of the
    expanded and the plain one, and the expanded plan's tile holds no strided-away input."""
    shape, role, is_conv, eb, pb = SHAPES[i]
    a = _a(shape, role, is_conv, eb)
    s = cp.with_expanded_dims(cp.conv_shapes(a, MK2, pb))
    assert len(s.M) == 2 and bool(s.expand[1]) and int(s.orig[1]) == 0
    assert int(s.C[1]) == shape["C"] * shape["kernel"] and int(s.kernel[1]) == 1
    assert int(s.stride[1]) == 1 and int(s.in_width[1]) == shape["width"]
    _, e, _ = cp.search(s, MK2, T, LIMIT)
    chosen = int(e.total[0])
    for expand in (False, True):  # the best of each kind alone
        only = cp.ConvShapes(
            **{
                f: (
                    getattr(s, f)[[int(expand)]]
                    if isinstance(getattr(s, f), np.ndarray)
                    else getattr(s, f)
                )
                for f in cp.ConvShapes.__dataclass_fields__
            }
        )
        only.orig = np.zeros(1, np.int64)
        _, e1, _ = cp.search(only, MK2, T, LIMIT)
        assert chosen <= int(e1.total[0])
        if expand:  # inputs on a tile: the whole output rows it computes, nothing strided
            z, w = e1.sizes, shape["width"]
            rows = cdiv(int(z.field[0]), w)
            assert int(z.inputs[0]) <= rows * w * cdiv(int(s.C[1]), 16) * 16


def test_serial_splits_when_the_temporaries_do_not_fit():
    shape, role, is_conv, eb, pb = SHAPES[-1]
    a = _a(shape, role, is_conv, eb)
    roomy = cp.plan(a, MK2, T, LIMIT, pb)
    tight_limit = 0.15 * MK2.sram_per_tile
    tight = cp.plan(a, MK2, T, tight_limit, pb)
    assert int(tight["s"][0]) > int(roomy["s"][0]) and int(tight["temp"][0]) <= tight_limit
    assert int(tight["planner_cycles"][0]) > int(roomy["planner_cycles"][0])
    sh = dict(shape, role=role, conv=is_conv)
    assert int(tight["planner_cycles"][0]) == ref_estimate(sh, _chosen(tight), eb, pb)[0]


def test_nothing_fits_doubles_the_bound_as_create_plan_does():
    """``ConvPlan.cpp`` ``createPlan``: when no plan fits the proportion, ``minimizeMemory``
    doubles the bound until one fits and takes the fastest within it (flagged: the compile
    notes name it). A 4,096-cube matmul at 0.1 (its weights per tile rearranged before the
    serial loop and kept through it take 2 x 22.8 KB of the 63.9 KB) plans within 0.2, as
    the plan at 0.2 itself."""
    shape, role, is_conv, eb, pb = SHAPES[-1]
    a = _a(shape, role, is_conv, eb)
    sram = MK2.sram_per_tile
    none = cp.plan(a, MK2, T, 0.1 * sram, pb)
    double = cp.plan(a, MK2, T, 0.2 * sram, pb)
    assert bool(none["none_fit"][0]) and not bool(double["none_fit"][0])
    assert 0.1 * sram < int(none["temp"][0]) <= 0.2 * sram
    assert _chosen(none) == _chosen(double)
    # far below anything: the bound doubles up to twice the tile, and a plan is taken
    tiny = cp.plan(a, MK2, T, 1000, pb)
    assert bool(tiny["none_fit"][0]) and int(tiny["temp"][0]) <= 2 * sram * 2


#: BERT-Large SQuAD fine-tuning's matmuls (SL 384; micro-batch 2 and 1): the FFN, the
#: attention projections and the attention's batched matmuls, forward and gradients
SQUAD = [
    (dict(G=1, M=768, C=1024, N=4096, kernel=1, width=0), "fwd"),
    (dict(G=1, M=768, C=4096, N=1024, kernel=1, width=0), "fwd"),
    (dict(G=1, M=384, C=1024, N=4096, kernel=1, width=0), "fwd"),
    (dict(G=1, M=768, C=1024, N=4096, kernel=1, width=0), "gi"),
    (dict(G=1, M=1024, C=768, N=4096, kernel=1, width=0), "gw"),
    (dict(G=1, M=768, C=1024, N=1024, kernel=1, width=0), "fwd"),
    (dict(G=32, M=384, C=64, N=384, kernel=1, width=0), "fwd"),
    (dict(G=32, M=384, C=384, N=64, kernel=1, width=0), "fwd"),
]


def _brute_best(sh: dict, eb: int, pb: int, limit: float) -> tuple[int, dict]:
    """The cheapest fitting partition by the transcription over both orientations (PopLibs'
    ``getSwapOperandCandidates`` for a fully connected pass), power-of-two parallel splits and
    output- or input-channel serial splits up to the channel grains (one kind at a time)."""
    ci, co = vc.weights_per_conv_unit(MK2, eb), vc.conv_units(MK2, eb, pb)
    pg = min(sh["G"], T)
    best, arg = None, {}

    def pows(limit):
        return sorted({min(2**e, limit) for e in range(12)})

    for swap in (False, True):
        M, N = (sh["N"], sh["M"]) if swap else (sh["M"], sh["N"])
        for pi in pows(cdiv(sh["C"], ci)):
            for po in pows(cdiv(N, co)):
                for pf in pows(M):
                    if pg * pi * po * pf > T:
                        continue
                    serial = [(1, 1)]
                    serial += [(si, 1) for si in pows(cdiv(cdiv(sh["C"], ci), pi)) if si > 1]
                    serial += [(1, so) for so in pows(cdiv(cdiv(N, co), po)) if so > 1]
                    for (si, so), bibl in itertools.product(serial, (False, True)):
                        if bibl and so == 1:
                            continue
                        part = dict(pg=pg, pf=pf, pkh=1, pi=pi, po=po, si=si, so=so)
                        part.update(swap=swap, bibl=bibl)
                        total, temp = ref_estimate(sh, part, eb, pb)
                        if temp <= limit and (best is None or total < best):
                            best, arg = total, part
    assert best is not None
    return best, arg


@pytest.mark.parametrize("proportion", [0.08, 0.10, 0.15, 0.25])
@pytest.mark.parametrize(("shape", "role"), SQUAD)
def test_squad_matmuls_at_low_proportions_plan_as_poplibs(shape, role, proportion):
    """At the SQuAD rows' proportions (0.08 to 0.25, half partials) the plan of each matmul is
    PopLibs' by the transcription: its estimate and temporaries are the transcription's of the
    same partition and orientation, they fit, and no power-of-two partition in either
    orientation with any serial split is cheaper. Both orientations are candidates; the
    unswapped one pays for rearranging its input, weights and output, a serially split plan
    for its weights rearranged once before the loop, and an output-channel split may exchange
    its inputs once before the loop (broadcastInputBeforeLoop)."""
    eb, pb = 2, 2
    limit = proportion * MK2.sram_per_tile
    sh = dict(shape, role=role, conv=False)
    p = cp.plan(_a(shape, role, False, eb), MK2, T, limit, pb)
    part = _chosen(p)
    total, temp = ref_estimate(sh, part, eb, pb)
    assert int(p["planner_cycles"][0]) == total and int(p["temp"][0]) == temp, part
    assert temp <= limit and not bool(p["none_fit"][0])
    best, arg = _brute_best(sh, eb, pb, limit)
    assert int(p["planner_cycles"][0]) <= best, (part, arg)


def test_matmul_orientations_and_their_rearrangements():
    """``addTransformCycleEstimate`` for a fully connected pass: swapped, a forward matmul
    rearranges nothing; unswapped, its input, weights and output (more cycles and twice the
    largest as temporaries). ``addRearrangeBeforeSliceEstimate``: a serially split matmul
    exchanges its weights per tile once (4 bytes a cycle) and copies them (a cycle per
    element), and keeps them (their bytes added to the temporaries); a convolution does not."""
    sh = dict(G=1, M=768, C=1024, N=4096, kernel=1, width=0, role="fwd", conv=False)
    part = dict(pg=1, pf=46, pkh=1, pi=8, po=4, si=1, so=4)
    swapped = ref_estimate(sh, dict(part, swap=True), 2, 2)
    plain = ref_estimate(sh, dict(part, swap=False), 2, 2)
    assert plain[0] > swapped[0] and plain[1] > swapped[1]
    s = cp.with_swapped_operands(cp.conv_shapes(_a(sh, "fwd", False, 2), MK2, 2))
    assert list(s.M) == [768, 4096] and list(s.N) == [4096, 768] and list(s.swap) == [0, 1]
    assert list(s.orig) == [0, 0]
    fields = (
        "op",
        "pg",
        "pf",
        "pkh",
        "pi",
        "po",
        "si",
        "so",
        "cg",
        "ci",
        "co",
        "chains",
        "hmac",
        "bibl",
    )
    one = np.ones(2, np.int64)
    cands = cp.Candidates(
        **{f: one * part.get(f, 0) for f in fields if f not in ("op", "cg", "ci", "co")},
        op=np.array([1, 1]),
        cg=one,
        ci=one * vc.weights_per_conv_unit(MK2, 2),
        co=one * vc.conv_units(MK2, 2, 2),
    )
    cands.so = np.array([1, 4])
    cands.hmac = np.zeros(2, bool)
    cands.bibl = np.zeros(2, bool)
    e = cp.estimate(s, cands, MK2)
    tiles = 46 * 8 * 4
    w_tile = cdiv(1024 * 768, tiles)  # the swapped matmul's weights: its rows x inner
    assert list(e.before_slice_copy) == [0, w_tile]
    assert list(e.before_slice_exchange) == [0, cdiv(w_tile * 2, 4)]
    assert (int(e.total[1]), int(e.temp[1])) == swapped  # the transcription's
    assert int(e.temp[1]) >= 2 * w_tile * 2
    # broadcastInputBeforeLoop: the same plan with its inputs exchanged once before the loop
    # costs 3 input exchanges less and keeps its inputs through the loop
    cands.bibl = np.array([False, True])
    cands.so = np.array([4, 4])
    b = cp.estimate(s, cands, MK2)
    assert (int(b.total[1]), int(b.temp[1])) == ref_estimate(
        sh, dict(part, swap=True, bibl=True), 2, 2
    )
    loop_exchange = int(b.input_exchange[0])
    assert loop_exchange > 0 and int(b.input_exchange[1]) == 0
    assert int(b.total[0]) - int(b.total[1]) == 3 * loop_exchange
    assert int(b.broadcast_exchange[1]) == loop_exchange
    # its inputs leave the loop's maximum but stay live: never fewer temporary bytes
    assert int(b.temp[1]) >= int(b.temp[0]) >= int(b.sizes.inputs[1]) * 2
    # a convolution of the same sizes keeps no weights through a serial loop
    conv_sh = cp.conv_shapes(dict(_a(sh, "fwd", True, 2), row_width=np.array([1])), MK2, 2)
    ce = cp.estimate(conv_sh, dict_to_cands(cands, 0), MK2)
    assert int(ce.before_slice_copy[1]) == 0 and int(ce.before_slice_exchange[1]) == 0


def dict_to_cands(cands, op: int):
    """``cands`` planning op ``op``."""
    return cp.Candidates(
        **{
            f: (np.full(len(cands.op), op) if f == "op" else getattr(cands, f))
            for f in cp.Candidates.__dataclass_fields__
        }
    )


def _program_cycles(p: dict) -> int:
    keys = ("exch", "compute", "prearr", "red_ex", "red_cs", "cast", "out_ex", "out_copy")
    return int(sum(p[k][0] for k in keys))


@pytest.mark.parametrize("pb", [2, 4])
def test_cycles_per_flop_rise_as_the_maps_shrink(pb):
    """ResNet's bottleneck 3 x 3 convolutions at micro-batch 64 (64 channels at 16 x 16 ...
    512 at 2 x 2: the same MACs): fewer output positions than tiles cost more per FLOP."""
    per_flop = {}
    for role in ("fwd", "gi"):
        r = []
        for hw, c in ((16, 64), (8, 128), (4, 256), (2, 512)):
            shape = conv(hw, c, c, role=role)
            p = cp.plan(_a(shape, role, True, 2), MK2, T, LIMIT, pb)
            r.append(_program_cycles(p) / (2 * 64 * hw * hw * c * 9 * c))
        per_flop[role] = r
        assert all(b > a for a, b in itertools.pairwise(r)), r
        assert r[-1] > 2 * r[0]
    # 2 x 2 maps: only 256 output positions for 1,472 tiles, so the plan splits the reduction
    # (input channels, kernel rows) and pays for partial-sum reductions
    p = cp.plan(_a(conv(2, 512, 512), "fwd", True, 2), MK2, T, LIMIT, pb)
    assert int(p["pk"][0]) > 1 and int(p["red_cs"][0]) > 0 and int(p["red_ex"][0]) > 0


def test_counts_a_profile_cannot_hold_are_refused_before_simulating(tmp_path, capsys):
    """A configuration whose programs would take more than 2^31 - 1 cycles on a tile (the
    profile's int32 per-tile counts) is refused in one sentence, with no file and no
    traceback; one just below the bound still compiles."""
    from analyser.cli import main

    out = tmp_path / "huge.h5"
    flags = ["--micro-batch-size", "65536", "--image-size", "4096", "--quiet"]
    assert main(["profile", "-o", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert "32-bit per-tile cycle counts" in err and "micro-batch" in err
    assert "Traceback" not in err and "schema" not in err
    assert err.strip().count("\n") <= 1 and not out.exists()
    import engine
    from engine.compiler import MAX_TILE_CYCLES

    ok = engine.compile({"model": "resnet50", "micro_batch_size": 1, "image_size": 64})
    assert int(ok.programs.cycles.max()) <= MAX_TILE_CYCLES
