"""What the Pipeline view draws, without Qt.

Phase shares, per-stage cycles and the bottleneck come from the analysis core's
:class:`analyser.core.execution.ExecutionSummary` (whole run). The chart itself shows the first
device iteration of the first host call (one pipeline run: ramp-up, main, ramp-down and weight
update; with device iterations > 1 a host call repeats it): for every stage, micro-batch and pass
(forward / backward / weight update) the span of its executed steps, read through the trace's row
ranges (only the rows of the first host call are read). Stash memory per stage sums the ``stash`` variables by the stage of
the operation that owns them (by the IPU's stage when a stash has no operation).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from analyser.core.quantities import PASSES, PHASES, variable_kind_code
from analyser.core.units import fmt_count
from analyser.trace.window import TraceWindow

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
#: Most step rows of one run the chart reads (a run is one host call; normally far fewer).
MAX_RUN_ROWS = 2_000_000


@dataclass
class PipelineChart:
    n_stages: int
    #: IPU of each stage (the IPU that runs most of its steps).
    stage_ipu: list[int]
    #: One row per (stage, micro_batch, pass): start, end (cycles), steps, busy cycles.
    boxes: pd.DataFrame
    #: (phase, start, end) bands of the first run.
    bands: list[tuple[str, float, float]]
    #: Wall-clock share of the whole run per phase (analysis core).
    phase_share: dict[str, float]
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
    run_config: dict
    #: The host's timeline of a call (``TraceWindow.host_lane``: lane, kind, start, end in
    #: device-trace cycles, negative before the device starts); empty before format 1.2.
    host_events: pd.DataFrame | None = None
    #: Host-inclusive host wait share of the run (the analysis core's metric, as the Summary).
    host_wait_share: float | None = None
    #: The IPU clock (Hz) for lengths in time, None when the profile does not record it.
    clock_hz: float | None = None

    def hidden_host_text(self, x0: float) -> str:
        """What the view starting at cycle ``x0`` hides of the host's time before the device
        (the chart shows the device iteration with only a lead of the host's preparation, which
        can be many times longer: issue 23 defect 5): '' when nothing is hidden, else the
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
        v = analysis.src.table("/graph/variables", ["kind", "bytes", "op", "ipu"])
        ops = analysis.src.table("/graph/operations", ["stage"])
    except Exception:  # a profile without graph tables has no stash figures
        return out
    stash = v[v["kind"].to_numpy() == variable_kind_code("stash")]
    if stash.empty:
        return out
    op = stash["op"].to_numpy().astype(np.int64)
    op_stage = ops["stage"].to_numpy().astype(np.int64)
    ipu_stage = {ipu: s for s, ipu in reversed(list(enumerate(stage_ipu)))}
    by_ipu = np.array([ipu_stage.get(int(i), 0) for i in stash["ipu"].to_numpy()], dtype=np.int64)
    valid = (op >= 0) & (op < len(op_stage))
    stage = np.where(valid, op_stage[np.clip(op, 0, max(0, len(op_stage) - 1))], by_ipu)
    stage = np.clip(stage, 0, len(out) - 1)
    np.add.at(out, stage, stash["bytes"].to_numpy().astype(np.int64))
    return out


def pipeline_chart(analysis, trace: TraceWindow) -> PipelineChart:
    """Build the chart data of one profile (which must have an execution)."""
    ex = analysis.execution
    runs = np.asarray(analysis.src.array("/execution/run_starts"), dtype=np.float64)
    t0 = float(runs[0]) if len(runs) else -np.inf
    t1 = float(runs[1]) if len(runs) > 1 else np.inf
    # rows of the first host call of each IPU; of those, the first device iteration's (one
    # pipeline run; the others repeat it). The iteration column is read first and the other
    # columns only for the rows of that iteration
    spans = []
    for ipu in range(trace.n_ipus):
        lo, hi = trace.access.ipu_rows(ipu) if np.isinf(t1) else trace.row_range(ipu, t0, t1)
        hi = min(hi, lo + MAX_RUN_ROWS)
        it = trace.access.read(lo, hi, ("iteration",))["iteration"]
        spans.append((ipu, lo, it))
    first = min((int(it.min()) for _i, _lo, it in spans if len(it)), default=0)
    # the steps as whole numpy columns (no DataFrame: its filtering and groupby were most of
    # the chart's cost when the Pipeline is the first report opened)
    cols = ("program", "start", "cycles", "stage", "micro_batch", "phase")
    parts = []
    for ipu, lo, it in spans:
        rows = np.flatnonzero(it == first)
        if not len(rows):
            continue
        d = trace.access.read(lo, lo + int(rows[-1]) + 1, cols)
        start = np.asarray(d["start"])
        keep = (it[: int(rows[-1]) + 1] == first) & (start >= t0) & (start < t1)
        part = {k: np.asarray(d[k], dtype=np.int64)[keep] for k in cols}
        part["ipu"] = np.full(len(part["start"]), ipu, dtype=np.int64)
        parts.append(part)
    steps = {
        k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
        for k in (*cols, "ipu")
    }
    start, stage, ipu_of = steps["start"], steps["stage"], steps["ipu"]
    end = start + steps["cycles"]
    n = len(start)
    if n:
        t0 = float(start.min()) if np.isinf(t0) else t0
        t1 = float(end.max())
    else:
        t0 = t1 = 0.0
    # the pass of each step's operation (only the programs' op column is read: the whole
    # programs table with op names is the Execution Trace's, built when that report needs it)
    prog_op = np.asarray(trace.access.table("/programs/nodes", ["op"])["op"], dtype=np.int64)
    ops = analysis.src.table("/graph/operations", ["pass"])
    op = prog_op[steps["program"]] if n else np.zeros(0, dtype=np.int64)
    op_pass = ops["pass"].to_numpy().astype(np.int64)
    pass_code = np.where((op >= 0) & (op < len(op_pass)), op_pass[np.clip(op, 0, None)], -1)

    stage_cycles = np.asarray(ex.stage_cycles, dtype=np.float64)
    n_stages = max(len(stage_cycles), int(stage.max()) + 1 if n else 1, 1)
    if len(stage_cycles) < n_stages:
        stage_cycles = np.r_[stage_cycles, np.zeros(n_stages - len(stage_cycles))]
    stage_compute = np.asarray(ex.stage_compute_cycles, dtype=np.float64)
    if len(stage_compute) < n_stages:
        stage_compute = np.r_[stage_compute, np.zeros(n_stages - len(stage_compute))]
    # IPU of each stage: the IPU most of its steps run on (the lowest of a tie); a loop over
    # the few stages
    stage_ipu = []
    for s in range(n_stages):
        ipus = ipu_of[stage == s]
        stage_ipu.append(int(np.bincount(ipus).argmax()) if len(ipus) else s)

    # the weight update runs once per step on every IPU, outside the micro-batches: every
    # step of that phase (its compute and its stream copies) becomes one box per stage, placed
    # by the step's stage or, when it has none, by its IPU's stage
    ipu_stage = np.full(max(trace.n_ipus, max(stage_ipu, default=0) + 1, 1), -1, dtype=np.int64)
    for s, ipu in reversed(list(enumerate(stage_ipu))):
        ipu_stage[ipu] = s
    phase = steps["phase"]
    wu = phase == PHASES.index("weightUpdate")
    upd_stage = np.where(stage[wu] >= 0, stage[wu], ipu_stage[ipu_of[wu]])
    upd = upd_stage >= 0
    rest = ~wu & (stage >= 0) & (steps["micro_batch"] >= 0) & (pass_code >= 0)
    k_stage = np.concatenate([stage[rest], upd_stage[upd]])
    k_mb = np.concatenate([steps["micro_batch"][rest], np.full(int(upd.sum()), -1, np.int64)])
    k_pass = np.concatenate(
        [pass_code[rest], np.full(int(upd.sum()), PASSES.index("update"), np.int64)]
    )
    b_start = np.concatenate([start[rest], start[wu][upd]])
    b_end = np.concatenate([end[rest], end[wu][upd]])
    b_cycles = np.concatenate([steps["cycles"][rest], steps["cycles"][wu][upd]])
    # one box per (stage, micro-batch, pass), in that order: sorted keys, reduced per run
    order = np.lexsort((k_pass, k_mb, k_stage))
    k_stage, k_mb, k_pass = k_stage[order], k_mb[order], k_pass[order]
    new_key = np.ones(len(order), dtype=bool)
    new_key[1:] = (np.diff(k_stage) != 0) | (np.diff(k_mb) != 0) | (np.diff(k_pass) != 0)
    first_row = np.flatnonzero(new_key)
    boxes = pd.DataFrame(
        {
            "stage": k_stage[first_row],
            "micro_batch": k_mb[first_row],
            "pass": k_pass[first_row],
            "start": np.minimum.reduceat(b_start[order], first_row) if len(order) else b_start,
            "end": np.maximum.reduceat(b_end[order], first_row) if len(order) else b_end,
            "steps": np.diff(np.r_[first_row, len(order)]).astype(np.int64),
            "busy": np.add.reduceat(b_cycles[order], first_row) if len(order) else b_cycles,
            "pass_name": np.asarray(PASSES, dtype=object)[k_pass[first_row]],
        }
    )
    bands = []
    for name in BAND_PHASES:
        sel = phase == PHASES.index(name)
        if sel.any():
            bands.append((name, float(start[sel].min()), float(end[sel].max())))
    # the wait for the host before the pipeline starts (input StreamCopyBegin), when it is one
    # stretch before the first band
    host = phase == PHASES.index("host")
    host_events = trace.host_lane()
    if host_events.empty and host.any() and bands and float(end[host].max()) <= bands[0][1]:
        # before format 1.2 the host's wait at the start of a call was in the device trace
        bands.insert(0, ("host", float(start[host].min()), float(end[host].max())))
    if not host_events.empty and n and float(host_events["start"].min()) < t0:
        # the host's time before the device starts (preparation, the call's round trip), from
        # the host timeline: drawn as the host-wait band in front of the pipeline
        bands.insert(0, ("host", float(host_events["start"].min()), t0))
    return PipelineChart(
        n_stages=n_stages,
        stage_ipu=stage_ipu,
        boxes=boxes,
        bands=bands,
        phase_share=ex.phase_share(),
        stage_cycles=stage_cycles,
        stage_compute_cycles=stage_compute,
        bottleneck=int(np.argmax(stage_cycles)) if stage_cycles.any() else 0,
        imbalance=float(ex.stage_imbalance),
        stash_bytes=_stash_by_stage(analysis, n_stages, stage_ipu),
        t0=t0,
        t1=t1 if t1 > t0 else t0 + 1,
        run_config=dict(analysis.run_config or {}),
        host_events=host_events,
        host_wait_share=analysis.metrics.host_wait_share,
        clock_hz=trace.clock_hz,
    )
