"""The engine end to end as a user runs it (a fresh process: imports, compile, execute, write the
profile) against a fresh process that only writes the same profile's arrays with h5py (the
bare write of ``bench_engine_scaling.py``: the writer's codec, no checksums, no checks).
Prints figures; asserts nothing.

    python benchmarks/bench_engine_fresh.py [--repeats 5] [--configs walkthrough4,bert16,pod64]
    (any walkthrough step: walkthrough1 .. walkthrough6)

CPU is the whole process's (user + system from ``getrusage``, interpreter start-up and every
thread included); the bare writer's unpickling of the arrays it is handed is measured and taken
off. The project's modules are byte-compiled first (``compileall``), as an installed package is:
under ``PYTHONDONTWRITEBYTECODE`` a fresh checkout would otherwise compile every module from
source in every timed process (about 0.15 s of CPU more per engine run, in its imports and
the compile's). ``--baseline DIR`` runs another checkout's engine (e.g. a worktree of main)
alternately with this one's, against the same bare writes. The two kinds of process alternate; medians. Target (issue "every command near its
floor", item 5): the engine within 1.3x its bare write in CPU for walkthrough step 4, BERT-Large
pipelined over 16 IPUs and ResNet-50 on a Bow Pod64.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ("walkthrough4", "bert16", "pod64")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _config(which: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_engine_scaling as scaling

    from engine.config import RunConfig

    if which.startswith("walkthrough") and which[11:].isdigit():  # walkthrough1 .. walkthrough6
        steps = sorted((ROOT / "assets/runs/walkthrough").glob(f"{which[11:]}-*.toml"))
        if steps:
            return RunConfig.from_toml(steps[0])
    if which == "bert16":
        return scaling._bert(16)
    if which == "pod64":
        return RunConfig.from_toml(ROOT / "assets/runs/resnet50-bow-pod64.toml")
    raise SystemExit(
        f"unknown configuration {which!r}: one of {', '.join(CONFIGS)} or walkthrough1 .. 6"
    )


def one_engine(which: str, out: str) -> dict:
    """What ``analyse profile`` does for the configuration, in this fresh process."""
    c0 = _cpu()
    import engine
    from engine.execute import execute
    from engine.profile_data import profile_data
    from profiles import write_profile

    config = _config(which)
    c1 = _cpu()
    compiled = engine.compile(config)
    c2 = _cpu()
    data = profile_data(compiled, execute(compiled))
    data["/meta"]["status"] = "ok"
    c3 = _cpu()
    write_profile(Path(out), data)
    c4 = _cpu()
    return {
        "before_main": c0,
        "imports": c1 - c0,
        "compile": c2 - c1,
        "execute": c3 - c2,
        "write": c4 - c3,
        "cpu": c4,
        "bytes": os.path.getsize(out),
    }


def dump(which: str, pkl: str) -> None:
    """The profile's arrays, laid out plain (runs expanded), for the bare writer (untimed)."""
    import engine
    from engine.execute import execute
    from engine.profile_data import profile_data

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_engine_scaling as scaling

    compiled = engine.compile(_config(which))
    data = profile_data(compiled, execute(compiled))
    data["/meta"]["status"] = "ok"
    with open(pkl, "wb") as f:
        pickle.dump(scaling.dense(data), f, protocol=pickle.HIGHEST_PROTOCOL)


def one_bare(pkl: str, out: str) -> dict:
    """h5py writes the arrays it is handed: the floor of the engine's last step."""
    c0 = _cpu()
    import h5py  # noqa: F401  (imported as the engine's process imports it)
    import numpy  # noqa: F401

    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, str(ROOT))
    import bench_engine_scaling as scaling

    c1 = _cpu()
    with open(pkl, "rb") as f:
        data = pickle.load(f)
    c2 = _cpu()
    scaling.bare_write(Path(out), data)
    c3 = _cpu()
    return {
        "before_main": c0,
        "imports": c1 - c0,
        "unpickle": c2 - c1,
        "write": c3 - c2,
        "cpu": c3 - (c2 - c1),
        "bytes": os.path.getsize(out),
    }


def _child(*args: str, tree: Path = ROOT) -> dict:
    """This script in a fresh process, importing the engine from ``tree`` (a checkout)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, cwd=tree, env=env
    )
    if out.returncode:
        sys.exit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _report(label: str, eng: list[dict], bare: list[dict]) -> None:
    e, b = _med(eng, "cpu"), _med(bare, "cpu")
    print(
        f"{label}: engine {e:.3f} s CPU (interpreter {_med(eng, 'before_main'):.3f}, "
        f"imports {_med(eng, 'imports'):.3f}, compile {_med(eng, 'compile'):.3f}, execute "
        f"and profile data {_med(eng, 'execute'):.3f}, write {_med(eng, 'write'):.3f}; "
        f"{_med(eng, 'bytes') / 2**20:.1f} MiB) vs bare write {b:.3f} s CPU (interpreter "
        f"{_med(bare, 'before_main'):.3f}, imports {_med(bare, 'imports'):.3f}, write "
        f"{_med(bare, 'write'):.3f}; {_med(bare, 'bytes') / 2**20:.1f} MiB): "
        f"{e / b:.2f}x (target < 1.3x)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. a worktree of main): its engine runs alternate with this "
        "one's, against the same bare writes",
    )
    ap.add_argument("--engine", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--dump", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--bare", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.engine:
        print(json.dumps(one_engine(*args.engine)))
        return 0
    if args.dump:
        dump(*args.dump)
        print("{}")
        return 0
    if args.bare:
        print(json.dumps(one_bare(*args.bare)))
        return 0
    if args.baseline and not (args.baseline / "engine" / "__init__.py").is_file():
        raise SystemExit(f"--baseline {args.baseline} is not a checkout of this project.")
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start "
        f"({time.strftime('%H:%M', time.gmtime())} UTC)"
    )
    trees = [ROOT] + ([args.baseline.resolve()] if args.baseline else [])
    for tree in trees:
        for package in ("engine", "profiles", "benchmarks"):  # __pycache__ is not tracked
            compileall.compile_dir(tree / package, quiet=1)
    with tempfile.TemporaryDirectory() as d:
        for which in args.configs.split(","):
            pkl = str(Path(d) / f"{which}.pkl")
            _child("--dump", which, pkl)
            eng: dict[Path, list[dict]] = {tree: [] for tree in trees}
            bare = []
            for i in range(args.repeats):
                # the checkouts take turns to go first; each writes a file of its own
                for t, tree in enumerate(trees if i % 2 == 0 else trees[::-1]):
                    out = str(Path(d) / f"e{i}-{t}.h5")
                    eng[tree].append(_child("--engine", which, out, tree=tree))
                bare.append(_child("--bare", pkl, str(Path(d) / f"b{i}.h5")))
            for tree in trees:
                _report(which if tree == ROOT else f"{which} (baseline {tree})", eng[tree], bare)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
