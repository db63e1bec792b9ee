"""The half-precision partials insight and the FP16 tips' partials, on small simulated models
(the MLP, ResNet-50 at 32 x 32): it fires on FP16 runs with float partials (PopTorch's and
PopART's default) whose matmuls and convolutions are a large share, stays quiet on FP32, on
half partials and under its threshold, names the framework's own call, and its re-simulated
effect is faster; the FP16 tips say the partials their change leaves."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_insights import _FAST_HOST as _INSIGHTS_FAST_HOST

from analyser.core import Analysis
from analyser.core.insights import Thresholds, find_insights, predict_effects
from analyser.sim.simulators import InProcessSimulator

ID = "throughput.half_partials"

#: the host that keeps up (tests/test_insights.py's), so the device's cycles decide
_FAST_HOST = _INSIGHTS_FAST_HOST
_R50 = dict(
    model="resnet50",
    image_size=32,
    micro_batch_size=8,
    num_classes=10,
    precision="16.16",
    **_FAST_HOST,
)
_MLP = dict(model="mlp", gradient_accumulation=16, precision="16.16", **_FAST_HOST)

CONFIGS = {
    "r50": _R50,  # PopTorch (the default framework): float partials
    "r50_half": dict(_R50, partials_type="half"),
    "r50_32": dict(_R50, precision="32.32"),
    "r50_popart": dict(_R50, framework="popart"),
    "r50_tf": dict(_R50, framework="tensorflow"),  # half partials for 16.16 TensorFlow
    "r50_tf_float": dict(_R50, framework="tensorflow", partials_type="float"),
    "r50_32_tf": dict(_R50, precision="32.32", framework="tensorflow"),
    "mlp": _MLP,
    "mlp_half": dict(_MLP, partials_type="half"),
}


@pytest.fixture(scope="module")
def sims(tmp_path_factory) -> dict[str, Path]:
    from shared_files import built_once

    def build(d: Path) -> None:
        import engine
        from engine.config import RunConfig

        for name, cfg in CONFIGS.items():
            engine.simulate_to_file(RunConfig.from_dict(cfg), d / f"{name}.h5")

    d = built_once(tmp_path_factory, "insights_partials", build)
    return {name: d / f"{name}.h5" for name in CONFIGS}


def _tip(path, iid=ID, thresholds=None):
    with Analysis.open(path) as a:
        return next((t for t in find_insights(a, thresholds) if t.id == iid), None)


@pytest.mark.parametrize("name", ["r50", "mlp", "r50_popart", "r50_tf_float"])
def test_fires_on_fp16_with_float_partials(sims, name):
    tip = _tip(sims[name])
    assert tip is not None and tip.change == {"partials_type": "half"}
    assert tip.title == "Use half-precision partials" and tip.severity == "warning"
    # the partials are read from what the profile compiled: its AMP codelets
    assert "ConvPartial1x1Out<half,float>" in tip.evidence[0].text
    assert "FP16" in tip.trade_off and "precision" in tip.trade_off


@pytest.mark.parametrize("name", ["r50_half", "mlp_half", "r50_32", "r50_tf", "r50_32_tf"])
def test_quiet_on_fp32_and_on_half_partials(sims, name):
    assert _tip(sims[name]) is None


def test_quiet_where_matmuls_are_a_small_share(sims):
    """The trigger is the matmul / convolution share of the operation cycles: just above the
    run's own share the tip is quiet, just below it fires (no zoo model in FP16 has a share
    under the default 30%: ResNet-50 at 32 x 32 has 44%, the MLP 74%)."""
    from analyser.core.insights.context import Context
    from analyser.core.insights.throughput_rules import matmul_share

    with Analysis.open(sims["r50"]) as a:
        share, _ = matmul_share(Context(a, Thresholds()))
    assert Thresholds().half_partials_share <= share < 1
    above = Thresholds().with_overrides({"half_partials_share": share + 0.01})
    below = Thresholds().with_overrides({"half_partials_share": share - 0.01})
    assert _tip(sims["r50"], thresholds=above) is None
    assert _tip(sims["r50"], thresholds=below) is not None


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("r50", "opts.Precision.setPartialsType(torch.half)"),
        ("r50_popart", 'opts.partialsTypeMatMuls = "half"'),
        ("r50_popart", '"partialsType": "half"'),
        ("r50_tf_float", 'cfg.convolutions.poplar_options["partialsType"] = "half"'),
        ("r50_tf_float", 'cfg.matmuls.poplar_options["partialsType"] = "half"'),
    ],
)
def test_action_names_the_frameworks_own_call(sims, name, call):
    assert call in _tip(sims[name]).summary


def test_partials_from_the_run_configuration_without_vertex_types(sims, monkeypatch):
    """A profile without AMP vertex types: the stored run configuration, resolved as the engine
    resolves it (auto: PopTorch float, TensorFlow half for 16.16)."""
    from analyser.core.insights import context

    monkeypatch.setattr(context, "amp_vertex_types", lambda ctx: [])
    with Analysis.open(sims["r50"]) as a:
        # the compile's own record comes first
        assert a.src.meta.get("partials_type") == "float"
        got = context.amp_partials(context.Context(a, Thresholds()))
        assert got.dtype == "float32" and "the compile recorded float partials" in got.text
        # a profile written before the record (format 1.5): the run configuration
        a.src.meta.pop("partials_type")
        got = context.amp_partials(context.Context(a, Thresholds()))
    assert got.dtype == "float32" and "PopTorch's default for 16.16: float" in got.text
    assert got.float_programs is None
    with Analysis.open(sims["r50_tf"]) as a:
        assert a.src.meta.get("partials_type") == "half"
        assert context.amp_partials(context.Context(a, Thresholds())).dtype == "float16"
        a.src.meta.pop("partials_type")
        assert context.amp_partials(context.Context(a, Thresholds())).dtype == "float16"
    with Analysis.open(sims["r50_32"]) as a:
        assert context.amp_partials(context.Context(a, Thresholds())) is None
    tip = _tip(sims["r50"])  # still fires, its estimate from the compute share
    assert tip is not None and tip.addresses > 0


def test_estimate_is_at_most_half_the_matmul_share(sims):
    from analyser.core.insights.context import Context
    from analyser.core.insights.throughput_rules import matmul_share

    with Analysis.open(sims["r50"]) as a:
        share, _ = matmul_share(Context(a, Thresholds()))
        tip = next(t for t in find_insights(a) if t.id == ID)
    assert 0 < tip.addresses <= share / 2


def test_resimulated_effect_is_faster_with_its_interval(sims):
    for name in ("r50", "mlp"):
        with Analysis.open(sims[name]) as a:
            tip = next(t for t in find_insights(a) if t.id == ID)
            predict_effects(a, [tip], InProcessSimulator())
        e = tip.effect
        assert e.status == "fits" and e.recommended and e.tone == "good", e.message
        assert e.after["throughput_samples_per_s"] > e.before["throughput_samples_per_s"]
        assert e.after["cycles_per_sample"] < e.before["cycles_per_sample"]
        # half partials also halve the partials' temporaries
        assert e.after["peak_memory_bytes"] <= e.before["peak_memory_bytes"]
        change = e.intervals["throughput_samples_per_s"]["change"]
        assert change["value"] > 0
        assert e.message.startswith("throughput +")


def test_fp16_tips_say_the_partials_their_change_leaves(sims):
    """Under PopTorch a switch to 16.16 keeps float partials: the FP16 tips change the
    precision (and loss scale) only, say 'weights and activations' and 2x; under TensorFlow
    (half partials for 16.16) they say partials too, and 4x."""
    from analyser.core.insights.resimulate import apply_change
    from engine.config import RunConfig

    pressure = Thresholds().with_overrides({"memory_headroom": 1.0})
    with Analysis.open(sims["r50_32"]) as a:
        tips = {t.id: t for t in find_insights(a, pressure)}
        after = RunConfig.from_dict(apply_change(a.run_config, tips["throughput.fp16"].change))
    assert after.partials_dtype == "float32"
    for iid in ("memory.fp16", "throughput.fp16"):
        assert set(tips[iid].change) == {"precision", "loss_scaling"}
        assert "weights and activations" in tips[iid].summary + tips[iid].title
        assert "2x the FP32 AMP rate" in tips[iid].summary
        assert "partials" not in tips[iid].title
    assert tips["memory.fp16"].title == "Use FP16 (weights and activations)"
    with Analysis.open(sims["r50_32_tf"]) as a:
        tips = {t.id: t for t in find_insights(a, pressure)}
    assert tips["memory.fp16"].title == "Use FP16 (weights, activations and partials)"
    assert "4x the FP32 AMP rate" in tips["throughput.fp16"].summary


def test_fp16_change_leads_to_the_half_partials_tip(sims, tmp_path):
    """The configuration the FP16 tip re-simulates (PopTorch) is the run the half-partials tip
    fires on next."""
    import engine
    from analyser.core.insights.resimulate import apply_change
    from engine.config import RunConfig

    with Analysis.open(sims["r50_32"]) as a:
        tip = next(t for t in find_insights(a) if t.id == "throughput.fp16")
        cfg = RunConfig.from_dict(apply_change(a.run_config, tip.change))
    engine.simulate_to_file(cfg, tmp_path / "fp16.h5")
    assert _tip(tmp_path / "fp16.h5") is not None
    assert _tip(tmp_path / "fp16.h5", "throughput.fp16") is None
