"""Per-tile liveness stored as changes (format 1.1): the dense form and back.

A profile's not-always-live bytes per tile and liveness step form an ``(ipus, lsteps, tiles)``
array, but an IPU's values change only at the steps where one of its own variables becomes live
or dies (in a pipelined model a few percent of the steps). Format 1.1 stores, per IPU, only the
rows where its values change:

* ``per_tile_ipu_offsets`` (ipus + 1): IPU ``i`` owns stored rows ``[off[i], off[i + 1])``;
* ``per_tile_step`` (rows): the step from which each row holds (0 for an IPU's first row, then
  increasing);
* ``per_tile_rows`` (rows, tiles): the values, until the IPU's next stored row.

The value at ``(ipu, step, tile)`` is therefore ``rows[off[ipu] + k, tile]`` with ``k`` the last
stored row of the IPU whose step is ``<= step``. Format 1.0 files hold the dense
``/liveness/per_tile`` instead; :meth:`profiles.reader.Profile.liveness_per_tile` reads both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TileChanges:
    """Per-tile liveness of every IPU as changed rows (see the module docstring)."""

    ipu_offsets: np.ndarray  # int64 (ipus + 1,)
    step: np.ndarray  # int32 (rows,)
    rows: np.ndarray  # int32 (rows, tiles)
    n_steps: int

    @property
    def num_ipus(self) -> int:
        """The number of IPUs."""
        return len(self.ipu_offsets) - 1

    def ipu(self, ipu: int) -> tuple[np.ndarray, np.ndarray]:
        """(steps, rows) of one IPU."""
        a, b = int(self.ipu_offsets[ipu]), int(self.ipu_offsets[ipu + 1])
        return self.step[a:b], self.rows[a:b]

    def dense(self, ipu: int | None = None, steps: np.ndarray | slice | None = None) -> np.ndarray:
        """Dense values: ``(ipus, steps, tiles)``, or ``(steps, tiles)`` for one IPU."""
        want = np.arange(self.n_steps)[steps] if steps is not None else np.arange(self.n_steps)
        ipus = range(self.num_ipus) if ipu is None else [ipu]
        out = [expand(*self.ipu(i), want, self.rows.shape[1]) for i in ipus]
        if ipu is not None:
            return out[0]
        if not out:
            return np.zeros((0, want.size, self.rows.shape[1]), np.int32)
        return np.stack(out)


def expand(step: np.ndarray, rows: np.ndarray, want: np.ndarray, tiles: int) -> np.ndarray:
    """Dense rows of one IPU at steps ``want`` from its stored (step, row) changes."""
    want = np.asarray(want, np.int64)
    if len(step) == 0:
        return np.zeros((want.size, tiles), np.int32)
    k = np.searchsorted(step, want, side="right") - 1
    out = rows[np.maximum(k, 0)]
    if (k < 0).any():  # steps before the first stored row (never in files the writer accepts)
        out[k < 0] = 0
    return out


def from_dense(per_tile: np.ndarray) -> TileChanges:
    """The changed rows of a dense ``(ipus, lsteps, tiles)`` array (first row of each IPU kept)."""
    per_tile = np.asarray(per_tile)
    n_ipus, n_steps = per_tile.shape[:2]
    steps, rows, counts = [], [], []
    for i in range(n_ipus):
        a = per_tile[i]
        keep = np.ones(n_steps, bool)
        if n_steps > 1:
            keep[1:] = (a[1:] != a[:-1]).any(axis=1)
        idx = np.flatnonzero(keep) if n_steps else np.zeros(0, np.int64)
        steps.append(idx)
        rows.append(a[idx])
        counts.append(idx.size)
    tiles = per_tile.shape[2] if per_tile.ndim == 3 else 0
    return TileChanges(
        ipu_offsets=np.r_[0, np.cumsum(counts)].astype(np.int64),
        step=np.concatenate(steps).astype(np.int32) if steps else np.zeros(0, np.int32),
        rows=np.concatenate(rows).astype(np.int32) if rows else np.zeros((0, tiles), np.int32),
        n_steps=int(n_steps),
    )


def problems(ipu_offsets: np.ndarray, step: np.ndarray, n_rows: int, n_steps: int) -> list[str]:
    """What is wrong with stored changes (empty when they are well formed)."""
    out = []
    off = np.asarray(ipu_offsets, np.int64)
    step = np.asarray(step, np.int64)
    if off.size == 0 or off[0] != 0 or off[-1] != n_rows or (np.diff(off) < 0).any():
        out.append(
            f"per_tile_ipu_offsets must rise from 0 to the {n_rows} stored rows "
            f"(got {off[:8].tolist()}{'...' if off.size > 8 else ''})."
        )
        return out
    if step.size != n_rows:
        out.append(f"per_tile_step has {step.size} rows, per_tile_rows {n_rows}.")
        return out
    for i in range(off.size - 1):
        s = step[off[i] : off[i + 1]]
        if s.size == 0:
            if n_steps:
                out.append(f"IPU {i} has no stored row (its first must start at step 0).")
            continue
        if s[0] != 0 or (np.diff(s) <= 0).any() or s[-1] >= max(n_steps, 1):
            out.append(
                f"IPU {i}'s per_tile_step must start at 0 and increase below {n_steps} "
                f"(got {s[:6].tolist()}{'...' if s.size > 6 else ''})."
            )
    return out


__all__ = ["TileChanges", "expand", "from_dense", "problems"]
