"""The catalogue of quantities: each key figure of a profile declared once, with its label, the
GUI's title, its kind (which picks the formatter), and which way is better.

The CLI, the reports, the comparisons and the GUI take labels, formatting and direction from
here instead of spelling them out. The keys are the fields of :class:`analyser.core.Metrics`
(also the keys of the JSON report and of ``--fail-if``). Enumerations of the profile format that
views show (step types, destinations, memory categories, ...) are decoded here too, so that no
view imports ``profiles.schema``.

    from analyser.core.quantities import QUANTITIES
    q = QUANTITIES["cycles_per_sample"]
    q.label, q.title, q.format(1234.5), q.better    # 'cycles per sample', ..., '1,234.5', 'lower'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from analyser.core.units import (
    MISSING,
    fmt_bytes,
    fmt_count,
    fmt_int,
    fmt_pct,
    fmt_rate,
    fmt_rel_change,
    fmt_seconds,
    fmt_signed_int,
    fmt_yes_no,
)
from profiles import schema

#: Formatter of each kind of quantity (None gives '-').
FORMATTERS: dict[str, Callable[[Any], str]] = {
    "bytes": fmt_bytes,
    "int": fmt_int,
    "share": fmt_pct,
    "float": fmt_rate,
    "seconds": fmt_seconds,
    # the summary's descriptive figures (a model's name, a clock)
    "text": lambda v: MISSING if v is None else str(v),
    "clock": lambda v: MISSING if v is None else f"{v / 1e9:.3f} GHz",
}


@dataclass(frozen=True)
class Quantity:
    """One key figure."""

    key: str
    #: lower-case label of the CLI and the reports ("cycles per sample")
    label: str
    #: "bytes", "int", "share", "float", "seconds", "text" or "clock" (:data:`FORMATTERS`)
    kind: str
    #: "lower" or "higher" is better; None when neither (a count of samples, say)
    better: str | None
    #: the GUI's capitalised title (default: the label, capitalised)
    title: str = ""
    #: a shorter label where space is tight (default: the label)
    short: str = ""

    def format(self, value: Any, unit: str = "KiB") -> str:
        """``value`` as text (:data:`analyser.core.units.MISSING` for None); bytes in ``unit``
        (a :class:`analyser.core.units.MemoryUnits`)."""
        if self.kind == "bytes":
            return fmt_bytes(value, unit)
        return FORMATTERS[self.kind](value)

    @property
    def higher_is_better(self) -> bool | None:
        """True when higher is better, False when lower is, None when neither."""
        return None if self.better is None else self.better == "higher"

    def __post_init__(self) -> None:
        if self.kind not in FORMATTERS:
            raise ValueError(f"{self.key}: unknown kind {self.kind!r}")
        if self.better not in (None, "lower", "higher"):
            raise ValueError(f"{self.key}: better must be 'lower', 'higher' or None")
        if not self.title:
            object.__setattr__(self, "title", self.label[:1].upper() + self.label[1:])
        if not self.short:
            object.__setattr__(self, "short", self.label)


#: Shorter labels where space is tight.
SHORT = {"throughput_samples_per_s": "samples/s"}

#: key, label, kind, which way is better
_TABLE = (
    ("peak_memory_bytes", "peak memory", "bytes", "lower"),
    ("max_tile_memory_bytes", "fullest tile", "bytes", "lower"),
    ("memory_share_used", "share of memory used", "share", "lower"),
    ("oom_tiles", "OOM tiles", "int", "lower"),
    ("always_live_bytes", "always-live", "bytes", "lower"),
    ("not_always_live_peak_bytes", "not-always-live peak", "bytes", "lower"),
    ("remote_buffer_bytes", "remote buffers (streaming memory)", "bytes", None),
    ("code_bytes", "code", "bytes", "lower"),
    ("total_cycles", "total cycles", "int", "lower"),
    ("device_cycles", "device cycles", "int", "lower"),
    ("cycles_per_sample", "cycles per sample", "float", "lower"),
    ("throughput_samples_per_s", "throughput (samples/s)", "float", "higher"),
    ("device_throughput_samples_per_s", "device throughput (samples/s)", "float", "higher"),
    ("samples", "samples", "int", None),
    ("host_seconds", "host time not hidden", "seconds", "lower"),
    ("host_round_trips", "host calls (in the profile)", "int", "lower"),
    ("compute_share", "compute (OnTileExecute) share", "share", "higher"),
    # of the host-inclusive time (StreamCopyBegin in the trace plus the host time outside it):
    # one label in every output (summary, compare, reports, the GUI, the step by step)
    ("host_wait_share", "host wait share (host-inclusive)", "share", "lower"),
    ("ramp_share", "ramp-up + ramp-down share", "share", "lower"),
    ("tile_balance", "tile balance (compute)", "share", "higher"),
    # the same work with less data through the links is better (8-bit input halves it)
    ("streamcopy_rx_bytes", "StreamCopy received", "bytes", "lower"),
    ("streamcopy_tx_bytes", "StreamCopy sent", "bytes", "lower"),
)

QUANTITIES: dict[str, Quantity] = {
    key: Quantity(key, label, kind, better, "", SHORT.get(key, ""))
    for key, label, kind, better in _TABLE
}


def quantity(key: str) -> Quantity:
    """The catalogue's entry of key figure ``key``."""
    return QUANTITIES[key]


# ---------------------------------------------------------------------------------------------
# The summary's layout, declared once (the CLI, the GUI and the reports read it)
# ---------------------------------------------------------------------------------------------
#: The summary's figures that are not :class:`analyser.core.Metrics` fields (the target, the
#: graph, figures derived for the summary): key, label, kind, which way is better. A target's
#: memory is better larger (a change of target).
_DESCRIPTIVE_TABLE = (
    ("model", "model", "text", None),
    ("target", "target", "text", None),
    ("architecture", "architecture", "text", None),
    ("num_ipus", "IPUs", "int", None),
    ("replicas", "replicas", "int", None),
    ("tiles_per_ipu", "tiles per IPU", "int", None),
    ("sram_per_tile", "memory per tile", "bytes", "higher"),
    ("memory_per_ipu", "memory per IPU", "bytes", "higher"),
    ("memory_total", "total memory", "bytes", "higher"),
    ("clock_hz", "clock", "clock", None),
    ("samples_per_step", "samples per step", "int", None),
    ("n_operations", "operations", "int", None),
    ("n_variables", "variables", "int", None),
    ("n_vertex_types", "vertex types", "int", None),
    ("n_compute_sets", "compute sets", "int", None),
    ("n_programs", "programs", "int", None),
    ("n_liveness_steps", "liveness steps", "int", None),
    ("n_executed_steps", "executed steps", "int", None),
    ("engine_version", "engine version", "text", None),
    ("created", "created", "text", None),
    ("status", "status", "text", None),
    ("run_seconds", "run time", "seconds", "lower"),
    ("imbalance_lost_cycles", "lost to tile imbalance", "int", "lower"),
)
#: The summary's figures beyond the key figures, by key (:func:`summary_quantity` reads both).
DESCRIPTIVE: dict[str, Quantity] = {
    key: Quantity(key, label, kind, better) for key, label, kind, better in _DESCRIPTIVE_TABLE
}


def summary_quantity(key: str) -> Quantity:
    """The catalogue's entry of a summary figure: a key figure or a descriptive one."""
    return QUANTITIES[key] if key in QUANTITIES else DESCRIPTIVE[key]


@dataclass(frozen=True)
class SummaryFigure:
    """One row of the summary: figure ``key`` (label, kind and direction from the catalogue),
    where its value comes from (``source``: an attribute path of the Analysis such as
    ``"metrics.total_cycles"``, or the name of a derived figure of
    :data:`analyser.core.summary.DERIVED`) and, optionally, the note said after the value (a
    name of :data:`analyser.core.summary.NOTES`)."""

    key: str
    source: str
    note: str = ""


@dataclass(frozen=True)
class SummarySection:
    """A section of the summary: its title, its figures in order, and whether it is shown only
    for a profile with an execution."""

    title: str
    figures: tuple[SummaryFigure, ...]
    execution: bool = False


def _fig(key: str, source: str = "", note: str = "") -> SummaryFigure:
    """A figure read from ``source`` (default: the Metrics field ``key``)."""
    return SummaryFigure(key, source or f"metrics.{key}", note)


def _target(*keys: str) -> tuple[SummaryFigure, ...]:
    return tuple(SummaryFigure(k, f"target.{k}") for k in keys)


#: The summary's sections and figures: the text ``analyse summary``, the JSON (``summary`` of a
#: profile), the Markdown and HTML reports and the GUI Summary all render this one list
#: (analyser.core.summary evaluates it). A figure added here reaches all of them.
SUMMARY_SECTIONS: list[SummarySection] = [
    SummarySection(
        "Target",
        (
            _fig("model", "target.model"),
            _fig("target", "target_name"),
            *_target(
                "architecture",
                "num_ipus",
                "replicas",
                "tiles_per_ipu",
                "sram_per_tile",
                "memory_per_ipu",
                "memory_total",
                "clock_hz",
                "samples_per_step",
            ),
        ),
    ),
    SummarySection(
        "Graph",
        (
            *_target(
                "n_operations",
                "n_variables",
                "n_vertex_types",
                "n_compute_sets",
                "n_programs",
                "n_liveness_steps",
                "n_executed_steps",
                "engine_version",
            ),
            _fig("created", "created"),
        ),
    ),
    SummarySection(
        "Memory",
        (
            _fig("status", "status"),
            _fig("peak_memory_bytes", note="capacity"),
            _fig("memory_share_used"),
            _fig("max_tile_memory_bytes", note="headroom"),
            _fig("oom_tiles", note="oom_per_ipu"),
            _fig("always_live_bytes"),
            _fig("not_always_live_peak_bytes"),
            _fig("code_bytes"),
            _fig("remote_buffer_bytes"),
        ),
    ),
    SummarySection(
        "Execution",
        (
            _fig("total_cycles"),
            _fig("device_cycles"),
            _fig("run_seconds", "run_seconds", "at_clock"),
            _fig("host_seconds"),
            _fig("samples"),
            _fig("cycles_per_sample"),
            _fig("throughput_samples_per_s"),
            _fig("device_throughput_samples_per_s"),
            _fig("host_round_trips"),
            _fig("compute_share"),
            _fig("host_wait_share"),
            _fig("ramp_share"),
            _fig("tile_balance"),
            _fig("imbalance_lost_cycles", "imbalance_lost_cycles", "imbalance_share"),
            _fig("streamcopy_rx_bytes"),
            _fig("streamcopy_tx_bytes"),
        ),
        execution=True,
    ),
]


# ---------------------------------------------------------------------------------------------
# Enumerations of the profile format, decoded for the views
# ---------------------------------------------------------------------------------------------
#: Every step / program type, indexed by its code.
STEP_TYPES: tuple[str, ...] = tuple(schema.PROGRAM_TYPES)
#: The step types that execute (the per-IPU cycle breakdowns).
EXECUTABLE_TYPES: tuple[str, ...] = tuple(schema.EXECUTABLE_TYPES)
#: Where StreamCopy data goes / comes from, indexed by code.
DESTINATIONS: tuple[str, ...] = tuple(schema.DESTINATIONS)
PASSES: tuple[str, ...] = tuple(schema.PASSES)
PHASES: tuple[str, ...] = tuple(schema.PHASES)
MEMORY_CATEGORIES: tuple[str, ...] = tuple(schema.MEMORY_CATEGORIES)
MEMORY_REGIONS: tuple[str, ...] = tuple(schema.MEMORY_REGIONS)
LIVENESS_CLASSES: tuple[str, ...] = tuple(schema.LIVENESS_CLASSES)


# ---------------------------------------------------------------------------------------------
# Table columns and chart series of the views, each declared once
# ---------------------------------------------------------------------------------------------
#: Formatter of each kind of table cell (None: the value as text). Bytes take the memory units.
CELL_FORMATTERS: dict[str, Callable[[Any], str]] = {
    "count": fmt_count,
    "int": fmt_int,
    "share": fmt_pct,
    "float": fmt_rate,
    "signed": fmt_signed_int,
    "change": fmt_rel_change,
    "yes_no": fmt_yes_no,
}


@dataclass(frozen=True)
class Column:
    """One column of a view's table: the frame's column ``key``, its title, its kind (which
    picks the formatter: ``"bytes"``, a key of :data:`CELL_FORMATTERS`, or None for text), which
    way is better (None when neither) and a tooltip."""

    key: str
    title: str
    kind: str | None = None
    better: str | None = None
    tip: str = ""

    def formatter(self, unit: str = "KiB") -> Callable[[Any], str] | None:
        """The column's formatter in memory ``unit``; None for a column shown as is."""
        if self.kind is None:
            return None
        if self.kind == "bytes":
            return lambda value: fmt_bytes(value, unit)
        return CELL_FORMATTERS[self.kind]

    def __post_init__(self) -> None:
        if self.kind not in (None, "bytes", *CELL_FORMATTERS):
            raise ValueError(f"{self.key}: unknown kind {self.kind!r}")
        if self.better not in (None, "lower", "higher"):
            raise ValueError(f"{self.key}: better must be 'lower', 'higher' or None")


def _cols(*specs: tuple) -> dict[str, Column]:
    return {spec[0]: Column(*spec) for spec in specs}


_PROFILE = ("profile", "Profile")
#: The tooltip of every "Share of cycles" column (analyser.core.operations.run_step_cycles).
SHARE_OF_CYCLES = (
    "Total cycles / the cycles of every step the run executed, summed over its IPUs (syncs, "
    "exchanges and host waits included): one denominator for operations, layers and programs"
)
#: Every table of the views, by name: its columns (key -> Column) in their usual order. A view
#: shows a table with :func:`columns`; a new column is one row here.
TABLES: dict[str, dict[str, Column]] = {
    # /graph/variables decoded (Analysis.variables): Memory, Liveness, Operations, Insights
    "variables": _cols(
        _PROFILE,
        ("name", "Variable"),
        ("kind", "Kind"),
        ("dtype", "Type"),
        ("shape", "Shape"),
        ("ipu", "IPU"),
        ("bytes", "Bytes", "bytes", "lower"),
        ("always_live", "Always live", "yes_no"),
        ("live_start", "Live from"),
        ("live_end", "Live to"),
        ("tile_start", "First tile"),
        ("tile_count", "Tiles"),
        ("remote_bytes", "Remote buffer", "bytes"),
    ),
    # the Operations report's table (Analysis.operations)
    "operations": _cols(
        ("name", "Operation"),
        ("type", "Type"),
        ("layer", "Layer"),
        ("source", "Source"),
        ("pass", "Pass"),
        ("ipu", "IPU"),
        ("stage", "Stage"),
        ("cycles", "Cycles", "count", "lower"),
        ("executions", "Executions", "count"),
        ("total_cycles", "Total cycles", "count", "lower"),
        ("cycles_share", "Share of cycles", "share", None, SHARE_OF_CYCLES),
        ("flops", "FLOPs", "count"),
        ("flops_per_cycle", "FLOPs / cycle", "float", "higher"),
        ("memory_bytes", "Memory", "bytes", "lower"),
        ("temp_bytes", "Temporary", "bytes", "lower"),
        ("code_bytes", "Code", "bytes", "lower"),
        ("tiles_used", "Tiles", "count"),
    ),
    # the Execution Trace's range statistics (TraceWindow.range_statistics: the steps of a
    # selected range of cycles by step name or operation, cycles clipped to the range)
    "range_statistics": _cols(
        ("name", "Step name"),
        ("type", "Type"),
        ("steps", "Steps", "int"),
        ("total_cycles", "Total cycles", "int"),
        ("mean_cycles", "Mean cycles", "int"),
        ("max_cycles", "Max cycles", "int"),
        ("share", "Share of range", "share", None, "total cycles / (range cycles x IPUs)"),
    ),
    # the Operations report in compare mode (A and B joined by name)
    "operations_compared": _cols(
        ("name", "Operation"),
        ("type", "Type"),
        ("pass", "Pass"),
        ("ipu", "IPU"),
        ("status", "In"),
        ("total_cycles_a", "Total cycles A", "count", "lower"),
        ("total_cycles_b", "Total cycles B", "count", "lower"),
        ("total_cycles_delta", "Change", "signed", "lower"),
        ("total_cycles_rel", "Change %", "change", "lower"),
        ("memory_bytes_a", "Memory A", "bytes", "lower"),
        ("memory_bytes_b", "Memory B", "bytes", "lower"),
        ("code_bytes_a", "Code A", "bytes", "lower"),
        ("code_bytes_b", "Code B", "bytes", "lower"),
        ("flops_a", "FLOPs A", "count"),
        ("flops_b", "FLOPs B", "count"),
    ),
    # the Operations report's other software layers (analyser.core.operations): model layers
    # (operations summed by module) and Poplar programs (the executable leaves)
    "operation_layers": _cols(
        ("name", "Layer"),
        ("operations", "Operations", "count"),
        ("type", "Operation types"),
        ("source", "Source"),
        ("ipu", "IPU"),
        ("stage", "Stage"),
        ("cycles", "Cycles", "count", "lower"),
        ("total_cycles", "Total cycles", "count", "lower"),
        ("cycles_share", "Share of cycles", "share", None, SHARE_OF_CYCLES),
        ("flops", "FLOPs", "count"),
        ("memory_bytes", "Memory", "bytes", "lower"),
        ("temp_bytes", "Temporary", "bytes", "lower"),
        ("code_bytes", "Code", "bytes", "lower"),
    ),
    "operation_programs": _cols(
        ("name", "Program"),
        ("type", "Type"),
        ("operation", "Operation"),
        ("pass", "Pass"),
        ("ipu", "IPU"),
        ("cycles", "Cycles", "count", "lower"),
        ("executions", "Executions", "count"),
        ("total_cycles", "Total cycles", "count", "lower"),
        ("cycles_share", "Share of cycles", "share", None, SHARE_OF_CYCLES),
        ("tile_balance", "Tile balance", "share", "higher"),
        ("bytes", "Bytes moved", "bytes"),
        ("code_bytes", "Code", "bytes", "lower"),
    ),
    "compute_sets": _cols(
        _PROFILE,
        ("name", "Compute set"),
        ("vertices", "Vertices", "count"),
        ("ipu", "IPU"),
        ("tile_start", "First tile"),
        ("tile_count", "Tiles"),
    ),
    "programs": _cols(
        _PROFILE,
        ("name", "Program"),
        ("type", "Type"),
        ("ipu", "IPU"),
        ("cycles", "Cycles", "count", "lower"),
        ("tile_balance", "Tile balance", "share", "higher"),
        ("bytes", "Bytes", "bytes"),
    ),
    # Insights: the fullest tiles and the largest vertex types
    "tiles": _cols(
        _PROFILE,
        ("ipu", "IPU"),
        ("tile", "Tile"),
        ("bytes", "Memory", "bytes", "lower"),
        ("share", "Share of tile memory", "share", "lower"),
    ),
    "vertex_types": _cols(
        _PROFILE,
        ("name", "Vertex type"),
        ("total_state_bytes", "State (all instances)", "bytes", "lower"),
        ("state_bytes", "State per instance", "bytes", "lower"),
        ("instances", "Instances"),
        ("code_bytes", "Code per tile", "bytes", "lower"),
    ),
    # Liveness: the variables live at one of two selected steps
    "live_at_steps": _cols(
        ("live_at", "Live at"),
        ("name", "Variable"),
        ("ipu", "IPU"),
        ("kind", "Kind"),
        ("bytes", "Bytes", "bytes", "lower"),
        ("live_start", "Live from"),
        ("live_end", "Live to"),
    ),
    # Liveness: the compute sets of the selected step by vertex type (core liveness.step_vertices)
    "step_vertices": _cols(
        _PROFILE,
        ("compute_set", "Compute set"),
        ("vertex_type", "Vertex type"),
        ("vertices", "Vertices", "int"),
        ("tile_count", "Tiles", "int"),
        ("tile_start", "First tile"),
        ("vertices_per_tile", "Vertices per tile", "count"),
        ("state_bytes", "Vertex state", "bytes", "lower"),
        ("code_bytes", "Code per tile", "bytes", "lower"),
        ("max_tile_cycles", "Cycles (max over tiles)", "int", "lower"),
        ("mean_tile_cycles", "Cycles (mean over tiles)", "int", "lower"),
    ),
    # the Program Tree: one row per program; own work and executed cycles are separate columns
    # (a Sync's own work is a few cycles, its executed cycles include the wait for the slowest
    # IPU, a StreamCopyBegin's the wait for the host); "delta" in compare mode
    "program_tree": _cols(
        ("name", "Program", None, None, "Program name (leaf: compute set / exchange / stream)"),
        ("type", "Type", None, None, "Program type"),
        (
            "ipu",
            "IPU",
            None,
            None,
            "IPU the program runs on ('all' for programs spanning every IPU)",
        ),
        ("repeat", "Repeat", "count", None, "Repeat count of a Repeat program"),
        (
            "cycles",
            "Own cycles / exec.",
            "count",
            "lower",
            "Cycles of one execution of the step (its own work), max over tiles, without any wait "
            "(profile)",
        ),
        (
            "balance",
            "Tile balance",
            "share",
            "higher",
            "Mean over tiles of cycles / max cycles of one execution; compute and exchange steps "
            "only (for a sync or a stream copy every tile waits alike, so it says nothing)",
        ),
        ("executions", "Executions", "count", None, "Times the step ran over the run"),
        (
            "total",
            "Executed (incl. waits)",
            "count",
            "lower",
            "Executed cycles: all its executions over the run, waits for other IPUs or the host "
            "included (analysis core)",
        ),
        (
            "wait",
            "Of which waiting",
            "count",
            "lower",
            "Part of the executed cycles spent waiting: for the slowest IPU (Sync, GlobalExchange) "
            "or for the host (StreamCopyBegin)",
        ),
        ("bytes", "Bytes", "bytes", None, "Bytes moved by one execution"),
        ("code", "Code", "bytes", "lower", "Code bytes"),
        ("delta", "Change vs A", "signed", "lower", "Executed cycles of B minus those of A"),
    ),
}
#: Column titles of the variables table (the shared ``profile`` column included).
VARIABLE_COLUMNS: dict[str, str] = {key: c.title for key, c in TABLES["variables"].items()}
#: The variables table's usual columns, in order.
VARIABLE_TABLE = (
    "profile",
    "name",
    "kind",
    "dtype",
    "shape",
    "bytes",
    "always_live",
    "live_start",
    "live_end",
)


class ColumnSpec(tuple):
    """``(key, title, formatter)`` of one shown column, with its tooltip as ``tip`` (the
    column's definition, shown over its header)."""

    tip: str

    def __new__(cls, key: str, title: str, fmt: Callable[[Any], str] | None, tip: str = ""):
        """A column: key, title, formatter and tooltip."""
        spec = super().__new__(cls, (key, title, fmt))
        spec.tip = tip
        return spec


def columns(
    table: str, unit: str = "KiB", keys: Sequence[str] | None = None, **retitled: str
) -> list[tuple[str, str, Callable[[Any], str] | None]]:
    """``(key, title, formatter)`` of ``table``'s columns (all, or ``keys`` in that order) with
    bytes in ``unit``, each with its tooltip (``.tip``): what the GUI's tables
    (``FilterTable.set_frame``) take. An unknown table, or a key or retitled key the table does
    not declare, is a ValueError naming it: a typo would otherwise show nothing."""
    if table not in TABLES:
        raise ValueError(f"No column table named {table!r} (analyser.core.quantities.TABLES).")
    declared = TABLES[table]
    unknown = [k for k in [*(keys or ()), *retitled] if k not in declared]
    if unknown:
        raise ValueError(f"Table {table!r} declares no column {', '.join(map(repr, unknown))}.")
    return [
        ColumnSpec(
            k, retitled.get(k, declared[k].title), declared[k].formatter(unit), declared[k].tip
        )
        for k in (keys if keys is not None else declared)
    ]


# ---------------------------------------------------------------------------------------------
# The summary's breakdown tables, declared once (the CLI, the GUI and the reports read them)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SummaryTable:
    """A breakdown table of the summary: its ``key`` (also the name of its rows' producer,
    :data:`analyser.core.summary.TABLE_ROWS`), title, columns (:class:`Column`: the key of the
    rows' value, the lower-case label, the kind that picks the formatter), which profiles it
    applies to (``execution``: only those with an execution), the column whose value groups
    the rows (``group``: the GUI makes one section per value, the text blanks repeats), a
    sentence said under it (``note``) and whether the reports fold it (``collapsed``)."""

    key: str
    title: str
    columns: tuple[Column, ...]
    execution: bool = False
    group: str = ""
    note: str = ""
    collapsed: bool = False
    #: the columns compared in the GUI's compare mode (A, B, change per row and column; rows
    #: matched by group and first column); empty: A's and B's rows listed one after the other
    compare: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        keys = [c.key for c in self.columns]
        if self.group and self.group not in keys:
            raise ValueError(f"{self.key}: group {self.group!r} is not a column")
        if not set(self.compare) <= set(keys):
            raise ValueError(f"{self.key}: a compared column is not a column")


def _tcol(key: str, label: str, kind: str | None = None, tip: str = "") -> Column:
    return Column(key, label, kind, None, tip)


#: The summary's breakdown tables, after its figures (:data:`SUMMARY_SECTIONS`): the text
#: ``analyse summary``, the JSON (``tables`` of a profile), the Markdown and HTML reports and the
#: GUI Summary all render this one list (analyser.core.summary evaluates it). A table or a
#: column added here (with its values in the table's producer) reaches all of them.
SUMMARY_TABLES: list[SummaryTable] = [
    SummaryTable(
        "cycles_by_step_type",
        "Cycles by step type",
        (
            _tcol("ipu", "IPU", "int"),
            _tcol("name", "step type"),
            _tcol("cycles", "cycles", "int"),
            _tcol("share", "share", "share"),
            _tcol("steps", "steps", "int"),
            _tcol("tile_balance", "tile balance", "share"),
        ),
        execution=True,
        group="ipu",
        compare=("cycles",),
        note="share: of the IPU's busy cycles; for the cycles lost to tile imbalance (slowest "
        "tile minus the mean over the IPU's tiles, summed over every compute set's executions), "
        "of its compute (OnTileExecute) cycles. Tile balance: mean over max tile cycles.",
    ),
    SummaryTable(
        "imbalance_compute_sets",
        "Compute sets losing the most cycles to tile imbalance",
        (
            _tcol("name", "compute set"),
            _tcol("lost_cycles", "lost", "int"),  # next to the name: what the list is sorted by
            _tcol("ipu", "IPU", "int"),
            _tcol("executions", "executions", "int"),
            _tcol("max_cycles", "slowest tile", "int"),
            _tcol("mean_cycles", "mean tile", "int"),
        ),
        execution=True,
        note="Cycles of the slowest tile and the mean over the IPU's tiles, per execution; lost: "
        "the slowest minus the mean, summed over the run's executions.",
    ),
    SummaryTable(
        "streamcopy",
        "StreamCopy and IPU-to-IPU bytes",
        (
            _tcol("ipu", "IPU", "int"),
            _tcol("link", "link"),
            _tcol("received", "received", "bytes"),
            _tcol("sent", "sent", "bytes"),
        ),
        execution=True,
        group="ipu",
        compare=("received", "sent"),
        note="StreamCopy by where the data comes from / goes to; GlobalExchange: between IPUs.",
    ),
    SummaryTable(
        "run_details",
        "Run details",
        (_tcol("name", "detail"), _tcol("value", "value")),
        execution=True,
        compare=("value",),
    ),
    SummaryTable(
        "run_configuration",
        "Run configuration",
        (_tcol("name", "option"), _tcol("value", "value")),
        collapsed=True,
        compare=("value",),
    ),
]


@dataclass(frozen=True)
class Series:
    """The series of a chart with a legend: what is drawn (one entry per name, coloured by the
    palette group), its unit and which way is better."""

    key: str
    title: str
    #: "cycles" or "bytes" (the axis)
    unit: str
    #: the palette group of the series' colours (analyser.gui.palette)
    palette: str
    #: the series' names (besides one per IPU where the chart draws one per IPU)
    names: tuple[str, ...]
    better: str | None = "lower"


#: The charts with a legend: Summary's cycles by step type per IPU, Memory's per-tile memory by
#: category, region or liveness class (its Breakdown choice), Liveness's memory over the program
#: steps.
SERIES: dict[str, Series] = {
    "cycles_by_step_type": Series(
        "cycles_by_step_type",
        "Cycles by step type",
        "cycles",
        "step_types",
        EXECUTABLE_TYPES,
    ),
    "memory_by_category": Series(
        "memory_by_category", "Memory per tile", "bytes", "memory_categories", MEMORY_CATEGORIES
    ),
    "memory_by_region": Series(
        "memory_by_region", "Memory per tile", "bytes", "memory_regions", MEMORY_REGIONS
    ),
    "memory_by_liveness": Series(
        "memory_by_liveness", "Memory per tile", "bytes", "liveness_classes", LIVENESS_CLASSES
    ),
    # one line per IPU (and profile), coloured by IPU, and the peaks' markers
    "liveness": Series("liveness", "not-always-live memory", "bytes", "chart", ("peak_marker",)),
}


def step_type_code(name: str) -> int:
    """The format's code of step (program) type ``name``."""
    return STEP_TYPES.index(name)


def step_type_name(code: int) -> str:
    """The step type of ``code`` (the code itself, as text, when out of range)."""
    return STEP_TYPES[code] if 0 <= code < len(STEP_TYPES) else str(code)


def variable_kind_code(name: str) -> int:
    """The format's code of variable kind ``name``."""
    return schema.code("variable_kind", name)
