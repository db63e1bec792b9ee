"""optimum-graphcore's ipu_config.json as run options (engine.ipu_config, ``analyse profile
--ipu-config``), and one available memory proportion per IPU honoured per stage."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analyser.cli import main
from engine import ipu_config
from engine.config import RunConfig
from engine.errors import ConfigError

BERT = {"model": "bert-base", "precision": "16.16", "micro_batch_size": 2}

EVERY_FIELD = {
    "replication_factor": 4,
    "inference_replication_factor": 2,
    "gradient_accumulation_steps": 64,
    "layers_per_ipu": [0, 4, 4, 4],
    "inference_layers_per_ipu": [6, 6],
    "ipus_per_replica": 4,
    "inference_ipus_per_replica": 2,
    "optimizer_state_offchip": True,
    "replicated_tensor_sharding": True,
    "matmul_proportion": [0.1, 0.15, 0.2, 0.25],
    "inference_matmul_proportion": 0.3,
    "enable_half_partials": True,
    "embedding_serialization_factor": 2,
    "inference_embedding_serialization_factor": None,
    "serialized_embedding_splits_per_ipu": None,
    "inference_serialized_embedding_splits_per_ipu": None,
    "projection_serialization_factor": None,
    "inference_projection_serialization_factor": None,
    "serialized_projection_splits_per_ipu": None,
    "inference_serialized_projection_splits_per_ipu": None,
    "recompute_checkpoint_every_layer": True,
    "device_iterations": 2,
    "inference_device_iterations": 8,
    "output_mode": "sum",
    "seed": 42,
    "auto_loss_scaling": False,
    "executable_cache_dir": "./exe_cache",
    "explicit_ir_inference": False,
    "parallelize_kwargs": {},
    "inference_parallelize_kwargs": {},
    "execute_encoder_on_cpu_for_generation": False,
    "optimum_version": "1.6.1",
}


def test_every_field_maps_as_to_options_maps_it():
    assert set(EVERY_FIELD) - {"optimum_version"} == set(ipu_config.DEFAULTS)
    fields = ipu_config.read_ipu_config_dict(EVERY_FIELD)
    opts, note = ipu_config.options_from_ipu_config(fields, BERT)
    assert opts["replication_factor"] == 4
    assert opts["gradient_accumulation"] == 64
    assert opts["device_iterations"] == 2
    assert opts["num_ipus"] == 4 and opts["strategy"] == "pipelined"
    # layers_per_ipu [0, 4, 4, 4]: IPU 0 holds the embeddings only
    assert opts["split_points"] == ["encoder.layer.0", "encoder.layer.4", "encoder.layer.8"]
    assert opts["available_memory_proportion_per_ipu"] == [0.1, 0.15, 0.2, 0.25]
    assert opts["offload_optimiser_state"] == "on"
    assert opts["replicated_tensor_sharding"] is True
    assert opts["partials_type"] == "half"
    assert opts["recomputation"] == "checkpoints"
    assert opts["recompute_checkpoints"] == [f"encoder.layer.{i}" for i in range(12)]
    assert opts["output_mode"] == "sum"
    assert note is not None and "embedding_serialization_factor" in note
    assert "seed" not in note and "executable_cache_dir" not in note
    config = RunConfig.from_dict({**BERT, **opts})  # the options are a valid run
    assert config.amp_per_stage == (0.1, 0.15, 0.2, 0.25)


def test_inference_uses_the_inference_twins():
    opts, _ = ipu_config.options_from_ipu_config(
        ipu_config.read_ipu_config_dict(EVERY_FIELD), {**BERT, "mode": "inference"}
    )
    assert opts["replication_factor"] == 2 and opts["device_iterations"] == 8
    assert opts["num_ipus"] == 2 and opts["strategy"] == "sharded"
    assert opts["split_points"] == ["encoder.layer.6"]
    assert opts["available_memory_proportion"] == 0.3
    assert opts["output_mode"] == "all"  # _to_options: OutputMode.All for inference
    assert "gradient_accumulation" not in opts and "recomputation" not in opts
    RunConfig.from_dict({**BERT, "mode": "inference", **opts})


@pytest.mark.parametrize(
    ("layers", "ipus", "n", "want"),
    [
        ([-1, -1], 2, 9, [4, 5]),  # optimum's own docstring example
        ([-1], 4, 12, [3, 3, 3, 3]),
        ([1, 2, -1, -1], 4, 12, [1, 2, 4, 5]),
        ([2, 3, 4, 3], 4, 12, [2, 3, 4, 3]),
        ([5], 1, 12, [12]),
    ],
)
def test_wildcards_resolve_as_optimum_resolves_them(layers, ipus, n, want):
    assert ipu_config.expand_layers_per_ipu(layers, ipus, n) == want


def test_layer_counts_that_do_not_add_up_are_one_sentence():
    with pytest.raises(ConfigError, match="places 10 layers but the model has 12"):
        ipu_config.expand_layers_per_ipu([2, 3, 3, 2], 4, 12)
    with pytest.raises(ConfigError, match="has 3 entries"):
        ipu_config.expand_layers_per_ipu([4, 4, 4], 4, 12)
    fields = {"layers_per_ipu": [6, 6], "matmul_proportion": [0.2, 0.2, 0.2]}
    with pytest.raises(ConfigError, match="3 values for 2 IPU"):
        ipu_config.options_from_ipu_config(fields, BERT)
    with pytest.raises(ConfigError, match="places 2 layers but the model has"):
        ipu_config.options_from_ipu_config({"layers_per_ipu": [1, 1]}, {"model": "mlp"})
    assert ipu_config.blocks(["stem", "body", "head"]) == []
    assert ipu_config.blocks(["a", "h.0", "h.0.attn", "h.1", "x.0", "h.2"]) == ["h.0", "h.1", "h.2"]


def test_a_field_ipuconfig_does_not_have_is_refused_with_the_close_name(tmp_path):
    path = tmp_path / "ipu_config.json"
    path.write_text(json.dumps({"layers_per_ipus": [6, 6]}))
    with pytest.raises(ConfigError, match="did you mean 'layers_per_ipu'"):
        ipu_config.read_ipu_config(path)


def test_one_proportion_per_ipu_is_honoured_per_stage():
    from engine.compiler import compile_program

    base = dict(
        BERT,
        num_ipus=2,
        strategy="pipelined",
        split_points=["encoder.layer.6"],
        gradient_accumulation=8,
    )

    def peaks(**kw):
        c = compile_program(RunConfig(**base, **kw))
        return (c.memory.total + c.memory.gaps).reshape(2, -1).max(axis=1)

    same = peaks(available_memory_proportion_per_ipu=[0.6, 0.6])
    assert np.array_equal(same, peaks())  # the same proportion twice is the default
    mixed = peaks(available_memory_proportion_per_ipu=[0.6, 0.05])
    low = peaks(available_memory_proportion=0.05)
    assert mixed[0] == same[0]  # IPU 0 keeps its proportion
    assert mixed[1] == low[1]  # IPU 1 plans as if every IPU had 0.05
    assert low[0] < same[0]


def test_per_ipu_proportions_are_checked():
    base = dict(
        BERT,
        num_ipus=2,
        strategy="pipelined",
        split_points=["encoder.layer.6"],
        gradient_accumulation=8,
    )
    with pytest.raises(ConfigError, match="1 value"):
        RunConfig.from_dict({**base, "available_memory_proportion_per_ipu": [0.2]})
    with pytest.raises(ConfigError, match="not a proportion"):
        RunConfig.from_dict({**base, "available_memory_proportion_per_ipu": [0.2, 1.5]})
    with pytest.raises(ConfigError, match="not both"):
        RunConfig.from_dict(
            {
                **base,
                "available_memory_proportion_per_ipu": [0.2, 0.3],
                "available_memory_proportion": 0.2,
            }
        )


def test_the_cli_profiles_from_an_ipu_config(tmp_path, capsys):
    cfg = tmp_path / "ipu_config.json"
    cfg.write_text(
        json.dumps(
            {
                "layers_per_ipu": [6, 6],
                "matmul_proportion": [0.2, 0.3],
                "gradient_accumulation_steps": 16,
                "embedding_serialization_factor": 4,
            }
        )
    )
    out = tmp_path / "bert.h5"
    argv = [
        "profile",
        "--ipu-config",
        str(cfg),
        "--model",
        "bert-base",
        "--precision",
        "16.16",
        "--micro-batch-size",
        "2",
        "-o",
        str(out),
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "embedding_serialization_factor" in err
    from profiles import open_profile

    with open_profile(out) as p:
        rc = p.run_config
    assert rc["split_points"] == ["encoder.layer.6"]
    assert rc["available_memory_proportion_per_ipu"] == [0.2, 0.3]
    assert rc["gradient_accumulation"] == 16
    # a flag overrides the IPU config
    assert main([*argv[:-2], "--gradient-accumulation", "32", "--print-config"]) == 0
    assert "gradient_accumulation = 32" in capsys.readouterr().out


def test_the_hostile_ipu_configs_are_one_sentence(tmp_path, capsys):
    import hostile

    hostile.assert_one_sentence_each(hostile.ipu_config_cases(tmp_path), capsys)
    assert not any(p.suffix == ".h5" for p in tmp_path.iterdir())
