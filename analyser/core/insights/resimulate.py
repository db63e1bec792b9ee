"""Predicted effects: re-simulate each insight's changed run config with the embedded engine.

Re-simulations go through the :class:`~analyser.core.simulator.Simulator` the caller hands in
(:mod:`analyser.sim`: in this process for a few, or the simulation service's Dask workers), and
every answer is cached, so a configuration already simulated (by an earlier prediction, a what-if
or ``analyse tune``) is not simulated again. The simulators read back the same metrics as the
original (``analyser.core.Metrics``), so before and after come from one code path.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable
from typing import Any

from analyser.core import intervals
from analyser.core.insights.model import EFFECT_KEYS, Effect, Evidence, Insight
from analyser.core.quantities import QUANTITIES
from analyser.core.simulator import Simulator
from analyser.core.units import fmt_bytes, fmt_delta_pct

ProgressFn = Callable[[int, int, str], None]

#: A throughput tip gaining less than this share of cycles per sample is labelled "little effect".
LITTLE = 0.01


def _tiles(n: int) -> str:
    return f"{n:,} tile" + ("" if n == 1 else "s")


def apply_change(run_config: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``run_config`` with ``change`` applied (dotted keys walk nested dicts)."""
    out = copy.deepcopy(run_config)
    for key, value in change.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def _result(response) -> tuple[str, Any]:
    """A service response as ``("ok", effect metrics)`` or ``("error", one sentence)``."""
    if response.simulated:  # the figures, and the features their intervals are read from
        keys = (*EFFECT_KEYS, *intervals.FEATURE_KEYS)
        return "ok", {k: response.figures.get(k) for k in keys}
    return "error", response.message


def _figures(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d.get(k) for k in EFFECT_KEYS}


def _attach_intervals(
    eff: Effect,
    before_features: intervals.Features,
    after: dict[str, Any],
    after_config: dict[str, Any],
) -> Effect:
    """Fill ``eff.intervals``: every figure before / after and its change, with the range the
    fidelity table allows (analyser.core.intervals)."""
    eff.intervals = intervals.change_intervals(
        eff.before,
        eff.after,
        before_features,
        intervals.features_from(after, after_config),
        EFFECT_KEYS,
    )
    # the verdict says it too: "throughput +86.0% (80% range +64% to +111%), ..." or why the
    # prediction has no range
    key = "throughput_samples_per_s"
    said = f"throughput {fmt_delta_pct(eff.before.get(key), eff.after.get(key))}"
    change = eff.intervals[key]["change"]
    if change.get("value") is not None and said in eff.message:
        rng = intervals.describe_change(change)
        eff.message = eff.message.replace(said, f"{said} {rng}", 1)
    return eff


def _simulate_all(
    simulator: Simulator,
    configs: list[dict[str, Any]],
    done: Callable[[int, tuple[str, Any]], None],
) -> None:
    """Simulate ``configs``, calling ``done(index, result)`` as each finishes; an interrupt
    closes the simulator's iterator, which cancels the rest."""
    with contextlib.closing(simulator.simulate_many(configs)) as answers:
        for i, response in answers:
            done(i, _result(response))


def _simulate(simulator: Simulator, run_config: dict[str, Any]) -> tuple[str, Any]:
    out: list[tuple[str, Any]] = []
    _simulate_all(simulator, [run_config], lambda _i, result: out.append(result))
    return out[0]


def _judge(tip: Insight, before: dict[str, Any], after: dict[str, Any]) -> Effect:
    oom_after = int(after.get("oom_tiles") or 0)
    oom_before = int(before.get("oom_tiles") or 0)
    eff = Effect("oom" if oom_after else "fits", "", _figures(before), _figures(after))
    if oom_after and not oom_before:
        eff.recommended = False
        eff.message = (
            f"not recommended: the changed configuration would not fit "
            f"({_tiles(oom_after)} out of memory)."
        )
    elif oom_after:
        eff.recommended = oom_after < oom_before
        if eff.recommended:
            eff.message = (
                f"still does not fit: {_tiles(oom_after)} out of memory "
                f"(from {oom_before:,}); combine with other memory tips."
            )
        else:
            eff.message = (
                f"not recommended on its own: {_tiles(oom_after)} out of memory "
                f"(from {oom_before:,})."
            )
    elif oom_before:
        eff.message = (
            f"fits: no tile out of memory (from {oom_before:,}); peak memory "
            f"{fmt_bytes(after.get('peak_memory_bytes'))}."
        )
    else:
        cps_a, cps_b = before.get("cycles_per_sample"), after.get("cycles_per_sample")
        thr = fmt_delta_pct(
            before.get("throughput_samples_per_s"), after.get("throughput_samples_per_s")
        )
        mem = fmt_delta_pct(before.get("peak_memory_bytes"), after.get("peak_memory_bytes"))
        eff.message = (
            f"throughput {thr}, cycles per sample {fmt_delta_pct(cps_a, cps_b)}, peak memory {mem}."
        )
        # judged on the host-inclusive time per sample (1 / throughput: host time outside the
        # device trace included), falling back to the device's cycles per sample
        thr_a, thr_b = before.get("throughput_samples_per_s"), after.get("throughput_samples_per_s")
        if thr_a and thr_b:
            per_a, per_b = 1.0 / thr_a, 1.0 / thr_b
        else:
            per_a, per_b = cps_a, cps_b
        slower = bool(per_a and per_b and per_b > per_a * 1.001)
        if tip.category == "throughput" and slower:
            eff.recommended = False
            eff.message = "not recommended: predicted slower; " + eff.message
        elif tip.category == "throughput" and per_a and per_b and per_b > per_a * (1 - LITTLE):
            eff.message = f"little effect (under {LITTLE:.0%}): " + eff.message
            eff.tone = "neutral"
        elif tip.category == "memory" and slower:
            # the program fits already: this buys headroom with throughput
            eff.message = (
                f"costs throughput ({thr}) for memory ({mem}): the program fits already, so "
                "apply it only if you need the headroom (e.g. for a larger micro-batch). "
                + eff.message
            )
            eff.tone = "neutral"
    if not eff.recommended:
        eff.tone = "bad"
    elif not eff.tone:
        eff.tone = "good" if eff.status == "fits" else "neutral"
    return eff


#: Re-simulated baselines per run configuration (this process): the engine is deterministic,
#: so one re-simulation per profile configuration serves every later prediction.
_BASELINES: dict[str, dict[str, Any]] = {}


def _config_key(run_config: dict[str, Any]) -> str:
    return json.dumps(run_config, sort_keys=True, default=str)


def current_engine_version() -> str:
    """The version this installation writes into profiles (root attribute engine_version)."""
    try:
        from importlib.metadata import version

        return version("ipu-graph-analyser")
    except Exception:  # not installed as a distribution
        return "unknown"


_LABELS: dict[str, tuple[str, Callable[[Any], str]]] = {
    k: (QUANTITIES[k].short, QUANTITIES[k].format) for k in EFFECT_KEYS
}


def _differs(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(float(a) - float(b)) > 1e-6 * max(1.0, abs(float(a)))


def _baseline(analysis, profile: dict[str, Any], status: str, value: Any) -> Effect:
    """The baseline the deltas are computed against, as an Effect carrying only its origin
    (``baseline``, ``baseline_note``) and its figures (``before``)."""
    written = str(getattr(analysis.target, "engine_version", "") or "unknown")
    now = current_engine_version()
    if status != "ok":
        return Effect(
            "error",
            "",
            dict(profile),
            baseline="profile",
            baseline_note=(
                "Baseline not re-simulated, the engine rejects the profile's own configuration: "
                f"{str(value).rstrip('.')}. Deltas are against the profile's figures and may "
                "include engine differences."
            ),
        )
    diff = [k for k in EFFECT_KEYS if _differs(profile.get(k), value.get(k))]
    why = []
    if written != now:
        why.append(f"the profile was written by engine {written}, this is {now}")
    if diff:
        shown = "; ".join(
            f"{_LABELS[k][0]} {_LABELS[k][1](profile.get(k))} in the profile, "
            f"{_LABELS[k][1](value.get(k))} re-simulated"
            for k in diff[:2]
        )
        why.append(f"its figures differ from a re-simulation of its own configuration ({shown})")
    if why:
        note = (
            "Baseline re-simulated: "
            + "; ".join(why)
            + ". Deltas are against the re-simulation, so they hold the change's effect only."
        )
    else:
        note = (
            "Baseline re-simulated with this engine: it reproduces the profile's figures, so "
            "the deltas are the change's effect only."
        )
    return Effect("fits", "", _figures(value), baseline="resimulated", baseline_note=note)


def predict_effects(
    analysis,
    insights: list[Insight],
    simulator: Simulator,
    *,
    progress: ProgressFn | None = None,
    baseline: bool = True,
) -> list[Insight]:
    """Fill ``insight.effect`` for every insight with a change (in place; also returned).

    Re-simulations run on ``simulator`` (:mod:`analyser.sim`: in process, or on the simulation
    service's workers).

    With ``baseline`` (default) the profile's own run config is re-simulated too (in the same
    batch, cached per configuration) and the deltas are computed against it, so a
    profile written by another engine version, or whose figures the engine no longer
    reproduces, does not mix model changes into a tip's effect; each effect says which
    baseline it used (``Effect.baseline`` / ``baseline_note``).
    """
    profile = {k: getattr(analysis.metrics, k) for k in EFFECT_KEYS}
    todo = [t for t in insights if t.change]
    for t in insights:
        if not t.change:
            t.effect = Effect(
                "unavailable", "no run option to re-simulate.", profile, {}, tone="neutral"
            )
    if not todo:
        return insights
    base = analysis.run_config
    if not base:
        for t in todo:
            t.effect = Effect(
                "unavailable",
                "the profile has no run configuration to re-simulate.",
                profile,
                {},
                tone="neutral",
            )
        return insights
    try:
        import engine  # noqa: F401
        from engine import simulate_to_file  # noqa: F401
    except ImportError:
        for t in todo:
            t.effect = Effect(
                "unavailable", "the engine is not available.", profile, {}, tone="neutral"
            )
        return insights
    key = _config_key(base)
    need_base = baseline and key not in _BASELINES
    jobs: list[tuple[Insight | None, dict[str, Any]]] = [
        (t, apply_change(base, t.change)) for t in todo
    ]
    if need_base:
        jobs.insert(0, (None, copy.deepcopy(base)))
    results: dict[int, tuple[str, Any]] = {}
    done = 0
    if progress:
        progress(0, len(todo), "")

    def record(idx: int, result: tuple[str, Any]) -> None:
        nonlocal done
        results[idx] = result
        tip = jobs[idx][0]
        if tip is None:
            return
        done += 1
        if progress:
            progress(done, len(todo), tip.id)

    _simulate_all(simulator, [cfg for _t, cfg in jobs], record)
    if need_base:
        status, value = results[0]
        if status == "ok":
            _BASELINES[key] = value
    if baseline and key in _BASELINES:
        ref = _baseline(analysis, profile, "ok", _BASELINES[key])
    elif baseline:
        ref = _baseline(analysis, profile, *results[0])
    else:
        ref = Effect("fits", "", dict(profile), baseline="profile")
    base_features = _base_features(analysis, ref, key)
    for i, (tip, cfg) in enumerate(jobs):
        if tip is None:
            continue
        status, value = results[i]
        if status == "ok":
            tip.effect = _attach_intervals(
                _judge(tip, ref.before, value), base_features, value, cfg
            )
        else:
            # the same rejection as the profile's own configuration: the reason is said once, in
            # the baseline note (it was repeated under every tip)
            same = need_base and results[0] == (status, value)
            tip.effect = Effect(
                "error",
                "not predicted: the engine cannot re-simulate the profile's own configuration "
                "(reason in the baseline note)."
                if same
                else f"the engine rejected the changed configuration: {value}",
                dict(ref.before),
                {},
                recommended=False,
                tone="bad",
            )
        tip.effect.baseline = ref.baseline
        tip.effect.baseline_note = ref.baseline_note
    return insights


def _base_features(analysis, ref: Effect, key: str) -> intervals.Features:
    """The features of the baseline the deltas are against: the re-simulation's, else the
    profile's own."""
    if ref.baseline == "resimulated" and key in _BASELINES:
        return intervals.features_from(_BASELINES[key], analysis.run_config)
    return intervals.features_of(analysis)


def baseline_metrics(analysis) -> Effect | None:
    """The cached re-simulated baseline of ``analysis`` (after :func:`predict_effects`), as an
    Effect whose ``before`` holds the figures and ``baseline_note`` says how they compare with
    the profile; None when it has not been re-simulated in this process."""
    base = analysis.run_config
    if not base or _config_key(base) not in _BASELINES:
        return None
    profile = {k: getattr(analysis.metrics, k) for k in EFFECT_KEYS}
    return _baseline(analysis, profile, "ok", _BASELINES[_config_key(base)])


def find_fitting_combination(
    analysis,
    insights: list[Insight],
    simulator: Simulator,
    *,
    max_tips: int = 5,
    progress: ProgressFn | None = None,
) -> Insight | None:
    """For an out-of-memory profile where no single memory tip fits (after
    :func:`predict_effects`), re-simulate the memory tips' changes combined cumulatively in rank
    order until the run fits, then drop any tip the fit does not need. Returns a
    ``memory.combined`` insight (with its effect) or None when nothing fits within ``max_tips``.
    Simulations run one after the other on ``simulator`` (each depends on the previous)."""
    before = {k: getattr(analysis.metrics, k) for k in EFFECT_KEYS}
    if not before.get("oom_tiles") or not analysis.run_config:
        return None
    ref = baseline_metrics(analysis)
    if ref is not None:
        before = ref.before
    mem = [t for t in insights if t.category == "memory" and t.change][:max_tips]
    if len(mem) < 2 or any(t.effect is not None and t.effect.status == "fits" for t in mem):
        return None
    base = analysis.run_config

    def merged(tips: list[Insight]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for t in tips:
            out.update(t.change)
        return out

    total = len(mem) - 1
    chosen: list[Insight] | None = None
    after: dict[str, Any] = {}
    for k in range(2, len(mem) + 1):
        status, value = _simulate(simulator, apply_change(base, merged(mem[:k])))
        if progress:
            progress(k - 1, total, "memory.combined")
        if status == "ok" and not value.get("oom_tiles"):
            chosen, after = mem[:k], value
            break
    if chosen is None:
        return None
    for tip in list(chosen[:-1]):  # the last one was needed to fit; try without each earlier
        trial = [t for t in chosen if t is not tip]
        status, value = _simulate(simulator, apply_change(base, merged(trial)))
        if status == "ok" and not value.get("oom_tiles"):
            chosen, after = trial, value
    change = merged(chosen)
    combo = Insight(
        "memory.combined",
        "Combine: " + " + ".join(t.title for t in chosen),
        "critical",
        "memory",
        "No single memory tip makes the program fit; together these do.",
        [
            Evidence(
                f"{t.title} alone: "
                + (t.effect.message if t.effect is not None else "not re-simulated"),
                t.id,
            )
            for t in chosen
        ],
        change,
        " ".join(t.trade_off for t in chosen if t.trade_off),
    )
    combo.effect = _attach_intervals(
        _judge(combo, before, after),
        _base_features(analysis, ref or Effect("", ""), _config_key(base)),
        after,
        apply_change(base, change),
    )
    if ref is not None:
        combo.effect.baseline, combo.effect.baseline_note = ref.baseline, ref.baseline_note
    return combo
