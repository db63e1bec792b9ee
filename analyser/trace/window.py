"""Level-of-detail windowing of the execution trace (no Qt).

The Execution Trace view asks one question on every pan or zoom: *which rectangles do I draw for
IPU ``ipu`` between cycles ``t0`` and ``t1`` on a ``width_px`` pixels wide plot?*  The answer
(:meth:`TraceWindow.window`) is one set of rectangle arrays per step type, so the view draws each
type with one call, and its size is bounded by ``width_px x types x lanes``, never by the number of
steps:

* every lane (one per IPU in the flat view; one per pipeline stage, operation layer or program
  group in the grouped views) and step type is split into one-pixel buckets by start cycle;
  the steps of one bucket become a single min/max rectangle ``[min start, max end)`` that
  remembers how many steps it stands for (a step wider than a pixel is alone in its bucket, so it
  is drawn exactly);
* when zoomed in, only the rows of the visible window are read through the profile reader
  (rows of one IPU are sorted by start cycle, so a window is a contiguous row range);
* when zoomed out, the rows are not read at all: a per-IPU pyramid of pre-aggregated buckets
  (levels 4x apart, built once, streaming the steps in chunks) answers the query from the coarsest
  level whose bucket is no wider than a pixel.

The same module holds the cross-trace name search and the visible-range summary (cycles by step
type, tile balance, StreamCopy bytes by direction and destination), both reading step columns in
row chunks, and the BSP matrix (tiles x time buckets of per-tile cycles from
``/programs/tile_cycles``).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyser.trace import lod_cache
from profiles import schema
from profiles.errors import UserFacingError

STEP_TYPES: tuple[str, ...] = schema.PROGRAM_TYPES
#: The host timeline's lanes and event kinds (``/execution/host``), in the profile's code order.
HOST_LANES: tuple[str, ...] = schema.HOST_LANES
HOST_EVENTS: tuple[str, ...] = schema.HOST_EVENTS
DESTINATIONS: tuple[str, ...] = schema.DESTINATIONS
PHASES: tuple[str, ...] = schema.PHASES
NT = len(STEP_TYPES)

#: Step types in which an IPU waits (the overview's idle time).
_WAIT_TYPES = np.array([STEP_TYPES.index("Sync"), STEP_TYPES.index("SyncAns")])

#: Grouping modes of the trace: one lane per IPU, or lanes inside each IPU.
GROUP_MODES: tuple[str, ...] = ("flat", "stage", "operation", "program")

#: Rows read per chunk when streaming the step table (pyramid build, search, summary).
CHUNK_ROWS = 1 << 18
#: Pyramid levels are this factor apart in bucket width.
LEVEL_FACTOR = 4
#: Rows per block of the drawing cache, and blocks kept (about 40 MB at most).
CACHE_BLOCK_ROWS = 1 << 16
CACHE_BLOCKS = 96
#: Target mean number of steps per bucket at the finest pyramid level.
STEPS_PER_FINEST_BUCKET = 8
#: Most lanes a grouped view shows per IPU; smaller groups are merged into "other".
MAX_LANES = 48
#: Pyramids of IPUs with at least this many steps (about 0.15 s of CPU to build per 500,000
#: steps) are saved to the level-of-detail cache after they are built, and memory-mapped from it
#: when the same profile is opened again (see :func:`lod_cache_dir`).
LOD_CACHE_MIN_ROWS = 1 << 19
#: The coarse-first open (:meth:`TraceWindow.prepare` with ``coarse_first``) of an IPU with at
#: least :data:`LOD_CACHE_MIN_ROWS` steps builds only the pyramid levels of at most this many
#: buckets (the whole-run view of a screen up to 8,192 pixels wide, and the overview) before the
#: first paint, and the finer levels in a background thread.
COARSE_BUCKETS = 1 << 13
#: A zoom finer than the coarse levels, before the full pyramid is ready, reads the visible rows
#: directly when they are at most this many (else it waits for the full pyramid).
COARSE_ROWS_FALLBACK = 1 << 20
#: Profiles whose pyramids the cache keeps (least recently written dropped first).
LOD_CACHE_PROFILES = 8
_LEVEL_FIELDS = ("key", "x0", "x1", "count", "row", "bucket", "cummax_x1")

_COLUMNS_DRAW = ("start", "cycles", "type")


class TraceError(UserFacingError):
    """The trace cannot be shown (no execution in the profile, bad IPU or window)."""


# ---------------------------------------------------------------------------------------------
# Reader access
# ---------------------------------------------------------------------------------------------


class StepAccess:
    """The few reads the trace makes, over :func:`profiles.open_profile`'s ``Profile``.

    Rows are global row numbers of ``/execution/steps``; IPU ``i`` owns rows
    ``[ipu_offsets[i], ipu_offsets[i + 1])``, sorted by start cycle.
    """

    def __init__(self, profile: Any) -> None:
        self.profile = profile
        if not bool(getattr(profile, "has_execution", False)):
            raise TraceError(
                "This profile has no execution trace (the program did not fit or did not run)."
            )
        self.ipu_offsets = np.asarray(profile.array("/execution/ipu_offsets"), dtype=np.int64)
        self.n_ipus = len(self.ipu_offsets) - 1
        self._lock = threading.RLock()
        self._cache: dict[tuple[str, int], np.ndarray] = {}

    def ipu_rows(self, ipu: int) -> tuple[int, int]:
        if not 0 <= ipu < self.n_ipus:
            raise TraceError(f"IPU {ipu} does not exist; this profile has {self.n_ipus} IPUs.")
        return int(self.ipu_offsets[ipu]), int(self.ipu_offsets[ipu + 1])

    def read(self, lo: int, hi: int, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Columns of global rows ``[lo, hi)`` as numpy arrays."""
        with self._lock:
            return {
                c: np.asarray(self.profile.array(f"/execution/steps/{c}", slice(lo, hi)))
                for c in columns
            }

    def is_cached(self, column: str, row: int) -> bool:
        """True when the drawing cache holds the block of ``row`` of ``column``."""
        with self._lock:
            return (column, row // CACHE_BLOCK_ROWS) in self._cache

    def read_cached(self, lo: int, hi: int, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Like :meth:`read`, through an LRU cache of aligned row blocks (the rows a pan or
        zoom touches again are not decompressed again)."""
        if hi <= lo:
            return self.read(lo, lo, columns)
        b0, b1 = lo // CACHE_BLOCK_ROWS, (hi - 1) // CACHE_BLOCK_ROWS
        out: dict[str, list[np.ndarray]] = {c: [] for c in columns}
        for b in range(b0, b1 + 1):
            a = b * CACHE_BLOCK_ROWS
            for c in columns:
                key = (c, b)
                with self._lock:
                    block = self._cache.pop(key, None)
                    if block is None:
                        block = self.read(a, a + CACHE_BLOCK_ROWS, (c,))[c]
                    self._cache[key] = block  # most recently used last
                    while len(self._cache) > CACHE_BLOCKS:
                        self._cache.pop(next(iter(self._cache)))
                s0 = max(lo, a) - a
                s1 = min(hi, a + CACHE_BLOCK_ROWS) - a
                out[c].append(block[s0:s1])
        return {c: v[0] if len(v) == 1 else np.concatenate(v) for c, v in out.items()}

    def chunks(
        self, lo: int, hi: int, columns: tuple[str, ...], chunk: int = CHUNK_ROWS
    ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        for a in range(lo, hi, chunk):
            yield a, self.read(a, min(hi, a + chunk), columns)

    def table(self, path: str, columns: list[str]) -> pd.DataFrame:
        with self._lock:
            return self.profile.table(path, columns=columns)

    def tile_cycles(self, program_ids: np.ndarray) -> np.ndarray:
        with self._lock:
            return np.asarray(self.profile.tile_cycles(np.asarray(program_ids, dtype=np.int64)))


def _index_or_none(value: int, what: str) -> int | str:
    """A micro-batch or stage index; the profile's -1 (a step outside any) said in words."""
    return value if value >= 0 else f"none (outside {what})"


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass
class TypeRects:
    """Rectangles of one step type, in data coordinates (x in cycles, y = lane index)."""

    type: str
    x0: np.ndarray  # float64 start cycle
    x1: np.ndarray  # float64 end cycle (widened to at least one pixel)
    lane: np.ndarray  # int32 lane index
    count: np.ndarray  # int64 steps the rectangle stands for
    row: np.ndarray  # int64 global row of the first step (the step itself when count == 1)
    #: with ``stripes``: the part of its lane's height the rectangle takes (fractions, bottom
    #: to top: its type's share of the pixel's busy cycles); None: the whole lane
    y0: np.ndarray | None = None
    y1: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.x0)


@dataclass
class WindowResult:
    ipu: int
    t0: float
    t1: float
    width_px: int
    group: str
    lanes: tuple[str, ...]
    rects: dict[str, TypeRects]
    #: "rows" when read from the step rows, "level k (bucket N cycles)" when from the pyramid.
    source: str
    #: Steps represented by the rectangles.
    n_steps: int = 0

    @property
    def n_rects(self) -> int:
        return sum(len(r) for r in self.rects.values())


@dataclass
class RangeSummary:
    """What the visible range holds (steps overlapping [t0, t1), cycles clipped to it)."""

    ipu: int
    t0: int
    t1: int
    n_steps: int
    cycles_by_type: dict[str, int]
    steps_by_type: dict[str, int]
    #: Cycle-weighted mean tile balance of the compute (OnTileExecute) steps, clipped cycles as
    #: weights (the analysis core's definition, over the window).
    tile_balance: float
    #: StreamCopy bytes: {"received": {dest: bytes}, "sent": {dest: bytes}}.
    streamcopy: dict[str, dict[str, int]]
    busy_cycles: int

    @property
    def span(self) -> int:
        return self.t1 - self.t0


@dataclass
class SearchResult:
    text: str
    #: Global rows of the matching steps (first ``limit``), in row order (IPU, then start).
    rows: np.ndarray
    ipu: np.ndarray
    start: np.ndarray
    cycles: np.ndarray
    program: np.ndarray
    total: int
    #: Names of the matching programs, by program id.
    names: dict[int, str] = field(default_factory=dict)


#: Groupings of the range statistics (Perfetto's area selection): by step (program) name, or by
#: the operation the step belongs to.
STATISTICS_BY: tuple[str, ...] = ("name", "operation")


@dataclass
class RangeStatistics:
    """Steps overlapping ``[t0, t1)`` on ``ipus``, aggregated by step name or by operation.

    ``table`` has one row per name (or operation), most cycles first, with the columns ``name``,
    ``type`` (the step type of its programs; "mixed" when they differ), ``steps`` (how many
    overlap the range), ``total_cycles``, ``mean_cycles`` and ``max_cycles`` (cycles clipped to
    the range) and ``share``: total cycles / (range cycles x IPUs), the part of the range's
    IPU time the row takes (steps of one IPU do not overlap, so the shares add up to the busy
    share of the range)."""

    t0: float
    t1: float
    ipus: tuple[int, ...]
    by: str
    table: pd.DataFrame
    n_steps: int
    busy_cycles: float

    @property
    def span(self) -> float:
        return self.t1 - self.t0


@dataclass
class Flows:
    """Arrows between IPUs (Perfetto's flows) of a window: ``kind[i]`` is "exchange" (a
    GlobalExchange sending to another IPU, to the exchange step receiving it, which starts while
    the send runs: from the send's start to the receive's end) or "sync" (an external sync:
    from the IPU that arrived last, at its arrival, to every other IPU's sync at the release).
    ``too_many`` when the window held more steps than a flow query reads (none computed)."""

    kind: np.ndarray  # object: "exchange" | "sync"
    src_ipu: np.ndarray
    src_row: np.ndarray
    x0: np.ndarray  # cycle at the source
    dst_ipu: np.ndarray
    dst_row: np.ndarray
    x1: np.ndarray  # cycle at the destination
    too_many: bool = False

    def __len__(self) -> int:
        return len(self.kind)


def _no_flows(too_many: bool = False) -> Flows:
    e = np.empty(0, dtype=np.int64)
    f = np.empty(0, dtype=np.float64)
    return Flows(np.empty(0, dtype=object), e, e, f, e, e, f, too_many)


@dataclass
class Overview:
    """Active share of each IPU in ``buckets`` equal time buckets of ``[t0, t1)``:
    ``busy[ipu, bucket]`` in 0..1, the share of the bucket's cycles in steps that compute or
    move data (every type but Sync / SyncAns, which wait), steps spread evenly over the cycles
    they cover."""

    t0: float
    t1: float
    busy: np.ndarray


# ---------------------------------------------------------------------------------------------
# Vectorised aggregation
# ---------------------------------------------------------------------------------------------


def _group_reduce(order_key: np.ndarray, x0, x1, count, row):
    """Reduce runs of equal ``order_key`` (which must already be sorted)."""
    if len(order_key) == 0:
        e = np.empty(0, dtype=np.int64)
        return e, np.empty(0), np.empty(0), e, e
    starts = np.flatnonzero(np.r_[True, order_key[1:] != order_key[:-1]])
    return (
        order_key[starts],
        np.minimum.reduceat(x0, starts),
        np.maximum.reduceat(x1, starts),
        np.add.reduceat(count, starts),
        np.minimum.reduceat(row, starts),
    )


def aggregate_pixels(
    key: np.ndarray,
    x0: np.ndarray,
    x1: np.ndarray,
    count: np.ndarray,
    row: np.ndarray,
    t0: float,
    t1: float,
    width_px: int,
):
    """Merge items of the same ``key`` (lane x type) whose start falls in the same pixel.

    Returns ``(key, x0, x1, count, row)`` with at most ``keys x (width_px + 2)`` items.
    """
    pw = (t1 - t0) / max(1, width_px)
    pix = np.clip(np.floor((x0 - t0) / pw), -1, width_px).astype(np.int64) + 1
    g = key.astype(np.int64) * (width_px + 3) + pix
    order = np.argsort(g, kind="stable")
    gk, a, b, c, r = _group_reduce(g[order], x0[order], x1[order], count[order], row[order])
    return gk // (width_px + 3), a, b, c, r


def _dominant(key, x0, x1, sums, row, t0: float, pw: float, width_px: int):
    """Keep, per lane and pixel, the narrow item of the type with the most busy cycles, and
    every item at least two pixels wide."""
    wide = (x1 - x0) >= 2 * pw
    lane = key // NT
    pix = np.clip(np.floor((x0 - t0) / pw), -1, width_px).astype(np.int64) + 1
    g = lane * (width_px + 3) + pix
    narrow = np.flatnonzero(~wide)
    order = narrow[np.lexsort((-sums[narrow, 1], g[narrow]))]
    first = order[np.r_[True, g[order][1:] != g[order][:-1]]] if len(order) else order
    keep = np.sort(np.concatenate([np.flatnonzero(wide), first]))
    x0, x1 = x0[keep].copy(), x1[keep].copy()
    # a narrow aggregate fills its pixel, so a busy lane reads as busy (no hairline gaps)
    snap = ~wide[keep]
    px0 = t0 + (pix[keep][snap] - 1) * pw
    x1[snap] = np.maximum(x1[snap], px0 + pw)
    x0[snap] = np.minimum(x0[snap], np.maximum(px0, x0[snap] - pw))
    return key[keep], x0, x1, sums[keep], row[keep]


def _stripes(key, x0, x1, sums, row, t0: float, pw: float, width_px: int):
    """Keep every item; per lane and pixel, stack the narrow items (aggregates of steps) across
    the lane by their share of the pixel's busy cycles, in step-type order, so a minority type
    keeps its part of every pixel (a zoomed-out run of 75% compute and 25% GlobalExchange
    shows both, not solid compute: issue 23 defect 6); items two pixels wide or more fill
    the lane. Returns the items and their ``y0`` / ``y1`` fractions of the lane."""
    wide = (x1 - x0) >= 2 * pw
    lane = key // NT
    typ = key % NT
    pix = np.clip(np.floor((x0 - t0) / pw), -1, width_px).astype(np.int64) + 1
    g = lane * (width_px + 3) + pix
    y0 = np.zeros(len(key))
    y1 = np.ones(len(key))
    narrow = np.flatnonzero(~wide)
    x0, x1 = x0.copy(), x1.copy()
    if len(narrow):
        order = narrow[np.lexsort((typ[narrow], g[narrow]))]
        # cycles, with a trace of the step count so a pixel of zero-cycle steps still splits
        w = sums[order, 1].astype(np.float64) + 1e-6 * sums[order, 0]
        gg = g[order]
        starts = np.r_[True, gg[1:] != gg[:-1]]
        gid = np.cumsum(starts) - 1
        total = np.bincount(gid, weights=w)
        cum = np.cumsum(w)
        before = cum - w - (cum - w)[starts][gid]
        safe = np.maximum(total[gid], 1e-12)
        y0[order] = before / safe
        y1[order] = (before + w) / safe
        # a narrow aggregate fills its pixel, so the stripes of one pixel line up
        px0 = t0 + (pix[narrow] - 1) * pw
        x0[narrow] = np.maximum(np.minimum(x0[narrow], px0), px0 - pw)
        x1[narrow] = np.maximum(x1[narrow], px0 + pw)
    return key, x0, x1, sums, row, y0, y1


def _spread(x0, x1, cycles, t0: float, bw: float, buckets: int) -> np.ndarray:
    """Cycles per bucket of ``buckets`` buckets ``bw`` wide from ``t0`` when each item spreads
    its ``cycles`` evenly over ``[x0, x1)``: the two end buckets take their parts, the buckets in
    between a full bucket each (a difference array, cumulated once)."""
    t1 = t0 + bw * buckets
    length = np.maximum(x1 - x0, 1e-9)
    rate = cycles / length
    a = np.clip(x0, t0, t1)
    b = np.clip(x1, t0, t1)
    keep = b > a
    a, b, rate = a[keep], b[keep], rate[keep]
    out = np.zeros(buckets, dtype=np.float64)
    if not len(a):
        return out
    b0 = np.minimum(((a - t0) // bw).astype(np.int64), buckets - 1)
    b1 = np.minimum(((b - t0) // bw).astype(np.int64), buckets - 1)
    same = b0 == b1
    out += np.bincount(b0[same], weights=rate[same] * (b[same] - a[same]), minlength=buckets)
    d = ~same
    e0 = t0 + (b0[d] + 1) * bw  # end of the first bucket
    e1 = t0 + b1[d] * bw  # start of the last bucket
    out += np.bincount(b0[d], weights=rate[d] * (e0 - a[d]), minlength=buckets)
    out += np.bincount(b1[d], weights=rate[d] * (b[d] - e1), minlength=buckets)
    diff = np.bincount(b0[d] + 1, weights=rate[d], minlength=buckets + 1)
    diff -= np.bincount(b1[d], weights=rate[d], minlength=buckets + 1)
    out += np.cumsum(diff)[:buckets] * bw
    return out


def _extent(access: StepAccess, lo: int, hi: int) -> tuple[float, float]:
    """(first start, last step's end) of rows ``[lo, hi)`` (two one-row reads)."""
    first = access.read(lo, lo + 1, ("start",))["start"]
    last = access.read(hi - 1, hi, ("start", "cycles"))
    return float(first[0]), float(last["start"][0] + last["cycles"][0])


def _grid(n: int, t_min: float, t_end: float) -> tuple[int, float]:
    """(buckets, bucket width) of the finest pyramid level of ``n`` steps over the extent."""
    n_b = 1 << int(np.clip(np.ceil(np.log2(max(1, n / STEPS_PER_FINEST_BUCKET))), 10, 20))
    return n_b, float(max(1.0, np.ceil((t_end - t_min + 1) / n_b)))


def _widths(n: int, t_min: float, t_end: float) -> list[float]:
    """The bucket widths of every level of a full pyramid of ``n`` (> 0) steps."""
    n_b, width = _grid(n, t_min, t_end)
    out = [width]
    while (n_b := n_b // LEVEL_FACTOR) >= 64:
        width *= LEVEL_FACTOR
        out.append(width)
    return out


@dataclass
class _Level:
    width: float  # bucket width in cycles
    key: np.ndarray  # int32 lane * NT + type
    x0: np.ndarray  # float64
    x1: np.ndarray
    count: np.ndarray
    row: np.ndarray
    bucket: np.ndarray  # int64
    cummax_x1: np.ndarray  # running max of x1 in bucket order


class _Pyramid:
    """Pre-aggregated buckets of one IPU and one grouping, sorted by bucket."""

    def __init__(
        self,
        levels: list[_Level],
        n_rows: int,
        t_min: float,
        t_max: float,
        first_level: int = 0,
    ) -> None:
        self.levels = levels  # finest first
        self.n_rows = n_rows
        self.t_min = t_min
        self.t_max = t_max
        #: index, in the full pyramid, of ``levels[0]``: 0 for a full pyramid, more for the
        #: coarse levels alone (built first on a coarse-first open)
        self.first_level = first_level

    @property
    def complete(self) -> bool:
        """True when the pyramid has all its levels (not the coarse levels alone)."""
        return self.first_level == 0

    @staticmethod
    def _sorted_by_bucket(width, key, x0, x1, count, row, bucket) -> _Level:
        order = np.lexsort((key, bucket))
        x1s = x1[order]
        return _Level(
            width,
            key[order],
            x0[order],
            x1s,
            count[order],
            row[order],
            bucket[order],
            np.maximum.accumulate(x1s) if len(x1s) else x1s,
        )

    @classmethod
    def build(
        cls, access: StepAccess, ipu: int, lane_of, columns, max_buckets: int | None = None
    ) -> _Pyramid:
        """The pyramid of one IPU; with ``max_buckets``, only its levels of at most that many
        buckets (the same levels, bit for bit, as the full pyramid's coarsest ones: a bucket of
        a level is ``floor((start - t_min) / width)`` with integer cycles and widths, so
        computing it directly equals dividing a finer level's bucket by the level factor, and
        min / max / sum / min-row reductions regroup exactly)."""
        lo, hi = access.ipu_rows(ipu)
        n = hi - lo
        if n == 0:
            return cls([], 0, 0.0, 0.0)
        t_min, t_end = _extent(access, lo, hi)
        n_b, width = _grid(n, t_min, t_end)
        first_level = 0
        while max_buckets is not None and n_b > max_buckets and n_b // LEVEL_FACTOR >= 64:
            n_b //= LEVEL_FACTOR
            width *= LEVEL_FACTOR
            first_level += 1
        parts = []
        t_max = t_end
        for a, cols in access.chunks(lo, hi, columns):
            start = cols["start"].astype(np.float64)
            end = start + cols["cycles"]
            t_max = max(t_max, float(end.max()))
            key = lane_of(cols) * NT + cols["type"].astype(np.int32)
            bucket = ((start - t_min) // width).astype(np.int64)
            # rows are sorted by start, so (key, bucket) runs are contiguous after a stable key sort
            order = np.argsort(key.astype(np.uint16), kind="stable")
            g = key[order].astype(np.int64) * (n_b + 1) + bucket[order]
            rows = np.arange(a, a + len(start), dtype=np.int64)[order]
            # per item sums: [steps, busy cycles]
            sums = np.stack([np.ones(len(start), dtype=np.int64), cols["cycles"][order]], axis=1)
            parts.append(_group_reduce(g, start[order], end[order], sums, rows))
        g = np.concatenate([p[0] for p in parts])
        x0 = np.concatenate([p[1] for p in parts])
        x1 = np.concatenate([p[2] for p in parts])
        cnt = np.concatenate([p[3] for p in parts])
        rw = np.concatenate([p[4] for p in parts])
        order = np.argsort(g, kind="stable")  # merge runs split across chunks
        g, x0, x1, cnt, rw = _group_reduce(g[order], x0[order], x1[order], cnt[order], rw[order])
        key = (g // (n_b + 1)).astype(np.int32)
        bucket = g % (n_b + 1)
        levels = [cls._sorted_by_bucket(width, key, x0, x1, cnt, rw, bucket)]
        # coarser levels: entries stay sorted by (key, bucket) when buckets are divided
        while len(g) and (n_b := n_b // LEVEL_FACTOR) >= 64:
            width *= LEVEL_FACTOR
            bucket = bucket // LEVEL_FACTOR
            g = key.astype(np.int64) * (n_b + 1) + bucket
            g, x0, x1, cnt, rw = _group_reduce(g, x0, x1, cnt, rw)
            key = (g // (n_b + 1)).astype(np.int32)
            bucket = g % (n_b + 1)
            levels.append(cls._sorted_by_bucket(width, key, x0, x1, cnt, rw, bucket))
        return cls(levels, n, t_min, t_max, first_level)

    def save(self, folder: Path, steps_digest: str) -> None:
        """Write the levels to the level-of-detail cache (:func:`analyser.trace.lod_cache.save`:
        atomic, with the digest of the steps they were built from and of the arrays)."""
        meta = {
            "n_rows": self.n_rows,
            "t_min": self.t_min,
            "t_max": self.t_max,
            "widths": [lev.width for lev in self.levels],
            "steps_digest": steps_digest,
        }
        levels = [{name: getattr(lev, name) for name in _LEVEL_FIELDS} for lev in self.levels]
        lod_cache.save(folder, levels, meta)

    @classmethod
    def load(cls, root: Path, folder: Path, expect: dict) -> _Pyramid | None:
        """The pyramid saved in ``folder`` (memory-mapped) when it is the one a build of these
        steps gives (:func:`analyser.trace.lod_cache.load`'s checks), else None."""
        widths = _widths(expect["n_rows"], expect["t_min"], expect["t_end"])
        found = lod_cache.load(root, folder, expect, widths)
        if found is None:
            return None
        arrays, meta = found
        levels = [_Level(float(w), **arrs) for w, arrs in zip(widths, arrays)]
        return cls(levels, expect["n_rows"], float(meta["t_min"]), float(meta["t_max"]))

    def level_for(self, pixel_cycles: float) -> int | None:
        """Index of the coarsest level whose bucket is no wider than a pixel, or None."""
        best = None
        for i, lev in enumerate(self.levels):
            if lev.width <= pixel_cycles:
                best = i
        return best

    def query(self, i: int, t0: float, t1: float):
        lev = self.levels[i]
        b_hi = int(np.floor((t1 - self.t_min) / lev.width))
        hi = int(np.searchsorted(lev.bucket, b_hi, side="right"))
        lo = int(np.searchsorted(lev.cummax_x1, t0, side="right"))
        sl = slice(lo, max(lo, hi))
        keep = (lev.x1[sl] > t0) & (lev.x0[sl] < t1)
        return (
            lev.key[sl][keep],
            lev.x0[sl][keep],
            lev.x1[sl][keep],
            lev.count[sl][keep],
            lev.row[sl][keep],
        )


#: Background builds of coarse-first opens (:meth:`TraceWindow.prepare`) still running.
_FINISHERS: set[threading.Thread] = set()
_FINISHERS_LOCK = threading.Lock()
_EXITING = threading.Event()


@atexit.register
def _stop_finishers() -> None:
    """At interpreter exit, let the background pyramid builds stop after their current IPU and
    wait for them: a daemon thread frozen at exit while it holds h5py's lock would hang the
    closing of the profile's file."""
    _EXITING.set()
    with _FINISHERS_LOCK:
        threads = list(_FINISHERS)
        _FINISHERS.clear()
    for t in threads:
        t.join()


def lod_cache_dir() -> Path | None:
    """Folder of the trace level-of-detail cache: ``$IPU_ANALYSER_CACHE/trace-lod``, else
    ``$XDG_CACHE_HOME`` (or ``~/.cache``) ``/ipu-graph-analyser/trace-lod``; None (no cache)
    when ``IPU_ANALYSER_CACHE`` is set to an empty string."""
    env = os.environ.get("IPU_ANALYSER_CACHE")
    if env is not None:
        return Path(env) / "trace-lod" if env else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ipu-graph-analyser" / "trace-lod"


def _prune_cache(root: Path) -> None:
    """Keep the pyramids of the :data:`LOD_CACHE_PROFILES` most recently written profiles."""
    try:
        entries = sorted(
            (e for e in root.iterdir() if e.is_dir() and not e.name.startswith(".")),
            key=lambda e: e.stat().st_mtime,
        )
    except OSError:
        return
    for e in entries[:-LOD_CACHE_PROFILES]:
        shutil.rmtree(e, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The window
# ---------------------------------------------------------------------------------------------


#: Lanes of a grouped view that gather steps without a group of their own (shown last).
_CATCH_ALL = frozenset(("(none)", "(top level)", "other"))


def _natural(text: str) -> list:
    """Sort key that orders 'layer2' before 'layer10'."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _top_components(names: pd.Series, depth: int = 1) -> pd.Series:
    parts = names.fillna("").astype(str).str.split(".")
    return parts.str[:depth].str.join(".").replace("", "(none)")


class TraceWindow:
    """Level-of-detail access to the execution trace of one open profile.

    Thread-safe for reads: pyramids are built once per (IPU, grouping) under a lock.
    """

    def __init__(self, profile: Any) -> None:
        self.access = StepAccess(profile)
        self.profile = profile
        self.n_ipus = self.access.n_ipus
        self._pyramids: dict[tuple[int, str], _Pyramid] = {}
        self._expects: dict[tuple[int, str], dict] = {}
        self._build_locks: dict[tuple[int, str], threading.Lock] = {}
        self._lock = threading.Lock()
        self._programs: pd.DataFrame | None = None
        self._lanes: dict[str, tuple[np.ndarray, tuple[str, ...]]] = {}
        self._stages: int | None = None

    # -- static tables ------------------------------------------------------------------------
    @property
    def programs(self) -> pd.DataFrame:
        """Program nodes (name, type, parent, op, cycles, tile_balance, bytes, sync) + op names."""
        if self._programs is None:
            p = self.access.table(
                "/programs/nodes",
                ["name", "type", "parent", "ipu", "op", "cycles", "tile_balance", "bytes", "sync"],
            ).reset_index(drop=True)
            ops = self.access.table("/graph/operations", ["name", "type", "layer", "pass", "stage"])
            op = p["op"].to_numpy()
            valid = (op >= 0) & (op < len(ops))
            for src, dst in (("name", "op_name"), ("type", "op_type"), ("layer", "layer")):
                col = np.full(len(p), "", dtype=object)
                col[valid] = ops[src].to_numpy()[op[valid]]
                p[dst] = col
            self._programs = p
        return self._programs

    def host_lane(self) -> pd.DataFrame:
        """The host's timeline of a call (profile format 1.2, ``/execution/host``), outside the
        device cycles: one row per event with ``lane`` (main / loader), ``kind`` (prepare, call,
        waitDevice, waitLoader), ``start`` and ``end`` in device-trace cycles (negative before
        the device starts) and ``samples``. Empty for profiles without it (format 1.0)."""
        cols = ["lane", "kind", "start", "end", "samples"]
        if "/execution/host" not in self.profile:
            return pd.DataFrame({c: [] for c in cols})
        t = self.access.table("/execution/host", ["lane", "kind", "start", "cycles", "samples"])
        lanes = np.asarray(HOST_LANES, dtype=object)
        kinds = np.asarray(HOST_EVENTS, dtype=object)
        start = t["start"].to_numpy(np.int64)
        return pd.DataFrame(
            {
                "lane": lanes[t["lane"].to_numpy(np.int64)],
                "kind": kinds[t["kind"].to_numpy(np.int64)],
                "start": start,
                "end": start + t["cycles"].to_numpy(np.int64),
                "samples": t["samples"].to_numpy(np.int64),
            }
        )

    def step_count(self, ipu: int | None = None) -> int:
        if ipu is None:
            return int(self.access.ipu_offsets[-1])
        lo, hi = self.access.ipu_rows(ipu)
        return hi - lo

    def extent(self, ipu: int) -> tuple[float, float]:
        """First start and last end cycle of an IPU's steps."""
        p = self._pyramid(ipu, "flat")
        return p.t_min, p.t_max

    def step_types(self) -> list[str]:
        """The step types the run executed (on any IPU), in STEP_TYPES order; read from the
        flat pyramids the timeline already builds (no pass over the steps); computed once."""
        cached = getattr(self, "_step_types", None)
        if cached is not None:
            return list(cached)
        present = np.zeros(NT, dtype=bool)
        for ipu in range(self.n_ipus):
            if not self.step_count(ipu):
                continue
            levels = self._pyramid(ipu, "flat").levels
            if levels:
                present[np.unique(levels[0].key % NT)] = True
        self._step_types = tuple(t for i, t in enumerate(STEP_TYPES) if present[i])
        return list(self._step_types)

    def full_extent(self) -> tuple[float, float]:
        ext = [self.extent(i) for i in range(self.n_ipus) if self.step_count(i)]
        if not ext:
            return 0.0, 1.0
        return min(e[0] for e in ext), max(e[1] for e in ext)

    # -- lanes ---------------------------------------------------------------------------------
    def _program_lanes(self, group: str) -> tuple[np.ndarray, tuple[str, ...]]:
        """Lane of every program id for the operation / program groupings."""
        if group in self._lanes:
            return self._lanes[group]
        p = self.programs
        n = len(p)
        if group == "operation":
            labels = _top_components(pd.Series(p["layer"].to_numpy()), 1)
        else:  # "program": the shallowest ancestor (function, control program) that splits steps
            parent = p["parent"].to_numpy().astype(np.int64)
            depth = np.zeros(n, dtype=np.int64)
            anc = parent.copy()
            while (anc >= 0).any():  # pointer chasing over tree depth, vectorised over nodes
                has = anc >= 0
                depth[has] += 1
                anc[has] = parent[anc[has]]
            # the shallowest depth whose ancestors split the executed programs into more
            # groups than there are IPUs (the per-IPU wrappers are not a useful grouping)
            exe = np.isin(
                p["type"].to_numpy(), [STEP_TYPES.index(t) for t in schema.EXECUTABLE_TYPES]
            )
            max_depth = int(depth.max(initial=0))
            target = max_depth
            for d in range(0, max_depth + 1):
                anc_d = np.arange(n)
                for _ in range(max_depth):
                    deeper = depth[anc_d] > d
                    if not deeper.any():
                        break
                    anc_d[deeper] = parent[anc_d[deeper]]
                if len(np.unique(anc_d[exe & (depth >= d)])) > max(1, self.n_ipus):
                    target = d
                    break
            anc = np.arange(n)
            for _ in range(int(depth.max(initial=0))):
                deeper = depth[anc] > target
                if not deeper.any():
                    break
                anc[deeper] = parent[anc[deeper]]
            names = p["name"].to_numpy().astype(object)
            labels = pd.Series(
                np.where(depth[anc] >= target, names[anc], "(top level)"), dtype=object
            )
        codes, uniques = pd.factorize(labels, sort=True)
        uniques = list(map(str, uniques))
        # named groups first (natural order), then the catch-all lanes
        rank = sorted(
            range(len(uniques)), key=lambda i: (uniques[i] in _CATCH_ALL, _natural(uniques[i]))
        )
        remap0 = np.empty(len(uniques), dtype=np.int64)
        remap0[rank] = np.arange(len(uniques))
        codes = remap0[codes]
        uniques = [uniques[i] for i in rank]
        if len(uniques) > MAX_LANES:  # keep the most common groups, merge the rest
            freq = np.bincount(codes, minlength=len(uniques))
            keep = np.argsort(-freq, kind="stable")[: MAX_LANES - 1]
            remap = np.full(len(uniques), MAX_LANES - 1)
            remap[np.sort(keep)] = np.arange(len(keep))
            uniques = [uniques[k] for k in np.sort(keep)] + ["other"]
            codes = remap[codes]
        lanes = (codes.astype(np.int32), tuple(uniques))
        self._lanes[group] = lanes
        return lanes

    def lanes(self, group: str) -> tuple[str, ...]:
        """Lane labels of one IPU under a grouping."""
        if group == "flat":
            return ("steps",)
        if group == "stage":
            n_stages = max(1, self._n_stages())
            return (*(f"stage {s}" for s in range(n_stages)), "no stage")
        return self._program_lanes(group)[1]

    def ipu_lanes(self, group: str, ipu: int) -> tuple[tuple[str, ...], np.ndarray]:
        """Labels of the lanes that hold steps of ``ipu`` and their global lane ids (the
        ``lane`` values of :meth:`window`), in display order."""
        labels = self.lanes(group)
        if group == "flat":
            return labels, np.zeros(1, dtype=np.int64)
        pyr = self._pyramid(ipu, group)
        if not pyr.levels:
            return (), np.zeros(0, dtype=np.int64)
        lev = pyr.levels[-1]
        lane = (lev.key // NT).astype(np.int64)
        # a damaged profile (steps out of order, ids out of range) can name lanes that do not
        # exist: they are left out rather than indexed (the GUI's walker found an IndexError)
        ok = (lane >= 0) & (lane < len(labels))
        lane = lane[ok]
        present = np.unique(lane)
        if group in ("operation", "program"):
            # in execution order, as PopVision orders layer lanes: by the IPU's first step of
            # each lane (the catch-all lanes last)
            first = np.full(len(labels), np.inf)
            np.minimum.at(first, lane, np.asarray(lev.x0, dtype=np.float64)[ok])
            catch_all = np.array([labels[i] in _CATCH_ALL for i in present], dtype=bool)
            present = present[np.lexsort((present, first[present], catch_all))]
        return tuple(labels[i] for i in present), present

    def _n_stages(self) -> int:
        if self._stages is None:
            ops = self.access.table("/graph/operations", ["stage"])
            self._stages = int(ops["stage"].max()) + 1 if len(ops) else 1
        return self._stages

    def _lane_fn(self, group: str):
        if group == "flat":
            return (lambda cols: np.zeros(len(cols["start"]), dtype=np.int32)), _COLUMNS_DRAW
        if group == "stage":
            n_stages = max(1, self._n_stages())

            def stage_lane(cols):
                s = cols["stage"].astype(np.int32)
                return np.where((s >= 0) & (s < n_stages), s, n_stages).astype(np.int32)

            return stage_lane, (*_COLUMNS_DRAW, "stage")
        if group in ("operation", "program"):
            prog_lane, _ = self._program_lanes(group)

            def prog_fn(cols):
                return prog_lane[cols["program"]]

            return prog_fn, (*_COLUMNS_DRAW, "program")
        raise TraceError(f"Unknown trace grouping {group!r}; choose from {', '.join(GROUP_MODES)}.")

    def _build_lock(self, key: tuple[int, str]) -> threading.Lock:
        with self._lock:
            return self._build_locks.setdefault(key, threading.Lock())

    def _pyramid(self, ipu: int, group: str, coarse: bool = False) -> _Pyramid:
        """The pyramid of (IPU, grouping) as it is now: the full one, or the coarse levels
        alone while a coarse-first open builds the full one in the background. Built (or
        loaded from the cache) on first use; with ``coarse``, a large IPU not in the cache
        gets its coarse levels only (:data:`COARSE_BUCKETS`)."""
        key = (ipu, group)
        p = self._pyramids.get(key)
        if p is None:
            with self._build_lock(key):  # one build per key; different IPUs build concurrently
                p = self._pyramids.get(key)
                if p is None:
                    folder = self._cache_folder(ipu, group)
                    n_rows = self.step_count(ipu)
                    p = None
                    if folder is not None:
                        p = _Pyramid.load(folder.parents[1], folder, self._expect(ipu, group))
                        if p is None:
                            lod_cache.discard(folder)  # rebuilt and saved again below
                    if p is None:
                        fn, cols = self._lane_fn(group)
                        if coarse and n_rows >= LOD_CACHE_MIN_ROWS:
                            p = _Pyramid.build(self.access, ipu, fn, cols, COARSE_BUCKETS)
                        else:
                            p = self._build_full(ipu, group)
                    self._pyramids[key] = p
        return p

    def _build_full(self, ipu: int, group: str) -> _Pyramid:
        """Build the full pyramid and save it to the cache (caller holds the key's lock)."""
        fn, cols = self._lane_fn(group)
        p = _Pyramid.build(self.access, ipu, fn, cols)
        folder = self._cache_folder(ipu, group)
        if folder is not None:
            with contextlib.suppress(OSError):
                p.save(folder, self._expect(ipu, group)["steps_digest"])
                _prune_cache(folder.parent)
        return p

    def _expect(self, ipu: int, group: str) -> dict:
        """What a cached pyramid of (IPU, grouping) must agree with: the IPU's rows, extent and
        steps digest (:func:`analyser.trace.lod_cache.steps_digest`), computed once."""
        key = (ipu, group)
        found = self._expects.get(key)
        if found is None:
            lo, hi = self.access.ipu_rows(ipu)
            t_min, t_end = _extent(self.access, lo, hi)
            cols = tuple(dict.fromkeys(self._lane_fn(group)[1]))
            digest = lod_cache.steps_digest(lambda a, b: self.access.read(a, b, cols), lo, hi)
            found = {
                "n_rows": hi - lo,
                "lo": lo,
                "hi": hi,
                "t_min": t_min,
                "t_end": t_end,
                "steps_digest": digest,
            }
            self._expects[key] = found
        return found

    def _full_pyramid(self, ipu: int, group: str) -> _Pyramid:
        """The full pyramid of (IPU, grouping): waits for the background build when it is
        under way, builds it here when no build has started or the background one failed."""
        p = self._pyramid(ipu, group)
        if p.complete:
            return p
        with self._build_lock((ipu, group)):
            p = self._pyramids[(ipu, group)]
            if not p.complete:
                p = self._build_full(ipu, group)
                self._pyramids[(ipu, group)] = p
        return p

    def _finish_pyramids(self, group: str, ipus: list[int]) -> None:
        """Background thread of a coarse-first open: the full pyramids, one IPU after the
        other, each replacing the coarse levels (and saved to the cache) when done; stops
        between IPUs when the interpreter exits (see :func:`_stop_finishers`)."""
        for ipu in ipus:
            if _EXITING.is_set():
                return
            try:
                self._full_pyramid(ipu, group)
            except Exception:  # e.g. the profile was closed meanwhile:
                return  # a later zoom that needs the levels builds them (and reports errors)

    def prepare(self, group: str = "flat", coarse_first: bool = False) -> TraceWindow:
        """Build (or load from the cache) the level-of-detail pyramids of ``group`` for every
        IPU with steps, so that the first paint only queries them: called by the GUI's
        background warm-up after a profile opens. Returns ``self``.

        With ``coarse_first``, an IPU of at least :data:`LOD_CACHE_MIN_ROWS` steps whose
        pyramid is not in the cache gets only its coarse levels here (one pass over its start,
        cycles and type columns, about 0.2 s of CPU per 2.5M steps instead of 0.9 s), enough
        for the whole-run view and the overview, and a background thread then builds the full
        pyramids (saving them to the cache). A zoom that needs finer levels before they are
        ready reads the visible rows, or waits for its IPU's full pyramid (:meth:`window`);
        what is drawn once they are ready is what a full build draws."""
        pending = []
        for ipu in range(self.n_ipus):
            if self.step_count(ipu) and not self._pyramid(ipu, group, coarse_first).complete:
                pending.append(ipu)
        if pending:
            self._finisher = threading.Thread(
                target=self._finish_pyramids,
                args=(group, pending),
                name="trace-lod-finish",
                daemon=True,
            )
            with _FINISHERS_LOCK:
                _FINISHERS.add(self._finisher)
            self._finisher.start()
        return self

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait for the background build of a coarse-first :meth:`prepare`; True when none is
        running (any more)."""
        t = getattr(self, "_finisher", None)
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

    def _cache_folder(self, ipu: int, group: str) -> Path | None:
        """Where the pyramid of (IPU, grouping) is cached, or None (small IPU, no cache)."""
        if self.step_count(ipu) < LOD_CACHE_MIN_ROWS:
            return None
        root = lod_cache_dir()
        key = self._cache_key()
        if root is None or key is None:
            return None
        return root / key / f"ipu{ipu}-{group}"

    def _cache_key(self) -> str | None:
        """Identity of the profile file: path, size, modification time and creation stamp."""
        if not hasattr(self, "_key"):
            try:
                path = Path(self.profile.path).resolve()
                st = path.stat()
                created = str(getattr(self.profile, "root_attrs", {}).get("created", ""))
                ident = [str(path), st.st_size, st.st_mtime_ns, created, STEPS_PER_FINEST_BUCKET]
                self._key = hashlib.sha1(json.dumps(ident).encode()).hexdigest()[:20]
            except (OSError, TypeError, AttributeError):
                self._key = None
        return self._key

    # -- the window ---------------------------------------------------------------------------
    def window(
        self,
        ipu: int,
        t0: float,
        t1: float,
        width_px: int,
        group: str = "flat",
        dominant: bool = True,
        stripes: bool = False,
    ) -> WindowResult:
        """Rectangles per step type for ``[t0, t1)`` on ``width_px`` pixels (see module doc).

        With ``dominant`` (the default), a pixel of a lane where several step types are
        aggregated shows only the type with the most cycles in it (as Perfetto does), so a
        zoomed-out run is coloured by what dominates it rather than by whichever type is
        painted last; steps wider than two pixels are always drawn. With ``stripes`` (the
        Execution Trace's view) every type of the pixel is kept, each taking its share of the
        pixel's busy cycles of the lane's height (``TypeRects.y0`` / ``y1``).
        """
        width_px = max(1, int(width_px))
        if not t1 > t0:
            raise TraceError(f"The trace window must have t1 > t0 (got {t0} .. {t1}).")
        pyr = self._pyramid(ipu, group)
        lanes = self.lanes(group)
        pw = (t1 - t0) / width_px
        empty = WindowResult(ipu, t0, t1, width_px, group, lanes, {}, "rows", 0)
        if pyr.n_rows == 0 or t1 <= pyr.t_min or t0 >= pyr.t_max:
            return empty
        lvl = pyr.level_for(pw)
        if lvl is None and not pyr.complete:
            # finer than the coarse levels while the full pyramid is being built: read the
            # visible rows if they are few, else wait for this IPU's full pyramid
            lo, hi = self.row_range(ipu, t0, t1)
            if hi - lo > COARSE_ROWS_FALLBACK:
                pyr = self._full_pyramid(ipu, group)
                lvl = pyr.level_for(pw)
        if lvl is not None:
            key, x0, x1, cnt, row = pyr.query(lvl, t0, t1)
            n = lvl + pyr.first_level
            source = f"level {n} (bucket {pyr.levels[lvl].width:,.0f} cycles)"
        else:
            fn, cols = self._lane_fn(group)
            lo, hi = self.row_range(ipu, t0, t1)
            data = self.access.read_cached(lo, hi, cols)
            x0 = data["start"].astype(np.float64)
            x1 = x0 + data["cycles"]
            keep = (x1 > t0) & (x0 < t1)
            key = (fn(data) * NT + data["type"].astype(np.int32))[keep]
            x0, x1 = x0[keep], x1[keep]
            cnt = np.stack([np.ones(len(x0), dtype=np.int64), data["cycles"][keep]], axis=1)
            row = np.arange(lo, hi, dtype=np.int64)[keep]
            source = "rows"
        key, x0, x1, cnt, row = aggregate_pixels(key, x0, x1, cnt, row, t0, t1, width_px)
        n_steps = int(cnt[:, 0].sum()) if len(cnt) else 0
        ys = None
        if stripes and len(key):
            key, x0, x1, cnt, row, *ys = _stripes(key, x0, x1, cnt, row, t0, pw, width_px)
        elif dominant and len(key):
            key, x0, x1, cnt, row = _dominant(key, x0, x1, cnt, row, t0, pw, width_px)
        x1 = np.maximum(x1, x0 + pw)  # at least one pixel wide
        lane = (key // NT).astype(np.int32)
        typ = key % NT
        cnt = cnt[:, 0]
        rects: dict[str, TypeRects] = {}
        if len(typ):
            order = np.argsort(typ, kind="stable")
            bounds = np.flatnonzero(np.r_[True, typ[order][1:] != typ[order][:-1], True])
            for a, b in itertools.pairwise(bounds):
                sel = order[a:b]
                name = STEP_TYPES[int(typ[sel[0]])]
                part = (ys[0][sel], ys[1][sel]) if ys else (None, None)
                rects[name] = TypeRects(
                    name, x0[sel], x1[sel], lane[sel], cnt[sel], row[sel], *part
                )
        return WindowResult(ipu, t0, t1, width_px, group, lanes, rects, source, n_steps)

    # -- rows ------------------------------------------------------------------------------------
    def row_range(self, ipu: int, t0: float, t1: float) -> tuple[int, int]:
        """Global rows ``[lo, hi)`` of the IPU's steps that may overlap ``[t0, t1)``.

        Uses the finest pyramid level (bucket row bounds and running max of ends), so the
        start column is never read whole.
        """
        lo_ipu, hi_ipu = self.access.ipu_rows(ipu)
        pyr = self._pyramid(ipu, "flat")
        if not pyr.levels:
            return lo_ipu, lo_ipu
        lev = pyr.levels[0]
        a = int(np.searchsorted(lev.cummax_x1, t0, side="right"))
        b_hi = int(np.floor((t1 - pyr.t_min) / lev.width))
        b = int(np.searchsorted(lev.bucket, b_hi, side="right"))
        if a >= len(lev.row) or b <= a:
            return lo_ipu, lo_ipu
        lo = int(lev.row[a:b].min()) if b > a else lo_ipu
        # the first row of the next bucket bounds the range from above
        if b < len(lev.row):
            b_end = int(np.searchsorted(lev.bucket, lev.bucket[b], side="right"))
            hi = int(lev.row[b:b_end].min())
        else:
            hi = hi_ipu
        return max(lo_ipu, lo), min(hi_ipu, max(hi, lo))

    def steps(self, lo: int, hi: int, columns: tuple[str, ...] | None = None) -> pd.DataFrame:
        cols = columns or tuple(c.name for c in schema.STEPS.columns)
        return pd.DataFrame(self.access.read(lo, hi, cols), index=np.arange(lo, hi))

    def step_at(
        self,
        ipu: int,
        t: float,
        lane: int | None = None,
        group: str = "flat",
        tolerance: float = 0.0,
    ) -> int | None:
        """Global row of the step of ``ipu`` (and lane) at cycle ``t`` (nearest within
        ``tolerance`` cycles), or None."""
        fn, cols = self._lane_fn(group)
        lo, hi = self.row_range(ipu, t - tolerance, t + tolerance + 1)
        if hi <= lo:
            return None
        data = self.access.read_cached(lo, hi, cols)
        x0 = data["start"].astype(np.float64)
        x1 = x0 + data["cycles"]
        dist = np.where(t < x0, x0 - t, np.where(t >= x1, t - x1, 0.0))
        if lane is not None:
            dist = np.where(fn(data) == lane, dist, np.inf)
        i = int(np.argmin(dist)) if len(dist) else -1
        if i < 0 or dist[i] > tolerance:
            return None
        return lo + i

    def step_details(self, row: int) -> dict[str, Any]:
        """Every column of one executed step plus its program and operation."""
        n = self.step_count()
        if not 0 <= row < n:
            raise TraceError(f"Step row {row} does not exist; the trace has {n} steps.")
        cols = tuple(c.name for c in schema.STEPS.columns)
        data = {k: v[0].item() for k, v in self.access.read(row, row + 1, cols).items()}
        prog = self.programs.iloc[int(data["program"])]
        out: dict[str, Any] = {
            "row": row,
            "name": str(prog["name"]),
            "type": STEP_TYPES[int(data["type"])],
            "ipu": int(data["ipu"]),
            "start": int(data["start"]),
            "end": int(data["start"] + data["cycles"]),
            "cycles": int(data["cycles"]),
            "program": int(data["program"]),
            "operation": str(prog["op_name"]),
            "operation type": str(prog["op_type"]),
            "layer": str(prog["layer"]),
            "tile balance": float(prog["tile_balance"]),
            "micro-batch": _index_or_none(int(data["micro_batch"]), "micro-batches"),
            "stage": _index_or_none(int(data["stage"]), "pipeline stages"),
            "phase": PHASES[int(data["phase"])],
            "iteration": int(data["iteration"]),
            "bytes in": int(data["bytes_in"]),
            "bytes out": int(data["bytes_out"]),
            "destination": DESTINATIONS[int(data["dest"])],
        }
        if out["type"] in ("Sync", "SyncAns"):
            out["sync"] = schema.SYNC_KINDS[int(prog["sync"])]
        return out

    def tile_cycles_of_step(self, row: int) -> np.ndarray:
        """Cycles each tile spends in the step: its program's per-tile cycles, except for a
        Sync / SyncAns, where every tile is in the sync (arrived, waiting for the others or the
        host) for the whole step, not only the program's few cycles of sync instruction."""
        data = self.access.read(row, row + 1, ("program", "type", "cycles"))
        tiles = self.access.tile_cycles(np.array([int(data["program"][0])]))[0]
        if STEP_TYPES[int(data["type"][0])] in ("Sync", "SyncAns"):
            return np.full(tiles.shape, int(data["cycles"][0]), dtype=np.int64)
        return tiles

    # -- summary -------------------------------------------------------------------------------
    def range_summary(
        self, ipu: int, t0: float, t1: float, cancelled: Callable[[], bool] | None = None
    ) -> RangeSummary | None:
        """Cycles by step type, tile balance and StreamCopy bytes of the steps overlapping the
        window (cycles clipped to it; bytes counted for steps starting in it).

        ``cancelled`` is polled between row chunks; when it returns True the summary stops and
        None is returned (a newer window superseded it)."""
        lo, hi = self.row_range(ipu, t0, t1)
        by_type = np.zeros(NT, dtype=np.int64)
        n_type = np.zeros(NT, dtype=np.int64)
        nd = len(DESTINATIONS)
        rx = np.zeros(nd, dtype=np.int64)
        tx = np.zeros(nd, dtype=np.int64)
        bal_num = 0.0
        bal_den = 0.0
        balance = self.programs["tile_balance"].to_numpy(dtype=np.float64)
        ptype = self.programs["type"].to_numpy()
        on_tiles = ptype == STEP_TYPES.index("OnTileExecute")  # as analyser.core's tile balance
        sc_types = [STEP_TYPES.index(t) for t in STEP_TYPES if t.startswith("StreamCopy")]
        cols = ("program", "start", "cycles", "type", "bytes_in", "bytes_out", "dest")
        n = 0
        for _a, d in self.access.chunks(lo, hi, cols):
            if cancelled is not None and cancelled():
                return None
            s = d["start"]
            e = s + d["cycles"]
            m = (e > t0) & (s < t1)
            if not m.any():
                continue
            clipped = np.minimum(e[m], t1) - np.maximum(s[m], t0)
            typ = d["type"][m].astype(np.int64)
            by_type += np.bincount(typ, weights=clipped, minlength=NT).astype(np.int64)
            n_type += np.bincount(typ, minlength=NT)
            n += int(m.sum())
            prog = d["program"][m]
            w = np.where(on_tiles[prog], clipped, 0)
            bal_num += float((balance[prog] * w).sum())
            bal_den += float(w.sum())
            sc = np.isin(typ, sc_types) & (s[m] >= t0)
            dest = d["dest"][m][sc].astype(np.int64)
            rx += np.bincount(dest, weights=d["bytes_in"][m][sc], minlength=nd).astype(np.int64)
            tx += np.bincount(dest, weights=d["bytes_out"][m][sc], minlength=nd).astype(np.int64)
        return RangeSummary(
            ipu=ipu,
            t0=int(t0),
            t1=int(t1),
            n_steps=n,
            cycles_by_type={STEP_TYPES[i]: int(by_type[i]) for i in range(NT) if n_type[i]},
            steps_by_type={STEP_TYPES[i]: int(n_type[i]) for i in range(NT) if n_type[i]},
            tile_balance=bal_num / bal_den if bal_den else float("nan"),
            streamcopy={
                "received": {DESTINATIONS[i]: int(rx[i]) for i in range(nd) if rx[i]},
                "sent": {DESTINATIONS[i]: int(tx[i]) for i in range(nd) if tx[i]},
            },
            busy_cycles=int(by_type.sum()),
        )

    # -- search --------------------------------------------------------------------------------
    def search(self, text: str, limit: int = 10_000, ipu: int | None = None) -> SearchResult:
        """Steps whose program or operation name contains ``text`` (case-insensitive), across
        the whole trace (every IPU unless ``ipu`` is given)."""
        text = text.strip()
        p = self.programs
        hit = p["name"].astype(str).str.contains(text, case=False, regex=False) | p[
            "op_name"
        ].astype(str).str.contains(text, case=False, regex=False)
        mask = hit.to_numpy(dtype=bool)
        if not text:
            mask[:] = False
        ids = np.flatnonzero(mask)
        names = {int(i): str(p["name"].iat[int(i)]) for i in ids[:1000]}
        if ipu is None:
            lo, hi = int(self.access.ipu_offsets[0]), int(self.access.ipu_offsets[-1])
        else:
            lo, hi = self.access.ipu_rows(ipu)
        rows: list[np.ndarray] = []
        total = 0
        got = 0
        if len(ids):
            for a, d in self.access.chunks(lo, hi, ("program",)):
                m = np.flatnonzero(mask[d["program"]])
                total += len(m)
                if got < limit and len(m):
                    take = m[: limit - got] + a
                    rows.append(take)
                    got += len(take)
        r = np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)
        if len(r):
            span = (int(r[0]), int(r[-1]) + 1)
            cols = self.access.read(*span, ("ipu", "start", "cycles", "program"))
            idx = r - span[0]
            sel = {k: v[idx] for k, v in cols.items()}
        else:
            sel = {k: np.empty(0, dtype=np.int64) for k in ("ipu", "start", "cycles", "program")}
        return SearchResult(
            text, r, sel["ipu"], sel["start"], sel["cycles"], sel["program"], total, names
        )

    # -- range statistics (area selection) -----------------------------------------------------
    def range_statistics(
        self,
        t0: float,
        t1: float,
        by: str = "name",
        ipus: tuple[int, ...] | list[int] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> RangeStatistics | None:
        """The steps overlapping ``[t0, t1)`` on ``ipus`` (default: every IPU) aggregated by
        step name or operation (see :class:`RangeStatistics`): per program id with
        ``np.bincount`` over row chunks, then per name over the (few) programs. ``cancelled``
        is polled between chunks (None returned when it says so)."""
        if by not in STATISTICS_BY:
            raise TraceError(
                f"Unknown statistics grouping {by!r}; choose from {', '.join(STATISTICS_BY)}."
            )
        if not t1 > t0:
            raise TraceError(f"The range must have t1 > t0 (got {t0} .. {t1}).")
        ipus = tuple(range(self.n_ipus)) if ipus is None else tuple(int(i) for i in ipus)
        p = self.programs
        n_prog = len(p)
        count = np.zeros(n_prog, dtype=np.int64)
        total = np.zeros(n_prog, dtype=np.float64)
        longest = np.zeros(n_prog, dtype=np.float64)
        for ipu in ipus:
            lo, hi = self.row_range(ipu, t0, t1)
            for _a, d in self.access.chunks(lo, hi, ("program", "start", "cycles")):
                if cancelled is not None and cancelled():
                    return None
                s = d["start"]
                e = s + d["cycles"]
                m = (e > t0) & (s < t1)
                if not m.any():
                    continue
                prog = d["program"][m].astype(np.int64)
                clipped = np.minimum(e[m], t1) - np.maximum(s[m], t0)
                count += np.bincount(prog, minlength=n_prog)
                total += np.bincount(prog, weights=clipped, minlength=n_prog)
                np.maximum.at(longest, prog, clipped)
        ran = np.flatnonzero(count)
        if by == "name":
            keys = p["name"].to_numpy().astype(str)[ran]
        else:
            ops = p["op_name"].to_numpy().astype(str)[ran]
            keys = np.where(ops == "", "(no operation)", ops)
        types = np.asarray(STEP_TYPES, dtype=object)[p["type"].to_numpy()[ran].astype(np.int64)]
        frame = pd.DataFrame(
            {
                "name": keys,
                "type": types,
                "steps": count[ran],
                "total_cycles": total[ran],
                "max_cycles": longest[ran],
            }
        )
        g = frame.groupby("name", sort=False)
        table = g.agg(
            steps=("steps", "sum"),
            total_cycles=("total_cycles", "sum"),
            max_cycles=("max_cycles", "max"),
        )
        n_types = g["type"].nunique()
        table.insert(0, "type", np.where(n_types.to_numpy() > 1, "mixed", g["type"].first()))
        table["mean_cycles"] = table["total_cycles"] / table["steps"]
        room = float(t1 - t0) * max(1, len(ipus))
        table["share"] = table["total_cycles"] / room
        table = table.reset_index().sort_values(
            ["total_cycles", "name"], ascending=[False, True], kind="stable"
        )
        columns = ["name", "type", "steps", "total_cycles", "mean_cycles", "max_cycles", "share"]
        return RangeStatistics(
            float(t0),
            float(t1),
            ipus,
            by,
            table[columns].reset_index(drop=True),
            int(count.sum()),
            float(total.sum()),
        )

    # -- flows ---------------------------------------------------------------------------------
    def flows(self, t0: float, t1: float, max_rows: int = 200_000, limit: int = 500) -> Flows:
        """Cross-IPU exchanges and external syncs of the steps overlapping ``[t0, t1)`` (see
        :class:`Flows`), at most ``limit`` arrows (the first in time); none, with
        ``too_many``, when the IPUs hold more than ``max_rows`` steps there. Vectorised: the
        senders find their receivers with ``np.searchsorted`` over the receivers' starts, the
        syncs their partners by equal end cycles."""
        spans = [self.row_range(i, t0, t1) for i in range(self.n_ipus)]
        if sum(b - a for a, b in spans) > max_rows:
            return _no_flows(too_many=True)
        cols = ("start", "cycles", "type", "bytes_in", "bytes_out", "program")
        parts = []
        for ipu, (lo, hi) in enumerate(spans):
            if hi <= lo:
                continue
            d = self.access.read_cached(lo, hi, cols)
            s = d["start"].astype(np.float64)
            e = s + d["cycles"]
            m = (e > t0) & (s < t1)
            rows = np.arange(lo, hi, dtype=np.int64)[m]
            parts.append((np.full(len(rows), ipu), rows, s[m], e[m], *(d[c][m] for c in cols[2:])))
        if not parts:
            return _no_flows()
        ipu, row, s, e, typ, b_in, b_out, prog = (np.concatenate(x) for x in zip(*parts))
        out = []
        # exchanges: each send to the receives on other IPUs starting while it runs
        ge = typ == STEP_TYPES.index("GlobalExchange")
        snd = np.flatnonzero(ge & (b_out > 0))
        rcv = np.flatnonzero(ge & (b_in > 0))
        if len(snd) and len(rcv):
            rcv = rcv[np.argsort(s[rcv], kind="stable")]
            a = np.searchsorted(s[rcv], s[snd], side="left")
            b = np.searchsorted(s[rcv], e[snd], side="right")
            n = b - a
            src = np.repeat(snd, n)
            dst = rcv[np.repeat(a, n) + np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)]
            other = ipu[src] != ipu[dst]
            src, dst = src[other], dst[other]
            out.append(("exchange", src, s[src], dst, e[dst]))
        # external syncs: the last IPU to arrive releases the others (equal end cycles)
        sync_kind = self.programs["sync"].to_numpy()
        ext = np.flatnonzero(
            np.isin(typ, _WAIT_TYPES) & (sync_kind[prog] == schema.SYNC_KINDS.index("external"))
        )
        if len(ext):
            order = ext[np.lexsort((-s[ext], e[ext]))]  # by end, the latest arrival first
            ends = e[order]
            first = np.r_[True, ends[1:] != ends[:-1]]
            group = np.cumsum(first) - 1
            releaser = order[first][group]
            keep = (~first) & (ipu[order] != ipu[releaser])
            src, dst = releaser[keep], order[keep]
            out.append(("sync", src, s[src], dst, e[dst]))
        if not out:
            return _no_flows()
        kind = np.concatenate([np.full(len(x[1]), x[0], dtype=object) for x in out])
        src = np.concatenate([x[1] for x in out])
        x0 = np.concatenate([x[2] for x in out])
        dst = np.concatenate([x[3] for x in out])
        x1 = np.concatenate([x[4] for x in out])
        first = np.argsort(x0, kind="stable")[:limit]
        return Flows(
            kind[first],
            ipu[src][first],
            row[src][first],
            x0[first],
            ipu[dst][first],
            row[dst][first],
            x1[first],
        )

    # -- slice labels --------------------------------------------------------------------------
    def programs_of_rows(self, rows: np.ndarray) -> np.ndarray:
        """The program id of each global step row, read through the drawing cache one row block
        at a time (a loop over the few blocks the rows fall in, never over rows)."""
        return self.column_of_rows(rows, "program")

    def lanes_of_rows(self, rows: np.ndarray, group: str) -> np.ndarray:
        """The lane (global lane id of :meth:`window`) of each global step row."""
        fn, cols = self._lane_fn(group)
        data = {c: self.column_of_rows(rows, c) for c in cols}
        return np.asarray(fn(data), dtype=np.int64)

    def column_of_rows(
        self, rows: np.ndarray, column: str, cached_only: bool = False
    ) -> np.ndarray:
        """Column ``column`` of each global step row (through the drawing cache, by block);
        with ``cached_only``, -1 for the rows whose block the cache does not hold (nothing is
        read: the view asks for those later, off its redraw path)."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty(len(rows), dtype=np.int64)
        if not len(rows):
            return out
        order = np.argsort(rows, kind="stable")
        r = rows[order]
        block = r // CACHE_BLOCK_ROWS
        bounds = np.r_[np.flatnonzero(np.r_[True, block[1:] != block[:-1]]), len(r)]
        for a, b in itertools.pairwise(bounds):
            lo, hi = int(r[a]), int(r[b - 1]) + 1
            if cached_only and not self.access.is_cached(column, lo):
                out[order[a:b]] = -1
                continue
            values = self.access.read_cached(lo, hi, (column,))[column]
            out[order[a:b]] = values[r[a:b] - lo]
        return out

    def step_names(self, rows: np.ndarray, cached_only: bool = False) -> np.ndarray:
        """The name (program / compute set name) of each global step row; with
        ``cached_only``, "" for the rows whose block is not in the drawing cache yet."""
        names = np.r_[self.programs["name"].to_numpy().astype(str), np.array([""])]
        prog = self.column_of_rows(rows, "program", cached_only)
        return names[np.where(prog < 0, len(names) - 1, prog)]

    # -- overview, runs, clock -----------------------------------------------------------------
    def overview(self, buckets: int, t0: float | None = None, t1: float | None = None) -> Overview:
        """Active share per IPU and time bucket of the whole run (or ``[t0, t1)``; see
        :class:`Overview`), from the flat pyramid level whose buckets are no wider than the
        overview's (no read of the steps):
        each aggregate's busy cycles spread evenly over the cycles it covers, summed per
        bucket with a difference array (no loop over items or buckets)."""
        buckets = max(1, int(buckets))
        f0, f1 = self.full_extent()
        t0 = f0 if t0 is None else float(t0)
        t1 = max(f1, t0 + 1.0) if t1 is None else float(t1)
        bw = (t1 - t0) / buckets
        busy = np.zeros((self.n_ipus, buckets), dtype=np.float64)
        for ipu in range(self.n_ipus):
            if not self.step_count(ipu):
                continue
            pyr = self._pyramid(ipu, "flat")
            lvl = pyr.level_for(bw)
            lvl = 0 if lvl is None else lvl
            lev = pyr.levels[lvl]
            active = ~np.isin(np.asarray(lev.key) % NT, _WAIT_TYPES)
            x0 = np.asarray(lev.x0, dtype=np.float64)[active]
            x1 = np.asarray(lev.x1, dtype=np.float64)[active]
            cyc = np.asarray(lev.count, dtype=np.float64)[active, 1]
            busy[ipu] = _spread(x0, x1, cyc, t0, bw, buckets)
        return Overview(t0, t1, np.clip(busy / bw, 0.0, 1.0))

    def runs(self) -> np.ndarray:
        """``(n, 2)`` start and end cycles of each host call (run of device iterations) of the
        device trace (``/execution/run_starts``; a run ends where the next begins, the last at
        the end of the trace). One run when the profile records none."""
        f0, f1 = self.full_extent()
        starts = np.asarray([], dtype=np.float64)
        if "/execution/run_starts" in self.profile:
            starts = np.asarray(self.profile.array("/execution/run_starts"), dtype=np.float64)
        starts = np.unique(starts[starts < f1]) if len(starts) else np.asarray([f0])
        # the first run starts with the trace (an IPU may start a cycle before the recorded
        # start of the call)
        starts[0] = f0
        return np.stack([starts, np.r_[starts[1:], f1]], axis=1)

    @property
    def clock_hz(self) -> float | None:
        """The IPU tile clock of the profile's target (Hz), or None when it is not recorded."""
        try:
            hz = float(self.profile.clock_hz)
        except (AttributeError, KeyError, TypeError, ValueError):
            return None
        return hz if hz > 0 else None


__all__ = [
    "GROUP_MODES",
    "STATISTICS_BY",
    "STEP_TYPES",
    "Flows",
    "Overview",
    "RangeStatistics",
    "RangeSummary",
    "SearchResult",
    "StepAccess",
    "TraceError",
    "TraceWindow",
    "TypeRects",
    "WindowResult",
    "aggregate_pixels",
]
