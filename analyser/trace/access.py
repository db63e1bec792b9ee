"""Reads of the executed steps for the trace query engine: row ranges per IPU, column reads
and an LRU cache of aligned row blocks (the drawing cache), over the profile reader an
:class:`analyser.core.Analysis` opened. Thread-safe (one lock around the reader)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.trace.results import ColumnTable, TraceError

if TYPE_CHECKING:
    import pandas as pd

#: Rows read per chunk when streaming the step table (pyramid build, search, summary).
CHUNK_ROWS = 1 << 18
#: Rows per block of the drawing cache, and blocks kept (about 40 MB at most).
CACHE_BLOCK_ROWS = 1 << 16
CACHE_BLOCKS = 96


class StepAccess:
    """The few reads the trace makes, over :func:`profiles.open_profile`'s ``Profile``.

    Rows are global row numbers of ``/execution/steps``; IPU ``i`` owns rows
    ``[ipu_offsets[i], ipu_offsets[i + 1])``, sorted by start cycle.
    """

    def __init__(self, profile: Any) -> None:
        self.profile = profile
        if not bool(getattr(profile, "has_execution", False)):
            raise TraceError(
                "This profile has no execution trace (the program did not fit or did not run)."
            )
        self.ipu_offsets = np.asarray(profile.array("/execution/ipu_offsets"), dtype=np.int64)
        self.n_ipus = len(self.ipu_offsets) - 1
        self._lock = threading.RLock()
        self._cache: dict[tuple[str, int], np.ndarray] = {}

    def ipu_rows(self, ipu: int) -> tuple[int, int]:
        if not 0 <= ipu < self.n_ipus:
            raise TraceError(f"IPU {ipu} does not exist; this profile has {self.n_ipus} IPUs.")
        return int(self.ipu_offsets[ipu]), int(self.ipu_offsets[ipu + 1])

    def read(self, lo: int, hi: int, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Columns of global rows ``[lo, hi)`` as numpy arrays."""
        with self._lock:
            return {
                c: np.asarray(self.profile.array(f"/execution/steps/{c}", slice(lo, hi)))
                for c in columns
            }

    def is_cached(self, column: str, row: int) -> bool:
        """True when the drawing cache holds the block of ``row`` of ``column``."""
        with self._lock:
            return (column, row // CACHE_BLOCK_ROWS) in self._cache

    def read_cached(self, lo: int, hi: int, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
        """Like :meth:`read`, through an LRU cache of aligned row blocks (the rows a pan or
        zoom touches again are not decompressed again)."""
        if hi <= lo:
            return self.read(lo, lo, columns)
        b0, b1 = lo // CACHE_BLOCK_ROWS, (hi - 1) // CACHE_BLOCK_ROWS
        out: dict[str, list[np.ndarray]] = {c: [] for c in columns}
        for b in range(b0, b1 + 1):
            a = b * CACHE_BLOCK_ROWS
            for c in columns:
                key = (c, b)
                with self._lock:
                    block = self._cache.pop(key, None)
                    if block is None:
                        block = self.read(a, a + CACHE_BLOCK_ROWS, (c,))[c]
                    self._cache[key] = block  # most recently used last
                    while len(self._cache) > CACHE_BLOCKS:
                        self._cache.pop(next(iter(self._cache)))
                s0 = max(lo, a) - a
                s1 = min(hi, a + CACHE_BLOCK_ROWS) - a
                out[c].append(block[s0:s1])
        return {c: v[0] if len(v) == 1 else np.concatenate(v) for c, v in out.items()}

    def chunks(
        self, lo: int, hi: int, columns: tuple[str, ...], chunk: int = CHUNK_ROWS
    ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        for a in range(lo, hi, chunk):
            yield a, self.read(a, min(hi, a + chunk), columns)

    def table(self, path: str, columns: list[str]) -> pd.DataFrame:
        with self._lock:
            return self.profile.table(path, columns=columns)

    def columns(self, path: str, columns: list[str]) -> ColumnTable:
        """Whole columns of the table at ``path`` as numpy arrays (strings as Python str, as
        :meth:`table` reads them), without building a DataFrame."""
        with self._lock:
            data = {c: np.asarray(self.profile.array(f"{path}/{c}")) for c in columns}
        lengths = {c: len(v) for c, v in data.items()}
        if len(set(lengths.values())) > 1:
            raise TraceError(
                f"The profile's table {path} is damaged: its columns have different lengths "
                f"({', '.join(f'{c} {n:,}' for c, n in lengths.items())})."
            )
        return ColumnTable(data)

    def tile_cycles(self, program_ids: np.ndarray) -> np.ndarray:
        with self._lock:
            return np.asarray(self.profile.tile_cycles(np.asarray(program_ids, dtype=np.int64)))
