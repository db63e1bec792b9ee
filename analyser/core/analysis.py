"""``Analysis``: the single entry point of the analysis core.

Open a profile once, ask for any part; each part is computed on first use and cached::

    from analyser.core import Analysis
    with Analysis.open("step2.h5") as a:
        a.target            # TargetSummary
        a.memory            # MemorySummary (peak, OOM tiles, top tiles, histogram, breakdowns)
        a.liveness          # LivenessSummary (curve per IPU, peak step)
        a.execution         # ExecutionSummary or None for an OOM profile
        a.operations        # pandas DataFrame
        a.metrics           # Metrics: the flat key figures used by reports and comparisons

No Qt; everything returned is a dataclass, a numpy array or a pandas DataFrame.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.core import liveness as _liveness
from analyser.core import memory as _memory
from analyser.core.execution import ExecutionSummary, summarise_execution
from analyser.core.imbalance import ImbalanceSummary, summarise_imbalance
from analyser.core.operations import operations_table
from analyser.core.source import Source
from profiles import schema as _schema

if TYPE_CHECKING:
    import pandas as pd

    from analyser.core.run_options import StoredRunConfig
    from engine.config import RunConfig

_HOST = _schema.DESTINATIONS.index("host")
_ON_TILE_EXECUTE = _schema.PROGRAM_TYPES.index("OnTileExecute")


@dataclass(frozen=True)
class TargetSummary:
    """Target, model and graph statistics (PopVision's Summary report, top part)."""

    file: str
    model: str
    status: str
    target_name: str
    architecture: str
    num_ipus: int
    replicas: int
    tiles_per_ipu: int
    sram_per_tile: int
    clock_hz: float
    samples_per_step: int
    engine_version: str
    created: str
    n_operations: int
    n_variables: int
    n_vertex_types: int
    n_compute_sets: int
    n_programs: int
    n_liveness_steps: int
    n_executed_steps: int
    notes: tuple[str, ...] = ()

    @property
    def memory_per_ipu(self) -> int:
        """Bytes of SRAM on one IPU (tiles x SRAM per tile)."""
        return self.tiles_per_ipu * self.sram_per_tile

    @property
    def memory_total(self) -> int:
        """Bytes of SRAM on every IPU of every replica."""
        return self.memory_per_ipu * self.num_ipus * self.replicas


@dataclass(frozen=True)
class IpuMetrics:
    """Key figures of one IPU (memory, fullest tile, out-of-memory tiles, cycles)."""

    ipu: int
    memory_bytes: int
    max_tile_bytes: int
    oom_tiles: int
    cycles: int
    streamcopy_rx_bytes: int
    streamcopy_tx_bytes: int
    global_exchange_rx_bytes: int
    global_exchange_tx_bytes: int
    tile_balance: float
    host_wait_cycles: int
    cycles_by_type: dict[str, int] = field(default_factory=dict)
    #: StreamCopy bytes from / to the host only (without remote-buffer traffic).
    host_rx_bytes: int = 0
    host_tx_bytes: int = 0


#: Aliases of IpuMetrics fields for ``ipuN.<field>`` gates, and the fields that exist without an
#: execution (memory).
IPU_ALIASES = {
    "rx": "streamcopy_rx_bytes",
    "tx": "streamcopy_tx_bytes",
    "memory": "memory_bytes",
    "host_rx": "host_rx_bytes",
    "host_tx": "host_tx_bytes",
}
IPU_MEMORY_FIELDS = frozenset({"memory_bytes", "memory", "max_tile_bytes", "oom_tiles"})
IPU_SCALAR_FIELDS = (
    "memory_bytes",
    "max_tile_bytes",
    "oom_tiles",
    "cycles",
    "streamcopy_rx_bytes",
    "streamcopy_tx_bytes",
    "global_exchange_rx_bytes",
    "global_exchange_tx_bytes",
    "tile_balance",
    "host_wait_cycles",
    "host_rx_bytes",
    "host_tx_bytes",
)


@dataclass(frozen=True)
class Metrics:
    """Key figures of one profile (the stable keys of the JSON report and of ``--fail-if``).

    Execution figures are ``None`` for a profile without execution (OOM).
    """

    file: str
    model: str
    status: str
    fits: bool
    peak_memory_bytes: int
    max_tile_memory_bytes: int
    memory_share_used: float
    oom_tiles: int
    always_live_bytes: int
    not_always_live_peak_bytes: int
    remote_buffer_bytes: int
    code_bytes: int
    total_cycles: int | None
    device_cycles: int | None
    cycles_per_sample: float | None
    throughput_samples_per_s: float | None
    samples: int | None
    host_seconds: float | None
    host_round_trips: int | None
    compute_share: float | None
    host_wait_share: float | None
    ramp_share: float | None
    tile_balance: float | None
    streamcopy_rx_bytes: int | None
    streamcopy_tx_bytes: int | None
    ipus: tuple[IpuMetrics, ...] = ()
    #: Samples per second of the device alone (throughput_samples_per_s is host-inclusive).
    device_throughput_samples_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The figures as a plain dict (the JSON summary's ``metrics``)."""
        return asdict(self)

    #: Names accepted by ``--fail-if`` and comparisons (scalar metrics), with aliases.
    ALIASES = {
        "cycles": "total_cycles",
        "peak_memory": "peak_memory_bytes",
        "memory": "peak_memory_bytes",
        "throughput": "throughput_samples_per_s",
        "device_throughput": "device_throughput_samples_per_s",
        "oom": "oom_tiles",
        "max_tile_memory": "max_tile_memory_bytes",
        "host_wait": "host_wait_share",
        "rx": "streamcopy_rx_bytes",
        "tx": "streamcopy_tx_bytes",
    }

    def scalar(self, name: str) -> float | None:
        """A scalar metric by name or alias; ``ipuN.field`` reads IPU N's IpuMetrics field
        (None when the profile has no IPU N or no execution for an execution field)."""
        if name.startswith("ipu") and "." in name:
            head, field_ = name.split(".", 1)
            i = int(head[3:])
            if i >= len(self.ipus):
                return None
            if self.total_cycles is None and field_ not in IPU_MEMORY_FIELDS:
                return None
            v = getattr(self.ipus[i], IPU_ALIASES.get(field_, field_))
            return None if v is None else float(v)
        key = self.ALIASES.get(name, name)
        v = getattr(self, key)
        return None if v is None else float(v)

    @classmethod
    def scalar_names(cls) -> list[str]:
        """The names of the scalar figures (what ``compare`` and ``--fail-if`` take)."""
        skip = {"file", "model", "status", "ipus"}
        return [f for f in cls.__dataclass_fields__ if f not in skip]


class _Accessor:
    """A namespace of an :class:`Analysis` made on first use and kept (as pandas'
    ``CachedAccessor``: ``DataFrame.plot``)."""

    def __init__(self, name: str, cls: type) -> None:
        self._name, self._cls = name, cls

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self._cls
        value = self._cls(obj)
        obj.__dict__[self._name] = value  # later reads find it in the instance
        return value


def register_accessor(name: str, cls: type) -> None:
    """Give every :class:`Analysis` the attribute ``name``: ``cls(analysis)``, made on first
    use (the notebook layer adds ``plot`` this way, so the analysis core draws nothing). An
    attribute the class has already is refused."""
    current = Analysis.__dict__.get(name)
    if current is not None and not isinstance(current, _Accessor):
        raise AttributeError(f"Analysis already has an attribute {name!r}.")
    setattr(Analysis, name, _Accessor(name, cls))


class Analysis:
    """Analysis of one open profile. Use :meth:`open` (a context manager) or wrap a Profile."""

    def __init__(self, profile: Any, path: str | os.PathLike[str] | None = None) -> None:
        self.src = Source(profile, path)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Analysis:
        """Open ``path`` lazily (raises profiles.errors.ProfileError on a bad file)."""
        from profiles import open_profile

        return cls(open_profile(path), path)

    def close(self) -> None:
        """Close the profile."""
        self.src.close()

    def __enter__(self) -> Analysis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        """The profile's path."""
        return self.src.path

    @property
    def name(self) -> str:
        """The profile's file name (its model's name when it has no path)."""
        return self.path.name or self.target.model

    @cached_property
    def stored_run_config(self) -> StoredRunConfig:
        """The run configuration as the profile stores it, read as the engine's RunConfig
        (:func:`analyser.core.run_options.read_run_config`: each known option checked against
        its type and bounds, ProfileError naming the option when one is unusable)."""
        from analyser.core.run_options import read_run_config

        meta = self.src.meta
        return read_run_config(
            meta.get("run_config"), meta.get("run_config_version"), f"profile {self.path}"
        )

    @property
    def options(self) -> RunConfig:
        """The run options, typed (``analysis.options.micro_batch_size``); an option the
        profile does not store reads as RunConfig's default."""
        return self.stored_run_config.config

    @property
    def run_config(self) -> dict[str, Any]:
        """The run configuration exactly as stored (shown literally by the views and the JSON
        report); read options through :attr:`options`."""
        return self.stored_run_config.stored

    @property
    def target_config(self) -> dict[str, Any]:
        """The stored target (``/meta@target``) as a dict; empty when absent or not a dict."""
        t = self.src.meta.get("target") or {}
        return t if isinstance(t, dict) else {}

    @property
    def has_execution(self) -> bool:
        """Whether the profile has an execution (a program that fits was run)."""
        return self.src.has_execution

    # -- parts ----------------------------------------------------------------------------------
    @cached_property
    def target(self) -> TargetSummary:
        """The target, IPUs, replicas, tiles, SRAM, clock and graph counts of the profile."""
        m = self.src.meta
        t = self.target_config
        root = self.src.root_attrs

        def rows(path: str) -> int:
            return self.src.n_rows(path) if self.src.has(path) else 0

        return TargetSummary(
            file=str(self.path),
            model=str(m.get("model", "")),
            status=str(m.get("status", "ok")),
            target_name=str(t.get("display_name") or t.get("name", t.get("target", ""))),
            architecture=str(t.get("architecture", t.get("arch", t.get("name", "")))),
            num_ipus=int(m["num_ipus"]),
            replicas=int(m.get("replicas", 1)),
            tiles_per_ipu=int(m["tiles_per_ipu"]),
            sram_per_tile=int(m["sram_per_tile"]),
            clock_hz=float(m["clock_hz"]),
            samples_per_step=int(m.get("samples_per_step", 0)),
            engine_version=str(root.get("engine_version", "")),
            created=str(root.get("created", "")),
            n_operations=rows("/graph/operations"),
            n_variables=rows("/graph/variables"),
            n_vertex_types=rows("/graph/vertex_types"),
            n_compute_sets=rows("/graph/compute_sets"),
            n_programs=rows("/programs/nodes"),
            n_liveness_steps=rows("/liveness/steps"),
            n_executed_steps=self.src.n_steps,
            notes=tuple(str(x) for x in (m.get("notes") or [])),
        )

    @cached_property
    def memory(self) -> _memory.MemorySummary:
        """Memory per tile and IPU: totals, gaps, out-of-memory tiles, top tiles, histogram."""
        return _memory.summarise_memory(self.src)

    @cached_property
    def liveness(self) -> _liveness.LivenessSummary:
        """Not-always-live memory per liveness step and IPU, with its peaks."""
        return _liveness.summarise_liveness(self.src)

    @cached_property
    def execution(self) -> ExecutionSummary | None:
        """Cycles by step type, phases, stages and host round trips; None without execution."""
        return summarise_execution(self.src)

    def scan_steps(
        self, columns: Sequence[str], visit: Callable[[int, dict[str, np.ndarray]], None]
    ) -> None:
        """Hand every chunk of the step table to ``visit(first_row, {column: array})``, with
        ``columns`` among its arrays. When the execution summary is not made yet, it is made in
        the same pass (and kept), so that a caller needing both reads the table once."""
        if "execution" in self.__dict__:  # made already: read only what the caller asked for
            for lo, c in self.src.iter_steps(columns):
                visit(lo, c)
        else:
            self.__dict__["execution"] = summarise_execution(self.src, (columns, visit))

    @cached_property
    def imbalance(self) -> ImbalanceSummary | None:
        """Cycles lost to tile imbalance per IPU and compute set (None without execution)."""
        ex = self.execution
        return None if ex is None else summarise_imbalance(self.src, ex)

    @cached_property
    def operations(self) -> pd.DataFrame:
        """The operations table: each operation with its executions, cycles, FLOPs and memory."""
        return operations_table(self.src, self.execution)

    @cached_property
    def variables(self) -> pd.DataFrame:
        """The variables table (one row per variable and IPU)."""
        return _memory.variables_table(self.src)

    @cached_property
    def listed_variables(self) -> pd.DataFrame:
        """The variables table for what lists variables without asking when they are live (an
        operation's variables): :attr:`variables`, or without the lifetime columns when the
        profile lacks them."""
        if all(self.src.has(f"/graph/variables/{c}") for c in _memory._LIFETIME_COLUMNS):
            return self.variables
        return _memory.variables_table(self.src, lifetimes=False)

    def tile_breakdown(self, ipu: int, by: str = "category") -> tuple[np.ndarray, tuple]:
        """[tiles, k] bytes of one IPU by ``category`` / ``region`` / ``liveness`` + names."""
        return _memory.tile_breakdown(self.src, ipu, by)

    def largest_variables(self, n: int = 10, *, always_live: bool | None = None) -> pd.DataFrame:
        """The ``n`` largest variables (only always-live or not, when ``always_live`` is given)."""
        return _memory.largest_variables(self.src, n, always_live=always_live)

    def largest_vertices(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` vertex types with the most bytes."""
        return _memory.largest_vertices(self.src, n)

    def live_variables(
        self, step: int, ipu: int | None = None, *, include_always_live: bool = False
    ) -> pd.DataFrame:
        """The variables live at liveness ``step`` on ``ipu``."""
        return _liveness.live_variables(
            self.src, step, ipu, include_always_live=include_always_live
        )

    def peak_live_variables(self, ipu: int = 0, n: int = 10) -> pd.DataFrame:
        """The largest variables live at the liveness peak of ``ipu``."""
        return self.live_variables(int(self.liveness.peak_step[ipu]), ipu).head(n)

    @cached_property
    def metrics(self) -> Metrics:
        """The flat key figures (the JSON report, ``compare`` and ``--fail-if``)."""
        mem = self.memory
        ex = self.execution
        lv = self.liveness
        n = self.target.num_ipus
        oom_per_ipu = mem.oom_tiles_per_ipu()
        ipus = []
        for i in range(n):
            ipus.append(
                IpuMetrics(
                    ipu=i,
                    memory_bytes=int(mem.tile_total[i].sum()),
                    max_tile_bytes=int(mem.tile_used[i].max()) if mem.tile_used.shape[1] else 0,
                    oom_tiles=int(oom_per_ipu[i]),
                    cycles=int(ex.cycles_by_type[i].sum()) if ex else 0,
                    streamcopy_rx_bytes=int(ex.streamcopy_rx_bytes[i]) if ex else 0,
                    streamcopy_tx_bytes=int(ex.streamcopy_tx_bytes[i]) if ex else 0,
                    global_exchange_rx_bytes=int(ex.global_exchange_rx[i]) if ex else 0,
                    global_exchange_tx_bytes=int(ex.global_exchange_tx[i]) if ex else 0,
                    tile_balance=float(ex.tile_balance[i]) if ex else 0.0,
                    host_wait_cycles=int(ex.host_wait_cycles[i]) if ex else 0,
                    cycles_by_type={
                        t: int(ex.cycles_by_type[i, j])
                        for j, t in enumerate(ex.step_types)
                        if ex.count_by_type[i, j]
                    }
                    if ex
                    else {},
                    host_rx_bytes=int(ex.streamcopy_rx_by_dest[i, _HOST]) if ex else 0,
                    host_tx_bytes=int(ex.streamcopy_tx_by_dest[i, _HOST]) if ex else 0,
                )
            )
        tb = None
        if ex is not None:
            busy = ex.cycles_by_type[:, _ON_TILE_EXECUTE].astype(float)
            tb = float((ex.tile_balance * busy).sum() / busy.sum()) if busy.sum() else 0.0
        return Metrics(
            file=str(self.path),
            model=self.target.model,
            status=self.target.status,
            fits=mem.fits,
            peak_memory_bytes=mem.peak_memory_bytes,
            max_tile_memory_bytes=mem.max_tile_bytes,
            memory_share_used=mem.share_used,
            oom_tiles=mem.n_oom_tiles,
            always_live_bytes=int(lv.always_live.sum()),
            not_always_live_peak_bytes=int(lv.not_always_live.max(axis=1).sum())
            if lv.n_steps
            else 0,
            remote_buffer_bytes=mem.remote_bytes,
            code_bytes=mem.code_bytes,
            total_cycles=ex.total_cycles if ex else None,
            device_cycles=ex.device_cycles if ex else None,
            cycles_per_sample=ex.cycles_per_sample if ex else None,
            throughput_samples_per_s=ex.throughput_samples_per_s if ex else None,
            device_throughput_samples_per_s=ex.device_throughput_samples_per_s if ex else None,
            samples=ex.samples if ex else None,
            host_seconds=ex.host_seconds if ex else None,
            host_round_trips=ex.host_round_trips if ex else None,
            compute_share=ex.compute_share if ex else None,
            host_wait_share=ex.host_wait_share if ex else None,
            ramp_share=ex.ramp_share if ex else None,
            tile_balance=tb,
            streamcopy_rx_bytes=int(ex.streamcopy_rx_bytes.sum()) if ex else None,
            streamcopy_tx_bytes=int(ex.streamcopy_tx_bytes.sum()) if ex else None,
            ipus=tuple(ipus),
        )
