"""Expected engine errors: each carries one sentence naming the problem (no traceback shown)."""

from __future__ import annotations

from profiles.errors import UserFacingError


class EngineError(UserFacingError):
    """Base of the engine's expected errors."""


class ConfigError(EngineError):
    """A run configuration is invalid or impossible (names the field and the allowed values)."""


class TargetError(EngineError):
    """A hardware target name or a target override is invalid."""


class ModelError(EngineError):
    """A model cannot be built with the given parameters."""


def first_problem(exc, what: str) -> str:
    """``field: message`` of the first error of a pydantic ValidationError (``what`` stands for
    the field when the error names none: a problem with the whole table)."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or what
    return f"{loc}: {err['msg']}"


__all__ = ["ConfigError", "EngineError", "ModelError", "TargetError", "first_problem"]
