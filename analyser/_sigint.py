"""Ctrl-C with worker processes. Kept tiny and free of heavy imports: a spawned worker unpickles
(imports) its initializer before anything else.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold a Ctrl-C back until the block ends, then raise KeyboardInterrupt (nothing is lost).

    For spawning worker processes: an interrupt in the middle of a spawn left a half-started
    worker that printed a traceback. Processes spawned inside also inherit SIGINT blocked, so a
    Ctrl-C during their start-up stays pending until their initializer (:func:`quiet_worker`)
    takes it. Only the main thread receives KeyboardInterrupt, so elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old_handler = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    masks = hasattr(signal, "pthread_sigmask")  # not on Windows
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if masks else None
    try:
        yield
    finally:
        if masks:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)  # a pending Ctrl-C lands here
        signal.signal(
            signal.SIGINT, signal.default_int_handler if old_handler is None else old_handler
        )
    if caught:
        raise KeyboardInterrupt


def quiet_worker() -> None:
    """Pool initializer: Ctrl-C ends this worker silently (the default action) instead of raising
    KeyboardInterrupt with a traceback of its own; the parent process reports the interrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
