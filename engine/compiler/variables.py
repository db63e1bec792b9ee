"""The variables of a compiled program (``engine.compiler.memory``'s variable phase): whole-array
rules, one block of columns per rule (activations, streamed tensors, weights, temporaries,
stashes, stream buffers), merged into the variable table's order by a key. The kinds and their
live ranges are described in ``engine.compiler.memory``'s module docstring."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from engine.compiled import (
    VariableTable,
)
from engine.compiler.lowering import DTYPE_BYTES
from engine.compiler.memory_records import (
    KIND,
    ActivationBytes,
    LivenessSteps,
    MemoryInputs,
    StreamedTensors,
    WeightBytes,
    _ceil_div,
    _scatter_add,
)
from engine.graph import INPUT

_VARIABLE_COLUMNS = (
    ("name", object),
    ("kind", np.uint8),
    ("dtype", object),
    ("shape", object),
    ("bytes", np.int64),
    ("ipu", np.int16),
    ("always_live", bool),
    ("live_start", np.int32),
    ("live_end", np.int32),
    ("tile_start", np.int32),
    ("tile_count", np.int32),
    ("interleaved", bool),
    ("remote", bool),
    ("remote_bytes", np.int64),
    ("op", np.int32),
)


class _Vars:
    """Variables accumulated as blocks of columns, one block per rule (a whole-array rule adds
    every variable it makes at once; costing is vectorised afterwards)."""

    def __init__(self) -> None:
        self.blocks: list[tuple[dict[str, np.ndarray], np.ndarray]] = []

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
        key=0,
    ) -> None:
        """One variable (``name`` a string) or a block of them (``name`` a list; every other
        argument one value per variable or one for all). ``key`` orders the blocks merged by
        ``merge``. Variables without bytes on chip (and not remote) are dropped by ``table``."""
        many = not isinstance(name, str)
        n = len(name) if many else 1
        block: dict[str, np.ndarray] = {}
        values: tuple = (name, KIND[kind], dtype, shape, nbytes, ipu, always, start, end, t0, tn)
        values += (interleaved, remote, remote_bytes, op)
        for (col, dt), value in zip(_VARIABLE_COLUMNS, values):
            if dt is object:
                column = np.empty(n, dtype=object)
                column[:] = value if (many and not isinstance(value, str)) else [value] * n
            else:
                column = np.broadcast_to(np.asarray(value, dtype=np.int64), (n,))
            block[col] = column
        self.blocks.append((block, np.broadcast_to(np.asarray(key, dtype=np.int64), (n,))))

    def merge(self, first: int) -> None:
        """Blocks ``first`` onwards made one block, their variables ordered by key (stable: in
        the order added among equal keys)."""
        blocks = self.blocks[first:]
        if len(blocks) < 2:
            return
        keys = np.concatenate([k for _, k in blocks])
        order = np.argsort(keys, kind="stable")
        merged = {
            col: np.concatenate([b[col] for b, _ in blocks])[order] for col, _ in _VARIABLE_COLUMNS
        }
        self.blocks[first:] = [(merged, keys[order])]

    def table(self) -> VariableTable:
        cols = {
            col: np.concatenate([b[col] for b, _ in self.blocks])
            if self.blocks
            else np.zeros(0, dtype=dt)
            for col, dt in _VARIABLE_COLUMNS
        }
        keep = (cols["bytes"] > 0) | (cols["remote"] != 0)
        always = cols["always_live"][keep] != 0
        out = {col: cols[col][keep].astype(dt) for col, dt in _VARIABLE_COLUMNS}
        out["live_start"][always] = -1
        out["live_end"][always] = -1
        np.maximum(out["tile_count"], 1, out=out["tile_count"])
        return VariableTable(**out)


@dataclass(frozen=True)
class _Edges:
    """Every use of an op's output by a consumer (``src`` -> ``dst``, graph ops), ordered by
    producer, then consumer, then input slot: each producer's consumers in graph order, a
    consumer listed twice when both its inputs read it. ``users_of_input``: the consumers of
    the graph input in the same order."""

    src: np.ndarray
    dst: np.ndarray
    users_of_input: list[int]


def _consumers(graph) -> _Edges:
    """Consumers of each graph op and of the graph input (``INPUT``)."""
    cols, n = graph.cols, len(graph)
    src = np.stack([cols["in0"], cols["in1"]], axis=1).astype(np.int64).ravel()
    dst = np.repeat(np.arange(n, dtype=np.int64), 2)
    used = src >= INPUT
    src, dst = src[used], dst[used]
    order = np.argsort(src, kind="stable")  # by producer; by consumer and slot within one
    src, dst = src[order], dst[order]
    from_ops = src >= 0
    return _Edges(src[from_ops], dst[from_ops], dst[src == INPUT].tolist())


def _swish_sigmoids(cols, src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """The Sigmoid ops of ``x * sigmoid(x)`` pairs: torch's ONNX exporter writes
    ``torch.nn.SiLU`` so, and PopTorch lowers it to one PopART ``Swish`` (poptorch
    ``scripts/PopAtenHandlers.py``: ``convert("silu", 1, "swish")``), whose gradient
    (popart ``SwishGradOp``, an ``ElementWiseNonLinearUnaryGradOp``) takes the forward input
    alone: the sigmoid's output is not kept for the backward. TensorFlow on the IPU has the same
    fused op (``tensorflow.python.ipu.nn_ops.swish``, which Graphcore's TensorFlow EfficientNet
    uses); PopART runs an ONNX file's Sigmoid and Mul as they are. A Sigmoid qualifies when its
    only consumer is a Mul whose other input is the Sigmoid's own input."""
    types = cols["type"]
    sig = np.flatnonzero(types == "Sigmoid")
    if not len(sig):
        return sig
    uses = np.bincount(src, minlength=n)
    sig = sig[uses[sig] == 1]
    first_use = np.searchsorted(src, sig)  # edges are ordered by producer
    mul = dst[first_use]
    in0, in1 = cols["in0"].astype(np.int64), cols["in1"].astype(np.int64)
    x = in0[sig]
    pair = (types[mul] == "Mul") & (
        ((in0[mul] == sig) & (in1[mul] == x)) | ((in1[mul] == sig) & (in0[mul] == x))
    )
    return sig[pair & (x != -2)]


def _group_norm_whitened(cols, src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    """The InstanceNormalization ops of torch's export of ``nn.GroupNorm`` (reshape to the
    groups, InstanceNormalization, reshape back, Mul by the per-channel weight, Add the bias):
    PopTorch lowers ``aten::group_norm`` to one PopART GroupNormalization (poptorch
    ``popart_canonicalization/NormalizationOps.cpp`` ``groupNormHandler``), whose gradient
    (popart ``GroupNormGradOp``) takes the input, the weight, the mean and the inverse standard
    deviation, so the whitened output the weight's Mul would keep is not kept; Graphcore's
    TensorFlow models call ``ipu.normalization_ops.group_norm`` (popnn ``groupNormalise``), the
    same fused op. An InstanceNorm qualifies when its only consumer is a Mul by a weight."""
    types = cols["type"]
    norm = np.flatnonzero(types == "InstanceNorm")
    if not len(norm):
        return norm
    uses = np.bincount(src, minlength=n)
    norm = norm[uses[norm] == 1]
    mul = dst[np.searchsorted(src, norm)]  # edges are ordered by producer
    weighted = (types[mul] == "Mul") & (cols["in1"][mul] == -2) & (cols["weight_elems"][mul] > 0)
    return norm[weighted]


def _activation_variables(
    inputs: MemoryInputs, steps: LivenessSteps, edges: _Edges, rows: _Vars
) -> ActivationBytes:
    """Activations, their received copies on later stages, recomputed copies and gradients.

    Whole-array rules over the graph's ops and its edges (producer -> consumer); each op's
    variables in the order: its activation, its recomputed copy, its copies received by
    consumers on other stages (in the consumers' order), its gradient."""
    graph, lowered, plan = inputs.graph, inputs.lowered, inputs.plan
    cols = graph.cols
    n = len(graph)
    B, S, training = inputs.micro_batch, inputs.stages, plan.training
    elem_bytes = inputs.activation_bytes_per_element
    stage_of = lowered.stage_of_fwd.astype(np.int64)
    ipu_of_op = np.arange(S)[stage_of]
    first, last = steps.first, steps.last
    forward_row, recompute_row = steps.forward_row, steps.recompute_row
    backward_first, backward_last = steps.backward_first, steps.backward_last
    loss_inputs = np.array(sorted({i for i in lowered.loss_inputs if 0 <= i < n}), dtype=np.int64)
    has_loss = len(steps.loss_rows) > 0
    has_loss_grad = len(steps.loss_grad_rows) > 0
    saved = np.zeros(S, dtype=np.int64)
    boundary = np.zeros(max(S - 1, 0) + 1, dtype=np.int64)
    if not n:
        return ActivationBytes(saved=saved, boundary=boundary)
    saves_input = cols["saves_input"].astype(bool)
    src, dst = edges.src, edges.dst

    row = forward_row
    nbytes = B * cols["out_elems"].astype(np.int64) * elem_bytes
    t0, tn = inputs.output_tiles_of(row, nbytes)
    start = first[row]
    # the last forward use: the last consumer on the op's own stage (the op's own step if none)
    # and the loss for the loss's inputs
    same = stage_of[src] == stage_of[dst]
    fwd_use = np.where(
        np.bincount(src[same], minlength=n) > 0,
        _group_max(src[same], last[row[dst[same]]], n),
        start,
    )
    if has_loss and len(loss_inputs):
        fwd_use[loss_inputs] = np.maximum(fwd_use[loss_inputs], last[steps.loss_rows[0]])
    # stage-crossing consumers: a received copy on the consumer's IPU; the bytes cross every
    # stage boundary up to the farthest consumer
    far = ~same
    farthest = _group_max(src[far], stage_of[dst[far]], n)
    crosses = np.flatnonzero(farthest > stage_of)
    boundary += np.cumsum(
        _scatter_add(
            np.concatenate((stage_of[crosses], farthest[crosses])),
            np.concatenate((nbytes[crosses], -nbytes[crosses])),
            len(boundary) + 1,
        )
    )[:-1]
    # the last backward step that needs the activation: its own backward when it saves its
    # output, a same-stage consumer's that saves its input, the loss's gradient
    bwd_need = np.full(n, -1, dtype=np.int64)
    if training:
        bwd_need = np.where(cols["saves_output"].astype(bool), backward_last, -1)
        keeps = same & saves_input[dst]
        bwd_need = np.maximum(bwd_need, _group_max(src[keeps], backward_last[dst[keeps]], n))
        if has_loss_grad and len(loss_inputs):
            bwd_need[loss_inputs] = np.maximum(bwd_need[loss_inputs], last[steps.loss_grad_rows[0]])
        if plan.framework in ("poptorch", "tensorflow"):  # PopART runs the ONNX ops as given
            bwd_need[_swish_sigmoids(cols, src, dst, n)] = -1
            bwd_need[_group_norm_whitened(cols, src, dst, n)] = -1
    names = cols["name"].tolist()
    shape = [f"{B}x{e}" for e in cols["out_elems"].tolist()]
    # this op's activations: the same dtype and tiles, live between two steps
    act = partial(rows.add, kind="activation", dtype=plan.compute_dtype, always=False)
    order = (
        np.arange(n, dtype=np.int64) * 4
    )  # key: op, then activation / recomputed / received / gradient
    mark = len(rows.blocks)
    needed = bwd_need >= 0
    recomputed = needed & lowered.recompute.astype(bool) & (recompute_row >= 0)
    act(
        names,
        shape=shape,
        nbytes=nbytes,
        ipu=ipu_of_op,
        start=start,
        end=np.where(recomputed, fwd_use, np.maximum(fwd_use, bwd_need)),
        t0=t0,
        tn=tn,
        op=row,
        key=order,
    )
    kept = needed & ~lowered.recompute.astype(bool)
    saved += _scatter_add(stage_of[kept], nbytes[kept], S)
    rc = np.flatnonzero(recomputed)
    rc_first = first[recompute_row[rc]]
    act(
        [f"{names[i]}/recomputed" for i in rc.tolist()],
        shape=[shape[i] for i in rc.tolist()],
        nbytes=nbytes[rc],
        ipu=ipu_of_op[rc],
        start=rc_first,
        end=np.maximum(bwd_need[rc], rc_first),
        t0=t0[rc],
        tn=tn[rc],
        op=recompute_row[rc],
        key=order[rc] + 1,
    )
    # received copies, one per stage-crossing use
    i, j = src[far], dst[far]
    jrow = row[j]
    stashes = saves_input[j] if training else np.zeros(len(j), bool)
    need = np.where(stashes, backward_last[j], last[jrow])
    jt0, jtn = inputs.output_tiles_of(jrow, nbytes[i])
    act(
        [f"{names[a]}/received@ipu{b}" for a, b in zip(i.tolist(), ipu_of_op[j].tolist())],
        shape=[shape[a] for a in i.tolist()],
        nbytes=nbytes[i],
        ipu=ipu_of_op[j],
        start=first[jrow],
        end=np.maximum(need, last[jrow]),
        t0=jt0,
        tn=jtn,
        op=jrow,
        key=order[i] + 2,
    )
    saved += _scatter_add(stage_of[j[stashes]], nbytes[i[stashes]], S)
    # gradients: from the first consumer's backward (or the loss's gradient) to the op's own
    if training:
        makes = backward_last[dst] >= 0
        produced = np.bincount(src[makes], minlength=n) > 0
        grad_start = _group_min(src[makes], backward_first[dst[makes]], n)
        if has_loss_grad and len(loss_inputs):
            produced[loss_inputs] = True
            grad_start[loss_inputs] = np.minimum(
                grad_start[loss_inputs], first[steps.loss_grad_rows[0]]
            )
        g = np.flatnonzero((backward_last >= 0) & produced & (grad_start <= backward_last))
        act(
            [f"{names[i]}/grad" for i in g.tolist()],
            kind="gradient",
            shape=[shape[i] for i in g.tolist()],
            nbytes=nbytes[g],
            ipu=ipu_of_op[g],
            start=grad_start[g],
            end=backward_last[g],
            t0=t0[g],
            tn=tn[g],
            op=row[g],
            key=order[g] + 3,
        )
    rows.merge(mark)
    return ActivationBytes(saved=saved, boundary=boundary)


def _group_max(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Maximum of ``values`` per group ``0..n-1`` (-1 for an empty group; values >= -1)."""
    out = np.full(n, -1, dtype=np.int64)
    np.maximum.at(out, group, values)
    return out


def _group_min(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Minimum of ``values`` per group ``0..n-1`` (int64 max for an empty group)."""
    out = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(out, group, values)
    return out


def _streamed_variables(
    inputs: MemoryInputs, steps: LivenessSteps, input_users: list[int], rows: _Vars
) -> StreamedTensors:
    """The graph input (and its normalised copy), the labels and the outputs."""
    graph, plan = inputs.graph, inputs.plan
    cols = graph.cols
    B, training = inputs.micro_batch, plan.training
    cdt_name, cdt = plan.compute_dtype, inputs.activation_bytes_per_element
    first, last, backward_last = steps.first, steps.last, steps.backward_last
    forward_row = steps.forward_row
    last_step = steps.count - 1
    tokens = graph.input_kind == "tokens"
    in_elem_bytes = 4 if tokens else (1 if plan.eight_bit_input else cdt)
    in_dtype = "int32" if tokens else ("uint8" if plan.eight_bit_input else cdt_name)
    in_bytes = B * graph.input_elems * in_elem_bytes
    in_shape = f"{B}x{graph.input_elems}"
    first_user = int(forward_row[input_users[0]]) if input_users else 0
    need = max([last[forward_row[j]] for j in input_users] or [0])
    if training:
        need = max([need] + [backward_last[j] for j in input_users if cols["saves_input"][j]])
    in_tiles = inputs.output_tiles(first_user, in_bytes)
    saved_input = 0
    # One input buffer either way (counted once): with a normalisation op the raw input lives
    # until that op has read it and the normalised copy is what the model (and the backward
    # pass) reads; without one the model reads the input itself until its last user.
    norm = int(steps.normalise_rows[0]) if len(steps.normalise_rows) else None
    rows.add(
        "input",
        "input",
        in_dtype,
        in_shape,
        in_bytes,
        0,
        False,
        0,
        need if norm is None else last[norm],
        *in_tiles,
        op=first_user if norm is None else norm,
    )
    if norm is not None:
        nb = B * graph.input_elems * cdt
        rows.add(
            "input/normalised",
            "activation",
            cdt_name,
            in_shape,
            nb,
            0,
            False,
            first[norm],
            max(need, last[norm]),
            *inputs.output_tiles(norm, nb),
            op=norm,
        )
        if training:
            saved_input = nb
    elif training and any(cols["saves_input"][j] for j in input_users):
        saved_input = in_bytes
    label_bytes_per_sample = 4 * graph.label_elems
    last_ipu = inputs.stages - 1
    out_bytes = 0
    if training and len(steps.loss_rows):
        loss, loss_grad = int(steps.loss_rows[0]), int(steps.loss_grad_rows[0])
        label_bytes = B * label_bytes_per_sample
        rows.add(
            "labels",
            "label",
            "int32",
            f"{B}x{graph.label_elems}",
            label_bytes,
            last_ipu,
            False,
            first[loss],
            last[loss_grad],
            *inputs.output_tiles(loss, label_bytes),
            op=loss,
        )
        rows.add(
            "loss",
            "output",
            "float32",
            f"{B}",
            4 * B,
            last_ipu,
            False,
            last[loss],
            last_step,
            *inputs.output_tiles(loss, 4 * B),
            op=loss,
        )
        out_bytes = 4 * B
    if not training or (plan.training_outputs == "output-and-loss" and len(steps.loss_rows)):
        # the model's output as an anchor: inference's result, or a training model that returns
        # its output beside the loss (PopTorch's trainingModel returns what forward returns)
        last_row = int(forward_row[len(graph) - 1])
        logits = B * graph.output_elems * cdt
        out_bytes += logits
        rows.add(
            "logits",
            "output",
            cdt_name,
            f"{B}x{graph.output_elems}",
            logits,
            last_ipu,
            False,
            last[last_row],
            last_step,
            *inputs.output_tiles(last_row, logits),
            op=last_row,
        )
    return StreamedTensors(
        input_bytes=int(in_bytes),
        input_bytes_per_element=int(in_elem_bytes),
        input_dtype=in_dtype,
        saved_input_bytes=int(saved_input),
        label_bytes_per_sample=int(label_bytes_per_sample),
        output_bytes_per_micro_batch=int(out_bytes),
    )


def _weight_variables(inputs: MemoryInputs, steps: LivenessSteps, rows: _Vars) -> WeightBytes:
    """Weights, weight gradients, accumulators (GA > 1) and optimiser state.

    Whole-array rules over the ops with weights; each op's variables in the order: weight,
    gradient, accumulator (and its buffer when offloaded), each optimiser state (and its
    buffer when offloaded)."""
    cols, plan = inputs.graph.cols, inputs.plan
    training = plan.training
    n_ipus = inputs.num_ipus
    wdt_name, wdt = plan.weight_dtype, inputs.weight_bytes_per_element
    cdt_name, cdt = plan.compute_dtype, inputs.activation_bytes_per_element
    GA = plan.gradient_accumulation
    R = plan.replicas
    rts = plan.replicated_tensor_sharding
    ipu_of_op = np.arange(inputs.stages)[inputs.lowered.stage_of_fwd]
    acc_dt = plan.accumulator_bytes
    ops = np.flatnonzero(cols["weight_elems"] > 0)
    w = cols["weight_elems"][ops].astype(np.int64)
    row = steps.forward_row[ops]
    ipu = ipu_of_op[ops].astype(np.int64)
    wb = w * wdt
    t0, tn = inputs.output_tiles_of(row, wb)
    names = [str(x) for x in cols["name"][ops].tolist()]
    shape = [str(x) for x in w.tolist()]
    key = np.arange(len(ops), dtype=np.int64) * 64  # op, then its variables in order
    weight_bytes = _scatter_add(ipu, wb, n_ipus)
    grad_bytes = np.zeros(n_ipus, dtype=np.int64)
    remote_bytes = np.zeros(n_ipus, dtype=np.int64)
    remote_acc = np.zeros(n_ipus, dtype=np.int64)
    mark = len(rows.blocks)
    # this op's weight variables: on its tiles, made by its op
    rows.add(
        [f"{x}/weight" for x in names],
        "weight",
        wdt_name,
        shape,
        wb,
        ipu,
        True,
        -1,
        -1,
        t0,
        tn,
        op=row,
        key=key,
    )
    if training:
        grad_bytes = _scatter_add(ipu, w * (acc_dt if GA > 1 else wdt), n_ipus)
        g = np.flatnonzero(steps.weight_grad_step[ops] >= 0)
        gl = g.tolist()
        grad_step = steps.weight_grad_step[ops[g]]
        # the gradient lives until the step that consumes it: its accumulation, or the update
        use_step = (steps.accumulate_step if GA > 1 else steps.update_step)[ops[g]]
        update_step = steps.update_step[ops[g]]
        wvar = partial(
            rows.add, shape=[shape[i] for i in gl], ipu=ipu[g], t0=t0[g], tn=tn[g], op=row[g]
        )

        def named(suffix: str) -> list[str]:
            return [f"{names[i]}/{suffix}" for i in gl]

        def state_var(add, suffix: str, nbytes, slot, remote: bool, step) -> None:
            """An accumulator or optimiser state: always live on chip, or (``remote``) in
            streaming memory with an on-chip buffer (key ``slot + 1``) live at ``step``."""
            if not remote:
                add(named(suffix), nbytes=nbytes, always=True, start=-1, end=-1, key=slot)
                return
            add(
                named(suffix),
                nbytes=0,
                always=True,
                start=-1,
                end=-1,
                remote=True,
                remote_bytes=nbytes,
                key=slot,
            )
            add(
                named(f"{suffix}(buffer)"),
                nbytes=nbytes,
                always=False,
                start=step,
                end=step,
                key=slot + 1,
            )

        wvar(
            named("weightGrad"),
            "gradient",
            cdt_name,
            nbytes=w[g] * cdt,
            always=False,
            start=grad_step,
            end=np.maximum(use_step, grad_step),
            key=key[g] + 1,
        )
        if GA > 1:
            ab = w[g] * acc_dt
            acc = partial(wvar, kind="accumulator", dtype=plan.accumulator_dtype)
            offload = plan.offload_accumulators
            if offload:
                remote_acc = _scatter_add(ipu[g], ab, n_ipus)
            state_var(acc, "accumulator", ab, key[g] + 2, offload, use_step)
        shard = -(-w[g] // R) if rts else w[g]
        shard_shape = [str(x) for x in shard.tolist()]
        for k, (state_name, dt_name) in enumerate(plan.optimiser_states):
            sb = shard * DTYPE_BYTES[dt_name]
            # a shard keeps the tensor's layout: 1/R of each of its tiles' elements, so its
            # stream region (and host exchange code) is the tensor's
            state = partial(wvar, kind="optimiserState", dtype=dt_name, shape=shard_shape)
            slot = key[g] + 4 + 2 * k
            if plan.offload_optimiser:
                remote_bytes += _scatter_add(ipu[g], w[g] * DTYPE_BYTES[dt_name], n_ipus)
            state_var(state, state_name, sb, slot, plan.offload_optimiser, update_step)
    rows.merge(mark)
    return WeightBytes(
        weights=weight_bytes,
        gradients=grad_bytes,
        remote=remote_bytes,
        remote_accumulators=remote_acc,
    )


def _temporary_variables(inputs: MemoryInputs, steps: LivenessSteps, rows: _Vars) -> None:
    """The plan temporaries of each op, live during the op."""
    P, lowered = inputs.tile_plan, inputs.lowered
    ops = np.flatnonzero(P.temp_per_tile > 0)
    tiles = P.tiles_used[ops].astype(np.int64)
    rows.add(
        [f"{x}/temporaries" for x in lowered["name"][ops].tolist()],
        "temporary",
        inputs.plan.compute_dtype,
        "",
        P.temp_per_tile[ops].astype(np.int64) * tiles,
        inputs.op_ipu[ops],
        False,
        steps.first[ops],
        steps.last[ops],
        P.tile_start[ops],
        tiles,
        op=ops,
    )


def _stash_variables(
    inputs: MemoryInputs,
    steps: LivenessSteps,
    activations: ActivationBytes,
    streamed: StreamedTensors,
    rows: _Vars,
) -> np.ndarray:
    """Pipeline stashes (pipelined training): stash bytes per IPU."""
    plan, lowered = inputs.plan, inputs.lowered
    S = inputs.stages
    stash_bytes = np.zeros(inputs.num_ipus, dtype=np.int64)
    if not (plan.training and plan.strategy == "pipelined" and S > 1):
        return stash_bytes
    saved = activations.saved.copy()
    saved[0] += streamed.saved_input_bytes
    stage = np.arange(S)
    depth = {"grouped": 2 * (S - 1 - stage), "interleaved": S - 1 - stage, "sequential": 0 * stage}[
        plan.schedule
    ]
    if plan.recomputation == "pipeline-stages":
        per_mb = np.r_[streamed.input_bytes, activations.boundary[: S - 1]].astype(np.int64)
    else:
        per_mb = saved
    # each stage's stash lives from its first forward step to its last backward step
    op_stage = lowered["stage"].astype(np.int64)
    backward = np.isin(lowered["role"], ("gi", "gw", "bwd"))
    first = _group_min(op_stage, steps.first, S)
    last = _group_max(op_stage[backward], steps.last[backward], S)
    st = np.flatnonzero(depth > 0)
    stash_bytes[st] = depth[st] * per_mb[st]
    elems = _ceil_div(per_mb[st], plan.compute_bytes)
    rows.add(
        [f"stage{s}/stash" for s in st.tolist()],
        "stash",
        plan.compute_dtype,
        # elements of the compute dtype (the stashed activations), not bytes
        [f"{d}x{e}" for d, e in zip(depth[st].tolist(), elems.tolist())],
        depth[st] * per_mb[st],
        st,
        False,
        first[st],
        last[st],
        0,
        inputs.compute_tiles,
    )
    return stash_bytes


def _stream_buffer_variables(inputs: MemoryInputs, streamed: StreamedTensors, rows: _Vars) -> None:
    """Stream buffers on the I/O tiles (when there are I/O tiles)."""
    io_tiles = inputs.plan.io_tiles
    if not io_tiles:
        return
    T = inputs.compute_tiles
    rows.add(
        "input/streamBuffer",
        "streamBuffer",
        streamed.input_dtype,
        "",
        streamed.input_bytes,
        0,
        True,
        -1,
        -1,
        T,
        io_tiles,
    )
    if inputs.plan.training:
        rows.add(
            "labels/streamBuffer",
            "streamBuffer",
            "int32",
            "",
            inputs.micro_batch * streamed.label_bytes_per_sample,
            inputs.stages - 1,
            True,
            -1,
            -1,
            T,
            io_tiles,
        )
