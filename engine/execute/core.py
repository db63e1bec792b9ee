"""Execute an :class:`~engine.execute.plan.ExecutionPlan`: program tree and executed steps.

How it works (all numpy; no Python loop over executed steps, tiles, micro-batches or
iterations; loops are over stages, IPUs and templates only):

1. **Templates.** Every sequence of leaf programs that runs as a unit is a *template*: a stage's
   forward / backward / recomputation for one micro-batch, an IPU's weight update, and the
   single-step programs execute adds (stream copies, syncs, global exchanges, all-reduces,
   remote-buffer copies). Each template is a *function* in the program tree (a root Sequence
   holding its leaves) and is entered through ``Call`` nodes from the control program.
2. **Instances.** The schedule (:mod:`engine.execute.schedule`) says which stage-passes run in
   which *row* (superstep across the IPUs). From it, one iteration's template instances are built
   as flat arrays (ipu, row, order, template, micro-batch, stage, byte / cycle overrides), then
   tiled ``device_iterations`` times and framed by the host call's first and last rows.
3. **Timing.** Per (row, IPU) work ``W`` is a ``bincount``; a row lasts its slowest IPU's work;
   every IPU closes the row with an external Sync that absorbs its wait, then the row's
   GlobalExchange. Each IPU's timeline is therefore contiguous, and start cycles are one
   ``cumsum`` per IPU.
4. **Expansion.** Instances are sorted by (ipu, row, order) and expanded into steps by gathering
   the templates' leaf ids (``np.repeat`` + offsets).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.errors import ConfigError
from engine.execute import costs
from engine.execute.plan import ExecutionPlan
from engine.execute.schedule import BACKWARD, FORWARD, build_activity
from profiles.schema import code

T_SEQ = code("program_type", "Sequence")
T_REPEAT = code("program_type", "Repeat")
T_CALL = code("program_type", "Call")
T_GEX = code("program_type", "GlobalExchange")
T_SCB = code("program_type", "StreamCopyBegin")
T_SCM = code("program_type", "StreamCopyMid")
T_SCE = code("program_type", "StreamCopyEnd")
T_SYNC = code("program_type", "Sync")
T_EXCH = code("program_type", "DoExchange")

D_NONE = code("destination", "none")
D_HOST = code("destination", "host")
D_REMOTE = code("destination", "remoteBuffer")
D_IPU = code("destination", "ipu")
D_TILE = code("destination", "tile")

P_HOST = code("phase", "host")
P_UPDATE = code("phase", "weightUpdate")

S_NONE = code("sync_kind", "none")
S_EXT = code("sync_kind", "external")

ORDER_SYNC = 1_000_000_000
ORDER_EXCH = ORDER_SYNC + 1


@dataclass
class Execution:
    """What execute produces (the writer's ``/programs``, ``/execution`` groups).

    ``nodes`` holds the ``/programs/nodes`` columns, ``tile_cycles`` the ``/programs`` dataset,
    ``leaf_node[i]`` the node id of the compiler's leaf program ``i`` (to remap
    ``/graph/compute_sets.program`` and ``/liveness/steps.program``), ``steps`` the
    ``/execution/steps`` columns and ``attrs`` the ``/execution`` datasets and attributes.
    """

    nodes: dict[str, np.ndarray]
    tile_cycles: np.ndarray
    leaf_node: np.ndarray
    steps: dict[str, np.ndarray]
    attrs: dict[str, object]
    notes: list[str] = field(default_factory=list)

    @property
    def num_steps(self) -> int:
        return len(self.steps["program"])

    def group_data(self) -> dict[str, dict[str, object]]:
        """The writer's groups this result fills."""
        exe = dict(self.attrs)
        return {
            "/programs/nodes": dict(self.nodes),
            "/programs": {"tile_cycles": self.tile_cycles},
            "/execution": exe,
            "/execution/steps": dict(self.steps),
        }


# ---------------------------------------------------------------------------------------------
# program table builder
# ---------------------------------------------------------------------------------------------


class _Nodes:
    """Append-only program table, filled in depth-first pre-order."""

    COLS = (
        "name",
        "type",
        "parent",
        "ipu",
        "repeat",
        "op",
        "cycles",
        "tile_balance",
        "bytes",
        "sync",
        "code_bytes",
        # execution attributes of leaves (not written in /programs/nodes)
        "x_bytes_in",
        "x_bytes_out",
        "x_dest",
        "x_leaf",
        "x_tiles",
    )

    def __init__(self) -> None:
        self.cols: dict[str, list] = {c: [] for c in self.COLS}

    def __len__(self) -> int:
        return len(self.cols["name"])

    def add(
        self,
        name: str,
        type_: int,
        parent: int,
        ipu: int = -1,
        *,
        repeat: int = 1,
        op: int = -1,
        cycles: int = 0,
        balance: float = 0.0,
        nbytes: int = 0,
        sync: int = S_NONE,
        code_bytes: int = 0,
        bytes_in: int = 0,
        bytes_out: int = 0,
        dest: int = D_NONE,
        leaf: int = -1,
        tiles: tuple[int, int] = (0, 0),
    ) -> int:
        c = self.cols
        c["name"].append(name)
        c["type"].append(type_)
        c["parent"].append(parent)
        c["ipu"].append(ipu)
        c["repeat"].append(repeat)
        c["op"].append(op)
        c["cycles"].append(int(cycles))
        c["tile_balance"].append(balance)
        c["bytes"].append(int(nbytes))
        c["sync"].append(sync)
        c["code_bytes"].append(int(code_bytes))
        c["x_bytes_in"].append(int(bytes_in))
        c["x_bytes_out"].append(int(bytes_out))
        c["x_dest"].append(dest)
        c["x_leaf"].append(leaf)
        c["x_tiles"].append(tiles)
        return len(c["name"]) - 1


def _add_leaves(nodes: _Nodes, leaves, io, lf: np.ndarray, parent: int) -> np.ndarray:
    """Append compiler leaves ``lf`` (children of ``parent``) in bulk; returns their node ids."""
    leaf_bin, leaf_bout, leaf_dest = io
    c = nodes.cols
    first = len(nodes)
    n = len(lf)
    c["name"].extend(str(x) for x in leaves.name[lf])
    c["type"].extend(leaves.type[lf].tolist())
    c["parent"].extend([parent] * n)
    c["ipu"].extend(leaves.ipu[lf].tolist())
    c["repeat"].extend([1] * n)
    c["op"].extend(leaves.op[lf].tolist())
    c["cycles"].extend(leaves.cycles[lf].tolist())
    c["tile_balance"].extend(leaves.tile_balance[lf].tolist())
    c["bytes"].extend(leaves.bytes[lf].tolist())
    c["sync"].extend([S_NONE] * n)
    c["code_bytes"].extend(leaves.code_bytes[lf].tolist())
    c["x_bytes_in"].extend(leaf_bin[lf].tolist())
    c["x_bytes_out"].extend(leaf_bout[lf].tolist())
    c["x_dest"].extend(leaf_dest[lf].tolist())
    c["x_leaf"].extend(lf.tolist())
    c["x_tiles"].extend([(0, 0)] * n)
    return np.arange(first, first + n, dtype=np.int64)


@dataclass
class _Synth:
    """One leaf program execute adds."""

    type_: int
    cycles: int
    bytes_in: int = 0
    bytes_out: int = 0
    dest: int = D_NONE
    sync: int = S_NONE
    tiles: tuple[int, int] | None = None  # (first, count); None = all tiles


@dataclass
class _Template:
    name: str
    ipu: int
    leaves: np.ndarray | None = None  # compiler leaf ids
    synth: _Synth | None = None
    nodes: np.ndarray | None = None  # node ids, set when the functions are built
    cycles: int = 0
    #: Execute's own timing of a single compiler leaf (stream copies, collectives).
    cycles_override: int | None = None


# ---------------------------------------------------------------------------------------------
# instance table
# ---------------------------------------------------------------------------------------------


class _Instances:
    """Struct of arrays of template instances, built from vectorised chunks."""

    FIELDS = ("tmpl", "ipu", "row", "order", "mb", "stage", "cyc", "bin", "bout", "sync", "exch")

    def __init__(self) -> None:
        self.chunks: list[dict[str, np.ndarray]] = []

    def add(self, n: int, **kw) -> None:
        if n <= 0:
            return
        chunk = {}
        defaults = {"mb": -1, "stage": -1, "cyc": -1, "bin": -1, "bout": -1, "sync": 0, "exch": 0}
        for f in self.FIELDS:
            v = kw.get(f, defaults.get(f))
            chunk[f] = np.broadcast_to(np.asarray(v, dtype=np.int64), (n,))
        self.chunks.append(chunk)

    def concat(self) -> dict[str, np.ndarray]:
        if not self.chunks:
            return {f: np.zeros(0, np.int64) for f in self.FIELDS}
        return {f: np.concatenate([c[f] for c in self.chunks]) for f in self.FIELDS}


# ---------------------------------------------------------------------------------------------
# execute
# ---------------------------------------------------------------------------------------------


def execute_plan(plan: ExecutionPlan) -> Execution:
    """Build the program tree and every executed step of one host call of ``plan``."""
    L = plan.links
    h = plan.host
    S = plan.num_stages
    nI = plan.num_ipus
    G = int(plan.gradient_accumulation)
    DI = int(plan.device_iterations)
    mb_size = int(plan.micro_batch)
    leaves = plan.leaves
    lc = leaves.cycles.astype(np.int64)
    leaf_bin, leaf_bout, _ = _leaf_io(leaves)
    loss_stage = S - 1 if plan.loss_stage is None else int(plan.loss_stage)
    stage_ipu = np.array([st.ipu for st in plan.stages], dtype=np.int64)
    notes: list[str] = []

    # Inference pipelines stream all the micro-batches of a host call (device iterations x GA)
    # through one pipeline, filling and flushing it once per call (PopART: the pipeline depth of
    # inference is the batches per step); training pipelines fill and flush every weight update.
    stream_iters = (not plan.training) and plan.schedule in ("grouped", "interleaved") and S > 1
    G_run, DI_run = (G * DI, 1) if stream_iters else (G, DI)
    if stream_iters and G_run < S:
        raise ConfigError(
            f"device_iterations: an inference pipeline of {S} stages needs at least {S} "
            f"micro-batches per host call (device_iterations x gradient_accumulation); got {G_run}."
        )
    act = build_activity(S, G_run, plan.schedule, plan.training)

    # ---- templates --------------------------------------------------------------------------
    templates: list[_Template] = []
    by_name: dict[str, int] = {}

    def tmpl(t: _Template) -> int:
        if t.leaves is not None:
            t.leaves = np.asarray(t.leaves, dtype=np.int64)
            if t.cycles_override is not None:
                assert len(t.leaves) == 1, "only single-leaf templates are re-timed"
                t.cycles = int(t.cycles_override)
            else:
                t.cycles = int(lc[t.leaves].sum()) if len(t.leaves) else 0
        else:
            t.cycles = int(t.synth.cycles)
        by_name[t.name] = len(templates)
        templates.append(t)
        return len(templates) - 1

    fwd_t = np.full(S, -1)
    bwd_t = np.full(S, -1)
    rec_t = np.full(S, -1)
    fwd_cyc = np.zeros(S, np.int64)
    bwd_cyc = np.zeros(S, np.int64)
    for s, st in enumerate(plan.stages):
        fwd_t[s] = tmpl(_Template(f"stage{s}/forward", st.ipu, leaves=st.forward))
        fwd_cyc[s] = templates[fwd_t[s]].cycles
        if plan.training:
            bwd_t[s] = tmpl(_Template(f"stage{s}/backward", st.ipu, leaves=st.backward))
            bwd_cyc[s] = templates[bwd_t[s]].cycles
            rec = np.asarray(st.recompute, dtype=np.int64)
            if len(rec):
                if np.array_equal(rec, np.asarray(st.forward, dtype=np.int64)):
                    rec_t[s] = fwd_t[s]  # recomputation re-runs the forward function
                else:
                    rec_t[s] = tmpl(_Template(f"stage{s}/recompute", st.ipu, leaves=rec))
                bwd_cyc[s] += templates[rec_t[s]].cycles

    io = plan.io_tiles > 0
    io_range = (plan.tiles_per_ipu - plan.io_tiles, plan.io_tiles) if io else None

    def stream_set(
        prefix: str,
        ipu: int,
        nbytes: int,
        direction: str,
        overlap: int,
        dest=D_HOST,
        rate: float | None = None,
        leaves3: tuple[int, int, int] | None = None,
    ):
        """Begin / Mid / End templates of one stream copy (timed here); returns their ids.

        With ``leaves3`` the compiler's three leaf programs are used (their bytes are the facts),
        otherwise execute adds its own."""
        if leaves3 is not None:
            mid_leaf = int(leaves3[1])
            nbytes = int(max(leaf_bin[mid_leaf], leaf_bout[mid_leaf]))
        rate = L.host_link_bytes_per_cycle if rate is None else rate
        mid = int(costs.transfer_cycles(nbytes, rate))
        if io and dest == D_HOST:
            mid = max(0, mid - int(overlap))  # the I/O tiles overlap the copy with compute
        begin = (
            costs.stream_begin_cycles(L, h, overlap) if dest == D_HOST else L.exchange_setup_cycles
        )
        end = L.internal_sync_cycles
        if leaves3 is not None:
            return tuple(
                tmpl(_Template(str(leaves.name[lf]), ipu, leaves=[lf], cycles_override=c))
                for lf, c in zip(leaves3, (begin, mid, end))
            )
        bi, bo = (nbytes, 0) if direction == "in" else (0, nbytes)
        specs = (
            ("StreamCopyBegin", _Synth(T_SCB, begin, dest=dest, tiles=io_range)),
            ("StreamCopyMid", _Synth(T_SCM, mid, bi, bo, dest, tiles=io_range)),
            ("StreamCopyEnd", _Synth(T_SCE, end, dest=dest, tiles=io_range)),
        )
        return tuple(
            tmpl(_Template(f"ipu{ipu}/{prefix}.{kind}", ipu, synth=sy)) for kind, sy in specs
        )

    in_bytes = mb_size * int(plan.input_bytes_per_sample)
    lab_bytes = mb_size * int(plan.label_bytes_per_sample)
    out_bytes = int(plan.output_bytes_per_micro_batch)
    if plan.input_leaves is not None:
        in_bytes = int(leaf_bin[plan.input_leaves[1]])
    if plan.label_leaves is not None:
        lab_bytes = int(leaf_bin[plan.label_leaves[1]])
    if plan.output_leaves is not None:
        out_bytes = int(leaf_bout[plan.output_leaves[1]])
    in_t = (
        stream_set("input", stage_ipu[0], in_bytes, "in", fwd_cyc[0], leaves3=plan.input_leaves)
        if in_bytes
        else None
    )
    lab_ipu = stage_ipu[loss_stage]
    lab_t = (
        stream_set(
            "labels", lab_ipu, lab_bytes, "in", fwd_cyc[loss_stage], leaves3=plan.label_leaves
        )
        if lab_bytes and plan.training
        else None
    )
    per_mb_out = plan.output_mode in ("all", "every-n") and out_bytes > 0
    out_overlap = bwd_cyc[loss_stage] if plan.training else fwd_cyc[loss_stage]
    out_t = (
        stream_set("output", lab_ipu, out_bytes, "out", out_overlap, leaves3=plan.output_leaves)
        if per_mb_out
        else None
    )
    end_out_t = (
        stream_set("output", lab_ipu, out_bytes, "out", 0, leaves3=plan.output_leaves)
        if plan.output_mode in ("sum", "final") and out_bytes > 0
        else None
    )
    multi = nI > 1
    sync_t = (
        [
            tmpl(
                _Template(
                    f"ipu{i}/sync.external",
                    i,
                    synth=_Synth(T_SYNC, L.external_sync_cycles, sync=S_EXT),
                )
            )
            for i in range(nI)
        ]
        if multi
        else []
    )
    gex_t = (
        [
            tmpl(_Template(f"ipu{i}/stages.GlobalExchange", i, synth=_Synth(T_GEX, 0, dest=D_IPU)))
            for i in range(nI)
        ]
        if multi
        else []
    )
    wait_t = [
        tmpl(_Template(f"ipu{i}/hostCall.StreamCopyBegin", i, synth=_Synth(T_SCB, 0, dest=D_HOST)))
        for i in range(nI)
    ]

    # ---- one iteration's instances -----------------------------------------------------------
    inst = _Instances()
    nrow = act.n_rows
    a_row, a_stage, a_pass, a_mb = act.row, act.stage, act.pass_, act.micro_batch
    a_ipu = stage_ipu[a_stage]
    n_act = len(a_row)
    # position of each activity within its row (for ordering)
    row_first = np.searchsorted(a_row, a_row, side="left")
    a_pos = np.arange(n_act) - row_first
    a_tmpl = np.where(a_pass == FORWARD, fwd_t[a_stage], bwd_t[a_stage])
    # order within a row: per stage-pass, [accumulator load B/M/E] [recompute] [pass]
    # [accumulator store B/M/E] [output copy B/M/E]
    a_order = 10 + 16 * a_pos
    inst.add(n_act, tmpl=a_tmpl, ipu=a_ipu, row=a_row, order=a_order + 5, mb=a_mb, stage=a_stage)
    if plan.training:
        rec_mask = (a_pass == BACKWARD) & (rec_t[a_stage] >= 0)
        k = int(rec_mask.sum())
        inst.add(
            k,
            tmpl=rec_t[a_stage[rec_mask]],
            ipu=a_ipu[rec_mask],
            row=a_row[rec_mask],
            order=a_order[rec_mask] + 4,
            mb=a_mb[rec_mask],
            stage=a_stage[rec_mask],
        )
        # offloaded gradient accumulators: streamed in before and out after every backward
        for s_, st in enumerate(plan.stages):
            nb = int(st.remote_bytes_per_micro_batch)
            if nb <= 0:
                continue
            m = (a_pass == BACKWARD) & (a_stage == s_)
            rate = L.streaming_bytes_per_cycle
            for base, name, direction in (
                (1, "accumulators.load", "in"),
                (6, "accumulators.store", "out"),
            ):
                for j, t in enumerate(
                    stream_set(f"stage{s_}.{name}", st.ipu, nb, direction, 0, D_REMOTE, rate)
                ):
                    inst.add(
                        int(m.sum()),
                        tmpl=t,
                        ipu=st.ipu,
                        row=a_row[m],
                        order=a_order[m] + base + j,
                        mb=a_mb[m],
                        stage=s_,
                    )
    fwd_mask = a_pass == FORWARD
    first_in = fwd_mask & (a_stage == 0)
    if in_t is not None:
        k = int(first_in.sum())
        for j, t in enumerate(in_t):
            inst.add(
                k,
                tmpl=t,
                ipu=a_ipu[first_in],
                row=a_row[first_in],
                order=j,
                mb=a_mb[first_in],
                stage=0,
            )
    loss_fwd = fwd_mask & (a_stage == loss_stage)
    if lab_t is not None:
        k = int(loss_fwd.sum())
        for j, t in enumerate(lab_t):
            inst.add(
                k,
                tmpl=t,
                ipu=a_ipu[loss_fwd],
                row=a_row[loss_fwd],
                order=3 + j,
                mb=a_mb[loss_fwd],
                stage=loss_stage,
            )
    if out_t is not None:
        k = int(loss_fwd.sum())
        for j, t in enumerate(out_t):
            inst.add(
                k,
                tmpl=t,
                ipu=a_ipu[loss_fwd],
                row=a_row[loss_fwd],
                order=a_order[loss_fwd] + 9 + j,
                mb=a_mb[loss_fwd],
                stage=loss_stage,
            )

    # inter-stage global exchanges and syncs, per row
    row_has = np.bincount(a_row, minlength=nrow) > 0
    if multi:
        _stage_exchanges(plan, inst, templates, tmpl, act, fwd_mask, a_ipu, stage_ipu, gex_t, L)
        rows = np.nonzero(row_has)[0]
        ipus = np.arange(nI)
        rr = np.repeat(rows, nI)
        ii = np.tile(ipus, len(rows))
        inst.add(len(rr), tmpl=np.array(sync_t)[ii], ipu=ii, row=rr, order=ORDER_SYNC, sync=1)

    # weight update row
    row_phase = list(act.row_phase)
    upd_row = -1
    if plan.training:
        upd_row = nrow
        row_phase.append(P_UPDATE)
        R = int(plan.replicas)
        rts = plan.replicated_tensor_sharding and R > 1

        def collective(i, leaf, nbytes, phases, name):
            """Ring collective across the replicas, timed here (the compiler's leaf if any)."""
            if leaf >= 0:
                nbytes = int(max(leaf_bin[leaf], leaf_bout[leaf]))
            if nbytes <= 0:
                return None
            cyc = int(costs.ring_allreduce_cycles(nbytes, R, L, phases))
            if leaf >= 0:
                return tmpl(
                    _Template(str(leaves.name[leaf]), i, leaves=[leaf], cycles_override=cyc)
                )
            return tmpl(
                _Template(f"ipu{i}/{name}", i, synth=_Synth(T_GEX, cyc, nbytes, nbytes, D_IPU))
            )

        ipu_stage = np.full(nI, -1, np.int64)
        for s_ in range(S - 1, -1, -1):
            ipu_stage[stage_ipu[s_]] = s_  # the first stage of each IPU
        for i, ip in enumerate(plan.ipus):
            o = 0
            if R > 1:
                t = collective(
                    i,
                    ip.allreduce_leaf,
                    ip.gradient_bytes,
                    1 if rts else 2,
                    "replicas.ReduceScatter" if rts else "replicas.AllReduce",
                )
                if t is not None:
                    inst.add(1, tmpl=t, ipu=i, row=upd_row, stage=ipu_stage[i], order=o)
            o += 1
            rb = int(ip.remote_bytes // R) if rts else int(ip.remote_bytes)
            if rb > 0:
                for j, t in enumerate(
                    stream_set(
                        "optimiser.load", i, rb, "in", 0, D_REMOTE, L.streaming_bytes_per_cycle
                    )
                ):
                    inst.add(1, tmpl=t, ipu=i, row=upd_row, stage=ipu_stage[i], order=o + j)
            o += 3
            t = tmpl(_Template(f"ipu{i}/weightUpdate", i, leaves=ip.update))
            inst.add(1, tmpl=t, ipu=i, row=upd_row, stage=ipu_stage[i], order=o)
            o += 1
            if rb > 0:
                for j, t in enumerate(
                    stream_set(
                        "optimiser.store", i, rb, "out", 0, D_REMOTE, L.streaming_bytes_per_cycle
                    )
                ):
                    inst.add(1, tmpl=t, ipu=i, row=upd_row, stage=ipu_stage[i], order=o + j)
            o += 3
            if rts:
                t = collective(i, ip.allgather_leaf, ip.weight_bytes, 1, "replicas.AllGather")
                if t is not None:
                    inst.add(1, tmpl=t, ipu=i, row=upd_row, stage=ipu_stage[i], order=o)
            if multi:
                inst.add(1, tmpl=sync_t[i], ipu=i, row=upd_row, order=ORDER_SYNC, sync=1)
    rows_it = len(row_phase)
    one = inst.concat()

    # ---- tile over device iterations, frame with the host call ----------------------------
    n1 = len(one["tmpl"])
    it = np.repeat(np.arange(DI_run), n1)
    full = {k: np.tile(v, DI_run) for k, v in one.items()}
    full["row"] = full["row"] + 1 + it * rows_it
    full["iter"] = it
    if stream_iters:  # one pipeline over the call: micro-batch m belongs to iteration m // G
        has_mb = full["mb"] >= 0
        full["iter"] = np.where(has_mb, full["mb"] // G, 0)
        full["mb"] = np.where(has_mb, full["mb"] % G, -1)
    if out_t is not None and plan.output_mode == "every-n":
        # every N-th device iteration sends its micro-batches' outputs back
        n = max(1, int(plan.output_every_n))
        is_out = np.isin(full["tmpl"], np.array(out_t))
        keep = ~is_out | ((full["iter"] + 1) % n == 0)
        full = {k: v[keep] for k, v in full.items()}
    n_rows_total = 1 + DI_run * rows_it
    phases = np.concatenate([[P_HOST], np.tile(np.array(row_phase, np.uint8), DI_run)])
    extra = _Instances()
    extra.add(nI, tmpl=np.array(wait_t), ipu=np.arange(nI), row=0, order=0)
    if end_out_t is not None:
        end_row = n_rows_total
        n_rows_total += 1
        phases = np.concatenate([phases, [P_HOST]])
        for j, t in enumerate(end_out_t):
            extra.add(1, tmpl=t, ipu=lab_ipu, row=end_row, order=j)
        if multi:
            extra.add(
                nI, tmpl=np.array(sync_t), ipu=np.arange(nI), row=end_row, order=ORDER_SYNC, sync=1
            )
    ex = extra.concat()
    ex["iter"] = np.where(ex["row"] == 0, 0, DI - 1)
    allv = {k: np.concatenate([ex[k], full[k]]) for k in full}

    # ---- timing ---------------------------------------------------------------------------
    t_cyc = np.array([t.cycles for t in templates], np.int64)
    cyc = np.where(allv["cyc"] >= 0, allv["cyc"], t_cyc[allv["tmpl"]])
    is_sync = allv["sync"] == 1
    is_ex = allv["exch"] == 1
    key = allv["row"] * nI + allv["ipu"]
    work = np.bincount(
        key, weights=np.where(is_sync | is_ex, 0, cyc), minlength=n_rows_total * nI
    ).reshape(n_rows_total, nI)
    row_len = work.max(axis=1)
    cyc = np.where(
        is_sync,
        row_len[allv["row"]] - work[allv["row"], allv["ipu"]] + L.external_sync_cycles,
        cyc,
    ).astype(np.int64)
    # device time of the call (everything but the host wait row) -> host wait
    rows_per_ipu0 = allv["ipu"] == 0
    device_cycles = int(cyc[rows_per_ipu0 & (allv["row"] > 0)].sum())
    wait_s = costs.host_wait_seconds(plan, device_cycles / L.clock_hz)
    wait_cycles = round(wait_s * L.clock_hz)
    prep = costs.host_prep_seconds(plan)
    notes.append(
        f"host: {plan.samples_per_call:,} samples per call prepared in {prep * 1e3:.3f} ms on "
        f"{h.workers} worker(s) ({h.per_sample_s * 1e6:.1f} us per sample), {h.loader} loader, "
        f"{h.call_overhead_s * 1e6:.0f} us per call; the device waits {wait_s * 1e3:.3f} ms for "
        f"the host while running {device_cycles / L.clock_hz * 1e3:.3f} ms."
    )
    if act.pipelined:
        P = act.program_stages
        notes.append(
            f"pipeline ({plan.schedule}): {S} stages = {P} pipeline-program stages; per step "
            f"{P - 1} ramp-up, {G - (P - 1)} main and {P - 1} ramp-down cycles "
            f"(ramp share of cycles {2 * (P - 1) / (G + P - 1):.1%})."
        )
    cyc[allv["row"] == 0] = wait_cycles
    allv["cyc"] = cyc

    # ---- nodes: control tree + functions ----------------------------------------------------
    nodes, leaf_node, t_nodes = _build_tree(
        plan, act, templates, allv, rows_it, upd_row, end_out_t is not None, DI_run, G_run
    )

    # ---- expansion ----------------------------------------------------------------------------
    order = np.lexsort((allv["order"], allv["row"], allv["ipu"]))
    allv = {k: v[order] for k, v in allv.items()}
    tm = allv["tmpl"]
    t_len = np.array([len(t.nodes) for t in templates], np.int64)
    t_start = np.concatenate([[0], np.cumsum(t_len)[:-1]])
    t_flat = np.concatenate([t.nodes for t in templates]) if templates else np.zeros(0, np.int64)
    lens = t_len[tm]
    n_steps = int(lens.sum())
    inst_first = np.cumsum(lens) - lens
    step_inst = np.repeat(np.arange(len(tm)), lens)
    pos = np.arange(n_steps, dtype=np.int64) - inst_first[step_inst]
    step_node = t_flat[t_start[tm][step_inst] + pos]
    ncols = nodes.cols
    n_cycles = np.asarray(ncols["cycles"], np.int64)
    n_type = np.asarray(ncols["type"], np.uint8)
    n_bin = np.asarray(ncols["x_bytes_in"], np.int64)
    n_bout = np.asarray(ncols["x_bytes_out"], np.int64)
    n_dest = np.asarray(ncols["x_dest"], np.uint8)
    s_cycles = n_cycles[step_node]
    s_bin = n_bin[step_node]
    s_bout = n_bout[step_node]
    single = lens == 1
    idx = inst_first[single]
    s_cycles[idx] = allv["cyc"][single]
    ov = single & (allv["bin"] >= 0)
    s_bin[inst_first[ov]] = allv["bin"][ov]
    ov = single & (allv["bout"] >= 0)
    s_bout[inst_first[ov]] = allv["bout"][ov]
    s_ipu = allv["ipu"][step_inst]
    counts = np.bincount(s_ipu, minlength=nI)
    ipu_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    cs = np.cumsum(s_cycles)
    start = cs - s_cycles
    base = start[np.minimum(ipu_offsets[:-1], max(n_steps - 1, 0))]
    start = start - np.repeat(np.where(counts > 0, base, 0), counts)
    ends = np.array(
        [
            start[ipu_offsets[i + 1] - 1] + s_cycles[ipu_offsets[i + 1] - 1] if counts[i] else 0
            for i in range(nI)
        ],
        np.int64,
    )
    total = int(ends.max()) if nI else 0
    steps = {
        "program": step_node.astype(np.int32),
        "ipu": s_ipu.astype(np.int16),
        "start": start.astype(np.int64),
        "cycles": s_cycles.astype(np.int64),
        "type": n_type[step_node],
        "micro_batch": allv["mb"][step_inst].astype(np.int32),
        "stage": allv["stage"][step_inst].astype(np.int16),
        "phase": phases[allv["row"]][step_inst].astype(np.uint8),
        "iteration": allv["iter"][step_inst].astype(np.int32),
        "bytes_in": s_bin,
        "bytes_out": s_bout,
        "dest": n_dest[step_node],
    }
    samples = mb_size * G * DI * int(plan.replicas)
    seconds = total / L.clock_hz
    attrs = {
        "ipu_offsets": ipu_offsets,
        "run_starts": np.array([0], np.int64),
        "total_cycles": total,
        "device_cycles": int(total - wait_cycles),
        "host_seconds": float(wait_s),
        "samples": int(samples),
        "cycles_per_sample": float(total / samples) if samples else 0.0,
        "throughput": float(samples / seconds) if seconds > 0 else 0.0,
    }
    tile_cycles = _tile_cycles(plan, nodes, t_nodes, templates)
    node_cols = {
        "name": np.array(ncols["name"], dtype=object),
        "type": np.asarray(ncols["type"], np.uint8),
        "parent": np.asarray(ncols["parent"], np.int32),
        "ipu": np.asarray(ncols["ipu"], np.int16),
        "repeat": np.asarray(ncols["repeat"], np.int64),
        "op": np.asarray(ncols["op"], np.int32),
        "cycles": n_cycles,
        "tile_balance": np.asarray(ncols["tile_balance"], np.float32),
        "bytes": np.asarray(ncols["bytes"], np.int64),
        "sync": np.asarray(ncols["sync"], np.uint8),
        "code_bytes": np.asarray(ncols["code_bytes"], np.int64),
    }
    return Execution(node_cols, tile_cycles, leaf_node, steps, attrs, notes)


def _leaf_io(leaves) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bytes in / out and destination of every compiler leaf (see LeafPrograms)."""
    if leaves.bytes_in is not None:
        return (
            np.asarray(leaves.bytes_in, np.int64),
            np.asarray(leaves.bytes_out, np.int64),
            np.asarray(leaves.dest, np.uint8),
        )
    is_x = np.asarray(leaves.type) == T_EXCH
    b = np.asarray(leaves.bytes, np.int64)
    return (
        np.where(is_x, b, 0),
        np.where(is_x, b, 0),
        np.where(is_x, D_TILE, D_NONE).astype(np.uint8),
    )


def _stage_exchanges(plan, inst, templates, tmpl, act, fwd_mask, a_ipu, stage_ipu, gex_t, L):
    """GlobalExchange steps of the rows: each IPU sends the activations / gradients of the
    stage-passes it ran (one step per transfer, timed over the IPU-Links), then waits in one
    receive step until the row's slowest transfer ends (bytes received, dest ipu)."""
    S, nI, nrow = plan.num_stages, plan.num_ipus, act.n_rows
    leaf_bin, leaf_bout, _ = _leaf_io(plan.leaves)
    a_row, a_stage, a_pass, a_mb = act.row, act.stage, act.pass_, act.micro_batch
    copy_t = np.full((2, S), -1, np.int64)
    nbytes = np.zeros((2, S), np.int64)
    for s, st in enumerate(plan.stages):
        for k, (peer, leaf, b, label) in enumerate(
            (
                (s + 1, st.activation_copy, st.activation_bytes, "activations"),
                (s - 1, st.gradient_copy, st.gradient_bytes, "gradients"),
            )
        ):
            if not (0 <= peer < S) or stage_ipu[peer] == st.ipu or (k == 1 and not plan.training):
                continue
            if leaf >= 0:
                b = int(max(leaf_bin[leaf], leaf_bout[leaf]))
            if b <= 0:
                continue
            c = int(costs.global_exchange_cycles(b, L))
            nbytes[k, s] = b
            if leaf >= 0:
                t = _Template(str(plan.leaves.name[leaf]), st.ipu, leaves=[leaf], cycles_override=c)
            else:
                t = _Template(
                    f"ipu{st.ipu}/stage{s}.{label}.GlobalExchange",
                    st.ipu,
                    synth=_Synth(T_GEX, c, 0, b, D_IPU),
                )
            copy_t[k, s] = tmpl(t)
    t_cyc = np.array([t.cycles for t in templates], np.int64)
    send = np.zeros((nrow, nI), np.int64)
    recv = np.zeros((nrow, nI), np.int64)
    for k, (mask, step) in enumerate(((fwd_mask, 1), (a_pass == BACKWARD, -1))):
        m = mask & (copy_t[k, a_stage] >= 0)
        tm = copy_t[k, a_stage[m]]
        inst.add(
            int(m.sum()),
            tmpl=tm,
            ipu=a_ipu[m],
            row=a_row[m],
            order=ORDER_EXCH + k,
            mb=a_mb[m],
            stage=a_stage[m],
            exch=1,
        )
        np.add.at(send, (a_row[m], a_ipu[m]), t_cyc[tm])
        np.add.at(recv, (a_row[m], stage_ipu[a_stage[m] + step]), nbytes[k, a_stage[m]])
    recv_cyc = costs.global_exchange_cycles(recv, L)
    row_x = np.maximum(send.max(axis=1), recv_cyc.max(axis=1))
    rest = row_x[:, None] - send
    rr, ii = np.nonzero((rest > 0) | (recv > 0))
    inst.add(
        len(rr),
        tmpl=np.asarray(gex_t)[ii],
        ipu=ii,
        row=rr,
        order=ORDER_EXCH + 2,
        cyc=rest[rr, ii],
        bin=recv[rr, ii],
        bout=0,
        exch=1,
    )


def _build_tree(plan, act, templates, allv, rows_it, upd_row, has_end, DI, G):
    """Control program (Sequence / Repeat / Call) and one function per template."""
    nodes = _Nodes()
    leaves = plan.leaves
    io = _leaf_io(leaves)
    # calls per global row in iteration 0 (and the call frame rows), ordered (row, ipu, order)
    o = np.lexsort((allv["order"], allv["ipu"], allv["row"]))
    rows_sorted = allv["row"][o]
    tm_sorted = allv["tmpl"][o]

    def calls_of(global_rows, parent):
        sel = np.isin(rows_sorted, global_rows)
        for t in tm_sorted[sel]:
            tp = templates[t]
            nodes.add(f"Call {tp.name}", T_CALL, parent, tp.ipu)

    root = nodes.add("program", T_SEQ, -1)
    start = nodes.add("hostCall.begin", T_SEQ, root)
    calls_of([0], start)
    rep = nodes.add("deviceIterations", T_REPEAT, root, repeat=DI)
    body = nodes.add("iteration", T_SEQ, rep)
    cyc_of_row = act.row_cycle
    if act.pipelined:
        for ph_name, ph_code in (("rampUp", 0), ("main", 1), ("rampDown", 2)):
            rows = np.nonzero(act.row_phase == ph_code)[0]
            if len(rows) == 0:
                continue
            cycles = np.unique(cyc_of_row[rows])
            if ph_name == "main":
                grp = nodes.add("pipeline.main", T_REPEAT, body, repeat=len(cycles))
                cycles = cycles[:1]
                label = "main.cycle"
            else:
                grp = nodes.add(f"pipeline.{ph_name}", T_SEQ, body)
                label = None
            for c in cycles:
                seq = nodes.add(label or f"{ph_name}.cycle{int(c)}", T_SEQ, grp)
                calls_of(1 + np.nonzero(cyc_of_row == c)[0], seq)
    else:
        grp = nodes.add("gradientAccumulation", T_REPEAT, body, repeat=G)
        seq = nodes.add("microBatch", T_SEQ, grp)
        calls_of(1 + np.nonzero(cyc_of_row == 0)[0], seq)
    if upd_row >= 0:
        seq = nodes.add("weightUpdate", T_SEQ, body)
        calls_of([1 + upd_row], seq)
    if has_end:
        seq = nodes.add("hostCall.end", T_SEQ, root)
        calls_of([1 + DI * rows_it], seq)

    # functions
    leaf_node = np.full(len(leaves), -1, np.int64)
    t_nodes = []
    for t in templates:
        fn = nodes.add(t.name, T_SEQ, -1, t.ipu)
        if t.leaves is not None:
            lf = t.leaves
            new_lf = lf[leaf_node[lf] < 0]
            if len(new_lf):
                new_lf = new_lf[np.sort(np.unique(new_lf, return_index=True)[1])]
                leaf_node[new_lf] = _add_leaves(nodes, leaves, io, new_lf, fn)
            t.nodes = leaf_node[lf].astype(np.int64)
        else:
            s = t.synth
            name = t.name.split("/", 1)[1] if "/" in t.name else t.name
            tiles = s.tiles if s.tiles is not None else (0, plan.tiles_per_ipu)
            nid = nodes.add(
                name,
                s.type_,
                fn,
                t.ipu,
                cycles=s.cycles,
                balance=tiles[1] / plan.tiles_per_ipu if s.cycles else 0.0,
                nbytes=max(s.bytes_in, s.bytes_out),
                sync=s.sync,
                bytes_in=s.bytes_in,
                bytes_out=s.bytes_out,
                dest=s.dest,
                tiles=tiles,
            )
            t.nodes = np.array([nid], np.int64)
        t_nodes.append(t.nodes)
    missing = np.nonzero(leaf_node < 0)[0]
    if len(missing):
        fn = nodes.add("unscheduled", T_SEQ, -1)
        leaf_node[missing] = _add_leaves(nodes, leaves, io, missing, fn)
    return nodes, leaf_node, t_nodes


def _tile_cycles(plan, nodes, t_nodes, templates) -> np.ndarray:
    """Per-tile cycles of every node: compiler leaves copied, added leaves on their tiles."""
    n = len(nodes)
    out = np.zeros((n, plan.tiles_per_ipu), np.int32)
    leaf = np.asarray(nodes.cols["x_leaf"], np.int64)
    is_leaf = leaf >= 0
    if is_leaf.any() and len(plan.leaves):
        rows = np.flatnonzero(is_leaf)
        for a in range(0, len(rows), 4096):  # bounded temporary memory
            r = rows[a : a + 4096]
            out[r] = plan.leaves.dense_tile_cycles(leaf[r], plan.tiles_per_ipu)
    for t in templates:
        if t.synth is not None:
            nid = int(t.nodes[0])
            first, count = nodes.cols["x_tiles"][nid]
            out[nid, first : first + count] = t.synth.cycles
    return out
