"""The insight catalogue (/work/shared/brief/insights.md): one function per insight.

Each rule reads the analysis (never the raw file) and returns an :class:`Insight` or ``None``.
Run-config field names used in recommended changes live in :data:`F`, the one place that ties
the analyser to ``engine.config.RunConfig``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.core.insights.model import Evidence, Insight
from analyser.core.insights.thresholds import Thresholds
from analyser.core.units import fmt_bytes, fmt_int, fmt_pct
from profiles import schema

if TYPE_CHECKING:  # the rules read an Analysis; importing it would make a loop
    from analyser.core.analysis import Analysis

#: RunConfig field names (dotted for nested models) used by recommended changes.
F = {
    "precision": "precision",
    "micro_batch": "micro_batch_size",
    "ga": "gradient_accumulation",
    "di": "device_iterations",
    "replicas": "replication_factor",
    "strategy": "strategy",
    "schedule": "schedule",
    "splits": "split_points",
    "recompute": "recomputation",
    "checkpoints": "recompute_checkpoints",
    "amp": "available_memory_proportion",
    "offload": "offload_optimiser_state",
    "rts": "replicated_tensor_sharding",
    "io_tiles": "io_tiles",
    "prefetch": "prefetch_depth",
    "loss_scaling": "loss_scaling",
    "input8": "eight_bit_input",
    "loader": "loader_mode",
    "workers": "loader_workers",
    "optimiser": "optimiser",
    "call_overhead_us": "host_call_overhead_us",
    "stream_latency_us": "host_stream_latency_us",
    "normalise_ns": "host_normalise_ns_per_element",
    "preprocess_us": "host_preprocess_us_per_sample",
    "outlining": "outlining",
}


@dataclass
class Context:
    a: Analysis
    t: Thresholds

    def cfg(self, key: str, default: Any = None) -> Any:
        """Value of run-config field F[key] (dotted paths walk nested dicts)."""
        node: Any = self.a.run_config
        for part in F[key].split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def has(self, key: str) -> bool:
        return self.cfg(key, _MISSING) is not _MISSING

    @property
    def pipelined(self) -> bool:
        return str(self.cfg("strategy", "")).lower().startswith("pipe")

    @property
    def n_stages(self) -> int:
        ex = self.a.execution
        if ex is not None and ex.stage_cycles.size:
            return int(ex.stage_cycles.size)
        ops = self.a.operations
        return int(ops["stage"].max()) + 1 if len(ops) else 1

    # memory by variable kind -------------------------------------------------------------------
    def kind_bytes(self, kind: str, ipu: int | None = None) -> int:
        v = self.a.variables
        m = v["kind"] == kind
        if ipu is not None:
            m &= v["ipu"] == ipu
        return int(v.loc[m, "bytes"].sum())

    def kind_remote_bytes(self, kind: str) -> int:
        v = self.a.variables
        return int(v.loc[v["kind"] == kind, "remote_bytes"].sum())

    @property
    def fullest_ipu(self) -> int:
        return int(np.argmax(self.a.memory.ipu_total()))

    def loader_wait(self) -> tuple[int, float, float]:
        """(IPU, share of the run, fixed overhead cycles): the host wait a data loader can hide,
        i.e. StreamCopyBegin minus the host calls' fixed round-trip overhead (host model)."""
        ex = self.a.execution
        # StreamCopyBegin in the device trace plus the host time outside it (format 1.2), over
        # the host-inclusive time: what a data loader can hide is judged on what the user sees
        wait = ex.host_wait_cycles.astype(float) + ex.host_exposed_cycles
        overhead = self.cfg("call_overhead_us")
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
        ex = self.a.execution
        if ex is None or not ex.host_inclusive_cycles or not ex.total_cycles:
            return 1.0
        return min(1.0, float(ex.total_cycles) / float(ex.host_inclusive_cycles))

    @property
    def offloaded(self) -> bool:
        """Optimiser state in remote buffers ('auto' means on when pipelined, as in Poplar)."""
        v = self.cfg("offload", "auto")
        if isinstance(v, bool):
            return v
        return v == "on" or (v == "auto" and self.pipelined)

    @property
    def memory_pressure(self) -> bool:
        m = self.a.memory
        return (not m.fits) or m.headroom_share < self.t.memory_headroom

    def fullest_tile_where(self) -> str:
        top = self.a.memory.top_tiles
        if not top:
            return "Memory Report"
        return f"Memory Report > IPU {top[0].ipu} tile {top[0].tile}"


_MISSING = object()
Rule = Callable[[Context], Insight | None]


def _memory_severity(c: Context) -> str:
    """Critical when out of memory; info when the program fits with little headroom (a memory
    tip then frees memory at some cost in throughput: lower priority than throughput tips)."""
    return "critical" if not c.a.memory.fits else "info"


#: Throughput tips whose ``addresses`` is already a share of the host-inclusive time (host time
#: outside the device trace included); the others measure a share of the device trace, which
#: find_insights scales by the device's share of the host-inclusive time (Context.device_share).
HOST_INCLUSIVE = frozenset(
    {
        "throughput.async_loader",
        "throughput.loader_workers",
        "throughput.8bit_input",
        "throughput.prefetch",
        "throughput.device_iterations",
    }
)


def _addressing(share: float, tip: Insight) -> Insight:
    """Record on ``tip`` the share of the run its change can save at most (see Insight)."""
    tip.addresses = float(min(1.0, max(0.0, share)))
    return tip


def _compute_share(c: Context) -> float:
    """Share of the run in compute (OnTileExecute) on the busiest IPU."""
    ex = c.a.execution
    ote = schema.PROGRAM_TYPES.index("OnTileExecute")
    return float(ex.cycles_by_type[:, ote].max()) / float(ex.total_cycles or 1)


def _memory_evidence(c: Context, message: str, where: str) -> list[Evidence]:
    """The fullest tile's state (out of memory, or its headroom), then the tip's own evidence."""
    m = c.a.memory
    ev = []
    if not m.fits:
        per = m.oom_tiles_per_ipu()
        ipus = ", ".join(f"IPU {i}: {int(n):,}" for i, n in enumerate(per) if n)
        ev.append(
            Evidence(
                f"{m.n_oom_tiles:,} tiles out of memory ({ipus}); the fullest tile "
                f"needs {fmt_bytes(m.max_tile_bytes)} of {fmt_bytes(m.sram_per_tile)}.",
                c.fullest_tile_where(),
            )
        )
    else:
        ev.append(
            Evidence(
                f"the fullest tile has {fmt_pct(m.headroom_share)} of its SRAM free "
                f"({fmt_bytes(m.headroom_bytes)}).",
                c.fullest_tile_where(),
            )
        )
    ev.append(Evidence(message, where))
    return ev


# ---------------------------------------------------------------------------------------------
# Memory (ranked as the IPU memory guide ranks them; FP16 first when the model runs in FP32)
# ---------------------------------------------------------------------------------------------


#: Static loss scale recommended with FP16 when training runs without one: 128 (2**7) is the
#: conventional static value (a power of two, so scaling is exact in floating point) that keeps
#: small FP16 gradients above FP16's smallest normal value (6.1e-5) without overflowing its
#: maximum (65504) for typical losses; it is the value of walkthrough step 2 (2-half.toml).
FP16_LOSS_SCALING = 128.0


def _fp16_change(c: Context) -> tuple[dict[str, Any], str]:
    """The FP16 run-config change and the loss-scaling part of its trade-off: training without
    loss scaling (``loss_scaling`` 1) gets the static scale :data:`FP16_LOSS_SCALING` too."""
    change: dict[str, Any] = {F["precision"]: "16.16"}
    training = str(c.a.run_config.get("mode", "training")) == "training"
    current = float(c.cfg("loss_scaling", 1.0) or 1.0)
    if training and current == 1.0:
        change[F["loss_scaling"]] = FP16_LOSS_SCALING
        return change, (
            f"FP16 gradients underflow without loss scaling, so the change sets a static loss "
            f"scale of {FP16_LOSS_SCALING:g} (a power of two, exact in FP16; the conventional "
            "static value): one more pass to unscale the gradients in the update."
        )
    if training:
        return change, f"Keeps the current loss scaling ({current:g})."
    return change, "Inference: no loss scaling needed."


def use_fp16(c: Context) -> Insight | None:
    prec = str(c.cfg("precision", ""))
    if not c.memory_pressure or not prec.startswith("32"):
        return None
    w = c.kind_bytes("weight") + c.kind_bytes("activation") + c.kind_bytes("gradient")
    change, scaling = _fp16_change(c)
    ev = _memory_evidence(
        c,
        f"precision {prec}: weights, activations and gradients hold {fmt_bytes(w)} in FP32.",
        "Memory Report > Variables",
    )
    return Insight(
        "memory.fp16",
        "Use FP16 (weights, activations and partials)",
        _memory_severity(c),
        "memory",
        "Running the model in FP16 halves the memory of weights, activations and gradients and "
        "doubles the AMP rate of matmuls and convolutions.",
        ev,
        change,
        f"Lower numerical range. {scaling} FP32 master weights or FP32 second moments may still "
        "be needed where the optimiser is sensitive.",
    )


def reduce_micro_batch(c: Context) -> Insight | None:
    mb = int(c.cfg("micro_batch", 0) or 0)
    if not c.memory_pressure or mb < 2:
        return None
    ga = int(c.cfg("ga", 1) or 1)
    act = c.kind_bytes("activation") + c.kind_bytes("stash")
    ev = _memory_evidence(
        c,
        f"micro-batch {mb}: activations and stashes hold {fmt_bytes(act)}.",
        "Liveness Report > peak step",
    )
    return Insight(
        "memory.micro_batch",
        "Reduce the micro-batch size, raise gradient accumulation",
        _memory_severity(c),
        "memory",
        f"Halving the micro-batch ({mb} to {mb // 2}) halves activation memory; doubling gradient "
        f"accumulation ({ga} to {ga * 2}) keeps the global batch size.",
        ev,
        {F["micro_batch"]: mb // 2, F["ga"]: ga * 2},
        "Smaller matmuls use the tiles less efficiently; more micro-batches per step.",
    )


def recomputation(c: Context) -> Insight | None:
    rc = c.cfg("recompute", "off")
    if not c.memory_pressure or (rc not in (None, "off", False, "none")):
        return None
    act = c.kind_bytes("activation") + c.kind_bytes("stash")
    if act == 0:
        return None
    if c.pipelined:
        change: dict[str, Any] = {F["recompute"]: "pipeline-stages"}
    else:
        names, _, _ = _layer_order(c)
        k = max(1, int(math.sqrt(len(names))))
        points = names[k - 1 :: k][:-1] or names[:1]
        change = {F["recompute"]: "checkpoints", F["checkpoints"]: points}
    ev = _memory_evidence(
        c,
        f"activations and stashes kept for the backward pass: {fmt_bytes(act)}.",
        "Liveness Report",
    )
    return Insight(
        "memory.recompute",
        "Recompute activations in the backward pass",
        _memory_severity(c),
        "memory",
        "Recomputation keeps only checkpoint activations and recomputes the rest in the backward "
        + ("pass of each pipeline stage." if c.pipelined else "pass."),
        ev,
        change,
        "Extra forward cycles (up to one more forward pass).",
    )


def lower_amp(c: Context) -> Insight | None:
    if not c.memory_pressure:
        return None
    ops = c.a.operations
    if not len(ops) or "temp_bytes" not in ops:
        return None
    ipu = c.fullest_ipu
    on = ops[ops["ipu"] == ipu]
    peak_temp = int(on["temp_bytes"].max()) if len(on) else 0
    ipu_mem = int(c.a.memory.ipu_total()[ipu]) or 1
    if peak_temp / ipu_mem < c.t.temporary_share:
        return None
    amp = float(
        c.cfg("amp", None) or c.a.target_config.get("available_memory_proportion", 0.6) or 0.6
    )
    new = round(max(0.1, amp / 2), 2)
    worst = on.nlargest(3, "temp_bytes")
    names = ", ".join(f"{n} ({fmt_bytes(b)})" for n, b in zip(worst["name"], worst["temp_bytes"]))
    ev = _memory_evidence(
        c, f"largest temporary memory on IPU {ipu}: {names}.", "Operations > temp memory"
    )
    return Insight(
        "memory.available_memory_proportion",
        "Lower the available memory proportion of the ops with the largest temporaries",
        _memory_severity(c),
        "memory",
        f"Planning matmuls / convolutions with {new} instead of {amp} of tile memory for "
        "temporaries forces more serial splits and lowers their peak.",
        ev,
        {F["amp"]: new},
        "More serial splits: more cycles for those operations.",
    )


def offload_optimiser(c: Context) -> Insight | None:
    if not c.memory_pressure or c.offloaded:
        return None
    st = c.kind_bytes("optimiserState")
    peak = c.a.memory.peak_memory_bytes or 1
    if st / peak < c.t.optimiser_state_share:
        return None
    ev = _memory_evidence(
        c,
        f"optimiser state on chip: {fmt_bytes(st)} ({fmt_pct(st / peak)} of the memory).",
        "Memory Report > Variables (optimiserState)",
    )
    return Insight(
        "memory.offload",
        "Offload optimiser state to remote buffers",
        _memory_severity(c),
        "memory",
        "Optimiser state only takes part in the weight update; keeping it in streaming memory "
        "frees its tile memory.",
        ev,
        {F["offload"]: "on"},
        "Each weight update streams the state in and out (StreamCopyMid to remote buffers).",
    )


def interleaved_schedule(c: Context) -> Insight | None:
    if not c.memory_pressure or not c.pipelined:
        return None
    if str(c.cfg("schedule", "grouped")).lower() != "grouped":
        return None
    # stashes live on the earlier stages' IPUs: take the IPU where they weigh the most
    totals = c.a.memory.ipu_total()
    shares = [c.kind_bytes("stash", i) / (int(totals[i]) or 1) for i in range(totals.size)]
    ipu = int(np.argmax(shares))
    st = c.kind_bytes("stash", ipu)
    mem = int(totals[ipu]) or 1
    if st / mem < c.t.stash_share:
        return None
    ev = _memory_evidence(
        c,
        f"pipeline stashes on IPU {ipu}: {fmt_bytes(st)} ({fmt_pct(st / mem)}).",
        "Memory Report > Variables (stash)",
    )
    return Insight(
        "memory.interleaved",
        "Use the interleaved pipeline schedule",
        _memory_severity(c),
        "memory",
        "Interleaved keeps S-1-s stashed activations on stage s instead of 2(S-1-s) (grouped).",
        ev,
        {F["schedule"]: "interleaved"},
        "Slower when the backward pass is longer than the forward pass.",
    )


def replicated_sharding(c: Context) -> Insight | None:
    reps = int(c.cfg("replicas", 1) or 1)
    if not c.memory_pressure or reps < 2 or c.cfg("rts", False):
        return None
    st = c.kind_bytes("optimiserState")
    peak = c.a.memory.peak_memory_bytes or 1
    if st / peak < c.t.optimiser_state_share:
        return None
    ev = _memory_evidence(
        c,
        f"optimiser state: {fmt_bytes(st)} per replica, {reps} replicas.",
        "Memory Report > Variables",
    )
    return Insight(
        "memory.rts",
        "Shard optimiser state across replicas",
        _memory_severity(c),
        "memory",
        f"Replicated tensor sharding keeps 1/{reps} of the optimiser state on each replica.",
        ev,
        {F["rts"]: True},
        "Extra collectives (reduce-scatter / all-gather) at each weight update.",
    )


def _layer_order(c: Context) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Split-point candidates (block names) in forward order with their cycles and memory."""
    ops = c.a.operations
    fwd = ops[ops["pass"] == "forward"]
    blocks = fwd["layer"].astype(str).map(_block_name)
    order = list(dict.fromkeys(blocks))
    allb = ops["layer"].astype(str).map(_block_name)
    cyc = ops.groupby(allb)["total_cycles"].sum().reindex(order).fillna(0).to_numpy(float)
    mem = ops.groupby(allb)["memory_bytes"].sum().reindex(order).fillna(0).to_numpy(float)
    return order, cyc, mem


def _block_name(layer: str) -> str:
    """'layer3.8.conv2' -> 'layer3.8'; 'encoder.layer.11.attn' -> 'encoder.layer.11'."""
    parts = layer.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[: i + 1])
    return parts[0]


def _block_stages(c: Context, names: list[str]) -> np.ndarray:
    """Pipeline stage of each block (forward ops), in block order."""
    ops = c.a.operations
    fwd = ops[ops["pass"] == "forward"]
    stage = fwd.groupby(fwd["layer"].astype(str).map(_block_name))["stage"].min()
    return stage.reindex(names).fillna(0).to_numpy(np.int64)


def _shift_split(
    c: Context, names: list[str], weights: np.ndarray, loads: np.ndarray
) -> list[str] | None:
    """Move the boundary between the most loaded stage and its lighter neighbour toward the
    loaded stage, by the blocks whose estimated load covers half the difference.

    ``weights`` estimate each block's load; they are scaled so a stage's blocks sum to its
    measured ``loads[stage]`` (memory of its IPU, or its cycles)."""
    stages = _block_stages(c, names)
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


def move_split_memory(c: Context) -> Insight | None:
    if not c.memory_pressure or not c.pipelined:
        return None
    tot = c.a.memory.ipu_total().astype(float)
    if tot.size < 2 or tot.min() <= 0 or tot.max() / tot.min() < c.t.ipu_memory_imbalance:
        return None
    names, _, mem = _layer_order(c)
    stage_ipu = c.a.operations.groupby("stage")["ipu"].min().sort_index().to_numpy()
    splits = _shift_split(c, names, mem, tot[stage_ipu]) if stage_ipu.size else None
    current = c.cfg("splits", [])
    if not splits or splits == list(current or []):
        return None
    ev = _memory_evidence(
        c,
        "memory per IPU: " + ", ".join(f"IPU {i}: {fmt_bytes(v)}" for i, v in enumerate(tot)) + ".",
        "Summary > Memory",
    )
    return Insight(
        "memory.move_split",
        "Move the pipeline split away from the fullest IPU",
        _memory_severity(c),
        "memory",
        f"Splitting at {', '.join(splits)} (now {', '.join(map(str, current or [])) or '-'}) "
        "balances the memory of the stages.",
        ev,
        {F["splits"]: splits},
        "Can unbalance the stages' cycles (pipeline throughput is bound by the longest stage).",
    )


def lighter_optimiser(c: Context) -> Insight | None:
    opt = str(c.cfg("optimiser", "")).lower()
    if not c.memory_pressure or not any(k in opt for k in ("adam", "lamb")):
        return None
    st = c.kind_bytes("optimiserState") + c.kind_remote_bytes("optimiserState")
    peak = c.a.memory.peak_memory_bytes or 1
    if c.kind_bytes("optimiserState") / peak < c.t.optimiser_state_share:
        return None
    ev = _memory_evidence(
        c,
        f"{opt} keeps two moments per weight: {fmt_bytes(st)} of state.",
        "Memory Report > Variables (optimiserState)",
    )
    return Insight(
        "memory.optimiser",
        "Use an optimiser with less state (SGD with momentum)",
        _memory_severity(c),
        "memory",
        "SGD with momentum keeps one buffer per weight instead of two.",
        ev,
        {F["optimiser"]: "sgd-momentum"},
        "Different convergence: learning-rate schedule and hyper-parameters must be retuned.",
    )


def outlining(c: Context) -> Insight | None:
    if not c.memory_pressure:
        return None
    m = c.a.memory
    code = m.code_bytes
    if code / (m.peak_memory_bytes or 1) < c.t.code_share:
        return None
    ev = _memory_evidence(
        c,
        f"code takes {fmt_bytes(code)} ({fmt_pct(code / m.peak_memory_bytes)} of the memory).",
        "Memory Report > by category (vertexCode, controlCode...)",
    )
    off = c.has("outlining") and not c.cfg("outlining", True)
    return Insight(
        "memory.outlining",
        "Reuse identical subgraphs (outlining)",
        _memory_severity(c),
        "memory",
        "Code dominates: outlining identical subgraphs shares their code between calls."
        + (
            ""
            if off
            else " Outlining is already on (or not a run option here): reuse more "
            "subgraphs by giving repeated layers identical shapes and settings."
        ),
        ev,
        {F["outlining"]: True} if off else {},
        "Call overhead and copies in and out of the outlined subgraph.",
    )


# ---------------------------------------------------------------------------------------------
# Throughput
# ---------------------------------------------------------------------------------------------

_D = {n: i for i, n in enumerate(schema.DESTINATIONS)}


def disable_offload(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None or not c.offloaded:
        return None
    rb = (ex.mid_rx_cycles_by_dest + ex.mid_tx_cycles_by_dest)[:, _D["remoteBuffer"]]
    i = int(np.argmax(rb))
    share = float(rb[i]) / float(ex.total_cycles or 1)
    if share < c.t.offload_share:
        return None
    # Would the state fit back on chip? Spread evenly over an IPU's tiles (the way the engine
    # maps weights), it adds remote bytes / tiles to every tile, the fullest included.
    m = c.a.memory
    v = c.a.variables
    remote = (
        v.groupby("ipu")["remote_bytes"].sum().reindex(range(m.num_ipus)).fillna(0).to_numpy(float)
    )
    est = m.tile_used.max(axis=1) + remote / max(1, m.tiles_per_ipu)
    full = np.flatnonzero(est > m.sram_per_tile)
    likely_oom = bool(full.size)
    return _addressing(
        0.0 if likely_oom else share,
        Insight(
            "throughput.disable_offload",
            "Disable variable offloading",
            "info" if likely_oom else "warning",
            "throughput",
            f"Streaming offloaded state to and from remote buffers takes {fmt_pct(share)} of the "
            "run; on-chip state avoids it if the model still fits (see the predicted effect)."
            + (
                f" It probably does not: spread over the tiles, the state would take IPU "
                f"{int(full[0])}'s fullest tile to about {fmt_bytes(est[full[0]])} of "
                f"{fmt_bytes(m.sram_per_tile)}; free memory first."
                if likely_oom
                else ""
            ),
            [
                Evidence(
                    f"StreamCopyMid to remote buffers on IPU {i}: {fmt_int(rb[i])} cycles "
                    f"({fmt_pct(share)}).",
                    "Execution Trace > StreamCopyMid (remoteBuffer)",
                ),
                Evidence(
                    f"remote-buffer bytes: {fmt_bytes(c.a.memory.remote_bytes)}.",
                    "Summary > Memory",
                ),
            ],
            {F["offload"]: "off"},
            "Optimiser state moves back onto the tiles (more memory).",
        ),
    )


def raise_ga(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None:
        return None
    ga = int(c.cfg("ga", 1) or 1)
    ps = ex.phase_share()
    ramp = ps["rampUp"] + ps["rampDown"] if c.pipelined else 0.0
    wu = ps["weightUpdate"]
    reps = int(c.cfg("replicas", 1) or 1)
    ge = schema.PROGRAM_TYPES.index("GlobalExchange")
    wu_i = schema.PHASES.index("weightUpdate")
    ar = (
        float(ex.cycles_by_type_phase[:, ge, wu_i].max()) / float(ex.total_cycles or 1)
        if reps > 1
        else 0.0
    )
    ev = []
    if ramp >= c.t.ramp_share:
        ev.append(
            Evidence(
                f"pipeline ramp-up + ramp-down take {fmt_pct(ramp)} of the run "
                f"(2(S-1)/(G+S-1) with S={c.n_stages}, G={ga}).",
                "Pipeline view",
            )
        )
    if wu >= c.t.weight_update_share:
        ev.append(
            Evidence(
                f"the weight update takes {fmt_pct(wu)} of the run.",
                "Pipeline view > weight update",
            )
        )
    if ar >= c.t.allreduce_share:
        ev.append(
            Evidence(
                f"the replica all-reduce takes {fmt_pct(ar)} of the run.",
                "Execution Trace > GlobalExchange (weight update)",
            )
        )
    if not ev:
        return None
    iid = (
        "throughput.allreduce"
        if ar >= c.t.allreduce_share and len(ev) == 1
        else "throughput.gradient_accumulation"
    )
    new = ga * 2
    return _addressing(
        (ramp + wu + ar) / 2,
        Insight(
            iid,
            "Raise gradient accumulation",
            "warning",
            "throughput",
            f"Accumulating {new} micro-batches per weight update instead of {ga} amortises the "
            "pipeline fill / flush, the weight update and the all-reduce over more samples.",
            ev,
            {F["ga"]: new},
            "Larger global batch (learning-rate schedule may need retuning); more accumulator use.",
        ),
    )


def raise_device_iterations(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None:
        return None
    di = int(c.cfg("di", 1) or 1)
    # Device iterations amortise what is paid once per host call: the fixed round-trip overhead
    # (and, for inference pipelines, the fill and flush). Host preparation scales with the
    # samples of the call, so it is the loader's business (async loader / 8-bit input), not DI's.
    overhead = c.cfg("call_overhead_us")
    if overhead is not None and ex.total_cycles:
        per_call = float(overhead) * 1e-6 * ex.clock_hz
        share = ex.host_round_trips * per_call / (ex.host_inclusive_cycles or ex.total_cycles)
        how = (
            f"{ex.host_round_trips:,} call(s) x {overhead} µs round-trip overhead = "
            f"{fmt_pct(share)} of the run"
        )
    else:  # a profile without the host model's parameters: the measured host-only time
        share = ex.phase_share()["host"]
        how = f"host phase {fmt_pct(share)} of the run"
    inference_pipeline = c.pipelined and c.a.run_config.get("mode") == "inference"
    if inference_pipeline:
        share += ex.ramp_share * c.device_share
        how += f"; pipeline fill + flush once per call: {fmt_pct(ex.ramp_share)}"
    if share < c.t.host_call_share:
        return None
    return _addressing(
        share * 3 / 4,
        Insight(
            "throughput.device_iterations",
            "Raise device iterations",
            "warning",
            "throughput",
            f"What is paid once per host call takes {fmt_pct(share)} of the run; running {di * 4} "
            f"iterations per host call instead of {di} spreads it over 4x the samples.",
            [
                Evidence(
                    f"{ex.host_round_trips:,} host calls for {ex.samples:,} samples "
                    f"({ex.round_trips_per_sample:.4f} per sample); {how}.",
                    "Execution Trace > host phase",
                )
            ],
            {F["di"]: di * 4},
            "Larger transfers per call (bigger stream buffers); the host sees results less often.",
        ),
    )


def _input_info(c: Context) -> tuple[str, str] | None:
    v = c.a.variables
    inp = v[v["kind"] == "input"]
    if not len(inp):
        return None
    row = inp.iloc[0]
    return str(row["dtype"]), str(row["shape"])


def _image_like(c: Context, shape: str) -> bool:
    """Rank >= 3 per sample, or (flattened) channels x size x size elements of an image model."""
    try:
        dims = [int(d) for d in shape.split("x") if d]
    except ValueError:
        return False
    if len(dims) >= 4 or (len(dims) == 3 and dims[0] in (1, 3, 4)):
        return True
    size, ch = c.a.run_config.get("image_size"), c.a.run_config.get("image_channels")
    if not size or not ch or not dims:
        return False
    per_sample = dims[-1] if len(dims) >= 2 else dims[0]
    return per_sample == int(ch) * int(size) ** 2


def eight_bit_input(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None or c.cfg("input8", False):
        return None
    info = _input_info(c)
    if info is None:
        return None
    dtype, shape = info
    if not _image_like(c, shape) or dtype not in ("float16", "float32"):
        return None
    rx = ex.mid_rx_cycles_by_dest[:, _D["host"]]
    i = int(np.argmax(rx))
    share = float(rx[i]) / float(ex.total_cycles or 1)
    # The host casts and normalises FP input unless it arrives as uint8: an input-bound run
    # (graded like XProf) also gains from moving that work onto the IPU.
    wait = ex.host_wait_share
    input_bound = wait >= c.t.host_wait_moderate
    if share < c.t.input_stream_share and not input_bound:
        return None
    ev = [
        Evidence(
            f"StreamCopy received from the host by IPU {i}: "
            f"{fmt_bytes(ex.streamcopy_rx_by_dest[i, _D['host']])} in {fmt_int(rx[i])} cycles "
            f"({fmt_pct(share)} of the run); input {dtype} {shape}.",
            "Summary > StreamCopy by destination",
        )
    ]
    cast_share = 0.0
    if input_bound:
        ev.append(
            Evidence(
                f"the device waits for the host {fmt_pct(wait)} of the run while the host casts "
                f"and normalises every {dtype} input element.",
                "Execution Trace > StreamCopyBegin",
            )
        )
        # The cast + normalise part of the loader's wait (host model: the transforms that move
        # to the IPU with 8-bit input, or the flat per-element cost beside the per-sample one).
        ns, us = c.cfg("normalise_ns"), c.cfg("preprocess_us")
        dims = [int(d) for d in shape.split("x") if d.isdigit()]
        steps = ex.host_model.get("transforms") or []
        movable = sum(
            float(t["us"]) for t in steps if t.get("transform") in ("convert_dtype", "normalise")
        )
        total_us = float(ex.host_model.get("per_sample_us") or 0.0)
        if movable > 0 and total_us > 0:
            frac = movable / total_us
            cast_share = c.loader_wait()[1] * frac
            names = ", ".join(
                f"{t['transform']} {float(t['us']):,.1f} µs"
                for t in steps
                if t.get("transform") in ("convert_dtype", "normalise")
            )
            ev.append(
                Evidence(
                    f"cast + normalise ({names}) is {fmt_pct(frac)} of the host's "
                    f"{total_us:,.1f} µs per sample: about {fmt_pct(cast_share)} of the run "
                    "waiting for it.",
                    "Summary > host model",
                )
            )
        elif ns is not None and us is not None and len(dims) >= 2:
            cast = float(np.prod(dims[1:])) * float(ns) * 1e-3  # µs per sample
            frac = cast / (cast + float(us)) if cast + float(us) > 0 else 0.0
            cast_share = c.loader_wait()[1] * frac
            ev.append(
                Evidence(
                    f"cast + normalise is {fmt_pct(frac)} of the host's preparation per sample "
                    f"({cast:,.1f} of {cast + float(us):,.1f} µs): about {fmt_pct(cast_share)} "
                    "of the run waiting for it.",
                    "Summary > run configuration (host model)",
                )
            )
    big = share >= c.t.input_stream_share
    return _addressing(
        share / 2 * c.device_share + cast_share,
        Insight(
            "throughput.8bit_input",
            "Transfer input as 8-bit and normalise on the IPU",
            "warning" if big or wait >= c.t.host_wait_high else "info",
            "throughput",
            f"uint8 images halve the input bytes against FP16 ({dtype} now"
            + (f", {fmt_pct(share)} of the run in input StreamCopy" if big else "")
            + ") and move the cast and normalisation from the host to the IPU"
            + (", shortening the host preparation the device waits for." if input_bound else "."),
            ev,
            {F["input8"]: True},
            "A little IPU compute and memory for the cast and normalisation.",
        ),
    )


def _workers_to_hide(ex, workers: int) -> int | None:
    """Loader processes that would prepare a call within its device time (with a quarter to
    spare), from the profile's host model; None when the profile does not say."""
    hm = ex.host_model
    prep, dev = hm.get("prepare_ms_per_call"), hm.get("device_ms_per_call")
    parallel = int(hm.get("parallel") or max(1, workers))
    if not prep or not dev:
        return None
    one = float(prep) * parallel  # one process
    need = math.ceil(1.25 * one / float(dev))
    cores = int(hm.get("host_server_cores") or need)
    return max(parallel + 1, min(need, cores))


def async_loader(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None:
        return None
    # The wait the loader can hide: host wait minus the fixed round-trip overhead of the calls
    # (that part is device_iterations' business).
    i, share, fixed = c.loader_wait()
    if share < c.t.host_wait_moderate:
        return None
    mode = str(c.cfg("loader", "sync")).lower()
    workers = int(c.cfg("workers", 0) or 0)
    high = share >= c.t.host_wait_high
    # Preparation in the main process: an async loader overlaps it with the device. Already
    # overlapped (async, or worker processes): more processes prepare the call sooner.
    in_main = mode == "sync" and workers == 0
    # What the change can save (host model): overlapping hides at most the device time of a
    # call; more processes shorten the preparation that is still longer than the device time.
    span = float(ex.host_inclusive_cycles or ex.total_cycles or 1)
    device_share = float(ex.total_cycles) / span if ex.host_inclusive_cycles else 1.0
    if in_main:
        iid, title = "throughput.async_loader", "use an asynchronous data loader"
        change: dict = {F["loader"]: "async"}
        trade = "Host memory and a process for the prefetched batches."
        saving = min(share, device_share)
    else:
        n = _workers_to_hide(ex, workers) or max(2, 2 * workers)
        iid, title = "throughput.loader_workers", f"use {n} data loader workers"
        change = {F["workers"]: n}
        trade = "Host cores and memory for the worker processes."
        parallel = int(ex.host_model.get("parallel") or max(1, workers))
        prep_share = share + device_share  # an overlapped loader's preparation per call
        saving = min(share, max(0.0, share - max(0.0, prep_share * parallel / n - device_share)))
    return _addressing(
        saving,
        Insight(
            iid,
            f"The device waits for the host: {title}",
            "critical" if high else "warning",
            "throughput",
            f"The run is {'highly' if high else 'moderately'} input-bound: IPU {i} waits for the "
            f"host {fmt_pct(share)} of the time (graded moderate from "
            f"{fmt_pct(c.t.host_wait_moderate, 0)}, high from {fmt_pct(c.t.host_wait_high, 0)}).",
            [
                Evidence(
                    f"IPU {i} waits for the host {fmt_int(ex.host_wait_cycles[i])} cycles at "
                    "StreamCopyBegin"
                    + (
                        f" and {fmt_int(ex.host_exposed_cycles)} cycles between device calls "
                        "(host lane)"
                        if ex.host_exposed_cycles
                        else ""
                    )
                    + (
                        f", of which {fmt_int(fixed)} are the host calls' fixed overhead"
                        if fixed
                        else ""
                    )
                    + f"; the loader's part is {fmt_pct(share)} of the run.",
                    "Execution Trace > host lane",
                )
            ],
            change,
            trade,
        ),
    )


def rebalance_stages(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None or not c.pipelined or ex.stage_cycles.size < 2:
        return None
    imb = ex.stage_imbalance
    if imb < c.t.stage_imbalance:
        return None
    names, cyc, mem = _layer_order(c)
    splits = _shift_split(c, names, cyc, ex.stage_cycles.astype(float))
    current = list(c.cfg("splits", []) or [])
    change = {F["splits"]: splits} if splits and splits != current else {}
    load = ", ".join(f"stage {s}: {fmt_int(v)}" for s, v in enumerate(ex.stage_cycles))
    ev = [Evidence(f"busy cycles per stage: {load}.", "Pipeline view > stage load")]
    # Would the moved blocks fit on the IPU that receives them? Their memory (the blocks'
    # operations), spread over that IPU's tiles, on top of its fullest tile.
    full_note = ""
    if change:
        idx = np.array(sorted(names.index(sp) for sp in splits if sp in names))
        new_stage = np.searchsorted(idx, np.arange(len(names)), side="right")
        moved = new_stage != _block_stages(c, names)
        ops = c.a.operations
        stage_ipu = ops.groupby("stage")["ipu"].first()
        m = c.a.memory
        for s in np.unique(new_stage[moved]):
            ipu = int(stage_ipu.get(int(s), int(s) % m.num_ipus))
            est = float(m.tile_used[ipu].max()) + float(mem[moved & (new_stage == s)].sum()) / max(
                1, m.tiles_per_ipu
            )
            if est > m.sram_per_tile:
                full_note = (
                    f" It probably does not fit: the blocks it moves to IPU {ipu} would take its "
                    f"fullest tile to about {fmt_bytes(est)} of {fmt_bytes(m.sram_per_tile)}; "
                    "free memory there first."
                )
                ev.append(
                    Evidence(
                        f"IPU {ipu} has {fmt_bytes(m.sram_per_tile - m.tile_used[ipu].max())} "
                        "free on its fullest tile.",
                        f"Memory Report > IPU {ipu}",
                    )
                )
                break
    return _addressing(
        0.0 if full_note else 1 - 1 / imb,
        Insight(
            "throughput.rebalance_stages",
            "Rebalance the pipeline stages",
            "info" if full_note else "warning",
            "throughput",
            f"The longest stage takes {imb:.2f}x the mean stage; the pipeline runs at the pace of "
            "the longest."
            + (f" Proposed split: {', '.join(splits)}." if change else "")
            + full_note,
            ev,
            change,
            "Moves memory between IPUs (check the predicted memory).",
        ),
    )


def io_tiles(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None or int(c.cfg("io_tiles", 0) or 0) > 0 or not c.has("io_tiles"):
        return None
    mid = ex.mid_rx_cycles_by_dest[:, _D["host"]] + ex.mid_tx_cycles_by_dest[:, _D["host"]]
    i = int(np.argmax(mid))
    share = float(mid[i]) / float(ex.total_cycles or 1)
    if share < c.t.io_stream_share:
        return None
    mb = int(c.cfg("micro_batch", 1) or 1)
    samples = ex.samples or 1
    mb_bytes = float(ex.streamcopy_rx_bytes.sum()) / samples * mb
    sram = c.a.memory.sram_per_tile
    n = max(1.0, 1.05 * mb_bytes / sram)
    n_io = int(2 ** math.ceil(math.log2(n)))
    return _addressing(
        share,
        Insight(
            "throughput.io_tiles",
            "Overlap host transfers with compute using I/O tiles",
            "warning",
            "throughput",
            f"Host StreamCopy takes {fmt_pct(share)} of the run on IPU {i} and stalls compute; "
            f"{n_io} I/O tiles (1.05 x {fmt_bytes(mb_bytes)} per micro-batch / "
            f"{fmt_bytes(sram)} per tile, rounded up to a power of two) let it overlap.",
            [
                Evidence(
                    f"StreamCopyMid to / from the host on IPU {i}: {fmt_int(mid[i])} cycles.",
                    "Execution Trace > StreamCopyMid",
                )
            ],
            {F["io_tiles"]: n_io},
            f"{n_io} tiles per IPU no longer compute; about 5% of each I/O tile goes to exchange code.",
        ),
    )


def prefetch_depth(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None or not c.has("prefetch"):
        return None
    depth = int(c.cfg("prefetch", 1) or 1)
    want = int(c.t.prefetch_depth)
    i, share, _ = c.loader_wait()
    if depth >= want or share < c.t.host_wait_moderate:
        return None
    # A deeper prefetch hides the host's latency to service each stream copy (host model:
    # host_stream_latency_us per StreamCopyBegin), not the loader's preparation time.
    ev = [
        Evidence(
            f"host wait (StreamCopyBegin) beyond the calls' fixed overhead: {fmt_pct(share)}.",
            "Execution Trace > StreamCopyBegin",
        )
    ]
    hides = share
    lat = c.cfg("stream_latency_us")
    if lat is not None and ex.total_cycles:
        scb = schema.PROGRAM_TYPES.index("StreamCopyBegin")
        n = int(ex.count_by_type[i, scb])
        span = ex.host_inclusive_cycles or ex.total_cycles
        hides = min(share, n * float(lat) * 1e-6 * ex.clock_hz / span)
        ev.append(
            Evidence(
                f"what a deeper prefetch can hide: {n:,} stream copies x {lat} µs service "
                f"latency = {fmt_pct(hides)} of the run (the rest is the loader's preparation).",
                "Execution Trace > StreamCopyBegin",
            )
        )
    return _addressing(
        hides,
        Insight(
            "throughput.prefetch",
            f"Raise the prefetch depth to {want}",
            "info",
            "throughput",
            f"Prefetch depth {depth}: the device waits for the loader {fmt_pct(share)} of the "
            f"time; {want} is the documented sweet spot.",
            ev,
            {F["prefetch"]: want},
            "More stream buffer memory on the I/O tiles.",
        ),
    )


def tile_imbalance(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None:
        return None
    nodes = c.a.src.table("/programs/nodes", ["name", "type", "tile_balance", "ipu"])
    ote = schema.PROGRAM_TYPES.index("OnTileExecute")
    is_ote = nodes["type"].to_numpy() == ote
    pc = ex.program_cycles.astype(float)
    total = float(pc[is_ote].sum()) or 1.0
    bal = nodes["tile_balance"].to_numpy(float)
    bad = is_ote & (pc / total >= c.t.heavy_compute_share) & (bal < c.t.tile_balance)
    if not bad.any():
        return None
    idx = np.flatnonzero(bad)
    idx = idx[np.argsort(-pc[idx])][:5]
    share = float(pc[bad].sum()) / total
    names = "; ".join(
        f"{nodes['name'].iloc[i]} (balance {bal[i]:.2f}, {fmt_pct(pc[i] / total)} of compute)"
        for i in idx
    )
    return _addressing(
        float((pc[bad] * (1 - bal[bad])).sum()) / float(ex.total_cycles or 1),
        Insight(
            "throughput.tile_imbalance",
            "Heavy compute sets use few tiles (tile imbalance)",
            "warning" if share >= 0.1 else "info",
            "throughput",
            f"{int(bad.sum())} heavy compute sets ({fmt_pct(share)} of compute cycles) have tile "
            f"balance below {c.t.tile_balance}; a better tile mapping spreads them.",
            [Evidence(names, "Execution Trace > BSP view / Program Tree")],
            {},
            "Tile mapping is a graph-construction change (no run option).",
        ),
    )


_REARRANGE = re.compile(r"prearrange|rearrange|transpose", re.IGNORECASE)


def rearrangements(c: Context) -> Insight | None:
    ex = c.a.execution
    if ex is None:
        return None
    nodes = c.a.src.table("/programs/nodes", ["name", "op"])
    names = nodes["name"].astype(str)
    rearr = names.str.contains(_REARRANGE).to_numpy()
    if not rearr.any():
        return None
    op = nodes["op"].to_numpy().astype(np.int64)
    pc = ex.program_cycles.astype(float)
    n_ops = len(c.a.operations)
    ok = op >= 0
    r = np.bincount(op[ok & rearr], pc[ok & rearr], n_ops)
    o = np.bincount(op[ok & ~rearr], pc[ok & ~rearr], n_ops)
    bad = (r > c.t.prearrange_ratio * o) & (r > 0)
    if not bad.any():
        return None
    ops = c.a.operations
    idx = np.flatnonzero(bad)
    idx = idx[np.argsort(-r[idx])][:5]
    ev = "; ".join(
        f"{ops['name'].iloc[i]}: {fmt_int(r[i])} rearrangement cycles vs {fmt_int(o[i])}"
        for i in idx
    )
    return _addressing(
        float(r[bad].sum()) / float(ex.total_cycles or 1),
        Insight(
            "throughput.rearrangement",
            "Rearrangement copies cost more than the ops they feed",
            "info",
            "throughput",
            f"{int(bad.sum())} operations spend more cycles in PreArrange / transpose copies than "
            "in their own compute; reverse the operands or use a different layout.",
            [Evidence(ev, "Operations > rearrangement programs")],
            {},
            "Layout changes are graph changes (no run option).",
        ),
    )


def fp16_for_speed(c: Context) -> Insight | None:
    ex = c.a.execution
    prec = str(c.cfg("precision", ""))
    if ex is None or not prec.startswith("32") or not c.a.memory.fits:
        return None
    ops = c.a.operations
    mm = ops["type"].astype(str).str.contains("matmul|conv", case=False, regex=True)
    total = float(ops["total_cycles"].sum()) or 1.0
    share = float(ops.loc[mm, "total_cycles"].sum()) / total
    if share < c.t.fp32_matmul_share:
        return None
    change, scaling = _fp16_change(c)
    return _addressing(
        share * 3 / 4 * _compute_share(c),
        Insight(
            "throughput.fp16",
            "Use FP16 for speed",
            "warning",
            "throughput",
            f"FP32 matmuls / convolutions take {fmt_pct(share)} of the cycles; FP16 AMP runs 4x "
            "the FP32 MAC rate (ipu-facts.md) and halves their memory.",
            [
                Evidence(
                    f"{int(mm.sum())} matmul / convolution operations in {prec}.",
                    "Operations (sort by total cycles)",
                )
            ],
            change,
            f"Lower numerical range. {scaling}",
        ),
    )


MEMORY_RULES: tuple[Rule, ...] = (
    use_fp16,
    reduce_micro_batch,
    recomputation,
    lower_amp,
    offload_optimiser,
    interleaved_schedule,
    replicated_sharding,
    move_split_memory,
    lighter_optimiser,
    outlining,
)
THROUGHPUT_RULES: tuple[Rule, ...] = (
    disable_offload,
    raise_ga,
    raise_device_iterations,
    eight_bit_input,
    async_loader,
    rebalance_stages,
    io_tiles,
    prefetch_depth,
    tile_imbalance,
    rearrangements,
    fp16_for_speed,
)
