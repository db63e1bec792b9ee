"""Benchmark of 10,000,000-step profiles end to end. Prints figures; asserts nothing.

    python benchmarks/bench_10m.py [--repeats 3] [--keep DIR] [--skip-engine] [--skip-trace]

Two profiles of about 10,000,000 executed steps:

* synthetic: ``profiles.synthetic.write_synthetic_profile`` (4 IPUs x 1,472 tiles, 5,000
  programs);
* engine: BERT-Large pre-training SL 128 pipelined over 4 IPUs x 4 replicas
  (assets/runs/bert-large-pretraining.toml) with gradient accumulation 1,640 instead of 128: a
  long run of the same model (``engine.simulate_to_file``).

For each, in fresh processes (medians of ``--repeats``): the write; ``open_profile`` +
``summary()`` (metadata, table sizes, memory per IPU); ``analyse summary`` (the CLI, imports
included); ``analyse export-trace --format perfetto`` (streamed in chunks) with its output size;
the Execution Trace report offscreen (benchmarks/bench_trace.py's measurement): first paint,
pan / zoom redraw median and worst of 100, peak RSS. The trace's level-of-detail pyramids are
saved to a cache folder the first time a profile is opened (``IPU_ANALYSER_CACHE``, here a
temporary folder): the first open, which builds and saves them, is printed apart from the later
opens, which memory-map them.

Targets: write < 60 s; open + summary < 0.5 s; ``analyse summary`` < 3 s; Perfetto export
< 20 s; trace first paint < 1.5 s, redraw < 50 ms median and < 150 ms worst, memory < 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent

_WRITE = r"""
import json, sys, time
kind, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if kind == "synthetic":
    from profiles.synthetic import write_synthetic_profile
    write_synthetic_profile(path, n_steps=10_000_000, n_ipus=4, tiles=1472, n_programs=5000)
else:
    import engine
    from engine.config import RunConfig
    cfg = RunConfig.from_toml(sys.argv[3]).model_dump()
    cfg.update(gradient_accumulation=1640, name="BERT-Large SL128, GA 1640 (10M steps)")
    engine.simulate_to_file(RunConfig.from_dict(cfg), path)
print(json.dumps({"s": time.perf_counter() - t0}))
"""

_OPEN = r"""
import json, sys, time
t0 = time.perf_counter()
from profiles import open_profile
t1 = time.perf_counter()
with open_profile(sys.argv[1]) as p:
    s = p.summary()
    n = p.n_steps
print(json.dumps({"s": time.perf_counter() - t1, "steps": n}))
"""


def _py(code: str, *args: str, env: dict | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env
    )
    if out.returncode:
        sys.exit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


#: CPU seconds (user + system) of the finished child processes of each _timed call.
_CPU: list[float] = []


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(cmd: list[str], env: dict | None = None) -> float:
    """Wall time of ``cmd``; its CPU time is appended to ``_CPU``."""
    t, c = time.perf_counter(), _children_cpu()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    _CPU.append(_children_cpu() - c)
    return time.perf_counter() - t


def _cpu_median(n: int) -> float:
    """Median CPU time of the last ``n`` _timed calls."""
    return statistics.median(_CPU[-n:])


def _trace(path: Path, env: dict) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / "bench_trace.py"), "--child", "--profile", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    if out.returncode:
        sys.exit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(kind: str, folder: Path, repeats: int, trace: bool) -> None:
    path = folder / f"{kind}-10m.h5"
    w = _py(_WRITE, kind, str(path), str(ROOT / "assets/runs/bert-large-pretraining.toml"))
    size = path.stat().st_size
    opens = [_py(_OPEN, str(path)) for _ in range(repeats)]
    steps = opens[0]["steps"]
    print(
        f"{kind}: {steps:,} executed steps, {size / 2**20:.0f} MiB; write {w['s']:.1f} s "
        "(target < 60 s)"
    )
    print(
        f"  open + summary: median {statistics.median(o['s'] for o in opens) * 1e3:.0f} ms "
        "(target < 500 ms)"
    )
    analyse = [str(Path(sys.executable).parent / "analyse")]
    summ = [_timed([*analyse, "summary", str(path)]) for _ in range(repeats)]
    print(
        f"  analyse summary: median {statistics.median(summ):.2f} s "
        f"({' / '.join(f'{x:.2f}' for x in summ)}; target < 3 s), CPU {_cpu_median(repeats):.2f} s"
    )
    out = folder / f"{kind}.pftrace"
    exp = []
    for _ in range(repeats):
        exp.append(
            _timed([*analyse, "export-trace", str(path), "--format", "perfetto", "-o", str(out)])
        )
    print(
        f"  analyse export-trace --format perfetto: median {statistics.median(exp):.1f} s "
        f"({' / '.join(f'{x:.1f}' for x in exp)}), CPU {_cpu_median(repeats):.1f} s, "
        f"{out.stat().st_size / 2**20:.0f} MiB (target < 20 s)"
    )
    out.unlink()
    if not trace:
        return
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", IPU_ANALYSER_CACHE=str(folder / "cache"))
    first = _trace(path, env)
    later = [_trace(path, env) for _ in range(repeats)]

    def med(key):
        return statistics.median(r[key] for r in later)

    print(
        "  trace, first open (coarse levels first, the rest built and cached in the background): "
        f"first paint {first['first_paint_s']:.2f} s, peak RSS {first['peak_rss_mib']:.0f} MiB"
    )
    print(
        f"  trace, later opens (median of {repeats}): first paint {med('first_paint_s'):.2f} s "
        f"(target < 1.5 s); redraw median {med('redraw_median_ms'):.1f} ms (< 50 ms), worst "
        f"of 100 {med('redraw_worst_ms'):.0f} ms (< 150 ms); peak RSS "
        f"{med('peak_rss_mib'):.0f} MiB (< 2 GB)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", default=None, help="folder for the profiles (default: temporary)")
    ap.add_argument("--skip-engine", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-trace", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="bench-10m-")
    folder = Path(args.keep or tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    if not args.skip_synthetic:
        measure("synthetic", folder, args.repeats, not args.skip_trace)
    if not args.skip_engine:
        measure("engine", folder, args.repeats, not args.skip_trace)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
