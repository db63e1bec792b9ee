"""The embedded cluster's worker processes, started without nannies.

A Dask nanny is a process of its own per worker (it imports ``distributed``, runs an event loop
and a TLS listener) whose jobs here are three: start the worker process, start it again when it
dies, and kill it when it grows past its memory share. :class:`WorkerProcesses` does the three
from the service's process, with one thread, so the embedded cluster is the scheduler (in this
process, as before) and one process per worker:

* each worker is forked by a fork server of the service's own (a ``multiprocessing``
  forkserver: one process, started from the same executable with the same Ctrl-C-ignoring
  wrapper, :func:`analyser.sim.service.service._workers_ignore_sigint`, that imports
  ``distributed`` and the engine once, :data:`PRELOAD`, while this process starts the
  scheduler, and then forks each worker with those imports done; a fork of a process that
  has started no thread, unlike a fork of this one). The worker runs a ``distributed.Worker``
  connected to the scheduler over mutual TLS, with the cluster's credentials handed over the
  server's pipe (never a file or the environment), and gets the scheduler's address over a
  pipe of its own. Each spawned worker used to import all of it itself: about half a second
  of CPU per worker, the ``distributed`` package alone 0.35 s of it;
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

import atexit
import contextlib
import io
import os
import signal
import threading
import time
from multiprocessing import context as mp_context
from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
from typing import Any

#: Fraction of a worker's memory share at which it is killed (Dask's nanny: ``terminate``).
TERMINATE_FRACTION = 0.95

#: A worker that dies within this many seconds of its start counts as failing to start.
QUICK_DEATH_SECONDS = 5.0

#: Failed starts in a row after which a slot is given up.
MAX_QUICK_DEATHS = 3

#: What the workers' fork server imports once (each worker is then forked with them): the
#: worker's ``distributed`` and what the first simulation imports (the engine, the profile
#: writer and reader, the analysis core that reads the figures back). A module that fails
#: to import is skipped by the server; the worker then imports it itself.
PRELOAD = [
    "distributed",
    "analyser.sim.service.processes",
    "analyser.sim.service.worker",
    "analyser.sim.service.remote",
    "analyser.sim.service.request",
    "engine",
    "engine.simulation",
    "engine.compiler",
    "engine.execute",
    "engine.execute.adapter",
    "engine.models",
    "engine.host",
    "engine.host.frameworks",
    "engine.host.profile",
    "engine.config_checks",
    "engine.profile_data",
    "engine.resources",
    "engine.targets",
    "analyser.core.analysis",
    "profiles.writer",
    "profiles.reader",
    "h5py",
    "hdf5plugin",
    "numpy.ma",
    # last: the worker's warm-up simulation, once in the server (with everything above loaded)
    "analyser.sim.service.warm",
]


class _Server:
    """The workers' fork server: one per process, started by the first
    :class:`WorkerProcesses` and stopped when the last one closes. It is not
    ``multiprocessing``'s shared one (which :mod:`analyser.query.process` starts with its own
    preload in the GUI), so the two neither share imports nor stop each other's."""

    lock = threading.Lock()
    server: forkserver.ForkServer | None = None
    users = 0

    @classmethod
    def acquire(cls) -> forkserver.ForkServer:
        """The server, started now if it is not running (its imports then proceed in the
        background: this returns at once)."""
        with cls.lock:
            if cls.server is None:
                cls.server = forkserver.ForkServer()
                cls.server.set_forkserver_preload(PRELOAD)
            cls.users += 1
            cls.server.ensure_running()
            return cls.server

    @classmethod
    def release(cls) -> None:
        """One user fewer; the last stops the server (its workers have ended by then: a
        worker's exit status reaches this process through the server)."""
        with cls.lock:
            cls.users -= 1
            if cls.users > 0 or cls.server is None:
                return
            server, cls.server = cls.server, None
        # ended by SIGTERM (no handler: at once) rather than by closing its pipe alone, on
        # which it exits like any Python program, finalising everything it imported: about
        # 0.3 s of CPU and wall at the end of every tune. It holds nothing to clean up: its
        # workers have ended, and _stop() removes its socket and reaps it.
        # the server's pid and _stop() are ForkServer's private members (typeshed lists
        # neither): the same ones multiprocessing's own shutdown uses
        private: Any = server
        pid = private._forkserver_pid
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(Exception):
            private._stop()


def start_server() -> None:
    """Start the workers' fork server ahead of :class:`WorkerProcesses`, so its imports run
    on another core while this process imports ``distributed`` and starts the scheduler; the
    :class:`WorkerProcesses` made next takes it over (:func:`stop_server` if none is)."""
    _Server.acquire()


def stop_server() -> None:
    """Undo :func:`start_server` when no :class:`WorkerProcesses` took it over."""
    _Server.release()


class _Popen(popen_forkserver.Popen):
    """``multiprocessing``'s forkserver start, from :class:`_Server`'s server instead of the
    shared one (the same steps as ``popen_forkserver.Popen._launch``)."""

    def _launch(self, process_obj: Any) -> None:
        server = _Server.server
        if server is None:
            raise RuntimeError("the workers' fork server is not running")
        prep_data = spawn.get_preparation_data(process_obj._name)
        buf = io.BytesIO()
        mp_context.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            mp_context.set_spawning_popen(None)
        # _fds and util.close_fds are popen_forkserver's own private names (typeshed lists
        # neither): this is its _launch, step for step
        popen: Any = self
        private_util: Any = util
        fds, close_fds = popen._fds, private_util.close_fds
        self.sentinel, w = server.connect_to_new_process(fds)
        # the child's sentinel of this process: kept open while the child may need it
        parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, close_fds, (parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _WorkerProcess(mp_context.ForkServerProcess):
    """A worker process forked by :class:`_Server`'s server."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        return _Popen(process_obj)


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

        self._ctx = multiprocessing.get_context("forkserver")
        _Server.acquire()
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
        try:
            for slot in range(n):
                self._start(slot, 0)
        except BaseException:
            for proc, *_rest in self._slots.values():
                with contextlib.suppress(Exception):
                    proc.kill()
            _Server.release()
            raise
        self._keeper = threading.Thread(target=self._keep, name="sim-workers", daemon=True)
        self._keeper.start()
        # closed at exit before multiprocessing's own exit handler (registered when it was
        # imported, so it runs after this one) ends the daemonic workers and removes the fork
        # server's socket: the keeper would otherwise see them end and start others
        atexit.register(self.close)

    def _start(self, slot: int, quick_deaths: int) -> None:
        reader, writer = self._ctx.Pipe(duplex=False)
        proc = _WorkerProcess(
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
                        try:
                            self._start(slot, quick)
                        except Exception:  # the fork server is gone: the slot is given up
                            self._slots.pop(slot, None)

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
        atexit.unregister(self.close)
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
        _Server.release()


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
