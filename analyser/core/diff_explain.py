"""What ``analyse diff`` says about why two runs differ, without the comparison's tables.

:func:`explain_pair` gives the run-option differences, the explanations, the other deltas and
the interval of the total cycles' change that :func:`analyser.core.comparison.compare_pair`
gives for the same two runs (the same rules and sentences: ``config_diffs``, ``_explain``,
``other_deltas``, ``change_intervals``), reading only what they need:

* the key figures through a lazy view of each run (:class:`_Figures`): the execution figures
  from the execution summary, the memory ones from the memory summary, each on first use, so
  that a figure no explanation asks for (a ramp share, the bytes of the stream copies) is never
  computed; with the diff's partial summary
  (:class:`analyser.core.execution.PartialExecutionSummary`) that means the step table is read
  only for the columns the diff itself needs unless a run-option difference asks for more;
* the first rows of the step-type, memory-category and operation tables with numpy, ordered as
  pandas orders them (:func:`_largest_first`), without making the tables or importing pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.core import comparison as _cmp
from analyser.core.analysis import Metrics
from analyser.core.operations import operation_totals
from profiles import schema

if TYPE_CHECKING:
    from analyser.core.analysis import Analysis

#: The intervals the diff shows or its explanations quote.
_INTERVALS = ("total_cycles", "cycles_per_sample", "throughput_samples_per_s")
#: Metrics fields that are the execution summary's figure of the same name (None without one).
_EXECUTION_FIGURES = frozenset(
    {
        "total_cycles",
        "device_cycles",
        "cycles_per_sample",
        "throughput_samples_per_s",
        "device_throughput_samples_per_s",
        "samples",
        "host_seconds",
        "host_round_trips",
        "compute_share",
        "host_wait_share",
        "ramp_share",
    }
)


class _Figures:
    """The key figures of one run (:class:`analyser.core.analysis.Metrics`' names and values),
    each made on first use: those of the execution and memory summaries directly, any other
    from the whole :attr:`Analysis.metrics`."""

    def __init__(self, analysis: Analysis) -> None:
        self._an = analysis

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        an = self._an
        if name in _EXECUTION_FIGURES:
            ex = an.execution
            value = None if ex is None else getattr(ex, name)
        elif name == "oom_tiles":
            value = an.memory.n_oom_tiles
        elif name == "peak_memory_bytes":
            value = an.memory.peak_memory_bytes
        else:
            value = getattr(an.metrics, name)
        self.__dict__[name] = value
        return value

    def scalar(self, name: str) -> float | None:
        """As :meth:`Metrics.scalar`."""
        if name.startswith("ipu") and "." in name:
            return self._an.metrics.scalar(name)
        v = getattr(self, Metrics.ALIASES.get(name, name))
        return None if v is None else float(v)


class _View:
    """An analysis whose ``metrics`` are :class:`_Figures` (everything else is the
    analysis's own)."""

    def __init__(self, analysis: Analysis) -> None:
        self._an = analysis
        self.metrics = _Figures(analysis)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._an, name)


@dataclass
class PairExplanation:
    """The run-option differences of two runs and what they explain (as in
    :class:`analyser.core.comparison.PairComparison`)."""

    config_diffs: list[_cmp.ConfigDiff] = field(default_factory=list)
    explanations: list[_cmp.Explanation] = field(default_factory=list)
    other_deltas: list[str] = field(default_factory=list)
    #: the interval of the total cycles' change (an Interval's ``to_dict``), empty when none
    interval: dict[str, Any] = field(default_factory=dict)


def _largest_first(values: np.ndarray) -> np.ndarray:
    """The order of ``Series.abs().sort_values(ascending=False)`` of ``values`` (pandas'
    ``nargsort``: numpy's default sort of the reversed values, reversed), so that rows of equal
    size come in the order the comparison's tables give them."""
    size = np.abs(values)
    idx = np.arange(size.size)[::-1]
    return idx[size[::-1].argsort(kind="quicksort")][::-1]


def _step_rows(a: Any, b: Any) -> list[tuple[str, int, float, float, float]]:
    """The first three rows of the comparison's step-type table."""
    pairs, _unit = _cmp.step_type_pairs(a, b)
    rows = [(t, i, x, y, y - x) for t, i, x, y in pairs]
    order = _largest_first(np.array([r[4] for r in rows], np.float64))[:3]
    return [rows[k] for k in order]


def _category_rows(a: Any, b: Any) -> list[tuple[str, int, int, int]]:
    """The first three rows of the comparison's memory-category table."""
    ca = a.memory.by_category.sum(axis=0)
    cb = b.memory.by_category.sum(axis=0)
    delta = cb - ca
    keep = np.flatnonzero((ca != 0) | (cb != 0))
    order = keep[_largest_first(delta[keep])][:3]
    cats = list(schema.MEMORY_CATEGORIES)
    return [(cats[k], ca[k].item(), cb[k].item(), delta[k].item()) for k in order]


def _names(values: np.ndarray) -> np.ndarray:
    return np.array(
        [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values.tolist()],
        dtype=object,
    )


def _op_cycles(x: Any, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(sorted operation names, their cycles over the run / ``scale``): the comparison's
    ``operations.groupby("name")["total_cycles"].sum() / scale``."""
    src = x.src
    names = _names(src.column("/graph/operations", "name"))
    total, _ = operation_totals(src, x.execution, names.size)
    uniq, inverse = np.unique(names, return_inverse=True)
    sums = np.zeros(uniq.size, np.int64)
    np.add.at(sums, inverse, total)
    return uniq, sums / scale


def _op_rows(a: Any, b: Any) -> tuple[list[tuple[str, float, float, float]], list[str], list[str]]:
    """The first three rows of the comparison's operation table, and the names of the
    operations added and removed."""
    sa, sb, _unit = _cmp._scales(a, b)
    na, ca = _op_cycles(a, sa)
    nb, cb = _op_cycles(b, sb)
    common, ia, ib = np.intersect1d(na, nb, assume_unique=True, return_indices=True)
    added = sorted(set(nb.tolist()) - set(na.tolist()))
    removed = sorted(set(na.tolist()) - set(nb.tolist()))
    before, after = ca[ia], cb[ib]
    delta = after - before
    order = _largest_first(delta)[:3]
    rows = [(str(common[k]), before[k], after[k], delta[k]) for k in order]
    return rows, added, removed


def explain_pair(a: Analysis, b: Analysis) -> PairExplanation:
    """The run-option differences of ``a`` -> ``b``, the explanations, the other deltas and the
    interval of the total cycles' change, as :func:`compare_pair` gives them."""
    va, vb = _View(a), _View(b)
    diffs = _cmp.config_diffs(a, b)
    ivs = _cmp.change_intervals(va, vb, _INTERVALS)  # type: ignore[arg-type]
    expl = _cmp._explain(va, vb, diffs, ivs)  # type: ignore[arg-type]
    both_ran = a.execution is not None and b.execution is not None
    ops, added, removed = _op_rows(va, vb)
    other = _cmp.other_deltas(
        va,  # type: ignore[arg-type]
        vb,  # type: ignore[arg-type]
        expl,
        _step_rows(va, vb) if both_ran else [],
        _category_rows(va, vb),
        ops if both_ran else [],
        added,
        removed,
    )
    interval = ivs.get("total_cycles")
    return PairExplanation(diffs, expl, other, dict(interval or {}))
