"""Checks of a Dask cluster given by address (``--scheduler`` / ``ANALYSE_SCHEDULER``), each
bounded in time and ending in one sentence, so a bad address never hangs or prints a traceback.

* :func:`identify_scheduler`: the address answers Dask's handshake and says it is a
  scheduler. An HTTP server (or anything else) there made the Dask client read its reply as
  a frame length and fail with ``MemoryError``; a host that accepts and never answers made it
  wait for ever. Here both are a sentence within :data:`ANSWER_TIMEOUT` seconds.
* :func:`check_workers`: the cluster has workers and every one of them can import this
  project. A worker without it could not even read the task it was sent and shut itself down,
  and the tune waited for ever.
* :func:`task_runner`: the function every simulation task runs, sent by value (not as a
  reference into this project), so a worker that joins later without the project answers
  ``failed`` naming the package instead of dropping out.

Ctrl-C while a check waits raises ``KeyboardInterrupt`` at once (the waits happen in helper
threads the calling thread joins with a timeout).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from profiles.errors import UserFacingError

#: Seconds an address may take to answer Dask's handshake, and the cluster to show a worker.
ANSWER_TIMEOUT = 10.0

#: The packages a worker needs (this project's).
PACKAGES = ("analyser", "engine", "profiles")


class RemoteError(UserFacingError):
    """The scheduler address or its workers cannot serve the simulation service."""


def _bounded(fn: Callable[[], Any], timeout: float) -> Any:
    """``fn()`` in a daemon thread, waited for at most ``timeout`` seconds (TimeoutError);
    the calling thread stays interruptible by Ctrl-C meanwhile."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    t = threading.Thread(target=target, name="dask-check", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError
    if "error" in box:
        raise box["error"]
    return box.get("value")


def identify_scheduler(address: str, security=None, timeout: float | None = None) -> dict:
    """The scheduler's identity, or :class:`RemoteError` when ``address`` does not answer as a
    Dask scheduler within ``timeout`` seconds (default :data:`ANSWER_TIMEOUT`)."""
    import ssl

    timeout = ANSWER_TIMEOUT if timeout is None else timeout
    from distributed.security import Security

    sec = security if security is not None else Security()  # Dask's configuration
    try:
        args = sec.get_connection_args("client")
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise RemoteError(
            f"the Dask TLS configuration cannot be used: {_first_line(exc)}."
        ) from None
    if address.startswith("tls://") and args.get("ssl_context") is None:
        raise RemoteError(
            f"the Dask scheduler at {address!r} wants TLS: give --tls-ca-file, --tls-cert and "
            "--tls-key (or set them in Dask's configuration, distributed.comm.tls.*)."
        )

    async def ask() -> Any:
        from distributed.comm import connect

        # includes Dask's handshake; nothing pickled in a reply is loaded (an unknown server's
        # pickle would run code here)
        comm = await connect(address, timeout=timeout, deserialize=False, **args)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    def run() -> Any:
        return asyncio.run(asyncio.wait_for(ask(), timeout))

    try:
        reply = _bounded(run, timeout + 5)
    except TimeoutError:
        raise RemoteError(
            f"the server at {address!r} accepted the connection but did not answer as a Dask "
            f"scheduler within {timeout:g} s; check the address and port."
        ) from None
    except (Exception, MemoryError) as exc:  # garbage read as a Dask message, a closed stream
        refused = _tls_refusal(address, exc) if address.startswith("tls://") else None
        if refused:
            raise RemoteError(refused) from None
        if isinstance(exc, MemoryError | ValueError | TypeError):
            how = _what_answered(address)
        else:
            how = f"it did not answer Dask's handshake: {type(exc).__name__}"
        raise RemoteError(
            f"the server at {address!r} is not a Dask scheduler ({how}); check the address "
            "and port."
        ) from None
    kind = reply.get("type") if isinstance(reply, dict) else None
    if kind != "Scheduler":
        what = f"a Dask {kind}" if isinstance(kind, str) else "something that speaks Dask"
        raise RemoteError(
            f"{address!r} is {what}, not a scheduler; give the scheduler's address "
            "(dask scheduler prints it)."
        )
    return reply


def _ssl_errors(exc: BaseException) -> list[BaseException]:
    """The ``ssl.SSLError`` s behind ``exc`` (Dask wraps them in its own comm errors)."""
    import ssl

    found: list[BaseException] = []
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ssl.SSLError):
            found.append(e)
        # tornado keeps the socket's error as ``real_error`` of its StreamClosedError
        todo += [e.__cause__, e.__context__, getattr(e, "real_error", None)]
    return found


#: OpenSSL's reasons for a reply that is no TLS record (an HTTP or other plain-text server).
_NOT_TLS = frozenset(
    {"WRONG_VERSION_NUMBER", "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE"}
)


def _tls_refusal(address: str, exc: BaseException) -> str | None:
    """The sentence for a TLS handshake that failed (None when ``exc`` is not one): the
    scheduler's certificate not signed by the CA this side trusts, or this side's certificate
    refused by the scheduler (it ends the handshake: an alert, or the connection closed)."""
    import ssl

    errors = _ssl_errors(exc)
    text = str(exc).upper()
    if not errors and "ALERT_" not in text:
        return None
    first = errors[0] if errors else exc
    reason = str(getattr(first, "reason", None) or "").upper()
    if not errors:  # Dask re-raised an alert as its own error, the SSL error only in its text
        reason = "ALERT_" + text.split("ALERT_", 1)[1].split("]", 1)[0].split(" ", 1)[0]
    if isinstance(first, ssl.SSLCertVerificationError):
        detail = getattr(first, "verify_message", None) or _first_line(first)
        return (
            f"the TLS handshake with {address!r} failed: the scheduler's certificate is not "
            f"signed by the CA of --tls-ca-file ({detail}); give the CA that signed it."
        )
    if reason in _NOT_TLS:  # the first bytes back were not a TLS record
        what = _what_answered(address)
        said = "" if what.startswith("it answered") else f": {what}"
        return (
            f"the TLS handshake with {address!r} failed: the server there does not speak TLS "
            f"({reason.lower().replace('_', ' ')}{said}); check the address and port (tcp:// "
            "for a scheduler without TLS)."
        )
    if isinstance(first, ssl.SSLEOFError) or "ALERT" in reason:
        how = (
            "it closed the connection during the handshake"
            if isinstance(first, ssl.SSLEOFError)
            else "its alert: " + reason.split("ALERT_", 1)[-1].replace("_", " ").lower()
        )
        return (
            f"the TLS handshake with {address!r} failed: the scheduler refused this client's "
            f"certificate ({how}); give a --tls-cert (and --tls-key) signed by a CA the "
            "scheduler trusts."
        )
    return (
        f"the TLS handshake with {address!r} failed: {_first_line(first)}; check the --tls-* "
        "files (or Dask's TLS configuration)."
    )


def _what_answered(address: str, timeout: float = 3.0) -> str:
    """What the server at ``address`` is, from the first bytes it sends to a plain client
    (after Dask could not read its reply): an HTTP server (a web server, a proxy), an SSH
    server, or something else."""
    import socket
    from urllib.parse import urlsplit

    generic = "it answered with something that is not a Dask message"
    try:
        url = urlsplit(address)
        with socket.create_connection((url.hostname, url.port), timeout=timeout) as sock:
            sock.settimeout(1.0)
            head = sock.recv(64)  # a server that speaks first (SSH, SMTP)
            if not head:
                return generic
    except (OSError, ValueError, UnicodeError):
        head = b""
    if not head:
        try:
            with socket.create_connection((url.hostname, url.port), timeout=timeout) as sock:
                sock.settimeout(timeout)
                sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
                head = sock.recv(64)
        except (OSError, ValueError, UnicodeError):
            return generic
    line = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0]
    text = line.decode("ascii", "replace")
    shown = "".join(c if c.isprintable() else "?" for c in text)[:60]
    if head.startswith(b"HTTP/"):
        return f"an HTTP server answered there ({shown!r}): a web server or a proxy"
    if head.startswith(b"SSH-"):
        return f"an SSH server answered there ({shown!r})"
    return generic


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _missing_on_worker() -> str | None:
    """Run on a worker (sent by value): the first of this project's packages it cannot import,
    with the reason, or None."""
    import importlib

    for name in ("analyser.sim.service.service", "engine", "profiles"):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            top = (getattr(exc, "name", None) or name).split(".")[0]
            return f"{top!r} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    return None


def _by_value(fn: Callable) -> Callable:
    """A copy of ``fn`` that pickles by value (cloudpickle), not as ``module.name``: a worker
    without this project can still load and run it. ``fn`` must import what it needs inside."""
    import types

    copy = types.FunctionType(fn.__code__, {"__builtins__": __builtins__}, fn.__name__)
    copy.__qualname__ = f"<by value>.{fn.__name__}"
    # a module name no module has: cloudpickle pickles it by value without first looking for
    # it in every imported module (a function without __module__ is searched for in all of
    # them, about 14 ms with the thousand a tune has loaded, at every submission)
    copy.__module__ = "<by value>"
    return copy


def _project() -> str:
    try:
        from importlib.metadata import version

        return f"ipu-graph-analyser {version('ipu-graph-analyser')}"
    except Exception:  # not installed as a distribution (a source tree on sys.path)
        return "ipu-graph-analyser"


def missing_package_message(worker: str, missing: str) -> str:
    """The sentence for a worker that cannot import this project."""
    return (
        f"the Dask worker {worker} cannot import {missing}; install {_project()} (the same "
        "version as here) on every worker."
    )


def check_workers(client, address: str, timeout: float | None = None) -> None:
    """:class:`RemoteError` when the cluster shows no worker within ``timeout`` seconds
    (default :data:`ANSWER_TIMEOUT`) or a worker cannot import this project."""
    timeout = ANSWER_TIMEOUT if timeout is None else timeout
    try:
        _bounded(lambda: client.wait_for_workers(1, timeout=timeout), timeout + 5)
    except TimeoutError:
        raise RemoteError(
            f"the Dask scheduler at {address!r} has no workers (none joined within "
            f"{timeout:g} s); start some with: dask worker {address}"
        ) from None
    probe = _by_value(_missing_on_worker)
    try:
        answers = _bounded(lambda: client.run(probe, on_error="return"), timeout + 5)
    except TimeoutError:
        raise RemoteError(
            f"the Dask workers of {address!r} did not answer within {timeout + 5:g} s."
        ) from None
    for worker, missing in sorted(answers.items()):
        if isinstance(missing, BaseException):
            missing = f"this project ({type(missing).__name__})"
        if missing:
            raise RemoteError(missing_package_message(worker, missing))


def _run_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Every simulation task (sent by value): the worker's task when this project imports
    here, else ``failed`` naming this worker and the missing package."""
    try:
        from analyser.sim.service.worker import run_task
    except ImportError as exc:
        top = (getattr(exc, "name", None) or "analyser").split(".")[0]
        where = "on this host"
        try:
            from distributed import get_worker

            where = get_worker().address
        except Exception:  # not inside a worker (called directly)
            pass
        return {
            "key": payload["key"],
            "status": "failed",
            "message": f"the Dask worker {where} cannot import {top!r} ({type(exc).__name__}); "
            "install ipu-graph-analyser (the same version as the client) on every worker.",
        }
    return run_task(payload)


def task_runner() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The function submitted for every simulation (see :func:`_run_task`)."""
    return _by_value(_run_task)
