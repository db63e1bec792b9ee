"""Benchmark of ``analyse query``: a GROUP BY over every step of a profile, through
DuckDB (analyser.query), against the same computation in numpy (the columns read from the HDF5
file, then np.bincount). Prints figures; asserts nothing.

    python benchmarks/bench_query.py PROFILE [--repeats 3]

PROFILE defaults to a 10,000,000-step synthetic profile written as bench_10m.py writes it
(4 IPUs x 1,472 tiles, 5,000 programs) in a temporary folder. Target: the query within 2x of
numpy (both include reading the columns).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SQL = (
    "SELECT ipu, type, count(*) AS n, sum(cycles) AS cycles FROM steps "
    "GROUP BY ipu, type ORDER BY ipu, type"
)


def _numpy(path: Path):
    import numpy as np

    from profiles import open_profile, schema

    with open_profile(path) as p:
        ipu = p.array("/execution/steps/ipu")
        typ = p.array("/execution/steps/type")
        cyc = p.array("/execution/steps/cycles")
        n_ipus = p.num_ipus
    k = len(schema.PROGRAM_TYPES)
    key = ipu.astype(np.int64) * k + typ
    n = np.bincount(key, minlength=n_ipus * k)
    c = np.bincount(key, weights=cyc, minlength=n_ipus * k)
    return n, c


def _duckdb(path: Path):
    from analyser.query import query

    return query(path, SQL)


def _timed(fn, path: Path) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fn(path)
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", nargs="?")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    tmp = None
    if args.profile:
        path = Path(args.profile)
    else:
        from profiles.synthetic import write_synthetic_profile

        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "synthetic-10m.h5"
        print("writing a 10,000,000-step synthetic profile ...", flush=True)
        write_synthetic_profile(path, n_steps=10_000_000, n_ipus=4, tiles=1472, n_programs=5000)
    # the same answer first
    n, c = _numpy(path)
    df = _duckdb(path)
    from profiles import schema

    k = len(schema.PROGRAM_TYPES)
    for r in df.itertuples():
        i = r.ipu * k + schema.PROGRAM_TYPES.index(r.type)
        assert (r.n, r.cycles) == (n[i], int(c[i])), r
    print(f"same result: {len(df)} groups, {int(n.sum()):,} steps")
    figures = {"numpy": [], "duckdb": []}
    for _ in range(args.repeats):
        figures["numpy"].append(_timed(_numpy, path))
        figures["duckdb"].append(_timed(_duckdb, path))
    med = {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for k, v in figures.items()
    }
    for k, (w, cpu) in med.items():
        print(f"{k:7s} wall {w:6.3f} s  CPU {cpu:6.3f} s  (median of {args.repeats})")
    print(
        f"duckdb / numpy: wall {med['duckdb'][0] / med['numpy'][0]:.2f}x, "
        f"CPU {med['duckdb'][1] / med['numpy'][1]:.2f}x; load {os.getloadavg()[0]:.1f}"
    )
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
