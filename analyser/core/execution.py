"""Execution statistics: one chunked pass over /execution/steps.

Everything the CLI, the reports and the GUI show about the execution (cycles and counts by step
type per IPU, tile balance, StreamCopy bytes by direction and destination, pipeline phases, stage
load, host round trips, cycles per program and per operation) comes from a single pass over the
step table, read in row chunks and aggregated with ``np.bincount``. The result is cached by
:class:`analyser.core.Analysis`, so the step table is read at most once per open profile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analyser.core.source import Source
from profiles import schema

STEP_TYPES = schema.PROGRAM_TYPES
PHASES = schema.PHASES
DESTINATIONS = schema.DESTINATIONS
_NT = len(STEP_TYPES)
_NP = len(PHASES)
_ND = len(DESTINATIONS)
_T = {name: i for i, name in enumerate(STEP_TYPES)}
STREAM_TYPES = tuple(_T[n] for n in ("StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd"))
#: Wall-clock precedence of phases: while any IPU fills or flushes the pipeline the run is in
#: ramp-up / ramp-down, then the weight update, then the main phase, then host-only time.
PHASE_PRECEDENCE = ("rampUp", "rampDown", "weightUpdate", "main", "host", "none")
COLUMNS = (
    "program",
    "ipu",
    "start",
    "cycles",
    "type",
    "stage",
    "phase",
    "bytes_in",
    "bytes_out",
    "dest",
)


@dataclass
class ExecutionSummary:
    """Aggregated execution statistics of one profile (arrays indexed by IPU first).

    Cycle figures are tile-clock cycles; ``clock_hz`` turns them into seconds.
    """

    num_ipus: int
    clock_hz: float
    n_steps: int
    #: Cycles of the device trace (all IPUs; profiles before format 1.2 included the host's
    #: wait at the start of a call) and cycles the IPUs were busy.
    total_cycles: int
    device_cycles: int
    #: Host time per call not hidden behind the device.
    host_seconds: float
    samples: int
    cycles_per_sample: float
    #: Host-inclusive samples per second (what a training loop's progress bar shows).
    throughput_samples_per_s: float
    #: Host calls (device-iteration runs) in the profile.
    host_round_trips: int
    #: [ipus, step types]: summed cycles and number of executed steps per type.
    cycles_by_type: np.ndarray
    count_by_type: np.ndarray
    #: [ipus, step types]: cycle-weighted mean tile balance of the steps of each type.
    tile_balance_by_type: np.ndarray
    #: [ipus]: cycle-weighted tile balance of the OnTileExecute (compute) steps.
    tile_balance: np.ndarray
    #: [ipus, destinations]: StreamCopy bytes received (host -> IPU) and sent (IPU -> host).
    streamcopy_rx_by_dest: np.ndarray
    streamcopy_tx_by_dest: np.ndarray
    #: [ipus]: GlobalExchange (IPU-to-IPU) bytes received and sent.
    global_exchange_rx: np.ndarray
    global_exchange_tx: np.ndarray
    #: [ipus, phases]: busy cycles per phase on each IPU.
    phase_cycles: np.ndarray
    #: [ipus, step types, phases]: busy cycles by step type and phase.
    cycles_by_type_phase: np.ndarray
    #: [ipus, destinations]: StreamCopyMid cycles receiving (rx) and sending (tx) per destination.
    mid_rx_cycles_by_dest: np.ndarray
    mid_tx_cycles_by_dest: np.ndarray
    #: [phases]: wall-clock cycles of each phase; a moment where IPUs run steps of different
    #: phases counts once, for the phase first in PHASE_PRECEDENCE (the shares sum to <= 1).
    phase_wall_cycles: np.ndarray
    #: [stages]: busy cycles per pipeline stage (all IPUs), and the compute (OnTileExecute) part.
    stage_cycles: np.ndarray
    stage_compute_cycles: np.ndarray
    #: [ipus]: cycle at which each IPU's last step ends.
    span_cycles: np.ndarray
    #: [programs]: total cycles and executions of each program over the run.
    program_cycles: np.ndarray = field(repr=False)
    program_executions: np.ndarray = field(repr=False)
    #: One host call including the host time not hidden behind the device (format 1.2; for
    #: older profiles the device trace, which then held that time as StreamCopyBegin).
    host_inclusive_cycles: int = 0
    #: Samples per second of the device alone.
    device_throughput_samples_per_s: float = 0.0
    #: The engine's host model of the run (format 1.2 ``host_model``; empty before).
    host_model: dict = field(default_factory=dict, repr=False)
    #: [ipus, programs]: total cycles and executions of each program on each IPU.
    program_cycles_by_ipu: np.ndarray = field(
        default_factory=lambda: np.zeros((0, 0), np.int64), repr=False
    )
    program_executions_by_ipu: np.ndarray = field(
        default_factory=lambda: np.zeros((0, 0), np.int64), repr=False
    )

    @property
    def host_exposed_cycles(self) -> int:
        """Host time outside the device trace that the device waits for (cycles per call)."""
        return max(0, int(self.host_inclusive_cycles) - int(self.total_cycles))

    # -- derived figures -----------------------------------------------------------------------
    @property
    def step_types(self) -> tuple[str, ...]:
        """The step types, in the format's order."""
        return STEP_TYPES

    @property
    def streamcopy_rx_bytes(self) -> np.ndarray:
        """[ipus] StreamCopy bytes received by each IPU (all destinations)."""
        return self.streamcopy_rx_by_dest.sum(axis=1)

    @property
    def streamcopy_tx_bytes(self) -> np.ndarray:
        """StreamCopy bytes sent per IPU (summed over destinations)."""
        return self.streamcopy_tx_by_dest.sum(axis=1)

    def type_share(self, ipu: int | None = None) -> dict[str, float]:
        """Share of busy cycles by step type on one IPU, or over all IPUs when ``ipu`` is None."""
        c = self.cycles_by_type.sum(axis=0) if ipu is None else self.cycles_by_type[ipu]
        tot = float(c.sum())
        return {t: (float(c[i]) / tot if tot else 0.0) for i, t in enumerate(STEP_TYPES[3:], 3)}

    def share_of(self, step_type: str, ipu: int | None = None) -> float:
        """Share of the cycles spent in ``step_type`` (on ``ipu``, or over all IPUs)."""
        return self.type_share(ipu).get(step_type, 0.0)

    def phase_share(self) -> dict[str, float]:
        """Wall-clock share of the run spent in each phase (ramp-up, main, ramp-down, ...)."""
        tot = float(self.total_cycles) or 1.0
        return {p: float(self.phase_wall_cycles[i]) / tot for i, p in enumerate(PHASES)}

    @property
    def ramp_share(self) -> float:
        """Share of the run in pipeline ramp-up and ramp-down."""
        s = self.phase_share()
        return s["rampUp"] + s["rampDown"]

    @property
    def host_wait_cycles(self) -> np.ndarray:
        """[ipus] cycles each IPU waits for the host (StreamCopyBegin)."""
        return self.cycles_by_type[:, _T["StreamCopyBegin"]]

    @property
    def host_wait_share(self) -> float:
        """Largest share of the host-inclusive run any IPU spends waiting for the host
        (StreamCopyBegin in the trace plus the host time outside it; XProf-style grading)."""
        span = self.host_inclusive_cycles or self.total_cycles
        if not span:
            return 0.0
        return float(self.host_wait_cycles.max() + self.host_exposed_cycles) / float(span)

    @property
    def compute_share(self) -> float:
        """Share of the cycles spent computing (OnTileExecute)."""
        return self.share_of("OnTileExecute")

    @property
    def round_trips_per_sample(self) -> float:
        """Host round trips per sample."""
        return self.host_round_trips / self.samples if self.samples else 0.0

    @property
    def stage_imbalance(self) -> float:
        """Longest stage / mean stage (1.0 = balanced; 0 when there are no stages)."""
        s = self.stage_cycles[self.stage_cycles > 0]
        return float(s.max() / s.mean()) if s.size else 0.0


class PartialExecutionSummary(ExecutionSummary):
    """An execution summary made from a caller's own pass over the steps: the sums it made
    (cycles by IPU and step type, cycles and steps by IPU and program row; exact integers, as
    the whole summary's) and the /execution attributes. Any other figure (tile balance, bytes,
    phases, stages, spans) comes from the whole summary, made on first use by ``full`` (one
    more pass over the step table), so every figure is the one :func:`summarise_execution`
    gives and a command that never asks for the others reads only the columns it needs."""

    def __init__(
        self,
        src: Source,
        *,
        cycles_by_type: np.ndarray,
        program_cycles_by_ipu: np.ndarray,
        program_executions_by_ipu: np.ndarray,
        full: Callable[[], ExecutionSummary],
    ) -> None:
        meta = src.meta
        self._full_summary = full
        self._made: ExecutionSummary | None = None
        self.num_ipus = int(meta["num_ipus"])
        self.clock_hz = float(meta["clock_hz"])
        self.n_steps = src.n_steps
        self.cycles_by_type = cycles_by_type
        self.program_cycles_by_ipu = program_cycles_by_ipu
        self.program_executions_by_ipu = program_executions_by_ipu
        self.program_cycles = program_cycles_by_ipu.sum(axis=0)
        self.program_executions = program_executions_by_ipu.sum(axis=0)
        if "total_cycles" in src.execution_attrs:  # else the totals need each IPU's span
            self.__dict__.update(_run_totals(src, np.zeros(0, np.int64), self.clock_hz))
        else:
            full_ = self._whole()
            for k in _TOTALS:
                setattr(self, k, getattr(full_, k))

    def _whole(self) -> ExecutionSummary:
        if self._made is None:
            self._made = self._full_summary()
        return self._made

    def __getattr__(self, name: str) -> Any:
        # called only for what __init__ did not set: the whole summary's figures
        if name.startswith("_") or name not in ExecutionSummary.__dataclass_fields__:
            raise AttributeError(name)
        value = getattr(self._whole(), name)
        self.__dict__[name] = value
        return value


def _union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of half-open intervals (vectorised)."""
    if starts.size == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    cm = np.maximum.accumulate(e)
    prev = np.concatenate(([np.iinfo(np.int64).min], cm[:-1]))
    return int(np.maximum(0, cm - np.maximum(s, prev)).sum())


def exact_sums(
    keys: np.ndarray, values: np.ndarray, n: int, big: float | None = None
) -> np.ndarray:
    """Exact integer sums of ``values`` by ``keys`` in [0, n): a float64 bincount while every
    partial sum is below 2**53, where float64 holds integers exactly, else a sort. ``big``: a
    bound of the partial sums when known (the largest |value| times their number)."""
    if not keys.size:
        return np.zeros(n, np.int64)
    if big is None:
        big = max(abs(int(values.max())), abs(int(values.min()))) * float(values.size)
    if big < 2.0**53:
        return np.rint(np.bincount(keys, values, n)).astype(np.int64)
    out = np.zeros(n, np.int64)
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    out[k[starts]] = np.add.reduceat(values[order], starts)
    return out


#: Also hand every chunk of the summary's pass to ``visit(first_row, {column: array})``: the
#: columns it names (read with the summary's, in the same pass) and the function.
StepVisitor = tuple[Sequence[str], Callable[[int, dict[str, np.ndarray]], None]]


def summarise_execution(src: Source, visit: StepVisitor | None = None) -> ExecutionSummary | None:
    """Aggregate the whole step table of ``src`` (None when the profile has no execution).

    ``visit``: (columns, function) also given each chunk of the pass, with ``columns`` among
    its arrays, so that a caller needing other figures of the steps reads the table once."""
    if not src.has_execution:
        return None
    meta = src.meta
    n_ipus = int(meta["num_ipus"])
    clock = float(meta["clock_hz"])
    prog_balance = src.column("/programs/nodes", "tile_balance").astype(np.float64)
    n_prog = prog_balance.size

    k = n_ipus * _NT
    bal = np.zeros(k, np.float64)
    # cycles as exact integer sums, chunk by chunk: by (IPU, step type, phase), by (IPU,
    # program row), by (stage + 1, compute or not); the coarser sums add these up
    k3 = n_ipus * _NT * _NP
    ph = np.zeros(k3, np.int64)
    cnt3 = np.zeros(k3, np.int64)
    kp = n_ipus * n_prog
    pcyc = np.zeros(kp, np.int64)
    pexe = np.zeros(kp, np.int64)
    stage2 = np.zeros(4, np.int64)
    # bytes by (IPU, destination) of the stream copies, then by IPU of the global exchanges:
    # one key for the four byte and cycle sums
    n_dest = n_ipus * _ND
    n_bytes = n_dest + n_ipus
    b_in = np.zeros(n_bytes, np.float64)
    b_out = np.zeros(n_bytes, np.float64)
    mrx = np.zeros(n_bytes, np.float64)
    mtx = np.zeros(n_bytes, np.float64)
    mid = _T["StreamCopyMid"]
    span = np.zeros(n_ipus, np.int64)
    seg_phase: list[np.ndarray] = []
    seg_start: list[np.ndarray] = []
    seg_end: list[np.ndarray] = []
    seg_ipu: list[np.ndarray] = []
    is_stream = np.zeros(_NT, bool)
    is_stream[list(STREAM_TYPES)] = True
    moves_bytes = is_stream.copy()
    moves_bytes[_T["GlobalExchange"]] = True
    ote = _T["OnTileExecute"]
    columns = COLUMNS if visit is None else tuple(dict.fromkeys((*COLUMNS, *visit[0])))

    # The reader has checked every value against its bounds (IPU in [0, IPUs), stage >= -1,
    # codes within their enumerations, cycles >= 0), so the sums go by keys without masks.
    for lo, c in src.iter_steps(columns):
        if visit is not None:
            visit[1](lo, c)
        ipu = c["ipu"].astype(np.int64)
        typ = c["type"]
        cyi = c["cycles"].astype(np.int64, copy=False)
        cy = cyi.astype(np.float64)
        big = float(cyi.max()) * cyi.size if cyi.size else 0.0  # cycles are >= 0
        start = c["start"].astype(np.int64, copy=False)
        end = start + cyi
        prog = c["program"]
        phase = c["phase"].astype(np.int64)
        it = ipu * _NT + typ
        bal += np.bincount(it, cy * prog_balance[prog], k)
        key = it * _NP + phase
        ph += exact_sums(key, cyi, k3, big)
        cnt3 += np.bincount(key, minlength=k3)
        key = ipu * n_prog + prog
        pcyc += exact_sums(key, cyi, kp, big)
        pexe += np.bincount(key, minlength=kp)
        st = c["stage"].astype(np.int64)
        n_s = max(stage2.size, (int(st.max()) + 2) * 2 if st.size else 0)
        if n_s > stage2.size:
            stage2 = np.pad(stage2, (0, n_s - stage2.size))
        stage2 += exact_sums((st + 1) * 2 + (typ == ote), cyi, stage2.size, big)
        # stream copies and global exchanges: the steps that move bytes, few of a run's
        xs = np.flatnonzero(moves_bytes[typ])
        x_typ, x_ipu, x_cy = typ[xs], ipu[xs], cy[xs]
        kb = np.where(is_stream[x_typ], x_ipu * _ND + c["dest"][xs], n_dest + x_ipu)
        bi, bo = c["bytes_in"][xs], c["bytes_out"][xs]
        b_in += np.bincount(kb, bi.astype(np.float64), n_bytes)
        b_out += np.bincount(kb, bo.astype(np.float64), n_bytes)
        mm = x_typ == mid
        mrx += np.bincount(kb, np.where(mm & (bi > 0), x_cy, 0.0), n_bytes)
        mtx += np.bincount(kb, np.where(mm & (bo > 0) & (bi == 0), x_cy, 0.0), n_bytes)
        # Runs of consecutive steps with one phase on one IPU become segments (few per run).
        brk = np.flatnonzero((np.diff(phase) != 0) | (np.diff(ipu) != 0)) + 1
        first = np.concatenate(([0], brk))
        seg_first_ipu = ipu[first]
        seg_last_end = np.maximum.reduceat(end, first)
        np.maximum.at(span, seg_first_ipu, seg_last_end)  # each segment is on one IPU
        seg_phase.append(phase[first])
        seg_start.append(start[first])
        seg_end.append(seg_last_end)
        seg_ipu.append(seg_first_ipu)

    rx, tx = b_in[:n_dest], b_out[:n_dest]
    grx, gtx = b_in[n_dest:], b_out[n_dest:]
    mrx, mtx = mrx[:n_dest], mtx[:n_dest]
    wall = _phase_wall_cycles(seg_phase, seg_start, seg_end, seg_ipu)
    ph3 = ph.reshape(n_ipus, _NT, _NP)
    cyc2 = ph3.sum(axis=2)
    cyc = cyc2.ravel().astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        bal_t = np.where(cyc > 0, bal / np.where(cyc > 0, cyc, 1), 0.0).reshape(n_ipus, _NT)
    # stage s: bins 2 (s + 1) (not compute) and 2 (s + 1) + 1 (compute); bins 0, 1: no stage
    stage_c = stage2[3::2]
    stage = stage2[2::2] + stage_c
    pcyc2, pexe2 = pcyc.reshape(n_ipus, n_prog), pexe.reshape(n_ipus, n_prog)
    return ExecutionSummary(
        num_ipus=n_ipus,
        clock_hz=clock,
        n_steps=src.n_steps,
        **_run_totals(src, span, clock),
        cycles_by_type=cyc2,
        count_by_type=cnt3.reshape(n_ipus, _NT, _NP).sum(axis=2),
        tile_balance_by_type=bal_t,
        tile_balance=bal_t[:, ote].copy(),
        streamcopy_rx_by_dest=rx.reshape(n_ipus, _ND).astype(np.int64),
        streamcopy_tx_by_dest=tx.reshape(n_ipus, _ND).astype(np.int64),
        global_exchange_rx=grx.astype(np.int64),
        global_exchange_tx=gtx.astype(np.int64),
        phase_cycles=ph3.sum(axis=1),
        cycles_by_type_phase=ph3,
        mid_rx_cycles_by_dest=mrx.reshape(n_ipus, _ND).astype(np.int64),
        mid_tx_cycles_by_dest=mtx.reshape(n_ipus, _ND).astype(np.int64),
        phase_wall_cycles=wall,
        stage_cycles=stage if stage.any() else np.zeros(0, np.int64),
        stage_compute_cycles=stage_c.copy() if stage.any() else np.zeros(0, np.int64),
        span_cycles=span,
        program_cycles=pcyc2.sum(axis=0),
        program_executions=pexe2.sum(axis=0),
        program_cycles_by_ipu=pcyc2,
        program_executions_by_ipu=pexe2,
    )


def _phase_wall_cycles(
    seg_phase: list[np.ndarray],
    seg_start: list[np.ndarray],
    seg_end: list[np.ndarray],
    seg_ipu: list[np.ndarray],
) -> np.ndarray:
    """Wall-clock cycles per phase from the per-chunk runs of one phase on one IPU: a moment
    belongs to the highest-precedence phase any IPU runs (``PHASE_PRECEDENCE``)."""
    sp = np.concatenate(seg_phase) if seg_phase else np.zeros(0, np.int64)
    ss = np.concatenate(seg_start) if seg_start else np.zeros(0, np.int64)
    se = np.concatenate(seg_end) if seg_end else np.zeros(0, np.int64)
    si = np.concatenate(seg_ipu) if seg_ipu else np.zeros(0, np.int64)
    if sp.size:  # merge segments split by chunk boundaries (same IPU and phase, adjacent)
        first = np.flatnonzero(np.concatenate(([True], (np.diff(sp) != 0) | (np.diff(si) != 0))))
        sp, ss, se = sp[first], ss[first], np.maximum.reduceat(se, first)
    wall = np.zeros(_NP, np.int64)
    covered = 0
    chosen = np.zeros(sp.shape, bool)
    for name in PHASE_PRECEDENCE:
        chosen |= sp == PHASES.index(name)
        u = _union_length(ss[chosen], se[chosen])
        wall[PHASES.index(name)] = u - covered
        covered = u
    return wall


#: The fields :func:`_run_totals` gives.
_TOTALS = (
    "total_cycles",
    "device_cycles",
    "host_seconds",
    "samples",
    "cycles_per_sample",
    "throughput_samples_per_s",
    "host_round_trips",
    "host_inclusive_cycles",
    "device_throughput_samples_per_s",
    "host_model",
)


def _run_totals(src: Source, span: np.ndarray, clock: float) -> dict[str, Any]:
    """The run's totals from the /execution attributes (``span``, each IPU's last cycle, when
    the profile does not record ``total_cycles``): the :class:`ExecutionSummary` fields
    ``total_cycles`` to ``host_round_trips``, ``host_inclusive_cycles``,
    ``device_throughput_samples_per_s`` and ``host_model``."""
    ex = src.execution_attrs
    runs = ex.get("run_starts_count")
    if runs is None:
        runs = src.array("/execution/run_starts").size if src.has("/execution") else 0
    total = int(ex.get("total_cycles", int(span.max()) if span.size else 0))
    samples = int(ex.get("samples", 0))
    thr = float(ex.get("throughput", samples / (total / clock) if total and samples else 0.0))
    device = int(ex.get("device_cycles", 0))
    dev_thr = ex.get("device_throughput")
    if dev_thr is None:  # before 1.2: the device part of total_cycles
        dev_thr = samples / (device / clock) if device and samples else thr
    host_model = ex.get("host_model") or {}
    if isinstance(host_model, str):
        import json

        host_model = json.loads(host_model)
    return {
        "total_cycles": total,
        "device_cycles": device,
        "host_seconds": float(ex.get("host_seconds", 0.0)),
        "samples": samples,
        "cycles_per_sample": float(
            ex.get("cycles_per_sample", total / samples if samples else 0.0)
        ),
        "throughput_samples_per_s": thr,
        "host_round_trips": int(runs),
        "host_inclusive_cycles": int(ex.get("host_inclusive_cycles", total)),
        "device_throughput_samples_per_s": float(dev_thr),
        "host_model": dict(host_model),
    }
