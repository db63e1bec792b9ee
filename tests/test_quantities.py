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
