"""Pipelines on the real compiler + executor: stash memory by schedule, replication code growth,
offloading, and the ramp share of a compiled pipeline. Small models keep these fast."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.config import RunConfig
from engine.execute import execute
from profiles.schema import code
from tests.run_configs import small_pipelined

STASH = code("variable_kind", "stash")
D_REMOTE = code("destination", "remoteBuffer")


def cfg(**kw) -> RunConfig:
    base = small_pipelined(
        micro_batch_size=4,
        gradient_accumulation=8,
        precision="16.16",
        optimiser="adam",
        # pipeline mechanics, not framework defaults: state offloaded, no recomputation
        offload_optimiser_state="on",
        recomputation="off",
    )
    base.update(kw)
    return RunConfig.from_dict(base)


@pytest.fixture(scope="module")
def grouped():
    return engine.compile(cfg())


def test_grouped_stashes_more_than_interleaved(grouped):
    inter = engine.compile(cfg(schedule="interleaved"))

    def stash(c):
        v = c.variables
        return int(np.asarray(v.bytes)[np.asarray(v.kind) == STASH].sum())

    assert stash(grouped) > stash(inter) > 0


def test_offloading_off_removes_remote_copies_and_raises_on_chip_memory(grouped):
    on = execute(grouped)
    off_c = engine.compile(cfg(offload_optimiser_state="off"))
    off = execute(off_c)
    assert (on.steps["dest"] == D_REMOTE).any()
    assert not (off.steps["dest"] == D_REMOTE).any()
    assert off_c.memory.total.sum() > grouped.memory.total.sum()
    assert off.attrs["total_cycles"] < on.attrs["total_cycles"]


def test_compiled_pipeline_phases_follow_the_formula(grouped):
    e = execute(grouped)
    s = e.steps
    S, G = 2, 8
    P = 2 * S - 1
    # one external Sync per row (pipeline cycle) on each IPU; internal syncs are the compiler's
    # (the syncs that close a cycle's ToDeviceStream fragment are not row ends)
    ext = e.nodes["sync"][s["program"]] == code("sync_kind", "external")
    ext &= ~np.char.endswith(e.nodes["name"][s["program"]].astype(str), "toDeviceStream.sync")
    sync0 = (s["ipu"] == 0) & (s["type"] == code("program_type", "Sync")) & ext
    ph = s["phase"][sync0]
    ramp_rows = np.isin(ph, [code("phase", "rampUp"), code("phase", "rampDown")]).sum()
    pipe_rows = np.isin(ph, [code("phase", n) for n in ("rampUp", "main", "rampDown")]).sum()
    assert ramp_rows / pipe_rows == pytest.approx(2 * (P - 1) / (G + P - 1))


def test_stash_shape_counts_elements_of_its_dtype(grouped):
    """A stash's shape is elements of its dtype, so shape x dtype size is its bytes."""
    from engine.compiler.lowering import DTYPE_BYTES

    v = grouped.variables
    kinds = np.asarray(v.kind)
    rows = np.flatnonzero(kinds == STASH)
    assert rows.size
    for i in rows:
        dims = [int(d) for d in str(v.shape[i]).split("x")]
        elems = int(np.prod(dims))
        size = DTYPE_BYTES[str(v.dtype[i])]
        # whole elements: at most one element of padding per stashed micro-batch
        assert int(v.bytes[i]) <= elems * size < int(v.bytes[i]) + dims[0] * size
