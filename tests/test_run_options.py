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
    assert options_explaining("ipu_memory") == ("split_points", "num_ipus", "io_tiles")
    assert "precision" in options_explaining("memory")
    assert options_explaining("no such figure") == ()
