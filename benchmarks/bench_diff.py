"""``analyse diff`` of two 10,000,000-step runs against its read floor. Prints figures; asserts
nothing.

    python benchmarks/bench_diff.py [A.h5 B.h5] [--repeats 3] [--other-tree DIR]

A and B default to two synthetic profiles of bench_10m.py's shape (10,000,000 steps, 4 IPUs x
1,472 tiles, 5,000 programs; seeds 0 and 1), written to a temporary folder. Each measurement is a
fresh process; printed: CPU (user + system, getrusage of the child) and peak RSS, medians of
``--repeats``, alternating so that the load falls on every case alike:

* floor: read the four step columns the diff needs (ipu, program, cycles, type) of both runs
  with h5py and numpy and sum the cycles per IPU and step type of each (the per-type delta);
* diff: ``analyse diff A B --json -o OUT`` of this tree;
* ``--other-tree DIR``: the same command run from another checkout (a before figure).

The checkouts' packages are byte-compiled first (``compileall``; this machine sets
PYTHONDONTWRITEBYTECODE, so a fresh process would otherwise compile every changed module from
source, which an installed package does not). Also printed: the user and system parts of the
CPU medians (the system part, the kernel zeroing the pages of the columns read, is much the
same for every case and varies most with the load) and the load average before and after.

Target: the diff within 2x the floor's CPU and 1.5x its memory.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FLOOR = """
import sys, h5py, numpy as np
import hdf5plugin  # the Blosc2 filter of format 1.4's step columns
tot = []
for path in sys.argv[1:3]:
    with h5py.File(path, "r") as f:
        g = f["execution/steps"]
        c = {k: g[k][()] for k in ("ipu", "program", "cycles", "type")}
    n_ipus = int(c["ipu"].max()) + 1
    key = c["ipu"].astype(np.int64) * 64 + c["type"].astype(np.int64)
    tot.append(np.bincount(key, c["cycles"].astype(np.float64), n_ipus * 64))
print(int((tot[1] - tot[0]).sum()))
"""


def _measure(argv: list[str], cwd: Path) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, subprocess, sys, json; "
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "print(json.dumps([p.returncode, u.ru_utime, u.ru_stime, u.ru_maxrss]))",
            *argv,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    import json

    code, user, system, rss = json.loads(r.stdout.strip().splitlines()[-1])
    if code:
        raise SystemExit(f"{argv} failed ({code}): {r.stderr[-500:]}")
    return user + system, rss / 1024, user  # s, MiB (Linux: ru_maxrss in kB), s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="*")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--other-tree", help="another checkout whose analyse diff to time as well")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    if args.profiles:
        a, b = (Path(p).resolve() for p in args.profiles[:2])
    else:
        sys.path.insert(0, str(ROOT))
        from profiles.synthetic import write_synthetic_profile

        a, b = Path(tmp.name) / "a.h5", Path(tmp.name) / "b.h5"
        print("writing two 10,000,000-step synthetic profiles ...", flush=True)
        for path, seed in ((a, 0), (b, 1)):
            write_synthetic_profile(
                path, n_steps=10_000_000, n_ipus=4, tiles=1472, n_programs=5000, seed=seed
            )
    out = Path(tmp.name) / "diff.json"
    cli = "import sys; from analyser.cli import main; sys.exit(main())"
    diff = [sys.executable, "-c", cli, "diff", str(a), str(b), "--json", "-o", str(out), "--force"]
    cases = {"floor": ([sys.executable, "-c", FLOOR, str(a), str(b)], ROOT), "diff": (diff, ROOT)}
    if args.other_tree:
        cases["diff (other tree)"] = (diff, Path(args.other_tree).resolve())
    for tree in {cwd for _, cwd in cases.values()}:
        for package in ("analyser", "profiles", "engine"):
            compileall.compile_dir(tree / package, quiet=1)
    got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cases}
    load0 = os.getloadavg()[0]
    for _ in range(args.repeats):
        for name, (argv, cwd) in cases.items():
            got[name].append(_measure(argv, cwd))
    floor_cpu = statistics.median(c for c, _, _ in got["floor"])
    floor_rss = statistics.median(m for _, m, _ in got["floor"])
    for name, runs in got.items():
        cpu = statistics.median(c for c, _, _ in runs)
        user = statistics.median(u for _, _, u in runs)
        rss = statistics.median(m for _, m, _ in runs)
        print(
            f"{name:18s} CPU {cpu:6.2f} s ({cpu / floor_cpu:4.2f}x floor; user {user:5.2f} s), "
            f"peak RSS {rss:6.0f} MiB ({rss / floor_rss:4.2f}x floor)"
        )
    print(
        f"medians of {args.repeats}; load average {load0:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
