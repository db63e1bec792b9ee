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

Every profile is read once before its timed runs, so that they find it in the OS file cache
(the figures measure the code, not the disk). The GUI's figures (``--gui-only``, and after the
others) are CPU seconds of the whole GUI process, alternating with ``--baseline``'s tree when
given; each run also says whether pandas was imported by the Summary's and the Trace's paint
and which report modules the Summary's paint had imported. The GUI runs keep compiled bytecode
between runs (``PYTHONPYCACHEPREFIX`` under the benchmark's folder, as an installed package has
it), and one untimed run per tree first compiles it and fills the trace's level-of-detail cache.

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


#: The GUI opened offscreen on a profile in a fresh process (a user's ``analyse gui FILE``):
#: CPU seconds of the whole process (every thread, imports included) from its start to the
#: Summary's first paint, then from ``show_report("trace")`` to the Execution Trace's first
#: paint; and fingerprints of what both show once the background work has settled (the
#: Summary's texts, both reports' pixels), compared between the trees of ``--baseline``. The
#: loop sleeps until an event comes: a polling loop added its own CPU time (about 1 s).
_GUI = r"""
import hashlib, json, os, resource, sys, time
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

path, settings_path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
from PySide6.QtCore import QEvent, QEventLoop, QObject, QSettings
from PySide6.QtWidgets import QLabel, QTreeWidget
from analyser.gui.app import ensure_app
from analyser.gui.main_window import MainWindow

marks = {"imports": cpu()}
app = ensure_app()
marks["app"] = cpu()

class Watch(QObject):
    target = None
    painted = False
    def eventFilter(self, obj, event):
        if (not self.painted and self.target is not None and event.type() == QEvent.Type.Paint
                and (obj is self.target or self.target.isAncestorOf(obj))):
            self.painted = True
        return False

def wait(cond, timeout=120.0):
    end = time.perf_counter() + timeout
    while not cond():
        if time.perf_counter() > end:
            raise TimeoutError("timed out")
        # sleeps until an event comes (a polling loop would add its own CPU time)
        app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)

def texts(report):
    out = []
    for tree in report.findChildren(QTreeWidget):
        it = tree.invisibleRootItem()
        stack = [it]
        while stack:
            node = stack.pop()
            out.append("|".join(node.text(c) for c in range(tree.columnCount())))
            stack.extend(node.child(i) for i in range(node.childCount() - 1, -1, -1))
    out += [l.text() for l in report.findChildren(QLabel) if l.isVisible()]
    return out

def image_sha(widget):
    img = widget.grab().toImage()
    return hashlib.sha256(bytes(img.constBits())).hexdigest()[:16]

settings = QSettings(settings_path, QSettings.Format.IniFormat)
settings.clear()
w = MainWindow(settings=settings)
w.resize(1400, 900)
watch = Watch()
app.installEventFilter(watch)
marks["window"] = cpu()
w.show()
w.open_files([path])
wait(lambda: w.workspace.document is not None and not w.is_loading())
marks["loaded"] = cpu()
summ = w.report("summary")
watch.target, watch.painted = summ, False
wait(lambda: watch.painted)
c_summary, t_summary = cpu(), time.perf_counter() - t0
pandas_at_summary = "pandas" in sys.modules
reports_at_summary = sorted(m.rsplit(".", 1)[-1] for m in sys.modules
                            if m.startswith("analyser.gui.reports.") and m.count(".") == 3)
summary_texts = texts(summ)
c1 = cpu()
t1 = time.perf_counter()
trace = w.show_report("trace")
watch.target, watch.painted = trace, False
wait(lambda: watch.painted)
c_trace, t_trace = cpu() - c1, time.perf_counter() - t1
pandas_at_trace = "pandas" in sys.modules
app.removeEventFilter(watch)
# what is drawn, once the background work has settled
wait(lambda: w.pool.activeThreadCount() == 0 and not w.background.pending(), 300)
# the trace's full pyramids saved to the cache (a later run memory-maps them, as a user's
# second open does; os._exit below would otherwise cut their save short)
from analyser.gui.model import data
data.trace_window(w.workspace.document).wait_ready(300)
out = {"summary_cpu": c_summary, "summary_wall": t_summary, "trace_cpu": c_trace,
       "trace_wall": t_trace, "marks": marks, "pandas_at_summary": pandas_at_summary,
       "pandas_at_trace": pandas_at_trace, "reports_at_summary": reports_at_summary,
       "summary_sha": hashlib.sha256("\n".join(summary_texts).encode()).hexdigest()[:16],
       "summary_image": image_sha(summ), "trace_image": image_sha(trace),
       "trace_texts": hashlib.sha256("\n".join(texts(trace)).encode()).hexdigest()[:16]}
print(json.dumps(out))
os._exit(0)
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


def warm_file_cache(path: Path) -> None:
    """Read ``path`` once, so that every timed run finds it in the OS file cache: else the first
    run of a series (or the first after another benchmark evicted the file) read it from disk,
    and a figure measured the disk rather than the code (the runs alternate between trees, so a
    cold first run fell on the baseline's side)."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def measure(kind: str, folder: Path, repeats: int, trace: bool) -> None:
    path = folder / f"{kind}-10m.h5"
    w = _py(_WRITE, kind, str(path), str(ROOT / "assets/runs/bert-large-pretraining.toml"))
    size = path.stat().st_size
    warm_file_cache(path)
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


def _gui(tree: Path, path: Path, folder: Path) -> dict:
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        IPU_ANALYSER_CACHE=str(folder / "cache"),
        PYTHONPATH=str(tree),
        # compiled bytecode kept between runs, as an installed package has it (a shell with
        # PYTHONDONTWRITEBYTECODE compiled every module from source in every run: about
        # 0.3 s of CPU before the Summary, 0.06 s in the Trace); under the benchmark's folder,
        # not in the trees
        PYTHONPYCACHEPREFIX=str(folder / "pycache"),
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # run from the tree itself: ``python -c`` puts the working folder first on sys.path
    out = subprocess.run(
        [sys.executable, "-c", _GUI, str(path), str(folder / "gui-settings.ini")],
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
    )
    if out.returncode:
        sys.exit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_gui(kind: str, path: Path, folder: Path, repeats: int, baseline: str | None) -> None:
    """The GUI opened on ``path`` ``repeats`` times (alternating with ``baseline``'s code when
    given): medians of the process's CPU to the Summary painted and to the Trace painted."""
    trees = {"this tree": ROOT}
    if baseline:
        trees = {"baseline": Path(baseline).resolve(), **trees}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    warm_file_cache(path)
    for tree in trees.values():  # untimed: compiles the bytecode, fills the trace's LOD cache
        _gui(tree, path, folder)
    for _ in range(repeats):
        for name, tree in trees.items():
            runs[name].append(_gui(tree, path, folder))
    print(f"  GUI, {kind} (load average {os.getloadavg()[0]:.1f}):")
    for name, rs in runs.items():
        s, t = [r["summary_cpu"] for r in rs], [r["trace_cpu"] for r in rs]
        print(
            f"    {name}: open to the Summary painted, CPU median {statistics.median(s):.2f} s "
            f"({' / '.join(f'{x:.2f}' for x in s)}; target < 2.5 s), wall "
            f"{statistics.median(r['summary_wall'] for r in rs):.2f} s; the Execution Trace "
            f"right after, CPU {statistics.median(t):.2f} s ({' / '.join(f'{x:.2f}' for x in t)};"
            f" target < 1 s), wall {statistics.median(r['trace_wall'] for r in rs):.2f} s"
        )
        if "pandas_at_summary" in rs[0]:  # trees from before the figure was recorded have none
            print(
                f"      pandas imported at the Summary's paint: "
                f"{sum(r['pandas_at_summary'] for r in rs)} of {len(rs)} runs, at the Trace's: "
                f"{sum(r['pandas_at_trace'] for r in rs)} of {len(rs)} (the background warm-up "
                "may have imported it by then, off the GUI thread); report modules imported at "
                f"the Summary's paint: {', '.join(rs[0]['reports_at_summary'])}"
            )
    prints = {
        name: {
            tuple(v for k, v in sorted(r.items()) if k.endswith(("_sha", "_image", "_texts")))
            for r in rs
        }
        for name, rs in runs.items()
    }
    if baseline:
        b, a = runs["baseline"], runs["this tree"]
        ratio = [
            statistics.median(r[k] for r in a) / statistics.median(r[k] for r in b)
            for k in ("summary_cpu", "trace_cpu")
        ]
        # the Trace's pixels can differ between runs of one tree (drawn before or after its
        # full pyramid is built in the background): the trees agree when their sets do
        same = prints["baseline"] == prints["this tree"]
        print(
            f"    after / before: Summary {ratio[0]:.2f}x, Trace {ratio[1]:.2f}x CPU; what both "
            f"reports show: {'identical' if same else 'DIFFERENT'} ({prints})"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", default=None, help="folder for the profiles (default: temporary)")
    ap.add_argument("--skip-engine", action="store_true")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-trace", action="store_true")
    ap.add_argument(
        "--gui-only",
        action="store_true",
        help="only the GUI's open to the Summary painted and the Execution Trace right after",
    )
    ap.add_argument(
        "--baseline",
        default=None,
        help="another checkout of the project: the GUI runs alternate between its code and "
        "this one (PYTHONPATH), and their fingerprints are compared",
    )
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="bench-10m-")
    folder = Path(args.keep or tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    for kind in ("synthetic", "engine"):
        if getattr(args, f"skip_{kind}"):
            continue
        if args.gui_only:
            path = folder / f"{kind}-10m.h5"
            if not path.exists():
                _py(_WRITE, kind, str(path), str(ROOT / "assets/runs/bert-large-pretraining.toml"))
            measure_gui(kind, path, folder, args.repeats, args.baseline)
        else:
            measure(kind, folder, args.repeats, not args.skip_trace)
            measure_gui(kind, folder / f"{kind}-10m.h5", folder, args.repeats, args.baseline)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
