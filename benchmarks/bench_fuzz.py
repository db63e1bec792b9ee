"""The bigger fuzz run of issue #16: every hostile profile of tests/hostile.py through every
analysis command, random value mutations with valid checksums, and hostile run configurations,
under a memory limit; prints the probes tried and the failures per category.

    python benchmarks/bench_fuzz.py                 # all categories, 200 random value probes
    python benchmarks/bench_fuzz.py --random 1000 --memory 4G --seconds 60

A probe fails when the command exits with anything but 0, 1, 2 or 130, prints a traceback, runs
past its time limit, changes its input, leaves a temporary file, or (foreign category) prints the
contents of the file the profile points to. Commands run in this process (``analyse``'s
``main``) under ``RLIMIT_AS`` so that an allocation the file asks for fails instead of swapping.
CI runs a subset of the same corpus (tests/test_fuzz_corpus.py).
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import hostile

ODD = hostile.ODD_VALUES

CONFIG_PROBES: list[list[str]] = [
    ["--model", "mlp", "--mode", "inference", "--device-iterations", "1000000"],
    ["--model", "resnet50", "--replication-factor", "256", "--device-iterations", "1000000"],
    ["--model", "bert-large", "--device-iterations", "50", "--gradient-accumulation", "1024"],
    ["--model", "mlp", "--target-override", "tiles_per_ipu=65536"],
    ["--model", "mlp", "--host-preprocess-us-per-sample", "inf"],
    ["--model", "bert-base", "--seq-length", "8192", "--micro-batch-size", "65536"],
    ["--model", "bert-base", "--vocab-size", "1000000000000"],
    ["--model", "mlp", "--loss-scaling", "inf"],
    ["--model", "mlp", "--loss-scaling", "nan"],
    ["--model", "mlp", "--micro-batch-size", "true"],
    ["--model", "mlp", "--target-override", "clock_hz=1e-300"],
    ["--model", "mlp", "--target-override", "clock_hz=-5"],
    ["--model", "mlp", "--target-override", "sram_per_tile=true"],
    ["--model", "mlp", "--device-iterations", "1e400"],
    ["--model", "mlp", "--max-memory", "-1"],
    ["--model", "mlp", "--max-memory", "1K"],
]
TOML_PROBES: dict[str, str] = {
    "deep-arrays": 'model = "mlp"\nx = ' + "[" * 5000 + "]" * 5000 + "\n",
    "deep-tables": 'model = "mlp"\n' + "x = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n",
    "bool-int": 'model = "mlp"\nmicro_batch_size = true\n',
    "inf": 'model = "mlp"\nloss_scaling = inf\n',
    "nan": 'model = "mlp"\nloss_scaling = nan\n',
    "huge-int": 'model = "mlp"\ndevice_iterations = 99999999999999999999\n',
    "text-int": 'model = "mlp"\nmicro_batch_size = "lots"\n',
    "binary": "\x00\x01\x02model",
}


def random_value_mutation(rng: random.Random, datasets: list[str]) -> hostile.Mutation:
    return hostile.set_elements(
        [(rng.choice(datasets), rng.randrange(10**6), rng.choice(ODD)) for _ in range(3)]
    )


class Tally:
    def __init__(self) -> None:
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.failures: list[str] = []
        self.slowest = (0.0, "")

    def add(self, category: str, label: str, o: hostile.Outcome, *, lost: bool, foreign: bool):
        c = self.counts[category]
        c["probes"] += 1
        if o.seconds > self.slowest[0]:
            self.slowest = (o.seconds, f"{category}/{label} {' '.join(o.argv[:2])}")
        bad = []
        if o.hung:
            c["hangs"] += 1
            bad.append("hang")
        if o.traceback or "Traceback" in o.stderr:
            c["tracebacks"] += 1
            bad.append("traceback")
        if o.code not in hostile.CLEAN_EXITS and not o.hung and not o.traceback:
            bad.append(f"exit {o.code}")
        if lost:
            c["files lost"] += 1
            bad.append("file lost")
        if foreign:
            c["foreign data read"] += 1
            bad.append("foreign data read")
        if bad:
            c["failures"] += 1
            last = (o.traceback.strip().splitlines() or [o.stderr.strip()[-200:]])[-1]
            self.failures.append(f"{category}/{label}: {' '.join(o.argv)} -> {bad}: {last}")
        elif o.code == 0:
            c["ok"] += 1
        else:
            c["clean errors"] += 1


def run(args: argparse.Namespace) -> int:
    import engine
    from engine.config import RunConfig

    if args.memory:
        from engine.resources import parse_size

        limit = parse_size(args.memory)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    work = Path(tempfile.mkdtemp(prefix="bench-fuzz-"))
    tally = Tally()
    t0 = time.perf_counter()
    try:
        base = work / "base.h5"
        engine.simulate_to_file(RunConfig(model="mlp"), base)
        out = work / "out"
        out.mkdir()

        def probe_file(category: str, label: str, path: Path) -> None:
            before = path.read_bytes() if path.exists() else b""
            for argv in hostile.profile_probes(path, base, out / label):
                o = hostile.run_in_process(argv, args.seconds)
                text = o.stderr + (o.traceback or "")
                leftovers = [p for p in out.iterdir() if p.name.startswith(".")]
                for p in leftovers:
                    p.unlink()
                lost = bool(leftovers) or (path.exists() and path.read_bytes() != before)
                foreign = hostile.SECRET in text or _secret_in_outputs(out)
                tally.add(category, label, o, lost=lost, foreign=foreign)

        for category, name, path in hostile.iter_corpus(base, work / "corpus"):
            probe_file(category, name, path)

        rng = random.Random(args.seed)
        datasets = hostile.numeric_datasets(base)
        for i in range(args.random):
            mut = random_value_mutation(rng, datasets)
            path = hostile.mutated(base, work / "random", f"r{i}", mut)
            before = path.read_bytes()
            for argv in hostile.profile_probes(
                path, base, out / f"r{i}", ("validate", "summary --json", "insights")
            ):
                o = hostile.run_in_process(argv, args.seconds)
                tally.add(
                    "random values", f"r{i}", o, lost=path.read_bytes() != before, foreign=False
                )
            path.unlink()

        for i, extra in enumerate(CONFIG_PROBES):
            target = out / f"cfg{i}.h5"
            o = hostile.run_in_process(
                ("profile", "--quiet", "-o", str(target), *extra), args.seconds
            )
            tally.add("run configs", " ".join(extra), o, lost=False, foreign=False)
            target.unlink(missing_ok=True)
        for name, text in TOML_PROBES.items():
            cfg = work / f"{name}.toml"
            cfg.write_text(text, encoding="utf-8", errors="surrogateescape")
            o = hostile.run_in_process(("profile", str(cfg), "-o", str(out / "t.h5")), args.seconds)
            tally.add("run configs", name, o, lost=False, foreign=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    elapsed = time.perf_counter() - t0
    keys = (
        "probes",
        "ok",
        "clean errors",
        "tracebacks",
        "hangs",
        "files lost",
        "foreign data read",
        "failures",
    )
    print(f"{'category':<16}" + "".join(f"{k:>19}" for k in keys))
    total: Counter = Counter()
    for cat, c in tally.counts.items():
        total.update(c)
        print(f"{cat:<16}" + "".join(f"{c[k]:>19,}" for k in keys))
    print(f"{'total':<16}" + "".join(f"{total[k]:>19,}" for k in keys))
    print(f"{elapsed:.0f} s; slowest probe {tally.slowest[0]:.1f} s ({tally.slowest[1]})")
    for f in tally.failures[:40]:
        print("FAIL", f)
    return 1 if tally.failures else 0


def _secret_in_outputs(out: Path) -> bool:
    for p in out.iterdir():
        if (
            p.is_file()
            and p.stat().st_size < 50 * 2**20
            and hostile.SECRET.encode() in p.read_bytes()
        ):
            return True
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=200, help="random value mutations (default 200)")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60.0, help="time limit per probe")
    ap.add_argument("--memory", default="4G", help="address-space limit (default 4G; '' none)")
    return run(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
