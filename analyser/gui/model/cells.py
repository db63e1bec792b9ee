"""Texts formatted once per cell and kept, for the tables and trees that paint them on every
visit. No Qt."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any


class FormattedCells(dict):
    """Cell texts by key, each made once by :meth:`text` and kept until ``clear()`` (the owner
    clears it when what the texts show changes) or until ``limit`` texts are kept (a long
    scroll): then it starts again, empty."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def text(self, key: Hashable, make: Callable[..., Any], *args: Any) -> Any:
        """The kept text of ``key``, else ``make(*args)``, kept."""
        found = self.get(key)
        if found is None:
            if len(self) >= self.limit:
                self.clear()
            found = self[key] = make(*args)
        return found
