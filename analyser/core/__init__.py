"""The analysis core: the single source of numbers for the CLI, the reports and the GUI.

No Qt. Everything is a plain dataclass, a numpy array or a pandas DataFrame::

    from analyser.core import Analysis
    with Analysis.open("profile.h5") as a:
        a.target, a.memory, a.liveness, a.execution, a.operations, a.metrics

    from analyser.core.insights import find_insights
    find_insights(a, simulator=InProcessSimulator())  # analyser.sim

    from analyser.core import compare
    cmp = compare([Analysis.open("a.h5"), Analysis.open("b.h5")])

See docs/analysis.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analyser.core.analysis import Analysis, IpuMetrics, Metrics, TargetSummary
    from analyser.core.execution import ExecutionSummary
    from analyser.core.liveness import LivenessSummary
    from analyser.core.memory import MemorySummary, TileMemory

# Every name is imported on first use, so `import analyser.core.source` (the trace exporter)
# does not import pandas through analyser.core.analysis (0.3 s of a 1M-step export).
_LAZY = {
    "Analysis": "analysis",
    "IpuMetrics": "analysis",
    "Metrics": "analysis",
    "TargetSummary": "analysis",
    "ExecutionSummary": "execution",
    "LivenessSummary": "liveness",
    "MemorySummary": "memory",
    "TileMemory": "memory",
    "compare": "comparison",
    "compare_pair": "comparison",
    "Comparison": "comparison",
    "PairComparison": "comparison",
    "find_insights": "insights",
    "Thresholds": "insights",
    "Insight": "insights",
}

__all__ = [
    "Analysis",
    "ExecutionSummary",
    "IpuMetrics",
    "LivenessSummary",
    "MemorySummary",
    "Metrics",
    "TargetSummary",
    "TileMemory",
]


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(f"analyser.core.{mod}"), name)
