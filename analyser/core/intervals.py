"""How far to trust a prediction: a calibrated range at a stated level on every predicted
figure, or the sentence saying it lies outside what the fidelity table validates.

The engine's error against public figures (docs/fidelity.md) is stored as data
(``analyser/core/fidelity_errors.json``, written by ``benchmarks/bench_fidelity.py
--write-errors``) with the features of each row's own simulation, its configuration and its
source. A row and a new prediction are put in classes by the same code (:func:`classify` on
their features; a prediction may carry several):

* ``device-at-scale``: device compute at scale (the default when nothing below applies);
* ``small-feature-maps``: at least half of the forward convolution and matmul work is in small
  convolutions (fewer output positions per execution than the IPU has tiles, or fewer output
  channels than one AMP pass produces);
* ``grouped-convolutions``: grouped or depthwise convolutions (forward and gradients) take at
  least :data:`GROUPED_CONV_SHARE` of the operations' cycles (MobileNet, EfficientNet, ResNeXt,
  ConvNeXt: the table has no throughput row of them, so such a prediction says so);
* ``collectives-across-pods``: data-parallel replicas over more than one Pod64 (collectives
  over GW-Links);
* ``host-bound``: the host limits the run or could: with a loader in the main process (sync) the
  host's preparation per call is at least :data:`HOST_LOAD_SYNC` of the device's time per call
  (XProf's "moderately input-bound"); with a loader overlapping the device (async, workers) at
  least :data:`HOST_LOAD_OVERLAPPED` (hidden while the host model is right; the real host was
  measured 1.6-3x slower than the model). Host-inclusive figures only;
* ``short-calls``: the host's fixed cost per call is at least :data:`SHORT_CALL` of the
  device's time per call (what a call costs besides its program is barely modelled).
  Host-inclusive figures only.

Method (docs/fidelity.md, "Calibrated intervals"; analyser.core.intervals_calibration): a
figure's range is split-conformal at :data:`LEVEL` over the configurations in exactly its
classes (a configuration listed twice counts once); a change's range comes from how the log
error moves between pairs of configurations of one source in the two class sets, never from
the size of the predicted change. Too few configurations or pairs, an unreadable profile, or an
IPU count, micro-batch or input size far beyond the rows' give "outside the validated range: <why>" in place of a range.
Memory figures get a one-sided statement from published memory facts, or "no memory evidence"
(:func:`memory_statement`). The coverage of all of it, with whole sources held out, is what the
benchmark prints.

No Dask, no Qt: the analysis core's interval model.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analyser.core import intervals_features as _features

# the features and classes, named here too: the outputs read one module
MECHANISMS = _features.MECHANISMS
PERFORMANCE_CLASSES = _features.PERFORMANCE_CLASSES
RATE_QUANTITIES = _features.RATE_QUANTITIES
LEVEL = _features.LEVEL
OUTSIDE = _features.OUTSIDE
FAR_FACTOR = _features.FAR_FACTOR
HOST_LOAD_SYNC = _features.HOST_LOAD_SYNC
HOST_LOAD_OVERLAPPED = _features.HOST_LOAD_OVERLAPPED
SMALL_CONV_SHARE = _features.SMALL_CONV_SHARE
SMALL_CONV_CHANNELS = _features.SMALL_CONV_CHANNELS
GROUPED_CONV_SHARE = _features.GROUPED_CONV_SHARE
SHORT_CALL = _features.SHORT_CALL
POD_IPUS = _features.POD_IPUS
FEATURE_KEYS = _features.FEATURE_KEYS
Features = _features.Features
classify = _features.classify
call_share = _features.call_share
host_load = _features.host_load
small_conv_share = _features.small_conv_share
grouped_conv_share = _features.grouped_conv_share
features_of = _features.features_of
feature_figures = _features.feature_figures
features_from = _features.features_from
_int = _features._int
_finite = _features.finite

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
#: Figures whose range is the memory statement (memory_statement) rather than the table's.
MEMORY_FIGURES: tuple[str, ...] = (
    "peak_memory_bytes",
    "max_tile_memory_bytes",
    "memory_share_used",
    "oom_tiles",
)
NO_ROWS_NOTE = f"{OUTSIDE}: no reference row measures this figure"
UNKNOWN_NOTE = f"{OUTSIDE}: the profile's convolutions could not be read to classify it"
GROUPS_UNKNOWN_NOTE = (
    f"{OUTSIDE}: the profile does not store its convolutions' groups (written before format "
    "1.5), so whether grouped convolutions dominate it is not known"
)


class ErrorsFileError(ValueError):
    """The stored fidelity errors cannot be used; the message is one sentence."""


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
    #: The features of the row's own simulation (what :func:`classify` reads), when stored.
    features: Mapping[str, Any] | None = None
    #: The run configuration (rows of one configuration are one calibration point), the
    #: source and the short name of its document (one document is one group held out
    #: together; the source text stands in for it in a file written before it was stored).
    config: str = ""
    source: str = ""
    document: str = ""


@dataclass(frozen=True)
class MemoryFact:
    """A published memory fact: the configuration fits (or is out of memory), with the engine's
    fullest tile on it (bytes) and the tile's memory."""

    id: str
    fits: bool
    peak_tile_bytes: float | None
    sram_per_tile: float | None
    source: str = ""
    features: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ErrorTable:
    """The stored errors: rows, memory facts, and where and when they were measured."""

    rows: tuple[ErrorRow, ...]
    commit: str = ""
    measured: str = ""
    source: str = ""
    memory: tuple[MemoryFact, ...] = ()

    @functools.cached_property
    def points(self) -> list:
        """The calibration points (intervals_calibration.points): one per configuration."""
        from analyser.core import intervals_calibration as cal

        return cal.points(
            {
                "id": r.id,
                "quantity": r.quantity,
                "error": r.error,
                "features": r.features,
                "config": r.config or r.id,
                "source": r.source or r.id,
                "document": r.document,
            }
            for r in self.rows
        )

    @functools.cached_property
    def pairs(self) -> list:
        """Pairs of configurations of one source (intervals_calibration.pairs)."""
        from analyser.core import intervals_calibration as cal

        return cal.pairs(self.points)

    def features_of_ids(self, ids: Iterable[str]) -> list[Mapping[str, Any]]:
        """The stored features of the rows ``ids``."""
        want = set(ids)
        return [r.features for r in self.rows if r.id in want and isinstance(r.features, Mapping)]


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
    mem = data.get("memory", [])
    if not isinstance(mem, list) or len(mem) > 10_000:
        raise ErrorsFileError(f"{where}: 'memory' must be a list of at most 10,000 facts.")
    facts = tuple(_parse_memory(m, f"{where}, memory fact {i + 1}") for i, m in enumerate(mem))
    return ErrorTable(tuple(rows), text["commit"], text["measured"], source, facts)


def _short_text(r: dict, key: str, where: str) -> str:
    v = r.get(key, "")
    if v is None:
        return ""
    if not isinstance(v, str) or len(v) > 500 or not v.isprintable():
        raise ErrorsFileError(f"{where}: '{key}' must be a short printable text.")
    return v


def _parse_features(r: dict, where: str) -> Mapping[str, Any] | None:
    f = r.get("features")
    if f is None:
        return None
    ok = isinstance(f, dict) and len(f) <= 20
    ok = ok and all(
        isinstance(k, str) and (v is None or isinstance(v, bool) or _finite(v))
        for k, v in f.items()
    )
    if not ok:
        raise ErrorsFileError(
            f"{where}: 'features' must be an object of numbers, booleans or null."
        )
    return dict(f)


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
        _parse_features(r, f"{where} ({rid})"),
        _short_text(r, "config", f"{where} ({rid})"),
        _short_text(r, "source", f"{where} ({rid})"),
        _short_text(r, "document", f"{where} ({rid})"),
    )


def _parse_memory(m: Any, where: str) -> MemoryFact:
    if not isinstance(m, dict):
        raise ErrorsFileError(f"{where} is not an object.")
    mid, fits = m.get("id"), m.get("fits")
    if not isinstance(mid, str) or not mid or len(mid) > 200 or not mid.isprintable():
        raise ErrorsFileError(f"{where}: 'id' must be a non-empty short printable text.")
    if not isinstance(fits, bool):
        raise ErrorsFileError(
            f"{where} ({mid}): 'fits' must be true or false (the published fact)."
        )
    vals = {}
    for k in ("peak_tile_bytes", "sram_per_tile"):
        v = m.get(k)
        if v is not None and (not _finite(v) or v <= 0):
            raise ErrorsFileError(f"{where} ({mid}): '{k}' must be null or a positive number.")
        vals[k] = None if v is None else float(v)
    return MemoryFact(
        mid,
        fits,
        vals["peak_tile_bytes"],
        vals["sram_per_tile"],
        _short_text(m, "source", f"{where} ({mid})"),
        _parse_features(m, f"{where} ({mid})"),
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
    """A predicted figure (or relative change) with its calibrated range at ``level``.

    ``low`` / ``high`` are None when there is no range: ``outside_reason`` says why (the
    prediction lies outside what the table validates) and ``note`` is the whole sentence.
    ``classes`` are the prediction's classes (for a change: the before's, ``classes_after`` the
    after's); ``rows`` the calibration points (configurations, or pairs for a change) behind
    the range."""

    value: float | None
    low: float | None
    high: float | None
    classes: tuple[str, ...] = ()
    rows: int = 0
    note: str = ""
    classes_after: tuple[str, ...] | None = field(default=None)
    #: The nominal level of the range (None when there is no range).
    level: float | None = None
    #: A memory figure: its one-sided statement from published memory facts (memory_statement)
    #: in place of a range.
    memory: str = ""

    @property
    def available(self) -> bool:
        """Whether the interval has both ends."""
        return self.low is not None and self.high is not None

    @property
    def outside_reason(self) -> str:
        """Why there is no range ('' when there is one)."""
        if self.available or self.memory:
            return ""
        head = f"{OUTSIDE}: "
        return self.note[len(head) :] if self.note.startswith(head) else self.note

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (docs/report-schema.md, Interval)."""
        d: dict[str, Any] = {
            "value": _clean(self.value),
            "low": _clean(self.low),
            "high": _clean(self.high),
            "level": self.level if self.available else None,
            "outside_reason": self.outside_reason or None,
            "classes": list(self.classes),
            "rows": self.rows,
            "note": self.note,
        }
        if self.memory:
            d["memory"] = self.memory
        if self.classes_after is not None:
            d["classes_after"] = list(self.classes_after)
        return d


def _clean(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _none(value: float | None, note: str, classes: tuple[str, ...] = ()) -> Interval:
    return Interval(value, None, None, classes, 0, note)


def _classes_for(
    key: str, features: Features, table: ErrorTable | str
) -> tuple[tuple[str, ...], str]:
    """A prediction's classes for figure ``key`` and why it has no range ('' when it may)."""
    kind = FIGURE_KINDS.get(key)
    if kind is None:
        return (), NO_ROWS_NOTE
    classes = classify(features, host_inclusive=kind[1])
    if isinstance(table, str):
        return classes, table
    if features.small_conv_share is None:  # not known: the class could be missing
        return classes, UNKNOWN_NOTE
    if features.grouped_conv_share is None:
        return classes, GROUPS_UNKNOWN_NOTE
    return classes, ""


#: The sizes a prediction is compared with its calibration rows' range on: the feature, and its
#: words with a number (:func:`_far_outside`).
FAR_SIZES: tuple[tuple[str, str, str], ...] = (
    ("ipus", "IPU", "IPUs"),
    ("micro_batch", "sample per micro-batch", "samples per micro-batch"),
    ("sample_elems", "input element per sample", "input elements per sample"),
)


def _far_outside(features: Features, table: ErrorTable, ids: Iterable[str]) -> str:
    """Why ``features`` lie far outside the calibration rows ``ids`` ('' when they do not): an
    IPU count, a micro-batch or an input size per sample (an image's pixels x channels, a
    sequence's tokens) more than :data:`FAR_FACTOR` times beyond the rows' range. A size the
    prediction or the rows do not know is not compared."""
    rows = table.features_of_ids(ids)
    for key, one, many in FAR_SIZES:
        mine = getattr(features, key)
        theirs = [int(f[key]) for f in rows if _finite(f.get(key)) and f[key] > 0]
        if not theirs or not _finite(mine) or mine <= 0:
            continue
        lo, hi = min(theirs), max(theirs)
        if mine > hi * FAR_FACTOR or mine * FAR_FACTOR < lo:
            span = f"{lo:,}" if lo == hi else f"{lo:,} to {hi:,}"
            return (
                f"{OUTSIDE}: {int(mine):,} {one if mine == 1 else many}, "
                f"the reference configurations of its class use {span}"
            )
    return ""


def _pool_ids(table: ErrorTable, classes: Iterable[str]) -> list[str]:
    want = tuple(sorted(classes))
    return [i for p in table.points if tuple(sorted(p.classes)) == want for i in p.ids]


def absolute(
    key: str,
    value: float | None,
    features: Features,
    table: ErrorTable | str | None = None,
    exclude_group: str = "",
) -> Interval:
    """The calibrated range of a predicted figure ``key`` (:data:`FIGURE_KINDS`) of value
    ``value`` at :data:`LEVEL` (intervals_calibration.calibrate; ``exclude_group``: a source
    left out), or the sentence saying why the prediction is outside the validated range."""
    from analyser.core import intervals_calibration as cal

    table = default_table() if table is None else table
    classes, why = _classes_for(key, features, table)
    if value is None or not math.isfinite(value):
        return _none(None, "no interval: no predicted figure", classes)
    if why or isinstance(table, str):  # an unreadable table is its own reason (why == table)
        return _none(value, why, classes)
    c = cal.calibrate(table.points, classes, LEVEL, exclude_group)
    if c.lo is None or c.hi is None:
        return _none(value, c.note, classes)
    far = _far_outside(features, table, _pool_ids(table, classes))
    if far:
        return _none(value, far, classes)
    if FIGURE_KINDS[key][0] == "rate":  # real = engine / exp(log error)
        low, high = c.rate(value)
    else:  # cycles per sample: real = engine x exp(log error)
        low, high = min(value, value * math.exp(c.lo)), max(value, value * math.exp(c.hi))
    return Interval(value, low, high, classes, c.n, "", level=c.level)


def relative(
    key: str,
    before: float | None,
    after: float | None,
    features_before: Features,
    features_after: Features,
    table: ErrorTable | str | None = None,
    exclude_group: str = "",
) -> Interval:
    """The calibrated range of the relative change ``after / before - 1`` of figure ``key``:
    from how the engine's errors move between paired configurations of one source in the same
    classes (intervals_calibration.calibrate_change), never from the size of the predicted
    change, so a change the engine predicts as null keeps the error its mechanisms show."""
    from analyser.core import intervals_calibration as cal

    table = default_table() if table is None else table
    cb, why_b = _classes_for(key, features_before, table)
    ca, why_a = _classes_for(key, features_after, table)
    if before is None or after is None or not before or not math.isfinite(after / before):
        return Interval(None, None, None, cb, 0, "no interval: no predicted change", ca)
    value = after / before - 1.0
    if why_b or why_a or isinstance(table, str):
        return Interval(value, None, None, cb, 0, why_b or why_a, ca)
    c = cal.calibrate_change(table.pairs, cb, ca, LEVEL, exclude_group)
    if c.lo is None or c.hi is None:
        return Interval(value, None, None, cb, 0, c.note, ca)
    for feats, classes in ((features_before, cb), (features_after, ca)):
        far = _far_outside(feats, table, _pool_ids(table, classes))
        if far:
            return Interval(value, None, None, cb, 0, far, ca)
    ratio = value + 1.0  # real ratio = predicted ratio x exp(-(error moves)), symmetric
    low, high = ratio * math.exp(c.lo) - 1.0, ratio * math.exp(c.hi) - 1.0
    return Interval(value, min(low, value), max(high, value), cb, c.n, "", ca, c.level)


def figure_intervals(
    figures: Mapping[str, Any],
    features: Features,
    keys: Iterable[str],
    table: ErrorTable | str | None = None,
) -> dict[str, Interval]:
    """An interval for each of ``keys`` of one prediction (no range where no row applies)."""
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


# -- memory: one-sided statements from published facts ---------------------------------------------
NO_MEMORY_NOTE = "no memory evidence"


def memory_statement(
    features: Features,
    fits: bool | None,
    peak_tile_bytes: float | None,
    sram_per_tile: float | None,
    table: ErrorTable | str | None = None,
    level: float = LEVEL,
) -> dict[str, Any]:
    """What the published memory facts say about a prediction's fit and fullest tile.

    The facts of the prediction's device classes are used. A published fit bounds the real
    fullest tile from above by the tile's memory, so the real / engine ratio of that
    configuration is at most u = tile memory / engine's fullest tile; the
    ceil((n + 1) level)-th smallest u over n such facts bounds a further configuration's ratio
    from above with probability at least ``level`` (one-sided split-conformal; the bounds are
    conservative because each u only bounds its ratio). A published out-of-memory fact bounds
    the ratio from below the same way. ``{statement, level, bound, side, facts}``: ``bound``
    the real fullest tile's bound (bytes), ``side`` 'at most' / 'at least'; without facts of
    its classes the statement is :data:`NO_MEMORY_NOTE`."""
    from analyser.core import intervals_calibration as cal

    table = default_table() if table is None else table
    out: dict[str, Any] = {"statement": NO_MEMORY_NOTE, "level": None, "bound": None}
    out.update(side=None, facts=0)
    if isinstance(table, str) or not _finite(peak_tile_bytes) or not _finite(sram_per_tile):
        return out
    want = classify(features, host_inclusive=False)
    pool = [
        m
        for m in table.memory
        if m.peak_tile_bytes
        and m.sram_per_tile
        and classify(_features_of_mapping(m.features), host_inclusive=False) == want
    ]
    out["facts"] = len(pool)
    if not pool:
        out["statement"] = f"{NO_MEMORY_NOTE} for {class_words(want)}"
        return out
    need = cal.min_points(level)
    ratios = [
        (m.sram_per_tile / m.peak_tile_bytes, m.fits)
        for m in pool
        if m.sram_per_tile and m.peak_tile_bytes
    ]
    ups = sorted(u for u, fit in ratios if fit)
    downs = sorted((u for u, fit in ratios if not fit), reverse=True)
    # the side that can decide the engine's own verdict: a predicted fit needs an upper bound
    side, vals = ("at most", ups) if fits is not False else ("at least", downs)
    if len(vals) < need:
        kind = "fit" if side == "at most" else "out-of-memory"
        out["statement"] = (
            f"{NO_MEMORY_NOTE} that decides it: {len(vals)} published {kind} fact"
            f"{'s' if len(vals) != 1 else ''} for {class_words(want)} (a bound at "
            f"{level:.0%} needs {need})"
        )
        return out
    k = math.ceil((len(vals) + 1) * level - 1e-9) - 1
    bound = float(peak_tile_bytes) * vals[k]
    verdict = (
        ("fits" if bound <= sram_per_tile else "fit not established")
        if side == "at most"
        else ("out of memory" if bound > sram_per_tile else "out of memory not established")
    )
    out.update(level=level, bound=bound, side=side)
    out["statement"] = (
        f"{verdict}: fullest tile {side} {bound / 1024:,.0f} KiB of {sram_per_tile / 1024:,.0f} "
        f"KiB ({level:.0%} one-sided, from {len(vals)} published facts of {class_words(want)})"
    )
    return out


def _features_of_mapping(f: Mapping[str, Any] | None) -> Features:
    f = f if isinstance(f, Mapping) else {}
    return features_from(
        {k: f.get(k) for k in FEATURE_KEYS},
        {"num_ipus": _int(f.get("ipus"), 1), "replication_factor": 1},
    )


# -- words ---------------------------------------------------------------------------------------
def fmt_pct_range(low: float | None, high: float | None, level: float | None = LEVEL) -> str:
    """'(80% range +60% to +110%)' for a relative change's interval."""
    return f"({range_words(_pct(low), _pct(high), level)})"


def range_words(low: str, high: str, level: float | None = LEVEL) -> str:
    """'80% range +60% to +110%': every range says its level."""
    lvl = f"{level:.0%} " if _finite(level) else ""
    return f"{lvl}range {low} to {high}"


def _pct(x: float | None) -> str:
    if not _finite(x):
        return "-"
    v = round(100 * x)
    return f"{v:+d}%" if v else "0%"


def describe_change(iv: Mapping[str, Any] | Interval | None, *, short: bool = False) -> str:
    """The interval of a change in words: '(80% range +60% to +110%)', or '(outside the
    validated range: ...)' (with ``short``, '(outside the validated range)')."""
    d = iv.to_dict() if isinstance(iv, Interval) else iv
    if not d:
        return ""
    if _finite(d.get("low")) and _finite(d.get("high")):
        return fmt_pct_range(d["low"], d["high"], d.get("level"))
    return f"({OUTSIDE})" if short else f"({_outside_words(d)})"


def _outside_words(d: Mapping[str, Any]) -> str:
    """'outside the validated range: <why>' for an interval object without a range (a memory
    figure: its one-sided statement)."""
    if d.get("memory"):
        return str(d["memory"])
    note = str(d.get("note") or "")
    if note.startswith((OUTSIDE, "no interval")):
        return note
    return f"{OUTSIDE}: {d.get('outside_reason') or note or 'no reference rows'}"


def class_words(classes: Iterable[str]) -> str:
    """'small convolutions + host-bound'."""
    return " + ".join(MECHANISMS.get(c, c) for c in classes)


# -- a profile's and a change's intervals --------------------------------------------------------
def table_info(table: ErrorTable | str | None = None) -> dict[str, Any]:
    """Where the errors come from: ``{commit, measured, rows, level}``, or ``{note}``."""
    table = default_table() if table is None else table
    if isinstance(table, str):
        return {"note": table}
    return {
        "commit": table.commit,
        "measured": table.measured,
        "rows": len(table.rows),
        "level": LEVEL,
        "memory_facts": len(table.memory),
    }


def profile_prediction(
    analysis, keys: Iterable[str], table: ErrorTable | str | None = None
) -> dict[str, Any]:
    """The ``prediction`` block of a profile's JSON: its features, classes (host-inclusive and
    device-only figures), an interval for every figure of ``keys`` and the memory statement
    (a profile written by the engine is a prediction)."""
    table = default_table() if table is None else table
    feats = features_of(analysis)
    figures = analysis.metrics.to_dict()
    oom = figures.get("oom_tiles")
    fits = None if not _finite(oom) else int(oom) == 0
    sram = getattr(analysis.target, "sram_per_tile", None)
    memory = memory_statement(
        feats, fits, figures.get("max_tile_memory_bytes"), sram if _finite(sram) else None, table
    )
    ivs = figure_intervals(figures, feats, keys, table)
    for k in MEMORY_FIGURES:
        if k in ivs:
            iv = ivs[k]
            ivs[k] = Interval(iv.value, None, None, iv.classes, memory["facts"], iv.note)
            ivs[k] = dataclasses.replace(ivs[k], memory=memory["statement"])
    return {
        "features": {
            "ipus": feats.ipus,
            "replicas": feats.replicas,
            "host_load": _clean(feats.host_load),
            "host_overlapped": feats.host_overlapped,
            "small_conv_share": _clean(feats.small_conv_share),
            "call_share": _clean(feats.call_share),
            "grouped_conv_share": _clean(feats.grouped_conv_share),
            "micro_batch": feats.micro_batch,
            "sample_elems": feats.sample_elems,
        },
        "classes": list(classify(feats)),
        "classes_device": list(classify(feats, host_inclusive=False)),
        "level": LEVEL,
        "errors": table_info(table),
        "intervals": {k: iv.to_dict() for k, iv in ivs.items()},
        "memory": memory,
    }


def change_note(d: Mapping[str, Any] | None) -> str:
    """One line on a change's interval: its level, classes and pairs, or why there is none."""
    if not isinstance(d, Mapping) or not d:
        return ""
    if not _finite(d.get("low")) or not _finite(d.get("high")):
        return _outside_words(d)
    before, after = d.get("classes") or [], d.get("classes_after") or d.get("classes") or []
    if not isinstance(before, list | tuple) or not isinstance(after, list | tuple):
        return _outside_words(d)
    where = class_words(before)
    if set(after) != set(before):
        where += f" -> {class_words(after)}"
    lvl = d.get("level")
    lvl = f"{lvl:.0%} " if _finite(lvl) else ""
    return (
        f"{lvl}range from how the engine's errors move between {d.get('rows', 0)} pairs of "
        f"reference configurations of one source ({where}), not from the predicted change"
    )


def range_text(d: Mapping[str, Any] | None, fmt=None) -> str:
    """'80% range +60% to +110%' for a change (``fmt`` None), '80% range low to high' with
    ``fmt`` for a figure, 'outside the validated range: <why>' when there is none, '' without
    an interval object."""
    if not isinstance(d, Mapping) or not d:
        return ""
    if not _finite(d.get("low")) or not _finite(d.get("high")):
        return _outside_words(d)
    if fmt is None:
        return range_words(_pct(d["low"]), _pct(d["high"]), d.get("level"))
    return range_words(fmt(d["low"]), fmt(d["high"]), d.get("level"))


def range_cell(d: Mapping[str, Any] | None, fmt=None) -> str:
    """:func:`range_text` for a table cell: the range, or only 'outside the validated range'
    (the reasons are listed once under the table: :func:`outside_reasons`)."""
    return short_range(range_text(d, fmt))


def short_range(text: str) -> str:
    """A range's words as they are; a sentence in its place cut to its head ('outside the
    validated range', 'no memory evidence', 'fits', ...) for a table cell."""
    if not text or has_range(text):
        return text
    if text.startswith(NO_MEMORY_NOTE):
        return NO_MEMORY_NOTE
    return text.split(":", 1)[0]


def outside_reasons(items: Iterable[tuple[str, Mapping[str, Any] | None]]) -> list[str]:
    """'label: why' for each interval object of ``items`` ((label, interval)) without a range,
    one line per distinct reason (labels of the same reason joined)."""
    by: dict[str, list[str]] = {}
    for label, d in items:
        text = range_text(d)
        if text and not has_range(text):
            by.setdefault(text, []).append(label)
    return [f"{', '.join(labels)}: {why}" for why, labels in by.items()]


def has_range(text: str) -> bool:
    """Whether :func:`range_text`'s words are a range (not the outside-range sentence)."""
    return " range " in f" {text}" and not text.startswith(OUTSIDE) and "no interval" not in text


#: Columns :func:`tune_columns` adds to a results table (docs/tune.md).
TUNE_COLUMNS: tuple[str, ...] = (
    "throughput_low",
    "throughput_high",
    "throughput_change",
    "throughput_change_low",
    "throughput_change_high",
    "interval_level",
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
    """A tried configuration's throughput range, and its change from the start's with the
    change's range (None where there is none; ``interval_note`` says why)."""
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
        "interval_level": LEVEL,
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


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (a hand-edited or old JSON block)."""
    return value if isinstance(value, Mapping) else {}


def prediction_note(pred: Mapping[str, Any] | None) -> str:
    """One sentence on a profile's ranges (its ``prediction`` block): level, classes, commit,
    or the outside-range sentence; and its memory statement."""
    if not isinstance(pred, Mapping) or not pred:
        return ""
    errors = _mapping(pred.get("errors"))
    if errors.get("note"):
        return str(errors["note"])
    classes = pred.get("classes")
    classes = classes if isinstance(classes, list) else []
    iv = _mapping(pred.get("intervals")).get("throughput_samples_per_s")
    mem = _mapping(pred.get("memory"))
    memory = f" Memory: {mem['statement']}." if mem.get("statement") else ""
    if isinstance(iv, Mapping) and not _finite(iv.get("low")):
        return f"Ranges: {_outside_words(iv)} ({class_words(classes)}).{memory}"
    rows = iv.get("rows", 0) if isinstance(iv, Mapping) else 0
    lvl = pred.get("level") if _finite(pred.get("level")) else LEVEL
    head = f"Ranges: {lvl:.0%} ranges of what the real figure may be, calibrated on {rows} public "
    head += f"reference configurations of its class ({class_words(classes)}) with each source "
    head += f"held out, measured on commit {errors.get('commit') or 'unknown'} "
    head += '(docs/fidelity.md, "Calibrated intervals").'
    return head + memory
