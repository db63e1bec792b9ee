"""Both runs of an ``analyse diff`` and their differences in one Chrome trace-event JSON file
(ui.perfetto.dev and chrome://tracing open it).

* run A's IPUs are processes ``A: IPU 0``, ``A: IPU 1``, ... and run B's ``B: IPU 0``, ... with
  the lanes and memory counters of ``analyse export-trace``;
* a process ``B - A`` holds, per IPU of B, one "differences" lane: a slice over each step of B
  whose cycles differ from its aligned step of A (program name and occurrence,
  :func:`analyser.core.diff.align_steps`), named after the program, with the cycles of A and B
  and the delta in its arguments, and a slice for each step that only B runs (``delta`` = its
  cycles); and a counter ``IPU i: cumulative delta (cycles)``: the running sum of those deltas
  along B's timeline (steps only A runs have no place on B's timeline: their count and cycles
  are in ``otherData``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from analyser.core.analysis import Analysis
from analyser.core.diff import aligned_deltas
from analyser.export.rowbytes import RowBytes, byte_table
from analyser.export.trace import _chrome_metadata, _Prepared, chrome_steps, slice_times
from analyser.output import atomic_output


def _delta_events(b: _Prepared, d: dict[str, np.ndarray], pid: int) -> list[np.ndarray]:
    """The differences lanes and cumulative counters as byte blocks (uint8 arrays; numpy, no
    row loop)."""
    n = d["start"].size
    names = byte_table([json.dumps(str(x)).encode() for x in b.names])
    ts = b.us(d["start"])
    r = RowBytes(n).emit(
        b',\n{"name":',
        (names, np.clip(d["program"], 0, b.n_prog - 1)),
        b',"ph":"X","cat":"delta","pid":' + str(pid).encode() + b',"tid":',
        d["ipu"],
        *slice_times(ts, b.us(d["cycles"])),
        b',"args":{"delta":',
        d["delta"],
        b',"cycles_a":',
        d["cycles_a"],
        b',"cycles_b":',
        d["cycles"],
        b"}}",
    )
    # the running sum per IPU (rows are sorted by IPU, then B's start)
    cum = np.cumsum(d["delta"])
    if n:
        new_ipu = np.r_[True, d["ipu"][1:] != d["ipu"][:-1]]
        first = np.flatnonzero(new_ipu)
        before = np.r_[0, cum[first[1:] - 1]]  # the running sum before each IPU's first row
        cum = cum - before[np.cumsum(new_ipu) - 1]
    c = RowBytes(n).emit(
        b',\n{"name":"IPU ',
        d["ipu"],
        b': cumulative delta (cycles)","ph":"C","pid":' + str(pid).encode() + b',"ts":',
        b.us(d["start"] + d["cycles"]),
        b',"args":{"cycles":',
        cum,
        b"}}",
    )
    return [*r.blocks(workers=1), *c.blocks(workers=1)]


def export_diff_trace(a: Analysis, b: Analysis, out: str | os.PathLike[str]) -> Path:
    """Write runs ``a`` and ``b`` and the B - A differences into one Chrome JSON trace."""
    from analyser.export.trace import chrome_header

    out = Path(out)
    pa, pb = _Prepared(a.src), _Prepared(b.src)
    d = aligned_deltas(a, b)
    pid = pa.n_ipus + pb.n_ipus
    with atomic_output(out, "w") as fh:
        chrome_header(fh, f"{a.path} vs {b.path}", pb.clock, f"{a.name} (A) vs {b.name} (B), B - A")
        meta = _chrome_metadata(pa, 0, "A: ") + _chrome_metadata(pb, pa.n_ipus, "B: ")
        meta.append(
            json.dumps({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "B - A"}})
        )
        meta.append(
            json.dumps(
                {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": -1}}
            )
        )
        for i in range(pb.n_ipus):
            meta.append(
                json.dumps(
                    {
                        "name": "thread_name",
                        "ph": "M",
                        "pid": pid,
                        "tid": i,
                        "args": {"name": f"IPU {i} differences"},
                    }
                )
            )
        fh.write(",\n".join(meta))
        fh.flush()
        raw = fh.buffer
        for block in _delta_events(pb, d, pid):
            raw.write(block)
        raw.flush()
        chrome_steps(pa, fh, pa.ranges(None), pid0=0)
        chrome_steps(pb, fh, pb.ranges(None), pid0=pa.n_ipus)
        removed = d["removed"]
        fh.write(
            "\n],"
            + json.dumps(
                {
                    "diff": {
                        "aligned_steps_changed": int((d["cycles_a"] >= 0).sum()),
                        "steps_only_in_b": int((d["cycles_a"] < 0).sum()),
                        "steps_only_in_a": int(removed[0]),
                        "cycles_of_steps_only_in_a": int(removed[1]),
                    }
                }
            )[1:]
            + "\n"
        )
    return out
