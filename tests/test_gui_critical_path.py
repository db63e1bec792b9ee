"""The critical path in the GUI (pytest-qt, offscreen): the Execution Trace's "Critical path"
check box outlines exactly the path's steps (a hand-made profile with a known path, and the
walkthrough), names the link and its share in the tooltip, the side panel and the sentence; the
Pipeline marks the stages on the path and says what bounds the step; a profile without a path
gives one sentence. And the Qt-free view-model (analyser/viewmodels/critical_path.py)."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import open_documents as _open
from gui_helpers import shown_report, shut_down_trace
from PySide6.QtCore import Qt

from analyser.core import Analysis
from analyser.core.critical_path import critical_path
from analyser.viewmodels.critical_path import (
    CriticalPathView,
    critical_path_view,
    pixel_runs,
)
from profiles import write_profile
from profiles.schema import PROGRAM_TYPES
from profiles.synthetic import make_synthetic_profile

pytestmark = pytest.mark.gui

WAIT_MS = 30_000
T = {t: i for i, t in enumerate(PROGRAM_TYPES)}
#: The hand-made timeline of tests/test_critical_path.py (ipu, start, cycles, type, stage):
#: IPU 0 computes 0-100 then waits at a sync released by IPU 1 at 300 and computes to 350;
#: IPU 1 waits 50 cycles for the host, computes 60-300 and arrives last at the sync.
KNOWN = [
    (0, 0, 100, "OnTileExecute", 0),  # row 0: not on the path
    (0, 100, 210, "Sync", 0),  # row 1: on the path from its release (300) to 310
    (0, 310, 40, "OnTileExecute", 0),  # row 2: ends last
    (1, 0, 60, "StreamCopyBegin", -1),  # row 3: waits 50 for the host
    (1, 60, 240, "OnTileExecute", 1),  # row 4
    (1, 300, 10, "Sync", 1),  # row 5: arrives last; its IPU 0 twin is the path
    (1, 310, 5, "OnTileExecute", 1),  # row 6
]
KNOWN_PATH = [1, 2, 3, 4]


def _known_profile(path):
    """A two-IPU profile whose steps are :data:`KNOWN` (programs of the right types, each
    Sync's and StreamCopyBegin's own work 10 cycles), so its critical path is known."""
    data = make_synthetic_profile(seed=3, n_steps=200, n_ipus=2, tiles=16, n_programs=40)
    nodes = data["/programs/nodes"]
    types = np.asarray(nodes["type"])
    prog = {t: int(np.flatnonzero(types == T[t])[0]) for t in {r[3] for r in KNOWN}}
    cycles = np.asarray(nodes["cycles"]).copy()
    cycles[prog["Sync"]] = cycles[prog["StreamCopyBegin"]] = 10
    nodes["cycles"] = cycles
    steps = data["/execution/steps"]
    n = len(KNOWN)
    cols = {k: np.zeros(n, dtype=np.asarray(v).dtype) for k, v in steps.items()}
    cols["ipu"][:] = [r[0] for r in KNOWN]
    cols["start"][:] = [r[1] for r in KNOWN]
    cols["cycles"][:] = [r[2] for r in KNOWN]
    cols["type"][:] = [T[r[3]] for r in KNOWN]
    cols["program"][:] = [prog[r[3]] for r in KNOWN]
    cols["stage"][:] = [r[4] for r in KNOWN]
    cols["micro_batch"][:] = -1
    data["/execution/steps"] = cols
    ex = dict(data["/execution"])
    ex.update(
        run_starts=np.array([0], dtype=np.int64),
        ipu_offsets=np.array([0, 3, 7], dtype=np.int64),
        total_cycles=350,
        device_cycles=350,
    )
    data["/execution"] = ex
    return write_profile(path, data)


@pytest.fixture(scope="module")
def known_path(tmp_path_factory):
    return _known_profile(tmp_path_factory.mktemp("critical") / "known.h5")


@pytest.fixture(scope="module")
def one_ipu(tmp_path_factory):
    path = tmp_path_factory.mktemp("critical") / "one-ipu.h5"
    return write_profile(path, make_synthetic_profile(seed=4, n_steps=300, n_ipus=1, tiles=16))


@pytest.fixture
def trace(qtbot):
    from analyser.gui.reports.trace import TraceReport

    yield from shown_report(qtbot, TraceReport(), (1280, 720), before_close=shut_down_trace)


@pytest.fixture
def pipeline(qtbot):
    from analyser.gui.reports.pipeline import PipelineReport

    yield from shown_report(qtbot, PipelineReport(), (1280, 720), before_close=_stop)


def _stop(report) -> None:
    report.shutdown()
    assert report._path_pool.activeThreadCount() == 0


def _tick(qtbot, r) -> None:
    """Tick the trace's "Critical path" box and wait until the path is shown."""
    with qtbot.waitSignal(r.critical.shown, timeout=WAIT_MS):
        r.critical.box.setChecked(True)


def _covered(overlay, x: float, y: float) -> bool:
    """True when the outlined runs hold cycle ``x`` on the lane at height ``y``."""
    s, e, row = overlay.runs
    return bool(((row == y) & (s <= x) & (x < e)).any())


def _check_exact(tl, view: CriticalPathView, min_px: float = 3.0) -> int:
    """Every step in view at least ``min_px`` wide: outlined iff on the path (the part it adds
    to the path for a step on it, its middle for one off it). Returns the steps checked."""
    t0, t1 = tl.x_range()
    pixel = (t1 - t0) / tl.pixel_width()
    checked = 0
    for ipu in range(tl.trace.n_ipus):
        lo, hi = tl.trace.row_range(ipu, t0, t1)
        steps = tl.trace.steps(lo, hi, ("start", "cycles"))
        y = float(tl.lane_layout.lane_y(ipu, np.zeros(1, dtype=np.int64))[0])
        rows = np.arange(lo, hi)
        on = view.on_path(rows)
        for row, start, cyc, is_on in zip(rows, steps["start"], steps["cycles"], on, strict=True):
            end = start + cyc
            if is_on:
                at = int(np.searchsorted(view.rows, row))
                part = int(view.contribution[at])
                if part < min_px * pixel or start < t0 or end > t1:
                    continue
                assert _covered(tl.critical, end - part / 2, y), f"path step {row} not outlined"
            else:
                if cyc < min_px * pixel or start < t0 or end > t1:
                    continue
                assert not _covered(tl.critical, start + cyc / 2, y), f"step {row} outlined"
            checked += 1
    return checked


# -- the view-model ---------------------------------------------------------------------------
def test_the_view_model_of_a_known_path(known_path):
    with Analysis.open(known_path) as a:
        view = critical_path_view(a)
    assert view.available and view.rows.tolist() == KNOWN_PATH
    assert view.contribution.tolist() == [10, 40, 60, 240]
    assert view.call_cycles == 350
    by_key = {link.key: link for link in view.links}
    assert by_key["ipu1.stage1"].cycles == 240 and by_key["ipu0.stage0"].cycles == 50
    assert by_key["ipu1.stream"].kind == "stream"
    assert view.link_of_row(4).key == "ipu1.stage1" and view.link_of_row(0) is None
    assert view.headline().startswith("What bounds the step: stage 1 on IPU 1, 68.6% of the call")
    assert view.stage_shares() == pytest.approx({0: 50 / 350, 1: 240 / 350})
    # segments: drawn over the cycles each step adds (the waiting sync from its release)
    seg = view.segments()
    assert list(zip(seg.ipu.tolist(), seg.start.tolist(), seg.end.tolist(), strict=True)) == [
        (0, 300, 350),
        (1, 0, 60),
        (1, 60, 300),
    ]


def test_pixel_runs_outline_where_the_path_mostly_is():
    # one row: the path holds [0, 40) and [41, 100) (a 1-cycle gap) and [300, 302)
    x0, x1 = np.array([0.0, 41.0, 300.0]), np.array([40.0, 100.0, 302.0])
    on, off = pixel_runs(x0, x1, np.zeros(3), np.array([0.0, 1.0]), 0.0, 400.0, 100)
    # 4 cycles a pixel: the gap is under a pixel's share, the 2-cycle step is half of one
    assert on[:, :2].tolist() == [[0.0, 100.0], [300.0, 304.0]]
    assert off[off[:, 2] == 0][:, :2].tolist() == [[100.0, 300.0], [304.0, 400.0]]
    assert off[off[:, 2] == 1][:, :2].tolist() == [[0.0, 400.0]]  # a row without the path


def test_reasons_for_profiles_without_a_path(walkthrough_profiles, one_ipu, monkeypatch, tmp_path):
    with Analysis.open(walkthrough_profiles["1-base"]) as a:
        assert "does not fit in memory" in critical_path_view(a).reason
    no_steps = make_synthetic_profile(seed=1, n_steps=0, n_ipus=2, tiles=16)
    with Analysis.open(write_profile(tmp_path / "no-steps.h5", no_steps)) as a:
        assert critical_path_view(a).reason == (
            "no-steps.h5 has no executed steps (no host call ran), so it has no critical path."
        )
    with Analysis.open(one_ipu) as a:
        assert "runs on one IPU" in critical_path_view(a).reason
        import analyser.viewmodels.profile_reads as reads

        monkeypatch.setattr(reads, "has_dataset", lambda _a, p: p != "/programs/nodes/cycles")
        reason = critical_path_view(a).reason
    assert reason.endswith("lacks /programs/nodes/cycles, so its critical path cannot be computed.")
    assert reason.count(".") >= 1 and "Traceback" not in reason


def test_the_view_model_agrees_with_the_core_on_the_walkthrough(walkthrough_profiles):
    with Analysis.open(walkthrough_profiles["6-async"]) as a:
        view = critical_path_view(a)
        core = critical_path(a.src)
    assert view.rows.tolist() == core.steps.tolist()
    assert [lv.key for lv in view.links] == [lk.key for lk in core.links]
    # the steps' links add up to the device links' cycles
    device = [lv for lv in view.links if lv.kind != "host"]
    sums = np.bincount(view.link, weights=view.contribution, minlength=len(view.links))
    assert [round(sums[lv.index]) for lv in device] == [lv.cycles for lv in device]
    seg = view.segments()
    assert int((seg.end - seg.start).sum()) == core.device_cycles  # segments never overlap


# -- the Execution Trace ----------------------------------------------------------------------
def test_the_toggle_outlines_exactly_the_known_path(qtbot, trace, known_path):
    r, _docs = trace
    _open(trace, known_path)
    r.ensure_refreshed()
    tl = r.timeline
    assert tl.critical.outline_item.n_rects == 0  # off until ticked
    _tick(qtbot, r)
    tl.set_x_range(0, 350)
    tl.redraw()
    view = r.critical.views[0]
    assert view.rows.tolist() == KNOWN_PATH
    assert _check_exact(tl, view, min_px=2) == len(KNOWN)  # every step checked
    y0 = float(tl.lane_layout.lane_y(0, np.zeros(1, dtype=np.int64))[0])
    s, e, row = tl.critical.runs
    pixel = 350 / tl.pixel_width()
    on_ipu0 = [(a, b) for a, b, y in zip(s, e, row, strict=True) if y == y0]
    assert len(on_ipu0) == 1 and abs(on_ipu0[0][0] - 300) <= pixel
    assert abs(on_ipu0[0][1] - 350) <= pixel
    assert tl.critical.veil_item.n_rects > 0  # the other steps dimmed
    assert "stage 1 on IPU 1, 68.6% of the call" in r.critical.label.text()
    # the tooltip and the side panel name the link's kind and share
    note = tl.critical.note(4)
    assert note == (
        "On the critical path: stage 1 on IPU 1 (a pipeline stage on its IPU): 68.6% of the call"
    )
    assert tl.critical.note(0) == ""
    tl.select_row(4, center=False)
    assert r.details.details["critical path"].startswith("stage 1 on IPU 1 (a pipeline stage")
    # unticked: no highlight, no sentence
    r.critical.box.setChecked(False)
    assert tl.critical.outline_item.n_rects == 0 and r.critical.label.isHidden()


def test_the_toggle_on_the_walkthrough_in_flat_and_stage_views(qtbot, trace, walkthrough_profiles):
    r, _docs = trace
    _open(trace, walkthrough_profiles["3-accumulate"])
    r.ensure_refreshed()
    _tick(qtbot, r)
    view = r.critical.views[0]
    tl = r.timeline
    # around the first hand-over from IPU 0 to IPU 1 on the path
    first_ipu1 = int(np.flatnonzero(view.ipu == 1)[0])
    t = float(view.end[first_ipu1] - view.contribution[first_ipu1])
    tl.set_x_range(t - 40_000, t + 60_000)
    tl.redraw()
    assert _check_exact(tl, view) > 20
    assert len(tl.critical.runs[0]) > 0
    # the whole run: a few runs per lane at most, whatever the number of steps
    tl.reset_zoom()
    tl.redraw()
    n_lanes = len(tl.lane_layout.labels)
    assert 0 < tl.critical.outline_item.n_rects <= n_lanes * tl.pixel_width() // 2
    # the host's time before the call is a link too: its events say so
    host = view.links[0]
    assert host.kind == "host"
    rows = [i for i in range(len(tl.host)) if tl.critical.host_note(i)]
    assert rows and all(tl.host["start"][i] < 0 for i in rows)
    assert f"{100 * host.share:.1f}% of the call" in tl.critical.host_note(rows[0])
    # grouped by stage: the path's steps sit on their stage's lane
    r.group_combo.setCurrentIndex(r.group_combo.findData("stage"))
    tl.set_x_range(t - 40_000, t + 60_000)
    tl.redraw()
    s, e, row = tl.critical.runs
    big = (view.ipu == 1) & (view.stage >= 0) & (view.contribution > 5_000)
    k = int(np.flatnonzero(big & (view.end > t - 40_000) & (view.end < t + 60_000))[0])
    t = float(view.end[k] - view.contribution[k])
    stage_lane = tl.lane_layout.lane_y(1, np.array([int(view.stage[k])]))[0]
    mid = (float(view.end[k]) + t) / 2
    assert ((row == stage_lane) & (s <= mid) & (mid < e)).any()


def test_the_box_is_keyboard_reachable(qtbot, trace, known_path):
    r, _docs = trace
    _open(trace, known_path)
    r.ensure_refreshed()
    box = r.critical.box
    assert box.focusPolicy() & Qt.FocusPolicy.TabFocus
    assert "&C" in box.text()  # Alt+C
    box.setFocus()
    with qtbot.waitSignal(r.critical.shown, timeout=WAIT_MS):
        qtbot.keyClick(box, Qt.Key.Key_Space)
    assert box.isChecked() and r.timeline.critical.outline_item.n_rects > 0


def test_a_run_of_several_gives_that_runs_shares(qtbot, trace, tmp_path):
    path = write_profile(
        tmp_path / "runs.h5", make_synthetic_profile(seed=2, n_steps=4000, n_ipus=2, tiles=16)
    )
    r, _docs = trace
    _open(trace, path)
    r.ensure_refreshed()
    _tick(qtbot, r)
    assert r.run_combo.count() > 2
    r.run_combo.setCurrentIndex(2)
    text = r.critical.label.text()
    assert "of the run (its device time)" in text or "no step of the critical path" in text
    a, b = r.run_combo.currentData()
    shares = [share for _lv, _c, share in r.critical.views[0].span_links(a, b)]
    assert sum(shares) <= 1 + 1e-9


def test_a_profile_without_a_path_says_why(qtbot, trace, one_ipu):
    r, _docs = trace
    _open(trace, one_ipu)
    r.ensure_refreshed()
    _tick(qtbot, r)
    text = r.critical.label.text()
    assert text.startswith("one-ipu.h5 runs on one IPU") and "critical path" in text
    assert text.count(". ") == 0 and "Traceback" not in text
    assert r.timeline.critical.outline_item.n_rects == 0


# -- the Pipeline -----------------------------------------------------------------------------
def test_the_pipeline_marks_the_stages_on_the_path(qtbot, pipeline, walkthrough_profiles):
    r, _docs = pipeline
    with qtbot.waitSignal(r.pathShown, timeout=WAIT_MS):
        (doc,) = _open(pipeline, walkthrough_profiles["3-accumulate"])
        r.ensure_refreshed()
    core = critical_path(doc.analysis.src)
    stages = {lk.stage: lk.share for lk in core.links if lk.kind == "stage"}
    assert r.bars.path_shares == pytest.approx({("A", s): v for s, v in stages.items()})
    assert r.bars.path_outline.n_rects == len(stages)
    top = core.links[0]
    assert r.view_a.bounds.text().startswith(
        f"What bounds the step: {top.label}, {100 * top.share:.1f}% of the call"
    )


def test_the_pipeline_says_why_without_a_path(qtbot, pipeline, one_ipu):
    r, _docs = pipeline
    with qtbot.waitSignal(r.pathShown, timeout=WAIT_MS):
        _open(pipeline, one_ipu)
        r.ensure_refreshed()
    assert r.view_a.bounds.text().startswith("What bounds the step: one-ipu.h5 runs on one IPU")
    assert r.bars.path_outline.n_rects == 0


def test_the_docs_quote_the_walkthroughs_headline(walkthrough_profiles):
    """docs/analysis.md and docs/gui.md quote step 3's line: it is what the GUI says today."""
    from pathlib import Path

    with Analysis.open(walkthrough_profiles["3-accumulate"]) as a:
        line = critical_path_view(a).headline()
    quoted = line.split("; then ")[0] + "; then " + line.split("; then ")[1].split(",")[0]
    root = Path(__file__).resolve().parents[1]
    for doc in ("docs/analysis.md", "docs/gui.md"):
        text = " ".join((root / doc).read_text().split())
        assert quoted in text, f"{doc} should quote {quoted!r}"


def test_the_window_hands_one_path_to_both_reports(qtbot, tmp_path, walkthrough_profiles):
    """In the main window Alt+C ticks the trace's box and the trace computes the path once;
    the Pipeline, visited after, draws the same view at once (the document's cache)."""
    from gui_helpers import open_in, shown_window

    window = shown_window(qtbot, tmp_path, (1280, 720))
    w = next(window)
    assert open_in(qtbot, w, walkthrough_profiles["6-async"])
    tr = w.show_report("trace")
    tr.ensure_refreshed()
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow, timeout=WAIT_MS)
    with qtbot.waitSignal(tr.critical.shown, timeout=WAIT_MS):  # Alt+C: the box's mnemonic
        qtbot.keyClick(w.windowHandle(), Qt.Key.Key_C, Qt.KeyboardModifier.AltModifier)
    assert tr.critical.box.isChecked()
    view = tr.critical.views[0]
    with qtbot.waitSignal(w.report("pipeline").pathShown, timeout=WAIT_MS):
        pr = w.show_report("pipeline")
        pr.ensure_refreshed()
    assert pr.view_a.bounds.text().startswith(view.headline())
    assert pr.bars.path_shares == pytest.approx(
        {("A", s): share for s, share in view.stage_shares().items()}
    )
    next(window, None)
