"""Benchmark of the simulation service and ``analyse tune``. Prints figures; asserts
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

3. **Against a process pool** (``--vs-pool``): ``analyse tune`` of walkthrough step 2 over
   gradient accumulation 3, 4, 6, 8, 12, 16, 24 (7 configurations, the start one of them) with
   ``--workers 2`` and a fresh cache, against a script that simulates the same 7 configurations
   (the worker's own simulate-and-read-figures function) in a ``multiprocessing`` Pool(2): each
   a fresh process, CPU seconds of it and every process it started (``RUSAGE_CHILDREN``) and
   wall seconds, run alternately; the first round is "cold" (the first run of each after the
   other), the later ones "warm". Prints the ratios measured in this one run.

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


POOL_GA = "3,4,6,8,12,16,24"
POOL_SCRIPT = """
import sys
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, {root!r})


def one(args):
    from analyser.sim.service.worker import _simulate

    cfg, out = args
    return _simulate(cfg, Path(out))


if __name__ == "__main__":
    from engine.config import RunConfig

    start = RunConfig.from_toml({config!r}).to_dict()
    jobs = [({{**start, "gradient_accumulation": ga}}, f"{{{out!r}}}/ga{{ga}}.h5")
            for ga in ({ga})]
    with get_context("spawn").Pool(2) as pool:
        res = pool.map(one, jobs, chunksize=1)
    assert all(r["status"] in ("ok", "oom") for r in res), res
"""


def _measured(argv: list[str], env: dict) -> tuple[float, float]:
    """(CPU s of the process and everything it started, wall s) of one command."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def vs_pool(rounds: int) -> None:
    config = str(ROOT / "assets" / "runs" / "walkthrough" / "2-half.toml")
    analyse = str(Path(sys.executable).parent / "analyse")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    figures: dict[str, list[tuple[float, float]]] = {"tune": [], "pool": []}
    with tempfile.TemporaryDirectory(prefix="bench-tune-pool-") as tmp:
        for i in range(rounds):
            out = Path(tmp) / f"pool{i}"
            out.mkdir()
            script = Path(tmp) / f"pool{i}.py"
            script.write_text(
                POOL_SCRIPT.format(root=str(ROOT), config=config, out=str(out), ga=POOL_GA)
            )
            tune = [
                analyse,
                "tune",
                config,
                "--vary",
                f"gradient_accumulation={POOL_GA}",
                "--workers",
                "2",
                "--cache",
                f"{tmp}/cache{i}",
                "-o",
                f"{tmp}/tune{i}",
                "--quiet",
            ]
            figures["tune"].append(_measured(tune, env))
            figures["pool"].append(_measured([sys.executable, str(script)], env))
            for name in ("tune", "pool"):
                cpu, wall = figures[name][-1]
                print(
                    f"round {i + 1} ({'cold' if i == 0 else 'warm'}) {name}: {cpu:.1f} s CPU, "
                    f"{wall:.1f} s wall; load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    for label, sel in (("cold", figures["tune"][:1]), ("warm", figures["tune"][1:])):
        if not sel:
            continue
        idx = [0] if label == "cold" else list(range(1, rounds))
        t_cpu = statistics.median(figures["tune"][i][0] for i in idx)
        p_cpu = statistics.median(figures["pool"][i][0] for i in idx)
        t_wall = statistics.median(figures["tune"][i][1] for i in idx)
        p_wall = statistics.median(figures["pool"][i][1] for i in idx)
        print(
            f"{label}: tune / Pool(2) = {t_cpu / p_cpu:.2f}x CPU ({t_cpu:.1f} / {p_cpu:.1f} s), "
            f"{t_wall / p_wall:.2f}x wall ({t_wall:.1f} / {p_wall:.1f} s)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--grid-only", action="store_true")
    ap.add_argument("--guided-only", action="store_true")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument(
        "--vs-pool",
        type=int,
        nargs="?",
        const=3,
        metavar="ROUNDS",
        help="only analyse tune of 7 configurations against a Pool(2) (default 3 rounds)",
    )
    args = ap.parse_args()
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start")
    if args.vs_pool:
        vs_pool(args.vs_pool)
        return
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
