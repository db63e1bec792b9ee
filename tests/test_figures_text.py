"""How figures read in every output: thousands separators and scaled units, one label per
figure (the host wait share), and a misspelt --fail-if metric answered with the right name."""

from __future__ import annotations

import pytest

from analyser.cli import main
from analyser.core import units


def test_large_shares_and_changes_have_thousands_separators():
    assert units.fmt_pct(21.955) == "2,195.5%"
    assert units.fmt_pct(0.123) == "12.3%"
    assert units.fmt_delta_pct(1.0, 30.0) == "+2,900.0%"
    assert units.fmt_rel_change(12.5) == "+1,250.0%"
    assert units.fmt_pts_delta(0.0, 15.0) == "+1,500.0 pts"
    assert units.fmt_seconds(4321.5) == "4,321.500 s"
    # bytes scale to their unit: never "5377835.3 KiB"
    assert units.fmt_bytes(5377835.3 * 1024) == "5.13 GiB"


@pytest.mark.parametrize(
    ("gate", "suggestion"),
    [
        ("cyclez>+5%", "'cycles'"),
        ("throughput_samples_per_sec<-3%", "'throughput_samples_per_s'"),
        ("peak_memroy>+2%", "'peak_memory'"),
        ("ipu0.host_rxx>+0%", "'ipu0.host_rx'"),
    ],
)
def test_a_misspelt_gate_metric_suggests_the_right_name(gate, suggestion):
    from analyser.core.gates import GateSyntaxError, parse_gate

    with pytest.raises(GateSyntaxError) as exc:
        parse_gate(gate)
    assert f"(did you mean {suggestion}?)" in str(exc.value)


def test_an_unrelated_gate_metric_gets_no_guess():
    from analyser.core.gates import GateSyntaxError, parse_gate

    with pytest.raises(GateSyntaxError) as exc:
        parse_gate("zzzz>1")
    assert "did you mean" not in str(exc.value)


def test_the_host_wait_share_has_one_label_everywhere(walkthrough_profiles, capsys):
    """The summary, compare, the step by step and the insights name the host wait share the
    same way; the insights' loader figure has its own single label."""
    from analyser.core import Analysis
    from analyser.core.quantities import QUANTITIES
    from analyser.core.transitions import explain_transitions

    label = QUANTITIES["host_wait_share"].label
    a, b = walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"]
    # wide enough that no table cell wraps the label (its range column narrows the label's)
    assert main(["summary", str(b), "--width", "200"]) == 0
    summary = capsys.readouterr().out
    assert main(["compare", str(a), str(b), "--width", "200"]) == 0
    compare = capsys.readouterr().out
    assert main(["insights", str(b), "--no-resimulate"]) == 0
    insights = capsys.readouterr().out
    analyses = [Analysis.open(p) for p in (a, b)]
    try:
        story = " ".join(" ".join(t.text) for t in explain_transitions(analyses))
    finally:
        for x in analyses:
            x.close()
    for text in (summary, compare, story):
        assert label in text.lower()
    everything = summary + compare + story + insights
    for other in ("beyond the calls' fixed overhead", "waits for the loader", "host wait 8"):
        assert other not in everything
    # every "host wait share" said is the one label
    assert everything.lower().count("host wait share") == everything.lower().count(label)
    # the loader's part of the host wait: the one label of the insights' figure
    assert insights.count("the loader's part of the host wait") >= 3
