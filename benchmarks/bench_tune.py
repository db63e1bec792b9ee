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
   other), the later ones "warm" (each tune still on a fresh cache), then "cached" (each tune
   again on its first round's cache: every answer from there, against the pool simulating
   them again). ``--before TREE`` adds the tune of another checkout (the code before a
   change) to every round, so before and after are measured in one run; ``--configs 200``
   takes the 200-configuration grid above from 2-half (201 with the start) instead of the 7.
   Prints the ratios measured in this one run.

Run from a guarded ``__main__`` (the service's workers are spawned).
"""

from __future__ import annotations

import argparse
import json
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
    svc.client().wait_for_workers(workers, timeout=120)  # they join the scheduler as they start
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
import json
import sys
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, {root!r})


def one(args):
    from analyser.sim.service.worker import _simulate

    cfg, out = args
    return _simulate(cfg, Path(out))


if __name__ == "__main__":
    configs = json.loads(Path({jobs!r}).read_text())
    jobs = [(cfg, f"{{{out!r}}}/c{{i}}.h5") for i, cfg in enumerate(configs)]
    with get_context("spawn").Pool(2) as pool:
        res = pool.map(one, jobs, chunksize=1)
    assert all(r["status"] in ("ok", "oom") for r in res), res
"""


def _pool_configs(vary: list[str]) -> list[dict]:
    """The configurations ``analyse tune`` of 2-half over ``vary`` simulates: the grid and the
    start (once)."""
    from analyser.sim.tune import build_space

    start = _start_config("2-half")
    space = build_space(start, vary, [], "throughput")
    grid = [c for c in (space.config(a) for a in space.assignments()) if c is not None]
    return grid if start in grid else [start, *grid]


def _start_config(step: str) -> dict:
    from engine.config import RunConfig

    return RunConfig.from_toml(ROOT / "assets" / "runs" / "walkthrough" / f"{step}.toml").to_dict()


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


def _report(label: str, figures: dict, idx: list[int], names: list[str]) -> None:
    """One line per tree: its tune against the pool, medians of the rounds ``idx``."""
    p_cpu = statistics.median(figures["pool"][i][0] for i in idx)
    p_wall = statistics.median(figures["pool"][i][1] for i in idx)
    for name in names:
        rows = [figures[name][i] for i in idx if i < len(figures[name])]
        if not rows:
            continue
        t_cpu = statistics.median(r[0] for r in rows)
        t_wall = statistics.median(r[1] for r in rows)
        print(
            f"{label}: {name} / Pool(2) = {t_cpu / p_cpu:.2f}x CPU ({t_cpu:.1f} / {p_cpu:.1f} s),"
            f" {t_wall / p_wall:.2f}x wall ({t_wall:.1f} / {p_wall:.1f} s)"
        )


def vs_pool(rounds: int, before: str | None = None, configs: int = 7) -> None:
    """``analyse tune`` (this tree, and ``before`` when given) against the Pool(2), alternately;
    after the rounds, each tree's tune again on its first round's cache ("cached": every
    answer from the cache, against the pool simulating them again)."""
    config = str(ROOT / "assets" / "runs" / "walkthrough" / "2-half.toml")
    vary = [f"gradient_accumulation={POOL_GA}"] if configs == 7 else VARY
    jobs = _pool_configs(vary)
    analyse = str(Path(sys.executable).parent / "analyse")
    trees = {"tune": str(ROOT), **({"tune before": before} if before else {})}
    figures: dict[str, list[tuple[float, float]]] = {"pool": []}
    cached: dict[str, tuple[float, float]] = {}
    print(f"{len(jobs)} configurations; trees: {trees}")
    for name, tree in trees.items():
        # a tree without byte-compiled modules (a fresh checkout under PYTHONDONTWRITEBYTECODE)
        # compiles them in every process it starts: about 0.3 s of CPU each, unlike the other
        if not any((Path(tree) / pkg / "__pycache__").is_dir() for pkg in ("analyser", "engine")):
            print(
                f"note: {name} ({tree}) has no compiled modules, so each of its processes "
                f"compiles them; run `python -m compileall -q {tree}/analyser {tree}/engine "
                f"{tree}/profiles` first for a fair comparison"
            )

    def tune_argv(tmp: str, name: str, i: int) -> list[str]:
        tag = name.replace(" ", "-")
        argv = [analyse, "tune", config]
        for v in vary:
            argv += ["--vary", v]
        return [
            *argv,
            "--workers",
            "2",
            "--budget",
            str(len(jobs) + 1),
            "--cache",
            f"{tmp}/cache-{tag}-{i}",
            "-o",
            f"{tmp}/{tag}-{i}-{len(cached)}",
            "--quiet",
        ]

    with tempfile.TemporaryDirectory(prefix="bench-tune-pool-") as tmp:
        jobs_file = Path(tmp) / "jobs.json"
        jobs_file.write_text(json.dumps(jobs))
        for i in range(rounds):
            out = Path(tmp) / f"pool{i}"
            out.mkdir()
            script = Path(tmp) / f"pool{i}.py"
            script.write_text(POOL_SCRIPT.format(root=str(ROOT), jobs=str(jobs_file), out=str(out)))
            for name, tree in trees.items():
                env = {**os.environ, "PYTHONPATH": tree}
                figures.setdefault(name, []).append(_measured(tune_argv(tmp, name, i), env))
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            figures["pool"].append(_measured([sys.executable, str(script)], env))
            for name in [*trees, "pool"]:
                cpu, wall = figures[name][-1]
                print(
                    f"round {i + 1} ({'cold' if i == 0 else 'warm'}) {name}: {cpu:.1f} s CPU, "
                    f"{wall:.1f} s wall; load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": tree}
            cached[name] = _measured(tune_argv(tmp, name, 0), env)
            print(
                f"cached {name}: {cached[name][0]:.1f} s CPU, {cached[name][1]:.1f} s wall; "
                f"load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    _report("cold", figures, [0], list(trees))
    if rounds > 1:
        _report("warm", figures, list(range(1, rounds)), list(trees))
    p_cpu = statistics.median(f[0] for f in figures["pool"])
    p_wall = statistics.median(f[1] for f in figures["pool"])
    for name, (cpu, wall) in cached.items():
        print(
            f"cached: {name} / Pool(2) = {cpu / p_cpu:.2f}x CPU ({cpu:.1f} / {p_cpu:.1f} s), "
            f"{wall / p_wall:.2f}x wall ({wall:.1f} / {p_wall:.1f} s)"
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
    ap.add_argument(
        "--before",
        metavar="TREE",
        help="with --vs-pool: also run the tune of this checkout (another version of the "
        "project), alternately with this tree's",
    )
    ap.add_argument(
        "--configs",
        type=int,
        choices=(7, 200),
        default=7,
        help="with --vs-pool: the 7 gradient accumulations, or the 200-configuration grid "
        "(201 with the start)",
    )
    args = ap.parse_args()
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start")
    if args.vs_pool:
        vs_pool(args.vs_pool, args.before, args.configs)
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
