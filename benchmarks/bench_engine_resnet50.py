"""Benchmark: ResNet-50 training on one Mk2 IPU, micro-batch 16, GA 4.

Prints, as medians over fresh processes: compile, execute and write seconds, the total, the peak
resident memory, and the simulated tile-cells per second (executed steps x tiles per IPU, over
the whole time). Targets: under 2 s and under 1 GB on a 2-core machine.

In the engine's model this configuration does not fit one IPU (see docs/engine.md), so it writes
an out-of-memory profile with no execution. The script also runs the same model with
per-block recomputation checkpoints, which fits, to time the execute half.

Usage: python benchmarks/bench_engine_resnet50.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
import engine
from engine.config import RunConfig
cfg = RunConfig.from_dict(json.loads(sys.argv[1]))
out = sys.argv[2]
t1 = time.perf_counter()
r = engine.simulate_to_file(cfg, out)
t2 = time.perf_counter()
steps = 0 if r.execution is None else int(r.execution.num_steps)
tiles = r.compiled.target.tiles_per_ipu * r.compiled.num_ipus
print(json.dumps({
    "import_s": t1 - t0,
    "compile_s": r.timings["compile_s"],
    "execute_s": r.timings["execute_s"],
    "write_s": r.timings["write_s"],
    "total_s": t2 - t1,
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "steps": steps,
    "tile_cells_per_s": steps * tiles / (t2 - t1),
    "oom": r.oom,
    "file_mb": os.path.getsize(out) / 1e6,
}))
"""

BASE = dict(model="resnet50", micro_batch_size=16, gradient_accumulation=4, precision="16.16")
BLOCKS = [f"layer{i}.{b}" for i, n in zip((1, 2, 3, 4), (3, 4, 6, 3)) for b in range(n)]
CASES = {
    "resnet50 mb16 GA4 16.16 (issue config)": BASE,
    "same + recomputation checkpoints per block (fits)": dict(
        BASE, recomputation="checkpoints", recompute_checkpoints=BLOCKS
    ),
}


def run_case(cfg: dict, runs: int) -> dict:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            out = f"{tmp}/run{i}.h5"
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, json.dumps(cfg), out],
                capture_output=True,
                text=True,
            )
            if proc.returncode:
                raise SystemExit(f"benchmark run failed:\n{proc.stderr}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    keys = [k for k in results[0] if k != "oom"]
    med = {k: statistics.median(r[k] for r in results) for k in keys}
    med["oom"] = results[0]["oom"]
    return med


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print(f"medians of {args.runs} fresh processes")
    for name, cfg in CASES.items():
        m = run_case(cfg, args.runs)
        print(
            f"{name}: {'OOM' if m['oom'] else 'fits'}; compile {m['compile_s']:.3f} s, "
            f"execute {m['execute_s']:.3f} s, write {m['write_s']:.3f} s, "
            f"total {m['total_s']:.3f} s (+ import {m['import_s']:.3f} s); "
            f"peak RSS {m['rss_mb']:.0f} MB; {int(m['steps']):,} executed steps, "
            f"{m['tile_cells_per_s'] / 1e6:.1f} M tile-cells/s; file {m['file_mb']:.1f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
