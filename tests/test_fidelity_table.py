"""The fidelity table's bookkeeping (benchmarks/bench_fidelity.py, assets/runs/reference/).

Checks that every reference run configuration parses and validates against its model, that every
row has its source and configuration, and that errors and ratios are computed from the right
figures. The error values themselves are benchmark output (docs/fidelity.md), not asserted here.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from engine.config import RunConfig
from engine.models import build_model

REPO = Path(__file__).resolve().parent.parent
REF_DIR = REPO / "assets" / "runs" / "reference"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_fidelity", REPO / "benchmarks" / "bench_fidelity.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_fidelity"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_fidelity", None)


@pytest.fixture(scope="module")
def rows(bench):
    return bench.load_rows()


def run_configs() -> list[Path]:
    return sorted(p for p in REF_DIR.glob("*.toml") if p.name != "references.toml")


@pytest.mark.parametrize("path", run_configs(), ids=lambda p: p.stem)
def test_reference_config_parses_and_validates(path, bench, tmp_path):
    config = RunConfig.from_toml(path)
    if config.model.lower().endswith(".onnx"):
        # the ONNX files are generated (benchmarks/tutorial_onnx.py, benchmarks/cnn_onnx.py),
        # not committed
        name = Path(config.model).name
        assert name in bench.tutorial_onnx.MODELS or name in bench.cnn_onnx.MODELS
        copy = tmp_path / path.name
        copy.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
        config = RunConfig.from_toml(copy)
        bench.prepare_model(config, tmp_path)
    config.check_layers(build_model(config).layer_names)
    assert config.name.strip()


def test_every_row_has_a_source_and_a_known_config(bench, rows):
    assert len(rows) >= 8
    configs = {p.name for p in run_configs()}
    for row in rows:
        assert row.source.strip() and row.url.startswith("https://"), row.id
        assert row.configuration.strip() and row.config_source.strip(), row.id
        assert row.figure > 0 and row.units.strip(), row.id
        if row.quantity == "ratio":
            assert row.config is None and len(row.rows) == 2
        else:
            assert row.config in configs, row.id


def test_every_reference_config_is_used_by_a_row(bench, rows):
    used = {row.config for row in rows if row.config}
    used |= {row.config for row in bench.load_memory_rows()}
    assert {p.name for p in run_configs()} == used


def test_table_refuses_rows_without_a_source(bench, tmp_path):
    good = (REF_DIR / "references.toml").read_text(encoding="utf-8")
    bad = tmp_path / "references.toml"
    bad.write_text(re.sub(r'^source = ".*"$', 'source = ""', good, count=1, flags=re.M))
    with pytest.raises(ValueError, match="'source' is missing"):
        bench.load_rows(bad)
    dup = tmp_path / "dup.toml"
    dup.write_text(good.replace('id = "rn50-gmacs"', 'id = "rn50-params"'))
    with pytest.raises(ValueError, match="used twice"):
        bench.load_rows(dup)
    ratio = tmp_path / "ratio.toml"
    ratio.write_text(
        good.replace(
            'rows = ["rn50-bow-pod64", "rn50-bow-pod16"]',
            'rows = ["rn50-params", "rn50-bow-pod16"]',
        )
    )
    with pytest.raises(ValueError, match="not a throughput row"):
        bench.load_rows(ratio)


def test_mechanism_classes_and_the_before_table(bench, rows, tmp_path):
    """Rows name a known mechanism class; every row prints before and after."""
    assert all(r.mechanism in ("", *bench.MECHANISMS) for r in rows)
    good = (REF_DIR / "references.toml").read_text(encoding="utf-8")
    bad = tmp_path / "mech.toml"
    bad.write_text(good.replace('mechanism = "host-bound"', 'mechanism = "luck"', 1))
    with pytest.raises(ValueError, match="mechanism must be one of"):
        bench.load_rows(bad)
    not_json = tmp_path / "before.json"
    not_json.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a JSON table"):
        bench.load_before(not_json)
    before = bench.load_before(bench.BEFORE)
    results = [
        bench.Result(r, bench.Measured(r.figure * 1.1), 10.0) for r in rows if r.quantity != "ratio"
    ]
    text = bench.format_before(results, before, markdown=True)
    lines = text.splitlines()
    assert len(lines) == 2 + len(results)  # every row, with a "-" where the earlier run had none
    assert all("+10.0%" in line for line in lines[2:])


def test_error_and_ratio_bookkeeping(bench, rows):
    """Errors are (engine - reference) / reference; ratios divide the engine's figures of the
    rows they name; a row without an engine figure has no error and spoils its ratios."""
    assert bench.error_pct(110.0, 100.0) == pytest.approx(10.0)
    assert bench.error_pct(75.0, 100.0) == pytest.approx(-25.0)
    assert bench.error_pct(None, 100.0) is None

    fake = {r.id: float(i + 1) * 1000.0 for i, r in enumerate(rows)}
    oom = next(r.id for r in rows if r.quantity == "throughput")

    def fake_measure(row):
        if row.id == oom:
            return bench.Measured(None, note="out of memory")
        return bench.Measured(fake[row.id], device_value=2 * fake[row.id], seconds=0.5)

    results = bench.evaluate(rows, fake_measure)
    assert [r.row.id for r in results] == [r.id for r in rows]
    by_id = {r.row.id: r for r in results}
    for res in results:
        row = res.row
        if row.quantity == "ratio":
            a, b = row.rows
            if oom in row.rows:
                assert res.measured.value is None and res.error_pct is None
                continue
            want = fake[a] / fake[b]
            assert res.measured.value == pytest.approx(want)
            assert res.measured.device_value == pytest.approx(want)
        elif row.id == oom:
            assert res.error_pct is None
            continue
        else:
            assert res.measured.value == fake[row.id]
        assert res.error_pct == pytest.approx(
            (res.measured.value - row.figure) / row.figure * 100.0
        )
    text = bench.format_text(results)
    md = bench.format_markdown(results)
    for row in rows:
        assert row.id in text and f"| {row.id} |" in md
    assert by_id[oom].measured.note in md


def test_select_keeps_the_rows_a_ratio_needs(bench, rows):
    ratio = next(r for r in rows if r.quantity == "ratio")
    picked = {r.id for r in bench.select(rows, [ratio.id])}
    assert picked == {ratio.id, *ratio.rows}
    with pytest.raises(ValueError, match="unknown row"):
        bench.select(rows, ["no-such-row"])


def test_model_rows_measure_in_process(bench, rows):
    """The cheap rows (model facts) go through the same measure() as the benchmark."""
    row = next(r for r in rows if r.quantity == "params")
    got = bench.measure(row)
    assert got.value is not None and got.value > 0 and got.seconds >= 0
