"""``export-trace --max-events N``: a trace (Chrome trace-event JSON or Perfetto protobuf) of at
most N events, the steps merged where needed, saying what it merged.

A 10,000,000-step run is about 2 GB of JSON at one event per step, past what Perfetto's browser
build opens. This writer picks the finest of these levels whose event count fits N, counted in a
first streamed pass over the steps:

1. ``steps``: every step, as ``analyse export-trace`` writes it;
2. ``loop bodies``: on each IPU and lane, the consecutive steps of one loop body (same device
   iteration, micro-batch, pipeline stage and phase: one pass of the micro-batch loop) merged
   into one slice;
3. ``iterations``: the consecutive steps of one device iteration (host call) on a lane merged;
4. ``time windows``: each IPU's lanes cut into equal windows of the run, the steps starting in
   one window merged (this level always fits: an N too small for one slice per lane is refused
   in one sentence).

The budget is filled, not just respected: the level chosen is then cut at time windows (2**k
cycles, the smallest k whose count fits), so a run of loop bodies that needs a tenth of N is
shown in finer pieces until it uses between half and all of N. Halving the window at most
doubles the slices (a slice of one window splits into at most two), so the smallest window that
fits leaves no more than half of the budget unused; the counts of every window are taken in
the same counting pass (a histogram of the highest bit in which consecutive starts differ).

A merged slice spans its first step's start to its last step's end, is named after what it
merged (``micro-batch 3 (main): 240 steps``; a "run" of one step keeps the step's own name and
arguments) and carries ``steps`` (how many), ``cycles`` (their total: the busy cycles inside the
slice) and ``first`` (the first step's program) in its arguments. The memory counter of each IPU
gets one value per merged Compute slice: the largest total (always-live + not-always-live) among
its steps. The Chrome file's ``aggregation`` entry (a Perfetto trace: a track named after it) says
the level, what it merged and the counts.

Both passes read the step columns in chunks and keep one open run per IPU and lane between
chunks, so memory stays bounded whatever the number of steps.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from analyser.export.rowbytes import RowBytes, byte_table
from analyser.export.trace import (
    _CYCLES_NAME,
    _LANE_OF_TYPE,
    LANES,
    PerfettoTracks,
    ProgressFn,
    TraceExportError,
    _chrome_metadata,
    _lp,
    _Prepared,
    _Rows,
    _write_perfetto,
    analysis_source,
    chrome_header,
    chrome_steps,
    counter_packets,
    memory_counter,
    perfetto_tracks,
    slice_packets,
    slice_times,
)
from analyser.output import atomic_output
from profiles import schema

_COLS = ("program", "ipu", "start", "cycles", "type", "micro_batch", "stage", "phase", "iteration")
#: The levels, finest first: (name, key columns, what is merged).
LEVELS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("steps", (), "nothing: one event per step"),
    (
        "loop bodies",
        ("iteration", "micro_batch", "stage", "phase"),
        "the consecutive steps of one loop body (device iteration, micro-batch, stage, phase) "
        "on each IPU and lane",
    ),
    (
        "iterations",
        ("iteration",),
        "the consecutive steps of one device iteration (host call) on each IPU and lane",
    ),
    ("time windows", ("window",), "the steps starting in one time window on each IPU and lane"),
)
N_LANES = len(LANES)
#: DebugAnnotation.name (field 10) "steps" of a merged slice.
_STEPS_NAME = b"\x52\x05steps"


@dataclass
class _Runs:
    """Runs of one chunk (or the open runs carried between chunks): parallel arrays."""

    group: np.ndarray  # ipu * N_LANES + lane
    keys: np.ndarray  # (n, k) key columns
    t0: np.ndarray
    t1: np.ndarray
    count: np.ndarray
    cycles: np.ndarray
    first: np.ndarray  # program of the first step
    mem: np.ndarray  # largest memory total of its steps (-1: none)
    meta: np.ndarray  # (n, 4): iteration, micro_batch, stage, phase of the first step

    def take(self, idx: np.ndarray) -> _Runs:
        return _Runs(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    @property
    def size(self) -> int:
        return int(self.group.size)


def _chunk_runs(
    c: dict[str, np.ndarray], keys: tuple[str, ...], mem: np.ndarray, shift: int | None
) -> _Runs:
    """Maximal runs of consecutive steps with equal keys on each IPU and lane of a chunk (the
    ``window`` key: the time window of 2**shift cycles a step starts in)."""
    ipu = c["ipu"].astype(np.int64)
    group = ipu * N_LANES + _LANE_OF_TYPE[c["type"].astype(np.int64)]
    start = c["start"].astype(np.int64)
    cyc = c["cycles"].astype(np.int64)
    cols = {k: c[k].astype(np.int64) for k in ("iteration", "micro_batch", "stage", "phase")}
    if shift is not None:
        cols["window"] = start >> shift
    key = np.stack([cols[k] for k in keys], axis=1) if keys else np.arange(start.size)[:, None]
    order = np.lexsort((np.arange(start.size), group))  # by group, then time (rows are in time)
    g, k = group[order], key[order]
    new = np.ones(order.size, bool)
    new[1:] = (g[1:] != g[:-1]) | (k[1:] != k[:-1]).any(axis=1)
    at = np.flatnonzero(new)
    end = (start + cyc)[order]
    meta = np.stack([cols[x] for x in ("iteration", "micro_batch", "stage", "phase")], axis=1)
    return _Runs(
        g[at],
        k[at],
        np.minimum.reduceat(start[order], at),
        np.maximum.reduceat(end, at),
        np.diff(np.r_[at, order.size]),
        np.add.reduceat(cyc[order], at),
        c["program"].astype(np.int64)[order][at],
        np.maximum.reduceat(mem[order], at),
        meta[order][at],
    )


class _Stream:
    """Joins the runs of consecutive chunks: one open run per group is carried over."""

    def __init__(self) -> None:
        self.open: _Runs | None = None

    def feed(self, runs: _Runs) -> _Runs:
        """The runs closed by this chunk (the last run of each group stays open)."""
        if self.open is not None and self.open.size:
            o = self.open
            first = np.flatnonzero(np.r_[True, runs.group[1:] != runs.group[:-1]])
            pos = {int(gv): i for i, gv in enumerate(o.group)}
            cont = np.zeros(o.size, bool)
            for j in first:  # one per group of the chunk (at most IPUs x lanes)
                i = pos.get(int(runs.group[j]))
                if i is not None and np.array_equal(o.keys[i], runs.keys[j]):
                    cont[i] = True
                    runs.t0[j] = o.t0[i]
                    runs.t1[j] = max(runs.t1[j], o.t1[i])
                    runs.count[j] += o.count[i]
                    runs.cycles[j] += o.cycles[i]
                    runs.first[j] = o.first[i]
                    runs.mem[j] = max(runs.mem[j], o.mem[i])
                    runs.meta[j] = o.meta[i]
            closed_open = o.take(np.flatnonzero(~cont))
            # an open run of a group this chunk does not touch stays open
            untouched = ~np.isin(closed_open.group, runs.group)
            keep_open = closed_open.take(np.flatnonzero(untouched))
            closed_open = closed_open.take(np.flatnonzero(~untouched))
        else:
            closed_open, keep_open = None, None
        last = np.r_[runs.group[1:] != runs.group[:-1], True]
        closed = runs.take(np.flatnonzero(~last))
        opened = runs.take(np.flatnonzero(last))
        self.open = _concat([opened, keep_open]) if keep_open is not None else opened
        return _concat([closed_open, closed]) if closed_open is not None else closed

    def close(self) -> _Runs | None:
        o, self.open = self.open, None
        return o


def _concat(parts: list[_Runs | None]) -> _Runs:
    parts = [p for p in parts if p is not None]
    return _Runs(
        *(np.concatenate([getattr(p, f) for p in parts]) for f in _Runs.__dataclass_fields__)
    )


def _chunks(p: _Prepared, ranges: list[tuple[int, int]]):
    """The step columns the merging needs, chunk by chunk (iteration included)."""
    from analyser.export.trace import CHUNK_ROWS

    for lo, hi in ranges:
        for _, c in p.src.iter_steps(_COLS, start=lo, stop=hi, chunk_rows=CHUNK_ROWS):
            yield c


def _mem(p: _Prepared, c: dict[str, np.ndarray]) -> np.ndarray:
    return p.mem_of_prog[
        c["ipu"].astype(np.int64), np.clip(c["program"].astype(np.int64), 0, p.n_prog - 1)
    ]


#: Window sizes counted: 2**k cycles for k in [0, _SHIFTS); the last is wider than any run
#: (start cycles are int64), so it cuts nothing: the level's own slices.
_SHIFTS = 64


def _bit_length(x: np.ndarray) -> np.ndarray:
    """``int.bit_length`` of each non-negative int64 (0 for 0), vectorised."""
    e = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    # float64 rounds integers above 2**53 (a bit length one too large just below a power of 2)
    high = e > 53
    if high.any():
        e[high] -= (x[high] >> (e[high] - 1)) == 0
    return e


def _above(levels: np.ndarray) -> np.ndarray:
    """For each k < _SHIFTS, how many of ``levels`` (ints in [0, _SHIFTS]) exceed k."""
    hist = np.bincount(levels, minlength=_SHIFTS + 1)
    return hist[::-1].cumsum()[::-1][1 : _SHIFTS + 1]


def _count(p: _Prepared, ranges: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    """Events (slices, and the memory counter value of each Compute slice that has one) of
    each merging level cut at time windows of 2**k cycles, for every k < _SHIFTS: one pass.

    Within one IPU and lane the steps are in time order, so cutting at windows of 2**k cycles
    starts a new slice exactly where two consecutive starts differ in a bit at k or above, that
    is where the bit length of their XOR exceeds k. Each step gets the level of the cut before
    it (that bit length; _SHIFTS where the level itself starts a slice), and a histogram of
    those levels gives every window's count at once. A Compute slice has a counter value when
    one of its steps has a memory total: such a step is the first of its slice at window k when
    the largest cut level since the previous such step exceeds k."""
    levels = LEVELS[1:]
    events = {name: np.zeros(_SHIFTS, np.int64) for name, _, _ in levels}
    # per level and IPU-and-lane group: (last start, its keys) of the previous chunks, and for
    # Compute groups the largest cut level since the last step with a memory total
    last: dict[str, dict[int, tuple[int, tuple[int, ...]]]] = {n: {} for n, _, _ in levels}
    carry: dict[str, dict[int, int]] = {n: {} for n, _, _ in levels}
    for c in _chunks(p, ranges):
        n = c["start"].size
        if not n:
            continue
        group = c["ipu"].astype(np.int64) * N_LANES + _LANE_OF_TYPE[c["type"].astype(np.int64)]
        order = np.argsort(group, kind="stable")  # by group, then time (rows are in time)
        g = group[order]
        s = c["start"].astype(np.int64)[order]
        marked = _mem(p, c)[order] >= 0
        gnew = np.r_[True, g[1:] != g[:-1]]
        first = np.flatnonzero(gnew)
        ends = np.r_[first[1:], n]
        h = np.r_[0, _bit_length(s[1:] ^ s[:-1])]
        for name, keys, _ in levels:
            kcols = [c[k].astype(np.int64)[order] for k in keys if k != "window"]
            new = gnew.copy()
            for k in kcols:
                new[1:] |= k[1:] != k[:-1]
            cut = np.where(new, _SHIFTS, h)
            seen, since = last[name], carry[name]
            for j in first:  # one per IPU and lane of the chunk
                prev = seen.get(int(g[j]))
                if prev is not None and prev[1] == tuple(int(k[j]) for k in kcols):
                    # continues the slice the previous chunk left open
                    cut[j] = int(_bit_length(np.array([prev[0] ^ int(s[j])]))[0])
            total = _above(cut)
            for j, e in zip(first, ends):
                gj = int(g[j])
                seen[gj] = (int(s[e - 1]), tuple(int(k[e - 1]) for k in kcols))
                if gj % N_LANES:
                    continue  # only Compute slices carry the memory counter
                m = j + np.flatnonzero(marked[j:e])
                before = since.get(gj, _SHIFTS)
                if not m.size:
                    since[gj] = max(before, int(cut[j:e].max()))
                    continue
                lv = np.maximum.reduceat(cut[j : m[-1] + 1], np.r_[0, m[:-1] + 1 - j])
                lv[0] = max(lv[0], before)
                total += _above(lv)
                since[gj] = int(cut[m[-1] + 1 : e].max()) if m[-1] + 1 < e else 0
            events[name] += total
    return events


def _labels(runs: _Runs, level: str, rows: np.ndarray) -> list[str]:
    """The names of merged runs (one Python string each: their number is bounded by N)."""
    it, mb, phase = runs.meta[:, 0], runs.meta[:, 1], runs.meta[:, 3]
    out = []
    for j in rows:
        ph = schema.PHASES[int(phase[j])] if 0 <= phase[j] < len(schema.PHASES) else "?"
        if level == "loop bodies":
            what = (
                f"micro-batch {int(mb[j])} ({ph})"
                if mb[j] >= 0
                else f"iteration {int(it[j])} ({ph})"
            )
        elif level == "iterations":
            what = f"iteration {int(it[j])}"
        else:
            what = "window"
        out.append(f"{what}: {int(runs.count[j]):,} steps")
    return out


def _emit_perfetto(p: _Prepared, tracks: PerfettoTracks, runs: _Runs, fh_raw, level: str) -> None:
    """Merged slices (begin / end packets with ``steps`` and ``cycles`` annotations) and the
    memory counter values of ``runs`` as Perfetto TracePackets."""
    n = runs.size
    if not n:
        return
    ipu, lane = runs.group // N_LANES, runs.group % N_LANES
    single = runs.count == 1
    names = np.empty(n, object)
    names[single] = np.asarray(p.names, object)[np.clip(runs.first[single], 0, p.n_prog - 1)]
    names[~single] = _labels(runs, level, np.flatnonzero(~single))
    tab = byte_table([_lp(b"\xba\x01", str(x).encode()) for x in names])
    cat = byte_table([_lp(b"\xb2\x01", b"merged")])
    ns = 1e9 / p.clock
    t0 = np.rint(runs.t0 * ns).astype(np.int64)
    t1 = np.rint(runs.t1 * ns).astype(np.int64)
    r = RowBytes(n)
    slice_packets(
        r,
        t0,
        t1,
        tracks.lanes[ipu, lane],
        [(_STEPS_NAME, runs.count), (_CYCLES_NAME, runs.cycles)],
        (cat, np.zeros(n, np.int64)),
        (tab, np.arange(n)),
    )
    counter_packets(
        r, t0, tracks.memory[ipu], np.maximum(runs.mem, 0), (lane == 0) & (runs.mem >= 0)
    )
    for block in r.blocks(workers=1):
        fh_raw.write(block)


def _emit(p: _Prepared, runs: _Runs, fh_raw, level: str) -> None:
    """Merged slices (and memory counter values) of ``runs`` as Chrome events."""
    n = runs.size
    if not n:
        return
    names = byte_table([json.dumps(x).encode() for x in p.names])
    single = runs.count == 1
    ipu = runs.group // N_LANES
    lane = runs.group % N_LANES
    it, mb = runs.meta[:, 0], runs.meta[:, 1]
    labels = [json.dumps(t).encode() for t in _labels(runs, level, np.flatnonzero(~single))]
    label_idx = np.zeros(n, np.int64)
    label_idx[~single] = np.arange(int((~single).sum()))
    label_tab = byte_table(labels or [b'""'])
    first = np.clip(runs.first, 0, p.n_prog - 1)
    r = RowBytes(n)
    r.const(b',\n{"name":')
    r.lookup_table(*names, first, single)
    r.lookup_table(*label_tab, label_idx, ~single)
    r.emit(
        b',"ph":"X","cat":"merged","pid":',
        ipu,
        b',"tid":',
        lane,
        *slice_times(p.us(runs.t0), p.us(runs.t1 - runs.t0)),
        b',"args":{"steps":',
        runs.count,
        b',"cycles":',
        runs.cycles,
        b',"first":',
        (names, first),
        b',"iteration":',
        it,
        b',"micro_batch":',
        mb,
        b"}}",
    )
    sel = np.flatnonzero((lane == 0) & (runs.mem >= 0))
    m = memory_counter(ipu[sel], p.us(runs.t0[sel]), runs.mem[sel])
    for block in (*r.blocks(workers=1), *m.blocks(workers=1)):
        fh_raw.write(block)


def export_aggregated(
    source: Any,
    out: str | os.PathLike[str],
    max_events: int,
    progress: ProgressFn | None = None,
    fmt: str = "chrome",
) -> dict:
    """Write a trace of ``source`` (an open :class:`analyser.core.Analysis`, or a profile
    path) of at most ``max_events`` events (module docstring; ``fmt`` chrome or perfetto);
    returns what was merged (Chrome: the file's ``aggregation`` entry; Perfetto: a track named
    after it)."""
    if fmt not in ("chrome", "perfetto"):
        raise TraceExportError(f"unknown trace format {fmt!r}; choose chrome or perfetto.")
    out = Path(out)
    with analysis_source(source) as src:
        p = _Prepared(src)
        ranges = p.ranges(None)
        n_steps = src.n_steps
        tracks = perfetto_tracks(p) if fmt == "perfetto" else None
        # names of processes and lanes (Chrome) or track descriptors (Perfetto), and the info track
        meta_events = len(_chrome_metadata(p)) if tracks is None else _n_tracks(p) + 1
        budget = max_events - meta_events
        groups = p.n_ipus * (N_LANES + 1)  # lanes + the memory counter
        if budget < groups:
            raise TraceExportError(
                f"--max-events {max_events:,} is too small for this trace: its {p.n_ipus} IPU(s) "
                f"need at least {meta_events + groups:,} events (names of processes and lanes, "
                "and one slice per lane)."
            )
        level, shift, events = _choose(p, ranges, n_steps, budget, fmt)
        merged = next(w for n, _, w in LEVELS if n == level)
        if shift is not None and level != "time windows":
            merged += f", cut at time windows of {2**shift:,} cycles"
        info = {"level": level, "merged": merged, "steps": n_steps, "max_events": max_events}
        if shift is not None:
            info["window_cycles"] = 2**shift
        with atomic_output(out, "w" if tracks is None else "wb") as fh:
            if tracks is None:
                chrome_header(fh, str(src.path), p.clock, f"{src.path.name} ({level})")
                fh.write(",\n".join(_chrome_metadata(p)))
                fh.flush()
                raw = fh.buffer
            else:
                raw = fh
                if level != "steps":
                    fh.write(tracks.descriptors)
            if level == "steps" and tracks is None:
                chrome_steps(p, fh, ranges, _Rows(progress, n_steps))
            elif level == "steps":
                _write_perfetto(p, fh, ranges, "", _Rows(progress, n_steps))
            else:

                def emit(runs: _Runs) -> None:
                    if tracks is None:
                        _emit(p, runs, raw, level)
                    else:
                        _emit_perfetto(p, tracks, runs, raw, level)

                events = _write_merged(p, emit, ranges, level, shift, progress, n_steps)
            info["events"] = meta_events + events
            if tracks is None:
                fh.write('\n],"aggregation":' + json.dumps(info) + "}\n")
            else:
                fh.write(_info_track(info))
    return info


def _n_tracks(p: _Prepared) -> int:
    kinds = len(p.counters.kinds) if p.counters is not None else 0
    return p.n_ipus * (1 + N_LANES + 1 + kinds)


def _info_track(info: dict) -> bytes:
    """One named track saying what was merged (Perfetto has no file-level notes)."""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    b = TraceProtoBuilder()
    pk = b.add_packet()
    pk.track_descriptor.uuid = 900000
    pk.track_descriptor.name = (
        f"aggregated ({info['level']}): {info['events']:,} events for {info['steps']:,} steps; "
        f"merged {info['merged']}"
    )
    return b.serialize()


def _choose(
    p: _Prepared, ranges: list[tuple[int, int]], n_steps: int, budget: int, fmt: str
) -> tuple[str, int | None, int]:
    """(the finest level that fits the budget, the time window of 2**shift cycles it is cut
    at to fill the budget (None: not cut), its events) from a counting pass."""
    if n_steps <= budget:
        events = _plain_events(p, ranges, fmt)
        if events <= budget:
            return "steps", None, events
    counts = _count(p, ranges)
    for name, _keys, _what in LEVELS[1:]:
        t = counts[name]
        if t[-1] > budget:
            continue
        k = int(np.argmax(t <= budget))  # the smallest window that fits (t falls with k)
        if name != "time windows" and t[k] == t[-1]:
            return name, None, int(t[k])  # no window cuts a slice: the level as it is
        return name, k, int(t[k])
    raise AssertionError("one slice per IPU and lane always fits")  # checked by the caller


def _plain_events(p: _Prepared, ranges: list[tuple[int, int]], fmt: str) -> int:
    """Events of the plain export: one per step plus the memory counters' changes (the
    by-kind split: one stacked Chrome event, or one Perfetto packet per kind)."""
    from analyser.export.trace import _mem_changes

    n = 0
    last = np.full(p.n_ipus, -1, np.int64)
    for c in p.chunks(ranges):
        change, _ = _mem_changes(p, c["ipu"].astype(np.int64), c["program"].astype(np.int64), last)
        kinds = 0 if p.counters is None else 1 if fmt == "chrome" else len(p.counters.kinds)
        n += c["start"].size + int(change.sum()) * (1 + kinds)
    return n


def _write_merged(
    p: _Prepared,
    emit,
    ranges: list[tuple[int, int]],
    level: str,
    shift: int | None,
    progress: ProgressFn | None,
    n_steps: int,
) -> int:
    """Stream the merged runs of ``level`` (cut at time windows of 2**shift cycles unless
    None) to ``emit``; returns the events written."""
    keys = next(k for n, k, _ in LEVELS if n == level)
    if shift is not None and "window" not in keys:
        keys = (*keys, "window")
    stream = _Stream()
    events = 0
    done = 0

    def out(runs: _Runs) -> int:
        emit(runs)
        return runs.size + int(((runs.group % N_LANES == 0) & (runs.mem >= 0)).sum())

    for c in _chunks(p, ranges):
        if not c["start"].size:
            continue
        events += out(stream.feed(_chunk_runs(c, keys, _mem(p, c), shift)))
        done += c["start"].size
        if progress:
            progress(done, n_steps)
    last = stream.close()
    if last is not None:
        events += out(last)
    return events
