"""BSP state shares (analyser.trace.bsp), checked against brute force over the steps (no Qt)."""

from __future__ import annotations

import numpy as np
import pytest
from trace_helpers import ipu_steps, step_columns, synthetic_window

from analyser.trace.bsp import BSP_STATES, STATE_OF_TYPE, blend, bsp_states

COMPUTE, EXCHANGE, SYNC, IDLE = range(4)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bsp")
    profile = dict(n_steps=6_000, n_ipus=2, tiles=64, n_programs=120, seed=5)
    with synthetic_window(folder, **profile) as (tw, data):
        tc = np.asarray(data["/programs"]["tile_cycles"]).astype(np.float64)
        ptype = np.asarray(data["/programs/nodes"]["type"])
        yield tw, step_columns(data), tc, ptype


def _ipu(steps, ipu):
    return ipu_steps(steps, ipu)[0]


def test_whole_run_conserves_each_state_per_tile(small):
    """Over the whole run (every step in one of 300 buckets), each tile's compute / exchange
    cycles are its programs' per-tile cycles (capped at the step), its sync cycles the whole of
    every sync step, and each cell's shares sum to 1."""
    tw, steps, tc, ptype = small
    s = _ipu(steps, 0)
    t0, t1 = tw.extent(0)
    m = bsp_states(tw, 0, t0, t1, buckets=300)
    assert m.shares.shape == (300, 64, 4)
    np.testing.assert_allclose(m.shares.sum(axis=-1), 1.0, atol=1e-5)
    cycles = m.shares.astype(np.float64) * ((t1 - t0) / 300)
    state = STATE_OF_TYPE[ptype[s["program"]]]
    busy = np.minimum(tc[s["program"]], s["cycles"][:, None])
    for st in (COMPUTE, EXCHANGE):
        want = busy[state == st].sum(axis=0)
        np.testing.assert_allclose(cycles[:, :, st].sum(axis=0), want, rtol=1e-4, atol=2.0)
    sync = s["cycles"][state == SYNC].sum()
    assert sync > 0  # the profile has sync steps
    np.testing.assert_allclose(cycles[:, :, SYNC].sum(axis=0), sync, rtol=1e-4)
    assert m.n_steps == len(s["start"])


def test_zoomed_in_each_tile_finishes_at_its_own_time(small):
    """Zoomed on one compute step with uneven tiles, a tile computes from the step's start for
    its own cycles and is idle after (the BSP staircase), exactly."""
    tw, steps, tc, ptype = small
    s = _ipu(steps, 1)
    state = STATE_OF_TYPE[ptype[s["program"]]]
    per = tc[s["program"]]
    positive = np.where(per > 0, per, np.inf).min(axis=1)
    uneven = (state == COMPUTE) & (positive < 0.9 * per.max(axis=1)) & (s["cycles"] > 100)
    i = int(np.flatnonzero(uneven)[0])
    a, dur = float(s["start"][i]), float(s["cycles"][i])
    m = bsp_states(tw, 1, a, a + dur, buckets=100)
    bw = dur / 100
    got = m.shares[:, :, COMPUTE].sum(axis=0) * bw
    np.testing.assert_allclose(got, np.minimum(per[i], dur), rtol=1e-4, atol=1e-3)
    lazy = int(np.argmin(np.where(per[i] > 0, per[i], np.inf)))
    done = int(np.ceil(per[i][lazy] / bw))
    assert m.shares[done:, lazy, IDLE].min() > 0.999  # idle once its work is done
    used = per[i] >= bw
    assert m.shares[0, used, COMPUTE].min() > 0.999  # every tile of the compute set starts at once
    assert (m.shares[:, ~(per[i] > 0), IDLE] == 1).all()  # tiles without work idle throughout


def test_rows_are_the_mean_of_their_tiles_and_tile_ranges_cut(small):
    tw, _steps, _tc, _ptype = small
    t0, t1 = tw.extent(0)
    t1 = t0 + (t1 - t0) / 7
    full = bsp_states(tw, 0, t0, t1, buckets=50)
    grouped = bsp_states(tw, 0, t0, t1, buckets=50, rows=8)
    assert grouped.rows == 8 and list(grouped.tile_edges) == list(range(0, 65, 8))
    want = full.shares.reshape(50, 8, 8, 4).mean(axis=2)
    np.testing.assert_allclose(grouped.shares, want, atol=1e-5)
    part = bsp_states(tw, 0, t0, t1, buckets=50, tiles=(10, 20))
    assert part.tile_edges[0] == 10 and part.tile_edges[-1] == 20
    np.testing.assert_allclose(part.shares, full.shares[:, 10:20], atol=1e-5)
    assert part.cell(t0, 10.5) == (0, 0) and part.cell(t0, 25) is None


def test_a_sync_step_is_sync_on_every_tile_and_blends_to_the_sync_colour(small):
    """A Sync step must not read as busy or idle but as sync."""
    tw, steps, _tc, ptype = small
    s = _ipu(steps, 0)
    state = STATE_OF_TYPE[ptype[s["program"]]]
    i = int(np.flatnonzero((state == SYNC) & (s["cycles"] > 20))[0])
    a, dur = float(s["start"][i]), float(s["cycles"][i])
    m = bsp_states(tw, 0, a, a + dur, buckets=10)
    assert m.shares[:, :, SYNC].min() > 0.999
    colors = np.array([[10, 20, 30], [200, 100, 0], [160, 160, 160], [26, 26, 26]])
    rgb = blend(m.shares, colors)
    assert (rgb == colors[SYNC]).all()
    assert m.mean_shares()["sync"] == pytest.approx(1.0, abs=1e-5)
    assert set(m.mean_shares()) == set(BSP_STATES)


def test_blend_is_the_share_weighted_mean():
    colors = np.array([[0, 0, 255], [255, 128, 0], [160, 160, 160], [0, 0, 0]])
    shares = np.array([[[0.5, 0.5, 0, 0], [0.25, 0, 0, 0.75]]], np.float32)
    rgb = blend(shares, colors)
    assert rgb[0, 0].tolist() == [128, 64, 128]
    assert rgb[0, 1].tolist() == [0, 0, 64]
