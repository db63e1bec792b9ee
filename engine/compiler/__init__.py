"""Compile: lowering, tile planning, memory, code and liveness (see docs/engine.md).

``compile_program(config) -> engine.compiled.CompiledProgram``. Steps:

1. ``engine.models.build_model``: the forward graph (per sample).
2. ``compile_plan.CompilePlan.resolve``: the run options the phases read, resolved once;
   ``lowering.lower``: forward / loss / backward / accumulation / update ops, stages, recompute.
3. ``plan.plan_ops``: a tile plan and the leaf programs of every op (vectorised over ops).
4. ``memory.build_memory``: variables, liveness per step per tile, memory per tile per category,
   OOM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from engine.compiled import (
    T_ONTILE,
    CompiledProgram,
    OpTable,
    ProgramTable,
    SegmentTable,
)
from engine.compiler.balance import balance_compute_sets
from engine.compiler.compile_plan import CompilePlan
from engine.compiler.lowering import Lowered, lower
from engine.compiler.memory import build_memory
from engine.compiler.plan import plan_ops
from engine.config import RunConfig
from engine.models import build_model
from profiles import schema

if TYPE_CHECKING:  # pragma: no cover
    from engine.compiler.memory_records import MemoryResult
    from engine.compiler.plan import OpPlans
    from engine.graph import Graph
    from engine.targets import Target

SEGMENT_KINDS = ("forward", "recompute", "backward", "update")


def _segments(plan: CompilePlan) -> list[tuple[str, int]]:
    """(kind, stage) of every segment, in the canonical order (engine.compiled)."""
    stages = plan.stages
    segs = [("forward", s) for s in range(stages)]
    if plan.training:
        for s in range(stages - 1, -1, -1):
            segs += [("recompute", s), ("backward", s)]
        segs += [("update", s) for s in range(stages)]
    return segs


@dataclass(frozen=True)
class SegmentOrder:
    """The lowered ops in segment order (stable inside a segment), each op's segment, and the
    (kind, stage) of every segment."""

    lowered: Lowered
    op_seg: np.ndarray
    segs: list[tuple[str, int]]


@dataclass(frozen=True)
class VertexTables:
    """The compiled vertex types (their codelet family's sizes, their instances), the compute
    sets, and the row of ``vertex_types`` of every program (-1: none)."""

    vertex_types: dict[str, np.ndarray]
    compute_sets: dict[str, np.ndarray]
    program_family: np.ndarray


def compile_program(
    config: RunConfig | dict, progress: Callable[[float, str], None] | None = None
) -> CompiledProgram:
    """Compile ``config`` (see the module docstring). ``progress(fraction, text)`` is optional.

    Phases, each returning a record: the graph; the lowered ops in segment order
    (:class:`SegmentOrder`); the tile plan (``plan.plan_ops``); the segment table; memory and
    liveness (``memory.build_memory``); the program, op and vertex tables; the notes."""
    if not isinstance(config, RunConfig):
        config = RunConfig.from_dict(dict(config))

    def tick(frac: float, text: str) -> None:
        if progress is not None:
            progress(frac, text)

    target = config.get_target()
    plan = CompilePlan.resolve(config, target)
    compute_tiles = plan.compute_tiles
    tick(0.0, "building the model graph")
    graph = build_model(config)
    tick(0.1, "lowering")
    order = lowered_in_segment_order(graph, config, plan)
    lowered = order.lowered
    tick(0.2, "planning tiles")
    tile_plan = plan_ops(lowered, target, plan)
    pr = tile_plan.programs
    _check_tile_cycles(pr, plan, target)
    # what-if: the named compute sets spread evenly (their code and vertex state follow)
    balance_compute_sets(pr, plan.balance_compute_sets, compute_tiles, plan.model)
    stage_ipu = np.arange(plan.stages, dtype=np.int16)
    p_op = pr["op"].astype(np.int64)
    p_seg = order.op_seg[p_op]
    segments = segment_table(order.segs, p_seg, stage_ipu)
    op_ipu = stage_ipu[lowered["stage"].astype(np.int64)]
    tick(0.4, "memory and liveness")
    progs_cols = dict(pr)
    progs_cols["ipu"] = op_ipu[p_op].astype(np.int16)
    memory_result = build_memory(graph, lowered, tile_plan, progs_cols, op_ipu, plan, target)
    tick(0.9, "assembling")
    programs = program_table(pr, lowered, p_seg, progs_cols["ipu"], memory_result.program_code)
    ops = op_table(lowered, op_ipu, pr, memory_result.program_code, tile_plan, graph)
    vt = vertex_tables(tile_plan, target, progs_cols["ipu"])
    programs.family = vt.program_family
    compiled = CompiledProgram(
        config=config,
        target=target,
        graph=graph,
        ops=ops,
        programs=programs,
        segments=segments,
        variables=memory_result.variables,
        vertex_types=vt.vertex_types,
        compute_sets=vt.compute_sets,
        memory=memory_result.memory,
        liveness=memory_result.liveness,
        oom=memory_result.oom,
        io=memory_result.io,
        stage_ipu=stage_ipu,
        compute_tiles=compute_tiles,
        notes=compile_notes(tile_plan, graph, memory_result, target),
    )
    tick(1.0, "compiled")
    return compiled


#: Largest cycles of one program on one tile a profile holds (``/programs/tile_cycles`` is
#: int32 in the profile schema, as PopVision's per-tile cycle counts).
MAX_TILE_CYCLES = 2**31 - 1


def _check_tile_cycles(programs: dict, plan: CompilePlan, target: Target) -> None:
    """Refuse, in one sentence and before anything is simulated, a configuration one of
    whose programs would take more cycles on a tile than a profile can record."""
    cycles = np.asarray(programs["cycles"], np.int64)
    if not len(cycles) or int(cycles.max()) <= MAX_TILE_CYCLES:
        return
    from engine.errors import ConfigError

    i = int(np.argmax(cycles))
    seconds = int(cycles[i]) / float(target.clock_hz)
    raise ConfigError(
        f"program {str(programs['name'][i])!r} would take {int(cycles[i]):,} cycles on one "
        f"tile ({seconds:,.1f} s), more than a profile's 32-bit per-tile cycle counts hold "
        f"(2^31 - 1); use a smaller micro-batch (now {plan.micro_batch:,}) or input."
    )


def lowered_in_segment_order(graph: Graph, config: RunConfig, plan: CompilePlan) -> SegmentOrder:
    """Lower the graph and order its ops by segment (stable: keeps the order inside each);
    ``config`` only for the checks of its split points and checkpoints (``lowering.lower``)."""
    lowered = lower(graph, config, plan)
    segs = _segments(plan)
    # segment of each op: a (kind, stage) table looked up with whole arrays
    kind_code = {k: i for i, k in enumerate(SEGMENT_KINDS)}
    seg_of = np.full((len(SEGMENT_KINDS), max(plan.stages, 1)), -1, np.int64)
    for i, (k, s) in enumerate(segs):
        seg_of[kind_code[k], s] = i
    op_kind = np.fromiter(map(kind_code.__getitem__, lowered["seg"].tolist()), np.int64)
    op_seg = seg_of[op_kind, lowered["stage"].astype(np.int64)]
    assert (op_seg >= 0).all(), "every lowered op belongs to a segment"
    order = np.argsort(op_seg, kind="stable")
    lowered.cols = {k: v[order] for k, v in lowered.cols.items()}
    return SegmentOrder(lowered, op_seg[order], segs)


def segment_table(
    segs: list[tuple[str, int]], p_seg: np.ndarray, stage_ipu: np.ndarray
) -> SegmentTable:
    """Every segment's kind, IPU, stage, loop level and range of programs."""
    first = np.searchsorted(p_seg, np.arange(len(segs)), side="left")
    stop = np.searchsorted(p_seg, np.arange(len(segs)), side="right")
    return SegmentTable(
        kind=np.array([k for k, _ in segs], dtype=object),
        ipu=stage_ipu[[s for _, s in segs]].astype(np.int16),
        stage=np.array([s for _, s in segs], dtype=np.int16),
        per=np.array(["step" if k == "update" else "micro_batch" for k, _ in segs], dtype=object),
        first=first.astype(np.int64),
        stop=stop.astype(np.int64),
    )


def program_table(
    tile_programs: dict[str, np.ndarray],
    lowered: Lowered,
    p_seg: np.ndarray,
    p_ipu: np.ndarray,
    program_code: np.ndarray,
) -> ProgramTable:
    """The leaf programs of the tile plan with their op's stage, pass and segment (``family``
    is set from the vertex tables)."""
    p_op = tile_programs["op"].astype(np.int64)
    n_prog = len(p_op)
    dest_tile = schema.code("destination", "tile")
    is_ex = tile_programs["type"] == schema.code("program_type", "DoExchange")
    is_sync = tile_programs["type"] == schema.code("program_type", "Sync")
    return ProgramTable(
        name=tile_programs["name"],
        type=tile_programs["type"],
        op=tile_programs["op"],
        ipu=p_ipu,
        stage=lowered["stage"][p_op].astype(np.int16),
        pass_=lowered["pass_"][p_op].astype(np.uint8),
        segment=p_seg.astype(np.int32),
        cycles=tile_programs["cycles"],
        cycles_min=tile_programs["cycles_min"],
        n_max=tile_programs["n_max"],
        tile_start=tile_programs["tile_start"],
        tile_count=tile_programs["tile_count"],
        bytes_in=tile_programs["bytes_in"],
        bytes_out=np.zeros(n_prog, dtype=np.int64),
        dest=np.where(is_ex, dest_tile, 0).astype(np.uint8),
        peer=np.full(n_prog, -1, dtype=np.int16),
        sync=np.where(is_sync, schema.code("sync_kind", "internal"), 0).astype(np.uint8),
        transfers=np.ones(n_prog, dtype=np.int32),
        code_bytes=program_code,
        family=np.zeros(n_prog, dtype=np.int16),  # set from the vertex tables
        vertices=tile_programs["vertices"],
    )


def _op_sources(graph: Graph | None, fwd: np.ndarray) -> np.ndarray:
    """The source of each lowered op: its forward graph op's ('' without one)."""
    n = len(fwd)
    src = None if graph is None else graph.cols.get("source")
    if src is None or not len(src):
        return np.full(n, "", dtype=object)
    f = np.asarray(fwd, dtype=np.int64)
    ok = (f >= 0) & (f < len(src))
    return np.where(ok, np.asarray(src, dtype=object)[np.where(ok, f, 0)], "").astype(object)


def _op_groups(graph: Graph | None, fwd: np.ndarray) -> np.ndarray:
    """The AMP groups of each lowered op: its forward graph op's (a convolution's groups, a
    batched matmul's batch of matrices; 1 without a forward op or a graph)."""
    f = np.asarray(fwd, dtype=np.int64)
    g = None if graph is None else graph.cols.get("groups")
    if g is None or not len(g):
        return np.ones(len(f), dtype=np.int32)
    ok = (f >= 0) & (f < len(g))
    return np.where(ok, np.asarray(g, dtype=np.int64)[np.where(ok, f, 0)], 1).astype(np.int32)


def op_table(
    lowered: Lowered,
    op_ipu: np.ndarray,
    tile_programs: dict[str, np.ndarray],
    program_code: np.ndarray,
    tile_plan: OpPlans,
    graph: Graph | None = None,
) -> OpTable:
    """Every lowered op with its programs' cycles and code summed and its tile plan; its
    source (where in the model's code) is its forward graph op's."""
    p_op = tile_programs["op"].astype(np.int64)
    n_ops = len(lowered)
    op_cycles = np.bincount(p_op, weights=tile_programs["cycles"], minlength=n_ops).astype(np.int64)
    op_code = np.bincount(p_op, weights=program_code, minlength=n_ops).astype(np.int64)
    return OpTable(
        name=lowered["name"],
        type=lowered["type"],
        layer=lowered["layer"],
        source=_op_sources(graph, lowered["fwd"]),
        family=lowered["family"],
        pass_=lowered["pass_"],
        ipu=op_ipu.astype(np.int16),
        stage=lowered["stage"].astype(np.int16),
        fwd=lowered["fwd"].astype(np.int32),
        groups=_op_groups(graph, lowered["fwd"]),
        flops=lowered["flops"].astype(np.int64),
        bytes_in=lowered["bytes_in"].astype(np.int64),
        bytes_out=lowered["bytes_out"].astype(np.int64),
        cycles=op_cycles,
        code_bytes=op_code,
        temp_bytes=(tile_plan.temp_per_tile * tile_plan.tiles_used).astype(np.int64),
        tiles_used=tile_plan.tiles_used.astype(np.int32),
        tile_start=tile_plan.tile_start.astype(np.int32),
        serial_splits=tile_plan.serial_splits.astype(np.int32),
    )


def vertex_tables(tile_plan: OpPlans, target: Target, p_ipu: np.ndarray) -> VertexTables:
    """The vertex types that run (codelet sizes from the target's families, instances summed
    over the compute sets), the compute sets, and each program's vertex-type row."""
    pr = tile_plan.programs
    vt = tile_plan.vertex_types
    fams = target.vertex_families
    cs = np.flatnonzero(pr["type"] == T_ONTILE)
    inst = np.bincount(
        pr["vt"][cs].astype(np.int64), weights=pr["vertices"][cs], minlength=len(vt["key"])
    ).astype(np.int64)
    keep = vt["key"] != ""
    remap = np.cumsum(keep) - 1
    vertex_types = {
        "name": vt["name"][keep],
        "code_bytes": np.array([fams[f].code_bytes for f in vt["family"][keep]], dtype=np.int64),
        "state_bytes": np.array([fams[f].state_bytes for f in vt["family"][keep]], dtype=np.int64),
        "instances": inst[keep],
    }
    family = np.where(pr["vt"] >= 0, remap[np.maximum(pr["vt"].astype(np.int64), 0)], -1).astype(
        np.int16
    )
    compute_sets = {
        "name": pr["name"][cs],
        "op": pr["op"][cs].astype(np.int32),
        "program": cs.astype(np.int32),
        "vertex_type": remap[pr["vt"][cs].astype(np.int64)].astype(np.int32),
        "vertices": pr["vertices"][cs].astype(np.int64),
        "ipu": p_ipu[cs].astype(np.int16),
        "tile_start": pr["tile_start"][cs].astype(np.int32),
        "tile_count": pr["tile_count"][cs].astype(np.int32),
    }
    return VertexTables(vertex_types, compute_sets, family)


def compile_notes(
    tile_plan: OpPlans, graph: Graph, memory_result: MemoryResult, target: Target
) -> list[str]:
    """The plan's and the graph's notes (e.g. ONNX ops it does not know), then out of memory and
    the liveness cap, when they apply."""
    # Graph.params is declared dict[str, int] but also holds the importer's notes (a list)
    notes = list(tile_plan.notes) + list(cast("list[str]", graph.params.get("notes", [])))
    if memory_result.oom:
        n_oom = len(memory_result.memory.oom_tiles)
        notes.append(f"out of memory: {n_oom} tile(s) exceed {target.sram_per_tile} bytes.")
    if (memory_result.memory.by_liveness[..., 1] > np.iinfo(np.int32).max).any():
        notes.append(
            "liveness per tile is capped at 2 GiB per tile and step in /liveness/per_tile (the "
            "run needs more); per-step sums and the memory report are exact."
        )
    return notes


__all__ = ["SEGMENT_KINDS", "compile_program"]
