"""The BSP view's numbers (no Qt): for one IPU, the share of each tile's time spent in each BSP
state (compute, exchange, sync, idle) in each time bucket, at any zoom level from a few cycles
to the whole run.

A step is one superstep phase on every tile of its IPU (IPU Programmer's Guide, "Bulk synchronous parallel execution"): during an
``OnTileExecute`` step a tile computes for its program's per-tile cycles
(``/programs/tile_cycles``) from the step's start and then idles until the step ends (it waits
for the slowest tile and the next sync); an exchange step (``DoExchange``, ``GlobalExchange``,
``StreamCopy*``) is the same with exchange instead of compute; during a ``Sync`` / ``SyncAns``
step every tile is in the sync for the whole step (arrived and waiting for the others or the
host), whatever the program's few cycles of sync instruction; time covered by no step is idle.

Aggregation (per tile, or per group of tiles, x time bucket), vectorised, bounded by the pixels
and never by the steps:

* steps that lie inside one bucket add their whole per-tile cycles to it: a (bucket x program)
  count matrix times the programs' per-tile cycles (one matrix product per state), the tiles
  grouped to the plot's pixel rows first (the shares are linear, so the mean over a group of
  tiles is the group's share);
* the steps that cross a bucket edge (at most one per edge, as an IPU's steps follow one another)
  are cut exactly per tile: a tile's busy interval ``[start, start + its cycles)`` against each
  bucket, so a zoomed-in view shows every tile finishing at its own time (the BSP staircase);
* idle = the bucket's cycles minus the three busy states.

The colour of a cell is that of the state with the largest share of its cycles, paler (mixed
with the background) the smaller that share (:func:`dominant`): a cell wholly in one state has
exactly that state's colour, and a mixed cell keeps the hue of what dominates it. Blending the
four colours by share (:func:`blend`, kept for callers that want the mean colour) made the
whole run of a real profile a grey wash: compute blue mixed with exchange orange is grey, next
to the sync grey, while compute was 59% of the tiles' time. The minority states of a cell are
in its hover text and the view's header (the shares over the whole view).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from profiles import schema

#: BSP states in drawing / legend order.
BSP_STATES: tuple[str, ...] = ("compute", "exchange", "sync", "idle")
COMPUTE, EXCHANGE, SYNC, IDLE = range(4)

#: State of each program type (index = ``profiles.schema.PROGRAM_TYPES`` code); -1 for the
#: control programs, which never run as steps.
_STATE_BY_TYPE = {
    "OnTileExecute": COMPUTE,
    "DoExchange": EXCHANGE,
    "GlobalExchange": EXCHANGE,
    "StreamCopyBegin": EXCHANGE,
    "StreamCopyMid": EXCHANGE,
    "StreamCopyEnd": EXCHANGE,
    "Sync": SYNC,
    "SyncAns": SYNC,
}
STATE_OF_TYPE = np.array([_STATE_BY_TYPE.get(t, -1) for t in schema.PROGRAM_TYPES], np.int8)

#: Step types drawn in each state (for the legend and the docs).
TYPES_OF_STATE: dict[str, tuple[str, ...]] = {
    s: tuple(t for t, v in _STATE_BY_TYPE.items() if v == i) for i, s in enumerate(BSP_STATES)
}


@dataclass
class BspStates:
    """Shares of each BSP state per time bucket and tile row: ``shares[bucket, row, state]``
    (float32, each cell summing to 1)."""

    ipu: int
    t0: float
    t1: float
    #: Bucket edges in cycles (len = buckets + 1).
    edges: np.ndarray
    #: First tile of each row, and the end of the last row (len = rows + 1): a row is the mean
    #: of tiles ``[tile_edges[r], tile_edges[r + 1])``.
    tile_edges: np.ndarray
    shares: np.ndarray
    #: Steps overlapping the window.
    n_steps: int

    @property
    def buckets(self) -> int:
        return self.shares.shape[0]

    @property
    def rows(self) -> int:
        return self.shares.shape[1]

    def mean_shares(self) -> dict[str, float]:
        """Share of each state over the whole window and the rows shown (tile-weighted)."""
        w = np.diff(self.tile_edges).astype(np.float64)
        if not self.shares.size or not w.sum():
            return {s: 0.0 for s in BSP_STATES}
        per = (self.shares.astype(np.float64) * w[None, :, None]).sum(axis=(0, 1))
        per /= self.buckets * w.sum()
        return {s: float(per[i]) for i, s in enumerate(BSP_STATES)}

    def cell(self, t: float, tile: float) -> tuple[int, int] | None:
        """(bucket, row) under cycle ``t`` and tile ``tile``, or None outside."""
        if not (self.t0 <= t < self.t1) or not self.rows:
            return None
        b = int(min(self.buckets - 1, (t - self.t0) / (self.t1 - self.t0) * self.buckets))
        r = int(np.searchsorted(self.tile_edges, tile, side="right")) - 1
        return (b, r) if 0 <= r < self.rows else None


def blend(shares: np.ndarray, colors: np.ndarray) -> np.ndarray:
    """RGB (uint8) of each cell: the state colours (``colors[state] = (r, g, b)``) weighted by
    the cell's shares. ``shares[..., state]`` -> ``rgb[..., 3]``."""
    rgb = shares.astype(np.float32) @ np.asarray(colors, np.float32)
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


#: Strength (0-1) of the dominant state's colour in a cell split evenly between the four
#: states; a cell wholly in one state has strength 1.
DOMINANT_FLOOR = 0.35


def dominant(shares: np.ndarray, colors: np.ndarray, background: np.ndarray) -> np.ndarray:
    """RGB (uint8) of each cell: the colour of its largest state (``colors[state] = (r, g, b)``)
    mixed with ``background`` by how far that state dominates, from :data:`DOMINANT_FLOOR` of
    the colour at an even split to all of it at a share of 1. ``shares[..., state]`` ->
    ``rgb[..., 3]``."""
    s = np.asarray(shares, np.float32)
    top = np.argmax(s, axis=-1)
    share = np.take_along_axis(s, top[..., None], axis=-1)
    even = 1.0 / s.shape[-1]
    strength = DOMINANT_FLOOR + (1.0 - DOMINANT_FLOOR) * np.clip(
        (share - even) / (1.0 - even), 0.0, 1.0
    )
    colors = np.asarray(colors, np.float32)
    rgb = colors[top] * strength + np.asarray(background, np.float32) * (1.0 - strength)
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


# per TraceWindow: the per-tile cycles of the programs read so far (float32, one row per
# program id, filled on first use) and which rows are filled
_TILE_CYCLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _tile_cycles(trace: Any, programs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-tile cycles (float32) of ``programs`` (sorted, unique) and each one's slowest tile,
    read from the profile once per program."""
    n_tiles = int(getattr(trace.profile, "tiles_per_ipu", 0) or 1)
    n_prog = len(trace.programs)
    cache = _TILE_CYCLES.get(trace)
    if cache is None:
        # np.zeros maps pages lazily: rows never read cost no memory
        cache = (np.zeros((n_prog, n_tiles), np.float32), np.zeros(n_prog, bool))
        _TILE_CYCLES[trace] = cache
    dense, have = cache
    missing = programs[~have[programs]]
    if len(missing):
        dense[missing] = np.asarray(trace.access.tile_cycles(missing), np.float32)
        have[missing] = True
    tc = dense[programs]
    return tc, tc.max(axis=1, initial=0.0)


def _group_tiles(x: np.ndarray, tile_edges: np.ndarray, tile0: int) -> np.ndarray:
    """Mean over each row's tiles along the last axis (``x[..., tiles in range]``)."""
    starts = tile_edges[:-1] - tile0
    sums = np.add.reduceat(x, starts, axis=-1)
    return sums / np.diff(tile_edges).astype(np.float32)


def bsp_states(
    trace: Any,
    ipu: int,
    t0: float,
    t1: float,
    buckets: int = 512,
    tiles: tuple[int, int] | None = None,
    rows: int | None = None,
) -> BspStates:
    """The state shares of IPU ``ipu`` over ``[t0, t1)`` in ``buckets`` time buckets, for the
    tiles ``tiles = (first, end)`` (all by default) in at most ``rows`` rows (one per tile when
    ``rows`` is None or at least the tile count). ``trace`` is a
    :class:`analyser.trace.window.TraceWindow`."""
    buckets = max(1, int(buckets))
    t0, t1 = float(t0), float(max(t1, t0 + 1e-9))
    n_tiles = int(getattr(trace.profile, "tiles_per_ipu", 0) or 0)
    a, b = (0, n_tiles) if tiles is None else (max(0, tiles[0]), min(n_tiles, tiles[1]))
    b = max(b, a + 1)
    span = b - a
    n_rows = span if rows is None else max(1, min(span, int(rows)))
    tile_edges = a + np.round(np.linspace(0, span, n_rows + 1)).astype(np.int64)
    edges = np.linspace(t0, t1, buckets + 1)
    bw = (t1 - t0) / buckets

    lo, hi = trace.row_range(ipu, t0, t1)
    d = trace.access.read_cached(lo, hi, ("program", "start", "cycles"))
    s = d["start"].astype(np.float64)
    dur = d["cycles"].astype(np.float64)
    e = s + dur
    prog = d["program"].astype(np.int64)
    ptype = trace.programs["type"]
    state = STATE_OF_TYPE[ptype[prog]] if len(prog) else np.zeros(0, np.int8)
    keep = (e > t0) & (s < t1) & (dur > 0) & (state >= 0)
    s, e, dur, prog, state = s[keep], e[keep], dur[keep], prog[keep], state[keep]

    busy = np.zeros((3, buckets, n_rows), np.float32)  # compute, exchange, sync cycles
    b0 = np.clip(np.floor((s - t0) / bw), 0, buckets - 1).astype(np.int64)
    b1 = np.clip(np.ceil((e - t0) / bw) - 1, 0, buckets - 1).astype(np.int64)
    # the programs in view, numbered 0..U-1 without a sort of the steps
    present = np.zeros(len(ptype), bool)
    present[prog] = True
    uprog = np.flatnonzero(present)
    inv = (np.cumsum(present) - 1)[prog]
    tc_all, slowest = _tile_cycles(trace, uprog)
    tc = tc_all[:, a:b]
    # a step shorter than its program's slowest tile (not written by the engine, but a profile
    # may hold them) is cut per tile below, like the steps crossing a bucket edge
    inside = (b0 == b1) & (s >= t0) & (e <= t1) & (dur >= slowest[inv])

    # whole steps: (bucket x program) counts times the programs' per-tile cycles, per state
    m = inside & (state != SYNC)
    if m.any():
        tc_rows = _group_tiles(tc, tile_edges, a)
        counts = np.bincount(b0[m] * len(uprog) + inv[m], minlength=buckets * len(uprog))
        counts = counts.reshape(buckets, len(uprog)).astype(np.float32)
        prog_state = STATE_OF_TYPE[ptype[uprog]]
        for st in (COMPUTE, EXCHANGE):
            cols = np.flatnonzero((prog_state == st) & counts.any(axis=0))
            if len(cols):
                busy[st] += counts[:, cols] @ tc_rows[cols]
    m = inside & (state == SYNC)
    if m.any():  # every tile is in the sync for the whole step
        sync = np.bincount(b0[m], weights=dur[m], minlength=buckets)
        busy[SYNC] += sync[:, None].astype(np.float32)

    # steps crossing bucket edges (at most about one per edge) and short steps: cut exactly,
    # per tile, in chunks (pairs of step and bucket x tiles stay small)
    rest = np.flatnonzero(~inside)
    for cross in np.array_split(rest, max(1, len(rest) // 2048)):
        if not len(cross):
            continue
        nspan = b1[cross] - b0[cross] + 1
        step = np.repeat(cross, nspan)
        first = np.repeat(np.cumsum(nspan) - nspan, nspan)
        bk = np.repeat(b0[cross], nspan) + (np.arange(len(step)) - first)
        # a tile is busy over [start, start + its cycles): its overlap with the bucket
        # [lo, hi) is clip(cycles, lo - start, hi - start) - (lo - start), with the bucket's
        # bounds taken relative to the step's start and floored at 0
        lo_r = np.maximum(edges[bk] - s[step], 0).astype(np.float32)[:, None]
        hi_r = np.maximum(edges[bk + 1] - s[step], 0).astype(np.float32)[:, None]
        per_tile = np.minimum(tc[inv[step]], dur[step].astype(np.float32)[:, None])
        is_sync = state[step] == SYNC
        per_tile[is_sync] = dur[step][is_sync].astype(np.float32)[:, None]
        overlap = np.clip(per_tile, lo_r, np.maximum(hi_r, lo_r)) - lo_r
        grouped = _group_tiles(overlap, tile_edges, a)
        for st in (COMPUTE, EXCHANGE, SYNC):
            sel = state[step] == st
            if sel.any():
                np.add.at(busy[st], bk[sel], grouped[sel])

    shares = np.empty((buckets, n_rows, 4), np.float32)
    shares[..., :3] = np.moveaxis(busy, 0, -1) / np.float32(bw)
    total = shares[..., :3].sum(axis=-1)
    over = total > 1  # overlapping steps (or rounding): scale the busy states down to the bucket
    shares[over, :3] /= total[over][:, None]
    shares[..., IDLE] = np.clip(1 - np.minimum(total, 1), 0, 1)
    return BspStates(ipu, t0, t1, edges, tile_edges, shares, int(keep.sum()))


__all__ = ["BSP_STATES", "TYPES_OF_STATE", "BspStates", "blend", "bsp_states", "dominant"]
