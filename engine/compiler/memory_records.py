"""The records handed between the phases of ``engine.compiler.memory.build_memory`` (frozen:
each phase reads the previous ones, never changes them), and the whole-array helpers the phases
share (exact scatter-adds, per-tile range sums over IPUs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.compiled import (
    LivenessReport,
    MemoryReport,
    ProgramIO,
    VariableTable,
)
from profiles import schema
from profiles.liveness import TileChanges

if TYPE_CHECKING:  # pragma: no cover
    from engine.compiler.compile_plan import CompilePlan
    from engine.compiler.lowering import Lowered
    from engine.compiler.plan import OpPlans
    from engine.graph import Graph
    from engine.targets import Target

CAT = {name: i for i, name in enumerate(schema.MEMORY_CATEGORIES)}
KIND = {name: i for i, name in enumerate(schema.VARIABLE_KINDS)}
NON_INTERLEAVED_CATS = [c for c in schema.MEMORY_CATEGORIES if c != "variable"]


def _ceil_div(a, b):
    return -(-a // b)


def _sorted_distinct(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` of a 1-D array by a sort (numpy's hash-based ``np.unique`` imports
    numpy.ma on its first call: 13 ms in a fresh process)."""
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if len(a) else a


def _distinct(values) -> tuple[list, np.ndarray]:
    """The distinct values of a 1-D array (strings or objects) in first-seen order, and each
    element's index among them (a dict pass: no sort of Python objects)."""
    index: dict = {}
    inverse = np.fromiter(
        (index.setdefault(v, len(index)) for v in values), dtype=np.int64, count=len(values)
    )
    return list(index), inverse


@dataclass(frozen=True)
class MemoryInputs:
    """What ``build_memory`` reads: the compile's tables, the resolved run options (``plan``)
    and the target's figures."""

    graph: Graph  # forward, per sample
    lowered: Lowered  # lowered op rows
    tile_plan: OpPlans
    programs: dict[str, np.ndarray]  # leaf program columns, with "ipu"
    op_ipu: np.ndarray  # IPU of each lowered op
    plan: CompilePlan
    target: Target

    @property
    def num_ipus(self) -> int:
        return self.plan.num_ipus

    @property
    def stages(self) -> int:
        return self.plan.stages

    @property
    def tiles_per_ipu(self) -> int:
        return self.plan.tiles_per_ipu

    @property
    def compute_tiles(self) -> int:
        """Tiles per IPU available to compute (tiles - I/O tiles)."""
        return self.plan.compute_tiles

    @property
    def micro_batch(self) -> int:
        return self.plan.micro_batch

    @property
    def activation_bytes_per_element(self) -> int:
        return self.plan.compute_bytes

    @property
    def weight_bytes_per_element(self) -> int:
        return self.plan.weight_bytes

    def output_tiles(self, row: int, nbytes: int) -> tuple[int, int]:
        """First tile and tile count of an output of ``nbytes`` made by lowered op ``row``: the
        op's tiles, no more than ``nbytes`` needs at the target's minimum bytes per tile."""
        P = self.tile_plan
        count = int(
            min(P.tiles_used[row], max(1, _ceil_div(nbytes, self.target.min_bytes_per_tile)))
        )
        return int(P.tile_start[row]), count

    def output_tiles_of(
        self, rows: np.ndarray, nbytes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``output_tiles`` of many outputs at once (int64 arrays)."""
        P = self.tile_plan
        need = np.maximum(1, _ceil_div(nbytes, self.target.min_bytes_per_tile))
        count = np.minimum(P.tiles_used[rows].astype(np.int64), need)
        return P.tile_start[rows].astype(np.int64), count


@dataclass(frozen=True)
class LivenessSteps:
    """Liveness steps (compute sets in program order) and the steps of every op's passes.

    Arrays over lowered ops: ``first`` / ``last`` step of each op. Arrays over forward graph ops
    (-1, or ``count`` for "none" in ``backward_first``): the lowered row of the op's forward and
    recompute, the first / last step of its backward ops, its update, its accumulation and the
    last step of the op that makes its weight gradient.
    """

    program_rows: np.ndarray  # program row of each step
    step_op: np.ndarray  # lowered op of each step
    first: np.ndarray
    last: np.ndarray
    forward_row: np.ndarray
    recompute_row: np.ndarray
    backward_first: np.ndarray
    backward_last: np.ndarray
    update_step: np.ndarray
    accumulate_step: np.ndarray
    weight_grad_step: np.ndarray
    loss_rows: np.ndarray
    loss_grad_rows: np.ndarray
    normalise_rows: np.ndarray

    @property
    def count(self) -> int:
        return len(self.program_rows)


@dataclass(frozen=True)
class ActivationBytes:
    """Per stage: activation bytes kept for the backward (``saved``, stage inputs excluded) and
    bytes sent from stage s to s + 1 (``boundary``)."""

    saved: np.ndarray
    boundary: np.ndarray


@dataclass(frozen=True)
class StreamedTensors:
    """The graph input, labels and outputs as streamed to / from the host."""

    input_bytes: int  # one micro-batch
    input_bytes_per_element: int
    input_dtype: str
    saved_input_bytes: int  # input (or normalised input) bytes kept for the backward
    label_bytes_per_sample: int
    output_bytes_per_micro_batch: int


@dataclass(frozen=True)
class WeightBytes:
    """Per IPU: weights, weight gradients (all-reduced across replicas), offloaded optimiser
    state and offloaded accumulators (one replica, before replicated tensor sharding)."""

    weights: np.ndarray
    gradients: np.ndarray
    remote: np.ndarray
    remote_accumulators: np.ndarray


@dataclass(frozen=True)
class ProgramCode:
    """Per leaf program: code bytes over its tiles and the per-tile figures that make them."""

    code_bytes: np.ndarray  # control + exchange code over the program's tiles
    owned: np.ndarray  # bool: not an outlined duplicate
    participates: np.ndarray  # bool: takes part in control flow (not a Sync)
    is_compute_set: np.ndarray
    vertices_per_tile: np.ndarray  # 0 for duplicates and non-compute-sets
    exchange_code_per_tile: np.ndarray  # receiving tiles; 0 for duplicates and non-exchanges
    sender_tile_start: np.ndarray  # the tiles that send an exchange's data (its source tensor)
    sender_tile_count: np.ndarray
    sender_code_per_tile: np.ndarray  # 0 for duplicates and non-exchanges
    state_bytes: np.ndarray  # per vertex, by vertex family
    field_bytes: np.ndarray
    vector_list_bytes: np.ndarray
    vertex_type_code_bytes: np.ndarray  # per vertex type


@dataclass(frozen=True)
class TileMemory:
    """Per IPU and tile: bytes per category and the not-always-live bytes per step."""

    by_category: np.ndarray  # (ipus, tiles, categories)
    per_tile: TileChanges  # per IPU, the steps where its per-tile bytes change (int32, saturated)
    not_always_live_per_step: np.ndarray  # (ipus, steps), exact
    peak_not_always_live: np.ndarray  # (ipus, tiles)
    variable_count: np.ndarray  # (ipus, tiles)


@dataclass(frozen=True)
class MemoryResult:
    variables: VariableTable
    memory: MemoryReport
    liveness: LivenessReport
    io: ProgramIO
    oom: bool
    program_code: np.ndarray  # code bytes per leaf program (over its tiles)


def _scatter_add(index, values, size: int) -> np.ndarray:
    """``out[index[i]] += values[i]`` into a zeroed int64 array of ``size``, exact.

    ``np.bincount`` (5-20x faster than ``np.add.at``) sums in float64, exact for integers while
    every partial sum stays below 2**53: taken when the values' absolute sum does; otherwise
    ``np.add.at``."""
    values = np.asarray(values)
    if values.ndim == 0:
        values = np.full(len(index), values, dtype=np.int64)
    if not len(values) or float(np.abs(values).sum(dtype=np.float64)) < _FLOAT_EXACT:
        return np.bincount(index, weights=values, minlength=size).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, index, values)
    return out


_FLOAT_EXACT = 2.0**52  # below 2**53 with a margin for the float sum used to check it


def _spread_ipus(values, ipu, t0, tn, n_ipus: int, size: int, out=None) -> np.ndarray:
    """Sum of ``values`` (per tile) over the tile ranges ``[t0, t0 + tn)`` of their IPUs ->
    (n_ipus, size) per tile; written into ``out`` (e.g. one category of the per-tile table)
    when given."""
    at = np.asarray(ipu, dtype=np.int64) * (size + 1) + np.asarray(t0, dtype=np.int64)
    d = _scatter_add(
        np.concatenate((at, at + tn)), np.concatenate((values, -values)), n_ipus * (size + 1)
    )
    return np.cumsum(d.reshape(n_ipus, size + 1)[:, :-1], axis=1, out=out)
