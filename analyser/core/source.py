"""Thin access layer between the analysis core and the profile reader.

Every read the analysis core makes goes through :class:`Source`, so that the rest of the core is
written against a handful of calls (attributes, small tables, small arrays, chunked step columns)
and never against the reader's internals. Step columns are only ever read in row chunks: the
1,000,000-row step table is never materialised whole by the core.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from profiles import schema
from profiles.errors import ProfileError

if TYPE_CHECKING:  # pandas is imported by the reader's table(), not by the exporters
    import pandas as pd

#: Rows of /execution/steps read per chunk when aggregating (about 50 MB for every column).
STEP_CHUNK_ROWS = 1 << 19


def _json(value: Any) -> Any:
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


_STEPS = "/execution/steps"
_STEP_COLUMNS = frozenset(c.name for c in schema.group(_STEPS).columns)


class Source:
    """Read-only view of one open profile for the analysis core."""

    def __init__(self, profile: Any, path: str | os.PathLike[str] | None = None) -> None:
        self.profile = profile
        self.path = Path(path if path is not None else getattr(profile, "path", "") or "")
        self._meta: dict[str, Any] | None = None
        self._exec: dict[str, Any] | None = None

    # -- metadata ---------------------------------------------------------------------------
    @property
    def meta(self) -> dict[str, Any]:
        """All /meta attributes, JSON ones decoded."""
        if self._meta is None:
            raw = dict(self.profile.meta)
            self._meta = {
                k: _json(v) if k in ("run_config", "target", "notes") else v for k, v in raw.items()
            }
        return self._meta

    @property
    def has_execution(self) -> bool:
        """Whether the profile has an execution."""
        return bool(self.profile.has_execution)

    @property
    def execution_attrs(self) -> dict[str, Any]:
        """The execution's totals (attributes of /execution); empty without execution."""
        if self._exec is None:
            self._exec = dict(self.profile.execution_totals()) if self.has_execution else {}
        return self._exec

    @property
    def root_attrs(self) -> dict[str, Any]:
        """The profile's root attributes."""
        return dict(getattr(self.profile, "root_attrs", {}))

    def has(self, group_path: str) -> bool:
        """Whether the profile has group or dataset ``group_path``."""
        return group_path in self.profile

    # -- tables and arrays --------------------------------------------------------------------
    def table(self, path: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The table at ``path`` (only ``columns``, when given) as a DataFrame."""
        return self.profile.table(path, columns=list(columns) if columns else None)

    def column(self, path: str, name: str) -> np.ndarray:
        """One column of a table, read straight into numpy (``table`` would import pandas:
        about 0.35 s that ``analyse summary`` does not otherwise need)."""
        g = schema.GROUPS_BY_PATH.get("/" + path.strip("/"))
        if g is None or not g.table or all(c.name != name for c in g.columns):
            return np.asarray(self.table(path, [name])[name].to_numpy())  # the reader's sentence
        n = self.n_rows(g.path)
        values = np.asarray(self.profile.array(f"{g.path}/{name}"))
        if values.shape[:1] != (n,):
            raise ProfileError(
                f"profile {self.path}: column {g.path}/{name} has {values.shape[0] if values.ndim else 0} "
                f"rows, the table has {n}."
            )
        return values

    def array(self, path: str) -> np.ndarray:
        """The dataset at ``path`` as a numpy array."""
        return np.asarray(self.profile.array(path))

    def n_rows(self, path: str) -> int:
        """Rows of the table or dataset at ``path``."""
        return int(self.profile.n_rows(path))

    # -- steps ------------------------------------------------------------------------------
    @property
    def n_steps(self) -> int:
        """The number of executed steps (0 without execution)."""
        return self.n_rows("/execution/steps") if self.has_execution else 0

    def ipu_offsets(self) -> np.ndarray:
        """The first step row of each IPU, and the total at the end."""
        return np.asarray(self.profile.ipu_offsets, dtype=np.int64)

    def iter_steps(
        self,
        columns: Sequence[str],
        *,
        start: int = 0,
        stop: int | None = None,
        chunk_rows: int = STEP_CHUNK_ROWS,
    ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """Yield ``(first_row, {column: array})`` over rows [start, stop) in chunks."""
        if not self.has_execution:
            return
        stop = self.n_steps if stop is None else stop
        unknown = [c for c in columns if c not in _STEP_COLUMNS]
        if unknown:  # the reader's sentence naming the table's columns
            self.profile.steps(rows=slice(0, 0), columns=list(columns))
        for lo in range(start, stop, chunk_rows):
            hi = min(stop, lo + chunk_rows)
            # each column read straight into numpy (a DataFrame would copy the chunk into
            # pandas blocks: about 10% of a whole-trace pass)
            out = {
                c: np.asarray(self.profile.array(f"{_STEPS}/{c}", slice(lo, hi))) for c in columns
            }
            for c, v in out.items():
                if len(v) != hi - lo:
                    raise ProfileError(
                        f"profile {self.path}: column {_STEPS}/{c} has fewer rows than the "
                        f"{self.n_steps} steps of the table."
                    )
            yield lo, out

    def close(self) -> None:
        """Close the profile."""
        close = getattr(self.profile, "close", None)
        if close is not None:
            close()


STEP_TYPES: tuple[str, ...] = schema.PROGRAM_TYPES
