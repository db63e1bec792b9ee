"""The Execution Trace's and the Pipeline's way to the trace query engine: what the views
use of :mod:`analyser.trace.window` and :mod:`analyser.trace.bsp`, named once here so that
``analyser.gui.reports`` reaches the analysis core only through ``analyser.gui.model`` (an
import contract). No Qt."""

from __future__ import annotations

from analyser.trace.bsp import (
    BSP_STATES,
    TYPES_OF_STATE,
    BspStates,
    blend,
    bsp_states,
    dominant,
)
from analyser.trace.window import (
    GROUP_MODES,
    HOST_EVENTS,
    HOST_LANES,
    STATISTICS_BY,
    STEP_TYPES,
    ColumnTable,
    Flows,
    RangeStatistics,
    RangeSummary,
    SearchResult,
    TraceWindow,
    WindowResult,
)

__all__ = [
    "BSP_STATES",
    "GROUP_MODES",
    "HOST_EVENTS",
    "HOST_LANES",
    "STATISTICS_BY",
    "STEP_TYPES",
    "TYPES_OF_STATE",
    "BspStates",
    "ColumnTable",
    "Flows",
    "RangeStatistics",
    "RangeSummary",
    "SearchResult",
    "TraceWindow",
    "WindowResult",
    "blend",
    "bsp_states",
    "dominant",
]
