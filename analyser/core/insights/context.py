"""What the insight rules share: :class:`Context` (the analysis and the thresholds a rule reads;
run options by their ``engine.config.RunConfig`` field names), and helpers used by both the
memory and the throughput rules (severity, evidence, the FP16 change, pipeline split moves).

The rules themselves live in :mod:`~analyser.core.insights.memory_rules` and
:mod:`~analyser.core.insights.throughput_rules`, registered in
:mod:`~analyser.core.insights.registry`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.core.insights.model import Evidence, Insight, finding
from analyser.core.insights.thresholds import Thresholds
from analyser.core.operations import operation_memory_bytes, operation_totals
from analyser.core.units import fmt_bytes, fmt_pct
from engine.config import RunConfig
from profiles import schema

if TYPE_CHECKING:  # the rules read an Analysis; importing it would make a loop
    from analyser.core.analysis import Analysis
    from analyser.core.execution import ExecutionSummary

#: Every run option (``engine.config.RunConfig`` field): what :meth:`Context.cfg` may read and a
#: rule's change may set (a test checks the rules use no other name).
RUN_OPTIONS: frozenset[str] = frozenset(RunConfig.model_fields)


@dataclass
class Context:
    """What every rule reads: the analysis of the profile and the thresholds in force."""

    analysis: Analysis
    thresholds: Thresholds
    #: the numpy columns read so far (:meth:`op_column`, :meth:`var_column`)
    _columns: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def execution(self) -> ExecutionSummary:
        """The run's execution summary, for the throughput rules: find_insights runs them only
        on a profile that executed (an out-of-memory one has none)."""
        ex = self.analysis.execution
        if ex is None:
            raise ValueError(f"{self.analysis.path}: no execution (out of memory)")
        return ex

    # tables as numpy columns: the rules need no pandas (`analyse insights` does not import it)
    @property
    def n_ops(self) -> int:
        """The number of operations (rows of /graph/operations)."""
        src = self.analysis.src
        return src.n_rows("/graph/operations") if src.has("/graph/operations") else 0

    def has_op_column(self, name: str) -> bool:
        """Whether the operations table has column ``name`` (the profile may predate it)."""
        return name in ("total_cycles", "memory_bytes") or self.analysis.src.has(
            f"/graph/operations/{name}"
        )

    def op_sources(self) -> np.ndarray:
        """Where in the model's code each operation comes from ('mynet.py:42 in Bottleneck',
        /graph/operations ``source``; '' for every operation of a profile that has none)."""
        if self.has_op_column("source"):
            raw = self.op_column("source")
            return np.array(
                [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in raw],
                dtype=object,
            )
        return np.full(self.n_ops, "", dtype=object)

    def op_column(self, name: str) -> np.ndarray:
        """Column ``name`` of the operations table (``Analysis.operations``) as numpy: a column
        of /graph/operations (``pass`` as its code in ``profiles.schema.PASSES``), or
        ``total_cycles`` / ``memory_bytes`` (:mod:`analyser.core.operations`)."""
        key = f"op:{name}"
        if key not in self._columns:
            a, n = self.analysis, self.n_ops
            if name == "total_cycles":
                self._columns[key] = operation_totals(a.src, a.execution, n)[0]
            elif name == "memory_bytes":
                self._columns[key] = operation_memory_bytes(a.src, n)
            else:
                self._columns[key] = a.src.column("/graph/operations", name)
        return self._columns[key]

    def var_column(self, name: str) -> np.ndarray:
        """Column ``name`` of /graph/variables (``Analysis.variables``) as numpy (``kind`` as its
        code in ``profiles.schema.VARIABLE_KINDS``)."""
        key = f"var:{name}"
        if key not in self._columns:
            self._columns[key] = self.analysis.src.column("/graph/variables", name)
        return self._columns[key]

    def program_column(self, name: str) -> np.ndarray:
        """Column ``name`` of /programs/nodes as numpy (``type`` as its code in
        ``profiles.schema.PROGRAM_TYPES``)."""
        key = f"program:{name}"
        if key not in self._columns:
            self._columns[key] = self.analysis.src.column("/programs/nodes", name)
        return self._columns[key]

    def of_kind(self, kind: str) -> np.ndarray:
        """Which variables are of ``kind`` (a name of ``profiles.schema.VARIABLE_KINDS``)."""
        codes = self.var_column("kind")
        if kind not in schema.VARIABLE_KINDS:
            return np.zeros(codes.shape, bool)
        return codes == schema.VARIABLE_KINDS.index(kind)

    def cfg(self, option: str, default: Any = None) -> Any:
        """The profile's value of run option ``option`` (a RunConfig field, read from the typed
        :attr:`Analysis.options`), or ``default`` when the profile does not record it."""
        if option not in RUN_OPTIONS:
            raise ValueError(f"{option!r} is not a run option (engine.config.RunConfig field)")
        if option not in self.analysis.run_config:
            return default
        return getattr(self.analysis.options, option)

    def has(self, key: str) -> bool:
        """Whether the run config has option ``key``."""
        return self.cfg(key, _MISSING) is not _MISSING

    @property
    def pipelined(self) -> bool:
        """Whether the run is pipelined."""
        return str(self.cfg("strategy", "")).lower().startswith("pipe")

    @property
    def n_stages(self) -> int:
        """The number of pipeline stages (1 when not pipelined)."""
        ex = self.analysis.execution
        if ex is not None and ex.stage_cycles.size:
            return int(ex.stage_cycles.size)
        stage = self.op_column("stage") if self.n_ops else np.zeros(0, np.int64)
        return int(stage.max()) + 1 if stage.size else 1

    # memory by variable kind -------------------------------------------------------------------
    def kind_bytes(self, kind: str, ipu: int | None = None) -> int:
        """Bytes of the variables of ``kind`` (on ``ipu``, or on every IPU)."""
        m = self.of_kind(kind)
        if ipu is not None:
            m &= self.var_column("ipu") == ipu
        return int(self.var_column("bytes")[m].sum())

    def kind_remote_bytes(self, kind: str) -> int:
        """Bytes of the variables of ``kind`` held in remote buffers."""
        return int(self.var_column("remote_bytes")[self.of_kind(kind)].sum())

    @property
    def optimiser_state_share(self) -> float:
        """On-chip optimiser state's share of the peak memory (what the optimiser tips weigh)."""
        return self.kind_bytes("optimiserState") / (self.analysis.memory.peak_memory_bytes or 1)

    @property
    def fullest_ipu(self) -> int:
        """The IPU with the most memory used."""
        return int(np.argmax(self.analysis.memory.ipu_total()))

    def loader_wait(self) -> tuple[int, float, float]:
        """(IPU, share of the run, fixed overhead cycles): the host wait a data loader can hide,
        i.e. StreamCopyBegin minus the host calls' fixed round-trip overhead (host model)."""
        ex = self.analysis.execution
        if ex is None:  # out of memory: no run, nothing for a loader to hide
            return 0, 0.0, 0.0
        # StreamCopyBegin in the device trace plus the host time outside it (format 1.2), over
        # the host-inclusive time: what a data loader can hide is judged on what the user sees
        wait = ex.host_wait_cycles.astype(float) + ex.host_exposed_cycles
        overhead = self.cfg("host_call_overhead_us")
        fixed = 0.0
        if overhead is not None:
            fixed = ex.host_round_trips * float(overhead) * 1e-6 * ex.clock_hz
        loader = np.maximum(0.0, wait - fixed)
        i = int(np.argmax(loader))
        span = ex.host_inclusive_cycles or ex.total_cycles or 1
        return i, float(loader[i]) / float(span), fixed

    @property
    def device_share(self) -> float:
        """The device trace's share of the host-inclusive time (1 before profile format 1.2)."""
        ex = self.analysis.execution
        if ex is None or not ex.host_inclusive_cycles or not ex.total_cycles:
            return 1.0
        return min(1.0, float(ex.total_cycles) / float(ex.host_inclusive_cycles))

    @property
    def offloaded(self) -> bool:
        """Optimiser state in remote buffers ('auto' means on when pipelined, as in Poplar)."""
        v = self.cfg("offload_optimiser_state", "auto")
        if isinstance(v, bool):
            return v
        return v == "on" or (v == "auto" and self.pipelined)

    @property
    def memory_pressure(self) -> bool:
        """Whether the program is out of memory or its headroom is under the threshold."""
        m = self.analysis.memory
        return (not m.fits) or m.headroom_share < self.thresholds.memory_headroom

    def fullest_tile_where(self) -> str:
        """Where to look at the fullest tile ('Memory Report > IPU 0 tile 12')."""
        top = self.analysis.memory.top_tiles
        if not top:
            return "Memory Report"
        return f"Memory Report > IPU {top[0].ipu} tile {top[0].tile}"


_MISSING = object()


def memory_severity(ctx: Context) -> str:
    """Critical when out of memory; info when the program fits with little headroom (a memory
    tip then frees memory at some cost in throughput: lower priority than throughput tips)."""
    return "critical" if not ctx.analysis.memory.fits else "info"


def compute_share(ctx: Context) -> float:
    """Share of the run in compute (OnTileExecute) on the busiest IPU."""
    ex = ctx.analysis.execution
    if ex is None:  # out of memory: no run
        return 0.0
    ote = schema.PROGRAM_TYPES.index("OnTileExecute")
    return float(ex.cycles_by_type[:, ote].max()) / float(ex.total_cycles or 1)


def memory_evidence(ctx: Context, message: str, where: str) -> list[Evidence]:
    """The fullest tile's state (out of memory, or its headroom), then the tip's own evidence."""
    m = ctx.analysis.memory
    ev = []
    if not m.fits:
        per = m.oom_tiles_per_ipu()
        ipus = ", ".join(f"IPU {i}: {int(n):,}" for i, n in enumerate(per) if n)
        ev.append(
            Evidence(
                f"{m.n_oom_tiles:,} tiles out of memory ({ipus}); the fullest tile "
                f"needs {fmt_bytes(m.max_tile_bytes)} of {fmt_bytes(m.sram_per_tile)}.",
                ctx.fullest_tile_where(),
            )
        )
    else:
        ev.append(
            Evidence(
                f"the fullest tile has {fmt_pct(m.headroom_share)} of its SRAM free "
                f"({fmt_bytes(m.headroom_bytes)}).",
                ctx.fullest_tile_where(),
            )
        )
    ev.append(Evidence(message, where))
    return ev


def memory_finding(
    ctx: Context,
    title: str,
    summary: str,
    evidence: tuple[str, str],
    change: dict[str, Any],
    trade_off: str,
) -> Insight:
    """A memory rule's insight: severity by :func:`memory_severity`, the fullest tile's state
    (:func:`memory_evidence`) before the rule's own ``evidence`` (message, where to look)."""
    return finding(
        title, memory_severity(ctx), summary, memory_evidence(ctx, *evidence), change, trade_off
    )


# ---------------------------------------------------------------------------------------------
# Memory (ranked as the IPU memory guide ranks them; FP16 first when the model runs in FP32)
# ---------------------------------------------------------------------------------------------


#: Static loss scale recommended with FP16 when training runs without one: 128 (2**7) is the
#: conventional static value (a power of two, so scaling is exact in floating point) that keeps
#: small FP16 gradients above FP16's smallest normal value (6.1e-5) without overflowing its
#: maximum (65504) for typical losses; it is the value of walkthrough step 2 (2-half.toml).
FP16_LOSS_SCALING = 128.0


def fp16_change(ctx: Context) -> tuple[dict[str, Any], str]:
    """The FP16 run-config change and the loss-scaling part of its trade-off: training without
    loss scaling (``loss_scaling`` 1) gets the static scale :data:`FP16_LOSS_SCALING` too."""
    change: dict[str, Any] = {"precision": "16.16"}
    training = str(ctx.cfg("mode", "training")) == "training"
    current = float(ctx.cfg("loss_scaling", 1.0) or 1.0)
    if training and current == 1.0:
        change["loss_scaling"] = FP16_LOSS_SCALING
        return change, (
            f"FP16 gradients underflow without loss scaling, so the change sets a static loss "
            f"scale of {FP16_LOSS_SCALING:g} (a power of two, exact in FP16; the conventional "
            "static value): one more pass to unscale the gradients in the update."
        )
    if training:
        return change, f"Keeps the current loss scaling ({current:g})."
    return change, "Inference: no loss scaling needed."


#: An AMP codelet among the profile's vertex types, with its input and partials types
#: (PopLibs' vertex templates, ``poplin::ConvPartial1x1Out<half,float>``; PopVision lists the
#: same names).
_AMP_VERTEX = re.compile(r"^poplin::ConvPartial\w*<\s*(\w+)\s*,\s*(\w+)")
#: The Poplar type names of the templates as the profile's dtypes.
_POPLAR_DTYPE = {"half": "float16", "float": "float32"}
#: The framework's own call that sets half partials for matmuls and convolutions (what
#: ``partials_type = "half"`` stands for): PopTorch ``python/options.py``
#: ``_PrecisionOptions.setPartialsType`` (it sets PopART's ``partialsTypeMatMuls`` and
#: ``convolutionOptions["partialsType"]``); PopART ``willow/include/popart/sessionoptions.hpp``;
#: TensorFlow for the IPU ``IPUConfig.matmuls`` / ``.convolutions.poplar_options`` (earlier
#: SDKs: ``ipu.utils.set_matmul_options`` / ``set_convolution_options``).
HALF_PARTIALS_CALL = {
    "poptorch": "PopTorch: `opts.Precision.setPartialsType(torch.half)` (matmuls and convolutions)",
    "popart": 'PopART: `opts.partialsTypeMatMuls = "half"` and `opts.convolutionOptions = '
    '{"partialsType": "half"}`',
    "tensorflow": 'TensorFlow for the IPU: `cfg.matmuls.poplar_options["partialsType"] = '
    '"half"` and `cfg.convolutions.poplar_options["partialsType"] = "half"` (earlier SDKs: '
    "`ipu.utils.set_matmul_options` / `set_convolution_options` with the same option)",
}
_FRAMEWORK_NAME = {"poptorch": "PopTorch", "popart": "PopART", "tensorflow": "TensorFlow"}


@dataclass(frozen=True)
class AmpPartials:
    """The partials type of a run's FP16 matmuls and convolutions and where it was read."""

    #: ``float32`` or ``float16``
    dtype: str
    #: the sentence that says it (evidence), and where to look
    text: str
    where: str
    #: which programs run an FP16-input AMP compute set with float partials (None: the profile
    #: has no vertex types to tell)
    float_programs: np.ndarray | None = None


def amp_vertex_types(ctx: Context) -> list[tuple[int, str, str, str, int]]:
    """The AMP codelets among the profile's vertex types: (row, name, input dtype, partials
    dtype, instances), dtypes as ``float16`` / ``float32``; empty without the table."""
    src = ctx.analysis.src
    if not src.has("/graph/vertex_types"):
        return []
    names = src.column("/graph/vertex_types", "name")
    inst = src.column("/graph/vertex_types", "instances")
    out = []
    for row, (raw, n) in enumerate(zip(names.tolist(), inst.tolist(), strict=True)):
        name = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        m = _AMP_VERTEX.match(name)
        if m and m.group(1) in _POPLAR_DTYPE and m.group(2) in _POPLAR_DTYPE:
            out.append((row, name, _POPLAR_DTYPE[m.group(1)], _POPLAR_DTYPE[m.group(2)], int(n)))
    return out


def amp_partials(ctx: Context) -> AmpPartials | None:
    """The partials of the run's FP16 matmuls and convolutions (None when its operands are not
    FP16): read from the profile's AMP vertex types when it has them (what was compiled:
    ``ConvPartial1x1Out<half,float>`` is float partials), else from its run configuration
    resolved as the engine resolves it (``partials_type``; ``auto``: the framework's default,
    engine/data/frameworks.toml)."""
    if not str(ctx.cfg("precision", "")).startswith("16"):
        return None
    half_in = [v for v in amp_vertex_types(ctx) if v[2] == "float16"]
    if half_in:
        floats = [v for v in half_in if v[3] == "float32"]
        shown = floats or half_in
        names = "; ".join(f"{v[1]} ({v[4]:,} instances)" for v in shown)
        word = "float" if floats else "half"
        float_programs = None
        if ctx.analysis.src.has("/graph/compute_sets"):
            src = ctx.analysis.src
            vt = src.column("/graph/compute_sets", "vertex_type").astype(np.int64)
            prog = src.column("/graph/compute_sets", "program").astype(np.int64)
            n_prog = src.n_rows("/programs/nodes") if src.has("/programs/nodes") else 0
            hit = np.isin(vt, [v[0] for v in floats]) & (prog >= 0) & (prog < n_prog)
            float_programs = np.zeros(n_prog, bool)
            float_programs[prog[hit]] = True
        return AmpPartials(
            "float32" if floats else "float16",
            f"the FP16 matmuls and convolutions run {names}: {word} partials "
            "(the codelet's second template type).",
            "Memory Report > tile details > vertex types",
            float_programs,
        )
    # no AMP vertex types: the compile's own record (profile format 1.6) comes before the
    # run options, whose "auto" resolves by today's framework defaults, not the compile's
    recorded = ctx.analysis.src.meta.get("partials_type")
    if recorded in ("half", "float"):
        return AmpPartials(
            "float32" if recorded == "float" else "float16",
            f"the compile recorded {recorded} partials for its FP16 matmuls and convolutions.",
            "Summary > run configuration",
        )
    opts = ctx.analysis.options
    dtype = opts.partials_dtype
    word = "float" if dtype == "float32" else "half"
    how = f"partials_type {opts.partials_type!r}"
    if opts.partials_type == "auto":
        fw = _FRAMEWORK_NAME.get(str(opts.framework), str(opts.framework))
        how += f" ({fw}'s default for {opts.precision}: {word})"
    return AmpPartials(
        dtype,
        f"run configuration: precision {opts.precision}, {how}.",
        "Summary > run configuration",
    )


def amp_rate(ctx: Context, dtype: str, partials: str) -> float:
    """AMP multiply-accumulates per tile per cycle for operands ``dtype`` and ``partials``
    (``float16`` / ``float32``), from the profile's target (engine/data/chips.toml; Mk2: 64
    half-in half partials, 32 half-in float partials, 16 float: PopLibs ``getNumConvUnits``
    gives 16 conv units with half partials, 8 with float); the Mk2 figures when the target
    does not say."""
    key = (
        "amp_macs_float"
        if dtype == "float32"
        else "amp_macs_half_half"
        if partials == "float16"
        else "amp_macs_half_float"
    )
    mk2 = {"amp_macs_float": 16.0, "amp_macs_half_half": 64.0, "amp_macs_half_float": 32.0}
    try:
        value = float(ctx.analysis.target_config.get(key, mk2[key]))
    except (TypeError, ValueError):
        value = mk2[key]
    return value if value > 0 else mk2[key]


def fp16_partials(ctx: Context, change: dict[str, Any]) -> str:
    """The partials dtype (``float32`` / ``float16``) of the run after ``change`` (a change to
    FP16), as the engine resolves it: ``partials_type``, ``auto`` the framework's default."""
    updated = ctx.analysis.options.model_copy(
        update={k: v for k, v in change.items() if k in RUN_OPTIONS}
    )
    return updated.partials_dtype


def fp16_wording(ctx: Context, change: dict[str, Any]) -> tuple[str, str, float]:
    """How the FP16 tips say what their ``change`` does to matmuls and convolutions: (what
    it casts to FP16: 'weights and activations' or 'weights, activations and partials', a
    sentence on the partials, the AMP rate over FP32's)."""
    partials = fp16_partials(ctx, change)
    speed = amp_rate(ctx, "float16", partials) / amp_rate(ctx, "float32", "float32")
    if partials == "float16":
        return (
            "weights, activations and partials",
            f"matmuls and convolutions accumulate in half, at {speed:g}x the FP32 AMP rate.",
            speed,
        )
    fw = _FRAMEWORK_NAME.get(str(ctx.cfg("framework", "poptorch")), "the framework")
    half = amp_rate(ctx, "float16", "float16") / amp_rate(ctx, "float32", "float32")
    kept = (
        "the float partials the run sets (partials_type 'float')"
        if ctx.cfg("partials_type", "auto") == "float"
        else f"the float partials {fw} keeps unless they are set"
    )
    return (
        "weights and activations",
        f"matmuls and convolutions run at {speed:g}x the FP32 AMP rate with {kept} "
        f"({half:g}x with half partials: the tip 'Use half-precision partials' once the run is "
        "in FP16).",
        speed,
    )


def layer_order(ctx: Context) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Split-point candidates (block names) in forward order with their cycles and memory."""
    blocks = _op_blocks(ctx)
    order = list(dict.fromkeys(blocks[_forward(ctx)]))
    pos = _positions(blocks, order)
    ok = pos >= 0
    cyc = np.bincount(pos[ok], ctx.op_column("total_cycles")[ok].astype(float), len(order))
    mem = np.bincount(pos[ok], ctx.op_column("memory_bytes")[ok].astype(float), len(order))
    return order, cyc, mem


def _op_blocks(ctx: Context) -> np.ndarray:
    """The block (:func:`block_name`) of each operation's layer."""
    layers = ctx.op_column("layer") if ctx.n_ops else np.zeros(0, object)
    return np.array([block_name(str(x)) for x in layers.tolist()], dtype=object)


def _forward(ctx: Context) -> np.ndarray:
    """Which operations are of the forward pass."""
    if not ctx.n_ops:
        return np.zeros(0, bool)
    return ctx.op_column("pass") == schema.PASSES.index("forward")


def _positions(names: np.ndarray, order: list[str]) -> np.ndarray:
    """The index of each of ``names`` in ``order`` (-1 for a name not in it)."""
    index = {name: i for i, name in enumerate(order)}
    return np.array([index.get(x, -1) for x in names.tolist()], dtype=np.int64)


def _stage_and_ipu(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    if not ctx.n_ops:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return ctx.op_column("stage").astype(np.int64), ctx.op_column("ipu").astype(np.int64)


def stage_min_ipu(ctx: Context) -> np.ndarray:
    """Per pipeline stage that has operations, in stage order: the lowest IPU of its ops."""
    stage, ipu = _stage_and_ipu(ctx)
    stages, where = np.unique(stage, return_inverse=True)
    out = np.full(stages.size, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, where, ipu)
    return out


def stage_first_ipu(ctx: Context) -> dict[int, int]:
    """Per pipeline stage that has operations: the IPU of its first operation."""
    stage, ipu = _stage_and_ipu(ctx)
    stages, first = np.unique(stage, return_index=True)
    return dict(zip(stages.tolist(), ipu[first].tolist(), strict=True))


def block_name(layer: str) -> str:
    """'layer3.8.conv2' -> 'layer3.8'; 'encoder.layer.11.attn' -> 'encoder.layer.11'."""
    parts = layer.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[: i + 1])
    return parts[0]


def block_stages(ctx: Context, names: list[str]) -> np.ndarray:
    """Pipeline stage of each block (forward ops), in block order."""
    fwd = _forward(ctx)
    pos = _positions(_op_blocks(ctx)[fwd], names)
    ok = pos >= 0
    out = np.full(len(names), np.iinfo(np.int64).max, np.int64)
    if ok.any():
        np.minimum.at(out, pos[ok], ctx.op_column("stage")[fwd][ok].astype(np.int64))
    return np.where(out == np.iinfo(np.int64).max, 0, out)  # a block with no forward op: 0


def shift_split(
    ctx: Context, names: list[str], weights: np.ndarray, loads: np.ndarray
) -> list[str] | None:
    """Move the boundary between the most loaded stage and its lighter neighbour toward the
    loaded stage, by the blocks whose estimated load covers half the difference.

    ``weights`` estimate each block's load; they are scaled so a stage's blocks sum to its
    measured ``loads[stage]`` (memory of its IPU, or its cycles)."""
    stages = block_stages(ctx, names)
    n_st = int(stages.max()) + 1 if stages.size else 0
    if n_st < 2 or loads.size < n_st or len(names) < n_st:
        return None
    starts = [int(np.argmax(stages == s)) for s in range(n_st)]  # first block of each stage
    w = weights.astype(float).copy()
    for s in range(n_st):
        m = stages == s
        tot = w[m].sum()
        w[m] = w[m] * (loads[s] / tot) if tot > 0 else loads[s] / max(1, m.sum())
    f = int(np.argmax(loads[:n_st]))
    nbs = [x for x in (f - 1, f + 1) if 0 <= x < n_st]
    nb = min(nbs, key=lambda x: loads[x])
    excess = (loads[f] - loads[nb]) / 2
    if excess <= 0:
        return None
    if nb == f + 1:  # hand the last blocks of stage f to stage f + 1: boundary moves earlier
        b, acc, k = starts[f + 1], 0.0, starts[f + 1]
        while k - 1 > starts[f] and acc < excess:
            k -= 1
            acc += w[k]
        if k == b:
            return None
        starts[f + 1] = k
    else:  # hand the first blocks of stage f to stage f - 1: boundary moves later
        end = starts[f + 1] if f + 1 < n_st else len(names)
        b, acc, k = starts[f], 0.0, starts[f]
        while k + 1 < end and acc < excess:
            acc += w[k]
            k += 1
        if k == b:
            return None
        starts[f] = k
    return [names[i] for i in starts[1:]]
