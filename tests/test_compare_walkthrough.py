"""Comparisons explain each walkthrough transition (``analyse demo``): FP16 fixes OOM, GA raises the
compute share, DI cuts host round trips, 8-bit halves input bytes, async cuts host wait.

Transitions need both profiles to have executed; when the engine reports a step out of memory the
test is skipped with that reason (the walkthrough's own tests own that expectation)."""

from __future__ import annotations

import pytest

from analyser.core import Analysis
from analyser.core.comparison import compare_pair
from tests.run_configs import small_pipelined


@pytest.fixture(scope="module")
def opened(walkthrough_profiles):
    out = {k: Analysis.open(p) for k, p in walkthrough_profiles.items()}
    yield out
    for a in out.values():
        a.close()


def _pair(opened, a: str, b: str, *, need_execution: bool = True):
    x, y = opened[a], opened[b]
    if need_execution:
        for name, z in ((a, x), (b, y)):
            if z.execution is None:
                pytest.skip(
                    f"engine: walkthrough step {name} does not fit, so it has no "
                    "execution to compare"
                )
    return compare_pair(x, y)


def _texts(p, metric: str) -> list[str]:
    return [e.text for e in p.explanations if e.metric == metric]


def _explains(p, metric: str, *words: str) -> None:
    """The comparison explains ``metric``'s change, its first explanation naming every word."""
    text = _texts(p, metric)
    assert text, f"no explanation of {metric}"
    assert all(w in text[0] for w in words), text[0]


def test_fp16_fixes_oom(opened):
    p = _pair(opened, "1-base", "2-half", need_execution=False)
    assert [d.key for d in p.config_diffs if d.key == "precision"] == ["precision"]
    _explains(p, "peak_memory_bytes", "fell", "precision 16.16 instead of 32.32")
    if opened["2-half"].memory.fits:
        _explains(p, "oom_tiles", "now fits", "precision")


def test_ga_raises_compute_share(opened):
    p = _pair(opened, "2-half", "3-accumulate")
    _explains(p, "compute_share", "rose", "gradient_accumulation 8 instead of 3")
    _explains(p, "ramp_share", "fell")
    assert p.metric("cycles_per_sample").after < p.metric("cycles_per_sample").before


def test_di_cuts_host_round_trips(opened):
    p = _pair(opened, "3-accumulate", "4-device-iterations")
    _explains(p, "host_round_trips", "fell", "device_iterations 4 instead of 1")


def test_8bit_halves_input_bytes(opened):
    p = _pair(opened, "4-device-iterations", "5-8bit-io")
    _explains(p, "streamcopy_rx_bytes", "IPU 0 fell 50.0%", "eight_bit_input true")
    assert p.ops_added and not p.ops_removed  # the cast / normalisation now runs on the IPU
    assert any("operation added" in t or "operations added" in t for t in p.other_deltas)


def test_async_cuts_host_wait(opened):
    p = _pair(opened, "5-8bit-io", "6-async")
    _explains(p, "host_wait_share", "fell", "loader_mode async instead of sync")
    assert p.metric("throughput_samples_per_s").after > p.metric("throughput_samples_per_s").before


def test_oom_to_fits_has_no_execution_deltas(opened):
    """An OOM profile has no execution: the comparison says so instead of listing every step
    type and operation as 'appeared'."""
    p = _pair(opened, "1-base", "2-half", need_execution=False)
    if opened["1-base"].execution is not None:
        pytest.skip("engine: walkthrough step 1 fits")
    assert any("has no execution" in t for t in p.other_deltas)
    assert not any("appeared" in t for t in p.other_deltas)


def test_shares_change_in_points(opened):
    p = _pair(opened, "5-8bit-io", "6-async")
    text = _texts(p, "host_wait_share")[0]
    assert " point" in text and "%)" in text  # 'fell 7.2 points (7.4% to 0.2%)'


@pytest.mark.slow
def test_walkthrough_report(walkthrough_profiles, tmp_path):
    """The comparative report of the six steps (what `analyse demo` writes)."""
    from html.parser import HTMLParser

    from analyser.reports import write_report
    from analyser.sim.simulators import InProcessSimulator

    out = write_report(
        list(walkthrough_profiles.values()), tmp_path / "walk.html", simulator=InProcessSimulator()
    )
    html = out.read_text()
    HTMLParser().feed(html)
    assert html.count('class="plotly-graph-div"') >= 6 * 2 + 2  # interactive charts
    assert "precision" in html and "Use FP16" in html
    # the story: each step's change with the insight behind it and its re-simulated prediction
    assert "Step by step" in html and html.count("Recommended by insight") >= 4
    assert "Predicted: fits: no tile out of memory" in html  # FP16 on the OOM step 1
    assert "Raise device iterations" in html  # step 3 -> 4, fired or below its threshold


def test_walkthrough_story(walkthrough_profiles):
    """Each transition names the insight of the earlier step that recommended its change; the
    device-iterations step says how far below its threshold the rule was when it did not fire."""
    from analyser.core.transitions import explain_transitions

    analyses = [Analysis.open(p) for p in walkthrough_profiles.values()]
    try:
        story = explain_transitions(analyses)
    finally:
        for a in analyses:
            a.close()
    assert len(story) == 5
    expected = {
        "precision": "memory.fp16",
        "gradient_accumulation": "throughput.gradient_accumulation",
        "device_iterations": "throughput.device_iterations",
        "eight_bit_input": "throughput.8bit_input",
        "loader_mode": "throughput.async_loader",
    }
    for key, iid in expected.items():
        tr = next(t for t in story if any(k == key for k, _x, _y in t.changes))
        link = next(lk for lk in tr.links if lk.key == key)
        assert link.insight.id == iid, (key, [lk.insight.id for lk in tr.links])
        assert tr.text[-1].startswith("Measured:")
        if link.fired:
            assert link.position >= 1 and any("Recommended by insight" in t for t in tr.text)
        else:
            assert link.thresholds and any("stays below its threshold" in t for t in tr.text)
    assert story[0].links[0].fired and story[0].links[0].position == 1  # FP16 first
    assert "now fits" in story[0].text[-1]


# A scaled-down walkthrough: the same option changes, step by step, on ResNet-50 at 32x32
# (pipelined on 2 IPUs), which fits, so every transition's explanation is checked whatever the
# full-size model does.
_MINI_BASE = small_pipelined(
    micro_batch_size=8,
    optimiser="adamw",
    precision="32.32",
    gradient_accumulation=3,
    device_iterations=1,
)
_MINI_STEPS = (
    ("1-base", {}),
    ("2-half", {"precision": "16.16", "loss_scaling": 128.0}),
    ("3-accumulate", {"gradient_accumulation": 8}),
    ("4-device-iterations", {"device_iterations": 4}),
    ("5-8bit-io", {"eight_bit_input": True}),
    ("6-async", {"loader_mode": "async"}),
)


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    import engine
    from engine.config import RunConfig

    d = tmp_path_factory.mktemp("mini_walkthrough")
    cfg = dict(_MINI_BASE)
    out = {}
    for name, change in _MINI_STEPS:
        cfg.update(change)
        path = d / f"{name}.h5"
        engine.simulate_to_file(RunConfig.from_dict(cfg), path)
        out[name] = Analysis.open(path)
    yield out
    for a in out.values():
        a.close()


def test_mini_walkthrough_transitions(mini):
    assert all(a.execution is not None for a in mini.values())
    p = compare_pair(mini["1-base"], mini["2-half"])
    assert "precision 16.16 instead of 32.32" in _texts(p, "peak_memory_bytes")[0]
    p = compare_pair(mini["2-half"], mini["3-accumulate"])
    assert "rose" in _texts(p, "compute_share")[0]
    assert "fell" in _texts(p, "ramp_share")[0]
    assert "fell" in _texts(p, "cycles_per_sample")[0]
    p = compare_pair(mini["3-accumulate"], mini["4-device-iterations"])
    assert "fell" in _texts(p, "host_round_trips")[0]
    p = compare_pair(mini["4-device-iterations"], mini["5-8bit-io"])
    rx = _texts(p, "streamcopy_rx_bytes")[0]
    assert "IPU 0 fell 50.0%" in rx and "eight_bit_input true instead of false" in rx
    p = compare_pair(mini["5-8bit-io"], mini["6-async"])
    assert "fell" in _texts(p, "host_wait_share")[0]
    assert "rose" in _texts(p, "throughput_samples_per_s")[0]
