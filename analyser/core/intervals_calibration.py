"""Calibrated intervals at a stated level, measured by holding out whole groups of the table.

The fidelity table's rows are clusters (several ResNet-50 rows from one results page), so a row
must not vouch for rows of its own cluster. This module computes, from the stored errors of the
table's own simulations (``analyser/core/fidelity_errors.json``, written by
``benchmarks/bench_fidelity.py --write-errors``) and the table's sources:

* **one classification**: a row's classes are :func:`analyser.core.intervals.classify` run on the
  features of that row's own simulation (the ``features`` the benchmark stored), never a hand
  label;
* **duplicates once**: rows with the same run configuration are one point (the mean of their log
  errors), so a configuration listed twice cannot double its weight;
* **split-conformal intervals**: for a prediction in classes C, the calibration points are the
  rows in exactly C; with log errors r_i = log(engine / reference), centre m = their median and
  scores s_i = |r_i - m|, the interval at level L is value x exp(-(m +- q)) with q the
  ceil((n + 1) L)-th smallest score (Vovk, Gammerman and Shafer 2005; Lei et al. 2018). Fewer
  than ceil(L / (1 - L)) points (4 at 80%) give no finite quantile: the prediction is outside
  the validated range, and says so;
* **group hold-out**: :func:`held_out` scores every row against the interval computed without its
  whole group (one source document is one group), giving the coverage at the nominal level, the
  width (high / low) and the interval score of Gneiting and Raftery (2007, eq. 43) on the log
  scale, beside a fixed x/÷1.5 band scored the same way.

Nothing here is a stored number: every figure is recomputed from the errors file, so it follows
the engine when the benchmark rewrites that file. No Dask, no Qt.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from analyser.core.intervals_features import LEVEL, OUTSIDE, Features, classify
from analyser.core.intervals_features import finite as _finite

#: The fixed band the intervals are scored against: x/÷ this factor around the point estimate.
FIXED_FACTOR = 1.5


@dataclass(frozen=True)
class Point:
    """One calibration point: a run configuration's log error, its classes and its group."""

    ids: tuple[str, ...]
    config: str
    group: str
    classes: tuple[str, ...]
    log_error: float


def row_classes(features: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    """A row's classes: :func:`classify` on the stored features of its simulation (None when
    the row was not classified)."""
    if not isinstance(features, Mapping):
        return None
    f = Features(
        int(features.get("ipus") or 1),
        int(features.get("replicas") or 1),
        _num(features.get("host_load")),
        features.get("host_overlapped")
        if isinstance(features.get("host_overlapped"), bool)
        else None,
        _num(features.get("small_conv_share")),
        _num(features.get("call_share")),
        _num(features.get("grouped_conv_share")),
    )
    return classify(f, host_inclusive=True)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _group(ref: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """A row's hold-out group: its source document's short name, or (in an errors file written
    before documents were named) its source text."""
    return str(ref.get("document") or ref.get("source") or row["id"])


def points(
    errors_rows: Iterable[Mapping[str, Any]],
    references: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Point]:
    """The calibration points of the host-inclusive throughput rows: ``errors_rows`` are the
    stored errors file's rows, ``references`` the table's rows by id (for ``config`` and
    ``source``; without it, the errors rows' own ``config`` and ``source``, which the benchmark
    stores). Rows of one configuration are merged into one point."""
    merged: dict[str, dict[str, Any]] = {}
    for r in errors_rows:
        ref = r if references is None else references.get(str(r.get("id")))
        err = r.get("error")
        if ref is None or r.get("quantity") != "throughput" or not _finite(err) or err <= -1:
            continue
        classes = row_classes(r.get("features"))
        if classes is None:
            continue
        key = str(ref.get("config") or r["id"])
        p = merged.setdefault(key, {"ids": [], "group": _group(ref, r), "classes": classes})
        p["ids"].append(str(r["id"]))
        p.setdefault("logs", []).append(math.log1p(float(err)))
    return [
        Point(tuple(p["ids"]), k, p["group"], p["classes"], float(np.mean(p["logs"])))
        for k, p in merged.items()
    ]


def min_points(level: float = LEVEL) -> int:
    """Fewest points with a finite conformal quantile at ``level``: ceil((n + 1) L) <= n."""
    n = 1
    while math.ceil((n + 1) * level - 1e-9) > n:
        n += 1
    return n


@dataclass(frozen=True)
class Calibrated:
    """The log-error range [lo, hi] of a class set at ``level`` (None: outside, ``note`` says
    why)."""

    lo: float | None
    hi: float | None
    n: int
    groups: int
    note: str = ""
    level: float = LEVEL

    def rate(self, value: float) -> tuple[float | None, float | None]:
        """The real figure's range for a predicted rate (real = engine / exp(error)), holding
        the predicted value."""
        if self.lo is None or self.hi is None:
            return None, None
        return min(value, value / math.exp(self.hi)), max(value, value / math.exp(self.lo))


def calibrate(
    pts: Iterable[Point], classes: Iterable[str], level: float = LEVEL, exclude_group: str = ""
) -> Calibrated:
    """The split-conformal range of the points in exactly ``classes`` (without one group)."""
    want = tuple(sorted(classes))
    pool = [p for p in pts if tuple(sorted(p.classes)) == want and p.group != exclude_group]
    n, groups = len(pool), len({p.group for p in pool})
    need = min_points(level)
    if n < need:
        why = f"{n} reference configuration{'s' if n != 1 else ''} in {' + '.join(want)}"
        return Calibrated(
            None, None, n, groups, f"{OUTSIDE}: {why} (a range at {level:.0%} needs {need})"
        )
    r = np.array([p.log_error for p in pool])
    m = float(np.median(r))
    s = np.sort(np.abs(r - m))
    q = float(s[math.ceil((n + 1) * level - 1e-9) - 1])
    return Calibrated(m - q, m + q, n, groups)


def interval_score(lo: float, hi: float, x: float, level: float = LEVEL) -> float:
    """Gneiting and Raftery (2007) interval score of [lo, hi] at central level ``level`` for the
    outcome x (lower is better): width plus 2 / alpha times the miss."""
    alpha = 1.0 - level
    return (hi - lo) + 2.0 / alpha * (max(0.0, lo - x) + max(0.0, x - hi))


def held_out(pts: list[Point], level: float = LEVEL) -> list[dict[str, Any]]:
    """Every point against the range of its classes computed without its whole group: the
    truth is its own log error (the engine's figure is the point estimate)."""
    out = []
    fixed = math.log(FIXED_FACTOR)
    for p in pts:
        c = calibrate(pts, p.classes, level, exclude_group=p.group)
        row: dict[str, Any] = {
            "ids": list(p.ids),
            "group": p.group,
            "classes": list(p.classes),
            "log_error": p.log_error,
            "fixed_score": interval_score(-fixed, fixed, p.log_error, level),
            "note": c.note,
        }
        if c.lo is not None and c.hi is not None:
            lo, hi = min(c.lo, 0.0), max(c.hi, 0.0)  # the interval holds the predicted value
            row.update(
                inside=bool(lo - 1e-12 <= p.log_error <= hi + 1e-12),
                width=math.exp(hi - lo),
                score=interval_score(lo, hi, p.log_error, level),
            )
        out.append(row)
    return out


def summarise(checks: list[dict[str, Any]], level: float = LEVEL) -> list[dict[str, Any]]:
    """Per class set and overall: points, points given an interval, coverage, median width,
    mean interval score and the fixed band's on the same points."""
    by: dict[str, list[dict[str, Any]]] = {}
    for c in checks:
        by.setdefault(" + ".join(sorted(c["classes"])), []).append(c)
    out = []
    for name, rows in [*sorted(by.items()), ("overall", checks)]:
        given = [r for r in rows if "inside" in r]
        out.append(
            {
                "classes": name,
                "points": len(rows),
                "given": len(given),
                "coverage": float(np.mean([r["inside"] for r in given])) if given else None,
                "median_width": float(np.median([r["width"] for r in given])) if given else None,
                "score": float(np.mean([r["score"] for r in given])) if given else None,
                "fixed_score": float(np.mean([r["fixed_score"] for r in given])) if given else None,
                "level": level,
            }
        )
    return out


# -- changes: from how the errors move between paired rows -------------------------------------
@dataclass(frozen=True)
class Pair:
    """Two configurations of one source: how the engine's log error moves from one to the other
    (``before`` -> ``after``), and the classes of each."""

    before: Point
    after: Point

    @property
    def moves(self) -> float:
        """The log error of the predicted ratio after / before: r_after - r_before."""
        return self.after.log_error - self.before.log_error

    def key(self) -> frozenset:
        """The unordered pair of the two class sets (what a change between them is pooled by)."""
        return frozenset((tuple(sorted(self.before.classes)), tuple(sorted(self.after.classes))))


def pairs(pts: Iterable[Point]) -> list[Pair]:
    """Every pair of configurations of one source (each unordered pair once): a change measured
    on rows that share their model, system and framework, so what the change leaves alone keeps
    its error."""
    pts = list(pts)
    return [Pair(a, b) for i, a in enumerate(pts) for b in pts[i + 1 :] if a.group == b.group]


def calibrate_change(
    prs: Iterable[Pair],
    classes_before: Iterable[str],
    classes_after: Iterable[str],
    level: float = LEVEL,
    exclude_group: str = "",
) -> Calibrated:
    """The log-error range of a predicted change between predictions in ``classes_before`` and
    ``classes_after``, from the pairs between the same class sets: symmetric, [-q, q] with q the
    conformal quantile of |r_after - r_before| (a pair's direction is arbitrary). It does not
    depend on the size of the predicted change: a change the engine predicts as null carries
    the error its mechanisms show in the pairs."""
    want = frozenset((tuple(sorted(classes_before)), tuple(sorted(classes_after))))
    pool = [p for p in prs if p.key() == want and p.before.group != exclude_group]
    n, groups = len(pool), len({p.before.group for p in pool})
    need = min_points(level)
    if n < need:
        names = " -> ".join(" + ".join(sorted(c)) for c in (classes_before, classes_after))
        why = f"{n} paired reference configuration{'s' if n != 1 else ''} for {names}"
        return Calibrated(
            None, None, n, groups, f"{OUTSIDE}: {why} (a range at {level:.0%} needs {need})"
        )
    s = np.sort(np.abs([p.moves for p in pool]))
    q = float(s[math.ceil((n + 1) * level - 1e-9) - 1])
    return Calibrated(-q, q, n, groups)


def held_out_changes(pts: list[Point], level: float = LEVEL) -> list[dict[str, Any]]:
    """Every pair against the change range computed without its source's pairs."""
    prs = pairs(pts)
    fixed = math.log(FIXED_FACTOR)
    out = []
    for p in prs:
        c = calibrate_change(prs, p.before.classes, p.after.classes, level, p.before.group)
        row: dict[str, Any] = {
            "ids": [*p.before.ids, *p.after.ids],
            "group": p.before.group,
            "classes": [" + ".join(sorted(set(p.before.classes) | set(p.after.classes)))],
            "log_error": p.moves,
            "fixed_score": interval_score(-fixed, fixed, p.moves, level),
            "note": c.note,
        }
        if c.lo is not None and c.hi is not None:
            row.update(
                inside=bool(c.lo - 1e-12 <= p.moves <= c.hi + 1e-12),
                width=math.exp(c.hi - c.lo),
                score=interval_score(c.lo, c.hi, p.moves, level),
            )
        out.append(row)
    return out
