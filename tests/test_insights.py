"""Insights on profiles simulated by the engine: each fires on a configuration built to trigger it
and stays quiet on a tuned one; re-simulated effects have the right sign; memory tips are ranked
FP16 first. Small models (mlp, ResNet-50 at 32x32) keep this fast."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyser.core import Analysis
from analyser.core.insights import Thresholds, find_insights, predict_effects
from analyser.sim.simulators import InProcessSimulator, ServiceSimulator


def _local() -> InProcessSimulator:
    """A few re-simulations in this process (no cluster), answered from the session's cache."""
    return InProcessSimulator()


_R50 = dict(model="resnet50", image_size=32, micro_batch_size=8, num_classes=10, precision="16.16")
_FAST_HOST = dict(
    device_iterations=64,
    loader_mode="async",
    prefetch_depth=3,
    host_preprocess_us_per_sample=1.0,
    loader_workers=32,
)
_PIPE = dict(
    _R50,
    num_ipus=2,
    strategy="pipelined",
    split_points=["layer3.0"],
    gradient_accumulation=3,
    # the pipeline rules' triggers, not PopTorch's defaults (on-chip state, recomputed stages,
    # its 8.25 ms per call, under which raising device iterations is the better tip, and its
    # profiled call's 25 ms wait in the trace)
    offload_optimiser_state="on",
    recomputation="off",
    host_call_overhead_us=150.0,
    profiled_call_wait_us=0.0,
)

# a tiny step behind a fast asynchronous host: the fixed per-call overhead dominates
_ROUND_TRIPS = dict(
    model="mlp",
    micro_batch_size=16,
    loader_mode="async",
    prefetch_depth=3,
    host_preprocess_us_per_sample=1.0,
    loader_workers=32,
    # a small per-call cost that 256 device iterations amortise (PopTorch's is 8.25 ms), and
    # the steady-state call's trace (no profiled call's wait)
    host_call_overhead_us=150.0,
    profiled_call_wait_us=0.0,
)

CONFIGS = {
    # the host feeds a tiny model synchronously, one device iteration per call, FP32
    "mlp_slow_host": dict(model="mlp", micro_batch_size=4096),
    "mlp_tuned": dict(model="mlp", gradient_accumulation=16, **_FAST_HOST),
    "mlp_tuned16": dict(model="mlp", gradient_accumulation=16, precision="16.16", **_FAST_HOST),
    "mlp_round_trips": _ROUND_TRIPS,
    "mlp_round_trips_di256": dict(_ROUND_TRIPS, device_iterations=256),
    "mlp_offloaded": dict(
        model="mlp", optimiser="adam", offload_optimiser_state="on", **_FAST_HOST
    ),
    "r50_oom32": dict(model="resnet50", image_size=224, micro_batch_size=16, num_classes=1000),
    "r50_oom16": dict(
        model="resnet50", image_size=224, micro_batch_size=16, num_classes=1000, precision="16.16"
    ),
    "r50_tuned": dict(_R50, **_FAST_HOST),
    # 32 samples at 32 px: the stride-2 1x1 downsample's weight gradient re-lays out a large
    # activation operand for a small matmul (PopLibs AMP costs), so its PreArrange costs more;
    # with half partials (16 conv units), where the matmul's own cycles are fewest
    "r50_mb32": dict(_R50, micro_batch_size=32, partials_type="half", **_FAST_HOST),
    "r50_io_tiles": dict(_R50, io_tiles=32, eight_bit_input=True, **_FAST_HOST),
    "pipe_ga3": _PIPE,
    "pipe_ga32": dict(_PIPE, gradient_accumulation=32),
    "pipe_unbalanced": dict(_PIPE, split_points=["layer1.1"]),
    "pipe_mb32": dict(_PIPE, micro_batch_size=32),
    "pipe_mb32_interleaved": dict(_PIPE, micro_batch_size=32, schedule="interleaved"),
    "pipe_split_balanced": dict(_PIPE, split_points=["layer3.3"]),
    "rep2": dict(_R50, replication_factor=2, optimiser="adamw"),
    "rep2_sharded": dict(
        _R50, replication_factor=2, optimiser="adamw", replicated_tensor_sharding=True
    ),
    "rep2_sgd": dict(_R50, replication_factor=2, optimiser="sgd-momentum"),
    "no_outlining": dict(_R50, outlining=False),
    "rep2_fast": dict(_R50, replication_factor=2, optimiser="adamw", **_FAST_HOST),
    "rep2_fast_ga64": dict(
        _R50, replication_factor=2, optimiser="adamw", gradient_accumulation=64, **_FAST_HOST
    ),
}


@pytest.fixture(scope="session")
def sims(tmp_path_factory):
    from shared_files import built_once

    def build(d: Path) -> None:
        import engine
        from engine.config import RunConfig

        for name, cfg in CONFIGS.items():
            engine.simulate_to_file(RunConfig.from_dict(cfg), d / f"{name}.h5")

    d = built_once(tmp_path_factory, "insights", build)
    return {name: d / f"{name}.h5" for name in CONFIGS}


def _ids(path, thresholds=None) -> list[str]:
    with Analysis.open(path) as a:
        return [t.id for t in find_insights(a, thresholds)]


@pytest.mark.parametrize(
    ("insight", "fires", "quiet"),
    [
        ("throughput.async_loader", "mlp_slow_host", "mlp_tuned"),
        ("throughput.device_iterations", "mlp_round_trips", "mlp_round_trips_di256"),
        ("throughput.async_loader", "mlp_slow_host", "mlp_round_trips"),
        ("throughput.prefetch", "mlp_slow_host", "mlp_tuned"),
        ("throughput.fp16", "mlp_tuned", "mlp_tuned16"),
        ("throughput.disable_offload", "mlp_offloaded", "mlp_tuned"),
        ("throughput.gradient_accumulation", "pipe_ga3", "pipe_ga32"),
        ("throughput.rebalance_stages", "pipe_unbalanced", "pipe_ga3"),
        ("throughput.tile_imbalance", "mlp_tuned", "r50_tuned"),
        ("throughput.gradient_accumulation", "rep2_fast", "rep2_fast_ga64"),
        ("memory.fp16", "r50_oom32", "r50_oom16"),
        ("memory.micro_batch", "r50_oom16", "r50_tuned"),
        ("memory.recompute", "r50_oom16", "r50_tuned"),
        ("memory.available_memory_proportion", "r50_oom16", "r50_tuned"),
    ],
)
def test_fires_and_stays_quiet(sims, insight, fires, quiet):
    assert insight in _ids(sims[fires])
    assert insight not in _ids(sims[quiet])


def test_rearrangement_fires_above_its_ratio(sims):
    # PopLibs' planner spreads a weight update's rearrangements over all the tiles it uses, so
    # at the default ratio (rearrangement > the op's own cycles) no zoo run fires; r50_mb32's
    # weight gradients of layer4 rearrange for about 0.7 x their other cycles
    low = Thresholds().with_overrides({"prearrange_ratio": 0.5})
    assert "throughput.rearrangement" in _ids(sims["r50_mb32"], low)
    assert "throughput.rearrangement" not in _ids(sims["r50_mb32"])
    assert "throughput.rearrangement" not in _ids(sims["mlp_tuned"], low)


@pytest.mark.parametrize(
    ("insight", "fires", "quiet", "change"),
    [
        ("memory.interleaved", "pipe_mb32", "pipe_mb32_interleaved", {"schedule": "interleaved"}),
        ("memory.move_split", "pipe_ga3", "pipe_split_balanced", None),
        ("memory.rts", "rep2", "rep2_sharded", {"replicated_tensor_sharding": True}),
        ("memory.offload", "rep2", "pipe_ga3", {"offload_optimiser_state": "on"}),
        ("memory.optimiser", "rep2", "rep2_sgd", {"optimiser": "sgd-momentum"}),
    ],
)
def test_memory_rules_under_pressure(sims, insight, fires, quiet, change):
    """These small models fit with room to spare, so memory pressure is forced through the
    memory_headroom threshold (every tile counts as nearly full); the rules' own triggers decide."""
    pressure = Thresholds().with_overrides({"memory_headroom": 1.0})
    with Analysis.open(sims[fires]) as a:
        tip = next((t for t in find_insights(a, pressure) if t.id == insight), None)
    assert (
        tip is not None and tip.severity == "info"
    )  # fits: low-headroom tips rank below throughput
    if change is not None:
        assert tip.change == change
    else:
        assert set(tip.change) == {"split_points"}
    assert insight not in _ids(sims[quiet], pressure)
    assert insight not in _ids(sims[fires])  # default headroom: no pressure, no memory tips


def test_outlining_tip(sims):
    """With outlining off the tip turns it on; with it on, the tip is advice only (no change)."""
    low = Thresholds().with_overrides({"memory_headroom": 1.0, "code_share": 0.05})
    with Analysis.open(sims["no_outlining"]) as a:
        tip = next(t for t in find_insights(a, low) if t.id == "memory.outlining")
        assert tip.change == {"outlining": True}
    with Analysis.open(sims["r50_tuned"]) as a:
        tip = next(t for t in find_insights(a, low) if t.id == "memory.outlining")
        assert tip.change == {}
        code_share = a.memory.code_bytes / a.memory.peak_memory_bytes
    assert "memory.outlining" not in _ids(
        sims["r50_tuned"],
        Thresholds().with_overrides({"memory_headroom": 1.0, "code_share": code_share + 0.01}),
    )


def test_input_rules_with_lowered_thresholds(sims):
    """8-bit input and I/O tiles: the small models do not stream enough input to cross the
    default thresholds, so lower them to exercise the rules; the tuned run (uint8 input on I/O
    tiles) stays quiet."""
    low = Thresholds().with_overrides({"input_stream_share": 1e-4, "io_stream_share": 1e-4})
    ids = _ids(sims["r50_tuned"], low)
    assert "throughput.8bit_input" in ids and "throughput.io_tiles" in ids
    quiet = _ids(sims["r50_io_tiles"], low)
    assert "throughput.8bit_input" not in quiet and "throughput.io_tiles" not in quiet


def test_allreduce_evidence(sims):
    with Analysis.open(sims["rep2_fast"]) as a:
        tip = next(
            t
            for t in find_insights(a)
            if t.id.startswith("throughput.") and "gradient_accumulation" in t.change
        )
    assert any("all-reduce" in e.text for e in tip.evidence)
    assert tip.change == {"gradient_accumulation": 2}


def test_host_wait_grading(sims):
    with Analysis.open(sims["mlp_slow_host"]) as a:
        tip = next(t for t in find_insights(a) if t.id == "throughput.async_loader")
        assert a.metrics.host_wait_share >= 0.2 and tip.severity == "critical"
        share = a.metrics.host_wait_share
        high = Thresholds().with_overrides({"host_wait_high": min(1.0, share + 0.01)})
        tip = next(t for t in find_insights(a, high) if t.id == "throughput.async_loader")
        assert tip.severity == "warning"
        assert tip.change == {"loader_mode": "async"}
        assert tip.evidence and tip.evidence[0].where


def test_memory_ranking_fp16_first(sims):
    with Analysis.open(sims["r50_oom32"]) as a:
        tips = find_insights(a)
    assert tips[0].id == "memory.fp16"
    assert tips[0].severity == "critical"
    # training without loss scaling: FP16 comes with the conventional static loss scale
    assert tips[0].change == {"precision": "16.16", "loss_scaling": 128.0}
    assert "loss scale of 128" in tips[0].trade_off
    mem = [t for t in tips if t.category == "memory"]
    assert tips[: len(mem)] == mem  # memory tips come first


def test_effects_have_the_right_sign(sims):
    tips = []
    for name, iid in (
        ("mlp_slow_host", "throughput.async_loader"),
        ("mlp_round_trips", "throughput.device_iterations"),
    ):
        with Analysis.open(sims[name]) as a:
            tip = next(t for t in find_insights(a) if t.id == iid)
            seen: list[tuple[int, int]] = []
            # the Dask service's simulator (the GUI's), as in-process everywhere else here
            from analyser.sim.service import get_service

            predict_effects(
                a,
                [tip],
                ServiceSimulator(get_service()),
                progress=lambda d, n, i, s=seen: s.append((d, n)),
            )
            assert seen[-1] == (1, 1)
            tips.append(tip)
    for t in tips:
        e = t.effect
        assert e.status == "fits" and e.recommended, e.message
        # host-inclusive throughput rises; the device trace (cycles per sample) does not grow
        assert e.after["throughput_samples_per_s"] > e.before["throughput_samples_per_s"]
        assert e.after["cycles_per_sample"] <= e.before["cycles_per_sample"]
    # more device iterations per call also shorten the device trace per sample (one call start)
    assert tips[1].effect.after["cycles_per_sample"] < tips[1].effect.before["cycles_per_sample"]
    with Analysis.open(sims["r50_oom32"]) as a:
        tips = [t for t in find_insights(a) if t.id == "memory.fp16"]
        predict_effects(a, tips, _local())
    e = tips[0].effect
    assert e.after["peak_memory_bytes"] < e.before["peak_memory_bytes"]
    assert e.after["oom_tiles"] <= e.before["oom_tiles"]


def test_tip_that_would_cause_oom_is_not_recommended(sims):
    """Re-simulating a change that makes a fitting run go out of memory says so."""
    from analyser.core.insights.model import Insight

    with Analysis.open(sims["r50_tuned"]) as a:
        tip = Insight(
            "test.huge_batch",
            "Raise the micro-batch",
            "info",
            "throughput",
            "",
            change={"micro_batch_size": 4096},
        )
        predict_effects(a, [tip], _local())
    assert tip.effect.status == "oom" and not tip.effect.recommended
    assert "would not fit" in tip.effect.message


def test_rejected_change_is_reported(sims):
    from analyser.core.insights.model import Insight

    with Analysis.open(sims["mlp_tuned"]) as a:
        tip = Insight("test.bad", "Bad", "info", "throughput", "", change={"precision": "8.8"})
        predict_effects(a, [tip], _local())
    assert tip.effect.status == "error" and "precision" in tip.effect.message


def test_walkthrough_step1_top_insight_is_fp16(walkthrough_profiles):
    with Analysis.open(walkthrough_profiles["1-base"]) as a:
        assert not a.memory.fits and a.execution is None
        tips = find_insights(a)
    assert tips[0].id == "memory.fp16"
    assert tips[0].title.startswith("Use FP16")


def test_fp16_tip_turns_walkthrough_step1_into_step2(walkthrough_profiles):
    """The FP16 tip of step 1 (training, loss scaling 1) changes precision and loss scaling; the
    configuration its what-if re-simulates equals step 2's on every field the tip changes, and
    step 2 (already scaled) gets no FP16 tip."""
    from analyser.core.insights.resimulate import apply_change
    from engine.config import RunConfig

    with Analysis.open(walkthrough_profiles["1-base"]) as a:
        assert float(a.run_config.get("loss_scaling", 1.0)) == 1.0
        tip = next(t for t in find_insights(a) if t.id == "memory.fp16")
        whatif = RunConfig.from_dict(apply_change(a.run_config, tip.change)).model_dump()
    with Analysis.open(walkthrough_profiles["2-half"]) as b:
        step2 = RunConfig.from_dict(b.run_config).model_dump()
    assert set(tip.change) == {"precision", "loss_scaling"}
    for key in tip.change:
        assert whatif[key] == step2[key], key
    assert "memory.fp16" not in _ids(walkthrough_profiles["2-half"])


def test_walkthrough_tips_lead_to_the_next_step(walkthrough_profiles):
    """Each later walkthrough step's change is suggested one step before and quiet after."""
    ids = {k: _ids(p) for k, p in walkthrough_profiles.items() if k != "1-base"}
    for k in ids:
        with Analysis.open(walkthrough_profiles[k]) as a:
            if not a.has_execution:
                pytest.skip(f"engine: walkthrough step {k} does not fit")
    assert "throughput.8bit_input" in ids["4-device-iterations"]
    assert "throughput.8bit_input" not in ids["5-8bit-io"]
    assert "throughput.async_loader" in ids["5-8bit-io"]
    assert "throughput.async_loader" not in ids["6-async"]


def test_effect_verdicts():
    from analyser.core.insights.model import Insight
    from analyser.core.insights.resimulate import _judge

    mem = Insight("m", "m", "critical", "memory", "")
    thr = Insight("t", "t", "warning", "throughput", "")
    base = {"oom_tiles": 10, "peak_memory_bytes": 100}
    assert _judge(mem, base, {"oom_tiles": 0, "peak_memory_bytes": 80}).status == "fits"
    better = _judge(mem, base, {"oom_tiles": 4, "peak_memory_bytes": 90})
    assert better.status == "oom" and better.recommended and "still does not fit" in better.message
    same = _judge(mem, base, {"oom_tiles": 10, "peak_memory_bytes": 99})
    assert not same.recommended and "not recommended" in same.message
    fits = {"oom_tiles": 0, "cycles_per_sample": 100.0, "throughput_samples_per_s": 10.0}
    broke = _judge(thr, fits, {"oom_tiles": 1})
    assert not broke.recommended and "would not fit (1 tile out of memory)" in broke.message
    slower = _judge(
        thr, fits, {"oom_tiles": 0, "cycles_per_sample": 120.0, "throughput_samples_per_s": 8.0}
    )
    assert not slower.recommended and "slower" in slower.message
    faster = _judge(
        thr, fits, {"oom_tiles": 0, "cycles_per_sample": 80.0, "throughput_samples_per_s": 12.0}
    )
    assert faster.recommended and faster.status == "fits"
    tiny = _judge(
        thr, fits, {"oom_tiles": 0, "cycles_per_sample": 99.5, "throughput_samples_per_s": 10.05}
    )
    assert tiny.recommended and tiny.message.startswith("little effect")


def test_combination_that_fits(sims):
    """No single memory tip fits ResNet-50 224x224 micro-batch 16 in FP32; a combination does."""
    with Analysis.open(sims["r50_oom32"]) as a:
        tips = find_insights(a, simulator=_local())
    singles = [t for t in tips if t.category == "memory" and t.id != "memory.combined"]
    assert singles and all(t.effect.status != "fits" for t in singles if t.change)
    combo = next(t for t in tips if t.id == "memory.combined")
    assert combo.effect.status == "fits" and combo.effect.recommended
    assert combo.change.get("precision") == "16.16" and len(combo.evidence) >= 2
    assert combo.effect.after["oom_tiles"] == 0 and combo.effect.after["total_cycles"] > 0
    assert tips.index(combo) == len(singles)  # right after the single memory tips


def test_split_change_is_explained_per_ipu(sims):
    """(A comparison check that reuses this module's simulated pipelines.)"""
    from analyser.core.comparison import compare_pair

    with Analysis.open(sims["pipe_ga3"]) as a, Analysis.open(sims["pipe_split_balanced"]) as b:
        p = compare_pair(a, b)
    texts = {e.metric: e.text for e in p.explanations}
    assert "split_points [layer3.3] instead of [layer3.0]" in texts["ipu_memory"]
    assert "IPU 0" in texts["ipu_memory"] and "IPU 1" in texts["ipu_memory"]
    assert "stage_imbalance" in texts


def test_threshold_overrides():
    from analyser.core.insights import ThresholdError

    t = Thresholds().with_overrides(["host_wait_high=30%", "stage_imbalance=1.5"])
    assert t.host_wait_high == pytest.approx(0.30) and t.stage_imbalance == 1.5
    assert Thresholds().with_overrides({"ramp_share": 0.1}).ramp_share == 0.1
    assert set(Thresholds.docs()) == {f for f in Thresholds.__dataclass_fields__}
    for bad, word in (
        ("nope=1", "unknown threshold"),
        ("ramp_share", "name=value"),
        ("ramp_share=x", "needs a number"),
        ("ramp_share=-1", "negative"),
    ):
        with pytest.raises(ThresholdError, match=word):
            Thresholds().with_overrides([bad])


def test_insights_doc_is_generated_from_the_registry():
    from analyser.core.insights.docs import DOC_PATH, render_markdown

    assert DOC_PATH.read_text(encoding="utf-8") == render_markdown(), (
        "docs/insights.md is stale: run `python -m analyser.core.insights.docs --write`"
    )


def test_every_rule_declares_what_it_reads_and_changes():
    """A rule's declared thresholds and run options are the ones its code uses, every
    threshold is read by some rule, and every declared option is a RunConfig field."""
    import inspect
    import re

    from analyser.core.insights import all_rules
    from engine.config import RunConfig

    rules = all_rules()
    assert len(rules) >= 20
    ids = [i for r in rules for i in r.ids]
    assert len(ids) == len(set(ids))
    for r in rules:
        code = inspect.getsource(r.evaluate)
        read = set(re.findall(r"ctx\.thresholds\.([a-z0-9_]+)", code))
        if "ctx.memory_pressure" in code or r.category == "memory":  # find_insights' gate
            read.add("memory_headroom")
        assert read <= set(r.thresholds), (r.id, read - set(r.thresholds))
        assert set(r.thresholds) <= set(Thresholds.__dataclass_fields__), r.id
        set_here = set(re.findall(r'(?:[{,]\s*|change\[)"([a-z0-9_]+)"\]?:?', code)) & set(
            RunConfig.model_fields
        )
        assert set_here <= set(r.changes), (r.id, set_here - set(r.changes))
        assert set(r.changes) <= set(RunConfig.model_fields), r.id
        assert set(re.findall(r'\.(?:cfg|has)\("([a-z0-9_]+)"', code)) <= set(
            RunConfig.model_fields
        )
        assert r.category == r.id.split(".")[0]
    read_by_some = {t for r in rules for t in r.thresholds}
    assert read_by_some == set(Thresholds.__dataclass_fields__)


def test_split_moves_toward_the_loaded_stage(sims):
    """The proposed split hands blocks from the fuller stage to its lighter neighbour."""
    pressure = Thresholds().with_overrides({"memory_headroom": 1.0})
    with Analysis.open(sims["pipe_ga3"]) as a:  # split at layer3.0, IPU 1 (stage 1) fuller
        assert a.memory.ipu_total()[1] > a.memory.ipu_total()[0]
        tip = next(t for t in find_insights(a, pressure) if t.id == "memory.move_split")
    (new,) = tip.change["split_points"]
    assert new.startswith("layer3.") and int(new.split(".")[1]) > 0  # later: stage 1 shrinks
    with Analysis.open(sims["pipe_unbalanced"]) as a:  # split at layer1.1: stage 1 too long
        tip = next(t for t in find_insights(a) if t.id == "throughput.rebalance_stages")
        assert a.execution.stage_cycles[1] > a.execution.stage_cycles[0]
    (new,) = tip.change["split_points"]
    assert new > "layer1.1"  # later in the network


def _tip(iid, category, *, addresses=0.0, rank=0, effect=None, severity="warning"):
    from analyser.core.insights.model import Insight

    t = Insight(iid, iid, severity, category, "", change={"x": 1}, rank=rank)
    t.addresses, t.effect = addresses, effect
    return t


def test_ranking_by_predicted_benefit():
    """Fits: throughput tips by predicted benefit (re-simulated saving, else the share they
    address), then low-headroom memory tips, then tips predicted not to help. OOM: memory tips
    in the memory guide's order first."""
    from types import SimpleNamespace

    from analyser.core.insights import rank_insights
    from analyser.core.insights.model import Effect

    before = {"cycles_per_sample": 100.0, "oom_tiles": 0}

    def eff(cps, recommended=True, status="fits"):
        after = {"cycles_per_sample": cps, "oom_tiles": 0 if status == "fits" else 5}
        return Effect(status, "", before, after, recommended=recommended)

    est = _tip("t.estimate", "throughput", addresses=0.2, rank=0)
    big = _tip("t.big", "throughput", rank=3, effect=eff(60.0))  # saves 40%
    small = _tip("t.small", "throughput", rank=1, effect=eff(99.5))
    worse = _tip("t.oom", "throughput", rank=2, effect=eff(0, False, "oom"))
    mem_cost = _tip("m.costly", "memory", rank=0, effect=eff(110.0))
    mem_free = _tip("m.free", "memory", rank=1, effect=eff(95.0))
    tips = [est, big, small, worse, mem_cost, mem_free]
    fits = SimpleNamespace(memory=SimpleNamespace(fits=True))
    assert [t.id for t in rank_insights(fits, tips)] == [
        "t.big",
        "t.estimate",
        "t.small",
        "m.free",
        "m.costly",
        "t.oom",
    ]
    oom = SimpleNamespace(memory=SimpleNamespace(fits=False))
    order = [t.id for t in rank_insights(oom, tips)]
    assert order[:2] == ["m.costly", "m.free"]  # memory guide's order, whatever the benefit


def test_ranking_puts_severity_before_benefit():
    """The list's severity column reads top down (a warning above a critical read as
    a mistake); within a severity the larger predicted benefit comes first; a tip predicted
    not to help still comes last, whatever its severity. The CLI and the GUI say the order."""
    from types import SimpleNamespace

    from analyser.core.insights import ORDER, rank_insights
    from analyser.core.insights.model import Effect

    before = {"cycles_per_sample": 100.0, "oom_tiles": 0}

    def eff(cps, recommended=True):
        return Effect(
            "fits", "", before, {"cycles_per_sample": cps, "oom_tiles": 0}, recommended=recommended
        )

    crit_small = _tip("t.crit", "throughput", rank=4, severity="critical", effect=eff(95.0))
    warn_big = _tip("t.warn_big", "throughput", rank=1, effect=eff(50.0))
    warn_small = _tip("t.warn_small", "throughput", rank=0, addresses=0.1)
    info_big = _tip("t.info", "throughput", rank=2, severity="info", effect=eff(40.0))
    crit_worse = _tip(
        "t.crit_worse", "throughput", rank=3, severity="critical", effect=eff(120.0, False)
    )
    low = _tip("m.low", "memory", rank=0, severity="info", effect=eff(90.0))
    tips = [low, info_big, warn_small, crit_worse, warn_big, crit_small]
    fits = SimpleNamespace(memory=SimpleNamespace(fits=True))
    order = [t.id for t in rank_insights(fits, tips)]
    assert order == ["t.crit", "t.warn_big", "t.warn_small", "t.info", "m.low", "t.crit_worse"]
    sev = {"critical": 0, "warning": 1, "info": 2}
    shown = [t for t in rank_insights(fits, tips) if t.category == "throughput"][:-1]
    assert [sev[t.severity] for t in shown] == sorted(sev[t.severity] for t in shown)
    assert "severity" in ORDER["fits"] and "predicted gain" in ORDER["fits"]


def test_walkthrough_fitting_step_ranks_throughput_first(walkthrough_profiles):
    """Step 3 fits with little headroom: the memory tips fire but rank below the throughput
    tips (as info), and the top tip is one that raises throughput."""
    with Analysis.open(walkthrough_profiles["3-accumulate"]) as a:
        if not a.memory.fits:
            pytest.skip("engine: walkthrough step 3 does not fit")
        tips = find_insights(a)
    assert tips and tips[0].category == "throughput"
    mem = [i for i, t in enumerate(tips) if t.category == "memory"]
    useful = [i for i, t in enumerate(tips) if t.category == "throughput" and t.addresses > 0]
    assert all(t.severity == "info" for t in tips if t.category == "memory")
    assert not mem or max(useful) < min(mem)


def test_deltas_are_against_a_resimulated_baseline(sims, tmp_path):
    """The profile's own config is re-simulated and the deltas use it; when the profile came
    from another engine version, or the engine no longer reproduces its figures, it says so."""
    import shutil

    import h5py

    from analyser.core.insights import resimulate
    from analyser.core.insights.model import Insight

    def predict(path):
        with Analysis.open(path) as a:
            tip = Insight("t", "t", "info", "throughput", "", change={"loader_mode": "async"})
            predict_effects(a, [tip], _local())
            return tip.effect, a.metrics, a.run_config

    eff, m, cfg = predict(sims["mlp_slow_host"])
    assert eff.baseline == "resimulated" and "reproduces" in eff.baseline_note
    assert eff.before["cycles_per_sample"] == pytest.approx(m.cycles_per_sample)
    old = tmp_path / "old.h5"
    shutil.copy(sims["mlp_slow_host"], old)
    with h5py.File(old, "r+") as f:
        f.attrs["engine_version"] = "0.0.1"
    eff, _m, _cfg = predict(old)
    assert "engine 0.0.1" in eff.baseline_note
    # a baseline that no longer matches the profile: deltas follow the re-simulation
    key = resimulate._config_key(cfg)
    true = dict(resimulate._BASELINES[key])
    try:
        resimulate._BASELINES[key]["peak_memory_bytes"] = true["peak_memory_bytes"] + 45e6
        eff, m, _cfg = predict(sims["mlp_slow_host"])
    finally:
        resimulate._BASELINES[key] = true
    assert eff.before["peak_memory_bytes"] == m.peak_memory_bytes + 45e6
    assert "differ" in eff.baseline_note and "peak memory" in eff.baseline_note
    assert abs(eff.rel("peak_memory_bytes")) > 0.001  # the change's own effect vs the baseline


def test_estimates_follow_the_host_model_and_memory(walkthrough_profiles):
    """Walkthrough step 3 (IPU 0 nearly full): disabling offloading would put the state back on
    a full IPU, so it says it probably does not fit and claims no benefit; a deeper prefetch
    only hides the per-copy stream latency, 8-bit input also the host's cast + normalise."""
    with Analysis.open(walkthrough_profiles["3-accumulate"]) as a:
        if not a.has_execution:
            pytest.skip("engine: walkthrough step 3 does not fit")
        tips = {t.id: t for t in find_insights(a)}
    # PopTorch keeps optimiser state on chip (PopART's default location): nothing to disable
    assert "throughput.disable_offload" not in tips
    pre, eight = tips["throughput.prefetch"], tips["throughput.8bit_input"]  # input-bound
    assert eight.addresses > pre.addresses
    assert any("cast + normalise" in e.text for e in eight.evidence)
    assert any("stream copies" in e.text for e in pre.evidence)


def test_walkthrough_host_tips_rank_first_on_steps_4_and_5(walkthrough_profiles):
    """With the host following PopTorch's defaults (num_workers 0, sync), 8-bit I/O and the
    async loader are the two largest host-inclusive gains of steps 4 to 6, and the insights
    put them on top: on step 4 both (the async loader first: the host wait is critical and
    the list reads critical first; 8-bit I/O is the larger gain), on step 5 the
    async loader."""
    from analyser.core.insights.model import benefit

    order, tips = {}, {}
    for step in ("4-device-iterations", "5-8bit-io"):
        with Analysis.open(walkthrough_profiles[step]) as a:
            if not a.has_execution:
                pytest.skip(f"engine: walkthrough step {step} does not fit")
            tips[step] = {t.id: t for t in find_insights(a) if t.category == "throughput"}
            order[step] = list(tips[step])
    step4 = tips["4-device-iterations"]
    assert order["4-device-iterations"][:2] == ["throughput.async_loader", "throughput.8bit_input"]
    assert step4["throughput.async_loader"].severity == "critical"
    assert step4["throughput.8bit_input"].severity == "warning"
    assert benefit(step4["throughput.8bit_input"]) > benefit(step4["throughput.async_loader"])
    assert order["5-8bit-io"][0] == "throughput.async_loader"


def test_memory_evidence_says_what_its_figure_is(sims):
    """'weights, activations and gradients hold 2.52 GiB' read as memory in
    use when the whole peak was 2.20 GiB; the evidence names the figure (variables summed over
    the run, not all live at once) and gives the peak beside it."""
    from analyser.core.units import fmt_bytes

    with Analysis.open(sims["r50_oom32"]) as a:
        tip = next(t for t in find_insights(a) if t.id == "memory.fp16")
        peak = fmt_bytes(a.metrics.peak_memory_bytes)
    text = next(e.text for e in tip.evidence if "FP32" in e.text)
    assert "not all live at the same time" in text
    assert f"peak memory {peak}" in text


def test_each_throughput_rule_declares_what_its_share_is_of():
    """The host-inclusive tips are a property of their @rule (share_of), not a list kept apart:
    every throughput rule says it, memory rules do not, and registering without it fails."""
    from analyser.core.insights.catalogue import all_rules
    from analyser.core.insights.registry import SHARES_OF, rule

    for r in all_rules():
        assert (r.share_of in SHARES_OF) == (r.category == "throughput"), r.id
    host = {i for r in all_rules() if r.share_of == "host-inclusive time" for i in r.ids}
    assert {"throughput.async_loader", "throughput.loader_workers"} <= host
    assert "throughput.tile_imbalance" not in host
    with pytest.raises(ValueError, match="share_of"):
        rule("throughput.x", thresholds=(), changes=(), fires_when="", change="", trade_off="")
