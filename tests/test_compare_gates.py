"""`analyse compare` and its --fail-if regression gates."""

from __future__ import annotations

import json

import pytest

from analyser.cli import main
from analyser.core import Analysis
from analyser.core.comparison import change_words, compare
from analyser.core.gates import GateSyntaxError, parse_gate
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="session")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmp")
    a, b, oom = d / "a.h5", d / "b.h5", d / "oom.h5"
    write_profile(
        a, make_synthetic_profile(n_steps=3000, n_ipus=2, tiles=128, seed=5, grad_accum=4)
    )
    write_profile(
        b, make_synthetic_profile(n_steps=6000, n_ipus=2, tiles=128, seed=5, grad_accum=16)
    )
    write_profile(oom, make_synthetic_profile(n_steps=100, n_ipus=2, tiles=128, oom=True))
    return a, b, oom


def test_parse_gate():
    g = parse_gate("cycles>+5%")
    assert (g.metric, g.op, g.value, g.mode) == ("total_cycles", ">", 5.0, "rel")
    assert parse_gate("peak_memory >= -2%").value == -2.0
    assert parse_gate("oom_tiles>0").mode == "value"
    assert parse_gate("cycles_per_sample<=+100").mode == "abs"
    for bad in ("cycles", "cycles>>5", "nonsense>5%", "cycles>five"):
        with pytest.raises(GateSyntaxError):
            parse_gate(bad)


def test_fail_if_exit_codes(pair, capsys):
    a, b, oom = map(str, pair)
    with Analysis.open(a) as x, Analysis.open(b) as y:
        up = y.metrics.total_cycles > x.metrics.total_cycles
    hold, ok = ("cycles>+1%", "cycles<-1%") if up else ("cycles<-1%", "cycles>+1%")
    assert main(["compare", a, b, "--fail-if", hold]) == 1
    assert main(["compare", a, b, "--fail-if", ok]) == 0
    assert main(["compare", a, a, "--fail-if", "cycles>+0%", "--fail-if", "peak_memory>+0%"]) == 0
    assert main(["compare", a, b, "--fail-if", "cycles>+5"]) in (0, 1)
    capsys.readouterr()
    assert main(["compare", a, b, "--fail-if", "cycles>>5%"]) == 2
    err = capsys.readouterr().err.strip()
    assert "bad --fail-if condition" in err and len(err.splitlines()) == 1
    # a candidate that no longer executes fails an execution gate
    assert main(["compare", a, oom, "--fail-if", "cycles>+5%"]) == 1
    assert main(["compare", a, oom, "--fail-if", "oom_tiles>0"]) == 1
    assert main(["compare", a]) == 2


def test_compare_json(pair, capsys):
    a, b, _ = map(str, pair)
    assert main(["compare", a, b, "--json", "--fail-if", "cycles>+1000%"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gates"][0]["holds"] is False
    p = doc["pairs"][0]
    assert {
        "config_diffs",
        "explanations",
        "step_types",
        "categories",
        "ipus",
        "operations",
        "ops_added",
        "ops_removed",
    } <= set(p)


def test_change_words():
    assert change_words(100, 50) == "fell 50.0%"
    assert change_words(100, 150) == "rose 50.0%"
    assert change_words(5, 5) == "is unchanged"
    assert change_words(0, 5) == "appeared"


def test_oom_to_fits_comparison(pair):
    _, b, oom = pair
    with Analysis.open(oom) as x, Analysis.open(b) as y:
        c = compare([x, y]).pairs[0]
        assert c.metric("oom_tiles").after == 0 and c.metric("oom_tiles").before > 0
        said = [e.text for e in c.explanations] + c.other_deltas
        assert any("now fits" in t or "OOM tiles fell" in t for t in said)


def test_per_ipu_gates(pair, capsys):
    a, b, oom = map(str, pair)
    g = parse_gate("ipu0.host_rx<-40%")
    assert g.metric == "ipu0.host_rx_bytes" and g.mode == "rel"
    with pytest.raises(GateSyntaxError):
        parse_gate("ipu0.bogus>1%")
    assert main(["compare", a, a, "--fail-if", "ipu0.rx!=+0%"]) == 0
    assert main(["compare", a, b, "--fail-if", "ipu7.memory>+1%"]) == 0  # no IPU 7: skipped
    # memory exists without an execution; an execution figure of an OOM candidate fails
    assert main(["compare", a, oom, "--fail-if", "ipu0.memory>+1000%"]) == 0
    assert main(["compare", a, oom, "--fail-if", "ipu0.cycles>+5%"]) == 1
    capsys.readouterr()
