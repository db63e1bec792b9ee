"""Checking a run configuration against its model and target before any work (``engine.check``).

:func:`check` makes the checks a run would make first (the fields and the checks across them,
RunConfig's; then the model: the zoo model is built or the ONNX file imported, and the stages
assigned, so that a split point naming no layer or an ONNX file that cannot be read is found),
and returns a :class:`CheckResult` holding the validated configuration or the one-sentence
problem. ``analyse profile`` and the GUI's run form call it, so both refuse the same
configurations with the same sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.config import RunConfig
from profiles.errors import UserFacingError


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check` found: the validated ``config`` and ``problem`` None, or ``config``
    None and ``problem`` one sentence naming the option or the model."""

    config: RunConfig | None
    problem: str | None = None
    #: the engine's error behind ``problem`` (its class says which layer refused)
    error: UserFacingError | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """The configuration can be run."""
        return self.problem is None

    def require(self) -> RunConfig:
        """The validated configuration; raises the engine's error when there is a problem."""
        if self.error is not None:
            raise self.error
        assert self.config is not None
        return self.config


def check(config: RunConfig | dict[str, Any]) -> CheckResult:
    """Validate ``config`` (a RunConfig, or a dict of run options) against its model and target."""
    from engine.compiler.lowering import assign_stages
    from engine.models import build_model

    try:
        cfg = config if isinstance(config, RunConfig) else RunConfig.from_dict(dict(config))
        assign_stages(build_model(cfg), cfg)
    except UserFacingError as exc:
        return CheckResult(None, str(exc), exc)
    return CheckResult(cfg)


__all__ = ["CheckResult", "check"]
