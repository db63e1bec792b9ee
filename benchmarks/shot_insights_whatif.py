"""Take docs/screenshots/insights-whatif.png, the README's lead picture, from the current engine:
walkthrough step 1 (``analyse demo``'s ``demo/1-base.h5``, out of memory) with its top tip (FP16)
applied as the GUI's "Apply tip and compare..." does (re-simulated on the simulation service,
kept in a fresh cache of its own), the Insights report of the pair, the window grabbed at 1400 x 880.

    python benchmarks/shot_insights_whatif.py demo/1-base.h5 [-o docs/screenshots/insights-whatif.png]

Run it in an X server (``xvfb-run -a python benchmarks/...``) to see the fonts a person sees;
without one it uses Qt's offscreen platform. Prints the figures the caption quotes (README and
docs/gui.md), which tests/test_docs_figures.py checks against a fresh run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZE = (1400, 880)


def take(profile: Path, out: Path) -> list[str]:
    """Open ``profile``, apply its top tip, grab the Insights report of the pair to ``out``;
    returns the banners' texts (A, B)."""
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from analyser.gui import whatif
    from analyser.gui.main_window import MainWindow
    from analyser.gui.model import data

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        # a cache of its own: the what-if is simulated afresh by the current engine, and its
        # result is named as a first what-if (not "-2" after one already in the user's cache)
        os.environ["ANALYSE_CACHE"] = str(Path(tmp) / "cache")
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        w = MainWindow(settings=settings)
        w.resize(*SIZE)
        w.show()

        def wait_loaded(timeout_s: float) -> None:
            loop = QEventLoop()
            w.loadFinished.connect(loop.quit)
            QTimer.singleShot(int(timeout_s * 1000), loop.quit)
            loop.exec()
            w.loadFinished.disconnect(loop.quit)

        w.open_files([profile])
        wait_loaded(120)
        doc = w.workspace.document
        top = data.insights(doc)[0]
        whatif.apply_tip(w, doc, top)
        wait_loaded(600)
        if w.workspace.compare is None:
            raise SystemExit("the what-if did not open (see the dialog's message)")
        r = w.show_report("insights")
        for _ in range(40):  # let the report build and paint
            app.processEvents()
            QTimer.singleShot(50, lambda: None)
        out.parent.mkdir(parents=True, exist_ok=True)
        w.grab().save(str(out))
        texts = [r.banner_a.text(), r.banner_b.text()]
        w.shutdown()
        w.pool.waitForDone(30_000)
    return texts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument(
        "-o", "--output", type=Path, default=ROOT / "docs" / "screenshots" / "insights-whatif.png"
    )
    args = ap.parse_args(argv)
    if not args.profile.is_file():
        print(f"error: {args.profile} is not a file (run `analyse demo` first).")
        return 2
    for text in take(args.profile, args.output):
        print(text)
    print(f"written {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
