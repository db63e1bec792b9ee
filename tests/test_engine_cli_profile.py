"""`analyse profile` and engine.simulate_to_file: profiles written, validated, errors clear."""

from __future__ import annotations

import h5py

import engine
from analyser.cli import main
from profiles import open_profile, validate


def test_profile_from_flags_writes_a_valid_profile(tmp_path, capsys):
    out = tmp_path / "mlp.h5"
    rc = main(
        [
            "profile",
            "-o",
            str(out),
            "--model",
            "mlp",
            "--batch-size",
            "16",
            "--ga",
            "2",
            "--precision",
            "16.16",
            "--quiet",
        ]
    )
    assert rc == 0
    assert validate(out) == []
    p = open_profile(out)
    assert p.status == "ok" and p.has_execution and p.n_steps > 0
    with h5py.File(out, "r") as f:
        assert "execution" in f
        assert f["meta"].attrs["status"] == "ok"


def test_profile_from_toml_with_flag_override(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('model = "mlp"\nmicro_batch_size = 4\n')
    out = tmp_path / "run.h5"
    assert main(["profile", str(cfg), "-o", str(out), "--batch-size", "8", "--quiet"]) == 0
    import json

    with h5py.File(out, "r") as f:
        run_config = json.loads(f["meta"].attrs["run_config"])
    assert run_config["micro_batch_size"] == 8
    assert run_config["model"] == "mlp"


def test_bad_configuration_writes_no_file(tmp_path, capsys):
    out = tmp_path / "bad.h5"
    assert main(["profile", "-o", str(out), "--model", "mlp", "--batch-size", "0"]) == 2
    err = capsys.readouterr().err
    assert "micro_batch_size" in err and "Traceback" not in err
    assert not out.exists()
    assert (
        main(
            [
                "profile",
                "-o",
                str(out),
                "--model",
                "resnet50",
                "--strategy",
                "pipelined",
                "--ipus",
                "2",
                "--split-points",
                "layer7",
                "--ga",
                "4",
            ]
        )
        == 2
    )
    assert "names no layer" in capsys.readouterr().err
    assert not out.exists()


def test_bad_flag_values_give_one_sentence_not_a_usage_dump(tmp_path, capsys):
    out = tmp_path / "bad.h5"
    for flags, words in (
        (["--precision", "8.8"], ["precision", "'16.16'"]),
        (["--optimiser", "rmsprop"], ["optimiser", "'lamb'"]),
        (["--batch-size", "abc"], ["micro_batch_size", "integer"]),
        (["--batch-size", "-1"], ["micro_batch_size", "greater than or equal to 1"]),
        (["--available-memory-proportion", "1.5"], ["available_memory_proportion"]),
    ):
        assert main(["profile", "-o", str(out), "--model", "mlp", *flags]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0, err
        assert "usage:" not in err and "Traceback" not in err
        for word in words:
            assert word in err
        assert not out.exists()


def test_does_not_clobber_a_file_that_is_not_a_profile(tmp_path, capsys):
    out = tmp_path / "notes.h5"
    out.write_text("my notes")
    assert main(["profile", "-o", str(out), "--model", "mlp", "--quiet"]) == 2
    assert "refusing" in capsys.readouterr().err
    assert out.read_text() == "my notes"


def test_out_of_memory_profile_has_memory_and_no_execution(tmp_path):
    cfg = {
        "model": "mlp",
        "micro_batch_size": 64,
        "target_overrides": {"sram_per_tile": 4096, "non_interleaved_bytes_per_tile": 1024},
    }
    out = tmp_path / "oom.h5"
    result = engine.simulate_to_file(cfg, out)
    assert result.oom and result.execution is None
    assert validate(out) == []
    with h5py.File(out, "r") as f:
        assert "execution" not in f
        assert f["meta"].attrs["status"] == "oom"
        assert len(f["memory/oom_tiles"]) > 0
        assert f["memory/total"].shape[1] == 1472
