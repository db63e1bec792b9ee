"""engine.check: a run configuration checked against its model and target before any work,
one sentence on a problem (the check ``analyse profile`` and the run form make)."""

from __future__ import annotations

import pytest

import engine
from engine.config import RunConfig
from engine.errors import ConfigError
from profiles.errors import UserFacingError


def test_a_good_configuration_passes_and_comes_back_validated():
    result = engine.check({"model": "mlp", "micro_batch_size": 4})
    assert result.ok and result.problem is None
    assert isinstance(result.config, RunConfig) and result.config.micro_batch_size == 4
    assert result.require() is result.config


def test_a_split_point_naming_no_layer_is_one_sentence():
    cfg = {"model": "mlp", "strategy": "sharded", "num_ipus": 2, "split_points": ["nowhere"]}
    result = engine.check(cfg)
    assert not result.ok and result.config is None
    assert "nowhere" in result.problem and "\n" not in result.problem
    assert isinstance(result.error, UserFacingError)


def test_a_bad_option_is_the_field_check_sentence():
    result = engine.check({"model": "mlp", "loss_scaling": 0})
    assert not result.ok and result.problem.startswith("loss_scaling")
    with pytest.raises(ConfigError) as exc:
        result.require()
    assert str(exc.value) == result.problem
