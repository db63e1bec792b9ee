"""What the window shows while profiles load: their names, a progress bar of the load's steps
(reading each file, then what the first report needs of it, then the comparison of a pair),
the step under way and the time so far. "No profile open. Use File > Open..." was shown for
the 94 s a 10M-step profile took to open, and the seconds of a compared pair, as if nothing
were happening."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QProgressBar, QVBoxLayout, QWidget

from analyser.gui.loader import LoadSignals

#: How often the time so far is updated (ms).
TICK_MS = 1000


class LoadingPanel(QWidget):
    """The loading state of the window's report area; it also drives the status bar's small
    progress bar (``bar``), from the loader's progress signal."""

    def __init__(self, signals: LoadSignals, bar: QProgressBar) -> None:
        super().__init__()
        self.bar = bar
        self.request_id: int | None = None
        self._started = 0.0
        lay = QVBoxLayout(self)
        lay.addStretch(1)
        self.title = QLabel("")
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-size: 15px;")
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setMaximumWidth(480)
        self.step = QLabel("")
        self.step.setStyleSheet("color: palette(mid);")
        # the labels take the whole width (centred text): aligned in the layout, a wrapped
        # title got a narrow box and was cut ("Opening a.h5 and 5-8bit-" / "io.h5")
        for w in (self.title, self.step):
            w.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(self.title)
        lay.addWidget(self.progress, 0, Qt.AlignmentFlag.AlignHCenter)
        lay.addWidget(self.step)
        lay.addStretch(2)
        self._what = ""
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._show_step)
        signals.progress.connect(self._on_progress)

    def start(self, request_id: int, paths: Sequence[Path]) -> None:
        """A load of ``paths`` (request ``request_id``) began: its progress is followed."""
        self.request_id = request_id
        self._started = time.monotonic()
        names = " and ".join(p.name for p in paths)
        self.title.setText(f"Opening {names}…")
        for bar in (self.progress, self.bar):
            bar.setRange(0, 0)  # busy until the first step says how many there are
        self._what = "starting"
        self._show_step()
        self._timer.start()

    def stop(self) -> None:
        self.request_id = None
        self._timer.stop()

    def _on_progress(self, request_id: int, done: int, total: int, what: str) -> None:
        if request_id != self.request_id:
            return  # a load superseded by a newer one
        for bar in (self.progress, self.bar):
            bar.setRange(0, max(1, total))
            bar.setValue(done)
        self._what = what
        self._show_step()

    def _show_step(self) -> None:
        seconds = time.monotonic() - self._started
        self.step.setText(f"{self._what} · {seconds:,.0f} s")
