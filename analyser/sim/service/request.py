"""Requests and responses of the simulation service, and the cache key that names them.

A :class:`SimRequest` is a validated run configuration (``engine.config.RunConfig``, every
option resolved to its value, defaults included) plus the bytes' digest of a model file when the
configuration names one. Its :attr:`SimRequest.key` hashes that resolved configuration with the
engine's version and a fingerprint of the engine's own source, so a cached result is only ever
reused by the engine that produced it (``engine.__version__`` alone stays 0.1.0 while the code
changes).

A :class:`SimResponse` is what comes back: the profile path and its key figures
(:data:`FIGURE_KEYS`), or the engine's one-sentence refusal, or why no answer could be had
(cancelled, a worker that died twice, a memory or time limit).
"""

from __future__ import annotations

import functools
import hashlib
import json
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


@functools.lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """``engine.__version__`` plus a digest of the engine's source and data files, and the
    profile format version: a cached result is reused only by the engine that wrote it."""
    import engine
    from profiles.schema import FORMAT_VERSION

    root = Path(engine.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".toml", ".json") and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return f"{engine.__version__}+{h.hexdigest()[:12]}/format {FORMAT_VERSION}"


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class SimRequest:
    """One configuration to simulate: the resolved run configuration (a dict of every
    ``RunConfig`` option) and, when it names one, the model file's path and digest."""

    config: dict[str, Any]
    model_file: str | None = None
    model_digest: str | None = None
    #: A free label carried back in the response (tune's row id, an insight id); not hashed.
    tag: str = ""

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
            try:
                digest = _file_digest(p)
            except OSError as exc:
                raise SimulationRefused(
                    f"model file {str(p)!r} cannot be read: {exc.strerror or exc}."
                ) from None
            if resolved.get("model") == str(model_file):
                resolved["model"] = str(p.resolve())
            model_file = str(p.resolve())
        return cls(resolved, model_file, digest, tag)

    @functools.cached_property
    def key(self) -> str:
        """sha256 of the resolved configuration, the model file's digest and the engine."""
        blob = json.dumps(
            {
                "config": self.config,
                "model": self.model_digest,
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
    out = {
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
