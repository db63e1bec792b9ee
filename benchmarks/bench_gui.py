"""GUI benchmark (offscreen): prints figures, asserts nothing.

1. Open to first painted report: ``MainWindow.open_files([step 4 of the walkthrough])`` until the
   Summary report has loaded (in the background thread) and the window has painted (``grab``).
2. Switching reports: time from ``show_report(key)`` (what a click on the side list runs) to the
   end of the event-loop pass that first paints the report (layout, deferred work queued before
   the paint, and the paint itself), first visit (builds the report, after the background
   warm-up of the analysis and the window's idle-time build of the other reports have
   finished) and later visits; with ``--compare``, also with two profiles open (steps 3 and 4
   of the walkthrough compared). Also the first visit of each report clicked at once after the
   profile opens (``--runs`` fresh windows per report, the click as soon as the open has shown
   the Summary): before the background warm-up and the idle-time build have reached it, so the
   report is built, its data read if the warm-up has not, filled and painted.
3. Memory Report redraw on 4 IPUs x 1,472 tiles (synthetic profile): rebuild the stacked chart
   (breakdown toggled) and paint the plot.

   ``--delays 0,0.35,0.7`` clicks that first visit at each of these seconds after the open
   (a report clicked within ~0.7 s of opening two profiles); each case ends
   with a Markdown table per report (first visits per delay, after the idle build, later visits;
   wall medians, max and GUI-process CPU). ``--compare-only`` measures compare mode alone.

Usage: ``python benchmarks/bench_gui.py [--runs N] [--profile STEP4.h5] [--compare [STEP3.h5]]
[--compare-only] [--delays 0,0.35] [--no-busy]``. Targets:
open < 1.5 s, switch < 200 ms, memory redraw < 100 ms; first visit of every
report < 200 ms and later switches < 50 ms with the other core busy: unless ``--no-busy``, the
benchmark runs a CPU-bound process beside the GUI the whole time (users run the GUI while a
simulation or a tune runs), and measures first visits in ``--runs`` fresh windows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def _walkthrough_step(out: Path, step: int) -> Path:
    import engine
    from analyser.cli.demo import walkthrough_configs
    from engine.config import RunConfig

    cfg = next(c for c in walkthrough_configs() if c.stem.startswith(f"{step}-"))
    path = out / f"{cfg.stem}.h5"
    engine.simulate_to_file(RunConfig.from_toml(cfg), path)
    return path


def _speed_probe_ms() -> float:
    """Milliseconds of a fixed pure-Python loop (best of three), printed at the start and the
    end of a run: the shared virtual machine's speed drifts by half between quarters of an hour
    (0.18 s or 0.29 s for the same loop, 20:10 and 20:35 UTC on 2026-11-26, the load average
    under 1 both times), so runs compare only at a similar probe."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        sum(i * i for i in range(1_000_000))
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


#: Milliseconds between the wake-ups of a wait (see _wait): a condition a worker thread changes
#: without posting an event (the pool idle) is seen this long after at most.
WAKE_MS = 20


def _wait(app, cond, timeout: float = 60.0) -> None:
    """Run the event loop until ``cond()``: each pass sleeps until an event comes (Qt's
    ``WaitForMoreEvents``), with a timer waking it every :data:`WAKE_MS` for conditions set by
    worker threads. A loop of ``processEvents`` calls with a few milliseconds' budget each polled
    instead, adding its own CPU time to the GUI process's figures and taking a core from the
    work measured."""
    from PySide6.QtCore import QEventLoop, QTimer

    end = time.perf_counter() + timeout
    wake = QTimer()
    wake.start(WAKE_MS)
    try:
        while not cond():
            if time.perf_counter() > end:
                raise TimeoutError("timed out")
            app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
    finally:
        wake.stop()


def _paint_watch(app):
    """An event filter on the application that notes when a widget inside ``watch.target``
    receives a paint event."""
    from PySide6.QtCore import QEvent, QObject

    class PaintWatch(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.target = None
            self.painted = False

        def eventFilter(self, obj, event) -> bool:
            if (
                not self.painted
                and self.target is not None
                and event.type() == QEvent.Type.Paint
                and (obj is self.target or self.target.isAncestorOf(obj))
            ):
                self.painted = True
            return False

    return PaintWatch()


def _switch(app, w, key: str, watch, sync: bool = False) -> float:
    """Seconds from ``show_report(key)`` to the end of the event-loop pass in which the report
    is first painted (as after a click on the side list: the window repaints when the event loop
    next runs, after the layout requests and any work queued before the paint). ``sync``: to
    the end of a ``grab()`` of the window right after ``show_report`` instead (the first and
    second sessions' measure: no layout pass or queued work, the paint into a pixmap)."""
    t0 = time.perf_counter()
    report = w.show_report(key)
    if sync:
        w.grab()
        return time.perf_counter() - t0
    watch.target, watch.painted = report, False
    app.installEventFilter(watch)
    try:
        try:
            _wait(app, lambda: watch.painted, timeout=30)
        except TimeoutError:
            raise TimeoutError(f"{key} was not painted within 30 s") from None
        return time.perf_counter() - t0
    finally:
        app.removeEventFilter(watch)
        watch.target = None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", type=Path, help="walkthrough step 4 profile (else simulated)")
    parser.add_argument(
        "--compare",
        nargs="?",
        const=True,
        default=None,
        metavar="STEP3.h5",
        help="also measure switches in compare mode (walkthrough step 3 compared with step 4; "
        "its profile, else simulated)",
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="time a switch to the end of a grab() right after show_report (the measure of the "
        "first two sessions) instead of to the report's first paint by the event loop",
    )
    parser.add_argument(
        "--no-busy", action="store_true", help="do not run a CPU-bound process beside the GUI"
    )
    parser.add_argument(
        "--compare-only",
        action="store_true",
        help="with --compare: measure compare mode only (no single-profile switches, no open "
        "or memory-redraw figures)",
    )
    parser.add_argument(
        "--delays",
        default="0",
        help="comma-separated seconds after the open has shown the Summary at which the "
        "'clicked right after opening' first visit is clicked (default 0; "
        "asks for every click within ~0.7 s, e.g. --delays 0,0.35,0.7)",
    )
    args = parser.parse_args()
    busy = None
    if not args.no_busy:  # one core kept busy, as by a simulation running beside the GUI
        # (it stops by itself should this process die without killing it)
        busy = subprocess.Popen(
            [sys.executable, "-c", "import os\np = os.getppid()\nwhile os.getppid() == p: pass"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        return _measure(args)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


def _measure(args) -> int:

    from PySide6.QtCore import QSettings

    from analyser.gui.app import ensure_app
    from analyser.gui.main_window import MainWindow
    from profiles.synthetic import write_synthetic_profile

    app = ensure_app()
    tmp = Path(tempfile.mkdtemp(prefix="bench-gui-"))
    step4 = args.profile or _walkthrough_step(tmp, 4)
    big = tmp / "memory-4x1472.h5"
    write_synthetic_profile(big, n_steps=20_000, n_ipus=4, tiles=1472, n_programs=400, seed=4)
    settings = QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat)

    print(
        f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, load average "
        f"{os.getloadavg()[0]:.1f}; {'no' if args.no_busy else 'a'} CPU-bound process beside; "
        f"speed probe {_speed_probe_ms():.0f} ms (see _speed_probe_ms)"
    )
    print(f"profile: {step4.name} ({step4.stat().st_size / 1e6:.1f} MB)")

    # 1. open to first painted report ---------------------------------------------------------
    opens = []
    for _ in range(0 if args.compare_only else args.runs):
        settings.clear()
        w = MainWindow(settings=settings)
        w.resize(1400, 900)
        w.show()
        _wait(app, lambda w=w: w.isVisible())
        t0 = time.perf_counter()
        w.open_files([step4])
        _wait(app, lambda w=w: w.workspace.document is not None and not w.is_loading())
        w.grab()
        opens.append(time.perf_counter() - t0)
        w.close()
    if opens:
        print(
            f"open to first painted report (Summary): median "
            f"{statistics.median(opens) * 1e3:.0f} ms, first {opens[0] * 1e3:.0f} ms, max "
            f"{max(opens) * 1e3:.0f} ms (target < 1500 ms)"
        )

    # 2. switching reports --------------------------------------------------------------------
    watch = _paint_watch(app)
    cases = [] if args.compare_only and args.compare is not None else [("single", [step4])]
    if args.compare is not None:
        step3 = args.compare if isinstance(args.compare, str) else _walkthrough_step(tmp, 3)
        cases.append(("compare", [Path(step3), step4]))
    delays = [float(d) for d in args.delays.split(",") if d.strip()]
    for case, files in cases:
        switches = _measure_switches(app, args, settings, files, watch, case)
        at_once = {
            d: _measure_immediate(app, args, settings, files, watch, case, d) for d in delays
        }
        _print_table(case, switches, at_once)
    if args.compare_only and args.compare is not None:
        return 0

    # 3. memory report redraw, 4 IPUs x 1,472 tiles --------------------------------------------
    w = MainWindow(settings=settings)
    w.resize(1400, 900)
    w.show()
    w.open_files([big])
    _wait(app, lambda: w.workspace.document is not None and not w.is_loading())
    mr = w.show_report("memory")
    w.grab()
    redraws = []
    for i in range(max(10, 4 * args.runs)):
        t0 = time.perf_counter()
        mr.breakdown_combo.setCurrentText("Region" if i % 2 == 0 else "Category")
        mr.plot_a.grab()
        redraws.append(time.perf_counter() - t0)
    n_tiles = mr.charts["A"].values.shape[0]
    print(
        f"memory report redraw ({n_tiles:,} tiles, category/region stacks): median "
        f"{statistics.median(redraws) * 1e3:.0f} ms, max {max(redraws) * 1e3:.0f} ms (target < 100 ms)"
    )
    w.close()
    return 0


def _opened_window(app, settings, files):
    """A fresh window from cleared settings with ``files`` open and the Summary painted."""
    from analyser.gui.main_window import MainWindow

    settings.clear()
    w = MainWindow(settings=settings)
    w.resize(1400, 900)
    w.show()
    w.open_files(files)
    _wait(app, lambda: w.workspace.document is not None and not w.is_loading())
    w.grab()
    return w


def _measure_switches(app, args, settings, files, watch, case: str) -> dict:
    """First visits in fresh windows (one per run), later visits in the last one. The window
    warms the other reports' analysis in the background after a load; a person takes longer
    than that to pick the next report, so switching starts once it is done. Each window starts
    from cleared settings, so it opens on the first report (the Summary: built and painted by
    the open, measured in 1.), not on the report shown last in the previous window."""

    first: dict[str, list[float]] = {}
    later: dict[str, list[float]] = {}
    cpu: dict[tuple[bool, str], list[float]] = {}  # CPU time of the GUI process per switch
    idle_build: list[float] = []
    steps: list[tuple[str, float]] = []
    for run in range(args.runs):
        w = _opened_window(app, settings, files)
        w.pool.waitForDone()
        # the window builds the reports not shown yet in its idle time, one per tick (a person
        # takes longer than that to pick the next report); a click during one such step waits
        # for it: the longest step is printed
        # (getattr: windows from before the idle build, for before / after figures)
        t0 = time.perf_counter()
        _wait(app, lambda w=w: not getattr(w, "prebuild_pending", bool)(), timeout=30)
        idle_build.append(time.perf_counter() - t0)
        steps.extend(getattr(w, "prebuild_steps", ()))
        keys = w.report_keys
        opened_on = w.current_report_key()
        for rnd in range(1 if run < args.runs - 1 else args.runs + 1):
            for key in keys:
                if rnd == 0 and key == opened_on:
                    continue  # built by the open: no first visit
                c0 = time.process_time()
                dt = _switch(app, w, key, watch, args.sync)
                (first if rnd == 0 else later).setdefault(key, []).append(dt)
                cpu.setdefault((rnd == 0, key), []).append(time.process_time() - c0)
                # what the report left for after its first paint (the range summary, ...) runs
                # before the next click, as a person reads the report
                _settle(app, 0.3)
        w.close()
    how = "show_report + grab()" if args.sync else "click to first paint"
    print(f"{case} ({', '.join(Path(f).name for f in files)}): {how}")
    if steps:
        key, longest = max(steps, key=lambda s: s[1])
        print(
            f"reports built in idle time after the open: {statistics.median(idle_build):.2f} s "
            f"(median), {len(steps) / len(idle_build):.0f} steps, longest step "
            f"{longest * 1e3:.0f} ms ({key}, a click arriving then waits for it)"
        )
    for key in keys:
        firsts = (
            f"first visit median {statistics.median(first[key]) * 1e3:5.0f} ms (max "
            f"{max(first[key]) * 1e3:4.0f}, CPU {statistics.median(cpu[True, key]) * 1e3:4.0f})"
            if key in first
            else "first visit: the report the window opens on (see the open above)"
        )
        print(
            f"switch to {key:<14} {firsts}, later visits median "
            f"{statistics.median(later[key]) * 1e3:4.0f} ms (max {max(later[key]) * 1e3:4.0f}, CPU "
            f"{statistics.median(cpu[False, key]) * 1e3:3.0f})"
        )
    firsts = {k: statistics.median(v) for k, v in first.items()}
    worst = max(firsts, key=firsts.get)
    all_later = [x for v in later.values() for x in v]
    print(
        f"switching reports ({case}): first visits, worst median {firsts[worst] * 1e3:.0f} ms "
        f"({worst}) (target < 200 ms); later visits median "
        f"{statistics.median(all_later) * 1e3:.0f} ms, worst report median "
        f"{max(statistics.median(v) for v in later.values()) * 1e3:.0f} ms (target < 50 ms)"
    )
    print(
        "CPU time of the GUI process per switch (medians): first visits, worst "
        f"{max(statistics.median(v) for (f, _), v in cpu.items() if f) * 1e3:.0f} ms; later "
        f"visits, worst {max(statistics.median(v) for (f, _), v in cpu.items() if not f) * 1e3:.0f}"
        f" ms; load average now {os.getloadavg()[0]:.1f}"
    )
    return {"first": first, "later": later, "cpu": cpu}


def _measure_immediate(app, args, settings, files, watch, case: str, delay: float = 0.0) -> dict:
    """First visit of each report clicked right after the open: a fresh window per report
    and run, ``show_report`` ``delay`` seconds after the open has finished (the Summary shown;
    the event loop runs meanwhile), with the background warm-up of the analysis and the
    window's idle-time build under way or still to come."""
    from analyser.gui.main_window import MainWindow

    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    opens: list[float] = []  # open to the Summary painted, per fresh window
    probe = MainWindow(settings=settings)
    keys = probe.report_keys
    probe.close()
    for _run in range(args.runs):
        for key in keys[1:]:  # the first (the Summary) is what the open shows
            t0 = time.perf_counter()
            w = _opened_window(app, settings, files)
            opens.append(time.perf_counter() - t0)
            if delay > 0:
                _settle(app, delay)
            c0 = time.process_time()
            wall.setdefault(key, []).append(_switch(app, w, key, watch, args.sync))
            cpu.setdefault(key, []).append(time.process_time() - c0)
            w.pool.waitForDone()  # the warm-up finishes before the window goes
            w.close()
    print(f"{case}: first visit clicked {delay:.2f} s after the open (fresh window per report)")
    print(
        f"open to the Summary painted ({case}, window creation included): median "
        f"{statistics.median(opens) * 1e3:.0f} ms, max {max(opens) * 1e3:.0f} ms over "
        f"{len(opens)} windows (target < 1500 ms)"
    )
    for key in keys[1:]:
        print(
            f"switch to {key:<14} +{delay:.2f} s: median {statistics.median(wall[key]) * 1e3:5.0f} ms "
            f"(max {max(wall[key]) * 1e3:4.0f}, CPU {statistics.median(cpu[key]) * 1e3:4.0f})"
        )
    worst = max(wall, key=lambda k: statistics.median(wall[k]))
    print(
        f"first visits at once after the open ({case}): worst median "
        f"{statistics.median(wall[worst]) * 1e3:.0f} ms ({worst}) (target < 200 ms); load "
        f"average now {os.getloadavg()[0]:.1f}"
    )
    return {"wall": wall, "cpu": cpu}


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.0f}"


def _print_table(case: str, switches: dict, at_once: dict[float, dict]) -> None:
    """One Markdown table per case: per report, the first visit clicked right after the open
    (per delay), the first visit after the idle build and the later visits; wall medians in
    ms, max and GUI-process CPU in brackets; over a target in bold."""

    def cell(values: list[float], cpus: list[float], target_ms: float) -> str:
        med = statistics.median(values) * 1e3
        text = f"{med:.0f}"
        if med >= target_ms:
            text = f"**{text}**"
        return f"{text} (max {max(values) * 1e3:.0f}, CPU {_ms(cpus)})"

    delays = sorted(at_once)
    head = [f"first visit +{d:.2f} s" for d in delays]
    print(
        f"\n{case}: ms, wall median (max, GUI-process CPU median); targets: first < 200, later < 50"
    )
    print("| report | " + " | ".join(head) + " | first after idle build | later visits |")
    print("|---" + "|---:" * (len(delays) + 2) + "|")
    keys = list(switches["later"])
    for key in keys:
        row = [key]
        for d in delays:
            wall, cpu = at_once[d]["wall"], at_once[d]["cpu"]
            row.append(cell(wall[key], cpu[key], 200) if key in wall else "(opened on)")
        first = switches["first"]
        row.append(
            cell(first[key], switches["cpu"][True, key], 200) if key in first else "(opened on)"
        )
        row.append(cell(switches["later"][key], switches["cpu"][False, key], 50))
        print("| " + " | ".join(row) + " |")
    print(f"load average now {os.getloadavg()[0]:.1f}; speed probe {_speed_probe_ms():.0f} ms")


def _settle(app, seconds: float) -> None:
    """Run the event loop for ``seconds`` (an event loop quit by a timer: it sleeps between
    events, as the application's own loop does while a person reads the report)."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(max(0, round(seconds * 1000)), loop.quit)
    loop.exec()


if __name__ == "__main__":
    sys.exit(main())
