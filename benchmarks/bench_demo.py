"""``analyse demo`` against its six simulations, in CPU seconds, measured alternately in one run.

    python benchmarks/bench_demo.py [--repeats 3]

Each round runs, as fresh processes in fresh temporary folders:

* ``analyse demo`` (the six walkthrough simulations, their profiles, the comparative HTML report
  with its predicted transitions), and
* the floor: a Python process that imports the engine and simulates the same six run
  configurations to files (``engine.simulate_to_file``), nothing else.

CPU is user + system of the child process (``RUSAGE_CHILDREN`` before and after), so the load
of the machine changes the wall time more than the figure; the ratio of the medians is printed
with the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

FLOOR = """
import engine
from pathlib import Path
from analyser.cli.demo import walkthrough_configs
from engine.config import RunConfig
for cfg in walkthrough_configs():
    engine.simulate_to_file(RunConfig.from_toml(cfg), Path.cwd() / f"{cfg.stem}.h5")
"""


def _run(argv: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``argv`` run in a fresh temporary folder."""
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            argv, cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    analyse = Path(sys.executable).with_name("analyse")
    demo_cmd = (
        [str(analyse), "demo"]
        if analyse.exists()
        else [
            sys.executable,
            "-c",
            "import sys; from analyser.cli import main; sys.exit(main(['demo']))",
        ]
    )
    floor_cmd = [sys.executable, "-c", FLOOR]
    load0 = os.getloadavg()[0]
    demo, floor = [], []
    for _ in range(args.repeats):
        demo.append(_run(demo_cmd))
        floor.append(_run(floor_cmd))
    load1 = os.getloadavg()[0]
    d = statistics.median(c for c, _ in demo)
    f = statistics.median(c for c, _ in floor)
    print(f"load average {load0:.1f} at the start, {load1:.1f} at the end (2 cores)")
    print(
        "analyse demo      CPU "
        + ", ".join(f"{c:.2f}" for c, _ in demo)
        + " s"
        + f"  (wall {statistics.median(w for _, w in demo):.1f} s)"
    )
    print(
        "six simulations   CPU "
        + ", ".join(f"{c:.2f}" for c, _ in floor)
        + " s"
        + f"  (wall {statistics.median(w for _, w in floor):.1f} s)"
    )
    print(f"median ratio {d / f:.2f}x ({d:.2f} s / {f:.2f} s CPU; target 2.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
