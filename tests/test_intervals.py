"""Intervals on predictions: the calibrated split-conformal ranges (80%, each source held out;
analyser.core.intervals_calibration) on hand-made error tables, changes from paired evidence,
the outside-range sentence, memory statements, the stored-errors file validated like any input,
and a range present and ordered (low <= value <= high) with its level, or the outside-range
sentence, on every predicted figure of the insights' effects, comparisons, reports, summary
and tune results."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from analyser.core import Analysis, intervals
from analyser.core.intervals import ErrorsFileError, ErrorTable, Features

REPO = Path(__file__).resolve().parent.parent

#: Features of a device-bound run of 1 IPU, of a host-bound one with short calls.
DEV1 = {"ipus": 1, "replicas": 1, "host_load": 0.0, "host_overlapped": True}
DEV1.update(small_conv_share=0.0, call_share=0.0)
HOST1 = dict(DEV1, host_load=5.0, host_overlapped=False)
ERRS = (0.02, -0.05, 0.08, 0.0, 0.11, -0.02, 0.04)


def _rows(feature_sets: list[dict], sources: int = 5, per: int = 2) -> list[dict]:
    """Per source, ``per`` configurations of each feature set, with varied errors: every class
    set gets sources x per points and same-source pairs between every two sets."""
    out, k = [], 0
    for s in range(sources):
        for j, f in enumerate(feature_sets):
            for c in range(per):
                e = ERRS[k % len(ERRS)] * (1 + j)
                k += 1
                out.append(
                    {
                        "id": f"r{s}-{j}-{c}",
                        "mechanism": "device-at-scale",
                        "quantity": "throughput",
                        "error": e,
                        "features": dict(f),
                        "config": f"c{s}-{j}-{c}.toml",
                        "source": f"source {s}",
                    }
                )
    return out


def _doc(rows: list[dict], memory: list[dict] | None = None) -> dict:
    d = {
        "schema": intervals.SCHEMA,
        "schema_version": intervals.SCHEMA_VERSION,
        "commit": "test",
        "measured": "2026-11-26T00:00:00Z",
        "rows": rows,
    }
    if memory is not None:
        d["memory"] = memory
    return d


def _table(rows: list[dict], memory: list[dict] | None = None) -> ErrorTable:
    return intervals.parse_errors(json.loads(json.dumps(_doc(rows, memory))), "test")


HAND = _table(_rows([DEV1, HOST1]))


def _features(d: dict) -> Features:
    return Features(**d)


@pytest.fixture
def full_errors(tmp_path, monkeypatch, profiles):
    """The interval model reads a table whose rows have the features of the test profiles
    (and of a device-bound run, for device-only figures), through ANALYSE_FIDELITY_ERRORS as a
    user would: every figure of them gets a range."""
    sets = [dict(DEV1)]
    for name in ("sync", "async"):
        with Analysis.open(profiles[name]) as a:
            f = intervals.features_of(a)
        sets.append({k: getattr(f, k) for k in DEV1})
    path = tmp_path / "errors.json"
    path.write_text(json.dumps(_doc(_rows(sets))))
    monkeypatch.setenv(intervals.ERRORS_ENV, str(path))
    return path


@pytest.fixture
def thin_errors(tmp_path, monkeypatch):
    """A table whose only rows are device-bound runs of 64 IPUs: the test profiles (1 IPU,
    host-bound) lie outside it."""
    far = dict(DEV1, ipus=64, replicas=64)
    path = tmp_path / "thin.json"
    path.write_text(json.dumps(_doc(_rows([far]))))
    monkeypatch.setenv(intervals.ERRORS_ENV, str(path))
    return path


def _ordered(d: dict) -> bool:
    """An interval object is well formed: a range around the value with its level, or no range
    and the sentence saying why (outside the validated range, or a memory statement)."""
    assert set(d) >= {"value", "low", "high", "level", "outside_reason", "classes", "rows"}
    if d["low"] is None or d["high"] is None:
        assert d["low"] is None and d["high"] is None and d["level"] is None and d["note"]
        assert d["outside_reason"] or d.get("memory"), d
        return False
    assert d["value"] is not None and d["low"] <= d["value"] <= d["high"], d
    assert d["level"] == intervals.LEVEL and d["outside_reason"] is None, d
    return True


# -- the model on a hand-made table --------------------------------------------------------------
def test_absolute_range_rate_and_time_say_their_level():
    f = _features(DEV1)
    thr = intervals.absolute("throughput_samples_per_s", 1000.0, f, HAND)
    assert thr.available and thr.level == 0.8 and thr.classes == ("device-at-scale",)
    assert thr.rows == 10 and thr.low <= 1000.0 <= thr.high
    text = intervals.range_text(thr.to_dict(), lambda v: f"{v:.0f}")
    assert text.startswith("80% range ") and text == f"80% range {thr.low:.0f} to {thr.high:.0f}"
    # cycles move the other way: a rate range [v / e^hi, v / e^lo] is a time range [v e^lo, ...]
    cyc = intervals.absolute("cycles_per_sample", 1000.0, f, HAND)
    assert cyc.low == pytest.approx(1000.0**2 / thr.high)
    assert cyc.high == pytest.approx(1000.0**2 / thr.low)
    # the same range as intervals_calibration's, computed on the table's points
    from analyser.core import intervals_calibration as cal

    c = cal.calibrate(HAND.points, ("device-at-scale",))
    assert (thr.low, thr.high) == pytest.approx(c.rate(1000.0))


def test_outside_the_validated_range_says_why():
    mem = intervals.absolute("peak_memory_bytes", 1.0, _features(DEV1), HAND)
    assert not mem.available and mem.note.startswith("outside the validated range: no reference")
    unknown = intervals.absolute("throughput_samples_per_s", 1000.0, Features(), HAND)
    assert not unknown.available and "could not be read" in unknown.note
    # a class set with no rows (collectives across Pods) and an IPU count far from the rows'
    pods = _features(dict(DEV1, ipus=256, replicas=256))
    iv = intervals.absolute("throughput_samples_per_s", 1000.0, pods, HAND)
    assert iv.note.startswith("outside the validated range: 0 reference configurations")
    big = _features(dict(DEV1, ipus=16, replicas=1))
    iv = intervals.absolute("throughput_samples_per_s", 1000.0, big, HAND)
    assert iv.outside_reason == "16 IPUs, the reference configurations of its class use 1"
    d = iv.to_dict()
    assert d["level"] is None and d["outside_reason"] and d["low"] is None
    assert intervals.range_text(d) == f"outside the validated range: {d['outside_reason']}"
    assert intervals.describe_change(d).startswith("(outside the validated range: ")


def test_a_micro_batch_or_input_size_far_from_the_rows_is_outside_the_validated_range():
    """The rows (micro-batch 16, 3 x 224 x 224 images) vouch for a prediction up to 4x away
    from their range in micro-batch and input size; beyond it, the sentence names the size."""
    sized = dict(DEV1, micro_batch=16, sample_elems=150_528)
    table = _table(_rows([sized]))
    near = intervals.absolute(
        "throughput_samples_per_s", 1000.0, _features(dict(sized, micro_batch=64)), table
    )
    assert near.available
    tiny = _features(dict(sized, micro_batch=2))
    iv = intervals.absolute("throughput_samples_per_s", 1000.0, tiny, table)
    assert iv.outside_reason == (
        "2 samples per micro-batch, the reference configurations of its class use 16"
    )
    huge = _features(dict(sized, sample_elems=3 * 1024 * 1024))
    iv = intervals.absolute("throughput_samples_per_s", 1000.0, huge, table)
    assert iv.outside_reason == (
        "3,145,728 input elements per sample, the reference configurations of its class use 150,528"
    )
    # a change into a size the rows do not cover has no range either
    ch = intervals.relative(
        "throughput_samples_per_s", 1000.0, 900.0, _features(sized), tiny, table
    )
    assert ch.low is None and "samples per micro-batch" in ch.note
    # a size the prediction does not know is not compared (an older profile)
    unknown = intervals.absolute(
        "throughput_samples_per_s", 1000.0, _features(dict(sized, micro_batch=None)), table
    )
    assert unknown.available


def test_a_null_predicted_change_in_a_class_with_paired_evidence_has_a_nonzero_range():
    """The change's range comes from how the errors move between paired configurations of one
    source, never from the size of the engine's predicted change."""
    dev, host = _features(DEV1), _features(HOST1)
    for key in ("throughput_samples_per_s", "cycles_per_sample"):
        null = intervals.relative(key, 100.0, 100.0, dev, dev, HAND)
        assert null.value == 0.0 and null.low < 0.0 < null.high and null.level == 0.8
        big = intervals.relative(key, 100.0, 186.0, dev, dev, HAND)
        # the same log range around any predicted ratio: not scaled by the effect
        assert math.log1p(big.high) - math.log1p(big.value) == pytest.approx(math.log1p(null.high))
        assert math.log1p(big.value) - math.log1p(big.low) == pytest.approx(-math.log1p(null.low))
    # between two classes paired in the same sources: a range from those pairs
    cross = intervals.relative("throughput_samples_per_s", 100.0, 150.0, host, dev, HAND)
    assert cross.available and cross.classes_after == ("device-at-scale",)
    assert cross.low <= 0.5 <= cross.high
    note = intervals.change_note(cross.to_dict())
    assert note.startswith("80% range") and "not from the predicted change" in note
    assert intervals.describe_change(cross).startswith("(80% range ")
    # no pairs between the classes: outside, not a zero-width range
    pods = _features(dict(DEV1, ipus=256, replicas=256))
    none = intervals.relative("throughput_samples_per_s", 100.0, 100.0, dev, pods, HAND)
    assert not none.available and none.note.startswith("outside the validated range: 0 paired")


def test_memory_statement_is_one_sided_or_says_no_evidence():
    dev = _features(DEV1)
    kib = 1024.0
    none = intervals.memory_statement(dev, True, 500 * kib, 624 * kib, HAND)
    assert none["statement"].startswith("no memory evidence") and none["bound"] is None
    # published fits, the engine's fullest tile at 50% .. 80% of tile memory: the real tile is
    # at most 1.25 .. 2 x the engine's
    facts = [
        {"id": f"m{i}", "fits": True, "peak_tile_bytes": s * 624 * kib, "sram_per_tile": 624 * kib}
        | {"features": dict(DEV1), "source": f"s{i}"}
        for i, s in enumerate((0.5, 0.6, 0.7, 0.8, 0.75))
    ]
    t = _table(_rows([DEV1]), facts)
    small = intervals.memory_statement(dev, True, 200 * kib, 624 * kib, t)
    assert small["side"] == "at most" and small["level"] == 0.8 and small["facts"] == 5
    assert small["statement"].startswith("fits: fullest tile at most")
    assert 200 * kib <= small["bound"] <= 200 * kib / 0.5  # within the facts' spread
    full = intervals.memory_statement(dev, True, 600 * kib, 624 * kib, t)
    assert full["statement"].startswith("fit not established")
    # an out-of-memory prediction needs published out-of-memory facts: none here
    oom = intervals.memory_statement(dev, False, 900 * kib, 624 * kib, t)
    assert oom["statement"].startswith("no memory evidence that decides it: 0 published")
    # another class: no evidence
    other = intervals.memory_statement(_features(dict(DEV1, small_conv_share=0.9)), True, 1, 2, t)
    assert other["statement"].startswith("no memory evidence") and other["facts"] == 0


def test_classify_features():
    assert intervals.classify(Features()) == ("device-at-scale",)
    assert intervals.classify(Features(ipus=128, replicas=128)) == ("collectives-across-pods",)
    assert intervals.classify(Features(ipus=128, replicas=1)) == ("device-at-scale",)
    sync = Features(host_load=0.1, host_overlapped=False)
    assert intervals.classify(sync) == ("host-bound",)
    assert intervals.classify(sync, host_inclusive=False) == ("device-at-scale",)
    assert intervals.classify(Features(host_load=0.1, host_overlapped=True)) == ("device-at-scale",)
    assert intervals.classify(Features(host_load=0.5, host_overlapped=True)) == ("host-bound",)
    both = Features(host_load=5.0, host_overlapped=False, small_conv_share=0.75)
    assert intervals.classify(both) == ("small-feature-maps", "host-bound")
    # short calls: the per-call host cost at least 5% of the device's time per call
    short = Features(call_share=0.2)
    assert intervals.classify(short) == ("short-calls",)
    assert intervals.classify(short, host_inclusive=False) == ("device-at-scale",)
    assert intervals.classify(Features(call_share=0.01)) == ("device-at-scale",)
    assert intervals.call_share(
        {"host_model": json.dumps({"call_overhead_us": 150.0, "device_ms_per_call": 1.5})}
    ) == pytest.approx(0.1)
    assert intervals.call_share({}) is None


def test_small_conv_share_from_flattened_shapes():
    ops = pd.DataFrame(
        {
            # a 2 x 2 map, 64 -> 64 channels, 3 x 3, micro-batch 64: 256 positions < 1,472 tiles;
            # a 32 x 32 map with 64 channels: 65,536 positions; a matmul; a backward conv
            "type": ["Conv", "Conv", "MatMul", "ConvGradInput"],
            "pass": [0, 0, 0, 1],
            "flops": [2 * 64 * 4 * 64 * 576, 2 * 64 * 1024 * 64 * 576, 1_000_000, 10**12],
        }
    )
    var = pd.DataFrame(
        {
            "op": [0, 0, 1, 1, 2],
            "kind": [1, 0, 1, 0, 1],
            "shape": ["64x256", "36864", "64x65536", "36864", "64x10"],
        }
    )
    small = 2 * 64 * 4 * 64 * 576
    total = small + 2 * 64 * 1024 * 64 * 576 + 1_000_000
    assert intervals.small_conv_share(ops, var, 1472) == pytest.approx(small / total)
    # few output channels: 5 and 12 channels on large maps (the PopTorch tutorial's CNN)
    few = pd.DataFrame({"type": ["Conv"], "pass": [0], "flops": [2 * 16 * 79380 * 9]})
    fvar = pd.DataFrame({"op": [0, 0], "kind": [1, 0], "shape": ["16x79380", "50"]})
    assert intervals.small_conv_share(few, fvar, 1472) == pytest.approx(1.0)


# -- the stored errors: validated like any input ------------------------------------------------
def test_shipped_errors_load_and_agree_with_the_reference_table():
    table = intervals.load_errors(intervals.DEFAULT_ERRORS)
    assert table.commit and table.rows
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_fidelity

    declared = {r.id: r.mechanism for r in bench_fidelity.load_rows()}
    for r in table.rows:  # stale rows would be a table measured on another reference list
        assert declared.get(r.id) == r.mechanism, r.id
    assert {r.mechanism for r in table.rows} <= set(intervals.MECHANISMS)


def _bad(**edit):
    d = _doc(_rows([DEV1]))
    d["rows"][0]["error"] = 0.02
    d.update(edit)
    return json.dumps(d)


BAD = {
    "not json": "{",
    "nan": _bad().replace('"error": 0.02', '"error": NaN'),
    "wrong schema": _bad(schema="something-else"),
    "future major": _bad(schema_version="2.0"),
    "no rows": _bad(rows=[]),
    "unknown mechanism": _bad(rows=[{"id": "x", "mechanism": "magic", "quantity": "throughput"}]),
    "error below -100%": _bad(
        rows=[{"id": "x", "mechanism": "device-at-scale", "quantity": "throughput", "error": -1.5}]
    ),
    "text error": _bad(
        rows=[{"id": "x", "mechanism": "device-at-scale", "quantity": "throughput", "error": "big"}]
    ),
    "duplicate id": _bad(
        rows=[
            {"id": "x", "mechanism": "device-at-scale", "quantity": "throughput", "error": 0.1},
            {"id": "x", "mechanism": "device-at-scale", "quantity": "throughput", "error": 0.1},
        ]
    ),
    "text features": _bad(
        rows=[
            {
                "id": "x",
                "mechanism": "device-at-scale",
                "quantity": "throughput",
                "features": {"ipus": "many"},
            }
        ]
    ),
    "memory fit not a boolean": _bad(memory=[{"id": "m", "fits": "yes"}]),
    "memory negative tile": _bad(memory=[{"id": "m", "fits": True, "peak_tile_bytes": -1}]),
    "binary": b"\xff\xfe\x00garbage",
    "huge": " " * (intervals.MAX_ERRORS_BYTES + 1),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_stored_errors_are_one_sentence(tmp_path, monkeypatch, name):
    path = tmp_path / "errors.json"
    data = BAD[name]
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(ErrorsFileError) as exc:
        intervals.load_errors(path)
    msg = str(exc.value)
    assert "\n" not in msg and msg.endswith(".") and "Traceback" not in msg
    # in use, a bad file never stops an analysis: every interval says why it is missing
    monkeypatch.setenv(intervals.ERRORS_ENV, str(path))
    iv = intervals.absolute("throughput_samples_per_s", 10.0, Features())
    assert not iv.available and iv.note.startswith("no interval:") and str(path) in iv.note


def test_hostile_errors_files_are_one_sentence(tmp_path):
    from tests import hostile

    cases = {
        **hostile.fidelity_errors_files(tmp_path / "errors"),
        **hostile.fidelity_errors_calibration_files(tmp_path / "calibration"),
    }
    for name, path in cases.items():
        with pytest.raises(ErrorsFileError) as exc:
            intervals.load_errors(path)
        msg = str(exc.value)
        assert "\n" not in msg and msg.endswith("."), name
        assert "\x1b" not in msg and "\u202e" not in msg, name


# -- every predicted figure carries an interval ---------------------------------------------------
@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    import engine

    folder = tmp_path_factory.mktemp("iv")
    base = dict(model="mlp", micro_batch_size=256, device_iterations=4)
    out = {}
    for name, extra in {"sync": {}, "async": {"loader_mode": "async", "loader_workers": 8}}.items():
        engine.simulate_to_file(dict(base, **extra), folder / f"{name}.h5")
        out[name] = folder / f"{name}.h5"
    return out


def test_insight_effects_carry_ordered_intervals(profiles, full_errors, monkeypatch):
    from types import SimpleNamespace

    from analyser.core.insights import find_insights, predict_effects
    from analyser.core.insights import resimulate as rs
    from analyser.core.insights.model import EFFECT_KEYS

    with Analysis.open(profiles["async"]) as other:
        faster = {k: getattr(other.metrics, k) for k in EFFECT_KEYS}
        faster.update(intervals.feature_figures(other))

    class Fake:  # a simulator answering every configuration with the async run
        def simulate_many(self, configs):
            for i in range(len(configs)):
                yield i, SimpleNamespace(simulated=True, figures=dict(faster), message="")

    rs._BASELINES.clear()
    with Analysis.open(profiles["sync"]) as a:
        tips = predict_effects(a, find_insights(a), Fake(), baseline=False)
        predicted = [t for t in tips if t.effect is not None and t.effect.after]
        assert predicted
        seen = 0
        for t in predicted:
            d = t.to_dict()["effect"]["intervals"]
            assert set(d) == set(EFFECT_KEYS)
            for key in EFFECT_KEYS:
                for part in ("before", "after", "change"):
                    seen += _ordered(d[key][part])
            json.dumps(d, allow_nan=False)
            ch = d["throughput_samples_per_s"]["change"]
            assert _ordered(ch)
            if "throughput +" in t.effect.message or "throughput -" in t.effect.message:
                # the verdict says it too: "throughput +86.0% (80% range +64% to +111%), ..."
                assert intervals.describe_change(ch) in t.effect.message
                assert "(80% range " in t.effect.message
        assert seen


def test_compare_and_report_json_carry_ordered_intervals(profiles, full_errors):
    from analyser.core.comparison import compare
    from analyser.reports.data import PREDICTED_METRICS, build_report
    from analyser.reports.render import render_markdown

    with Analysis.open(profiles["sync"]) as a, Analysis.open(profiles["async"]) as b:
        pair = compare([a, b]).pairs[0].to_dict()
        for m in pair["metrics"]:
            _ordered(m["interval"])
        thr = next(m for m in pair["metrics"] if m["key"] == "throughput_samples_per_s")
        assert _ordered(thr["interval"])
        # the sync run waits for its host, in calls of under 3 ms
        assert thr["interval"]["classes"] == ["host-bound", "short-calls"]
        text = [e["text"] for e in pair["explanations"] if e["metric"] == thr["key"]]
        assert text and "change's 80% range" in text[0]
        report = build_report([a, b], insights=False, predict_transitions=False)
        # 1.1 added the intervals (1.2 the declared summary)
        assert tuple(map(int, report["schema_version"].split("."))) >= (1, 1)
        for p in report["profiles"]:
            ivs = p["prediction"]["intervals"]
            assert set(ivs) == set(PREDICTED_METRICS)
            assert sum(_ordered(d) for d in ivs.values()) >= 3  # throughput, cycles, ...
            mem = ivs["peak_memory_bytes"]  # no memory facts: said, not made up
            assert not _ordered(mem) and mem["memory"].startswith("no memory evidence")
            assert p["prediction"]["memory"]["statement"].startswith("no memory evidence")
        md = render_markdown(report, [a, b], "t")
        assert "range (fidelity table)" in md and "Ranges: 80% ranges" in md and "80% range" in md


def test_tune_results_carry_ordered_intervals(profiles, full_errors):
    from analyser.sim.service import SimResponse, figures_of
    from analyser.sim.tune.results import to_frame
    from analyser.sim.tune.search import Row, TuneResult
    from analyser.sim.tune.space import build_space

    start_cfg = dict(model="mlp", micro_batch_size=256, device_iterations=4)
    rows = []
    for i, name in enumerate(("sync", "async")):
        with Analysis.open(profiles[name]) as a:
            figs = figures_of(a)
        cfg = dict(start_cfg, loader_mode="sync" if name == "sync" else "async")
        resp = SimResponse(f"k{i}", "ok", figures=figs, profile=str(profiles[name]))
        rows.append(Row(i, None, cfg, resp, "start" if i == 0 else "grid"))
    space = build_space(start_cfg, ["loader=sync,async"], [], "throughput")
    df = to_frame(TuneResult(space, "grid", rows))
    for col in intervals.TUNE_COLUMNS:
        assert col in df.columns
    for r in df.itertuples():
        assert r.throughput_low <= r.throughput_samples_per_s <= r.throughput_high
        assert r.throughput_change_low <= r.throughput_change <= r.throughput_change_high
    assert math.isclose(df.iloc[0]["throughput_change"], 0.0, abs_tol=1e-12)


def test_gui_labels_show_the_ranges(full_errors):
    """The GUI's predicted-effect table (Insights) and the Design space's selected configuration
    say the range (labels only: the figures come from the core)."""
    pytest.importorskip("PySide6")
    from analyser.core.insights.model import EFFECT_KEYS, Effect, Insight
    from analyser.gui.design_space import _range_words
    from analyser.gui.reports.insights import insight_html

    before = dict.fromkeys(EFFECT_KEYS, 100.0)
    after = dict(before, throughput_samples_per_s=186.0)
    eff = Effect("fits", "throughput +86%", before, after)
    dev = _features(DEV1)
    eff.intervals = intervals.change_intervals(before, after, dev, dev, EFFECT_KEYS)
    tip = Insight("throughput.x", "A tip", "warning", "throughput", "why", change={"a": 1})
    tip.effect = eff
    html = insight_html(tip, "KiB")
    assert "<th>Range</th>" in html
    rng = intervals.range_text(eff.intervals["throughput_samples_per_s"]["change"])
    assert rng.startswith("80% range ") and rng in html and "Range of the throughput change" in html
    row = pd.Series(
        {
            "throughput_low": 90.0,
            "throughput_high": 110.0,
            "throughput_change": 0.86,
            "throughput_change_low": 0.6,
            "throughput_change_high": 1.1,
            "interval_level": 0.8,
            "interval_classes": "device-at-scale",
            "interval_note": "",
        }
    )
    words = _range_words(row)
    assert "throughput 80% range" in words and "+86% (80% range +60% to +110%)" in words
    assert "device-at-scale" in words
    gone = _range_words(row.drop(["throughput_low"]))
    assert gone == ""  # a table written before intervals: nothing said
    out = "outside the validated range: 3 reference configurations"
    none = _range_words(pd.Series(dict(row, throughput_low=None, interval_note=out)))
    assert out in none and "80% range" not in none


def test_bench_writes_errors_the_analyser_reads():
    """bench_fidelity's stored errors (``--write-errors``) round-trip through the analyser's
    validation, with each row's error as a fraction, its class and the classifier's classes."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_fidelity as bench

    rows = bench.load_rows()
    feats = {"ipus": 1, "replicas": 1, "host_load": 2.0, "host_overlapped": False}
    feats["small_conv_share"] = 0.0

    def fake(row):
        return bench.Measured(row.figure * 1.25, row.figure * 1.25, features=dict(feats))

    payload = bench.errors_payload(bench.evaluate(rows, fake), "abc1234", 1.0)
    table = intervals.parse_errors(json.loads(json.dumps(payload)), "payload")
    assert table.commit == "abc1234" and len(table.rows) == len(rows)
    for r, p in zip(table.rows, payload["rows"], strict=True):
        if p["quantity"] == "ratio":
            assert r.error == pytest.approx(0.0, abs=1e-3) and p["classes"] is None
        else:
            assert r.error == pytest.approx(0.25)
            want = ["host-bound"] if p["quantity"] == "throughput" else ["device-at-scale"]
            assert p["classes"] == want
    listed = bench.format_classes(payload)
    assert "host-bound" in listed and all(r.config for r in table.rows if r.quantity != "ratio")
    # +25% in every row: the calibrated range of the class holds the engine's own figure
    iv = intervals.absolute("throughput_samples_per_s", 100.0, Features(**feats), table)
    assert not iv.available or iv.low <= 100.0 <= iv.high


def test_summary_says_the_throughput_ranges(profiles, full_errors, capsys):
    from analyser.cli import main

    assert main(["summary", str(profiles["sync"])]) == 0
    out = " ".join(capsys.readouterr().out.split())
    # the cells wrap in a narrow terminal; the sentence under the table says the level whole
    assert "range (fidelity table)" in out and "80%" in out
    assert "Ranges: 80% ranges" in out


def test_insights_json_has_the_profile_prediction(profiles, full_errors, capsys):
    from analyser.cli import main

    assert main(["insights", str(profiles["sync"]), "--json", "--no-resimulate"]) == 0
    pred = json.loads(capsys.readouterr().out)["prediction"]
    assert set(pred["intervals"]) == set(intervals.PROFILE_FIGURES)
    assert _ordered(pred["intervals"]["throughput_samples_per_s"])
    assert pred["classes"] == ["host-bound", "short-calls"] and pred["errors"]["commit"] == "test"
    assert pred["level"] == 0.8 and pred["memory"]["statement"].startswith("no memory evidence")


def test_outside_the_table_is_said_in_insights_compare_and_summary(profiles, thin_errors, capsys):
    """Profiles whose features the table does not cover get the outside-range sentence, and
    JSON keeps it as a field (no range, no level)."""
    from analyser.cli import main

    assert main(["insights", str(profiles["sync"]), "--json", "--no-resimulate"]) == 0
    pred = json.loads(capsys.readouterr().out)["prediction"]
    thr = pred["intervals"]["throughput_samples_per_s"]
    assert not _ordered(thr) and thr["outside_reason"] and thr["level"] is None
    assert thr["note"].startswith("outside the validated range: ")
    assert main(["compare", str(profiles["sync"]), str(profiles["async"]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    found = json.dumps(doc)
    assert '"outside_reason": "0 paired reference configurations' in found
    assert main(["summary", str(profiles["sync"])]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "outside the validated range" in out and "80% range" not in out


# -- calibrated intervals (split-conformal, groups held out) ----------------------------------
from analyser.core import intervals_calibration as cal  # noqa: E402

_DEV = {"ipus": 16, "replicas": 16, "host_load": 0.1, "host_overlapped": True}
_DEV["small_conv_share"] = 0.0
_HOST = dict(_DEV, host_load=2.0, host_overlapped=False)


def _pts(spec):
    """(id, config, source, features, error) -> calibration points."""
    rows = [
        {"id": i, "quantity": "throughput", "error": e, "features": f} for i, _, _, f, e in spec
    ]
    refs = {i: {"config": c, "source": s} for i, c, s, _, _ in spec}
    return cal.points(rows, refs)


def test_row_classes_are_classify_on_the_rows_own_simulations():
    """Every stored row's classes are what classify() gives its simulation's features now (a
    threshold changed without re-running the benchmark fails here), and no hand label is used."""
    doc = json.loads(intervals.DEFAULT_ERRORS.read_text())
    checked = 0
    for r in doc["rows"]:
        if r["quantity"] != "throughput" or r.get("features") is None:
            continue
        f = r["features"]
        want = intervals.classify(Features(**f), host_inclusive=True)
        assert cal.row_classes(f) == want == tuple(r["classes"]), r["id"]
        checked += 1
    assert checked >= 10
    # a row whose hand label says otherwise is classed by its features, not the label
    (p,) = _pts([("x", "x.toml", "s", _HOST, 0.1)])
    assert p.classes == ("host-bound",)


def test_a_duplicated_configuration_counts_once():
    base = [
        (f"d{i}", f"c{i}.toml", f"s{i}", _DEV, e) for i, e in enumerate((0.02, -0.05, 0.08, 0.0))
    ]
    dup = [*base, ("d0-again", "c0.toml", "s0", _DEV, 0.02)]
    a, b = _pts(base), _pts(dup)
    assert len(a) == len(b) == 4
    assert [p.ids for p in b if p.config == "c0.toml"] == [("d0", "d0-again")]
    ca, cb = cal.calibrate(a, ("device-at-scale",)), cal.calibrate(b, ("device-at-scale",))
    assert (ca.lo, ca.hi, ca.n) == (cb.lo, cb.hi, cb.n)


def test_calibrated_range_is_ordered_and_says_its_level():
    pts = _pts([(f"d{i}", f"c{i}", f"s{i}", _DEV, e) for i, e in enumerate((0.3, 0.2, 0.25, 0.4))])
    c = cal.calibrate(pts, ("device-at-scale",))
    assert c.level == cal.LEVEL == 0.8 and c.note == ""
    low, high = c.rate(1000.0)  # the engine is optimistic in every row: the range lies below
    assert low <= 1000.0 <= high and low < 1000.0 / 1.2
    assert intervals.range_words("+60%", "+110%") == "80% range +60% to +110%"


def test_too_few_configurations_are_outside_the_validated_range():
    pts = _pts([(f"d{i}", f"c{i}", f"s{i}", _DEV, 0.01) for i in range(3)])
    c = cal.calibrate(pts, ("device-at-scale",))
    assert c.lo is None and c.rate(10.0) == (None, None)
    assert c.note.startswith("outside the validated range: 3 reference configurations")
    assert cal.min_points(0.8) == 4
    # another class set has no rows at all: outside too
    assert cal.calibrate(pts, ("host-bound",)).note.startswith("outside the validated range")


def test_held_out_never_lets_a_group_vouch_for_itself():
    """Five rows of one source with one error and four rows of others: a row of the cluster is
    scored against the others only (its own source's rows are not in its interval)."""
    spec = [(f"a{i}", f"a{i}", "A", _DEV, 0.5) for i in range(5)]
    spec += [(f"b{i}", f"b{i}", f"B{i}", _DEV, e) for i, e in enumerate((0.01, -0.02, 0.03, 0.0))]
    checks = {c["ids"][0]: c for c in cal.held_out(_pts(spec))}
    assert checks["a0"]["inside"] is False  # the four others span about -2% .. +3%
    assert checks["a0"]["score"] > checks["a0"]["fixed_score"] > 0  # a miss costs 2 / alpha
    s = {r["classes"]: r for r in cal.summarise(list(checks.values()))}
    assert s["overall"]["points"] == 9 and 0.0 <= s["overall"]["coverage"] <= 1.0


def test_interval_score_rewards_narrow_covering_intervals():
    assert cal.interval_score(-0.1, 0.1, 0.0) == pytest.approx(0.2)
    assert cal.interval_score(-0.1, 0.1, 0.3) == pytest.approx(0.2 + 10 * 0.2)


def test_bench_prints_the_calibration_from_stored_errors(capsys):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_fidelity as bench

    assert bench.main(["--calibration", str(intervals.DEFAULT_ERRORS)]) == 0
    out = capsys.readouterr().out
    assert "80%" in out and "overall" in out and "x/÷1.5" in out


def test_a_null_predicted_change_with_paired_evidence_has_a_nonzero_range():
    """The change's range comes from how the errors move between paired rows of one source,
    not from the size of the predicted change: a ratio of 1 still gets a range around it."""
    spec = []
    for g, (e1, e2) in enumerate(
        ((0.0, 0.1), (0.05, -0.02), (0.1, 0.12), (-0.03, 0.04), (0.0, 0.0))
    ):
        spec += [(f"g{g}a", f"g{g}a", f"S{g}", _DEV, e1), (f"g{g}b", f"g{g}b", f"S{g}", _DEV, e2)]
    prs = cal.pairs(_pts(spec))
    assert len(prs) == 5 and all(p.before.group == p.after.group for p in prs)
    c = cal.calibrate_change(prs, ("device-at-scale",), ("device-at-scale",))
    low, high = c.rate(1.0)  # the predicted ratio after / before is 1: a null change
    assert low < 1.0 < high and c.note == ""
    # between classes without pairs: outside the validated range, not a zero-width range
    other = cal.calibrate_change(prs, ("device-at-scale",), ("host-bound",))
    assert other.lo is None and other.note.startswith("outside the validated range: 0 paired")


def test_bench_stores_what_the_calibration_pools_by():
    """The stored errors carry each row's configuration, source and document, so the
    calibration is computed from the errors file alone and follows it when the benchmark
    rewrites it; a document's rows are one group (the data-loading tutorial's five cases)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_fidelity as bench

    rows = bench.load_rows()
    feats = dict(_DEV)

    def fake(row):
        return bench.Measured(row.figure * 1.1, row.figure * 1.1, features=dict(feats))

    payload = json.loads(json.dumps(bench.errors_payload(bench.evaluate(rows, fake), "x", 1.0)))
    refs = {r.id: {"config": r.config, "source": r.source, "document": r.document} for r in rows}
    alone, joined = cal.points(payload["rows"]), cal.points(payload["rows"], refs)
    assert alone == joined and alone
    loading = {p.group for p in alone if any(i.startswith("data-loading-") for i in p.ids)}
    assert loading == {"graphcore-tutorial-efficient-data-loading"}
    # an errors file written before documents were named groups by the source text
    for r in payload["rows"]:
        r.pop("document")
    by_source = {p.group for p in cal.points(payload["rows"])}
    assert by_source <= {r.source for r in rows} and len(by_source) > len({p.group for p in alone})
    configs = [r.config for r in rows if r.quantity == "throughput"]
    assert len(alone) == len(set(configs)) < len(configs)  # the duplicate counted once


def test_diff_says_the_range_of_the_total_cycles_change(profiles, full_errors, capsys):
    from analyser.cli import main

    assert main(["diff", str(profiles["sync"]), str(profiles["async"]), "--json"]) == 0
    iv = json.loads(capsys.readouterr().out)["total_cycles"]["interval"]
    assert _ordered(iv)
    assert main(["diff", str(profiles["sync"]), str(profiles["async"])]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "change of the total cycles: 80% range " in out


def test_bench_stores_memory_facts_the_statements_read():
    """A published memory fact as the benchmark stores it (the engine's fullest tile, the tile's
    memory, its profile's features) round-trips through the analyser's validation and is
    pooled by its device classes."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_fidelity as bench

    from engine.config import RunConfig

    cfg = RunConfig.model_validate(dict(model="mlp", micro_batch_size=64))
    fact = bench.memory_fact("m0", True, "a source", cfg)
    assert fact["peak_tile_bytes"] and fact["sram_per_tile"] >= fact["peak_tile_bytes"]
    facts = [dict(fact, id=f"m{i}", source=f"s{i}") for i in range(5)]
    t = _table(_rows([DEV1]), facts)
    assert len(t.memory) == 5 and t.memory[0].fits is True
    feats = Features(**{k: fact["features"][k] for k in ("ipus", "replicas", "small_conv_share")})
    got = intervals.memory_statement(feats, True, fact["peak_tile_bytes"], fact["sram_per_tile"], t)
    assert got["facts"] == 5 and got["side"] == "at most"
    assert got["bound"] == pytest.approx(fact["sram_per_tile"])  # the facts are this very run
    assert got["statement"].startswith("fits: fullest tile at most")


@pytest.mark.slow
def test_a_rows_stored_classes_are_classify_on_its_simulation_run_now():
    """One table row simulated now (the cheapest: PopXL MNIST inference, 1 IPU): its features
    and classes equal what the stored errors hold, so the stored classes are those of the
    row's own simulation, not a label."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_fidelity as bench

    row = next(r for r in bench.load_rows() if r.id == "popxl-mnist-test-r1")
    got = bench.measure(row, classify=True).features
    stored = {r["id"]: r for r in json.loads(intervals.DEFAULT_ERRORS.read_text())["rows"]}
    want = stored[row.id]
    assert got.keys() == want["features"].keys()
    for k, v in got.items():
        assert v == pytest.approx(want["features"][k], rel=1e-6), k
    assert list(intervals.classify(Features(**got))) == want["classes"] == ["short-calls"]
