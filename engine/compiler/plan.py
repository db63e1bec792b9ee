"""Tile planning: per-op plans and the leaf programs they compile to, vectorised over ops.

Matmul / convolution (AMP) ops
    A plan partitions the problem ``G`` groups x ``M`` rows x ``K`` reduction x ``N`` columns
    over the compute tiles: groups first (independent, no extra exchange), then, for every
    candidate ``pn`` (N split) and ``pk`` (K split) among the powers of two, ``pm = tiles //
    (pn x pk)`` (M split). Each tile then holds ``Mt x Kt`` of operand A, ``Kt x Nt`` of operand B
    and ``Mt x Nt`` partials. Per-tile cycles of a candidate (ipu-facts.md, PopLibs estimators):

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

    Backward ops add a PreArrange copy (about 1 cycle per element, ipu-facts.md) of the operand
    whose layout differs (weights for input gradients, activations for weight gradients);
    16.32 adds a cast of the FP32 master weights before the exchange.

Other ops (element-wise, normalisation, pooling, optimiser updates, loss)
    Spread linearly over ``min(tiles, bytes / min_bytes_per_tile)`` tiles; cycles per tile from
    the PopLibs element-wise estimate 11 + 6 x (27 + ceil(n / 6 / vector width) x 3) per pass
    (ipu-facts.md); cross-tile reductions (batch-norm statistics, global pooling, LAMB norms) add
    an exchange of partials and a reduce compute set.

Output: program rows (struct of arrays) in op order, and per-op plan facts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.compiled import T_EXCHANGE, T_ONTILE, T_SYNC
from engine.compiler import vertex_costs


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
    """Choose a plan per AMP op (vectorised over ops x candidates); see the module docstring."""
    n_ops = len(a["M"])
    if n_ops == 0:
        return {}
    G, M, K, N = (a[k].astype(np.int64) for k in ("G", "M", "K", "N"))
    cin = np.where(a["cin"] > 0, a["cin"], np.maximum(a["K"], 1))
    kernel, a_dup = np.maximum(a["kernel"], 1), np.maximum(a["a_dup"], 1)
    kernel_width = np.maximum(np.round(np.sqrt(kernel)).astype(np.int64), 1)  # square kernels
    # width of one row of the output field (0 or absent: one row, as for matmuls)
    row_width = np.asarray(a.get("row_width", np.zeros(n_ops)), np.int64)
    db = a["db"]
    acts_bytes = int(db.max())  # every AMP op of a run has the compute dtype
    bw = a["b_weight"]
    cg = vertex_costs.weights_per_conv_unit(t, acts_bytes)
    units = vertex_costs.conv_units(t, acts_bytes, pb)
    xb = t.exchange_bytes_per_cycle
    xbb = t.exchange_broadcast_bytes_per_cycle
    setup = t.exchange_setup_cycles
    sync = t.internal_sync_cycles

    emax = int(np.floor(np.log2(T)))
    en, ek = np.meshgrid(np.arange(emax + 1), np.arange(emax + 1), indexing="ij")
    keep = (en + ek) <= emax
    cand_n = (2 ** en[keep]).astype(np.int64)[None, :]
    cand_k = (2 ** ek[keep]).astype(np.int64)[None, :]

    pg = np.minimum(G, T)[:, None]
    gpt = _ceil_div(G[:, None], pg)
    Tr = np.maximum(T // pg, 1)
    pn = np.minimum(cand_n, N[:, None])
    pk = np.minimum(cand_k, K[:, None])
    valid = (
        (pn * pk <= Tr)
        & (cand_n <= np.maximum(N[:, None], 1) * 2)
        & (cand_k <= np.maximum(K[:, None], 1) * 2)
    )
    # duplicates (pn clipped) are harmless; drop candidates that exceed the tiles
    pm = np.clip(Tr // (pn * pk), 1, M[:, None])

    def tile_work(pn, pk):
        """Kernel positions and input channels of a tile's share of the reduction."""
        c_in = cin[:, None]
        kpos = np.where(
            pk <= c_in, kernel[:, None], _ceil_div(kernel[:, None], np.maximum(pk // c_in, 1))
        )
        cin_t = np.where(pk <= c_in, _ceil_div(c_in, pk), c_in)
        return kpos, cin_t

    def compute(pn, pk, Mt, s, gpt):
        """``s`` serial runs of the PopLibs AMP partials vertex over ``ceil(Mt / s)`` outputs."""
        kpos, cin_t = tile_work(pn, pk)
        field = _ceil_div(Mt, s)
        width = np.where(row_width[:, None] > 0, np.minimum(row_width[:, None], field), field)
        one = vertex_costs.amp_partials_cycles(
            t,
            field=field,
            row_width=width,
            kernel_positions=kpos,
            kernel_width=kernel_width[:, None],
            in_groups=_ceil_div(cin_t, cg),
            out_groups=_ceil_div(_ceil_div(N[:, None], pn), units),
            conv_groups=gpt,
            acts_bytes=acts_bytes,
            partials_bytes=pb,
            one_by_one=(kernel == 1)[:, None],
        )
        return s * one

    def cost(pm, pn, pk, Mt):
        Nt = _ceil_div(N[:, None], pn)
        Kt = _ceil_div(K[:, None], pk)
        a_el = gpt * np.maximum(_ceil_div(Mt * Kt, a_dup[:, None]), Mt)
        b_el = np.where(bw[:, None], 1, gpt) * Kt * Nt
        recv = (a_el + b_el) * db[:, None]
        # an operand slice needed by several tiles is broadcast: supertile neighbours receive
        # the same data, at the broadcast rate (ipu-facts.md); A is shared by the pn column
        # tiles, B by the pm row tiles
        rate_a = np.where(pn > 1, xbb, xb)
        rate_b = np.where(pm > 1, xbb, xb)
        exch = (
            np.ceil(a_el * db[:, None] / rate_a + b_el * db[:, None] / rate_b).astype(np.int64)
            + setup
        )
        p_el = gpt * Mt * Nt
        red_recv = np.where(pk > 1, _ceil_div(p_el * pb * (pk - 1), pk), 0)
        red_ex = np.where(pk > 1, _ceil_div(red_recv, xb) + setup, 0)
        red_cs = vertex_costs.conv_reduce_cycles(t, _ceil_div(p_el, pk), pk, acts_bytes, pb)
        static = b_el * db[:, None]
        dyn = a_el * db[:, None] + p_el * pb + red_recv
        return dict(
            exch=exch,
            red_ex=red_ex,
            red_cs=red_cs,
            static=static,
            dyn=dyn,
            recv=recv,
            red_recv=red_recv,
            a_el=a_el,
            b_el=b_el,
            Kt=Kt,
            Nt=Nt,
        )

    Mt = _ceil_div(M[:, None], pm)
    c = cost(pm, pn, pk, Mt)
    room = limit - c["static"]
    fits_static = room > 0
    s = np.where(fits_static, np.maximum(_ceil_div(c["dyn"], np.maximum(room, 1)), 1), 1)
    s = np.minimum(s, np.maximum(Mt, 1))
    feasible = valid & fits_static & (c["static"] + _ceil_div(c["dyn"], s) <= limit)
    n_sync = 1 + (pk > 1)
    total = (
        c["exch"]
        + compute(pn, pk, Mt, s, gpt)
        + c["red_ex"]
        + c["red_cs"]
        + (s - 1) * setup
        + s * n_sync * sync
    )
    big = np.iinfo(np.int64).max // 4
    score = np.where(feasible, total, big)
    none_fit = ~feasible.any(axis=1)
    # when nothing fits, take the plan with the least temporary memory (it may go OOM)
    temp_all = c["static"] + _ceil_div(c["dyn"], s)
    score_nf = np.where(valid, temp_all, big)
    best = np.where(none_fit, score_nf.argmin(axis=1), score.argmin(axis=1))
    rows = np.arange(n_ops)

    def pick(x):
        x = np.broadcast_to(x, score.shape)
        return x[rows, best]

    pm_b, pn_b, pk_b, s_b, gpt_b = pick(pm), pick(pn), pick(pk), pick(s), pick(gpt)
    pg_b = pick(pg)
    Mt_b = _ceil_div(M, pm_b)
    Mt_lo = np.maximum(M // pm_b, 1)
    r = M - (M // pm_b) * pm_b
    hi = cost(pm_b[:, None], pn_b[:, None], pk_b[:, None], Mt_b[:, None])
    lo = cost(pm_b[:, None], pn_b[:, None], pk_b[:, None], Mt_lo[:, None])
    tiles_used = np.minimum(pg_b * pm_b * pn_b * pk_b, T)
    n_max = np.where(r > 0, np.minimum(r * pn_b * pk_b * pg_b, tiles_used), tiles_used)
    out = {
        "pg": pg_b,
        "pm": pm_b,
        "pn": pn_b,
        "pk": pk_b,
        "s": s_b,
        "gpt": gpt_b,
        "tiles_used": tiles_used,
        "n_max": n_max,
        "none_fit": none_fit,
    }
    for key in ("exch", "red_ex", "red_cs", "recv", "red_recv", "a_el", "b_el"):
        out[key] = hi[key][:, 0]
        out[key + "_lo"] = lo[key][:, 0]
    # the largest and the smallest tile share at once (two columns)
    both = compute(
        pn_b[:, None], pk_b[:, None], np.stack([Mt_b, Mt_lo], axis=1), s_b[:, None], gpt_b[:, None]
    )
    out["compute"], out["compute_lo"] = both[:, 0], both[:, 1]
    # serial splits repeat the exchange's fixed cost; fold it into the programs
    out["exch"] = out["exch"] + (s_b - 1) * setup
    out["exch_lo"] = out["exch_lo"] + (s_b - 1) * setup
    out["temp"] = hi["static"][:, 0] + _ceil_div(hi["dyn"][:, 0], s_b)
    out["Kt"] = hi["Kt"][:, 0]
    out["Nt"] = hi["Nt"][:, 0]
    return out


def _plan_amp_distinct(
    a: dict[str, np.ndarray], t, T: int, limit: float, rate: int, pb: int
) -> dict:
    """:func:`plan_amp` of the distinct ops only, spread back to every op: an op's plan depends
    on its own row alone (and on the largest ``db``, the same over the distinct rows), and
    repeated layers give the same rows (ResNet-101's 23 identical blocks, BERT's 24 encoder
    layers): the same plans at a fraction of the ops x candidates work."""
    n = len(a["M"])
    if n < 2:
        return plan_amp(a, t, T, limit, rate, pb)
    from engine.compiler.lowering import row_ids

    inverse, first = row_ids([np.asarray(a[k]).astype(np.int64) for k in a])
    if len(first) == n:
        return plan_amp(a, t, T, limit, rate, pb)
    p = plan_amp({k: v[first] for k, v in a.items()}, t, T, limit, rate, pb)
    return {k: v[inverse] for k, v in p.items()}


#: Program slots of one op, in execution order: (slot name, program type).
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
    for nm in ("sync_a", "sync_b", "sync_c", "sync_d"):
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
    """Matmul / convolution ops: their plans (``plan_amp``) written into ``tab``."""
    amp = L["amp"]
    ia = np.flatnonzero(amp)
    if not len(ia):
        return
    rate = t.amp_rate(config.compute_dtype, config.partials_dtype)
    limit = config.amp * t.sram_per_tile
    present, cyc, cyc_lo, byt, verts = tab.present, tab.cyc, tab.cyc_lo, tab.byt, tab.verts
    slot = SLOT
    keys = ("G", "M", "K", "N", "cin", "kernel", "row_width", "a_dup", "db", "b_weight")
    a = {k: L[k][ia] for k in keys}
    p = _plan_amp_distinct(a, t, T, limit, rate, pb)
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
    k_main, k_ex = slot["main"], slot["exch"]
    cyc[ia, k_main], cyc_lo[ia, k_main] = p["compute"], p["compute_lo"]
    cyc[ia, k_ex], cyc_lo[ia, k_ex] = p["exch"], p["exch_lo"]
    present[ia, k_ex] = True
    byt[ia, k_ex] = p["recv"] * p["n_max"] + p["recv_lo"] * (tu - p["n_max"])
    verts[ia, k_main] = p["gpt"] * p["s"]
    # reduction of partial sums
    red = p["pk"] > 1
    for nm in ("sync_d", "rexch", "red"):
        present[ia, slot[nm]] = red
    cyc[ia, slot["rexch"]], cyc_lo[ia, slot["rexch"]] = p["red_ex"], p["red_ex_lo"]
    cyc[ia, slot["red"]], cyc_lo[ia, slot["red"]] = p["red_cs"], p["red_cs_lo"]
    byt[ia, slot["rexch"]] = p["red_recv"] * tu
    verts[ia, slot["red"]] = np.where(red, 1, 0)
    # PreArrange of the re-laid-out operand in backward matmuls / convolutions
    role = L["role"][ia]
    pre = (role == "gi") | (role == "gw")
    pre_el = np.where(role == "gi", p["b_el"], p["a_el"])
    pre_el_lo = np.where(role == "gi", p["b_el_lo"], p["a_el_lo"])
    present[ia, slot["prearr"]] = pre
    present[ia, slot["sync_c"]] = pre
    cyc[ia, slot["prearr"]] = (
        np.ceil(pre_el * t.prearrange_cycles_per_element).astype(np.int64)
        + t.elementwise_supervisor_cycles
    )
    cyc_lo[ia, slot["prearr"]] = (
        np.ceil(pre_el_lo * t.prearrange_cycles_per_element).astype(np.int64)
        + t.elementwise_supervisor_cycles
    )
    verts[ia, slot["prearr"]] = 1
    # 16.32: cast the FP32 master weights (on the tiles holding them) to FP16 before the
    # exchange; the FP16 copy is a temporary of the op
    cast = L["wcast"][ia] > 0
    w_per_tile = _ceil_div(L["wcast"][ia], np.maximum(tu, 1))
    present[ia, slot["cast"]] = cast
    present[ia, slot["sync_b"]] = cast
    cyc[ia, slot["cast"]] = np.where(cast, vertex_costs.cast_cycles(t, w_per_tile, 4, 2), 0)
    cyc_lo[ia, slot["cast"]] = cyc[ia, slot["cast"]]
    verts[ia, slot["cast"]] = 1
    tab.temp[ia] += w_per_tile * 2


def _plan_other_slots(L, t, T: int, tab: SlotTable) -> None:
    """Element-wise and other ops: spread linearly, PopLibs element-wise cost per pass, and the
    cross-tile reduction of their statistics."""
    ie = np.flatnonzero(~L["amp"])
    if not len(ie):
        return
    present, cyc, cyc_lo, byt, verts = tab.present, tab.cyc, tab.cyc_lo, tab.byt, tab.verts
    slot = SLOT
    setup = t.exchange_setup_cycles
    xb = t.exchange_bytes_per_cycle
    e = L["elems"][ie]
    db = L["db"][ie]
    tu = np.clip(_ceil_div(e * db, t.min_bytes_per_tile), 1, T)
    per = _ceil_div(e, tu)
    per_lo = e // tu
    rem = e - per_lo * tu
    tab.tiles_used[ie] = tu
    tab.n_max[ie] = np.where(rem > 0, rem, tu)
    passes = L["passes"][ie]
    cyc[ie, slot["main"]] = vertex_costs.elementwise_cycles(t, per, passes, db)
    cyc_lo[ie, slot["main"]] = vertex_costs.elementwise_cycles(t, per_lo, passes, db)
    verts[ie, slot["main"]] = 1  # one multi-vertex per tile runs all passes
    ct = L["cross_tile"][ie] & (tu > 1)
    st = np.maximum(L["stats"][ie], 1)
    red_el = np.minimum(st, per)  # partial statistics per tile (FP32)
    for nm in ("sync_d", "rexch", "red"):
        present[ie, slot[nm]] = ct
    cyc[ie, slot["rexch"]] = _ceil_div(red_el * 4, xb) + setup
    cyc_lo[ie, slot["rexch"]] = cyc[ie, slot["rexch"]]
    byt[ie, slot["rexch"]] = np.where(ct, red_el * 4 * tu, 0)
    cyc[ie, slot["red"]] = vertex_costs.elementwise_cycles(t, red_el, 1.0, 4)
    cyc_lo[ie, slot["red"]] = cyc[ie, slot["red"]]
    verts[ie, slot["red"]] = np.where(ct, 1, 0)
    tab.temp[ie] = np.where(ct, red_el * 4, 0)


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
    "sync_a": "Sync",
    "sync_b": "Sync",
    "sync_c": "Sync",
    "sync_d": "Sync",
    "cast": "Cast",
    "exch": "Exchange",
    "prearr": "PreArrange",
    "rexch": "ReduceExchange",
    "red": "Reduce",
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
    fam = np.array(["copy" if nm in ("cast", "prearr") else "reduce" for nm, _ in SLOTS], object)
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
    for nm, what in (("cast", "copy:Cast"), ("prearr", "copy:PreArrange"), ("red", "reduce:Add")):
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
    # str.startswith per op: numpy.char costs a 5 ms import in a fresh process
    conv = np.array([str(ty).startswith("Conv") for ty in L["type"].tolist()], dtype=bool)
    return np.where(conv, "ConvPartials", "MatMulPartials").astype(object)


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
