"""Benchmark of ``analyse export-trace --max-events N`` on a 10,000,000-step profile.
Prints figures; asserts nothing.

    python benchmarks/bench_max_events.py [PROFILE] [--max-events 1000000] [--repeats 3]

PROFILE defaults to the synthetic profile of bench_10m.py (10,000,000 steps, 4 IPUs x 1,472
tiles, 5,000 programs), written to a temporary folder. Each run is a fresh ``analyse`` process;
printed: CPU (user + system) and peak RSS of the process (getrusage of the child), the wall
time, the events written and the level the trace was merged at. Targets: < 20 s CPU and
< 500 MiB for N = 1,000,000.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(profile: Path, out: Path, n: int) -> tuple[float, float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from analyser.cli import main; sys.exit(main())",
            "export-trace",
            str(profile),
            "-o",
            str(out),
            "--max-events",
            str(n),
            "--force",
        ],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024  # MiB (Linux: kB), the largest child so far


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", nargs="?")
    ap.add_argument("--max-events", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    profile = Path(args.profile) if args.profile else Path(tmp.name) / "synthetic-10m.h5"
    if not args.profile:
        sys.path.insert(0, str(ROOT))
        from profiles.synthetic import write_synthetic_profile

        print("writing a 10,000,000-step synthetic profile ...", flush=True)
        write_synthetic_profile(profile, n_steps=10_000_000, n_ipus=4, tiles=1472, n_programs=5000)
    out = Path(tmp.name) / "trace.json"
    runs = [_run(profile, out, args.max_events) for _ in range(args.repeats)]
    doc = json.loads(out.read_text())
    info = doc["aggregation"]
    print(
        f"{info['steps']:,} steps -> {len(doc['traceEvents']):,} events (<= {args.max_events:,}), "
        f"level {info['level']!r}, {out.stat().st_size:,} bytes"
    )
    print(
        f"wall {statistics.median(r[0] for r in runs):.2f} s, CPU "
        f"{statistics.median(r[1] for r in runs):.2f} s (medians of {args.repeats}), peak RSS "
        f"{max(r[2] for r in runs):.0f} MiB; load {os.getloadavg()[0]:.1f}"
    )
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
