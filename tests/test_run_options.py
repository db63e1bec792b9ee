"""Run-option metadata names only RunConfig fields and gives every option a section."""

from __future__ import annotations

from analyser.core.run_options import EXPLAINS, OPTIONS, SECTION_STARTS, options_explaining
from engine.config import RunConfig


def test_metadata_names_run_config_fields():
    fields = list(RunConfig.model_fields)
    assert set(EXPLAINS) <= set(fields) and set(SECTION_STARTS) <= set(fields)
    assert list(OPTIONS) == fields
    assert fields[0] in SECTION_STARTS  # every option falls in a section
    assert {o.section for o in OPTIONS.values()} == set(SECTION_STARTS.values())


def test_sections_follow_the_model_order_and_reasons_keep_their_order():
    assert OPTIONS["gradient_accumulation"].section == "Batch"
    assert OPTIONS["loader_workers"].section == "Host I/O and data loader"
    assert options_explaining("ipu_memory") == (
        "split_points",
        "num_ipus",
        "available_memory_proportion_per_ipu",
        "io_tiles",
    )
    assert "precision" in options_explaining("memory")
    assert options_explaining("no such figure") == ()


# -- the stored run configuration read as RunConfig (typed, versioned, tolerant) -----------------
def _synthetic(tmp_path, name, **meta):
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    data = make_synthetic_profile(n_steps=400, n_ipus=1, tiles=16, n_programs=40, seed=5)
    for key, value in meta.items():
        if value is None:
            data["/meta"].pop(key, None)
        else:
            data["/meta"][key] = value
    path = tmp_path / f"{name}.h5"
    write_profile(path, data)
    return path


def test_synthetic_profile_stores_run_config_fields_only(tmp_path):
    from analyser.core import Analysis
    from engine.config import RunConfig
    from profiles.schema import RUN_CONFIG_VERSION

    with Analysis.open(_synthetic(tmp_path, "syn")) as a:
        assert set(a.run_config) <= set(RunConfig.model_fields)
        assert a.stored_run_config.version == RUN_CONFIG_VERSION and not a.stored_run_config.note
        assert isinstance(a.options, RunConfig)
        assert a.options.strategy == "single" and a.options.gradient_accumulation == 8
        assert a.options.loss_scaling == RunConfig.model_fields["loss_scaling"].default


def test_future_and_foreign_options_are_ignored_and_named(tmp_path, capsys):
    """A newer engine's option and a foreign key: the profile opens, the known options read
    typed, the others are named in one sentence (summary's caveat), no traceback."""
    from analyser.cli import main
    from analyser.core import Analysis
    from profiles.synthetic import make_synthetic_profile

    rc = dict(
        make_synthetic_profile(n_steps=50, n_ipus=1, tiles=8, n_programs=10)["/meta"]["run_config"]
    )
    rc.update({"quantum_tiles": 7, "comment": "hand-written"})
    path = _synthetic(tmp_path, "future", run_config=rc, run_config_version=2)
    with Analysis.open(path) as a:
        stored = a.stored_run_config
        assert stored.ignored == ("quantum_tiles", "comment")
        assert "quantum_tiles, comment" in stored.note and "version 2" in stored.note
        assert not hasattr(a.options, "quantum_tiles") and a.options.micro_batch_size == 16
    assert main(["summary", str(path)]) == 0
    out = capsys.readouterr()
    assert "quantum_tiles" in out.out and "Traceback" not in out.out + out.err


def test_profile_without_run_config_version_reads_as_version_1(tmp_path):
    """A format 1.2 profile (before run_config_version) opens, validates, reads as version 1."""
    import h5py

    from analyser.core import Analysis
    from profiles import validate

    path = _synthetic(tmp_path, "old")
    with h5py.File(path, "a") as f:
        del f["meta"].attrs["run_config_version"]
        f.attrs["format_version"] = "1.2"
    assert not validate(path)
    with Analysis.open(path) as a:
        assert a.stored_run_config.version == 1 and a.options.strategy == "single"


def test_unusable_stored_option_or_version_is_one_sentence(tmp_path, capsys):
    from analyser.cli import main

    bad_value = _synthetic(tmp_path, "bad", run_config={"model": "mlp", "micro_batch_size": "many"})
    assert main(["summary", str(bad_value)]) == 2
    err = capsys.readouterr().err
    assert "micro_batch_size" in err and "Traceback" not in err
    bad_version = _synthetic(tmp_path, "badv", run_config_version=0)
    assert main(["summary", str(bad_version)]) == 2
    err = capsys.readouterr().err
    assert "run_config_version" in err and "Traceback" not in err
