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
    of the output or input channels: temporaries shrink, fixed overheads are paid s times.
    The fastest candidate that fits wins (argmin over a candidates x ops array); the details,
    matmuls' two orientations included, are ``engine.compiler.conv_plan``'s.

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
from typing import TYPE_CHECKING

import numpy as np

from engine.compiled import T_EXCHANGE, T_ONTILE, T_SYNC
from engine.compiler import conv_plan, reduction, vertex_costs
from engine.compiler.memory_records import _sorted_distinct

if TYPE_CHECKING:  # pragma: no cover
    from engine.compiler.compile_plan import CompilePlan
    from engine.compiler.lowering import Lowered
    from engine.targets import Target


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


def vector_width(elem_bytes, target: Target) -> np.ndarray:
    """Elements per vector for elements of ``elem_bytes`` bytes: the target's float (4-byte) and
    half (2-byte) widths; other sizes from the same datapath (``vector_width_float`` x 4
    bytes)."""
    size = np.asarray(elem_bytes)
    datapath = target.vector_width_float * 4
    other = np.maximum(datapath // np.maximum(size, 1), 1)
    return np.where(
        size == 4, target.vector_width_float, np.where(size == 2, target.vector_width_half, other)
    )


def plan_amp(
    a: dict[str, np.ndarray],
    target: Target,
    compute_tiles: int,
    limit: float,
    rate: int,
    partials_bytes: int,
) -> dict:
    """Choose a plan per AMP op with PopLibs' convolution planner (``engine.compiler.conv_plan``)
    and give its programs' cycles; ``rate`` is kept for callers (the planner reads the AMP
    rate from the target)."""
    return conv_plan.plan(a, target, compute_tiles, limit, partials_bytes)


def _plan_amp_distinct(
    a: dict[str, np.ndarray], target: Target, compute_tiles: int, limit: float, partials_bytes: int
) -> dict:
    """:func:`plan_amp` of the distinct ops only, spread back to every op: an op's plan depends
    on its own row alone (and on the largest ``db``, the same over the distinct rows), and
    repeated layers give the same rows (ResNet-101's 23 identical blocks, BERT's 24 encoder
    layers): the same plans at a fraction of the ops x candidates work."""
    n = len(a["M"])
    if n < 2:
        return conv_plan.plan(a, target, compute_tiles, limit, partials_bytes)
    from engine.compiler.lowering import row_ids

    role_code = {r: i for i, r in enumerate(sorted(set(a["role"].tolist())))}
    cols = [np.asarray(a[k]).astype(np.int64) for k in a if k != "role"]
    cols.append(np.array([role_code[r] for r in a["role"].tolist()], np.int64))
    inverse, first = row_ids(cols)
    if len(first) == n:
        return conv_plan.plan(a, target, compute_tiles, limit, partials_bytes)
    p = conv_plan.plan(
        {k: v[first] for k, v in a.items()}, target, compute_tiles, limit, partials_bytes
    )
    return {k: v[inverse] for k, v in p.items()}


def _plan_per_proportion(
    a: dict[str, np.ndarray],
    target: Target,
    compute_tiles: int,
    memory_proportions: tuple[float, ...],
    stage: np.ndarray,
    partials_bytes: int,
) -> dict:
    """:func:`_plan_amp_distinct` under each op's stage's available memory proportion (PopTorch
    sets one per IPU, ``setAvailableMemoryProportion({"IPU0": ...})``; stage i runs on IPU i):
    one planning pass per distinct proportion, at most one per IPU."""
    amps = np.asarray(memory_proportions, dtype=np.float64)
    op_amp = amps[np.minimum(np.asarray(stage, np.int64), len(amps) - 1)]
    values = _sorted_distinct(op_amp)  # (np.unique's hash path imports numpy.ma: 6-13 ms cold)
    if len(values) == 1:
        return _plan_amp_distinct(
            a, target, compute_tiles, float(values[0]) * target.sram_per_tile, partials_bytes
        )
    out: dict[str, np.ndarray] = {}
    for v in values:
        sel = np.flatnonzero(op_amp == v)
        part = _plan_amp_distinct(
            {k: x[sel] for k, x in a.items()},
            target,
            compute_tiles,
            v * target.sram_per_tile,
            partials_bytes,
        )
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
        table = cls(
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
        table.present[:, SLOT["sync_a"]] = True
        table.present[:, SLOT["main"]] = True
        return table


@dataclass
class Placement:
    """Where each op's programs run: first tile, and the op whose compute sets it calls."""

    start: np.ndarray
    owner: np.ndarray


def plan_ops(lowered: Lowered, target: Target, plan: CompilePlan) -> OpPlans:
    """Plan every lowered op and lay out its leaf programs (see the module docstring):
    AMP plans, then the other ops, syncs, placement, and the program rows."""
    n = len(lowered)
    compute_tiles, partials_bytes = plan.compute_tiles, plan.partials_bytes
    notes: list[str] = []
    tab = SlotTable.empty(n)
    _plan_amp_slots(lowered, target, plan, tab, notes)
    _plan_other_slots(lowered, target, compute_tiles, tab)
    # syncs: same cycles on every tile of the IPU
    for nm in (nm for nm, ty in SLOTS if ty == T_SYNC):
        tab.cyc[:, SLOT[nm]] = target.internal_sync_cycles
        tab.cyc_lo[:, SLOT[nm]] = target.internal_sync_cycles
    # PopLibs' planners cost the largest tile share (poplin ConvModel.cpp); a smaller share can
    # cost a few cycles more in the vertex estimators (runs of 2 outputs cost more than runs of 3;
    # a ragged reduction takes a slower remainder path), which the largest share's cost covers
    tab.cyc_lo = np.minimum(tab.cyc_lo, tab.cyc)
    place = _placement(lowered, plan.outlining, compute_tiles, tab.tiles_used)
    programs, vertex_types = _program_rows(lowered, target, partials_bytes, tab, place)
    return OpPlans(
        tiles_used=tab.tiles_used,
        tile_start=place.start,
        serial_splits=tab.serial,
        temp_per_tile=tab.temp,
        programs=programs,
        vertex_types=vertex_types,
        notes=notes,
    )


def _plan_amp_slots(
    lowered: Lowered, target: Target, plan: CompilePlan, tab: SlotTable, notes: list[str]
) -> None:
    """Matmul / convolution ops: their plans (``conv_plan``) written into ``tab``."""
    amp_rows = np.flatnonzero(lowered["amp"])
    if not len(amp_rows):
        return
    keys = ("G", "M", "K", "N", "cin", "kernel", "row_width", "a_dup", "db", "role")
    a = {k: lowered[k][amp_rows] for k in keys}
    a["conv"] = _is_conv(lowered)[amp_rows]
    a["in_width"] = _input_width(lowered, amp_rows, a["conv"])
    p = _plan_per_proportion(
        a,
        target,
        plan.compute_tiles,
        plan.memory_proportions,
        lowered["stage"][amp_rows],
        plan.partials_bytes,
    )
    if p["none_fit"].any():
        names = ", ".join(lowered["name"][amp_rows[p["none_fit"]]][:3])
        notes.append(
            f"{int(p['none_fit'].sum())} matmul / convolution plan(s) exceed the available "
            f"memory proportion even with serial splits (e.g. {names})."
        )
    tiles_used = p["tiles_used"]
    tab.tiles_used[amp_rows] = tiles_used
    tab.n_max[amp_rows] = p["n_max"]
    tab.serial[amp_rows] = p["s"]
    tab.temp[amp_rows] = p["temp"]

    def put(slot: str, hi, lo=None, on=None, nbytes=None, verts=None) -> None:
        k = SLOT[slot]
        tab.cyc[amp_rows, k] = hi
        tab.cyc_lo[amp_rows, k] = hi if lo is None else lo
        if on is not None:
            tab.present[amp_rows, k] = on
        if nbytes is not None:
            tab.byt[amp_rows, k] = nbytes
        if verts is not None:
            tab.verts[amp_rows, k] = verts

    put("main", p["compute"], p["compute_lo"], verts=p["gpt"] * p["s"])
    put("exch", p["exch"], on=True, nbytes=p["recv"] * tiles_used)
    # the partial-sum reduction, stage by stage
    for k, (sy, ex, red) in enumerate(REDUCE_STAGES[: reduction.MAX_STAGES]):
        on = p["red_cs_stages"][:, k] > 0
        put(sy, 0, on=on)
        put(ex, p["red_ex_stages"][:, k], on=on, nbytes=p["red_recv_stages"][:, k] * tiles_used)
        put(red, p["red_cs_stages"][:, k], on=on, verts=np.where(on, 1, 0))
    # float partials cast to a half output (no reduction, or after input-channel serial splits)
    on = p["cast"] > 0
    put("sync_h", 0, on=on)
    put("ocast", p["cast"], on=on, verts=np.where(on, 1, 0))
    # rearranged / regrouped outputs
    on = (p["out_copy"] > 0) | (p["out_ex"] > 0)
    put("sync_i", 0, on=on)
    put(
        "oexch",
        p["out_ex"],
        on=p["out_ex"] > 0,
        nbytes=(p["out_recv"] * tiles_used).astype(np.int64),
    )
    put("orearr", p["out_copy"], on=p["out_copy"] > 0, verts=np.where(on, 1, 0))
    # rearrangements before the convolution (the planner's transforms), and the input
    # gradient's transposed, flipped weights (outside the planner: 1 cycle per element): a
    # convolution's weights on the tile; a matmul's right-hand operand spread over the tiles,
    # each element once (poplin MatMul.cpp fullyConnectedWeightTranspose lays the transposed
    # weights out for the backward plan, whichever operand that plan swapped them into)
    role = lowered["role"][amp_rows]
    b_elems = np.where(
        a["conv"],
        p["n_w"],
        _ceil_div(a["K"] * a["N"] * a["G"], np.maximum(tiles_used, 1)),
    )
    flip = np.where(
        role == "gi",
        np.ceil(b_elems * target.prearrange_cycles_per_element).astype(np.int64)
        + target.elementwise_supervisor_cycles,
        0,
    )
    pre = p["prearr"] + flip
    put("prearr", pre, on=pre > 0, verts=1)
    put("sync_c", 0, on=pre > 0)
    # 16.32: cast the FP32 master weights (on the tiles holding them) to FP16 before the
    # exchange; the FP16 copy is a temporary of the op
    cast = lowered["wcast"][amp_rows] > 0
    w_per_tile = _ceil_div(lowered["wcast"][amp_rows], np.maximum(tiles_used, 1))
    put(
        "cast",
        np.where(cast, vertex_costs.cast_cycles(target, w_per_tile, 4, 2), 0),
        on=cast,
        verts=1,
    )
    put("sync_b", 0, on=cast)
    tab.temp[amp_rows] += w_per_tile * 2


def _input_width(lowered: Lowered, amp_rows: np.ndarray, conv: np.ndarray) -> np.ndarray:
    """A forward convolution's input row width (square maps): its input elements per sample
    over its input channels give the input positions, ``bytes_in / db - weights = B x input
    positions x G x cin`` (``cin`` counts one conv group's channels) and ``M = B x output
    positions``; 0 (the output's width) for the other ops, whose lowered rows carry no input
    field."""
    role = lowered["role"][amp_rows]
    fwd = conv & ((role == "fwd") | (role == "recomp")) & (lowered["row_width"][amp_rows] > 0)
    in_elems = (
        lowered["bytes_in"][amp_rows] // np.maximum(lowered["db"][amp_rows], 1)
        - lowered["weight_elems"][amp_rows]
    )
    channels = lowered["cin"][amp_rows] * np.maximum(lowered["G"][amp_rows], 1)
    ratio = in_elems / np.maximum(channels * lowered["M"][amp_rows], 1)
    width = np.rint(lowered["row_width"][amp_rows] * np.sqrt(np.maximum(ratio, 0))).astype(np.int64)
    return np.where(fwd & (width > 0), width, 0)


def _is_conv(lowered: Lowered) -> np.ndarray:
    # str.startswith per op: numpy.char costs a 5 ms import in a fresh process
    return np.array([str(ty).startswith("Conv") for ty in lowered["type"].tolist()], dtype=bool)


def _plan_other_slots(lowered: Lowered, target: Target, compute_tiles: int, tab: SlotTable) -> None:
    """Element-wise and other ops: spread linearly, PopLibs element-wise cost per pass, and the
    cross-tile stages of their reductions (``_plan_cross_tile``)."""
    other_rows = np.flatnonzero(~lowered["amp"])
    if not len(other_rows):
        return
    e = lowered["elems"][other_rows]
    db = lowered["db"][other_rows]
    tiles_used = np.clip(_ceil_div(e * db, target.min_bytes_per_tile), 1, compute_tiles)
    per = _ceil_div(e, tiles_used)
    per_lo = e // tiles_used
    rem = e - per_lo * tiles_used
    tab.tiles_used[other_rows] = tiles_used
    tab.n_max[other_rows] = np.where(rem > 0, rem, tiles_used)
    passes = lowered["passes"][other_rows]
    k = SLOT["main"]
    tab.cyc[other_rows, k] = vertex_costs.elementwise_cycles(target, per, passes, db)
    tab.cyc_lo[other_rows, k] = vertex_costs.elementwise_cycles(target, per_lo, passes, db)
    tab.verts[other_rows, k] = 1  # one multi-vertex per tile runs all passes
    _plan_scalar_inputs(lowered, target, compute_tiles, tab, other_rows, tiles_used)
    _plan_cross_tile(lowered, target, compute_tiles, tab, other_rows, tiles_used)


def random_seed_cycles(workers: int) -> int:
    """Cycles per tile of a random op's seed programs (``lowering.RANDOM_OPS``), each a
    supervisor vertex on every tile: ``SetSeedSupervisor`` 14 + 27 x workers (PopLibs
    lib/poprand/poprandCycleEstimators.cpp), ``GetSeedsSupervisor`` 14 + 7 x workers (an earlier
    version of the same file, when poprand had that vertex), and ``setHwSeeds`` taken to cost
    what ``getHwSeeds`` does (Poplar's own; no published estimate)."""
    get_seeds = 14 + 7 * workers
    return get_seeds + (14 + 27 * workers) + get_seeds


def _plan_scalar_inputs(
    lowered: Lowered,
    target: Target,
    compute_tiles: int,
    tab: SlotTable,
    other_rows: np.ndarray,
    tiles_used: np.ndarray,
) -> None:
    """An op that PopART / PopLibs run as several compute sets (the optimiser's decomposition,
    ``lowering.ADAM_OPS``; batch norm, ``lowering.NORM_COMPUTE_SETS``; a random op's seed
    programs, ``lowering.RANDOM_OPS``, with their vertices' cycles) keeps one row and one main
    compute set here: its passes' work as before, plus an internal sync for each further compute
    set over its elements (``compute_sets``) and, for each compute set over its channels only
    (``channel_sets``: a norm's statistics, the optimiser's step counter), a sync and one
    element-wise pass over ``channel_elems`` float values spread like any small op
    (``min_bytes_per_tile``), the other tiles waiting. Scalar tensors the op reads that live on
    a tile of their own (PopART's optimiser values set by the user, the step, a random op's seed)
    are broadcast to the op's tiles by an exchange each before their compute set (Poplar moves
    every operand a vertex reads that is mapped to another tile): 4 bytes and the exchange's
    setup each, laid out as one exchange program. The sub-steps are not separate programs: their
    cycles are counted, their control code is not."""
    extra = lowered["compute_sets"][other_rows] - 1
    ch = lowered["channel_sets"][other_rows]
    seeds = lowered["random_seeds"][other_rows]
    more = (extra > 0) | (ch > 0) | (seeds > 0)
    if more.any():
        rows = other_rows[more]
        ce = lowered["channel_elems"][rows]
        ct = np.clip(_ceil_div(ce * 4, target.min_bytes_per_tile), 1, compute_tiles)
        per_channel = target.internal_sync_cycles + vertex_costs.elementwise_cycles(
            target, _ceil_div(ce, ct), 1.0, 4
        )
        add = (
            np.maximum(extra[more], 0) * target.internal_sync_cycles
            + ch[more] * per_channel
            + seeds[more] * random_seed_cycles(int(target.workers_per_tile))
        )
        k = SLOT["main"]
        tab.cyc[rows, k] += add
        tab.cyc_lo[rows, k] += add
    n = lowered["scalar_in"][other_rows]
    on = n > 0
    if not on.any():
        return
    rows, nb = other_rows[on], n[on]
    k = SLOT["exch"]
    tab.present[rows, k] = True
    tab.cyc[rows, k] = nb * (
        _ceil_div(4, target.exchange_bytes_per_cycle) + target.exchange_setup_cycles
    )
    tab.cyc_lo[rows, k] = tab.cyc[rows, k]
    tab.byt[rows, k] = 4 * nb * tiles_used[on]


def _reductions_per_op(lowered: Lowered, other_rows: np.ndarray) -> np.ndarray:
    """Reductions an op runs over the same input at once: batch norm's sum and sum of squares
    (popnn ``batchNormStatistics``, forward; the gradient's two sums, backward) and LAMB's two
    norms; one otherwise (pooling)."""
    two = [
        str(ty).startswith(("BatchNorm", "GroupNorm", "LAMB"))
        for ty in lowered["type"][other_rows].tolist()
    ]
    return np.where(np.array(two, bool), 2, 1).astype(np.int64)


def _plan_cross_tile(
    lowered: Lowered,
    target: Target,
    compute_tiles: int,
    tab: SlotTable,
    other_rows: np.ndarray,
    tiles_used: np.ndarray,
) -> None:
    """Cross-tile reductions (batch-norm statistics forward and backward, global pooling, LAMB
    norms) as popops plans them (``engine.compiler.reduction.popops_reduce``): the op's own
    passes compute each tile's partial statistics (popops' on-tile stage), then each
    intermediate stage and the final one exchange partials (FP32) and reduce them, each after
    a sync; the stages that run are laid out in order in the reduction slots."""
    ct = lowered["cross_tile"][other_rows] & (tiles_used > 1)
    if not ct.any():
        return
    ic, tuc = other_rows[ct], tiles_used[ct]
    nr = _reductions_per_op(lowered, ic)
    cols = np.maximum(np.maximum(lowered["stats"][ic], 1) // nr, 1)
    r = reduction.popops_reduce(
        target, lowered["elems"][ic], cols, nr, tuc, lowered["db"][ic], compute_tiles
    )
    run = r["tiles"][:, 1:] > 0  # the cross-tile stages
    pos = np.cumsum(run, axis=1) - 1
    xb = target.exchange_bytes_per_cycle
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
            tab.cyc[rows, SLOT[ex]] = _ceil_div(recv, xb) + target.exchange_setup_cycles
            tab.byt[rows, SLOT[ex]] = recv * r["tiles"][sel, j + 1]
            tab.cyc[rows, SLOT[red]] = r["compute"][sel, j + 1]
            tab.verts[rows, SLOT[red]] = 1
            tab.cyc_lo[rows, SLOT[ex]] = tab.cyc[rows, SLOT[ex]]
            tab.cyc_lo[rows, SLOT[red]] = tab.cyc[rows, SLOT[red]]
            tab.temp[rows] = np.maximum(tab.temp[rows], recv)


def _placement(
    lowered: Lowered, outlining: bool, compute_tiles: int, tiles_used: np.ndarray
) -> Placement:
    """Rotate small ops so that they spread over the chip; outlined duplicates run the owner's
    compute sets, hence on the owner's tiles."""
    n = len(lowered)
    start = np.zeros(n, dtype=np.int64)
    stage = lowered["stage"].astype(np.int64)
    for s in np.unique(stage, return_index=True)[0]:  # (the hash path imports numpy.ma)
        sel = np.flatnonzero(stage == s)
        offs = np.concatenate([[0], np.cumsum(tiles_used[sel])[:-1]])
        span = compute_tiles - tiles_used[sel] + 1
        start[sel] = offs % np.maximum(span, 1)
    owner = np.arange(n)
    if outlining and n:
        from engine.compiler.lowering import op_signatures

        sig = op_signatures(lowered.cols)
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


def _program_rows(
    lowered: Lowered, target: Target, partials_bytes: int, tab: SlotTable, place: Placement
) -> tuple[dict, dict]:
    """Flatten the present slots into program rows (op order, slot order), and the vertex
    types of their compute sets."""
    op_idx, slot_idx = np.nonzero(tab.present)
    types = np.array([ty for _, ty in SLOTS], dtype=np.uint8)[slot_idx]
    is_sync = types == T_SYNC
    main_name = np.where(lowered["amp"], _amp_cs_name(lowered), lowered["type"])
    suffix = np.array([nm for nm, _ in SLOTS], dtype=object)[slot_idx]
    lab = np.array([_SLOT_LABEL.get(nm, "") for nm, _ in SLOTS], dtype=object)[slot_idx]
    lab = np.where(suffix == "main", main_name[op_idx], lab)
    names = lowered["name"][op_idx] + "/" + lab
    c_hi = tab.cyc[op_idx, slot_idx]
    c_lo = tab.cyc_lo[op_idx, slot_idx]
    nm_ = np.where(is_sync, 0, tab.n_max[op_idx])
    tstart = np.where(is_sync, 0, place.start[op_idx])
    tcount = np.where(is_sync, target.tiles_per_ipu, tab.tiles_used[op_idx])
    # vertex types of the compute sets: one per (family, codelet, dtypes), shared by every op
    # that uses it (forward and backward convolutions run the same AMP partials codelet); keyed
    # "family:codelet<dtypes>" per op and slot, then spread over the programs
    vt_slot, vt_keys = _slot_vertex_types(lowered, partials_bytes)
    # family of each program: the op's for its main compute set, copy / reduce for the others
    copies = ("cast", "prearr", "ocast", "orearr")
    fam = np.array(["copy" if nm in copies else "reduce" for nm, _ in SLOTS], object)
    fam = fam[slot_idx]
    main = slot_idx == SLOT["main"]
    fam[main] = lowered["family"][op_idx[main]]
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


def _slot_vertex_types(lowered: Lowered, partials_bytes: int) -> tuple[np.ndarray, list[str]]:
    """Per op and slot (ops x SLOTS): the code of the vertex type key ``family:codelet<dtypes>``
    of the slot's program (-1: not a compute set), and the keys by code.
    Compute sets: the op's own family and codelet in the main slot (AMP: ``Partials``,
    templated on input and partials types, e.g. ``<half,float>``; family ``reduce``: ``Add``),
    ``copy`` for the weight cast and the PreArrange, ``reduce:Add`` for a reduction; the dtype
    is the op's. Keyed once per distinct (family, type, AMP, dtype) of the ops."""
    n = len(lowered)
    slot = {name: k for k, (name, _) in enumerate(SLOTS)}
    codes: dict[str, int] = {}
    dts = {d: _DT_NAME.get(d, "float") for d in sorted(set(lowered["db"].tolist()))}
    main: dict[tuple, int] = {}

    def main_code(fm: str, ty: str, amp: bool, elem_bytes: int) -> int:
        k = (fm, ty, amp, elem_bytes)
        c = main.get(k)
        if c is None:
            dt = dts[elem_bytes]
            codelet = "Add" if fm == "reduce" else "Partials" if amp else ty
            key = (
                f"{fm}:{codelet}<{dt},{_DT_NAME[partials_bytes]}>"
                if amp
                else f"{fm}:{codelet}<{dt}>"
            )
            c = main[k] = codes.setdefault(key, len(codes))
        return c

    vt = np.full((n, len(SLOTS)), -1, np.int64)
    vt[:, slot["main"]] = np.fromiter(
        map(
            main_code,
            lowered["family"].tolist(),
            lowered["type"].tolist(),
            lowered["amp"].tolist(),
            lowered["db"].tolist(),
        ),
        np.int64,
        count=n,
    )
    db_row = {d: i for i, d in enumerate(dts)}
    row = (
        np.array([db_row[d] for d in lowered["db"].tolist()], np.int64)
        if n
        else np.zeros(0, np.int64)
    )
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


def _amp_cs_name(lowered: Lowered) -> np.ndarray:
    return np.where(_is_conv(lowered), "ConvPartials", "MatMulPartials").astype(object)


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
