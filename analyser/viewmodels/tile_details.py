"""Per-tile details the GUI's Memory Report needs that the analysis core does not provide: tile
order and floor plan, and what lives / runs on a set of selected tiles. No Qt.

Written against :class:`analyser.core.Analysis` and the profile
reader. Everything is vectorised over variables / compute sets / programs (no loops over tiles).
Variables and compute sets occupy contiguous tile intervals (``tile_start``, ``tile_count``) with
bytes spread evenly and the remainder on the first tiles, as the profile schema states.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from analyser.core.quantities import STEP_TYPES, step_type_code

_EXCHANGE_TYPES = tuple(
    step_type_code(n)
    for n in ("DoExchange", "GlobalExchange", "StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd")
)
_OTE = step_type_code("OnTileExecute")


def tile_order(analysis: Any, physical: bool) -> np.ndarray:
    """Software tile ids in display order: by software id, or by physical tile id."""
    tiles = int(analysis.target.tiles_per_ipu)
    if not physical or not analysis.src.has("/memory/physical_tile"):
        return np.arange(tiles, dtype=np.int64)
    phys = analysis.src.array("/memory/physical_tile").astype(np.int64)
    return np.argsort(phys, kind="stable")


def tile_xy(analysis: Any) -> np.ndarray:
    """[tiles, 2] (column, row) of each software tile on the chip floor plan."""
    return analysis.src.array("/memory/tile_xy").astype(np.int64)


def floor_plan(analysis: Any, values: np.ndarray) -> np.ndarray:
    """Scatter per-tile ``values`` ([tiles]) onto the floor plan: [columns, rows] float array with
    NaN where there is no tile (an ImageItem-ready heat map, x = column, y = row)."""
    xy = tile_xy(analysis)
    grid = np.full((int(xy[:, 0].max()) + 1, int(xy[:, 1].max()) + 1), np.nan)
    grid[xy[:, 0], xy[:, 1]] = values
    return grid


def _bytes_on_tiles(
    start: np.ndarray, count: np.ndarray, total: np.ndarray, tiles: np.ndarray
) -> np.ndarray:
    """[n, len(tiles)] bytes each interval item places on each of ``tiles`` (even spread,
    remainder on the first tiles)."""
    t = tiles[None, :]
    s = start[:, None]
    c = np.maximum(count, 1)[:, None]
    inside = (t >= s) & (t < s + count[:, None])
    base = total[:, None] // c
    rem = total[:, None] % c
    return np.where(inside, base + ((t - s) < rem), 0)


def _spread_on_tiles(
    frame: pd.DataFrame, column: str, tiles: np.ndarray
) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows of ``frame`` (tile intervals ``tile_start`` / ``tile_count``) that hold any of
    ``tiles`` (sorted, non-empty), and [rows, len(tiles)] of their ``column`` spread evenly over
    each row's tiles (``_bytes_on_tiles``)."""
    start = frame["tile_start"].to_numpy().astype(np.int64)
    count = frame["tile_count"].to_numpy().astype(np.int64)
    # Intervals that touch the selection at all (cheap pre-filter before the dense matrix).
    first = np.searchsorted(tiles, start, side="left")
    touches = (first < tiles.size) & (tiles[np.minimum(first, tiles.size - 1)] < start + count)
    frame = frame[touches]
    amounts = frame[column].to_numpy().astype(np.int64)
    return frame, _bytes_on_tiles(start[touches], count[touches], amounts, tiles)


def tile_variables(analysis: Any, ipu: int, tiles: np.ndarray) -> pd.DataFrame:
    """Variables with bytes on any of ``tiles`` of ``ipu``: name, kind, dtype, shape, always_live,
    live_start, live_end, bytes (total), ``bytes_on_selection`` and one ``tile N`` column per
    selected tile (first 32), largest first. A profile without the variables' lifetimes lists
    them without those two columns."""
    tiles = np.unique(np.asarray(tiles, dtype=np.int64))
    df = analysis.listed_variables
    df = df[(df["ipu"].to_numpy() == ipu) & (df["bytes"].to_numpy() > 0)]
    if df.empty or tiles.size == 0:
        return df.assign(bytes_on_selection=np.zeros(len(df), np.int64)).iloc[0:0]
    df, on = _spread_on_tiles(df, "bytes", tiles)
    shown = ["name", "kind", "dtype", "shape", "bytes", "always_live", "live_start", "live_end"]
    out = df[[c for c in shown if c in df]].copy()
    out["bytes_on_selection"] = on.sum(axis=1)
    for j, t in enumerate(tiles[:32]):
        out[f"tile {int(t)}"] = on[:, j]
    return out.sort_values("bytes_on_selection", ascending=False)


def tile_compute_sets(analysis: Any, ipu: int, tiles: np.ndarray) -> pd.DataFrame:
    """Compute sets running on any of ``tiles``: name, operation, vertex type, vertices on the
    selection (spread evenly over the compute set's tiles) and cycles on the selected tiles
    (max over them, one execution, from /programs/tile_cycles)."""
    tiles = np.unique(np.asarray(tiles, dtype=np.int64))
    src = analysis.src
    if not src.has("/graph/compute_sets") or tiles.size == 0:
        return pd.DataFrame(
            columns=[
                "name",
                "operation",
                "vertex_type",
                "vertices_on_selection",
                "cycles_on_selection",
            ]
        )
    cs = src.table("/graph/compute_sets")
    cs = cs[cs["ipu"].to_numpy() == ipu]
    cs, on = _spread_on_tiles(cs, "vertices", tiles)
    verts = on.sum(axis=1)
    ops = src.column("/graph/operations", "name") if src.has("/graph/operations") else np.array([])
    vts = (
        src.column("/graph/vertex_types", "name")
        if src.has("/graph/vertex_types")
        else np.array([])
    )
    op_idx = cs["op"].to_numpy().astype(np.int64)
    vt_idx = cs["vertex_type"].to_numpy().astype(np.int64)
    prog = cs["program"].to_numpy().astype(np.int64)
    cycles = np.zeros(len(cs), np.int64)
    valid = prog >= 0
    if valid.any():
        tc = src.profile.tile_cycles(prog[valid])
        cycles[valid] = tc[:, tiles].max(axis=1)
    out = pd.DataFrame(
        {
            "name": cs["name"].to_numpy(),
            "operation": np.where(
                op_idx >= 0, ops[np.clip(op_idx, 0, max(len(ops) - 1, 0))] if len(ops) else "", ""
            ),
            "vertex_type": np.where(
                vt_idx >= 0, vts[np.clip(vt_idx, 0, max(len(vts) - 1, 0))] if len(vts) else "", ""
            ),
            "vertices_on_selection": verts,
            "cycles_on_selection": cycles,
            "program": prog,
        },
        index=cs.index,
    )
    return out.sort_values("cycles_on_selection", ascending=False)


def tile_vertices(analysis: Any, ipu: int, tiles: np.ndarray) -> pd.DataFrame:
    """Vertex types on the selected tiles: instances there, code bytes (per tile) and state
    bytes (instances x state per instance)."""
    cs = tile_compute_sets(analysis, ipu, tiles)
    cols = ["vertex_type", "instances_on_selection", "code_bytes", "state_bytes_on_selection"]
    if cs.empty or not analysis.src.has("/graph/vertex_types"):
        return pd.DataFrame(columns=cols)
    vt = analysis.src.table("/graph/vertex_types")
    g = cs.groupby("vertex_type", sort=False)["vertices_on_selection"].sum()
    info = vt.set_index("name")
    info = info[~info.index.duplicated()]
    out = pd.DataFrame({"vertex_type": g.index, "instances_on_selection": g.to_numpy()})
    out["code_bytes"] = (
        info["code_bytes"].reindex(out["vertex_type"]).fillna(0).astype(np.int64).to_numpy()
    )
    state = info["state_bytes"].reindex(out["vertex_type"]).fillna(0).astype(np.int64).to_numpy()
    out["state_bytes_on_selection"] = state * out["instances_on_selection"].to_numpy()
    return out.sort_values("state_bytes_on_selection", ascending=False).reset_index(drop=True)


def tile_exchanges(analysis: Any, ipu: int, tiles: np.ndarray, limit: int = 2000) -> pd.DataFrame:
    """Exchange and stream-copy programs of ``ipu`` that take cycles on the selected tiles:
    name, type, bytes (one execution, whole program), cycles on the selection (max)."""
    tiles = np.unique(np.asarray(tiles, dtype=np.int64))
    src = analysis.src
    nodes = src.table("/programs/nodes", ["name", "type", "ipu", "bytes", "cycles"])
    types = nodes["type"].to_numpy().astype(np.int64)
    mask = np.isin(types, _EXCHANGE_TYPES) & np.isin(nodes["ipu"].to_numpy(), (ipu, -1))
    ids = np.flatnonzero(mask)
    if ids.size == 0 or tiles.size == 0:
        return pd.DataFrame(columns=["name", "type", "bytes", "cycles_on_selection"])
    cycles = src.profile.tile_cycles(ids)[:, tiles].max(axis=1)
    keep = cycles > 0
    ids, cycles = ids[keep], cycles[keep]
    out = pd.DataFrame(
        {
            "name": nodes["name"].to_numpy()[ids],
            "type": [STEP_TYPES[t] for t in types[ids]],
            "bytes": nodes["bytes"].to_numpy()[ids],
            "cycles_on_selection": cycles,
            "program": ids,
        }
    )
    return (
        out.sort_values("cycles_on_selection", ascending=False).head(limit).reset_index(drop=True)
    )


def tile_memory_rows(
    analysis: Any, ipu: int, tiles: np.ndarray, by: str = "category"
) -> pd.DataFrame:
    """One row per selected tile: total, gaps and bytes per ``by`` class (for comparing tiles)."""
    tiles = np.unique(np.asarray(tiles, dtype=np.int64))
    mem = analysis.memory
    values, names = analysis.tile_breakdown(ipu, by)
    out = pd.DataFrame({"tile": tiles})
    out["total"] = mem.tile_total[ipu, tiles]
    out["gaps"] = mem.tile_gaps[ipu, tiles]
    out["share_of_sram"] = (out["total"] + out["gaps"]) / float(mem.sram_per_tile)
    for j, name in enumerate(names):
        out[name] = values[tiles, j]
    return out
