"""Evidence that moving a report onto a view-model changes no pixel: grab chosen GUI reports.

Grabs (``QWidget.grab()``, offscreen) each report in ``--reports`` for a few small profiles,
single and compared, two ways: the report alone (filled on the GUI thread, as the tests drive it)
and inside the main window (its view-model built in the background and handed over). Run it
before and after a change and compare the folders pixel for pixel::

    python benchmarks/view_model_grabs.py --profiles /tmp/vm-profiles OUT_BEFORE
    ... change ...
    python benchmarks/view_model_grabs.py --profiles /tmp/vm-profiles OUT_AFTER
    python benchmarks/view_model_grabs.py --diff OUT_BEFORE OUT_AFTER

A smaller, faster relative of ``arch_equivalence.py`` (which grabs every report for the
walkthrough's profiles), for one report at a time. Each grab waits for the report to say it is
settled (filled, its view-model painted, the Execution Trace's range summary in its header:
``Report.ready``, ``TraceReport.summary_pending``) and for the GUI thread to be idle, never for
a time, so two runs of one tree give identical grabs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

DEFAULT_REPORTS = ("summary", "roofline")


def make_profiles(folder: Path) -> dict[str, Path]:
    """Two MLP runs (micro-batch 1 and 8) and two synthetic profiles, written once."""
    import engine
    from engine.config import RunConfig
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for mb in (1, 8):
        path = paths[f"mlp-mb{mb}"] = folder / f"mlp-mb{mb}.h5"
        if not path.exists():
            engine.simulate_to_file(RunConfig(model="mlp", micro_batch_size=mb), path)
    for seed, ga in ((3, 4), (3, 8)):
        path = paths[f"synthetic-{seed}-ga{ga}"] = folder / f"synthetic-{seed}-ga{ga}.h5"
        if not path.exists():
            write_profile(path, make_synthetic_profile(seed=seed, grad_accum=ga))
    return paths


CASES = (
    ("mlp-mb1",),
    ("mlp-mb1", "mlp-mb8"),
    ("synthetic-3-ga4",),
    ("synthetic-3-ga4", "synthetic-3-ga8"),
)


#: Longest a report may take to settle before the run gives up (seconds): a bound that fails
#: the run loudly, never a wait (the grabs wait for events, see _settle).
SETTLE_LIMIT_S = 120.0


def _settled(report) -> bool:
    """True when ``report`` shows all it will: filled, its view-model painted, and what
    arrives from a pool thread after it: the Execution Trace's range summary in its header, the
    Program Tree's selected step's per-tile cycles, the Query's answer."""
    return report.ready and not any(
        getattr(report, state, False) for state in ("summary_pending", "details_pending", "running")
    )


def _settle(report) -> None:
    """Wait, by the events that say so, until ``report`` is settled (:func:`_settled`) and then
    until the GUI thread is idle three times in a row (nothing posted left: the paints and
    relayouts the last results posted included), so that a grab shows the same every run."""
    from PySide6.QtCore import QAbstractEventDispatcher, QCoreApplication, QEventLoop, QTimer

    deadline = time.monotonic() + SETTLE_LIMIT_S
    # a pool thread's result arrives as a queued event, which ends a wait for more events; the
    # heartbeat only lets the loop see the limit should nothing ever arrive
    heartbeat = QTimer()
    heartbeat.start(250)
    try:
        while not _settled(report):
            if time.monotonic() > deadline:
                raise SystemExit(f"{report.title} did not settle in {SETTLE_LIMIT_S:g} s")
            QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
    finally:
        heartbeat.stop()
    dispatcher = QAbstractEventDispatcher.instance()
    for _ in range(3):
        loop = QEventLoop()
        dispatcher.aboutToBlock.connect(loop.quit)
        loop.exec()
        dispatcher.aboutToBlock.disconnect(loop.quit)
    if not _settled(report):  # what ran while idling asked for more: settle again
        _settle(report)


def dump(paths: dict[str, Path], out: Path, keys: tuple[str, ...]) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import tempfile

    from PySide6.QtCore import QCoreApplication, QEventLoop, QSettings
    from PySide6.QtWidgets import QApplication

    from analyser.gui.main_window import MainWindow
    from analyser.gui.model.document import Document
    from analyser.gui.reports import report_classes
    from analyser.gui.theme import apply_theme

    app = QApplication.instance() or QApplication([])
    # a text field's caret blinks on a timer: a grab then showed it or not by when it was taken
    app.styleHints().setCursorFlashTime(0)
    apply_theme("light")
    classes = {cls.key: cls for cls in report_classes()}
    for stems in CASES:
        case = "-vs-".join(stems)
        docs = [Document.open(paths[s]) for s in stems]
        for key in keys:
            report = classes[key]()
            report.resize(1300, 850)
            report.set_document(docs[0], docs[1] if len(docs) > 1 else None)
            report.show()
            _settle(report)
            report.grab().save(str(out / f"alone.{case}.{key}.png"))
            report.shutdown()
            report.close()
            report.deleteLater()
            QCoreApplication.processEvents()
        for doc in docs:
            doc.close()
        with tempfile.TemporaryDirectory() as tmp:
            settings = QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat)
            window = MainWindow(settings=settings)
            window.resize(1400, 900)
            window.show()
            done: list[bool] = []
            loaded = QEventLoop()
            window.loadFinished.connect(done.append)
            window.loadFinished.connect(loaded.quit)
            window.open_files([paths[s] for s in stems])
            if not done:
                loaded.exec()
            for key in keys:
                # clicked in the side list, as a user does (the view-model arrives later)
                window.report_list.setCurrentRow(window.report_keys.index(key))
                _settle(window.report(key))
                window.report(key).grab().save(str(out / f"window.{case}.{key}.png"))
            window.close()
            QCoreApplication.processEvents()
    del app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, nargs="+", help="output folder (two with --diff)")
    parser.add_argument("--profiles", type=Path, default=Path("/tmp/view-model-profiles"))
    parser.add_argument("--reports", default=",".join(DEFAULT_REPORTS))
    parser.add_argument("--diff", action="store_true", help="compare two output folders")
    args = parser.parse_args()
    if args.diff:
        sys.path.insert(0, str(Path(__file__).parent))
        from arch_equivalence import diff

        return diff(*args.out[:2])
    out = args.out[0]
    out.mkdir(parents=True, exist_ok=True)
    dump(make_profiles(args.profiles), out, tuple(args.reports.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
