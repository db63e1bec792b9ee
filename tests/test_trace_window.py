"""Level-of-detail trace windowing (analyser.trace.window), checked against brute force."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from trace_helpers import ipu_steps, step_columns, synthetic_window

from analyser.trace.window import (
    DESTINATIONS,
    GROUP_MODES,
    NT,
    STEP_TYPES,
    TraceError,
    TraceWindow,
)
from profiles import open_profile, write_profile
from profiles.synthetic import make_synthetic_profile, write_synthetic_profile


def big_profile(tmp_path_factory) -> Path:
    """The 1,000,000-step synthetic profile, written once per test run and shared by the
    trace tests of every worker (tests/shared_files.py)."""
    from shared_files import built_once

    def build(folder: Path) -> None:
        write_synthetic_profile(
            folder / "trace-1m.h5", n_steps=1_000_000, n_ipus=4, tiles=1472, n_programs=5000
        )

    return built_once(tmp_path_factory, "trace-1m", build) / "trace-1m.h5"


@pytest.fixture(scope="session")
def big_path(tmp_path_factory) -> Path:
    return big_profile(tmp_path_factory)


@pytest.fixture(scope="session")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tw")
    profile = dict(n_steps=30_000, n_ipus=2, tiles=64, n_programs=300, seed=3)
    with synthetic_window(folder, **profile) as (tw, data):
        names = np.asarray(data["/programs/nodes"]["name"], dtype=object)
        tc = np.asarray(data["/programs"]["tile_cycles"])
        yield tw, step_columns(data), names, tc


def test_lod_bounded_by_pixels_not_steps(big_path):
    with open_profile(big_path) as p:
        tw = TraceWindow(p)
        assert tw.step_count() == 1_000_000
        t0, t1 = tw.full_extent()
        for group in GROUP_MODES:
            for width in (300, 1200):
                for ipu in range(tw.n_ipus):
                    r = tw.window(ipu, t0, t1, width, group)
                    lanes = len(tw.ipu_lanes(group, ipu)[0])
                    # every step of the IPU is represented ...
                    assert r.n_steps == tw.step_count(ipu)
                    # ... by at most one rectangle per pixel and lane (dominant type) plus the
                    # steps wider than two pixels, far below the 250,000 steps of the IPU
                    assert r.n_rects <= (width + 3) * lanes * 2
                    raw = tw.window(ipu, t0, t1, width, group, dominant=False)
                    assert raw.n_rects <= (width + 3) * NT * lanes
        # zoomed in, the rows are read and still bounded
        mid = (t0 + t1) / 2
        r = tw.window(0, mid, mid + (t1 - t0) / 5000, 800)
        assert r.source == "rows"
        assert 0 < r.n_rects <= r.n_steps + 1


def test_window_covers_every_overlapping_step(small):
    tw, steps, _names, _tc = small
    rng = np.random.default_rng(0)
    for ipu in range(2):
        s, _ = ipu_steps(steps, ipu)
        lo_t, hi_t = float(s["start"].min()), float((s["start"] + s["cycles"]).max())
        for _ in range(12):
            span = (hi_t - lo_t) * 10 ** rng.uniform(-4, 0)
            t0 = rng.uniform(lo_t - span / 4, hi_t - span / 2)
            t1 = t0 + span
            width = int(rng.integers(100, 1500))
            r = tw.window(ipu, t0, t1, width, dominant=False)
            st = s["start"].astype(float)
            en = st + s["cycles"]
            over = (en > t0) & (st < t1)
            if r.source == "rows":
                assert r.n_steps == int(over.sum())
            else:  # pyramid buckets may hold a few steps just outside the window
                assert r.n_steps >= int(over.sum())
            for code in np.unique(s["type"][over]):
                name = STEP_TYPES[int(code)]
                rect = r.rects[name]
                x = np.maximum(st[over & (s["type"] == code)], t0)
                # each overlapping step's visible start lies in a rectangle of its type
                inside = (rect.x0[None, :] <= x[:, None] + 1e-6) & (x[:, None] < rect.x1[None, :])
                assert inside.any(axis=1).all()


def test_row_range_is_a_superset(small):
    tw, steps, _names, _tc = small
    rng = np.random.default_rng(1)
    for ipu in range(2):
        s, rows = ipu_steps(steps, ipu)
        st = s["start"].astype(float)
        en = st + s["cycles"]
        for _ in range(20):
            t0 = rng.uniform(st.min(), en.max())
            t1 = t0 + rng.uniform(1, (en.max() - st.min()) / 20)
            lo, hi = tw.row_range(ipu, t0, t1)
            want = rows[(en > t0) & (st < t1)]
            if len(want):
                assert lo <= want.min() and want.max() < hi


def test_range_summary_matches_brute_force(small):
    tw, steps, _names, _tc = small
    s, _ = ipu_steps(steps, 1)
    st, cy = s["start"], s["cycles"]
    t0 = float(st[len(st) // 3])
    t1 = float(st[2 * len(st) // 3]) + 0.5
    summ = tw.range_summary(1, t0, t1)
    en = st + cy
    over = (en > t0) & (st < t1)
    clipped = np.minimum(en, t1) - np.maximum(st, t0)
    assert summ.n_steps == int(over.sum())
    for i, name in enumerate(STEP_TYPES):
        m = over & (s["type"] == i)
        assert summ.cycles_by_type.get(name, 0) == int(clipped[m].sum())
        assert summ.steps_by_type.get(name, 0) == int(m.sum())
    sc = np.isin(s["type"], [STEP_TYPES.index(t) for t in STEP_TYPES if "StreamCopy" in t])
    starts_in = sc & (st >= t0) & (st < t1)
    assert sum(summ.streamcopy["received"].values()) == int(s["bytes_in"][starts_in].sum())
    assert sum(summ.streamcopy["sent"].values()) == int(s["bytes_out"][starts_in].sum())
    assert 0.0 <= summ.tile_balance <= 1.0


def test_search_whole_trace(small):
    tw, steps, names, _tc = small
    text = str(names[int(steps["program"][-1])]).upper()  # case-insensitive, from the last IPU
    res = tw.search(text, limit=50)
    ops = tw.programs["op_name"].astype(str)
    in_name = np.array([text.lower() in str(n).lower() for n in names])
    in_op = np.char.find(np.char.lower(ops.astype(str)), text.lower()) >= 0
    hit = in_name | in_op
    want = np.flatnonzero(hit[steps["program"]])
    assert res.total == len(want)
    assert np.array_equal(res.rows, want[:50])
    assert np.array_equal(res.start, steps["start"][want[:50]])
    assert tw.search("no such step name").total == 0


def test_step_details_and_selection(small):
    tw, steps, names, tc = small
    row = int(len(steps["start"]) * 0.75)
    d = tw.step_details(row)
    assert d["start"] == int(steps["start"][row])
    assert d["cycles"] == int(steps["cycles"][row])
    assert d["name"] == names[int(steps["program"][row])]
    assert d["type"] == STEP_TYPES[int(steps["type"][row])]
    assert np.array_equal(tw.tile_cycles_of_step(row), tc[int(steps["program"][row])])
    ipu = int(steps["ipu"][row])
    mid = steps["start"][row] + steps["cycles"][row] / 2
    assert tw.step_at(ipu, mid) == row
    with pytest.raises(TraceError):
        tw.step_details(10**9)
    with pytest.raises(TraceError):
        tw.window(7, 0, 10, 100)


def test_oom_profile_has_no_trace(tmp_path):
    path = tmp_path / "oom.h5"
    write_profile(path, make_synthetic_profile(n_steps=0, n_ipus=1, tiles=16, oom=True))
    with open_profile(path) as p, pytest.raises(TraceError, match="no execution trace"):
        TraceWindow(p)


def test_whole_run_summary_agrees_with_the_analysis_core(small):
    """Over the whole run, the visible-range summary gives the analysis core's figures."""
    from analyser.core.analysis import Analysis

    tw, _steps, _names, _tc = small
    with Analysis.open(tw.profile.path) as a:
        ex = a.execution
    t0, t1 = tw.full_extent()
    for ipu in range(tw.n_ipus):
        s = tw.range_summary(ipu, t0, t1 + 1)
        for i, name in enumerate(STEP_TYPES):
            assert s.cycles_by_type.get(name, 0) == int(ex.cycles_by_type[ipu, i])
            assert s.steps_by_type.get(name, 0) == int(ex.count_by_type[ipu, i])
        assert s.tile_balance == pytest.approx(float(ex.tile_balance[ipu]), rel=1e-6)
        for d, dest in enumerate(DESTINATIONS):
            assert s.streamcopy["received"].get(dest, 0) == int(ex.streamcopy_rx_by_dest[ipu, d])
            assert s.streamcopy["sent"].get(dest, 0) == int(ex.streamcopy_tx_by_dest[ipu, d])


def test_step_types_are_those_executed(small):
    from analyser.trace.window import STEP_TYPES

    tw, steps, _names, _tc = small
    want = [STEP_TYPES[i] for i in sorted(set(np.asarray(steps["type"]).tolist()))]
    assert tw.step_types() == want
    assert "Sequence" not in want  # control programs are never executed steps


def test_lod_cache_saves_then_memory_maps_the_same_pyramids(tmp_path, monkeypatch):
    """Pyramids of big IPUs are saved to the level-of-detail cache and, when the profile is
    opened again, memory-mapped from it: same windows; a changed file is not served stale."""
    import analyser.trace.window as tw_mod

    monkeypatch.setattr(tw_mod, "LOD_CACHE_MIN_ROWS", 1000)
    monkeypatch.setenv("IPU_ANALYSER_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "p.h5"
    write_profile(path, make_synthetic_profile(n_steps=20_000, n_ipus=2, tiles=64, seed=5))

    def windows(tw):
        t0, t1 = tw.full_extent()
        out = []
        for group in ("flat", "stage"):
            for a, b, w in ((t0, t1, 800), (t0, t0 + (t1 - t0) / 50, 400)):
                r = tw.window(1, a, b, w, group)
                out.append(
                    {
                        k: (v.x0.tolist(), v.lane.tolist(), v.count.tolist())
                        for k, v in r.rects.items()
                    }
                )
        return out

    with open_profile(path) as p:
        built = TraceWindow(p)
        first = windows(built)
        assert not isinstance(built._pyramid(1, "flat").levels[0].x0, np.memmap)
    saved = list((tmp_path / "cache" / "trace-lod").glob("*/ipu1-flat/meta.json"))
    assert len(saved) == 1
    with open_profile(path) as p:
        loaded = TraceWindow(p)
        assert isinstance(loaded._pyramid(1, "flat").levels[0].x0, np.memmap)
        assert windows(loaded) == first
    # rewriting the file gives it another identity: its pyramids are built again, not loaded
    write_profile(path, make_synthetic_profile(n_steps=20_000, n_ipus=2, tiles=64, seed=6))
    with open_profile(path) as p:
        assert not isinstance(TraceWindow(p)._pyramid(1, "flat").levels[0].x0, np.memmap)
    # an empty IPU_ANALYSER_CACHE turns the cache off
    monkeypatch.setenv("IPU_ANALYSER_CACHE", "")
    assert tw_mod.lod_cache_dir() is None


def test_coarse_first_open_draws_the_full_builds_picture(tmp_path, monkeypatch):
    """A coarse-first prepare builds only the coarse levels before the first paint: they are
    the full pyramid's coarsest levels, so the whole-run view, the overview, the step types and
    the lanes are those of a full build; a finer zoom reads rows or waits for the full pyramid,
    which the background thread builds and saves to the cache; then every zoom draws what a
    full build draws, and the next open memory-maps the saved pyramids."""
    import analyser.trace.window as tw_mod

    monkeypatch.setattr(tw_mod, "LOD_CACHE_MIN_ROWS", 1000)
    monkeypatch.setattr(tw_mod, "COARSE_BUCKETS", 128)
    path = tmp_path / "p.h5"
    write_profile(path, make_synthetic_profile(n_steps=20_000, n_ipus=2, tiles=64, seed=7))

    def picture(tw, ipu, a, b, w):
        r = tw.window(ipu, a, b, w)
        return {k: (v.x0.tolist(), v.x1.tolist(), v.count.tolist()) for k, v in r.rects.items()}

    def zooms(tw):
        t0, t1 = tw.full_extent()
        span = t1 - t0
        return [(t0, t1, 100), (t0 + span / 3, t0 + span / 2, 300), (t0, t0 + span / 400, 200)]

    monkeypatch.setenv("IPU_ANALYSER_CACHE", "")
    with open_profile(path) as p:
        full = TraceWindow(p).prepare("flat")
        assert all(full._pyramid(i, "flat").complete for i in range(2))
        want = [picture(full, i, *z) for i in range(2) for z in zooms(full)]
        want_overview = full.overview(100).busy
        want_types, want_lanes = full.step_types(), full.ipu_lanes("flat", 1)

    monkeypatch.setenv("IPU_ANALYSER_CACHE", str(tmp_path / "cache"))
    # the coarse levels alone (no background build): same whole-run picture and overview
    with monkeypatch.context() as m:
        m.setattr(TraceWindow, "_finish_pyramids", lambda self, group, ipus: None)
        with open_profile(path) as p:
            tw = TraceWindow(p).prepare("flat", coarse_first=True)
            pyr = tw._pyramid(0, "flat")
            assert not pyr.complete and pyr.first_level > 0
            assert len(pyr.levels) < len(full._pyramids[(0, "flat")].levels)
            assert picture(tw, 0, *zooms(tw)[0]) == want[0]
            np.testing.assert_array_equal(tw.overview(100).busy, want_overview)
            assert tw.step_types() == want_types and tw.ipu_lanes("flat", 1) == want_lanes
            # a zoom finer than the coarse levels over few rows reads them
            deep = tw.window(1, *zooms(tw)[2])
            assert deep.source == "rows" and deep.n_steps > 0
            assert not tw._pyramid(1, "flat").complete
            # a zoom finer than the coarse levels over many rows waits for the full pyramid
            m.setattr(tw_mod, "COARSE_ROWS_FALLBACK", 0)
            assert picture(tw, 0, *zooms(tw)[1]) == want[1]
            assert tw._pyramid(0, "flat").complete and not tw._pyramid(1, "flat").complete
    # with the background build: all full, saved, and every zoom as the full build draws it
    with open_profile(path) as p:
        tw = TraceWindow(p).prepare("flat", coarse_first=True)
        assert tw.wait_ready(60)
        assert all(tw._pyramid(i, "flat").complete for i in range(2))
        assert [picture(tw, i, *z) for i in range(2) for z in zooms(tw)] == want
    assert len(list((tmp_path / "cache" / "trace-lod").glob("*/ipu*-flat/meta.json"))) == 2
    with open_profile(path) as p:
        tw = TraceWindow(p).prepare("flat", coarse_first=True)
        assert isinstance(tw._pyramid(1, "flat").levels[0].x0, np.memmap)
        assert tw._pyramid(1, "flat").complete
        assert [picture(tw, i, *z) for i in range(2) for z in zooms(tw)] == want


def test_range_statistics_by_name_and_operation_match_brute_force(small):
    """Perfetto's area selection: steps overlapping the range, cycles clipped to it, grouped by
    step name and by operation; checked row by row against a plain pandas group-by."""
    import pandas as pd

    tw, steps, names, _tc = small
    p = tw.programs
    st, en = steps["start"].astype(np.int64), (steps["start"] + steps["cycles"]).astype(np.int64)
    t0 = float(np.percentile(st, 30))
    t1 = float(np.percentile(st, 45)) + 0.5
    over = (en > t0) & (st < t1)
    clipped = np.minimum(en, t1) - np.maximum(st, t0)
    prog = steps["program"][over]
    ops = p["op_name"].astype(str)[prog]
    frames = {
        "name": names[prog].astype(str),
        "operation": np.where(ops == "", "(no operation)", ops),
    }
    for by, keys in frames.items():
        stats = tw.range_statistics(t0, t1, by=by)
        want = (
            pd.DataFrame({"k": keys, "c": clipped[over]})
            .groupby("k")["c"]
            .agg(["count", "sum", "max", "mean"])
        )
        got = stats.table.set_index("name")
        assert set(got.index) == set(want.index)
        assert (got.loc[want.index, "steps"].to_numpy() == want["count"].to_numpy()).all()
        assert np.allclose(got.loc[want.index, "total_cycles"], want["sum"])
        assert np.allclose(got.loc[want.index, "max_cycles"], want["max"])
        assert np.allclose(got.loc[want.index, "mean_cycles"], want["mean"])
        assert stats.n_steps == int(over.sum())
        # most cycles first; shares of the range's IPU time add up to its busy share
        assert (np.diff(stats.table["total_cycles"].to_numpy()) <= 0).all()
        busy = clipped[over].sum() / ((t1 - t0) * tw.n_ipus)
        assert stats.table["share"].sum() == pytest.approx(busy)
    one = tw.range_statistics(t0, t1, ipus=[1])
    assert one.n_steps == int((over & (steps["ipu"] == 1)).sum())
    with pytest.raises(TraceError, match="choose from name, operation"):
        tw.range_statistics(t0, t1, by="colour")
    assert tw.range_statistics(t0, t1, cancelled=lambda: True) is None


def test_whole_run_queries_read_the_steps_once(small):
    """The Execution Trace opens on the whole run: its range summary and statistics are kept by
    the window (the GUI's warm-up computes them before the first visit), answered for any range
    holding every step, as copies with the range asked for; a range clipping a step reads."""
    from analyser.trace.window import TraceWindow

    tw, _steps, _names, _tc = small
    fresh = TraceWindow(tw.profile)  # nothing kept yet
    a, b = fresh.full_extent()
    first = [fresh.range_summary(i, a, b) for i in range(fresh.n_ipus)]
    stats = fresh.range_statistics(a, b)
    chunks = fresh.access.chunks
    reads = []
    fresh.access.chunks = lambda *args, **kw: reads.append(args) or chunks(*args, **kw)
    try:
        wider = [fresh.range_summary(i, a - 100, b + 100) for i in range(fresh.n_ipus)]
        assert not reads, "a range holding every step is answered from the kept summary"
        for one, two in zip(first, wider, strict=True):
            assert (two.t0, two.t1) == (int(a - 100), int(b + 100))
            assert two.cycles_by_type == one.cycles_by_type and two.n_steps == one.n_steps
            assert two.busy_cycles == one.busy_cycles and two.streamcopy == one.streamcopy
        wider[0].cycles_by_type.clear()  # the caller's copy
        assert fresh.range_summary(0, a, b).cycles_by_type == first[0].cycles_by_type
        again = fresh.range_statistics(a - 100, b + 100)
        assert not reads
        pd.testing.assert_frame_equal(
            again.table.drop(columns="share"), stats.table.drop(columns="share")
        )
        # the share is of the range asked for
        room = (b + 100 - (a - 100)) * fresh.n_ipus
        assert np.allclose(again.table["share"], stats.table["total_cycles"] / room)
        again.table["steps"] = 0  # the caller's frame
        assert (fresh.range_statistics(a, b).table["steps"] == stats.table["steps"]).all()
        # a clipped range, another grouping or another set of IPUs reads the steps
        part = fresh.range_summary(0, a + 1, b)
        assert reads and part.busy_cycles < first[0].busy_cycles
        reads.clear()
        fresh.range_statistics(a, b, by="operation")
        fresh.range_statistics(a, b, ipus=[1])
        assert len(reads) >= 2
    finally:
        fresh.access.chunks = chunks
    # the same figures as a window that kept nothing
    other = TraceWindow(tw.profile)
    assert other.range_summary(1, a, b).cycles_by_type == first[1].cycles_by_type


def test_step_names_of_rows(small):
    tw, steps, names, _tc = small
    rows = np.array([29_999, 0, 17, 70_000 % 30_000, 17], dtype=np.int64)
    assert list(tw.step_names(rows)) == [str(names[steps["program"][r]]) for r in rows]


def test_overview_active_share_agrees_with_the_range_summary(small):
    tw, _steps, _names, _tc = small
    f0, f1 = tw.full_extent()
    ov = tw.overview(300)
    assert ov.busy.shape == (tw.n_ipus, 300)
    assert ((ov.busy >= 0) & (ov.busy <= 1)).all()
    bw = (ov.t1 - ov.t0) / 300

    def active(summary) -> int:  # every step type but the waits in syncs
        return sum(c for t, c in summary.cycles_by_type.items() if t not in ("Sync", "SyncAns"))

    for ipu in range(tw.n_ipus):
        # the buckets hold the IPU's active cycles (the pyramid's aggregates spread evenly)
        busy = active(tw.range_summary(ipu, f0, f1))
        assert 0 < busy < tw.range_summary(ipu, f0, f1).busy_cycles
        assert ov.busy[ipu].sum() * bw == pytest.approx(busy, rel=0.02)
        # and where they are: the first and second halves of the run separately
        mid = ov.t0 + 150 * bw
        half = active(tw.range_summary(ipu, f0, mid))
        assert ov.busy[ipu, :150].sum() * bw == pytest.approx(half, rel=0.05)


def test_runs_and_clock(small):
    tw, _steps, _names, _tc = small
    runs = tw.runs()
    f0, f1 = tw.full_extent()
    assert runs[0, 0] == f0 and runs[-1, 1] == f1
    assert (runs[1:, 0] == runs[:-1, 1]).all() and (runs[:, 1] > runs[:, 0]).all()
    recorded = np.asarray(tw.profile.array("/execution/run_starts"))
    assert set(runs[1:, 0]) == set(recorded[(recorded > f0) & (recorded < f1)])
    assert tw.clock_hz == pytest.approx(tw.profile.clock_hz)


def test_grouped_lanes_are_in_execution_order(tmp_path):
    """Layer (operation) and program lanes are ordered by each IPU's first step in them, as
    PopVision does, not alphabetically; catch-all lanes last."""
    data = make_synthetic_profile(n_steps=6_000, n_ipus=2, tiles=16, n_programs=120, seed=5)
    # the first layer to run sorts last by name
    layers = np.asarray(data["/graph/operations"]["layer"], dtype=object)
    data["/graph/operations"]["layer"] = [
        str(x).replace("layer1", "zeta").replace("layer2", "alpha") for x in layers
    ]
    write_profile(tmp_path / "order.h5", data)
    steps = step_columns(data)
    tw = TraceWindow(open_profile(tmp_path / "order.h5"))
    assert tw.ipu_lanes("operation", 0)[0][:2] == ("zeta", "alpha")
    for group in ("operation", "program"):
        lane_of_prog, labels = tw._program_lanes(group)
        for ipu in range(tw.n_ipus):
            _names, ids = tw.ipu_lanes(group, ipu)
            m = steps["ipu"] == ipu
            first = (
                pd_first_start(lane_of_prog[steps["program"][m]], steps["start"][m])
                if m.any()
                else {}
            )
            named = [i for i in ids if labels[i] not in ("(none)", "(top level)", "other")]
            starts = [first[i] for i in named]
            assert starts == sorted(starts)
            assert named == list(ids[: len(named)])  # catch-alls after the named lanes
    tw.profile.close()


def pd_first_start(lanes: np.ndarray, starts: np.ndarray) -> dict[int, int]:
    first: dict[int, int] = {}
    order = np.argsort(starts, kind="stable")
    for lane, s in zip(lanes[order], starts[order], strict=True):
        first.setdefault(int(lane), int(s))
    return first


def _brute_exchanges(steps, t0, t1) -> set[tuple[int, int]]:
    ge = STEP_TYPES.index("GlobalExchange")
    st = steps["start"].astype(np.int64)
    en = st + steps["cycles"]
    over = (en > t0) & (st < t1) & (steps["type"] == ge)
    snd = np.flatnonzero(over & (steps["bytes_out"] > 0))
    rcv = np.flatnonzero(over & (steps["bytes_in"] > 0))
    return {
        (int(a), int(b))
        for a in snd
        for b in rcv
        if steps["ipu"][a] != steps["ipu"][b] and st[a] <= st[b] <= en[a]
    }


def test_flows_pair_cross_ipu_exchanges(small):
    """Flow arrows: every GlobalExchange send goes to the receives on other IPUs that start
    while it runs (checked against a brute-force pairing), from the send's start to the
    receive's end; capped; none when the window holds too many steps."""
    tw, steps, _names, _tc = small
    f0, f1 = tw.full_extent()
    t0, t1 = f0 + (f1 - f0) * 0.2, f0 + (f1 - f0) * 0.5
    fl = tw.flows(t0, t1)
    want = _brute_exchanges(steps, t0, t1)
    assert len(want) > 5
    assert set(zip(fl.src_row.tolist(), fl.dst_row.tolist(), strict=True)) == want
    assert set(fl.kind) == {"exchange"}
    assert (fl.x0 == steps["start"][fl.src_row]).all()
    assert (fl.x1 == (steps["start"] + steps["cycles"])[fl.dst_row]).all()
    assert (fl.src_ipu != fl.dst_ipu).all()
    assert len(tw.flows(t0, t1, limit=3)) == 3
    assert tw.flows(t0, t1, max_rows=10).too_many


def test_flows_of_external_syncs(walkthrough_profiles):
    """An external sync releases every IPU at one cycle: the arrow goes from the IPU that
    arrived last to each other IPU's sync, at the release."""
    with open_profile(walkthrough_profiles["2-half"]) as p:
        tw = TraceWindow(p)
        fl = tw.flows(*tw.full_extent())
        sync = fl.kind == "sync"
        assert sync.sum() >= 4 and (fl.kind == "exchange").sum() >= 4
        d = tw.access.read(0, tw.step_count(), ("start", "cycles"))
        end = d["start"] + d["cycles"]
        src, dst = fl.src_row[sync], fl.dst_row[sync]
        assert (end[src] == end[dst]).all()  # one barrier
        assert (d["start"][src] >= d["start"][dst]).all()  # the last to arrive releases
        assert (fl.src_ipu[sync] != fl.dst_ipu[sync]).all()


def test_range_queries_stop_when_cancelled(small):
    """A range summary or statistics query polled as cancelled returns None (a newer range
    superseded it); polled as not cancelled, the same answer as without polling."""
    tw, steps, _names, _tc = small
    t0, t1 = tw.full_extent()
    assert tw.range_summary(1, t0, t1, cancelled=lambda: True) is None
    assert tw.range_statistics(t0, t1, cancelled=lambda: True) is None
    polled = tw.range_summary(1, t0, t1, cancelled=lambda: False)
    assert polled == tw.range_summary(1, t0, t1) and polled.n_steps > 0
    stats = tw.range_statistics(t0, t1, cancelled=lambda: False)
    assert stats.n_steps == len(steps["start"]) and stats.span == t1 - t0
