"""Synthetic profiles: plausible, schema-valid data for tests, fixtures and benchmarks.

This is not the engine: numbers are drawn at random around the public IPU figures the engine
cites (docs/engine.md: 624 KiB per tile, about 90 cycles per internal sync, 4 bytes per cycle per
tile of exchange...), but every invariant of the format holds exactly, so analysis code
can be tested against it:

* memory: for every tile ``sum(by_category) == sum(by_region) == sum(by_liveness) == total``;
  the not-always-live bytes of a tile are its peak over the liveness steps; ``oom_tiles`` are the
  tiles with ``total + gaps > sram_per_tile``;
* liveness: not-always-live memory rises through the forward pass, peaks, and falls through the
  backward pass;
* programs: a depth-first program tree (Sequence / Repeat / per-IPU Sequence / leaves); a leaf's
  ``cycles`` is the max of its per-tile cycles and ``tile_balance`` their mean / max;
* steps: grouped by IPU, sorted by start, no overlap within an IPU, each executing a leaf of its
  IPU with that leaf's cycles (host waits vary); stream copies carry bytes and destinations;
  pipeline phases ramp-up / main / ramp-down / weight update follow G + S - 1.

``make_synthetic_profile(...)`` returns the writer's ``data`` dict;
``write_synthetic_profile(path, ...)`` writes one chunk of steps at a time (a 1,000,000-step
profile never exists twice in memory).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from profiles import schema
from profiles.liveness import from_dense as tile_changes
from profiles.writer import ProfileWriter

C = schema.code
KIB = 1024
#: Mk2 GC200 figures (Jia et al. 2019, arXiv 1912.03413; Graphcore IPU-M2000 and Bow-2000 datasheets).
SRAM_PER_TILE = 624 * KIB
CLOCK_HZ = 1.325e9
#: PopLibs planners' fixed costs (the poplin / popops planners, github.com/graphcore/poplibs).
SYNC_CYCLES = 90
EXCHANGE_SETUP_CYCLES = 100
EXCHANGE_BYTES_PER_CYCLE = 4
#: Host link: PCIe Gen4 x8, about 16 GB/s per direction (IPU-M2000 datasheet), in bytes per cycle.
HOST_BYTES_PER_CYCLE = 16e9 / CLOCK_HZ

OP_TYPES = ("Conv2d", "MatMul", "Add", "BatchNorm", "Relu", "ReduceSum", "Cast", "Softmax")
VERTEX_TYPES = (
    "poplin::ConvPartial1x1Out<half,float,true>",
    "poplin::ConvPartialnx1<half,float,true>",
    "poplin::ReduceAdd<float,half>",
    "popops::ScaledAddSupervisor<half,half,true>",
    "popops::BinaryOp1DSupervisor<ADD,half>",
    "popops::UnaryOp1DSupervisor<RELU,half>",
    "popops::Reduce<ReduceAdd,float,half>",
    "popops::Cast<float,half>",
    "popnn::NonLinearitySupervisor<half,RELU>",
    "popnn::SoftMax<float>",
    "poplar_rt::DstStridedCopyDA32",
    "poplar_rt::ShortMemcpy",
)


@dataclass(frozen=True)
class _Shape:
    """What a synthetic profile stands for: its size, random seed and run options."""

    n_ipus: int
    tiles: int
    n_programs: int
    seed: int
    oom: bool
    liveness_steps: int
    grad_accum: int
    device_iterations: int
    micro_batch: int

    @property
    def samples_per_step(self) -> int:
        """Samples one step (one host call) processes: micro-batch x accumulation x iterations."""
        return self.micro_batch * self.grad_accum * self.device_iterations


@dataclass
class _Plan:
    """Everything but the executed steps, plus what the step generator needs."""

    data: dict[str, dict[str, object]]
    leaves_by_ipu: list[np.ndarray]
    prog_type: np.ndarray
    prog_cycles: np.ndarray
    prog_bytes: np.ndarray
    shape: _Shape


def _program_tree(
    rng: np.random.Generator, n_programs: int, n_ipus: int, tiles: int
) -> tuple[dict[str, np.ndarray], np.ndarray, list[np.ndarray], np.ndarray]:
    n_control = 2 + n_ipus
    n_leaf = n_programs - n_control
    per_ipu = np.full(n_ipus, n_leaf // n_ipus)
    per_ipu[: n_leaf % n_ipus] += 1
    # pre-order rows: root, repeat, then [ipu sequence, its leaves] per IPU
    ipu_seq_rows = 2 + np.r_[0, np.cumsum(per_ipu + 1)[:-1]]
    P = n_programs
    ptype = np.zeros(P, dtype=np.uint8)
    parent = np.full(P, -1, dtype=np.int32)
    ipu = np.full(P, -1, dtype=np.int16)
    ptype[0] = C("program_type", "Sequence")
    ptype[1] = C("program_type", "Repeat")
    parent[1] = 0
    ptype[ipu_seq_rows] = C("program_type", "Sequence")
    parent[ipu_seq_rows] = 1
    ipu[ipu_seq_rows] = np.arange(n_ipus)
    is_leaf = np.ones(P, dtype=bool)
    is_leaf[[0, 1, *ipu_seq_rows]] = False
    leaf_rows = np.flatnonzero(is_leaf)
    leaf_ipu = np.repeat(np.arange(n_ipus), per_ipu)
    ipu[leaf_rows] = leaf_ipu
    parent[leaf_rows] = ipu_seq_rows[leaf_ipu]
    # leaf types: mostly compute and exchange, syncs between; each IPU starts with the input
    # stream copy (begin / mid / end) and ends with a SyncAns
    kinds = np.array(
        [C("program_type", t) for t in ("OnTileExecute", "DoExchange", "Sync", "GlobalExchange")]
    )
    probs = np.array([0.52, 0.3, 0.14, 0.04]) if n_ipus > 1 else np.array([0.54, 0.31, 0.15, 0.0])
    ptype[leaf_rows] = rng.choice(kinds, size=leaf_rows.size, p=probs / probs.sum())
    leaves_by_ipu = [leaf_rows[leaf_ipu == i] for i in range(n_ipus)]
    for rows in leaves_by_ipu:
        if rows.size >= 5:
            ptype[rows[:3]] = [
                C("program_type", t) for t in ("StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd")
            ]
            ptype[rows[-1]] = C("program_type", "SyncAns")
            # the optimiser state streamed from / to remote buffers near the end (weight update)
            if rows.size >= 12:
                ptype[rows[-5:-2]] = [
                    C("program_type", t)
                    for t in ("StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd")
                ]
    # tile ranges of leaves
    t = ptype
    compute = t == C("program_type", "OnTileExecute")
    exch = t == C("program_type", "DoExchange")
    sync = np.isin(t, [C("program_type", "Sync"), C("program_type", "SyncAns")])
    gex = t == C("program_type", "GlobalExchange")
    scm = t == C("program_type", "StreamCopyMid")
    scb = t == C("program_type", "StreamCopyBegin")
    sce = t == C("program_type", "StreamCopyEnd")
    tile_count = np.zeros(P, dtype=np.int64)
    tile_count[is_leaf] = rng.integers(max(1, tiles // 8), tiles + 1, size=leaf_rows.size)
    tile_count[sync | scb | sce] = tiles
    tile_start = np.zeros(P, dtype=np.int64)
    tile_start[is_leaf] = (rng.random(leaf_rows.size) * (tiles - tile_count[is_leaf] + 1)).astype(
        np.int64
    )
    # bytes moved per execution
    nbytes = np.zeros(P, dtype=np.int64)
    nbytes[exch] = tile_count[exch] * rng.integers(256, 8 * KIB, size=int(exch.sum()))
    nbytes[gex] = rng.integers(64 * KIB, 4 * 1024 * KIB, size=int(gex.sum()))
    nbytes[scm] = rng.integers(64 * KIB, 1536 * KIB, size=int(scm.sum()))
    # cycles of one execution (max over tiles)
    cycles = np.zeros(P, dtype=np.int64)
    cycles[compute] = np.clip(rng.lognormal(8.3, 1.0, size=int(compute.sum())), 60, 2e6)
    cycles[exch] = EXCHANGE_SETUP_CYCLES + nbytes[exch] // (
        EXCHANGE_BYTES_PER_CYCLE * np.maximum(tile_count[exch], 1)
    )
    cycles[sync] = SYNC_CYCLES
    cycles[gex] = EXCHANGE_SETUP_CYCLES + (nbytes[gex] / 64).astype(np.int64)
    cycles[scm] = (nbytes[scm] / HOST_BYTES_PER_CYCLE).astype(np.int64) + 200
    cycles[scb | sce] = rng.integers(40, 400, size=int((scb | sce).sum()))
    # per-tile cycles: idle outside the leaf's tile range, the slowest tile sets the step length
    u = rng.random((P, tiles), dtype=np.float32)
    spread = np.where(compute, 0.45, np.where(exch | gex | scm, 0.25, 0.0)).astype(np.float32)
    frac = 1.0 - spread[:, None] * u * u
    cols = np.arange(tiles)
    active = (cols[None, :] >= tile_start[:, None]) & (
        cols[None, :] < (tile_start + tile_count)[:, None]
    )
    frac = np.where(active, frac, 0.0)
    frac[np.arange(P), np.minimum(tile_start, tiles - 1)] = np.where(is_leaf, 1.0, 0.0)
    tile_cycles = np.rint(frac * cycles[:, None]).astype(np.int32)
    mx = tile_cycles.max(axis=1)
    cycles = mx.astype(np.int64)
    balance = np.where(mx > 0, tile_cycles.mean(axis=1) / np.maximum(mx, 1), 0.0).astype(np.float32)
    sync_kind = np.zeros(P, dtype=np.uint8)
    sync_kind[sync] = C("sync_kind", "internal")
    if n_ipus > 1:
        before_gex = np.flatnonzero(gex) - 1
        before_gex = before_gex[sync[before_gex]] if before_gex.size else before_gex
        sync_kind[before_gex] = C("sync_kind", "external")
    code_bytes = np.where(is_leaf, tile_count * rng.integers(16, 96, size=P), 0).astype(np.int64)
    names = np.empty(P, dtype=object)
    names[0], names[1] = "main", "deviceIterations"
    for i, r in enumerate(ipu_seq_rows):
        names[r] = f"ipu{i}/step"
    tnames = np.array(schema.PROGRAM_TYPES, dtype=object)
    names[leaf_rows] = [f"{tn}/{r}" for tn, r in zip(tnames[ptype[leaf_rows]], leaf_rows.tolist())]
    repeat = np.ones(P, dtype=np.int64)
    nodes = {
        "name": names,
        "type": ptype,
        "parent": parent,
        "ipu": ipu,
        "repeat": repeat,
        "op": np.full(P, -1, dtype=np.int32),
        "cycles": cycles,
        "tile_balance": balance,
        "bytes": nbytes,
        "sync": sync_kind,
        "code_bytes": code_bytes,
        "_tile_start": tile_start,
        "_tile_count": tile_count,
    }
    return nodes, tile_cycles, leaves_by_ipu, leaf_rows


def _plan(shape: _Shape) -> _Plan:
    n_ipus, tiles = shape.n_ipus, shape.tiles
    if n_ipus < 1 or tiles < 8:
        raise ValueError("a synthetic profile needs at least 1 IPU and 8 tiles")
    n_programs = max(shape.n_programs, 2 + n_ipus + 6 * n_ipus)
    rng = np.random.default_rng(shape.seed)
    nodes, tile_cycles, leaves_by_ipu, leaf_rows = _program_tree(rng, n_programs, n_ipus, tiles)
    nodes["repeat"][1] = shape.device_iterations
    ptype = nodes["type"]

    operations, lsteps, variables, vertex_types, compute_sets, L = _graph_tables(
        rng,
        nodes,
        leaf_rows,
        n_programs=n_programs,
        n_ipus=n_ipus,
        tiles=tiles,
        liveness_steps=shape.liveness_steps,
    )
    memory, liveness = _memory_and_liveness(rng, n_ipus, tiles, L, shape.oom)
    meta = _meta(shape)
    prog_cycles = nodes["cycles"]
    prog_bytes = nodes["bytes"]
    for k in ("_tile_start", "_tile_count"):
        nodes.pop(k)
    data: dict[str, dict[str, object]] = {
        "/": {"engine_version": "synthetic"},
        "/meta": meta,
        "/graph/operations": operations,
        "/graph/variables": variables,
        "/graph/vertex_types": vertex_types,
        "/graph/compute_sets": compute_sets,
        "/memory": memory,
        "/liveness/steps": lsteps,
        "/liveness": liveness,
        "/programs/nodes": {**nodes},  # a dict[str, object] of the same arrays
        "/programs": {"tile_cycles": tile_cycles},
    }
    return _Plan(data, leaves_by_ipu, ptype, prog_cycles, prog_bytes, shape)


def _graph_tables(
    rng: np.random.Generator,
    nodes: dict,
    leaf_rows: np.ndarray,
    *,
    n_programs: int,
    n_ipus: int,
    tiles: int,
    liveness_steps: int,
) -> tuple[dict, dict, dict, dict, dict, int]:
    """The graph tables of a synthetic profile (operations, liveness steps, variables, vertex
    types, compute sets) and the number of liveness steps; sets ``nodes["op"]``."""
    P = n_programs
    ptype = nodes["type"]
    # ---- operations: consecutive leaves of an IPU belong to one operation ----------------
    n_ops = max(n_ipus, leaf_rows.size // 4)
    op_of_leaf = np.minimum((np.arange(leaf_rows.size) * n_ops) // leaf_rows.size, n_ops - 1)
    op_col = np.full(P, -1, dtype=np.int32)
    op_col[leaf_rows] = op_of_leaf
    sync_like = np.isin(ptype, [C("program_type", t) for t in ("Sync", "SyncAns")])
    op_col[sync_like] = -1
    nodes["op"] = op_col
    leaf_ipu = nodes["ipu"][leaf_rows]
    op_ipu = np.zeros(n_ops, dtype=np.int16)
    op_ipu[op_of_leaf] = leaf_ipu
    pos = np.arange(n_ops) / max(1, n_ops - 1)
    op_pass = np.select(
        [pos < 0.45, pos < 0.5, pos < 0.9],
        [C("pass", "forward"), C("pass", "loss"), C("pass", "backward")],
        C("pass", "update"),
    ).astype(np.uint8)
    op_type = rng.choice(np.array(OP_TYPES, dtype=object), size=n_ops)
    layer = np.array(
        [f"layer{1 + k * 4 // max(1, n_ops)}.{k % 23}" for k in range(n_ops)], dtype=object
    )
    pass_names = np.array(schema.PASSES, dtype=object)[op_pass]
    short = {"forward": "fwd", "backward": "bwd", "loss": "loss", "update": "upd", "io": "io"}
    op_name = np.array(
        [f"{lay}.{ty.lower()}/{short[ps]}" for lay, ty, ps in zip(layer, op_type, pass_names)],
        dtype=object,
    )
    op_cycles = np.bincount(
        op_col[op_col >= 0], weights=nodes["cycles"][op_col >= 0], minlength=n_ops
    ).astype(np.int64)
    op_code = np.bincount(
        op_col[op_col >= 0], weights=nodes["code_bytes"][op_col >= 0], minlength=n_ops
    ).astype(np.int64)
    tiles_used = rng.integers(max(1, tiles // 8), tiles + 1, size=n_ops).astype(np.int32)
    macs = rng.lognormal(16, 1.5, size=n_ops).astype(np.int64)
    operations = {
        "name": op_name,
        "type": op_type,
        "layer": layer,
        "source": np.full(n_ops, "", dtype=object),  # no model code behind a synthetic op
        "pass": op_pass,
        "ipu": op_ipu,
        "stage": op_ipu.astype(np.int16),
        "groups": np.ones(n_ops, dtype=np.int32),  # dense operations
        "flops": 2 * macs,
        "bytes_in": rng.integers(4 * KIB, 16 * 1024 * KIB, size=n_ops),
        "bytes_out": rng.integers(4 * KIB, 8 * 1024 * KIB, size=n_ops),
        "cycles": op_cycles,
        "code_bytes": op_code,
        "temp_bytes": rng.integers(0, 64 * KIB, size=n_ops) * tiles_used,
        "tiles_used": tiles_used,
        "tile_start": (rng.random(n_ops) * (tiles - tiles_used + 1)).astype(np.int32),
    }

    # ---- liveness steps: evenly spaced leaves, in program order ---------------------------
    L = int(max(2, min(liveness_steps, leaf_rows.size)))
    lrows = leaf_rows[np.linspace(0, leaf_rows.size - 1, L).astype(np.int64)]
    lsteps = {
        "name": nodes["name"][lrows],
        "program": lrows.astype(np.int32),
        "op": op_col[lrows],
        "ipu": nodes["ipu"][lrows],
    }

    # ---- variables --------------------------------------------------------------------------
    n_vars = 2 * n_ops
    kinds = rng.choice(
        np.array(
            [
                C("variable_kind", k)
                for k in (
                    "weight",
                    "activation",
                    "gradient",
                    "optimiserState",
                    "stash",
                    "temporary",
                )
            ]
        ),
        size=n_vars,
        p=[0.25, 0.3, 0.15, 0.15, 0.05, 0.1],
    ).astype(np.uint8)
    always = np.isin(kinds, [C("variable_kind", "weight"), C("variable_kind", "optimiserState")])
    v_ls = rng.integers(0, L, size=n_vars)
    v_le = np.minimum(L - 1, v_ls + rng.integers(0, max(2, L // 3), size=n_vars))
    v_tiles = rng.integers(1, tiles + 1, size=n_vars).astype(np.int32)
    v_bytes = (v_tiles.astype(np.int64) * rng.integers(64, 16 * KIB, size=n_vars)).astype(np.int64)
    remote = (kinds == C("variable_kind", "optimiserState")) & (rng.random(n_vars) < 0.5)
    kind_names = np.array(schema.VARIABLE_KINDS, dtype=object)[kinds]
    variables = {
        "name": np.array([f"{kn}/{k}" for k, kn in enumerate(kind_names)], dtype=object),
        "kind": kinds,
        "dtype": rng.choice(np.array(["float16", "float32"], dtype=object), size=n_vars),
        "shape": np.array([f"{b // 2}" for b in v_bytes.tolist()], dtype=object),
        "bytes": np.where(remote, 0, v_bytes),
        "ipu": rng.integers(0, n_ipus, size=n_vars).astype(np.int16),
        "always_live": always,
        "live_start": np.where(always, -1, v_ls).astype(np.int32),
        "live_end": np.where(always, -1, v_le).astype(np.int32),
        "tile_start": (rng.random(n_vars) * (tiles - v_tiles + 1)).astype(np.int32),
        "tile_count": v_tiles,
        "interleaved": rng.random(n_vars) < 0.1,
        "remote": remote,
        "remote_bytes": np.where(remote, v_bytes, 0),
        "op": rng.integers(0, n_ops, size=n_vars).astype(np.int32),
    }

    # ---- vertex types and compute sets --------------------------------------------------------
    nv = len(VERTEX_TYPES)
    cs_rows = np.flatnonzero(ptype == C("program_type", "OnTileExecute"))
    cs_vt = rng.integers(0, nv, size=cs_rows.size).astype(np.int32)
    cs_vertices = nodes["_tile_count"][cs_rows] * rng.integers(1, 13, size=cs_rows.size)
    vertex_types = {
        "name": np.array(VERTEX_TYPES, dtype=object),
        "code_bytes": rng.integers(200, 4 * KIB, size=nv),
        "state_bytes": rng.integers(8, 96, size=nv),
        "instances": np.bincount(cs_vt, weights=cs_vertices, minlength=nv).astype(np.int64),
    }
    compute_sets = {
        "name": np.array([f"cs/{r}" for r in cs_rows.tolist()], dtype=object),
        "op": op_col[cs_rows],
        "program": cs_rows.astype(np.int32),
        "vertex_type": cs_vt,
        "vertices": cs_vertices.astype(np.int64),
        "ipu": nodes["ipu"][cs_rows],
        "tile_start": nodes["_tile_start"][cs_rows].astype(np.int32),
        "tile_count": nodes["_tile_count"][cs_rows].astype(np.int32),
    }

    return operations, lsteps, variables, vertex_types, compute_sets, L


def _memory_and_liveness(
    rng: np.random.Generator, n_ipus: int, tiles: int, L: int, oom: bool
) -> tuple[dict, dict]:
    """Memory per tile by category, region and liveness class, and the liveness curves."""
    # ---- memory and liveness ------------------------------------------------------------------
    NI, T = n_ipus, tiles
    cats = schema.MEMORY_CATEGORIES
    lo_hi = {
        "vertexCode": (16, 40),
        "vertexInstanceState": (4, 14),
        "vertexFieldData": (2, 8),
        "vectorListDescriptor": (0.5, 2),
        "copyDescriptor": (0.2, 1),
        "controlCode": (8, 20),
        "controlId": (0.1, 0.3),
        "controlTable": (1, 4),
        "internalExchangeCode": (8, 30),
        "hostExchangeCode": (1, 4),
        "globalExchangeCode": (0, 4 if NI > 1 else 0),
        "hostExchangePacketHeader": (0.1, 0.5),
        "globalExchangePacketHeader": (0, 0.3 if NI > 1 else 0),
        "instrumentationResults": (0, 0),
        "stack": (7, 7),
        "constant": (0.5, 2),
        "variable": (90, 200),
    }
    by_cat = np.zeros((NI, T, len(cats)), dtype=np.int64)
    for k, name in enumerate(cats):
        lo, hi = lo_hi[name]
        by_cat[:, :, k] = (KIB * (lo + (hi - lo) * rng.random((NI, T)))).astype(np.int64)
    # liveness curve: rises through the forward pass, peaks, falls through the backward pass
    s = np.arange(L)
    curve = np.interp(s, [0, 0.55 * (L - 1), L - 1], [0.08, 1.0, 0.12])
    peak_nal = (KIB * rng.uniform(60, 180, size=(NI, T))).astype(np.int64)
    if oom:
        hot = slice(T // 5, T // 5 + max(1, T // 10))  # a band of tiles on IPU 0
        peak_nal[0, hot] += 520 * KIB
    noise = rng.uniform(0.85, 1.0, size=(NI, L, T)).astype(np.float32)
    per_tile = np.rint(peak_nal[:, None, :] * curve[None, :, None] * noise).astype(np.int32)
    nal = per_tile.max(axis=1).astype(np.int64)
    vcat = cats.index("variable")
    by_cat[:, :, vcat] += nal
    total = by_cat.sum(axis=2)
    always_tile = total - nal
    code_idx = [cats.index(c) for c in cats if c.endswith("Code")]
    non_inter = by_cat[:, :, code_idx].sum(axis=2)
    gaps = (KIB * rng.uniform(0, 16, size=(NI, T))).astype(np.int64)
    overflow = np.maximum(0, total - SRAM_PER_TILE)
    overflow = np.minimum(overflow, total - non_inter)
    inter = total - non_inter - overflow
    by_region = np.stack([inter, non_inter, overflow], axis=2)
    by_liveness = np.stack([always_tile, nal], axis=2)
    if not oom:
        assert (total + gaps <= SRAM_PER_TILE).all(), "synthetic memory must fit when oom=False"
    oom_tiles = np.argwhere(total + gaps > SRAM_PER_TILE).astype(np.int32).reshape(-1, 2)
    phys = np.arange(T)
    physical = ((phys % 2) * (T // 2) + phys // 2).astype(np.int32)
    cols = 92 if T % 92 == 0 else max(1, int(np.sqrt(T)))
    tile_xy = np.stack([physical % cols, physical // cols], axis=1).astype(np.int16)
    not_always = per_tile.sum(axis=2, dtype=np.int64)
    memory = {
        "by_category": by_cat,
        "by_region": by_region,
        "by_liveness": by_liveness,
        "total": total,
        "gaps": gaps,
        "physical_tile": physical,
        "tile_xy": tile_xy,
        "oom_tiles": oom_tiles,
    }
    changes = tile_changes(per_tile)
    liveness = {
        "not_always_live": not_always,
        "per_tile_ipu_offsets": changes.ipu_offsets,
        "per_tile_step": changes.step,
        "per_tile_rows": changes.rows,
        "always_live": always_tile.sum(axis=1),
        "peak_step": not_always.argmax(axis=1).astype(np.int32),
    }

    return memory, liveness


def _meta(shape: _Shape) -> dict:
    """/meta of a synthetic profile: its run options, target and totals."""
    n_ipus, tiles = shape.n_ipus, shape.tiles
    # options by engine.config.RunConfig's field names (the rest read as their defaults); the
    # model is no zoo model, so the options say what the synthetic data stands for
    run_config = {
        "name": f"synthetic profile (seed {shape.seed})",
        "model": "synthetic",
        "target": "mk2",
        "num_ipus": n_ipus,
        "micro_batch_size": shape.micro_batch,
        "gradient_accumulation": shape.grad_accum,
        "device_iterations": shape.device_iterations,
        "replication_factor": 1,
        "precision": "16.16",
        "strategy": "pipelined" if n_ipus > 1 else "single",
    }
    target = {
        "name": "Mk2 GC200",
        "tiles_per_ipu": tiles,
        "sram_per_tile": SRAM_PER_TILE,
        "clock_hz": CLOCK_HZ,
        "exchange_bytes_per_cycle": EXCHANGE_BYTES_PER_CYCLE,
        "sync_cycles": SYNC_CYCLES,
    }
    meta = {
        "run_config": run_config,
        "run_config_version": schema.RUN_CONFIG_VERSION,
        "target": target,
        "model": "synthetic",
        "status": "oom" if shape.oom else "ok",
        "num_ipus": n_ipus,
        "replicas": 1,
        "tiles_per_ipu": tiles,
        "sram_per_tile": SRAM_PER_TILE,
        "clock_hz": CLOCK_HZ,
        "samples_per_step": shape.samples_per_step,
        "notes": ["synthetic profile (profiles.synthetic), not an engine run"],
    }
    return meta


#: Rows generated per random block; the random stream depends only on (seed, IPU, block), so
#: the same profile comes out whatever chunk size it is written with.
GEN_BLOCK = 16384


def _step_chunks(plan: _Plan, n_steps: int, chunk_rows: int) -> Iterator[dict[str, np.ndarray]]:
    """Executed steps in chunks of about ``chunk_rows`` rows (never mixing IPUs)."""
    buf: list[dict[str, np.ndarray]] = []
    rows = 0
    last_ipu = None
    for block in _step_blocks(plan, n_steps):
        ipu = int(block["ipu"][0])
        if buf and (rows + block["ipu"].size > chunk_rows or ipu != last_ipu):
            yield {k: np.concatenate([b[k] for b in buf]) for k in buf[0]}
            buf, rows = [], 0
        if block["ipu"].size > chunk_rows:  # split a block larger than a chunk
            for a in range(0, block["ipu"].size, chunk_rows):
                yield {k: v[a : a + chunk_rows] for k, v in block.items()}
            last_ipu = ipu
            continue
        buf.append(block)
        rows += block["ipu"].size
        last_ipu = ipu
    if buf:
        yield {k: np.concatenate([b[k] for b in buf]) for k in buf[0]}


def _step_blocks(plan: _Plan, n_steps: int) -> Iterator[dict[str, np.ndarray]]:
    """Executed steps, IPU by IPU, in blocks; start cycles carry over between blocks."""
    chunk_rows = GEN_BLOCK
    n_ipus = len(plan.leaves_by_ipu)
    per_ipu = np.full(n_ipus, n_steps // n_ipus)
    per_ipu[: n_steps % n_ipus] += 1
    S, G = n_ipus, plan.shape.grad_accum
    host_wait = C("program_type", "StreamCopyBegin")
    scm = C("program_type", "StreamCopyMid")
    gex = C("program_type", "GlobalExchange")
    exch = C("program_type", "DoExchange")
    for i in range(n_ipus):
        leaves = plan.leaves_by_ipu[i]
        nl = leaves.size
        clock = 0
        for r0 in range(0, int(per_ipu[i]), chunk_rows):
            r1 = min(int(per_ipu[i]), r0 + chunk_rows)
            rng = np.random.default_rng([plan.shape.seed, i, r0])
            k = np.arange(r0, r1)
            pos = k % nl
            prog = leaves[pos]
            typ = plan.prog_type[prog]
            cyc = plan.prog_cycles[prog].copy()
            waits = typ == host_wait
            cyc[waits] = rng.integers(50, 40_000, size=int(waits.sum()))
            gaps = rng.integers(0, 4, size=k.size)  # a few idle cycles between steps
            ends = clock + np.cumsum(cyc + gaps)
            start = ends - cyc
            clock = int(ends[-1])
            frac = pos / max(1, nl - 1)
            ramp = (S - 1) / (G + S - 1)
            phase = np.select(
                [frac >= 0.93, frac < ramp * 0.93, frac >= 0.93 - ramp * 0.93],
                [C("phase", "weightUpdate"), C("phase", "rampUp"), C("phase", "rampDown")],
                C("phase", "main"),
            ).astype(np.uint8)
            phase[waits] = C("phase", "host")
            is_mid = typ == scm
            remote = is_mid & (frac >= 0.9)
            nbytes = plan.prog_bytes[prog]
            bytes_in = np.where(is_mid | (typ == gex) | (typ == exch), nbytes, 0)
            bytes_out = np.where(remote | (typ == gex) | (typ == exch), nbytes, 0)
            dest = np.zeros(k.size, dtype=np.uint8)
            dest[is_mid] = C("destination", "host")
            dest[remote] = C("destination", "remoteBuffer")
            dest[typ == gex] = C("destination", "ipu")
            dest[typ == exch] = C("destination", "tile")
            yield {
                "program": prog.astype(np.int32),
                "ipu": np.full(k.size, i, dtype=np.int16),
                "start": start.astype(np.int64),
                "cycles": cyc.astype(np.int64),
                "type": typ.astype(np.uint8),
                "micro_batch": np.minimum(G - 1, (frac * G).astype(np.int32)).astype(np.int32),
                "stage": np.full(k.size, i, dtype=np.int16),
                "phase": phase,
                "iteration": (k // nl).astype(np.int32),
                "bytes_in": bytes_in.astype(np.int64),
                "bytes_out": bytes_out.astype(np.int64),
                "dest": dest,
            }


class _Totals:
    def __init__(self, n_ipus: int) -> None:
        self.end = np.zeros(n_ipus, dtype=np.int64)
        self.busy = np.zeros(n_ipus, dtype=np.int64)
        self.iters = 0
        self.run_starts: dict[int, int] = {}

    def add(self, chunk: dict[str, np.ndarray]) -> None:
        i = int(chunk["ipu"][0])
        ends = chunk["start"] + chunk["cycles"]
        self.end[i] = max(self.end[i], int(ends.max()))
        waits = chunk["type"] == C("program_type", "StreamCopyBegin")
        self.busy[i] += int(chunk["cycles"][~waits].sum())
        it = chunk["iteration"]
        self.iters = max(self.iters, int(it.max()) + 1)
        if i == 0:
            first = np.flatnonzero(np.r_[True, it[1:] != it[:-1]])
            for f in first:
                self.run_starts.setdefault(int(it[f]), int(chunk["start"][f]))

    def execution(self, shape: _Shape) -> dict[str, object]:
        total = int(self.end.max()) if self.end.size else 0
        calls = max(1, self.iters)
        samples = calls * shape.samples_per_step
        host_seconds = calls * 20e-6  # about 20 us per host round trip not hidden
        seconds = total / CLOCK_HZ + host_seconds
        starts = np.array([self.run_starts[k] for k in sorted(self.run_starts)], dtype=np.int64)
        return {
            "run_starts": starts,
            "total_cycles": total,
            "device_cycles": int(self.busy.max()) if self.busy.size else 0,
            "host_seconds": host_seconds,
            "samples": samples,
            "cycles_per_sample": total / samples if samples else 0.0,
            "throughput": samples / seconds if seconds else 0.0,
        }


def make_synthetic_profile(
    n_steps: int = 20_000,
    n_ipus: int = 2,
    tiles: int = 1472,
    n_programs: int = 400,
    seed: int = 0,
    oom: bool = False,
    *,
    liveness_steps: int = 256,
    grad_accum: int = 8,
    device_iterations: int = 1,
    micro_batch: int = 16,
) -> dict[str, dict[str, object]]:
    """A schema-valid profile ``data`` dict (see the module docstring for what holds exactly).

    ``oom=True`` yields an out-of-memory compile: some tiles of IPU 0 exceed their SRAM, status
    ``"oom"``, and no ``/execution``.
    """
    shape = _Shape(
        n_ipus=n_ipus,
        tiles=tiles,
        n_programs=n_programs,
        seed=seed,
        oom=oom,
        liveness_steps=liveness_steps,
        grad_accum=grad_accum,
        device_iterations=device_iterations,
        micro_batch=micro_batch,
    )
    plan = _plan(shape)
    data = plan.data
    if oom:
        return data
    totals = _Totals(n_ipus)
    chunks = []
    for chunk in _step_chunks(plan, n_steps, max(1, n_steps)):
        totals.add(chunk)
        chunks.append(chunk)
    data["/execution/steps"] = {
        k: np.concatenate([c[k] for c in chunks]) if chunks else np.zeros(0, dtype=f.dtype)
        for f in schema.group("/execution/steps").columns
        for k in [f.name]
    }
    ex = totals.execution(shape)
    counts = np.bincount(data["/execution/steps"]["ipu"], minlength=n_ipus)  # type: ignore[arg-type]
    ex["ipu_offsets"] = np.r_[0, np.cumsum(counts)].astype(np.int64)
    data["/execution"] = ex
    return data


def write_synthetic_profile(
    path: str | os.PathLike[str],
    n_steps: int = 1_000_000,
    n_ipus: int = 4,
    tiles: int = 1472,
    n_programs: int = 5000,
    seed: int = 0,
    oom: bool = False,
    *,
    overwrite: bool = True,
    chunk_rows: int = 262_144,
    liveness_steps: int = 256,
    grad_accum: int = 8,
    device_iterations: int = 1,
    micro_batch: int = 16,
) -> Path:
    """Write a synthetic profile, generating and appending the steps chunk by chunk."""
    shape = _Shape(
        n_ipus=n_ipus,
        tiles=tiles,
        n_programs=n_programs,
        seed=seed,
        oom=oom,
        liveness_steps=liveness_steps,
        grad_accum=grad_accum,
        device_iterations=device_iterations,
        micro_batch=micro_batch,
    )
    plan = _plan(shape)
    with ProfileWriter(path, overwrite=overwrite) as w:
        for gp, fields in plan.data.items():
            w.write_group(gp, fields)
        plan.data.clear()
        if not oom:
            totals = _Totals(n_ipus)
            for chunk in _step_chunks(plan, n_steps, chunk_rows):
                totals.add(chunk)
                w.append_steps(chunk)
            w.write_group("/execution", totals.execution(shape))
    return Path(path).expanduser()


__all__ = ["make_synthetic_profile", "write_synthetic_profile"]
