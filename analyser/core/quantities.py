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

from dataclasses import dataclass
from typing import Any

from analyser.core.units import fmt_bytes, fmt_int, fmt_pct, fmt_rate, fmt_seconds
from profiles import schema

#: Formatter of each kind of quantity (None gives '-').
FORMATTERS = {
    "bytes": fmt_bytes,
    "int": fmt_int,
    "share": fmt_pct,
    "float": fmt_rate,
    "seconds": fmt_seconds,
}


@dataclass(frozen=True)
class Quantity:
    """One key figure."""

    key: str
    #: lower-case label of the CLI and the reports ("cycles per sample")
    label: str
    #: "bytes", "int", "share", "float" or "seconds" (the formatter, :data:`FORMATTERS`)
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


#: The GUI's titles where they are not the capitalised label.
TITLES = {
    "max_tile_memory_bytes": "Largest tile",
    "oom_tiles": "Out-of-memory tiles",
    "remote_buffer_bytes": "Remote buffers (streaming memory)",
    "host_round_trips": "Host round trips",
    "compute_share": "Compute (OnTileExecute) share",
    "tile_balance": "Tile balance (compute)",
}
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
    ("remote_buffer_bytes", "remote-buffer bytes", "bytes", None),
    ("code_bytes", "code", "bytes", "lower"),
    ("total_cycles", "total cycles", "int", "lower"),
    ("device_cycles", "device cycles", "int", "lower"),
    ("cycles_per_sample", "cycles per sample", "float", "lower"),
    ("throughput_samples_per_s", "throughput (samples/s)", "float", "higher"),
    ("device_throughput_samples_per_s", "device throughput (samples/s)", "float", "higher"),
    ("samples", "samples", "int", None),
    ("host_seconds", "host time not hidden", "seconds", "lower"),
    ("host_round_trips", "host calls (in the profile)", "int", "lower"),
    ("compute_share", "OnTileExecute share", "share", "higher"),
    ("host_wait_share", "host wait share (host-inclusive)", "share", "lower"),
    ("ramp_share", "ramp-up + ramp-down share", "share", "lower"),
    ("tile_balance", "tile balance", "share", "higher"),
    # the same work with less data through the links is better (8-bit input halves it)
    ("streamcopy_rx_bytes", "StreamCopy received", "bytes", "lower"),
    ("streamcopy_tx_bytes", "StreamCopy sent", "bytes", "lower"),
)

QUANTITIES: dict[str, Quantity] = {
    key: Quantity(key, label, kind, better, TITLES.get(key, ""), SHORT.get(key, ""))
    for key, label, kind, better in _TABLE
}


#: Column titles of the variables table (``Analysis.variables``, /graph/variables decoded), the
#: shared ``profile`` column of compared tables included.
VARIABLE_COLUMNS: dict[str, str] = {
    "profile": "Profile",
    "name": "Variable",
    "kind": "Kind",
    "dtype": "Type",
    "shape": "Shape",
    "ipu": "IPU",
    "bytes": "Bytes",
    "always_live": "Always live",
    "live_start": "Live from",
    "live_end": "Live to",
    "tile_start": "First tile",
    "tile_count": "Tiles",
    "remote_bytes": "Remote buffer",
}
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


#: The figures of the Execution Trace's range statistics (``TraceWindow.range_statistics``:
#: the steps of a selected range of cycles by step name or operation), keyed by its columns.
RANGE_STATISTICS: dict[str, Quantity] = {
    key: Quantity(key, label, kind, None, title)
    for key, label, kind, title in (
        ("steps", "steps in the range", "int", "Steps"),
        ("total_cycles", "cycles in the range", "int", "Total cycles"),
        ("mean_cycles", "mean cycles per step in the range", "int", "Mean cycles"),
        ("max_cycles", "most cycles of one step in the range", "int", "Max cycles"),
        ("share", "share of the range's IPU time", "share", "Share of range"),
    )
}


def quantity(key: str) -> Quantity:
    return QUANTITIES[key]


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


def step_type_code(name: str) -> int:
    return STEP_TYPES.index(name)


def step_type_name(code: int) -> str:
    """The step type of ``code`` (the code itself, as text, when out of range)."""
    return STEP_TYPES[code] if 0 <= code < len(STEP_TYPES) else str(code)


def variable_kind_code(name: str) -> int:
    return schema.code("variable_kind", name)
