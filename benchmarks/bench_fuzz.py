"""The bigger fuzz run: every hostile profile of tests/hostile.py through
every analysis command, random value mutations with valid checksums, hostile run configurations,
and names that are not regular files, ONNX folding bombs / odd dimensions / external
data, crafted tune folders, lying caches and unwritable outputs, under a memory limit; prints
the table by category (tried, clean, tracebacks, hangs, memory blowups, files lost, foreign
data read).

    python benchmarks/bench_fuzz.py                 # all categories, 200 random value probes
    python benchmarks/bench_fuzz.py --random 1000 --memory 4G --seconds 60

A probe fails when the command exits with anything but 0, 1, 2 or 130 (or, for an input that
must be refused, anything but 2), prints a traceback, runs past its time limit, grows the
process's peak memory by more than 1 GiB or runs out of memory (a memory blowup), changes its
input, leaves a temporary file, or reads data it must not (a file a profile points to, the size
of a file outside an ONNX model's folder, a cache entry that lies). Commands run in this process (``analyse``'s
``main``) under ``RLIMIT_AS`` so that an allocation the file asks for fails instead of swapping.
CI runs a subset of the same corpus (tests/test_fuzz_corpus.py).
"""

from __future__ import annotations

import argparse
import os
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


#: Peak-memory growth of one probe counted as a memory blowup.
BLOWUP_BYTES = 1 << 30


class PeakMemory:
    """Peak growth of this process's resident memory while a probe runs: a thread samples
    /proc/self/statm every 10 ms (``ru_maxrss`` is a high-water mark for the whole process, so
    one probe's blowup would hide every later one's)."""

    def __init__(self) -> None:
        import threading

        self.page = os.sysconf("SC_PAGE_SIZE")
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int:
        try:
            with open("/proc/self/statm", encoding="ascii") as fh:
                return int(fh.read().split()[1]) * self.page
        except (OSError, ValueError, IndexError):
            return 0

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self._rss())

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    @property
    def grew(self) -> int:
        return self.peak - self.start


class Tally:
    def __init__(self) -> None:
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.failures: list[str] = []
        self.slowest = (0.0, "")

    def add(
        self,
        category: str,
        label: str,
        o: hostile.Outcome,
        *,
        lost: bool,
        foreign: bool,
        grew: int = 0,
        expect: int | None = None,
        wrong: bool = False,
    ):
        c = self.counts[category]
        c["tried"] += 1
        if o.seconds > self.slowest[0]:
            self.slowest = (o.seconds, f"{category}/{label} {' '.join(o.argv[:2])}")
        bad = []
        if o.hung:
            c["hangs"] += 1
            bad.append("hang")
        if o.traceback or "Traceback" in o.stderr:
            c["tracebacks"] += 1
            bad.append("traceback")
        text = (o.traceback + o.stderr).lower()
        if grew > BLOWUP_BYTES or "memoryerror" in text or "out of memory" in text:
            c["memory blowups"] += 1
            bad.append(f"memory +{grew / 2**20:,.0f} MiB")
        if o.code not in hostile.CLEAN_EXITS and not o.hung and not o.traceback:
            bad.append(f"exit {o.code}")
        elif expect is not None and o.code != expect and not o.hung and not o.traceback:
            bad.append(f"exit {o.code}, not {expect}")
        if wrong and not o.hung:
            bad.append("the sentence does not name the real reason")
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
        else:
            c["clean"] += 1


def probe_inputs(tally: Tally, work: Path, base: Path, args: argparse.Namespace) -> None:
    """The non-profile inputs: every case of tests/hostile.py's input corpus through its command,
    then the caches' tamperings through their readers."""
    groups = {
        "non-regular": hostile.nonregular_cases(work / "nonregular"),
        "onnx": {
            **hostile.onnx_cases(work / "onnx"),
            "nodes-1000000": hostile.many_nodes_case(work / "onnx-big"),
        },
        "tune folders": {
            **hostile.tune_cases(work / "tune", base, rows_bomb=1_000_000),
            **hostile.tune_link_cases(work / "tune-links", base),
        },
        "outputs": hostile.output_cases(base),
    }
    servers = {kind: hostile.FakeScheduler(kind) for kind in hostile.FAKE_SCHEDULERS}
    groups["schedulers"] = hostile.scheduler_cases(work / "schedulers", servers)
    for category, cases in groups.items():
        for name, case in cases.items():
            if case.argv[0] == "gui" and case.expect != 2:
                continue
            out = Path(case.argv[-1]) if "-o" in case.argv else None
            with PeakMemory() as mem:
                o = hostile.run_in_process(case.argv, args.seconds)
            grew = mem.grew
            told = any(t in o.stderr for t in case.hidden)
            wrong = bool(case.says) and not all(t in o.stderr for t in case.says)
            written = out is not None and case.expect == 2 and out.exists()
            tally.add(
                category,
                name,
                o,
                lost=written,
                foreign=told,
                grew=grew,
                expect=case.expect,
                wrong=wrong,
            )
    for server in servers.values():
        server.close()
    _probe_lod_cache(tally, work / "lod", args.seconds)
    _probe_sim_cache(tally, work / "sim", args.seconds)


def _timed(label: str, fn, seconds: float) -> tuple[hostile.Outcome, object]:
    """Run ``fn()`` under a SIGALRM time limit (a FIFO's open blocks for ever): its Outcome
    (traceback, hang) and its result."""
    import signal
    import time
    import traceback

    def alarm(signum: int, frame: object) -> None:
        raise hostile.Hang

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    t0, tb, hung, result = time.perf_counter(), "", False, None
    try:
        result = fn()
    except hostile.Hang:
        hung = True
    except Exception:
        tb = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    code = None if hung or tb else 0
    return hostile.Outcome((label,), code, time.perf_counter() - t0, tb, hung), result


def _probe_lod_cache(tally: Tally, work: Path, seconds: float) -> None:
    """Each tampering of the trace's level-of-detail cache: the pyramid must be rebuilt (a
    served tampered pyramid is foreign data read)."""
    import os

    import numpy as np

    import analyser.trace.window as tw_mod
    from profiles import open_profile, write_profile
    from profiles.synthetic import make_synthetic_profile

    old_rows, old_env = tw_mod.LOD_CACHE_MIN_ROWS, os.environ.get("IPU_ANALYSER_CACHE")
    tw_mod.LOD_CACHE_MIN_ROWS = 1000
    try:
        for name, tamper in hostile.lod_tamperings().items():
            root = work / name
            os.environ["IPU_ANALYSER_CACHE"] = str(root / "cache")
            folders = []
            for seed in (5, 6):
                path = root / f"p{seed}.h5"
                path.parent.mkdir(parents=True, exist_ok=True)
                data = make_synthetic_profile(n_steps=12_000, n_ipus=2, tiles=64, seed=seed)
                write_profile(path, data)
                with open_profile(path) as p:
                    tw = tw_mod.TraceWindow(p)
                    tw._pyramid(1, "flat")
                    folders.append(tw._cache_folder(1, "flat"))
            tamper(folders[0], folders[1])

            def served(path: Path = root / "p5.h5") -> bool:
                with open_profile(path) as p:
                    levels = tw_mod.TraceWindow(p)._pyramid(1, "flat").levels
                    return isinstance(levels[0].x0, np.memmap)

            o, was_served = _timed(f"lod-cache {name}", served, seconds)
            tally.add("lod cache", name, o, lost=False, foreign=bool(was_served))
    finally:
        tw_mod.LOD_CACHE_MIN_ROWS = old_rows
        if old_env is None:
            os.environ.pop("IPU_ANALYSER_CACHE", None)
        else:
            os.environ["IPU_ANALYSER_CACHE"] = old_env


def _probe_sim_cache(tally: Tally, work: Path, seconds: float) -> None:
    """Each tampering of a simulation cache entry: it must be a miss (served: foreign data)."""

    from analyser.sim.service import FIGURE_KEYS
    from analyser.sim.service.request import SimResponse
    from analyser.sim.service.service import SimCache

    for name, tamper in hostile.sim_cache_tamperings().items():
        cache = SimCache(work / name)
        key = "ab" * 32
        figures = {k: (True if k == "fits" else 1000.0) for k in FIGURE_KEYS}
        cache.put(SimResponse(key=key, status="ok", figures=figures), b"\x89HDF fake")
        tamper(cache.root / f"{key}.json", cache.profile_path(key))
        o, answer = _timed(f"sim-cache {name}", lambda c=cache, k=key: c.get(k), seconds)
        tally.add("sim cache", name, o, lost=False, foreign=answer is not None)


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

        if args.inputs_only:
            probe_inputs(tally, work / "inputs", base, args)
            return _print(tally, time.perf_counter() - t0)
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
        if not args.no_inputs:
            probe_inputs(tally, work / "inputs", base, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    return _print(tally, time.perf_counter() - t0)


def _print(tally: Tally, elapsed: float) -> int:
    """Print the table by category and the failures; 1 when any probe failed."""
    keys = (
        "tried",
        "clean",
        "tracebacks",
        "hangs",
        "memory blowups",
        "files lost",
        "foreign data read",
    )
    print(f"| {'category':<16} |" + "".join(f" {k:>17} |" for k in keys))
    print(f"|{'-' * 18}|" + "".join(f"{'-' * 18}:|" for _ in keys))
    total: Counter = Counter()
    for cat, c in tally.counts.items():
        total.update(c)
        print(f"| {cat:<16} |" + "".join(f" {c[k]:>17,} |" for k in keys))
    print(f"| {'total':<16} |" + "".join(f" {total[k]:>17,} |" for k in keys))
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
    ap.add_argument(
        "--no-inputs", action="store_true", help="skip the non-profile inputs and caches"
    )
    ap.add_argument(
        "--inputs-only",
        action="store_true",
        help="only the non-profile inputs and caches (minutes)",
    )
    return run(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
