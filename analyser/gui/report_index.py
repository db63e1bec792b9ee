"""The index of the reports in the main window's side list, in display order, without their code.

The window needs a report's name, key and what it reads (its data needs, the datasets it
requires, its compare-mode cost) as soon as it is built and a profile opens: the side list,
the loader's and the background warm-up's work, the "unavailable" marks. It needs the report's
code (its module, its widgets, pyqtgraph plots and the libraries behind them) only when the
report is first shown or built in the window's idle time. Importing every report module when
the window was built, with pandas behind them, cost about 0.4 s of CPU before the Summary was
painted (docs/performance.md, "the GUI opens a 10M-step profile without the other reports");
here each entry names its class as ``"module:ClassName"`` and :meth:`ReportEntry.load` imports
it on first use.

The entries repeat the class attributes of :class:`analyser.gui.reports.base.Report` they
stand for; tests/test_gui_report_index.py imports every listed class and checks that each
entry agrees with it, so the two cannot drift apart unnoticed.

To add a report: write the ``Report`` subclass, then add its entry below
(:mod:`analyser.gui.reports` takes its list of specs from here).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

from analyser.viewmodels import datasets


class ReportUnavailable(Exception):
    """A listed report whose module or class cannot be imported: one sentence, shown in a
    message box by the window (a bug in the build, never a report left out silently)."""


@dataclass(frozen=True)
class ReportEntry:
    """One report of the side list: ``spec`` is ``"module:ClassName"``; the other fields are
    the class attributes of the same names."""

    spec: str
    key: str
    title: str
    data_needs: tuple[str, ...]
    requires: tuple[str, ...] = ()
    compare_cost: int = 0
    needs_execution: bool = False
    #: ``"module:function"`` of the class's ``view_builder`` (None: the report has none)
    view_builder: str | None = None
    default_view_options: tuple[Any, ...] = ()

    @property
    def module(self) -> str:
        return self.spec.partition(":")[0]

    def view_request(self, doc: Any, other: Any, units: Any) -> Any:
        """The warm-up's request for the report's view-model of the open documents (its
        builder's module, Qt-free, imported here: the window calls this on the warm-up's
        thread, after the shown report's first paint); None when the report has none."""
        if self.view_builder is None:
            return None
        from analyser.gui.model.views import ViewRequest

        module, _, attr = self.view_builder.partition(":")
        builder = getattr(importlib.import_module(module), attr)
        return ViewRequest(builder, doc, other, units, self.default_view_options)

    def load(self) -> type[Any]:
        """The report class (its module imported on the first call). Raises
        :class:`ReportUnavailable` naming the report when its module or class is missing;
        any other error inside the module is a bug and propagates unchanged."""
        module, _, attr = self.spec.partition(":")
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            raise ReportUnavailable(
                f"The {self.title} report cannot be shown: its module {module} is missing "
                "from this installation."
            )
        cls = getattr(importlib.import_module(module), attr, None)
        if cls is None:
            raise ReportUnavailable(
                f"The {self.title} report cannot be shown: its module {module} has no {attr}."
            )
        return cls


REPORTS: tuple[ReportEntry, ...] = (
    ReportEntry(
        "analyser.gui.reports.summary:SummaryReport",
        "summary",
        "Summary",
        ("target", "metrics", "execution", "imbalance"),
        compare_cost=1,
        view_builder="analyser.gui.model.summary_view:build_summary_view",
    ),
    ReportEntry(
        "analyser.gui.reports.insights:InsightsReport",
        "insights",
        "Insights",
        ("target", "memory", "insights", "largest_vertices", "largest_always_live"),
        compare_cost=1,
        view_builder="analyser.gui.model.insights_view:build_insights_view",
        default_view_options=(0, 0),
    ),
    ReportEntry(
        "analyser.gui.reports.memory:MemoryReport",
        "memory",
        "Memory Report",
        ("target", "memory", "tile_breakdowns"),
        requires=datasets.MEMORY,
        compare_cost=3,
        view_builder="analyser.gui.model.memory_view:build_memory_view",
        default_view_options=(0, "category", False, False),
    ),
    ReportEntry(
        "analyser.gui.reports.liveness:LivenessReport",
        "liveness",
        "Liveness Report",
        ("target", "liveness", "liveness_steps", "variables", "operation_names"),
        requires=datasets.LIVENESS + datasets.VARIABLES,
        compare_cost=1,
        view_builder="analyser.gui.model.liveness_view:build_liveness_view",
    ),
    ReportEntry(
        "analyser.gui.reports.program_tree:ProgramTreeReport",
        "program_tree",
        "Program Tree",
        ("target", "program_nodes", "execution", "program_match_keys", "operation_names"),
        view_builder="analyser.gui.model.program_tree_view:build_program_tree_view",
    ),
    ReportEntry(
        "analyser.gui.reports.operations:OperationsReport",
        "operations",
        "Operations",
        ("target", "operations", "variables", "compute_sets", "program_nodes"),
        view_builder="analyser.gui.model.operations_view:build_operations_view",
        default_view_options=("operations",),
    ),
    ReportEntry(
        "analyser.gui.reports.trace:TraceReport",
        "trace",
        "Execution Trace",
        ("target", "execution", "trace_window"),
        compare_cost=5,
        needs_execution=True,
        view_builder="analyser.gui.model.trace_view:build_trace_view",
    ),
    ReportEntry(
        "analyser.gui.reports.pipeline:PipelineReport",
        "pipeline",
        "Pipeline",
        ("target", "execution", "trace_window", "pipeline_chart"),
        compare_cost=4,
        needs_execution=True,
        view_builder="analyser.gui.model.pipeline_view:build_pipeline_view",
    ),
    ReportEntry(
        "analyser.gui.reports.roofline:RooflineReport",
        "roofline",
        "Roofline",
        ("target", "roofline"),
        compare_cost=1,
        needs_execution=True,
        view_builder="analyser.gui.model.roofline_view:build_roofline_view",
    ),
    ReportEntry(
        "analyser.gui.reports.query:QueryReport",
        "query",
        "Query",
        ("target",),
        view_builder="analyser.gui.model.query_view:build_query_view",
    ),
)

#: The fields an entry repeats from its class (the test compares them).
CLASS_FIELDS = (
    "key",
    "title",
    "data_needs",
    "requires",
    "compare_cost",
    "needs_execution",
    "default_view_options",
)
