"""The causes a comparison gives (``analyse diff`` and ``analyse compare``): a model, target or
system change is named first when it differs, and an option is offered as the cause of a change
only when the way it moves that figure agrees with the change (FP16 halves memory, so it is no
reason for memory that rose; :data:`analyser.core.comparison.SIGNS`)."""

from __future__ import annotations

import pytest

from analyser.core import Analysis
from analyser.core.comparison import IDENTITY_KEYS, compare_pair, option_sign


@pytest.fixture(scope="module")
def runs(tmp_path_factory, walkthrough_profiles):
    """Small runs that differ in ways whose effects pull against each other."""
    import engine
    from engine.config import RunConfig

    out = tmp_path_factory.mktemp("causes")
    configs = {
        "mlp": dict(model="mlp"),
        # FP16 halves the bytes per value; 64x the micro-batch more than makes up for it
        "mlp-fp16-big": dict(model="mlp", precision="16.16", micro_batch_size=64),
        "mlp-bow": dict(model="mlp", target="bow"),
    }
    paths = {}
    for name, cfg in configs.items():
        paths[name] = out / f"{name}.h5"
        engine.simulate_to_file(RunConfig.from_dict(cfg), paths[name])
    return {**paths, **walkthrough_profiles}


def _pair(runs, a: str, b: str):
    with Analysis.open(runs[a]) as x, Analysis.open(runs[b]) as y:
        return compare_pair(x, y)


def _sign(v: float | None) -> int:
    return 0 if v is None or v != v else (v > 0) - (v < 0)


PAIRS = [
    ("mlp", "2-half"),  # the case: another model, and FP16
    ("2-half", "mlp"),
    ("mlp", "mlp-fp16-big"),
    ("mlp-fp16-big", "mlp"),
    ("mlp", "mlp-bow"),
    ("1-base", "2-half"),
    ("2-half", "3-accumulate"),
    ("3-accumulate", "4-device-iterations"),
    ("4-device-iterations", "5-8bit-io"),
    ("5-8bit-io", "6-async"),
]


def _causes(text: str) -> str:
    """The causes of an explanation: what follows the figure's parenthesis ("Peak memory rose
    12% (a to b; 80% range ...): causes"), whose own text may hold parentheses and colons."""
    import re

    verb = re.search(r" (rose|fell|changed|went) ", text)  # the label may hold parentheses too
    start = text.find("(", verb.end() if verb else 0)
    if start < 0:
        return text.split(": ", 1)[1]
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[i + 1 :].removeprefix(": ")
    return text


@pytest.mark.parametrize("a,b", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_every_cause_agrees_with_the_change_and_the_model_comes_first(runs, a, b):
    p = _pair(runs, a, b)
    by = {d.key: d for d in p.config_diffs}
    identity = [k for k in IDENTITY_KEYS if k in by]
    for e in p.explanations:
        if identity:
            assert list(e.config_keys[: len(identity)]) == identity, e.text
            assert _causes(e.text).startswith(by[identity[0]].text()), e.text
        direction = _sign(e.rel)
        if e.metric == "total_cycles":  # "it now executes": causes that lower memory
            metric, direction = "peak_memory_bytes", -1
        else:
            metric = e.metric
        for k in e.config_keys:
            s = option_sign(metric, by[k])
            assert s == 0 or direction == 0 or s == direction, (
                f"{k} moves {metric} {'up' if s > 0 else 'down'}, offered for: {e.text}"
            )


def test_another_model_is_named_first_and_fp16_is_no_reason_for_a_rise(runs):
    """The issue's diff: mlp -> the walkthrough's half-precision ResNet-101."""
    p = _pair(runs, "mlp", "2-half")
    peak = next(e for e in p.explanations if e.metric == "peak_memory_bytes")
    assert "rose" in peak.text and peak.config_keys[0] == "model"
    assert "model resnet101 instead of mlp" in peak.text
    assert "precision" not in peak.config_keys, peak.text
    assert "recomputation" not in peak.config_keys, peak.text  # it keeps fewer activations
    assert "micro_batch_size" in peak.config_keys


def test_the_cause_that_agrees_is_kept_and_the_one_against_is_dropped(runs):
    """Same model, FP16 and a 64x micro-batch: memory rises (the micro-batch, not FP16) and, back,
    falls (FP32 alone would raise it; the smaller micro-batch lowers it)."""
    up = _pair(runs, "mlp", "mlp-fp16-big")
    down = _pair(runs, "mlp-fp16-big", "mlp")
    for p, word in ((up, "rose"), (down, "fell")):
        peak = next(e for e in p.explanations if e.metric == "peak_memory_bytes")
        assert word in peak.text and peak.config_keys == ("micro_batch_size",), peak.text


def test_another_target_is_named_first(runs):
    p = _pair(runs, "mlp", "mlp-bow")
    assert p.explanations, "no explanation of a target change"
    for e in p.explanations:
        assert e.config_keys[0] == "target" and "target bow instead of mk2" in e.text, e.text


@pytest.mark.parametrize("command", ["diff", "compare"])
def test_the_commands_name_the_model_first(runs, capsys, command):
    from analyser.cli import main

    assert main([command, str(runs["mlp"]), str(runs["2-half"])]) == 0
    out = " ".join(capsys.readouterr().out.split())
    said = out[out.index("Peak memory rose") :]
    said = said[: said.index(".", said.index("): ") + 3)]
    assert "): model resnet101 instead of mlp" in said, said
    assert "precision" not in said, said


def test_an_option_against_the_change_is_no_cause():
    from analyser.core.comparison import ConfigDiff, causes

    fp16 = {"precision": ConfigDiff("precision", "32.32", "16.16")}
    assert causes("peak_memory_bytes", fp16, ("precision",), +1) == []
    assert causes("peak_memory_bytes", fp16, ("precision",), -1) == [fp16["precision"]]
    assert causes("throughput_samples_per_s", fp16, ("precision",), -1) == []
    ga = {"gradient_accumulation": ConfigDiff("gradient_accumulation", 3, 8)}
    assert causes("ramp_share", ga, ("gradient_accumulation",), +1) == []
    assert causes("compute_share", ga, ("gradient_accumulation",), +1) == [
        ga["gradient_accumulation"]
    ]
    # either way (the split moves layers between IPUs): offered for both directions
    split = {"split_points": ConfigDiff("split_points", ["layer3.0"], ["layer3.3"])}
    for d in (+1, -1):
        assert causes("peak_memory_bytes", split, ("split_points",), d) == [split["split_points"]]
