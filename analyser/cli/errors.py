"""Expected CLI errors: one clear sentence, a non-zero exit code, no traceback."""

from __future__ import annotations

from profiles.errors import UserFacingError


class CliError(UserFacingError):
    """A user-facing CLI error (bad option, missing file, refused overwrite...)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def exit_code_for(exc: BaseException) -> int | None:
    """The exit code for an expected error, or None when ``exc`` is a bug (let it raise)."""
    if isinstance(exc, UserFacingError):
        return getattr(exc, "exit_code", 2)
    try:
        import pydantic

        if isinstance(exc, pydantic.ValidationError):
            return 2
    except ImportError:  # pragma: no cover
        pass
    return None


def message_for(exc: BaseException) -> str:
    """One sentence describing an expected error."""
    try:
        import pydantic

        if isinstance(exc, pydantic.ValidationError):
            parts = []
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"]) or "config"
                parts.append(f"{loc}: {err['msg']}")
            return "invalid run configuration: " + "; ".join(parts) + "."
    except ImportError:  # pragma: no cover
        pass
    return str(exc)
