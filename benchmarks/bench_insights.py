"""Benchmark of ``analyse insights`` end to end against the sum of its simulations.

For walkthrough steps (``assets/runs/walkthrough``), each in a fresh process with a fresh
simulation cache: ``analyse insights STEP.h5 --json`` (its re-simulations in this process, the
default) and the same with ``--workers 2`` (the Dask cluster), timed end to end, against the sum
of the simulations' own seconds (stored with each answer in the cache) and ``--no-resimulate``
(process start, imports, analysis and rules: the fixed part). Prints one row per run and the
ratio end to end / sum of simulations (target: within 1.3x in process), with each run's CPU
seconds (user + system) beside its wall time, since on a shared machine wall time mostly
measures the others' load.

The repository's modules are byte-compiled first (``compileall``): an installed package has its
``.pyc`` files, and without them (``PYTHONDONTWRITEBYTECODE`` set, as on some CI machines)
every fresh process compiles the analyser again, about 0.25 s of CPU.

    python benchmarks/bench_insights.py [--steps 1 4] [--repeats 2] [--no-cluster]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _profile(step: int, folder: Path) -> Path:
    import engine
    from analyser.cli.demo import walkthrough_configs
    from engine.config import RunConfig

    cfg = walkthrough_configs()[step - 1]
    out = folder / f"{cfg.stem}.h5"
    engine.simulate_to_file(RunConfig.from_toml(cfg), out, overwrite=True)
    return out


def _cpu_of_children() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _run(profile: Path, extra: list[str], cache: Path) -> tuple[float, float, int, float]:
    """Wall seconds of one ``analyse insights`` run, the sum of its simulations' seconds, how
    many it ran (answers in the fresh cache) and its CPU seconds (with its worker processes)."""
    env = dict(os.environ, ANALYSE_CACHE=str(cache))
    env.pop("ANALYSE_SCHEDULER", None)
    cmd = [
        str(Path(sys.executable).with_name("analyse")),
        "insights",
        str(profile),
        "--json",
        *extra,
    ]
    t0, c0 = time.perf_counter(), _cpu_of_children()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu_of_children() - c0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    sims = [json.loads(p.read_text()) for p in cache.glob("*.json")]
    return wall, sum(float(s.get("seconds") or 0.0) for s in sims), len(sims), cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-cluster", action="store_true", help="leave out the --workers 2 runs")
    args = ap.parse_args()
    root_dir = Path(__file__).resolve().parents[1]
    for package in ("analyser", "engine", "profiles"):
        compileall.compile_dir(root_dir / package, quiet=1)
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory(prefix="bench-insights-") as tmp:
        root = Path(tmp)
        for step in args.steps:
            profile = _profile(step, root)
            modes = [("no re-simulation", ["--no-resimulate"]), ("in process", [])]
            if not args.no_cluster:
                modes.append(("Dask cluster (--workers 2)", ["--workers", "2"]))
            for label, extra in modes:
                rows = []
                for r in range(args.repeats):
                    cache = root / f"cache-{step}-{label[:2]}-{r}"
                    cache.mkdir()
                    rows.append(_run(profile, extra, cache))
                wall = statistics.median(r[0] for r in rows)
                sims = statistics.median(r[1] for r in rows)
                cpu = statistics.median(r[3] for r in rows)
                n = rows[0][2]
                ratio = f"{wall / sims:.2f}x" if sims else "-"
                print(
                    f"step {step} {label:28s} end to end {wall:6.2f} s (CPU {cpu:5.2f} s); "
                    f"{n} simulations summing {sims:6.2f} s; ratio {ratio}"
                )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
