"""Expected GUI errors (shown in a message box, never a traceback)."""

from __future__ import annotations

from profiles.errors import UserFacingError


class GuiError(UserFacingError):
    """A user-facing GUI problem (cannot save an image, bad tile list, ...)."""


class TileSelectionError(GuiError):
    """A typed tile list such as ``'0-15, 1000'`` cannot be parsed or is out of range."""
