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

The codes, the program table, the templates and instance tables these phases build on, and the
hand-offs between them, are in :mod:`engine.execute.program`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from engine.errors import ConfigError
from engine.execute import costs
from engine.execute.host import HostTimeline, host_model_summary, host_timeline
from engine.execute.plan import ExecutionPlan
from engine.execute.program import (
    D_HOST,
    D_IPU,
    D_REMOTE,
    FRAG_NONE,
    FRAG_TO_DEVICE,
    FRAG_TO_DEVICE_SYNC,
    FRAG_TO_HOST_SYNC,
    FRAGMENT_SYNCS,
    ORDER_EXCH,
    ORDER_SYNC,
    ORDER_TO_DEVICE_SYNC,
    ORDER_TO_HOST_SYNC,
    P_HOST,
    P_UPDATE,
    S_EXT,
    T_CALL,
    T_GEX,
    T_REPEAT,
    T_SCB,
    T_SEQ,
    T_SYNC,
    CallInstances,
    CallShape,
    CallTiming,
    IterationInstances,
    StageTemplates,
    TransferTemplates,
    _add_leaves,
    _Instances,
    _leaf_io,
    _node_columns,
    _Nodes,
    _Synth,
    _Template,
    _Templates,
)
from engine.execute.schedule import BACKWARD, FORWARD, Activity, build_activity
from profiles.runs import RunRows, tile_ranges


@dataclass
class Execution:
    """What execute produces (the writer's ``/programs``, ``/execution`` groups).

    ``nodes`` holds the ``/programs/nodes`` columns, ``tile_cycles`` the ``/programs`` dataset,
    ``leaf_node[i]`` the node id of the compiler's leaf program ``i`` (to remap
    ``/graph/compute_sets.program`` and ``/liveness/steps.program``), ``steps`` the
    ``/execution/steps`` columns and ``attrs`` the ``/execution`` datasets and attributes.
    """

    nodes: dict[str, np.ndarray]
    tile_cycles: np.ndarray | RunRows
    leaf_node: np.ndarray
    steps: dict[str, np.ndarray]
    attrs: dict[str, object]
    notes: list[str] = field(default_factory=list)
    #: The host's timeline of the call (``/execution/host`` columns), outside the device trace
    #: (engine.execute.host).
    host: dict[str, np.ndarray] | None = None

    @property
    def num_steps(self) -> int:
        return len(self.steps["program"])


# ---------------------------------------------------------------------------------------------
# execute_plan and its phases
# ---------------------------------------------------------------------------------------------


def execute_plan(plan: ExecutionPlan) -> Execution:
    """Build the program tree and every executed step of one host call of ``plan``.

    Phases: the call's shape (schedule rows); templates of the stages and of the transfers;
    one iteration's instances; the call's instances; their timing; the program tree; the steps.
    """
    shape = call_shape(plan)
    templates = _Templates(plan)
    stage_t = _stage_templates(plan, templates)
    transfer_t = _transfer_templates(plan, shape, templates, stage_t)
    iteration = iteration_instances(plan, shape, templates, stage_t, transfer_t)
    call = call_instances(plan, shape, iteration, transfer_t)
    timing = call_timing(plan, templates, call)
    nodes, leaf_node, t_nodes = _build_tree(
        plan,
        shape.activity,
        templates.items,
        call.instances,
        iteration.rows,
        iteration.update_row,
        call.has_end_row,
        shape.runs,
        shape.micro_batches_per_run,
    )
    steps, ipu_offsets, total = _expand_steps(plan, templates, call, timing, nodes)
    # the host's own time is outside the device trace: its timeline (engine.execute.host), of
    # the steady-state call, which has no profiled call's opening wait
    timeline = host_timeline(plan, total - profiled_wait_cycles(plan), total)
    notes = _notes(plan, shape, timeline)
    samples = int(plan.samples_per_call)
    attrs = {
        "ipu_offsets": ipu_offsets,
        "run_starts": np.array([0], np.int64),
        "total_cycles": total,
        "device_cycles": total,
        "samples": int(samples),
        "cycles_per_sample": float(total / samples) if samples else 0.0,
        **timeline.attrs(plan.links.clock_hz, host_model_summary(plan, timeline)),
    }
    tile_cycles = _tile_cycles(plan, nodes, t_nodes, templates.items)
    return Execution(
        _node_columns(nodes), tile_cycles, leaf_node, steps, attrs, notes, timeline.events
    )


def call_shape(plan: ExecutionPlan) -> CallShape:
    """The schedule's rows of one run (see :class:`CallShape`)."""
    S = plan.num_stages
    G, DI = int(plan.gradient_accumulation), int(plan.device_iterations)
    streams = (not plan.training) and plan.schedule in ("grouped", "interleaved") and S > 1
    per_run, runs = (G * DI, 1) if streams else (G, DI)
    if streams and per_run < S:
        raise ConfigError(
            f"device_iterations: an inference pipeline of {S} stages needs at least {S} "
            f"micro-batches per host call (device_iterations x gradient_accumulation); "
            f"got {per_run}."
        )
    return CallShape(
        streams_iterations=streams,
        micro_batches_per_run=per_run,
        runs=runs,
        activity=build_activity(S, per_run, plan.schedule, plan.training),
        stage_ipu=np.array([st.ipu for st in plan.stages], dtype=np.int64),
        loss_stage=S - 1 if plan.loss_stage is None else int(plan.loss_stage),
    )


def _stage_templates(plan: ExecutionPlan, templates: _Templates) -> StageTemplates:
    """One function per stage pass: forward, backward and (when it differs) recompute."""
    S = plan.num_stages
    fwd_t, bwd_t, rec_t = np.full(S, -1), np.full(S, -1), np.full(S, -1)
    fwd_cyc, bwd_cyc = np.zeros(S, np.int64), np.zeros(S, np.int64)
    for s, st in enumerate(plan.stages):
        fwd_t[s] = templates.add(_Template(f"stage{s}/forward", st.ipu, leaves=st.forward))
        fwd_cyc[s] = templates[fwd_t[s]].cycles
        if not plan.training:
            continue
        bwd_t[s] = templates.add(_Template(f"stage{s}/backward", st.ipu, leaves=st.backward))
        bwd_cyc[s] = templates[bwd_t[s]].cycles
        rec = np.asarray(st.recompute, dtype=np.int64)
        if len(rec):
            if np.array_equal(rec, np.asarray(st.forward, dtype=np.int64)):
                rec_t[s] = fwd_t[s]  # recomputation re-runs the forward function
            else:
                rec_t[s] = templates.add(_Template(f"stage{s}/recompute", st.ipu, leaves=rec))
            bwd_cyc[s] += templates[rec_t[s]].cycles
    return StageTemplates(fwd_t, bwd_t, rec_t, fwd_cyc, bwd_cyc)


def _transfer_templates(
    plan: ExecutionPlan, shape: CallShape, templates: _Templates, stage_t: StageTemplates
) -> TransferTemplates:
    """Stream copies (input, labels, outputs), syncs, exchange receive steps and host waits."""
    nI, mb_size = plan.num_ipus, int(plan.micro_batch)
    stage_ipu, loss_stage = shape.stage_ipu, shape.loss_stage
    leaf_bin, leaf_bout = templates.leaf_bytes_in, templates.leaf_bytes_out
    in_bytes = mb_size * int(plan.input_bytes_per_sample)
    lab_bytes = mb_size * int(plan.label_bytes_per_sample)
    out_bytes = int(plan.output_bytes_per_micro_batch)
    if plan.input_leaves is not None:
        in_bytes = int(leaf_bin[plan.input_leaves[1]])
    if plan.label_leaves is not None:
        lab_bytes = int(leaf_bin[plan.label_leaves[1]])
    if plan.output_leaves is not None:
        out_bytes = int(leaf_bout[plan.output_leaves[1]])
    stream = templates.stream_copy
    in_t = (
        stream(
            "input",
            stage_ipu[0],
            in_bytes,
            "in",
            stage_t.forward_cycles[0],
            leaves3=plan.input_leaves,
            receiving_tiles=plan.input_tiles,
        )
        if in_bytes
        else None
    )
    lab_ipu = stage_ipu[loss_stage]
    lab_t = (
        stream(
            "labels",
            lab_ipu,
            lab_bytes,
            "in",
            stage_t.forward_cycles[loss_stage],
            leaves3=plan.label_leaves,
            receiving_tiles=plan.label_tiles,
        )
        if lab_bytes and plan.training
        else None
    )
    per_mb_out = plan.output_mode in ("all", "every-n") and out_bytes > 0
    out_overlap = (
        stage_t.backward_cycles[loss_stage] if plan.training else stage_t.forward_cycles[loss_stage]
    )
    out_t = (
        stream("output", lab_ipu, out_bytes, "out", out_overlap, leaves3=plan.output_leaves)
        if per_mb_out
        else None
    )
    end_out_t = (
        stream("output", lab_ipu, out_bytes, "out", 0, leaves3=plan.output_leaves)
        if plan.output_mode in ("sum", "final") and out_bytes > 0
        else None
    )
    multi = nI > 1
    links = plan.links

    def per_ipu(name: str, make) -> list[int]:
        """One template per IPU, ``ipu{i}/{name}``, of the program ``make()`` returns."""
        return [templates.add(_Template(f"ipu{i}/{name}", i, synth=make())) for i in range(nI)]

    def ext_sync() -> _Synth:
        return _Synth(T_SYNC, links.external_sync_cycles, sync=S_EXT)

    sync_t = per_ipu("sync.external", ext_sync) if multi else []
    gex_t = per_ipu("stages.GlobalExchange", lambda: _Synth(T_GEX, 0, dest=D_IPU)) if multi else []
    wait_t = per_ipu("hostCall.StreamCopyBegin", lambda: _Synth(T_SCB, 0, dest=D_HOST))
    fragments = to_device_fragment(plan, shape)
    copies_in = in_t is not None or lab_t is not None
    to_dev_t = per_ipu("toDeviceStream.sync", ext_sync) if fragments and copies_in else []
    to_host_t = per_ipu("toHostStream.sync", ext_sync) if fragments and per_mb_out else []
    return TransferTemplates(
        input=in_t,
        labels=lab_t,
        output=out_t,
        end_output=end_out_t,
        label_ipu=int(lab_ipu),
        sync=sync_t,
        stage_exchange=gex_t,
        host_wait=wait_t,
        to_device_sync=to_dev_t,
        to_host_sync=to_host_t,
    )


def to_device_fragment(plan: ExecutionPlan, shape: CallShape) -> bool:
    """Whether a pipeline cycle's host-to-device copies run as a fragment of their own.

    PopART builds every pipeline cycle as: the pre-forward fragment, then the ToDeviceStream
    fragments of the stages that run in that cycle, then their Main fragments, then their
    ToHostStream fragments, then the inter-IPU copies (popart ``willow/src/popx/popprograms.cpp``,
    ``PopPrograms::addPipelineCycle``); PopTorch runs on PopART. Under PopART's default sync
    pattern (``SyncPattern::Full``) "any communication between the IPUs or with the host will
    require all IPUs to synchronise" (PopART user guide, "Sync configuration"), so no stage's
    Main fragment starts before every copy of the cycle has arrived: the copies are not
    overlapped with compute. With I/O tiles (PopART's overlapped I/O, where the fragment's code
    is inlined "in order to not block overlap") the copies run beside the compute instead. The
    same holds for the cycle's device-to-host copies (outputs All / EveryN): they wait for every
    stage's Main fragment.
    """
    return bool(shape.activity.pipelined and plan.num_ipus > 1 and plan.io_tiles == 0)


def iteration_instances(
    plan: ExecutionPlan,
    shape: CallShape,
    templates: _Templates,
    stage_t: StageTemplates,
    transfer_t: TransferTemplates,
) -> IterationInstances:
    """Template instances of one iteration: the stage passes (with recomputation and offloaded
    accumulators), the streams, the inter-stage exchanges and syncs, the weight update."""
    inst = _Instances()
    _pass_instances(plan, shape, templates, stage_t, inst)
    _stream_instances(plan, shape, transfer_t, inst)
    act = shape.activity
    if plan.num_ipus > 1:  # inter-stage global exchanges and syncs, per row
        a_ipu = shape.stage_ipu[act.stage]
        _stage_exchanges(
            plan,
            inst,
            templates.items,
            templates.add,
            act,
            act.pass_ == FORWARD,
            a_ipu,
            shape.stage_ipu,
            transfer_t.stage_exchange,
            plan.links,
        )
        rows = np.nonzero(np.bincount(act.row, minlength=act.n_rows) > 0)[0]
        nI = plan.num_ipus
        rr = np.repeat(rows, nI)
        ii = np.tile(np.arange(nI), len(rows))
        inst.add(
            len(rr),
            tmpl=np.array(transfer_t.sync)[ii],
            ipu=ii,
            row=rr,
            order=ORDER_SYNC,
            sync=1,
        )
    row_phase = tuple(int(p) for p in act.row_phase)
    update_row = -1
    if plan.training:
        update_row = act.n_rows
        row_phase += (int(P_UPDATE),)
        _weight_update_instances(plan, shape, templates, transfer_t, update_row, inst)
    return IterationInstances(inst.concat(), row_phase, update_row)


def _pass_order(act: Activity) -> np.ndarray:
    """Order base of each stage-pass within its row: per stage-pass, [accumulator load B/M/E]
    [recompute] [pass] [accumulator store B/M/E] [output copy B/M/E]."""
    row_first = np.searchsorted(act.row, act.row, side="left")
    return 10 + 16 * (np.arange(len(act.row)) - row_first)


def _pass_instances(
    plan: ExecutionPlan,
    shape: CallShape,
    templates: _Templates,
    stage_t: StageTemplates,
    inst: _Instances,
) -> None:
    """Stage passes, their recomputation and the offloaded accumulators' streams."""
    act = shape.activity
    a_row, a_stage, a_pass, a_mb = act.row, act.stage, act.pass_, act.micro_batch
    a_ipu = shape.stage_ipu[a_stage]
    a_order = _pass_order(act)
    a_tmpl = np.where(a_pass == FORWARD, stage_t.forward[a_stage], stage_t.backward[a_stage])
    inst.add(
        len(a_row), tmpl=a_tmpl, ipu=a_ipu, row=a_row, order=a_order + 5, mb=a_mb, stage=a_stage
    )
    if not plan.training:
        return
    rec_mask = (a_pass == BACKWARD) & (stage_t.recompute[a_stage] >= 0)
    inst.add(
        int(rec_mask.sum()),
        tmpl=stage_t.recompute[a_stage[rec_mask]],
        ipu=a_ipu[rec_mask],
        row=a_row[rec_mask],
        order=a_order[rec_mask] + 4,
        mb=a_mb[rec_mask],
        stage=a_stage[rec_mask],
    )
    # offloaded gradient accumulators: streamed in before and out after every backward
    rate = plan.links.streaming_bytes_per_cycle
    for s, st in enumerate(plan.stages):
        nb = int(st.remote_bytes_per_micro_batch)
        if nb <= 0:
            continue
        m = (a_pass == BACKWARD) & (a_stage == s)
        for base, name, direction in (
            (1, "accumulators.load", "in"),
            (6, "accumulators.store", "out"),
        ):
            copies = templates.stream_copy(
                f"stage{s}.{name}", st.ipu, nb, direction, 0, D_REMOTE, rate
            )
            for j, t in enumerate(copies):
                inst.add(
                    int(m.sum()),
                    tmpl=t,
                    ipu=st.ipu,
                    row=a_row[m],
                    order=a_order[m] + base + j,
                    mb=a_mb[m],
                    stage=s,
                )


def _stream_instances(
    plan: ExecutionPlan, shape: CallShape, transfer_t: TransferTemplates, inst: _Instances
) -> None:
    """Per micro-batch: the input before stage 0's forward, the labels before the loss stage's
    forward, the outputs after the loss stage's pass. In a pipeline the cycle's input and label
    copies form its ToDeviceStream fragment, closed by a sync of every IPU
    (:func:`to_device_fragment`)."""
    act = shape.activity
    a_row, a_stage, a_mb = act.row, act.stage, act.micro_batch
    a_ipu = shape.stage_ipu[a_stage]
    a_order = _pass_order(act)
    fwd_mask = act.pass_ == FORWARD
    loss_stage = shape.loss_stage
    first_in = fwd_mask & (a_stage == 0)
    loss_fwd = fwd_mask & (a_stage == loss_stage)
    zero = np.zeros(len(a_row), np.int64)
    frag = FRAG_TO_DEVICE if transfer_t.to_device_sync else FRAG_NONE
    # outputs: after the loss stage's pass, or, as a ToHostStream fragment, after every pass
    out_order = zero + ORDER_TO_HOST_SYNC + 1 if transfer_t.to_host_sync else a_order + 9
    for copies, mask, stage, order, in_frag in (
        (transfer_t.input, first_in, 0, zero, frag),
        (transfer_t.labels, loss_fwd, loss_stage, zero + 3, frag),
        (transfer_t.output, loss_fwd, loss_stage, out_order, FRAG_NONE),
    ):
        if copies is None:
            continue
        for j, t in enumerate(copies):
            inst.add(
                int(mask.sum()),
                tmpl=t,
                ipu=a_ipu[mask],
                row=a_row[mask],
                order=order[mask] + j,
                mb=a_mb[mask],
                stage=stage,
                frag=in_frag,
            )
    if not (transfer_t.to_device_sync or transfer_t.to_host_sync):
        return
    # every IPU closes the ToDeviceStream fragment of each cycle that copies anything to the
    # device, and opens the ToHostStream fragment of each cycle that copies outputs back
    none = np.zeros(len(a_row), bool)
    copied_in = (first_in if transfer_t.input is not None else none) | (
        loss_fwd if transfer_t.labels is not None else none
    )
    copied_out = loss_fwd if transfer_t.output is not None else none
    nI = plan.num_ipus
    for copied, syncs, sync_order, kind in (
        (copied_in, transfer_t.to_device_sync, ORDER_TO_DEVICE_SYNC, FRAG_TO_DEVICE_SYNC),
        (copied_out, transfer_t.to_host_sync, ORDER_TO_HOST_SYNC, FRAG_TO_HOST_SYNC),
    ):
        rows = np.unique(a_row[copied], return_index=True)[0]  # (the hash path imports numpy.ma)
        if not syncs or not len(rows):
            continue
        inst.add(
            len(rows) * nI,
            tmpl=np.tile(np.array(syncs), len(rows)),
            ipu=np.tile(np.arange(nI), len(rows)),
            row=np.repeat(rows, nI),
            order=sync_order,
            frag=kind,
        )


def _weight_update_instances(
    plan: ExecutionPlan,
    shape: CallShape,
    templates: _Templates,
    transfer_t: TransferTemplates,
    update_row: int,
    inst: _Instances,
) -> None:
    """Per IPU, in the update row: the replica collective (all-reduce, or reduce-scatter under
    replicated tensor sharding), the offloaded optimiser state's load, the update, the state's
    store, the all-gather (replicated tensor sharding) and the sync."""
    S, nI, links = plan.num_stages, plan.num_ipus, plan.links
    R = int(plan.replicas)
    rts = plan.replicated_tensor_sharding and R > 1

    def collective(i, leaf, nbytes, phases, name, code_bytes=0):
        """Ring collective across the replicas, timed here (the compiler's leaf if any); its
        code is the compile's ring programs' (``IpuPlan.collective_code_bytes``)."""
        if leaf >= 0:
            nbytes = templates.leaf_bytes(leaf)
        if nbytes <= 0:
            return None
        cyc = int(costs.ring_allreduce_cycles(nbytes, R, links, phases))
        if leaf >= 0:
            return templates.add(
                _Template(str(plan.leaves.name[leaf]), i, leaves=[leaf], cycles_override=cyc)
            )
        return templates.add(
            _Template(
                f"ipu{i}/{name}",
                i,
                synth=_Synth(T_GEX, cyc, nbytes, nbytes, D_IPU, code_bytes=int(code_bytes)),
            )
        )

    ipu_stage = np.full(nI, -1, np.int64)
    for s in range(S - 1, -1, -1):
        ipu_stage[shape.stage_ipu[s]] = s  # the first stage of each IPU
    rate = links.streaming_bytes_per_cycle
    for i, ip in enumerate(plan.ipus):
        in_row = partial(inst.add, 1, ipu=i, row=update_row, stage=ipu_stage[i])
        order = 0
        # the compile's reduce-scatter and all-gather ring programs: an all-reduce is both
        ring_code = [*ip.collective_code_bytes, 0, 0]
        if R > 1:
            t = collective(
                i,
                ip.allreduce_leaf,
                ip.gradient_bytes,
                1 if rts else 2,
                "replicas.ReduceScatter" if rts else "replicas.AllReduce",
                ring_code[0] if rts else ring_code[0] + ring_code[1],
            )
            if t is not None:
                in_row(tmpl=t, order=order)
        order += 1
        remote = int(ip.remote_bytes // R) if rts else int(ip.remote_bytes)
        if remote > 0:
            for j, t in enumerate(
                templates.stream_copy("optimiser.load", i, remote, "in", 0, D_REMOTE, rate)
            ):
                in_row(tmpl=t, order=order + j)
        order += 3
        t = templates.add(_Template(f"ipu{i}/weightUpdate", i, leaves=ip.update))
        in_row(tmpl=t, order=order)
        order += 1
        if remote > 0:
            for j, t in enumerate(
                templates.stream_copy("optimiser.store", i, remote, "out", 0, D_REMOTE, rate)
            ):
                in_row(tmpl=t, order=order + j)
        order += 3
        if rts:
            t = collective(
                i, ip.allgather_leaf, ip.weight_bytes, 1, "replicas.AllGather", ring_code[1]
            )
            if t is not None:
                in_row(tmpl=t, order=order)
        if nI > 1:
            inst.add(1, tmpl=transfer_t.sync[i], ipu=i, row=update_row, order=ORDER_SYNC, sync=1)


def call_instances(
    plan: ExecutionPlan,
    shape: CallShape,
    iteration: IterationInstances,
    transfer_t: TransferTemplates,
) -> CallInstances:
    """Tile one iteration over the device iterations and frame it with the host call: row 0
    waits for the host; outputs of modes sum / final go back in a last row."""
    nI, G, DI = plan.num_ipus, int(plan.gradient_accumulation), int(plan.device_iterations)
    runs, rows_it = shape.runs, iteration.rows
    one = iteration.instances
    n1 = len(one["tmpl"])
    it = np.repeat(np.arange(runs), n1)
    full = {k: np.tile(v, runs) for k, v in one.items()}
    full["row"] = full["row"] + 1 + it * rows_it
    full["iter"] = it
    if shape.streams_iterations:  # one pipeline over the call: micro-batch m is in iteration m // G
        has_mb = full["mb"] >= 0
        full["iter"] = np.where(has_mb, full["mb"] // G, 0)
        full["mb"] = np.where(has_mb, full["mb"] % G, -1)
    if transfer_t.output is not None and plan.output_mode == "every-n":
        # every N-th device iteration sends its micro-batches' outputs back
        n = max(1, int(plan.output_every_n))
        is_out = np.isin(full["tmpl"], np.array(transfer_t.output))
        keep = ~is_out | ((full["iter"] + 1) % n == 0)
        if transfer_t.to_host_sync:  # a ToHostStream fragment only where outputs are copied
            kept_rows = np.unique(full["row"][is_out & keep], return_index=True)[0]
            opens = np.isin(full["tmpl"], np.array(transfer_t.to_host_sync))
            keep &= ~opens | np.isin(full["row"], kept_rows)
        full = {k: v[keep] for k, v in full.items()}
    n_rows = 1 + runs * rows_it
    phases = np.concatenate([[P_HOST], np.tile(np.array(iteration.row_phase, np.uint8), runs)])
    frame = _Instances()
    frame.add(nI, tmpl=np.array(transfer_t.host_wait), ipu=np.arange(nI), row=0, order=0)
    end_output = transfer_t.end_output
    has_end = end_output is not None
    if end_output is not None:
        end_row = n_rows
        n_rows += 1
        phases = np.concatenate([phases, [P_HOST]])
        for j, t in enumerate(end_output):
            frame.add(1, tmpl=t, ipu=transfer_t.label_ipu, row=end_row, order=j)
        if nI > 1:
            frame.add(
                nI,
                tmpl=np.array(transfer_t.sync),
                ipu=np.arange(nI),
                row=end_row,
                order=ORDER_SYNC,
                sync=1,
            )
    ex = frame.concat()
    ex["iter"] = np.where(ex["row"] == 0, 0, DI - 1)
    instances = {k: np.concatenate([ex[k], full[k]]) for k in full}
    return CallInstances(instances, phases, n_rows, has_end)


def call_timing(plan: ExecutionPlan, templates: _Templates, call: CallInstances) -> CallTiming:
    """Per (row, IPU) work; every IPU's external Sync absorbs its wait for the row's slowest
    IPU; the call starts (row 0) with the device's sync with the host: the host's own time is
    outside the device trace (engine.execute.host)."""
    nI, links = plan.num_ipus, plan.links
    inst = call.instances
    cyc = np.where(inst["cyc"] >= 0, inst["cyc"], templates.cycles()[inst["tmpl"]])
    is_sync = inst["sync"] == 1
    is_ex = inst["exch"] == 1
    key = inst["row"] * nI + inst["ipu"]
    for kind, order in FRAGMENT_SYNCS:
        # a fragment sync ends when every IPU has done its work of the row before it: the
        # ToDeviceStream fragment lasts its longest copy on any IPU, the ToHostStream fragment
        # starts after the longest Main fragment (to_device_fragment)
        frag_sync = inst["frag"] == kind
        if not frag_sync.any():
            continue
        before = (inst["order"] < order) & ~is_sync & ~is_ex
        work_before = np.bincount(
            key, weights=np.where(before, cyc, 0), minlength=call.rows * nI
        ).reshape(call.rows, nI)
        longest = work_before.max(axis=1)
        r, i = inst["row"], inst["ipu"]
        cyc = np.where(
            frag_sync, longest[r] - work_before[r, i] + links.external_sync_cycles, cyc
        ).astype(np.int64)
    work = np.bincount(
        key, weights=np.where(is_sync | is_ex, 0, cyc), minlength=call.rows * nI
    ).reshape(call.rows, nI)
    row_len = work.max(axis=1)
    cyc = np.where(
        is_sync,
        row_len[inst["row"]] - work[inst["row"], inst["ipu"]] + links.external_sync_cycles,
        cyc,
    ).astype(np.int64)
    # The first stream copy's StreamCopyBegin then waits for the host's service as every copy
    # does; preparation, the call and the waits between calls are the host timeline's. A
    # profiled call (the trace PopVision shows) also waits in that opening sync for what the
    # framework's profiled call does beyond a steady-state one (profiled_wait_cycles).
    cyc[inst["row"] == 0] = int(links.external_sync_cycles) + profiled_wait_cycles(plan)
    return CallTiming(cyc)


def profiled_wait_cycles(plan: ExecutionPlan) -> int:
    """Cycles a profiled call's opening sync with the host waits beyond a steady-state call's
    (the run's ``profiled_call_wait_us``, default the framework's in engine/data/frameworks.toml):
    in the device trace, not in throughput."""
    return round(float(plan.host.profiled_wait_s) * float(plan.links.clock_hz))


def _notes(plan: ExecutionPlan, shape: CallShape, timeline: HostTimeline) -> list[str]:
    """The host and pipeline notes of the profile."""
    h = plan.host
    notes = [
        f"host: {plan.samples_per_call:,} samples per call prepared in "
        f"{timeline.prep_s * 1e3:.3f} ms ({h.per_sample_s * 1e6:.1f} us per sample on one core, "
        f"{h.parallel} process(es) at a time on each of {h.instances} host server(s)), "
        f"{h.loader} loader with {h.workers} worker(s), {h.call_overhead_s * 1e6:.0f} us per "
        f"call; the device runs {timeline.device_s * 1e3:.3f} ms per call and waits "
        f"{timeline.exposed_s * 1e3:.3f} ms for the host outside its trace."
    ]
    if h.profiled_wait_s > 0:
        notes.append(
            f"profiled call: the trace's opening host sync waits {h.profiled_wait_s * 1e3:.3f} ms "
            "more than a steady-state call's (profiled_call_wait_us: what a profiled call does "
            "beyond the program; PopTorch's default is fitted to the walkthrough's published "
            "traces); throughput is the steady-state call's, without it."
        )
    act = shape.activity
    if act.pipelined:
        P, S, G = act.program_stages, plan.num_stages, int(plan.gradient_accumulation)
        notes.append(
            f"pipeline ({plan.schedule}): {S} stages = {P} pipeline-program stages; per step "
            f"{P - 1} ramp-up, {G - (P - 1)} main and {P - 1} ramp-down cycles "
            f"(ramp share of cycles {2 * (P - 1) / (G + P - 1):.1%})."
        )
    return notes


def _built_nodes(template) -> np.ndarray:
    """A template's node ids, which building the functions sets before any step expands."""
    if template.nodes is None:
        raise AssertionError(
            f"template {template.name!r} has no nodes: its functions were not built"
        )
    return template.nodes


def _expand_steps(
    plan: ExecutionPlan,
    templates: _Templates,
    call: CallInstances,
    timing: CallTiming,
    nodes: _Nodes,
) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Every executed step: instances sorted by (ipu, row, order) and expanded by gathering
    their templates' nodes. Returns the steps, the IPU offsets and the total cycles."""
    nI = plan.num_ipus
    inst = dict(call.instances, cyc=timing.cycles)
    order = np.lexsort((inst["order"], inst["row"], inst["ipu"]))
    inst = {k: v[order] for k, v in inst.items()}
    tm = inst["tmpl"]
    items = templates.items
    nodes_of = [_built_nodes(t) for t in items]  # per template, not per step
    t_len = np.array([len(n) for n in nodes_of], np.int64)
    t_start = np.concatenate([[0], np.cumsum(t_len)[:-1]])
    t_flat = np.concatenate(nodes_of) if items else np.zeros(0, np.int64)
    lens = t_len[tm]
    n_steps = int(lens.sum())
    inst_first = np.cumsum(lens) - lens
    # every step's node: its instance's template's nodes in order (instance columns are spread
    # over the steps with np.repeat, in the dtype written; no step-to-instance index array)
    at = np.repeat(t_start[tm] - inst_first, lens)
    at += np.arange(n_steps, dtype=np.int64)
    step_node = t_flat[at]
    del at
    s_cycles = nodes.column("cycles")[step_node]
    s_bin = nodes.column("x_bytes_in")[step_node]
    s_bout = nodes.column("x_bytes_out")[step_node]
    # single-step instances carry their own timing and bytes
    single = lens == 1
    s_cycles[inst_first[single]] = inst["cyc"][single]
    ov = single & (inst["bin"] >= 0)
    s_bin[inst_first[ov]] = inst["bin"][ov]
    ov = single & (inst["bout"] >= 0)
    s_bout[inst_first[ov]] = inst["bout"][ov]
    counts = np.bincount(inst["ipu"], weights=lens, minlength=nI).astype(np.int64)
    ipu_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    # start cycles: one running sum of the cycles, restarted at every IPU's first step
    start = np.cumsum(s_cycles)
    start -= s_cycles
    ends = np.zeros(nI, np.int64)
    for i in range(nI):
        a, b = int(ipu_offsets[i]), int(ipu_offsets[i + 1])
        if b > a:
            start[a:b] -= start[a]
            ends[i] = start[b - 1] + s_cycles[b - 1]
    total = int(ends.max()) if nI else 0
    steps = {
        "program": step_node.astype(np.int32),
        "ipu": np.repeat(inst["ipu"].astype(np.int16), lens),
        "start": start,
        "cycles": s_cycles,
        "type": nodes.column("type")[step_node],
        "micro_batch": np.repeat(inst["mb"].astype(np.int32), lens),
        "stage": np.repeat(inst["stage"].astype(np.int16), lens),
        "phase": np.repeat(call.row_phase[inst["row"]].astype(np.uint8), lens),
        "iteration": np.repeat(inst["iter"].astype(np.int32), lens),
        "bytes_in": s_bin,
        "bytes_out": s_bout,
        "dest": nodes.column("x_dest")[step_node],
    }
    return steps, ipu_offsets, total


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
            # (np.unique's hash path, without return_index, imports numpy.ma: 13 ms cold)
            cycles = np.unique(cyc_of_row[rows], return_index=True)[0]
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
                code_bytes=s.code_bytes,
            )
            t.nodes = np.array([nid], np.int64)
        t_nodes.append(t.nodes)
    missing = np.nonzero(leaf_node < 0)[0]
    if len(missing):
        fn = nodes.add("unscheduled", T_SEQ, -1)
        leaf_node[missing] = _add_leaves(nodes, leaves, io, missing, fn)
    return nodes, leaf_node, t_nodes


def _tile_cycles(plan, nodes, t_nodes, templates) -> np.ndarray | RunRows:
    """Per-tile cycles of every node: compiler leaves copied, added leaves on their tiles.

    With the compiler's compact layout, the rows come as runs (:class:`profiles.runs.RunRows`,
    four runs a row: zeros, ``cycles``, ``cycles_min``, zeros) that the writer lays out block
    by block: the same values as the dense array, which is never built whole."""
    n = len(nodes)
    leaf = nodes.column("x_leaf")
    is_leaf = leaf >= 0
    if plan.leaves.tile_start is not None and len(plan.leaves) > 0:
        start, count, nmax, hi, lo = plan.leaves.compact(np.where(is_leaf, leaf, -1))
        for t in templates:  # added leaves: their cycles on their tiles, zeros elsewhere
            if t.synth is not None:
                nid = int(t.nodes[0])
                first = int(nodes.column("x_tile_first")[nid])
                n_tiles = int(nodes.column("x_tile_count")[nid])
                a, b, _ = slice(first, first + n_tiles).indices(plan.tiles_per_ipu)
                b = max(a, b)  # the tiles out[nid, first : first + n_tiles] names
                start[nid], count[nid], nmax[nid] = a, b - a, b - a
                hi[nid], lo[nid] = t.synth.cycles, 0
        runs = tile_ranges(start, count, nmax, hi, lo, plan.tiles_per_ipu)
        if runs is not None:
            return runs
    out = np.zeros((n, plan.tiles_per_ipu), np.int32)
    if is_leaf.any() and len(plan.leaves):
        rows = np.flatnonzero(is_leaf)
        for a in range(0, len(rows), 4096):  # bounded temporary memory
            r = rows[a : a + 4096]
            out[r] = plan.leaves.dense_tile_cycles(leaf[r], plan.tiles_per_ipu)
    for t in templates:
        if t.synth is not None:
            nid = int(t.nodes[0])
            first = int(nodes.column("x_tile_first")[nid])
            n_tiles = int(nodes.column("x_tile_count")[nid])
            out[nid, first : first + n_tiles] = t.synth.cycles
    return out
