"""How far to trust a prediction: an interval on every predicted figure, from the fidelity table.

The engine's error against public figures (docs/fidelity.md) is stored as data
(``analyser/core/fidelity_errors.json``, written by ``benchmarks/bench_fidelity.py
--write-errors``). Every reference row names a **mechanism class** (``mechanism`` in
``assets/runs/reference/references.toml``); a prediction is put in classes by its own features
(:func:`classify`), and its interval is the band of errors of the rows in those classes:

* ``device-at-scale``: device compute at scale (the default when nothing below applies);
* ``small-feature-maps``: at least half of the forward convolution and matmul work is in small
  convolutions (fewer output positions per execution than the IPU has tiles, or fewer output
  channels than one AMP pass produces);
* ``collectives-across-pods``: data-parallel replicas over more than one Pod64 (collectives
  over GW-Links);
* ``host-bound``: the host limits the run or could: with a loader in the main process (sync) the
  host's preparation per call is at least :data:`HOST_LOAD_SYNC` of the device's time per call
  (XProf's "moderately input-bound"); with a loader overlapping the device (async, workers) at
  least :data:`HOST_LOAD_OVERLAPPED` (hidden while the host model is right; issue 21 measured the
  real host 1.6-3x slower than the model). Host-inclusive figures only.

Method (docs/fidelity.md, "Intervals"): per class the band is [lowest, highest] error of its rows
(max error per side; with a handful of rows per class, quantiles would be the same numbers), a
class with fewer than :data:`MIN_ROWS` rows gives no interval, several classes take the union of
their bands, and a band always contains zero error (the engine's own figure is inside its
interval). A relative change between two predictions in the same classes shares the classes'
offset (correlated errors), and of the band's spread only the share of the time per sample the
change moves counts (:func:`ratio_factors`; the uncorrelated range is kept beside it). Between
different classes the two errors are independent and each side's full band counts. Leave-one-out: a reference row's
own interval comes from the other rows (:meth:`ErrorTable.band` ``exclude``), so no row vouches
for itself; the benchmark reports how many rows fall inside their leave-one-out band.

No Dask, no Qt: the analysis core's interval model.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: The mechanism classes, with the words the outputs use.
MECHANISMS: dict[str, str] = {
    "device-at-scale": "device compute at scale",
    "small-feature-maps": "small feature maps",
    "collectives-across-pods": "collectives across Pods",
    "host-bound": "host-bound",
    "model-facts": "model topology and work",
}
#: Classes that carry a performance error (``model-facts`` rows check counts, not speed).
PERFORMANCE_CLASSES: tuple[str, ...] = (
    "device-at-scale",
    "small-feature-maps",
    "collectives-across-pods",
    "host-bound",
)
#: Row quantities whose error is a rate's (engine / reference - 1 of samples per second).
RATE_QUANTITIES: tuple[str, ...] = ("throughput", "device_throughput")
#: Fewest reference rows a class needs to give an interval (a band from 3 rows holds a further,
#: exchangeable row with probability (n - 1) / (n + 1) = 50%; from 2 rows only 33%).
MIN_ROWS = 3
#: Host preparation per call over device time per call from which a run whose loader works in
#: the main process (sync) is host-bound: the host then takes 5% of the host-inclusive time,
#: XProf's "moderately input-bound" grade (the insights' ``host_wait_moderate``).
HOST_LOAD_SYNC = 0.05 / 0.95
#: The same for a loader that overlaps the device (async, worker processes): its preparation is
#: hidden while under the device's time, and a host 3x slower than modelled (issue 21's
#: measurement of the real host against the model) would make it the limit from a third.
HOST_LOAD_OVERLAPPED = 1.0 / 3.0
#: Share of the forward convolution + matmul work in small convolutions from which the
#: small-convolution class applies (the majority of the work).
SMALL_CONV_SHARE = 0.5
#: Output channels under which a convolution cannot fill one AMP pass (PopLibs
#: ``partialChansPerGroup``: 16 conv units for half and float partials; docs/engine.md).
SMALL_CONV_CHANNELS = 16
#: IPUs in the largest IPU-Link domain (a Pod64); more IPUs reach each other over GW-Links.
POD_IPUS = 64
#: Keys of the service's figures that carry the features (analyser.sim.service.FIGURE_KEYS).
FEATURE_KEYS: tuple[str, ...] = ("host_load", "host_overlapped", "small_conv_share")

SCHEMA = "ipu-fidelity-errors"
SCHEMA_VERSION = "1.0"
#: The stored errors shipped with the analyser (``ANALYSE_FIDELITY_ERRORS`` names another file).
DEFAULT_ERRORS = Path(__file__).with_name("fidelity_errors.json")
ERRORS_ENV = "ANALYSE_FIDELITY_ERRORS"
#: Largest errors file read (the shipped one is a few KiB).
MAX_ERRORS_BYTES = 1 << 20

#: Figures an interval is given for: (kind, host-inclusive). ``rate``: higher is faster
#: (samples/s); ``time``: device cycles. Every other predicted figure (memory, shares, counts)
#: has no reference row: its interval says so.
FIGURE_KINDS: dict[str, tuple[str, bool]] = {
    "throughput_samples_per_s": ("rate", True),
    "device_throughput_samples_per_s": ("rate", False),
    "cycles_per_sample": ("time", False),
    "total_cycles": ("time", False),
    "device_cycles": ("time", False),
}
#: The numeric Metrics figures of a profile given an interval in its ``prediction`` block.
PROFILE_FIGURES: tuple[str, ...] = (
    "peak_memory_bytes",
    "max_tile_memory_bytes",
    "memory_share_used",
    "oom_tiles",
    "total_cycles",
    "device_cycles",
    "cycles_per_sample",
    "throughput_samples_per_s",
    "device_throughput_samples_per_s",
    "host_seconds",
    "compute_share",
    "host_wait_share",
    "ramp_share",
    "tile_balance",
)
NO_ROWS_NOTE = "no interval: the fidelity table has no reference rows for this figure"
UNKNOWN_NOTE = "no interval: the profile's convolutions could not be read to classify it"


class ErrorsFileError(ValueError):
    """The stored fidelity errors cannot be used; the message is one sentence."""


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


def classify(features: Features, *, host_inclusive: bool = True) -> tuple[str, ...]:
    """The mechanism classes of a prediction (``device-at-scale`` when no other applies)."""
    out = []
    if features.small_conv_share is not None and features.small_conv_share >= SMALL_CONV_SHARE:
        out.append("small-feature-maps")
    if features.ipus > POD_IPUS and features.replicas > 1:
        out.append("collectives-across-pods")
    if host_inclusive and features.host_load is not None:
        limit = HOST_LOAD_SYNC if features.host_overlapped is False else HOST_LOAD_OVERLAPPED
        if features.host_load >= limit:
            out.append("host-bound")
    return tuple(out) or ("device-at-scale",)


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
        if _finite(prep) and _finite(dev) and dev > 0:
            over = model.get("overlapped")
            return max(0.0, float(prep) / float(dev)), over if isinstance(over, bool) else None
    secs, cycles = execution_attrs.get("host_seconds"), execution_attrs.get("total_cycles")
    if _finite(secs) and _finite(cycles) and cycles > 0 and clock_hz > 0:
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
    """The features of an open :class:`analyser.core.Analysis`."""
    t = analysis.target
    figs = feature_figures(analysis)
    return Features(int(t.num_ipus) * int(t.replicas), int(t.replicas), **figs)


def feature_figures(analysis) -> dict[str, float | None]:
    """The :data:`FEATURE_KEYS` figures of an open analysis (for the service's figures)."""
    src = analysis.src
    load, overlapped = None, None
    if analysis.has_execution:
        calls = analysis.metrics.host_round_trips
        load, overlapped = host_load(src.execution_attrs, float(analysis.target.clock_hz), calls)
    try:
        share = small_conv_share(
            {c: src.column("/graph/operations", c) for c in ("type", "pass", "flops")},
            {c: src.column("/graph/variables", c) for c in ("op", "kind", "shape")},
            int(analysis.target.tiles_per_ipu),
        )
    except (KeyError, ValueError, TypeError, IndexError):  # a table of the wrong shape or type
        share = None
    return {"host_load": load, "host_overlapped": overlapped, "small_conv_share": share}


def features_from(figures: Mapping[str, Any], run_config: Mapping[str, Any]) -> Features:
    """Features from a simulation's figures (:data:`FEATURE_KEYS`) and its run configuration."""
    ipus = _int(run_config.get("num_ipus"), 1)
    replicas = _int(run_config.get("replication_factor"), 1)
    load, share = figures.get("host_load"), figures.get("small_conv_share")
    over = figures.get("host_overlapped")
    return Features(
        ipus * replicas,
        replicas,
        float(load) if _finite(load) else None,
        over if isinstance(over, bool) else None,
        float(share) if _finite(share) else None,
    )


def _int(v: Any, default: int) -> int:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


# -- the stored errors ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ErrorRow:
    """One reference row's measured error (engine / reference - 1; None: no engine figure)."""

    id: str
    mechanism: str
    quantity: str
    error: float | None
    rows: tuple[str, ...] = ()
    #: The engine's figure (a ratio row: its ratio), when stored.
    engine: float | None = None


@dataclass(frozen=True)
class Band:
    """The errors of the rows of some classes: [lo, hi] (not forced through zero)."""

    lo: float
    hi: float
    classes: tuple[str, ...]
    ids: tuple[str, ...]

    @property
    def lo0(self) -> float:
        """The low end, or 0 when the range lies above 0."""
        return min(self.lo, 0.0)

    @property
    def hi0(self) -> float:
        """The high end, or 0 when the range lies below 0."""
        return max(self.hi, 0.0)


@dataclass(frozen=True)
class ErrorTable:
    """The stored errors: rows, and where and when they were measured."""

    rows: tuple[ErrorRow, ...]
    commit: str = ""
    measured: str = ""
    source: str = ""

    def class_rows(self, cls: str, exclude: Iterable[str] = ()) -> list[ErrorRow]:
        """The rate rows of class ``cls`` with an error, without the ``exclude`` ids."""
        skip = set(exclude)
        return [
            r
            for r in self.rows
            if r.mechanism == cls
            and r.quantity in RATE_QUANTITIES
            and r.error is not None
            and r.id not in skip
        ]

    def band(self, classes: Iterable[str], exclude: Iterable[str] = ()) -> Band | str:
        """The union band of ``classes`` (leaving out ``exclude``), or the sentence saying why
        there is none."""
        classes = tuple(classes)
        exclude = tuple(exclude)
        errors: list[float] = []
        ids: list[str] = []
        short = []
        for c in classes:
            rows = self.class_rows(c, exclude)
            if len(rows) < MIN_ROWS:
                short.append(f"{MECHANISMS.get(c, c)}: {len(rows)} of {MIN_ROWS}")
            errors += [float(r.error) for r in rows]
            ids += [r.id for r in rows]
        if short:
            return "no interval: too few reference rows (" + "; ".join(short) + ")"
        return Band(min(errors), max(errors), classes, tuple(ids))


def parse_errors(data: Any, source: str = "") -> ErrorTable:
    """Validate a decoded errors document; raises :class:`ErrorsFileError` (one sentence)."""
    where = source or "the stored fidelity errors"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ErrorsFileError(f"{where} is not a fidelity errors file (schema {SCHEMA!r}).")
    version = str(data.get("schema_version", ""))
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise ErrorsFileError(
            f"{where} has schema version {version!r}; this analyser reads {SCHEMA_VERSION}."
        )
    raw = data.get("rows")
    if not isinstance(raw, list) or not raw or len(raw) > 10_000:
        raise ErrorsFileError(f"{where} has no rows (a list of 1 to 10,000 entries).")
    rows: list[ErrorRow] = []
    seen: set[str] = set()
    for i, r in enumerate(raw):
        rows.append(_parse_row(r, f"{where}, row {i + 1}", seen))
    text = {k: data.get(k, "") for k in ("commit", "measured")}
    for k, v in text.items():
        if not isinstance(v, str) or len(v) > 200 or not v.isprintable():
            raise ErrorsFileError(f"{where}: '{k}' must be a short printable text.")
    return ErrorTable(tuple(rows), text["commit"], text["measured"], source)


def _parse_row(r: Any, where: str, seen: set[str]) -> ErrorRow:
    if not isinstance(r, dict):
        raise ErrorsFileError(f"{where} is not an object.")
    rid, mech, qty = r.get("id"), r.get("mechanism"), r.get("quantity")
    if not isinstance(rid, str) or not rid or len(rid) > 200 or rid in seen:
        raise ErrorsFileError(f"{where}: 'id' must be a unique, non-empty short text.")
    if not rid.isprintable():
        raise ErrorsFileError(f"{where}: 'id' must be printable text (no control characters).")
    seen.add(rid)
    if mech not in MECHANISMS:
        raise ErrorsFileError(f"{where} ({rid}): 'mechanism' must be one of {sorted(MECHANISMS)}.")
    if not isinstance(qty, str) or not qty or len(qty) > 50:
        raise ErrorsFileError(f"{where} ({rid}): 'quantity' must be a short text.")
    err = r.get("error")
    if err is not None and (not _finite(err) or err <= -1.0 or err > 100.0):
        raise ErrorsFileError(
            f"{where} ({rid}): 'error' must be null or a finite fraction above -1 (got {err!r})."
        )
    refs = r.get("rows", [])
    if not isinstance(refs, list) or not all(isinstance(x, str) for x in refs) or len(refs) > 2:
        raise ErrorsFileError(f"{where} ({rid}): 'rows' must be a list of at most two row ids.")
    engine = r.get("engine")
    if engine is not None and (not _finite(engine) or engine < 0):
        raise ErrorsFileError(f"{where} ({rid}): 'engine' must be null or a finite figure >= 0.")
    return ErrorRow(
        rid,
        mech,
        qty,
        None if err is None else float(err),
        tuple(refs),
        None if engine is None else float(engine),
    )


def load_errors(path: str | Path) -> ErrorTable:
    """Read and validate an errors file; raises :class:`ErrorsFileError` (one sentence). The
    path must be a regular file of at most :data:`MAX_ERRORS_BYTES` (profiles.inputs)."""
    from profiles.inputs import read_regular

    what = f"fidelity errors {str(path)!r}"
    raw = read_regular(path, what, ErrorsFileError, MAX_ERRORS_BYTES)
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise ErrorsFileError(f"{what} is not UTF-8 text.") from None
    except ValueError as exc:
        raise ErrorsFileError(f"{what} is not valid JSON: {exc}.") from None
    except RecursionError:
        raise ErrorsFileError(f"{what} nests its JSON too deeply.") from None
    return parse_errors(data, what)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


@functools.lru_cache(maxsize=4)
def _cached(path: str, mtime_ns: int, size: int) -> ErrorTable:
    return load_errors(path)


def default_table() -> ErrorTable | str:
    """The errors in use (``$ANALYSE_FIDELITY_ERRORS`` or the shipped file), or the one
    sentence saying why they cannot be used (then every interval says so)."""
    path = os.environ.get(ERRORS_ENV) or str(DEFAULT_ERRORS)
    try:
        st = os.stat(path)
        return _cached(path, st.st_mtime_ns, st.st_size)
    except OSError as exc:
        return f"no interval: fidelity errors {path!r} cannot be read: {exc.strerror or exc}."
    except ErrorsFileError as exc:
        return f"no interval: {exc}"


# -- intervals -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    """A predicted figure (or relative change) with the range the fidelity table allows.

    ``low`` / ``high`` are None when there is no interval, and ``note`` says why. ``classes``
    are the prediction's mechanism classes (for a change: the before's and the after's);
    ``rows`` the reference rows behind the band; ``correlated``: a change between predictions in
    the same classes (the classes' shared offset cancels)."""

    value: float | None
    low: float | None
    high: float | None
    classes: tuple[str, ...] = ()
    rows: int = 0
    note: str = ""
    correlated: bool | None = None
    classes_after: tuple[str, ...] | None = field(default=None)
    #: A change only: the range with no correlation assumed (each prediction anywhere in its
    #: classes' band), which holds ``low`` / ``high``.
    worst: tuple[float, float] | None = None

    @property
    def available(self) -> bool:
        """Whether the interval has both ends."""
        return self.low is not None and self.high is not None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (docs/report-schema.md, Interval)."""
        d: dict[str, Any] = {
            "value": _clean(self.value),
            "low": _clean(self.low),
            "high": _clean(self.high),
            "classes": list(self.classes),
            "rows": self.rows,
            "note": self.note,
        }
        if self.classes_after is not None:
            d["classes_after"] = list(self.classes_after)
            d["correlated"] = self.correlated
            d["worst_low"] = _clean(self.worst[0]) if self.worst else None
            d["worst_high"] = _clean(self.worst[1]) if self.worst else None
        return d


def _clean(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _none(value: float | None, note: str, classes: tuple[str, ...] = ()) -> Interval:
    return Interval(value, None, None, classes, 0, note)


def _band_for(
    key: str, features: Features, table: ErrorTable | str | None, exclude: Iterable[str]
) -> tuple[tuple[str, ...], Band | str]:
    table = default_table() if table is None else table
    kind = FIGURE_KINDS.get(key)
    if kind is None:
        return (), NO_ROWS_NOTE
    classes = classify(features, host_inclusive=kind[1])
    if isinstance(table, str):
        return classes, table
    if features.small_conv_share is None:  # not known: the class could be missing
        return classes, UNKNOWN_NOTE
    return classes, table.band(classes, exclude)


def absolute(
    key: str,
    value: float | None,
    features: Features,
    table: ErrorTable | str | None = None,
    exclude: Iterable[str] = (),
) -> Interval:
    """The interval of a predicted figure ``key`` (:data:`FIGURE_KINDS`) of value ``value``."""
    classes, band = _band_for(key, features, table, exclude)
    if value is None or not math.isfinite(value):
        return _none(None, "no interval: no predicted figure", classes)
    if isinstance(band, str):
        return _none(value, band, classes)
    lo, hi = band.lo0, band.hi0
    if FIGURE_KINDS[key][0] == "rate":  # real = engine / (1 + error)
        low, high = value / (1.0 + hi), value / (1.0 + lo)
    else:  # cycles: real = engine x (1 + error)
        low, high = value * (1.0 + lo), value * (1.0 + hi)
    return Interval(value, min(low, value), max(high, value), classes, len(band.ids))


def relative(
    key: str,
    before: float | None,
    after: float | None,
    features_before: Features,
    features_after: Features,
    table: ErrorTable | str | None = None,
    exclude: Iterable[str] = (),
) -> Interval:
    """The interval of the relative change ``after / before - 1`` of figure ``key``."""
    cb, band_b = _band_for(key, features_before, table, exclude)
    ca, band_a = _band_for(key, features_after, table, exclude)
    if before is None or after is None or not before or not math.isfinite(after / before):
        iv = _none(None, "no interval: no predicted change", cb)
        return Interval(iv.value, None, None, cb, 0, iv.note, None, ca)
    value = after / before - 1.0
    for band in (band_b, band_a):
        if isinstance(band, str):
            return Interval(value, None, None, cb, 0, band, None, ca)
    same = set(cb) == set(ca)
    ratio = value + 1.0
    kind = FIGURE_KINDS[key][0]
    fmin, fmax = ratio_factors(band_b, band_a, same, kind, ratio)
    wmin, wmax = ratio_factors(band_b, band_a, same, kind)  # no correlation assumed
    n = len(set(band_b.ids) | set(band_a.ids))
    low, high = ratio * fmin - 1.0, ratio * fmax - 1.0
    worst = (min(ratio * wmin - 1.0, value), max(ratio * wmax - 1.0, value))
    return Interval(value, min(low, value), max(high, value), cb, n, "", same, ca, worst)


def ratio_factors(
    before: Band, after: Band, same: bool, kind: str = "rate", ratio: float | None = None
) -> tuple[float, float]:
    """The real ratio after / before over the predicted ``ratio`` lies in [fmin, fmax].

    In different classes the two errors are independent and each side keeps its band through
    zero (rates: real ratio = ratio x (1 + e_before) / (1 + e_after); cycles the other way
    round). In the same classes the errors are correlated: the classes' shared offset cancels,
    and of their spread s = (1 + hi) / (1 + lo) only the share of the time per sample the change
    moves counts, c = 1 - min(t, 1 / t) for the predicted time ratio t (a what-if shares its
    model, system, host and engine with its base, so what it leaves alone keeps the base's
    error): [s^-c, s^c]. c = 1 (no ``ratio``) is the worst case over the class.
    """
    if not same:
        if kind == "rate":
            return (1.0 + before.lo0) / (1.0 + after.hi0), (1.0 + before.hi0) / (1.0 + after.lo0)
        return (1.0 + after.lo0) / (1.0 + before.hi0), (1.0 + after.hi0) / (1.0 + before.lo0)
    spread = (1.0 + before.hi) / (1.0 + before.lo)
    share = 1.0
    if ratio is not None and math.isfinite(ratio) and ratio > 0:
        share = 1.0 - min(ratio, 1.0 / ratio)  # the same for the rate and the time ratio
    return spread**-share, spread**share


def figure_intervals(
    figures: Mapping[str, Any],
    features: Features,
    keys: Iterable[str],
    table: ErrorTable | str | None = None,
) -> dict[str, Interval]:
    """An interval for each of ``keys`` of one prediction (no interval where no row applies)."""
    table = default_table() if table is None else table
    out = {}
    for k in keys:
        v = figures.get(k)
        v = float(v) if _finite(v) else None
        out[k] = absolute(k, v, features, table) if k in FIGURE_KINDS else _none(v, NO_ROWS_NOTE)
    return out


def change_intervals(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    features_before: Features,
    features_after: Features,
    keys: Iterable[str],
    table: ErrorTable | str | None = None,
) -> dict[str, dict[str, Any]]:
    """Per figure of ``keys``: ``before``, ``after`` and ``change`` intervals (JSON objects)."""
    table = default_table() if table is None else table
    out: dict[str, dict[str, Any]] = {}
    b_iv = figure_intervals(before, features_before, keys, table)
    a_iv = figure_intervals(after, features_after, keys, table)
    for k in keys:
        if k in FIGURE_KINDS:
            ch = relative(k, b_iv[k].value, a_iv[k].value, features_before, features_after, table)
        else:
            ch = _none(None, NO_ROWS_NOTE)
        out[k] = {"before": b_iv[k].to_dict(), "after": a_iv[k].to_dict(), "change": ch.to_dict()}
    return out


# -- words ---------------------------------------------------------------------------------------
def fmt_pct_range(low: float | None, high: float | None) -> str:
    """'(+60% to +110%)' for a relative change's interval."""
    return f"({_pct(low)} to {_pct(high)})"


def _pct(x: float | None) -> str:
    if not _finite(x):
        return "-"
    v = round(100 * x)
    return f"{v:+d}%" if v else "0%"


def describe_change(iv: Mapping[str, Any] | Interval | None, *, short: bool = False) -> str:
    """The interval of a change in words: '(+60% to +110%)', or '(no interval: ...)' (with
    ``short``, '(no interval)')."""
    d = iv.to_dict() if isinstance(iv, Interval) else iv
    if not d:
        return ""
    if d.get("low") is not None and d.get("high") is not None:
        return fmt_pct_range(d["low"], d["high"])
    note = str(d.get("note") or "no interval")
    return "(no interval)" if short else f"({note})"


def class_words(classes: Iterable[str]) -> str:
    """'small convolutions + host-bound'."""
    return " + ".join(MECHANISMS.get(c, c) for c in classes)


# -- leave-one-out check of the table --------------------------------------------------------------
def leave_one_out(table: ErrorTable) -> list[dict[str, Any]]:
    """Every performance row against the band of the *other* rows of its class (a ratio row:
    its published ratio against the change interval of its two rows' classes, those two rows
    left out): ``{id, mechanism, error, low, high, inside, note}``, where ``low`` / ``high``
    bound the row's error (None and a ``note`` when the others are too few)."""
    by_id = {r.id: r for r in table.rows}
    out = []
    for r in table.rows:
        if r.mechanism not in PERFORMANCE_CLASSES or r.error is None:
            continue
        if r.quantity in RATE_QUANTITIES:
            band = table.band((r.mechanism,), exclude=(r.id,))
            if isinstance(band, str):
                out.append(_loo(r, None, None, band))
                continue
            out.append(_loo(r, band.lo0, band.hi0))
        elif len(r.rows) == 2 and all(x in by_id for x in r.rows):
            a, b = (by_id[x] for x in r.rows)  # ratio = a / b: b is the before, a the after
            skip = (r.id, a.id, b.id)
            bb, ba = table.band((b.mechanism,), skip), table.band((a.mechanism,), skip)
            if isinstance(bb, str) or isinstance(ba, str):
                out.append(_loo(r, None, None, bb if isinstance(bb, str) else ba))
                continue
            fmin, fmax = ratio_factors(bb, ba, a.mechanism == b.mechanism, "rate", r.engine)
            # the engine's ratio error e = R_e / R_p - 1 lies inside when R_p / R_e in [fmin, fmax]
            out.append(_loo(r, 1.0 / fmax - 1.0, 1.0 / fmin - 1.0))
    return out


def _loo(r: ErrorRow, low: float | None, high: float | None, note: str = "") -> dict[str, Any]:
    inside = None if low is None or high is None else bool(low - 1e-12 <= r.error <= high + 1e-12)
    return {
        "id": r.id,
        "mechanism": r.mechanism,
        "quantity": r.quantity,
        "error": r.error,
        "low": low,
        "high": high,
        "inside": inside,
        "note": note,
    }


# -- a profile's and a change's intervals --------------------------------------------------------
def table_info(table: ErrorTable | str | None = None) -> dict[str, Any]:
    """Where the errors come from: ``{commit, measured, rows}``, or ``{note}`` when unusable."""
    table = default_table() if table is None else table
    if isinstance(table, str):
        return {"note": table}
    return {"commit": table.commit, "measured": table.measured, "rows": len(table.rows)}


def profile_prediction(
    analysis, keys: Iterable[str], table: ErrorTable | str | None = None
) -> dict[str, Any]:
    """The ``prediction`` block of a profile's JSON: its features, classes (host-inclusive and
    device-only figures), and an interval for every figure of ``keys`` (a profile written by
    the engine is a prediction)."""
    table = default_table() if table is None else table
    feats = features_of(analysis)
    figures = analysis.metrics.to_dict()
    return {
        "features": {
            "ipus": feats.ipus,
            "replicas": feats.replicas,
            "host_load": _clean(feats.host_load),
            "host_overlapped": feats.host_overlapped,
            "small_conv_share": _clean(feats.small_conv_share),
        },
        "classes": list(classify(feats)),
        "classes_device": list(classify(feats, host_inclusive=False)),
        "errors": table_info(table),
        "intervals": {
            k: iv.to_dict() for k, iv in figure_intervals(figures, feats, keys, table).items()
        },
    }


def change_note(d: Mapping[str, Any] | None) -> str:
    """One line on a change's interval: its classes and rows, or why there is none."""
    if not isinstance(d, Mapping) or not d:
        return ""
    if not _finite(d.get("low")) or not _finite(d.get("high")):
        return str(d.get("note") or "no interval")
    before, after = d.get("classes") or [], d.get("classes_after") or d.get("classes") or []
    if not isinstance(before, list | tuple) or not isinstance(after, list | tuple):
        return "no interval"
    where = class_words(before)
    if set(after) != set(before):
        where += f" before, {class_words(after)} after (errors independent)"
    elif d.get("correlated"):
        where += " (errors correlated: the share of the run the change moves counts"
        if _finite(d.get("worst_low")) and _finite(d.get("worst_high")):
            where += f"; uncorrelated {_pct(d['worst_low'])} to {_pct(d['worst_high'])}"
        where += ")"
    return f"interval from {d.get('rows', 0)} reference rows: {where}"


def range_text(d: Mapping[str, Any] | None, fmt=None) -> str:
    """'+60% to +110%' for a change (``fmt`` None), 'low to high' with ``fmt`` for a figure,
    'no interval' when there is none, '' without an interval object."""
    if not isinstance(d, Mapping) or not d:
        return ""
    if not _finite(d.get("low")) or not _finite(d.get("high")):
        return "no interval"
    if fmt is None:
        return f"{_pct(d['low'])} to {_pct(d['high'])}"
    return f"{fmt(d['low'])} to {fmt(d['high'])}"


#: Columns :func:`tune_columns` adds to a results table (docs/tune.md).
TUNE_COLUMNS: tuple[str, ...] = (
    "throughput_low",
    "throughput_high",
    "throughput_change",
    "throughput_change_low",
    "throughput_change_high",
    "interval_classes",
    "interval_note",
)


def tune_columns(
    figures: Mapping[str, Any],
    config: Mapping[str, Any],
    start_figures: Mapping[str, Any] | None,
    start_config: Mapping[str, Any] | None,
    table: ErrorTable | str | None = None,
) -> dict[str, Any]:
    """A tried configuration's throughput interval, and its change from the start's with the
    change's interval (None where there is none; ``interval_note`` says why)."""
    table = default_table() if table is None else table
    key = "throughput_samples_per_s"
    feats = features_from(figures, config)
    v = figures.get(key)
    iv = absolute(key, float(v) if _finite(v) else None, feats, table)
    out: dict[str, Any] = {
        "throughput_low": iv.low,
        "throughput_high": iv.high,
        "throughput_change": None,
        "throughput_change_low": None,
        "throughput_change_high": None,
        "interval_classes": "+".join(iv.classes),
        "interval_note": iv.note,
    }
    if start_figures is not None and start_config is not None:
        s = start_figures.get(key)
        ch = relative(
            key,
            float(s) if _finite(s) else None,
            float(v) if _finite(v) else None,
            features_from(start_figures, start_config),
            feats,
            table,
        )
        out["throughput_change"] = ch.value
        out["throughput_change_low"] = ch.low
        out["throughput_change_high"] = ch.high
        if not out["interval_note"] and ch.note and ch.value is not None:
            out["interval_note"] = ch.note
    return out


def prediction_note(pred: Mapping[str, Any] | None) -> str:
    """One sentence on a profile's ranges (its ``prediction`` block): classes, rows, commit."""
    if not isinstance(pred, Mapping) or not pred:
        return ""
    errors = pred.get("errors") if isinstance(pred.get("errors"), Mapping) else {}
    if errors.get("note"):
        return str(errors["note"])
    classes = pred.get("classes") if isinstance(pred.get("classes"), list) else []
    iv = (pred.get("intervals") or {}).get("throughput_samples_per_s")
    rows = iv.get("rows", 0) if isinstance(iv, Mapping) else 0
    head = f"Ranges: what the real figure may be, from the engine's errors against {rows} public "
    head += f"reference rows of its class ({class_words(classes)}), measured on commit "
    head += f'{errors.get("commit") or "unknown"} (docs/fidelity.md, "Intervals").'
    if isinstance(iv, Mapping) and not _finite(iv.get("low")):
        return f"Ranges: {iv.get('note') or 'no interval'} ({class_words(classes)})."
    return head
