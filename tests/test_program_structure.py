"""What runs once per host call, once per weight update and once per micro-batch."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from profiles.schema import code

P_HOST = code("phase", "host")
P_UPDATE = code("phase", "weightUpdate")
ON_TILE = code("program_type", "OnTileExecute")
BASE = dict(model="resnet50", image_size=32, micro_batch_size=4, num_classes=10, precision="16.16")


def _steps_of(result, op_type: str) -> np.ndarray:
    """Executed steps of the compute sets of ops of ``op_type``."""
    ex, c = result.execution, result.compiled
    leaf_of_node = np.full(len(ex.nodes["name"]), -1)
    leaf_of_node[ex.leaf_node] = np.arange(len(ex.leaf_node))
    leaf = leaf_of_node[ex.steps["program"]]
    op = np.where(leaf >= 0, c.programs.op[np.maximum(leaf, 0)], -1)
    compute = ex.steps["type"] == ON_TILE
    return np.flatnonzero(compute & (op >= 0) & (c.ops.type[np.maximum(op, 0)] == op_type))


@pytest.fixture(scope="module")
def runs():
    return {
        ga: engine.simulate(dict(BASE, gradient_accumulation=ga, device_iterations=2))
        for ga in (1, 4, 8)
    }


def test_accumulators_are_reset_once_per_weight_update(runs):
    n_weights = int((runs[4].compiled.ops.type == "AccumulatorZero").sum())
    assert n_weights > 0
    assert not (runs[1].compiled.ops.type == "AccumulatorZero").any()  # no accumulators
    for ga in (4, 8):
        r = runs[ga]
        zero = _steps_of(r, "AccumulatorZero")
        acc = _steps_of(r, "AccumulateGrad")
        # per update (2 device iterations), whatever the gradient accumulation
        assert len(zero) == 2 * n_weights
        assert (r.execution.steps["phase"][zero] == P_UPDATE).all()
        # per micro-batch
        assert len(acc) == ga * 2 * n_weights
        assert not (r.execution.steps["phase"][acc] == P_UPDATE).any()


def test_per_update_work_does_not_scale_with_micro_batches(runs):
    def update_cycles(r):
        s = r.execution.steps
        return int(s["cycles"][s["phase"] == P_UPDATE].sum())

    assert update_cycles(runs[8]) == update_cycles(runs[4])


def test_host_call_work_runs_once_per_call(runs):
    # the host wait that opens the call and the final outputs that close it: the same steps
    # whatever the micro-batches per update
    host = {ga: r.execution.steps["phase"] == P_HOST for ga, r in runs.items()}
    assert len({int(h.sum()) for h in host.values()}) == 1
    for ga, r in runs.items():
        s = r.execution.steps
        assert s["phase"][0] == P_HOST and s["start"][0] == 0
        assert int(s["cycles"][host[ga]][1:].sum()) < int(s["cycles"].sum()) // 100
