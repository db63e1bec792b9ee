"""A selected Sync step on a real (engine-written) profile: its per-tile cycles are the whole
wait, and steps outside any micro-batch or stage say so instead of showing -1."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from analyser.trace.window import STEP_TYPES, TraceWindow
from profiles import open_profile
from tests.run_configs import small_pipelined


@pytest.fixture(scope="module")
def pipelined(tmp_path_factory):
    cfg = small_pipelined(micro_batch_size=4, gradient_accumulation=4, precision="16.16")
    path = tmp_path_factory.mktemp("sync") / "p.h5"
    engine.simulate_to_file(cfg, path)
    prof = open_profile(path)
    yield TraceWindow(prof)
    prof.close()


def test_sync_step_tile_cycles_cover_the_step(pipelined):
    tw = pipelined
    n = tw.step_count()
    cols = tw.access.read(0, n, ("type", "cycles", "program"))
    sync = np.flatnonzero(
        np.isin(cols["type"], [STEP_TYPES.index("Sync"), STEP_TYPES.index("SyncAns")])
    )
    assert sync.size
    row = int(sync[np.argmax(cols["cycles"][sync])])
    tiles = tw.tile_cycles_of_step(row)
    # every tile is in the sync (arrived and waiting) for the whole step, as the BSP view draws it
    assert tiles.size and np.all(tiles == int(cols["cycles"][row]))
    # a compute step keeps its program's own per-tile cycles
    other = int(np.flatnonzero(cols["type"] == STEP_TYPES.index("OnTileExecute"))[0])
    assert np.array_equal(
        tw.tile_cycles_of_step(other), tw.access.tile_cycles(np.array([cols["program"][other]]))[0]
    )


def test_steps_outside_micro_batches_say_so(pipelined):
    tw = pipelined
    n = tw.step_count()
    mb = tw.access.read(0, n, ("micro_batch",))["micro_batch"]
    outside = np.flatnonzero(mb < 0)
    assert outside.size
    d = tw.step_details(int(outside[0]))
    assert d["micro-batch"] == "none (outside micro-batches)"
    inside = int(np.flatnonzero(mb >= 0)[0])
    assert tw.step_details(inside)["micro-batch"] == int(mb[inside])
