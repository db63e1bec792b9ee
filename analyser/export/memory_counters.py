"""Not-always-live memory by variable kind over the liveness steps, for the memory counter tracks
of exported traces (:mod:`analyser.export.trace`).

A not-always-live variable is live on the liveness steps ``[live_start, live_end]`` of its IPU
(``/graph/variables``); adding its bytes to its kind (activation, gradient, stash, temporary,
...) over those steps gives, per IPU and step, the not-always-live bytes by kind. In the
engine's profiles they add up exactly to ``/liveness/not_always_live``; whatever a foreign
profile's variables do not explain is the column ``other`` (never negative: a profile whose
variables claim more than its liveness total has no by-kind split at all).

:func:`counter_table` returns one row per distinct value of an IPU's counters (the rows the
exported counters can take) and, for each (IPU, program), the row its first liveness step has:
so a counter is written only where its values change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyser.core.source import Source
from profiles import schema
from profiles.errors import UserFacingError


@dataclass(frozen=True)
class CounterTable:
    """The values the memory counters take (see the module docstring)."""

    #: names of the by-kind columns (variable kinds present, then "other" if any)
    kinds: tuple[str, ...]
    #: (rows, len(kinds)) bytes of each distinct counter value
    values: np.ndarray
    #: (IPUs, programs) row of ``values`` of each program's liveness step (-1: none)
    row_of_prog: np.ndarray


def live_bytes_by_kind(src: Source, nal: np.ndarray) -> tuple[tuple[str, ...], np.ndarray] | None:
    """(kinds, (IPUs, steps, kinds) bytes) of not-always-live variables, or None when the
    variables do not add up to ``nal`` (IPUs, steps)."""
    n_ipus, n_steps = nal.shape
    path = "/graph/variables"
    if not n_steps or not src.has(path) or not src.n_rows(path):
        return None
    col = {
        c: src.column(path, c)
        for c in ("kind", "bytes", "ipu", "always_live", "live_start", "live_end")
    }
    kind = col["kind"].astype(np.int64)
    ipu = col["ipu"].astype(np.int64)
    lo = col["live_start"].astype(np.int64)
    hi = np.minimum(col["live_end"].astype(np.int64), n_steps - 1)
    nbytes = col["bytes"].astype(np.int64)
    k_all = len(schema.VARIABLE_KINDS)
    ok = (
        ~col["always_live"].astype(bool)
        & (lo >= 0)
        & (lo <= hi)
        & (ipu >= 0)
        & (ipu < n_ipus)
        & (kind >= 0)
        & (kind < k_all)
        & (nbytes > 0)
    )
    present = np.unique(kind[ok])
    if not present.size:
        return None
    code = np.full(k_all, -1, np.int64)
    code[present] = np.arange(present.size)
    k = present.size
    # difference arrays over (IPU, kind, step): +bytes at live_start, -bytes after live_end
    diff = np.zeros(n_ipus * k * (n_steps + 1), np.int64)
    base = (ipu[ok] * k + code[kind[ok]]) * (n_steps + 1)
    np.add.at(diff, base + lo[ok], nbytes[ok])
    np.add.at(diff, base + hi[ok] + 1, -nbytes[ok])
    by_kind = np.cumsum(diff.reshape(n_ipus, k, n_steps + 1), axis=2)[:, :, :n_steps]
    by_kind = np.moveaxis(by_kind, 1, 2)  # (IPUs, steps, kinds)
    other = nal - by_kind.sum(axis=2)
    if (other < 0).any():
        return None
    names = tuple(schema.VARIABLE_KINDS[int(c)] for c in present)
    if other.any():
        return (*names, "other"), np.concatenate([by_kind, other[:, :, None]], axis=2)
    return names, by_kind


def counter_table(
    src: Source, n_ipus: int, n_prog: int, lstep_of_prog: np.ndarray
) -> CounterTable | None:
    """The by-kind counter values of every program's liveness step (None without a split)."""
    try:
        nal = src.array("/liveness/not_always_live").astype(np.int64)
        if nal.ndim != 2 or nal.shape[0] < n_ipus:
            return None
        split = live_bytes_by_kind(src, nal[:n_ipus])
    except UserFacingError:
        return None
    if split is None:
        return None
    kinds, by_kind = split
    n_steps = by_kind.shape[1]
    used = lstep_of_prog >= 0
    flat = np.full(lstep_of_prog.shape, -1, np.int64)
    ipu_idx = np.broadcast_to(np.arange(n_ipus)[:, None], lstep_of_prog.shape)
    cells = ipu_idx[used] * n_steps + lstep_of_prog[used]
    if not cells.size:
        return None
    vals = by_kind.reshape(n_ipus * n_steps, len(kinds))[cells]
    uniq, inverse = np.unique(vals, axis=0, return_inverse=True)
    flat[used] = inverse.reshape(-1)
    return CounterTable(kinds, uniq, flat)
