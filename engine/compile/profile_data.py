"""The profile data (writer dict) of everything the compile knows (schema v1 groups)."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.compiled import CompiledProgram, default_tree


def build_profile_data(
    c: CompiledProgram, leaf_node: np.ndarray | None
) -> dict[str, dict[str, Any]]:
    cfg, t = c.config, c.target
    data: dict[str, dict[str, Any]] = {}
    if leaf_node is None:
        tree = default_tree(c)
        leaf_node = tree.leaf_node(len(c.programs))
        data.update(_tree_groups(c, tree))
    leaf_node = np.asarray(leaf_node, dtype=np.int64)
    data["/meta"] = {
        "run_config": cfg.to_dict(),
        "target": t.to_dict(),
        "model": cfg.model,
        "status": "oom" if c.oom else "ok",
        "num_ipus": int(cfg.num_ipus),
        "replicas": int(cfg.replication_factor),
        "tiles_per_ipu": int(t.tiles_per_ipu),
        "sram_per_tile": int(t.sram_per_tile),
        "clock_hz": float(t.clock_hz),
        "samples_per_step": int(cfg.samples_per_step),
        "notes": list(c.notes),
    }
    o = c.ops
    data["/graph/operations"] = {
        "name": o.name,
        "type": o.type,
        "layer": o.layer,
        "pass": o.pass_,
        "ipu": o.ipu,
        "stage": o.stage,
        "flops": o.flops,
        "bytes_in": o.bytes_in,
        "bytes_out": o.bytes_out,
        "cycles": o.cycles,
        "code_bytes": o.code_bytes,
        "temp_bytes": o.temp_bytes,
        "tiles_used": o.tiles_used,
        "tile_start": o.tile_start,
    }
    v = c.variables
    data["/graph/variables"] = {
        "name": v.name,
        "kind": v.kind,
        "dtype": v.dtype,
        "shape": v.shape,
        "bytes": v.bytes,
        "ipu": v.ipu,
        "always_live": v.always_live,
        "live_start": v.live_start,
        "live_end": v.live_end,
        "tile_start": v.tile_start,
        "tile_count": v.tile_count,
        "interleaved": v.interleaved,
        "remote": v.remote,
        "remote_bytes": v.remote_bytes,
        "op": v.op,
    }
    data["/graph/vertex_types"] = dict(c.vertex_types)
    cs = dict(c.compute_sets)
    cs["program"] = leaf_node[cs["program"]].astype(np.int32)
    data["/graph/compute_sets"] = cs
    m = c.memory
    data["/memory"] = {
        "by_category": m.by_category,
        "by_region": m.by_region,
        "by_liveness": m.by_liveness,
        "total": m.total,
        "gaps": m.gaps,
        "physical_tile": m.physical_tile,
        "tile_xy": m.tile_xy,
        "oom_tiles": m.oom_tiles,
    }
    lv = c.liveness
    data["/liveness/steps"] = {
        "name": lv.step_name,
        "program": leaf_node[lv.step_program].astype(np.int32),
        "op": lv.step_op,
        "ipu": lv.step_ipu,
    }
    data["/liveness"] = {
        "not_always_live": lv.not_always_live,
        "per_tile": lv.per_tile,
        "always_live": lv.always_live,
        "peak_step": lv.peak_step,
    }
    return data


def _tree_groups(c: CompiledProgram, tree) -> dict[str, dict[str, Any]]:
    p = c.programs
    leaf = tree.leaf
    is_leaf = leaf >= 0
    li = np.where(is_leaf, leaf, 0)
    n = len(leaf)
    cycles = np.where(is_leaf, p.cycles[li], 0).astype(np.int64)
    balance = np.where(is_leaf, c.tile_balance(li), 0).astype(np.float32)
    tile_cycles = np.zeros((n, c.tiles_per_ipu), dtype=np.int32)
    rows = np.flatnonzero(is_leaf)
    tile_cycles[rows] = c.tile_cycles(leaf[rows])
    return {
        "/programs/nodes": {
            "name": tree.name,
            "type": tree.type,
            "parent": tree.parent,
            "ipu": tree.ipu,
            "repeat": tree.repeat,
            "op": np.where(is_leaf, p.op[li], -1).astype(np.int32),
            "cycles": cycles,
            "tile_balance": balance,
            "bytes": np.where(is_leaf, p.bytes_in[li] + p.bytes_out[li], 0).astype(np.int64),
            "sync": np.where(is_leaf, p.sync[li], 0).astype(np.uint8),
            "code_bytes": np.where(is_leaf, p.code_bytes[li], 0).astype(np.int64),
        },
        "/programs": {"tile_cycles": tile_cycles},
    }
