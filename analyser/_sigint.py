"""Ctrl-C while worker processes start (the simulation service's cluster)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold a Ctrl-C (or SIGTERM) back until the block ends, then raise KeyboardInterrupt
    (:class:`profiles.atomic.Interrupted`, exit code 130 or 143; nothing is lost).

    For starting the simulation service's worker processes (analyser.sim.service): an
    interrupt in the middle of the start left a half-started cluster. Only the main thread
    receives KeyboardInterrupt, so elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old_handler = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    # SIGTERM is recorded too (not masked: the worker processes spawned meanwhile inherit the
    # mask, and their nannies end them with SIGTERM); raised in the middle of the start it left
    # a half-started cluster whose close at exit printed distributed's tracebacks
    old_term = None
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_IGN, None):
        old_term = signal.signal(signal.SIGTERM, lambda signum, frame: caught.append(signum))
    masks = hasattr(signal, "pthread_sigmask")  # not on Windows
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if masks else None
    from profiles.atomic import Interrupted

    try:
        try:
            yield
        finally:
            if old_mask is not None:  # masks: pthread_sigmask returned the old mask
                # a pending Ctrl-C lands here
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            signal.signal(
                signal.SIGINT, signal.default_int_handler if old_handler is None else old_handler
            )
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
    except Exception as exc:
        # the same Ctrl-C reached a starting worker too (the whole process group gets it), and
        # the start failed for that reason ("Nanny failed to start worker process"): the user
        # asked to stop, which is an interruption, not an internal error
        if caught:
            raise Interrupted(caught[0]) from exc
        raise
    if caught:
        raise Interrupted(caught[0])  # a KeyboardInterrupt whose exit code is 128 + signal
