"""Compile + execute + profile data: ``simulate`` and ``simulate_to_file``.

``simulate(config)`` compiles the configuration and, when the program fits, executes it with
``engine.execute.execute(compiled)`` (the execute half of the engine). An out-of-memory compile
returns a result with memory data and no execution, like Poplar with ``debug.allowOutOfMemory``.
``SimResult.to_profile_data()`` is the dict ``profiles.write_profile`` takes (laid out by
``engine.profile_data``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.compiled import CompiledProgram
from engine.config import RunConfig


@dataclass
class SimResult:
    """A simulated run: the compiled program and (when it fits) its execution."""

    config: RunConfig
    compiled: CompiledProgram
    execution: Any | None = None  # engine.execute.Execution
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        """Whether the program fits in memory."""
        return not self.compiled.oom

    @property
    def oom(self) -> bool:
        """Whether some tile is out of memory."""
        return self.compiled.oom

    def to_profile_data(self) -> dict[str, dict[str, Any]]:
        """The writer's data dict (:func:`engine.profile_data.profile_data`)."""
        from engine.profile_data import profile_data

        return profile_data(self.compiled, self.execution)


def _coerce(config: RunConfig | dict) -> RunConfig:
    return config if isinstance(config, RunConfig) else RunConfig.from_dict(dict(config))


def simulate(
    config: RunConfig | dict, progress=None, *, max_memory: int | None = None
) -> SimResult:
    """Compile and, when it fits, execute. ``progress(fraction, text)`` is optional.

    ``max_memory``: bytes the run may need (``None``: most of the memory available, 0: no
    limit); a configuration estimated above it is refused before the work
    (:class:`engine.resources.ResourceError`, one sentence naming the option)."""
    from engine import resources
    from engine.compiler import compile_program

    config = _coerce(config)
    resources.check_config(config, max_memory)

    def sub(lo: float, hi: float):
        if progress is None:
            return None
        return lambda f, text: progress(lo + (hi - lo) * f, text)

    t0 = time.perf_counter()
    compiled = compile_program(config, progress=sub(0.0, 0.5))
    t1 = time.perf_counter()
    execution = None
    if not compiled.oom:
        from engine.execute import execute

        resources.check_compiled(compiled, max_memory)

        if progress is not None:
            progress(0.5, "executing")
        execution = execute(compiled)
    t2 = time.perf_counter()
    if progress is not None:
        progress(0.8, "executed" if execution is not None else "out of memory: no execution")
    return SimResult(
        config=config,
        compiled=compiled,
        execution=execution,
        timings={"compile_s": t1 - t0, "execute_s": t2 - t1},
    )


def simulate_to_file(
    config: RunConfig | dict,
    path: str | Path,
    progress=None,
    *,
    overwrite: bool = True,
    max_memory: int | None = None,
) -> SimResult:
    """Simulate and write the profile to ``path`` (atomically); returns the SimResult."""
    from profiles import write_profile

    result = simulate(config, progress=progress, max_memory=max_memory)
    if progress is not None:
        progress(0.85, "writing the profile")
    t0 = time.perf_counter()
    data = result.to_profile_data()
    write_profile(path, data, overwrite=overwrite)
    result.timings["write_s"] = time.perf_counter() - t0
    if progress is not None:
        progress(1.0, "written")
    return result


__all__ = ["SimResult", "simulate", "simulate_to_file"]
