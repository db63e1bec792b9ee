"""Benchmark of the simulation service and ``analyse tune`` (issue 12). Prints figures; asserts
nothing.

    python benchmarks/bench_tune.py                 # 200-configuration grid, 1 and 2 workers
    python benchmarks/bench_tune.py --workers 1 2 4 --grid-only

1. **Grid throughput**: a 200-configuration grid of walkthrough variants (ResNet-101 64x64, two
   Mk2 IPUs pipelined at layer3.8, micro-batch 64, FP16: precision 16.16 / 16.32 x gradient
   accumulation 8, 12, 16, 24, 32 x device iterations 1, 2, 4, 8, 16 x {sync, async} loader x
   {float, 8-bit} input) simulated through the simulation service on an embedded cluster of N
   worker processes, each N with a fresh cache, so all 200 are simulated. Prints configurations
   per second (the cluster already started; its start-up printed apart) and the speed-up over
   one worker.
2. **Guided vs grid**: from walkthrough step 1 (FP32, out of memory) over the same options plus
   precision 32.32, the guided search with a budget of 40 against the grid's best: the best
   throughput each found and how many configurations the guided search simulated (the grid
   reuses the grid benchmark's 200 simulations and simulates the FP32 rest).

Run from a guarded ``__main__`` (the service's workers are spawned).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARY = [
    "precision=16.16,16.32",
    "gradient_accumulation=8,12,16,24,32",
    "device_iterations=1,2,4,8,16",
    "loader_mode=sync,async",
    "eight_bit_input=false,true",
]


def _start(step: str) -> dict:
    """A walkthrough step's configuration, named like every variant (the name is part of the
    cache key, so the guided-vs-grid comparison reuses the grid's simulations)."""
    from engine.config import RunConfig

    cfg = RunConfig.from_toml(ROOT / "assets" / "runs" / "walkthrough" / f"{step}.toml").to_dict()
    return {**cfg, "name": "walkthrough variant"}


def grid(workers: int, cache: str) -> dict:
    from analyser.sim.service import SimulationService
    from analyser.sim.tune import build_space

    start = _start("2-half")
    space = build_space(start, VARY, [], "throughput")
    configs = [c for c in (space.config(a) for a in space.assignments()) if c is not None]
    assert len(configs) == 200, len(configs)
    svc = SimulationService(workers=workers, cache_dir=cache)
    t0 = time.perf_counter()
    assert svc.n_workers == workers
    startup = time.perf_counter() - t0
    t1 = time.perf_counter()
    out = svc.run(configs)
    wall = time.perf_counter() - t1
    svc.close()
    statuses = {s: sum(r.status == s for r in out) for s in {r.status for r in out}}
    per = [r.seconds for r in out if r.simulated]
    return {
        "workers": workers,
        "configs": len(configs),
        "startup_s": startup,
        "wall_s": wall,
        "configs_per_s": len(configs) / wall,
        "median_sim_s": statistics.median(per) if per else float("nan"),
        "statuses": statuses,
        "best": max(
            (r.figures["throughput_samples_per_s"] for r in out if r.status == "ok"),
            default=None,
        ),
    }


def guided_vs_grid(workers: int, budget: int, grid_cache: str) -> dict:
    """The guided search on a fresh cache, then the full grid on the grid benchmark's cache
    (its 200 FP16 variants are answered from there; the FP32 ones are simulated)."""
    from analyser.sim.service import SimulationService
    from analyser.sim.tune import build_space, tune

    start = _start("1-base")
    vary = ["precision=32.32,16.16,16.32", *VARY[1:]]
    space = build_space(start, vary, [], "throughput")
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as cache:
        svc = SimulationService(workers=workers, cache_dir=cache)
        t0 = time.perf_counter()
        guided = tune(space, svc, budget=budget, strategy="guided")
        t_guided = time.perf_counter() - t0
        svc.close()
    svc = SimulationService(workers=workers, cache_dir=grid_cache)
    t0 = time.perf_counter()
    full = tune(space, svc, budget=space.size + 1, strategy="grid")
    t_grid = time.perf_counter() - t0
    svc.close()
    g, b = guided.best, full.best
    return {
        "space": space.size,
        "guided_tried": len(guided.rows),
        "guided_simulated": guided.simulations,
        "guided_s": t_guided,
        "guided_best": None if g is None else g.figures["throughput_samples_per_s"],
        "grid_tried": len(full.rows),
        "grid_simulated": full.simulations,
        "grid_s": t_grid,
        "grid_best": None if b is None else b.figures["throughput_samples_per_s"],
        "rank_of_guided_best": None
        if g is None
        else 1 + [r.response.key for r in full.ranked()].index(g.response.key),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--grid-only", action="store_true")
    ap.add_argument("--guided-only", action="store_true")
    ap.add_argument("--budget", type=int, default=40)
    args = ap.parse_args()
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start")
    tmp = tempfile.TemporaryDirectory(prefix="bench-tune-")
    caches = {n: os.path.join(tmp.name, f"w{n}") for n in args.workers}
    if not args.guided_only:
        rows = []
        for n in args.workers:
            r = grid(n, caches[n])
            rows.append(r)
            print(
                f"grid of {r['configs']} walkthrough variants, {n} worker(s): "
                f"{r['wall_s']:.1f} s, {r['configs_per_s']:.2f} configurations/s "
                f"(median simulation {r['median_sim_s']:.2f} s in a worker; cluster start-up "
                f"{r['startup_s']:.1f} s; {r['statuses']}); load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        base = rows[0]["configs_per_s"]
        for r in rows[1:]:
            print(
                f"speed-up {r['workers']} vs {rows[0]['workers']} worker(s): "
                f"{r['configs_per_s'] / base:.2f}x"
            )
    if not args.grid_only:
        r = guided_vs_grid(max(args.workers), args.budget, caches[max(args.workers)])
        print(
            f"guided (budget {args.budget}) from walkthrough step 1 over a space of "
            f"{r['space']}: best {r['guided_best']:,.1f} samples/s after {r['guided_tried']} "
            f"configurations ({r['guided_simulated']} simulated, {r['guided_s']:.1f} s); grid: "
            f"best {r['grid_best']:,.1f} samples/s after {r['grid_tried']} ({r['grid_s']:.1f} "
            f"s); the guided best is #{r['rank_of_guided_best']} of the grid; load average "
            f"{os.getloadavg()[0]:.1f}"
        )
    tmp.cleanup()


if __name__ == "__main__":
    main()
