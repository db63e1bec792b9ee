"""Tile selection: parse typed lists such as ``"0-15, 1000"`` or ``"1:0-15, 1:100"`` and keep a
selection of (IPU, tile) pairs. No Qt."""

from __future__ import annotations

import re

import numpy as np

from analyser.gui.model.errors import TileSelectionError

_ITEM = re.compile(r"^(?:(\d+)\s*:\s*)?(\d+)(?:\s*-\s*(\d+))?$")


def parse_tile_list(
    text: str, num_ipus: int, tiles_per_ipu: int, default_ipu: int = 0
) -> np.ndarray:
    """``"0-15, 1000"`` -> [k, 2] int64 array of (ipu, tile), sorted and unique.

    Items are separated by commas or spaces; ``a-b`` is an inclusive range; ``i:a-b`` picks IPU
    ``i`` (``default_ipu`` otherwise). Raises TileSelectionError with one sentence on bad input.
    """
    parts = [p for chunk in text.replace(";", ",").split(",") for p in [chunk.strip()] if p]
    if not parts:
        raise TileSelectionError("type tiles to select, e.g. '0-15, 1000' or '1:0-15'.")
    out: list[np.ndarray] = []
    for part in parts:
        for token in _split_spaces(part):
            m = _ITEM.match(token)
            if m is None:
                raise TileSelectionError(
                    f"cannot read {token!r} as a tile or range; use e.g. '0-15, 1000' or '1:0-15'."
                )
            ipu = int(m.group(1)) if m.group(1) is not None else default_ipu
            lo = int(m.group(2))
            hi = int(m.group(3)) if m.group(3) is not None else lo
            if ipu >= num_ipus:
                raise TileSelectionError(
                    f"IPU {ipu} does not exist; the profile has {num_ipus} IPU(s) (0-{num_ipus - 1})."
                )
            if hi < lo:
                raise TileSelectionError(f"range {token!r} runs backwards; write it as {hi}-{lo}.")
            if hi >= tiles_per_ipu:
                raise TileSelectionError(
                    f"tile {hi} does not exist; IPUs have {tiles_per_ipu} tiles (0-{tiles_per_ipu - 1})."
                )
            t = np.arange(lo, hi + 1, dtype=np.int64)
            out.append(np.stack([np.full_like(t, ipu), t], axis=1))
    return unique_pairs(np.concatenate(out))


def _split_spaces(part: str) -> list[str]:
    # "1 : 0 - 15" stays one token; "3 4 5" becomes three.
    compact = re.sub(r"\s*([:\-])\s*", r"\1", part)
    return [t for t in compact.split() if t]


def unique_pairs(pairs: np.ndarray) -> np.ndarray:
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if pairs.size == 0:
        return pairs
    return np.unique(pairs, axis=0)


def toggle_pair(selection: np.ndarray, ipu: int, tile: int) -> np.ndarray:
    """Add (ipu, tile) to the selection, or remove it when already selected (shift-click)."""
    selection = unique_pairs(selection)
    hit = (selection[:, 0] == ipu) & (selection[:, 1] == tile)
    if hit.any():
        return selection[~hit]
    return unique_pairs(np.vstack([selection, [[ipu, tile]]]))


def format_tile_list(pairs: np.ndarray, single_ipu: int | None = None) -> str:
    """Inverse of parse_tile_list (compact ranges)."""
    pairs = unique_pairs(pairs)
    items = []
    for ipu in np.unique(pairs[:, 0]):
        tiles = pairs[pairs[:, 0] == ipu, 1]
        breaks = np.flatnonzero(np.diff(tiles) != 1) + 1
        for run in np.split(tiles, breaks):
            text = f"{run[0]}" if run.size == 1 else f"{run[0]}-{run[-1]}"
            items.append(text if single_ipu == ipu else f"{ipu}:{text}")
    return ", ".join(items)
