"""The Memory Report's view-model (the Variables tab's table) and its way to the analysis core:
the memory insights and the modelled tile layout (the per-tile details are
:mod:`analyser.gui.model.tile_details`), named
once here so that ``analyser.gui.reports`` reaches the core only through
``analyser.gui.model`` (an import contract, issue 24 item 3). No Qt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from analyser.core.memory_insights import EXCHANGE_CODE, MemoryInsights
from analyser.core.memory_layout import TileLayout
from analyser.core.units import fmt_bytes
from analyser.gui.model import data
from analyser.gui.model.labels import nice_name

__all__ = [
    "EXCHANGE_CODE",
    "MemoryInsights",
    "TileLayout",
    "detail_columns",
    "variables_table",
]


def variables_table(
    docs: Sequence[tuple[str, Any, Sequence[int]]], compare: bool
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The Variables tab: for each (tag, document, shown IPUs) the variables on those IPUs,
    largest first (a ``profile`` column when comparing); returns (the table of all, the first
    profile's, which the chart of the largest draws)."""
    frames = []
    for tag, doc, ipus in docs:
        v = data.variables(doc)
        v = v[np.isin(v["ipu"].to_numpy(), np.asarray(ipus, dtype=np.int64))]
        v = v.sort_values("bytes", ascending=False)
        frames.append(v.assign(profile=tag) if compare else v)
    frame = pd.concat(frames).reset_index(drop=True) if frames else pd.DataFrame()
    return frame, frames[0] if frames else pd.DataFrame()


#: Detail columns that hold bytes (the selected tiles' tables).
BYTE_COLUMNS = frozenset(
    ("total", "gaps", "bytes", "bytes_on_selection", "code_bytes", "state_bytes_on_selection")
)


def detail_columns(frame: pd.DataFrame, units: Any, class_names: set[str]) -> list:
    """``(key, title, formatter)`` of a selected-tiles table (``frame``): profile, IPU, tile and
    name first; bytes (and memory classes' and per-tile columns) in ``units``."""

    def b(v: Any) -> str:
        return fmt_bytes(v, units)

    first = [
        c for c in ("profile", "ipu", "tile", "name", "vertex_type", "type") if c in frame.columns
    ]
    cols = []
    for c in first + [c for c in frame.columns if c not in first]:
        if c == "program":
            continue
        text = str(c)
        label = {"ipu": "IPU", "share_of_sram": "Share of tile memory"}.get(
            c,
            nice_name(text) if "_" not in text else text.replace("_", " ").capitalize(),
        )
        if c in BYTE_COLUMNS or (
            c not in ("tile", "ipu") and frame[c].dtype.kind in "iu" and c in class_names
        ):
            fmt = b
        elif c == "share_of_sram":
            fmt = lambda v: f"{100 * v:.1f}%"  # noqa: E731
        elif text.startswith("tile "):
            fmt = b
        else:
            fmt = None
        cols.append((c, label, fmt))
    return cols
