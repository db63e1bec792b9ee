"""Helpers shared by the GUI report tests (trace, BSP, memory, pipeline, what-if, ...)."""

from __future__ import annotations

from pathlib import Path

from profiles import write_profile
from profiles.synthetic import make_synthetic_profile


def write_synthetic_profiles(
    tmp_path_factory, stem: str, seeds_and_ga: tuple[tuple[int, int], ...], **sizes
) -> tuple[Path, ...]:
    """Write one small synthetic profile per ``(seed, gradient accumulation)`` into a new
    temporary folder named after ``stem``."""
    out = tmp_path_factory.mktemp(stem)
    paths = []
    for seed, ga in seeds_and_ga:
        path = out / f"{stem}-{seed}-ga{ga}.h5"
        write_profile(path, make_synthetic_profile(seed=seed, grad_accum=ga, **sizes))
        paths.append(path)
    return tuple(paths)


def open_documents(report_and_docs, *paths):
    """Open ``paths`` as documents, remember them for closing at teardown, and show them in the
    report (the first as A, the second, if any, as B)."""
    from analyser.gui.model.document import Document

    report, docs = report_and_docs
    opened = [Document.open(p) for p in paths]
    docs.extend(opened)
    report.set_document(opened[0], opened[1] if len(opened) > 1 else None)
    return opened


def assert_nothing_left(*widgets) -> None:
    """Close ``widgets`` and check that no window is left visible and no worker thread or
    engine process is still running (the report / window fixtures call it at teardown)."""
    from PySide6.QtCore import QThreadPool
    from PySide6.QtWidgets import QApplication

    from analyser.gui import whatif

    for w in widgets:
        w.close()
    assert QThreadPool.globalInstance().waitForDone(30_000)
    visible = [t for t in QApplication.topLevelWidgets() if t.isVisible()]
    assert not visible, f"windows left open: {visible}"
    running = [d for d in getattr(whatif, "_ACTIVE", ()) if d.job.is_running()]
    assert not running, f"engine runs left running: {running}"


def shut_down_trace(report) -> None:
    """Teardown for an Execution Trace report: stop its background work and check it stopped."""
    report.shutdown()
    assert report._pool.activeThreadCount() == 0


def shown_report(qtbot, report, size=(1300, 850), before_close=None):
    """Generator for a report fixture: shows ``report`` at ``size``, yields ``(report, docs)``
    (``open_documents`` fills ``docs``), then calls ``before_close(report)`` if given, checks that
    nothing is left and closes the documents. Use as
    ``yield from shown_report(qtbot, LivenessReport())``, or, to open documents before the test,
    ``fixture = shown_report(...)``, ``report, docs = next(fixture)``, ..., ``yield``,
    ``next(fixture, None)``."""
    qtbot.addWidget(report)
    report.resize(*size)
    report.show()
    qtbot.waitExposed(report)
    docs = []
    yield report, docs
    if before_close is not None:
        before_close(report)
    assert_nothing_left(report)
    for d in docs:
        d.close()


def shown_window(qtbot, tmp_path, size=(1300, 850)):
    """Generator for a main-window fixture with a throw-away settings file: yields the shown
    window, then closes it and checks that no worker thread is left. Use as
    ``yield from shown_window(qtbot, tmp_path)``."""
    from PySide6.QtCore import QSettings

    from analyser.gui.main_window import MainWindow

    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(*size)
    w.show()
    yield w
    w.close()
    assert w.pool.activeThreadCount() == 0


def open_in(qtbot, window, *paths) -> bool:
    """Open one profile (or two compared) in ``window``; True when it opened."""
    with qtbot.waitSignal(window.loadFinished, timeout=30000) as blocker:
        if len(paths) == 2:
            window.open_compare(*paths)
        else:
            window.open_files(list(paths))
    return blocker.args == [True]


def synthetic_documents(tmp_path_factory, stem: str, seed: int, **sizes):
    """Generator for a module fixture of the Qt-free view-model tests: writes two synthetic
    profiles (gradient accumulation 4 and 8, ``seed``, ``sizes``), yields them opened as
    documents [A, B], then closes them."""
    from analyser.gui.model.document import Document

    paths = write_synthetic_profiles(tmp_path_factory, stem, ((seed, 4), (seed, 8)), **sizes)
    opened = [Document.open(p) for p in paths]
    yield opened
    for d in opened:
        d.close()


def paint_counter():
    """An event filter that counts the Paint events of the widgets it is installed on
    (``counts[widget]``)."""
    import collections

    from PySide6.QtCore import QEvent, QObject

    class PaintCounter(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.counts: collections.Counter = collections.Counter()

        def eventFilter(self, obj, event) -> bool:
            if event.type() == QEvent.Type.Paint:
                self.counts[obj] += 1
            return False

    return PaintCounter()


def stacked_report(qtbot, report, pair, size=(1200, 800)):
    """``report`` in a shown stack behind another page (the other page current, as a report
    not shown in the window) and ``pair`` opened as documents: (stack, other, docs). The
    caller closes the stack and the documents."""
    from PySide6.QtWidgets import QLabel, QStackedWidget

    from analyser.gui.model.document import Document

    stack = QStackedWidget()
    qtbot.addWidget(stack)
    other = QLabel("another report")
    stack.addWidget(other)
    stack.addWidget(report)
    stack.resize(*size)
    stack.show()
    qtbot.waitExposed(stack)
    return stack, other, [Document.open(p) for p in pair]


#: the marker event's type of wait_until_idle (registered with Qt on first use)
_IDLE_MARKER = None


def wait_until_idle(qtbot, passes: int = 2) -> None:
    """Wait until the GUI thread's event loop has nothing left to do: a marker event posted to
    the back of the queue comes back ``passes`` times in a row with no other event delivered
    on the GUI thread while it waited (posted events come in the order they were posted, so
    everything posted before it, the paints and relayouts a show posted included, ran; what
    those posted, or a zero-interval timer they started, would run before the next marker).
    An event, not a time: a loaded machine only makes it later. (The dispatcher's
    ``aboutToBlock`` does not say this: the GLib dispatcher emits it at every pass of the
    loop, pending events or not.) Timers due later and pool threads' results still to come
    are not waited for: wait for their own signal or state."""
    from PySide6.QtCore import QCoreApplication, QEvent, QObject, Signal

    global _IDLE_MARKER
    if _IDLE_MARKER is None:  # one event type for every wait (Qt has a few thousand)
        _IDLE_MARKER = QEvent.Type(QEvent.registerEventType())

    class IdleProbe(QObject):
        idle = Signal()
        marker = _IDLE_MARKER

        def __init__(self) -> None:
            super().__init__()
            self.seen = 0  # events delivered on the GUI thread, the markers not counted
            self.before = -1
            self.quiet = 0

        def eventFilter(self, obj, event) -> bool:
            if event.type() != self.marker:
                self.seen += 1
            return False

        def post(self) -> None:
            self.before = self.seen
            QCoreApplication.postEvent(self, QEvent(self.marker))

        def event(self, event) -> bool:
            if event.type() != self.marker:
                return super().event(event)
            self.quiet = self.quiet + 1 if self.seen == self.before else 0
            if self.quiet >= passes:
                self.idle.emit()
            else:
                self.post()
            return True

    probe = IdleProbe()
    app = QCoreApplication.instance()
    app.installEventFilter(probe)
    try:
        with qtbot.waitSignal(probe.idle, timeout=30_000):
            probe.post()
    finally:
        app.removeEventFilter(probe)


def show_painted(qtbot, stack, report) -> None:
    """Make ``report`` the current page of ``stack`` and wait for its paint, then for the GUI
    thread to be idle (what the paint posted painted too)."""
    with qtbot.waitSignal(report.painted, timeout=30_000):
        stack.setCurrentWidget(report)
    wait_until_idle(qtbot)


def trace_settled(report) -> bool:
    """True when an Execution Trace report shows all it will: filled and painted
    (``Report.ready``), its range summary shown, nothing left on its pool (the differences
    lane of a comparison is computed there) and its timelines' flow arrows and slice names
    read (``TimelineView.background_pending``). A pool's result is queued before its thread
    ends: wait for the GUI thread to go idle after this to see it drawn."""
    return (
        report.ready
        and not report.summary_pending
        and report._pool.activeThreadCount() == 0
        and not any(tl.background_pending for tl in report._timelines())
    )


def settle_trace(qtbot, report, timeout: int = 30_000) -> None:
    """Wait until ``report`` (an Execution Trace) is settled (:func:`trace_settled`) and the GUI
    thread is idle after it (what the last results drew laid out and painted); again if what
    ran then asked for more."""
    while True:
        qtbot.waitUntil(lambda: trace_settled(report), timeout=timeout)
        wait_until_idle(qtbot)
        if trace_settled(report):
            return
