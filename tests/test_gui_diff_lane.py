"""The Execution Trace's "differences" lane in compare mode (pytest-qt, offscreen):
B - A per aligned step from the analysis core's aligned diff, red where B is slower, green where
B is faster. Two MLP runs, the second with its worst compute sets balanced (the engine's what-if),
so exactly those steps differ and B is faster on each."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import open_documents as _open
from gui_helpers import shown_report, shut_down_trace, wait_until_idle
from PySide6.QtCore import Qt

pytestmark = pytest.mark.gui

#: The two compute sets of the first run that lose the most cycles to tile imbalance, which the
#: second run balances (filled by the ``pair`` fixture from the first run's own figures, so the
#: premise holds whatever the planner makes of the MLP's matmuls).
BALANCED: list[str] = []


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    import engine
    from engine.config import RunConfig

    out = tmp_path_factory.mktemp("diff-lane")
    a, b = out / "mlp.h5", out / "mlp-balanced.h5"
    # the steady-state trace: the profiled call's opening wait (tens of ms) would fill the
    # windows the tests look at, where the two runs differ
    steady = {"model": "mlp", "profiled_call_wait_us": 0}
    engine.simulate_to_file(RunConfig(**steady), a)
    from analyser.core import Analysis

    with Analysis.open(a) as run:
        worst = run.imbalance.compute_sets.sort_values("lost_cycles", ascending=False)
        BALANCED[:] = [str(n) for n in worst["name"].head(2)]
    assert len(BALANCED) == 2 and "loss/fwd/SoftmaxCrossEntropy" in BALANCED
    engine.simulate_to_file(RunConfig(**steady, balance_compute_sets=BALANCED), b)
    return a, b


@pytest.fixture
def report(qtbot):
    from analyser.gui.reports.trace import TraceReport

    yield from shown_report(qtbot, TraceReport(), (1200, 900), before_close=shut_down_trace)


def test_the_lane_has_the_aligned_differences_with_their_signs(pair):
    from analyser.core import Analysis
    from analyser.core.diff import diff_runs
    from analyser.gui.model.diff_lane import differences_lane

    with Analysis.open(pair[0]) as a, Analysis.open(pair[1]) as b:
        lane = differences_lane(a, b)
        back = differences_lane(b, a)
        total = diff_runs(a, b).delta
        names = np.asarray(b.src.column("/programs/nodes", "name"), dtype=object)
        prog = np.asarray(b.src.column("/execution/steps", "program"))
        start = np.asarray(b.src.column("/execution/steps", "start"))
    assert lane.delta.size > 0 and (lane.sign == -1).all()  # balanced: B faster on each
    assert (back.sign == 1).all() and back.delta.sum() == -lane.delta.sum()
    assert lane.total == total < 0  # the lane adds up to the run's change
    # every differing step is one of the balanced compute sets
    rows = np.searchsorted(start, lane.start)  # B's steps by start (one IPU)
    drawn = {str(n) for n in names[prog[rows]]}
    assert drawn == set(BALANCED), drawn
    assert lane.removed_steps == 0 and not lane.added.any()


def test_compare_mode_shows_the_differences_lane(qtbot, report, pair, tmp_path):
    r, _ = report
    _open(report, *pair)
    qtbot.waitUntil(lambda: r.differences.lane is not None, timeout=10_000)
    lane = r.differences
    assert lane.isVisible() and lane.lane is not None
    assert (lane.lane.sign == -1).all()
    assert lane.bars
    # drawn green (B faster): the status "ok" colour, never the "slower" one
    from analyser.gui.palette import qcolor

    assert lane.drawn_colours() == {qcolor("status", "ok").name()}
    title = lane.getPlotItem().titleLabel.text
    assert "B − A differences: -" in title and f"{lane.lane.delta.size} steps differ" in title
    # the lane follows A's cycle axis
    r.timeline.set_x_range(1000, 20_000)
    wait_until_idle(qtbot)  # the range change and the relayout and redraws it asked for
    assert lane.getPlotItem().getViewBox().viewRange()[0] == pytest.approx(
        r.timeline.getPlotItem().getViewBox().viewRange()[0]
    )
    r.grab().save(str(tmp_path / "diff-lane.png"))
    # and B against A the other way round: red, B slower
    _open(report, pair[1], pair[0])
    qtbot.waitUntil(lambda: r.differences.lane is not None, timeout=10_000)
    assert (r.differences.lane.sign == 1).all()
    assert r.differences.drawn_colours() == {qcolor("status", "oom").name()}
    # a single profile: no lane
    _open(report, pair[0])
    assert not r.differences.isVisible()


def test_hover_and_click_a_difference(qtbot, report, pair):
    """A difference names its step and its A / B cycles on hover; a click selects its cycles as
    the range of both runs (range statistics of A and of B), selects B's step and says the
    delta above the lane."""
    from PySide6.QtCore import QPoint, QPointF

    r, _ = report
    _open(report, *pair)
    qtbot.waitUntil(lambda: r.differences.lane is not None, timeout=10_000)
    view = r.differences
    lane = view.lane
    i = int(np.argmin(lane.delta))  # the largest gain
    mid = float(lane.start[i] + lane.cycles[i] / 2)
    assert view.difference_at(mid, float(lane.ipu[i])) == i
    assert view.difference_at(mid, float(lane.ipu[i]) + 5) is None
    text = view.describe(i)
    d, b = int(lane.delta[i]), int(lane.cycles[i])
    assert f"B − A {d:+,} cycles (A {b - d:,}, B {b:,})" in text
    assert text.split(" on IPU")[0] in BALANCED  # B's step, by name
    # the pointer over the bar shows it as the tooltip; a click selects it
    r.timeline.set_x_range(lane.start[i] - 2 * b, lane.start[i] + 3 * b)
    qtbot.waitUntil(lambda: view.getPlotItem().getViewBox().viewRange()[0][0] < mid, timeout=20_000)
    vb = view.getPlotItem().getViewBox()
    at = view.mapFromScene(vb.mapViewToScene(QPointF(mid, float(lane.ipu[i]))))
    qtbot.mouseMove(view.viewport(), QPoint(at.x(), at.y()))
    qtbot.waitUntil(lambda: view.hover_text == text, timeout=20_000)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(at.x(), at.y()))
    assert view.selected == i
    t0, t1 = float(lane.start[i]), float(lane.start[i] + b)
    assert r.timeline.range_sel == pytest.approx((t0, t1))
    assert r.timeline_b.range_sel == pytest.approx((t0, t1))
    row = r.timeline_b.selected_row
    assert row is not None
    details = r.timeline_b.trace.step_details(row)
    assert details["start"] == lane.start[i] and details["cycles"] == b
    assert "Selected: " in view.getPlotItem().titleLabel.text
    assert f"{d:+,}" in view.getPlotItem().titleLabel.text
    from analyser.gui.help import SHORTCUTS

    assert any("difference" in keys for _w, keys, _what in SHORTCUTS)


def test_the_lane_is_drawn_at_screen_resolution():
    """The differing steps are drawn per pixel column of the visible range
    (at most IPUs x (pixels + 3) bars per sign), each narrow step covered by a bar of its
    sign, IPU and pixel at least as tall as its own; steps two pixels wide and more as they
    are; nothing outside the range."""
    from analyser.gui.model.diff_lane import DifferencesLane, screen_bars

    rng = np.random.default_rng(3)
    n = 20_000
    start = np.sort(rng.integers(0, 1_000_000, n))
    cycles = rng.integers(1, 400, n)
    cycles[::997] = 30_000  # a few wide steps
    delta = rng.integers(-500, 500, n)
    delta[delta == 0] = 1
    ipu = rng.integers(0, 3, n)
    lane = DifferencesLane(ipu, start, cycles, delta, np.zeros(n, bool), 3, 0, 0)
    t0, t1, width = 200_000.0, 700_000.0, 500
    bars = dict(screen_bars(lane, t0, t1, width))
    assert set(bars) == {1, -1}
    pw = (t1 - t0) / width
    height = 0.15 + 0.7 * np.abs(delta) / np.abs(delta).max()
    for s, rects in bars.items():
        assert len(rects) <= 3 * (width + 3) + (cycles >= 2 * pw).sum()
        assert (rects[:, 0] <= t1 + pw).all() and (rects[:, 0] + rects[:, 2] >= t0 - pw).all()
        inside = np.flatnonzero((lane.sign == s) & (start >= t0) & (start + cycles <= t1))
        centre = rects[:, 1] + rects[:, 3] / 2
        for i in inside[:: max(1, inside.size // 300)]:
            on = (
                (np.abs(centre - ipu[i]) < 1e-9)
                & (rects[:, 0] <= start[i])
                & (rects[:, 0] + rects[:, 2] >= start[i] + cycles[i] - 1e-6)
            )
            assert on.any() and rects[on, 3].max() >= height[i] - 1e-9
    assert screen_bars(lane, t1, t0, width) == []  # an empty range draws nothing


def test_a_lane_computed_with_the_open_is_drawn_with_the_first_fill(qtbot, report, pair):
    """The loader computes a compared pair's lane with the open
    (``warm_lane``); the report then draws it as it fills (no "aligning" placeholder, no
    background alignment beside the fill)."""
    from analyser.gui.model.diff_lane import ready_lane, warm_lane
    from analyser.gui.model.document import Document

    r, docs = report
    a, b = Document.open(pair[0]), Document.open(pair[1])
    docs.extend([a, b])
    assert ready_lane(a, b) is None
    warm_lane(a, b)
    assert ready_lane(a, b) is not None
    r.set_document(a, b)  # shown: fills at once
    view = r.differences
    assert view.lane is ready_lane(a, b)[0] and view.bars
    assert "aligning" not in view.getPlotItem().titleLabel.text


def test_the_bars_are_made_by_the_paint_that_shows_them(qtbot, report, pair):
    """The lane's bars are made once by the paint that shows them, for its
    range and width, not at every range change a layout pass makes on its way there."""
    r, _ = report
    _open(report, *pair)
    qtbot.waitUntil(lambda: r.differences.lane is not None, timeout=10_000)
    view = r.differences
    view.grab()
    screen, calls = view._screen, []
    made = screen.at
    screen.at = lambda *args: calls.append(args) or made(*args)
    # windows over the first differences (where the bar item has something to paint)
    first = float(view.lane.start.min())
    for x0 in (first - 2000, first - 1000, first):
        r.timeline.set_x_range(x0, first + 20_000)
    assert calls == []  # range changes alone make nothing
    view.grab()
    assert len(calls) == 1
    (t0, t1), _ = view.getPlotItem().getViewBox().viewRange()
    assert calls[0][:2] == pytest.approx((t0, t1))
    assert view.bars[0].n_rects == sum(len(rects) for _sign, rects in made(*calls[0]))
    view.grab()  # the same range again: replayed, not made again
    assert len(calls) == 1


def test_the_lane_puts_ipu_0_on_top_as_the_timelines_do(qtbot, report, pair):
    """The lane's rows run in the timelines' order: IPU 0 above IPU 1."""
    from PySide6.QtCore import QPointF

    r, _ = report
    _open(report, *pair)
    qtbot.waitUntil(lambda: r.differences.lane is not None, timeout=10_000)
    vb = r.differences.getPlotItem().getViewBox()
    assert vb.mapViewToScene(QPointF(0, 0)).y() < vb.mapViewToScene(QPointF(0, 1)).y()
    assert r.timeline.getPlotItem().getViewBox().yInverted()  # the timelines: top row first
