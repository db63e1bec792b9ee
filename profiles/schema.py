"""Schema v1 of the IPU profile format: every group, dataset, attribute, dtype and shape.

This module is the single declaration of the format. The writer, the lazy reader and the
validator are all driven by it, and a JSON rendering of it is stored in every file (root attribute
``schema``) so that a file explains itself.

Conventions
-----------
* Tables are HDF5 groups holding one 1-D dataset per column, all of the same length (a struct of
  arrays). This keeps columns individually chunked / compressed, lets a reader load one column
  (or a slice of rows) without the rest, and maps straight onto numpy arrays and pandas DataFrames.
* Strings are UTF-8 variable-length strings.
* Enumerations are stored as small integers; the names are listed here (``ENUMS``) and copied into
  the file as a JSON attribute ``enums`` on the root, so codes can always be decoded.
* Symbolic dimensions in shapes: ``ipus`` (IPUs per replica), ``tiles`` (tiles per IPU),
  ``categories`` (len(MEMORY_CATEGORIES)), ``regions`` (len(MEMORY_REGIONS)), ``lsteps`` (liveness
  program steps), ``n`` (rows of the enclosing table). ``None`` in a shape means "any length".
* Per-tile cycles are stored once per distinct program (``/programs/tile_cycles``), never per
  executed step: an executed step refers to its program by id.
* The variable tile mapping is stored as a contiguous tile interval per variable
  (``tile_start``, ``tile_count``) with the bytes spread evenly (remainder on the first tiles),
  which is how the engine lays variables out; it keeps the mapping O(variables), not O(tiles).
* An OOM compile writes everything except the ``/execution`` group (as Poplar does with
  ``debug.allowOutOfMemory``); ``/meta`` attribute ``status`` is then ``"oom"``.

Versioning: ``FORMAT_VERSION = (major, minor)``. A reader refuses a newer *major* version with a
message naming the version it reads; older minors open (fields added in a later minor are optional
for older files, see ``Field.since``).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Literal

FORMAT_NAME = "ipu-profile"
FORMAT_VERSION: tuple[int, int] = (1, 6)
#: Version of the options stored in ``/meta@run_config``: the names and meanings of the fields of
#: ``engine.config.RunConfig`` (the one declaration of every run option; its JSON dump is what is
#: stored). Bump it when a field is renamed or removed or changes meaning, and teach the
#: analyser's reader (``analyser.core.run_options.read_run_config``) the older version. A new
#: field with a default needs no bump: a profile written before it reads it as its default.
RUN_CONFIG_VERSION = 1

# ---------------------------------------------------------------------------------------------
# Enumerations (stored as integer codes; the index in each tuple is the code)
# ---------------------------------------------------------------------------------------------

#: Memory categories per tile, as PopVision and libpva name them (PopVision Graph Analyser User Guide, Memory Report).
MEMORY_CATEGORIES: tuple[str, ...] = (
    "vertexCode",
    "vertexInstanceState",
    "vertexFieldData",
    "vectorListDescriptor",
    "copyDescriptor",
    "controlCode",
    "controlId",
    "controlTable",
    "internalExchangeCode",
    "hostExchangeCode",
    "globalExchangeCode",
    "hostExchangePacketHeader",
    "globalExchangePacketHeader",
    "instrumentationResults",
    "stack",
    "constant",
    "variable",
)

#: Memory regions of a tile. Code must sit in non-interleaved memory.
MEMORY_REGIONS: tuple[str, ...] = ("interleaved", "nonInterleaved", "overflowed")

#: Liveness classes of tile memory.
LIVENESS_CLASSES: tuple[str, ...] = ("alwaysLive", "notAlwaysLive")

#: Program (and executed step) types, as in the Poplar program tree and the execution trace.
PROGRAM_TYPES: tuple[str, ...] = (
    "Sequence",
    "Repeat",
    "Call",
    "OnTileExecute",
    "DoExchange",
    "GlobalExchange",
    "StreamCopyBegin",
    "StreamCopyMid",
    "StreamCopyEnd",
    "Sync",
    "SyncAns",
)
#: Program types that execute (appear as executed steps and have per-tile cycles).
EXECUTABLE_TYPES: tuple[str, ...] = PROGRAM_TYPES[3:]

#: Pass an operation belongs to.
PASSES: tuple[str, ...] = ("forward", "backward", "loss", "update", "io")

#: Pipeline / run phase of an executed step.
PHASES: tuple[str, ...] = ("rampUp", "main", "rampDown", "weightUpdate", "host", "none")

#: Where the bytes of a step go to / come from.
DESTINATIONS: tuple[str, ...] = ("none", "host", "remoteBuffer", "mixed", "ipu", "tile")

#: Variable categories (what a variable holds), a finer split of the ``variable`` memory category.
VARIABLE_KINDS: tuple[str, ...] = (
    "weight",
    "activation",
    "gradient",
    "accumulator",
    "optimiserState",
    "stash",
    "temporary",
    "streamBuffer",
    "constant",
    "input",
    "label",
    "output",
)

#: Sync kinds.
SYNC_KINDS: tuple[str, ...] = ("none", "internal", "external")

#: Host timeline lanes (since 1.2): the main process that makes the host calls, and the loader
#: (an async loader's process or the DataLoader's worker processes).
HOST_LANES: tuple[str, ...] = ("main", "loader")
#: Host timeline events (since 1.2): preparing samples, a host call's fixed round trip, the host
#: blocked while the device runs the call, the main process waiting for the loader.
HOST_EVENTS: tuple[str, ...] = ("prepare", "call", "waitDevice", "waitLoader")

ENUMS: dict[str, tuple[str, ...]] = {
    "memory_category": MEMORY_CATEGORIES,
    "memory_region": MEMORY_REGIONS,
    "liveness_class": LIVENESS_CLASSES,
    "program_type": PROGRAM_TYPES,
    "pass": PASSES,
    "phase": PHASES,
    "destination": DESTINATIONS,
    "variable_kind": VARIABLE_KINDS,
    "sync_kind": SYNC_KINDS,
    "host_lane": HOST_LANES,
    "host_event": HOST_EVENTS,
}

# ---------------------------------------------------------------------------------------------
# Declarations
# ---------------------------------------------------------------------------------------------

Kind = Literal["dataset", "column", "attribute"]


@dataclass(frozen=True)
class Field:
    """One dataset, table column or attribute.

    ``dtype`` is a numpy dtype string (``"int64"``, ``"float64"``, ``"bool"``, ...) or ``"str"``
    for UTF-8 strings or ``"json"`` for a JSON document stored as a string attribute.
    ``enum`` names the enumeration (in ``ENUMS``) whose codes the integers hold.
    ``ref`` names the table (``"/graph/operations"``...) whose row index the integers hold;
    ``-1`` always means "none".
    """

    name: str
    dtype: str
    doc: str
    shape: tuple[str | int | None, ...] = ("n",)
    kind: Kind = "column"
    enum: str | None = None
    ref: str | None = None
    unit: str | None = None
    required: bool = True
    since: tuple[int, int] = (1, 0)


@dataclass(frozen=True)
class Group:
    """A group: either a table (``table=True``: its datasets are equal-length columns) or a
    plain group of datasets and attributes."""

    path: str
    doc: str
    fields: tuple[Field, ...]
    table: bool = False
    required: bool = True
    #: Rows per chunk for large tables / arrays (the writer chooses compression per dataset).
    chunk_rows: int | None = None

    def field(self, name: str) -> Field:
        """The field ``name`` of this table; KeyError when it has none."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.path} has no field {name!r}")

    @property
    def columns(self) -> tuple[Field, ...]:
        """The table's columns."""
        return tuple(f for f in self.fields if f.kind == "column")

    @property
    def datasets(self) -> tuple[Field, ...]:
        """The table's columns and datasets."""
        return tuple(f for f in self.fields if f.kind in ("column", "dataset"))

    @property
    def attributes(self) -> tuple[Field, ...]:
        """The table's attributes."""
        return tuple(f for f in self.fields if f.kind == "attribute")


def _a(name: str, dtype: str, doc: str, **kw) -> Field:
    return Field(name, dtype, doc, shape=(), kind="attribute", **kw)


def _c(name: str, dtype: str, doc: str, **kw) -> Field:
    return Field(name, dtype, doc, kind="column", **kw)


def _d(name: str, dtype: str, shape: tuple, doc: str, **kw) -> Field:
    return Field(name, dtype, doc, shape=shape, kind="dataset", **kw)


ROOT = Group(
    "/",
    "File root: identifies the format and carries its own schema.",
    (
        _a("format", "str", f"Always {FORMAT_NAME!r}."),
        _a("format_version", "str", "Schema version 'major.minor' of this file."),
        _a("engine_version", "str", "Version of the engine (or tool) that wrote the file."),
        _a("created", "str", "Creation time, ISO 8601 with time zone."),
        _a("schema", "json", "This schema, as JSON (see profiles.schema.schema_json())."),
        _a("enums", "json", "The enumerations, name -> list of names indexed by code."),
    ),
)

META = Group(
    "/meta",
    "What was run: the full run configuration, the target, and the compile outcome. "
    "Everything here is small and read when a profile is opened.",
    (
        _a(
            "run_config",
            "json",
            "The complete, validated run configuration: every field of engine.config.RunConfig "
            "by name, as RunConfig.to_dict() dumps it (version: run_config_version).",
        ),
        _a(
            "run_config_version",
            "int64",
            "Version of run_config's options (profiles.schema.RUN_CONFIG_VERSION); read as 1 "
            "when absent (profiles written before format 1.3).",
            since=(1, 3),
        ),
        _a("target", "json", "The hardware target with every parameter the engine used."),
        _a(
            "partials_type",
            "str",
            "Partials of the compile's matmuls and convolutions, 'float' or 'half': what the "
            "AMP vertices accumulate into and the engine costed (the run option partials_type "
            "resolved: 'auto' by the framework's default; FP32 operands always 'float'). Absent "
            "before format 1.6.",
            required=False,
            since=(1, 6),
        ),
        _a("model", "str", "Model name (zoo name or file)."),
        _a("status", "str", "'ok' when the program fits and executed, 'oom' when it does not fit."),
        _a("num_ipus", "int64", "IPUs per replica."),
        _a("replicas", "int64", "Replication factor."),
        _a("tiles_per_ipu", "int64", "Tiles on each IPU."),
        _a("sram_per_tile", "int64", "SRAM bytes per tile.", unit="bytes"),
        _a("clock_hz", "float64", "Tile clock used to turn cycles into seconds.", unit="Hz"),
        _a(
            "samples_per_step",
            "int64",
            "Samples processed by one run step (micro-batch x GA x device iterations x replicas).",
        ),
        _a("notes", "json", "Free-form list of engine notes / warnings (strings).", required=False),
    ),
)

OPERATIONS = Group(
    "/graph/operations",
    "Operations of the lowered (training or inference) graph, one row per operation.",
    (
        _c("name", "str", "Operation name, e.g. 'layer3.8.conv2/fwd'."),
        _c("type", "str", "Operation type, e.g. 'Conv2d', 'MatMul', 'Add', 'ReduceSum', 'Adam'."),
        _c("layer", "str", "Module path of the layer, e.g. 'layer3.8.conv2', 'encoder.layer.11'."),
        _c(
            "source",
            "str",
            "Where in the model's code the operation comes from: 'mynet.py:42 in Bottleneck', "
            "the file name, line and module class of the PyTorch 2 exporter's stack trace and "
            "class hierarchy; '' when the model does not say (zoo models, other exporters).",
            required=False,
            since=(1, 4),
        ),
        _c("pass", "uint8", "Pass the operation belongs to.", enum="pass"),
        _c("ipu", "int16", "IPU (within a replica) the operation runs on."),
        _c("stage", "int16", "Pipeline stage (0 when not pipelined)."),
        _c(
            "groups",
            "int32",
            "Independent groups of the operation's AMP problem, its forward operation's: a "
            "convolution's groups (1 dense, its channels depthwise), a batched matmul's matrices "
            "(attention heads); 1 for other operations.",
            since=(1, 5),
        ),
        _c("flops", "int64", "Floating-point operations per execution (2 per MAC).", unit="flop"),
        _c("bytes_in", "int64", "Bytes read (inputs and weights) per execution.", unit="bytes"),
        _c("bytes_out", "int64", "Bytes written per execution.", unit="bytes"),
        _c(
            "cycles",
            "int64",
            "Cycles of one execution (sum over its steps of max over tiles).",
            unit="cycles",
        ),
        _c(
            "code_bytes",
            "int64",
            "Code bytes attributable to the operation over all tiles.",
            unit="bytes",
        ),
        _c(
            "temp_bytes", "int64", "Peak temporary memory of its plan over all tiles.", unit="bytes"
        ),
        _c("tiles_used", "int32", "Tiles its plan uses."),
        _c("tile_start", "int32", "First tile of its plan (plans use a contiguous range)."),
    ),
    table=True,
)

VARIABLES = Group(
    "/graph/variables",
    "Variables (tensors with memory): weights, activations, gradients, optimiser state, stashes, "
    "stream buffers... with their liveness and tile mapping.",
    (
        _c("name", "str", "Variable name."),
        _c("kind", "uint8", "What the variable holds.", enum="variable_kind"),
        _c("dtype", "str", "Element type: 'float32', 'float16', 'int32', 'uint8'."),
        _c("shape", "str", "Shape as 'AxBxC'."),
        _c("bytes", "int64", "Total bytes over all its tiles (0 when offloaded).", unit="bytes"),
        _c("ipu", "int16", "IPU holding the variable."),
        _c("always_live", "bool", "True for always-live variables (exclusive addresses)."),
        _c(
            "live_start",
            "int32",
            "First liveness step where it is live (-1 if always live).",
            ref="/liveness/steps",
        ),
        _c(
            "live_end",
            "int32",
            "Last liveness step where it is live, inclusive (-1 if always live).",
            ref="/liveness/steps",
        ),
        _c("tile_start", "int32", "First tile of its mapping."),
        _c("tile_count", "int32", "Number of tiles of its mapping (bytes spread evenly)."),
        _c("interleaved", "bool", "True when placed in interleaved memory."),
        _c("remote", "bool", "True when offloaded to a remote buffer (streaming memory)."),
        _c("remote_bytes", "int64", "Bytes held in streaming memory when offloaded.", unit="bytes"),
        _c(
            "op",
            "int32",
            "Operation that produces / owns it (-1 for none).",
            ref="/graph/operations",
        ),
    ),
    table=True,
)

VERTEX_TYPES = Group(
    "/graph/vertex_types",
    "Codelet (vertex) types present in the program.",
    (
        _c("name", "str", "Vertex type, e.g. 'poplin::ConvPartial1x1Out<half,float,true>'."),
        _c(
            "code_bytes",
            "int64",
            "Code bytes of the codelet on each tile that uses it.",
            unit="bytes",
        ),
        _c("state_bytes", "int64", "Vertex instance state bytes per instance.", unit="bytes"),
        _c("instances", "int64", "Instances over all tiles and IPUs."),
    ),
    table=True,
)

COMPUTE_SETS = Group(
    "/graph/compute_sets",
    "Compute sets: the vertices run by one OnTileExecute step.",
    (
        _c("name", "str", "Compute set name."),
        _c(
            "op",
            "int32",
            "Operation the compute set belongs to (-1 for none).",
            ref="/graph/operations",
        ),
        _c("program", "int32", "OnTileExecute program that runs it.", ref="/programs/nodes"),
        _c("vertex_type", "int32", "Main vertex type.", ref="/graph/vertex_types"),
        _c("vertices", "int64", "Vertex instances over all tiles."),
        _c("ipu", "int16", "IPU."),
        _c("tile_start", "int32", "First tile used."),
        _c("tile_count", "int32", "Tiles used."),
    ),
    table=True,
)

MEMORY = Group(
    "/memory",
    "Memory per tile. Every array is indexed [ipu, tile, ...]. By-category bytes count "
    "always-live data plus the not-always-live data live at the tile's own peak step, so for every "
    "tile sum(by_category) == sum(by_region) == sum(by_liveness) == total. A tile is out of memory "
    "when total + gaps > sram_per_tile.",
    (
        _d(
            "by_category",
            "int64",
            ("ipus", "tiles", "categories"),
            "Bytes per tile per memory category (MEMORY_CATEGORIES order).",
            unit="bytes",
        ),
        _d(
            "by_region",
            "int64",
            ("ipus", "tiles", "regions"),
            "Bytes per tile per region (MEMORY_REGIONS order).",
            unit="bytes",
        ),
        _d(
            "by_liveness",
            "int64",
            ("ipus", "tiles", 2),
            "Always-live bytes and peak not-always-live bytes per tile.",
            unit="bytes",
        ),
        _d(
            "total",
            "int64",
            ("ipus", "tiles"),
            "Total used bytes per tile (excluding gaps).",
            unit="bytes",
        ),
        _d(
            "gaps",
            "int64",
            ("ipus", "tiles"),
            "Unusable bytes per tile from bank / region alignment.",
            unit="bytes",
        ),
        _d(
            "physical_tile",
            "int32",
            ("tiles",),
            "Physical tile id of each software tile id (for ordering and the floor-plan map).",
        ),
        _d(
            "tile_xy",
            "int16",
            ("tiles", 2),
            "Column and row of each software tile on the chip floor plan (tile map).",
        ),
        _d(
            "oom_tiles",
            "int32",
            (None, 2),
            "[ipu, tile] of every tile that is out of memory (empty when it fits).",
        ),
    ),
)

LIVENESS_STEPS = Group(
    "/liveness/steps",
    "Program steps of the liveness report (one per scheduled leaf program, in program order).",
    (
        _c("name", "str", "Step name (the program / compute set name)."),
        _c("program", "int32", "Program the step runs.", ref="/programs/nodes"),
        _c("op", "int32", "Operation (-1 for none).", ref="/graph/operations"),
        _c("ipu", "int16", "IPU the step runs on (-1 for all)."),
    ),
    table=True,
)

LIVENESS = Group(
    "/liveness",
    "Not-always-live memory over program steps.",
    (
        _d(
            "not_always_live",
            "int64",
            ("ipus", "lsteps"),
            "Not-always-live bytes per IPU per liveness step (sum over the IPU's tiles).",
            unit="bytes",
        ),
        _d(
            "per_tile",
            "int32",
            ("ipus", "lsteps", "tiles"),
            "Not-always-live bytes per tile per step, dense (format 1.0 only; from 1.1 the "
            "per_tile_* datasets hold the same values as changes). Read either form with "
            "Profile.liveness_per_tile().",
            unit="bytes",
            required=False,
        ),
        _d(
            "per_tile_ipu_offsets",
            "int64",
            ("ipus+1",),
            "Per-tile liveness as changes: IPU i's rows of per_tile_step / per_tile_rows are "
            "[per_tile_ipu_offsets[i], per_tile_ipu_offsets[i + 1]).",
            since=(1, 1),
        ),
        _d(
            "per_tile_step",
            "int32",
            (None,),
            "Liveness step from which each stored row holds, increasing within an IPU; an IPU's "
            "first row starts at step 0 and a row is stored only where the IPU's per-tile "
            "values change.",
            ref="/liveness/steps",
            since=(1, 1),
        ),
        _d(
            "per_tile_rows",
            "int32",
            (None, "tiles"),
            "Not-always-live bytes per tile from step per_tile_step[k] until the IPU's next "
            "stored row (or the last step), saturated at 2**31 - 1.",
            unit="bytes",
            since=(1, 1),
        ),
        _d("always_live", "int64", ("ipus",), "Always-live bytes per IPU.", unit="bytes"),
        _d("peak_step", "int32", ("ipus",), "Liveness step with the most not-always-live bytes."),
    ),
)

PROGRAMS = Group(
    "/programs/nodes",
    "The program tree: control programs (Sequence / Repeat / Call) and leaf steps. Row order is "
    "a depth-first, pre-order walk; children of a node keep their execution order.",
    (
        _c("name", "str", "Program name (leaf: compute set / exchange / stream name)."),
        _c("type", "uint8", "Program type.", enum="program_type"),
        _c("parent", "int32", "Parent program (-1 for a root).", ref="/programs/nodes"),
        _c("ipu", "int16", "IPU (-1 for programs spanning all IPUs)."),
        _c("repeat", "int64", "Repeat count for Repeat programs (1 otherwise)."),
        _c("op", "int32", "Operation (-1 for none).", ref="/graph/operations"),
        _c(
            "cycles",
            "int64",
            "Cycles of one execution of a leaf (max over tiles); 0 for control.",
            unit="cycles",
        ),
        _c(
            "tile_balance",
            "float32",
            "Mean over tiles of cycles / max cycles for one execution (0 for control).",
        ),
        _c(
            "bytes",
            "int64",
            "Bytes moved by one execution (exchanges and stream copies).",
            unit="bytes",
        ),
        _c("sync", "uint8", "Sync kind for Sync steps.", enum="sync_kind"),
        _c(
            "code_bytes",
            "int64",
            "Control and exchange code of the program over all tiles.",
            unit="bytes",
        ),
    ),
    table=True,
    chunk_rows=16384,
)

PROGRAM_CYCLES = Group(
    "/programs",
    "Per-tile cycles of every distinct program, stored once (not per executed step).",
    (
        _d(
            "tile_cycles",
            "int32",
            ("programs", "tiles"),
            "Cycles of one execution of each program on each tile of its IPU (rows = programs; "
            "0 for control programs and idle tiles).",
            unit="cycles",
        ),
    ),
    # a few programs per chunk: a step's per-tile cycles are read without decompressing others
    chunk_rows=8,
)

STEPS = Group(
    "/execution/steps",
    "Every executed step. Rows are grouped by IPU (see /execution/ipu_offsets) and sorted by "
    "start cycle within an IPU, so a time window of one IPU is a contiguous row range.",
    (
        _c("program", "int32", "Program executed.", ref="/programs/nodes"),
        _c("ipu", "int16", "IPU."),
        _c("start", "int64", "Start cycle (from the start of the run).", unit="cycles"),
        _c("cycles", "int64", "Length in cycles.", unit="cycles"),
        _c("type", "uint8", "Step type.", enum="program_type"),
        _c("micro_batch", "int32", "Micro-batch index within the step (-1 for none)."),
        _c("stage", "int16", "Pipeline stage (-1 for none)."),
        _c("phase", "uint8", "Pipeline / run phase.", enum="phase"),
        _c("iteration", "int32", "Device iteration (host call) the step belongs to."),
        _c("bytes_in", "int64", "Bytes received by the IPU.", unit="bytes"),
        _c("bytes_out", "int64", "Bytes sent by the IPU.", unit="bytes"),
        _c("dest", "uint8", "Destination / source of the bytes.", enum="destination"),
    ),
    table=True,
    required=False,
    chunk_rows=65536,
)

HOST = Group(
    "/execution/host",
    "The host's timeline of one host call in steady state (since 1.2), outside the device "
    "trace: host preparation, the call's round trip and the waits, in cycles of the target "
    "clock from the start of the device trace (negative = before the device starts). The "
    "device cycles of /execution/steps exclude all of it, as PopVision's trace does.",
    (
        _c("lane", "uint8", "Host lane.", enum="host_lane", since=(1, 2)),
        _c("kind", "uint8", "What the host does.", enum="host_event", since=(1, 2)),
        _c("start", "int64", "Start cycle (device-trace clock).", unit="cycles", since=(1, 2)),
        _c("cycles", "int64", "Length in cycles.", unit="cycles", since=(1, 2)),
        _c("samples", "int64", "Samples prepared (prepare events; else 0).", since=(1, 2)),
    ),
    table=True,
    required=False,
)

EXECUTION = Group(
    "/execution",
    "The execution (absent when the program does not fit).",
    (
        _d(
            "ipu_offsets",
            "int64",
            ("ipus+1",),
            "Row ranges of each IPU's steps in /execution/steps: IPU i is rows "
            "[ipu_offsets[i], ipu_offsets[i+1]).",
        ),
        _d(
            "run_starts",
            "int64",
            (None,),
            "Start cycle of each host call (device-iteration run), for splitting long traces.",
        ),
        _d(
            "max_step_cycles",
            "int64",
            ("ipus",),
            "Longest executed step of each IPU, so a time-window query can widen its search to "
            "steps that start before the window and overlap it. Filled in by the writer.",
            unit="cycles",
            required=False,
        ),
        _a(
            "total_cycles",
            "int64",
            "Cycles of the device trace (all IPUs). Before 1.2 this included the host's wait at "
            "the start of a call; from 1.2 host time is in /execution/host only.",
            unit="cycles",
        ),
        _a(
            "device_cycles",
            "int64",
            "Device cycles of the run (from 1.2 equal to total_cycles).",
            unit="cycles",
        ),
        _a(
            "host_seconds",
            "float64",
            "Host-side time per host call that is not hidden behind device work.",
            unit="s",
        ),
        _a("samples", "int64", "Samples processed by the run."),
        _a("cycles_per_sample", "float64", "total_cycles / samples.", unit="cycles"),
        _a(
            "throughput",
            "float64",
            "Samples per second at the target clock, host included (host-inclusive).",
            unit="samples/s",
        ),
        _a(
            "device_throughput",
            "float64",
            "Samples per second of the device alone (total_cycles at the target clock).",
            unit="samples/s",
            required=False,
            since=(1, 2),
        ),
        _a(
            "host_inclusive_cycles",
            "int64",
            "Cycles of one host call including the host time not hidden behind the device.",
            unit="cycles",
            required=False,
            since=(1, 2),
        ),
        _a(
            "host_model",
            "json",
            "The host model of the run: per-sample cost by transform, loader, workers, "
            "processes in parallel, host servers, preparation per call.",
            required=False,
            since=(1, 2),
        ),
    ),
    required=False,
)

GROUPS: tuple[Group, ...] = (
    ROOT,
    META,
    OPERATIONS,
    VARIABLES,
    VERTEX_TYPES,
    COMPUTE_SETS,
    MEMORY,
    LIVENESS_STEPS,
    LIVENESS,
    PROGRAMS,
    PROGRAM_CYCLES,
    EXECUTION,
    STEPS,
    HOST,
)

GROUPS_BY_PATH: dict[str, Group] = {g.path: g for g in GROUPS}


def group(path: str) -> Group:
    """The declaration of the group at ``path``."""
    return GROUPS_BY_PATH[path]


def code(enum: str, name: str) -> int:
    """Integer code of ``name`` in enumeration ``enum`` (e.g. ``code("program_type", "Sync")``)."""
    return ENUMS[enum].index(name)


def schema_dict() -> dict:
    """The schema as plain data (what is stored in the file)."""
    return {
        "format": FORMAT_NAME,
        "version": f"{FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}",
        "enums": {k: list(v) for k, v in ENUMS.items()},
        "groups": [
            {**_shallow(g, skip="fields"), "fields": [_shallow(f) for f in g.fields]}
            for g in GROUPS
        ],
    }


def _shallow(obj: Field | Group, skip: str = "") -> dict:
    # what dataclasses.asdict gives for these flat declarations (their values are strings,
    # numbers, None and tuples of those) without its deep copies: 35 ms -> about 1 ms
    return {f.name: getattr(obj, f.name) for f in dataclass_fields(obj) if f.name != skip}


def schema_json() -> str:
    """The schema of this format version as JSON (stored in every profile)."""
    return _schema_json(FORMAT_VERSION)


@functools.lru_cache(maxsize=4)
def _schema_json(version: tuple[int, int]) -> str:
    # the schema is constant (its version is the key): every profile written stores it, and
    # building it costs a few milliseconds (80 ms through dataclasses.asdict)
    del version
    return json.dumps(schema_dict(), separators=(",", ":"))


def version_string(version: tuple[int, int] = FORMAT_VERSION) -> str:
    """A format version as text ('1.3')."""
    return f"{version[0]}.{version[1]}"


def parse_version(text: str) -> tuple[int, int]:
    """Parse 'major.minor'; raises ValueError on anything else."""
    major, minor = text.strip().split(".")
    return int(major), int(minor)


__all__ = [
    "DESTINATIONS",
    "ENUMS",
    "EXECUTABLE_TYPES",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "GROUPS",
    "HOST_EVENTS",
    "HOST_LANES",
    "LIVENESS_CLASSES",
    "MEMORY_CATEGORIES",
    "MEMORY_REGIONS",
    "PASSES",
    "PHASES",
    "PROGRAM_TYPES",
    "SYNC_KINDS",
    "VARIABLE_KINDS",
    "Field",
    "Group",
    "code",
    "group",
    "parse_version",
    "schema_dict",
    "schema_json",
    "version_string",
]
