"""Benchmark of the analysis core on a 1,000,000-step synthetic profile (4 IPUs x 1,472 tiles,
5,000 programs): summary (every part of `analyse summary`), insights without re-simulation, and
`export-trace --format chrome`. Each measurement runs in a fresh process (cold caches of the
analysis, warm OS page cache), repeated; prints medians and peak RSS.

    python benchmarks/bench_analysis.py [--steps 1000000] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_SUMMARY = r"""
import json, time, resource, sys
t0 = time.perf_counter()
from analyser.core import Analysis
from analyser.core.insights import find_insights
with Analysis.open(sys.argv[1]) as a:
    a.target; a.memory; a.liveness; a.execution; a.operations; a.metrics
    t1 = time.perf_counter()
    tips = find_insights(a)
    t2 = time.perf_counter()
print(json.dumps({"summary": t1 - t0, "insights": t2 - t1, "n_insights": len(tips),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

_EXPORT = r"""
import json, time, resource, sys
t0 = time.perf_counter()
from analyser.export import export_trace
files = export_trace(sys.argv[1], sys.argv[2], fmt=sys.argv[3])
print(json.dumps({"export": time.perf_counter() - t0, "bytes": files[0].stat().st_size,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _run(code: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", default=None, help="folder to keep the profile and traces in")
    ap.add_argument("--perfetto", action="store_true", help="also time the Perfetto export")
    args = ap.parse_args()
    from profiles.synthetic import write_synthetic_profile

    tmp = tempfile.TemporaryDirectory()
    folder = Path(args.keep or tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    prof = folder / "bench_1m.h5"
    t = time.perf_counter()
    write_synthetic_profile(prof, n_steps=args.steps, n_ipus=4, tiles=1472, n_programs=5000)
    print(
        f"profile: {args.steps:,} steps, 4 IPUs x 1,472 tiles, 5,000 programs, "
        f"{prof.stat().st_size / 2**20:.1f} MiB, written in {time.perf_counter() - t:.1f} s"
    )
    s = [_run(_SUMMARY, str(prof)) for _ in range(args.repeats)]
    print(
        f"summary (open + target, memory, liveness, execution, operations, metrics): "
        f"median {statistics.median(x['summary'] for x in s):.2f} s"
    )
    print(
        f"insights without re-simulation: median "
        f"{statistics.median(x['insights'] for x in s):.3f} s ({s[0]['n_insights']} insights)"
    )
    print(f"peak RSS (summary + insights process): {max(x['rss_mb'] for x in s):.0f} MB")
    fmts = ["chrome"] + (["perfetto"] if args.perfetto else [])
    for fmt in fmts:
        out = folder / ("bench.json" if fmt == "chrome" else "bench.pftrace")
        e = [_run(_EXPORT, str(prof), str(out), fmt) for _ in range(args.repeats)]
        print(
            f"export-trace {fmt}: median {statistics.median(x['export'] for x in e):.2f} s, "
            f"{e[0]['bytes'] / 2**20:.0f} MiB, peak RSS {max(x['rss_mb'] for x in e):.0f} MB"
        )
    tmp.cleanup()


if __name__ == "__main__":
    main()
