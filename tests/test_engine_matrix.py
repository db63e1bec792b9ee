"""Every target, precision, optimiser, strategy, schedule and host / I/O option simulates.

Small models (the MLP, ResNet-50 at 32 x 32) keep this lean; each run goes through the real
compiler and executor and checks invariants that hold for any configuration: the program fits,
every IPU's timeline is contiguous and ends at the run's last cycle, the input bytes received from
the host are exactly micro-batch x GA x DI x elements x bytes per element, and the run's figures
are consistent (samples, cycles per sample). Bad combinations give one sentence (ConfigError).
"""

from __future__ import annotations

import numpy as np
import pytest

from engine import simulate
from engine.config import RunConfig
from engine.errors import ConfigError
from profiles import schema

HOST = schema.code("destination", "host")
SC_MID = schema.code("program_type", "StreamCopyMid")

SMALL_RESNET = dict(model="resnet50", image_size=32, num_classes=10, micro_batch_size=2)


def _check(cfg: RunConfig):
    result = simulate(cfg)
    assert result.fits, cfg
    data = result.to_profile_data()
    ex, steps = data["/execution"], data["/execution/steps"]
    total = int(ex["total_cycles"])
    n_ipus = cfg.num_ipus * cfg.replication_factor
    ipu = steps["ipu"].astype(np.int64)
    start = steps["start"].astype(np.int64)
    end = start + steps["cycles"].astype(np.int64)
    assert total > 0 and (steps["cycles"] >= 0).all()
    for i in np.unique(ipu):
        sel = ipu == i
        # contiguous: each step starts where the previous one on that IPU ended
        assert (start[sel][1:] == end[sel][:-1]).all()
        assert end[sel].max() == total
    assert len(np.unique(ipu)) == n_ipus or cfg.replication_factor > 1
    # inputs from the host, to stage 0's IPU of replica 0
    io = result.compiled.io
    host_in = (steps["type"] == SC_MID) & (steps["dest"] == HOST) & (ipu == 0)
    per_call = cfg.micro_batch_size * cfg.gradient_accumulation * cfg.device_iterations
    expected = per_call * io.input_bytes_per_sample
    if cfg.num_ipus > 1 or not cfg.training:
        got = int(steps["bytes_in"][host_in].sum())
    else:  # labels arrive on the same (only) IPU
        got = int(steps["bytes_in"][host_in].sum()) - per_call * io.label_bytes_per_sample
    assert got == expected
    assert ex["samples"] == cfg.samples_per_step
    assert ex["cycles_per_sample"] == pytest.approx(total / cfg.samples_per_step)
    return result


@pytest.mark.parametrize("target", ["mk1", "mk2", "bow"])
@pytest.mark.parametrize("precision", ["32.32", "16.32", "16.16"])
def test_every_target_precision_and_optimiser(target, precision):
    for optimiser in ("sgd", "sgd-momentum", "adam", "adamw", "lamb"):
        _check(
            RunConfig(
                model="mlp",
                target=target,
                precision=precision,
                optimiser=optimiser,
                micro_batch_size=4,
                gradient_accumulation=2,
            )
        )


@pytest.mark.parametrize(
    ("strategy", "schedule"),
    [
        ("sharded", "grouped"),
        ("pipelined", "grouped"),
        ("pipelined", "interleaved"),
        ("pipelined", "sequential"),
    ],
)
@pytest.mark.parametrize("mode", ["training", "inference"])
def test_every_strategy_and_schedule(strategy, schedule, mode):
    base = dict(
        SMALL_RESNET,
        strategy=strategy,
        schedule=schedule,
        mode=mode,
        split_points=["layer2", "layer4"],
        num_ipus=3,
        optimiser="adam",
    )
    if mode == "training":
        runs = [
            dict(gradient_accumulation=5),
            dict(gradient_accumulation=5, replication_factor=2, replicated_tensor_sharding=True),
            dict(gradient_accumulation=5, offload_optimiser_state="off"),
            dict(
                gradient_accumulation=5,
                recomputation="checkpoints",
                recompute_checkpoints=["layer1.0", "layer3.1"],
            ),
        ]
        if strategy == "pipelined":
            runs.append(dict(gradient_accumulation=5, recomputation="pipeline-stages"))
    else:
        runs = [dict(device_iterations=4), dict(device_iterations=4, replication_factor=2)]
    for extra in runs:
        _check(RunConfig.from_dict({**base, **extra}))


@pytest.mark.parametrize("mode", ["training", "inference"])
def test_host_io_and_output_options(mode):
    ga = 2 if mode == "training" else 1
    for io_tiles, prefetch, eight_bit, loader, output in [
        (0, 1, False, "sync", "auto"),
        (64, 3, True, "async", "all"),
        (2, 1, True, "async-rebatched", "sum"),
        (0, 3, False, "sync", "final"),
        (64, 1, False, "async", "every-n"),
    ]:
        _check(
            RunConfig.from_dict(
                dict(
                    SMALL_RESNET,
                    mode=mode,
                    gradient_accumulation=ga,
                    device_iterations=4,
                    io_tiles=io_tiles,
                    prefetch_depth=prefetch,
                    eight_bit_input=eight_bit,
                    loader_mode=loader,
                    output_mode=output,
                    output_return_period=2,
                )
            )
        )


def test_bert_pipeline_and_offloaded_accumulators():
    _check(
        RunConfig(
            model="bert-base",
            seq_length=32,
            vocab_size=1000,
            strategy="pipelined",
            split_points=["encoder.layer.6"],
            num_ipus=2,
            gradient_accumulation=3,
            optimiser="lamb",
            precision="16.16",
            micro_batch_size=2,
        )
    )
    _check(
        RunConfig.from_dict(dict(SMALL_RESNET, gradient_accumulation=4, offload_accumulators="on"))
    )


def test_fp32_operands_accumulate_in_float_whatever_the_partials_option():
    from engine import compile

    half = compile(RunConfig(model="mlp", precision="32.32", partials_type="half"))
    flt = compile(RunConfig(model="mlp", precision="32.32", partials_type="float"))
    assert RunConfig(precision="32.32", partials_type="half").partials_dtype == "float32"
    assert RunConfig(precision="16.16", partials_type="half").partials_dtype == "float16"
    assert np.array_equal(half.memory.total, flt.memory.total)
    assert np.array_equal(half.programs.cycles, flt.programs.cycles)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"io_tiles": 738}, ["io_tiles", "736"]),
        ({"target": "mk1", "io_tiles": 610}, ["io_tiles", "608"]),
        ({"target_overrides": {"name": "x"}}, ["target_overrides", "name"]),
        ({"target_overrides": {"sram_per_tile": -1}}, ["sram_per_tile"]),
        ({"recomputation": "pipeline-stages"}, ["recomputation", "pipelined"]),
        ({"recomputation": "checkpoints"}, ["recompute_checkpoints"]),
        ({"output_mode": "every-n", "device_iterations": 4, "output_return_period": 3}, ["4"]),
        (
            {
                "mode": "inference",
                "strategy": "pipelined",
                "split_points": ["layer3"],
                "num_ipus": 2,
            },
            ["device_iterations", "2"],
        ),
        (
            {
                "strategy": "pipelined",
                "schedule": "interleaved",
                "split_points": ["layer2", "layer3"],
                "num_ipus": 3,
                "gradient_accumulation": 4,
            },
            ["gradient_accumulation", ">= 5"],
        ),
        ({"strategy": "sharded", "split_points": ["layer3"]}, ["num_ipus", "2"]),
    ],
)
def test_impossible_configs_give_one_sentence(data, words):
    with pytest.raises(ConfigError) as err:
        RunConfig.from_dict(data)
    msg = str(err.value)
    assert "\n" not in msg and msg.endswith(".")
    for word in words:
        assert word in msg


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"split_points": ["layer3", "layer2"]}, ["model order"]),
        ({"split_points": ["conv1", "layer3"]}, ["first layer"]),
        ({"split_points": ["layer9", "layer3"]}, ["names no layer"]),
    ],
)
def test_split_points_checked_against_the_model(data, words):
    from engine import compile

    cfg = RunConfig.from_dict(
        dict(SMALL_RESNET, strategy="pipelined", num_ipus=3, gradient_accumulation=5, **data)
    )
    with pytest.raises(ConfigError) as err:
        compile(cfg)
    for word in words:
        assert word in str(err.value)


def test_liveness_beyond_two_gib_per_tile_is_capped_not_wrapped(tmp_path):
    from engine import simulate_to_file
    from profiles import validate

    # a few tiles and a large micro-batch: more than 2 GiB of live data per tile
    cfg = RunConfig(model="resnet50", micro_batch_size=1024, target_overrides={"tiles_per_ipu": 16})
    result = simulate_to_file(cfg, tmp_path / "huge.h5")
    lv, mem = result.compiled.liveness, result.compiled.memory
    i32 = np.iinfo(np.int32).max
    assert mem.by_liveness[..., 1].max() > i32  # exact int64 peak per tile
    assert lv.per_tile.rows.min() >= 0 and lv.per_tile.rows.max() == i32  # capped, never negative
    assert (lv.not_always_live >= lv.per_tile.dense().sum(axis=2, dtype=np.int64)).all()
    assert lv.not_always_live.max() > i32
    assert any("capped at 2 GiB" in n for n in result.compiled.notes)
    assert result.oom and validate(tmp_path / "huge.h5") == []
