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
  the Grouped schedule, S-1-s under Interleaved, 0 under Sequential (Graphcore pipelining documentation); live from the
  stage's first forward step to its last backward step.

Code and other categories follow the PopVision Graph Analyser User Guide's memory categories (sizes in engine.targets).
Regions: code, stack, vertex state and descriptors need non-interleaved memory; variables go to
the interleaved region first and spill into free non-interleaved memory; what fits in neither is
``overflowed``. A tile is out of memory when total + gaps > SRAM per tile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from engine.compiled import (
    T_ONTILE,
    LivenessReport,
    MemoryReport,
    ProgramIO,
)
from engine.compiler.code import (
    program_code,
    replica_collectives,
    ring_code,
)
from engine.compiler.memory_records import (
    CAT,
    ActivationBytes,
    LivenessSteps,
    MemoryInputs,
    MemoryResult,
    ProgramCode,
    StreamedTensors,
    TileMemory,
    WeightBytes,
)
from engine.compiler.tile_memory import (
    _physical_tiles,
    _tile_xy,
    tile_memory,
)
from engine.compiler.variables import (
    _activation_variables,
    _consumers,
    _stash_variables,
    _stream_buffer_variables,
    _streamed_variables,
    _temporary_variables,
    _Vars,
    _weight_variables,
)

if TYPE_CHECKING:  # pragma: no cover
    from engine.compiler.compile_plan import CompilePlan
    from engine.compiler.lowering import Lowered
    from engine.compiler.plan import OpPlans
    from engine.graph import Graph
    from engine.targets import Target


def build_memory(
    graph: Graph,
    lowered: Lowered,
    tile_plan: OpPlans,
    programs: dict[str, np.ndarray],
    op_ipu: np.ndarray,
    plan: CompilePlan,
    target: Target,
) -> MemoryResult:
    """Variables, liveness and per-tile memory of a compiled program.

    Phases: liveness steps; variables (activations, streamed tensors, weights, temporaries,
    stashes, stream buffers, in that row order); program code; memory per tile; reports.
    """
    inputs = MemoryInputs(graph, lowered, tile_plan, programs, op_ipu, plan, target)
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


def _ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _io_summary(
    inputs: MemoryInputs,
    activations: ActivationBytes,
    streamed: StreamedTensors,
    weights: WeightBytes,
    stash_bytes: np.ndarray,
) -> ProgramIO:
    """``compiled.io``: what the executor moves (see engine.compiled)."""
    stages, graph, training = inputs.stages, inputs.graph, inputs.plan.training
    boundary = tuple(int(activations.boundary[s]) if s < stages - 1 else 0 for s in range(stages))
    return ProgramIO(
        input_elems_per_sample=int(graph.input_elems),
        input_bytes_per_sample=int(graph.input_elems * streamed.input_bytes_per_element),
        input_dtype=str(streamed.input_dtype),
        label_bytes_per_sample=int(streamed.label_bytes_per_sample) if training else 0,
        output_bytes_per_micro_batch=int(streamed.output_bytes_per_micro_batch),
        input_stage=0,
        loss_stage=stages - 1,
        activation_bytes=boundary,
        gradient_bytes=(0, *boundary[:-1]) if training else (0,) * stages,
        weight_bytes=_ints(weights.weights),
        weight_gradient_bytes=_ints(weights.gradients),
        remote_bytes=_ints(weights.remote),
        remote_accumulator_bytes=_ints(weights.remote_accumulators),
        stash_bytes=_ints(stash_bytes),
        collective_code_bytes=tuple(
            tuple(
                int(
                    ring_code(inputs.target, ring, inputs.compute_tiles).total(inputs.tiles_per_ipu)
                )
                for ring in replica_collectives(inputs, weights, ipu)
            )
            for ipu in range(inputs.num_ipus)
        ),
    )


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
