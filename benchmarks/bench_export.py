"""Benchmark of the trace exports (Chrome JSON, Perfetto protobuf) against their I/O floor.

    python benchmarks/bench_export.py [--sizes 250000,500000,1000000] [--repeats 3]
                                      [--formats chrome,perfetto] [--keep DIR]

For each size, writes a synthetic profile (4 IPUs x 1,472 tiles, 5,000 programs,
``profiles.synthetic``) and exports it in fresh processes (imports included); prints the median
wall and CPU time of each export, and the floor: reading the 11 step columns the exporter reads
(h5py, whole columns) plus writing the same number of output bytes (one ``write`` + ``fsync``).
The growth of each export is printed as the exponent of a power law fitted over the sizes
(1.0 = linear in the steps). Targets: 1,000,000 steps under 2 s for both formats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

_EXPORT = r"""
import json, time, resource, sys
t0 = time.perf_counter(); c0 = time.process_time()
from analyser.export import export_trace
files = export_trace(sys.argv[1], sys.argv[2], fmt=sys.argv[3])
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "bytes": files[0].stat().st_size,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

_FLOOR = r"""
import json, os, sys, time
import h5py
cols = ("program", "ipu", "start", "cycles", "type", "micro_batch", "stage", "phase",
        "bytes_in", "bytes_out", "dest")
t0 = time.perf_counter()
with h5py.File(sys.argv[1], "r") as f:
    arrs = [f["execution/steps/" + c][:] for c in cols]
t1 = time.perf_counter()
data = os.urandom(1 << 20) * (int(sys.argv[3]) >> 20)
t2 = time.perf_counter()
with open(sys.argv[2], "wb") as fh:
    fh.write(data)
    fh.flush()
    os.fsync(fh.fileno())
t3 = time.perf_counter()
os.unlink(sys.argv[2])
print(json.dumps({"read": t1 - t0, "write": t3 - t2}))
"""


def _run(code: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def exponent(sizes: list[int], times: list[float]) -> float:
    """Exponent b of the least-squares fit time = a * size ** b (log-log)."""
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="250000,500000,1000000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--formats", default="chrome,perfetto")
    ap.add_argument("--keep", default=None, help="folder to keep the profiles and traces in")
    args = ap.parse_args()
    from profiles.synthetic import write_synthetic_profile

    sizes = [int(s) for s in args.sizes.split(",")]
    fmts = args.formats.split(",")
    tmp = tempfile.TemporaryDirectory()
    folder = Path(args.keep or tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    med: dict[str, list[float]] = {f: [] for f in fmts}
    for n in sizes:
        prof = folder / f"export_{n}.h5"
        write_synthetic_profile(prof, n_steps=n, n_ipus=4, tiles=1472, n_programs=5000)
        for fmt in fmts:
            out = folder / f"export_{n}.{'json' if fmt == 'chrome' else 'pftrace'}"
            runs = [_run(_EXPORT, str(prof), str(out), fmt) for _ in range(args.repeats)]
            size = runs[0]["bytes"]
            floor = [
                _run(_FLOOR, str(prof), str(folder / "floor.bin"), str(size))
                for _ in range(args.repeats)
            ]
            wall = statistics.median(r["wall"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs)
            fr = statistics.median(f["read"] for f in floor)
            fw = statistics.median(f["write"] for f in floor)
            med[fmt].append(wall)
            each = " / ".join(f"{r['wall']:.2f}" for r in runs)
            print(
                f"{n:>9,} steps  {fmt:8s} wall {wall:6.2f} s (runs {each}), CPU {cpu:5.2f} s, "
                f"{size / 2**20:6.1f} MiB, peak RSS {max(r['rss_mb'] for r in runs):4.0f} MB; "
                f"floor {fr + fw:.2f} s (read columns {fr:.2f} + write bytes {fw:.2f}), "
                f"{wall / (fr + fw):.1f}x the floor"
            )
            if n == 1_000_000:
                print(f"           target: 1,000,000 steps under 2 s -> {wall:.2f} s")
    if len(sizes) >= 3:
        for fmt in fmts:
            print(f"growth of {fmt} export: time ~ steps^{exponent(sizes, med[fmt]):.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    tmp.cleanup()


if __name__ == "__main__":
    main()
