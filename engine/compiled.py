"""The compile result handed to the executor: :class:`CompiledProgram`.

``engine.compile(config) -> CompiledProgram``. Everything is a struct of numpy arrays; nothing
here needs the compiler's internals. How to schedule from it (the executor's view):

Programs (``compiled.programs``, a :class:`ProgramTable`)
    One row per *leaf* program the compiler makes: OnTileExecute (compute sets), DoExchange
    (on-chip exchanges) and Sync (the internal sync that opens each BSP superstep). Stream copies,
    inter-IPU copies, all-reduces and remote-buffer copies are NOT leaves here: the executor
    creates them from the byte counts in ``compiled.io`` (below). Columns: ``name``, ``type``
    (code of ``profiles.schema.PROGRAM_TYPES``), ``op`` (row of ``compiled.ops``, -1 for none),
    ``ipu``, ``stage``, ``pass_`` (code of ``PASSES``), ``segment`` (row of
    ``compiled.segments``), ``cycles`` (one execution: max over tiles), ``bytes_in`` (bytes a
    DoExchange moves, over all tiles), ``bytes_out`` (0 here), ``dest`` (code of
    ``DESTINATIONS``: ``tile`` for exchanges, ``none`` otherwise), ``peer`` (-1), ``sync`` (code of
    ``SYNC_KINDS``), ``transfers`` (1), ``code_bytes`` (control + exchange code of the program
    over all its tiles), ``family`` (vertex type row, OnTileExecute only), ``vertices``.
    Per-tile cycles are stored compactly: a program runs on tiles ``[tile_start, tile_start +
    tile_count)`` of its IPU; the first ``n_max`` of them take ``cycles`` and the rest take
    ``cycles_min``; all other tiles 0 (they wait at the next sync). ``compiled.tile_cycles(rows)``
    expands rows to a dense ``(len(rows), tiles_per_ipu)`` int32 matrix and
    ``compiled.tile_balance(rows)`` gives mean / max without expanding.

Segments (``compiled.segments``, a :class:`SegmentTable`)
    Programs are stored grouped in ordered segments; segment ``i`` is the contiguous program rows
    ``[first[i], stop[i])``, run in row order. Columns: ``kind``, ``ipu``, ``stage``, ``per``
    (``"micro_batch"``: runs once per micro-batch; ``"step"``: once per weight update) and
    ``first`` / ``stop``. One segment of each kind per stage (stage s runs on IPU
    ``compiled.stage_ipu[s]``), possibly empty, in this canonical order:

    - ``forward`` (stages 0..S-1): the stage's forward ops; the last stage also holds the loss
      ops (pass ``loss``) in training; per micro-batch.
    - ``recompute`` (training with recomputation ``pipeline-stages``): the stage's forward ops
      replayed before its backward (only the stage input was stashed); per micro-batch, run just
      before ``backward`` of the same stage. With ``checkpoints`` the replayed ops (pass
      backward, names ending ``/recompute``) sit inside ``backward``, each group just before
      the backward ops that need it.
    - ``backward`` (training; stages S-1..0): input and weight gradients, and with GA > 1 the
      accumulation of weight gradients into the accumulators; per micro-batch.
    - ``update`` (training; stages 0..S-1): the optimiser update of the stage's weights; per step.

``compiled.io`` (a :class:`ProgramIO`: plain numbers and per-stage / per-IPU tuples) gives what
the executor moves:
    ``input_bytes_per_sample`` (as streamed: 4 / 2 / 1 bytes per element for FP32 / FP16 /
    8-bit input; token ids are int32), ``input_elems_per_sample``, ``label_bytes_per_sample``,
    ``output_bytes_per_micro_batch`` (the loss in training, with the logits when
    ``training_outputs`` is output-and-loss; the logits in inference: what output mode
    ``all`` returns per micro-batch), ``input_stage`` (0), ``loss_stage`` (S-1),
    ``activation_bytes[s]`` (what one micro-batch's forward on stage s sends to stage s+1),
    ``gradient_bytes[s]`` (what its backward sends to stage s-1), and per IPU:
    ``weight_bytes[i]``, ``weight_gradient_bytes[i]`` (all-reduced across replicas before the
    update), ``remote_bytes[i]`` (offloaded optimiser state streamed in and back out at each
    update, for one replica, before replicated tensor sharding divides it),
    ``remote_accumulator_bytes[i]`` (offloaded accumulators streamed in / out per micro-batch),
    ``stash_bytes[i]``, ``collective_code_bytes[i]`` (code over the IPU's tiles of its
    cross-replica reduce-scatter and all-gather ring programs; empty without replicas).

Everything else
    ``ops`` (:class:`OpTable`, the lowered operations), ``variables`` (:class:`VariableTable`),
    ``vertex_types``, ``compute_sets`` (dicts of columns), ``memory`` (:class:`MemoryReport`),
    ``liveness`` (:class:`LivenessReport`), ``oom`` (any tile of any IPU out of memory),
    ``io`` (bytes per micro-batch and per IPU: inputs, labels, outputs, gradients, remote and
    stash bytes), ``notes`` (engine notes for the profile), ``graph`` (the forward model graph).

Profile data: :func:`engine.profile_data.profile_data` lays out a compiled program (and its
execution, when it ran) as the writer's dict; with no execution (OOM) the program tree is the
default one (:func:`default_tree`: a root Sequence, one Sequence per segment, the leaves). This
module imports nothing of the engine's compile, execute or profile-data layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import numpy as np

from profiles import schema
from profiles.liveness import TileChanges
from profiles.runs import RunRows, tile_ranges

if TYPE_CHECKING:  # pragma: no cover
    from engine.config import RunConfig
    from engine.graph import Graph
    from engine.targets import Target


def _code(enum: str, name: str) -> int:
    return schema.code(enum, name)


T_ONTILE = _code("program_type", "OnTileExecute")
T_EXCHANGE = _code("program_type", "DoExchange")
T_GLOBAL = _code("program_type", "GlobalExchange")
T_SC_BEGIN = _code("program_type", "StreamCopyBegin")
T_SC_MID = _code("program_type", "StreamCopyMid")
T_SC_END = _code("program_type", "StreamCopyEnd")
T_SYNC = _code("program_type", "Sync")
T_SEQUENCE = _code("program_type", "Sequence")
T_REPEAT = _code("program_type", "Repeat")
T_CALL = _code("program_type", "Call")


@dataclass
class _Columns:
    """A struct of equal-length numpy arrays."""

    def __len__(self) -> int:
        return len(getattr(self, fields(self)[0].name))

    def columns(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def take(self, idx) -> _Columns:
        return type(self)(**{k: v[idx] for k, v in self.columns().items()})


@dataclass
class OpTable(_Columns):
    """Lowered operations (one row per forward / backward / loss / update op)."""

    name: np.ndarray  # str
    type: np.ndarray  # str, e.g. 'Conv', 'ConvGradWeight', 'Relu', 'AdamUpdate'
    layer: np.ndarray  # str module path
    source: np.ndarray  # str where in the model's code (file:line (class)), '' when unknown
    family: np.ndarray  # str codelet family
    pass_: np.ndarray  # uint8 code of PASSES
    ipu: np.ndarray  # int16
    stage: np.ndarray  # int16
    fwd: np.ndarray  # int32 forward graph op it derives from (-1 for none)
    groups: np.ndarray  # int32 its forward op's AMP groups (conv groups, matmul batch; else 1)
    flops: np.ndarray  # int64, one execution
    bytes_in: np.ndarray  # int64
    bytes_out: np.ndarray  # int64
    cycles: np.ndarray  # int64, sum over its leaf programs of max-over-tiles cycles
    code_bytes: np.ndarray  # int64
    temp_bytes: np.ndarray  # int64, plan temporaries over all tiles
    tiles_used: np.ndarray  # int32
    tile_start: np.ndarray  # int32
    serial_splits: np.ndarray  # int32 (AMP plans: serial steps forced by memory)


@dataclass
class ProgramTable(_Columns):
    """Leaf programs (see the module docstring)."""

    name: np.ndarray
    type: np.ndarray  # uint8
    op: np.ndarray  # int32
    ipu: np.ndarray  # int16
    stage: np.ndarray  # int16
    pass_: np.ndarray  # uint8
    segment: np.ndarray  # int32
    cycles: np.ndarray  # int64
    cycles_min: np.ndarray  # int64
    n_max: np.ndarray  # int32
    tile_start: np.ndarray  # int32
    tile_count: np.ndarray  # int32
    bytes_in: np.ndarray  # int64
    bytes_out: np.ndarray  # int64
    dest: np.ndarray  # uint8
    peer: np.ndarray  # int16
    sync: np.ndarray  # uint8
    transfers: np.ndarray  # int32
    code_bytes: np.ndarray  # int64
    family: np.ndarray  # int16: vertex type row for OnTileExecute (-1 otherwise)
    vertices: np.ndarray  # int64: vertex instances over all tiles (OnTileExecute)

    @property
    def bytes(self) -> np.ndarray:
        """Bytes in plus bytes out of each exchange."""
        return self.bytes_in + self.bytes_out


@dataclass
class SegmentTable(_Columns):
    """The program's segments: kind, IPU, pipeline stage, how often they run and their programs."""

    kind: np.ndarray  # str
    ipu: np.ndarray  # int16
    stage: np.ndarray  # int16
    per: np.ndarray  # str: 'micro_batch' | 'step'
    first: np.ndarray  # int64
    stop: np.ndarray  # int64

    def find(self, kind: str, stage: int | None = None, ipu: int | None = None) -> np.ndarray:
        """Segment rows of a kind (optionally one stage / IPU), in order."""
        mask = self.kind == kind
        if stage is not None:
            mask &= self.stage == stage
        if ipu is not None:
            mask &= self.ipu == ipu
        return np.flatnonzero(mask)

    def programs(self, seg: int) -> np.ndarray:
        """The program ids of segment ``seg``."""
        return np.arange(self.first[seg], self.stop[seg])


@dataclass
class VariableTable(_Columns):
    """Variables with memory (schema /graph/variables), live intervals in liveness steps."""

    name: np.ndarray
    kind: np.ndarray  # uint8 VARIABLE_KINDS
    dtype: np.ndarray  # str
    shape: np.ndarray  # str
    bytes: np.ndarray  # int64 (0 when offloaded)
    ipu: np.ndarray  # int16
    always_live: np.ndarray  # bool
    live_start: np.ndarray  # int32
    live_end: np.ndarray  # int32
    tile_start: np.ndarray  # int32
    tile_count: np.ndarray  # int32
    interleaved: np.ndarray  # bool
    remote: np.ndarray  # bool
    remote_bytes: np.ndarray  # int64
    op: np.ndarray  # int32


@dataclass
class MemoryReport:
    """Per-tile memory, arrays indexed [ipu, tile, ...] (schema /memory)."""

    by_category: np.ndarray  # (ipus, tiles, categories) int64
    by_region: np.ndarray  # (ipus, tiles, regions) int64
    by_liveness: np.ndarray  # (ipus, tiles, 2) int64
    total: np.ndarray  # (ipus, tiles) int64
    gaps: np.ndarray  # (ipus, tiles) int64
    physical_tile: np.ndarray  # (tiles,) int32
    tile_xy: np.ndarray  # (tiles, 2) int16
    oom_tiles: np.ndarray  # (k, 2) int32
    sram_per_tile: int

    @property
    def peak_tile_bytes(self) -> int:
        """Bytes on the fullest tile (total plus gaps)."""
        return int((self.total + self.gaps).max())


@dataclass
class LivenessReport:
    """Not-always-live memory per liveness step (schema /liveness and /liveness/steps)."""

    step_name: np.ndarray  # str
    step_program: np.ndarray  # int32 leaf program row
    step_op: np.ndarray  # int32
    step_ipu: np.ndarray  # int16
    not_always_live: np.ndarray  # (ipus, lsteps) int64
    per_tile: TileChanges  # per-tile bytes per IPU as changed rows (profiles.liveness)
    always_live: np.ndarray  # (ipus,) int64
    peak_step: np.ndarray  # (ipus,) int32


@dataclass
class ProgramTree:
    """A program tree in depth-first pre-order (schema /programs/nodes).

    Columns ``name``, ``type``, ``parent``, ``ipu``, ``repeat`` for every node; ``leaf`` gives,
    per node, the leaf program row it shows (-1 for control nodes). Every leaf program must
    appear exactly once. Leaf cycles, bytes and code come from the program table.
    """

    name: np.ndarray
    type: np.ndarray  # uint8
    parent: np.ndarray  # int32
    ipu: np.ndarray  # int16
    repeat: np.ndarray  # int64
    leaf: np.ndarray  # int32 (-1 for control nodes)

    def leaf_node(self, n_leaves: int) -> np.ndarray:
        """Node row of each leaf program."""
        out = np.full(n_leaves, -1, dtype=np.int64)
        rows = np.flatnonzero(self.leaf >= 0)
        out[self.leaf[rows]] = rows
        if (out < 0).any():
            missing = int(np.flatnonzero(out < 0)[0])
            raise ValueError(f"program tree misses leaf program {missing}")
        return out


def default_tree(compiled: CompiledProgram) -> ProgramTree:
    """Root Sequence -> one Sequence per segment -> its leaves (no loops shown)."""
    segs = compiled.segments
    n_seg = len(segs)
    progs = compiled.programs
    counts = (segs.stop - segs.first).astype(np.int64)
    total = 1 + n_seg + len(progs)
    # Node rows: root 0; segment i at 1 + i + first[i]; its leaves follow it.
    seg_row = 1 + np.arange(n_seg) + segs.first
    name = np.empty(total, dtype=object)
    type_ = np.zeros(total, dtype=np.uint8)
    parent = np.full(total, -1, dtype=np.int32)
    ipu = np.full(total, -1, dtype=np.int16)
    leaf = np.full(total, -1, dtype=np.int32)
    name[0] = "main"
    type_[0] = T_SEQUENCE
    name[seg_row] = [f"{k}[stage {s}]" for k, s in zip(segs.kind, segs.stage)]
    type_[seg_row] = T_SEQUENCE
    parent[seg_row] = 0
    ipu[seg_row] = segs.ipu
    leaf_rows = (
        np.repeat(seg_row, counts) + 1 + (np.arange(len(progs)) - np.repeat(segs.first, counts))
    )
    name[leaf_rows] = progs.name
    type_[leaf_rows] = progs.type
    parent[leaf_rows] = np.repeat(seg_row, counts)
    ipu[leaf_rows] = progs.ipu
    leaf[leaf_rows] = np.arange(len(progs))
    return ProgramTree(
        name=name,
        type=type_,
        parent=parent,
        ipu=ipu,
        repeat=np.ones(total, dtype=np.int64),
        leaf=leaf,
    )


@dataclass(frozen=True)
class ProgramIO:
    """What the executor moves besides the leaf programs (``compiled.io``, see the module
    docstring): bytes per sample and per micro-batch, per stage and per IPU. The defaults
    describe a program that moves nothing."""

    input_elems_per_sample: int = 0
    input_bytes_per_sample: int = 0  # as streamed: 4 / 2 / 1 bytes per element, int32 tokens
    input_dtype: str = ""  # the streamed input's dtype ('int32': token ids, no image)
    input_fields: int = 1  # tensors a sample holds (BERT's ids, token types and mask: 3)
    label_bytes_per_sample: int = 0  # 0 in inference
    output_bytes_per_micro_batch: int = 0  # loss (and the logits, training_outputs) or logits
    input_stage: int = 0
    loss_stage: int = 0  # the last stage
    activation_bytes: tuple[int, ...] = ()  # per stage: one micro-batch's forward to stage s+1
    gradient_bytes: tuple[int, ...] = ()  # per stage: its backward to stage s-1
    weight_bytes: tuple[int, ...] = ()  # per IPU
    weight_gradient_bytes: tuple[int, ...] = ()  # per IPU, all-reduced across replicas
    remote_bytes: tuple[int, ...] = ()  # per IPU: offloaded optimiser state, one replica
    remote_accumulator_bytes: tuple[int, ...] = ()  # per IPU, per micro-batch
    stash_bytes: tuple[int, ...] = ()  # per IPU
    collective_code_bytes: tuple[tuple[int, ...], ...] = ()  # per IPU: code of each ring


class RunShape:
    """The run's shape read from ``config`` (engine.config.RunConfig) and ``target``
    (engine.targets.Target), shared by every hand-off that carries both as fields."""

    # declared for the type checker only: each dataclass below defines the two as its fields
    config: RunConfig
    target: Target

    @property
    def num_ipus(self) -> int:
        return int(self.config.num_ipus)

    @property
    def tiles_per_ipu(self) -> int:
        return int(self.target.tiles_per_ipu)

    @property
    def stages(self) -> int:
        return int(self.config.stages)


@dataclass
class CompiledProgram(RunShape):
    """What ``engine.compile(config)`` returns (see the module docstring)."""

    config: RunConfig
    target: Target
    graph: Graph  # forward, per sample
    ops: OpTable
    programs: ProgramTable
    segments: SegmentTable
    variables: VariableTable
    vertex_types: dict[str, np.ndarray]
    compute_sets: dict[str, np.ndarray]
    memory: MemoryReport
    liveness: LivenessReport
    oom: bool
    io: ProgramIO
    stage_ipu: np.ndarray  # IPU of each stage
    compute_tiles: int  # tiles per IPU available to compute (tiles - I/O tiles)
    notes: list[str] = field(default_factory=list)

    # -- per-tile cycles -------------------------------------------------------------------
    def tile_cycles(self, rows=None) -> np.ndarray:
        """Dense per-tile cycles ``(len(rows), tiles_per_ipu)`` int32 of leaf programs."""
        p = self.programs
        rows = np.arange(len(p)) if rows is None else np.asarray(rows)
        tiles = np.arange(self.tiles_per_ipu)[None, :]
        start = p.tile_start[rows][:, None]
        rel = tiles - start
        inside = (rel >= 0) & (rel < p.tile_count[rows][:, None])
        hi = rel < p.n_max[rows][:, None]
        out = np.where(hi, p.cycles[rows][:, None], p.cycles_min[rows][:, None])
        return np.where(inside, out, 0).astype(np.int32)

    def tile_cycle_runs(self, rows) -> RunRows | None:
        """The per-tile cycles of leaf programs ``rows`` (rows < 0: all zeros) as runs
        (:func:`profiles.runs.tile_ranges`), the values :meth:`tile_cycles` lays out; ``None``
        when a program's counts are negative (no runs describe its row)."""
        p = self.programs
        rows = np.asarray(rows, np.int64)
        leaf = rows >= 0
        r = np.where(leaf, rows, 0)
        return tile_ranges(
            np.where(leaf, p.tile_start[r], 0),
            np.where(leaf, p.tile_count[r], 0),
            p.n_max[r],
            p.cycles[r],
            p.cycles_min[r],
            self.tiles_per_ipu,
        )

    def tile_balance(self, rows=None) -> np.ndarray:
        """Mean over the IPU's tiles of cycles / max cycles, per leaf program."""
        p = self.programs
        rows = np.arange(len(p)) if rows is None else np.asarray(rows)
        c = p.cycles[rows].astype(np.float64)
        total = c * p.n_max[rows] + p.cycles_min[rows] * (p.tile_count[rows] - p.n_max[rows])
        with np.errstate(invalid="ignore", divide="ignore"):
            bal = np.where(c > 0, total / (np.maximum(c, 1) * self.tiles_per_ipu), 0.0)
        return bal.astype(np.float32)

    def segment_programs(self, kind: str, stage: int | None = None) -> np.ndarray:
        """Leaf program rows of every segment of ``kind`` (optionally one stage), in order."""
        segs = self.segments.find(kind, stage)
        if not len(segs):
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([self.segments.programs(s) for s in segs])


__all__ = [
    "CompiledProgram",
    "LivenessReport",
    "MemoryReport",
    "OpTable",
    "ProgramIO",
    "ProgramTable",
    "ProgramTree",
    "SegmentTable",
    "VariableTable",
    "default_tree",
]
