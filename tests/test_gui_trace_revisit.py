"""Execution Trace (issue 23 item 11): a report shown again paints its plots once, and a plot
is not repainted for the window's activation (pytest-qt, offscreen)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from gui_helpers import paint_counter, shut_down_trace, write_synthetic_profiles
from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QLabel, QStackedWidget

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
    qtbot.wait(100)  # the first layout and paint
    changed.clear()
    QCoreApplication.sendEvent(plot.centralWidget, QEvent(QEvent.Type.WindowActivate))
    QCoreApplication.processEvents()
    return changed


def test_a_plot_is_not_repainted_when_the_window_is_activated(qtbot):
    """A plain plot's item answers a window activation with a repaint of the whole plot; one
    given no_repaint_on_activation does not (what it draws does not depend on activation)."""
    from analyser.gui.items import no_repaint_on_activation

    assert _changed_after_activation(qtbot, pg.PlotWidget())  # the repaint avoided
    quiet = pg.PlotWidget()
    no_repaint_on_activation(quiet)
    no_repaint_on_activation(quiet)  # twice: one filter
    assert _changed_after_activation(qtbot, quiet) == []


def test_a_later_visit_paints_each_plot_of_the_trace_once(qtbot, pair):
    """Shown again with nothing changed (compare mode), the report is painted in one pass:
    each of its plots (A's and B's timelines, the overview, the differences lane) once, not
    again in passes of their own after the report's widgets' own queued updates."""
    from analyser.gui.model.document import Document
    from analyser.gui.reports.trace import TraceReport

    stack = QStackedWidget()
    qtbot.addWidget(stack)
    other = QLabel("another report")
    report = TraceReport()
    stack.addWidget(other)
    stack.addWidget(report)
    stack.resize(1200, 800)
    stack.show()
    qtbot.waitExposed(stack)
    docs = [Document.open(p) for p in pair]
    try:
        stack.setCurrentWidget(report)
        report.set_document(docs[0], docs[1])
        qtbot.waitUntil(
            lambda: (
                getattr(report, "differences", None) is not None
                and report.differences.lane is not None
            ),
            timeout=20_000,
        )
        qtbot.wait(200)
        stack.setCurrentWidget(other)
        qtbot.wait(50)
        plots = [report.timeline, report.timeline_b, report.overview, report.differences]
        counter = paint_counter()
        for p in plots:
            p.viewport().installEventFilter(counter)
        stack.setCurrentWidget(report)
        qtbot.wait(300)
        assert [counter.counts[p.viewport()] for p in plots] == [1, 1, 1, 1]
    finally:
        shut_down_trace(report)
        stack.close()
        for d in docs:
            d.close()
