"""BERT's dropout as poprand runs it: where the ops are, what they save, what they cost."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.compiler.compile_plan import CompilePlan
from engine.compiler.lowering import RANDOM_COMPUTE_SETS, lower
from engine.compiler.plan import random_seed_cycles
from engine.config import RunConfig
from engine.graph import DROPOUT_PASSES
from engine.models import build_model
from engine.targets import get_target

BASE = dict(
    model="bert-base",
    seq_length=32,
    vocab_size=1000,
    strategy="pipelined",
    split_points=["encoder.layer.6"],
    num_ipus=2,
    gradient_accumulation=3,
    precision="16.16",
    micro_batch_size=2,
)


def _graph(**kw):
    return build_model(RunConfig(**{**BASE, **kw}))


def test_dropout_sits_where_hugging_face_puts_it_in_training_only():
    g = _graph()
    names = [str(n) for n, t in zip(g["name"], g["type"]) if t == "Dropout"]
    layers = 12
    assert len(names) == 1 + 3 * layers
    assert names[0] == "embeddings.dropout"
    for i in (0, 11):
        for part in ("attention.self.dropout", "attention.output.dropout", "output.dropout"):
            assert f"encoder.layer.{i}.{part}" in names
    # the heads have none
    assert not any(n.startswith(("cls.", "pooler")) for n in names)
    assert "Dropout" not in set(
        _graph(mode="inference", gradient_accumulation=1, device_iterations=2)["type"].tolist()
    )
    none = _graph(hidden_dropout=0.0, attention_dropout=0.0)
    assert "Dropout" not in set(none["type"].tolist())
    only_attention = _graph(hidden_dropout=0.0)
    assert (only_attention["type"] == "Dropout").sum() == layers
    # the layer list (split points, checkpoints) does not change
    assert g.layer_names == none.layer_names


def test_dropout_saves_nothing_and_feeds_the_next_op():
    g = _graph()
    drop = np.flatnonzero(g["type"] == "Dropout")
    assert not g["saves_input"][drop].any() and not g["saves_output"][drop].any()
    assert (g["passes"][drop] == DROPOUT_PASSES).all()
    assert (g["bwd_passes"][drop] == DROPOUT_PASSES).all()
    names = g["name"].tolist()
    probs = names.index("encoder.layer.0.attention.self.dropout")
    ctx = names.index("encoder.layer.0.attention.self.context")
    assert g["in0"][ctx] == probs
    assert g["out_elems"][probs] == 12 * 32 * 32
    # same trained parameters with and without dropout
    assert g.num_params == _graph(hidden_dropout=0.0, attention_dropout=0.0).num_params


def test_every_random_row_runs_its_seed_programs():
    cfg = RunConfig(**{**BASE, "recomputation": "pipeline-stages"})
    g = build_model(cfg)
    L = lower(g, cfg, CompilePlan.resolve(cfg, get_target("mk2")))
    types = L["type"].astype(str)
    random = np.isin(types, ["Dropout", "DropoutGrad"])
    roles = set(L["role"][random].tolist())
    # the forward, its recomputation (the same mask from the same seed) and the gradient
    assert {"fwd", "recomp", "bwd"} <= roles
    assert (L["compute_sets"][random] == RANDOM_COMPUTE_SETS).all()
    assert (L["random_seeds"][random] == 1).all()
    assert (L["scalar_in"][random] >= 1).all()
    assert (L["random_seeds"][~random] == 0).all()
    n_drop = int((g["type"] == "Dropout").sum())
    assert int((types == "DropoutGrad").sum()) == n_drop


def test_seed_programs_cost_what_poprand_estimates():
    # GetSeeds 14 + 7 w, SetSeed 14 + 27 w, setHwSeeds as GetSeeds
    assert random_seed_cycles(6) == 56 + 176 + 56


@pytest.fixture(scope="module")
def compiled_pair():
    return engine.compile(BASE), engine.compile(dict(BASE, hidden_dropout=0, attention_dropout=0))


def test_dropout_costs_its_seed_programs_and_less_than_a_layer_norm(compiled_pair):
    c, plain = compiled_pair
    ops = c.ops
    total = int(ops.cycles.sum())
    assert total > int(plain.ops.cycles.sum())
    t = c.target
    fixed = random_seed_cycles(int(t.workers_per_tile)) + (RANDOM_COMPUTE_SETS - 1) * int(
        t.internal_sync_cycles
    )
    names = ops.name.tolist()
    layer = "encoder.layer.3.output"
    d = names.index(f"{layer}.dropout/fwd")
    assert fixed < int(ops.cycles[d])
    # the forward, its recomputation and the gradient run the same poprand op
    for suffix in ("recompute", "grad"):
        assert ops.cycles[names.index(f"{layer}.dropout/{suffix}")] == ops.cycles[d]
    # two thirds of a pass over the residual branch: less than the 4-pass layer norm of the
    # same [mb, seq, hidden] tensor on the same tiles
    n = names.index(f"{layer}.LayerNorm/fwd")
    assert ops.tiles_used[n] == ops.tiles_used[d]
    assert int(ops.cycles[d]) - fixed < int(ops.cycles[n])
    # dropout is a small share of a BERT step: element-wise work beside the matmuls
    assert (total - int(plain.ops.cycles.sum())) / total < 0.05


def test_dropped_probabilities_are_kept_for_the_context_matmul(compiled_pair):
    c, plain = compiled_pair
    # without recomputation the context matmul's input (the dropped probabilities) lives
    # beside the softmax output its gradient needs: more bytes, never fewer
    assert int(c.memory.total.sum()) > int(plain.memory.total.sum())
