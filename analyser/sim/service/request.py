"""Requests and responses of the simulation service, and the cache key that names them.

A :class:`SimRequest` is a validated run configuration (``engine.config.RunConfig``, every
option resolved to its value, defaults included) plus the digest of the bytes of every file the
configuration names whose contents change a figure: the ONNX model and the host profile (a
file edited in place keeps its name, so a key that named it only by path would answer for the
old contents), and the presence and size of the model's external-data files (which the engine
checks, never reads). Its :attr:`SimRequest.key` hashes these with the engine's version and a
fingerprint of the code and data a figure comes from (:func:`fingerprint_files`: the engine with
its chip, system, CPU, framework and host tables, the profile format, the analysis core that
reads the figures back), so a cached result is only ever reused for the same inputs
(``engine.__version__`` alone stays 0.1.0 while the code changes). The simulation checks the
files again when it has run (:func:`input_changes`): one edited after the key was taken is a
failure that is not cached, never the new contents' figures under the old contents' key.

A :class:`SimResponse` is what comes back: the profile path and its key figures
(:data:`FIGURE_KEYS`), or the engine's one-sentence refusal, or why no answer could be had
(cancelled, a worker that died twice, a memory or time limit).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analyser.core.intervals import FEATURE_KEYS, feature_figures
from profiles.errors import UserFacingError

#: Statuses of a response. ``ok`` and ``oom`` carry a profile and figures; ``refused`` is the
#: engine's answer to a configuration it rejects (cached like a result); the others are not
#: answers about the configuration and are never cached.
STATUSES = ("ok", "oom", "refused", "cancelled", "killed", "memory", "timeout", "failed")
CACHED_STATUSES = ("ok", "oom", "refused")

#: Figures of the execution (None for a configuration that does not fit: no execution).
_EXECUTION_KEYS = (
    "total_cycles",
    "cycles_per_sample",
    "throughput_samples_per_s",
    "samples",
    "host_wait_share",
    "compute_share",
)
#: Key figures of a simulated configuration (analyser.core.Metrics plus the headroom of the
#: fullest tile), as stored in the cache and in tune's results table.
FIGURE_KEYS: tuple[str, ...] = (
    "fits",
    "oom_tiles",
    "peak_memory_bytes",
    "max_tile_memory_bytes",
    "headroom_bytes",
    "headroom_share",
    "memory_share_used",
    *_EXECUTION_KEYS,
    # what the prediction's interval classes are read from (analyser.core.intervals)
    *FEATURE_KEYS,
)


class SimulationRefused(UserFacingError):
    """Raised by :meth:`SimRequest.make` for a configuration the engine rejects; the message is
    the engine's one sentence (a user-facing error: shown without a traceback, exit 2)."""


#: Where the figures come from, relative to the project root: the engine (its code and data
#: tables), the profile format it writes, the analysis core that reads the figures back, and the
#: two modules of this package that run the simulation and collect its figures.
_FIGURE_SOURCES = ("engine", "profiles", "analyser/core")
_FIGURE_MODULES = ("analyser/sim/service/request.py", "analyser/sim/service/worker.py")


def fingerprint_files() -> list[Path]:
    """Every file the engine fingerprint hashes (sorted): all files under
    :data:`_FIGURE_SOURCES` but compiled ones, and :data:`_FIGURE_MODULES`."""
    import engine

    root = Path(engine.__file__).resolve().parent.parent
    files = [root / m for m in _FIGURE_MODULES]
    for src in _FIGURE_SOURCES:
        for path in (root / src).rglob("*"):
            if "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
                continue
            if path.is_file():
                files.append(path)
    return sorted(set(files))


@functools.lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """``engine.__version__`` plus a digest of :func:`fingerprint_files` (names and bytes), and
    the profile format version: a cached result is reused only by the code that wrote it."""
    import engine
    from profiles.schema import FORMAT_VERSION

    root = Path(engine.__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in fingerprint_files():
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return f"{engine.__version__}+{h.hexdigest()[:12]}/format {FORMAT_VERSION}"


#: Largest model file hashed (an ONNX protobuf cannot exceed 2 GiB: engine.onnx.reader).
_MODEL_LIMIT = 2**31 - 1
#: Largest host profile read (calibrate-host writes a few kB; engine.host.profile reads 1 MiB).
_HOST_LIMIT = 1 << 20


def _file_digest(path: Path, what: str, limit: int) -> str:
    """sha256 of a regular file of at most ``limit`` bytes (a FIFO or a device is refused in
    one sentence rather than read for ever)."""
    from profiles.inputs import open_regular

    h = hashlib.sha256()
    with open_regular(path, what, SimulationRefused, limit) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@functools.lru_cache(maxsize=8)
def _external_locations(path: str, digest: str) -> tuple[str, ...]:
    """The external-data locations the model's initializers name (by the model's digest: a
    tune asks for one model thousands of times). () when the file does not parse: the engine's
    refusal of it then depends on its bytes only."""
    from engine.onnx.reader import external_locations

    return external_locations(path)


def _external_state(model: Path, digest: str) -> list[list[Any]]:
    """``[location, size]`` of each external-data file the model names, as the engine will
    find it (None: missing, outside the model's folder or not a regular file): the engine
    checks their presence and sizes, so a refusal for a missing file is an answer about them.
    Their bytes are never read (weights are not values the figures use)."""
    import stat as st

    from profiles.inputs import inside

    out = []
    for loc in _external_locations(str(model), digest):
        size = None
        f = inside(model.parent, loc) if loc and "\0" not in loc else None
        if f is not None:
            try:
                s = os.stat(f)
                size = s.st_size if st.S_ISREG(s.st_mode) else None
            except OSError:
                pass
        out.append([loc, size])
    return out


def _host_profile_file(resolved: dict[str, Any]) -> Path | None:
    """The host profile file a configuration's figures depend on, or None (a shipped profile,
    hashed with the engine, or no host transforms: then no profile is read)."""
    from engine.host.profile import builtin_names

    name = resolved.get("host_profile")
    if not resolved.get("host_transforms") or not name or name in builtin_names():
        return None
    return Path(name)


def input_changes(inputs: dict[str, str], local: dict[str, str] | None = None) -> str | None:
    """One sentence naming the first file of ``inputs`` (``{path: sha256}``) whose bytes are no
    longer those hashed into the key (``local``: the path actually read for a path, when the
    file travelled with the request); None when every one is unchanged."""
    for path, digest in inputs.items():
        read = (local or {}).get(path, path)
        try:
            now = _file_digest(Path(read), f"file {path!r}", _MODEL_LIMIT)
        except SimulationRefused:
            now = None
        if now != digest:
            return (
                f"{path!r} changed after this configuration was submitted, so its "
                "figures were not kept; run it again."
            )
    return None


@dataclass(frozen=True)
class SimRequest:
    """One configuration to simulate: the resolved run configuration (a dict of every
    ``RunConfig`` option), when it names one the model file's path and digest, and the digest
    of the host profile file it names (None for a shipped one)."""

    config: dict[str, Any]
    model_file: str | None = None
    model_digest: str | None = None
    #: A free label carried back in the response (tune's row id, an insight id); not hashed.
    tag: str = ""
    host_profile_digest: str | None = None
    #: ``[location, size]`` of the model's external-data files (see :func:`_external_state`)
    external: tuple[tuple[str, int | None], ...] = ()

    @classmethod
    def make(
        cls, config: dict[str, Any] | Any, model_file: str | Path | None = None, tag: str = ""
    ) -> SimRequest:
        """Validate ``config`` (a dict or a RunConfig) with the engine's RunConfig; raises
        :class:`SimulationRefused` with the engine's one sentence when it is rejected."""
        from engine.config import RunConfig

        try:
            cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(dict(config))
            resolved = cfg.to_dict()
        except UserFacingError as exc:
            raise SimulationRefused(str(exc)) from None
        digest = None
        if model_file is None and getattr(cfg, "is_onnx", False):
            model_file = resolved["model"]  # an ONNX model: its bytes are part of the key
        if model_file is not None:
            p = Path(model_file)
            digest = _file_digest(p, f"model file {str(p)!r}", _MODEL_LIMIT)
            if resolved.get("model") == str(model_file):
                resolved["model"] = str(p.resolve())
            model_file = str(p.resolve())
        external: tuple[tuple[str, int | None], ...] = ()
        if (
            model_file is not None
            and digest is not None
            and str(model_file).lower().endswith(".onnx")
        ):
            external = tuple(tuple(x) for x in _external_state(Path(model_file), digest))
        host_digest = None
        host = _host_profile_file(resolved)
        if host is not None:
            # read from the current folder when relative: named absolutely from here on, so a
            # worker in another folder reads the same file
            resolved["host_profile"] = str(host.resolve())
            host_digest = _file_digest(host, f"host_profile {str(host)!r}", _HOST_LIMIT)
        return cls(resolved, model_file, digest, tag, host_digest, external)

    @property
    def inputs(self) -> dict[str, str]:
        """``{path: sha256}`` of the files whose bytes the key holds."""
        out = {}
        if self.model_file and self.model_digest:
            out[self.model_file] = self.model_digest
        if self.host_profile_digest:
            out[self.config["host_profile"]] = self.host_profile_digest
        return out

    @functools.cached_property
    def key(self) -> str:
        """sha256 of the resolved configuration, the digests of the files it names and the
        engine."""
        blob = json.dumps(
            {
                "config": self.config,
                "model": self.model_digest,
                "host_profile": self.host_profile_digest,
                "external_data": [list(x) for x in self.external],
                "engine": engine_fingerprint(),
                "figures": FIGURE_KEYS,  # an answer cached with other figures is not reused
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass
class SimResponse:
    """The answer to one request.

    ``status``: ``ok`` (fits) / ``oom`` (simulated, does not fit; the profile holds memory
    only) with ``profile`` and ``figures``; ``refused`` with the engine's sentence in
    ``message``; ``cancelled``, ``killed`` (the worker died twice), ``memory`` / ``timeout``
    (a limit was exceeded) or ``failed`` (an engine bug: the exception in one line).
    """

    key: str
    status: str
    message: str = ""
    profile: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False
    attempts: int = 1
    tag: str = ""

    @property
    def simulated(self) -> bool:
        """Whether the engine answered with figures (fits or out of memory)."""
        return self.status in ("ok", "oom")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SimResponse:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


def figures_of(analysis) -> dict[str, Any]:
    """The key figures (:data:`FIGURE_KEYS`) of an open :class:`analyser.core.Analysis`."""
    m = analysis.metrics
    mem = analysis.memory
    out: dict[str, Any] = {
        "fits": bool(m.fits),
        "oom_tiles": int(m.oom_tiles),
        "peak_memory_bytes": int(m.peak_memory_bytes),
        "max_tile_memory_bytes": int(m.max_tile_memory_bytes),
        "headroom_bytes": int(mem.headroom_bytes),
        "headroom_share": float(mem.headroom_share),
        "memory_share_used": float(m.memory_share_used),
    }
    for k in _EXECUTION_KEYS:
        v = getattr(m, k)
        out[k] = None if v is None else (int(v) if isinstance(v, int) else float(v))
    out.update(feature_figures(analysis))
    return out
