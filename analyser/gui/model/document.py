"""The GUI's Qt-free model: an open profile plus cached analysis results, and the workspace.

Following napari's split, nothing here imports Qt. Views subscribe to :class:`Workspace` events
(``workspace.documents_changed.connect(callback)``); the model never calls a view directly. Heavy analysis is
computed once per document through :meth:`Document.cached` (thread-safe, so a loader thread can
warm the cache while the GUI thread reads it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from analyser.core.units import MemoryUnits
from analyser.viewmodels import profile_reads as reads

if TYPE_CHECKING:
    from analyser.core.analysis import Analysis

_T = TypeVar("_T")


class Event:
    """A minimal, Qt-free event: ``connect(callback)``, ``disconnect(callback)``, ``emit(**kw)``."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[..., None]] = []

    def connect(self, callback: Callable[..., None]) -> None:
        if callback not in self._callbacks:
            self._callbacks.append(callback)

    def disconnect(self, callback: Callable[..., None]) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def emit(self, **kwargs: Any) -> None:
        for callback in list(self._callbacks):
            callback(**kwargs)


class Document:
    """One open profile and its :class:`analyser.core.Analysis` (results cached per key)."""

    def __init__(self, path: str | Path, analysis: Analysis) -> None:
        self.path = Path(path)
        self.analysis = analysis
        self._cache: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        #: dataset path -> present in the file (see missing)
        self._present: dict[str, bool] = {}

    @classmethod
    def open(cls, path: str | Path) -> Document:
        """Open ``path`` lazily (metadata only). Raises ``profiles.errors.ProfileError``."""
        from analyser.core.analysis import Analysis

        return cls(path, Analysis.open(path))

    @property
    def profile(self) -> Any:
        """The lazy profile reader (``profiles.open_profile``)."""
        return reads.reader(self.analysis)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def has_execution(self) -> bool:
        return bool(self.analysis.has_execution)

    def missing(self, paths: tuple[str, ...]) -> list[str]:
        """The datasets of ``paths`` the profile lacks (membership tests on the file's index,
        no data read: cheap enough when a profile opens); a path that cannot be looked up
        counts as missing."""
        known = self._present
        out = []
        for path in paths:
            if path not in known:
                try:
                    known[path] = reads.has_dataset(self.analysis, path)
                except Exception:
                    known[path] = False
            if not known[path]:
                out.append(path)
        return out

    def cached(self, key: str, compute: Callable[[], _T]) -> _T:
        """``compute()`` once per key; concurrent callers of the same key wait for the first."""
        if key in self._cache:
            return self._cache[key]
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._cache:
                self._cache[key] = compute()
            return self._cache[key]

    def is_cached(self, key: str) -> bool:
        """True when :meth:`cached` has computed ``key`` already."""
        return key in self._cache

    def close(self) -> None:
        self.analysis.close()
        self._cache.clear()

    def __repr__(self) -> str:
        return f"Document({str(self.path)!r})"


@dataclass
class Workspace:
    """What the window shows: the document, an optional document to compare with, preferences.

    Events (keyword arguments):

    * ``documents_changed(document, compare)``
    * ``units_changed(units)``
    """

    document: Document | None = None
    compare: Document | None = None
    units: MemoryUnits = MemoryUnits.KIB
    documents_changed: Event = field(default_factory=Event)
    units_changed: Event = field(default_factory=Event)

    def set_documents(self, document: Document | None, compare: Document | None = None) -> None:
        old = {id(d): d for d in (self.document, self.compare) if d is not None}
        self.document = document
        self.compare = compare if document is not None else None
        keep = {id(d) for d in (self.document, self.compare) if d is not None}
        for key, doc in old.items():
            if key not in keep:
                doc.close()
        self.documents_changed.emit(document=self.document, compare=self.compare)

    def set_compare(self, compare: Document | None) -> None:
        self.set_documents(self.document, compare)

    def set_units(self, units: MemoryUnits) -> None:
        if units != self.units:
            self.units = units
            self.units_changed.emit(units=units)

    def close(self) -> None:
        self.set_documents(None, None)
