"""One door per report: the request for a report's view-model, and where built ones are kept.

A converted report declares a *builder* (``view_builder``): a function of the shown documents
and the memory units returning one frozen, typed view-model (:mod:`.roofline_view`,
:mod:`.summary_view`), everything the report paints. The builder reads the analysis core
through :mod:`.data`; the report reads only the view-model. Because a builder has no Qt and
touches no widget, the window runs it on its thread pool and hands the finished view-model to
the report, which paints when it arrives (napari's components / ``_qt`` split, one hand-off
instead of the report and its model calling each other while it paints).

A built view-model is cached on document A (:meth:`Document.cached`, thread-safe: a GUI-thread
caller waits for a background build of the same key instead of repeating it), keyed by the
builder, B's identity and the units, so a revisit, a theme switch and the warm-up share it.
No Qt here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from analyser.core.units import MemoryUnits
from analyser.gui.model.document import Document

#: A report's builder: (A, B or None, the memory units, then the report's own choices that the
#: view-model depends on, if any: the Operations report's software layer) -> its frozen
#: view-model.
ViewBuilder = Callable[..., Any]


@dataclass(frozen=True)
class ViewRequest:
    """The view-model of ``builder`` for ``doc`` compared with ``other`` in ``units`` (and the
    report's ``options``: hashable values passed after the units)."""

    builder: ViewBuilder
    doc: Document
    other: Document | None
    units: MemoryUnits
    options: tuple[Any, ...] = ()

    @property
    def cache_key(self) -> str:
        b = self.builder
        # B by identity and path: A stays open while B is replaced (Compare with...)
        other = "" if self.other is None else f"{id(self.other)}:{self.other.path}"
        options = ":".join(map(str, self.options))
        return f"view:{b.__module__}.{b.__qualname__}:{other}:{self.units.value}:{options}"

    def ready(self) -> bool:
        """True when the view-model is built already (no work left for the caller)."""
        return self.doc.is_cached(self.cache_key)

    def build(self) -> Any:
        """The view-model (built once per key; any thread)."""
        return self.doc.cached(
            self.cache_key,
            lambda: self.builder(self.doc, self.other, self.units, *self.options),
        )

    def same_as(self, other: ViewRequest | None) -> bool:
        """True when ``other`` asks for the same view-model (the documents by identity)."""
        return (
            other is not None
            and other.builder is self.builder
            and other.doc is self.doc
            and other.other is self.other
            and other.units == self.units
            and other.options == self.options
        )


class ViewReceiver(Protocol):
    """What takes a view-model built in the background (a report: ``Report.receive_view``)."""

    def receive_view(
        self, request: ViewRequest, view: Any = None, error: BaseException | None = None
    ) -> bool: ...
