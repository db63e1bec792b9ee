"""The profile's data: the one place that turns an engine run into the writer's dict.

``profile_data(compiled, execution=None)`` returns the dict ``profiles.write_profile`` takes:

- from the compile (``engine.compiled.CompiledProgram``): ``/meta``, ``/graph/operations``,
  ``/graph/variables``, ``/graph/vertex_types``, ``/graph/compute_sets``, ``/memory``,
  ``/liveness`` and ``/liveness/steps``;
- from the execution (``engine.execute.Execution``) when the program fits: ``/programs/nodes``,
  ``/programs``, ``/execution`` and ``/execution/steps``; the compile's references to leaf
  programs (compute sets, liveness steps) are remapped to the executor's program-tree nodes
  and the execution's notes follow the compile's in ``/meta``;
- without an execution (out of memory, as Poplar with ``debug.allowOutOfMemory``): the default
  program tree of the compile (``engine.compiled.default_tree``: a root Sequence, one Sequence
  per segment, the leaves);
- ``/``: the engine version.

Nothing here computes a figure: it only lays out what the compile and the execution produced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine.compiled import CompiledProgram, ProgramTree, default_tree
from profiles import schema

if TYPE_CHECKING:  # pragma: no cover
    from engine.execute.core import Execution
    from profiles.runs import RunRows

Groups = dict[str, dict[str, Any]]


def profile_data(compiled: CompiledProgram, execution: Execution | None = None) -> Groups:
    """The writer's data dict of a compiled program and (when it ran) its execution."""
    import engine

    if execution is None:
        tree = default_tree(compiled)
        leaf_node = tree.leaf_node(len(compiled.programs))
        data = _default_tree_groups(compiled, tree)
    else:
        leaf_node = np.asarray(execution.leaf_node, dtype=np.int64)
        data = {}
    data.update(_compile_groups(compiled, np.asarray(leaf_node, dtype=np.int64)))
    if execution is not None:
        data.update(_execution_groups(execution))
        data["/meta"]["notes"] = list(data["/meta"]["notes"]) + list(execution.notes)
    data["/"] = {"engine_version": engine.__version__}
    return data


def _compile_groups(c: CompiledProgram, leaf_node: np.ndarray) -> Groups:
    """Everything the compile knows, leaf-program references mapped through ``leaf_node``."""
    cfg, t = c.config, c.target
    data: Groups = {}
    data["/meta"] = {
        "run_config": cfg.to_dict(),
        "run_config_version": schema.RUN_CONFIG_VERSION,
        "target": t.to_dict(),
        # the partials the compile costed its AMP vertices with: the compile plan's
        # partials_bytes comes from this same resolution (engine.compiler.compile_plan)
        "partials_type": "float" if cfg.partials_dtype == "float32" else "half",
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
    data["/graph/operations"] = _datasets(c.ops, "/graph/operations")
    data["/graph/variables"] = c.variables.columns()
    data["/graph/vertex_types"] = dict(c.vertex_types)
    cs = dict(c.compute_sets)
    cs["program"] = leaf_node[cs["program"]].astype(np.int32)
    data["/graph/compute_sets"] = cs
    data["/memory"] = _datasets(c.memory, "/memory")
    lv = c.liveness
    data["/liveness/steps"] = {
        "name": lv.step_name,
        "program": leaf_node[lv.step_program].astype(np.int32),
        "op": lv.step_op,
        "ipu": lv.step_ipu,
    }
    data["/liveness"] = {
        "not_always_live": lv.not_always_live,
        "per_tile_ipu_offsets": lv.per_tile.ipu_offsets,
        "per_tile_step": lv.per_tile.step,
        "per_tile_rows": lv.per_tile.rows,
        "always_live": lv.always_live,
        "peak_step": lv.peak_step,
    }
    return data


def _datasets(table: object, group: str) -> dict[str, Any]:
    """The datasets the schema declares for ``group``, read from ``table``'s attributes of the
    same names (``pass_`` for ``pass``, a Python keyword)."""
    return {
        f.name: getattr(table, "pass_" if f.name == "pass" else f.name)
        for f in schema.group(group).datasets
    }


def _default_tree_groups(c: CompiledProgram, tree: ProgramTree) -> Groups:
    """``/programs/nodes`` and ``/programs`` of the compile's default tree (no execution)."""
    p = c.programs
    leaf = tree.leaf
    is_leaf = leaf >= 0
    li = np.where(is_leaf, leaf, 0)
    n = len(leaf)
    cycles = np.where(is_leaf, p.cycles[li], 0).astype(np.int64)
    balance = np.where(is_leaf, c.tile_balance(li), 0).astype(np.float32)
    tile_cycles: RunRows | np.ndarray | None = c.tile_cycle_runs(
        leaf
    )  # runs the writer lays out block by block
    if tile_cycles is None:  # negative counts: laid out densely
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


def _execution_groups(e: Execution) -> Groups:
    """The executor's program tree and executed steps."""
    out: dict[str, dict[str, Any]] = {
        "/programs/nodes": dict(e.nodes),
        "/programs": {"tile_cycles": e.tile_cycles},
        "/execution": dict(e.attrs),
        "/execution/steps": dict(e.steps),
    }
    if e.host is not None:  # the host's timeline, outside the device trace (format 1.2)
        out["/execution/host"] = dict(e.host)
    return out


__all__ = ["profile_data"]
