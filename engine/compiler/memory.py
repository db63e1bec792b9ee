"""Variables, liveness and memory per tile per category (vectorised over variables and tiles).

Liveness steps are the compute sets (OnTileExecute leaf programs) in program order: forward of
stages 0..S-1, then recompute / backward of stages S-1..0, then the updates. Every variable has a
live interval of steps (always-live variables have none) and a contiguous tile range on its IPU
with its bytes spread evenly (remainder on the first tiles), as the schema stores it.

The variables are made by whole-array rules (each rule adds all its variables as one block of
columns, merged into the table's order by a key). Per-tile sums use difference arrays: a
variable adds its per-tile bytes at ``tile_start`` and removes them at ``tile_start +
tile_count`` (one ``np.bincount`` over IPU x tile for every IPU at once); not-always-live
variables do so in two dimensions (change step x tile) at their interval's end points, kept as
sparse entries, and two cumulative sums give the bytes per tile of each IPU's change steps (the
rows the profile stores). No loop runs over tiles or steps.

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
from typing import Any

import numpy as np

from engine.compiled import (
    T_EXCHANGE,
    T_ONTILE,
    LivenessReport,
    MemoryReport,
    RunShape,
    VariableTable,
)
from engine.compiler import collectives
from engine.compiler.lowering import DTYPE_BYTES, OPTIMISER_STATE
from engine.graph import INPUT
from engine.systems import get_system, racks_spanned
from profiles import schema
from profiles.liveness import TileChanges

CAT = {name: i for i, name in enumerate(schema.MEMORY_CATEGORIES)}
KIND = {name: i for i, name in enumerate(schema.VARIABLE_KINDS)}
NON_INTERLEAVED_CATS = [c for c in schema.MEMORY_CATEGORIES if c != "variable"]


def _ceil_div(a, b):
    return -(-a // b)


def _sorted_distinct(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` of a 1-D array by a sort (numpy's hash-based ``np.unique`` imports
    numpy.ma on its first call: 13 ms in a fresh process)."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if len(a) else a


def _distinct(values) -> tuple[list, np.ndarray]:
    """The distinct values of a 1-D array (strings or objects) in first-seen order, and each
    element's index among them (a dict pass: no sort of Python objects)."""
    index: dict = {}
    inverse = np.fromiter(
        (index.setdefault(v, len(index)) for v in values), dtype=np.int64, count=len(values)
    )
    return list(index), inverse


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
        values = (name, KIND[kind], dtype, shape, nbytes, ipu, always, start, end, t0, tn)
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


# ---------------------------------------------------------------------------------------------
# hand-offs between the phases (frozen: each phase reads the previous ones, never changes them)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryInputs(RunShape):
    """What ``build_memory`` reads: the compile's tables and the run's figures."""

    graph: Any  # engine.graph.Graph (forward, per sample)
    lowered: Any  # engine.compiler.lowering.Lowered (lowered op rows)
    tile_plan: Any  # engine.compiler.plan.OpPlans
    programs: dict[str, np.ndarray]  # leaf program columns, with "ipu"
    op_ipu: np.ndarray  # IPU of each lowered op
    config: Any  # engine.config.RunConfig
    target: Any  # engine.targets.Target
    compute_tiles: int  # tiles per IPU available to compute (tiles - I/O tiles)

    @property
    def micro_batch(self) -> int:
        return int(self.config.micro_batch_size)

    @property
    def activation_bytes_per_element(self) -> int:
        return DTYPE_BYTES[self.config.compute_dtype]

    @property
    def weight_bytes_per_element(self) -> int:
        return DTYPE_BYTES[self.config.weight_dtype]

    def output_tiles(self, row: int, nbytes: int) -> tuple[int, int]:
        """First tile and tile count of an output of ``nbytes`` made by lowered op ``row``: the
        op's tiles, no more than ``nbytes`` needs at the target's minimum bytes per tile."""
        P = self.tile_plan
        count = int(
            min(P.tiles_used[row], max(1, _ceil_div(nbytes, self.target.min_bytes_per_tile)))
        )
        return int(P.tile_start[row]), count

    def output_tiles_of(
        self, rows: np.ndarray, nbytes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``output_tiles`` of many outputs at once (int64 arrays)."""
        P = self.tile_plan
        need = np.maximum(1, _ceil_div(nbytes, self.target.min_bytes_per_tile))
        count = np.minimum(P.tiles_used[rows].astype(np.int64), need)
        return P.tile_start[rows].astype(np.int64), count


@dataclass(frozen=True)
class LivenessSteps:
    """Liveness steps (compute sets in program order) and the steps of every op's passes.

    Arrays over lowered ops: ``first`` / ``last`` step of each op. Arrays over forward graph ops
    (-1, or ``count`` for "none" in ``backward_first``): the lowered row of the op's forward and
    recompute, the first / last step of its backward ops, its update, its accumulation and the
    last step of the op that makes its weight gradient.
    """

    program_rows: np.ndarray  # program row of each step
    step_op: np.ndarray  # lowered op of each step
    first: np.ndarray
    last: np.ndarray
    forward_row: np.ndarray
    recompute_row: np.ndarray
    backward_first: np.ndarray
    backward_last: np.ndarray
    update_step: np.ndarray
    accumulate_step: np.ndarray
    weight_grad_step: np.ndarray
    loss_rows: np.ndarray
    loss_grad_rows: np.ndarray
    normalise_rows: np.ndarray

    @property
    def count(self) -> int:
        return len(self.program_rows)


@dataclass(frozen=True)
class ActivationBytes:
    """Per stage: activation bytes kept for the backward (``saved``, stage inputs excluded) and
    bytes sent from stage s to s + 1 (``boundary``)."""

    saved: np.ndarray
    boundary: np.ndarray


@dataclass(frozen=True)
class StreamedTensors:
    """The graph input, labels and outputs as streamed to / from the host."""

    input_bytes: int  # one micro-batch
    input_bytes_per_element: int
    input_dtype: str
    saved_input_bytes: int  # input (or normalised input) bytes kept for the backward
    label_bytes_per_sample: int
    output_bytes_per_micro_batch: int


@dataclass(frozen=True)
class WeightBytes:
    """Per IPU: weights, weight gradients (all-reduced across replicas), offloaded optimiser
    state and offloaded accumulators (one replica, before replicated tensor sharding)."""

    weights: np.ndarray
    gradients: np.ndarray
    remote: np.ndarray
    remote_accumulators: np.ndarray


@dataclass(frozen=True)
class ProgramCode:
    """Per leaf program: code bytes over its tiles and the per-tile figures that make them."""

    code_bytes: np.ndarray  # control + exchange code over the program's tiles
    owned: np.ndarray  # bool: not an outlined duplicate
    participates: np.ndarray  # bool: takes part in control flow (not a Sync)
    is_compute_set: np.ndarray
    vertices_per_tile: np.ndarray  # 0 for duplicates and non-compute-sets
    exchange_code_per_tile: np.ndarray  # receiving tiles; 0 for duplicates and non-exchanges
    sender_tile_start: np.ndarray  # the tiles that send an exchange's data (its source tensor)
    sender_tile_count: np.ndarray
    sender_code_per_tile: np.ndarray  # 0 for duplicates and non-exchanges
    state_bytes: np.ndarray  # per vertex, by vertex family
    field_bytes: np.ndarray
    vector_list_bytes: np.ndarray
    vertex_type_code_bytes: np.ndarray  # per vertex type


@dataclass(frozen=True)
class TileMemory:
    """Per IPU and tile: bytes per category and the not-always-live bytes per step."""

    by_category: np.ndarray  # (ipus, tiles, categories)
    per_tile: TileChanges  # per IPU, the steps where its per-tile bytes change (int32, saturated)
    not_always_live_per_step: np.ndarray  # (ipus, steps), exact
    peak_not_always_live: np.ndarray  # (ipus, tiles)
    variable_count: np.ndarray  # (ipus, tiles)


@dataclass(frozen=True)
class MemoryResult:
    variables: VariableTable
    memory: MemoryReport
    liveness: LivenessReport
    io: dict
    oom: bool
    program_code: np.ndarray  # code bytes per leaf program (over its tiles)


# ---------------------------------------------------------------------------------------------
# build_memory and its phases
# ---------------------------------------------------------------------------------------------


def build_memory(
    graph, lowered, tile_plan, programs, op_ipu, config, target, compute_tiles: int
) -> MemoryResult:
    """Variables, liveness and per-tile memory of a compiled program.

    Phases: liveness steps; variables (activations, streamed tensors, weights, temporaries,
    stashes, stream buffers, in that row order); program code; memory per tile; reports.
    """
    inputs = MemoryInputs(
        graph, lowered, tile_plan, programs, op_ipu, config, target, int(compute_tiles)
    )
    steps = liveness_steps(inputs)
    rows = _Vars()
    consumers = _consumers(graph)
    activations = _activation_variables(inputs, steps, consumers, rows)
    streamed = _streamed_variables(inputs, steps, consumers.users_of_input, rows)
    weights = _weight_variables(inputs, steps, rows)
    _temporary_variables(inputs, steps, rows)
    stash_bytes = _stash_variables(inputs, steps, activations, streamed, rows)
    _stream_buffer_variables(inputs, streamed, rows)
    variables = rows.table()
    code = program_code(inputs, steps)
    tiles = tile_memory(inputs, steps, variables, code, streamed, weights, activations)
    memory, liveness, oom = _reports(inputs, steps, tiles)
    io = _io_summary(inputs, activations, streamed, weights, stash_bytes)
    return MemoryResult(
        variables=variables,
        memory=memory,
        liveness=liveness,
        io=io,
        oom=oom,
        program_code=code.code_bytes,
    )


def liveness_steps(inputs: MemoryInputs) -> LivenessSteps:
    """The liveness steps and the steps of every op's passes (vectorised over ops)."""
    lowered, progs = inputs.lowered, inputs.programs
    program_rows = np.flatnonzero(progs["type"] == T_ONTILE)
    n_steps = len(program_rows)
    step_op = progs["op"][program_rows]
    n_ops = len(lowered)
    first = np.full(n_ops, n_steps, dtype=np.int64)
    last = np.full(n_ops, -1, dtype=np.int64)
    np.minimum.at(first, step_op, np.arange(n_steps))
    np.maximum.at(last, step_op, np.arange(n_steps))

    role = lowered["role"]
    fwd = lowered["fwd"]
    n_graph = len(inputs.graph)

    def per_graph_op(selected, values, fill=-1):
        out = np.full(n_graph, fill, dtype=np.int64)
        out[fwd[selected]] = values
        return out

    sel = np.flatnonzero(role == "fwd")
    forward_row = per_graph_op(sel, sel)
    sel = np.flatnonzero(role == "recomp")
    recompute_row = per_graph_op(sel, sel)
    backward_first = np.full(n_graph, n_steps, dtype=np.int64)
    backward_last = np.full(n_graph, -1, dtype=np.int64)
    sel = np.flatnonzero(np.isin(role, ("gi", "gw", "bwd")))
    np.minimum.at(backward_first, fwd[sel], first[sel])
    np.maximum.at(backward_last, fwd[sel], last[sel])
    sel = np.flatnonzero(role == "upd")
    update_step = per_graph_op(sel, first[sel])
    sel = np.flatnonzero(role == "acc")
    accumulate_step = per_graph_op(sel, first[sel])
    sel = np.flatnonzero(np.isin(role, ("gw", "bwd")) & (lowered["weight_elems"] > 0))
    weight_grad_step = per_graph_op(sel, last[sel])
    return LivenessSteps(
        program_rows=program_rows,
        step_op=step_op,
        first=first,
        last=last,
        forward_row=forward_row,
        recompute_row=recompute_row,
        backward_first=backward_first,
        backward_last=backward_last,
        update_step=update_step,
        accumulate_step=accumulate_step,
        weight_grad_step=weight_grad_step,
        loss_rows=np.flatnonzero(role == "loss"),
        loss_grad_rows=np.flatnonzero(role == "lossgrad"),
        normalise_rows=np.flatnonzero(role == "normin"),
    )


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


def _activation_variables(
    inputs: MemoryInputs, steps: LivenessSteps, edges: _Edges, rows: _Vars
) -> ActivationBytes:
    """Activations, their received copies on later stages, recomputed copies and gradients.

    Whole-array rules over the graph's ops and its edges (producer -> consumer); each op's
    variables in the order: its activation, its recomputed copy, its copies received by
    consumers on other stages (in the consumers' order), its gradient."""
    graph, lowered, config = inputs.graph, inputs.lowered, inputs.config
    cols = graph.cols
    n = len(graph)
    B, S, training = inputs.micro_batch, inputs.stages, config.training
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
    names = cols["name"].tolist()
    shape = [f"{B}x{e}" for e in cols["out_elems"].tolist()]
    # this op's activations: the same dtype and tiles, live between two steps
    act = partial(rows.add, kind="activation", dtype=config.compute_dtype, always=False)
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
    graph, config = inputs.graph, inputs.config
    cols = graph.cols
    B, training = inputs.micro_batch, config.training
    cdt_name, cdt = config.compute_dtype, inputs.activation_bytes_per_element
    first, last, backward_last = steps.first, steps.last, steps.backward_last
    forward_row = steps.forward_row
    last_step = steps.count - 1
    tokens = graph.input_kind == "tokens"
    in_elem_bytes = 4 if tokens else (1 if config.eight_bit_input else cdt)
    in_dtype = "int32" if tokens else ("uint8" if config.eight_bit_input else cdt_name)
    in_bytes = B * graph.input_elems * in_elem_bytes
    in_shape = f"{B}x{graph.input_elems}"
    first_user = int(forward_row[input_users[0]]) if input_users else 0
    need = max([last[forward_row[j]] for j in input_users] or [0])
    if training:
        need = max([need] + [backward_last[j] for j in input_users if cols["saves_input"][j]])
    in_tiles = inputs.output_tiles(first_user, in_bytes)
    saved_input = 0
    if len(steps.normalise_rows):
        norm = int(steps.normalise_rows[0])
        rows.add(
            "input",
            "input",
            in_dtype,
            in_shape,
            in_bytes,
            0,
            False,
            0,
            last[norm],
            *in_tiles,
            op=norm,
        )
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
    else:
        rows.add(
            "input",
            "input",
            in_dtype,
            in_shape,
            in_bytes,
            0,
            False,
            0,
            need,
            *in_tiles,
            op=first_user,
        )
        if training and any(cols["saves_input"][j] for j in input_users):
            saved_input = in_bytes
    label_bytes_per_sample = 4 * graph.label_elems
    last_ipu = inputs.stages - 1
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
    else:
        last_row = int(forward_row[len(graph) - 1])
        out_bytes = B * graph.output_elems * cdt
        rows.add(
            "logits",
            "output",
            cdt_name,
            f"{B}x{graph.output_elems}",
            out_bytes,
            last_ipu,
            False,
            last[last_row],
            last_step,
            *inputs.output_tiles(last_row, out_bytes),
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
    cols, config = inputs.graph.cols, inputs.config
    training = config.training
    n_ipus = inputs.num_ipus
    wdt_name, wdt = config.weight_dtype, inputs.weight_bytes_per_element
    cdt_name, cdt = config.compute_dtype, inputs.activation_bytes_per_element
    GA = config.gradient_accumulation
    R = config.replication_factor
    rts = config.replicated_tensor_sharding
    ipu_of_op = np.arange(inputs.stages)[inputs.lowered.stage_of_fwd]
    acc_dt = DTYPE_BYTES[config.accumulator]
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
            acc = partial(wvar, kind="accumulator", dtype=config.accumulator)
            if config.offload_accumulators == "on":
                remote_acc = _scatter_add(ipu[g], ab, n_ipus)
                acc(
                    named("accumulator"),
                    nbytes=0,
                    always=True,
                    start=-1,
                    end=-1,
                    remote=True,
                    remote_bytes=ab,
                    key=key[g] + 2,
                )
                acc(
                    named("accumulator(buffer)"),
                    nbytes=ab,
                    always=False,
                    start=use_step,
                    end=use_step,
                    key=key[g] + 3,
                )
            else:
                acc(named("accumulator"), nbytes=ab, always=True, start=-1, end=-1, key=key[g] + 2)
        shard = -(-w[g] // R) if rts else w[g]
        shard_shape = [str(x) for x in shard.tolist()]
        for k, (state_name, prop) in enumerate(OPTIMISER_STATE[config.optimiser]):
            dt_name = getattr(config, prop)
            sb = shard * DTYPE_BYTES[dt_name]
            # a shard keeps the tensor's layout: 1/R of each of its tiles' elements, so its
            # stream region (and host exchange code) is the tensor's
            state = partial(wvar, kind="optimiserState", dtype=dt_name, shape=shard_shape)
            slot = key[g] + 4 + 2 * k
            if config.offload_optimiser:
                remote_bytes += _scatter_add(ipu[g], w[g] * DTYPE_BYTES[dt_name], n_ipus)
                state(
                    named(state_name),
                    nbytes=0,
                    always=True,
                    start=-1,
                    end=-1,
                    remote=True,
                    remote_bytes=sb,
                    key=slot,
                )
                state(
                    named(f"{state_name}(buffer)"),
                    nbytes=sb,
                    always=False,
                    start=update_step,
                    end=update_step,
                    key=slot + 1,
                )
            else:
                state(named(state_name), nbytes=sb, always=True, start=-1, end=-1, key=slot)
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
        inputs.config.compute_dtype,
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
    config, lowered = inputs.config, inputs.lowered
    S = inputs.stages
    stash_bytes = np.zeros(inputs.num_ipus, dtype=np.int64)
    if not (config.training and config.strategy == "pipelined" and S > 1):
        return stash_bytes
    saved = activations.saved.copy()
    saved[0] += streamed.saved_input_bytes
    stage = np.arange(S)
    depth = {"grouped": 2 * (S - 1 - stage), "interleaved": S - 1 - stage, "sequential": 0 * stage}[
        config.schedule
    ]
    if config.recomputation == "pipeline-stages":
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
    elems = _ceil_div(per_mb[st], DTYPE_BYTES[config.compute_dtype])
    rows.add(
        [f"stage{s}/stash" for s in st.tolist()],
        "stash",
        config.compute_dtype,
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
    io_tiles = inputs.config.io_tiles
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
    if inputs.config.training:
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


def program_code(inputs: MemoryInputs, steps: LivenessSteps) -> ProgramCode:
    """Control, exchange and vertex figures of every leaf program (vectorised over programs).

    An exchange has code on both sides: on its receiving tiles (the op's tiles) and on the tiles
    that send (the tiles of its source tensor: the producer's output for a forward op, the op's
    own forward output and saved tensors for backward, update and loss ops), each side per tile
    a base plus one instruction per ``exchange_bytes_per_instruction`` it moves.
    """
    t, progs = inputs.target, inputs.programs
    TT = inputs.tiles_per_ipu
    fams = t.vertex_families

    def per_family(attr, distinct):
        # looked up once per distinct family (a few dozen) and spread back over the programs
        names, inverse = distinct
        per_name = np.array(
            [getattr(fams[f], attr) if f in fams else 0 for f in names], dtype=np.int64
        )
        return per_name[inverse]

    def exchange_code(nbytes, tiles):
        per_tile = _ceil_div(nbytes, np.maximum(tiles, 1))
        return t.exchange_code_base_bytes + t.exchange_code_bytes_per_instruction * _ceil_div(
            per_tile, t.exchange_bytes_per_instruction
        )

    ptype = progs["type"]
    tile_count = progs["tile_count"].astype(np.int64)
    families = _distinct(progs["family"])
    is_cs = ptype == T_ONTILE
    is_ex = ptype == T_EXCHANGE
    vertices_per_tile = np.where(is_cs, _ceil_div(progs["vertices"], np.maximum(tile_count, 1)), 0)
    receiver_code = np.where(is_ex, exchange_code(progs["bytes_in"], tile_count), 0)
    sender_start, sender_count = _exchange_sources(inputs, steps)
    p_op = progs["op"].astype(np.int64)
    s_start, s_count = sender_start[p_op], sender_count[p_op]
    sender_code = np.where(is_ex, exchange_code(progs["bytes_in"], s_count), 0)
    participates = ptype != schema.code("program_type", "Sync")
    per_program = (t.control_code_bytes_per_program + t.control_table_bytes_per_program) * TT
    code_bytes = (
        per_program
        + np.where(participates, t.control_code_bytes_per_participation * tile_count, 0)
        + receiver_code * tile_count
        + sender_code * s_count
    )
    # outlining: a duplicate's compute set / exchange is the owner's; it costs a call only
    owned = progs["owner_op"] == progs["op"]
    return ProgramCode(
        code_bytes=np.where(owned, code_bytes, per_program),
        owned=owned,
        participates=participates,
        is_compute_set=is_cs,
        vertices_per_tile=np.where(owned, vertices_per_tile, 0),
        exchange_code_per_tile=np.where(owned, receiver_code, 0),
        sender_tile_start=s_start,
        sender_tile_count=s_count,
        sender_code_per_tile=np.where(owned, sender_code, 0),
        state_bytes=per_family("state_bytes", families),
        field_bytes=per_family("field_bytes", families),
        vector_list_bytes=per_family("vector_list_bytes", families),
        vertex_type_code_bytes=per_family(
            "code_bytes", _distinct(inputs.tile_plan.vertex_types["family"])
        ),
    )


def _exchange_sources(inputs: MemoryInputs, steps: LivenessSteps) -> tuple[np.ndarray, np.ndarray]:
    """First tile and tile count of the tensor each lowered op's exchange reads: a forward (or
    recomputed) op reads its first input's producer (the graph input: the op's own tiles, where
    it is streamed); other ops read their forward op's output and saved tensors."""
    lowered, P = inputs.lowered, inputs.tile_plan
    cols = inputs.graph.cols
    fwd = lowered["fwd"].astype(np.int64)
    own_forward = np.where(fwd >= 0, steps.forward_row[np.maximum(fwd, 0)], -1)
    producer = np.where(fwd >= 0, cols["in0"][np.maximum(fwd, 0)].astype(np.int64), -1)
    producer_row = np.where(producer >= 0, steps.forward_row[np.maximum(producer, 0)], -1)
    reads_producer = np.isin(lowered["role"], ("fwd", "recomp"))
    source = np.where(reads_producer, producer_row, own_forward)
    source = np.where(source >= 0, source, np.arange(len(lowered)))
    # a stage-crossing input arrives as a copy on the consumer's tiles
    crosses = inputs.op_ipu[source] != inputs.op_ipu
    source = np.where(crosses, np.arange(len(lowered)), source)
    return P.tile_start[source].astype(np.int64), P.tiles_used[source].astype(np.int64)


def _scatter_add(index, values, size: int) -> np.ndarray:
    """``out[index[i]] += values[i]`` into a zeroed int64 array of ``size``, exact.

    ``np.bincount`` (5-20x faster than ``np.add.at``) sums in float64, exact for integers while
    every partial sum stays below 2**53: taken when the values' absolute sum does; otherwise
    ``np.add.at``."""
    values = np.asarray(values)
    if values.ndim == 0:
        values = np.full(len(index), values, dtype=np.int64)
    if not len(values) or float(np.abs(values).sum(dtype=np.float64)) < _FLOAT_EXACT:
        return np.bincount(index, weights=values, minlength=size).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, index, values)
    return out


_FLOAT_EXACT = 2.0**52  # below 2**53 with a margin for the float sum used to check it


def _spread_ipus(values, ipu, t0, tn, n_ipus: int, size: int, out=None) -> np.ndarray:
    """Sum of ``values`` (per tile) over the tile ranges ``[t0, t0 + tn)`` of their IPUs ->
    (n_ipus, size) per tile; written into ``out`` (e.g. one category of the per-tile table)
    when given."""
    at = np.asarray(ipu, dtype=np.int64) * (size + 1) + np.asarray(t0, dtype=np.int64)
    d = _scatter_add(
        np.concatenate((at, at + tn)), np.concatenate((values, -values)), n_ipus * (size + 1)
    )
    return np.cumsum(d.reshape(n_ipus, size + 1)[:, :-1], axis=1, out=out)


def tile_memory(
    inputs: MemoryInputs,
    steps: LivenessSteps,
    variables: VariableTable,
    code: ProgramCode,
    streamed: StreamedTensors,
    weights: WeightBytes,
    activations: ActivationBytes,
) -> TileMemory:
    """Bytes per category per tile, and not-always-live bytes per step per tile, per IPU."""
    n_ipus, TT, n_steps = inputs.num_ipus, inputs.tiles_per_ipu, steps.count
    by_category = np.zeros((n_ipus, TT, len(CAT)), dtype=np.int64)
    # per-tile liveness is kept as changes (the steps where an IPU's per-tile bytes change, one
    # row each) and stored as int32 (the schema's dtype): saturated at 2 GiB per tile, which only
    # impossible configurations (thousands of times a tile's SRAM) reach; the sums per step and
    # the peaks per tile are exact
    _code_categories(inputs, code, by_category)
    _host_exchange_categories(inputs, variables, streamed, by_category)
    for ipu in range(n_ipus):
        _global_exchange_categories(inputs, weights, activations, ipu, by_category[ipu])
    always_live, variable_count, changes = _variable_bytes(inputs, steps, variables)
    # every IPU's change rows made in place in the one array the profile stores
    rows = np.zeros((len(changes.step), TT), dtype=np.int32)
    peak_nal = _fill_changes(changes, rows)
    by_category[:, :, CAT["variable"]] = always_live + peak_nal
    # each step takes the row of the last change at or before it on its IPU
    nal_per_step = np.zeros((n_ipus, n_steps), dtype=np.int64)
    if len(changes.step):
        at = np.arange(n_ipus)[:, None] * (n_steps + 3) + np.arange(n_steps) + 1  # as the keys
        last = np.searchsorted(changes.key, at, "right")
        last -= 1
        nal_per_step = np.take(changes.sums, last, out=last)  # in place: no fresh array
    per_tile = TileChanges(
        ipu_offsets=changes.ipu_offsets,
        step=changes.step.astype(np.int32),
        rows=rows,
        n_steps=n_steps,
    )
    return TileMemory(
        by_category=by_category,
        per_tile=per_tile,
        not_always_live_per_step=nal_per_step,
        peak_not_always_live=peak_nal,
        variable_count=variable_count,
    )


def _code_categories(inputs: MemoryInputs, code: ProgramCode, cat: np.ndarray) -> None:
    """Control code / table / ids, internal exchange code, vertex state, descriptors, constants,
    instrumentation, stack and vertex code of every IPU's tiles (fills ``cat``, (IPUs, tiles,
    categories), in place; whole arrays over all IPUs' programs at once)."""
    t, progs, TT, n_ipus = inputs.target, inputs.programs, inputs.tiles_per_ipu, inputs.num_ipus
    ipu = progs["ipu"].astype(np.int64)
    n_programs = np.bincount(ipu, minlength=n_ipus)[:, None]
    t0s = progs["tile_start"].astype(np.int64)
    tns = progs["tile_count"].astype(np.int64)
    takes_part = code.participates & code.owned
    cs = code.is_compute_set & code.owned
    v = code.vertices_per_tile

    def spread(name: str, values) -> np.ndarray:
        # bytes per tile of each program over its tiles, summed into the category's column
        return _spread_ipus(values, ipu, t0s, tns, n_ipus, TT, out=cat[:, :, CAT[name]])

    spread("controlCode", np.where(takes_part, t.control_code_bytes_per_participation, 0))
    cat[:, :, CAT["controlCode"]] += n_programs * t.control_code_bytes_per_program
    cat[:, :, CAT["controlTable"]] = n_programs * t.control_table_bytes_per_program
    spread("controlId", np.where(cs, t.control_id_bytes_per_program, 0))
    spread("internalExchangeCode", code.exchange_code_per_tile)
    # and the exchanges' code on the tiles that send their data
    cat[:, :, CAT["internalExchangeCode"]] += _spread_ipus(
        code.sender_code_per_tile,
        ipu,
        code.sender_tile_start,
        code.sender_tile_count,
        n_ipus,
        TT,
    )
    spread("vertexInstanceState", v * code.state_bytes)
    spread("vertexFieldData", v * code.field_bytes)
    spread("vectorListDescriptor", v * code.vector_list_bytes)
    is_copy = progs["family"] == "copy"
    spread("copyDescriptor", np.where(cs & is_copy, t.copy_descriptor_bytes_per_copy * v, 0))
    spread("constant", np.where(cs, t.constant_bytes_per_op_tile, 0))
    if inputs.config.instrumentation:
        spread(
            "instrumentationResults", np.where(takes_part, t.instrumentation_bytes_per_program, 0)
        )
    cat[:, :, CAT["stack"]] = t.stack_bytes_per_tile
    # vertex code: each vertex type present on a tile costs its code once. Per (IPU, vertex
    # type), the compute sets' tile ranges enter (+1) and leave (-1) in tile order; where the
    # running count is positive up to the next event, the type's code is on those tiles
    cs_rows = np.flatnonzero(code.is_compute_set)
    if len(cs_rows):
        n_types = len(code.vertex_type_code_bytes)
        pair = ipu[cs_rows] * n_types + progs["vt"][cs_rows].astype(np.int64)
        key = np.concatenate(
            (pair * (TT + 1) + t0s[cs_rows], pair * (TT + 1) + t0s[cs_rows] + tns[cs_rows])
        )
        delta = np.repeat(np.array([1, -1], dtype=np.int64), len(cs_rows))
        order = np.argsort(key, kind="stable")
        key, delta = key[order], delta[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        key = key[first]
        running = np.cumsum(np.add.reduceat(delta, first))  # 0 after each pair's last event
        covered = np.flatnonzero(running[:-1] > 0)
        pair_of, tile = np.divmod(key, TT + 1)
        _spread_ipus(
            code.vertex_type_code_bytes[pair_of[covered] % n_types],
            pair_of[covered] // n_types,
            tile[covered],
            tile[covered + 1] - tile[covered],
            n_ipus,
            TT,
            out=cat[:, :, CAT["vertexCode"]],
        )


def _host_exchange_categories(
    inputs: MemoryInputs, variables: VariableTable, streamed: StreamedTensors, cat: np.ndarray
) -> None:
    """Host exchange code and packet headers: input / label / output streams and remote-buffer
    copies on the variables' tiles, or the I/O tiles' share (fills ``cat``, (IPUs, tiles,
    categories), in place)."""
    t, TT, n_ipus = inputs.target, inputs.tiles_per_ipu, inputs.num_ipus
    io_tiles = inputs.config.io_tiles
    ipu = variables.ipu.astype(np.int64)
    vt0 = variables.tile_start.astype(np.int64)
    vtn = variables.tile_count.astype(np.int64)
    kind = variables.kind
    streamed_var = np.isin(kind, (KIND["input"], KIND["label"], KIND["output"]))
    if io_tiles:
        streamed_var &= False
    remote = variables.remote
    remote_per_tile = _ceil_div(variables.remote_bytes, np.maximum(vtn, 1))
    streamed_per_tile = _ceil_div(variables.bytes, np.maximum(vtn, 1))
    n_streams = np.where(streamed_var, 1, 0) + np.where(remote, 2, 0)  # remote: load + store
    bytes_per_tile = np.where(streamed_var, streamed_per_tile, 0) + np.where(
        remote, remote_per_tile, 0
    )
    host_code = n_streams * t.host_exchange_code_base_bytes + np.where(
        n_streams > 0,
        t.exchange_code_bytes_per_instruction
        * _ceil_div(bytes_per_tile, t.exchange_bytes_per_instruction)
        * n_streams,
        0,
    )
    _spread_ipus(host_code, ipu, vt0, vtn, n_ipus, TT, out=cat[:, :, CAT["hostExchangeCode"]])
    _spread_ipus(
        n_streams * _ceil_div(bytes_per_tile, t.packet_payload_bytes) * t.packet_header_bytes,
        ipu,
        vt0,
        vtn,
        n_ipus,
        TT,
        out=cat[:, :, CAT["hostExchangePacketHeader"]],
    )
    if io_tiles:
        T = inputs.compute_tiles
        last_ipu = inputs.stages - 1
        io = slice(T, T + io_tiles)
        cat[:, io, CAT["hostExchangeCode"]] += int(t.io_tile_overhead_fraction * t.sram_per_tile)
        packets = _ceil_div(_ceil_div(streamed.input_bytes, io_tiles), t.packet_payload_bytes)
        for i in sorted({0, last_ipu} & set(range(n_ipus))):
            n_io_streams = 1 + (1 if inputs.config.training and i == last_ipu else 0)
            cat[i, io, CAT["hostExchangePacketHeader"]] += (
                n_io_streams * packets * t.packet_header_bytes
            )


@dataclass(frozen=True)
class RingCode:
    """Per-tile code of one collective's ring programs on one IPU: on every tile of the IPU
    (``all_tiles``: control code and table per program) and on the ``tiles`` buffer tiles."""

    tiles: int
    global_exchange: int  # per buffer tile
    packet_headers: int  # per buffer tile
    control: int  # per buffer tile: participation and switch cases
    copy_descriptors: int  # per buffer tile: one copy per switch case
    control_all_tiles: int  # per tile of the IPU
    table_all_tiles: int

    def total(self, tiles_per_ipu: int) -> int:
        """Code bytes over the IPU's tiles (as a program's ``code_bytes``)."""
        on_buffer = self.global_exchange + self.control + self.copy_descriptors
        return on_buffer * self.tiles + (self.control_all_tiles + self.table_all_tiles) * (
            tiles_per_ipu
        )


def ring_code(target, ring: collectives.CollectivePrograms, tiles: int) -> RingCode:
    """Per cross-replica copy its global exchange code (sending and receiving one fragment on
    every buffer tile), per ring program its control code, per switch case its 12 bytes of
    control code and a copy."""
    t = target
    code = headers = 0
    for level in ring.levels:
        per_tile = _ceil_div(level.fragment_bytes, tiles)
        code += level.directions * (
            t.global_exchange_code_bytes_per_transfer
            + 2
            * t.exchange_code_bytes_per_instruction
            * _ceil_div(per_tile, t.exchange_bytes_per_instruction)
        )
        headers += (
            level.directions
            * (level.ranks - 1)
            * _ceil_div(per_tile, t.packet_payload_bytes)
            * t.packet_header_bytes
        )
    return RingCode(
        tiles=tiles,
        global_exchange=int(code),
        packet_headers=int(headers),
        control=ring.programs * t.control_code_bytes_per_participation
        + ring.switch_cases * collectives.SWITCH_BYTES_PER_CASE,
        copy_descriptors=ring.switch_cases * t.copy_descriptor_bytes_per_copy,
        control_all_tiles=ring.programs * t.control_code_bytes_per_program,
        table_all_tiles=ring.programs * t.control_table_bytes_per_program,
    )


def _global_exchange_categories(
    inputs: MemoryInputs, weights: WeightBytes, activations: ActivationBytes, ipu: int, cat
) -> None:
    """Global exchange code and packet headers of the inter-IPU copies, and the code of the
    cross-replica collectives compiled as PopLibs' ring programs (``ring_code``; fills ``cat``
    in place)."""
    t, S, T = inputs.target, inputs.stages, inputs.compute_tiles
    training = inputs.config.training
    boundary = activations.boundary
    stage_bytes = (boundary[ipu] if ipu < S - 1 else 0) + (boundary[ipu - 1] if ipu > 0 else 0)
    transfers = 0
    if S > 1:
        sends = (1 if ipu < S - 1 else 0) + (1 if ipu > 0 else 0)
        transfers += sends * (2 if training else 1)
    code = transfers * t.global_exchange_code_bytes_per_transfer
    headers = _ceil_div(_ceil_div(int(stage_bytes), T), t.packet_payload_bytes) * (
        t.packet_header_bytes
    )
    for ring in replica_collectives(inputs, weights, ipu):
        rc = ring_code(t, ring, T)
        code += rc.global_exchange
        headers += rc.packet_headers
        cat[:, CAT["controlCode"]] += rc.control_all_tiles
        cat[:, CAT["controlTable"]] += rc.table_all_tiles
        cat[:T, CAT["controlCode"]] += rc.control
        cat[:T, CAT["copyDescriptor"]] += rc.copy_descriptors
    if code:
        cat[:T, CAT["globalExchangeCode"]] = code
        cat[:T, CAT["globalExchangePacketHeader"]] = headers


def replica_collectives(
    inputs: MemoryInputs, weights: WeightBytes, ipu: int
) -> list[collectives.CollectivePrograms]:
    """The cross-replica collectives one IPU compiles (training with replicas): the gradients'
    reduce-scatter and all-gather (an all-reduce), or under replicated tensor sharding the
    gradients' reduce-scatter and the updated weights' all-gather."""
    config = inputs.config
    R = int(config.replication_factor)
    if not (config.training and R > 1):
        return []
    system = get_system(config.system) if config.system else None
    ring = partial(
        collectives.collective,
        bytes_per_element=inputs.weight_bytes_per_element,
        tiles=inputs.compute_tiles,
        replicas=R,
        ipus_per_replica=inputs.num_ipus,
        racks=racks_spanned(inputs.num_ipus * R, system),
    )
    gathered = weights.weights[ipu] if config.replicated_tensor_sharding else weights.gradients[ipu]
    return [ring(int(weights.gradients[ipu])), ring(int(gathered))]


@dataclass(frozen=True)
class _Changes:
    """Every IPU's not-always-live bytes per tile as changes, before the dense rows are made.

    Kept rows in IPU order, each IPU's steps increasing from 0: ``key`` (IPU x (steps + 3) +
    step + 1), ``step``, ``ipu_offsets`` (each IPU's first row; ``n_ipus + 1``); the non-zero
    entries of the difference grid (kept row, tile in ``0..tiles``, value), unique and sorted
    by row; the exact bytes summed over the tiles of each kept row; and a bound on any per-tile
    value (an IPU's sum of every variable's bytes per tile)."""

    key: np.ndarray
    step: np.ndarray
    ipu_offsets: np.ndarray
    row: np.ndarray
    tile: np.ndarray
    value: np.ndarray
    sums: np.ndarray
    bound: float


def _variable_bytes(
    inputs: MemoryInputs, steps: LivenessSteps, variables: VariableTable
) -> tuple[np.ndarray, np.ndarray, _Changes]:
    """Every IPU's always-live variable bytes per tile and variables per tile ((IPUs, tiles)
    each), and its not-always-live bytes per tile as changes (``_Changes``; ``_fill_changes``
    makes the rows).

    Only the steps where one of an IPU's variables becomes live or dies can change its bytes,
    so the difference grid (bytes entering and leaving each tile range) has one row per such
    step of each IPU rather than one per liveness step of the whole program; it is kept sparse
    (a few entries per variable, summed by key) and rows whose entries all cancel (a variable
    dying where an identical one starts: the row equals the one before it) are dropped.
    """
    TT, n_steps, n_ipus = inputs.tiles_per_ipu, steps.count, inputs.num_ipus
    ipu = variables.ipu.astype(np.int64)
    vt0 = variables.tile_start.astype(np.int64)
    vtn = variables.tile_count.astype(np.int64)
    nbytes = variables.bytes
    always = variables.always_live
    base = nbytes // np.maximum(vtn, 1)
    rem = nbytes - base * np.maximum(vtn, 1)  # remainder bytes: one more on the first tiles
    al = np.flatnonzero(always)
    always_live = _spread_ipus(base[al], ipu[al], vt0[al], vtn[al], n_ipus, TT) + _spread_ipus(
        np.ones(len(al), dtype=np.int64), ipu[al], vt0[al], rem[al], n_ipus, TT
    )
    at = ipu * (TT + 1) + vt0
    size = n_ipus * (TT + 1)
    count = np.bincount(at, minlength=size) - np.bincount(at + vtn, minlength=size)
    count = np.cumsum(count.reshape(n_ipus, TT + 1)[:, :-1], axis=1)
    empty = np.zeros(0, np.int64)
    if not n_steps:
        offsets = np.zeros(n_ipus + 1, np.int64)
        return always_live, count, _Changes(*[empty] * 2, offsets, *[empty] * 4, bound=0.0)
    nal = np.flatnonzero(~always & (nbytes > 0))
    # a change step of an IPU as one key: IPU x W + step + 1 (steps -1 .. n_steps + 1 fit)
    W = n_steps + 3
    v_ipu = ipu[nal]
    k0 = v_ipu * W + variables.live_start[nal].astype(np.int64) + 1
    s1 = variables.live_end[nal].astype(np.int64) + 1
    k1 = v_ipu * W + s1 + 1
    # every IPU's change steps: 0 and its variables' starts and ends (a variable live to the
    # last step has no end row)
    key = np.concatenate((np.arange(n_ipus, dtype=np.int64) * W + 1, k0, k1[s1 < n_steps]))
    key = _sorted_distinct(key)
    i0 = np.searchsorted(key, k0)
    i1 = np.searchsorted(key, k1)
    # an end falls on the IPU's first change row at or after it, if the IPU has one
    ends = np.flatnonzero(i1 < len(key))
    ends = ends[key[i1[ends]] // W == v_ipu[ends]]
    i1 = i1[ends]
    # the difference grid's entries: per variable its bytes per tile over [a0, a0 + tn) and
    # one more byte over [a0, a0 + rem), entering at row i0 and leaving at row i1
    b, r = base[nal], rem[nal]
    a0 = vt0[nal]
    a1, ar = a0 + vtn[nal], a0 + r
    odd = np.flatnonzero(r > 0)  # variables with remainder bytes (the others add nothing)
    odd_ends = np.flatnonzero(r[ends] > 0)
    e = ends[odd_ends]
    one, one_e = np.ones(len(odd), dtype=np.int64), np.ones(len(e), dtype=np.int64)
    row = np.concatenate((i0, i0, i0[odd], i0[odd], i1, i1, i1[odd_ends], i1[odd_ends]))
    tile = np.concatenate((a0, a1, a0[odd], ar[odd], a0[ends], a1[ends], a0[e], ar[e]))
    value = np.concatenate((b, -b, one, -one, -b[ends], b[ends], -one_e, one_e))
    entry = row * (TT + 1) + tile
    order = np.argsort(entry, kind="stable")
    entry, value = entry[order], value[order]
    if len(entry):
        first = np.flatnonzero(np.r_[True, entry[1:] != entry[:-1]])
        value = np.add.reduceat(value, first)
        entry = entry[first]
    nonzero = value != 0
    entry, value = entry[nonzero], value[nonzero]
    row, tile = np.divmod(entry, TT + 1)
    # kept: each IPU's first row, and the rows that differ from the one before
    ipu_of_key = key // W
    keep = np.r_[True, ipu_of_key[1:] != ipu_of_key[:-1]]
    keep[row] = True
    row = (np.cumsum(keep) - 1)[row]
    key = key[keep]
    offsets = np.r_[0, np.cumsum(np.bincount(key // W, minlength=n_ipus))].astype(np.int64)
    # the bytes summed over a row: an entry at tile t adds its value to tiles t..TT-1 of its
    # row and of its IPU's later rows
    through = np.r_[0, np.cumsum(value * (TT - tile))]
    before = through[np.searchsorted(row, offsets[:-1])]  # entries of earlier IPUs
    sums = through[np.searchsorted(row, np.arange(len(key)), "right")] - np.repeat(
        before, np.diff(offsets)
    )
    per_ipu = np.bincount(v_ipu, weights=b, minlength=n_ipus) + np.bincount(
        v_ipu, weights=r > 0, minlength=n_ipus
    )
    bound = float(per_ipu.max()) if n_ipus else 0.0
    return always_live, count, _Changes(key, key % W - 1, offsets, row, tile, value, sums, bound)


def _fill_changes(changes: _Changes, out: np.ndarray) -> np.ndarray:
    """Fill ``out`` (int32, zeroed, one row per change of every IPU) with the per-tile bytes of
    each change, saturated at 2 GiB; return the exact peak per IPU and tile (int64).

    The prefix sums along the tiles and down each IPU's rows run in place (row by row down the
    rows: numpy's cumsum along axis 0 of a C-ordered grid walks each column with the stride of a
    whole row); in int32 when no per-tile value can exceed it, else in an int64 copy."""
    TT, offsets = out.shape[1], changes.ipu_offsets
    n_ipus = len(offsets) - 1
    if not len(out):
        return np.zeros((n_ipus, TT), np.int64)
    inner = changes.tile < TT  # an entry at tile TT ends a range at the last tile: no effect
    fits = changes.bound <= np.iinfo(np.int32).max
    grid = out if fits else np.zeros(out.shape, np.int64)
    grid[changes.row[inner], changes.tile[inner]] = changes.value[inner]
    np.cumsum(grid, axis=1, out=grid)
    peak = np.zeros((n_ipus, TT), np.int64)
    for ipu in range(n_ipus):
        a, b = int(offsets[ipu]), int(offsets[ipu + 1])
        for i in range(a + 1, b):
            np.add(grid[i], grid[i - 1], out=grid[i])
        peak[ipu] = grid[a:b].max(axis=0)  # (np.maximum.reduceat along axis 0 is 8x slower)
    if not fits:
        np.minimum(grid, np.iinfo(np.int32).max, out=grid)
        out[...] = grid
    return peak


def _reports(
    inputs: MemoryInputs, steps: LivenessSteps, tiles: TileMemory
) -> tuple[MemoryReport, LivenessReport, bool]:
    """Regions, liveness classes, gaps and OOM; the memory and liveness reports."""
    t, TT, n_ipus = inputs.target, inputs.tiles_per_ipu, inputs.num_ipus
    by_cat = tiles.by_category
    peak_nal = tiles.peak_not_always_live
    total = by_cat.sum(axis=2)
    var = by_cat[:, :, CAT["variable"]]
    non_var = total - var
    cap_ni = t.non_interleaved_bytes_per_tile
    cap_i = t.sram_per_tile - cap_ni
    code_ni = np.minimum(non_var, cap_ni)
    var_i = np.minimum(var, cap_i)
    var_ni = np.minimum(var - var_i, cap_ni - code_ni)
    overflow = (non_var - code_ni) + (var - var_i - var_ni)
    by_region = np.stack([var_i, code_ni + var_ni, overflow], axis=2)
    by_live = np.stack([total - peak_nal, peak_nal], axis=2)
    gaps = tiles.variable_count * t.variable_alignment_gap_bytes
    oom_mask = total + gaps > t.sram_per_tile
    memory = MemoryReport(
        by_category=by_cat,
        by_region=by_region,
        by_liveness=by_live,
        total=total,
        gaps=gaps,
        physical_tile=_physical_tiles(TT),
        tile_xy=_tile_xy(TT),
        oom_tiles=np.argwhere(oom_mask).astype(np.int32).reshape(-1, 2),
        sram_per_tile=t.sram_per_tile,
    )
    progs, rows = inputs.programs, steps.program_rows
    nal_per_step = tiles.not_always_live_per_step
    liveness = LivenessReport(
        step_name=progs["name"][rows],
        step_program=rows.astype(np.int32),
        step_op=steps.step_op.astype(np.int32),
        step_ipu=progs["ipu"][rows].astype(np.int16),
        not_always_live=nal_per_step,
        per_tile=tiles.per_tile,
        always_live=(total - peak_nal).sum(axis=1),
        peak_step=(nal_per_step.argmax(axis=1) if steps.count else np.zeros(n_ipus)).astype(
            np.int32
        ),
    )
    return memory, liveness, bool(oom_mask.any())


def _io_summary(
    inputs: MemoryInputs,
    activations: ActivationBytes,
    streamed: StreamedTensors,
    weights: WeightBytes,
    stash_bytes: np.ndarray,
) -> dict:
    """``compiled.io``: what the executor moves (see engine.compiled)."""
    S, graph, training = inputs.stages, inputs.graph, inputs.config.training
    act_b = [int(activations.boundary[s]) if s < S - 1 else 0 for s in range(S)]
    return {
        "input_elems_per_sample": int(graph.input_elems),
        "input_bytes_per_sample": int(graph.input_elems * streamed.input_bytes_per_element),
        "input_dtype": streamed.input_dtype,
        "label_bytes_per_sample": streamed.label_bytes_per_sample if training else 0,
        "output_bytes_per_micro_batch": streamed.output_bytes_per_micro_batch,
        "input_stage": 0,
        "loss_stage": S - 1,
        "activation_bytes": act_b,
        "gradient_bytes": [0, *act_b[:-1]] if training else [0] * S,
        "weight_bytes": weights.weights.tolist(),
        "weight_gradient_bytes": weights.gradients.tolist(),
        "remote_bytes": weights.remote.tolist(),
        "remote_accumulator_bytes": weights.remote_accumulators.tolist(),
        "stash_bytes": stash_bytes.tolist(),
        "collective_code_bytes": [
            [
                ring_code(inputs.target, ring, inputs.compute_tiles).total(inputs.tiles_per_ipu)
                for ring in replica_collectives(inputs, weights, ipu)
            ]
            for ipu in range(inputs.num_ipus)
        ],
    }


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


__all__ = [
    "ActivationBytes",
    "LivenessSteps",
    "MemoryInputs",
    "MemoryResult",
    "ProgramCode",
    "StreamedTensors",
    "TileMemory",
    "WeightBytes",
    "build_memory",
    "liveness_steps",
    "program_code",
    "tile_memory",
]
