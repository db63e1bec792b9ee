"""The names the analyser gives the profiles it simulates (the GUI's Run engine results):
they tell runs apart by what is set away from the defaults, and are safe file names whatever
the configuration holds."""

from __future__ import annotations

import re

import pytest

from analyser.core.run_options import RUN_NAME_CHARS, run_name
from engine.config import RunConfig

SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]*")


def _cfg(**options) -> dict:
    return RunConfig.from_dict(options).to_dict()


def test_a_run_at_its_defaults_is_its_model_and_ipus():
    assert run_name(_cfg(model="resnet101")) == "resnet101-1ipu"
    sharded = _cfg(model="resnet101", num_ipus=2, strategy="sharded", split_points=["layer3.0"])
    assert run_name(sharded) == "resnet101-2ipu-sharded-splitslayer3.0"


def test_options_away_from_their_defaults_are_named_by_their_short_alias():
    name = run_name(_cfg(model="mlp", micro_batch_size=16, gradient_accumulation=8))
    assert name == "mlp-1ipu-mbs16-ga8"
    assert run_name(_cfg(model="mlp", loader_mode="async", outlining=False)) == (
        "mlp-1ipu-no_outlining-async"
    )
    assert run_name(_cfg(model="mlp", framework="tensorflow")) == "mlp-1ipu-tensorflow"


def test_two_runs_that_differ_get_different_names():
    seen = {
        run_name(
            _cfg(
                model="bert-base",
                num_ipus=2,
                strategy="pipelined",
                split_points=[s],
                gradient_accumulation=8,
            )
        )
        for s in ("encoder.layer.3", "encoder.layer.6", "encoder.layer.9")
    }
    assert len(seen) == 3


def test_long_names_are_cut_at_a_part_and_keep_a_digest():
    cfg = _cfg(
        model="bert-large",
        num_ipus=4,
        strategy="pipelined",
        split_points=["encoder.layer.6", "encoder.layer.12", "encoder.layer.18"],
        available_memory_proportion_per_ipu=[0.1, 0.2, 0.2, 0.2],
        micro_batch_size=4,
        gradient_accumulation=16,
        precision="16.16",
    )
    other = dict(cfg, available_memory_proportion_per_ipu=[0.1, 0.2, 0.2, 0.3])
    a, b = run_name(cfg), run_name(other)
    assert len(a) <= RUN_NAME_CHARS and len(b) <= RUN_NAME_CHARS
    assert a != b and re.search(r"-[0-9a-f]{8}$", a)
    assert a.startswith("bert-large-4ipu-mbs4")


@pytest.mark.parametrize(
    "model",
    ["../../etc/passwd", "/tmp/x/my net.onnx", "..", "a\x00b", "名前", "-rf", ".hidden"],
)
def test_any_model_gives_a_safe_file_name(model):
    name = run_name({"model": model, "num_ipus": 1, "name": "../../x", "micro_batch_size": 2})
    assert SAFE.fullmatch(name), name
    assert "/" not in name and ".." not in name.split("-")[0]
