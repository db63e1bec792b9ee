"""The trace query engine's names and results: step types and groupings, the
:class:`TraceError` it raises, and the dataclasses its queries return (window rectangles, range
summary and statistics, search hits, flows, overview). No Qt, no reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from profiles import schema
from profiles.errors import UserFacingError

if TYPE_CHECKING:
    import pandas as pd

STEP_TYPES: tuple[str, ...] = schema.PROGRAM_TYPES
#: The host timeline's lanes and event kinds (``/execution/host``), in the profile's code order.
HOST_LANES: tuple[str, ...] = schema.HOST_LANES
HOST_EVENTS: tuple[str, ...] = schema.HOST_EVENTS
DESTINATIONS: tuple[str, ...] = schema.DESTINATIONS
PHASES: tuple[str, ...] = schema.PHASES
NT = len(STEP_TYPES)

#: Step types in which an IPU waits (the overview's idle time).
_WAIT_TYPES = np.array([STEP_TYPES.index("Sync"), STEP_TYPES.index("SyncAns")])

#: Grouping modes of the trace: one lane per IPU, or lanes inside each IPU.
GROUP_MODES: tuple[str, ...] = ("flat", "stage", "operation", "program")


#: Groupings of the range statistics (Perfetto's area selection): by step (program) name, or by
#: the operation the step belongs to.
STATISTICS_BY: tuple[str, ...] = ("name", "operation")


class ColumnTable:
    """A table as numpy columns of one length (the trace's programs, the host lanes' events):
    what the trace reads and draws needs no pandas, whose import (about half a second of CPU)
    the Execution Trace's first paint paid for a DataFrame it only indexed.
    ``table["name"]`` is the column's array; :meth:`row` one row as a dict; :meth:`take` the
    rows a mask or index array selects; :meth:`to_frame` a pandas DataFrame (for a caller that
    joins or groups, which then imports pandas)."""

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")
        self._columns = dict(columns)
        self._n = lengths.pop() if lengths else 0

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> np.ndarray:
        return self._columns[name]

    def __setitem__(self, name: str, values: np.ndarray) -> None:
        values = np.asarray(values)
        if len(values) != self._n and self._columns:
            raise ValueError(f"a column of {len(values)} rows for a table of {self._n}")
        self._columns[name] = values
        self._n = len(values)

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    @property
    def empty(self) -> bool:
        return self._n == 0

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` (a position) as ``{column: value}``."""
        if not -self._n <= i < self._n:
            raise IndexError(f"row {i} of a table of {self._n} rows")
        return {k: v[i] for k, v in self._columns.items()}

    def take(self, rows: np.ndarray) -> ColumnTable:
        """The rows a boolean mask or an index array selects, in that order."""
        return ColumnTable({k: v[rows] for k, v in self._columns.items()})

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._columns)


class TraceError(UserFacingError):
    """The trace cannot be shown (no execution in the profile, bad IPU or window)."""


def _index_or_none(value: int, what: str) -> int | str:
    """A micro-batch or stage index; the profile's -1 (a step outside any) said in words."""
    return value if value >= 0 else f"none (outside {what})"


class _Span:
    """A range of cycles ``[t0, t1)`` that knows its length (the range results share it)."""

    t0: float  # declared by each dataclass that shares this
    t1: float

    @property
    def span(self) -> float:
        """Cycles in the range (``t1 - t0``)."""
        return self.t1 - self.t0


@dataclass
class TypeRects:
    """Rectangles of one step type, in data coordinates (x in cycles, y = lane index)."""

    type: str
    x0: np.ndarray  # float64 start cycle
    x1: np.ndarray  # float64 end cycle (widened to at least one pixel)
    lane: np.ndarray  # int32 lane index
    count: np.ndarray  # int64 steps the rectangle stands for
    row: np.ndarray  # int64 global row of the first step (the step itself when count == 1)
    #: with ``stripes``: the part of its lane's height the rectangle takes (fractions, bottom
    #: to top: its type's share of the pixel's busy cycles); None: the whole lane
    y0: np.ndarray | None = None
    y1: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.x0)


@dataclass
class WindowResult:
    """The rectangles of one IPU's window, per step type (:meth:`TraceWindow.window`)."""

    ipu: int
    t0: float
    t1: float
    width_px: int
    group: str
    lanes: tuple[str, ...]
    rects: dict[str, TypeRects]
    #: "rows" when read from the step rows, "level k (bucket N cycles)" when from the pyramid.
    source: str
    #: Steps represented by the rectangles.
    n_steps: int = 0

    @property
    def n_rects(self) -> int:
        return sum(len(r) for r in self.rects.values())


@dataclass
class RangeSummary(_Span):
    """What the visible range holds (steps overlapping [t0, t1), cycles clipped to it)."""

    ipu: int
    t0: int
    t1: int
    n_steps: int
    cycles_by_type: dict[str, int]
    steps_by_type: dict[str, int]
    #: Cycle-weighted mean tile balance of the compute (OnTileExecute) steps, clipped cycles as
    #: weights (the analysis core's definition, over the window).
    tile_balance: float
    #: StreamCopy bytes: {"received": {dest: bytes}, "sent": {dest: bytes}}.
    streamcopy: dict[str, dict[str, int]]
    busy_cycles: int


@dataclass
class SearchResult:
    """Steps whose program or operation name contains ``text`` (:meth:`TraceWindow.search`)."""

    text: str
    #: Global rows of the matching steps (first ``limit``), in row order (IPU, then start).
    rows: np.ndarray
    ipu: np.ndarray
    start: np.ndarray
    cycles: np.ndarray
    program: np.ndarray
    total: int
    #: Names of the matching programs, by program id.
    names: dict[int, str] = field(default_factory=dict)


@dataclass
class RangeStatistics(_Span):
    """Steps overlapping ``[t0, t1)`` on ``ipus``, aggregated by step name or by operation.

    ``table`` has one row per name (or operation), most cycles first, with the columns ``name``,
    ``type`` (the step type of its programs; "mixed" when they differ), ``steps`` (how many
    overlap the range), ``total_cycles``, ``mean_cycles`` and ``max_cycles`` (cycles clipped to
    the range) and ``share``: total cycles / (range cycles x IPUs), the part of the range's
    IPU time the row takes (steps of one IPU do not overlap, so the shares add up to the busy
    share of the range)."""

    t0: float
    t1: float
    ipus: tuple[int, ...]
    by: str
    table: pd.DataFrame
    n_steps: int
    busy_cycles: float


@dataclass
class Flows:
    """Arrows between IPUs (Perfetto's flows) of a window: ``kind[i]`` is "exchange" (a
    GlobalExchange sending to another IPU, to the exchange step receiving it, which starts while
    the send runs: from the send's start to the receive's end) or "sync" (an external sync:
    from the IPU that arrived last, at its arrival, to every other IPU's sync at the release).
    ``too_many`` when the window held more steps than a flow query reads (none computed)."""

    kind: np.ndarray  # object: "exchange" | "sync"
    src_ipu: np.ndarray
    src_row: np.ndarray
    x0: np.ndarray  # cycle at the source
    dst_ipu: np.ndarray
    dst_row: np.ndarray
    x1: np.ndarray  # cycle at the destination
    too_many: bool = False

    def __len__(self) -> int:
        return len(self.kind)


def _no_flows(too_many: bool = False) -> Flows:
    e = np.empty(0, dtype=np.int64)
    f = np.empty(0, dtype=np.float64)
    return Flows(np.empty(0, dtype=object), e, e, f, e, e, f, too_many)


@dataclass
class Overview:
    """Active share of each IPU in ``buckets`` equal time buckets of ``[t0, t1)``:
    ``busy[ipu, bucket]`` in 0..1, the share of the bucket's cycles in steps that compute or
    move data (every type but Sync / SyncAns, which wait), steps spread evenly over the cycles
    they cover."""

    t0: float
    t1: float
    busy: np.ndarray
