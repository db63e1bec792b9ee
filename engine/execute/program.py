"""The program tree and instance tables :mod:`engine.execute.core` builds on: the step-type,
destination, phase and sync codes and instance orders, the append-only program table
(:class:`_Nodes`), templates (a sequence of leaf programs run as a unit) and their instances,
and the hand-offs between the phases of :func:`engine.execute.core.execute_plan`.

Split out of ``engine/execute/core.py`` (developers' guide: files <= 1,000 lines); nothing here
runs on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.execute import costs
from engine.execute.plan import ExecutionPlan
from engine.execute.schedule import Activity
from profiles.schema import code

T_SEQ = code("program_type", "Sequence")
T_REPEAT = code("program_type", "Repeat")
T_CALL = code("program_type", "Call")
T_GEX = code("program_type", "GlobalExchange")
T_SCB = code("program_type", "StreamCopyBegin")
T_SCM = code("program_type", "StreamCopyMid")
T_SCE = code("program_type", "StreamCopyEnd")
T_SYNC = code("program_type", "Sync")
T_EXCH = code("program_type", "DoExchange")

D_NONE = code("destination", "none")
D_HOST = code("destination", "host")
D_REMOTE = code("destination", "remoteBuffer")
D_IPU = code("destination", "ipu")
D_TILE = code("destination", "tile")

P_HOST = code("phase", "host")
P_UPDATE = code("phase", "weightUpdate")

S_NONE = code("sync_kind", "none")
S_EXT = code("sync_kind", "external")

ORDER_SYNC = 1_000_000_000
#: Order of the sync that closes a pipeline cycle's ToDeviceStream fragment (after the input
#: copies at 0..2 and the label copies at 3..5, before the first stage pass at 10 + 1).
ORDER_TO_DEVICE_SYNC = 8
#: Order of the sync that opens a pipeline cycle's ToHostStream fragment (after every stage
#: pass of the cycle), and of its device-to-host copies (right after it, before the row's Sync).
ORDER_TO_HOST_SYNC = ORDER_SYNC - 10
#: ``frag`` column of the instances: not in a fragment of its own, a host-to-device copy of a
#: pipeline cycle's ToDeviceStream fragment, the sync that closes that fragment, the sync that
#: opens the cycle's ToHostStream fragment.
FRAG_NONE, FRAG_TO_DEVICE, FRAG_TO_DEVICE_SYNC, FRAG_TO_HOST_SYNC = 0, 1, 2, 3
#: The fragment syncs in the order they run within a row, with their instance order.
FRAGMENT_SYNCS = (
    (FRAG_TO_DEVICE_SYNC, ORDER_TO_DEVICE_SYNC),
    (FRAG_TO_HOST_SYNC, ORDER_TO_HOST_SYNC),
)
ORDER_EXCH = ORDER_SYNC + 1


# ---------------------------------------------------------------------------------------------
# program table builder
# ---------------------------------------------------------------------------------------------


class _Nodes:
    """Append-only program table, filled in depth-first pre-order: single nodes (control
    programs, execute's own leaves) row by row, the compiler's leaves a block of arrays at a
    time; :meth:`column` gives a whole column as one array (in its ``COLS`` dtype)."""

    COLS = {
        "name": object,
        "type": np.uint8,
        "parent": np.int32,
        "ipu": np.int16,
        "repeat": np.int64,
        "op": np.int32,
        "cycles": np.int64,
        "tile_balance": np.float32,
        "bytes": np.int64,
        "sync": np.uint8,
        "code_bytes": np.int64,
        # execution attributes of leaves (not written in /programs/nodes)
        "x_bytes_in": np.int64,
        "x_bytes_out": np.int64,
        "x_dest": np.uint8,
        "x_leaf": np.int64,
        "x_tile_first": np.int64,  # the tiles execute's own leaves run on
        "x_tile_count": np.int64,
    }

    def __init__(self) -> None:
        self.parts: dict[str, list] = {c: [] for c in self.COLS}  # arrays and row lists
        self.rows: dict[str, list] = {c: [] for c in self.COLS}  # rows since the last block
        self.n = 0
        self._done: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return self.n

    def add(
        self,
        name: str,
        type_: int,
        parent: int,
        ipu: int = -1,
        *,
        repeat: int = 1,
        op: int = -1,
        cycles: int = 0,
        balance: float = 0.0,
        nbytes: int = 0,
        sync: int = S_NONE,
        code_bytes: int = 0,
        bytes_in: int = 0,
        bytes_out: int = 0,
        dest: int = D_NONE,
        leaf: int = -1,
        tiles: tuple[int, int] = (0, 0),
    ) -> int:
        values = (
            name,
            type_,
            parent,
            ipu,
            repeat,
            op,
            int(cycles),
            balance,
            int(nbytes),
            sync,
            int(code_bytes),
            int(bytes_in),
            int(bytes_out),
            dest,
            leaf,
            int(tiles[0]),
            int(tiles[1]),
        )
        for rows, v in zip(self.rows.values(), values):
            rows.append(v)
        self.n += 1
        return self.n - 1

    def add_block(self, n: int, **cols: np.ndarray | int) -> np.ndarray:
        """``n`` nodes at once (every column an array of ``n`` or one value); their ids."""
        for c, dt in self.COLS.items():
            if self.rows[c]:
                self.parts[c].append(self.rows[c])
                self.rows[c] = []
            self.parts[c].append(np.broadcast_to(np.asarray(cols[c], dtype=dt), (n,)))
        self.n += n
        return np.arange(self.n - n, self.n, dtype=np.int64)

    def column(self, c: str) -> np.ndarray:
        """Column ``c`` of every node so far (built once, when the table is complete)."""
        if c not in self._done:
            dt = self.COLS[c]
            parts = [np.asarray(p, dtype=dt) for p in (*self.parts[c], self.rows[c]) if len(p)]
            self._done[c] = np.concatenate(parts) if parts else np.zeros(0, dt)
        return self._done[c]


def _add_leaves(nodes: _Nodes, leaves, io, lf: np.ndarray, parent: int) -> np.ndarray:
    """Append compiler leaves ``lf`` (children of ``parent``) in bulk; returns their node ids."""
    leaf_bin, leaf_bout, leaf_dest = io
    return nodes.add_block(
        len(lf),
        name=np.array([str(x) for x in leaves.name[lf]], dtype=object),
        type=leaves.type[lf],
        parent=parent,
        ipu=leaves.ipu[lf],
        repeat=1,
        op=leaves.op[lf],
        cycles=leaves.cycles[lf],
        tile_balance=leaves.tile_balance[lf],
        bytes=leaves.bytes[lf],
        sync=S_NONE,
        code_bytes=leaves.code_bytes[lf],
        x_bytes_in=leaf_bin[lf],
        x_bytes_out=leaf_bout[lf],
        x_dest=leaf_dest[lf],
        x_leaf=lf,
        x_tile_first=0,
        x_tile_count=0,
    )


@dataclass
class _Synth:
    """One leaf program execute adds."""

    type_: int
    cycles: int
    bytes_in: int = 0
    bytes_out: int = 0
    dest: int = D_NONE
    sync: int = S_NONE
    tiles: tuple[int, int] | None = None  # (first, count); None = all tiles
    code_bytes: int = 0  # the program's code over its tiles (collectives: from the compile)


@dataclass
class _Template:
    name: str
    ipu: int
    leaves: np.ndarray | None = None  # compiler leaf ids
    synth: _Synth | None = None
    nodes: np.ndarray | None = None  # node ids, set when the functions are built
    cycles: int = 0
    #: Execute's own timing of a single compiler leaf (stream copies, collectives).
    cycles_override: int | None = None


# ---------------------------------------------------------------------------------------------
# instance table
# ---------------------------------------------------------------------------------------------


class _Instances:
    """Struct of arrays of template instances, built from vectorised chunks."""

    FIELDS = (
        "tmpl",
        "ipu",
        "row",
        "order",
        "mb",
        "stage",
        "cyc",
        "bin",
        "bout",
        "sync",
        "exch",
        "frag",
    )

    def __init__(self) -> None:
        self.chunks: list[dict[str, np.ndarray]] = []

    def add(self, n: int, **kw) -> None:
        if n <= 0:
            return
        chunk = {}
        defaults = {
            "mb": -1,
            "stage": -1,
            "cyc": -1,
            "bin": -1,
            "bout": -1,
            "sync": 0,
            "exch": 0,
            "frag": FRAG_NONE,
        }
        for f in self.FIELDS:
            v = kw.get(f, defaults.get(f))
            chunk[f] = np.broadcast_to(np.asarray(v, dtype=np.int64), (n,))
        self.chunks.append(chunk)

    def concat(self) -> dict[str, np.ndarray]:
        if not self.chunks:
            return {f: np.zeros(0, np.int64) for f in self.FIELDS}
        return {f: np.concatenate([c[f] for c in self.chunks]) for f in self.FIELDS}


# ---------------------------------------------------------------------------------------------
# hand-offs between the phases of execute_plan
# ---------------------------------------------------------------------------------------------


class _Templates:
    """The templates of one execution, by id (their index); adds time them."""

    def __init__(self, plan: ExecutionPlan) -> None:
        self.plan = plan
        self.items: list[_Template] = []
        self.leaf_cycles = plan.leaves.cycles.astype(np.int64)
        self.leaf_bytes_in, self.leaf_bytes_out, _ = _leaf_io(plan.leaves)
        self.io_range = (
            (plan.tiles_per_ipu - plan.io_tiles, plan.io_tiles) if plan.io_tiles > 0 else None
        )

    def __getitem__(self, i: int) -> _Template:
        return self.items[i]

    def add(self, t: _Template) -> int:
        """Time ``t`` (its leaves' cycles, its override or its synthetic program) and add it."""
        if t.leaves is not None:
            t.leaves = np.asarray(t.leaves, dtype=np.int64)
            if t.cycles_override is not None:
                assert len(t.leaves) == 1, "only single-leaf templates are re-timed"
                t.cycles = int(t.cycles_override)
            else:
                t.cycles = int(self.leaf_cycles[t.leaves].sum()) if len(t.leaves) else 0
        elif t.synth is not None:
            t.cycles = int(t.synth.cycles)
        else:
            raise ValueError(f"template {t.name!r} has neither compiler leaves nor a program")
        self.items.append(t)
        return len(self.items) - 1

    def cycles(self) -> np.ndarray:
        return np.array([t.cycles for t in self.items], np.int64)

    def leaf_bytes(self, leaf: int) -> int:
        """What a compiler leaf moves (the larger of bytes in and out)."""
        return int(max(self.leaf_bytes_in[leaf], self.leaf_bytes_out[leaf]))

    def stream_copy(
        self,
        prefix: str,
        ipu: int,
        nbytes: int,
        direction: str,
        overlap: int,
        dest=D_HOST,
        rate: float | None = None,
        leaves3: tuple[int, int, int] | None = None,
        receiving_tiles: int = 0,
    ) -> tuple[int, int, int]:
        """Begin / Mid / End templates of one stream copy (timed here); returns their ids.

        With ``leaves3`` the compiler's three leaf programs are used (their bytes are the facts),
        otherwise execute adds its own. A host-to-device copy also sends each receiving tile's
        read request towards the host (``receiving_tiles``; the I/O tiles when there are some):
        the copy's bytes out, not timed (they travel against the data)."""
        plan, links = self.plan, self.plan.links
        if leaves3 is not None:
            nbytes = self.leaf_bytes(int(leaves3[1]))
        rate = links.host_link_bytes_per_cycle if rate is None else rate
        mid = int(costs.transfer_cycles(nbytes, rate))
        if self.io_range is not None and dest == D_HOST:
            mid = max(0, mid - int(overlap))  # the I/O tiles overlap the copy with compute
        begin = (
            costs.stream_begin_cycles(links, plan.host, overlap)
            if dest == D_HOST
            else links.exchange_setup_cycles
        )
        end = links.internal_sync_cycles
        if leaves3 is not None:
            first, middle, last = (
                self.add(
                    _Template(
                        str(plan.leaves.name[lf]),
                        ipu,
                        leaves=np.array([lf], dtype=np.int64),
                        cycles_override=c,
                    )
                )
                for lf, c in zip(leaves3, (begin, mid, end))
            )
            return first, middle, last
        bi, bo = (nbytes, 0) if direction == "in" else (0, nbytes)
        tiles = self.io_range
        if direction == "in" and dest == D_HOST:
            receivers = int(tiles[1]) if tiles is not None else int(receiving_tiles)
            bo = int(plan.read_request_bytes) * receivers
        specs = (
            ("StreamCopyBegin", _Synth(T_SCB, begin, dest=dest, tiles=tiles)),
            ("StreamCopyMid", _Synth(T_SCM, mid, bi, bo, dest, tiles=tiles)),
            ("StreamCopyEnd", _Synth(T_SCE, end, dest=dest, tiles=tiles)),
        )
        first, middle, last = (
            self.add(_Template(f"ipu{ipu}/{prefix}.{kind}", ipu, synth=sy)) for kind, sy in specs
        )
        return first, middle, last


@dataclass(frozen=True)
class CallShape:
    """How one host call runs: the schedule's rows of one run and how many runs.

    Inference pipelines stream all the micro-batches of a host call (device iterations x GA)
    through one pipeline, filling and flushing it once per call (PopART: the pipeline depth of
    inference is the batches per step); training pipelines fill and flush every weight update.
    """

    streams_iterations: bool  # one pipeline run over all the call's micro-batches
    micro_batches_per_run: int
    runs: int  # device iterations as executed (1 when the iterations are streamed)
    activity: Activity
    stage_ipu: np.ndarray
    loss_stage: int


@dataclass(frozen=True)
class StageTemplates:
    """Template ids (-1: none) and cycles of every stage's forward, backward and recompute."""

    forward: np.ndarray
    backward: np.ndarray
    recompute: np.ndarray
    forward_cycles: np.ndarray
    backward_cycles: np.ndarray  # with the recomputation


@dataclass(frozen=True)
class TransferTemplates:
    """Templates of the host streams, syncs, inter-stage exchanges and the host wait."""

    input: tuple[int, ...] | None  # per micro-batch
    labels: tuple[int, ...] | None
    output: tuple[int, ...] | None  # per micro-batch (output modes all / every-n)
    end_output: tuple[int, ...] | None  # once per call (output modes sum / final)
    label_ipu: int
    sync: list[int]  # per IPU (multi-IPU replicas)
    stage_exchange: list[int]  # per IPU: the receive step of the inter-stage exchanges
    host_wait: list[int]  # per IPU
    #: per IPU: the sync that closes a pipeline cycle's ToDeviceStream fragment and the one that
    #: opens its ToHostStream fragment (empty when the copies are not fragments of their own:
    #: one IPU, not pipelined, or I/O tiles)
    to_device_sync: list[int]
    to_host_sync: list[int]


@dataclass(frozen=True)
class IterationInstances:
    """Template instances of one iteration (rows numbered from 0), its rows' phases and the row
    of the weight update (-1 in inference)."""

    instances: dict[str, np.ndarray]
    row_phase: tuple[int, ...]
    update_row: int

    @property
    def rows(self) -> int:
        return len(self.row_phase)


@dataclass(frozen=True)
class CallInstances:
    """Template instances of the whole host call (row 0: the host wait), with ``iter``."""

    instances: dict[str, np.ndarray]
    row_phase: np.ndarray
    rows: int
    has_end_row: bool


@dataclass(frozen=True)
class CallTiming:
    """Cycles of every instance of the call (row 0: the call's start on the device)."""

    cycles: np.ndarray


def _node_columns(nodes: _Nodes) -> dict[str, np.ndarray]:
    """The ``/programs/nodes`` columns."""
    return {c: nodes.column(c) for c in nodes.COLS if not c.startswith("x_")}


def _leaf_io(leaves) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bytes in / out and destination of every compiler leaf (see LeafPrograms)."""
    if leaves.bytes_in is not None:
        return (
            np.asarray(leaves.bytes_in, np.int64),
            np.asarray(leaves.bytes_out, np.int64),
            np.asarray(leaves.dest, np.uint8),
        )
    is_x = np.asarray(leaves.type) == T_EXCH
    b = np.asarray(leaves.bytes, np.int64)
    return (
        np.where(is_x, b, 0),
        np.where(is_x, b, 0),
        np.where(is_x, D_TILE, D_NONE).astype(np.uint8),
    )
