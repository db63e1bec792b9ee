"""Benchmark of the Execution Trace on a 1,000,000-step profile (offscreen Qt; prints figures).

    python benchmarks/bench_trace.py [--profile PATH] [--ops 100] [--repeat 3]

Writes a synthetic profile (1,000,000 executed steps, 4 IPUs x 1,472 tiles, 5,000 programs) to a
temporary folder unless ``--profile`` is given, then measures, in fresh processes:

* first paint: from opening the file to the Execution Trace report painted (whole run in view);
* pan / zoom redraw: ``--ops`` operations (zoom in / out by 1.6x and pan by 20% at every zoom
  level from the whole run down to a few hundred cycles), each timed from the range change to
  the repainted timeline (window query + rectangles + paint);
* memory: peak resident set size of the process.

Targets: first paint < 1.5 s; redraw < 50 ms median and < 150 ms worst of 100;
memory < 1.5 GB (the same on 10,000,000 steps with memory < 2 GB, see
benchmarks/bench_10m.py, which runs this measurement as its child).
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

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def child(path: str, ops: int) -> dict:
    t_start = time.perf_counter()
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    t_qt = time.perf_counter()
    from analyser.gui.model.document import Document
    from analyser.gui.reports.trace import TraceReport

    t0 = time.perf_counter()
    doc = Document.open(path)
    report = TraceReport()
    report.resize(1600, 900)
    report.show()
    report.set_document(doc)
    app.processEvents()
    report.timeline.viewport().repaint()
    first_paint = time.perf_counter() - t0
    tl = report.timeline
    n_steps = tl.trace.step_count()
    rects_full = tl.n_rects

    lo, hi = tl.full_range()
    times = []
    rects = []
    sources: dict[str, int] = {}
    span = hi - lo
    center = (lo + hi) / 2
    i = 0
    # sweep down through the zoom levels and back, panning at each level
    while len(times) < ops:
        phase = (i // 4) % 30
        level = phase if phase < 15 else 29 - phase
        s = span / (1.6 ** (level * 1.5))
        c = center + (((i % 4) - 1.5) * 0.2) * s
        c = min(max(c, lo + s / 2), hi - s / 2)
        t = time.perf_counter()
        tl.set_x_range(c - s / 2, c + s / 2)
        tl.redraw()
        tl.viewport().repaint()
        times.append(time.perf_counter() - t)
        rects.append(tl.n_rects)
        for r in tl.results.values():
            key = r.source.split(" (")[0]
            sources[key] = sources.get(key, 0) + 1
        i += 1
    report.shutdown()
    doc.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "steps": n_steps,
        "qt_import_s": t_qt - t_start,
        "first_paint_s": first_paint,
        "rects_whole_run": rects_full,
        "redraw_median_ms": 1000 * statistics.median(times),
        "redraw_p90_ms": 1000 * sorted(times)[int(0.9 * len(times)) - 1],
        "redraw_worst_ms": 1000 * max(times),
        "rects_max": max(rects),
        "sources": sources,
        "peak_rss_mib": peak / 2**20,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", help="an existing profile (default: write a synthetic one)")
    ap.add_argument("--ops", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes to run")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.profile, args.ops)))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as tmp:
        path = args.profile
        if path is None:
            from profiles.synthetic import write_synthetic_profile

            path = str(Path(tmp) / "trace-1m.h5")
            t = time.perf_counter()
            write_synthetic_profile(path, n_steps=1_000_000, n_ipus=4, tiles=1472, n_programs=5000)
            print(f"wrote {path} in {time.perf_counter() - t:.1f} s")
        runs = []
        for k in range(args.repeat):
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--profile", path, "--ops", str(args.ops)],
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            res = json.loads(out.stdout.strip().splitlines()[-1])
            runs.append(res)
            print(
                f"run {k + 1}: first paint {res['first_paint_s']:.3f} s, redraw median "
                f"{res['redraw_median_ms']:.1f} ms, p90 {res['redraw_p90_ms']:.1f} ms, worst "
                f"{res['redraw_worst_ms']:.1f} ms of {args.ops}, rects whole run "
                f"{res['rects_whole_run']:,} (max {res['rects_max']:,}), peak RSS "
                f"{res['peak_rss_mib']:.0f} MiB, sources {res['sources']}"
            )

        def med(key):
            return statistics.median(r[key] for r in runs)

        print()
        print(f"steps: {runs[0]['steps']:,}; medians over {len(runs)} fresh processes:")
        print(f"  first paint of the trace      {med('first_paint_s'):.3f} s   (target < 1.5 s)")
        print(f"  pan/zoom redraw, median       {med('redraw_median_ms'):.1f} ms  (target < 50 ms)")
        print(
            f"  pan/zoom redraw, worst of {args.ops}  {med('redraw_worst_ms'):.1f} ms  (target < 150 ms)"
        )
        print(f"  peak RSS                      {med('peak_rss_mib'):.0f} MiB (target < 1.5 GB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
