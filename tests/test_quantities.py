"""The catalogue of quantities covers every key figure, once, with a valid kind and direction."""

from __future__ import annotations

import dataclasses

import pytest

from analyser.core.analysis import Metrics
from analyser.core.quantities import FORMATTERS, QUANTITIES, Quantity, step_type_name


def test_every_scalar_metric_is_declared_once():
    scalar = {
        f.name
        for f in dataclasses.fields(Metrics)
        if f.name not in ("file", "model", "status", "fits", "ipus")
    }
    assert set(QUANTITIES) == scalar
    for key, q in QUANTITIES.items():
        assert q.key == key and q.kind in FORMATTERS and q.better in (None, "lower", "higher")
        assert q.label and q.title[0].isupper()


def test_formats_and_directions():
    assert QUANTITIES["cycles_per_sample"].format(1234.56) == "1,234.6"
    assert QUANTITIES["peak_memory_bytes"].format(3 * 2**20) == "3.00 MiB"
    assert QUANTITIES["compute_share"].format(0.5) == "50.0%"
    assert QUANTITIES["oom_tiles"].format(None) == "-"
    assert QUANTITIES["throughput_samples_per_s"].higher_is_better is True
    assert QUANTITIES["total_cycles"].higher_is_better is False
    assert QUANTITIES["samples"].higher_is_better is None
    with pytest.raises(ValueError):
        Quantity("x", "x", "furlongs", None)
    assert step_type_name(3) == "OnTileExecute" and step_type_name(999) == "999"


def test_one_set_of_formatters_one_missing_mark_one_new_wording():
    """CLI, reports and GUI share analyser.core.units: None and NaN are MISSING everywhere, a
    change from zero is NEW, bytes follow the units preference."""
    from analyser.core import units

    nan = float("nan")
    for fmt in (units.fmt_bytes, units.fmt_int, units.fmt_count, units.fmt_pct, units.fmt_rate):
        assert fmt(None) == units.MISSING and fmt(nan) == units.MISSING
    assert units.fmt_delta_pct(0, 5) == units.NEW == "new"
    assert units.fmt_change(0, 5) == "+5 (new)"
    assert units.fmt_change(None, 5) == units.MISSING
    assert units.fmt_change(2 * 2**20, 3 * 2**20, "KiB") == "+1.00 MiB (+50.0%)"
    assert units.fmt_change(2000, 1000, units.MemoryUnits.KB) == "-1.00 kB (-50.0%)"
    assert units.fmt_change(7, 7) == "0" and units.fmt_change(7, 7, "bytes") == "0 B"
    assert units.fmt_bytes(1_234_567, units.MemoryUnits.BYTES) == "1,234,567 B"
    assert units.fmt_bytes(1_234_567, "kB") == "1.23 MB"
    assert units.fmt_pts_delta(0.5, 0.515) == "+1.5 pts"
    # a change too small to show reads +0.0, never "-0.0" (seen in the Pipeline compare table)
    assert units.fmt_pts_delta(0.5, 0.49999) == "+0.0 pts"
    assert units.fmt_delta_pct(100, 99.99) == "+0.0%" and units.fmt_delta_pct(100, 99.9) == "-0.1%"
    assert QUANTITIES["peak_memory_bytes"].format(2**20, units.MemoryUnits.KB) == "1.05 MB"


def test_table_columns_and_chart_series_are_declared_in_the_catalogue():
    """Every GUI table column comes from TABLES with a formatter for its kind; bytes columns
    follow the memory units; the charts' series name palette groups of the GUI."""
    import json
    from importlib import resources

    from analyser.core.quantities import SERIES, TABLES, columns
    from analyser.core.units import NEW, MemoryUnits

    for table, declared in TABLES.items():
        for key, column in declared.items():
            assert column.key == key and column.title, (table, key)
            assert column.better in (None, "lower", "higher")
    cols = {k: (title, fmt) for k, title, fmt in columns("programs", MemoryUnits.KB)}
    assert cols["bytes"][1](2_000_000) == "2.00 MB"
    assert cols["tile_balance"][1](0.25) == "25.0%"
    assert cols["name"][1] is None
    compared = {k: fmt for k, _title, fmt in columns("operations_compared")}
    assert compared["total_cycles_rel"](float("inf")) == NEW
    assert compared["total_cycles_delta"](-1234) == "-1,234"
    assert [k for k, *_ in columns("variables", keys=("name", "bytes"), name="Name")] == [
        "name",
        "bytes",
    ]
    palette = json.loads(resources.files("assets").joinpath("palette.json").read_text())
    for series in SERIES.values():
        assert series.palette in palette and series.unit in ("cycles", "bytes")
        for name in series.names:
            assert name in palette[series.palette], (series.key, name)
