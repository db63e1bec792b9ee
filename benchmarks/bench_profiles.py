"""Benchmark of the profile format: write and read a big synthetic profile.

Default size (the product brief's large profile): 1,000,000 executed steps, 4 IPUs x 1,472 tiles, 5,000 distinct programs.
Prints file size, write time, open + summary time, time to read 10,000 consecutive steps, a
time-window query, per-tile cycles of 100 programs, cycles by step type over all steps, a full
validation, and peak memory. Times are medians over ``--repeat`` runs (the file is in the OS page
cache after the first read, as it is for a user who just wrote or opened it).

Targets on a 2-core machine: open + summary < 0.3 s, a 10,000-step slice < 50 ms, peak memory
< 1 GB.

    python benchmarks/bench_profiles.py [--steps N] [--ipus N] [--tiles N] [--programs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd  # imported up front: its one-off import (~0.3 s) is not a read cost

from profiles import open_profile, validate
from profiles.synthetic import write_synthetic_profile

_ = pd


def _median(fn: Callable[[int], object], repeat: int) -> float:
    times = []
    for k in range(repeat):
        t = time.perf_counter()
        fn(k)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _rss_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--ipus", type=int, default=4)
    ap.add_argument("--tiles", type=int, default=1472)
    ap.add_argument("--programs", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=7, help="repetitions of each read (median)")
    ap.add_argument("--write-repeat", type=int, default=3, help="repetitions of the write")
    ap.add_argument("--dir", type=Path, default=None, help="folder for the file (default: temp)")
    args = ap.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="bench_profiles_", dir=args.dir))
    path = folder / "big.h5"
    kw = dict(n_steps=args.steps, n_ipus=args.ipus, tiles=args.tiles, n_programs=args.programs)
    print(
        f"profile: {args.steps:,} steps, {args.ipus} IPUs x {args.tiles:,} tiles, "
        f"{args.programs:,} programs; {os.cpu_count()} cores, Python {sys.version.split()[0]}"
    )
    try:
        write_s = _median(lambda k: write_synthetic_profile(path, seed=k, **kw), args.write_repeat)
        rss_after_write = _rss_peak_mib()
        tracemalloc.start()
        write_synthetic_profile(path, **kw)
        _, traced_write = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        size = path.stat().st_size

        def open_summary(_k: int) -> None:
            with open_profile(path) as p:
                p.summary()

        open_s = _median(open_summary, args.repeat)

        p = open_profile(path)
        n = p.n_steps
        rng = np.random.default_rng(0)
        starts = rng.integers(0, max(1, n - 10_000), size=args.repeat)
        slice_s = _median(
            lambda k: p.steps(rows=slice(int(starts[k]), int(starts[k]) + 10_000)), args.repeat
        )
        lo, hi = p.ipu_rows(args.ipus - 1)
        span = max(1, hi - lo - 10_000)

        def ipu_slice(k: int) -> None:
            a = int(starts[k]) % span
            p.steps(ipu=args.ipus - 1, rows=slice(a, a + 10_000))

        ipu_slice_s = _median(ipu_slice, args.repeat)
        end = int(p.execution_totals().get("total_cycles", 0))
        # a window about 10,000 steps wide on the last IPU
        width = max(1, end * 10_000 // max(1, hi - lo))
        wstarts = rng.integers(0, max(1, end - width), size=args.repeat)
        t = time.perf_counter()
        first = p.step_window(args.ipus - 1, int(wstarts[0]), int(wstarts[0]) + width)
        window_cold = time.perf_counter() - t
        window_s = _median(
            lambda k: p.step_window(args.ipus - 1, int(wstarts[k]), int(wstarts[k]) + width),
            args.repeat,
        )
        ids = rng.choice(args.programs, size=min(100, args.programs), replace=False)
        tc_s = _median(lambda k: p.tile_cycles(ids), args.repeat)
        cbt_s = _median(lambda k: p.cycles_by_type(), max(3, args.repeat // 2))
        p.close()
        val_t = time.perf_counter()
        problems = validate(path)
        val_s = time.perf_counter() - val_t
        rss_end = _rss_peak_mib()

        print(f"file size:                          {size / 2**20:8.1f} MiB")
        print(f"write (median of {args.write_repeat}):               {write_s:8.2f} s")
        print(f"open + summary:                     {open_s * 1e3:8.1f} ms   (target < 300 ms)")
        print(f"10,000 consecutive steps, all cols: {slice_s * 1e3:8.1f} ms   (target < 50 ms)")
        print(f"10,000 steps of one IPU:            {ipu_slice_s * 1e3:8.1f} ms")
        print(
            f"time window (~{len(first):,} steps):      {window_s * 1e3:8.1f} ms   "
            f"(first query, reads the IPU's start column: {window_cold * 1e3:.1f} ms)"
        )
        print(f"tile cycles of 100 programs:        {tc_s * 1e3:8.1f} ms")
        print(f"cycles by step type, all steps:     {cbt_s * 1e3:8.1f} ms")
        print(f"validate (full content check):      {val_s:8.2f} s   ({len(problems)} problems)")
        print(f"peak traced memory while writing:   {traced_write / 2**20:8.1f} MiB (tracemalloc)")
        print(f"peak RSS after writing:             {rss_after_write:8.1f} MiB")
        print(f"peak RSS, whole run:                {rss_end:8.1f} MiB   (target < 1024 MiB)")
    finally:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
