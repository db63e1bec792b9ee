"""The features and classes of a prediction or a reference row (what analyser.core.intervals
and analyser.core.intervals_calibration pool by): one classification, computed by the same code
for a table row's own simulation and a new prediction.

No Dask, no Qt: read from an open analysis or a simulation's figures.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from profiles.errors import ProfileError

#: The mechanism classes, with the words the outputs use.
MECHANISMS: dict[str, str] = {
    "device-at-scale": "device compute at scale",
    "small-feature-maps": "small feature maps",
    "grouped-convolutions": "grouped and depthwise convolutions",
    "collectives-across-pods": "collectives across Pods",
    "host-bound": "host-bound",
    "short-calls": "short calls",
    "model-facts": "model topology and work",
}
#: Classes that carry a performance error (``model-facts`` rows check counts, not speed).
PERFORMANCE_CLASSES: tuple[str, ...] = (
    "device-at-scale",
    "small-feature-maps",
    "grouped-convolutions",
    "collectives-across-pods",
    "host-bound",
    "short-calls",
)
#: Row quantities whose error is a rate's (engine / reference - 1 of samples per second).
RATE_QUANTITIES: tuple[str, ...] = ("throughput", "device_throughput")
#: The nominal level of every range (two-sided, central; intervals_calibration).
LEVEL = 0.8
#: The words that stand in place of a range when the table does not validate the prediction.
OUTSIDE = "outside the validated range"
#: An IPU count more than this factor beyond the calibration rows' range is outside it (two
#: doublings: the rows do not vouch for a run four times larger or smaller than any of them).
FAR_FACTOR = 4
#: Host preparation per call over device time per call from which a run whose loader works in
#: the main process (sync) is host-bound: the host then takes 5% of the host-inclusive time,
#: XProf's "moderately input-bound" grade (the insights' ``host_wait_moderate``).
HOST_LOAD_SYNC = 0.05 / 0.95
#: The same for a loader that overlaps the device (async, worker processes): its preparation is
#: hidden while under the device's time, and a host 3x slower than modelled (the real host was
#: measured 1.6-3x slower than the host model, docs/fidelity.md) would make it the limit from a third.
HOST_LOAD_OVERLAPPED = 1.0 / 3.0
#: Share of the forward convolution + matmul work in small convolutions from which the
#: small-convolution class applies (the majority of the work).
SMALL_CONV_SHARE = 0.5
#: Share of the device's operation cycles in grouped or depthwise convolutions (forward and
#: their gradients) from which the grouped-convolution class applies. The table has no
#: throughput row with such convolutions, and the engine's costing of them is the part most
#: recently rebuilt (docs/fidelity.md, "Grouped and depthwise convolutions": a planner error of
#: 47x before it): a 2x error on a tenth of the device time moves the prediction by 10%, the
#: half-width of the device-at-scale range, so from a tenth the range of dense models does not
#: vouch for the prediction.
GROUPED_CONV_SHARE = 0.1
#: Output channels under which a convolution cannot fill one AMP pass (PopLibs
#: ``partialChansPerGroup``: 16 conv units for half and float partials; docs/engine.md).
SMALL_CONV_CHANNELS = 16
#: The host's fixed cost per call over the device's time per call from which a run is in the
#: short-calls class: what the engine leaves out of a call (docs/fidelity.md, "Per-call device
#: cost") is then a visible share of it; 5% is the same grade as :data:`HOST_LOAD_SYNC` (with the
#: engine's 150 us per call, calls under 3 ms of device time).
SHORT_CALL = 0.05
#: IPUs in the largest IPU-Link domain (a Pod64); more IPUs reach each other over GW-Links.
POD_IPUS = 64
#: Keys of the service's figures that carry the features (analyser.sim.service.FIGURE_KEYS).
FEATURE_KEYS: tuple[str, ...] = (
    "host_load",
    "host_overlapped",
    "small_conv_share",
    "call_share",
    "grouped_conv_share",
    "micro_batch",
    "sample_elems",
)


# -- features and classes ----------------------------------------------------------------------
@dataclass(frozen=True)
class Features:
    """What a prediction's classes are read from (None: not known)."""

    ipus: int = 1
    replicas: int = 1
    #: Host preparation per call over device time per call (analyser.core.intervals.host_load).
    host_load: float | None = None
    #: Whether the preparation overlaps the device (async loader or workers); None: not known.
    host_overlapped: bool | None = None
    #: Share of the forward conv + matmul flops in small convolutions.
    small_conv_share: float | None = None
    #: The host's fixed cost of one call (the engine's per-call overhead) over the device's time
    #: per call (analyser.core.intervals.call_share); None: not known.
    call_share: float | None = None
    #: Share of the device's operation cycles in grouped or depthwise convolutions
    #: (:func:`grouped_conv_share`); None: not known (a profile written before format 1.5).
    #: Features built without it (by hand, for a dense model) have none.
    grouped_conv_share: float | None = 0.0
    #: Samples per micro-batch and input elements per sample (an image's pixels x channels, a
    #: sequence's tokens), from the profile's input stream; None: not known. A prediction far
    #: outside the calibration rows' range of either is outside the validated range.
    micro_batch: int | None = None
    sample_elems: int | None = None


def classify(features: Features, *, host_inclusive: bool = True) -> tuple[str, ...]:
    """The mechanism classes of a prediction (``device-at-scale`` when no other applies)."""
    out = []
    if features.small_conv_share is not None and features.small_conv_share >= SMALL_CONV_SHARE:
        out.append("small-feature-maps")
    if (
        features.grouped_conv_share is not None
        and features.grouped_conv_share >= GROUPED_CONV_SHARE
    ):
        out.append("grouped-convolutions")
    if features.ipus > POD_IPUS and features.replicas > 1:
        out.append("collectives-across-pods")
    if host_inclusive and features.host_load is not None:
        limit = HOST_LOAD_SYNC if features.host_overlapped is False else HOST_LOAD_OVERLAPPED
        if features.host_load >= limit:
            out.append("host-bound")
    if host_inclusive and features.call_share is not None and features.call_share >= SHORT_CALL:
        out.append("short-calls")
    return tuple(out) or ("device-at-scale",)


def call_share(execution_attrs: Mapping[str, Any]) -> float | None:
    """The host's fixed cost per call over the device's time per call, from the profile's host
    model (format 1.2: ``call_overhead_us`` and ``device_ms_per_call``); None when not stored."""
    model = execution_attrs.get("host_model")
    if isinstance(model, str):
        try:
            model = json.loads(model)
        except ValueError:
            return None
    if not isinstance(model, dict):
        return None
    over, dev = model.get("call_overhead_us"), model.get("device_ms_per_call")
    if finite(over) and finite(dev) and dev > 0 and over >= 0:
        return float(over) / (float(dev) * 1e3)
    return None


def host_load(
    execution_attrs: Mapping[str, Any], clock_hz: float, calls: int | None = None
) -> tuple[float | None, bool | None]:
    """Host preparation per call over device time per call, and whether it overlaps the device,
    from the profile's host model (format 1.2); older profiles give the host time not hidden
    behind the device instead (as not overlapped)."""
    model = execution_attrs.get("host_model")
    if isinstance(model, str):
        try:
            model = json.loads(model)
        except ValueError:
            model = None
    if isinstance(model, dict):
        prep, dev = model.get("prepare_ms_per_call"), model.get("device_ms_per_call")
        if finite(prep) and finite(dev) and dev > 0:
            over = model.get("overlapped")
            return max(0.0, float(prep) / float(dev)), over if isinstance(over, bool) else None
    secs, cycles = execution_attrs.get("host_seconds"), execution_attrs.get("total_cycles")
    if finite(secs) and finite(cycles) and cycles > 0 and clock_hz > 0:
        return max(0.0, float(secs) * float(calls or 1) / (float(cycles) / clock_hz)), False
    return None, None


def small_conv_share(operations, variables, tiles_per_ipu: int) -> float | None:
    """Share of the forward convolution + matmul flops in small convolutions (see module
    docstring), from the operations and variables tables: their columns by name (DataFrames or
    dicts of numpy columns; shapes are stored flattened as ``N x (C H W)``: reduction depth =
    flops / (2 N E), output channels = weights / depth, output positions = N E / channels).
    None when the tables are missing."""
    if operations is None or variables is None:
        return None
    flops = np.asarray(operations["flops"], dtype=np.float64)
    if flops.size == 0:
        return None
    fwd = np.asarray(operations["pass"]) == 0
    kind = np.asarray(operations["type"]).astype(str)
    conv = fwd & (kind == "Conv")
    mm = fwd & np.isin(kind, ("MatMul", "Gemm", "Linear"))
    total = float(flops[conv | mm].sum())
    if total <= 0:
        return 0.0
    idx = np.flatnonzero(conv)
    if idx.size == 0:
        return 0.0
    var_op = np.asarray(variables["op"])
    var_kind = np.asarray(variables["kind"])
    var_shape = np.asarray(variables["shape"])
    act = _first_shape_per_op(var_op, var_shape, (var_op >= 0) & (var_kind == 1))
    wts = _first_shape_per_op(var_op, var_shape, (var_op >= 0) & (var_kind == 0))
    small_flops = 0.0
    for i in idx:  # one entry per forward convolution (tens to hundreds), not per tile or step
        a = _dims(str(act.get(int(i), "")))
        w = _dims(str(wts.get(int(i), "")))
        if len(a) < 2 or not w or a[0] <= 0 or flops[i] <= 0:
            continue
        n, per_sample = a[0], math.prod(a[1:])
        depth = flops[i] / (2.0 * n * per_sample)
        if depth <= 0:
            continue
        channels = max(1.0, math.floor(math.prod(w) / depth + 1e-9))
        positions = n * per_sample / channels
        if positions < tiles_per_ipu or channels < SMALL_CONV_CHANNELS:
            small_flops += float(flops[i])
    return small_flops / total


def grouped_conv_share(operations) -> float | None:
    """Share of the operations' cycles (every pass) in grouped or depthwise convolutions: the
    rows of a convolution type (``Conv``, ``ConvGradInput``, ``ConvGradWeight``,
    ``ConvTranspose``...) whose ``groups`` (format 1.5) exceed 1. 0.0 for a profile without
    convolutions; None when its convolutions' groups are not stored (an older profile) or the
    table is missing."""
    if operations is None:
        return None
    cycles = np.asarray(operations["cycles"], dtype=np.float64)
    kind = np.asarray(operations["type"]).astype(str)
    conv = np.char.startswith(kind, "Conv")
    total = float(cycles.sum())
    if not conv.any() or total <= 0:
        return 0.0
    groups = operations.get("groups") if hasattr(operations, "get") else None
    if groups is None:
        return None
    grouped = conv & (np.asarray(groups, dtype=np.int64) > 1)
    return float(cycles[grouped].sum()) / total


def _first_shape_per_op(op: np.ndarray, shape: np.ndarray, rows: np.ndarray) -> dict[int, Any]:
    """Operation -> the shape of its first variable among ``rows``."""
    ops, first = np.unique(op[rows].astype(np.int64), return_index=True)
    return dict(zip(ops.tolist(), shape[rows][first].tolist(), strict=True))


def _dims(shape: str) -> list[int]:
    try:
        return [int(x) for x in shape.split("x") if x]
    except ValueError:
        return []


def features_of(analysis) -> Features:
    """The features of an open :class:`analyser.core.Analysis` (read once per analysis: a
    report asks for them per figure, per comparison and per insight)."""
    cached = getattr(analysis, "_interval_features", None)
    if isinstance(cached, Features):
        return cached
    t = analysis.target
    figs = feature_figures(analysis)
    features = Features(int(t.num_ipus) * int(t.replicas), int(t.replicas), **figs)
    with contextlib.suppress(AttributeError):  # an object without attributes: read each time
        analysis._interval_features = features
    return features


#: What reading a feature's columns may raise on a damaged profile: the feature is then not
#: known (the figures say they cannot be classified) and the report that shows it still opens.
_UNREADABLE = (KeyError, ValueError, TypeError, IndexError, ProfileError)


def feature_figures(analysis) -> dict[str, Any]:
    """The :data:`FEATURE_KEYS` figures of an open analysis (for the service's figures)."""
    src = analysis.src
    load, overlapped, calls_share = None, None, None
    if analysis.has_execution:
        calls = analysis.metrics.host_round_trips
        load, overlapped = host_load(src.execution_attrs, float(analysis.target.clock_hz), calls)
        calls_share = call_share(src.execution_attrs)
    try:
        grouped = grouped_conv_share(_grouped_columns(src))
    except _UNREADABLE:
        grouped = None
    try:
        share = small_conv_share(
            {c: src.column("/graph/operations", c) for c in ("type", "pass", "flops")},
            {c: src.column("/graph/variables", c) for c in ("op", "kind", "shape")},
            int(analysis.target.tiles_per_ipu),
        )
    except _UNREADABLE:  # a table of the wrong shape or type, or a column missing
        share = None
    try:
        batch, elems = input_size({c: src.column("/graph/variables", c) for c in ("kind", "shape")})
    except _UNREADABLE:
        batch, elems = None, None
    return {
        "host_load": load,
        "host_overlapped": overlapped,
        "small_conv_share": share,
        "call_share": calls_share,
        "grouped_conv_share": grouped,
        "micro_batch": batch,
        "sample_elems": elems,
    }


def input_size(variables) -> tuple[int | None, int | None]:
    """Samples per micro-batch and input elements per sample, from the shape of the profile's
    first variable of kind ``input`` (the input stream, stored as ``N x elements``); (None,
    None) when the profile has none or its shape does not read."""
    from profiles import schema

    kind = np.asarray(variables["kind"])
    rows = np.flatnonzero(kind == schema.VARIABLE_KINDS.index("input"))
    if rows.size == 0:
        return None, None
    dims = _dims(str(np.asarray(variables["shape"])[rows[0]]))
    if len(dims) < 2 or min(dims) <= 0:
        return None, None
    return int(dims[0]), int(math.prod(dims[1:]))


def _grouped_columns(src) -> dict[str, Any]:
    """The operations' columns :func:`grouped_conv_share` reads (``groups`` only when the
    profile stores it)."""
    cols = {c: src.column("/graph/operations", c) for c in ("type", "cycles")}
    if src.has("/graph/operations/groups"):  # written from format 1.5 on
        cols["groups"] = src.column("/graph/operations", "groups")
    return cols


def features_from(figures: Mapping[str, Any], run_config: Mapping[str, Any]) -> Features:
    """Features from a simulation's figures (:data:`FEATURE_KEYS`) and its run configuration."""
    ipus = _int(run_config.get("num_ipus"), 1)
    replicas = _int(run_config.get("replication_factor"), 1)
    load, share = figures.get("host_load"), figures.get("small_conv_share")
    over, calls = figures.get("host_overlapped"), figures.get("call_share")
    grouped = figures.get("grouped_conv_share")
    batch, elems = figures.get("micro_batch"), figures.get("sample_elems")
    return Features(
        ipus * replicas,
        replicas,
        float(load) if finite(load) else None,
        over if isinstance(over, bool) else None,
        float(share) if finite(share) else None,
        float(calls) if finite(calls) else None,
        float(grouped) if finite(grouped) else None,
        _int(batch, 0) or None,
        _int(elems, 0) or None,
    )


def _int(v: Any, default: int) -> int:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def finite(v: Any) -> TypeGuard[float]:
    """Whether ``v`` is a finite number (not a bool, not NaN or infinite)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
