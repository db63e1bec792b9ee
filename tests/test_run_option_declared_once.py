"""A run option is declared once, on its RunConfig field: a new field with metadata appears in
the command-line flags, the run form, tune's space and the explained comparison, with the bounds
the field declares (and nowhere is a value offered that RunConfig refuses)."""

from __future__ import annotations

import argparse

import pytest
from pydantic import Field

import engine.config
from analyser.cli.run_flags import add_config_arguments, config_from_args
from analyser.core import run_options
from analyser.sim.tune import space
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.run_option import option


class WithDither(RunConfig):
    """RunConfig plus one option declared the documented way (docs/design.md's recipe)."""

    dither: float = Field(
        0.5,
        gt=0,
        le=2,
        description="A test option that only this test declares. Default 0.5.",
        json_schema_extra=option(
            section="Dither",
            aliases=("dz",),
            explains=("memory", "host_wait"),
            explain_rank=55,
            tune=(0.25, 1.0),
            lever_rank=5,
        ),
    )


@pytest.fixture
def dither_model(monkeypatch):
    """WithDither in place of RunConfig wherever the analyser looks the model up at call time."""
    monkeypatch.setattr(engine.config, "RunConfig", WithDither)
    monkeypatch.setattr(run_options, "OPTIONS", run_options.options_of(WithDither))
    return WithDither


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t")
    add_config_arguments(parser, model=WithDither)
    return parser


def test_the_command_line_has_the_flag_its_alias_and_its_bounds():
    parser = _parser()
    assert "A test option that only this test declares." in parser.format_help()
    cfg = config_from_args(parser.parse_args(["--dz", "1.5"]), model=WithDither)
    assert cfg.dither == 1.5
    assert config_from_args(parser.parse_args(["--dither", "2"]), model=WithDither).dither == 2
    for bad in ("0", "2.5"):  # gt=0 and le=2, from the field
        with pytest.raises(ConfigError, match="dither"):
            config_from_args(parser.parse_args(["--dither", bad]), model=WithDither)


def test_the_run_form_has_its_section_and_offers_only_accepted_values(qtbot, dither_model):
    from analyser.gui.run_dialog import FieldEditor, RunEngineDialog

    dialog = RunEngineDialog()
    qtbot.addWidget(dialog)
    assert dialog._section_of["dither"] == "Dither" and "Dither" in dialog.section_labels
    assert dialog.editors["dither"].widget.maximum() == 2
    assert dialog.config()["dither"] == 0.5
    opts = run_options.options_of(WithDither)
    assert opts["dither"].section == "Dither"
    assert opts["dither"].bounds == {"gt": 0, "le": 2}
    editor = FieldEditor("dither", WithDither.model_fields["dither"])
    qtbot.addWidget(editor.widget)
    assert editor.kind == "float" and editor.value() == 0.5
    lo, hi = editor.widget.minimum(), editor.widget.maximum()
    assert lo > 0 and hi == 2
    for value in (lo, hi):  # both ends of what the form offers are configurations
        assert WithDither.from_dict({"dither": value}).dither == value
    # the same holds for the shipped options with an exclusive bound (loss_scaling > 0)
    loss = FieldEditor("loss_scaling", RunConfig.model_fields["loss_scaling"])
    qtbot.addWidget(loss.widget)
    assert RunConfig.from_dict({"loss_scaling": loss.widget.minimum()}).loss_scaling > 0


def test_tune_varies_it_by_alias_with_its_values_and_bounds(dither_model):
    assert space.option_aliases()["dz"] == "dither"
    assert space.levers()[:2] == ("precision", "dither")  # lever_rank 5: after precision's 0
    start = WithDither().to_dict()
    assert space.lever_values("dither", start, {}) == [0.5, 0.25, 1.0]
    dim = space.parse_vary("dz=0.5,2", start)
    assert (dim.name, dim.values) == ("dither", [0.5, 2.0])
    for bad in ("0", "3"):
        with pytest.raises(space.TuneError, match="dither must be"):
            space.parse_vary(f"dither={bad}", start)
    built = space.build_space(start, [], [], "throughput")
    assert "dither" in [d.name for d in built.dims]


def test_the_comparison_explains_with_it_in_its_rank(dither_model):
    memory = run_options.options_explaining("memory")
    assert memory.index("precision") < memory.index("dither") < memory.index("micro_batch_size")
    assert "dither" in run_options.options_explaining("host_wait")
    assert "dither" not in run_options.options_explaining("allreduce")


def test_the_shipped_tables_are_generated_from_the_fields():
    # one alias table: every short name tune accepts is a flag, and the other way round
    aliases = space.option_aliases()
    flags = {a for names in run_options.OPTIONS.values() for a in names.aliases}
    assert set(aliases) == flags
    assert {"ga", "di", "batch_size", "micro_batch", "replicas", "ipus", "amp"} <= flags
    parser = argparse.ArgumentParser(prog="t")
    add_config_arguments(parser)
    for alias, name in aliases.items():
        ns, _ = parser.parse_known_args(["--" + alias.replace("_", "-"), "1"])
        assert hasattr(ns, name)
    # tune's precision values are the precisions RunConfig allows
    from typing import get_args

    precision = run_options.OPTIONS["precision"]
    assert set(precision.tune) == set(get_args(RunConfig.model_fields["precision"].annotation))
    assert {"balance_compute_sets"} == run_options.WHAT_IF
