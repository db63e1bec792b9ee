"""What runs on a Dask worker: one simulation, under the service's limits.

:func:`run_simulation` is the task. It simulates the request's configuration with the embedded
engine, reads the key figures back from the written profile with the analysis core (the same
code path as every other figure the analyser shows), and returns a plain dict (a
:class:`~analyser.sim.service.request.SimResponse` as a dict).

Where the profile goes: when the service's cache folder is visible from the worker (same machine
or a shared file system, recognised by the token file the service wrote there) the profile is
written straight into it; otherwise (a remote worker) its bytes travel back with the answer and
the service writes them.

Limits, enforced inside the worker so a runaway simulation is stopped rather than waited for:

* memory: the process's address-space limit (``RLIMIT_AS``, Linux) is set to what the worker
  already maps plus the per-simulation budget for the duration of the task, so an allocation
  beyond it raises ``MemoryError`` in the engine instead of swapping or waking the OOM killer;
* time and cancellation: a watchdog thread raises :class:`SimulationStopped` in the task's
  thread (``PyThreadState_SetAsyncExc``) when the time limit passes or the service cancels the
  request (:func:`cancel_keys`, sent to every worker with ``Client.run``). The engine runs
  Python between its numpy calls, so the exception lands within one vectorised operation.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

#: Keys the service asked this worker process to stop (see :func:`cancel_keys`).
_CANCELLED: set[str] = set()
_LOCK = threading.Lock()

TOKEN_FILE = ".service-token"


class SimulationStopped(BaseException):
    """Raised asynchronously in a simulation's thread to stop it (time limit or cancel)."""


def dask_setup(worker=None) -> None:
    """Preload of every worker process (``preload=[this module]``): Ctrl-C in the terminal
    reaches the whole process group, workers included; they ignore it and the process that
    started them cancels the work and closes the cluster (one line, no worker tracebacks)."""
    import signal

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def cancel_keys(keys: list[str]) -> int:
    """Ask this worker to stop the simulation tasks ``keys`` (Dask task keys, unique per
    submission; run via ``Client.run``)."""
    with _LOCK:
        _CANCELLED.update(keys)
    return os.getpid()


def forget_keys(keys: list[str]) -> None:
    with _LOCK:
        _CANCELLED.difference_update(keys)


def _raise_in(thread_id: int) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(SimulationStopped)
    )


@contextlib.contextmanager
def _watchdog(key: str, seconds: float | None, why: dict[str, str]):
    """Stop the current thread when ``seconds`` pass or ``key`` is cancelled.

    The exception is raised again every 50 ms until the thread leaves this block: an
    asynchronous exception that lands in a callback whose errors are ignored (a gc callback,
    a ``__del__``) is swallowed there. On the way out any exception still pending is cleared,
    under the same lock, so none escapes the block."""
    target = threading.get_ident()
    done = threading.Event()
    lock = threading.Lock()
    deadline = time.monotonic() + seconds if seconds else None

    def watch() -> None:
        while not done.wait(0.05):
            if not why:
                with _LOCK:
                    cancelled = key in _CANCELLED
                if cancelled:
                    why["reason"] = "cancelled"
                elif deadline is not None and time.monotonic() > deadline:
                    why["reason"] = "timeout"
                else:
                    continue
            with lock:
                if done.is_set():
                    return
                _raise_in(target)

    t = threading.Thread(target=watch, name=f"sim-watchdog-{key[:8]}", daemon=True)
    t.start()
    try:
        yield
    finally:
        while True:
            try:
                with lock:
                    done.set()
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)
                break
            except SimulationStopped:  # raised between the bytecodes above: try again
                continue
        t.join()


def _vm_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def _memory_limit(budget: int | None):
    """Cap the address space at what is mapped now plus ``budget`` bytes (Linux)."""
    now = _vm_bytes() if budget else None
    if not budget or now is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = now + int(budget)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


#: Set once this process has run a simulation without a memory limit (see :func:`_warm_up`).
_WARM = False


def _warm_up() -> None:
    """Run one tiny simulation without limits, once per worker process, before the first
    memory-limited one. The engine, the analysis core, pandas and pyarrow load some modules
    on first use; loaded under ``RLIMIT_AS`` a shared object may fail to map ("failed to map
    segment from shared object"), which surfaces as an ``ImportError`` rather than a
    ``MemoryError`` and can leave a half-imported package behind that breaks every later
    simulation in the process. With everything loaded up front, the limit only meets the
    simulation's own allocations."""
    global _WARM
    if _WARM:
        return
    _WARM = True
    with (
        tempfile.TemporaryDirectory(prefix="ipu-sim-warm-") as tmp,
        contextlib.suppress(Exception),
    ):
        _simulate({"model": "mlp", "micro_batch_size": 1}, Path(tmp) / "warm.h5")


#: Packages of this project: pure Python, so a module of theirs can be imported afresh.
_OWN_PACKAGES = ("engine", "profiles", "analyser")


def _forget_new_modules(before: set[str]) -> list[str]:
    """Drop from ``sys.modules`` this project's modules first imported since ``before``.

    A simulation stopped by an asynchronous exception (time limit, cancel) or a
    ``MemoryError`` may have been stopped inside a first import, leaving a module that is
    in ``sys.modules`` but only half executed; every later simulation in this worker process
    would then fail on a missing name. Forgetting the modules the stopped run brought in makes
    the next run import them again, whole. Only the project's own (pure Python) modules are
    dropped: an extension module cannot be loaded twice in one process."""
    dropped = [
        name for name in set(sys.modules) - before if name.partition(".")[0] in _OWN_PACKAGES
    ]
    gone = {name: sys.modules.pop(name, None) for name in dropped}
    # A kept package still holds what the stopped run bound on it: the submodule attribute
    # (``from profiles import codec`` would return the half-executed module without importing
    # it again) and the names a lazy package (``profiles.__getattr__``) cached from it. Seen in
    # CI: after a run stopped by its time limit, every later run of that worker failed with
    # "cannot import name 'write_profile' from 'profiles'".
    for name, module in gone.items():
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is not None and module is not None and getattr(parent, child, None) is module:
            with contextlib.suppress(AttributeError):
                delattr(parent, child)
    for pkg_name, pkg in list(sys.modules.items()):
        if pkg_name.partition(".")[0] not in _OWN_PACKAGES or not hasattr(pkg, "__path__"):
            continue
        if "__getattr__" not in vars(pkg):  # only a lazy package imports a name again
            continue
        for attr, value in list(vars(pkg).items()):
            if getattr(value, "__module__", None) in gone and not isinstance(value, type(sys)):
                with contextlib.suppress(AttributeError):
                    delattr(pkg, attr)
    return dropped


def _is_mapping_failure(exc: BaseException) -> bool:
    """An import that failed because the address-space limit left no room to map it."""
    text = str(exc)
    return isinstance(exc, (ImportError, OSError)) and (
        "failed to map segment" in text or "Cannot allocate memory" in text
    )


def _fmt_bytes(n: int) -> str:
    from analyser.core.units import fmt_bytes

    return fmt_bytes(n)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def run_simulation(payload: dict[str, Any]) -> dict[str, Any]:
    """Simulate one request (the Dask task). ``payload``: ``key``, ``config``, ``tag``,
    ``cache_dir``, ``token``, ``model_file``, ``model_bytes`` (when the file may not be visible
    here), ``host_profile`` and ``host_profile_bytes`` (likewise), ``inputs`` (``{path: sha256}``
    of the files the key holds: checked once it has run, see
    :func:`~analyser.sim.service.request.input_changes`), ``memory_limit`` (bytes or None),
    ``time_limit`` (seconds or None), ``attempt``."""
    from analyser.sim.service.request import input_changes

    key = payload["key"]
    t0 = time.perf_counter()
    base = {"key": key, "tag": payload.get("tag", ""), "attempts": payload.get("attempt", 1)}
    cache = Path(payload["cache_dir"])
    shared = False
    with contextlib.suppress(OSError):
        shared = (cache / TOKEN_FILE).read_text() == payload["token"]
    why: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="ipu-sim-") as tmp:
        config = dict(payload["config"])
        local: dict[str, str] = {}  # a file that travelled with the request: where it is here
        for name, field in (("model_file", "model_bytes"), ("host_profile", "host_profile_bytes")):
            path = payload.get(name)
            if path and not os.path.exists(path) and payload.get(field):
                copy = Path(tmp) / name / Path(path).name
                copy.parent.mkdir()
                copy.write_bytes(payload[field])
                local[path] = str(copy)
                config = {k: (str(copy) if v == path else v) for k, v in config.items()}
        inputs = payload.get("inputs") or {}
        out = (cache / f".{key}.{os.getpid()}.tmp.h5") if shared else Path(tmp) / f"{key}.h5"
        if payload.get("memory_limit"):
            _warm_up()
        modules = set(sys.modules)
        try:
            with (
                _watchdog(payload.get("task", key), payload.get("time_limit"), why),
                _memory_limit(payload.get("memory_limit")),
            ):
                result = _simulate(config, out)
        except SimulationStopped:
            _forget_new_modules(modules)
            with contextlib.suppress(OSError):
                out.unlink()
            if why.get("reason") == "timeout":
                return {
                    **base,
                    "status": "timeout",
                    "message": f"the simulation exceeded the time limit of "
                    f"{payload['time_limit']:g} s and was stopped.",
                    "seconds": time.perf_counter() - t0,
                }
            return {**base, "status": "cancelled", "message": "cancelled."}
        except MemoryError:
            _forget_new_modules(modules)
            with contextlib.suppress(OSError):
                out.unlink()
            return {
                **base,
                "status": "memory",
                "message": "the simulation needed more than the memory limit of "
                f"{_fmt_bytes(payload['memory_limit'])} and was stopped.",
                "seconds": time.perf_counter() - t0,
            }
        finally:
            forget_keys([payload.get("task", key)])
        result.update(base, seconds=time.perf_counter() - t0)
        # a file edited since the key was taken (before or while the engine read it): these
        # figures may not be the key's, so they are not kept
        changed = input_changes(inputs, local)
        if changed:
            with contextlib.suppress(OSError):
                out.unlink()
            return {**base, "status": "failed", "message": changed}
        if result["status"] not in ("ok", "oom"):
            return result
        if shared:
            final = cache / f"{key}.h5"
            os.replace(out, final)
            result["profile"] = str(final)
        else:
            result["profile_bytes"] = out.read_bytes()
        return result


def run_task(payload: dict[str, Any]) -> dict[str, Any]:
    """The Dask task: refuse when this worker's engine differs from the client's, else
    :func:`run_simulation`. It lives here, not with the service, so a worker imports only
    what runs on it and the task runner (``remote``) does not import the service."""
    from analyser.sim.service.request import engine_fingerprint

    mine = engine_fingerprint()
    if payload.get("engine") != mine:
        return {
            "key": payload["key"],
            "status": "failed",
            "message": f"the worker's engine ({mine}) differs from the one that asked "
            f"({payload.get('engine')}); install the same version on every worker.",
        }
    return run_simulation(payload)


def _simulate(config: dict[str, Any], out: Path) -> dict[str, Any]:
    from analyser.core.analysis import Analysis
    from analyser.sim.service.request import figures_of
    from engine import simulate_to_file
    from engine.config import RunConfig
    from engine.resources import ResourceError
    from profiles.errors import UserFacingError

    try:
        cfg = RunConfig.from_dict(config)
        simulate_to_file(cfg, out)
    except ResourceError as exc:  # estimated above this worker's memory before any work
        return {"status": "memory", "message": f"over the memory limit before starting: {exc}"}
    except UserFacingError as exc:
        return {"status": "refused", "message": str(exc)}
    except MemoryError:
        raise
    except Exception as exc:  # an engine bug: one line, never a traceback to the user
        if _is_mapping_failure(exc):  # a module loaded under the memory limit did not fit
            raise MemoryError(str(exc)) from exc
        return {"status": "failed", "message": f"the engine failed: {_one_line(exc)}."}
    with Analysis.open(out) as a:
        figures = figures_of(a)
    return {"status": "ok" if figures["fits"] else "oom", "figures": figures}
