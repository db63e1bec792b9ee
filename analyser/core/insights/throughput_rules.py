"""The throughput insights (what to change when the run spends its cycles badly): each a
function registered with :func:`~analyser.core.insights.registry.rule`, which declares its id,
thresholds, the run options it changes and its docs. A throughput rule runs only on a profile
with an execution (an out-of-memory one has none): :func:`~analyser.core.insights.find_insights`
checks it once for them all, so ``ctx.execution`` is set here."""

from __future__ import annotations

import math
import re

import numpy as np

from analyser.core.insights.context import (
    HALF_PARTIALS_CALL,
    Context,
    amp_partials,
    amp_rate,
    block_stages,
    compute_share,
    fp16_change,
    fp16_wording,
    layer_order,
    shift_split,
    stage_first_ipu,
)
from analyser.core.insights.model import Evidence, Insight, finding
from analyser.core.insights.registry import CatalogueEntry, rule
from analyser.core.units import fmt_bytes, fmt_int, fmt_pct
from profiles import schema

# ---------------------------------------------------------------------------------------------
# Throughput
# ---------------------------------------------------------------------------------------------

_D = {n: i for i, n in enumerate(schema.DESTINATIONS)}


@rule(
    "throughput.disable_offload",
    share_of="device trace",
    thresholds=("offload_share",),
    changes=("offload_optimiser_state",),
    fires_when=(
        "state offloaded and remote-buffer StreamCopyMid >= `offload_share` of the run (info, "
        "with no estimated benefit, when the state probably does not fit back: see Ranking)"
    ),
    change='`offload_optimiser_state = "off"` (the effect confirms it still fits)',
    trade_off="more tile memory",
)
def disable_offload(ctx: Context) -> Insight | None:
    ex = ctx.execution
    if not ctx.offloaded:
        return None
    rb = (ex.mid_rx_cycles_by_dest + ex.mid_tx_cycles_by_dest)[:, _D["remoteBuffer"]]
    i = int(np.argmax(rb))
    share = float(rb[i]) / float(ex.total_cycles or 1)
    if share < ctx.thresholds.offload_share:
        return None
    # Would the state fit back on chip? Spread evenly over an IPU's tiles (the way the engine
    # maps weights), it adds remote bytes / tiles to every tile, the fullest included.
    m = ctx.analysis.memory
    ipu = ctx.var_column("ipu").astype(np.int64)
    on = (ipu >= 0) & (ipu < m.num_ipus)
    remote = np.bincount(
        ipu[on], ctx.var_column("remote_bytes")[on].astype(float), m.num_ipus
    ).astype(float)
    est = m.tile_used.max(axis=1) + remote / max(1, m.tiles_per_ipu)
    full = np.flatnonzero(est > m.sram_per_tile)
    likely_oom = bool(full.size)
    return finding(
        "Disable variable offloading",
        "info" if likely_oom else "warning",
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
                f"remote-buffer bytes: {fmt_bytes(ctx.analysis.memory.remote_bytes)}.",
                "Summary > Memory",
            ),
        ],
        {"offload_optimiser_state": "off"},
        "Optimiser state moves back onto the tiles (more memory).",
        addresses=0.0 if likely_oom else share,
    )


@rule(
    "throughput.gradient_accumulation",
    share_of="device trace",
    thresholds=("ramp_share", "weight_update_share", "allreduce_share"),
    changes=("gradient_accumulation",),
    fires_when=(
        "pipelined ramp-up + ramp-down >= `ramp_share`, or weight update >= "
        "`weight_update_share`, or all-reduce >= `allreduce_share`"
    ),
    change="double `gradient_accumulation`",
    trade_off="larger global batch",
    also=(
        CatalogueEntry(
            "throughput.allreduce",
            "the same rule when only the replica all-reduce crosses its threshold",
            "double `gradient_accumulation`",
            "larger global batch",
        ),
    ),
)
def raise_ga(ctx: Context) -> Insight | None:
    ex = ctx.execution
    ga = int(ctx.cfg("gradient_accumulation", 1) or 1)
    ps = ex.phase_share()
    ramp = ps["rampUp"] + ps["rampDown"] if ctx.pipelined else 0.0
    wu = ps["weightUpdate"]
    reps = int(ctx.cfg("replication_factor", 1) or 1)
    ge = schema.PROGRAM_TYPES.index("GlobalExchange")
    wu_i = schema.PHASES.index("weightUpdate")
    ar = (
        float(ex.cycles_by_type_phase[:, ge, wu_i].max()) / float(ex.total_cycles or 1)
        if reps > 1
        else 0.0
    )
    ev = []
    if ramp >= ctx.thresholds.ramp_share:
        ev.append(
            Evidence(
                f"pipeline ramp-up + ramp-down take {fmt_pct(ramp)} of the run "
                f"(2(S-1)/(G+S-1) with S={ctx.n_stages}, G={ga}).",
                "Pipeline view",
            )
        )
    if wu >= ctx.thresholds.weight_update_share:
        ev.append(
            Evidence(
                f"the weight update takes {fmt_pct(wu)} of the run.",
                "Pipeline view > weight update",
            )
        )
    if ar >= ctx.thresholds.allreduce_share:
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
        if ar >= ctx.thresholds.allreduce_share and len(ev) == 1
        else "throughput.gradient_accumulation"
    )
    new = ga * 2
    return finding(
        "Raise gradient accumulation",
        "warning",
        f"Accumulating {new} micro-batches per weight update instead of {ga} amortises the "
        "pipeline fill / flush, the weight update and the all-reduce over more samples.",
        ev,
        {"gradient_accumulation": new},
        "Larger global batch (learning-rate schedule may need retuning); more accumulator use.",
        id=iid,
        addresses=(ramp + wu + ar) / 2,
    )


@rule(
    "throughput.device_iterations",
    share_of="host-inclusive time",
    thresholds=("host_call_share",),
    changes=("device_iterations",),
    fires_when=(
        "what is paid once per host call >= `host_call_share` of the run: host calls x "
        "`host_call_overhead_us` (the engine's host model; the measured host-only phase for "
        "profiles without it), plus the pipeline fill + flush for inference pipelines. Host "
        "preparation scales with samples per call, so it is left to the loader tips"
    ),
    change="`device_iterations` x 4",
    trade_off="larger transfers per call",
)
def raise_device_iterations(ctx: Context) -> Insight | None:
    ex = ctx.execution
    di = int(ctx.cfg("device_iterations", 1) or 1)
    # Device iterations amortise what is paid once per host call: the fixed round-trip overhead
    # (and, for inference pipelines, the fill and flush). Host preparation scales with the
    # samples of the call, so it is the loader's business (async loader / 8-bit input), not DI's.
    overhead = ctx.cfg("host_call_overhead_us")
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
    inference_pipeline = ctx.pipelined and ctx.cfg("mode") == "inference"
    if inference_pipeline:
        share += ex.ramp_share * ctx.device_share
        how += f"; pipeline fill + flush once per call: {fmt_pct(ex.ramp_share)}"
    if share < ctx.thresholds.host_call_share:
        return None
    return finding(
        "Raise device iterations",
        "warning",
        f"What is paid once per host call takes {fmt_pct(share)} of the run; running {di * 4} "
        f"iterations per host call instead of {di} spreads it over 4x the samples.",
        [
            Evidence(
                f"{ex.host_round_trips:,} host calls for {ex.samples:,} samples "
                f"({ex.round_trips_per_sample:.4f} per sample); {how}.",
                "Execution Trace > host phase",
            )
        ],
        {"device_iterations": di * 4},
        "Larger transfers per call (bigger stream buffers); the host sees results less often.",
        addresses=share * 3 / 4,
    )


def _input_info(ctx: Context) -> tuple[str, str] | None:
    inp = np.flatnonzero(ctx.of_kind("input"))
    if not inp.size:
        return None
    return str(ctx.var_column("dtype")[inp[0]]), str(ctx.var_column("shape")[inp[0]])


def _image_like(ctx: Context, shape: str) -> bool:
    """Rank >= 3 per sample, or (flattened) channels x size x size elements of an image model."""
    try:
        dims = [int(d) for d in shape.split("x") if d]
    except ValueError:
        return False
    if len(dims) >= 4 or (len(dims) == 3 and dims[0] in (1, 3, 4)):
        return True
    size, ch = (
        ctx.cfg("image_size"),
        ctx.cfg("image_channels"),
    )
    if not size or not ch or not dims:
        return False
    per_sample = dims[-1] if len(dims) >= 2 else dims[0]
    return per_sample == int(ch) * int(size) ** 2


@rule(
    "throughput.8bit_input",
    share_of="host-inclusive time",
    thresholds=("host_wait_moderate", "input_stream_share", "host_wait_high"),
    changes=("eight_bit_input",),
    fires_when=(
        "FP16/FP32 image input (rank >= 3, or flattened channels x size x size of an image model) "
        "and either input StreamCopyMid >= `input_stream_share` (warning) or the run is "
        "input-bound (host wait >= `host_wait_moderate`) while the host casts and normalises "
        "(info; warning from `host_wait_high`)"
    ),
    change="`eight_bit_input = true`",
    trade_off="cast/normalise on the IPU",
)
def eight_bit_input(ctx: Context) -> Insight | None:
    ex = ctx.execution
    if ctx.cfg("eight_bit_input", False):
        return None
    info = _input_info(ctx)
    if info is None:
        return None
    dtype, shape = info
    if not _image_like(ctx, shape) or dtype not in ("float16", "float32"):
        return None
    rx = ex.mid_rx_cycles_by_dest[:, _D["host"]]
    i = int(np.argmax(rx))
    share = float(rx[i]) / float(ex.total_cycles or 1)
    # The host casts and normalises FP input unless it arrives as uint8: an input-bound run
    # (graded like XProf) also gains from moving that work onto the IPU.
    wait = ex.host_wait_share
    input_bound = wait >= ctx.thresholds.host_wait_moderate
    if share < ctx.thresholds.input_stream_share and not input_bound:
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
        ns, us = ctx.cfg("host_normalise_ns_per_element"), ctx.cfg("host_preprocess_us_per_sample")
        dims = [int(d) for d in shape.split("x") if d.isdigit()]
        steps = ex.host_model.get("transforms") or []
        movable = sum(
            float(t["us"]) for t in steps if t.get("transform") in ("convert_dtype", "normalise")
        )
        total_us = float(ex.host_model.get("per_sample_us") or 0.0)
        if movable > 0 and total_us > 0:
            frac = movable / total_us
            cast_share = ctx.loader_wait()[1] * frac
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
            cast_share = ctx.loader_wait()[1] * frac
            ev.append(
                Evidence(
                    f"cast + normalise is {fmt_pct(frac)} of the host's preparation per sample "
                    f"({cast:,.1f} of {cast + float(us):,.1f} µs): about {fmt_pct(cast_share)} "
                    "of the run waiting for it.",
                    "Summary > run configuration (host model)",
                )
            )
    big = share >= ctx.thresholds.input_stream_share
    return finding(
        "Transfer input as 8-bit and normalise on the IPU",
        "warning" if big or wait >= ctx.thresholds.host_wait_high else "info",
        f"uint8 images halve the input bytes against FP16 ({dtype} now"
        + (f", {fmt_pct(share)} of the run in input StreamCopy" if big else "")
        + ") and move the cast and normalisation from the host to the IPU"
        + (", shortening the host preparation the device waits for." if input_bound else "."),
        ev,
        {"eight_bit_input": True},
        "A little IPU compute and memory for the cast and normalisation.",
        addresses=share / 2 * ctx.device_share + cast_share,
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


@rule(
    "throughput.async_loader",
    share_of="host-inclusive time",
    thresholds=("host_wait_moderate", "host_wait_high"),
    changes=("loader_mode", "loader_workers"),
    fires_when=(
        "samples prepared in the main process (`sync`, no workers) and the loader's part of the "
        "host wait (StreamCopyBegin plus the host time outside the trace, minus the calls' fixed "
        "`host_call_overhead_us`, over the host-inclusive time) >= `host_wait_moderate` "
        "(warning), >= `host_wait_high` (critical), graded like XProf"
    ),
    change='`loader_mode = "async"`',
    trade_off="host memory, a process",
    also=(
        CatalogueEntry(
            "throughput.loader_workers",
            "as `async_loader`, when the preparation already overlaps the device (async, or worker processes)",
            "`loader_workers` = the processes that would prepare a call within 80% of its device time (from the profile's host model), at most the host server's cores",
            "host cores and memory",
        ),
    ),
)
def async_loader(ctx: Context) -> Insight | None:
    ex = ctx.execution
    # The wait the loader can hide: host wait minus the fixed round-trip overhead of the calls
    # (that part is device_iterations' business).
    i, share, fixed = ctx.loader_wait()
    if share < ctx.thresholds.host_wait_moderate:
        return None
    mode = str(ctx.cfg("loader_mode", "sync")).lower()
    workers = int(ctx.cfg("loader_workers", 0) or 0)
    high = share >= ctx.thresholds.host_wait_high
    # Preparation in the main process: an async loader overlaps it with the device. Already
    # overlapped (async, or worker processes): more processes prepare the call sooner.
    in_main = mode == "sync" and workers == 0
    # What the change can save (host model): overlapping hides at most the device time of a
    # call; more processes shorten the preparation that is still longer than the device time.
    span = float(ex.host_inclusive_cycles or ex.total_cycles or 1)
    device_share = float(ex.total_cycles) / span if ex.host_inclusive_cycles else 1.0
    if in_main:
        iid, title = "throughput.async_loader", "use an asynchronous data loader"
        change: dict = {"loader_mode": "async"}
        trade = "Host memory and a process for the prefetched batches."
        saving = min(share, device_share)
    else:
        n = _workers_to_hide(ex, workers) or max(2, 2 * workers)
        iid, title = "throughput.loader_workers", f"use {n} data loader workers"
        change = {"loader_workers": n}
        trade = "Host cores and memory for the worker processes."
        parallel = int(ex.host_model.get("parallel") or max(1, workers))
        prep_share = share + device_share  # an overlapped loader's preparation per call
        saving = min(share, max(0.0, share - max(0.0, prep_share * parallel / n - device_share)))
    return finding(
        f"The device waits for the host: {title}",
        "critical" if high else "warning",
        f"The run is {'highly' if high else 'moderately'} input-bound: the loader's part of "
        f"the host wait is {fmt_pct(share)} of the run on IPU {i} (graded moderate from "
        f"{fmt_pct(ctx.thresholds.host_wait_moderate, 0)}, high from {fmt_pct(ctx.thresholds.host_wait_high, 0)}).",
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
                + f"; the loader's part of the host wait is {fmt_pct(share)} of the run.",
                "Execution Trace > host lane",
            )
        ],
        change,
        trade,
        id=iid,
        addresses=saving,
    )


@rule(
    "throughput.rebalance_stages",
    share_of="device trace",
    thresholds=("stage_imbalance",),
    changes=("split_points",),
    fires_when="pipelined, longest stage / mean stage >= `stage_imbalance`",
    change=(
        "`split_points` moved the same way by measured cycles per block (scaled to the stage's "
        "busy cycles)"
    ),
    trade_off="moves memory between IPUs",
)
def rebalance_stages(ctx: Context) -> Insight | None:
    ex = ctx.execution
    if not ctx.pipelined or ex.stage_cycles.size < 2:
        return None
    imb = ex.stage_imbalance
    if imb < ctx.thresholds.stage_imbalance:
        return None
    names, cyc, mem = layer_order(ctx)
    splits = shift_split(ctx, names, cyc, ex.stage_cycles.astype(float))
    current = list(ctx.cfg("split_points", []) or [])
    change = {"split_points": splits} if splits and splits != current else {}
    load = ", ".join(f"stage {s}: {fmt_int(v)}" for s, v in enumerate(ex.stage_cycles))
    ev = [Evidence(f"busy cycles per stage: {load}.", "Pipeline view > stage load")]
    # Would the moved blocks fit on the IPU that receives them? Their memory (the blocks'
    # operations), spread over that IPU's tiles, on top of its fullest tile.
    full_note = ""
    if change and splits:  # change implies splits; the checker reads both
        idx = np.array(sorted(names.index(sp) for sp in splits if sp in names))
        new_stage = np.searchsorted(idx, np.arange(len(names)), side="right")
        moved = new_stage != block_stages(ctx, names)
        stage_ipu = stage_first_ipu(ctx)
        m = ctx.analysis.memory
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
    return finding(
        "Rebalance the pipeline stages",
        "info" if full_note else "warning",
        f"The longest stage takes {imb:.2f}x the mean stage; the pipeline runs at the pace of "
        "the longest."
        + (f" Proposed split: {', '.join(splits)}." if change and splits else "")
        + full_note,
        ev,
        change,
        "Moves memory between IPUs (check the predicted memory).",
        addresses=0.0 if full_note else 1 - 1 / imb,
    )


@rule(
    "throughput.io_tiles",
    share_of="device trace",
    thresholds=("io_stream_share",),
    changes=("io_tiles",),
    fires_when="no I/O tiles, host StreamCopyMid >= `io_stream_share`",
    change=(
        "`io_tiles` = next power of two of 1.05 x micro-batch bytes / tile SRAM (PopART User Guide, 'Overlapping IO with compute')"
    ),
    trade_off="tiles no longer compute",
)
def io_tiles(ctx: Context) -> Insight | None:
    ex = ctx.execution
    if int(ctx.cfg("io_tiles", 0) or 0) > 0 or not ctx.has("io_tiles"):
        return None
    mid = ex.mid_rx_cycles_by_dest[:, _D["host"]] + ex.mid_tx_cycles_by_dest[:, _D["host"]]
    i = int(np.argmax(mid))
    share = float(mid[i]) / float(ex.total_cycles or 1)
    if share < ctx.thresholds.io_stream_share:
        return None
    mb = int(ctx.cfg("micro_batch_size", 1) or 1)
    samples = ex.samples or 1
    mb_bytes = float(ex.streamcopy_rx_bytes.sum()) / samples * mb
    sram = ctx.analysis.memory.sram_per_tile
    n = max(1.0, 1.05 * mb_bytes / sram)
    n_io = int(2 ** math.ceil(math.log2(n)))
    return finding(
        "Overlap host transfers with compute using I/O tiles",
        "warning",
        f"Host StreamCopy takes {fmt_pct(share)} of the run on IPU {i} and stalls compute; "
        f"{n_io} I/O tiles (1.05 x {fmt_bytes(mb_bytes)} per micro-batch / "
        f"{fmt_bytes(sram)} per tile, rounded up to a power of two) let it overlap.",
        [
            Evidence(
                f"StreamCopyMid to / from the host on IPU {i}: {fmt_int(mid[i])} cycles.",
                "Execution Trace > StreamCopyMid",
            )
        ],
        {"io_tiles": n_io},
        f"{n_io} tiles per IPU no longer compute; about 5% of each I/O tile goes to exchange code.",
        addresses=share,
    )


@rule(
    "throughput.prefetch",
    share_of="host-inclusive time",
    thresholds=("prefetch_depth", "host_wait_moderate"),
    changes=("prefetch_depth",),
    fires_when=(
        "`prefetch_depth` < 3 and the loader's part of the host wait >= `host_wait_moderate`"
    ),
    change="`prefetch_depth = 3`",
    trade_off="stream buffer memory",
)
def prefetch_depth(ctx: Context) -> Insight | None:
    ex = ctx.execution
    if not ctx.has("prefetch_depth"):
        return None
    depth = int(ctx.cfg("prefetch_depth", 1) or 1)
    want = int(ctx.thresholds.prefetch_depth)
    i, share, _ = ctx.loader_wait()
    if depth >= want or share < ctx.thresholds.host_wait_moderate:
        return None
    # A deeper prefetch hides the host's latency to service each stream copy (host model:
    # host_stream_latency_us per StreamCopyBegin), not the loader's preparation time.
    ev = [
        Evidence(
            f"the loader's part of the host wait (StreamCopyBegin and the host time outside "
            f"the trace, less the host calls' fixed overhead): {fmt_pct(share)} of the run.",
            "Execution Trace > StreamCopyBegin",
        )
    ]
    hides = share
    lat = ctx.cfg("host_stream_latency_us")
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
    return finding(
        f"Raise the prefetch depth to {want}",
        "info",
        f"Prefetch depth {depth}: the loader's part of the host wait is {fmt_pct(share)} of "
        f"the run; {want} is the documented sweet spot.",
        ev,
        {"prefetch_depth": want},
        "More stream buffer memory on the I/O tiles.",
        addresses=hides,
    )


#: The tile-imbalance what-if balances at most this many compute sets (the worst by cycles).
BALANCE_AT_MOST = 5


@rule(
    "throughput.tile_imbalance",
    share_of="device trace",
    thresholds=("heavy_compute_share", "tile_balance"),
    changes=("balance_compute_sets",),
    fires_when=(
        "compute sets with >= `heavy_compute_share` of compute cycles and tile balance < "
        "`tile_balance`"
    ),
    change=(
        "re-simulated with `balance_compute_sets` = the flagged compute sets (at most "
        f"{BALANCE_AT_MOST}), a what-if no framework offers: what a better tile mapping would gain"
    ),
    trade_off="a graph change (tile mapping), not a run option",
)
def tile_imbalance(ctx: Context) -> Insight | None:
    ex = ctx.execution
    prog_names = ctx.program_column("name")
    ote = schema.PROGRAM_TYPES.index("OnTileExecute")
    is_ote = ctx.program_column("type") == ote
    pc = ex.program_cycles.astype(float)
    total = float(pc[is_ote].sum()) or 1.0
    bal = ctx.program_column("tile_balance").astype(float)
    bad = (
        is_ote
        & (pc / total >= ctx.thresholds.heavy_compute_share)
        & (bal < ctx.thresholds.tile_balance)
    )
    if not bad.any():
        return None
    idx = np.flatnonzero(bad)
    idx = idx[np.argsort(-pc[idx])][:5]
    share = float(pc[bad].sum()) / total
    names = "; ".join(
        f"{prog_names[i]} (balance {bal[i]:.2f}, {fmt_pct(pc[i] / total)} of compute)" for i in idx
    )
    lost = float((pc[bad] * (1 - bal[bad])).sum())
    # the what-if balances the worst flagged compute sets by name (every program of that name)
    balanced = list(dict.fromkeys(str(prog_names[i]) for i in idx[:BALANCE_AT_MOST]))
    wanted = set(balanced)
    named = is_ote & np.array([n in wanted for n in prog_names.tolist()], bool)
    bound = float((pc[named] * (1 - bal[named])).sum())
    ev = [Evidence(names, "Execution Trace > BSP view / Program Tree")]
    imb = ctx.analysis.imbalance
    if imb is not None:
        ev += [
            Evidence(
                f"IPU {i} loses {fmt_int(imb.lost_cycles[i])} cycles to tile imbalance "
                f"({fmt_pct(imb.lost_share_of_compute[i])} of its compute cycles).",
                "analyse summary > Cycles by step type: lost to tile imbalance",
            )
            for i in range(imb.lost_cycles.size)
        ]
    return finding(
        "Heavy compute sets use few tiles (tile imbalance)",
        "warning" if share >= 0.1 else "info",
        f"{int(bad.sum())} heavy compute sets ({fmt_pct(share)} of compute cycles) have tile "
        f"balance below {ctx.thresholds.tile_balance}; a better tile mapping spreads them. "
        f"Balanced, they would save at most {fmt_int(lost)} cycles (their slowest tile minus "
        "the mean, summed over executions; less when a sync or another IPU holds the step). "
        f"The predicted effect re-simulates the run with the worst {len(balanced)} balanced "
        f"(measured upper bound {fmt_int(bound)} cycles): a what-if no framework offers "
        "(balance_compute_sets), it says what a better tile mapping would gain.",
        ev,
        {"balance_compute_sets": balanced},
        "Tile mapping is a graph-construction change (e.g. a tensor's layout or the "
        "operation's split), not a run option: the change only measures the prize.",
        addresses=lost / float(ex.total_cycles or 1),
    )


_REARRANGE = re.compile(r"prearrange|rearrange|transpose", re.IGNORECASE)
_MATMUL = re.compile("matmul|conv", re.IGNORECASE)


@rule(
    "throughput.rearrangement",
    share_of="device trace",
    thresholds=("prearrange_ratio",),
    changes=(),
    fires_when=(
        "PreArrange / rearrange / transpose programs of an op take > `prearrange_ratio` x its "
        "other cycles"
    ),
    change="none (layout)",
    trade_off="-",
)
def rearrangements(ctx: Context) -> Insight | None:
    ex = ctx.execution
    names = ctx.program_column("name").tolist()
    rearr = np.array([_REARRANGE.search(str(n)) is not None for n in names], bool)
    if not rearr.any():
        return None
    op = ctx.program_column("op").astype(np.int64)
    pc = ex.program_cycles.astype(float)
    n_ops = ctx.n_ops
    ok = op >= 0
    r = np.bincount(op[ok & rearr], pc[ok & rearr], n_ops)
    o = np.bincount(op[ok & ~rearr], pc[ok & ~rearr], n_ops)
    bad = (r > ctx.thresholds.prearrange_ratio * o) & (r > 0)
    if not bad.any():
        return None
    op_names = ctx.op_column("name")
    idx = np.flatnonzero(bad)
    idx = idx[np.argsort(-r[idx])][:5]
    ev = "; ".join(
        f"{op_names[i]}: {fmt_int(r[i])} rearrangement cycles vs {fmt_int(o[i])}" for i in idx
    )
    return finding(
        "Rearrangement copies cost more than the ops they feed",
        "info",
        f"{int(bad.sum())} operations spend more cycles in PreArrange / transpose copies than "
        "in their own compute; reverse the operands or use a different layout.",
        [Evidence(ev, "Operations > rearrangement programs")],
        {},
        "Layout changes are graph changes (no run option).",
        addresses=float(r[bad].sum()) / float(ex.total_cycles or 1),
    )


def matmul_share(ctx: Context) -> tuple[float, np.ndarray]:
    """The matmul / convolution operations' share of the operation cycles (their gradients
    included), and which operations they are."""
    types = ctx.op_column("type").tolist() if ctx.n_ops else []
    mm = np.array([_MATMUL.search(str(t)) is not None for t in types], bool)
    cycles = ctx.op_column("total_cycles") if ctx.n_ops else np.zeros(0, np.int64)
    total = float(cycles.sum()) or 1.0
    return float(cycles[mm].sum()) / total, mm


@rule(
    "throughput.fp16",
    share_of="device trace",
    thresholds=("fp32_matmul_share",),
    changes=("precision", "loss_scaling"),
    fires_when=("fits in `32.*` and matmul/conv ops take >= `fp32_matmul_share` of the cycles"),
    change=(
        '`precision = "16.16"`, plus `loss_scaling = 128` when training with `loss_scaling` 1 '
        "(the partials as the framework resolves them: float under PopTorch and PopART)"
    ),
    trade_off="loss scaling (as `memory.fp16`)",
)
def fp16_for_speed(ctx: Context) -> Insight | None:
    prec = str(ctx.cfg("precision", ""))
    if not prec.startswith("32") or not ctx.analysis.memory.fits:
        return None
    share, mm = matmul_share(ctx)
    if share < ctx.thresholds.fp32_matmul_share:
        return None
    change, scaling = fp16_change(ctx)
    what, matmuls, speed = fp16_wording(ctx, change)
    return finding(
        "Use FP16 for speed",
        "warning",
        f"FP32 matmuls / convolutions take {fmt_pct(share)} of the cycles; their memory halves "
        f"in FP16 ({what}), and {matmuls}",
        [
            Evidence(
                f"{int(mm.sum())} matmul / convolution operations in {prec}.",
                "Operations (sort by total cycles)",
            )
        ],
        change,
        f"Lower numerical range. {scaling}",
        # at `speed` times the rate their compute takes 1/speed of the cycles
        addresses=share * (1 - 1 / speed) * compute_share(ctx),
    )


@rule(
    "throughput.half_partials",
    share_of="device trace",
    thresholds=("half_partials_share",),
    changes=("partials_type",),
    fires_when=(
        "FP16 operands (`16.*`) with float partials (read from the profile's AMP vertex types, "
        "`ConvPartial1x1Out<half,float>`; else `partials_type` as the engine resolves it, "
        "`auto` the framework's default: float under PopTorch and PopART) and matmul/conv ops "
        "take >= `half_partials_share` of the operation cycles"
    ),
    change=(
        '`partials_type = "half"`: PopTorch `opts.Precision.setPartialsType(torch.half)`; '
        'PopART `partialsTypeMatMuls = "half"` and `convolutionOptions = {"partialsType": '
        '"half"}`; TensorFlow `partialsType` in `IPUConfig.matmuls` / `.convolutions` '
        "`poplar_options`"
    ),
    trade_off="sums accumulate in FP16: range and precision of long reductions",
)
def half_partials(ctx: Context) -> Insight | None:
    partials = amp_partials(ctx)
    if partials is None or partials.dtype != "float32":
        return None
    share, mm = matmul_share(ctx)
    if share < ctx.thresholds.half_partials_share:
        return None
    ex = ctx.execution
    # half partials raise the AMP rate of the FP16 matmuls' and convolutions' own compute sets
    # (16 conv units instead of 8); their exchanges, reductions and casts stay about the same
    speed = amp_rate(ctx, "float16", "float16") / amp_rate(ctx, "float16", "float32")
    amp = _program_share(ex, partials.float_programs)
    if amp is None:  # no vertex types: the matmul share of the compute steps
        amp = share * compute_share(ctx)
    fw = str(ctx.cfg("framework", "poptorch"))
    call = HALF_PARTIALS_CALL.get(fw, HALF_PARTIALS_CALL["poptorch"])
    return finding(
        "Use half-precision partials",
        "warning",
        f"The FP16 matmuls / convolutions ({fmt_pct(share)} of the operation cycles) accumulate "
        f"in float: PopLibs then uses 8 conv units per AMP instead of 16, half the rate, and "
        f"twice the partials' temporary memory. Half partials run their AMP compute {speed:g}x "
        f"faster. {call}.",
        [
            Evidence(partials.text, partials.where),
            Evidence(
                f"{int(mm.sum())} matmul / convolution operations take {fmt_pct(share)} of the "
                f"operation cycles; their AMP compute sets with float partials "
                f"{fmt_pct(amp)} of the run (busiest IPU).",
                "Operations (sort by total cycles)",
            ),
        ],
        {"partials_type": "half"},
        "The products' sums accumulate in FP16 (PopLibs' `partialsType` option, default float): "
        "11 bits of precision and a range up to 65,504, so long reductions (many input "
        "channels x kernel positions, wide matmuls) lose precision or overflow; PopTorch's "
        "documentation of `setPartialsType`: it reduces on-chip memory use at the cost of "
        "precision. Check convergence (or accuracy) against float partials.",
        addresses=amp * (1 - 1 / speed),
    )


def _program_share(ex, programs: np.ndarray | None) -> float | None:
    """The cycles of ``programs`` (a mask of /programs/nodes) on the busiest IPU over the run's
    cycles; None when the mask is unknown or does not match the execution."""
    if programs is None:
        return None
    by_ipu = np.asarray(ex.program_cycles_by_ipu)
    if by_ipu.ndim == 2 and by_ipu.shape[1] == programs.size and by_ipu.size:
        cycles = float(by_ipu[:, programs].sum(axis=1).max())
    elif np.asarray(ex.program_cycles).size == programs.size:
        cycles = float(np.asarray(ex.program_cycles)[programs].sum())
    else:
        return None
    return min(1.0, cycles / float(ex.total_cycles or 1))
