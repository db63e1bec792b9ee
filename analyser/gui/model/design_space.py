"""What the Design space window shows, without Qt (the view only draws).

* :func:`trials_frame`: the trials table sweep tools have: one row per configuration tried,
  failed ones included (out of memory, refused by the engine), with its varied options, its
  figures and the engine's message; the window sorts and filters it.
* :func:`memory_needed`: when no configuration fits (or none has a throughput), the chart
  shows what each trial needed instead of an empty throughput chart: the memory of its fullest
  tile against the tile's memory.
* :func:`compare_note`: why "Compare with start" cannot compare (the selection is the start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

#: The figures shown in the trials table, in order (results.parquet columns).
FIGURES = (
    "throughput_samples_per_s",
    "max_tile_memory_bytes",
    "headroom_bytes",
    "peak_memory_bytes",
    "oom_tiles",
)


def trials_frame(table: Any) -> pd.DataFrame:
    """One row per configuration tried (``table``: a tune's ``TuneTable``): id, origin,
    status, tags (start / best / Pareto front), the varied options, the figures, rank and the
    engine's message; failed trials included, best first then in trial order."""
    df = table.frame
    meta = table.meta
    dims = [d for d in meta.get("dimensions", []) if d in df.columns]
    tags = np.full(len(df), "", dtype=object)
    ids = df["id"].to_numpy()
    pareto = df["pareto"].to_numpy(bool) if "pareto" in df else np.zeros(len(df), bool)
    for key, word in (("start_id", "start"), ("best_id", "best")):
        hit = ids == meta.get(key)
        tags[hit] = [f"{t}, {word}" if t else word for t in tags[hit]]
    tags[pareto] = [f"{t}, front" if t else "front" for t in tags[pareto]]
    out = pd.DataFrame({"id": ids, "origin": df.get("origin", ""), "status": df["status"]})
    out["tags"] = tags
    for d in dims:
        out[d] = df[d].astype(str).to_numpy()
    for k in FIGURES:
        if k in df:
            out[k] = df[k].to_numpy()
    if "rank" in df:
        out["rank"] = df["rank"].to_numpy()
    out["message"] = df["message"].fillna("").astype(str).to_numpy()
    return out.reset_index(drop=True)


def trial_columns(frame: pd.DataFrame, units: Any) -> list[tuple[str, str, Any]]:
    """``(key, title, formatter)`` of the trials table's columns (bytes in ``units``)."""
    from analyser.core.units import fmt_bytes, fmt_count, fmt_int

    def num(v: Any) -> str:
        return "" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:,.1f}"

    def by(fmt):
        def cell(v: Any) -> str:
            if v is None or (isinstance(v, float) and not np.isfinite(v)):
                return ""
            return fmt(v)

        return cell

    known = {
        "id": ("#", by(fmt_int)),
        "origin": ("Origin", None),
        "status": ("Status", None),
        "tags": ("Role", None),
        "throughput_samples_per_s": ("Samples/s", num),
        "max_tile_memory_bytes": ("Fullest tile", by(lambda v: fmt_bytes(v, units))),
        "headroom_bytes": ("Headroom", by(lambda v: fmt_bytes(v, units))),
        "peak_memory_bytes": ("Peak memory", by(lambda v: fmt_bytes(v, units))),
        "oom_tiles": ("OOM tiles", by(fmt_count)),
        "rank": ("Rank", by(fmt_int)),
        "message": ("Message", None),
    }
    return [(k, *known.get(k, (k, None))) for k in frame.columns]


@dataclass(frozen=True)
class MemoryNeeded:
    """The chart of a tune where nothing has a throughput: per trial (``ids``, in trial
    order) the bytes of its fullest tile (NaN for a trial refused before compiling), whether
    it ran out of memory, and the tile's memory."""

    ids: np.ndarray
    tile_bytes: np.ndarray
    oom: np.ndarray
    sram_bytes: float
    refused: int


def memory_needed(table: Any) -> MemoryNeeded | None:
    """What each trial needed, when no trial has a throughput to plot (nothing fits, or every
    run was refused); None when some trial has one."""
    df = table.frame
    thr = pd.to_numeric(df.get("throughput_samples_per_s"), errors="coerce").to_numpy(float)
    if np.isfinite(thr).any():
        return None
    tile = pd.to_numeric(df["max_tile_memory_bytes"], errors="coerce").to_numpy(float)
    head = pd.to_numeric(df["headroom_bytes"], errors="coerce").to_numpy(float)
    sram = tile + head
    sram = float(sram[np.isfinite(sram)][0]) if np.isfinite(sram).any() else float("nan")
    status = df["status"].astype(str).to_numpy()
    return MemoryNeeded(
        ids=df["id"].to_numpy(int),
        tile_bytes=tile,
        oom=status == "oom",
        sram_bytes=sram,
        refused=int((~np.isfinite(tile)).sum()),
    )


def compare_note(table: Any, row_id: int | None) -> str:
    """Why "Compare with start" does not compare the selection ('' when it can)."""
    meta = table.meta
    if row_id is None or row_id != meta.get("start_id"):
        return ""
    if row_id == meta.get("best_id"):
        return (
            "The best configuration is the start itself: no configuration tried beat it, "
            "so there is nothing to compare."
        )
    return "This is the start configuration: select another to compare with it."
