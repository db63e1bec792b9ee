"""The trace query engine: level-of-detail window queries over a profile's executed steps.

``window.TraceWindow`` (pyramids per IPU and grouping, window queries bounded by pixels, row
ranges, step details), built from ``results`` (names, errors, result types), ``access`` (row
reads, the drawing cache), ``pyramid`` (pyramids, per-pixel aggregation), ``lanes`` (lanes of
the grouped views) and ``queries`` (range summary and statistics, search, flows); its on-disk
level-of-detail cache (``lod_cache``) and the BSP view's state shares (``bsp``). Qt-free; used by the GUI's Execution Trace and Pipeline views.
Kept out of the analysis core, which stays free of state and threads: it owns caches and finisher threads. It reads through
the same profile reader as the :class:`analyser.core.Analysis` it is reached from::

    from analyser.trace import trace_of
    window = trace_of(analysis)        # one TraceWindow per open Analysis, None without execution
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analyser.trace.window import TraceWindow

_WINDOWS: weakref.WeakKeyDictionary[Any, TraceWindow] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def trace_of(analysis: Any) -> TraceWindow | None:
    """The trace query engine of ``analysis`` (an open :class:`analyser.core.Analysis`), built
    on its profile reader (``analysis.src.profile``) and kept while the analysis lives; None for
    a profile without execution."""
    if not analysis.has_execution:
        return None
    from analyser.trace.window import TraceWindow

    with _LOCK:
        window = _WINDOWS.get(analysis)
        if window is None:
            window = _WINDOWS[analysis] = TraceWindow(analysis.src.profile)
        return window
