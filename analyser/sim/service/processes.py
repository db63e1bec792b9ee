"""The embedded cluster's worker processes, started without nannies.

A Dask nanny is a process of its own per worker (it imports ``distributed``, runs an event loop
and a TLS listener) whose jobs here are three: start the worker process, start it again when it
dies, and kill it when it grows past its memory share. :class:`WorkerProcesses` does the three
from the service's process, with one thread, so the embedded cluster is the scheduler (in this
process, as before) and one process per worker:

* each worker is a ``multiprocessing`` spawn child (the same executable, the same
  Ctrl-C-ignoring wrapper, :func:`analyser.sim.service.service._workers_ignore_sigint`) that
  runs a ``distributed.Worker`` connected to the scheduler over mutual TLS, with the cluster's
  credentials handed over the spawn pipe (never a file or the environment); it starts before
  the scheduler does and imports ``distributed`` meanwhile, then gets the scheduler's address
  over its pipe;
* a worker that dies (killed, out of memory) is seen at once by the scheduler (its connection
  closes: the task it ran is reported lost, and the service retries it, see
  :meth:`~analyser.sim.service.service.SimulationService._response`) and by the keeper thread
  here, which starts a new worker in its place; a slot whose worker dies within seconds of its
  start three times running is given up (a worker that cannot start at all is not started for
  ever: the tune then reports having no workers);
* each worker watches a pipe from this process and exits when it closes, so a killed
  ``analyse`` leaves no worker behind; and a thread in the worker kills it when its resident
  memory passes :data:`TERMINATE_FRACTION` of its share (what the nanny did: the backstop
  behind the per-simulation address-space limit of :mod:`analyser.sim.service.worker`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

#: Fraction of a worker's memory share at which it is killed (Dask's nanny: ``terminate``).
TERMINATE_FRACTION = 0.95

#: A worker that dies within this many seconds of its start counts as failing to start.
QUICK_DEATH_SECONDS = 5.0

#: Failed starts in a row after which a slot is given up.
MAX_QUICK_DEATHS = 3


class WorkerProcesses:
    """``n`` worker processes, kept at ``n`` while open. They start at once and import what a
    worker needs while the scheduler starts; :meth:`connect` gives them its address."""

    def __init__(
        self,
        security: Any,
        n: int,
        memory_limit: int | None,
        config: dict[str, Any],
        preload: list[str],
    ) -> None:
        import multiprocessing

        self._ctx = multiprocessing.get_context("spawn")
        self._address: str | None = None
        self._spec = {
            "security": security,
            "memory_limit": memory_limit,
            "config": config,
            "preload": preload,
        }
        self._lock = threading.Lock()
        self._closing = False
        #: slot -> (process, the write end of its parent pipe, start time, quick deaths)
        self._slots: dict[int, tuple[Any, Any, float, int]] = {}
        self._wake_r, self._wake_w = os.pipe()
        for slot in range(n):
            self._start(slot, 0)
        self._keeper = threading.Thread(target=self._keep, name="sim-workers", daemon=True)
        self._keeper.start()

    def _start(self, slot: int, quick_deaths: int) -> None:
        reader, writer = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=worker_main,
            args=({**self._spec, "name": f"sim-{slot}"}, reader),
            name=f"sim-worker-{slot}",
            daemon=True,
        )
        proc.start()
        reader.close()
        self._slots[slot] = (proc, writer, time.monotonic(), quick_deaths)
        if self._address is not None:
            with contextlib.suppress(OSError):
                writer.send(self._address)

    def connect(self, address: str) -> None:
        """Send every worker (and every one started from now on) the scheduler's address."""
        with self._lock:
            self._address = address
            writers = [w for _p, w, *_rest in self._slots.values()]
        for writer in writers:
            with contextlib.suppress(OSError):
                writer.send(address)

    def _keep(self) -> None:
        """Start a new worker in the slot of each one that ends, until :meth:`close`."""
        from multiprocessing.connection import wait

        while True:
            with self._lock:
                if self._closing:
                    return
                sentinels = {p.sentinel: slot for slot, (p, *_rest) in self._slots.items()}
            ready = wait([*sentinels, self._wake_r])
            with self._lock:
                if self._closing:
                    return
                for fd in ready:
                    slot = sentinels.get(fd)  # type: ignore[call-overload]
                    if slot is None:
                        continue
                    proc, writer, started, quick = self._slots.pop(slot)
                    proc.join(0)
                    with contextlib.suppress(OSError):
                        writer.close()
                    quick = quick + 1 if time.monotonic() - started < QUICK_DEATH_SECONDS else 0
                    if quick < MAX_QUICK_DEATHS:
                        self._start(slot, quick)

    @property
    def pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p, *_rest in self._slots.values() if p.pid is not None]

    def restart(self) -> None:
        """End every worker; the keeper starts new ones in their slots."""
        with self._lock:
            procs = [p for p, *_rest in self._slots.values()]
        for p in procs:
            with contextlib.suppress(Exception):
                p.kill()

    def close(self, timeout: float = 10.0) -> None:
        """Stop keeping the workers; wait up to ``timeout`` s for them to end (the scheduler
        closing asks them to), then kill the rest. Idempotent."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            slots = list(self._slots.values())
            self._slots.clear()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._keeper.join(5)
        end = time.monotonic() + timeout
        for _proc, writer, *_rest in slots:
            with contextlib.suppress(OSError):
                writer.close()  # the worker exits when its end of the pipe closes
        for proc, *_rest in slots:
            proc.join(max(0.0, end - time.monotonic()))
            if proc.is_alive():
                with contextlib.suppress(Exception):
                    proc.kill()
                proc.join(5)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)


def _exit_with_parent(parent) -> None:
    """Block until the service's process closes its end of the pipe (or dies), then exit."""
    with contextlib.suppress(BaseException):
        parent.recv()
    os._exit(0)


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _memory_guard(limit: int, interval: float = 0.1) -> None:
    """Kill this process when its resident memory passes :data:`TERMINATE_FRACTION` of
    ``limit`` (the scheduler then reports its task lost, and the service retries it once)."""
    import signal

    cap = TERMINATE_FRACTION * limit
    while True:
        time.sleep(interval)
        rss = _rss_bytes()
        if rss is None:
            return
        if rss > cap:
            os.kill(os.getpid(), signal.SIGKILL)


def worker_main(spec: dict[str, Any], parent) -> None:
    """A worker process: imports what it needs, waits for the scheduler's address on the pipe,
    then runs a ``distributed.Worker`` of it until the scheduler closes it or the service's
    process goes away."""
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service's process handles Ctrl-C
    if spec.get("memory_limit") and _rss_bytes() is not None:
        threading.Thread(target=_memory_guard, args=(spec["memory_limit"],), daemon=True).start()

    import asyncio
    import importlib
    import logging

    import dask

    dask.config.set(spec["config"])
    from distributed import Worker

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    for name in spec["preload"]:  # imported while the scheduler starts (run again by the Worker)
        importlib.import_module(name)
    try:
        address = parent.recv()
    except (EOFError, OSError):  # the service closed before its scheduler was up
        os._exit(0)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()

    async def run() -> None:
        async with Worker(
            address,
            nthreads=1,
            name=spec["name"],
            host="127.0.0.1",
            protocol="tls",
            security=spec["security"],
            memory_limit=spec["memory_limit"] or 0,
            preload=spec["preload"],
            dashboard=False,
        ) as worker:
            await worker.finished()

    asyncio.run(run())
    os._exit(0)
