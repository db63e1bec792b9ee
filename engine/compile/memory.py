"""Variables, liveness and memory per tile per category (vectorised over variables and tiles).

Liveness steps are the compute sets (OnTileExecute leaf programs) in program order: forward of
stages 0..S-1, then recompute / backward of stages S-1..0, then the updates. Every variable has a
live interval of steps (always-live variables have none) and a contiguous tile range on its IPU
with its bytes spread evenly (remainder on the first tiles), as the schema stores it.

Per-tile sums use difference arrays: a variable adds its per-tile bytes at ``tile_start`` and
removes them at ``tile_start + tile_count``; not-always-live variables do so in two dimensions
(step x tile) at their interval's end points, and two cumulative sums give bytes per step per
tile. No loop runs over tiles or steps.

Variables (kinds of ``profiles.schema.VARIABLE_KINDS``):

- ``weight`` (always live), ``accumulator`` (GA > 1, always live unless offloaded),
  ``optimiserState`` (always live unless offloaded to remote buffers; offloaded state is
  counted as remote bytes and needs an on-chip buffer only during its layer's update;
  replicated tensor sharding divides it by the replication factor);
- ``activation``: an op's output, live from the op to its last forward use, or, in training,
  to the backward op that needs it (the op's own backward when it saves its output, a
  consumer's when the consumer saves its input); recomputed ops keep it only through the forward
  and get a second, short-lived copy from the recompute op to its backward use;
- ``gradient``: an activation's gradient (from the first consumer's backward to the op's
  backward) and weight gradients (to the update, or to the accumulation when GA > 1);
- ``temporary``: the plan temporaries of each op (operands, partials, reduction buffers),
  live during the op;
- ``input`` / ``label`` / ``output``: one micro-batch's tensors on the IPUs that receive /
  send them; ``streamBuffer``: the stream buffers on the I/O tiles when there are I/O tiles;
- ``stash``: pipelined training keeps ``depth`` more micro-batches of each stage's saved
  activations (stage inputs only with pipeline-stage recomputation), with depth 2(S-1-s) under
  the Grouped schedule, S-1-s under Interleaved, 0 under Sequential (ipu-facts.md); live from the
  stage's first forward step to its last backward step.

Code and other categories follow ipu-facts.md ('Memory categories'; sizes in engine.targets).
Regions: code, stack, vertex state and descriptors need non-interleaved memory; variables go to
the interleaved region first and spill into free non-interleaved memory; what fits in neither is
``overflowed``. A tile is out of memory when total + gaps > SRAM per tile.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from engine.compile.lowering import DTYPE_BYTES, OPTIMISER_STATE
from engine.compiled import (
    T_EXCHANGE,
    T_ONTILE,
    LivenessReport,
    MemoryReport,
    VariableTable,
)
from engine.graph import INPUT
from profiles import schema

CAT = {name: i for i, name in enumerate(schema.MEMORY_CATEGORIES)}
KIND = {name: i for i, name in enumerate(schema.VARIABLE_KINDS)}
NON_INTERLEAVED_CATS = [c for c in schema.MEMORY_CATEGORIES if c != "variable"]


def _ceil_div(a, b):
    return -(-a // b)


class _Vars:
    """Row-wise accumulation of variables (O(variables); costing is vectorised afterwards)."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(
        self,
        name,
        kind,
        dtype,
        shape,
        nbytes,
        ipu,
        always,
        start,
        end,
        t0,
        tn,
        interleaved=True,
        remote=False,
        remote_bytes=0,
        op=-1,
    ):
        if nbytes <= 0 and not remote:
            return
        self.rows.append(
            (
                name,
                KIND[kind],
                dtype,
                shape,
                int(nbytes),
                int(ipu),
                bool(always),
                int(start) if not always else -1,
                int(end) if not always else -1,
                int(t0),
                max(int(tn), 1),
                bool(interleaved),
                bool(remote),
                int(remote_bytes),
                int(op),
            )
        )

    def table(self) -> VariableTable:
        cols = list(zip(*self.rows)) if self.rows else [[]] * 15
        dts = (
            object,
            np.uint8,
            object,
            object,
            np.int64,
            np.int16,
            bool,
            np.int32,
            np.int32,
            np.int32,
            np.int32,
            bool,
            bool,
            np.int64,
            np.int32,
        )
        names = (
            "name",
            "kind",
            "dtype",
            "shape",
            "bytes",
            "ipu",
            "always_live",
            "live_start",
            "live_end",
            "tile_start",
            "tile_count",
            "interleaved",
            "remote",
            "remote_bytes",
            "op",
        )
        return VariableTable(**{n: np.array(c, dtype=d) for n, c, d in zip(names, cols, dts)})


@dataclass
class MemoryResult:
    variables: VariableTable
    memory: MemoryReport
    liveness: LivenessReport
    io: dict
    oom: bool
    program_code: np.ndarray  # code bytes per leaf program (over its tiles)


def build_memory(graph, L, P, progs, seg_ipu_of_op, config, t, T: int) -> MemoryResult:
    """Variables, liveness and per-tile memory of a compiled program."""
    g = graph.cols
    B = config.micro_batch_size
    training = config.training
    S = config.stages
    n_ipus = config.num_ipus
    TT = t.tiles_per_ipu
    cdt_name, wdt_name = config.compute_dtype, config.weight_dtype
    cdt, wdt = DTYPE_BYTES[cdt_name], DTYPE_BYTES[wdt_name]
    op_ipu = seg_ipu_of_op  # IPU of each lowered op
    stage_of = L.stage_of_fwd
    mb = t.min_bytes_per_tile

    # ---- liveness steps: compute sets in program order -----------------------------------
    cs_rows = np.flatnonzero(progs["type"] == T_ONTILE)
    n_steps = len(cs_rows)
    step_op = progs["op"][cs_rows]
    n_ops = len(L)
    first_step = np.full(n_ops, n_steps, dtype=np.int64)
    last_step = np.full(n_ops, -1, dtype=np.int64)
    np.minimum.at(first_step, step_op, np.arange(n_steps))
    np.maximum.at(last_step, step_op, np.arange(n_steps))

    role = L["role"]
    fwd = L["fwd"]
    n_g = len(graph)
    fo = np.full(n_g, -1, dtype=np.int64)  # forward lowered row of each graph op
    sel = np.flatnonzero(role == "fwd")
    fo[fwd[sel]] = sel
    rc = np.full(n_g, -1, dtype=np.int64)  # recompute row
    sel = np.flatnonzero(role == "recomp")
    rc[fwd[sel]] = sel
    bwd_first = np.full(n_g, n_steps, dtype=np.int64)  # first / last backward step of op i
    bwd_last = np.full(n_g, -1, dtype=np.int64)
    sel = np.flatnonzero(np.isin(role, ("gi", "gw", "bwd")))
    np.minimum.at(bwd_first, fwd[sel], first_step[sel])
    np.maximum.at(bwd_last, fwd[sel], last_step[sel])
    upd_step = np.full(n_g, -1, dtype=np.int64)
    sel = np.flatnonzero(role == "upd")
    upd_step[fwd[sel]] = first_step[sel]
    acc_step = np.full(n_g, -1, dtype=np.int64)
    sel = np.flatnonzero(role == "acc")
    acc_step[fwd[sel]] = first_step[sel]
    gw_step = np.full(n_g, -1, dtype=np.int64)
    sel = np.flatnonzero(np.isin(role, ("gw", "bwd")) & (L["weight_elems"] > 0))
    gw_step[fwd[sel]] = last_step[sel]
    loss_rows = np.flatnonzero(role == "loss")
    lossgrad_rows = np.flatnonzero(role == "lossgrad")
    norm_rows = np.flatnonzero(role == "normin")
    last = n_steps - 1

    V = _Vars()
    stage_ipu = np.arange(S)
    ipu_of_g = stage_ipu[stage_of]

    def out_map(row: int, nbytes: int) -> tuple[int, int]:
        count = int(min(P.tiles_used[row], max(1, _ceil_div(nbytes, mb))))
        return int(P.tile_start[row]), count

    # consumers of each graph op (and the graph input)
    cons: dict[int, list[int]] = {}
    for j in range(n_g):
        for src in (int(g["in0"][j]), int(g["in1"][j])):
            if src >= INPUT:
                cons.setdefault(src, []).append(j)
    loss_inputs = set(L.loss_inputs)

    saved_bytes_stage = np.zeros(S, dtype=np.int64)  # activations kept for the backward
    boundary_bytes = np.zeros(max(S - 1, 0) + 1, dtype=np.int64)

    # ---- activations and their gradients ---------------------------------------------------
    for i in range(n_g):
        row = int(fo[i])
        nbytes = B * int(g["out_elems"][i]) * cdt
        ipu = int(ipu_of_g[i])
        t0, tn = out_map(row, nbytes)
        start = first_step[row]
        users = cons.get(i, [])
        fwd_use = max([last_step[fo[j]] for j in users if stage_of[j] == stage_of[i]] or [start])
        if i in loss_inputs and len(loss_rows):
            fwd_use = max(fwd_use, int(last_step[loss_rows[0]]))
        # stage-crossing consumers: a received copy on the consumer's IPU
        far = [j for j in users if stage_of[j] != stage_of[i]]
        if far:
            for s in range(int(stage_of[i]), int(max(stage_of[j] for j in far))):
                boundary_bytes[s] += nbytes
        bwd_need = -1
        if training:
            if g["saves_output"][i]:
                bwd_need = bwd_last[i]
            for j in users:
                if g["saves_input"][j] and stage_of[j] == stage_of[i]:
                    bwd_need = max(bwd_need, bwd_last[j])
            if i in loss_inputs and len(lossgrad_rows):
                bwd_need = max(bwd_need, int(last_step[lossgrad_rows[0]]))
        shape = f"{B}x{int(g['out_elems'][i])}"
        # this activation's variables: the same dtype, shape and bytes, live between two steps
        act = partial(
            V.add, kind="activation", dtype=cdt_name, shape=shape, nbytes=nbytes, always=False
        )
        if bwd_need >= 0 and L.recompute[i] and rc[i] >= 0:
            act(g["name"][i], ipu=ipu, start=start, end=fwd_use, t0=t0, tn=tn, op=row)
            act(
                f"{g['name'][i]}/recomputed",
                ipu=ipu,
                start=first_step[rc[i]],
                end=max(bwd_need, first_step[rc[i]]),
                t0=t0,
                tn=tn,
                op=int(rc[i]),
            )
        else:
            end = max(fwd_use, bwd_need)
            act(g["name"][i], ipu=ipu, start=start, end=end, t0=t0, tn=tn, op=row)
            if bwd_need >= 0 and not L.recompute[i]:
                saved_bytes_stage[stage_of[i]] += nbytes
        for j in far:
            jrow = int(fo[j])
            need = bwd_last[j] if (training and g["saves_input"][j]) else last_step[jrow]
            jt0, jtn = out_map(jrow, nbytes)
            act(
                f"{g['name'][i]}/received@ipu{int(ipu_of_g[j])}",
                ipu=int(ipu_of_g[j]),
                start=first_step[jrow],
                end=max(need, last_step[jrow]),
                t0=jt0,
                tn=jtn,
                op=jrow,
            )
            if training and g["saves_input"][j]:
                saved_bytes_stage[stage_of[j]] += nbytes
        # gradient of this activation
        if training and bwd_last[i] >= 0:
            producers = [bwd_first[j] for j in users if bwd_last[j] >= 0]
            if i in loss_inputs and len(lossgrad_rows):
                producers.append(int(first_step[lossgrad_rows[0]]))
            if producers:
                gs = int(min(producers))
                ge = int(bwd_last[i])
                if gs <= ge:
                    act(
                        f"{g['name'][i]}/grad",
                        kind="gradient",
                        ipu=ipu,
                        start=gs,
                        end=ge,
                        t0=t0,
                        tn=tn,
                        op=row,
                    )

    # ---- graph input, labels, outputs ----------------------------------------------------------
    in_users = cons.get(INPUT, [])
    in_elem_bytes = 4 if graph.input_kind == "tokens" else (1 if config.eight_bit_input else cdt)
    in_dtype = (
        "int32"
        if graph.input_kind == "tokens"
        else ("uint8" if config.eight_bit_input else cdt_name)
    )
    in_bytes = B * graph.input_elems * in_elem_bytes
    first_in = int(fo[in_users[0]]) if in_users else 0
    need = max([last_step[fo[j]] for j in in_users] or [0])
    if training:
        need = max([need] + [bwd_last[j] for j in in_users if g["saves_input"][j]])
    in_map = out_map(first_in, in_bytes)
    if len(norm_rows):
        nr = int(norm_rows[0])
        V.add(
            "input",
            "input",
            in_dtype,
            f"{B}x{graph.input_elems}",
            in_bytes,
            0,
            False,
            0,
            last_step[nr],
            *in_map,
            op=nr,
        )
        nb = B * graph.input_elems * cdt
        V.add(
            "input/normalised",
            "activation",
            cdt_name,
            f"{B}x{graph.input_elems}",
            nb,
            0,
            False,
            first_step[nr],
            max(need, last_step[nr]),
            *out_map(nr, nb),
            op=nr,
        )
        if training:
            saved_bytes_stage[0] += nb
    else:
        V.add(
            "input",
            "input",
            in_dtype,
            f"{B}x{graph.input_elems}",
            in_bytes,
            0,
            False,
            0,
            need,
            *in_map,
            op=first_in,
        )
        if training and any(g["saves_input"][j] for j in in_users):
            saved_bytes_stage[0] += in_bytes
    label_bytes_ps = 4 * graph.label_elems
    last_ipu = S - 1
    if training and len(loss_rows):
        lr, lg = int(loss_rows[0]), int(lossgrad_rows[0])
        lb = B * label_bytes_ps
        V.add(
            "labels",
            "label",
            "int32",
            f"{B}x{graph.label_elems}",
            lb,
            last_ipu,
            False,
            first_step[lr],
            last_step[lg],
            *out_map(lr, lb),
            op=lr,
        )
        V.add(
            "loss",
            "output",
            "float32",
            f"{B}",
            4 * B,
            last_ipu,
            False,
            last_step[lr],
            last,
            *out_map(lr, 4 * B),
            op=lr,
        )
        out_bytes_mb = 4 * B
    else:
        last_row = int(fo[n_g - 1])
        ob = B * graph.output_elems * cdt
        V.add(
            "logits",
            "output",
            cdt_name,
            f"{B}x{graph.output_elems}",
            ob,
            last_ipu,
            False,
            last_step[last_row],
            last,
            *out_map(last_row, ob),
            op=last_row,
        )
        out_bytes_mb = ob

    # ---- weights, weight gradients, accumulators, optimiser state ------------------------------
    GA = config.gradient_accumulation
    R = config.replication_factor
    rts = config.replicated_tensor_sharding
    weight_bytes = np.zeros(n_ipus, dtype=np.int64)
    grad_bytes = np.zeros(n_ipus, dtype=np.int64)
    remote_bytes = np.zeros(n_ipus, dtype=np.int64)
    remote_acc = np.zeros(n_ipus, dtype=np.int64)
    acc_dt = DTYPE_BYTES[config.accumulator]
    for i in np.flatnonzero(g["weight_elems"] > 0):
        i = int(i)
        w = int(g["weight_elems"][i])
        row = int(fo[i])
        ipu = int(ipu_of_g[i])
        wb = w * wdt
        t0, tn = out_map(row, wb)
        weight_bytes[ipu] += wb
        # this weight's variables: on its tiles, made by its op
        wvar = partial(V.add, shape=str(w), ipu=ipu, t0=t0, tn=tn, op=row)
        wvar(f"{g['name'][i]}/weight", "weight", wdt_name, nbytes=wb, always=True, start=-1, end=-1)
        if not training:
            continue
        gdt = acc_dt if GA > 1 else wdt
        grad_bytes[ipu] += w * gdt
        gs = int(gw_step[i])
        if gs < 0:
            continue
        # the gradient lives until the step that consumes it: its accumulation, or the update
        a_s = int(acc_step[i]) if GA > 1 else int(upd_step[i])
        wvar(
            f"{g['name'][i]}/weightGrad",
            "gradient",
            cdt_name,
            nbytes=w * cdt,
            always=False,
            start=gs,
            end=max(a_s, gs),
        )
        if GA > 1:
            ab = w * acc_dt
            acc = partial(wvar, kind="accumulator", dtype=config.accumulator)
            if config.offload_accumulators == "on":
                remote_acc[ipu] += ab
                acc(
                    f"{g['name'][i]}/accumulator",
                    nbytes=0,
                    always=True,
                    start=-1,
                    end=-1,
                    remote=True,
                    remote_bytes=ab,
                )
                acc(
                    f"{g['name'][i]}/accumulator(buffer)",
                    nbytes=ab,
                    always=False,
                    start=a_s,
                    end=a_s,
                )
            else:
                acc(f"{g['name'][i]}/accumulator", nbytes=ab, always=True, start=-1, end=-1)
        shard = -(-w // R) if rts else w
        for state_name, prop in OPTIMISER_STATE[config.optimiser]:
            dt_name = getattr(config, prop)
            sb = shard * DTYPE_BYTES[dt_name]
            st_t0, st_tn = t0, max(1, -(-tn // R)) if rts else tn
            state = partial(
                wvar, kind="optimiserState", dtype=dt_name, shape=str(shard), t0=st_t0, tn=st_tn
            )
            if config.offload_optimiser:
                remote_bytes[ipu] += w * DTYPE_BYTES[dt_name]
                state(
                    f"{g['name'][i]}/{state_name}",
                    nbytes=0,
                    always=True,
                    start=-1,
                    end=-1,
                    remote=True,
                    remote_bytes=sb,
                )
                u = int(upd_step[i])
                state(
                    f"{g['name'][i]}/{state_name}(buffer)",
                    nbytes=sb,
                    always=False,
                    start=u,
                    end=u,
                )
            else:
                state(f"{g['name'][i]}/{state_name}", nbytes=sb, always=True, start=-1, end=-1)

    # ---- plan temporaries ----------------------------------------------------------------------
    tmp = np.flatnonzero(P.temp_per_tile > 0)
    for row in tmp:
        row = int(row)
        V.add(
            f"{L['name'][row]}/temporaries",
            "temporary",
            cdt_name,
            "",
            int(P.temp_per_tile[row]) * int(P.tiles_used[row]),
            int(op_ipu[row]),
            False,
            first_step[row],
            last_step[row],
            P.tile_start[row],
            P.tiles_used[row],
            op=row,
        )

    # ---- pipeline stashes ------------------------------------------------------------------------
    stash_bytes = np.zeros(n_ipus, dtype=np.int64)
    if training and config.strategy == "pipelined" and S > 1:
        for s in range(S):
            depth = {"grouped": 2 * (S - 1 - s), "interleaved": S - 1 - s, "sequential": 0}[
                config.schedule
            ]
            if depth <= 0:
                continue
            if config.recomputation == "pipeline-stages":
                per_mb = in_bytes if s == 0 else int(boundary_bytes[s - 1])
            else:
                per_mb = int(saved_bytes_stage[s])
            rows_s = np.flatnonzero(L["stage"] == s)
            f_s = int(first_step[rows_s].min())
            l_s = int(last_step[rows_s[np.isin(role[rows_s], ("gi", "gw", "bwd"))]].max())
            stash_bytes[s] = depth * per_mb
            V.add(
                f"stage{s}/stash",
                "stash",
                cdt_name,
                f"{depth}x{per_mb}",
                depth * per_mb,
                s,
                False,
                f_s,
                l_s,
                0,
                T,
            )

    # ---- stream buffers on I/O tiles -------------------------------------------------------
    io_tiles = config.io_tiles
    if io_tiles:
        V.add(
            "input/streamBuffer",
            "streamBuffer",
            in_dtype,
            "",
            in_bytes,
            0,
            True,
            -1,
            -1,
            T,
            io_tiles,
        )
        if training:
            V.add(
                "labels/streamBuffer",
                "streamBuffer",
                "int32",
                "",
                B * label_bytes_ps,
                last_ipu,
                True,
                -1,
                -1,
                T,
                io_tiles,
            )

    variables = V.table()

    # ---- per-tile memory -------------------------------------------------------------------
    by_cat = np.zeros((n_ipus, TT, len(CAT)), dtype=np.int64)
    # per-tile liveness is stored as int32 (the schema's dtype): saturated at 2 GiB per tile,
    # which only impossible configurations (thousands of times a tile's SRAM) reach; the sums per
    # step are taken from the exact int64 grid
    per_tile_steps = np.zeros((n_ipus, n_steps, TT), dtype=np.int32)
    nal_sum = np.zeros((n_ipus, n_steps), dtype=np.int64)
    i32max = np.iinfo(np.int32).max
    al_var = np.zeros((n_ipus, TT), dtype=np.int64)
    peak_nal = np.zeros((n_ipus, TT), dtype=np.int64)
    var_count = np.zeros((n_ipus, TT), dtype=np.int64)
    prog_code = np.zeros(len(progs["type"]), dtype=np.int64)
    fams = t.vertex_families
    vt = P.vertex_types
    vt_fam = vt["family"]
    code_vt = np.array([fams[f].code_bytes if f in fams else 0 for f in vt_fam], dtype=np.int64)
    ptype = progs["type"]
    p_ipu = progs["ipu"]
    p_t0 = progs["tile_start"].astype(np.int64)
    p_tn = progs["tile_count"].astype(np.int64)
    p_fam = progs["family"]
    state_b = np.array([fams[f].state_bytes if f in fams else 0 for f in p_fam], dtype=np.int64)
    field_b = np.array([fams[f].field_bytes if f in fams else 0 for f in p_fam], dtype=np.int64)
    vlist_b = np.array(
        [fams[f].vector_list_bytes if f in fams else 0 for f in p_fam], dtype=np.int64
    )
    is_cs = ptype == T_ONTILE
    is_ex = ptype == T_EXCHANGE
    per_tile_vert = np.where(is_cs, _ceil_div(progs["vertices"], np.maximum(p_tn, 1)), 0)
    ex_per_tile = np.where(is_ex, _ceil_div(progs["bytes_in"], np.maximum(p_tn, 1)), 0)
    ex_code = np.where(
        is_ex,
        t.exchange_code_base_bytes
        + t.exchange_code_bytes_per_instruction
        * _ceil_div(ex_per_tile, t.exchange_bytes_per_instruction),
        0,
    )
    n_ipu_progs = np.bincount(p_ipu.astype(np.int64), minlength=n_ipus)
    participates = ptype != schema.code("program_type", "Sync")
    prog_code[:] = (
        (t.control_code_bytes_per_program + t.control_table_bytes_per_program) * TT
        + np.where(participates, t.control_code_bytes_per_participation * p_tn, 0)
        + ex_code * p_tn
    )
    copy_fam = p_fam == "copy"
    # outlining: a duplicate's compute set / exchange is the owner's; it costs a call only
    own = progs["owner_op"] == progs["op"]
    per_tile_vert = np.where(own, per_tile_vert, 0)
    ex_code = np.where(own, ex_code, 0)
    prog_code[:] = np.where(
        own, prog_code, (t.control_code_bytes_per_program + t.control_table_bytes_per_program) * TT
    )

    for ipu in range(n_ipus):
        on = p_ipu == ipu
        cat = by_cat[ipu]

        def spread(values, t0, tn, rows=None, _size=TT):
            """Sum of ``values`` (per tile) over tile ranges -> (TT,) per-tile totals."""
            d = np.zeros(_size + 1, dtype=np.int64)
            np.add.at(d, t0, values)
            np.add.at(d, t0 + tn, -values)
            return np.cumsum(d[:-1])

        sel = np.flatnonzero(on)
        t0s, tns = p_t0[sel], p_tn[sel]
        part = participates[sel] & own[sel]
        cat[:, CAT["controlCode"]] = n_ipu_progs[ipu] * t.control_code_bytes_per_program + spread(
            np.where(part, t.control_code_bytes_per_participation, 0), t0s, tns
        )
        cat[:, CAT["controlTable"]] = n_ipu_progs[ipu] * t.control_table_bytes_per_program
        cs = is_cs[sel] & own[sel]
        cat[:, CAT["controlId"]] = spread(np.where(cs, t.control_id_bytes_per_program, 0), t0s, tns)
        cat[:, CAT["internalExchangeCode"]] = spread(ex_code[sel], t0s, tns)
        v = per_tile_vert[sel]
        cat[:, CAT["vertexInstanceState"]] = spread(v * state_b[sel], t0s, tns)
        cat[:, CAT["vertexFieldData"]] = spread(v * field_b[sel], t0s, tns)
        cat[:, CAT["vectorListDescriptor"]] = spread(v * vlist_b[sel], t0s, tns)
        cat[:, CAT["copyDescriptor"]] = spread(
            np.where(cs & copy_fam[sel], t.copy_descriptor_bytes_per_copy * v, 0), t0s, tns
        )
        cat[:, CAT["constant"]] = spread(np.where(cs, t.constant_bytes_per_op_tile, 0), t0s, tns)
        if config.instrumentation:
            cat[:, CAT["instrumentationResults"]] = spread(
                np.where(part, t.instrumentation_bytes_per_program, 0), t0s, tns
            )
        cat[:, CAT["stack"]] = t.stack_bytes_per_tile
        # vertex code: each vertex type present on a tile costs its code once
        vsel = sel[is_cs[sel]]
        if len(vsel):
            d = np.zeros((len(code_vt), TT + 1), dtype=np.int64)
            vti = progs["vt"][vsel].astype(np.int64)
            np.add.at(d, (vti, p_t0[vsel]), 1)
            np.add.at(d, (vti, p_t0[vsel] + p_tn[vsel]), -1)
            present = np.cumsum(d[:, :-1], axis=1) > 0
            cat[:, CAT["vertexCode"]] = code_vt @ present
        # host exchange: input / label / output streams and remote-buffer copies
        var_sel = np.flatnonzero(variables.ipu == ipu)
        vt0 = variables.tile_start[var_sel].astype(np.int64)
        vtn = variables.tile_count[var_sel].astype(np.int64)
        kind = variables.kind[var_sel]
        vbytes = variables.bytes[var_sel]
        streamed = np.isin(kind, (KIND["input"], KIND["label"], KIND["output"]))
        if io_tiles:
            streamed &= False
        remote = variables.remote[var_sel]
        rb_tile = _ceil_div(variables.remote_bytes[var_sel], np.maximum(vtn, 1))
        sb_tile = _ceil_div(vbytes, np.maximum(vtn, 1))
        hx_streams = np.where(streamed, 1, 0) + np.where(remote, 2, 0)  # remote: load + store
        per_tile_bytes = np.where(streamed, sb_tile, 0) + np.where(remote, rb_tile, 0)
        hx_code = hx_streams * t.host_exchange_code_base_bytes + np.where(
            hx_streams > 0,
            t.exchange_code_bytes_per_instruction
            * _ceil_div(per_tile_bytes, t.exchange_bytes_per_instruction)
            * hx_streams,
            0,
        )
        cat[:, CAT["hostExchangeCode"]] = spread(hx_code, vt0, vtn)
        cat[:, CAT["hostExchangePacketHeader"]] = spread(
            hx_streams * _ceil_div(per_tile_bytes, t.packet_payload_bytes) * t.packet_header_bytes,
            vt0,
            vtn,
        )
        if io_tiles:
            io = slice(T, T + io_tiles)
            cat[io, CAT["hostExchangeCode"]] += int(t.io_tile_overhead_fraction * t.sram_per_tile)
            n_streams = 1 + (1 if training and ipu == last_ipu else 0)
            if ipu == 0 or ipu == last_ipu:
                pkt = _ceil_div(_ceil_div(in_bytes, io_tiles), t.packet_payload_bytes)
                cat[io, CAT["hostExchangePacketHeader"]] += n_streams * pkt * t.packet_header_bytes
        # global exchange: inter-IPU copies and cross-replica collectives
        transfers = 0
        if S > 1:
            sends = (1 if ipu < S - 1 else 0) + (1 if ipu > 0 else 0)
            transfers += sends * (2 if training else 1)
        if training and R > 1:
            transfers += 2 * (R - 1)
        if transfers:
            gx_bytes = (
                (boundary_bytes[ipu] if ipu < S - 1 else 0)
                + (boundary_bytes[ipu - 1] if ipu > 0 else 0)
                + (grad_bytes[ipu] if R > 1 else 0)
            )
            per_tile = _ceil_div(int(gx_bytes), T)
            cat[:T, CAT["globalExchangeCode"]] = (
                transfers * t.global_exchange_code_bytes_per_transfer
            )
            cat[:T, CAT["globalExchangePacketHeader"]] = (
                _ceil_div(per_tile, t.packet_payload_bytes) * t.packet_header_bytes
            )
        # variables: always-live per tile, not-always-live per step per tile
        always = variables.always_live[var_sel]
        nb = vbytes
        base = nb // np.maximum(vtn, 1)
        rem = nb - base * np.maximum(vtn, 1)
        al = np.flatnonzero(always)
        al_var[ipu] = spread(base[al], vt0[al], vtn[al]) + spread(
            np.ones(len(al), dtype=np.int64), vt0[al], rem[al]
        )
        var_count[ipu] = spread(np.ones(len(var_sel), dtype=np.int64), vt0, vtn)
        nal = np.flatnonzero(~always & (nb > 0))
        if n_steps and len(nal):
            s0 = variables.live_start[var_sel][nal].astype(np.int64)
            s1 = variables.live_end[var_sel][nal].astype(np.int64) + 1
            d = np.zeros((n_steps + 1, TT + 1), dtype=np.int64)
            for val, a0, a1 in (
                (base[nal], vt0[nal], vt0[nal] + vtn[nal]),
                (np.ones(len(nal), dtype=np.int64), vt0[nal], vt0[nal] + rem[nal]),
            ):
                np.add.at(d, (s0, a0), val)
                np.add.at(d, (s0, a1), -val)
                np.add.at(d, (s1, a0), -val)
                np.add.at(d, (s1, a1), val)
            # cumulative sums over tiles (contiguous), then over steps on a transposed copy
            # (a cumulative sum down the columns of a C-ordered array is strided and slow)
            acc = np.ascontiguousarray(np.cumsum(d, axis=1).T)
            np.cumsum(acc, axis=1, out=acc)
            grid = acc.T[:-1, :-1]
            per_tile_steps[ipu] = np.minimum(grid, i32max).astype(np.int32)
            nal_sum[ipu] = grid.sum(axis=1)
            peak_nal[ipu] = grid.max(axis=0)
        cat[:, CAT["variable"]] = al_var[ipu] + peak_nal[ipu]

    # ---- regions, liveness classes, gaps, OOM ------------------------------------------------
    non_var = by_cat.sum(axis=2) - by_cat[:, :, CAT["variable"]]
    var = by_cat[:, :, CAT["variable"]]
    cap_ni = t.non_interleaved_bytes_per_tile
    cap_i = t.sram_per_tile - cap_ni
    code_ni = np.minimum(non_var, cap_ni)
    var_i = np.minimum(var, cap_i)
    var_ni = np.minimum(var - var_i, cap_ni - code_ni)
    overflow = (non_var - code_ni) + (var - var_i - var_ni)
    by_region = np.stack([var_i, code_ni + var_ni, overflow], axis=2)
    total = by_cat.sum(axis=2)
    by_live = np.stack([total - peak_nal, peak_nal], axis=2)
    gaps = var_count * t.variable_alignment_gap_bytes
    oom_mask = total + gaps > t.sram_per_tile
    oom_tiles = np.argwhere(oom_mask).astype(np.int32).reshape(-1, 2)
    memory = MemoryReport(
        by_category=by_cat,
        by_region=by_region,
        by_liveness=by_live,
        total=total,
        gaps=gaps,
        physical_tile=_physical_tiles(TT),
        tile_xy=_tile_xy(TT),
        oom_tiles=oom_tiles,
        sram_per_tile=t.sram_per_tile,
    )
    liveness = LivenessReport(
        step_name=progs["name"][cs_rows],
        step_program=cs_rows.astype(np.int32),
        step_op=step_op.astype(np.int32),
        step_ipu=p_ipu[cs_rows].astype(np.int16),
        not_always_live=nal_sum,
        per_tile=per_tile_steps,
        always_live=(total - peak_nal).sum(axis=1),
        peak_step=(nal_sum.argmax(axis=1) if n_steps else np.zeros(n_ipus)).astype(np.int32),
    )
    act_b = [int(boundary_bytes[s]) if s < S - 1 else 0 for s in range(S)]
    io = {
        "input_elems_per_sample": int(graph.input_elems),
        "input_bytes_per_sample": int(graph.input_elems * in_elem_bytes),
        "input_dtype": in_dtype,
        "label_bytes_per_sample": int(label_bytes_ps) if training else 0,
        "output_bytes_per_micro_batch": int(out_bytes_mb),
        "input_stage": 0,
        "loss_stage": S - 1,
        "activation_bytes": act_b,
        "gradient_bytes": [0, *act_b[:-1]] if training else [0] * S,
        "weight_bytes": weight_bytes.tolist(),
        "weight_gradient_bytes": grad_bytes.tolist(),
        "remote_bytes": remote_bytes.tolist(),
        "remote_accumulator_bytes": remote_acc.tolist(),
        "stash_bytes": stash_bytes.tolist(),
    }
    return MemoryResult(
        variables=variables,
        memory=memory,
        liveness=liveness,
        io=io,
        oom=bool(oom_mask.any()),
        program_code=prog_code,
    )


def _physical_tiles(n: int) -> np.ndarray:
    """Physical tile id of each software tile id.

    Assumption (documented in docs/engine.md): software tiles pair into supertiles and alternate
    between the two halves of the chip; the physical id interleaves them accordingly.
    """
    sw = np.arange(n)
    half = n // 2
    return np.where(sw % 2 == 0, sw // 2, half + sw // 2).astype(np.int32)


def _tile_xy(n: int) -> np.ndarray:
    """Floor-plan column / row of each software tile (a near-square grid of supertiles)."""
    cols = int(np.ceil(np.sqrt(n / 2))) * 2
    phys = _physical_tiles(n)
    return np.stack([phys % cols, phys // cols], axis=1).astype(np.int16)


__all__ = ["MemoryResult", "build_memory"]
