"""Liveness: not-always-live memory over program steps, the peak step and what is live there."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from analyser.core.memory import variables_table
from analyser.core.source import Source

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class LivenessSummary:
    """Liveness curve per IPU ([ipus, steps] bytes) with its peak."""

    not_always_live: np.ndarray = field(repr=False)
    always_live: np.ndarray
    peak_step: np.ndarray
    step_names: list[str] = field(repr=False)
    #: the curve was summed from the variables' lifetimes (the profile has no
    #: /liveness/not_always_live)
    rebuilt: bool = False

    @property
    def n_steps(self) -> int:
        """The number of liveness steps."""
        return int(self.not_always_live.shape[1])

    @property
    def peak_bytes(self) -> np.ndarray:
        """[ipus] always-live + peak not-always-live (PopVision Graph Analyser User Guide, Liveness Report)."""
        if self.n_steps == 0:
            return self.always_live.copy()
        return self.always_live + self.not_always_live.max(axis=1)

    def curve(self, ipu: int, *, include_always_live: bool = False) -> np.ndarray:
        """Not-always-live bytes per step of ``ipu`` (plus always-live: ``include_always_live``)."""
        c = self.not_always_live[ipu]
        return c + self.always_live[ipu] if include_always_live else c


def summarise_liveness(src: Source) -> LivenessSummary:
    """The liveness curves, peaks and step names of a profile. A profile without its
    not-always-live curve gets it summed from its variables' lifetimes, which is what the curve
    is (PopVision Graph Analyser User Guide, Liveness Report: the memory of the variables live
    at each step; the engine's profiles agree to the byte); without those either, the missing
    curve is named."""
    al = src.array("/liveness/always_live").astype(np.int64)
    peak = src.array("/liveness/peak_step").astype(np.int64)
    rebuilt = not src.has("/liveness/not_always_live") and all(
        src.has(f"/graph/variables/{c}") for c in ("live_start", "live_end")
    )
    if rebuilt:
        nal = curve_from_lifetimes(variables_table(src), al.shape[0], src.n_rows("/liveness/steps"))
    else:
        nal = src.array("/liveness/not_always_live").astype(np.int64)
    names = [str(x) for x in src.column("/liveness/steps", "name")] if nal.shape[1] else []
    return LivenessSummary(nal, al, peak, names, rebuilt=rebuilt)


def curve_from_lifetimes(variables: pd.DataFrame, n_ipus: int, n_steps: int) -> np.ndarray:
    """[ipus, steps] bytes of the not-always-live variables live at each step (from step
    ``live_start`` to ``live_end``, both included; lifetimes outside the steps are clipped),
    summed exactly in integers."""
    nal = variables[~variables["always_live"].to_numpy(bool)]
    ipu = nal["ipu"].to_numpy(np.int64)
    start = np.clip(nal["live_start"].to_numpy(np.int64), 0, n_steps)
    end = np.clip(nal["live_end"].to_numpy(np.int64) + 1, 0, n_steps)
    nbytes = nal["bytes"].to_numpy(np.int64)
    keep = (ipu >= 0) & (ipu < n_ipus) & (start < end)
    edges = np.zeros((n_ipus, n_steps + 1), np.int64)
    np.add.at(edges, (ipu[keep], start[keep]), nbytes[keep])
    np.add.at(edges, (ipu[keep], end[keep]), -nbytes[keep])
    return np.cumsum(edges, axis=1)[:, :n_steps]


def live_variables(
    src: Source, step: int, ipu: int | None = None, *, include_always_live: bool = False
) -> pd.DataFrame:
    """Variables live at liveness step ``step`` (on ``ipu``), largest first."""
    return live_in(variables_table(src), step, ipu, include_always_live=include_always_live)


def live_in(
    df: pd.DataFrame, step: int, ipu: int | None = None, *, include_always_live: bool = False
) -> pd.DataFrame:
    """The rows of a variables table (``variables_table``, read once and kept by the caller)
    live at liveness step ``step`` (on ``ipu``), largest first."""
    live = (df["live_start"] <= step) & (df["live_end"] >= step) & ~df["always_live"]
    if include_always_live:
        live |= df["always_live"]
    if ipu is not None:
        live &= df["ipu"] == ipu
    return df[live].sort_values("bytes", ascending=False)


#: What an aligned row holds (:class:`StepAlignment`).
ALIGN_BOTH, ALIGN_REMOVED, ALIGN_ADDED = "both", "A only (removed)", "B only (added)"


@dataclass
class StepAlignment:
    """Two profiles' liveness steps aligned by program, as a diff aligns lines.

    One row per position of the common axis: ``a[row]`` is A's step there and ``b[row]`` B's
    (-1 where that profile has no step: removed from A, or added in B). ``a_pos`` / ``b_pos`` give
    each step's row (the x of a compared chart)."""

    a: np.ndarray
    b: np.ndarray

    @property
    def n_rows(self) -> int:
        """The number of aligned rows."""
        return int(self.a.size)

    @property
    def a_pos(self) -> np.ndarray:
        """[A's steps] the row of each of A's steps."""
        return _rows_of(self.a)

    @property
    def b_pos(self) -> np.ndarray:
        """[B's steps] the row of each of B's steps."""
        return _rows_of(self.b)

    def status(self, row: int) -> str:
        """Whether aligned ``row`` is in both profiles, removed (only A) or added (only B)."""
        a, b = int(self.a[row]), int(self.b[row])
        return ALIGN_BOTH if a >= 0 and b >= 0 else ALIGN_REMOVED if a >= 0 else ALIGN_ADDED

    def unmatched_runs(self) -> list[tuple[str, int, int]]:
        """(status, first row, last row) of every run of consecutive removed / added rows."""
        kind = np.where(self.a < 0, 2, np.where(self.b < 0, 1, 0))
        edges = np.flatnonzero(np.diff(np.r_[-1, kind, -1]) != 0)
        runs = []
        for lo, hi in itertools.pairwise(edges):
            k = int(kind[lo])
            if k:
                runs.append((ALIGN_REMOVED if k == 1 else ALIGN_ADDED, int(lo), int(hi - 1)))
        return runs


def _rows_of(steps: np.ndarray) -> np.ndarray:
    rows = np.flatnonzero(steps >= 0)
    out = np.empty(rows.size, np.int64)
    out[steps[rows]] = rows
    return out


def _occurrence_keys(names: list[str]) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    keys = []
    for n in names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        keys.append((n, k))
    return keys


def align_steps(names_a: list[str], names_b: list[str]) -> StepAlignment:
    """Align A's and B's liveness steps by program name and position: the longest matching
    blocks of (name, occurrence) keys (``difflib.SequenceMatcher``, the algorithm of ``diff``),
    so a step inserted in B shifts nothing after it. Steps of a changed block come as removed
    (A's) then added (B's)."""
    from difflib import SequenceMatcher

    ka, kb = _occurrence_keys(names_a), _occurrence_keys(names_b)
    sm = SequenceMatcher(None, ka, kb, autojunk=False)
    a_rows: list[np.ndarray] = []
    b_rows: list[np.ndarray] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            a_rows.append(np.arange(i1, i2))
            b_rows.append(np.arange(j1, j2))
            continue
        if i2 > i1:  # removed (A's steps of a deleted or replaced block)
            a_rows.append(np.arange(i1, i2))
            b_rows.append(np.full(i2 - i1, -1))
        if j2 > j1:  # added (B's)
            a_rows.append(np.full(j2 - j1, -1))
            b_rows.append(np.arange(j1, j2))
    cat = lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)  # noqa: E731
    return StepAlignment(cat(a_rows), cat(b_rows))


def step_program(src: Source, step: int) -> int:
    """The program (row of /programs/nodes) liveness step ``step`` runs."""
    return int(src.column("/liveness/steps", "program")[step])


def step_tile_cycles(src: Source, step: int) -> np.ndarray:
    """[tiles] cycles of one execution of liveness step ``step``'s program on each tile of its
    IPU (/programs/tile_cycles: the compiler's estimate, 0 where a tile is idle)."""
    return np.asarray(src.profile.tile_cycles([step_program(src, step)])[0], dtype=np.int64)


#: Columns of :func:`step_vertices`.
STEP_VERTEX_COLUMNS = (
    "compute_set",
    "vertex_type",
    "vertices",
    "tile_start",
    "tile_count",
    "vertices_per_tile",
    "state_bytes",
    "code_bytes",
    "max_tile_cycles",
    "mean_tile_cycles",
)


def step_vertices(src: Source, step: int) -> pd.DataFrame:
    """The vertices liveness step ``step`` runs (PopVision's Liveness "Vertices" tab), one row
    per compute set of its program and vertex type: instances, the tiles they run on (first
    tile, count, instances per tile), their state bytes (instances x state per instance), the
    codelet's code on each tile, and the cycle estimate of one execution over those tiles (max
    and mean of /programs/tile_cycles). Empty for a step that runs no compute set (an
    exchange, a stream copy, a sync)."""
    import pandas as pd  # imported on first use (not by `analyse summary`)

    prog = step_program(src, step)
    cs = src.table("/graph/compute_sets")
    cs = cs[cs["program"].to_numpy() == prog]
    if cs.empty:
        return pd.DataFrame({c: [] for c in STEP_VERTEX_COLUMNS})
    vt = src.table("/graph/vertex_types")
    t = cs["vertex_type"].to_numpy().astype(np.int64)
    ok = (t >= 0) & (t < len(vt))
    ti = np.clip(t, 0, max(len(vt) - 1, 0))
    names = np.where(ok, vt["name"].to_numpy(dtype=object)[ti], "-")
    state = np.where(ok, vt["state_bytes"].to_numpy()[ti], 0).astype(np.int64)
    code = np.where(ok, vt["code_bytes"].to_numpy()[ti], 0).astype(np.int64)
    cycles = src.profile.tile_cycles([prog])[0].astype(np.int64)
    first = cs["tile_start"].to_numpy().astype(np.int64)
    count = cs["tile_count"].to_numpy().astype(np.int64)
    # max / mean over each compute set's tiles: prefix sums and a sparse max over the ranges
    lo = np.clip(first, 0, cycles.size)
    hi = np.clip(first + count, 0, cycles.size)
    csum = np.r_[0, np.cumsum(cycles)]
    n = np.maximum(hi - lo, 1)
    mean = (csum[hi] - csum[lo]) / n
    mx = np.array([int(cycles[a:b].max()) if b > a else 0 for a, b in zip(lo, hi, strict=True)])
    vertices = cs["vertices"].to_numpy().astype(np.int64)
    return pd.DataFrame(
        {
            "compute_set": cs["name"].astype(str).to_numpy(),
            "vertex_type": names.astype(str),
            "vertices": vertices,
            "tile_start": first,
            "tile_count": count,
            "vertices_per_tile": vertices / np.maximum(count, 1),
            "state_bytes": vertices * state,
            "code_bytes": code,
            "max_tile_cycles": mx,
            "mean_tile_cycles": mean,
        }
    ).sort_values("vertices", ascending=False, ignore_index=True)
