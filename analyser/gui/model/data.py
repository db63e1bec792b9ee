"""Where the GUI gets its numbers: :mod:`analyser.core`, cached per document. No Qt.

Every figure a report shows comes through here from the analysis core (``doc.analysis`` is an
:class:`analyser.core.Analysis`); widgets only format and draw. Results are cached per document
(thread-safe), so the loader thread can compute what the first report needs before it is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.gui.model.document import Document
from analyser.viewmodels import profile_reads as reads

if TYPE_CHECKING:
    import pandas as pd

    from analyser.core.analysis import Metrics, TargetSummary
    from analyser.core.comparison import PairComparison
    from analyser.core.execution import ExecutionSummary
    from analyser.core.imbalance import ImbalanceSummary
    from analyser.core.liveness import LivenessSummary, StepAlignment
    from analyser.core.memory import MemorySummary
    from analyser.core.memory_insights import MemoryInsights
    from analyser.core.memory_layout import TileLayout
    from analyser.core.roofline import Roofline
    from analyser.gui.model.pipeline import PipelineChart
    from analyser.trace.window import TraceWindow


def target(doc: Document) -> TargetSummary:
    return doc.cached("target", lambda: doc.analysis.target)


def memory(doc: Document) -> MemorySummary:
    return doc.cached("memory", lambda: doc.analysis.memory)


def liveness(doc: Document) -> LivenessSummary:
    return doc.cached("liveness", lambda: doc.analysis.liveness)


def execution(doc: Document) -> ExecutionSummary | None:
    """ExecutionSummary, or None for a profile without execution (OOM)."""
    return doc.cached("execution", lambda: doc.analysis.execution)


def operations(doc: Document) -> pd.DataFrame:
    return doc.cached("operations", lambda: doc.analysis.operations)


def variables(doc: Document) -> pd.DataFrame:
    return doc.cached("variables", lambda: doc.analysis.variables)


def listed_variables(doc: Document) -> pd.DataFrame:
    """The variables for a list that does not say when they are live (Analysis.listed_variables)."""
    return doc.cached("listed_variables", lambda: doc.analysis.listed_variables)


def tile_layout(doc: Document, ipu: int, tile: int) -> TileLayout:
    """The modelled address layout of one tile (``analyser.core.memory_layout.TileLayout``)."""
    from analyser.core.memory_layout import tile_layout as layout

    return doc.cached(f"tile-layout:{ipu}:{tile}", lambda: layout(doc.analysis, ipu, tile))


def memory_insights(doc: Document) -> MemoryInsights:
    """Vertex state and exchange code by model, IPU and tile, the largest vertex types and
    exchanges (``analyser.core.memory_insights.MemoryInsights``)."""
    from analyser.core.memory_insights import memory_insights as insights

    return doc.cached("memory-insights", lambda: insights(doc.analysis))


def metrics(doc: Document) -> Metrics:
    return doc.cached("metrics", lambda: doc.analysis.metrics)


def run_config(doc: Document) -> dict:
    return doc.analysis.run_config


def run_config_note(doc: Document) -> str:
    """One sentence on the stored options this analyser did not read ('' when none)."""
    return doc.analysis.stored_run_config.note


def target_config(doc: Document) -> dict:
    return doc.analysis.target_config


def profile_warnings(doc: Document) -> list[str]:
    """Sentences on what in the profile the reports cannot show although it opens (per-tile
    cycles below zero, which ``analyse validate`` flags and the reader refuses); [] for a
    sound profile."""

    def compute() -> list[str]:
        problem = reads.tile_cycles_problem(doc.analysis)
        if not problem:
            return []
        return [f"Warning: {problem.rstrip('.')}; per-tile cycles cannot be shown."]

    return doc.cached("profile_warnings", compute)


def insights(doc: Document) -> list:
    """Insights of the profile (without re-simulation; predicted effects come from what-if)."""
    # imported here: the insight rules (and the engine's configuration models they use) cost
    # ~0.2 s of CPU to import, which a window opening on the Summary does not need
    from analyser.core.insights import find_insights

    return doc.cached("insights", lambda: find_insights(doc.analysis))


def rerank_insights(doc: Document) -> list:
    """Re-order the document's cached insights with the analysis core's ``rank_insights`` (after
    predicted effects were added: a tip re-simulated as slower or out of memory moves down, one
    with a large predicted saving moves up); returns the (same, cached) list."""
    from analyser.core.insights import rank_insights

    tips = insights(doc)
    tips[:] = rank_insights(doc.analysis, list(tips))
    return tips


def tile_breakdown(doc: Document, ipu: int, by: str) -> tuple[np.ndarray, tuple]:
    """[tiles, k] bytes of one IPU by ``category`` / ``region`` / ``liveness`` and the k names."""
    return doc.cached(f"tiles:{ipu}:{by}", lambda: doc.analysis.tile_breakdown(ipu, by))


def tile_breakdowns(doc: Document, by: str = "category") -> list[tuple[np.ndarray, tuple]]:
    """:func:`tile_breakdown` of every IPU (the Memory Report's chart as it opens: by
    category), so the background warm-up reads them instead of the report's first paint."""
    return [tile_breakdown(doc, ipu, by) for ipu in range(target(doc).num_ipus)]


def comparison(doc: Document, other: Document) -> PairComparison:
    """The analysis core's explained comparison (``PairComparison``) of ``doc`` (A) with
    ``other`` (B): run-option differences, metric deltas and the explanations linking them."""
    from analyser.core.comparison import compare_pair

    return doc.cached(
        f"compare:{other.path}:{id(other)}",
        lambda: compare_pair(doc.analysis, other.analysis),
    )


def largest_vertices(doc: Document, n: int = 5) -> pd.DataFrame:
    return doc.cached(f"largest_vertices:{n}", lambda: doc.analysis.largest_vertices(n))


def largest_always_live(doc: Document, n: int = 5) -> pd.DataFrame:
    return doc.cached(
        f"largest_always_live:{n}", lambda: doc.analysis.largest_variables(n, always_live=True)
    )


def live_variables(
    doc: Document, step: int, ipu: int, include_always_live: bool = False
) -> pd.DataFrame:
    """Variables live at liveness step ``step`` on ``ipu``, from the document's cached variables
    table (``analyser.core.liveness.live_in``: no read of /graph/variables per click)."""
    from analyser.core.liveness import live_in

    return live_in(variables(doc), step, ipu, include_always_live=include_always_live)


def target_line(doc: Document) -> str:
    """One line for the status bar: target, IPUs, tiles, status."""
    t = target(doc)
    arch = t.target_name or t.architecture or "IPU"
    status = "fits" if t.status == "ok" else "OUT OF MEMORY" if t.status == "oom" else t.status
    replicas = f" x {t.replicas} replicas" if t.replicas > 1 else ""
    return f"{arch}: {t.num_ipus} IPU{'s' if t.num_ipus != 1 else ''}{replicas}, {t.tiles_per_ipu:,} tiles/IPU  |  {status}"


def trace_window(doc: Document) -> TraceWindow | None:
    """The document's TraceWindow (level-of-detail index of the execution trace), or None for a
    profile without execution. Shared by the Execution Trace and Pipeline reports."""
    if not doc.has_execution:
        return None
    from analyser.trace import trace_of

    # the flat pyramids (the default view's level of detail, and the extents and row ranges of
    # every view) are built here, in the background warm-up, not on the first paint: for a big
    # profile not in the level-of-detail cache, the coarse levels only (what the whole-run view
    # draws), the finer ones in a background thread (TraceWindow.prepare's coarse_first)
    def build() -> TraceWindow | None:
        window = trace_of(doc.analysis)  # None only without an execution, checked above
        return None if window is None else window.prepare("flat", coarse_first=True)

    return doc.cached("trace_window", build)


def pipeline_chart(doc: Document) -> PipelineChart | None:
    """What the Pipeline view draws (``analyser.gui.model.pipeline.PipelineChart``), or None
    for a profile without execution."""
    if not doc.has_execution:
        return None
    from analyser.gui.model.pipeline import pipeline_chart as build

    window = trace_window(doc)
    if window is None:  # pragma: no cover - a profile with an execution has a trace
        return None
    return doc.cached("pipeline_chart", lambda: build(doc.analysis, window))


def warm(doc: Document, needs: Iterable[str], step: Callable[[str], Any] | None = None) -> None:
    """Compute (in the calling thread) the accessors of this module named in ``needs`` (a
    report's ``data_needs``), so that the report paints from the cache; ``step(name)`` is
    called as each starts (a load's progress)."""
    target(doc)
    for name in needs:
        if step is not None:
            step(name)
        accessor(name)(doc)


def accessor(name: str) -> Callable[[Document], Any]:
    """The accessor of :data:`DATA_NEEDS` called ``name`` (a report's data need); ValueError
    for a name that is not one."""
    try:
        return DATA_NEEDS[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a data need of {__name__} (DATA_NEEDS)") from None


def liveness_steps(doc: Document) -> pd.DataFrame:
    """The liveness steps (name, program, op, ipu) as read from the profile."""
    return doc.cached("liveness_steps", lambda: reads.liveness_steps(doc.analysis))


def program_nodes(doc: Document) -> pd.DataFrame:
    """The program nodes as read from the profile (program tree rows, pre-order)."""
    return doc.cached("program_nodes", lambda: reads.program_nodes(doc.analysis))


def program_column(doc: Document, name: str) -> np.ndarray:
    """One numeric column of the program nodes (``type``, ``cycles``, ``tile_balance``...) as
    numpy: from the whole table when it was read already, else that column alone (the table
    with its name strings, through pandas, took about 30 ms per profile of a Liveness first
    visit that shows one program's figures)."""
    if doc.is_cached("program_nodes"):
        return program_nodes(doc)[name].to_numpy()
    return doc.cached(f"program_column:{name}", lambda: reads.program_column(doc.analysis, name))


def program_match_keys(doc: Document) -> np.ndarray:
    """``name#k`` of every program node, k counting the earlier nodes of that name (tree
    order): the Program Tree matches A's k-th program of a name with B's k-th."""

    def compute() -> np.ndarray:
        seen: dict[str, int] = {}
        keys = []
        for name in program_nodes(doc)["name"].astype(str).tolist():  # programs, not steps
            k = seen.get(name, 0)
            seen[name] = k + 1
            keys.append(f"{name}#{k}")
        return np.array(keys, dtype=object)

    return doc.cached("program_match_keys", compute)


def operation_names(doc: Document) -> np.ndarray:
    return doc.cached("operation_names", lambda: reads.operation_names(doc.analysis))


def compute_sets(doc: Document) -> pd.DataFrame:
    return doc.cached("compute_sets", lambda: reads.compute_sets(doc.analysis))


def program_tile_cycles(doc: Document, program: int) -> np.ndarray:
    """Per-tile cycles of one execution of ``program``."""
    return reads.program_tile_cycles(doc.analysis, program)


def program_wait_cycles(doc: Document) -> np.ndarray | None:
    """[programs] cycles each program spent waiting over the run (for the other IPUs at a
    Sync, for the host at a StreamCopyBegin, for the slowest IPU at a GlobalExchange): its
    executed cycles from the analysis core (``program_cycles``, waits included) minus its own
    work, the profile's cycles of one execution times its executions. None without execution."""
    ex = execution(doc)
    if ex is None:
        return None

    def compute() -> np.ndarray:
        own = program_nodes(doc)["cycles"].to_numpy().astype(np.int64)
        waits = ex.program_cycles.astype(np.int64) - own * ex.program_executions.astype(np.int64)
        return np.maximum(waits, 0)

    return doc.cached("program_wait_cycles", compute)


def liveness_alignment(doc: Document, other: Document) -> StepAlignment:
    """A's and B's liveness steps aligned by program (``analyser.core.liveness.align_steps``):
    the common x axis of the compared Liveness chart."""
    from analyser.core.liveness import align_steps

    return doc.cached(
        f"liveness_alignment:{other.path}:{id(other)}",
        lambda: align_steps(liveness(doc).step_names, liveness(other).step_names),
    )


def step_vertices(doc: Document, step: int) -> pd.DataFrame:
    """The vertices liveness step ``step`` runs, by compute set and type, with the cycle
    estimate over their tiles (``analyser.core.liveness.step_vertices``)."""
    return doc.cached(f"step_vertices:{step}", lambda: reads.step_vertices(doc.analysis, step))


def step_tile_cycles(doc: Document, step: int) -> np.ndarray:
    """[tiles] cycles of one execution of liveness step ``step`` on each tile of its IPU."""
    return doc.cached(
        f"step_tile_cycles:{step}", lambda: reads.step_tile_cycles(doc.analysis, step)
    )


def operation_layer(doc: Document, layer: str) -> pd.DataFrame:
    """The Operations report's table at one software layer (``analyser.core.operations``):
    ``operations`` (the framework's), ``layers`` (model modules) or ``programs`` (Poplar)."""
    from analyser.core import operations as ops_core

    if layer == "operations":
        return operations(doc)
    if layer == "layers":
        return doc.cached("layer_table", lambda: ops_core.layer_table(operations(doc)))
    if layer == "programs":
        return doc.cached(
            "program_table",
            lambda: reads.program_table(doc.analysis, execution(doc), operations(doc)),
        )
    raise ValueError(f"unknown software layer {layer!r}")


def tile_cycles_by_ipu(doc: Document, programs: np.ndarray) -> dict[int, np.ndarray]:
    """{IPU: [tiles] cycles} of one execution of ``programs`` summed per tile."""
    return reads.tile_cycles_by_ipu(doc.analysis, programs)


def memory_by_category(doc: Document, op_ids: np.ndarray) -> pd.Series:
    """Bytes of operations ``op_ids`` by what they hold (variables by kind, temporary, code)."""
    from analyser.core.operations import memory_by_category as build

    return build(listed_variables(doc), operations(doc), op_ids)


def roofline(doc: Document) -> Roofline | None:
    """The per-operation roofline (analyser.core.roofline; None without execution)."""

    def compute() -> Roofline | None:
        if not doc.has_execution:
            return None
        from analyser.core.roofline import roofline as build

        return build(doc.analysis)

    return doc.cached("roofline", compute)


def imbalance(doc: Document) -> ImbalanceSummary | None:
    """Cycles lost to tile imbalance per IPU and compute set (analyser.core.imbalance; None
    without execution), for the reports that show it."""
    return doc.cached("imbalance", lambda: doc.analysis.imbalance)


#: What a report can name in its ``data_needs`` (warmed in the loader thread before it is shown):
#: the accessors taking only the document, listed once (a new one joins by its line here).
DATA_NEEDS: dict[str, Callable[[Document], Any]] = {
    fn.__name__: fn
    for fn in (
        target,
        memory,
        liveness,
        execution,
        operations,
        variables,
        memory_insights,
        metrics,
        run_config,
        run_config_note,
        target_config,
        insights,
        tile_breakdowns,
        largest_vertices,
        largest_always_live,
        target_line,
        trace_window,
        pipeline_chart,
        liveness_steps,
        program_nodes,
        program_match_keys,
        operation_names,
        compute_sets,
        program_wait_cycles,
        roofline,
        imbalance,
    )
}
