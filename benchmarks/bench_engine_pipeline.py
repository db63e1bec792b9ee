"""Benchmarks of the execute half of the engine. Prints figures; asserts nothing.

    python benchmarks/bench_engine_pipeline.py            # all three, 3 repeats each
    python benchmarks/bench_engine_pipeline.py walkthrough4 --repeats 5

Each benchmark runs in a fresh subprocess (so peak RSS is its own) and reports the median over
the repeats of: compile, execute, and the end-to-end ``engine.simulate_to_file`` (compile +
execute + write), the number of executed steps, and the subprocess's peak resident memory.

Benchmarks and their targets:

* ``walkthrough4``: walkthrough step 4 (ResNet-101 64x64, 2 IPUs, GA 8, DI 4): under 3 s.
* ``bert_large``: BERT-Large pre-training, SL 128, pipelined over 4 IPUs x 4 replicas
  (assets/runs/bert-large-pretraining.toml): under 6 s.
* ``million``: a configuration producing at least 1,000,000 executed steps (BERT-Base
  pipelined over 4 IPUs, GA 128, DI 4): under 30 s and 4 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import fresh_runs  # benchmarks/fresh_runs.py

ROOT = Path(__file__).resolve().parents[1]

BENCHES: dict[str, dict] = {
    "walkthrough4": {"toml": "assets/runs/walkthrough/4-device-iterations.toml", "target_s": 3.0},
    "bert_large": {"toml": "assets/runs/bert-large-pretraining.toml", "target_s": 6.0},
    "million": {
        "toml": None,
        "config": dict(
            name="1M steps: BERT-Base, 4 IPUs, GA 128, DI 4",
            model="bert-base",
            seq_length=128,
            num_ipus=4,
            strategy="pipelined",
            split_points=["encoder.layer.2", "encoder.layer.5", "encoder.layer.8"],
            micro_batch_size=4,
            gradient_accumulation=128,
            device_iterations=4,
            precision="16.16",
            optimiser="adam",
            output_mode="all",
        ),
        "target_s": 30.0,
        "target_rss_gb": 4.0,
    },
}


def _config(spec: dict):
    from engine.config import RunConfig

    if spec.get("toml"):
        return RunConfig.from_toml(ROOT / spec["toml"])
    return RunConfig.from_dict(spec["config"])


def run_one(name: str) -> dict:
    """One measurement in this process (called in a subprocess).

    End to end = compile + execute + profile data + write. The execution is written even when
    the compiler reports the program out of memory, so the figure always covers the executed
    steps (``analyse``/``simulate_to_file`` would write memory only for an OOM program).
    """
    import resource

    import engine
    from engine.execute import execute
    from engine.profile_data import profile_data
    from profiles import write_profile

    spec = BENCHES[name]
    config = _config(spec)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        compiled = engine.compile(config)
        t1 = time.perf_counter()
        ex = execute(compiled)
        t2 = time.perf_counter()
        data = profile_data(compiled, ex)
        data["/meta"]["status"] = "ok"
        write_profile(Path(d) / "bench.h5", data)
        t3 = time.perf_counter()
        size = (Path(d) / "bench.h5").stat().st_size
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {
        "compile_s": t1 - t0,
        "execute_s": t2 - t1,
        "end_to_end_s": t3 - t0,
        "steps": ex.num_steps,
        "file_bytes": size,
        "peak_rss_bytes": rss,
        "oom": int(compiled.oom),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "names", nargs="*", help=f"benchmarks to run (default all): {', '.join(BENCHES)}"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one)))
        return 0
    unknown = [n for n in args.names if n not in BENCHES]
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; choose from {', '.join(BENCHES)}")
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    for name in args.names or list(BENCHES):
        med = fresh_runs.medians(__file__, name, args.repeats)
        spec = BENCHES[name]
        ok = med["end_to_end_s"] < spec["target_s"]
        if "target_rss_gb" in spec:
            ok = ok and med["peak_rss_bytes"] < spec["target_rss_gb"] * 2**30
        print(
            f"{name:13s} steps {int(med['steps']):>10,}  compile {med['compile_s']:6.2f} s  "
            f"execute {med['execute_s']:6.2f} s  end-to-end {med['end_to_end_s']:6.2f} s "
            f"(target < {spec['target_s']:.0f} s)  peak RSS {med['peak_rss_bytes'] / 2**20:7.0f} MiB"
            f"  file {med['file_bytes'] / 2**20:6.1f} MiB  {'OK' if ok else 'OVER TARGET'}"
            f"{'  (compiler: OOM)' if med['oom'] else ''}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
