"""The Execution Trace's compare-mode "differences" lane: CPU to build and paint N bars.

    python benchmarks/bench_diff_lane.py [N ...]      (default: 10000 150000 200000)

Prints, per N, the CPU time (ms) of ``DifferencesLaneView.set_lane`` and of a first and a later
paint of a 1,400 x 140 px lane, offscreen. 150,000 differences is what walkthrough steps 2 and 6
give (the lane was the slowest compare-mode report, 1.2-2.1 s of CPU a visit).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main(argv: list[str]) -> int:
    import numpy as np
    from PySide6.QtWidgets import QApplication

    from analyser.gui.model.diff_lane import DifferencesLane
    from analyser.gui.reports.trace.diff_lane import DifferencesLaneView

    app = QApplication.instance() or QApplication([])
    sizes = [int(a) for a in argv] or [10_000, 150_000, 200_000]
    print(f"{'bars':>9} {'set_lane ms':>12} {'first paint ms':>15} {'later paint ms':>15}")
    for n in sizes:
        rng = np.random.default_rng(0)
        lane = DifferencesLane(
            ipu=rng.integers(0, 2, n),
            start=np.sort(rng.integers(0, 170_000_000, n)),
            cycles=rng.integers(10, 3000, n),
            delta=rng.integers(-500, 500, n) | 1,  # odd: never 0
            added=np.zeros(n, bool),
            n_ipus=2,
            removed_steps=0,
            removed_cycles=0,
        )
        view = DifferencesLaneView()
        view.resize(1400, 140)
        view.show()
        app.processEvents()
        t0 = time.process_time()
        view.set_lane(lane)
        t1 = time.process_time()
        view.grab()
        t2 = time.process_time()
        view.grab()
        t3 = time.process_time()
        print(f"{n:>9,} {1e3 * (t1 - t0):>12.0f} {1e3 * (t2 - t1):>15.0f} {1e3 * (t3 - t2):>15.0f}")
        view.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
