"""Start-up of the ``analyse`` command: CPU (user + system of the child process) of
``analyse --version``, ``analyse --help`` and ``analyse diff --help``, against the floor of a bare
``python -c pass``. Prints figures (medians of --repeats fresh processes); asserts nothing.

    python benchmarks/bench_startup.py [--repeats 9]

Target: ``analyse --version`` under 0.15 s CPU.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cpu(argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        argv,
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    cli = [sys.executable, "-c", "import sys; from analyser.cli import main; sys.exit(main())"]
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "analyse --version": [*cli, "--version"],
        "analyse --help": [*cli, "--help"],
        "analyse diff --help": [*cli, "diff", "--help"],
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.repeats):  # alternating, so that the load falls on every case alike
        for name, argv in cases.items():
            times[name].append(_cpu(argv))
    floor = statistics.median(times["python -c pass"])
    for name, t in times.items():
        m = statistics.median(t)
        print(f"{name:24s} {m:.3f} s CPU (median of {args.repeats}), {m / floor:.1f}x python")
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
