"""Hardware targets: Mk1 GC2, Mk2 GC200 and Bow as validated data.

Every parameter the engine uses is a named field of :class:`Target` with its unit and its source:
either a public figure (sources below), a figure *derived* from those, or an
*assumption* (a figure the public record does not give), stated with its reasoning. No engine
formula contains a bare hardware number; it reads one of these fields.

Targets are pydantic models (validated on creation, ``extra="forbid"``, frozen). A user can change
any parameter through ``RunConfig.target_overrides`` (``{"clock_hz": 1.6e9}``); the engine calls
:func:`get_target` with those overrides, which validates the result again. The whole target (with
the overrides applied) is recorded in every profile (``/meta`` attribute ``target``).

The figures live in ``engine/data/chips.toml`` (hardware as data). Sources: Jia et al. 2019, "Dissecting the Graphcore IPU
Architecture via Microbenchmarking" (Citadel); Graphcore glossary, IPU-POD128 and Bow-2000
datasheets; PopLibs ``popnn/Net.hpp``, ``poplin/ConvModel.cpp``, ``poplin/ConvVertexType.cpp``.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.errors import TargetError, first_problem

KiB = 1024
MiB = 1024 * 1024


class VertexFamily(BaseModel):
    """Per-codelet memory figures of one family of vertices (all assumptions, see docs/engine.md).

    The public record gives no code sizes, so these are assumptions of the right order of magnitude
    for IPU codelets (hand-written assembly kernels: a few hundred bytes for simple element-wise
    codelets, a few KiB for the AMP convolution / matmul kernels with their many paths). They are
    parameters so a user with real numbers from PopVision can set them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    code_bytes: int = Field(gt=0, description="Code of the codelet on each tile that uses it.")
    state_bytes: int = Field(gt=0, description="Vertex instance state per instance (bytes).")
    field_bytes: int = Field(ge=0, description="Field data (edge pointers, sizes) per instance.")
    vector_list_bytes: int = Field(
        ge=0, description="Vector-list descriptors (work lists) per instance."
    )


def _default_families() -> dict[str, VertexFamily]:
    return {
        # AMP convolution / matmul partials (poplin::ConvPartial1x1Out / ConvPartialnx1):
        # large assembly kernels with per-worker work lists.
        "amp": VertexFamily(code_bytes=4096, state_bytes=48, field_bytes=64, vector_list_bytes=96),
        # Partial-sum reductions (popops::Reduce*).
        "reduce": VertexFamily(
            code_bytes=1536, state_bytes=24, field_bytes=32, vector_list_bytes=0
        ),
        # Element-wise unary / binary (popops::*MultiVertex): one instance per tile.
        "elementwise": VertexFamily(
            code_bytes=512, state_bytes=16, field_bytes=16, vector_list_bytes=0
        ),
        # Normalisation statistics and whitening (popnn::BatchNorm, LayerNorm helpers).
        "norm": VertexFamily(code_bytes=1280, state_bytes=24, field_bytes=32, vector_list_bytes=0),
        # Non-linearities with a transcendental (exp, tanh): softmax, GELU.
        "nonlinearity": VertexFamily(
            code_bytes=768, state_bytes=16, field_bytes=16, vector_list_bytes=0
        ),
        # Pooling (popnn::MaxPooling / SumPooling) with work lists.
        "pool": VertexFamily(code_bytes=1024, state_bytes=24, field_bytes=32, vector_list_bytes=48),
        # Gather / scatter-add for embeddings (popops::MultiSlice / MultiUpdateAdd).
        "embedding": VertexFamily(
            code_bytes=1024, state_bytes=32, field_bytes=32, vector_list_bytes=0
        ),
        # Rearrangement copies (PreArrange, transposes, casts: poplin::Transpose2d, popops::Cast).
        "copy": VertexFamily(code_bytes=640, state_bytes=16, field_bytes=24, vector_list_bytes=0),
        # Loss (popnn::NonLinearity + reduce + log): softmax cross-entropy.
        "loss": VertexFamily(code_bytes=1024, state_bytes=24, field_bytes=24, vector_list_bytes=0),
        # Optimiser update kernels (ScaledAdd, Adam / LAMB fused update).
        "optimiser": VertexFamily(
            code_bytes=1536, state_bytes=32, field_bytes=32, vector_list_bytes=0
        ),
    }


class Target(BaseModel):
    """One IPU hardware target: every parameter the engine uses, with its unit and source."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    # -- identity ----------------------------------------------------------------------------
    name: str = Field(description="Short name: 'mk1', 'mk2' or 'bow'.")
    display_name: str = Field(description="Product name, e.g. 'Mk2 GC200'.")
    architecture: Literal["ipu1", "ipu2", "ipu21"] = Field(description="Poplar architecture name.")

    # -- chip (Jia et al. 2019; datasheets) --------------------------------------------------------
    tiles_per_ipu: int = Field(gt=0, description="Tiles per IPU (Jia et al. 2019; datasheets).")
    workers_per_tile: int = Field(gt=0, description="Hardware worker threads per tile (6).")
    sram_per_tile: int = Field(
        gt=0, description="SRAM bytes per tile (Jia et al. 2019; datasheets)."
    )
    bank_bytes: int = Field(gt=0, description="Memory bank / interleaving unit in bytes.")
    non_interleaved_bytes_per_tile: int = Field(
        gt=0,
        description=(
            "Bytes of the non-interleaved region of a tile (code must sit there). Assumption: "
            "Mk1 64 KiB (a quarter of its 256 KiB, as in the IPU programmer's guide memory map); "
            "Mk2/Bow keep the same one-quarter share of 624 KiB."
        ),
    )
    clock_hz: float = Field(
        gt=0, description="Tile clock in Hz (derived from the datasheets' peak FLOPS)."
    )
    amp_macs_half_half: int = Field(
        gt=0, description="AMP MACs/cycle/tile, FP16 in, FP16 partials."
    )
    amp_macs_half_float: int = Field(
        gt=0, description="AMP MACs/cycle/tile, FP16 in, FP32 partials."
    )
    amp_macs_float: int = Field(gt=0, description="AMP MACs/cycle/tile, FP32.")
    local_memory_bytes_per_cycle: float = Field(
        gt=0,
        description=(
            "Load bandwidth per tile per cycle (derived: aggregate local memory bandwidth / "
            "(tiles x clock)). Bounds element-wise vector throughput (informative)."
        ),
    )

    # -- exchange and sync (Jia et al. 2019; IPU Programmer's Guide, BSP) -----------------------------------
    exchange_bytes_per_cycle: float = Field(gt=0, description="On-chip exchange bytes/cycle/tile.")
    exchange_broadcast_bytes_per_cycle: float = Field(
        gt=0,
        description="Exchange receive rate when the supertile neighbour receives the same data.",
    )
    exchange_setup_cycles: int = Field(
        ge=0, description="Fixed cycles per exchange (PopLibs planners: about 100)."
    )
    internal_sync_cycles: int = Field(ge=0, description="Cycles per internal sync (about 90).")
    external_sync_seconds_per_hop: float = Field(
        ge=0,
        description="External sync latency per hop (15 ns); hops = 1 + (IPUs//2)//2, doubled for the "
        "round trip (PopLibs test utility).",
    )

    # -- vertex-level cycle estimates (PopLibs cycle estimators) ---------------
    amp_vertex_overhead_cycles: int = Field(
        ge=0,
        description="Supervisor overhead per AMP vertex (about 50 cycles; the brief's summary, "
        "kept for recorded targets: AMP costs follow engine.compiler.vertex_costs).",
    )
    amp_conv_group_cycles: int = Field(
        ge=0, description="Cycles per conv group (about 12; summary, not read by the engine)."
    )
    amp_output_pass_cycles: int = Field(
        ge=0, description="Cycles per AMP output pass (about 6; summary, not read by the engine)."
    )
    amp_input_channel_group_half: int = Field(
        gt=0,
        description=(
            "Input channels the AMP consumes per pass for FP16 (assumption from "
            "ConvVertexType: 16 for half AMP); the reduction dimension is padded to it."
        ),
    )
    amp_input_channel_group_float: int = Field(
        gt=0, description="Input channels per AMP pass for FP32 (assumption: 8)."
    )
    amp_output_channel_group: int = Field(
        gt=0,
        description="Output channels per AMP pass (assumption: 8; no longer read: the engine "
        "derives the conv units per tile from the AMP rate, engine.compiler.vertex_costs).",
    )
    amp_coeff_load_bytes_per_cycle: int = Field(
        16,
        gt=0,
        description=(
            "Bytes of weights per cycle a tile loads into its conv units (Poplar's "
            "convUnitCoeffLoadBytesPerCycle; 16 in PopLibs include/popnn/Net.hpp). PopLibs' "
            "planner halves it unless the convolution option use128BitConvUnitLoad is set "
            "(default off, lib/poplin/ConvOptions.hpp)."
        ),
    )
    prearrange_cycles_per_element: float = Field(
        ge=0, description="Cycles per element of a rearrangement (PreArrange) copy (about 1)."
    )
    elementwise_supervisor_cycles: int = Field(
        ge=0, description="Supervisor cycles per element-wise vertex (about 11)."
    )
    elementwise_worker_overhead_cycles: int = Field(
        ge=0, description="Per-worker overhead of an element-wise vertex (26..29; 27 used)."
    )
    elementwise_cycles_per_vector: int = Field(
        ge=0, description="Cycles per vector per worker in the element-wise inner loop (3)."
    )
    vector_width_float: int = Field(gt=0, description="Elements per 64-bit vector, float (2).")
    vector_width_half: int = Field(gt=0, description="Elements per 64-bit vector, half (4).")
    default_available_memory_proportion: float = Field(
        gt=0, le=1, description="Default available memory proportion for AMP plans (0.6)."
    )

    # -- links and memories outside the chip (IPU-M2000 / Bow-2000 datasheets) -------------------------
    ipu_links: int = Field(gt=0, description="IPU-Links per IPU.")
    ipu_link_bytes_per_s: float = Field(gt=0, description="Bandwidth of one IPU-Link (B/s).")
    host_link_bytes_per_s: float = Field(
        gt=0, description="Host-to-IPU bandwidth per IPU and direction (B/s); see targets' notes."
    )
    host_link_sustained_bytes_per_s: float | None = Field(
        None,
        gt=0,
        description="Sustained host-to-IPU rate per IPU that stream copies get (B/s), from a "
        "published measurement; None = the nominal host_link_bytes_per_s (profiles written "
        "before it existed). The machine's host links sustain the same share of their nominal "
        "rate.",
    )
    streaming_memory_bytes_per_s: float = Field(
        gt=0, description="Remote-buffer (streaming memory) bandwidth per IPU (B/s)."
    )
    streaming_memory_bytes: float = Field(gt=0, description="Streaming memory per IPU (bytes).")
    stream_buffer_max_bytes: int = Field(
        gt=0,
        description="Largest single data stream buffer (128 MB, Poplar and PopLibs User Guide).",
    )
    io_tile_overhead_fraction: float = Field(
        ge=0, lt=1, description="Share of an I/O tile taken by exchange code and buffers (5%)."
    )

    # -- the machine the chip sits in (IPU-M2000 / Bow-2000 / C2 card), shared by its IPUs ----
    machine_name: str = Field(description="The machine of 'ipus_per_machine' IPUs.")
    ipus_per_machine: int = Field(gt=0, description="IPUs per machine (4 per IPU-M2000).")
    machine_host_link_bytes_per_s: float = Field(
        gt=0,
        description="Host-link bandwidth of one machine, shared by its IPUs' streams (B/s).",
    )
    machine_streaming_memory_bytes_per_s: float = Field(
        gt=0,
        description="Streaming-memory bandwidth of one machine's gateway, shared by its IPUs.",
    )
    gw_link_bytes_per_s_per_machine: float = Field(
        ge=0, description="GW-Link bandwidth of one machine to other Pod64 racks (B/s)."
    )

    # -- code and descriptor sizes (assumptions; see docs/engine.md) ------------------------
    vertex_families: dict[str, VertexFamily] = Field(
        default_factory=_default_families,
        description="Code / state / field / vector-list bytes per codelet family (assumptions).",
    )
    control_code_bytes_per_program: int = Field(
        ge=0,
        description=(
            "Control code on every tile of an IPU per leaf program of that IPU (assumption: two "
            "32-bit instructions, 8 B, for the call / sync every tile executes)."
        ),
    )
    control_code_bytes_per_participation: int = Field(
        ge=0,
        description=(
            "Extra control code per leaf program on a tile that has vertices or exchange in it "
            "(assumption: four 32-bit instructions, 16 B: set up and run the compute set)."
        ),
    )
    control_table_bytes_per_program: int = Field(
        ge=0, description="Control table entry per leaf program on every tile (assumption: 4 B)."
    )
    control_id_bytes_per_program: int = Field(
        ge=0, description="Control id per compute set a tile runs (assumption: 2 B)."
    )
    copy_descriptor_bytes_per_copy: int = Field(
        ge=0, description="Copy descriptor per rearrangement copy per tile (assumption: 16 B)."
    )
    exchange_code_base_bytes: int = Field(
        ge=0, description="Internal exchange code per exchange per participating tile (assumption)."
    )
    exchange_code_bytes_per_instruction: int = Field(
        gt=0, description="Bytes of one exchange instruction (32-bit ISA: 4)."
    )
    exchange_bytes_per_instruction: int = Field(
        gt=0,
        description=(
            "Payload bytes covered by one exchange instruction on average (assumption: 1 KiB: "
            "one instruction streams one contiguous region, and PopLibs lays operands out in "
            "blocks of whole AMP channel groups, so regions of about a kilobyte are typical)."
        ),
    )
    host_exchange_code_base_bytes: int = Field(
        ge=0, description="Host exchange code per stream copy per receiving tile (assumption)."
    )
    global_exchange_code_bytes_per_transfer: int = Field(
        ge=0,
        description=(
            "Global exchange code per tile per cross-IPU / cross-replica transfer program "
            "(assumption: 192 B: the send / receive sequence and its sync)."
        ),
    )
    packet_payload_bytes: int = Field(
        gt=0, description="Payload per host / global exchange packet (assumption: 256 B)."
    )
    packet_header_bytes: int = Field(ge=0, description="Header bytes per packet (assumption: 8).")
    host_read_request_bytes: int = Field(
        0,
        ge=0,
        description="Bytes each receiving tile sends towards the host per host-to-device stream "
        "copy: the read request the tile issues for its data (Graphcore's patents on the "
        "external exchange: tiles send read requests for data in external storage). Its size is "
        "published nowhere: fitted to the walkthrough's published figures (12 B: IPU 0's "
        "StreamCopy Tx of 17.25 KiB per micro-batch over its 1,472 receiving tiles). 0 in "
        "profiles written before it existed.",
    )
    instrumentation_bytes_per_program: int = Field(
        ge=0, description="Cycle-count result per instrumented program per tile (64-bit: 8 B)."
    )
    stack_bytes_per_tile: int = Field(
        ge=0,
        description="Supervisor + worker stacks per tile (assumption: 256 B + 6 x 128 B = 1 KiB).",
    )
    constant_bytes_per_op_tile: int = Field(
        ge=0, description="Constants (scales, epsilons) per operation per tile (assumption: 8 B)."
    )
    variable_alignment_gap_bytes: int = Field(
        ge=0,
        description=(
            "Mean alignment gap per variable per tile (assumption: 8-byte alignment of 64-bit "
            "loads wastes 4 B on average)."
        ),
    )
    min_bytes_per_tile: int = Field(
        gt=0,
        description=(
            "Smallest slice of a linearly mapped tensor per tile (assumption: 256 B; below it "
            "the per-vertex overhead dominates, so PopLibs mappings use fewer tiles)."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> Target:
        if self.non_interleaved_bytes_per_tile > self.sram_per_tile:
            raise ValueError("non_interleaved_bytes_per_tile must not exceed sram_per_tile")
        if not (self.amp_macs_float <= self.amp_macs_half_float <= self.amp_macs_half_half):
            raise ValueError(
                "AMP rates must satisfy amp_macs_float <= amp_macs_half_float <= amp_macs_half_half"
            )
        for key in ("amp", "reduce", "elementwise", "copy", "optimiser"):
            if key not in self.vertex_families:
                raise ValueError(f"vertex_families must define {key!r}")
        return self

    # -- derived figures ---------------------------------------------------------------------
    @property
    def sram_per_ipu(self) -> int:
        """Bytes of SRAM on one IPU."""
        return self.sram_per_tile * self.tiles_per_ipu

    def peak_flops(self, dtype: str = "float16", partials: str = "float16") -> float:
        """Peak FLOP/s of one IPU (2 FLOPs per MAC) for the operand / partials types."""
        return 2.0 * self.amp_rate(dtype, partials) * self.tiles_per_ipu * self.clock_hz

    def amp_rate(self, dtype: str, partials: str) -> int:
        """AMP MACs per cycle per tile for an operand dtype and partials dtype."""
        if dtype == "float32":
            return self.amp_macs_float
        return self.amp_macs_half_half if partials == "float16" else self.amp_macs_half_float

    def external_sync_cycles(self, num_ipus: int) -> int:
        """External sync across ``num_ipus`` IPUs (the hop formula of PopLibs' test utilities), in cycles."""
        hops = 1 + (num_ipus // 2) // 2  # integer halvings, as in the PopLibs utility
        return round(2 * hops * self.external_sync_seconds_per_hop * self.clock_hz)

    def to_dict(self) -> dict[str, Any]:
        """The target as plain data (stored as ``/meta@target``)."""
        return self.model_dump(mode="json")


def _load_chips() -> dict[str, dict[str, Any]]:
    """The chips of ``engine/data/chips.toml``: each chip's table over the ``[common]`` one."""
    text = resources.files("engine").joinpath("data/chips.toml").read_text("utf-8")
    return resolve_chips(tomllib.loads(text))


#: The fields that say which chip a table is: a chip over a base gives its own.
CHIP_IDENTITY = ("name", "display_name")


def resolve_chips(raw: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each chip table of ``raw`` (chips.toml's layout) over its ``base`` chip's resolved fields
    (``base = "mk2"``: only what differs is written, but its own :data:`CHIP_IDENTITY`), else
    over the ``[common]`` table; a table's ``name`` is its key."""
    raw = dict(raw)
    common = raw.pop("common", {})
    out: dict[str, dict[str, Any]] = {}

    def resolve(name: str, seen: tuple[str, ...]) -> dict[str, Any]:
        if name in out:
            return out[name]
        if name in seen:
            raise ValueError(f"chips.toml: the bases of {seen[0]!r} go round in a circle")
        table = dict(raw[name])
        base = table.pop("base", None)
        if base is not None and base not in raw:
            raise ValueError(f"chips.toml: [{name}] has base {base!r}, which is not a chip")
        under = common if base is None else resolve(base, (*seen, name))
        # a chip over a base says which chip it is: inheriting the base's name or product name
        # would write profiles of this chip under the base's name (`--target` would still pick
        # this chip's figures)
        inherited = [k for k in CHIP_IDENTITY if k in under and k not in table]
        if base is not None and inherited:
            raise ValueError(
                f"chips.toml: [{name}] must give its own {' and '.join(inherited)} (it would "
                f"take {under[inherited[0]]!r} from its base {base!r})"
            )
        if "name" in table and table["name"] != name:
            raise ValueError(
                f"chips.toml: [{name}] has name {table['name']!r}; a chip's name is its table's"
            )
        out[name] = {**under, **table}
        return out[name]

    for name in raw:
        resolve(name, ())
    return {name: out[name] for name in raw}


#: The built-in targets, by short name (engine/data/chips.toml; sources per figure there).
TARGETS: dict[str, dict[str, Any]] = _load_chips()

#: Accepted spellings of target names -> short name: every chip's own short name (its table in
#: chips.toml, so a new chip needs nothing here) and these other spellings.
ALIASES: dict[str, str] = {name: name for name in TARGETS} | {
    "gc2": "mk1",
    "mk1 gc2": "mk1",
    "ipu1": "mk1",
    "gc200": "mk2",
    "mk2 gc200": "mk2",
    "ipu2": "mk2",
    "bow-2000": "bow",
    "ipu21": "bow",
}

TARGET_NAMES: tuple[str, ...] = tuple(TARGETS)


def canonical_name(name: str) -> str:
    """The short name ('mk1', 'mk2', 'bow') of a target spelling, or raise TargetError."""
    key = str(name).strip().lower()
    if key not in ALIASES:
        raise TargetError(
            f"target: unknown target {name!r}; allowed values are {', '.join(TARGET_NAMES)} "
            "(or GC2, GC200, Bow-2000)."
        )
    return ALIASES[key]


def get_target(name: str = "mk2", overrides: dict[str, Any] | None = None) -> Target:
    """Build (and validate) a target by name, with optional parameter overrides."""
    base = dict(TARGETS[canonical_name(name)])
    for key, value in (overrides or {}).items():
        if key not in Target.model_fields:
            import difflib

            near = difflib.get_close_matches(str(key), list(Target.model_fields), n=3)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise TargetError(
                f"target_overrides: {key!r} is not a target parameter{hint}; the parameters are "
                "listed in docs/engine.md."
            )
        if key in ("name", "display_name", "architecture"):
            raise TargetError(f"target_overrides: {key!r} cannot be overridden; pick the target.")
        base[key] = value
    try:
        return Target(**base)
    except ValidationError as exc:
        raise TargetError(f"target_overrides: {first_problem(exc, 'target')}.") from None


__all__ = [
    "ALIASES",
    "TARGETS",
    "TARGET_NAMES",
    "Target",
    "VertexFamily",
    "canonical_name",
    "get_target",
]
