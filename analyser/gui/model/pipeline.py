"""What the Pipeline view draws, without Qt.

Phase shares, per-stage cycles and the bottleneck come from the analysis core's
:class:`analyser.core.execution.ExecutionSummary` (whole run). The chart itself shows the first
device iteration of the first host call (one pipeline run: ramp-up, main, ramp-down and weight
update; with device iterations > 1 a host call repeats it): for every stage, micro-batch and pass
(forward / backward / weight update) the span of its executed steps, read through the trace's row
ranges (only the rows of the first host call are read, a chunk at a time, each reduced before the
next: a run of any length is summarised whole, never cut). Stash memory per stage sums the ``stash`` variables by the stage of
the operation that owns them (by the IPU's stage when a stash has no operation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from analyser.core.quantities import PASSES, PHASES, variable_kind_code
from analyser.core.units import fmt_count
from analyser.trace.window import ColumnTable, TraceWindow
from analyser.viewmodels import profile_reads as reads

#: Phases drawn as shaded bands, in time order.
BAND_PHASES = ("rampUp", "main", "rampDown", "weightUpdate")
PHASE_LABELS = {
    "rampUp": "ramp-up",
    "main": "main",
    "rampDown": "ramp-down",
    "weightUpdate": "weight update",
    "host": "host wait",
    "none": "other",
}
#: Step rows the chart reads at once: a longer run is read and summarised chunk by chunk
#: (bounded memory, every step counted).
CHUNK_ROWS = 2_000_000


@dataclass(frozen=True)
class PipelineChart:
    """The pipeline chart of one profile (frozen: the Pipeline report's view-model holds it,
    built off the GUI thread, and the Execution Trace shares it)."""

    n_stages: int
    #: IPU of each stage (the IPU that runs most of its steps).
    stage_ipu: tuple[int, ...]
    #: One row per (stage, micro_batch, pass): start, end (cycles), steps, busy cycles.
    boxes: pd.DataFrame
    #: (phase, start, end) bands of the first run.
    bands: tuple[tuple[str, float, float], ...]
    #: Wall-clock share of the whole run per phase (analysis core; read-only).
    phase_share: Mapping[str, float]
    #: [stages] busy cycles and OnTileExecute cycles per stage over the whole run (analysis core).
    stage_cycles: np.ndarray
    stage_compute_cycles: np.ndarray
    bottleneck: int
    #: Longest stage / mean stage (analysis core).
    imbalance: float
    #: [stages] bytes of stash variables per stage.
    stash_bytes: np.ndarray
    #: Cycle window of the first device iteration (the chart's x range).
    t0: float
    t1: float
    #: read-only
    run_config: Mapping[str, Any]
    #: The host's timeline of a call (``TraceWindow.host_lane``: lane, kind, start, end in
    #: device-trace cycles, negative before the device starts); empty before format 1.2.
    host_events: ColumnTable | None = None
    #: Host-inclusive host wait share of the run (the analysis core's metric, as the Summary).
    host_wait_share: float | None = None
    #: The IPU clock (Hz) for lengths in time, None when the profile does not record it.
    clock_hz: float | None = None

    def hidden_host_text(self, x0: float) -> str:
        """What the view starting at cycle ``x0`` hides of the host's time before the device
        (the chart shows the device iteration with only a lead of the host's preparation, which
        can be many times longer): '' when nothing is hidden, else the
        axis break's words with its length."""
        before = self.host_before
        if before is None or x0 <= before[0] + 1:
            return ""
        from analyser.core.units import fmt_seconds

        def length(cycles: float) -> str:
            text = f"{fmt_count(round(cycles))} cycles"
            return f"{fmt_seconds(cycles / self.clock_hz)} ({text})" if self.clock_hz else text

        total = self.t0 - before[0]
        hidden = min(x0, self.t0) - before[0]
        if hidden >= total - 1:
            return f"◀ {length(total)} of host time before the device (pan or zoom out)"
        return f"◀ {length(hidden)} more of the {length(total)} of host time before the device"

    @cached_property
    def host_before(self) -> tuple[float, float] | None:
        """(start, end) of the host's time before the device starts (preparation, the call's
        round trip) from the host timeline, None when there is none (computed once: the view
        asks at every range change)."""
        h = self.host_events
        if h is None or h.empty or float(h["start"].min()) >= self.t0:
            return None
        return float(h["start"].min()), self.t0

    @property
    def x_range(self) -> tuple[float, float]:
        """The chart's first view: the device iteration, with the host's time before it as a
        lead of 8% of the width when there is any (all of it is a pan or a zoom away)."""
        span = max(self.t1 - self.t0, 1.0)
        before = self.host_before
        if before is None:
            return self.t0, self.t1
        return max(before[0], self.t0 - 0.08 * span), self.t1

    @property
    def x_limits(self) -> tuple[float, float]:
        """How far the chart may pan: from the host's first event to the iteration's end."""
        before = self.host_before
        return (before[0] if before else self.t0), self.t1

    @property
    def pipelined(self) -> bool:
        return self.n_stages > 1


def _stash_by_stage(analysis, n_stages: int, stage_ipu: list[int]) -> np.ndarray:
    out = np.zeros(max(1, n_stages), dtype=np.int64)
    try:
        v = reads.stash_variables(analysis)
        op_stage = reads.operation_column(analysis, "stage").astype(np.int64)
    except Exception:  # a profile without graph tables has no stash figures
        return out
    stash = v[v["kind"].to_numpy() == variable_kind_code("stash")]
    if stash.empty:
        return out
    op = stash["op"].to_numpy().astype(np.int64)
    ipu_stage = {ipu: s for s, ipu in reversed(list(enumerate(stage_ipu)))}
    by_ipu = np.array([ipu_stage.get(int(i), 0) for i in stash["ipu"].to_numpy()], dtype=np.int64)
    valid = (op >= 0) & (op < len(op_stage))
    stage = np.where(valid, op_stage[np.clip(op, 0, max(0, len(op_stage) - 1))], by_ipu)
    stage = np.clip(stage, 0, len(out) - 1)
    np.add.at(out, stage, stash["bytes"].to_numpy().astype(np.int64))
    return out


def _reduce_boxes(k_stage, k_mb, k_pass, start, end, steps, busy):
    """One row per (stage, micro-batch, pass), in that order: the earliest start, the latest
    end and the sums of steps and busy cycles (sorted keys, reduced per run of equal keys).
    Applied to each chunk of rows and again to the chunks' rows, so it gives the same boxes
    whatever the chunk size."""
    order = np.lexsort((k_pass, k_mb, k_stage))
    k_stage, k_mb, k_pass = k_stage[order], k_mb[order], k_pass[order]
    if not len(order):
        return k_stage, k_mb, k_pass, start, end, steps, busy
    new_key = np.ones(len(order), dtype=bool)
    new_key[1:] = (np.diff(k_stage) != 0) | (np.diff(k_mb) != 0) | (np.diff(k_pass) != 0)
    first_row = np.flatnonzero(new_key)
    return (
        k_stage[first_row],
        k_mb[first_row],
        k_pass[first_row],
        np.minimum.reduceat(start[order], first_row),
        np.maximum.reduceat(end[order], first_row),
        np.add.reduceat(steps[order], first_row),
        np.add.reduceat(busy[order], first_row),
    )


def _chunks(lo: int, hi: int):
    step = max(1, int(CHUNK_ROWS))
    return [(a, min(hi, a + step)) for a in range(lo, hi, step)]


def pipeline_chart(analysis, trace: TraceWindow) -> PipelineChart:
    """Build the chart data of one profile (which must have an execution).

    The rows of the first device iteration are read ``CHUNK_ROWS`` at a time and each chunk is
    reduced to its boxes, bands and per-stage IPU counts before the next is read: a run of any
    length is summarised whole, in bounded memory."""
    ex = analysis.execution
    runs = reads.run_starts(analysis)
    t0 = float(runs[0]) if len(runs) else -np.inf
    t1 = float(runs[1]) if len(runs) > 1 else np.inf
    # rows of the first host call of each IPU; of those, the first device iteration's (one
    # pipeline run; the others repeat it). A first pass reads only the iteration column (each
    # chunk's lowest iteration), the second reads the other columns of the chunks that hold
    # rows of the first iteration
    spans = []
    for ipu in range(trace.n_ipus):
        lo, hi = trace.access.ipu_rows(ipu) if np.isinf(t1) else trace.row_range(ipu, t0, t1)
        for a, b in _chunks(lo, hi):
            it = np.asarray(trace.access.read(a, b, ("iteration",))["iteration"])
            if len(it):
                spans.append((ipu, a, b, int(it.min())))
    first = min((m for *_r, m in spans), default=0)
    # the pass of each step's operation (only the programs' op column is read: the whole
    # programs table with op names is the Execution Trace's, built when that report needs it)
    prog_op = reads.program_ops(analysis)
    op_pass = reads.operation_column(analysis, "pass").astype(np.int64)
    wu_phase = PHASES.index("weightUpdate")
    update_pass = PASSES.index("update")
    n_ipus = max(1, trace.n_ipus)
    cols = ("program", "start", "cycles", "stage", "micro_batch", "phase")
    n = 0
    s_min, e_max = np.inf, -np.inf
    max_stage = -1
    stage_ipu_counts = np.zeros((0, n_ipus), dtype=np.int64)
    phase_span: dict[int, tuple[float, float]] = {}
    partial = []
    for ipu, a, b, lowest in spans:
        if lowest > first:
            continue
        it = np.asarray(trace.access.read(a, b, ("iteration",))["iteration"])
        rows = np.flatnonzero(it == first)
        if not len(rows):
            continue
        last = int(rows[-1]) + 1
        d = trace.access.read(a, a + last, cols)
        start = np.asarray(d["start"], dtype=np.int64)
        keep = (it[:last] == first) & (start >= t0) & (start < t1)
        if not keep.any():
            continue
        st = {k: np.asarray(d[k], dtype=np.int64)[keep] for k in cols}
        start, cycles, stage, mb, phase = (
            st["start"],
            st["cycles"],
            st["stage"],
            st["micro_batch"],
            st["phase"],
        )
        end = start + cycles
        n += len(start)
        s_min, e_max = min(s_min, float(start.min())), max(e_max, float(end.max()))
        max_stage = max(max_stage, int(stage.max()))
        # the steps of each stage per IPU (which IPU runs a stage)
        staged = stage >= 0
        if staged.any():
            counts = np.bincount(
                stage[staged] * n_ipus + ipu, minlength=(int(stage.max()) + 1) * n_ipus
            ).reshape(-1, n_ipus)
            if len(counts) > len(stage_ipu_counts):
                grown = np.zeros((len(counts), n_ipus), dtype=np.int64)
                grown[: len(stage_ipu_counts)] = stage_ipu_counts
                stage_ipu_counts = grown
            stage_ipu_counts[: len(counts)] += counts
        for code in np.unique(phase):
            sel = phase == code
            lo_, hi_ = float(start[sel].min()), float(end[sel].max())
            old = phase_span.get(int(code), (np.inf, -np.inf))
            phase_span[int(code)] = (min(old[0], lo_), max(old[1], hi_))
        op = prog_op[st["program"]]
        pass_code = np.where((op >= 0) & (op < len(op_pass)), op_pass[np.clip(op, 0, None)], -1)
        # the weight update runs once per step on every IPU, outside the micro-batches: every
        # step of that phase (its compute and its stream copies) becomes one box per stage,
        # placed by the step's stage or, when it has none, by its IPU's stage (known once
        # every chunk is read: kept here as -1 - IPU)
        wu = phase == wu_phase
        rest = ~wu & (stage >= 0) & (mb >= 0) & (pass_code >= 0)
        n_wu = int(wu.sum())
        partial.append(
            _reduce_boxes(
                np.concatenate([stage[rest], np.where(stage[wu] >= 0, stage[wu], -1 - ipu)]),
                np.concatenate([mb[rest], np.full(n_wu, -1, np.int64)]),
                np.concatenate([pass_code[rest], np.full(n_wu, update_pass, np.int64)]),
                np.concatenate([start[rest], start[wu]]),
                np.concatenate([end[rest], end[wu]]),
                np.ones(int(rest.sum()) + n_wu, dtype=np.int64),
                np.concatenate([cycles[rest], cycles[wu]]),
            )
        )
    if n:
        t0 = s_min if np.isinf(t0) else t0
        t1 = e_max
    else:
        t0 = t1 = 0.0

    n_stages, stage_cycles, stage_compute, stage_ipu, ipu_stage = _stage_layout(
        ex, n, max_stage, stage_ipu_counts, trace.n_ipus
    )
    empty = np.zeros(0, dtype=np.int64)
    parts = [np.concatenate(col) for col in zip(*partial)] if partial else [empty] * 7
    k_stage = parts[0]
    # the weight-update boxes of a step with no stage take their IPU's stage (-1: none)
    by_ipu = k_stage < 0
    k_stage = k_stage.copy()
    k_stage[by_ipu] = ipu_stage[np.clip(-1 - k_stage[by_ipu], 0, len(ipu_stage) - 1)]
    ok = k_stage >= 0
    k_stage, k_mb, k_pass, b_start, b_end, b_steps, b_busy = _reduce_boxes(
        k_stage[ok], *(p[ok] for p in parts[1:])
    )
    boxes = pd.DataFrame(
        {
            "stage": k_stage,
            "micro_batch": k_mb,
            "pass": k_pass,
            "start": b_start,
            "end": b_end,
            "steps": b_steps.astype(np.int64),
            "busy": b_busy,
            "pass_name": np.asarray(PASSES, dtype=object)[k_pass],
        }
    )
    host_events = trace.host_lane()
    bands = _bands(phase_span, host_events, n, t0)
    return PipelineChart(
        n_stages=n_stages,
        stage_ipu=tuple(stage_ipu),
        boxes=boxes,
        bands=tuple(bands),
        phase_share=MappingProxyType(dict(ex.phase_share())),
        stage_cycles=stage_cycles,
        stage_compute_cycles=stage_compute,
        bottleneck=int(np.argmax(stage_cycles)) if stage_cycles.any() else 0,
        imbalance=float(ex.stage_imbalance),
        stash_bytes=_stash_by_stage(analysis, n_stages, stage_ipu),
        t0=t0,
        t1=t1 if t1 > t0 else t0 + 1,
        run_config=MappingProxyType(dict(analysis.run_config or {})),
        host_events=host_events,
        host_wait_share=analysis.metrics.host_wait_share,
        clock_hz=trace.clock_hz,
    )


def _stage_layout(ex, n: int, max_stage: int, stage_ipu_counts: np.ndarray, n_ipus: int):
    """The stages' count, cycles and compute cycles, the IPU of each stage and the first stage
    of each IPU (-1: none)."""
    stage_cycles = np.asarray(ex.stage_cycles, dtype=np.float64)
    n_stages = max(len(stage_cycles), max_stage + 1 if n else 1, 1)
    if len(stage_cycles) < n_stages:
        stage_cycles = np.r_[stage_cycles, np.zeros(n_stages - len(stage_cycles))]
    stage_compute = np.asarray(ex.stage_compute_cycles, dtype=np.float64)
    if len(stage_compute) < n_stages:
        stage_compute = np.r_[stage_compute, np.zeros(n_stages - len(stage_compute))]
    # IPU of each stage: the IPU most of its steps run on (the lowest of a tie)
    stage_ipu = [
        int(stage_ipu_counts[s].argmax())
        if s < len(stage_ipu_counts) and stage_ipu_counts[s].any()
        else s
        for s in range(n_stages)
    ]
    ipu_stage = np.full(max(n_ipus, max(stage_ipu, default=0) + 1, 1), -1, dtype=np.int64)
    for s, ipu in reversed(list(enumerate(stage_ipu))):
        ipu_stage[ipu] = s
    return n_stages, stage_cycles, stage_compute, stage_ipu, ipu_stage


def _bands(phase_span: dict, host_events: ColumnTable, n: int, t0: float) -> list:
    """The phase bands drawn behind the pipeline, the host's wait in front when there is one."""
    host_phase = PHASES.index("host")
    bands = []
    for name in BAND_PHASES:
        span = phase_span.get(PHASES.index(name))
        if span is not None:
            bands.append((name, span[0], span[1]))
    # the wait for the host before the pipeline starts (input StreamCopyBegin), when it is one
    # stretch before the first band
    host = phase_span.get(host_phase)
    if host_events.empty and host is not None and bands and host[1] <= bands[0][1]:
        # before format 1.2 the host's wait at the start of a call was in the device trace
        bands.insert(0, ("host", host[0], host[1]))
    if not host_events.empty and n and float(host_events["start"].min()) < t0:
        # the host's time before the device starts (preparation, the call's round trip), from
        # the host timeline: drawn as the host-wait band in front of the pipeline
        bands.insert(0, ("host", float(host_events["start"].min()), t0))
    return bands
