"""Tile planning: per-op plans and the leaf programs they compile to, vectorised over ops.

Matmul / convolution (AMP) ops
    A plan partitions the problem ``G`` groups x ``M`` rows x ``K`` reduction x ``N`` columns
    over the compute tiles: groups first (independent, no extra exchange), then, for every
    candidate ``pn`` (N split) and ``pk`` (K split) among the powers of two, ``pm = tiles //
    (pn x pk)`` (M split). Each tile then holds ``Mt x Kt`` of operand A, ``Kt x Nt`` of operand B
    and ``Mt x Nt`` partials. Per-tile cycles of a candidate (PopLibs cycle estimators, lib/poplin/ConvModel.cpp):

    - exchange: ceil(received bytes / exchange bytes per cycle) + exchange setup;
    - compute: ceil(Mt x Kt' x Nt' / AMP MACs per cycle) + vertex overhead + per conv group +
      per output pass, where Kt' / Nt' are padded to the AMP input / output channel grouping;
    - reduction when pk > 1: the partials go to their owner tile (exchange) and are summed:
      partials x ceil(outputs per tile / vector width);
    - one internal sync per superstep.

    Temporary memory per tile = operands + partials (+ reduction buffer); it must fit in the
    available memory proportion x tile SRAM. When it does not, the plan runs ``s`` serial splits
    of M (operand B stays resident): temporaries shrink s-fold, fixed overheads are paid s times.
    The fastest candidate that fits wins (argmin over a candidates x ops array).

    Backward ops add a PreArrange copy (about 1 cycle per element, PopLibs' rearrangement estimates) of the operand
    whose layout differs (weights for input gradients, activations for weight gradients);
    16.32 adds a cast of the FP32 master weights before the exchange.

Other ops (element-wise, normalisation, pooling, optimiser updates, loss)
    Spread linearly over ``min(tiles, bytes / min_bytes_per_tile)`` tiles; cycles per tile from
    the PopLibs element-wise estimate 11 + 6 x (27 + ceil(n / 6 / vector width) x 3) per pass
    (PopLibs reduction estimates); cross-tile reductions (batch-norm statistics, global pooling, LAMB norms) add
    an exchange of partials and a reduce compute set.

Output: program rows (struct of arrays) in op order, and per-op plan facts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.compiled import T_EXCHANGE, T_ONTILE, T_SYNC
from engine.compiler import conv_plan, reduction, vertex_costs


def _ceil_div(a, b):
    return -(-a // b)


@dataclass
class OpPlans:
    tiles_used: np.ndarray
    tile_start: np.ndarray
    serial_splits: np.ndarray
    temp_per_tile: np.ndarray  # bytes on each used tile (max)
    programs: dict[str, np.ndarray]  # program columns (op-relative), see build_programs
    vertex_types: dict[str, np.ndarray]
    notes: list[str]


def vector_width(db, t) -> np.ndarray:
    """Elements per vector for elements of ``db`` bytes: the target's float (4-byte) and half
    (2-byte) widths; other sizes from the same datapath (``vector_width_float`` x 4 bytes)."""
    db = np.asarray(db)
    datapath = t.vector_width_float * 4
    other = np.maximum(datapath // np.maximum(db, 1), 1)
    return np.where(db == 4, t.vector_width_float, np.where(db == 2, t.vector_width_half, other))


def plan_amp(a: dict[str, np.ndarray], t, T: int, limit: float, rate: int, pb: int) -> dict:
    """Choose a plan per AMP op with PopLibs' convolution planner (``engine.compiler.conv_plan``)
    and give its programs' cycles; ``rate`` is kept for callers (the planner reads the AMP
    rate from the target)."""
    return conv_plan.plan(a, t, T, limit, pb)


def _plan_amp_distinct(a: dict[str, np.ndarray], t, T: int, limit: float, pb: int) -> dict:
    """:func:`plan_amp` of the distinct ops only, spread back to every op: an op's plan depends
    on its own row alone (and on the largest ``db``, the same over the distinct rows), and
    repeated layers give the same rows (ResNet-101's 23 identical blocks, BERT's 24 encoder
    layers): the same plans at a fraction of the ops x candidates work."""
    n = len(a["M"])
    if n < 2:
        return conv_plan.plan(a, t, T, limit, pb)
    from engine.compiler.lowering import row_ids

    role_code = {r: i for i, r in enumerate(sorted(set(a["role"].tolist())))}
    cols = [np.asarray(a[k]).astype(np.int64) for k in a if k != "role"]
    cols.append(np.array([role_code[r] for r in a["role"].tolist()], np.int64))
    inverse, first = row_ids(cols)
    if len(first) == n:
        return conv_plan.plan(a, t, T, limit, pb)
    p = conv_plan.plan({k: v[first] for k, v in a.items()}, t, T, limit, pb)
    return {k: v[inverse] for k, v in p.items()}


def _plan_per_proportion(a: dict[str, np.ndarray], t, T: int, config, stage, pb: int) -> dict:
    """:func:`_plan_amp_distinct` under each op's stage's available memory proportion (PopTorch
    sets one per IPU, ``setAvailableMemoryProportion({"IPU0": ...})``; stage i runs on IPU i):
    one planning pass per distinct proportion, at most one per IPU."""
    amps = np.asarray(config.amp_per_stage, dtype=np.float64)
    op_amp = amps[np.minimum(np.asarray(stage, np.int64), len(amps) - 1)]
    values = np.unique(op_amp)
    if len(values) == 1:
        return _plan_amp_distinct(a, t, T, float(values[0]) * t.sram_per_tile, pb)
    out: dict[str, np.ndarray] = {}
    for v in values:
        sel = np.flatnonzero(op_amp == v)
        part = _plan_amp_distinct({k: x[sel] for k, x in a.items()}, t, T, v * t.sram_per_tile, pb)
        for k, x in part.items():
            if k not in out:
                out[k] = np.zeros((len(op_amp), *np.shape(x)[1:]), dtype=np.asarray(x).dtype)
            out[k][sel] = x
    return out


#: Program slots of one op, in execution order: (slot name, program type).
#: Reductions run up to four stages (``engine.compiler.reduction``): stage k's exchange and
#: compute set are ``REDUCE_STAGES[k]``, each after its own sync; then the cast of the
#: partials and the rearrangement of the outputs (PopLibs' convolution planner).
SLOTS = (
    ("sync_a", T_SYNC),
    ("cast", T_ONTILE),
    ("sync_b", T_SYNC),
    ("exch", T_EXCHANGE),
    ("prearr", T_ONTILE),
    ("sync_c", T_SYNC),
    ("main", T_ONTILE),
    ("sync_d", T_SYNC),
    ("rexch", T_EXCHANGE),
    ("red", T_ONTILE),
    ("sync_e", T_SYNC),
    ("rexch2", T_EXCHANGE),
    ("red2", T_ONTILE),
    ("sync_f", T_SYNC),
    ("rexch3", T_EXCHANGE),
    ("red3", T_ONTILE),
    ("sync_g", T_SYNC),
    ("rexch4", T_EXCHANGE),
    ("red4", T_ONTILE),
    ("sync_h", T_SYNC),
    ("ocast", T_ONTILE),
    ("sync_i", T_SYNC),
    ("oexch", T_EXCHANGE),
    ("orearr", T_ONTILE),
)
#: (sync, exchange, compute set) of each reduction stage
REDUCE_STAGES = (
    ("sync_d", "rexch", "red"),
    ("sync_e", "rexch2", "red2"),
    ("sync_f", "rexch3", "red3"),
    ("sync_g", "rexch4", "red4"),
)
SLOT = {name: k for k, (name, _) in enumerate(SLOTS)}

_DT_NAME = {4: "float", 2: "half", 1: "unsigned char"}


@dataclass
class SlotTable:
    """Per op and program slot (ops x SLOTS): presence, cycles of the largest and smallest tile
    share, bytes received, vertices per tile; with per-op tiles used, tiles taking ``cycles``
    (``n_max``), serial splits and temporary bytes per tile. Filled by the planning phases."""

    present: np.ndarray
    cyc: np.ndarray
    cyc_lo: np.ndarray
    byt: np.ndarray
    verts: np.ndarray
    tiles_used: np.ndarray
    n_max: np.ndarray
    serial: np.ndarray
    temp: np.ndarray

    @classmethod
    def empty(cls, n: int) -> SlotTable:
        """No program but the first sync and the main compute set of each op."""
        k = len(SLOTS)
        t = cls(
            present=np.zeros((n, k), dtype=bool),
            cyc=np.zeros((n, k), dtype=np.int64),
            cyc_lo=np.zeros((n, k), dtype=np.int64),
            byt=np.zeros((n, k), dtype=np.int64),
            verts=np.zeros((n, k), dtype=np.int64),
            tiles_used=np.ones(n, dtype=np.int64),
            n_max=np.ones(n, dtype=np.int64),
            serial=np.ones(n, dtype=np.int64),
            temp=np.zeros(n, dtype=np.int64),
        )
        t.present[:, SLOT["sync_a"]] = True
        t.present[:, SLOT["main"]] = True
        return t


@dataclass
class Placement:
    """Where each op's programs run: first tile, and the op whose compute sets it calls."""

    start: np.ndarray
    owner: np.ndarray


def plan_ops(L, t, config, T: int) -> OpPlans:
    """Plan every lowered op and lay out its leaf programs (see the module docstring):
    AMP plans, then the other ops, syncs, placement, and the program rows."""
    n = len(L)
    pb = 4 if config.partials_dtype == "float32" else 2
    notes: list[str] = []
    tab = SlotTable.empty(n)
    _plan_amp_slots(L, t, config, T, pb, tab, notes)
    _plan_other_slots(L, t, T, tab)
    # syncs: same cycles on every tile of the IPU
    for nm in (nm for nm, ty in SLOTS if ty == T_SYNC):
        tab.cyc[:, SLOT[nm]] = t.internal_sync_cycles
        tab.cyc_lo[:, SLOT[nm]] = t.internal_sync_cycles
    # PopLibs' planners cost the largest tile share (poplin ConvModel.cpp); a smaller share can
    # cost a few cycles more in the vertex estimators (runs of 2 outputs cost more than runs of 3;
    # a ragged reduction takes a slower remainder path), which the largest share's cost covers
    tab.cyc_lo = np.minimum(tab.cyc_lo, tab.cyc)
    place = _placement(L, config, T, tab.tiles_used)
    programs, vertex_types = _program_rows(L, t, pb, tab, place)
    return OpPlans(
        tiles_used=tab.tiles_used,
        tile_start=place.start,
        serial_splits=tab.serial,
        temp_per_tile=tab.temp,
        programs=programs,
        vertex_types=vertex_types,
        notes=notes,
    )


def _plan_amp_slots(L, t, config, T: int, pb: int, tab: SlotTable, notes: list[str]) -> None:
    """Matmul / convolution ops: their plans (``conv_plan``) written into ``tab``."""
    ia = np.flatnonzero(L["amp"])
    if not len(ia):
        return
    keys = ("G", "M", "K", "N", "cin", "kernel", "row_width", "a_dup", "db", "role")
    a = {k: L[k][ia] for k in keys}
    a["conv"] = _is_conv(L)[ia]
    a["in_width"] = _input_width(L, ia, a["conv"])
    p = _plan_per_proportion(a, t, T, config, L["stage"][ia], pb)
    if p["none_fit"].any():
        names = ", ".join(L["name"][ia[p["none_fit"]]][:3])
        notes.append(
            f"{int(p['none_fit'].sum())} matmul / convolution plan(s) exceed the available "
            f"memory proportion even with serial splits (e.g. {names})."
        )
    tu = p["tiles_used"]
    tab.tiles_used[ia] = tu
    tab.n_max[ia] = p["n_max"]
    tab.serial[ia] = p["s"]
    tab.temp[ia] = p["temp"]

    def put(slot: str, hi, lo=None, on=None, nbytes=None, verts=None) -> None:
        k = SLOT[slot]
        tab.cyc[ia, k] = hi
        tab.cyc_lo[ia, k] = hi if lo is None else lo
        if on is not None:
            tab.present[ia, k] = on
        if nbytes is not None:
            tab.byt[ia, k] = nbytes
        if verts is not None:
            tab.verts[ia, k] = verts

    put("main", p["compute"], p["compute_lo"], verts=p["gpt"] * p["s"])
    put("exch", p["exch"], on=True, nbytes=p["recv"] * tu)
    # the partial-sum reduction, stage by stage
    for k, (sy, ex, red) in enumerate(REDUCE_STAGES[: reduction.MAX_STAGES]):
        on = p["red_cs_stages"][:, k] > 0
        put(sy, 0, on=on)
        put(ex, p["red_ex_stages"][:, k], on=on, nbytes=p["red_recv_stages"][:, k] * tu)
        put(red, p["red_cs_stages"][:, k], on=on, verts=np.where(on, 1, 0))
    # float partials cast to a half output (no reduction, or after input-channel serial splits)
    on = p["cast"] > 0
    put("sync_h", 0, on=on)
    put("ocast", p["cast"], on=on, verts=np.where(on, 1, 0))
    # rearranged / regrouped outputs
    on = (p["out_copy"] > 0) | (p["out_ex"] > 0)
    put("sync_i", 0, on=on)
    put("oexch", p["out_ex"], on=p["out_ex"] > 0, nbytes=(p["out_recv"] * tu).astype(np.int64))
    put("orearr", p["out_copy"], on=p["out_copy"] > 0, verts=np.where(on, 1, 0))
    # rearrangements before the convolution (the planner's transforms), and the input
    # gradient's transposed, flipped weights (outside the planner: 1 cycle per element)
    role = L["role"][ia]
    flip = np.where(
        role == "gi",
        np.ceil(p["n_w"] * t.prearrange_cycles_per_element).astype(np.int64)
        + t.elementwise_supervisor_cycles,
        0,
    )
    pre = p["prearr"] + flip
    put("prearr", pre, on=pre > 0, verts=1)
    put("sync_c", 0, on=pre > 0)
    # 16.32: cast the FP32 master weights (on the tiles holding them) to FP16 before the
    # exchange; the FP16 copy is a temporary of the op
    cast = L["wcast"][ia] > 0
    w_per_tile = _ceil_div(L["wcast"][ia], np.maximum(tu, 1))
    put("cast", np.where(cast, vertex_costs.cast_cycles(t, w_per_tile, 4, 2), 0), on=cast, verts=1)
    put("sync_b", 0, on=cast)
    tab.temp[ia] += w_per_tile * 2


def _input_width(L, ia: np.ndarray, conv: np.ndarray) -> np.ndarray:
    """A forward convolution's input row width (square maps): its input elements per sample
    over its input channels give the input positions, ``bytes_in / db - weights = B x input
    positions x G x cin`` (``cin`` counts one conv group's channels) and ``M = B x output
    positions``; 0 (the output's width) for the other ops, whose lowered rows carry no input
    field."""
    role = L["role"][ia]
    fwd = conv & ((role == "fwd") | (role == "recomp")) & (L["row_width"][ia] > 0)
    in_elems = L["bytes_in"][ia] // np.maximum(L["db"][ia], 1) - L["weight_elems"][ia]
    channels = L["cin"][ia] * np.maximum(L["G"][ia], 1)
    ratio = in_elems / np.maximum(channels * L["M"][ia], 1)
    width = np.rint(L["row_width"][ia] * np.sqrt(np.maximum(ratio, 0))).astype(np.int64)
    return np.where(fwd & (width > 0), width, 0)


def _is_conv(L) -> np.ndarray:
    # str.startswith per op: numpy.char costs a 5 ms import in a fresh process
    return np.array([str(ty).startswith("Conv") for ty in L["type"].tolist()], dtype=bool)


def _plan_other_slots(L, t, T: int, tab: SlotTable) -> None:
    """Element-wise and other ops: spread linearly, PopLibs element-wise cost per pass, and the
    cross-tile stages of their reductions (``_plan_cross_tile``)."""
    ie = np.flatnonzero(~L["amp"])
    if not len(ie):
        return
    e = L["elems"][ie]
    db = L["db"][ie]
    tu = np.clip(_ceil_div(e * db, t.min_bytes_per_tile), 1, T)
    per = _ceil_div(e, tu)
    per_lo = e // tu
    rem = e - per_lo * tu
    tab.tiles_used[ie] = tu
    tab.n_max[ie] = np.where(rem > 0, rem, tu)
    passes = L["passes"][ie]
    k = SLOT["main"]
    tab.cyc[ie, k] = vertex_costs.elementwise_cycles(t, per, passes, db)
    tab.cyc_lo[ie, k] = vertex_costs.elementwise_cycles(t, per_lo, passes, db)
    tab.verts[ie, k] = 1  # one multi-vertex per tile runs all passes
    _plan_scalar_inputs(L, t, T, tab, ie, tu)
    _plan_cross_tile(L, t, T, tab, ie, tu)


def _plan_scalar_inputs(L, t, T: int, tab: SlotTable, ie: np.ndarray, tu: np.ndarray) -> None:
    """An op that PopART / PopLibs run as several compute sets (the optimiser's decomposition,
    ``lowering.ADAM_OPS``; batch norm, ``lowering.NORM_COMPUTE_SETS``) keeps one row and one main
    compute set here: its passes' work as before, plus an internal sync for each further compute
    set over its elements (``compute_sets``) and, for each compute set over its channels only
    (``channel_sets``: a norm's statistics, the optimiser's step counter), a sync and one
    element-wise pass over ``channel_elems`` float values spread like any small op
    (``min_bytes_per_tile``), the other tiles waiting. Scalar tensors the op reads that live on
    a tile of their own (PopART's optimiser values set by the user, the step) are broadcast to
    the op's tiles by an exchange each before their compute set (Poplar moves every operand a
    vertex reads that is mapped to another tile): 4 bytes and the exchange's setup each, laid
    out as one exchange program. The sub-steps are not separate programs: their cycles are
    counted, their control code is not."""
    extra = L["compute_sets"][ie] - 1
    ch = L["channel_sets"][ie]
    more = (extra > 0) | (ch > 0)
    if more.any():
        rows = ie[more]
        ce = L["channel_elems"][rows]
        ct = np.clip(_ceil_div(ce * 4, t.min_bytes_per_tile), 1, T)
        per_channel = t.internal_sync_cycles + vertex_costs.elementwise_cycles(
            t, _ceil_div(ce, ct), 1.0, 4
        )
        add = np.maximum(extra[more], 0) * t.internal_sync_cycles + ch[more] * per_channel
        k = SLOT["main"]
        tab.cyc[rows, k] += add
        tab.cyc_lo[rows, k] += add
    n = L["scalar_in"][ie]
    on = n > 0
    if not on.any():
        return
    rows, nb = ie[on], n[on]
    k = SLOT["exch"]
    tab.present[rows, k] = True
    tab.cyc[rows, k] = nb * (_ceil_div(4, t.exchange_bytes_per_cycle) + t.exchange_setup_cycles)
    tab.cyc_lo[rows, k] = tab.cyc[rows, k]
    tab.byt[rows, k] = 4 * nb * tu[on]


def _reductions_per_op(L, ie: np.ndarray) -> np.ndarray:
    """Reductions an op runs over the same input at once: batch norm's sum and sum of squares
    (popnn ``batchNormStatistics``, forward; the gradient's two sums, backward) and LAMB's two
    norms; one otherwise (pooling)."""
    two = [str(ty).startswith(("BatchNorm", "GroupNorm", "LAMB")) for ty in L["type"][ie].tolist()]
    return np.where(np.array(two, bool), 2, 1).astype(np.int64)


def _plan_cross_tile(L, t, T: int, tab: SlotTable, ie: np.ndarray, tu: np.ndarray) -> None:
    """Cross-tile reductions (batch-norm statistics forward and backward, global pooling, LAMB
    norms) as popops plans them (``engine.compiler.reduction.popops_reduce``): the op's own
    passes compute each tile's partial statistics (popops' on-tile stage), then each
    intermediate stage and the final one exchange partials (FP32) and reduce them, each after
    a sync; the stages that run are laid out in order in the reduction slots."""
    ct = L["cross_tile"][ie] & (tu > 1)
    if not ct.any():
        return
    ic, tuc = ie[ct], tu[ct]
    nr = _reductions_per_op(L, ic)
    cols = np.maximum(np.maximum(L["stats"][ic], 1) // nr, 1)
    r = reduction.popops_reduce(t, L["elems"][ic], cols, nr, tuc, L["db"][ic], T)
    run = r["tiles"][:, 1:] > 0  # the cross-tile stages
    pos = np.cumsum(run, axis=1) - 1
    xb = t.exchange_bytes_per_cycle
    for j in range(run.shape[1]):
        on = run[:, j]
        for k, (sy, ex, red) in enumerate(REDUCE_STAGES):
            sel = on & (pos[:, j] == k)
            if not sel.any():
                continue
            rows = ic[sel]
            recv = r["recv"][sel, j + 1]
            tab.present[rows, SLOT[sy]] = True
            tab.present[rows, SLOT[ex]] = True
            tab.present[rows, SLOT[red]] = True
            tab.cyc[rows, SLOT[ex]] = _ceil_div(recv, xb) + t.exchange_setup_cycles
            tab.byt[rows, SLOT[ex]] = recv * r["tiles"][sel, j + 1]
            tab.cyc[rows, SLOT[red]] = r["compute"][sel, j + 1]
            tab.verts[rows, SLOT[red]] = 1
            tab.cyc_lo[rows, SLOT[ex]] = tab.cyc[rows, SLOT[ex]]
            tab.cyc_lo[rows, SLOT[red]] = tab.cyc[rows, SLOT[red]]
            tab.temp[rows] = np.maximum(tab.temp[rows], recv)


def _placement(L, config, T: int, tiles_used: np.ndarray) -> Placement:
    """Rotate small ops so that they spread over the chip; outlined duplicates run the owner's
    compute sets, hence on the owner's tiles."""
    n = len(L)
    start = np.zeros(n, dtype=np.int64)
    stage = L["stage"].astype(np.int64)
    for s in np.unique(stage, return_index=True)[0]:  # (the hash path imports numpy.ma)
        sel = np.flatnonzero(stage == s)
        offs = np.concatenate([[0], np.cumsum(tiles_used[sel])[:-1]])
        span = T - tiles_used[sel] + 1
        start[sel] = offs % np.maximum(span, 1)
    owner = np.arange(n)
    if config.outlining and n:
        from engine.compiler.lowering import op_signatures

        sig = op_signatures(L.cols)
        _, first = np.unique(sig, return_index=True)
        owner = first[sig]
        start = start[owner]
    return Placement(start=start, owner=owner)


_SLOT_LABEL = {
    **{nm: "Sync" for nm, ty in SLOTS if ty == T_SYNC},
    "cast": "Cast",
    "exch": "Exchange",
    "prearr": "PreArrange",
    "rexch": "ReduceExchange",
    "red": "Reduce",
    **{f"rexch{k}": f"ReduceExchange{k}" for k in (2, 3, 4)},
    **{f"red{k}": f"Reduce{k}" for k in (2, 3, 4)},
    "ocast": "CastPartials",
    "oexch": "OutputExchange",
    "orearr": "OutputRearrange",
}


def _program_rows(L, t, pb: int, tab: SlotTable, place: Placement) -> tuple[dict, dict]:
    """Flatten the present slots into program rows (op order, slot order), and the vertex
    types of their compute sets."""
    op_idx, slot_idx = np.nonzero(tab.present)
    types = np.array([ty for _, ty in SLOTS], dtype=np.uint8)[slot_idx]
    is_sync = types == T_SYNC
    main_name = np.where(L["amp"], _amp_cs_name(L), L["type"])
    suffix = np.array([nm for nm, _ in SLOTS], dtype=object)[slot_idx]
    lab = np.array([_SLOT_LABEL.get(nm, "") for nm, _ in SLOTS], dtype=object)[slot_idx]
    lab = np.where(suffix == "main", main_name[op_idx], lab)
    names = L["name"][op_idx] + "/" + lab
    c_hi = tab.cyc[op_idx, slot_idx]
    c_lo = tab.cyc_lo[op_idx, slot_idx]
    nm_ = np.where(is_sync, 0, tab.n_max[op_idx])
    tstart = np.where(is_sync, 0, place.start[op_idx])
    tcount = np.where(is_sync, t.tiles_per_ipu, tab.tiles_used[op_idx])
    # vertex types of the compute sets: one per (family, codelet, dtypes), shared by every op
    # that uses it (forward and backward convolutions run the same AMP partials codelet); keyed
    # "family:codelet<dtypes>" per op and slot, then spread over the programs
    vt_slot, vt_keys = _slot_vertex_types(L, pb)
    # family of each program: the op's for its main compute set, copy / reduce for the others
    copies = ("cast", "prearr", "ocast", "orearr")
    fam = np.array(["copy" if nm in copies else "reduce" for nm, _ in SLOTS], object)
    fam = fam[slot_idx]
    main = slot_idx == SLOT["main"]
    fam[main] = L["family"][op_idx[main]]
    keys, vt_idx = _vertex_type_index(vt_slot[op_idx, slot_idx], vt_keys)
    programs = {
        "name": names.astype(object),
        "type": types,
        "op": op_idx.astype(np.int32),
        "slot": suffix,
        "cycles": np.where(c_hi > 0, c_hi, 0).astype(np.int64),
        "cycles_min": np.where(nm_ < tcount, c_lo, c_hi).astype(np.int64),
        "n_max": nm_.astype(np.int32),
        "tile_start": tstart.astype(np.int32),
        "tile_count": tcount.astype(np.int32),
        "bytes_in": tab.byt[op_idx, slot_idx].astype(np.int64),
        "vt": vt_idx.astype(np.int16),
        "vertices": (tab.verts[op_idx, slot_idx] * tcount).astype(np.int64),
        "family": fam,
        "owner_op": place.owner[op_idx].astype(np.int32),
    }
    # sync rows: n_max = tile_count (uniform)
    programs["n_max"] = np.where(is_sync, tcount, programs["n_max"]).astype(np.int32)
    vt_names, vt_fam = _vertex_type_names(keys)
    return programs, {"key": keys, "name": vt_names, "family": vt_fam}


def _slot_vertex_types(L, pb: int) -> tuple[np.ndarray, list[str]]:
    """Per op and slot (ops x SLOTS): the code of the vertex type key ``family:codelet<dtypes>``
    of the slot's program (-1: not a compute set), and the keys by code.
    Compute sets: the op's own family and codelet in the main slot (AMP: ``Partials``,
    templated on input and partials types, e.g. ``<half,float>``; family ``reduce``: ``Add``),
    ``copy`` for the weight cast and the PreArrange, ``reduce:Add`` for a reduction; the dtype
    is the op's. Keyed once per distinct (family, type, AMP, dtype) of the ops."""
    n = len(L)
    slot = {name: k for k, (name, _) in enumerate(SLOTS)}
    codes: dict[str, int] = {}
    dts = {d: _DT_NAME.get(d, "float") for d in sorted(set(L["db"].tolist()))}
    main: dict[tuple, int] = {}

    def main_code(fm: str, ty: str, amp: bool, db: int) -> int:
        k = (fm, ty, amp, db)
        c = main.get(k)
        if c is None:
            dt = dts[db]
            codelet = "Add" if fm == "reduce" else "Partials" if amp else ty
            key = f"{fm}:{codelet}<{dt},{_DT_NAME[pb]}>" if amp else f"{fm}:{codelet}<{dt}>"
            c = main[k] = codes.setdefault(key, len(codes))
        return c

    vt = np.full((n, len(SLOTS)), -1, np.int64)
    vt[:, slot["main"]] = np.fromiter(
        map(
            main_code, L["family"].tolist(), L["type"].tolist(), L["amp"].tolist(), L["db"].tolist()
        ),
        np.int64,
        count=n,
    )
    db_row = {d: i for i, d in enumerate(dts)}
    row = np.array([db_row[d] for d in L["db"].tolist()], np.int64) if n else np.zeros(0, np.int64)
    slot_types = (
        ("cast", "copy:Cast"),
        ("prearr", "copy:PreArrange"),
        ("ocast", "copy:Cast"),
        ("orearr", "copy:PreArrange"),
        *((red, "reduce:Add") for _, _, red in REDUCE_STAGES),
    )
    for nm, what in slot_types:
        per_dt = [codes.setdefault(f"{what}<{dt}>", len(codes)) for dt in dts.values()]
        vt[:, slot[nm]] = np.array(per_dt, np.int64)[row]
    return vt, list(codes)


def _vertex_type_index(code: np.ndarray, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct vertex type keys of the programs (key "" for programs that are not
    compute sets, code -1) and each program's row among them (-1: not a compute set), as
    ``np.unique`` of the programs' keys would give, sorting only the distinct keys."""
    used = np.flatnonzero(np.bincount(code + 1, minlength=len(keys) + 1))  # code + 1
    distinct = sorted(("" if c == 0 else keys[c - 1]) for c in used.tolist())
    rank = np.full(len(keys) + 1, -1, np.int64)
    for r, key in enumerate(distinct):
        if key:
            rank[keys.index(key) + 1] = r
    return np.array(distinct, dtype=object), rank[code + 1]


def _amp_cs_name(L) -> np.ndarray:
    return np.where(_is_conv(L), "ConvPartials", "MatMulPartials").astype(object)


_CODELETS = {
    "amp": "poplin::ConvPartial1x1Out",
    "reduce": "popops::Reduce{op}",
    "elementwise": "popops::{op}MultiVertex",
    "norm": "popnn::{op}",
    "nonlinearity": "popnn::NonLinearity{op}",
    "pool": "popnn::{op}",
    "embedding": "popops::MultiSlice{op}",
    "copy": "poplin::{op}",
    "loss": "popnn::{op}",
    "optimiser": "popops::{op}",
}


def _vertex_type_names(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    names = np.empty(len(keys), dtype=object)
    fams = np.empty(len(keys), dtype=object)
    for i, key in enumerate(keys):  # one per distinct vertex type (tens), not per op or tile
        if not key:
            names[i], fams[i] = "", ""
            continue
        fam, rest = key.split(":", 1)
        op, dt = rest.split("<", 1)
        names[i] = _CODELETS.get(fam, "{op}").format(op=op) + "<" + dt
        fams[i] = fam
    return names, fams


__all__ = ["SLOTS", "OpPlans", "plan_amp", "plan_ops"]
