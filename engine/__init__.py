"""The embedded, vectorised IPU execution engine.

Public API::

    from engine import RunConfig, check, compile, simulate, simulate_to_file

    config = RunConfig(model="resnet50", micro_batch_size=16, gradient_accumulation=4)
    check(config).problem               # None, or one sentence (a split point naming no layer)
    compiled = compile(config)          # CompiledProgram (engine.compiled): ops, programs,
                                        # segments, memory, liveness, OOM flag
    result = simulate(config)           # SimResult: compile + execute when it fits
    result.to_profile_data()            # the dict profiles.write_profile() takes
    simulate_to_file(config, "out.h5")  # all of the above, written atomically

``check`` lives in ``engine.preflight`` (a module named ``engine.check`` would replace the function
on the package once imported). Submodules are imported lazily so ``import engine`` stays cheap. ``compile`` and ``simulate``
are these functions; their modules are ``engine.compiler`` and ``engine.simulation``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from engine.compiled import CompiledProgram
    from engine.config import RunConfig
    from engine.preflight import CheckResult
    from engine.simulation import SimResult


def check(config: RunConfig | dict) -> CheckResult:
    """Validate a run configuration against its model and target before any work: a
    :class:`engine.preflight.CheckResult` with the validated config or a one-sentence problem."""
    from engine.preflight import check as _check

    return _check(config)


def compile(config: RunConfig | dict, progress=None) -> CompiledProgram:
    """Compile a run configuration (lowering, tile plans, memory, liveness)."""
    from engine.compiler import compile_program

    return compile_program(config, progress=progress)


def simulate(
    config: RunConfig | dict, progress=None, *, max_memory: int | None = None
) -> SimResult:
    """Compile and, when the program fits, execute (engine.execute); ``max_memory`` bytes caps
    the run's estimated memory (engine.resources)."""
    from engine.simulation import simulate as _simulate

    return _simulate(config, progress=progress, max_memory=max_memory)


def simulate_to_file(
    config: RunConfig | dict,
    path,
    progress=None,
    *,
    overwrite: bool = True,
    max_memory: int | None = None,
):
    """Simulate and write the profile to ``path``; returns the SimResult."""
    from engine.simulation import simulate_to_file as _stf

    return _stf(config, path, progress=progress, overwrite=overwrite, max_memory=max_memory)


def __getattr__(name: str) -> Any:
    if name == "RunConfig":
        from engine.config import RunConfig

        return RunConfig
    if name == "CheckResult":
        from engine.preflight import CheckResult

        return CheckResult
    if name == "CompiledProgram":
        from engine.compiled import CompiledProgram

        return CompiledProgram
    if name == "SimResult":
        from engine.simulation import SimResult

        return SimResult
    raise AttributeError(f"module 'engine' has no attribute {name!r}")


__all__ = [
    "CheckResult",
    "CompiledProgram",
    "RunConfig",
    "SimResult",
    "check",
    "compile",
    "simulate",
    "simulate_to_file",
]
