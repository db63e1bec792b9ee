"""Expected GUI errors (shown in a message box, never a traceback), and the one sentence a
report shows when it cannot fill: no Qt here."""

from __future__ import annotations

from collections.abc import Iterable

from profiles.errors import UserFacingError


class GuiError(UserFacingError):
    """A user-facing GUI problem (cannot save an image, bad tile list, ...)."""


class TileSelectionError(GuiError):
    """A typed tile list such as ``'0-15, 1000'`` cannot be parsed or is out of range."""


#: Longest detail of an unexpected error quoted in a sentence (characters).
MAX_DETAIL = 120


def problem_sentence(exc: BaseException, name: str = "the profile") -> str:
    """One sentence for an error met while a report filled from ``name``'s profile: the
    message of an expected error (profiles, analyser), else what was missing or inconsistent,
    with where to look. Never Python's own error text (type names, tracebacks)."""
    if isinstance(exc, UserFacingError):
        return _sentence(str(exc))
    detail = " ".join(str(exc).split())[:MAX_DETAIL].strip("'\" ")
    if isinstance(exc, KeyError):
        what = f"{name} lacks something it needs ({detail})" if detail else f"{name} lacks data"
    elif isinstance(exc, MemoryError):
        what = f"{name} needs more memory than is available here"
    elif detail:
        what = f"a value read from {name} is not usable ({detail})"
    else:
        what = f"a value read from {name} is not usable"
    return f"{what}; analyse validate lists the profile's problems."


def missing_sentence(name: str, missing: Iterable[str]) -> str:
    """One sentence naming the datasets ``name``'s profile lacks."""
    paths = sorted(missing)
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    one = len(paths) == 1
    return (
        f"{name} has no {shown} (the dataset{'' if one else 's'} it needs); "
        "analyse validate lists the profile's problems."
    )


def unavailable_text(title: str, sentence: str) -> str:
    """What a report (or one of its tabs) shows instead of its content."""
    return f"{title} unavailable: {sentence}"


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text.endswith((".", "!", "?")) else text + "."
