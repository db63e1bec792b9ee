"""Memory per tile (``engine.compiler.memory``'s tile phase): bytes per category per tile and the
not-always-live bytes per tile at every step where they change (difference arrays: one scatter
over IPU x tile, two cumulative sums), and the floor plan of the tiles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.compiled import (
    VariableTable,
)
from engine.compiler.code import (
    _code_categories,
    _global_exchange_categories,
    _host_exchange_categories,
)
from engine.compiler.memory_records import (
    CAT,
    ActivationBytes,
    LivenessSteps,
    MemoryInputs,
    ProgramCode,
    StreamedTensors,
    TileMemory,
    WeightBytes,
    _sorted_distinct,
    _spread_ipus,
)
from profiles.liveness import TileChanges


def tile_memory(
    inputs: MemoryInputs,
    steps: LivenessSteps,
    variables: VariableTable,
    code: ProgramCode,
    streamed: StreamedTensors,
    weights: WeightBytes,
    activations: ActivationBytes,
) -> TileMemory:
    """Bytes per category per tile, and not-always-live bytes per step per tile, per IPU."""
    n_ipus, TT, n_steps = inputs.num_ipus, inputs.tiles_per_ipu, steps.count
    by_category = np.zeros((n_ipus, TT, len(CAT)), dtype=np.int64)
    # per-tile liveness is kept as changes (the steps where an IPU's per-tile bytes change, one
    # row each) and stored as int32 (the schema's dtype): saturated at 2 GiB per tile, which only
    # impossible configurations (thousands of times a tile's SRAM) reach; the sums per step and
    # the peaks per tile are exact
    _code_categories(inputs, code, by_category)
    _host_exchange_categories(inputs, variables, streamed, by_category)
    for ipu in range(n_ipus):
        _global_exchange_categories(inputs, weights, activations, ipu, by_category[ipu])
    always_live, variable_count, changes = _variable_bytes(inputs, steps, variables)
    # every IPU's change rows made in place in the one array the profile stores
    rows = np.zeros((len(changes.step), TT), dtype=np.int32)
    peak_nal = _fill_changes(changes, rows)
    by_category[:, :, CAT["variable"]] = always_live + peak_nal
    # each step takes the row of the last change at or before it on its IPU
    nal_per_step = np.zeros((n_ipus, n_steps), dtype=np.int64)
    if len(changes.step):
        at = np.arange(n_ipus)[:, None] * (n_steps + 3) + np.arange(n_steps) + 1  # as the keys
        last = np.searchsorted(changes.key, at, "right")
        last -= 1
        nal_per_step = np.take(changes.sums, last, out=last)  # in place: no fresh array
    per_tile = TileChanges(
        ipu_offsets=changes.ipu_offsets,
        step=changes.step.astype(np.int32),
        rows=rows,
        n_steps=n_steps,
    )
    return TileMemory(
        by_category=by_category,
        per_tile=per_tile,
        not_always_live_per_step=nal_per_step,
        peak_not_always_live=peak_nal,
        variable_count=variable_count,
    )


@dataclass(frozen=True)
class _Changes:
    """Every IPU's not-always-live bytes per tile as changes, before the dense rows are made.

    Kept rows in IPU order, each IPU's steps increasing from 0: ``key`` (IPU x (steps + 3) +
    step + 1), ``step``, ``ipu_offsets`` (each IPU's first row; ``n_ipus + 1``); the non-zero
    entries of the difference grid (kept row, tile in ``0..tiles``, value), unique and sorted
    by row; the exact bytes summed over the tiles of each kept row; and a bound on any per-tile
    value (an IPU's sum of every variable's bytes per tile)."""

    key: np.ndarray
    step: np.ndarray
    ipu_offsets: np.ndarray
    row: np.ndarray
    tile: np.ndarray
    value: np.ndarray
    sums: np.ndarray
    bound: float


def _variable_bytes(
    inputs: MemoryInputs, steps: LivenessSteps, variables: VariableTable
) -> tuple[np.ndarray, np.ndarray, _Changes]:
    """Every IPU's always-live variable bytes per tile and variables per tile ((IPUs, tiles)
    each), and its not-always-live bytes per tile as changes (``_Changes``; ``_fill_changes``
    makes the rows).

    Only the steps where one of an IPU's variables becomes live or dies can change its bytes,
    so the difference grid (bytes entering and leaving each tile range) has one row per such
    step of each IPU rather than one per liveness step of the whole program; it is kept sparse
    (a few entries per variable, summed by key) and rows whose entries all cancel (a variable
    dying where an identical one starts: the row equals the one before it) are dropped.
    """
    TT, n_steps, n_ipus = inputs.tiles_per_ipu, steps.count, inputs.num_ipus
    ipu = variables.ipu.astype(np.int64)
    vt0 = variables.tile_start.astype(np.int64)
    vtn = variables.tile_count.astype(np.int64)
    nbytes = variables.bytes
    always = variables.always_live
    base = nbytes // np.maximum(vtn, 1)
    rem = nbytes - base * np.maximum(vtn, 1)  # remainder bytes: one more on the first tiles
    al = np.flatnonzero(always)
    always_live = _spread_ipus(base[al], ipu[al], vt0[al], vtn[al], n_ipus, TT) + _spread_ipus(
        np.ones(len(al), dtype=np.int64), ipu[al], vt0[al], rem[al], n_ipus, TT
    )
    at = ipu * (TT + 1) + vt0
    size = n_ipus * (TT + 1)
    count = np.bincount(at, minlength=size) - np.bincount(at + vtn, minlength=size)
    count = np.cumsum(count.reshape(n_ipus, TT + 1)[:, :-1], axis=1)
    empty = np.zeros(0, np.int64)
    if not n_steps:
        offsets = np.zeros(n_ipus + 1, np.int64)
        changes = _Changes(empty, empty, offsets, empty, empty, empty, empty, bound=0.0)
        return always_live, count, changes
    nal = np.flatnonzero(~always & (nbytes > 0))
    # a change step of an IPU as one key: IPU x W + step + 1 (steps -1 .. n_steps + 1 fit)
    W = n_steps + 3
    v_ipu = ipu[nal]
    k0 = v_ipu * W + variables.live_start[nal].astype(np.int64) + 1
    s1 = variables.live_end[nal].astype(np.int64) + 1
    k1 = v_ipu * W + s1 + 1
    # every IPU's change steps: 0 and its variables' starts and ends (a variable live to the
    # last step has no end row)
    key = np.concatenate((np.arange(n_ipus, dtype=np.int64) * W + 1, k0, k1[s1 < n_steps]))
    key = _sorted_distinct(key)
    i0 = np.searchsorted(key, k0)
    i1 = np.searchsorted(key, k1)
    # an end falls on the IPU's first change row at or after it, if the IPU has one
    ends = np.flatnonzero(i1 < len(key))
    ends = ends[key[i1[ends]] // W == v_ipu[ends]]
    i1 = i1[ends]
    # the difference grid's entries: per variable its bytes per tile over [a0, a0 + tn) and
    # one more byte over [a0, a0 + rem), entering at row i0 and leaving at row i1
    b, r = base[nal], rem[nal]
    a0 = vt0[nal]
    a1, ar = a0 + vtn[nal], a0 + r
    odd = np.flatnonzero(r > 0)  # variables with remainder bytes (the others add nothing)
    odd_ends = np.flatnonzero(r[ends] > 0)
    e = ends[odd_ends]
    one, one_e = np.ones(len(odd), dtype=np.int64), np.ones(len(e), dtype=np.int64)
    row = np.concatenate((i0, i0, i0[odd], i0[odd], i1, i1, i1[odd_ends], i1[odd_ends]))
    tile = np.concatenate((a0, a1, a0[odd], ar[odd], a0[ends], a1[ends], a0[e], ar[e]))
    value = np.concatenate((b, -b, one, -one, -b[ends], b[ends], -one_e, one_e))
    entry = row * (TT + 1) + tile
    order = np.argsort(entry, kind="stable")
    entry, value = entry[order], value[order]
    if len(entry):
        first = np.flatnonzero(np.r_[True, entry[1:] != entry[:-1]])
        value = np.add.reduceat(value, first)
        entry = entry[first]
    nonzero = value != 0
    entry, value = entry[nonzero], value[nonzero]
    row, tile = np.divmod(entry, TT + 1)
    # kept: each IPU's first row, and the rows that differ from the one before
    ipu_of_key = key // W
    keep = np.r_[True, ipu_of_key[1:] != ipu_of_key[:-1]]
    keep[row] = True
    row = (np.cumsum(keep) - 1)[row]
    key = key[keep]
    offsets = np.r_[0, np.cumsum(np.bincount(key // W, minlength=n_ipus))].astype(np.int64)
    # the bytes summed over a row: an entry at tile t adds its value to tiles t..TT-1 of its
    # row and of its IPU's later rows
    through = np.r_[0, np.cumsum(value * (TT - tile))]
    before = through[np.searchsorted(row, offsets[:-1])]  # entries of earlier IPUs
    sums = through[np.searchsorted(row, np.arange(len(key)), "right")] - np.repeat(
        before, np.diff(offsets)
    )
    per_ipu = np.bincount(v_ipu, weights=b, minlength=n_ipus) + np.bincount(
        v_ipu, weights=r > 0, minlength=n_ipus
    )
    bound = float(per_ipu.max()) if n_ipus else 0.0
    return always_live, count, _Changes(key, key % W - 1, offsets, row, tile, value, sums, bound)


def _fill_changes(changes: _Changes, out: np.ndarray) -> np.ndarray:
    """Fill ``out`` (int32, zeroed, one row per change of every IPU) with the per-tile bytes of
    each change, saturated at 2 GiB; return the exact peak per IPU and tile (int64).

    The prefix sums along the tiles and down each IPU's rows run in place (row by row down the
    rows: numpy's cumsum along axis 0 of a C-ordered grid walks each column with the stride of a
    whole row); in int32 when no per-tile value can exceed it, else in an int64 copy."""
    TT, offsets = out.shape[1], changes.ipu_offsets
    n_ipus = len(offsets) - 1
    if not len(out):
        return np.zeros((n_ipus, TT), np.int64)
    inner = changes.tile < TT  # an entry at tile TT ends a range at the last tile: no effect
    fits = changes.bound <= np.iinfo(np.int32).max
    grid = out if fits else np.zeros(out.shape, np.int64)
    grid[changes.row[inner], changes.tile[inner]] = changes.value[inner]
    np.cumsum(grid, axis=1, out=grid)
    peak = np.zeros((n_ipus, TT), np.int64)
    for ipu in range(n_ipus):
        a, b = int(offsets[ipu]), int(offsets[ipu + 1])
        for i in range(a + 1, b):
            np.add(grid[i], grid[i - 1], out=grid[i])
        peak[ipu] = grid[a:b].max(axis=0)  # (np.maximum.reduceat along axis 0 is 8x slower)
    if not fits:
        np.minimum(grid, np.iinfo(np.int32).max, out=grid)
        out[...] = grid
    return peak


def _physical_tiles(n: int) -> np.ndarray:
    """Physical tile id of each software tile id.

    Assumption (documented in docs/engine.md): software tiles pair into supertiles and alternate
    between the two halves of the chip; the physical id interleaves them accordingly.
    """
    sw = np.arange(n)
    half = n // 2
    return np.where(sw % 2 == 0, sw // 2, half + sw // 2).astype(np.int32)


def _tile_xy(n: int) -> np.ndarray:
    """Floor-plan column / row of each software tile (a near-square grid of supertiles)."""
    cols = int(np.ceil(np.sqrt(n / 2))) * 2
    phys = _physical_tiles(n)
    return np.stack([phys % cols, phys // cols], axis=1).astype(np.int16)
