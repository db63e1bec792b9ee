"""The analysis core: the single source of numbers for the CLI, the reports and the GUI.

No Qt. Everything is a plain dataclass, a numpy array or a pandas DataFrame::

    from analyser.core import Analysis
    with Analysis.open("profile.h5") as a:
        a.target, a.memory, a.liveness, a.execution, a.operations, a.metrics

    from analyser.core.insights import find_insights
    find_insights(a, resimulate=True)

    from analyser.core import compare
    cmp = compare([Analysis.open("a.h5"), Analysis.open("b.h5")])

See docs/analysis.md.
"""

from __future__ import annotations

from analyser.core.analysis import Analysis, IpuMetrics, Metrics, TargetSummary
from analyser.core.execution import ExecutionSummary
from analyser.core.liveness import LivenessSummary
from analyser.core.memory import MemorySummary, TileMemory

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
    # comparisons and insights are imported on first use (keeps `import analyser.core` light)
    if name in ("compare", "compare_pair", "Comparison", "PairComparison"):
        from analyser.core import comparison as _c

        return getattr(_c, name)
    if name in ("find_insights", "Thresholds", "Insight"):
        from analyser.core import insights as _i

        return getattr(_i, name)
    raise AttributeError(name)
