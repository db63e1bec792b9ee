"""Trace export: Chrome trace-event JSON ("X" complete events per step and IPU, "M" metadata
naming processes and threads, "C" counters for memory) and Perfetto protobuf (track descriptors,
slice begin / end and counter events built with ``perfetto.trace_builder``).

Layout of the exported trace (both formats):

* one process per IPU ("IPU 0", "IPU 1", ...);
* inside it one thread (track) per lane: Compute (OnTileExecute), Exchange (DoExchange,
  GlobalExchange), Sync (Sync, SyncAns), Host I/O (StreamCopyBegin / Mid / End), so steps that
  overlap (stream copies on I/O tiles beside compute) never break slice nesting;
* a "memory" counter per IPU: always-live + not-always-live bytes of the liveness step each
  executed program belongs to, emitted only when it changes;
* time in microseconds (Chrome) / nanoseconds (Perfetto) at the target clock, with the cycle
  figures in the event arguments.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import numpy as np

from analyser.core.source import Source
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
        nodes = src.table("/programs/nodes", ["name"])
        self.names = [str(x) for x in nodes["name"].to_numpy()]
        self.n_prog = len(self.names)
        # memory counter: program -> liveness step (first occurrence) per IPU
        self.mem_of_prog = np.full((self.n_ipus, self.n_prog), -1, np.int64)
        try:
            ls = src.table("/liveness/steps", ["program", "ipu"])
            nal = src.array("/liveness/not_always_live").astype(np.int64)
            al = src.array("/liveness/always_live").astype(np.int64)
            prog = ls["program"].to_numpy().astype(np.int64)
            lipu = ls["ipu"].to_numpy().astype(np.int64)
            for i in range(self.n_ipus):
                sel = np.flatnonzero(
                    ((lipu == i) | (lipu < 0)) & (prog >= 0) & (prog < self.n_prog)
                )
                # first occurrence wins: assign in reverse order
                sel = sel[::-1]
                self.mem_of_prog[i, prog[sel]] = al[i] + nal[i, sel]
        except UserFacingError:
            pass
        self.offsets = src.ipu_offsets()
        self.run_starts = (
            src.array("/execution/run_starts").astype(np.int64)
            if src.has("/execution/run_starts")
            else np.zeros(1, np.int64)
        )

    def us(self, cycles: np.ndarray) -> np.ndarray:
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


# ---------------------------------------------------------------------------------------------
# Chrome trace-event JSON
# ---------------------------------------------------------------------------------------------


def _chrome_metadata(p: _Prepared, title: str) -> list[str]:
    ev = []
    for i in range(p.n_ipus):
        ev.append(
            json.dumps({"name": "process_name", "ph": "M", "pid": i, "args": {"name": f"IPU {i}"}})
        )
        ev.append(
            json.dumps(
                {"name": "process_sort_index", "ph": "M", "pid": i, "args": {"sort_index": i}}
            )
        )
        for t, lane in enumerate(LANES):
            ev.append(
                json.dumps(
                    {"name": "thread_name", "ph": "M", "pid": i, "tid": t, "args": {"name": lane}}
                )
            )
            ev.append(
                json.dumps(
                    {
                        "name": "thread_sort_index",
                        "ph": "M",
                        "pid": i,
                        "tid": t,
                        "args": {"sort_index": t},
                    }
                )
            )
    del title
    return ev


def _write_chrome(
    p: _Prepared,
    fh: IO[str],
    ranges: list[tuple[int, int]],
    title: str,
    progress: ProgressFn | None,
    total_rows: int,
    done0: int,
) -> int:
    types = schema.PROGRAM_TYPES
    phases = schema.PHASES
    dests = schema.DESTINATIONS
    prefix = [f'{{"name":{json.dumps(n)},"ph":"X","cat":"' for n in p.names]
    fh.write('{"displayTimeUnit":"ns","otherData":')
    fh.write(
        json.dumps(
            {
                "source": str(p.src.path),
                "clock_hz": p.clock,
                "title": title,
                "time": "microseconds at the target clock; cycles in args",
            }
        )
    )
    fh.write(',"traceEvents":[\n')
    fh.write(",\n".join(_chrome_metadata(p, title)))
    done = done0
    last_mem = np.full(p.n_ipus, -1, np.int64)
    for c in p.chunks(ranges):
        n = c["start"].size
        if n == 0:
            continue
        ipu = c["ipu"].astype(np.int64)
        typ = c["type"].astype(np.int64)
        lane = _LANE_OF_TYPE[typ]
        ts = p.us(c["start"])
        dur = p.us(c["cycles"])
        prog = c["program"].astype(np.int64)
        lines = [
            f'{prefix[pg]}{types[ty]}","pid":{ip},"tid":{ln},"ts":{t:.4f},"dur":{d:.4f},'
            f'"args":{{"cycles":{cy},"start_cycle":{st},"micro_batch":{mb},"stage":{sg},'
            f'"phase":"{phases[ph]}"'
            + (f',"bytes_in":{bi},"bytes_out":{bo},"dest":"{dests[de]}"}}}}' if bi or bo else "}}")
            for pg, ty, ip, ln, t, d, cy, st, mb, sg, ph, bi, bo, de in zip(
                prog.tolist(),
                typ.tolist(),
                ipu.tolist(),
                lane.tolist(),
                ts.tolist(),
                dur.tolist(),
                c["cycles"].tolist(),
                c["start"].tolist(),
                c["micro_batch"].tolist(),
                c["stage"].tolist(),
                c["phase"].tolist(),
                c["bytes_in"].tolist(),
                c["bytes_out"].tolist(),
                c["dest"].tolist(),
            )
        ]
        # memory counter: value of the liveness step of each program, when it changes
        mem = p.mem_of_prog[ipu, np.clip(prog, 0, p.n_prog - 1)]
        has = mem >= 0
        if has.any():
            idx = np.flatnonzero(has)
            mv, mi = mem[idx], ipu[idx]
            prev = np.concatenate(([-2], mv[:-1]))
            newipu = np.concatenate(([True], mi[1:] != mi[:-1]))
            first_of_ipu = np.zeros(idx.size, bool)
            first_of_ipu[newipu] = True
            change = (mv != prev) | newipu
            change[first_of_ipu] &= mv[first_of_ipu] != last_mem[mi[first_of_ipu]]
            sel = idx[change]
            lines.extend(
                f'{{"name":"memory","ph":"C","pid":{ip},"ts":{t:.4f},"args":{{"bytes":{v}}}}}'
                for ip, t, v in zip(ipu[sel].tolist(), ts[sel].tolist(), mem[sel].tolist())
            )
            for i in np.unique(mi):
                last_mem[i] = mv[mi == i][-1]
        fh.write(",\n")
        fh.write(",\n".join(lines))
        done += n
        if progress:
            progress(done, total_rows)
    fh.write("\n]}\n")
    return done


# ---------------------------------------------------------------------------------------------
# Perfetto protobuf
# ---------------------------------------------------------------------------------------------

_SEQ = 7


def _write_perfetto(
    p: _Prepared,
    fh: IO[bytes],
    ranges: list[tuple[int, int]],
    title: str,
    progress: ProgressFn | None,
    total_rows: int,
    done0: int,
) -> int:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    types = schema.PROGRAM_TYPES
    b = TraceProtoBuilder()
    lane_uuid = np.zeros((p.n_ipus, len(LANES)), np.int64)
    mem_uuid = np.zeros(p.n_ipus, np.int64)
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
    fh.write(b.serialize())
    del title
    BEGIN, END, COUNTER = (
        TrackEvent.Type.TYPE_SLICE_BEGIN,
        TrackEvent.Type.TYPE_SLICE_END,
        TrackEvent.Type.TYPE_COUNTER,
    )
    ns = 1e9 / p.clock
    done = done0
    for c in p.chunks(ranges):
        n = c["start"].size
        if n == 0:
            continue
        b = TraceProtoBuilder()
        ipu = c["ipu"].astype(np.int64)
        typ = c["type"].astype(np.int64)
        prog = c["program"].astype(np.int64)
        start = c["start"].astype(np.int64)
        t0 = np.rint(start * ns).astype(np.int64)
        t1 = np.rint((start + c["cycles"].astype(np.int64)) * ns).astype(np.int64)
        uu = lane_uuid[ipu, _LANE_OF_TYPE[typ]]
        mem = p.mem_of_prog[ipu, np.clip(prog, 0, p.n_prog - 1)]
        for pg, ty, a, z, u, cy, ip, mv in zip(
            prog.tolist(),
            typ.tolist(),
            t0.tolist(),
            t1.tolist(),
            uu.tolist(),
            c["cycles"].tolist(),
            ipu.tolist(),
            mem.tolist(),
        ):
            pk = b.add_packet()
            pk.timestamp = a
            pk.trusted_packet_sequence_id = _SEQ
            ev = pk.track_event
            ev.type = BEGIN
            ev.track_uuid = u
            ev.name = p.names[pg]
            ev.categories.append(types[ty])
            da = ev.debug_annotations.add()
            da.name = "cycles"
            da.int_value = cy
            pk = b.add_packet()
            pk.timestamp = z
            pk.trusted_packet_sequence_id = _SEQ
            pk.track_event.type = END
            pk.track_event.track_uuid = u
            if mv >= 0:
                pk = b.add_packet()
                pk.timestamp = a
                pk.trusted_packet_sequence_id = _SEQ
                pk.track_event.type = COUNTER
                pk.track_event.track_uuid = int(mem_uuid[ip])
                pk.track_event.counter_value = mv
        fh.write(b.serialize())
        done += n
        if progress:
            progress(done, total_rows)
    return done


# ---------------------------------------------------------------------------------------------


def _atomic(path: Path, binary: bool):
    from analyser.cli._common import atomic_output

    return atomic_output(path, "wb" if binary else "w")


def export_trace(
    profile_path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    fmt: str = "chrome",
    split_by_run: bool = False,
    progress: ProgressFn | None = None,
) -> list[Path]:
    """Export the execution trace of ``profile_path``; returns the files written.

    ``fmt``: ``"chrome"`` (trace-event JSON for chrome://tracing and ui.perfetto.dev) or
    ``"perfetto"`` (protobuf). ``split_by_run`` writes one file per host call (device-iteration
    run), named ``OUT-stem.runNNNN.OUT-suffix``.
    """
    from analyser.core import Analysis

    if fmt not in ("chrome", "perfetto"):
        raise TraceExportError(f"unknown trace format {fmt!r}; choose chrome or perfetto.")
    out = Path(out)
    writer = _write_chrome if fmt == "chrome" else _write_perfetto
    with Analysis.open(profile_path) as a:
        p = _Prepared(a.src)
        runs: list[int | None] = list(range(p.run_starts.size)) if split_by_run else [None]
        total = p.src.n_steps
        written = []
        done = 0
        for r in runs:
            ranges = p.ranges(r)
            path = out if r is None else out.with_name(f"{out.stem}.run{r:04d}{out.suffix}")
            title = f"{a.path.name}" + ("" if r is None else f" run {r}")
            with _atomic(path, fmt == "perfetto") as fh:
                done = writer(p, fh, ranges, title, progress, total, done)
            written.append(path)
    return written
