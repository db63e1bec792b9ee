"""Walk every report of the Graph Analyser offscreen and say whether anything went wrong.

    python benchmarks/gui_walk.py A.h5 [B.h5] [--shots DIR]

Opens the main window on Qt's offscreen platform with a throw-away settings file, opens A and
visits every report and every tab of it (nested tabs included), and in each tab selects
something: the first row of every visible table or tree (current row, then a double-click, as
a person would), every entry of every visible combo box (at most :data:`MAX_COMBO_ITEMS`), a
click in the middle of every visible chart, then every report again in the dark theme with
memory in kB; then, with B, the same with A compared with B.
Dialogs are answered and recorded (their text is the one-sentence message), exceptions are
caught where Qt would print them (``sys.excepthook``: slot and event-handler errors) and Qt's
critical messages through its message handler.

Exit code: 0 when everything went cleanly (a report's own "unavailable: <sentence>" state is
clean: printed as a note), 2 when a profile was refused with one sentence (printed), 1 when
anything raised or Qt printed a critical message: one line naming the mode, report and tab and
the error. ``--shots DIR`` saves a PNG of every tab visited (what a person sees).

tests/test_gui_walk.py runs :func:`walk` over a demo profile and the hostile corpus
(tests/hostile.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

#: Most entries of one combo box chosen in one tab (the IPU box, the grouping, the layer...).
MAX_COMBO_ITEMS = 6
#: Longest wait for a report's background work after one action (seconds).
SETTLE_S = 20.0


@dataclass
class WalkResult:
    """What a walk found: errors (exit 1), a refusal (exit 2), notes (clean)."""

    errors: list[str] = field(default_factory=list)
    refused: str = ""
    notes: list[str] = field(default_factory=list)
    visited: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 2 if self.refused else 0


class _Watch:
    """Collects exceptions (``sys.excepthook``), Qt critical messages and dialogs, each with
    where the walk was when it happened."""

    def __init__(self, result: WalkResult) -> None:
        self.result = result
        self.where = "opening"
        self.dialogs: list[str] = []

    def excepthook(self, etype, value, tb) -> None:
        text = "".join(traceback.format_exception(etype, value, tb)).strip()
        self.result.errors.append(f"{self.where}: {etype.__name__}: {value}\n{text}")

    def qt_message(self, mode, context, message: str) -> None:
        from PySide6.QtCore import QtMsgType

        if mode in (QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg):
            self.result.errors.append(f"{self.where}: Qt: {message}")

    def dialog(self, _parent, title, text, *args, **kwargs):
        from PySide6.QtWidgets import QMessageBox

        self.dialogs.append(f"{title}: {text}")
        return QMessageBox.StandardButton.Ok


def _installed(watch: _Watch) -> Iterator[None]:
    from PySide6.QtCore import qInstallMessageHandler
    from PySide6.QtWidgets import QMessageBox

    old_hook = sys.excepthook
    saved = {k: QMessageBox.__dict__[k] for k in ("critical", "warning", "information", "question")}
    sys.excepthook = watch.excepthook
    old_handler = qInstallMessageHandler(watch.qt_message)
    for k in saved:
        setattr(QMessageBox, k, staticmethod(watch.dialog))
    try:
        yield
    finally:
        sys.excepthook = old_hook
        qInstallMessageHandler(old_handler)
        for k, v in saved.items():
            setattr(QMessageBox, k, v)


def _settle(app, window, timeout: float = SETTLE_S) -> None:
    """Run the event loop until the window's and the reports' thread pools are idle."""
    from PySide6.QtCore import QEventLoop, QThreadPool

    pools = [window.pool, QThreadPool.globalInstance(), *window.findChildren(QThreadPool)]
    end = time.perf_counter() + timeout

    def busy() -> bool:
        return any(p.activeThreadCount() for p in pools) and time.perf_counter() < end

    for _ in range(3):
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
    while busy():
        # the pools finish before this thread paints again: a paint here (pyqtgraph's axes
        # disconnect signals) while a pool thread finishes has deadlocked PySide twice, this
        # thread waiting on a Qt lock with the interpreter lock held (not yet understood)
        while busy():
            time.sleep(0.005)
        for _ in range(3):
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
    app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)


def _visible(widgets):
    return [w for w in widgets if w.isVisible()]


def _tab_paths(widget) -> list[tuple[str, Callable[[], None]]]:
    """(name, show) for every tab of the visible tab widgets under ``widget``, outer first."""
    from PySide6.QtWidgets import QTabWidget

    out = []
    for tabs in _visible(widget.findChildren(QTabWidget)):
        for i in range(tabs.count()):
            if tabs.isTabEnabled(i):
                out.append((tabs.tabText(i), lambda t=tabs, k=i: t.setCurrentIndex(k)))
    return out


def _select_something(app, window, report, watch: _Watch, where: str, done: set[int]) -> None:
    """In the tab shown: the first row of each table / tree, each combo entry, a chart click
    (each widget once per report: ``done`` holds those already used)."""
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QAbstractItemView, QComboBox, QHeaderView

    def fresh(widgets):
        out = [w for w in _visible(widgets) if id(w) not in done]
        done.update(id(w) for w in out)
        return out

    for view in fresh(report.findChildren(QAbstractItemView)):
        if isinstance(view, QHeaderView):
            continue
        model = view.model()
        # a first cell, asked so that list models answer too (a QListWidget's model has no
        # public columnCount in PySide)
        if model is None or not model.index(0, 0).isValid():
            continue
        watch.where = f"{where}, first row of {type(view).__name__}"
        index = model.index(0, 0)
        view.setCurrentIndex(index)
        view.scrollTo(index)
        rect = view.visualRect(index)
        if rect.isValid():
            QTest.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        _settle(app, window)
    for combo in fresh(report.findChildren(QComboBox)):
        if not combo.isEnabled() or combo.isEditable():
            continue
        start = combo.currentIndex()
        for i in range(min(combo.count(), MAX_COMBO_ITEMS)):
            if not combo.isVisible():
                break
            watch.where = f"{where}, {combo.itemText(i)!r} in a combo box"
            combo.setCurrentIndex(i)
            _settle(app, window)
        if combo.isVisible() and 0 <= start < combo.count():
            combo.setCurrentIndex(start)
            _settle(app, window)
    try:
        import pyqtgraph as pg
    except ImportError:  # pragma: no cover - pyqtgraph is a dependency of the GUI
        return
    for plot in fresh(report.findChildren(pg.PlotWidget)):
        watch.where = f"{where}, a click in a chart"
        vp = plot.viewport()
        QTest.mouseClick(
            vp, Qt.MouseButton.LeftButton, pos=QPoint(vp.width() // 2, vp.height() // 2)
        )
        _settle(app, window)


def _unavailable(report) -> str:
    """The report's "unavailable" sentence when it shows one, else ''."""
    message = getattr(report, "message", None)
    stack = getattr(report, "stack", None)
    if message is not None and stack is not None and stack.currentWidget() is message:
        text = message.label.text()
        return text if "unavailable" in text else ""
    return ""


def _walk_mode(app, window, mode: str, watch: _Watch, shots: Path | None) -> None:
    result = watch.result
    for key in window.report_keys:
        where = f"{mode}: {key}"
        watch.where = where
        report = window.show_report(key)
        _settle(app, window)
        result.visited.append(where)
        note = _unavailable(report)
        if note:
            result.notes.append(f"{where}: {note}")
            continue
        seen: set[str] = set()
        used: set[int] = set()
        pending = _tab_paths(report) or [("", lambda: None)]
        while pending:
            name, show = pending.pop(0)
            if name in seen:
                continue
            seen.add(name)
            tab_where = f"{where}, tab {name!r}" if name else where
            watch.where = tab_where
            show()
            _settle(app, window)
            result.visited.append(tab_where)
            _select_something(app, window, report, watch, tab_where, used)
            part = report.part_problem() if hasattr(report, "part_problem") else ""
            if part:
                result.notes.append(f"{tab_where}: {part}")
            if shots is not None:
                stem = f"{mode}-{key}-{name or 'main'}".replace(" ", "_").replace("/", "_")
                report.grab().save(str(shots / f"{stem}.png"))
            # tabs that appeared inside this one (nested tab widgets now visible)
            pending += [(n, s) for n, s in _tab_paths(report) if n not in seen]
        note = _unavailable(report)
        if note:
            result.notes.append(f"{where}: {note}")
    # the preferences: every report redrawn in the dark theme and another memory unit (a
    # theme switch keeps each report's selection: Report.restyle)
    window.set_theme("dark")
    window.set_units("kB")
    for key in window.report_keys:
        watch.where = f"{mode}: {key}, dark theme and kB"
        window.show_report(key)
        _settle(app, window)
    window.set_theme("light")
    window.set_units("KiB")
    _settle(app, window)
    for text in watch.dialogs:
        result.notes.append(f"{mode}: dialog {text}")
    watch.dialogs.clear()


def _open(app, window, paths: list[Path], watch: _Watch) -> bool:
    done: list[bool] = []
    window.loadFinished.connect(done.append)
    if len(paths) == 2:
        window.open_compare(*paths)
    else:
        window.open_files(paths)
    end = time.perf_counter() + 120
    while not done and time.perf_counter() < end:
        app.processEvents()
    window.loadFinished.disconnect(done.append)
    if not done or not done[0]:
        watch.result.refused = watch.dialogs[-1] if watch.dialogs else "the profile did not open"
        watch.dialogs.clear()
        return False
    _settle(app, window)
    while window.prebuild_pending():
        app.processEvents()
    return True


def walk(paths: list[Path], shots: Path | None = None, single: bool = True) -> WalkResult:
    """Walk every report and tab with ``paths[0]`` alone, then compared with ``paths[1]``
    (``single=False`` with two paths: the compared walk only)."""
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from analyser.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(["gui_walk"])
    result = WalkResult()
    watch = _Watch(result)
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(str(Path(tmp) / "walk.ini"), QSettings.Format.IniFormat)
        gen = _installed(watch)
        next(gen)
        window = None
        try:
            window = MainWindow(settings=settings)
            window.resize(1400, 900)
            window.show()
            modes = [("single", paths[:1])] if single or len(paths) < 2 else []
            modes += [("compare", paths[:2])] if len(paths) > 1 else []
            for mode, files in modes:
                watch.where = f"{mode}: opening"
                if not _open(app, window, files, watch):
                    break
                _walk_mode(app, window, mode, watch, shots)
        except Exception:
            result.errors.append(f"{watch.where}: {traceback.format_exc().strip()}")
        finally:
            if window is not None:
                window.close()
                window.deleteLater()
                app.processEvents()
            next(gen, None)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profiles", nargs="+", type=Path, help="A.h5 [B.h5]")
    parser.add_argument("--shots", type=Path, help="save a PNG of every tab visited here")
    args = parser.parse_args(argv)
    if len(args.profiles) > 2:
        parser.error("give one profile, or two to compare")
    result = walk(args.profiles, args.shots)
    for note in result.notes:
        print("note:", note)
    if result.refused:
        print("refused:", result.refused)
    for err in result.errors:
        print("ERROR", err, file=sys.stderr)
    print(
        f"{len(result.visited)} report tabs visited, {len(result.errors)} error(s)",
        file=sys.stderr,
    )
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
