"""The window's background work, apart from the window: the warm-up of freshly opened documents
on the thread pool (:class:`PrefetchTask`), the idle build of reports not shown yet, both held
while a report a click showed fills and is first painted (:class:`Background`), and the build of
a shown report's view-model on the pool, handed to the report on the GUI thread
(:class:`ViewTask`, :meth:`Background.build_view`).

Why they are held: the warm-up shares the interpreter lock with the GUI thread, and an idle build
step (10-75 ms, far more on a busy machine) used to run between a click and its paint when its
tick fell there; a first visit clicked right after an open then paid for both."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QRunnable, QThreadPool, QTimer, Signal
from PySide6.QtWidgets import QApplication, QWidget

if TYPE_CHECKING:
    from analyser.gui.model.document import Document
    from analyser.gui.model.views import ViewReceiver, ViewRequest

#: Pause between two reports built while the window is idle (ms; see Background.build_step).
PREBUILD_INTERVAL_MS = 50
#: How long the background warm-up pauses after a click shows a report not filled yet (ms; see
#: PrefetchTask.pause).
PREFETCH_PAUSE_MS = 150
#: Longest hold of the warm-up and the idle build for a report that was shown but not painted
#: (ms; see Background.hold_until_painted).
HOLD_LIMIT_MS = 2000


class PrefetchTask(QRunnable):
    """Warm the analysis caches of freshly opened documents (best effort: a document closed
    meanwhile just stops the warming)."""

    def __init__(
        self,
        docs: tuple[Document, ...],
        needs: tuple[tuple[str, ...], ...],
        pair: tuple[Document, Document] | None = None,
        views: tuple[ViewRequest | Callable[[], ViewRequest | None] | None, ...] = (),
    ) -> None:
        super().__init__()
        self.docs = docs
        self.needs = needs
        #: per report of ``needs`` (when given), the view-model it shows for the open documents,
        #: built once its data is warm (None: a report without a view-model)
        self.views = views
        #: (A, B) when comparing: what compare mode computes for the pair (the explained
        #: comparison, Liveness's steps aligned by program: seconds for 10^5 program steps) is
        #: warmed too
        self.pair = pair
        self.cancelled = False
        #: cleared while the GUI thread fills a report a click just showed (see pause)
        self._may_run = threading.Event()
        self._may_run.set()
        self._paused_at = 0.0
        self._resumed_at = 0.0
        self._gui_clock: int | None = None
        #: set when the task is cancelled (wakes a settle wait, see _import_pandas)
        self._cancel_wait = threading.Event()

    def pause(self) -> None:
        """Hold the warm-up at its next step while the GUI thread fills and paints the report
        a click showed: the two threads share one interpreter lock, so a warm-up running
        beside it slowed that first visit when clicked right after an open.
        The report computes what it needs itself; the warm-up carries on after :meth:`resume`
        (or, should the GUI thread be blocked, :attr:`PAUSE_LIMIT_S` at most: it then resumes
        itself; :attr:`PAUSE_BUSY_LIMIT_S` while the GUI thread keeps busy)."""
        self._paused_at = time.monotonic()
        self._gui_clock = _thread_cpu_clock()  # the GUI thread's (pause runs there)
        self._may_run.clear()

    def resume(self) -> None:
        self._resumed_at = time.monotonic()
        self._may_run.set()

    def cancel(self) -> None:
        """Stop at the next step (a pause or a settle wait under way ends now)."""
        self.cancelled = True
        self._cancel_wait.set()
        self.resume()

    #: How long the GUI thread is left alone after a resume before the pandas import (seconds;
    #: see _import_pandas).
    SETTLE_S = 0.4

    def _import_pandas(self) -> None:
        """Import pandas once the report a click showed has settled: its first paint resumes
        the task, but the same burst of events goes on with the report's deferred work (layout
        passes, the timeline's redraw at its final size), and the import (about half a second
        of CPU, holding the interpreter lock) beside it slowed that first visit. Waits until
        :attr:`SETTLE_S` has passed since the latest resume with no pause since (an event
        wait, no polling); then imports."""
        import importlib

        while True:
            self._wait_if_paused()
            if self.cancelled:
                return
            left = self._resumed_at + self.SETTLE_S - time.monotonic()
            if left <= 0:
                break
            self._cancel_wait.wait(left)  # set only by cancel: a pause meanwhile is seen above
        importlib.import_module("pandas")

    #: Longest pause (seconds) when nothing resumes the task and the GUI thread is not busy (a
    #: GUI thread blocked waiting for the pool would otherwise hold it at every step).
    PAUSE_LIMIT_S = 0.3
    #: Longest pause (seconds) while the GUI thread is busy (its CPU clock advancing: a fill
    #: longer than PAUSE_LIMIT_S on a loaded machine, which a warm-up resumed beside it slowed).
    PAUSE_BUSY_LIMIT_S = 2.0

    def _wait_if_paused(self) -> None:
        # the limit counts from the latest pause (a task held since the open and paused again
        # by a click waits for the click's fill, not for what is left of the first pause)
        last = _cpu_seconds(self._gui_clock)
        while not self._may_run.wait(self.PAUSE_LIMIT_S):
            now = _cpu_seconds(self._gui_clock)
            # busy: the GUI thread used a quarter of the interval's CPU (a thread blocked in
            # waitForDone uses none)
            busy = last is not None and now is not None and now - last >= self.PAUSE_LIMIT_S / 4
            last = now
            held = time.monotonic() - self._paused_at
            if held >= (self.PAUSE_BUSY_LIMIT_S if busy else self.PAUSE_LIMIT_S):
                self._may_run.set()

    def run(self) -> None:
        from analyser.gui.model import data

        # pandas first (about half a second of CPU to import): the tables of the Operations,
        # Memory, Liveness and Program Tree reports and the trace's range statistics are
        # DataFrames. Neither the open to the Summary nor the Execution Trace's first paint
        # needs it; here it is imported once the shown report is painted and settled (the
        # task starts held until then), not on the GUI thread by the first report asking.
        if not self._step(self._import_pandas):
            return
        # report by report, each for every document (A then B), in the side list's order: in
        # compare mode a report needs both documents' data, so a report's are ready together
        # (by document, B's data of the first reports came only after A's of every report);
        # one accessor per step (a report's needs together took 100 ms and more: a click
        # while they ran shared the interpreter lock with them until the end)
        for index, report_needs in enumerate(self.needs):
            for doc in self.docs:
                for name in report_needs:
                    if not self._step(data.warm, doc, (name,)):
                        return
            # Liveness's steps aligned by program, the compared chart's x axis
            pair = self.pair if "liveness" in report_needs else None
            if pair is not None and not self._step(data.liveness_alignment, *pair):
                return
            view = self.views[index] if index < len(self.views) else None
            if view is not None and not self._step(_build_quietly, view):
                return
        if self.pair is not None:
            # the Summary's, the Pipeline's and the Execution Trace's explanations (the
            # loader computes it with the documents when the pair opens together)
            self._step(data.comparison, *self.pair)

    def _step(self, work: Callable[..., object], *args: object) -> bool:
        """Run one warm-up step (after any pause); False when the task is to stop (cancelled,
        or the step failed: a document closed meanwhile)."""
        self._wait_if_paused()
        if self.cancelled:
            return False
        try:
            work(*args)
        except Exception:
            return False
        return True


def _build_quietly(request: ViewRequest | Callable[[], ViewRequest | None]) -> None:
    """Build a view-model for the warm-up; one that cannot be built (a view of profiles the
    report will not show so: the Pipeline's of an A that never ran) stops nothing else: the
    report says why when shown. ``request`` may be a function making the request (the window
    passes those: the report's view-model module is imported here, on this thread)."""
    with contextlib.suppress(Exception):
        made = request() if callable(request) else request
        if made is not None:
            made.build()


class ViewSignals(QObject):
    """A view-model built on the pool, delivered on the GUI thread: (ticket, request, view,
    error). Owned by the window's :class:`Background` (a runnable must not own a QObject: the
    pool deletes a finished runnable on its own thread)."""

    built = Signal(int, object, object, object)


class ViewTask(QRunnable):
    """Build one view-model (``request.build()``) and send it back with ``ticket`` (which
    names the report awaiting it on the GUI thread: the task holds no widget)."""

    def __init__(self, ticket: int, request: ViewRequest, signals: ViewSignals) -> None:
        super().__init__()
        self.ticket = ticket
        self.request = request
        self.signals = signals

    def run(self) -> None:
        try:
            view, error = self.request.build(), None
        except Exception as exc:  # the report says it in its own panel (receive_view)
            view, error = None, exc
        self.signals.built.emit(self.ticket, self.request, view, error)


def _thread_cpu_clock() -> int | None:
    """The calling thread's CPU-time clock id (None where the platform has none)."""
    try:
        return time.pthread_getcpuclockid(threading.get_ident())
    except (AttributeError, OSError):
        return None


def _cpu_seconds(clock: int | None) -> float | None:
    """CPU seconds of the thread whose clock id is ``clock`` (None when unknown)."""
    if clock is None:
        return None
    try:
        return time.clock_gettime(clock)
    except OSError:
        return None


class Background(QObject):
    """The idle build's timer and the warm-up task of one window. ``build_next`` builds one
    report (or one report's compare-mode parts) and returns its key, or None when nothing is
    left; ``has_document`` says whether a profile is open (the idle build runs only then)."""

    def __init__(
        self,
        pool: QThreadPool,
        build_next: Callable[[], str | None],
        has_document: Callable[[], bool],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.pool = pool
        # the warm-up holds one of the pool's threads for seconds; a shown report's view-model
        # (build_view) must not queue behind it on a one-core machine
        if pool.maxThreadCount() < 2:
            pool.setMaxThreadCount(2)
        self._build_next = build_next
        self._has_document = has_document
        #: builds the reports not shown yet, one per tick, once a profile is open
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(PREBUILD_INTERVAL_MS)
        self.timer.timeout.connect(self.build_step)
        #: seconds each step of the idle build took (the longest is how long a click arriving
        #: during one can wait; bench_gui.py prints it)
        self.steps: list[tuple[str, float]] = []
        #: the report a click showed, held until its first paint (see hold_until_painted)
        self.awaiting_paint: QWidget | None = None
        #: the idle build was under way when a click held it
        self.held_build = False
        self.task: PrefetchTask | None = None
        #: view-models built on the pool come back to the GUI thread through this
        self.view_signals = ViewSignals(self)
        self.view_signals.built.connect(self._view_built)
        #: the reports awaiting a view-model being built, by ticket
        self._view_tickets: dict[int, ViewReceiver] = {}
        self._next_ticket = itertools.count(1)

    # ------------------------------------------------------------------ the idle build
    def build_step(self) -> None:
        """Build one report not shown yet, then wait for the next tick."""
        t0 = time.perf_counter()
        key = self._build_next()
        if key is not None:
            self.steps.append((key, time.perf_counter() - t0))
            self.timer.start(PREBUILD_INTERVAL_MS)

    def start_build(self) -> None:
        """Start the idle build (after the shown report's first paint when one is held)."""
        if self.awaiting_paint is not None:
            self.held_build = True
        else:
            self.timer.start(PREBUILD_INTERVAL_MS)

    def defer_build(self) -> None:
        """The next idle build step waits one more interval (a report was just shown)."""
        if self.timer.isActive():
            self.timer.start(PREBUILD_INTERVAL_MS)

    def pending(self) -> bool:
        """True while reports are still being built in the window's idle time (or that build
        is held while a report a click showed fills and paints)."""
        return self.timer.isActive() or self.held_build

    # ------------------------------------------------------------------ view-models
    def build_view(self, report: ViewReceiver, request: ViewRequest) -> None:
        """Build ``report``'s view-model on the pool; the report gets it on the GUI thread
        (``Report.receive_view``) and paints then."""
        ticket = next(self._next_ticket)
        self._view_tickets[ticket] = report
        self.pool.start(ViewTask(ticket, request, self.view_signals))

    def _view_built(
        self, ticket: int, request: ViewRequest, view: object, error: BaseException | None
    ) -> None:
        report = self._view_tickets.pop(ticket, None)
        if report is not None:
            report.receive_view(request, view, error)

    # ------------------------------------------------------------------ the warm-up
    def prefetch(
        self,
        docs: Sequence[Document],
        needs: Sequence[tuple[str, ...]],
        pair: tuple[Document, Document] | None,
        views: Sequence[ViewRequest | Callable[[], ViewRequest | None] | None] = (),
    ) -> None:
        """Compute what the other reports need (their data, then their view-models) in the
        background, so first visits are fast."""
        task = PrefetchTask(tuple(docs), tuple(needs), pair, tuple(views))
        self.task = task
        if self.awaiting_paint is not None:
            task.pause()  # the report shown now fills and paints first (see hold_until_painted)
        self.pool.start(task)

    def pause(self) -> None:
        """The warm-up waits at its next step, and the periodic cycle collection (app.py: on
        this thread, once a second) restarts its second now, so that both come after the work
        a click starts on this thread, not inside it (10-45 ms of collection seen there)."""
        if self.task is not None:
            self.task.pause()
        collector = getattr(QApplication.instance(), "_garbage_collector", None)
        if collector is not None:
            collector.timer.start()

    def resume(self) -> None:
        if self.task is not None:
            self.task.resume()

    def stop(self) -> None:
        """No more idle build; the warm-up stops at its next step."""
        self.timer.stop()
        if self.task is not None:
            self.task.cancel()

    # ------------------------------------------------------------------ holding for a paint
    def hold_until_painted(self, report: QWidget) -> None:
        """Hold the warm-up and the idle build while ``report``, just shown and not filled
        yet, fills and is first painted. Both carry on :data:`PREBUILD_INTERVAL_MS` after the
        report's first paint (a hidden report: :data:`PREFETCH_PAUSE_MS` after the fill;
        :data:`HOLD_LIMIT_MS` at most)."""
        self.pause()
        previous = self.awaiting_paint
        if previous is not None and previous is not report:
            previous.removeEventFilter(self)
        self.awaiting_paint = report
        report.installEventFilter(self)
        self.held_build = self.held_build or self.timer.isActive()
        self.timer.stop()
        QTimer.singleShot(
            PREFETCH_PAUSE_MS, self, lambda r=report: self._end_hold(r, painted=False)
        )
        QTimer.singleShot(HOLD_LIMIT_MS, self, lambda r=report: self._end_hold(r, painted=True))

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        # a report saying it waits for its view-model is not filled yet: the hold lasts until
        # the view-model's paint (or HOLD_LIMIT_MS), the warm-up beside its build slowing it
        filled = not getattr(obj, "awaiting_view", False)
        if obj is self.awaiting_paint and event.type() == QEvent.Type.Paint and filled:
            # after this paint (posted: the filter runs before it)
            QTimer.singleShot(0, self, lambda r=obj: self._end_hold(r, painted=True))
        return False

    def _end_hold(self, report: QWidget, painted: bool) -> None:
        """The shown report was painted (or no paint came): the warm-up and the idle build
        carry on (after one more interval when it was painted: its layout passes may paint it
        again)."""
        if self.awaiting_paint is not report:
            return  # ended already, or another report shown since
        if painted or not report.isVisible():
            self.awaiting_paint = None
            report.removeEventFilter(self)
            QTimer.singleShot(PREBUILD_INTERVAL_MS, self, self._resume_after)
        # else: the fill is done but the report not painted yet; its paint ends the hold

    def _resume_after(self) -> None:
        if self.awaiting_paint is not None:
            return  # another report shown since holds them again
        self.resume()
        held, self.held_build = self.held_build, False
        if held and self._has_document():
            self.timer.start(PREBUILD_INTERVAL_MS)
