"""Benchmark of the BSP view's numbers (analyser.trace.bsp) on a 1,000,000-step profile.

    python benchmarks/bench_bsp.py [--profile PATH] [--repeat 5]

Writes the synthetic profile of benchmarks/bench_trace.py (1,000,000 executed steps, 4 IPUs x
1,472 tiles, 5,000 programs) to a temporary folder unless ``--profile`` is given, then times
``bsp_states`` for a 1,300 x 400 pixel view (the BSP tab of a 1600 x 900 window):

* whole run, first time (reads the per-tile cycles of the programs the IPU ran);
* whole run again (median of ``--repeat``);
* zoomed in: windows of 1/10, 1/100, 1/1,000 and 1/10,000 of the run (median over 4 places each);
* all 1,472 tiles one row each (no row grouping) over the whole run.

Target: whole run and zoomed-in redraws within the trace's redraw budget of about
150 ms once warm; first whole-run view under a second.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

WIDTH, ROWS = 1300, 400


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", help="an existing profile (default: write a synthetic one)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.profile) if args.profile else Path(tmp) / "bsp-1m.h5"
        if not args.profile:
            from profiles.synthetic import write_synthetic_profile

            print("writing the 1,000,000-step profile ...", flush=True)
            write_synthetic_profile(path, n_steps=1_000_000, n_ipus=4, tiles=1472, n_programs=5000)
        from analyser.trace.bsp import bsp_states
        from analyser.trace.window import TraceWindow
        from profiles import open_profile

        with open_profile(path) as p:
            tw = TraceWindow(p)
            t0, t1 = tw.extent(0)
            tw.row_range(0, t0, t1)  # the timeline has built the IPU's index by then

            def timed(a, b, rows=ROWS) -> float:
                start = time.perf_counter()
                bsp_states(tw, 0, a, b, buckets=WIDTH, rows=rows)
                return time.perf_counter() - start

            first = timed(t0, t1)
            warm = statistics.median(timed(t0, t1) for _ in range(args.repeat))
            print(f"steps on IPU 0: {tw.step_count(0):,}")
            print(f"whole run, first: {1000 * first:.0f} ms")
            print(f"whole run, warm median of {args.repeat}: {1000 * warm:.0f} ms")
            span = t1 - t0
            for frac in (10, 100, 1000, 10_000):
                w = span / frac
                times = [
                    timed(t0 + k * (span - w) / 3, t0 + k * (span - w) / 3 + w) for k in range(4)
                ]
                print(f"1/{frac:,} of the run: median {1000 * statistics.median(times):.0f} ms")
            full = statistics.median(timed(t0, t1, rows=None) for _ in range(3))
            print(f"whole run, 1,472 rows (one per tile): median {1000 * full:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
