"""What-if: re-simulate a changed run configuration in the background and compare.

* :class:`SimulationJob` runs the embedded engine in a subprocess
  (:mod:`analyser.gui.whatif_worker`, driven by a ``QProcess``): progress arrives as JSON lines,
  the GUI never blocks, and :meth:`SimulationJob.cancel` kills the process, so cancelling really
  stops the work (no thread is left behind).
* :class:`WhatIfDialog` shows the change, the progress and a Cancel button, and when the profile
  is written asks the window to open it compared with the original.
* :func:`apply_tip` is the Insights report's "Apply" hook (``APPLY_TIP_HANDLER`` in the report
  registry): it applies the insight's recommended run-config change and starts the dialog.

Results are written next to the original profile (``<name>-whatif-<tip>.h5``, never over an
existing file), or in the temporary folder when that folder is not writable.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QMessageBox,
    QProgressBar,
    QVBoxLayout,
    QWidget,
)

from analyser.literal import html as lit
from profiles.errors import UserFacingError


class WhatIfError(UserFacingError):
    """A what-if cannot start (no run config in the profile, invalid change...)."""


def apply_change(run_config: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """``run_config`` with ``change`` applied (the analysis core's rule for dotted keys)."""
    from analyser.core.insights.resimulate import apply_change as _apply

    return _apply(run_config, change)


def validate_config(run_config: dict[str, Any]) -> dict[str, Any]:
    """Validate with ``engine.config.RunConfig``; returns the complete dict or raises the
    engine's one-sentence ConfigError."""
    from engine.config import RunConfig

    return RunConfig.from_dict(run_config).to_dict()


def unique_output(original: Path, tag: str) -> Path:
    """A new file name ``<stem>-<tag>.h5`` beside ``original`` (or in the temp folder when that
    folder is not writable); never an existing file."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in tag).strip("-") or "whatif"
    folder = original.parent if os.access(original.parent, os.W_OK) else Path(tempfile.gettempdir())
    path = folder / f"{original.stem}-{safe}.h5"
    n = 2
    while path.exists():
        path = folder / f"{original.stem}-{safe}-{n}.h5"
        n += 1
    return path


class SimulationJob(QObject):
    """One engine run in a subprocess. Signals: ``progress(fraction or -1, message)``,
    ``finished(path, status)``, ``failed(message)``, ``cancelled()``."""

    progress = Signal(float, str)
    finished = Signal(str, str)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, run_config: dict[str, Any], out_path: str | Path, parent=None) -> None:
        super().__init__(parent)
        self.run_config = run_config
        self.out_path = Path(out_path)
        self.process: QProcess | None = None
        self._buffer = b""
        self._result: dict[str, Any] = {}
        self._cancelled = False
        self._config_file: Path | None = None
        self.state = "idle"  # idle, running, done, failed, cancelled

    def start(self) -> None:
        fd, name = tempfile.mkstemp(prefix="ipu-run-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self.run_config, f)
        self._config_file = Path(name)
        p = QProcess(self)
        env = QProcessEnvironment.systemEnvironment()
        root = str(Path(__file__).resolve().parents[2])
        env.insert("PYTHONPATH", os.pathsep.join(filter(None, [root, env.value("PYTHONPATH")])))
        p.setProcessEnvironment(env)
        p.setProcessChannelMode(QProcess.ProcessChannelMode.SeparateChannels)
        p.readyReadStandardOutput.connect(self._read)
        p.finished.connect(self._on_finished)
        p.errorOccurred.connect(self._on_error)
        self.process = p
        self.state = "running"
        p.start(
            sys.executable,
            ["-m", "analyser.gui.whatif_worker", str(self._config_file), str(self.out_path)],
        )

    def is_running(self) -> bool:
        return self.state == "running"

    def cancel(self) -> None:
        """Kill the engine process (the partial output is removed by the writer's atomic
        rename: nothing is left under the output name)."""
        if self.process is not None and self.state == "running":
            self._cancelled = True
            self.process.terminate()  # the worker exits cleanly (the writer removes its temp file)
            if not self.process.waitForFinished(3000):
                self.process.kill()
                self.process.waitForFinished(3000)

    def _read(self) -> None:
        if self.process is None:
            return
        self._buffer += bytes(self.process.readAllStandardOutput())
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            try:
                msg = json.loads(line.decode("utf-8", "replace"))
            except ValueError:
                continue
            if "progress" in msg:
                frac = msg["progress"]
                self.progress.emit(
                    -1.0 if frac is None else float(frac), str(msg.get("message", ""))
                )
            else:
                self._result.update(msg)

    def _cleanup(self) -> None:
        if self._config_file is not None:
            self._config_file.unlink(missing_ok=True)
            self._config_file = None

    def _on_error(self, error) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self.state = "failed"
            self._cleanup()
            self.failed.emit("the engine process could not be started.")

    def _on_finished(self, code: int, _status) -> None:
        self._read()
        self._cleanup()
        if self._cancelled:
            self.state = "cancelled"
            self.cancelled.emit()
            return
        if code == 0 and "done" in self._result:
            self.state = "done"
            self.finished.emit(str(self._result["done"]), str(self._result.get("status", "ok")))
            return
        self.state = "failed"
        err = self._result.get("error")
        if not err and self.process is not None:
            tail = bytes(self.process.readAllStandardError()).decode("utf-8", "replace").strip()
            err = tail.splitlines()[-1] if tail else f"the engine exited with code {code}."
        self.failed.emit(str(err))


#: Dialogs whose simulation is running or whose result has not been dismissed yet.
_ACTIVE: set[WhatIfDialog] = set()


class WhatIfDialog(QDialog):
    """Progress of one re-simulation; on success opens the result compared with the original.

    ``on_result(original_path, result_path)`` is called when the profile is written (the main
    window's ``open_compare``); ``original`` may be None (a plain run: ``on_result(None, path)``).
    """

    def __init__(
        self,
        title: str,
        description: str,
        run_config: dict[str, Any],
        out_path: Path,
        original: Path | None,
        on_result=None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setMinimumWidth(520)
        self.original = original
        self.on_result = on_result
        self.result_path: Path | None = None
        self.error: str | None = None
        lay = QVBoxLayout(self)
        self.description = QLabel(description)
        self.description.setWordWrap(True)
        self.description.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.description)
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)  # busy until the first figure arrives
        lay.addWidget(self.bar)
        self.status = QLabel("Starting the engine…")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.rejected.connect(self.cancel)
        lay.addWidget(self.buttons)
        self.job = SimulationJob(run_config, out_path, self)
        self.job.progress.connect(self._on_progress)
        self.job.finished.connect(self._on_finished)
        self.job.failed.connect(self._on_failed)
        self.job.cancelled.connect(self._on_cancelled)

    def start(self) -> None:
        # keep the dialog (and its job) alive while it runs, whoever called start()
        _ACTIVE.add(self)
        self.finished.connect(lambda _result: _ACTIVE.discard(self))
        self.job.start()
        self.show()

    def cancel(self) -> None:
        if self.job.is_running():
            self.status.setText("Cancelling…")
            self.job.cancel()
        else:
            self.reject()

    def closeEvent(self, event) -> None:
        if self.job.is_running():
            self.job.cancel()
        super().closeEvent(event)

    def _on_progress(self, frac: float, message: str) -> None:
        if frac >= 0:
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(frac * 1000))
        if message:
            self.status.setText(f"Simulating: {message}")

    def _on_finished(self, path: str, status: str) -> None:
        self.result_path = Path(path)
        self.bar.setRange(0, 1000)
        self.bar.setValue(1000)
        fits = "fits in memory" if status == "ok" else "does NOT fit in memory"
        self.status.setText(f"Done: {self.result_path.name} {fits}.")
        self.buttons.setStandardButtons(QDialogButtonBox.StandardButton.Close)
        if self.on_result is not None:
            self.on_result(self.original, self.result_path)
        self.accept()

    def _on_failed(self, message: str) -> None:
        self.error = message
        self.bar.setRange(0, 1)
        self.bar.setValue(0)
        self.status.setText(f"The simulation failed: {message}")
        self.buttons.setStandardButtons(QDialogButtonBox.StandardButton.Close)
        self.buttons.rejected.connect(self.reject)

    def _on_cancelled(self) -> None:
        self.status.setText("Cancelled.")
        self.reject()


def describe_change(run_config: dict[str, Any], change: dict[str, Any]) -> str:
    rows = []
    for key, new in change.items():
        node: Any = run_config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        rows.append(f"<li><code>{lit(key)}</code>: {lit(repr(node))} → <b>{lit(repr(new))}</b></li>")
    return "<ul>" + "".join(rows) + "</ul>"


def apply_tip(window, document, insight) -> WhatIfDialog | None:
    """Re-simulate ``document`` with ``insight.change`` and open the result in compare mode."""
    change = dict(getattr(insight, "change", {}) or {})
    title = getattr(insight, "title", "tip")
    try:
        if not change:
            raise WhatIfError(f"the insight {title!r} has no run-config change to apply.")
        base = dict(document.analysis.run_config or {})
        if not base:
            raise WhatIfError(
                f"{document.name} does not record its run configuration, so it cannot be "
                "re-simulated."
            )
        cfg = validate_config(apply_change(base, change))
    except UserFacingError as exc:
        QMessageBox.warning(window, "Cannot apply the tip", str(exc))
        return None
    out = unique_output(Path(document.path), f"whatif-{getattr(insight, 'id', 'tip')}")

    def opened(original: Path | None, result: Path) -> None:
        if hasattr(window, "open_compare") and original is not None:
            window.open_compare(original, result)

    dialog = WhatIfDialog(
        f"What-if: {title}",
        f"Re-simulating <b>{lit(document.name)}</b> with:{describe_change(base, change)}"
        f"The result is written to <code>{lit(out)}</code> and opened compared with the original.",
        cfg,
        out,
        Path(document.path),
        opened,
        window,
    )
    dialog.start()
    return dialog
