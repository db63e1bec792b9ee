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

The engine's parts: :mod:`~analyser.trace.results` (names, errors, result types),
:mod:`~analyser.trace.access` (row reads and the drawing cache), :mod:`~analyser.trace.pyramid`
(the pyramids and the per-pixel aggregation), :mod:`~analyser.trace.lod_cache` (pyramids on
disk), :mod:`~analyser.trace.lanes` (lanes of the grouped views) and
:mod:`~analyser.trace.queries` (range summary, search, range statistics, flows). This module
builds the pyramids (once per IPU and grouping, coarse levels first on a large open, the rest
in a background finisher thread) and answers the window, row and step queries. The names the
other modules define are importable from here too.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.trace import lod_cache
from analyser.trace.access import CACHE_BLOCK_ROWS, CACHE_BLOCKS, CHUNK_ROWS, StepAccess
from analyser.trace.lanes import _CATCH_ALL, MAX_LANES, program_lanes
from analyser.trace.lod_cache import cache_dir as lod_cache_dir
from analyser.trace.pyramid import (
    LEVEL_FACTOR,
    STEPS_PER_FINEST_BUCKET,
    _dominant,
    _extent,
    _Pyramid,
    _spread,
    _stripes,
    aggregate_pixels,
)
from analyser.trace.queries import RangeQueries
from analyser.trace.results import (
    _WAIT_TYPES,
    DESTINATIONS,
    GROUP_MODES,
    HOST_EVENTS,
    HOST_LANES,
    NT,
    PHASES,
    STATISTICS_BY,
    STEP_TYPES,
    ColumnTable,
    Flows,
    Overview,
    RangeStatistics,
    RangeSummary,
    SearchResult,
    TraceError,
    TypeRects,
    WindowResult,
    _index_or_none,
)
from profiles import schema

if TYPE_CHECKING:
    import pandas as pd

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

_COLUMNS_DRAW = ("start", "cycles", "type")


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


class TraceWindow(RangeQueries):
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
        self._programs: ColumnTable | None = None
        self._host: ColumnTable | None = None
        self._lanes: dict[str, tuple[np.ndarray, tuple[str, ...]]] = {}
        self._stages: int | None = None

    # -- static tables ------------------------------------------------------------------------
    @property
    def programs(self) -> ColumnTable:
        """Program nodes (name, type, parent, op, cycles, tile_balance, bytes, sync) + their
        operation's name, type, layer (module path) and source (file and line, or ""), as
        numpy columns (row = program id)."""
        if self._programs is None:
            p = self.access.columns(
                "/programs/nodes",
                ["name", "type", "parent", "ipu", "op", "cycles", "tile_balance", "bytes", "sync"],
            )
            # the operation's source (file and line in the model's code) is optional (format 1.4)
            has_source = "/graph/operations/source" in self.access.profile
            wanted = ["name", "type", "layer"] + (["source"] if has_source else [])
            ops = self.access.columns("/graph/operations", wanted)
            op = p["op"]
            valid = (op >= 0) & (op < len(ops))
            columns = (("name", "op_name"), ("type", "op_type"), ("layer", "layer"))
            for src, dst in (*columns, ("source", "source")):
                col = np.full(len(p), "", dtype=object)
                if src in ops:
                    col[valid] = ops[src][op[valid]]
                p[dst] = col
            self._programs = p
        return self._programs

    def host_lane(self) -> ColumnTable:
        """The host's timeline of a call (profile format 1.2, ``/execution/host``), outside the
        device cycles: one row per event with ``lane`` (main / loader), ``kind`` (prepare, call,
        waitDevice, waitLoader), ``start`` and ``end`` in device-trace cycles (negative before
        the device starts) and ``samples``. Empty for profiles without it (format 1.0). Read
        once (the Pipeline's chart and both timelines ask for it; callers do not modify it)."""
        if self._host is None:
            self._host = self._read_host_lane()
        return self._host

    def _read_host_lane(self) -> ColumnTable:
        if "/execution/host" not in self.profile:
            e = np.zeros(0, dtype=np.int64)
            return ColumnTable(
                {
                    "lane": e.astype(object),
                    "kind": e.astype(object),
                    "start": e,
                    "end": e,
                    "samples": e,
                }
            )
        t = self.access.columns("/execution/host", ["lane", "kind", "start", "cycles", "samples"])
        lanes = np.asarray(HOST_LANES, dtype=object)
        kinds = np.asarray(HOST_EVENTS, dtype=object)
        start = t["start"].astype(np.int64)
        return ColumnTable(
            {
                "lane": lanes[t["lane"].astype(np.int64)],
                "kind": kinds[t["kind"].astype(np.int64)],
                "start": start,
                "end": start + t["cycles"].astype(np.int64),
                "samples": t["samples"].astype(np.int64),
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
        """Lane of every program id for the operation / program groupings (computed once)."""
        if group not in self._lanes:
            self._lanes[group] = program_lanes(self.programs, group, self.n_ipus)
        return self._lanes[group]

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
                lod_cache.prune(folder.parent)
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
                self._key: str | None = hashlib.sha1(json.dumps(ident).encode()).hexdigest()[:20]
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
        import pandas as pd  # a table for the caller; the trace's own reads are numpy

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
        prog = self.programs.row(int(data["program"]))
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
            "source": str(prog["source"]),
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
        names = np.r_[self.programs["name"].astype(str), np.array([""])]
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
    "CACHE_BLOCKS",
    "CACHE_BLOCK_ROWS",
    "CHUNK_ROWS",
    "COARSE_BUCKETS",
    "COARSE_ROWS_FALLBACK",
    "DESTINATIONS",
    "GROUP_MODES",
    "HOST_EVENTS",
    "HOST_LANES",
    "LEVEL_FACTOR",
    "LOD_CACHE_MIN_ROWS",
    "MAX_LANES",
    "NT",
    "PHASES",
    "STATISTICS_BY",
    "STEPS_PER_FINEST_BUCKET",
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
    "lod_cache_dir",
]
