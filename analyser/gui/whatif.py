"""What-if: re-simulate a changed run configuration in the background and compare.

* :class:`SimulationJob` simulates on the simulation service (:mod:`analyser.sim.service`,
  Dask workers, cached answers): the GUI never blocks, and :meth:`SimulationJob.cancel` stops
  the simulation in its worker.
* :class:`WhatIfDialog` shows the change, the progress and a Cancel button, and when the profile
  is written asks the window to open it compared with the original.
* :func:`apply_tip` is the Insights report's "Apply" hook (``APPLY_TIP_HANDLER`` in the report
  registry): it applies the insight's recommended run-config change and starts the dialog.

Results stay in the simulation service's cache (``<cache>/results/<name>-whatif-<tip>.h5``, a
hard link to the cached answer, never over an existing file): nothing is written next to the
user's profile, which may sit in a shared or read-only folder. File > Save
profile as... keeps a copy where the user chooses.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
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


def unique_output(folder: Path, stem: str, tag: str = "") -> Path:
    """A new file name ``<stem>-<tag>.h5`` (``<stem>.h5`` without a tag) in ``folder``, the
    name made of letters, digits, ``-_.`` only; never an existing file."""
    name = f"{stem}-{tag}" if tag else stem
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip("-.") or "run"
    path = folder / f"{safe}.h5"
    n = 2
    while path.exists():
        path = folder / f"{safe}-{n}.h5"
        n += 1
    return path


#: Sub-folder of the simulation cache holding the results the GUI opened, under readable names.
RESULTS_FOLDER = "results"


def in_cache_results(path: str | Path) -> bool:
    """Whether ``path`` is a result kept in the simulation cache's results folder: the files
    the GUI opens after a what-if or an engine run, which File > Open Recent does not list and
    the Open dialog does not start in (the cache is the analyser's, not the user's folder)."""
    p = Path(path)
    if p.parent.name != RESULTS_FOLDER:  # most opens: no need to look the cache up
        return False
    from analyser.sim.service.service import default_cache_dir

    try:
        return p.resolve().is_relative_to(default_cache_dir().resolve())
    except (OSError, RuntimeError):
        return False


class SimulationJob(QObject):
    """One configuration simulated on the simulation service (:mod:`analyser.sim.service`),
    the profile then placed at ``out_path`` when the user chose one, else in the cache's
    results folder as ``<name>.h5``. Signals: ``progress(fraction or -1, message)``,
    ``finished(path, status)``, ``failed(message)``, ``cancelled()``.

    The request is submitted from a helper thread (the service may be starting its cluster);
    a timer in the GUI thread then follows the answer, so every signal is emitted from the GUI
    thread. The service caches answers: a configuration simulated before (by a prediction, an
    earlier what-if or ``analyse tune``) is copied at once."""

    progress = Signal(float, str)
    finished = Signal(str, str)
    failed = Signal(str)
    cancelled = Signal()

    #: How often the timer looks at the answer and the progress (ms).
    POLL_MS = 150

    def __init__(
        self,
        run_config: dict[str, Any],
        out_path: str | Path | None = None,
        parent=None,
        name: str = "run",
    ) -> None:
        super().__init__(parent)
        self.run_config = run_config
        self.out_path = Path(out_path) if out_path is not None else None
        self.name = name
        self.cache_root: Path | None = None
        self.batch = None
        self.response = None
        self._error: str | None = None
        self._cancel = False
        self._said = ""
        self._timer = QTimer(self)
        self._timer.setInterval(self.POLL_MS)
        self._timer.timeout.connect(self._poll)
        self.state = "idle"  # idle, running, done, failed, cancelled

    def start(self) -> None:
        from analyser.sim.service import get_service

        service = get_service()
        self.cache_root = Path(service.cache.root)
        self.state = "running"
        self._say(-1.0, "queued" if service.started else "starting the simulation service")
        threading.Thread(target=self._submit, args=(service,), daemon=True).start()
        self._timer.start()

    def _submit(self, service) -> None:
        try:
            batch = service.submit([self.run_config])
            self.batch = batch
            if self._cancel:  # cancelled while the service was starting
                batch.cancel()
        except UserFacingError as exc:
            self._error = str(exc)
        except Exception as exc:  # the service could not start: one line in the dialog
            self._error = f"the simulation service could not start: {type(exc).__name__}: {exc}"

    def is_running(self) -> bool:
        return self.state == "running"

    def cancel(self) -> None:
        """Stop the simulation (queued: dropped; running: stopped in its worker). Nothing is
        written under the output name."""
        if self.state == "running":
            self._cancel = True
            if self.batch is not None:
                self.batch.cancel()
            else:  # not submitted yet (the service is starting): it is cancelled on arrival
                self._end("cancelled")
                self.cancelled.emit()

    def _say(self, fraction: float, message: str) -> None:
        if message != self._said or fraction >= 0:
            self._said = message
            self.progress.emit(fraction, message)

    def _poll(self) -> None:
        if self.state != "running":
            self._timer.stop()
            return
        if self._error is not None:
            self._end("failed")
            self.failed.emit(self._error)
            return
        batch = self.batch
        if batch is None:
            return
        if self._cancel:
            batch.cancel()
        if not batch.done:
            p = batch.progress()
            self._say(-1.0, "simulating on a worker" if p.running else "queued")
            return
        resp = batch.responses[0]
        self.response = resp
        if self._cancel or resp.status == "cancelled":
            self._end("cancelled")
            self.cancelled.emit()
        elif resp.simulated:
            out = self.out_path
            try:
                if out is None:
                    folder = Path(resp.profile).parent / RESULTS_FOLDER
                    folder.mkdir(exist_ok=True)
                    out = unique_output(folder, self.name)
                _place(Path(resp.profile), out)
            except OSError as exc:
                self._end("failed")
                self.failed.emit(f"cannot write {out}: {exc.strerror or exc}.")
                return
            self.out_path = out
            self._say(1.0, "done")
            self._end("done")
            self.finished.emit(str(out), resp.status)
        else:
            self._end("failed")
            self.failed.emit(resp.message)

    def _end(self, state: str) -> None:
        self.state = state
        self._timer.stop()


def _place(source: Path, out: Path) -> None:
    """``source`` (a cached profile) under the name ``out``: a hard link when the cache is on
    the same file system, else a copy; written under a temporary name, then renamed."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


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
        out_path: Path | None,
        original: Path | None,
        on_result=None,
        parent: QWidget | None = None,
        name: str = "run",
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
        self.status = QLabel("Submitting the simulation…")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.rejected.connect(self.cancel)
        lay.addWidget(self.buttons)
        self.job = SimulationJob(run_config, out_path, self, name=name)
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
            self.status.setText(message[:1].upper() + message[1:] + "…")

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
        rows.append(
            f"<li><code>{lit(key)}</code>: {lit(repr(node))} → <b>{lit(repr(new))}</b></li>"
        )
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

    def opened(original: Path | None, result: Path) -> None:
        if hasattr(window, "open_compare") and original is not None:
            window.open_compare(original, result)

    dialog = WhatIfDialog(
        f"What-if: {title}",
        f"Re-simulating <b>{lit(document.name)}</b> with:{describe_change(base, change)}"
        "The result stays in the analyser's cache (nothing is written beside your profile) "
        "and opens compared with the original; File &gt; Save profile as… keeps a copy.",
        cfg,
        None,
        Path(document.path),
        opened,
        window,
        name=f"{Path(document.path).stem}-whatif-{getattr(insight, 'id', 'tip')}",
    )
    dialog.start()
    return dialog
