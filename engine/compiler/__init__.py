"""Compile: lowering, tile planning, memory, code and liveness (see docs/engine.md).

``compile_program(config) -> engine.compiled.CompiledProgram``. Steps:

1. ``engine.models.build_model``: the forward graph (per sample).
2. ``lowering.lower``: forward / loss / backward / accumulation / update ops, stages, recompute.
3. ``plan.plan_ops``: a tile plan and the leaf programs of every op (vectorised over ops).
4. ``memory.build_memory``: variables, liveness per step per tile, memory per tile per category,
   OOM.
"""

from __future__ import annotations

import numpy as np

from engine.compiled import (
    T_ONTILE,
    CompiledProgram,
    OpTable,
    ProgramTable,
    SegmentTable,
)
from engine.compiler.lowering import lower
from engine.compiler.memory import build_memory
from engine.compiler.plan import plan_ops
from engine.config import RunConfig
from engine.models import build_model
from profiles import schema

SEGMENT_KINDS = ("forward", "recompute", "backward", "update")


def _segments(config) -> list[tuple[str, int]]:
    S = config.stages
    segs = [("forward", s) for s in range(S)]
    if config.training:
        for s in range(S - 1, -1, -1):
            segs += [("recompute", s), ("backward", s)]
        segs += [("update", s) for s in range(S)]
    return segs


def compile_program(config: RunConfig | dict, progress=None) -> CompiledProgram:
    """Compile ``config`` (see the module docstring). ``progress(fraction, text)`` is optional."""
    if not isinstance(config, RunConfig):
        config = RunConfig.from_dict(dict(config))

    def tick(frac: float, text: str) -> None:
        if progress is not None:
            progress(frac, text)

    target = config.get_target()
    compute_tiles = target.tiles_per_ipu - config.io_tiles
    tick(0.0, "building the model graph")
    graph = build_model(config)
    tick(0.1, "lowering")
    lowered = lower(graph, config, target)
    # order the ops by segment (stable: keeps the order inside each segment)
    segs = _segments(config)
    # segment of each op: a (kind, stage) table looked up with whole arrays
    kind_code = {k: i for i, k in enumerate(SEGMENT_KINDS)}
    seg_of = np.full((len(SEGMENT_KINDS), max(config.stages, 1)), -1, np.int64)
    for i, (k, s) in enumerate(segs):
        seg_of[kind_code[k], s] = i
    op_kind = np.fromiter(map(kind_code.__getitem__, lowered["seg"].tolist()), np.int64)
    op_seg = seg_of[op_kind, lowered["stage"].astype(np.int64)]
    assert (op_seg >= 0).all(), "every lowered op belongs to a segment"
    order = np.argsort(op_seg, kind="stable")
    lowered.cols = {k: v[order] for k, v in lowered.cols.items()}
    op_seg = op_seg[order]
    tick(0.2, "planning tiles")
    tile_plan = plan_ops(lowered, target, config, compute_tiles)
    pr = tile_plan.programs
    stage_ipu = np.arange(config.stages, dtype=np.int16)
    p_op = pr["op"].astype(np.int64)
    p_seg = op_seg[p_op]
    n_prog = len(p_op)
    first = np.searchsorted(p_seg, np.arange(len(segs)), side="left")
    stop = np.searchsorted(p_seg, np.arange(len(segs)), side="right")
    segments = SegmentTable(
        kind=np.array([k for k, _ in segs], dtype=object),
        ipu=stage_ipu[[s for _, s in segs]].astype(np.int16),
        stage=np.array([s for _, s in segs], dtype=np.int16),
        per=np.array(["step" if k == "update" else "micro_batch" for k, _ in segs], dtype=object),
        first=first.astype(np.int64),
        stop=stop.astype(np.int64),
    )
    op_ipu = stage_ipu[lowered["stage"].astype(np.int64)]
    tick(0.4, "memory and liveness")
    progs_cols = dict(pr)
    progs_cols["ipu"] = op_ipu[p_op].astype(np.int16)
    memory_result = build_memory(
        graph, lowered, tile_plan, progs_cols, op_ipu, config, target, compute_tiles
    )
    tick(0.9, "assembling")
    dest_tile = schema.code("destination", "tile")
    is_ex = pr["type"] == schema.code("program_type", "DoExchange")
    is_sync = pr["type"] == schema.code("program_type", "Sync")
    programs = ProgramTable(
        name=pr["name"],
        type=pr["type"],
        op=pr["op"],
        ipu=progs_cols["ipu"],
        stage=lowered["stage"][p_op].astype(np.int16),
        pass_=lowered["pass_"][p_op].astype(np.uint8),
        segment=p_seg.astype(np.int32),
        cycles=pr["cycles"],
        cycles_min=pr["cycles_min"],
        n_max=pr["n_max"],
        tile_start=pr["tile_start"],
        tile_count=pr["tile_count"],
        bytes_in=pr["bytes_in"],
        bytes_out=np.zeros(n_prog, dtype=np.int64),
        dest=np.where(is_ex, dest_tile, 0).astype(np.uint8),
        peer=np.full(n_prog, -1, dtype=np.int16),
        sync=np.where(is_sync, schema.code("sync_kind", "internal"), 0).astype(np.uint8),
        transfers=np.ones(n_prog, dtype=np.int32),
        code_bytes=memory_result.program_code,
        family=np.zeros(n_prog, dtype=np.int16),  # set below: row of compiled.vertex_types
        vertices=pr["vertices"],
    )
    n_ops = len(lowered)
    op_cycles = np.bincount(p_op, weights=pr["cycles"], minlength=n_ops).astype(np.int64)
    op_code = np.bincount(p_op, weights=memory_result.program_code, minlength=n_ops).astype(
        np.int64
    )
    ops = OpTable(
        name=lowered["name"],
        type=lowered["type"],
        layer=lowered["layer"],
        family=lowered["family"],
        pass_=lowered["pass_"],
        ipu=op_ipu.astype(np.int16),
        stage=lowered["stage"].astype(np.int16),
        fwd=lowered["fwd"].astype(np.int32),
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
    programs.family = np.where(
        pr["vt"] >= 0, remap[np.maximum(pr["vt"].astype(np.int64), 0)], -1
    ).astype(np.int16)
    compute_sets = {
        "name": pr["name"][cs],
        "op": pr["op"][cs].astype(np.int32),
        "program": cs.astype(np.int32),
        "vertex_type": remap[pr["vt"][cs].astype(np.int64)].astype(np.int32),
        "vertices": pr["vertices"][cs].astype(np.int64),
        "ipu": progs_cols["ipu"][cs].astype(np.int16),
        "tile_start": pr["tile_start"][cs].astype(np.int32),
        "tile_count": pr["tile_count"][cs].astype(np.int32),
    }
    notes = list(tile_plan.notes) + list(graph.params.get("notes", []))  # e.g. ONNX unknown ops
    if memory_result.oom:
        n_oom = len(memory_result.memory.oom_tiles)
        notes.append(f"out of memory: {n_oom} tile(s) exceed {target.sram_per_tile} bytes.")
    if (memory_result.memory.by_liveness[..., 1] > np.iinfo(np.int32).max).any():
        notes.append(
            "liveness per tile is capped at 2 GiB per tile and step in /liveness/per_tile (the "
            "run needs more); per-step sums and the memory report are exact."
        )
    compiled = CompiledProgram(
        config=config,
        target=target,
        graph=graph,
        ops=ops,
        programs=programs,
        segments=segments,
        variables=memory_result.variables,
        vertex_types=vertex_types,
        compute_sets=compute_sets,
        memory=memory_result.memory,
        liveness=memory_result.liveness,
        oom=memory_result.oom,
        io=memory_result.io,
        stage_ipu=stage_ipu,
        compute_tiles=compute_tiles,
        notes=notes,
    )
    tick(1.0, "compiled")
    return compiled


__all__ = ["SEGMENT_KINDS", "compile_program"]
