"""Benchmark of the engine's growth with the number of IPUs, and of its end to end against the bare
write of its own output. Prints figures; asserts nothing.

    python benchmarks/bench_engine_scaling.py [--repeats 3] [--ipus 4,8,16]

* BERT-Large pre-training SL 128 (assets/runs/bert-large-pretraining.toml) pipelined over 4, 8
  and 16 IPUs (encoder layers split evenly; 4 replicas as in the file): ``build_memory``, compile, end to end
  (compile + execute + profile data + write), the number of leaf programs and liveness steps;
  the growth of each time is fitted as ``time ~ IPUs^b`` and compared with the growth of the
  number of programs (the work). Targets: 16 IPUs ``build_memory`` < 0.3 s, end to end < 1.2 s;
  end to end growing no faster than the programs.
* Walkthrough step 4 (ResNet-101 64x64, 2 IPUs, GA 8, DI 4): end to end against a bare h5py
  write of the same arrays (every dataset of the profile written with the writer's compression
  after shuffle, no checksums, no checks; arrays the engine hands over as runs, the per-tile
  cycles, laid out as plain numpy arrays before the bare write's clock starts). Target: within
  1.5x.

Each measurement runs in a fresh subprocess (engine imported before the clock starts); medians.
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
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _bert(n_ipus: int):
    from engine.config import RunConfig

    cfg = RunConfig.from_toml(ROOT / "assets/runs/bert-large-pretraining.toml").model_dump()
    layers = 24
    cuts = sorted({round(layers * k / n_ipus) for k in range(1, n_ipus)})
    cfg.update(
        name=f"BERT-Large SL128 over {n_ipus} IPUs",
        num_ipus=n_ipus,
        split_points=[f"encoder.layer.{c}" for c in cuts],
    )
    return RunConfig.from_dict(cfg)


def _walkthrough4():
    from engine.config import RunConfig

    return RunConfig.from_toml(ROOT / "assets/runs/walkthrough/4-device-iterations.toml")


def bare_write(path: Path, data: dict) -> None:
    """Every array of a profile ``data`` dict written with h5py (the writer's codec for arrays
    over 64 KiB, as the writer compresses large datasets; no checksums, no checks), strings as variable-length UTF-8, scalars as attributes."""
    import h5py

    from profiles import codec

    def _bare_filters() -> dict:  # the writer's codec, without the checksums it adds
        return {k: v for k, v in codec.filters().items() if k != "fletcher32"}

    with h5py.File(path, "w") as f:
        for gp, fields in data.items():
            g = f.require_group(gp) if gp != "/" else f
            for name, value in fields.items():
                arr = np.asarray(value) if not isinstance(value, dict | str) else None
                if arr is None or arr.ndim == 0:
                    g.attrs[name] = json.dumps(value, default=str) if arr is None else value
                    continue
                if arr.dtype == object or arr.dtype.kind == "U":
                    g.create_dataset(name, data=arr.astype(object), dtype=h5py.string_dtype())
                elif arr.nbytes > 65536:
                    g.create_dataset(name, data=arr, **_bare_filters())
                else:
                    g.create_dataset(name, data=arr)


def dense(data: dict) -> dict:
    """``data`` with every array given as runs (``profiles.runs.RunRows``, e.g. the engine's
    ``/programs/tile_cycles``) laid out as the plain numpy array it stands for."""
    from profiles.runs import RunRows

    return {
        gp: {k: np.asarray(v) if isinstance(v, RunRows) else v for k, v in fields.items()}
        for gp, fields in data.items()
    }


def run_one(which: str) -> dict:
    import engine
    import engine.compiler as ec
    from engine.execute import execute
    from engine.profile_data import profile_data
    from profiles import write_profile

    config = _walkthrough4() if which == "walkthrough4" else _bert(int(which))
    spent = {"build_memory": 0.0}
    real = ec.build_memory

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            spent["build_memory"] += time.perf_counter() - t

    ec.build_memory = timed
    with tempfile.TemporaryDirectory() as d:
        c0 = time.process_time()
        t0 = time.perf_counter()
        compiled = engine.compile(config)
        t1 = time.perf_counter()
        ex = execute(compiled)
        data = profile_data(compiled, ex)
        data["/meta"]["status"] = "ok"
        t2 = time.perf_counter()
        write_profile(Path(d) / "bench.h5", data)
        t3 = time.perf_counter()
        c3 = time.process_time()
        data = dense(data)  # the bare write takes the same arrays, laid out before its clock
        t3b = time.perf_counter()
        c3b = time.process_time()
        bare_write(Path(d) / "bare.h5", data)
        t4 = time.perf_counter()
        c4 = time.process_time()
    return {
        "build_memory_s": spent["build_memory"],
        "compile_s": t1 - t0,
        "execute_s": t2 - t1,
        "write_s": t3 - t2,
        "end_to_end_s": t3 - t0,
        "bare_write_s": t4 - t3b,
        "end_to_end_cpu_s": c3 - c0,
        "bare_write_cpu_s": c4 - c3b,
        "programs": len(compiled.programs.name),
        "nodes": len(data["/programs/nodes"]["name"]) if "/programs/nodes" in data else 0,
        "lsteps": len(compiled.liveness.step_program),
        "steps": int(ex.num_steps),
    }


def exponent(xs, ys) -> float:
    """Exponent b of the least-squares fit ys = a * xs ** b (nan when xs do not vary)."""
    if len(set(xs)) < 2:
        return float("nan")
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ipus", default="4,8,16")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one)))
        return 0
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")

    def med(which: str) -> dict:
        return fresh_runs.medians(__file__, which, args.repeats)

    ipus = [int(x) for x in args.ipus.split(",")]
    res = {n: med(str(n)) for n in ipus}
    for n, r in res.items():
        print(
            f"BERT-Large over {n:2d} IPUs: programs {int(r['programs']):6,}, liveness steps "
            f"{int(r['lsteps']):5,}, executed steps {int(r['steps']):9,}; build_memory "
            f"{r['build_memory_s']:.3f} s, compile {r['compile_s']:.3f} s, write "
            f"{r['write_s']:.3f} s, end to end {r['end_to_end_s']:.3f} s (CPU "
            f"{r['end_to_end_cpu_s']:.3f} s; bare write {r['bare_write_s']:.3f} s, CPU "
            f"{r['bare_write_cpu_s']:.3f} s; written program nodes {int(r['nodes']):,})"
        )
    if 16 in res:
        r = res[16]
        print(
            f"  targets at 16 IPUs: build_memory {r['build_memory_s']:.3f} s (< 0.3 s), "
            f"end to end {r['end_to_end_s']:.3f} s (< 1.2 s)"
        )
    if len(ipus) >= 3:
        prog = [res[n]["programs"] for n in ipus]
        print(f"  growth over {ipus} IPUs: programs ~ n^{exponent(ipus, prog):.2f}")
        nodes = [res[n]["nodes"] for n in ipus]
        print(
            f"  written program nodes (compiled programs + execute's own) ~ "
            f"n^{exponent(ipus, nodes):.2f}: the output grows with the IPUs"
        )
        for k in (
            "build_memory_s",
            "compile_s",
            "write_s",
            "end_to_end_s",
            "end_to_end_cpu_s",
            "bare_write_s",
            "bare_write_cpu_s",
        ):
            ys = [res[n][k] for n in ipus]
            print(
                f"  {k[:-2]:16s} ~ n^{exponent(ipus, ys):.2f} ("
                + (f"~ programs^{exponent(prog, ys):.2f}, " if len(set(prog)) > 1 else "")
                + f"~ written nodes^{exponent(nodes, ys):.2f})"
            )
    w = med("walkthrough4")
    print(
        f"walkthrough step 4: end to end {w['end_to_end_s']:.3f} s (compile {w['compile_s']:.3f} "
        f"s, build_memory {w['build_memory_s']:.3f} s, execute and profile data "
        f"{w['execute_s']:.3f} s, write {w['write_s']:.3f} s = "
        f"{w['write_s'] / w['bare_write_s']:.2f}x the bare write), bare write of its output "
        f"{w['bare_write_s']:.3f} s: {w['end_to_end_s'] / w['bare_write_s']:.2f}x (target < "
        f"1.5x); in CPU time {w['end_to_end_cpu_s']:.3f} s vs {w['bare_write_cpu_s']:.3f} s: "
        f"{w['end_to_end_cpu_s'] / w['bare_write_cpu_s']:.2f}x"
    )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
