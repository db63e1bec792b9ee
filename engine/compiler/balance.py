"""What-if: compute sets run perfectly balanced (run option ``balance_compute_sets``).

No framework offers this: PopLibs maps a compute set's vertices to tiles from the tensors' tile
mapping, and a badly spread compute set keeps its slowest tile however the run is configured. The
engine can still answer "what would balancing gain": each named compute set's work (the sum of its
per-tile cycles) is spread over the IPU's compute tiles so that every tile does the mean, in whole
cycles: with ``W`` the work and ``T`` the compute tiles, ``W mod T`` tiles take ``ceil(W / T)``
and the others ``floor(W / T)``, so the work is kept exactly and the compute set's cycles (its
slowest tile) become ``ceil(W / T)``.

The vertices move with the work: the program's tile range becomes every compute tile, so the
code and vertex state per tile (engine.compiler.code) follow the spread. What stays: the tensors'
tile mapping (variables, exchanges and their costs are those of the planned op), so the what-if
is the compute phase alone (docs/engine.md, "What-if: balanced compute sets").
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import numpy as np

from engine.compiled import T_ONTILE
from engine.errors import ConfigError


def balance_compute_sets(
    programs: dict, names: Sequence[str], compute_tiles: int, model: str
) -> int:
    """Rewrite the tile layout of the OnTileExecute ``programs`` (the tile plan's program columns,
    replaced, not written in place) named in ``names`` to the balanced one (module docstring);
    returns how many programs changed. A name no compute set has is a ConfigError."""
    if not names:
        return 0
    name = np.asarray(programs["name"], dtype=object)
    is_cs = np.asarray(programs["type"]) == T_ONTILE
    wanted = np.asarray(names, dtype=object)
    known = np.isin(wanted, name[is_cs])
    if not known.all():
        bad = str(wanted[np.flatnonzero(~known)[0]])
        close = difflib.get_close_matches(bad, [str(n) for n in name[is_cs]], n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise ConfigError(
            f"balance_compute_sets: {bad!r} names no compute set of {model}{hint}; the names "
            "are the OnTileExecute programs of a profile of the same run."
        )
    rows = np.flatnonzero(is_cs & np.isin(name, wanted))
    count = np.asarray(programs["tile_count"], np.int64)[rows]
    n_max = np.minimum(np.asarray(programs["n_max"], np.int64)[rows], count)
    hi = np.asarray(programs["cycles"], np.int64)[rows]
    lo = np.asarray(programs["cycles_min"], np.int64)[rows]
    work = hi * n_max + lo * (count - n_max)
    q, r = np.divmod(work, compute_tiles)
    new = {
        "tile_start": 0,
        "tile_count": compute_tiles,
        "cycles": q + (r > 0),
        "n_max": np.where(r > 0, r, compute_tiles),
        "cycles_min": q,
    }
    for key, value in new.items():
        col = np.array(programs[key], copy=True)
        col[rows] = value
        programs[key] = col
    return int(rows.size)
