"""Run configuration and targets: validation messages, TOML round trip, CLI flags."""

from __future__ import annotations

import argparse

import pytest

from analyser.cli.run_flags import add_config_arguments, config_from_args
from engine.config import RunConfig
from engine.errors import ConfigError, TargetError
from engine.targets import TARGET_NAMES, get_target
from tests.run_configs import walkthrough_model


def walkthrough_base(**kw) -> RunConfig:
    return RunConfig.from_dict(
        walkthrough_model(**{"gradient_accumulation": 3, "precision": "32.32", **kw})
    )


def test_toml_round_trip(tmp_path):
    cfg = walkthrough_base(target_overrides={"clock_hz": 1.3e9}, loader_mode="async")
    path = tmp_path / "run.toml"
    path.write_text(cfg.to_toml())
    again = RunConfig.from_toml(path)
    assert again == cfg
    assert again.to_dict() == cfg.to_dict()


def test_every_field_is_documented_with_its_default():
    for name, field in RunConfig.model_fields.items():
        assert field.description, name
        assert "default" in field.description.lower(), name


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"micro_batch_size": -1}, ["micro_batch_size", "greater than or equal to 1"]),
        ({"precision": "8.8"}, ["precision", "'32.32'", "'16.16'"]),
        ({"optimizer": "adam"}, ["optimizer", "not a run option"]),
        ({"model": "vgg"}, ["model", "resnet50"]),
        ({"target": "mk9"}, ["target", "mk1", "mk2", "bow"]),
        ({"target_overrides": {"clock": 1}}, ["target_overrides", "clock_hz"]),
        ({"mode": "inference", "gradient_accumulation": 4}, ["gradient_accumulation", "1"]),
        ({"num_ipus": 2}, ["num_ipus", "single"]),
        ({"io_tiles": 3}, ["io_tiles", "even"]),
        ({"replicated_tensor_sharding": True}, ["replicated_tensor_sharding", "replication"]),
        ({"model": "bert-base", "eight_bit_input": True}, ["eight_bit_input"]),
    ],
)
def test_bad_values_give_one_clear_sentence(data, words):
    with pytest.raises(ConfigError) as err:
        RunConfig.from_dict(data)
    msg = str(err.value)
    assert msg.count("\n") == 0
    for word in words:
        assert word in msg


def test_pipeline_cross_field_checks():
    with pytest.raises(ConfigError, match="gradient_accumulation"):
        walkthrough_base(gradient_accumulation=1)
    with pytest.raises(ConfigError, match="too many"):
        walkthrough_base(num_ipus=3)
    with pytest.raises(ConfigError, match="split_points"):
        walkthrough_base(split_points=[])


def test_split_point_naming_no_layer_is_reported_at_compile():
    import engine

    cfg = walkthrough_base(split_points=["layer9.1"])
    with pytest.raises(ConfigError, match="names no layer"):
        engine.compile(cfg)


def test_split_points_that_leave_a_stage_empty_are_refused():
    """A split point inside the layer the previous one starts (same first operation) left a stage
    with no operations and crashed building its stash (ValueError from an empty min)."""
    import engine

    cfg = RunConfig(
        model="bert-base",
        num_ipus=3,
        strategy="pipelined",
        gradient_accumulation=8,
        split_points=["encoder.layer.1", "encoder.layer.1.attention"],
    )
    with pytest.raises(ConfigError, match="would leave stage 1 empty"):
        engine.compile(cfg)


def test_resolved_options():
    cfg = walkthrough_base(precision="16.16")
    # PopTorch (the default framework) keeps optimiser state on chip (PopART's default location);
    # TensorFlow's pipelining API offloads it when pipelined
    assert not cfg.offload_optimiser
    assert walkthrough_base(precision="16.16", framework="tensorflow").offload_optimiser
    assert cfg.first_moment == "float16" and cfg.second_moment == "float32"
    # partials: PopTorch and PopART leave PopLibs' float unless the run sets them
    assert cfg.partials_dtype == "float32"
    assert walkthrough_base(precision="16.16", framework="popart").partials_dtype == "float32"
    assert walkthrough_base(precision="16.16", partials_type="half").partials_dtype == "float16"
    assert walkthrough_base(precision="16.16", framework="tensorflow").partials_dtype == "float16"
    assert RunConfig().resolved_output_mode == "final"
    assert RunConfig(mode="inference").resolved_output_mode == "all"
    assert cfg.samples_per_step == 64 * 3


def test_cli_flags_override_the_file():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    args = parser.parse_args(
        [
            "--batch-size",
            "8",
            "--precision",
            "16.16",
            "--target-override",
            "clock_hz=1.5e9",
            "--split-points",
            "layer3.8",
            "--no-eight-bit-input",
        ]
    )
    cfg = config_from_args(args, walkthrough_base())
    assert cfg.micro_batch_size == 8
    assert cfg.precision == "16.16"
    assert cfg.split_points == ["layer3.8"]
    assert cfg.target_overrides == {"clock_hz": 1.5e9}
    assert cfg.gradient_accumulation == 3  # from the base


def test_targets_are_validated_data():
    for name in TARGET_NAMES:
        t = get_target(name)
        assert t.tiles_per_ipu > 0 and t.sram_per_tile > 0
        assert t.to_dict()["name"] == name
    mk2 = get_target("GC200")
    assert mk2.tiles_per_ipu == 1472 and mk2.sram_per_tile == 624 * 1024
    assert mk2.peak_flops("float16", "float16") == pytest.approx(249.6e12, rel=0.01)
    assert get_target("mk1").external_sync_cycles(2) == 48
    assert get_target("mk1").external_sync_cycles(16) == 240
    assert get_target("mk2", {"clock_hz": 1.0e9}).clock_hz == 1.0e9
    with pytest.raises(TargetError, match="tiles_per_ipu"):
        get_target("mk2", {"tiles_per_ipu": -1})
