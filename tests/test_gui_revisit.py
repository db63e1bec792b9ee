"""Every report: shown again with nothing changed, a report paints each of
its plots once, in the window's one paint pass (pytest-qt, offscreen)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from gui_helpers import (
    paint_counter,
    show_painted,
    stacked_report,
    wait_until_idle,
    write_synthetic_profiles,
)

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_synthetic_profiles(
        tmp_path_factory, "revisit-all", ((1, 4), (2, 8)), n_steps=4_000, n_ipus=2, tiles=64
    )


def test_every_plot_is_kept_from_repainting_on_activation(qtbot):
    """style_plot (what every report's plots get when built) installs the activation filter:
    a shown plot is not painted again in a pass of its own."""
    from analyser.gui.theme import _ActivationFilter
    from analyser.gui.widgets import make_plot

    plot = make_plot("left", "bottom")
    qtbot.addWidget(plot)
    assert plot.findChild(_ActivationFilter) is not None


@pytest.mark.parametrize("key", ["memory", "liveness", "pipeline"])
def test_a_later_visit_paints_each_plot_once(qtbot, pair, key):
    """A compared pair: the report filled and painted, another page shown, the report shown
    again: each plot it shows is painted once (they were painted twice, each plot's scene
    flushing the window's pending repaint in a pass of its own after the window activation
    a shown graphics view sends)."""
    from analyser.gui import reports as registry

    cls = next(c for c in registry.report_classes() if c.key == key)
    report = cls()
    stack, other, docs = stacked_report(qtbot, report, pair, (1300, 850))
    try:
        report.set_document(docs[0], docs[1])
        show_painted(qtbot, stack, report)
        assert report.ready
        if key == "pipeline":
            # its critical paths arrive from a background task and are drawn then: under load
            # they landed during the later visit and were counted as its second paint
            qtbot.waitUntil(
                lambda: "finding the critical path" not in report.view_a.bounds.text(),
                timeout=60_000,
            )
            wait_until_idle(qtbot)  # the relayout the drawn paths post, as after the fill above
        stack.setCurrentWidget(other)
        wait_until_idle(qtbot)
        plots = [p for p in report.findChildren(pg.GraphicsView) if p.isVisibleTo(report)]
        assert plots, "the report shows plots"
        counter = paint_counter()
        for p in plots:
            p.viewport().installEventFilter(counter)
        show_painted(qtbot, stack, report)
        painted = [counter.counts[p.viewport()] for p in plots]
        # a plot below the scroll area's fold is not painted at all
        assert painted and max(painted) == 1 and sum(painted) >= 1, painted
    finally:
        stack.close()
        for d in docs:
            d.close()
