"""Trace export: Chrome trace-event JSON ("X" complete events per step and IPU, "M" metadata
naming processes and threads, "C" counters for memory) and Perfetto protobuf (track descriptors,
slice begin / end and counter events built with ``perfetto.trace_builder``).

Layout of the exported trace (both formats):

* one process per IPU ("IPU 0", "IPU 1", ...);
* inside it one thread (track) per lane: Compute (OnTileExecute), Exchange (DoExchange,
  GlobalExchange), Sync (Sync, SyncAns), Host I/O (StreamCopyBegin / Mid / End), so steps that
  overlap (stream copies on I/O tiles beside compute) never break slice nesting;
* a "memory" counter per IPU: always-live + not-always-live bytes of the liveness step each
  executed program belongs to, emitted only when it changes; and the not-always-live bytes of
  that step by variable kind (activation, gradient, stash, temporary, ...; ``other`` for what
  the variables do not explain): one stacked "C" event (Chrome) or one counter track per kind
  (Perfetto), from :mod:`analyser.export.memory_counters`;
* time in microseconds (Chrome) / nanoseconds (Perfetto) at the target clock, with the cycle
  figures in the event arguments.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, overload

import numpy as np

from analyser.core.source import Source
from analyser.export.memory_counters import counter_table
from analyser.export.rowbytes import RowBytes, byte_table, varint, varint_lengths
from analyser.output import atomic_output
from profiles import schema
from profiles.errors import UserFacingError

#: Lane (thread) of each step type (index = PROGRAM_TYPES code).
LANES: tuple[str, ...] = ("Compute", "Exchange", "Sync", "Host I/O")
_LANE_OF_TYPE = np.zeros(len(schema.PROGRAM_TYPES), np.int64)
for _name, _lane in (
    ("OnTileExecute", 0),
    ("DoExchange", 1),
    ("GlobalExchange", 1),
    ("Sync", 2),
    ("SyncAns", 2),
    ("StreamCopyBegin", 3),
    ("StreamCopyMid", 3),
    ("StreamCopyEnd", 3),
):
    _LANE_OF_TYPE[schema.PROGRAM_TYPES.index(_name)] = _lane

CHUNK_ROWS = 1 << 17
_COLS = (
    "program",
    "ipu",
    "start",
    "cycles",
    "type",
    "micro_batch",
    "stage",
    "phase",
    "bytes_in",
    "bytes_out",
    "dest",
)

ProgressFn = Callable[[int, int], None]


class TraceExportError(UserFacingError):
    """The trace cannot be exported (no execution, bad format)."""


def lane_names() -> tuple[str, ...]:
    return LANES


class _Prepared:
    """Everything small needed to export: names, memory per program, row ranges."""

    def __init__(self, src: Source) -> None:
        if not src.has_execution:
            raise TraceExportError(
                f"profile {src.path} has no execution trace (the program does not fit in memory)."
            )
        meta = src.meta
        self.src = src
        self.n_ipus = int(meta["num_ipus"])
        self.clock = float(meta["clock_hz"])
        # columns read straight into numpy (Source.table would import pandas: 0.2-0.3 s)
        self.names = [
            x.decode("utf-8") if isinstance(x, bytes) else str(x)
            for x in src.array("/programs/nodes/name").tolist()
        ]
        self.n_prog = len(self.names)
        # memory counter: program -> liveness step (first occurrence) per IPU
        self.mem_of_prog = np.full((self.n_ipus, self.n_prog), -1, np.int64)
        lstep_of_prog = np.full((self.n_ipus, self.n_prog), -1, np.int64)
        try:
            prog = src.array("/liveness/steps/program").astype(np.int64)
            lipu = src.array("/liveness/steps/ipu").astype(np.int64)
            if prog.size != lipu.size:
                raise TraceExportError("liveness step columns of different lengths")
            nal = src.array("/liveness/not_always_live").astype(np.int64)
            al = src.array("/liveness/always_live").astype(np.int64)
            for i in range(self.n_ipus):
                sel = np.flatnonzero(
                    ((lipu == i) | (lipu < 0)) & (prog >= 0) & (prog < self.n_prog)
                )
                # first occurrence wins: assign in reverse order
                sel = sel[::-1]
                self.mem_of_prog[i, prog[sel]] = al[i] + nal[i, sel]
                lstep_of_prog[i, prog[sel]] = sel
        except UserFacingError:
            pass
        # not-always-live bytes by variable kind (memory_counters.py): counters change where
        # the row of distinct values changes (the total's changes are among them)
        self.counters = counter_table(src, self.n_ipus, self.n_prog, lstep_of_prog)
        self.key_of_prog = self.counters.row_of_prog if self.counters else self.mem_of_prog
        self.offsets = src.ipu_offsets()
        self.run_starts = (
            src.array("/execution/run_starts").astype(np.int64)
            if src.has("/execution/run_starts")
            else np.zeros(1, np.int64)
        )

        # the host's timeline (format 1.2): lane, kind, start (device-trace cycles, negative
        # before the device starts), cycles, samples. Every timestamp is shifted by the host's
        # lead, so time 0 is the first event (Perfetto's timestamps are unsigned)
        self.host: dict[str, np.ndarray] = {}
        if src.has("/execution/host"):
            self.host = {
                k: src.array(f"/execution/host/{k}").astype(np.int64)
                for k in ("lane", "kind", "start", "cycles", "samples")
            }
        lead = int(self.host["start"].min()) if self.host and self.host["start"].size else 0
        self.host_shift = max(0, -lead)
        #: cycles added to every timestamp; the host events are written only with the shift
        #: (``with_host``): the merged and diff exports keep the device's time 0 and no host
        self.shift = 0
        self.with_host = False

    def host_rows(self, run: int | None) -> np.ndarray:
        """Indices of the host events of one run (by start, as the steps), or of all."""
        if not self.host:
            return np.zeros(0, np.int64)
        start = self.host["start"]
        keep = np.ones(start.size, bool)
        if run is not None:
            if run > 0:
                keep &= start >= int(self.run_starts[run])
            if run + 1 < self.run_starts.size:
                keep &= start < int(self.run_starts[run + 1])
        return np.flatnonzero(keep)

    @overload
    def us(self, cycles: np.ndarray) -> np.ndarray: ...
    @overload
    def us(self, cycles: np.integer) -> np.floating: ...
    def us(self, cycles: np.ndarray | np.integer) -> np.ndarray | np.floating:
        """Cycles as microseconds (an array, or one NumPy integer)."""
        return cycles.astype(np.float64) * (1e6 / self.clock)

    def ranges(self, run: int | None) -> list[tuple[int, int]]:
        """Row ranges [lo, hi) per IPU for one run (or the whole trace)."""
        out = []
        for i in range(self.n_ipus):
            lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
            if run is not None and hi > lo:
                starts = np.asarray(self.src.profile.step_starts(i))
                # the first run also takes any step before it, the last one any step after
                a = int(self.run_starts[run]) if run > 0 else None
                b = int(self.run_starts[run + 1]) if run + 1 < self.run_starts.size else None
                lo2 = lo if a is None else lo + int(np.searchsorted(starts, a, "left"))
                hi2 = hi if b is None else lo + int(np.searchsorted(starts, b, "left"))
                lo, hi = lo2, hi2
            out.append((lo, hi))
        return out

    def chunks(self, ranges: list[tuple[int, int]]) -> Iterator[dict[str, np.ndarray]]:
        for lo, hi in ranges:
            for _, c in self.src.iter_steps(_COLS, start=lo, stop=hi, chunk_rows=CHUNK_ROWS):
                yield c


#: Chunks formatted at once by worker threads (numpy releases the GIL in its loops, so the
#: chunks' formatting runs on both cores while the main thread reads the next columns and
#: writes the finished bytes, in order; at most this many + 1 chunks are held in memory).
WORKERS = 2

FormatFn = Callable[[dict[str, np.ndarray], np.ndarray, np.ndarray], list[np.ndarray]]


def _pipelined(
    p: _Prepared, ranges: list[tuple[int, int]], fmt: FormatFn
) -> Iterator[tuple[int, list[np.ndarray]]]:
    """``(rows, byte blocks)`` of each chunk of steps, in order: the columns are read and the
    memory counter's changes found (sequential: the last value carries across chunks) on the
    calling thread, and ``fmt(columns, change, mem)`` runs on :data:`WORKERS` threads."""
    last_mem = np.full(p.n_ipus, -1, np.int64)

    def jobs() -> Iterator[tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]]:
        for c in p.chunks(ranges):
            if c["start"].size == 0:
                continue
            ipu = c["ipu"].astype(np.int64)
            prog = c["program"].astype(np.int64)
            change, mem = _mem_changes(p, ipu, prog, last_mem)
            yield c, change, mem

    if WORKERS <= 1:
        for c, change, mem in jobs():
            yield c["start"].size, fmt(c, change, mem)
        return
    pending: deque = deque()
    with ThreadPoolExecutor(WORKERS) as ex:
        for c, change, mem in jobs():
            pending.append((c["start"].size, ex.submit(fmt, c, change, mem)))
            if len(pending) > WORKERS:
                n, fut = pending.popleft()
                yield n, fut.result()
        while pending:
            n, fut = pending.popleft()
            yield n, fut.result()


@dataclass
class _Rows:
    """The steps written so far (``done``) of ``total``, told to ``progress`` as they go: one
    counter across the files of an export split by run."""

    progress: ProgressFn | None = None
    total: int = 0
    done: int = 0

    def write(
        self,
        p: _Prepared,
        ranges: list[tuple[int, int]],
        fmt: FormatFn,
        write: Callable[[Any], Any],
    ) -> None:
        """Write with ``write`` the byte blocks ``fmt`` makes of the steps of ``ranges``
        (:func:`_pipelined`), counting them."""
        for n, blocks in _pipelined(p, ranges, fmt):
            for block in blocks:
                write(block)
            self.done += n
            if self.progress:
                self.progress(self.done, self.total)


# ---------------------------------------------------------------------------------------------
# Chrome trace-event JSON
# ---------------------------------------------------------------------------------------------


def _chrome_metadata(p: _Prepared, pid0: int = 0, prefix: str = "") -> list[str]:
    """Process and thread names of the IPUs (processes ``pid0 + i`` named ``prefix + 'IPU i'``)."""
    ev = []
    for i in range(p.n_ipus):
        pid = pid0 + i
        ev.append(
            json.dumps(
                {
                    "name": "process_name",
                    "ph": "M",
                    "pid": pid,
                    "args": {"name": f"{prefix}IPU {i}"},
                }
            )
        )
        ev.append(
            json.dumps(
                {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}
            )
        )
        for t, lane in enumerate(LANES):
            ev.append(
                json.dumps(
                    {"name": "thread_name", "ph": "M", "pid": pid, "tid": t, "args": {"name": lane}}
                )
            )
            ev.append(
                json.dumps(
                    {
                        "name": "thread_sort_index",
                        "ph": "M",
                        "pid": pid,
                        "tid": t,
                        "args": {"sort_index": t},
                    }
                )
            )
    return ev


def _mem_changes(
    p: _Prepared, ipu: np.ndarray, prog: np.ndarray, last_mem: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Memory counter of a chunk: (rows where the IPU's value changes, value of every row).

    The value of a row is the always-live + not-always-live bytes of the liveness step of its
    program (-1 when the program has none); ``last_mem`` (per IPU, updated) carries the last
    key across chunks, so counters are emitted only when they change (the key: the row of the
    by-kind counter values, :attr:`_Prepared.key_of_prog`, else the total itself).
    """
    prog = np.clip(prog, 0, p.n_prog - 1)
    mem = p.mem_of_prog[ipu, prog]
    key = p.key_of_prog[ipu, prog]
    change = np.zeros(mem.size, bool)
    idx = np.flatnonzero((mem >= 0) & (key >= 0))
    if idx.size:
        mv, mi = key[idx], ipu[idx]
        prev = np.concatenate(([-2], mv[:-1]))
        newipu = np.concatenate(([True], mi[1:] != mi[:-1]))
        ch = (mv != prev) | newipu
        ch[newipu] &= mv[newipu] != last_mem[mi[newipu]]
        change[idx[ch]] = True
        last = np.flatnonzero(np.concatenate((mi[1:] != mi[:-1], [True])))
        last_mem[mi[last]] = mv[last]
    return change, mem


def _json_table(values) -> tuple[np.ndarray, np.ndarray]:
    return byte_table([json.dumps(str(v)).encode() for v in values])


def slice_times(ts: np.ndarray, dur: np.ndarray) -> tuple:
    """The ``"ts"`` and ``"dur"`` fields (microseconds) of Chrome "X" events, for
    :meth:`RowBytes.emit`."""
    return (b',"ts":', ts, b',"dur":', dur)


def memory_counter(pid: np.ndarray, ts: np.ndarray, values: np.ndarray) -> RowBytes:
    """Chrome "C" events of the per-IPU ``memory`` counter (bytes) at ``ts`` microseconds."""
    return RowBytes(len(pid)).emit(
        b',\n{"name":"memory","ph":"C","pid":',
        pid,
        b',"ts":',
        ts,
        b',"args":{"bytes":',
        values,
        b"}}",
    )


def chrome_header(fh: IO[str], source: str, clock: float, title: str) -> None:
    """The start of a Chrome trace-event JSON file as analyse writes it (up to the events)."""
    fh.write('{"displayTimeUnit":"ns","otherData":')
    fh.write(
        json.dumps(
            {
                "source": source,
                "clock_hz": clock,
                "title": title,
                "time": "microseconds at the target clock; cycles in args",
            }
        )
    )
    fh.write(',"traceEvents":[\n')


def _write_chrome(
    p: _Prepared,
    fh: IO[str],
    ranges: list[tuple[int, int]],
    title: str,
    rows: _Rows,
    run: int | None = None,
) -> None:
    """Chrome trace-event JSON; each chunk of steps is formatted by :class:`RowBytes` (numpy),
    one "X" event per step and a "C" memory counter event where the value changes."""
    chrome_header(fh, str(p.src.path), p.clock, title)
    fh.write(",\n".join(_chrome_metadata(p) + _chrome_host(p, run)))
    chrome_steps(p, fh, ranges, rows)
    fh.write("\n]}\n")


def _chrome_host(p: _Prepared, run: int | None) -> list[str]:
    """The host's timeline as its own process ("Host", after the IPUs) with a thread per host
    lane (main, loader): one "X" event per preparation, call and wait. Empty without one."""
    if not (p.host and p.with_host):
        return []
    pid = p.n_ipus
    ev = [
        json.dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "Host"}}),
        json.dumps(
            {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}
        ),
    ]
    for t, lane in enumerate(schema.HOST_LANES):
        ev.append(
            json.dumps(
                {"name": "thread_name", "ph": "M", "pid": pid, "tid": t, "args": {"name": lane}}
            )
        )
    h = p.host
    for j in p.host_rows(run).tolist():
        start, cycles = int(h["start"][j]), int(h["cycles"][j])
        ev.append(
            json.dumps(
                {
                    "name": schema.HOST_EVENTS[int(h["kind"][j])],
                    "ph": "X",
                    "cat": "host",
                    "pid": pid,
                    "tid": int(h["lane"][j]),
                    "ts": float(p.us(np.int64(start + p.shift))),
                    "dur": float(p.us(np.int64(cycles))),
                    "args": {
                        "cycles": cycles,
                        "start_cycle": start,
                        "samples": int(h["samples"][j]),
                    },
                }
            )
        )
    return ev


def chrome_steps(
    p: _Prepared,
    fh: IO[str],
    ranges: list[tuple[int, int]],
    rows: _Rows | None = None,
    pid0: int = 0,
) -> None:
    """The steps of ``ranges`` as Chrome events, each preceded by ``,\\n`` (IPU i is process
    ``pid0 + i``), counted in ``rows``."""
    names = _json_table(p.names)
    # small fields looked up whole: category + pid + tid by (type, IPU), the phase with its key
    cat_pid_tid = byte_table(
        [
            f'{json.dumps(t)},"pid":{pid0 + i},"tid":{_LANE_OF_TYPE[k]}'.encode()
            for k, t in enumerate(schema.PROGRAM_TYPES)
            for i in range(p.n_ipus)
        ]
    )
    phases = byte_table([f',"phase":{json.dumps(ph)}'.encode() for ph in schema.PHASES])
    dests = _json_table(schema.DESTINATIONS)
    kind_args = None
    if p.counters is not None:
        kind_args = byte_table(
            [
                json.dumps(
                    dict(zip(p.counters.kinds, map(int, row))), separators=(",", ":")
                ).encode()
                for row in p.counters.values
            ]
        )
    fh.flush()
    raw = fh.buffer if hasattr(fh, "buffer") else None

    def fmt(c: dict[str, np.ndarray], change: np.ndarray, mem: np.ndarray) -> list[np.ndarray]:
        n = c["start"].size
        ipu = c["ipu"].astype(np.int64)
        typ = c["type"].astype(np.int64)
        prog = c["program"].astype(np.int64)
        ts = p.us(c["start"].astype(np.int64) + p.shift)
        r = RowBytes(n).emit(
            b',\n{"name":',
            (names, np.clip(prog, 0, p.n_prog - 1)),
            b',"ph":"X","cat":',
            (cat_pid_tid, typ * p.n_ipus + ipu),
            *slice_times(ts, p.us(c["cycles"])),
            b',"args":{"cycles":',
            c["cycles"],
            b',"start_cycle":',
            c["start"],
            b',"micro_batch":',
            c["micro_batch"],
            b',"stage":',
            c["stage"],
            (phases, c["phase"]),
        )
        moved = (c["bytes_in"] != 0) | (c["bytes_out"] != 0)
        r.const(b',"bytes_in":', moved)
        r.decimal(c["bytes_in"], moved)
        r.const(b',"bytes_out":', moved)
        r.decimal(c["bytes_out"], moved)
        r.const(b',"dest":', moved)
        r.lookup_table(*dests, c["dest"], moved)
        r.const(b"}}")
        sel = np.flatnonzero(change)
        m = memory_counter(ipu[sel] + pid0, ts[sel], mem[sel])
        blocks = [*r.blocks(workers=1), *m.blocks(workers=1)]
        if kind_args is not None:  # not-always-live bytes by variable kind (stacked)
            key = p.key_of_prog[ipu[sel], np.clip(prog[sel], 0, p.n_prog - 1)]
            k = RowBytes(sel.size).emit(
                b',\n{"name":"not-always-live memory by kind (bytes)","ph":"C","pid":',
                ipu[sel] + pid0,
                b',"ts":',
                ts[sel],
                b',"args":',
                (kind_args, key),
                b"}",
            )
            blocks += k.blocks(workers=1)
        return blocks

    write = raw.write if raw is not None else lambda block: fh.write(block.tobytes().decode())
    (rows or _Rows()).write(p, ranges, fmt, write)


# ---------------------------------------------------------------------------------------------
# Perfetto protobuf
# ---------------------------------------------------------------------------------------------

_SEQ = 7
# TracePacket fields (perfetto/trace/trace_packet.proto): timestamp 8, trusted_packet_sequence_id
# 10, track_event 11; TrackEvent (perfetto/trace/track_event/track_event.proto):
# debug_annotations 4, type 9, track_uuid 11, categories 22, name 23, counter_value 30;
# DebugAnnotation: int_value 4, name 10. Fields in number order, as protobuf serialises them.
_PACKET = b"\x0a"  # Trace.packet (field 1, length-delimited)
_TS = b"\x40"
_SEQ_ID = b"\x50" + bytes([_SEQ])
_TRACK_EVENT = b"\x5a"
_TYPE_BEGIN, _TYPE_END, _TYPE_COUNTER = b"\x48\x01", b"\x48\x02", b"\x48\x04"
_UUID = b"\x58"
_CYCLES_NAME = b"\x52\x06cycles"


def _lp(field: bytes, payload: bytes) -> bytes:
    """A length-delimited field."""
    return field + varint(len(payload)) + payload


def slice_packets(
    r: RowBytes,
    t0: np.ndarray,
    t1: np.ndarray,
    uuid: np.ndarray,
    annotations: list[tuple[bytes, np.ndarray]],
    category: tuple[tuple[np.ndarray, np.ndarray], np.ndarray],
    name: tuple[tuple[np.ndarray, np.ndarray], np.ndarray],
) -> None:
    """A slice begin TracePacket (integer debug annotations: (encoded name field, values);
    category and name from byte tables of encoded fields, by index) and its end packet."""
    (cat_tab, cat_idx), (name_tab, name_idx) = category, name
    lu = varint_lengths(uuid)
    da = [(field, v, 1 + varint_lengths(v) + len(field)) for field, v in annotations]
    te_len = 2 + 1 + lu + cat_tab[1][cat_idx] + name_tab[1][name_idx]
    for _, _, n in da:
        te_len = te_len + 1 + varint_lengths(n) + n
    _track_event_head(r, t0, te_len)
    for field, v, n in da:
        r.const(b"\x22")
        r.varint(n)
        r.const(b"\x20")
        r.varint(v)
        r.const(field)
    r.const(_TYPE_BEGIN + _UUID)
    r.varint(uuid)
    r.lookup_table(*cat_tab, cat_idx)
    r.lookup_table(*name_tab, name_idx)
    te2 = 2 + 1 + lu
    _track_event_head(r, t1, te2)
    r.const(_TYPE_END + _UUID)
    r.varint(uuid)


def _track_event_head(
    r: RowBytes, t: np.ndarray, te_len: np.ndarray, mask: np.ndarray | None = None
) -> None:
    """A TracePacket's head up to its TrackEvent's body: the packet's length, its timestamp
    ``t``, the sequence id and the TrackEvent's length ``te_len`` (on the rows of ``mask``)."""
    r.const(_PACKET, mask)
    r.varint(1 + varint_lengths(t) + 2 + 1 + varint_lengths(te_len) + te_len, mask)
    r.const(_TS, mask)
    r.varint(t, mask)
    r.const(_SEQ_ID + _TRACK_EVENT, mask)
    r.varint(te_len, mask)


def counter_packets(
    r: RowBytes, t0: np.ndarray, uuid: np.ndarray, value: np.ndarray, mask: np.ndarray
) -> None:
    """A counter TracePacket (timestamp, track uuid, int value) on the rows of ``mask``."""
    te = 2 + 1 + varint_lengths(uuid) + 2 + varint_lengths(value)
    _track_event_head(r, t0, te, mask)
    r.const(_TYPE_COUNTER + _UUID, mask)
    r.varint(uuid, mask)
    r.const(b"\xf0\x01", mask)
    r.varint(value, mask)


@dataclass(frozen=True)
class PerfettoTracks:
    """The track descriptors of a Perfetto trace (serialised) and the uuids of its tracks."""

    descriptors: bytes
    lanes: np.ndarray  # (IPUs, lanes)
    memory: np.ndarray  # (IPUs,)
    kinds: np.ndarray  # (IPUs, by-kind counters)


def perfetto_tracks(p: _Prepared) -> PerfettoTracks:
    """One process per IPU with a thread per lane, a memory counter track and, when the
    profile has the split, a not-always-live counter track per variable kind."""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    b = TraceProtoBuilder()
    lane_uuid = np.zeros((p.n_ipus, len(LANES)), np.int64)
    mem_uuid = np.zeros(p.n_ipus, np.int64)
    kinds = p.counters.kinds if p.counters is not None else ()
    kind_uuid = np.zeros((p.n_ipus, max(1, len(kinds))), np.int64)
    for i in range(p.n_ipus):
        pt = b.add_packet()
        pt.track_descriptor.uuid = 1000 + i
        pt.track_descriptor.process.pid = i + 1
        pt.track_descriptor.process.process_name = f"IPU {i}"
        for t, lane in enumerate(LANES):
            uuid = 100000 + i * 100 + t
            lane_uuid[i, t] = uuid
            pk = b.add_packet()
            pk.track_descriptor.uuid = uuid
            pk.track_descriptor.thread.pid = i + 1
            pk.track_descriptor.thread.tid = (i + 1) * 100 + t
            pk.track_descriptor.thread.thread_name = lane
        pk = b.add_packet()
        mem_uuid[i] = 200000 + i
        pk.track_descriptor.uuid = int(mem_uuid[i])
        pk.track_descriptor.parent_uuid = 1000 + i
        pk.track_descriptor.name = f"IPU {i} memory (bytes)"
        pk.track_descriptor.counter.unit_name = "bytes"
        for k, kind in enumerate(kinds):
            pk = b.add_packet()
            kind_uuid[i, k] = 300000 + i * 100 + k
            pk.track_descriptor.uuid = int(kind_uuid[i, k])
            pk.track_descriptor.parent_uuid = 1000 + i
            pk.track_descriptor.name = f"IPU {i} not-always-live: {kind} (bytes)"
            pk.track_descriptor.counter.unit_name = "bytes"
    return PerfettoTracks(b.serialize(), lane_uuid, mem_uuid, kind_uuid)


def _write_perfetto(
    p: _Prepared,
    fh: IO[bytes],
    ranges: list[tuple[int, int]],
    title: str,
    rows: _Rows,
    run: int | None = None,
) -> None:
    """Perfetto protobuf: track descriptors through ``perfetto.trace_builder``, then per step a
    slice begin (name, category = step type, cycles as a debug annotation) and end packet on
    its lane's track, plus a memory counter packet where the value changes. The step packets
    are encoded from the numpy columns by :class:`RowBytes` (the same bytes protobuf would
    serialise; tests compare them)."""
    tracks = perfetto_tracks(p)
    fh.write(tracks.descriptors)
    fh.write(_perfetto_host(p, run))
    lane_uuid, mem_uuid, kind_uuid = tracks.lanes, tracks.memory, tracks.kinds
    del title
    # categories (the step type) and name (the program) fields of the slice begin events
    cats = byte_table([_lp(b"\xb2\x01", t.encode()) for t in schema.PROGRAM_TYPES])
    names = byte_table([_lp(b"\xba\x01", nm.encode()) for nm in p.names])
    ns = 1e9 / p.clock

    def fmt(c: dict[str, np.ndarray], change: np.ndarray, mem: np.ndarray) -> list[np.ndarray]:
        n = c["start"].size
        ipu = c["ipu"].astype(np.int64)
        typ = c["type"].astype(np.int64)
        prog = np.clip(c["program"].astype(np.int64), 0, p.n_prog - 1)
        start = c["start"].astype(np.int64) + p.shift
        cyc = c["cycles"].astype(np.int64)
        t0 = np.rint(start * ns).astype(np.int64)
        t1 = np.rint((start + cyc) * ns).astype(np.int64)
        uu = lane_uuid[ipu, _LANE_OF_TYPE[typ]]
        r = RowBytes(n)
        slice_packets(r, t0, t1, uu, [(_CYCLES_NAME, cyc)], (cats, typ), (names, prog))
        # memory counters where they change: the total, then not-always-live by kind
        counter_packets(r, t0, mem_uuid[ipu], np.maximum(mem, 0), change)
        if p.counters is not None:
            key = np.maximum(p.key_of_prog[ipu, prog], 0)
            for k in range(len(p.counters.kinds)):
                counter_packets(r, t0, kind_uuid[ipu, k], p.counters.values[key, k], change)
        return list(r.blocks(workers=1))

    rows.write(p, ranges, fmt, fh.write)


def _perfetto_host(p: _Prepared, run: int | None) -> bytes:
    """The host's timeline as its own process ("Host") with a thread track per host lane and a
    slice per preparation, call and wait (through ``perfetto.trace_builder``: a few events)."""
    if not (p.host and p.with_host):
        return b""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    b = TraceProtoBuilder()
    pt = b.add_packet()
    pt.track_descriptor.uuid = _HOST_UUID
    pt.track_descriptor.process.pid = p.n_ipus + 1
    pt.track_descriptor.process.process_name = "Host"
    for t, lane in enumerate(schema.HOST_LANES):
        pk = b.add_packet()
        pk.track_descriptor.uuid = _HOST_UUID + 1 + t
        pk.track_descriptor.thread.pid = p.n_ipus + 1
        pk.track_descriptor.thread.tid = (p.n_ipus + 1) * 100 + t
        pk.track_descriptor.thread.thread_name = lane
    h, ns = p.host, 1e9 / p.clock
    for j in p.host_rows(run).tolist():
        start = int(h["start"][j]) + p.shift
        t0 = round(start * ns)
        t1 = round((start + int(h["cycles"][j])) * ns)
        for ts, begin in ((t0, True), (t1, False)):
            pk = b.add_packet()
            pk.timestamp = ts
            pk.trusted_packet_sequence_id = _SEQ
            ev = pk.track_event
            ev.track_uuid = _HOST_UUID + 1 + int(h["lane"][j])
            if begin:
                ev.type = ev.Type.TYPE_SLICE_BEGIN
                ev.name = schema.HOST_EVENTS[int(h["kind"][j])]
                ev.categories.append("host")
                a = ev.debug_annotations.add()
                a.name, a.int_value = "cycles", int(h["cycles"][j])
            else:
                ev.type = ev.Type.TYPE_SLICE_END
    return b.serialize()


#: Track uuids of the host process (the IPUs' are 1000 + i, 100000 + ..., 200000 + ...).
_HOST_UUID = 900000


# ---------------------------------------------------------------------------------------------


@contextmanager
def analysis_source(source: Any) -> Iterator[Source]:
    """The profile reader an export reads: that of ``source``, an open
    :class:`analyser.core.Analysis` (the reader its trace query engine also reads,
    :func:`analyser.trace.trace_of`: no second reader), or, for a profile path, the reader an
    Analysis of it would hold (:class:`analyser.core.source.Source`; the analysis itself is not
    built, which would import pandas: +0.3 s of CPU per export), closed after the export."""
    if isinstance(source, (str, os.PathLike)):
        from profiles import open_profile

        src = Source(open_profile(source), source)
        try:
            yield src
        finally:
            src.close()
    else:
        yield source.src


#: Most files ``split_by_run`` writes (one per host call): a profile that claims more calls is
#: refused before any file is written.
MAX_SPLIT_FILES = 1000


def _split_runs(p: _Prepared) -> list[int | None]:
    """The runs of a split export, refused in one sentence when there are none or too many."""
    n = int(p.run_starts.size)
    if n == 0:
        raise TraceExportError(
            "the profile records no host calls (/execution/run_starts is empty): "
            "export it without --split-by-run."
        )
    if n > MAX_SPLIT_FILES:
        raise TraceExportError(
            f"the profile claims {n:,} host calls and --split-by-run writes at most "
            f"{MAX_SPLIT_FILES:,} files: export it whole, or with --max-events."
        )
    return list(range(n))


def export_trace(
    source: Any,
    out: str | os.PathLike[str],
    *,
    fmt: str = "chrome",
    split_by_run: bool = False,
    progress: ProgressFn | None = None,
) -> list[Path]:
    """Export the execution trace of ``source`` (an open :class:`analyser.core.Analysis`, or
    a profile path); returns the files written.

    ``fmt``: ``"chrome"`` (trace-event JSON for chrome://tracing and ui.perfetto.dev) or
    ``"perfetto"`` (protobuf). ``split_by_run`` writes one file per host call (device-iteration
    run), named ``OUT-stem.runNNNN.OUT-suffix``; at most ``MAX_SPLIT_FILES`` of them.
    """
    if fmt not in ("chrome", "perfetto"):
        raise TraceExportError(f"unknown trace format {fmt!r}; choose chrome or perfetto.")
    out = Path(out)
    writer = _write_chrome if fmt == "chrome" else _write_perfetto
    with analysis_source(source) as src:
        p = _Prepared(src)
        p.shift, p.with_host = p.host_shift, True
        runs = _split_runs(p) if split_by_run else [None]
        rows = _Rows(progress, p.src.n_steps)
        written = []
        for r in runs:
            ranges = p.ranges(r)
            path = out if r is None else out.with_name(f"{out.stem}.run{r:04d}{out.suffix}")
            title = f"{src.path.name}" + ("" if r is None else f" run {r}")
            with atomic_output(path, "wb" if fmt == "perfetto" else "w") as fh:
                writer(p, fh, ranges, title, rows, r)
            written.append(path)
    return written
