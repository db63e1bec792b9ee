"""The memory insights (what to change when a tile is out of memory or nearly full), in the
order of the IPU memory guide: each a function registered with :func:`~analyser.core.insights.
registry.rule`, which declares its id, thresholds, the run options it changes and its docs.
A memory rule runs only under memory pressure (:attr:`Context.memory_pressure`: out of memory,
or headroom under ``memory_headroom``): :func:`~analyser.core.insights.find_insights` checks it
once for them all."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from analyser.core.insights.context import (
    Context,
    fp16_change,
    fp16_wording,
    layer_order,
    memory_finding,
    shift_split,
    stage_min_ipu,
)
from analyser.core.insights.model import Insight
from analyser.core.insights.registry import rule
from analyser.core.units import fmt_bytes, fmt_pct


@rule(
    "memory.fp16",
    thresholds=("memory_headroom",),
    changes=("precision", "loss_scaling"),
    fires_when="memory pressure and precision `32.*`",
    change=(
        '`precision = "16.16"`, plus `loss_scaling = 128` when training with `loss_scaling` 1; '
        "the partials stay as the framework resolves them (float under PopTorch and PopART: the "
        "title then says weights and activations, not partials)"
    ),
    trade_off=(
        "numerical range; loss scaling (static scale 128: a power of two, the conventional value, "
        "walkthrough step 2)"
    ),
)
def use_fp16(ctx: Context) -> Insight | None:
    prec = str(ctx.cfg("precision", ""))
    if not prec.startswith("32"):
        return None
    w = ctx.kind_bytes("weight") + ctx.kind_bytes("activation") + ctx.kind_bytes("gradient")
    change, scaling = fp16_change(ctx)
    # what the change casts is what the engine resolves for it: under PopTorch and PopART the
    # partials stay float (PopLibs' default) unless the run sets them
    what, matmuls, _ = fp16_wording(ctx, change)
    return memory_finding(
        ctx,
        f"Use FP16 ({what})",
        "Running the model in FP16 halves the memory of weights, activations and gradients; "
        + matmuls,
        (
            f"precision {prec}: the weight, activation and gradient variables add up to "
            f"{fmt_bytes(w)} in FP32 over the whole run (each counted once, not all live at the "
            f"same time; peak memory {fmt_bytes(ctx.analysis.metrics.peak_memory_bytes)}).",
            "Memory Report > Variables",
        ),
        change,
        f"Lower numerical range. {scaling} FP32 master weights or FP32 second moments may still "
        "be needed where the optimiser is sensitive.",
    )


@rule(
    "memory.micro_batch",
    thresholds=("memory_headroom",),
    changes=("micro_batch_size", "gradient_accumulation"),
    fires_when="memory pressure and micro-batch >= 2",
    change="halve `micro_batch_size`, double `gradient_accumulation`",
    trade_off="smaller, less efficient matmuls",
)
def reduce_micro_batch(ctx: Context) -> Insight | None:
    mb = int(ctx.cfg("micro_batch_size", 0) or 0)
    if mb < 2:
        return None
    ga = int(ctx.cfg("gradient_accumulation", 1) or 1)
    act = ctx.kind_bytes("activation") + ctx.kind_bytes("stash")
    return memory_finding(
        ctx,
        "Reduce the micro-batch size, raise gradient accumulation",
        f"Halving the micro-batch ({mb} to {mb // 2}) halves activation memory; doubling gradient "
        f"accumulation ({ga} to {ga * 2}) keeps the global batch size.",
        (
            f"micro-batch {mb}: the activation and stash variables add up to {fmt_bytes(act)} "
            f"over the whole run (each counted once, not all live at the same time; peak memory "
            f"{fmt_bytes(ctx.analysis.metrics.peak_memory_bytes)}).",
            "Liveness Report > peak step",
        ),
        {"micro_batch_size": mb // 2, "gradient_accumulation": ga * 2},
        "Smaller matmuls use the tiles less efficiently; more micro-batches per step.",
    )


@rule(
    "memory.recompute",
    thresholds=("memory_headroom",),
    changes=("recomputation", "recompute_checkpoints"),
    fires_when="memory pressure, `recomputation = off`, activations/stashes present",
    change=(
        "`pipeline-stages` when pipelined, else `checkpoints` at about sqrt(n) evenly spaced blocks"
    ),
    trade_off="extra forward cycles",
)
def recomputation(ctx: Context) -> Insight | None:
    rc = ctx.cfg("recomputation", "off")
    if rc not in (None, "off", False, "none"):
        return None
    act = ctx.kind_bytes("activation") + ctx.kind_bytes("stash")
    if act == 0:
        return None
    if ctx.pipelined:
        change: dict[str, Any] = {"recomputation": "pipeline-stages"}
    else:
        names, _, _ = layer_order(ctx)
        k = max(1, int(math.sqrt(len(names))))
        points = names[k - 1 :: k][:-1] or names[:1]
        change = {"recomputation": "checkpoints", "recompute_checkpoints": points}
    return memory_finding(
        ctx,
        "Recompute activations in the backward pass",
        "Recomputation keeps only checkpoint activations and recomputes the rest in the backward "
        + ("pass of each pipeline stage." if ctx.pipelined else "pass."),
        (
            f"activations and stashes kept for the backward pass: {fmt_bytes(act)}.",
            "Liveness Report",
        ),
        change,
        "Extra forward cycles (up to one more forward pass).",
    )


@rule(
    "memory.available_memory_proportion",
    thresholds=("memory_headroom", "temporary_share"),
    changes=("available_memory_proportion",),
    fires_when=(
        "memory pressure and the largest op temporary on the fullest IPU >= `temporary_share` of "
        "its memory"
    ),
    change="halve `available_memory_proportion` (min 0.1)",
    trade_off="more serial splits, more cycles",
)
def lower_amp(ctx: Context) -> Insight | None:
    if not ctx.n_ops or not ctx.has_op_column("temp_bytes"):
        return None
    ipu = ctx.fullest_ipu
    on = np.flatnonzero(ctx.op_column("ipu") == ipu)
    temp = ctx.op_column("temp_bytes")[on]
    peak_temp = int(temp.max()) if on.size else 0
    ipu_mem = int(ctx.analysis.memory.ipu_total()[ipu]) or 1
    if peak_temp / ipu_mem < ctx.thresholds.temporary_share:
        return None
    amp = float(
        ctx.cfg("available_memory_proportion", None)
        or ctx.analysis.target_config.get("available_memory_proportion", 0.6)
        or 0.6
    )
    new = round(max(0.1, amp / 2), 2)
    worst = np.argsort(-temp, kind="stable")[:3]  # the 3 largest, the first of equals first
    op_names = ctx.op_column("name")[on]
    where = ctx.op_sources()[on]
    names = ", ".join(
        f"{op_names[i]}{f' at {where[i]}' if where[i] else ''} ({fmt_bytes(int(temp[i]))})"
        for i in worst
    )
    return memory_finding(
        ctx,
        "Lower the available memory proportion of the ops with the largest temporaries",
        f"Planning matmuls / convolutions with {new} instead of {amp} of tile memory for "
        "temporaries forces more serial splits and lowers their peak.",
        (f"largest temporary memory on IPU {ipu}: {names}.", "Operations > temp memory"),
        {"available_memory_proportion": new},
        "More serial splits: more cycles for those operations.",
    )


@rule(
    "memory.offload",
    thresholds=("memory_headroom", "optimiser_state_share"),
    changes=("offload_optimiser_state",),
    fires_when=(
        "memory pressure, optimiser state on chip >= `optimiser_state_share` of the memory"
    ),
    change='`offload_optimiser_state = "on"`',
    trade_off="remote-buffer streaming at each update",
)
def offload_optimiser(ctx: Context) -> Insight | None:
    if ctx.offloaded:
        return None
    share = ctx.optimiser_state_share
    if share < ctx.thresholds.optimiser_state_share:
        return None
    st = ctx.kind_bytes("optimiserState")
    return memory_finding(
        ctx,
        "Offload optimiser state to remote buffers",
        "Optimiser state only takes part in the weight update; keeping it in streaming memory "
        "frees its tile memory.",
        (
            f"optimiser state on chip: {fmt_bytes(st)} ({fmt_pct(share)} of the memory).",
            "Memory Report > Variables (optimiserState)",
        ),
        {"offload_optimiser_state": "on"},
        "Each weight update streams the state in and out (StreamCopyMid to remote buffers).",
    )


@rule(
    "memory.interleaved",
    thresholds=("memory_headroom", "stash_share"),
    changes=("schedule",),
    fires_when=(
        "memory pressure, pipelined with the grouped schedule, stashes >= `stash_share` of the "
        "fullest IPU"
    ),
    change='`schedule = "interleaved"`',
    trade_off="slower when backward > forward",
)
def interleaved_schedule(ctx: Context) -> Insight | None:
    if not ctx.pipelined:
        return None
    if str(ctx.cfg("schedule", "grouped")).lower() != "grouped":
        return None
    # stashes live on the earlier stages' IPUs: take the IPU where they weigh the most
    totals = ctx.analysis.memory.ipu_total()
    shares = [ctx.kind_bytes("stash", i) / (int(totals[i]) or 1) for i in range(totals.size)]
    ipu = int(np.argmax(shares))
    st = ctx.kind_bytes("stash", ipu)
    mem = int(totals[ipu]) or 1
    if st / mem < ctx.thresholds.stash_share:
        return None
    return memory_finding(
        ctx,
        "Use the interleaved pipeline schedule",
        "Interleaved keeps S-1-s stashed activations on stage s instead of 2(S-1-s) (grouped).",
        (
            f"pipeline stashes on IPU {ipu}: {fmt_bytes(st)} ({fmt_pct(st / mem)}).",
            "Memory Report > Variables (stash)",
        ),
        {"schedule": "interleaved"},
        "Slower when the backward pass is longer than the forward pass.",
    )


@rule(
    "memory.rts",
    thresholds=("memory_headroom", "optimiser_state_share"),
    changes=("replicated_tensor_sharding",),
    fires_when=(
        "memory pressure, replicas >= 2, no sharding, optimiser state >= `optimiser_state_share`"
    ),
    change="`replicated_tensor_sharding = true`",
    trade_off="extra collectives",
)
def replicated_sharding(ctx: Context) -> Insight | None:
    reps = int(ctx.cfg("replication_factor", 1) or 1)
    if reps < 2 or ctx.cfg("replicated_tensor_sharding", False):
        return None
    if ctx.optimiser_state_share < ctx.thresholds.optimiser_state_share:
        return None
    st = ctx.kind_bytes("optimiserState")
    return memory_finding(
        ctx,
        "Shard optimiser state across replicas",
        f"Replicated tensor sharding keeps 1/{reps} of the optimiser state on each replica.",
        (
            f"optimiser state: {fmt_bytes(st)} per replica, {reps} replicas.",
            "Memory Report > Variables",
        ),
        {"replicated_tensor_sharding": True},
        "Extra collectives (reduce-scatter / all-gather) at each weight update.",
    )


@rule(
    "memory.move_split",
    thresholds=("memory_headroom", "ipu_memory_imbalance"),
    changes=("split_points",),
    fires_when=(
        "memory pressure, pipelined, fullest / emptiest IPU memory >= `ipu_memory_imbalance`"
    ),
    change=(
        "`split_points` with the boundary between the fullest stage and its lighter neighbour "
        "moved toward the fullest, by the blocks whose memory (each block's variables, scaled to "
        "the stage's measured memory) covers half the difference"
    ),
    trade_off="may unbalance stage cycles",
)
def move_split_memory(ctx: Context) -> Insight | None:
    if not ctx.pipelined:
        return None
    tot = ctx.analysis.memory.ipu_total().astype(float)
    if (
        tot.size < 2
        or tot.min() <= 0
        or tot.max() / tot.min() < ctx.thresholds.ipu_memory_imbalance
    ):
        return None
    names, _, mem = layer_order(ctx)
    stage_ipu = stage_min_ipu(ctx)
    splits = shift_split(ctx, names, mem, tot[stage_ipu]) if stage_ipu.size else None
    current = ctx.cfg("split_points", [])
    if not splits or splits == list(current or []):
        return None
    return memory_finding(
        ctx,
        "Move the pipeline split away from the fullest IPU",
        f"Splitting at {', '.join(splits)} (now {', '.join(map(str, current or [])) or '-'}) "
        "balances the memory of the stages.",
        (
            "memory per IPU: "
            + ", ".join(f"IPU {i}: {fmt_bytes(v)}" for i, v in enumerate(tot))
            + ".",
            "Summary > Memory",
        ),
        {"split_points": splits},
        "Can unbalance the stages' cycles (pipeline throughput is bound by the longest stage).",
    )


@rule(
    "memory.optimiser",
    thresholds=("memory_headroom", "optimiser_state_share"),
    changes=("optimiser",),
    fires_when="memory pressure, Adam/LAMB state >= `optimiser_state_share`",
    change='`optimiser = "sgd-momentum"`',
    trade_off="convergence, retuning",
)
def lighter_optimiser(ctx: Context) -> Insight | None:
    opt = str(ctx.cfg("optimiser", "")).lower()
    if not any(k in opt for k in ("adam", "lamb")):
        return None
    if ctx.optimiser_state_share < ctx.thresholds.optimiser_state_share:
        return None
    st = ctx.kind_bytes("optimiserState") + ctx.kind_remote_bytes("optimiserState")
    return memory_finding(
        ctx,
        "Use an optimiser with less state (SGD with momentum)",
        "SGD with momentum keeps one buffer per weight instead of two.",
        (
            f"{opt} keeps two moments per weight: {fmt_bytes(st)} of state.",
            "Memory Report > Variables (optimiserState)",
        ),
        {"optimiser": "sgd-momentum"},
        "Different convergence: learning-rate schedule and hyper-parameters must be retuned.",
    )


@rule(
    "memory.outlining",
    thresholds=("memory_headroom", "code_share"),
    changes=("outlining",),
    fires_when="memory pressure, code >= `code_share` of the memory",
    change=("`outlining = true` when it is off, else advice only (reuse identical subgraphs)"),
    trade_off="call overhead",
)
def outlining(ctx: Context) -> Insight | None:
    m = ctx.analysis.memory
    code = m.code_bytes
    if code / (m.peak_memory_bytes or 1) < ctx.thresholds.code_share:
        return None
    off = ctx.has("outlining") and not ctx.cfg("outlining", True)
    return memory_finding(
        ctx,
        "Reuse identical subgraphs (outlining)",
        "Code dominates: outlining identical subgraphs shares their code between calls."
        + (
            ""
            if off
            else " Outlining is already on (or not a run option here): reuse more "
            "subgraphs by giving repeated layers identical shapes and settings."
        ),
        (
            f"code takes {fmt_bytes(code)} ({fmt_pct(code / m.peak_memory_bytes)} of the memory).",
            "Memory Report > by category (vertexCode, controlCode...)",
        ),
        {"outlining": True} if off else {},
        "Call overhead and copies in and out of the outlined subgraph.",
    )
