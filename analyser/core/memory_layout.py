"""The address layout of one tile's memory (no Qt): PopVision's per-tile memory map, as the
simulator models it.

Profiles do not store addresses (a Poplar compile would; the engine only decides how many bytes
of each category, region and variable each tile holds). So this module *derives* a layout from
what the profile stores per tile (``/memory/by_category``, ``/memory/gaps``) and per variable
(``/graph/variables``: bytes spread over a tile interval, always-live or a live range of liveness
steps, interleaved or not), with the allocation policy below. It is the simulator's modelled
layout, not a compiler's: the GUI and docs/gui.md say so.

The tile (Graphcore, *IPU Programmer's Guide*, "Tile architecture" / "On-tile memory"): one
contiguous address space of the tile's SRAM (624 KiB on Mk2 and Bow, 256 KiB on Mk1) in two
regions: *non-interleaved* memory, which holds the code (instructions are fetched only from it),
and *interleaved* memory, whose banks alternate by 64 bits so that one instruction can load 128
bits per cycle (the ``ld128`` / ``ld2x64`` forms the AMP and vectorised codelets use; PopLibs
vertices ask for it on their fields with the ``Vector<..., true>`` interleaved-memory constraint,
e.g. ``lib/poplin/codelets/ConvPartial1x1Out.cpp``). The split is the target's
``non_interleaved_bytes_per_tile`` (an engine assumption, docs/engine.md: a quarter of the tile,
as Mk1's memory map; the non-interleaved region is taken at the low addresses here).

Allocation policy (documented, deterministic):

1. Non-interleaved region, from address 0: every non-variable category of the tile (code,
   vertex instance state and field data, descriptors, control tables, exchange code and packet
   headers, stack, constants), in ``MEMORY_CATEGORIES`` order, each one block; all are
   always-live (Poplar keeps code, vertex state and stacks for the whole program). Bytes that
   do not fit are *overflowed* (the engine's regions say the same).
2. Variables, always-live first (exclusive addresses for the whole run, as the Poplar User Guide
   says of always-live variables), then the not-always-live ones, which share addresses with any
   variable whose live range (liveness steps, inclusive) does not overlap theirs. Each takes the
   lowest 8-byte-aligned address where no variable live at the same time sits (first fit),
   largest first ("greedy by size", Pisarchyk and Lee, *Efficient Memory Management for Deep
   Neural Net Inference*, 2020): in the interleaved region first; a variable that does not fit
   there goes to the free non-interleaved memory after the code (the engine's spill order); one
   that fits in neither is placed above the tile's end (overflowed).
3. The 8-byte alignment (64-bit loads) leaves gaps between blocks; what no block uses at the
   tile's peak is free.

The first fit loops over the variables of the one tile (a few hundred to a few thousand),
each step vectorised over the variables already placed; no loop runs over tiles or steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analyser.core.quantities import MEMORY_CATEGORIES

#: Alignment of every block's start address (bytes): 64-bit loads.
ALIGN = 8
#: Regions of the map, low addresses first.
NON_INTERLEAVED, INTERLEAVED, OVERFLOWED = "nonInterleaved", "interleaved", "overflowed"

LAYOUT_COLUMNS = (
    "name",
    "category",
    "kind",
    "start",
    "end",
    "bytes",
    "always_live",
    "live_start",
    "live_end",
    "region",
    "variable",
)


@dataclass
class TileLayout:
    """The modelled address layout of tile ``tile`` of IPU ``ipu``.

    ``blocks`` has one row per block (:data:`LAYOUT_COLUMNS`): ``start`` / ``end`` addresses
    (bytes, ``end`` exclusive), ``live_start`` / ``live_end`` liveness steps (inclusive; 0 and
    ``n_steps - 1`` for always-live blocks), ``region``, and ``variable`` (row of
    ``/graph/variables``, -1 for the non-variable categories).
    """

    ipu: int
    tile: int
    sram: int
    non_interleaved: int
    n_steps: int
    blocks: pd.DataFrame
    #: The profile's figures for the tile: used bytes (always-live + peak not-always-live) and
    #: alignment gaps.
    profile_total: int
    profile_gaps: int
    #: Name of each liveness step (the program it runs), empty strings when the profile has none.
    step_names: np.ndarray | None = None

    def step_name(self, step: int) -> str:
        """The name of liveness ``step`` ('' when unknown)."""
        names = self.step_names
        return str(names[step]) if names is not None and 0 <= step < len(names) else ""

    @property
    def regions(self) -> list[tuple[str, int, int]]:
        """(region, first address, end address) of the tile's two regions, plus the overflow
        above the tile's end when a block reaches there."""
        out = [
            (NON_INTERLEAVED, 0, self.non_interleaved),
            (INTERLEAVED, self.non_interleaved, self.sram),
        ]
        top = self.top_address
        if top > self.sram:
            out.append((OVERFLOWED, self.sram, top))
        return out

    @property
    def top_address(self) -> int:
        """The highest address used on the tile."""
        return int(self.blocks["end"].max()) if len(self.blocks) else 0

    def live_bytes(self) -> np.ndarray:
        """Bytes of the blocks live at each liveness step (``n_steps`` values)."""
        n = max(1, self.n_steps)
        diff = np.zeros(n + 1, np.int64)
        b = self.blocks
        np.add.at(diff, b["live_start"].to_numpy(), b["bytes"].to_numpy())
        np.add.at(diff, b["live_end"].to_numpy() + 1, -b["bytes"].to_numpy())
        return np.cumsum(diff)[:n]

    def peak_step(self) -> int:
        """The liveness step with the most live bytes on the tile."""
        return int(np.argmax(self.live_bytes()))

    def block_at(self, address: float, step: float | None = None) -> pd.Series | None:
        """The block holding ``address`` (at liveness step ``step``; the peak step when None),
        or None for free memory."""
        step = self.peak_step() if step is None else round(step)
        b = self.blocks
        hit = (
            (b["start"].to_numpy() <= address)
            & (address < b["end"].to_numpy())
            & (b["live_start"].to_numpy() <= step)
            & (step <= b["live_end"].to_numpy())
        )
        idx = np.flatnonzero(hit)
        return b.iloc[int(idx[0])] if len(idx) else None

    def free_bytes(self, step: int | None = None) -> int:
        """Bytes of the tile no block uses at ``step`` (the peak step by default)."""
        step = self.peak_step() if step is None else step
        return max(0, self.sram - int(self.live_bytes()[step]))


def _first_fit(
    size: int,
    ls: int,
    le: int,
    lo: int,
    hi: int | None,
    placed_lo: np.ndarray,
    placed_hi: np.ndarray,
    placed_ls: np.ndarray,
    placed_le: np.ndarray,
) -> int | None:
    """Lowest aligned address in ``[lo, hi)`` (no upper bound when ``hi`` is None) where
    ``size`` bytes overlap no placed block live at the same time, or None."""
    busy = (placed_ls <= le) & (ls <= placed_le) & (placed_hi > lo)
    if hi is not None:
        busy &= placed_lo < hi
    a, b = placed_lo[busy], placed_hi[busy]
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    gap_lo = np.concatenate([[lo], np.maximum.accumulate(b)]) if len(b) else np.array([lo])
    gap_lo = np.maximum(gap_lo, lo)
    gap_lo = (gap_lo + ALIGN - 1) // ALIGN * ALIGN
    gap_hi = np.concatenate([a, [np.iinfo(np.int64).max]])
    ok = gap_hi - gap_lo >= size
    if hi is not None:
        ok &= gap_lo + size <= hi
    idx = np.flatnonzero(ok)
    return int(gap_lo[idx[0]]) if len(idx) else None


def tile_variable_bytes(variables: pd.DataFrame, ipu: int, tile: int) -> pd.DataFrame:
    """Variables of ``ipu`` with bytes on ``tile``, with ``tile_bytes``: the variable's bytes
    spread evenly over its tile interval, the remainder on the first tiles (the schema's
    mapping)."""
    v = variables
    start = v["tile_start"].to_numpy().astype(np.int64)
    count = v["tile_count"].to_numpy().astype(np.int64)
    on = (v["ipu"].to_numpy() == ipu) & (start <= tile) & (tile < start + count)
    on &= v["bytes"].to_numpy() > 0
    v = v[on]
    start, count = start[on], np.maximum(count[on], 1)
    total = v["bytes"].to_numpy().astype(np.int64)
    per = total // count + ((tile - start) < (total % count))
    return v.assign(tile_bytes=per.astype(np.int64), variable=np.flatnonzero(on))


def tile_layout(analysis: Any, ipu: int, tile: int) -> TileLayout:
    """The modelled layout of one tile (see the module docstring for the policy)."""
    mem = analysis.memory
    sram = int(mem.sram_per_tile)
    tgt = analysis.target_config or {}
    ni = int(tgt.get("non_interleaved_bytes_per_tile") or sram // 4)
    ni = min(ni, sram)
    src = analysis.src
    has_steps = src.has("/liveness/steps")
    step_names = src.column("/liveness/steps", "name") if has_steps else np.array([""], object)
    n_steps = max(1, len(step_names))
    last = n_steps - 1
    cats = np.asarray(src.profile.array("/memory/by_category", sel=np.s_[ipu, tile]), np.int64)
    rows: list[tuple] = []

    # 1. non-variable categories from address 0 (always-live)
    addr = 0
    for c, name in enumerate(MEMORY_CATEGORIES):
        n = int(cats[c])
        if name == "variable" or n <= 0:
            continue
        region = NON_INTERLEAVED if addr + n <= ni else OVERFLOWED
        rows.append((name, name, "code", addr, addr + n, n, True, 0, last, region, -1))
        addr += n
    code_end = (addr + ALIGN - 1) // ALIGN * ALIGN

    # 2. variables: always-live first, then by size (largest first)
    v = tile_variable_bytes(analysis.variables, ipu, tile)
    always = v["always_live"].to_numpy().astype(bool)
    size = v["tile_bytes"].to_numpy()
    ls = np.where(always, 0, v["live_start"].to_numpy().astype(np.int64))
    le = np.where(always, last, v["live_end"].to_numpy().astype(np.int64))
    ls, le = np.clip(ls, 0, last), np.clip(le, 0, last)
    order = np.lexsort((-size, ~always))
    n = len(order)
    p_lo, p_hi = np.zeros(n, np.int64), np.zeros(n, np.int64)
    p_ls, p_le = np.zeros(n, np.int64), np.zeros(n, np.int64)
    names = v["name"].to_numpy()
    kinds = v["kind"].to_numpy()
    var_rows = v["variable"].to_numpy()
    over_lo = max(sram, code_end)
    for k, i in enumerate(order):
        s, a, b = int(size[i]), int(ls[i]), int(le[i])
        args = (p_lo[:k], p_hi[:k], p_ls[:k], p_le[:k])
        at = _first_fit(s, a, b, ni, sram, *args)
        region = INTERLEAVED
        if at is None:
            at = _first_fit(s, a, b, code_end, ni, *args)
            region = NON_INTERLEAVED
        if at is None:
            at = _first_fit(s, a, b, over_lo, None, *args)
            region = OVERFLOWED
        # with no upper bound there is always room past the last block
        assert at is not None
        p_lo[k], p_hi[k], p_ls[k], p_le[k] = at, at + s, a, b
        rows.append(
            (
                str(names[i]),
                "variable",
                str(kinds[i]),
                at,
                at + s,
                s,
                bool(always[i]),
                a,
                b,
                region,
                int(var_rows[i]),
            )
        )
    blocks = pd.DataFrame(rows, columns=list(LAYOUT_COLUMNS))
    for col in ("start", "end", "bytes", "live_start", "live_end", "variable"):
        blocks[col] = blocks[col].astype(np.int64)
    return TileLayout(
        ipu=int(ipu),
        tile=int(tile),
        sram=sram,
        non_interleaved=ni,
        n_steps=n_steps,
        blocks=blocks,
        profile_total=int(mem.tile_total[ipu][tile]),
        profile_gaps=int(mem.tile_gaps[ipu][tile]),
        step_names=np.asarray(step_names, dtype=object),
    )


__all__ = [
    "ALIGN",
    "INTERLEAVED",
    "LAYOUT_COLUMNS",
    "NON_INTERLEAVED",
    "OVERFLOWED",
    "TileLayout",
    "tile_layout",
    "tile_variable_bytes",
]
