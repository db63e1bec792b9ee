"""Liveness: not-always-live memory over program steps, the peak step and what is live there."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analyser.core.memory import variables_table
from analyser.core.source import Source


@dataclass
class LivenessSummary:
    """Liveness curve per IPU ([ipus, steps] bytes) with its peak."""

    not_always_live: np.ndarray = field(repr=False)
    always_live: np.ndarray
    peak_step: np.ndarray
    step_names: list[str] = field(repr=False)

    @property
    def n_steps(self) -> int:
        return int(self.not_always_live.shape[1])

    @property
    def peak_bytes(self) -> np.ndarray:
        """[ipus] always-live + peak not-always-live (ipu-facts.md "peak liveness")."""
        if self.n_steps == 0:
            return self.always_live.copy()
        return self.always_live + self.not_always_live.max(axis=1)

    def curve(self, ipu: int, *, include_always_live: bool = False) -> np.ndarray:
        c = self.not_always_live[ipu]
        return c + self.always_live[ipu] if include_always_live else c


def summarise_liveness(src: Source) -> LivenessSummary:
    nal = src.array("/liveness/not_always_live").astype(np.int64)
    al = src.array("/liveness/always_live").astype(np.int64)
    peak = src.array("/liveness/peak_step").astype(np.int64)
    names = [str(x) for x in src.column("/liveness/steps", "name")] if nal.shape[1] else []
    return LivenessSummary(nal, al, peak, names)


def live_variables(
    src: Source, step: int, ipu: int | None = None, *, include_always_live: bool = False
) -> pd.DataFrame:
    """Variables live at liveness step ``step`` (on ``ipu``), largest first."""
    df = variables_table(src)
    live = (df["live_start"] <= step) & (df["live_end"] >= step) & ~df["always_live"]
    if include_always_live:
        live |= df["always_live"]
    if ipu is not None:
        live &= df["ipu"] == ipu
    return df[live].sort_values("bytes", ascending=False)
