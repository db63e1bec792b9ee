"""Pipeline schedules: which stage runs which pass of which micro-batch in which row.

A *row* is one superstep across the IPUs of a replica: every IPU runs its work for the row, the
IPUs meet at an external sync, and the activations / gradients of the row cross the IPU-Links in
one GlobalExchange. Rows are the pipeline cycles of the Grouped schedule (Graphcore's pipelining
documentation: PopART User Guide and TensorFlow user guide, "Pipelining"), half-cycles of the Interleaved schedule, and single
stage-passes of the Sequential schedule and of sharded execution.

Pipeline-program stages
-----------------------
With ``S`` user stages (split points), a training pipeline has ``P = 2S - 1`` *pipeline-program
stages*, as in PopART / PopTorch: forward stages ``0 .. S-1``, the last one also running its
backward pass (the loss sits there), then backward stages ``S .. 2S-2`` running the backward of
user stages ``S-2 .. 0``. This is why PopTorch asks for a gradient accumulation of at least
``2S - 1`` when training a pipeline of ``S`` stages (the walkthrough's GA 3 for 2 IPUs).
Inference pipelines have ``P = S``. Program stage ``k`` processes micro-batch ``t - k`` in pipeline
cycle ``t``, so with accumulation ``G``:

* ramp-up (fill)   = ``P - 1`` cycles,
* main             = ``G - (P - 1)`` cycles,
* ramp-down (flush) = ``P - 1`` cycles,

``G + P - 1`` in all, and the ramp share is ``2(P - 1) / (G + P - 1)`` (the pipelining documentation's formula
with ``S`` read as the number of pipeline-program stages). The backward of micro-batch ``m`` on user
stage ``s`` runs ``2(S - 1 - s)`` cycles after its forward: exactly the Grouped stash depth of
the pipelining documentation, which checks the mapping.

All functions here are O(rows x stages) numpy; nothing loops over executed steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.errors import ConfigError
from profiles.schema import code

FORWARD = 0
BACKWARD = 1

RAMP_UP = code("phase", "rampUp")
MAIN = code("phase", "main")
RAMP_DOWN = code("phase", "rampDown")


@dataclass
class Activity:
    """Rows of one iteration (one gradient-accumulation step) and the stage-passes they run.

    ``row_phase[r]`` is the phase code of row ``r``; ``row_cycle[r]`` the pipeline cycle the row
    belongs to (two rows per cycle under Interleaved; one row per stage-pass under Sequential,
    where the cycle is the micro-batch). ``row`` / ``stage`` / ``pass_`` / ``micro_batch`` list
    every stage-pass executed, in execution order within a row.
    """

    n_rows: int
    row_phase: np.ndarray
    row_cycle: np.ndarray
    row: np.ndarray
    stage: np.ndarray
    pass_: np.ndarray
    micro_batch: np.ndarray
    program_stages: int
    pipelined: bool


def program_stages(num_stages: int, training: bool) -> int:
    """Pipeline-program stages P for ``num_stages`` user stages (2S-1 training, S inference)."""
    return 2 * num_stages - 1 if training else num_stages


def min_gradient_accumulation(num_stages: int, training: bool, schedule: str) -> int:
    """Smallest accumulation a pipeline accepts (P for Grouped / Interleaved, 1 otherwise)."""
    if schedule in ("grouped", "interleaved") and num_stages > 1:
        return program_stages(num_stages, training)
    return 1


def _grouped_grid(
    S: int, G: int, training: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
    """(cycle, stage, pass, micro_batch) of every stage-pass of a Grouped pipeline, then the
    number of pipeline cycles ``T`` and of pipeline-program stages ``P``."""
    P = program_stages(S, training)
    T = G + P - 1
    t = np.arange(T)[:, None]
    k = np.arange(P)[None, :]
    mb = t - k
    active = (mb >= 0) & (mb < G)
    # program stage -> (user stage, pass)
    k1 = np.arange(P)
    stage_of = np.where(k1 < S, k1, 2 * S - 2 - k1)
    pass_of = np.where(k1 < S, FORWARD, BACKWARD)
    tt, kk = np.nonzero(active)
    cyc = tt
    st = stage_of[kk]
    ps = pass_of[kk]
    m = mb[tt, kk]
    if training:
        # the last user stage runs its backward right after its forward, in the same cycle
        last = kk == S - 1
        cyc = np.concatenate([cyc, tt[last]])
        st = np.concatenate([st, np.full(last.sum(), S - 1)])
        ps = np.concatenate([ps, np.full(last.sum(), BACKWARD)])
        m = np.concatenate([m, m[last]])
    return cyc, st, ps, m, T, P


def _order(
    row: np.ndarray, stage: np.ndarray, pass_: np.ndarray, mb: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    # within a row: forwards first (stage order), then backwards (reverse stage order)
    key_stage = np.where(pass_ == FORWARD, stage, -stage)
    idx = np.lexsort((key_stage, pass_, row))
    return row[idx], stage[idx], pass_[idx], mb[idx]


def build_activity(num_stages: int, G: int, schedule: str, training: bool) -> Activity:
    """The rows of one iteration for a schedule (see the module docstring)."""
    S = int(num_stages)
    if S < 1:
        raise ConfigError("pipeline: a run needs at least one stage.")
    if schedule in ("single",) and S != 1:
        schedule = "sharded"
    need = min_gradient_accumulation(S, training, schedule)
    if need > G:
        raise ConfigError(
            f"gradient_accumulation: a {schedule} pipeline of {S} stages needs at least {need} "
            f"micro-batches per step (2S-1 when training, S for inference); got {G}."
        )
    if schedule in ("grouped", "interleaved") and S > 1:
        cyc, st, ps, m, T, P = _grouped_grid(S, G, training)
        phase_of_cycle = np.full(T, MAIN, np.uint8)
        phase_of_cycle[: P - 1] = RAMP_UP
        phase_of_cycle[G:] = RAMP_DOWN
        if schedule == "grouped":
            row = cyc
            row_cycle = np.arange(T)
        else:
            # Interleaved: every cycle is a forward half then a backward half, each bounded by
            # its own slowest stage and closed by its own sync and exchange.
            row = 2 * cyc + (ps == BACKWARD)
            row_cycle = np.repeat(np.arange(T), 2)
        n_rows = len(row_cycle)
        row_phase = phase_of_cycle[row_cycle]
        row, st, ps, m = _order(row, st, ps, m)
        return Activity(n_rows, row_phase, row_cycle, row, st, ps, m, P, True)

    # single IPU, sharded, sequential: one micro-batch at a time
    if schedule == "single" or S == 1:
        # one row per micro-batch: forward then backward on the only stage
        mbs = np.arange(G)
        if training:
            row = np.repeat(mbs, 2)
            ps = np.tile([FORWARD, BACKWARD], G)
        else:
            row = mbs
            ps = np.zeros(G, np.int64)
        st = np.zeros(len(row), np.int64)
        m = row.copy()
        return Activity(G, np.full(G, MAIN, np.uint8), np.arange(G), row, st, ps, m, 1, False)
    # sequential / sharded: forward 0..S-1 (the last with its backward), backward S-2..0
    per_mb_stage = (
        np.concatenate([np.arange(S), np.arange(S - 2, -1, -1)]) if training else (np.arange(S))
    )
    per_mb_pass = (
        np.concatenate([np.zeros(S, np.int64), np.ones(S - 1, np.int64)])
        if training
        else np.zeros(S, np.int64)
    )
    R1 = len(per_mb_stage)
    row = np.arange(G * R1)
    st = np.tile(per_mb_stage, G)
    ps = np.tile(per_mb_pass, G)
    m = np.repeat(np.arange(G), R1)
    if training:
        # the last stage's backward shares its forward's row
        last_rows = np.arange(G) * R1 + (S - 1)
        row = np.concatenate([row, last_rows])
        st = np.concatenate([st, np.full(G, S - 1)])
        ps = np.concatenate([ps, np.ones(G, np.int64)])
        m = np.concatenate([m, np.arange(G)])
        # drop the duplicate-free re-numbering: rows stay 0..G*R1-1
    row, st, ps, m = _order(row, st, ps, m)
    n_rows = G * R1
    return Activity(
        n_rows,
        np.full(n_rows, MAIN, np.uint8),
        np.repeat(np.arange(G), R1),
        row,
        st,
        ps,
        m,
        1,
        False,
    )
