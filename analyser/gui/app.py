"""Start the desktop Graph Analyser: ``analyse gui [FILE...]`` or ``python -m analyser.gui``."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from analyser.gui.main_window import APP_NAME, ORGANISATION, MainWindow


def app_icon() -> QIcon:
    from importlib import resources

    path = resources.files("assets").joinpath("icons", "app.svg")
    return QIcon(str(path)) if path.is_file() else QIcon()


def ensure_app(argv: Sequence[str] | None = None) -> QApplication:
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    if existing is not None:
        raise RuntimeError("a Qt application without widgets is running: the GUI needs one")
    app = QApplication(list(argv) if argv is not None else [sys.argv[0]])
    app.setOrganizationName(ORGANISATION)
    app.setApplicationName(APP_NAME)
    app.setWindowIcon(app_icon())
    _collect_garbage_on_the_gui_thread(app)
    return app


def _collect_garbage_on_the_gui_thread(app: QApplication) -> None:
    """Python's cycle collector runs on this thread only, on a timer (pyqtgraph's
    GarbageCollector), never on a pool thread. A collection in a pool thread
    disconnected a dead object's signal (a weakref callback) inside Qt's connection lock and then
    waited for the interpreter lock, while the GUI thread held that lock and waited for Qt's:
    both stopped for ever (seen in CI, gdb: QObject::disconnect -> PyGILState_Ensure in a
    "Thread (pooled)", QMetaObject::disconnect in the GUI thread)."""
    from pyqtgraph.util.garbage_collector import GarbageCollector

    # kept alive with the app, as an attribute QApplication's type does not have (read with
    # getattr where the collection is paused: analyser.gui.background)
    setattr(app, "_garbage_collector", GarbageCollector(interval=1.0))  # noqa: B010


def _quit_on_ctrl_c(app: QApplication) -> tuple[QTimer | None, list[int]]:
    """Ctrl-C in the terminal (or SIGTERM, from ``kill`` or a session ending) closes the
    windows (as File > Quit does) and ends the event loop.
    Qt's loop never lets Python run its signal handlers by itself, so a timer wakes the
    interpreter every 200 ms; without this Ctrl-C was ignored until the window was closed.

    The handler only records the signal: Python runs it between any two bytecodes, e.g. in the
    middle of a report being filled, and closing the windows there tore the widgets down under
    the running code (a traceback from ``set_documents``). The timer's own callback, which the
    event loop calls between events, does the closing."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        return None, caught
    done: list[bool] = []

    def on_sigint(signum: int, _frame: object) -> None:
        caught.append(signum)

    def on_tick() -> None:
        if caught and not done:
            done.append(True)
            app.closeAllWindows()
            app.quit()

    signal.signal(signal.SIGINT, on_sigint)
    if signal.getsignal(signal.SIGTERM) != signal.SIG_IGN:
        # the command's own SIGTERM handler raised from inside a Qt timer slot: a traceback,
        # and the GUI kept running
        signal.signal(signal.SIGTERM, on_sigint)
    timer = QTimer()
    timer.timeout.connect(on_tick)
    timer.start(200)
    return timer, caught


def run(
    files: Sequence[str | Path] = (), theme: str | None = None, tune: str | Path | None = None
) -> int:
    """Open the main window (with up to two files: the second is compared with the first; or
    with the Design space of a tune folder). Ctrl-C in the terminal closes it and raises
    KeyboardInterrupt (``analyse`` exits 130); SIGTERM likewise (exit 143)."""
    app = ensure_app()
    window = MainWindow()
    if theme is not None:
        window.set_theme(theme)
    window.show()
    if files:
        window.open_files(list(files))
    if tune is not None:
        from analyser.gui.design_space import open_design_space

        open_design_space(window, tune)
    old_term = signal.getsignal(signal.SIGTERM)
    timer, interrupted = _quit_on_ctrl_c(app)
    try:
        code = app.exec()
    finally:
        if timer is not None:
            timer.stop()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, old_term if old_term is not None else signal.SIG_DFL)
    if interrupted:
        from profiles.atomic import Interrupted

        raise Interrupted(interrupted[0])  # a KeyboardInterrupt with exit code 128 + signal
    return code


def main() -> int:  # pragma: no cover - interactive
    return run(sys.argv[1:])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
