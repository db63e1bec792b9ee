"""Cycles lost to tile imbalance, per IPU and per compute set.

In a BSP compute phase every tile waits at the next sync for the slowest: a compute set whose
tiles take ``c_t`` cycles runs ``max_t c_t`` cycles, and the average tile of the IPU waits
``max - mean`` of them. Summed over the executed steps, that is the compute time the IPU loses
to imbalance::

    lost = sum over executed OnTileExecute steps of (max over the IPU's tiles - mean over them)
         = sum over programs of cycles executed x (1 - tile_balance)

with ``tile_balance`` the profile's mean / max over the IPU's tiles of each program (idle tiles
count as 0 cycles, as in PopVision's tile balance; ``/programs/nodes``) and the cycles executed
the measured cycles of its steps (an OnTileExecute step takes its program's cycles). No per-tile
array is read: the figures cost one pass over the programs table.

A perfectly balanced compute set would run ``mean`` cycles instead of ``max``, so ``lost`` is
also what balancing every compute set would save if nothing else moved (an upper bound: a sync
or another IPU may still hold the step). The ``throughput.tile_imbalance`` insight re-simulates
the gain with the engine's what-if option ``balance_compute_sets`` (docs/analysis.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from analyser.core.execution import ExecutionSummary
from analyser.core.source import Source
from profiles import schema

if TYPE_CHECKING:
    import pandas as pd

_ON_TILE_EXECUTE = schema.PROGRAM_TYPES.index("OnTileExecute")


def _plain(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value


def _names(values: np.ndarray) -> np.ndarray:
    return np.array(
        [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values.tolist()],
        dtype=object,
    )


@dataclass(frozen=True)
class ImbalanceSummary:
    """Cycles lost to tile imbalance (module docstring)."""

    #: per IPU: cycles lost (max - mean over tiles, summed over compute steps)
    lost_cycles: np.ndarray
    #: per IPU: cycles of its compute steps (OnTileExecute)
    compute_cycles: np.ndarray
    #: per IPU: the run's total cycles (the device trace)
    total_cycles: int
    #: one numpy column per field of :attr:`compute_sets` (same rows, same order)
    columns: dict[str, np.ndarray] = field(repr=False)

    @cached_property
    def compute_sets(self) -> pd.DataFrame:
        """One row per executed compute set, most cycles lost first: name, ipu, executions,
        max_cycles (one execution), mean_cycles (one execution), lost_cycles (over the run)."""
        import pandas as pd  # on first use: `analyse insights` and `summary` need no pandas

        return pd.DataFrame(self.columns)

    @property
    def lost_share_of_compute(self) -> np.ndarray:
        """Per IPU: lost cycles / compute cycles."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(
                self.compute_cycles > 0, self.lost_cycles / np.maximum(self.compute_cycles, 1), 0.0
            )

    def to_dict(self, top: int = 10) -> dict:
        """Plain data: per IPU and the ``top`` compute sets losing the most."""
        return {
            "definition": "sum over executed compute steps of the slowest tile's cycles minus "
            "the mean over the IPU's tiles",
            "ipus": [
                {
                    "ipu": i,
                    "lost_cycles": float(self.lost_cycles[i]),
                    "compute_cycles": int(self.compute_cycles[i]),
                    "share_of_compute": float(self.lost_share_of_compute[i]),
                    "share_of_total": float(self.lost_cycles[i] / self.total_cycles)
                    if self.total_cycles
                    else 0.0,
                }
                for i in range(self.lost_cycles.size)
            ],
            "compute_sets": [
                {k: _plain(col[r]) for k, col in self.columns.items()}
                for r in range(min(top, self.columns["name"].size))
            ],
        }


def summarise_imbalance(src: Source, execution: ExecutionSummary) -> ImbalanceSummary:
    """Cycles lost to tile imbalance of a run (``execution`` from the same profile)."""
    n_ipus = int(src.meta["num_ipus"])
    typ = src.column("/programs/nodes", "type").astype(np.int64)
    ipu = src.column("/programs/nodes", "ipu").astype(np.int64)
    cycles = src.column("/programs/nodes", "cycles").astype(np.float64)
    balance = np.clip(src.column("/programs/nodes", "tile_balance").astype(np.float64), 0.0, 1.0)
    executed = np.asarray(execution.program_cycles, np.float64)
    runs = np.asarray(execution.program_executions, np.int64)
    sel = np.flatnonzero((typ == _ON_TILE_EXECUTE) & (runs > 0) & (ipu >= 0) & (ipu < n_ipus))
    lost = executed[sel] * (1.0 - balance[sel])
    lost_ipu = np.bincount(ipu[sel], lost, n_ipus)
    compute = np.bincount(ipu[sel], executed[sel], n_ipus).astype(np.int64)
    names = _names(src.column("/programs/nodes", "name"))[sel]
    # the compute sets' names only label the rows (the programs' own names otherwise): a
    # profile without them still gives its imbalance
    has_names = all(src.has(f"/graph/compute_sets/{c}") for c in ("program", "name"))
    if has_names and src.n_rows("/graph/compute_sets"):
        cs_prog = src.column("/graph/compute_sets", "program").astype(np.int64)
        cs_names = _names(src.column("/graph/compute_sets", "name"))
        ok = (cs_prog >= 0) & (cs_prog < typ.size)
        label = np.full(typ.size, "", dtype=object)
        # a program runs one compute set in the engine's profiles; the first one names it
        # (a program without one, or with an unnamed one, keeps its own name)
        label[cs_prog[ok][::-1]] = cs_names[ok][::-1]
        named = label[sel]
        names = np.where(named != "", named, names)
    columns = {
        "name": names,
        "ipu": ipu[sel],
        "executions": runs[sel],
        "max_cycles": cycles[sel].astype(np.int64),
        "mean_cycles": cycles[sel] * balance[sel],
        "lost_cycles": lost,
    }
    # most cycles lost first, ties in program order (a stable sort on the negated losses)
    order = np.argsort(-lost, kind="stable")
    columns = {k: v[order] for k, v in columns.items()}
    return ImbalanceSummary(lost_ipu, compute, int(execution.total_cycles), columns)
