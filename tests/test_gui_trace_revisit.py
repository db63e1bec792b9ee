"""Execution Trace: a report shown again paints its plots once, and a plot
is not repainted for the window's activation (pytest-qt, offscreen)."""

from __future__ import annotations

from contextlib import contextmanager

import pyqtgraph as pg
import pytest
from gui_helpers import (
    paint_counter,
    settle_trace,
    show_painted,
    shut_down_trace,
    stacked_report,
    wait_until_idle,
    write_synthetic_profiles,
)
from PySide6.QtCore import QCoreApplication, QEvent

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_synthetic_profiles(
        tmp_path_factory, "revisit", ((1, 4), (2, 8)), n_steps=5_000, n_ipus=2, tiles=64
    )


def _changed_after_activation(qtbot, plot: pg.PlotWidget) -> list:
    """The scene regions changed after the plot's top-level item is told the window became
    active (as a scene forwards it when its view is shown)."""
    qtbot.addWidget(plot)
    plot.resize(300, 200)
    plot.show()
    qtbot.waitExposed(plot)
    changed: list = []
    plot.scene().changed.connect(lambda rects: changed.extend(rects))
    wait_until_idle(qtbot)  # the first layout and paint
    changed.clear()
    QCoreApplication.sendEvent(plot.centralWidget, QEvent(QEvent.Type.WindowActivate))
    QCoreApplication.processEvents()
    return changed


def test_a_plot_is_not_repainted_when_the_window_is_activated(qtbot):
    """A plain plot's item answers a window activation with a repaint of the whole plot; one
    given no_repaint_on_activation does not (what it draws does not depend on activation)."""
    from analyser.gui.theme import no_repaint_on_activation

    assert _changed_after_activation(qtbot, pg.PlotWidget())  # the repaint avoided
    quiet = pg.PlotWidget()
    no_repaint_on_activation(quiet)
    no_repaint_on_activation(quiet)  # twice: one filter
    assert _changed_after_activation(qtbot, quiet) == []


@contextmanager
def _stacked_report(qtbot, pair):
    """A shown stack of another page and a TraceReport (the other page current), and the
    pair opened as documents: (stack, other, report, docs); shut down and closed after."""
    from analyser.gui.reports.trace import TraceReport

    report = TraceReport()
    stack, other, docs = stacked_report(qtbot, report, pair)
    try:
        yield stack, other, report, docs
    finally:
        shut_down_trace(report)
        stack.close()
        for d in docs:
            d.close()


def _painted(view):
    """The widget a view paints in: a plot's viewport (the overview strip is a widget)."""
    return view.viewport() if hasattr(view, "viewport") else view


def test_a_later_visit_paints_each_plot_of_the_trace_once(qtbot, pair):
    """Shown again with nothing changed (compare mode), the report is painted in one pass:
    each of its plots (A's and B's timelines and the differences lane) once, not again in
    passes of their own after the report's widgets' own queued updates. (The overview strip
    is a plain widget, painted with the page's other widgets: the page's plain widgets are
    painted a second time after a layout request reaches the window, a pass the plots'
    viewports are not part of.)"""
    with _stacked_report(qtbot, pair) as (stack, other, report, docs):
        stack.setCurrentWidget(report)
        report.set_document(docs[0], docs[1])
        settle_trace(qtbot, report)  # the lane, the range summary, the arrows drawn and laid out
        assert report.differences.lane is not None
        stack.setCurrentWidget(other)
        wait_until_idle(qtbot)
        plots = [report.timeline, report.timeline_b, report.differences]
        counter = paint_counter()
        for p in plots:
            p.viewport().installEventFilter(counter)
        report.overview.installEventFilter(counter)
        show_painted(qtbot, stack, report)
        settle_trace(qtbot, report)  # and the range summary it computes again, shown
        assert [counter.counts[p.viewport()] for p in plots] == [1, 1, 1]
        assert counter.counts[report.overview] >= 1


def test_a_scheduled_redraw_of_an_unchanged_view_is_skipped(qtbot, pair):
    """A layout pass that resizes a timeline without changing its lanes, cycles or width (a
    fill's splitter sizes) schedules a redraw that finds the view drawn and draws nothing; a
    change of the cycles in view, or of the plot's width, is drawn."""
    from analyser.gui.model import data as gui_data
    from analyser.gui.model.document import Document
    from analyser.gui.reports.trace.timeline import TimelineView

    tl = TimelineView()
    qtbot.addWidget(tl)
    tl.resize(900, 400)
    tl.show()
    qtbot.waitExposed(tl)
    doc = Document.open(pair[0])
    try:
        tl.set_trace(gui_data.trace_window(doc))
        # laid out at its size and drawn there, its arrows and names read and drawn
        qtbot.waitUntil(lambda: tl.redraw_count >= 1 and not tl.background_pending)
        wait_until_idle(qtbot)
        assert not tl._timer.isActive() and not tl.background_pending
        count = tl.redraw_count
        tl.resize(900, 380)  # the same lanes fit: the same view
        wait_until_idle(qtbot)  # the relayout and the redraw it scheduled ran
        assert not tl._timer.isActive() and tl.redraw_count == count
        tl.resize(700, 380)  # narrower: drawn again at the new width
        qtbot.waitUntil(lambda: tl.redraw_count == count + 1)
        x0, x1 = tl.x_range()
        tl.set_x_range(x0, (x0 + x1) / 2)
        qtbot.waitUntil(lambda: tl.redraw_count == count + 2)
    finally:
        tl.stop()
        doc.close()


def test_the_idle_build_builds_the_differences_lane_hidden(qtbot, pair):
    """In compare mode the window's idle build makes B's timeline, then the lane's plot, and
    lays them out for the comparison while the report is hidden (B's box and the lane shown
    under A's, so that the first show lays the plots out once); the fill then lays A, B, the
    lane and the tabs out as when the lane is built by the fill itself (the tabs keep their
    share)."""
    from analyser.gui.model.document import Document
    from analyser.gui.reports.trace import TraceReport

    built, fresh = TraceReport(), TraceReport()
    assert built.prebuild(True) and built._timeline_b is not None
    assert built.prebuild(True) and built.differences is not None
    assert not built.isVisible()
    assert not built.timeline_b_box.isHidden() and not built.differences.box.isHidden()
    assert not built.prebuild(True)
    assert not fresh.prebuild(False)
    docs = [Document.open(p) for p in pair]
    try:
        sizes = []
        for r in (built, fresh):
            qtbot.addWidget(r)
            r.resize(1200, 800)
            r.show()
            qtbot.waitExposed(r)
            r.set_document(docs[0], docs[1])
            assert r.differences.box.isVisible()
            sizes.append(r.splitter.sizes())
        assert sizes[0] == sizes[1] and len(sizes[0]) == 4 and sizes[0][3] > 100
    finally:
        for r in (built, fresh):
            shut_down_trace(r)
            r.close()
        for d in docs:
            d.close()


@pytest.mark.parametrize("compare", [True, False], ids=["compare", "single"])
def test_a_first_visit_paints_each_plot_of_the_trace_once(qtbot, pair, compare):
    """Filled when first shown, the report's plots are painted once each: the lines' and
    bands' bounds are worked out before the paint, not during it (where they marked their
    plots dirty again: the overview and both timelines were painted twice). Each timeline is
    drawn once, at its final width: the lane labels' axis, sized with the trace, used to
    narrow the plot after the fill's redraw, which a second redraw then followed, after the
    first paint."""
    with _stacked_report(qtbot, pair) as (stack, _other, report, docs):
        while report.prebuild(True):  # B's timeline and the lane, as the idle build makes
            pass
        report.set_document(docs[0], docs[1] if compare else None)  # hidden: fills when shown
        assert report.needs_refresh
        # (the lane, computed on the report's pool here, is drawn again when it arrives)
        plots = [report.timeline, report.overview]
        if compare:
            plots.insert(1, report.timeline_b)
        counter = paint_counter()
        painted = [_painted(p) for p in plots]
        for p in (report, *painted):
            p.installEventFilter(counter)
        report.flows_box.setChecked(False)  # no arrows arriving from the background
        show_painted(qtbot, stack, report)  # fills
        settle_trace(qtbot, report)  # the lane and the range summary arrived and were drawn
        assert [counter.counts[p] for p in painted] == [1] * len(plots)
        timelines = plots[:-1]
        assert [tl.redraw_count for tl in timelines] == [1] * len(timelines)
        assert all(tl._drawn == tl._view_state() for tl in timelines)  # drawn as shown


def test_a_hidden_trace_drops_its_range_summary_and_computes_it_when_shown_again(qtbot, pair):
    """The range summary (every visible row read in the report's pool thread, beside the GUI
    thread) stops when another report is shown, so the next report's first visit does not
    share the interpreter lock with it; it is computed when the Trace is
    shown again."""
    with _stacked_report(qtbot, pair) as (stack, other, report, docs):
        # the summary waits long enough to be still to come when the report is hidden (with
        # its 150 ms a loaded machine could start and finish it within one wait below)
        delay = report._detail_timer.interval()
        report._detail_timer.setInterval(600_000)
        report.set_document(docs[0], docs[1])
        stack.setCurrentWidget(report)  # fills; the summary follows the first paint
        qtbot.waitUntil(report._detail_timer.isActive, timeout=10_000)
        report._detail_timer.setInterval(delay)  # for the next time it is started
        ready = []
        report.summaryReady.connect(lambda: ready.append(True))
        gen = report._summary_gen
        stack.setCurrentWidget(other)
        assert report._summary_gen > gen and not report._detail_timer.isActive()
        qtbot.waitUntil(lambda: report._pool.activeThreadCount() == 0, timeout=20_000)
        app = QCoreApplication.instance()
        app.sendPostedEvents()  # a dropped summary's result, if one came, is delivered now
        assert not ready  # nothing shown from a summary of a hidden report
        with qtbot.waitSignal(report.summaryReady, timeout=20_000):
            stack.setCurrentWidget(report)
        assert report.summary.header.text()  # the range summary is there again
