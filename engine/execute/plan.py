"""The execution plan: the small, documented input of the execute half of the engine.

``engine.execute`` does not read the compiler's internals directly. An adapter
(:mod:`engine.execute.adapter`) turns the compile engineer's hand-off object
(``engine.compiled.CompiledProgram``) into an :class:`ExecutionPlan`, a plain struct of numpy
arrays and numbers:

* the *leaf programs* the compiler produced (compute sets, on-chip exchanges, their per-tile
  cycles), stored once each (:class:`LeafPrograms`);
* for every pipeline stage, the ordered leaf programs of one micro-batch's forward pass, its
  backward pass and its recomputation (:class:`StagePlan`), and the bytes it sends to the next /
  previous stage over IPU-Links;
* for every IPU of a replica, the weight-update leaf programs and the bytes the update moves
  (gradients to all-reduce, weights to all-gather, offloaded optimiser state to stream in / out)
  (:class:`IpuPlan`);
* the run options execute needs (schedule, micro-batch, gradient accumulation, device iterations,
  replication, I/O options) and the link / host parameters (:class:`Links`, :class:`HostModel`).

Everything execute adds (stream copies, syncs, global exchanges, all-reduces, remote-buffer copies,
control programs) it creates itself, so the plan is all it needs and tests can build one by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from profiles.runs import tile_ranges

Schedule = Literal["single", "sharded", "grouped", "interleaved", "sequential"]
OutputMode = Literal["all", "sum", "final", "every-n"]
LoaderMode = Literal["sync", "async", "async-rebatched"]


@dataclass
class LeafPrograms:
    """The compiler's leaf programs, one row per distinct program (struct of arrays).

    ``type`` holds ``profiles.schema`` program-type codes (OnTileExecute, DoExchange, ...),
    ``cycles`` the cycles of one execution (max over tiles), ``tile_cycles`` the per-tile cycles
    ``[program, tile]`` on the program's IPU. ``bytes`` is what one execution moves (exchanges).
    """

    name: np.ndarray
    type: np.ndarray
    ipu: np.ndarray
    op: np.ndarray
    cycles: np.ndarray
    tile_cycles: np.ndarray | Callable[[np.ndarray], np.ndarray]
    bytes: np.ndarray
    code_bytes: np.ndarray
    tile_balance: np.ndarray
    #: Bytes received / sent by the IPU in one execution and their destination code (stream
    #: copies, remote buffers, inter-IPU copies). When None: on-chip exchanges count ``bytes``
    #: both ways with destination "tile", everything else moves nothing.
    bytes_in: np.ndarray | None = None
    bytes_out: np.ndarray | None = None
    dest: np.ndarray | None = None
    #: Optional compact per-tile cycles (the compiler's layout): a leaf runs on tiles
    #: ``[tile_start, tile_start + tile_count)``, the first ``n_max`` of them for ``cycles`` and
    #: the rest for ``cycles_min``; other tiles 0. Used to expand ``tile_cycles`` fast.
    tile_start: np.ndarray | None = None
    tile_count: np.ndarray | None = None
    n_max: np.ndarray | None = None
    cycles_min: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.name)

    def dense_tile_cycles(self, rows: np.ndarray, tiles: int) -> np.ndarray:
        """Per-tile cycles ``(len(rows), tiles)`` of some leaves (``tile_cycles`` may be a
        function that expands them on demand)."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.tile_start is not None:
            return self._expand_compact(rows, tiles)
        if callable(self.tile_cycles):
            return self.tile_cycles(rows)
        return self.tile_cycles[rows]

    def compact(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """The compact layout of some leaves (rows < 0: no tiles): first tile, tile count,
        ``n_max``, ``cycles`` and ``cycles_min`` per row, as fresh int64 arrays."""
        leaf = rows >= 0
        r = np.where(leaf, rows, 0)
        return (
            np.where(leaf, np.asarray(self.tile_start, np.int64)[r], 0),
            np.where(leaf, np.asarray(self.tile_count, np.int64)[r], 0),
            np.asarray(self.n_max, np.int64)[r],
            np.asarray(self.cycles, np.int64)[r],
            np.asarray(self.cycles_min, np.int64)[r],
        )

    def _expand_compact(self, rows: np.ndarray, width: int) -> np.ndarray:
        """Dense per-tile cycles from the compact layout (rows < 0: all zeros): its runs
        (:func:`profiles.runs.tile_ranges`) laid out; with a negative run length, the difference
        array and cumulative sum they replaced."""
        start, count, nmax, hi, lo = self.compact(rows)
        runs = tile_ranges(start, count, nmax, hi, lo, width)
        if runs is not None:
            return np.asarray(runs)
        nmax = np.minimum(nmax, count)
        a = np.clip(start, 0, width)
        b = np.clip(start + nmax, 0, width)
        c = np.clip(start + count, 0, width)
        n = len(rows)
        diff = np.zeros((n, width + 1), np.int64)
        i = np.arange(n)
        np.add.at(diff, (i, a), hi)
        np.add.at(diff, (i, b), lo - hi)
        np.add.at(diff, (i, c), -lo)
        return np.cumsum(diff, axis=1)[:, :width].astype(np.int32)

    @classmethod
    def empty(cls, tiles: int) -> LeafPrograms:
        return cls(
            name=np.array([], dtype=object),
            type=np.zeros(0, np.uint8),
            ipu=np.zeros(0, np.int16),
            op=np.zeros(0, np.int32),
            cycles=np.zeros(0, np.int64),
            tile_cycles=np.zeros((0, tiles), np.int32),
            bytes=np.zeros(0, np.int64),
            code_bytes=np.zeros(0, np.int64),
            tile_balance=np.zeros(0, np.float32),
        )


@dataclass
class StagePlan:
    """One pipeline stage (for an unpipelined model: the single stage 0 on IPU 0).

    ``forward`` / ``backward`` / ``recompute`` are leaf-program ids (rows of
    :class:`LeafPrograms`) in execution order for ONE micro-batch. ``recompute`` (forward compute
    replayed before the backward pass when recomputation is on) may be empty.
    ``activation_bytes`` is what one micro-batch's forward sends to stage ``s + 1``;
    ``gradient_bytes`` what its backward sends to stage ``s - 1`` (both over IPU-Links).
    """

    ipu: int
    forward: np.ndarray
    backward: np.ndarray
    recompute: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    activation_bytes: int = 0
    gradient_bytes: int = 0
    #: Optional compiler leaf (a GlobalExchange on this stage's IPU) that sends the activations /
    #: gradients; when absent execute adds its own GlobalExchange program.
    activation_copy: int = -1
    gradient_copy: int = -1
    #: Offloaded gradient accumulators of the stage, streamed in from and back out to remote
    #: buffers around every micro-batch's backward pass.
    remote_bytes_per_micro_batch: int = 0


@dataclass
class IpuPlan:
    """What the weight update of one IPU (of one replica) runs and moves."""

    update: np.ndarray
    #: Gradient bytes of the IPU's weights, all-reduced across replicas before the update.
    gradient_bytes: int = 0
    #: Weight bytes of the IPU (all-gathered after a sharded update under replicated tensor
    #: sharding).
    weight_bytes: int = 0
    #: Bytes offloaded to streaming memory (optimiser state, offloaded variables) that the update
    #: streams in and back out, for this replica (before replicated tensor sharding divides it).
    remote_bytes: int = 0
    #: Optional compiler leaves (GlobalExchange) of the replica all-reduce (reduce-scatter under
    #: replicated tensor sharding) and of the all-gather; execute times them with its ring model.
    allreduce_leaf: int = -1
    allgather_leaf: int = -1
    #: Code bytes (over the IPU's tiles) of the compile's reduce-scatter and all-gather ring
    #: programs, shown on the collective programs execute adds.
    collective_code_bytes: tuple[int, ...] = ()


@dataclass
class Links:
    """Link and sync parameters, in cycles of the target clock (from ``engine.targets``)."""

    clock_hz: float
    ipu_link_bytes_per_cycle: float
    host_link_bytes_per_cycle: float
    streaming_bytes_per_cycle: float
    external_sync_cycles: int
    internal_sync_cycles: int
    exchange_setup_cycles: int
    #: IPU-Links that join two neighbouring pipeline stages (one by default: a ring/chain
    #: topology gives each neighbour pair one link per direction).
    links_between_stages: int = 1
    #: Pod64 racks (IPU-Link domains) the replicas span, and the GW-Link bandwidth per IPU
    #: between racks (its machine's GW-Links shared by its IPUs); 1 rack: no GW-Link hop.
    racks: int = 1
    gw_link_bytes_per_cycle: float = 0.0


def _run_default(name: str):
    """The default of a RunConfig option."""
    from engine.config import RunConfig

    return RunConfig.model_fields[name].default


@dataclass
class HostModel:
    """The host side of a run (the reference walkthrough's PopTorch data pipeline; docs/execution-model.md).

    Times are seconds on one host core. ``transforms_s`` is the per-sample cost of the run's
    named host transforms (engine.host.profile, 8-bit input already taken off), plus
    ``decode_augment_s`` (a flat extra per-sample cost) and ``cast_normalise_s`` (a flat cast +
    normalise cost, dropped when ``normalise_on_ipu``). ``parallel`` processes prepare samples
    at once (loader workers, at least the loader's own process, at most the host server's
    cores), on each of ``instances`` host servers (data-parallel loading is per host server).
    ``overlapped``: the preparation runs beside the device (an async loader, or DataLoader
    worker processes prefetching) instead of in the main process between device calls.
    ``call_overhead_s`` is the fixed round-trip cost of one host call; ``stream_latency_s`` the
    host's latency to service one stream-copy request (hidden by a prefetch depth above one).
    """

    # defaults: the RunConfig defaults (one source: engine.config; reasoning in docs/engine.md)
    decode_augment_s: float = field(default_factory=lambda: 50e-6)
    cast_normalise_s: float = 0.0
    normalise_on_ipu: bool = False
    transforms_s: float = 0.0
    workers: int = 0
    parallel: int = 1
    instances: int = 1
    #: Cores of one host server (the bound on ``parallel``).
    cores: int = 128
    loader: LoaderMode = "sync"
    #: Without a run configuration: the call overhead of the frameworks without a fitted one.
    call_overhead_s: float = 150e-6
    #: What a profiled call's trace holds beyond the steady-state call: a wait in the call's
    #: opening sync with the host (framework ``profiled_call_wait_us``); not in throughput.
    profiled_wait_s: float = 0.0
    stream_latency_s: float = field(
        default_factory=lambda: _run_default("host_stream_latency_us") * 1e-6
    )
    prefetch_depth: int = field(default_factory=lambda: _run_default("prefetch_depth"))
    #: The per-transform breakdown (engine.host.profile.SampleCost.as_dict), for the profile.
    breakdown: dict | None = None

    @property
    def per_sample_s(self) -> float:
        """Host preparation time of one sample on one core."""
        return (
            self.decode_augment_s
            + self.transforms_s
            + (0.0 if self.normalise_on_ipu else self.cast_normalise_s)
        )

    @property
    def overlapped(self) -> bool:
        """Preparation beside the device: an async loader or prefetching worker processes."""
        return self.loader != "sync" or self.workers > 0


@dataclass
class ExecutionPlan:
    """Everything :func:`engine.execute.execute_plan` needs (see the module docstring)."""

    leaves: LeafPrograms
    stages: list[StagePlan]
    ipus: list[IpuPlan]
    tiles_per_ipu: int
    links: Links
    host: HostModel = field(default_factory=HostModel)
    schedule: Schedule = "single"
    training: bool = True
    micro_batch: int = 1
    gradient_accumulation: int = 1
    device_iterations: int = 1
    replicas: int = 1
    replicated_tensor_sharding: bool = False
    #: I/O tiles per IPU (0: stream copies stall compute).
    io_tiles: int = 0
    #: Bytes of one input sample as streamed (after any 8-bit conversion), to stage 0's IPU.
    input_bytes_per_sample: int = 0
    #: Bytes of one sample's labels, to the IPU of the stage that computes the loss.
    label_bytes_per_sample: int = 0
    #: Bytes of one micro-batch's outputs (what mode "all" returns per micro-batch).
    output_bytes_per_micro_batch: int = 0
    output_mode: OutputMode = "final"
    #: N of output mode "every-n": outputs of every N-th device iteration are sent back.
    output_every_n: int = 1
    #: Stage that computes the loss / outputs (default: the last stage).
    loss_stage: int | None = None
    #: Tiles that receive one micro-batch's input / labels (their variables' tiles), and the
    #: read request each sends towards the host per copy (Target.host_read_request_bytes).
    input_tiles: int = 0
    label_tiles: int = 0
    read_request_bytes: int = 0
    #: Optional compiler leaves (StreamCopyBegin, Mid, End) of one micro-batch's input, labels and
    #: output stream copies; when absent execute adds its own. Execute times them either way.
    input_leaves: tuple[int, int, int] | None = None
    label_leaves: tuple[int, int, int] | None = None
    output_leaves: tuple[int, int, int] | None = None

    @property
    def num_ipus(self) -> int:
        return len(self.ipus)

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    @property
    def samples_per_call(self) -> int:
        """Samples one host call processes over all replicas."""
        return (
            self.micro_batch * self.gradient_accumulation * self.device_iterations * self.replicas
        )
