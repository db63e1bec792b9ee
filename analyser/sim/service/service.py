"""The simulation service: requests in, profiles and key figures out, on Dask ``distributed``.

    from analyser.sim.service import get_service, SimRequest
    svc = get_service()                      # embedded LocalCluster, started on first use
    batch = svc.submit([SimRequest.make(cfg) for cfg in configs])
    for index, response in batch.as_completed():
        print(response.status, response.figures.get("throughput_samples_per_s"))

Where the work runs: by default an embedded cluster (a ``distributed.LocalCluster``'s scheduler
in this process and one single-threaded worker process per core, started without nannies by
:mod:`analyser.sim.service.processes`; loopback only, no dashboard) started on the first request
that the cache cannot answer and closed at exit. ``scheduler="tcp://HOST:PORT"`` (or the ``ANALYSE_SCHEDULER`` environment variable)
connects to an existing Dask cluster instead; its workers need this package installed (the same
engine: a worker whose engine differs refuses the work rather than cache another engine's
figures under this one's key).

Who may talk to it: a Dask scheduler and its workers run any function a connected client
sends, and loopback does not check who connects. The embedded cluster therefore gets a fresh
TLS key and self-signed certificate per run (:func:`_embedded_security`, kept in memory and
handed to the worker processes it starts) and requires them of every peer (mutual TLS,
encryption required), so only this process's client and its own workers get in. For a
cluster of the user's own, its security settings pass through: ``security=`` (the CLI's
``--tls-ca-file`` / ``--tls-cert`` / ``--tls-key``, :func:`tls_security`), else Dask's own
configuration (``distributed.comm.tls.*``). See docs/tune.md.

What the service guarantees:

* a configuration is simulated once: answers (``ok``, ``oom`` and the engine's ``refused``)
  are cached on disk under :attr:`SimRequest.key` and identical requests in flight share one
  task;
* cancellation (:meth:`Batch.cancel`): queued simulations are dropped, running ones stopped;
* progress (:meth:`Batch.progress`): done / running / queued;
* a worker that dies mid-simulation: the simulation is retried once on another worker, then
  reported as ``killed`` (the embedded cluster's scheduler gives up on a task at the first
  death, ``allowed-failures = 0``, so the retry is the service's own; a remote scheduler applies
  its own setting first);
* memory and time limits per simulation, enforced in the worker
  (:mod:`analyser.sim.service.worker`), reported as ``memory`` / ``timeout``;
* a worker process that dies is replaced (:class:`~analyser.sim.service.processes.WorkerProcesses`);
* worker processes die with the process that started them: each watches a pipe to the parent
  and exits when it closes, so a killed ``analyse`` leaves no orphans.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import secrets
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from analyser.sim.service.request import (
    CACHED_STATUSES,
    SimRequest,
    SimResponse,
    SimulationRefused,
    engine_fingerprint,
)
from analyser.sim.service.worker import TOKEN_FILE, cancel_keys
from profiles.errors import UserFacingError

ENV_SCHEDULER = "ANALYSE_SCHEDULER"
ENV_CACHE = "ANALYSE_CACHE"

#: Default per-simulation time limit (seconds); the walkthrough's ResNet-101 takes about 1 s.
DEFAULT_TIME_LIMIT = 600.0


class ServiceError(UserFacingError):
    """The service cannot start (no scheduler at the address, a cache folder not writable)."""


class Progress(NamedTuple):
    done: int
    running: int
    queued: int
    total: int


def default_cache_dir() -> Path:
    """``$ANALYSE_CACHE``, else ``$XDG_CACHE_HOME/ipu-graph-analyser/simulations``, else
    ``~/.cache/ipu-graph-analyser/simulations``."""
    if os.environ.get(ENV_CACHE):
        return Path(os.environ[ENV_CACHE]).expanduser()
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "ipu-graph-analyser" / "simulations"


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class SimCache:
    """Answers on disk: ``<key>.json`` (the response) and ``<key>.h5`` (its profile), written
    atomically, so two processes may share a cache folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            token = self.root / TOKEN_FILE
            if not token.exists():
                self._write(token, secrets.token_hex(16).encode())
            self.token = token.read_text()
        except OSError as exc:
            raise ServiceError(
                f"the simulation cache folder {str(self.root)!r} cannot be used: "
                f"{exc.strerror or exc}."
            ) from None

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()

    def profile_path(self, key: str) -> Path:
        return self.root / f"{key}.h5"

    def get(self, key: str) -> SimResponse | None:
        """The cached answer of ``key``, or None (absent, or not usable: validated like any
        input by :func:`analyser.sim.service.cache_check.cached_answer`)."""
        from analyser.sim.service.cache_check import cached_answer

        data = cached_answer(self.root, key)
        if data is None:
            return None
        resp = SimResponse.from_dict(data)
        resp.cached = True
        return resp

    def put(self, resp: SimResponse, profile_bytes: bytes | None = None) -> None:
        import json

        if resp.status not in CACHED_STATUSES:
            return
        if profile_bytes is not None:
            self._write(self.profile_path(resp.key), profile_bytes)
            resp.profile = str(self.profile_path(resp.key))
        data = resp.to_dict()
        data.pop("cached", None)
        self._write(self.root / f"{resp.key}.json", json.dumps(data, default=str).encode())


@dataclass
class _Job:
    request: SimRequest
    indices: list[int]
    future: Any = None
    attempt: int = 1


class Batch:
    """Requests submitted together. Answers arrive in :attr:`responses` (by request index) as
    they finish; :meth:`as_completed` yields them, :meth:`progress` counts them, :meth:`cancel`
    stops the rest. ``on_result(index, response)`` (if given) is called from the batch's
    collector thread."""

    def __init__(
        self,
        service: SimulationService,
        requests: list[SimRequest | SimResponse],
        on_result: Callable[[int, SimResponse], None] | None = None,
    ) -> None:
        self.service = service
        self.total = len(requests)
        self.responses: list[SimResponse | None] = [None] * self.total
        self._on_result = on_result
        self._queue: queue.Queue[tuple[int, SimResponse] | None] = queue.Queue()
        self._done = threading.Event()
        self._cancelled = False
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self._tags = [r.tag for r in requests]
        for i, req in enumerate(requests):
            if isinstance(req, SimResponse):  # refused before submission
                self._answer(i, req)
                continue
            hit = service.cache.get(req.key)
            if hit is not None:
                hit.tag = req.tag
                self._answer(i, hit)
            elif req.key in self._jobs:
                self._jobs[req.key].indices.append(i)
            else:
                self._jobs[req.key] = _Job(req, [i])
        self._thread: threading.Thread | None = None
        if self._jobs:
            for job in self._jobs.values():
                service._submit(job)
            self._thread = threading.Thread(target=self._collect, name="sim-batch", daemon=True)
            self._thread.start()
        else:
            self._finish()

    # -- answers -------------------------------------------------------------------------------
    def _answer(self, index: int, resp: SimResponse) -> None:
        with self._lock:
            self.responses[index] = resp
        self._queue.put((index, resp))
        if self._on_result is not None:
            with contextlib.suppress(Exception):  # a failing callback must not stop the batch
                self._on_result(index, resp)

    def _finish(self) -> None:
        self._done.set()
        self._queue.put(None)

    def _deliver(self, job: _Job, resp: SimResponse) -> None:
        for n, i in enumerate(job.indices):
            r = resp if n == 0 else SimResponse.from_dict(resp.to_dict())
            r.tag = self._tags[i]
            self._answer(i, r)

    def _collect(self) -> None:
        from distributed import as_completed

        futures = {job.future: job for job in self._jobs.values()}
        ac = as_completed(list(futures), loop=self.service.client().loop)
        for fut in ac:
            job = futures.pop(fut)
            resp, retry = self.service._response(job, fut, self._cancelled)
            if retry:
                self.service._submit(job)
                futures[job.future] = job
                ac.add(job.future)
                continue
            assert resp is not None  # _response gives None only with retry
            self._deliver(job, resp)
        self._finish()

    # -- public --------------------------------------------------------------------------------
    def as_completed(self, timeout: float | None = None) -> Iterator[tuple[int, SimResponse]]:
        """Yield ``(index, response)`` as answers arrive (cached ones first)."""
        seen = 0
        while seen < self.total:
            item = self._queue.get(timeout=timeout)
            if item is None:
                break
            seen += 1
            yield item

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every request is answered; False on timeout."""
        return self._done.wait(timeout)

    def results(self, timeout: float | None = None) -> list[SimResponse]:
        """Every response, in request order (waits)."""
        if not self.wait(timeout):
            raise TimeoutError("the simulations did not finish in time")
        return [r for r in self.responses if r is not None]

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def progress(self) -> Progress:
        """Answered / running / queued requests (running = assigned to a worker now)."""
        with self._lock:
            done = sum(r is not None for r in self.responses)
        pending = {
            job.future.key: len(job.indices)
            for job in self._jobs.values()
            if job.future is not None and not job.future.done()
        }
        running = 0
        if pending and self.service._client is not None:
            with contextlib.suppress(Exception):
                busy = {k for keys in self.service._client.processing().values() for k in keys}
                running = sum(n for k, n in pending.items() if k in busy)
        queued = max(0, self.total - done - running)
        return Progress(done, running, queued, self.total)

    def cancel(self) -> None:
        """Drop the queued simulations and stop the running ones; their answers are
        ``cancelled``. Already answered requests keep their answers."""
        self._cancelled = True
        futs = [j.future for j in self._jobs.values() if j.future is not None]
        keys = [j.future.key for j in self._jobs.values() if j.future is not None]
        client = self.service._client
        if client is not None and futs:
            with contextlib.suppress(Exception):
                client.cancel(futs)
            with contextlib.suppress(Exception):
                client.run(cancel_keys, keys, wait=False)


class SimulationService:
    """One simulation service (see the module docstring). Thread-safe; the Dask client is
    created on the first :meth:`submit`."""

    def __init__(
        self,
        scheduler: str | None = None,
        *,
        workers: int | None = None,
        cache_dir: str | Path | None = None,
        memory_limit: int | None = None,
        time_limit: float | None = DEFAULT_TIME_LIMIT,
        security: Any = None,
    ) -> None:
        self.scheduler = scheduler if scheduler is not None else os.environ.get(ENV_SCHEDULER)
        self.scheduler = self.scheduler or None
        #: ``distributed.security.Security`` of the connection: for a scheduler given by
        #: address, the caller's (None: Dask's configuration); for the embedded cluster, its
        #: per-run temporary credentials (set when it starts)
        self.security = security
        self.workers = workers
        self.cache = SimCache(cache_dir or default_cache_dir())
        self.memory_limit = memory_limit
        self.time_limit = time_limit
        self._client = None
        self._cluster = None
        self._workers: Any = None  # the embedded cluster's WorkerProcesses
        self._lock = threading.Lock()
        self._closed = False
        self._batches: weakref.WeakSet[Batch] = weakref.WeakSet()

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._client is not None

    @property
    def n_workers(self) -> int:
        """Workers of the cluster now (starts it)."""
        client = self.client()
        return len(client.scheduler_info().get("workers", {}))

    def client(self):
        """The Dask client (starting the embedded cluster, or connecting, on first use)."""
        with self._lock:
            if self._client is None:
                if self._closed:
                    raise ServiceError("the simulation service has been closed.")
                self._client = self._connect()
            return self._client

    def _connect(self):
        if self.scheduler:
            import distributed  # noqa: F401 (its loggers, quietened below)

            if _QUIET_LOGS:
                _quiet_now()
            return self._connect_remote()
        from analyser.sim.service import processes

        # the workers' fork server first (it must start from the Ctrl-C-ignoring executable):
        # it imports distributed and the engine on another core while this process imports
        # distributed and starts the scheduler
        _workers_ignore_sigint()
        processes.start_server()
        try:
            return self._connect_embedded()
        finally:
            processes.stop_server()  # the cluster's WorkerProcesses holds it from here on

    def _connect_embedded(self):
        import dask
        from distributed import Client, LocalCluster

        if _QUIET_LOGS:
            _quiet_now()
        n = self.workers or available_cores()
        per_worker = _memory_per_worker(n)
        if self.memory_limit is None:
            # each simulation may use most of its worker's share; the worker's own guard
            # (killed at 95 %, analyser.sim.service.processes) stays as the backstop
            self.memory_limit = int(per_worker * 0.85)
        from analyser._sigint import sigint_deferred

        self.security = _embedded_security()
        config = {
            "distributed.scheduler.allowed-failures": 0,
            "distributed.scheduler.worker-saturation": 1.0,
            # one single-threaded worker per core, tasks queued on the scheduler: nothing
            # to balance, so no stealing pass every second
            "distributed.scheduler.work-stealing": False,
            "distributed.worker.memory.target": False,
            "distributed.worker.memory.spill": False,
            "distributed.worker.memory.pause": False,
            # the workers' statistical profiler (a stack sample every 10 ms) feeds the
            # dashboard's profile page, which the embedded cluster does not serve
            "distributed.worker.profile.enabled": False,
            "distributed.admin.system-monitor.gil.enabled": False,
            # host-wide disk counters and a 50 Hz event-loop health tick in every process
            # feed the dashboard and "event loop blocked" log lines: neither is shown here
            "distributed.admin.system-monitor.disk": False,
            "distributed.admin.tick.interval": "250ms",
            # the HTTP servers (plain HTTP, not covered by the TLS below) answer health
            # checks only: no pages listing workers, tasks or their logs
            "distributed.scheduler.http.routes": ["distributed.http.health"],
            "distributed.worker.http.routes": ["distributed.http.health"],
        }
        from analyser.sim.service.processes import WorkerProcesses

        # Ctrl-C while the cluster starts is held back until it is up, then raised here
        with sigint_deferred(), dask.config.set(config):
            client = None
            try:
                self._cluster = LocalCluster(
                    n_workers=0,
                    processes=True,
                    host="127.0.0.1",
                    # every listener (scheduler, workers) speaks TLS and wants our
                    # certificate from whoever connects
                    protocol="tls://",
                    security=self.security,
                    scheduler_port=0,
                    dashboard_address=None,
                    # the scheduler's HTTP routes (health, metrics) on a free loopback port,
                    # not 8787 on every interface
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                    silence_logs=logging.CRITICAL,
                )
                client = Client(self._cluster, set_as_default=False)
                # the workers last, without nannies: their fork server has imported what they
                # need while the scheduler and the client started (forking a worker waits for
                # it), and each gets the scheduler's address at once
                self._workers = WorkerProcesses(
                    self.security, n, per_worker, config, preload=["analyser.sim.service.worker"]
                )
                self._workers.connect(self._cluster.scheduler_address)
                return client
            except BaseException:
                if client is not None:
                    with contextlib.suppress(Exception):
                        client.close(timeout=10)
                self._close_embedded()
                raise

    def _connect_remote(self):
        """A client of the cluster at :attr:`scheduler`, after bounded checks that it is a Dask
        scheduler with workers that have this project (one sentence each otherwise)."""
        from distributed import Client

        from analyser.sim.service.remote import identify_scheduler

        _check_reachable(self.scheduler)
        try:
            identify_scheduler(self.scheduler, self.security)
            client = Client(
                self.scheduler, timeout=10, set_as_default=False, security=self.security
            )
        except UserFacingError as exc:
            raise ServiceError(str(exc)) from None
        except (OSError, TimeoutError, ValueError) as exc:
            raise ServiceError(
                f"cannot reach the Dask scheduler at {self.scheduler!r}: "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}."
            ) from None
        try:
            self._check_workers(client)
        except BaseException:
            with contextlib.suppress(Exception):
                client.close(timeout=5)
            raise
        return client

    def _check_workers(self, client) -> None:
        from analyser.sim.service.remote import check_workers

        assert self.scheduler is not None  # called for a remote cluster (_connect_remote) only
        try:
            check_workers(client, self.scheduler)
        except UserFacingError as exc:
            raise ServiceError(str(exc)) from None

    def close(self) -> None:
        """Close the client and the embedded cluster (idempotent)."""
        with self._lock:
            self._closed = True
            client = self._client
            self._client = None
        # the workers log their ends at INFO / WARNING while closing; nothing for users
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close(timeout=10)
        self._close_embedded()

    def _close_embedded(self) -> None:
        """Close the embedded scheduler (its workers are told to close), then end the workers."""
        with self._lock:
            cluster, workers = self._cluster, self._workers
            self._cluster = self._workers = None
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close(timeout=10)
        if workers is not None:
            workers.close()

    def __enter__(self) -> SimulationService:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def restart_workers(self) -> None:
        """Restart every worker (drops a stuck simulation; the embedded cluster only)."""
        workers = self._workers
        if workers is not None:
            workers.restart()

    # -- requests ------------------------------------------------------------------------------
    def request(
        self, config: dict[str, Any] | Any, model_file: str | Path | None = None, tag: str = ""
    ) -> SimRequest | SimResponse:
        """A validated request, or the ``refused`` response when the engine rejects the
        configuration before any work (its one sentence)."""
        try:
            return SimRequest.make(config, model_file, tag)
        except SimulationRefused as exc:
            return SimResponse("", "refused", str(exc), tag=tag, cached=True)

    def submit(
        self,
        requests: Iterable[SimRequest | SimResponse | dict[str, Any]],
        on_result: Callable[[int, SimResponse], None] | None = None,
    ) -> Batch:
        """Submit requests (run configs are validated first); returns at once."""
        reqs = [r if isinstance(r, SimRequest | SimResponse) else self.request(r) for r in requests]
        batch = Batch(self, reqs, on_result)
        if not batch.done:
            self._batches.add(batch)
        return batch

    def cancel_all(self) -> int:
        """Cancel every batch still running (a window closing, an application quitting);
        returns how many were cancelled."""
        live = [b for b in list(self._batches) if not b.done]
        for b in live:
            b.cancel()
        return len(live)

    def run(
        self,
        requests: Iterable[SimRequest | SimResponse | dict[str, Any]],
        progress: Callable[[Progress], None] | None = None,
    ) -> list[SimResponse]:
        """Submit and wait; ``progress(Progress)`` after each answer. Ctrl-C cancels."""
        batch = self.submit(requests)
        try:
            for _ in batch.as_completed():
                if progress is not None:
                    progress(batch.progress())
        except BaseException:
            batch.cancel()
            raise
        return batch.results()

    def simulate(self, config: dict[str, Any] | Any, model_file=None) -> SimResponse:
        """One configuration, waited for."""
        return self.run([self.request(config, model_file)])[0]

    # -- internals used by Batch ---------------------------------------------------------------
    def _submit(self, job: _Job) -> None:
        client = self.client()
        req = job.request
        task = f"sim-{req.key}-{job.attempt}-{secrets.token_hex(4)}"
        host = req.config.get("host_profile") if req.host_profile_digest else None
        payload = {
            "key": req.key,
            "task": task,
            "config": req.config,
            "tag": req.tag,
            "cache_dir": str(self.cache.root),
            "token": self.cache.token,
            "engine": engine_fingerprint(),
            "model_file": req.model_file,
            "model_bytes": _read(req.model_file) if req.model_file and self.scheduler else None,
            "host_profile": host,
            "host_profile_bytes": _read(host) if host and self.scheduler else None,
            "inputs": req.inputs,
            "memory_limit": self.memory_limit,
            "time_limit": self.time_limit,
            "attempt": job.attempt,
        }
        job.future = client.submit(_runner(), payload, key=task, pure=False, retries=0)
        job.attempt += 1

    def _response(self, job: _Job, fut, cancelled: bool) -> tuple[SimResponse | None, bool]:
        """The response of a finished future, or (None, True) to retry it once."""
        from distributed import KilledWorker

        key = job.request.key
        if fut.status == "cancelled" or (cancelled and fut.status != "finished"):
            return SimResponse(key, "cancelled", "cancelled.", attempts=job.attempt - 1), False
        try:
            data = fut.result()
        except KilledWorker:
            if job.attempt <= 2 and not cancelled:
                return None, True
            return (
                SimResponse(
                    key,
                    "killed",
                    "the worker process simulating this configuration died twice (killed, or "
                    "out of memory); it was not retried again.",
                    attempts=job.attempt - 1,
                ),
                False,
            )
        except Exception as exc:  # cancelled while fetching, a lost connection
            if cancelled:
                return SimResponse(key, "cancelled", "cancelled.", attempts=job.attempt - 1), False
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return SimResponse(key, "failed", f"the simulation failed: {text}."), False
        finally:
            with contextlib.suppress(Exception):
                fut.release()
        profile_bytes = data.pop("profile_bytes", None)
        resp = SimResponse.from_dict(data)
        self.cache.put(resp, profile_bytes)
        return resp, False


_RUNNER: Callable | None = None


def _runner() -> Callable:
    """The task function, sent by value (see :func:`analyser.sim.service.remote.task_runner`)."""
    global _RUNNER
    if _RUNNER is None:
        from analyser.sim.service.remote import task_runner

        _RUNNER = task_runner()
    return _RUNNER


def _embedded_security():
    """Fresh credentials for one embedded cluster: a private key and self-signed certificate
    (in memory) that every peer must present, with encryption required.

    ``Security.temporary()`` with an elliptic-curve key (NIST P-256, ECDSA with SHA-256) in
    place of its 2048-bit RSA one: the same trust (only holders of this key get in), a key made
    in about a millisecond instead of about 80, and cheaper handshakes for every connection
    between the client, the scheduler and the workers."""
    import datetime

    from distributed.security import Security

    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        raise ServiceError(
            "the simulation service needs the Python package 'cryptography' to secure its "
            "local cluster; install it (pip install cryptography)."
        ) from None
    key = ec.generate_private_key(ec.SECP256R1())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    # the name Dask's own temporary certificate carries (its TLS connections expect it)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dask-internal")])
    now = datetime.datetime.now(tz=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("dask-internal")]), False)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    return Security(
        require_encryption=True,
        tls_ca_file=cert_pem,
        tls_client_key=key_pem,
        tls_client_cert=cert_pem,
        tls_scheduler_key=key_pem,
        tls_scheduler_cert=cert_pem,
        tls_worker_key=key_pem,
        tls_worker_cert=cert_pem,
    )


#: Largest TLS file (CA bundle, certificate or key) read for a scheduler's connection.
MAX_TLS_FILE = 1 << 20


def tls_security(ca_file: str, cert: str, key: str | None = None):
    """A ``Security`` for a user's TLS-secured scheduler from a CA bundle, a client certificate
    and its key (``key`` None: inside ``cert``); one sentence when a file cannot be used."""
    import ssl
    import stat

    from distributed.security import Security

    for what, path in (("CA file", ca_file), ("certificate", cert), ("key", key)):
        if path is None:
            continue
        try:
            st = os.stat(path)
        except OSError as exc:
            raise ServiceError(f"the TLS {what} {path!r} cannot be read: {exc.strerror}.") from None
        if not stat.S_ISREG(st.st_mode):
            raise ServiceError(f"the TLS {what} {path!r} is not a regular file.")
        if st.st_size > MAX_TLS_FILE:
            raise ServiceError(
                f"the TLS {what} {path!r} is {st.st_size:,} bytes, more than a PEM file "
                f"holds (limit {MAX_TLS_FILE:,})."
            )
    sec = Security(
        tls_ca_file=ca_file, tls_client_cert=cert, tls_client_key=key, require_encryption=True
    )
    try:
        sec.get_connection_args("client")  # loads the files now, not at the first connection
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or str(exc).splitlines()[0] or type(exc).__name__
        raise ServiceError(
            f"the TLS files ({ca_file}, {cert}{', ' + key if key else ''}) cannot be used: "
            f"{reason}."
        ) from None
    return sec


#: Protocols of a scheduler address the service connects to (Dask's own, but ``inproc``:
#: a scheduler in this process's memory, which another process never is).
PROTOCOLS = ("tcp", "tls", "ws", "wss", "ucx")


def _shown(address: str, limit: int = 80) -> str:
    """``address`` quoted for a sentence, cut to ``limit`` characters."""
    return repr(address if len(address) <= limit else address[: limit - 3] + "...")


def _check_reachable(address: str) -> None:
    """One sentence at once when a scheduler address cannot name a scheduler
    (:func:`check_scheduler_address`) or nothing listens at a ``tcp://HOST:PORT`` /
    ``tls://HOST:PORT`` (the Dask client would retry for its whole timeout)."""
    import socket

    hostport = check_scheduler_address(address)
    if hostport is None:
        return
    try:
        socket.create_connection(hostport, timeout=5).close()
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ServiceError(
            f"cannot reach the Dask scheduler at {_shown(address)}: {reason}."
        ) from None


def check_scheduler_address(address: str) -> tuple[str, int] | None:
    """ServiceError (one sentence) when ``address`` cannot name a Dask scheduler in another
    process: a protocol Dask does not speak to one, a tcp:// or tls:// address without a
    host and a port, a host name that is none. Nothing is connected to (the commands check
    their options with it before any work). Returns (host, port) of a tcp:// or tls://
    address, None for the other protocols."""
    from urllib.parse import urlsplit

    scheme = address.split("://", 1)[0].lower() if "://" in address else "tcp"
    if scheme == "inproc":
        raise ServiceError(
            f"the Dask scheduler address {_shown(address)} is an in-process address "
            "(inproc:// works only within one process); give the scheduler's tcp://HOST:PORT "
            "or tls://HOST:PORT."
        )
    if scheme not in PROTOCOLS:
        raise ServiceError(
            f"the Dask scheduler address {_shown(address)} uses the protocol {scheme[:20]!r}, "
            f"which Dask does not speak ({', '.join(PROTOCOLS)}); give tcp://HOST:PORT or "
            "tls://HOST:PORT."
        )
    if scheme not in ("tcp", "tls"):
        return None
    url = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = url.hostname, url.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise ServiceError(
            f"the Dask scheduler address {_shown(address)} is not of the form tcp://HOST:PORT "
            "(or tls://HOST:PORT)."
        )
    try:
        host.encode("idna")
    except UnicodeError as exc:  # a label over 63 characters, an empty label
        why = str(exc).rsplit(": ", 1)[-1].rstrip(")") or "not a DNS name"
        raise ServiceError(
            f"the Dask scheduler address {_shown(address)} has a host name that is not valid "
            f"({why}); check the address."
        ) from None
    return host, port


def _read(path: str | None) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def _workers_ignore_sigint() -> None:
    """Make the worker processes this process spawns ignore Ctrl-C from their first instruction.

    A terminal sends Ctrl-C to the whole process group, workers included; a worker still
    importing Python when it arrives died with a KeyboardInterrupt traceback of its own. A
    signal ignored when a program starts stays ignored (and Python then installs no
    KeyboardInterrupt handler), so the spawn executable becomes a two-line shell wrapper that
    ignores SIGINT and runs this Python. The workers' fork server starts from it too, and the
    workers it forks keep the ignored SIGINT (multiprocessing's server hands them the handlers
    it started with). This process keeps its own Ctrl-C: it cancels the work and closes the
    cluster, and the workers end with it. POSIX only."""
    import multiprocessing.spawn as mp_spawn
    import shlex
    import shutil
    import tempfile

    if os.name != "posix" or not shutil.which("sh"):
        return
    exe = os.fsdecode(mp_spawn.get_executable())
    if os.path.basename(exe) == "python-no-sigint":
        return
    folder = tempfile.mkdtemp(prefix="analyse-workers-")
    wrapper = Path(folder) / "python-no-sigint"
    wrapper.write_text(f'#!/bin/sh\ntrap "" INT\nexec {shlex.quote(exe)} "$@"\n')
    wrapper.chmod(0o755)
    mp_spawn.set_executable(str(wrapper))
    atexit.register(shutil.rmtree, folder, True)


#: Set by :func:`quiet_cluster_logs`: silence ``distributed``'s loggers once it is imported.
_QUIET_LOGS = False


def quiet_cluster_logs() -> None:
    """Silence ``distributed``'s and tornado's loggers for this process: now when
    ``distributed`` is imported already, else when the service first connects (importing it
    only to quieten it cost a run answered from the cache a third of a second)."""
    import sys

    global _QUIET_LOGS
    _QUIET_LOGS = True
    if "distributed" in sys.modules:
        _quiet_now()


def _quiet_now() -> None:
    for name in ["distributed", *list(logging.root.manager.loggerDict)]:
        if name.split(".")[0] in ("distributed", "tornado"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _memory_per_worker(n: int) -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return max(1 << 30, int(total / max(1, n)))


# -- the process-wide service ------------------------------------------------------------------
_SERVICE: SimulationService | None = None
_SERVICE_LOCK = threading.Lock()
_OPTIONS: dict[str, Any] = {}


def configure_service(**options: Any) -> None:
    """Set the options of the process-wide service (``scheduler``, ``workers``, ``cache_dir``,
    ``memory_limit``, ``time_limit``, ``security``) before its first use; closes a running one
    whose options differ."""
    global _SERVICE
    with _SERVICE_LOCK:
        if _SERVICE is not None and options != _OPTIONS:
            _SERVICE.close()
            _SERVICE = None
        _OPTIONS.clear()
        _OPTIONS.update({k: v for k, v in options.items() if v is not None})


def get_service() -> SimulationService:
    """The process-wide service (created on first use, closed at exit)."""
    global _SERVICE
    with _SERVICE_LOCK:
        if _SERVICE is None or _SERVICE._closed:
            _SERVICE = SimulationService(**_OPTIONS)
        return _SERVICE


def set_service(service: SimulationService | None) -> None:
    """Use ``service`` as the process-wide one (tests share one cluster this way)."""
    global _SERVICE
    with _SERVICE_LOCK:
        _SERVICE = service


def current_service() -> SimulationService | None:
    """The process-wide service if one was made (none is started)."""
    return _SERVICE


def close_service(keep: SimulationService | None = None) -> None:
    """Close the process-wide service if one is running and it is not ``keep`` (its client,
    and an embedded cluster's scheduler and worker processes); the next :func:`get_service`
    starts another."""
    svc = _SERVICE
    if svc is not None and svc is not keep:
        svc.close()


@atexit.register
def _close_at_exit() -> None:
    close_service()


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass (tests and the GUI)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
