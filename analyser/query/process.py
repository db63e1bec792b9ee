"""A query in a process of its own, bounded: :func:`run_bounded` runs
:func:`analyser.query.query_arrow` in a child process under an address-space limit and waits for
its answer, so that

* its memory is bounded, lists and the result included, which DuckDB's own ``memory_limit`` does
  not count (``SELECT len(range(10^9))`` took 20 GB in the query's own process);
* Ctrl-C, SIGTERM (their handlers run in the waiting process), a time limit or a ``stop`` event
  end it at once: the child is killed, where an interrupted DuckDB on a thread of the caller's
  process could abort that process at exit ("terminate called after throwing ...");
* its spill folder is made inside one made here, removed however the child ends.

The child is forked from the caller (nothing imported twice) when the caller is the CLI; a
process with threads of its own (the GUI) asks for ``forkserver``, whose server forks the
children from a process without them. The answer comes back as an Arrow IPC stream through a
pipe: ``b"T"`` then the stream, ``b"E"`` then the pickled exception, ``b"M"`` when the child ran
out of memory.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext

    import pyarrow as pa

#: Bytes of address space the query's process may take beyond what it holds when it starts:
#: DuckDB's own limit (analyser.query.MEMORY_LIMIT, 2 GB), the result (RESULT_LIMIT, 1 GiB)
#: and its copy sent back, the profile's columns DuckDB reads, and its threads' arenas.
QUERY_ADDRESS_SPACE = 6 << 30
#: Seconds between two looks at the child, the time limit and the stop event.
POLL_SECONDS = 0.1


class Stop(Protocol):
    """What a caller's stop is (a ``threading.Event``: the caller's threads, never ours)."""

    def is_set(self) -> bool: ...


def _address_space_now() -> int | None:
    """This process's virtual memory size in bytes (Linux ``/proc/self/status`` VmSize), or
    None where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _child(send, query, profile, sql: str, temp_root: str, kwargs: dict) -> None:
    """The query under the address-space limit, its answer sent back (module docstring).
    Ctrl-C and SIGTERM are the parent's to handle: it ends this process."""
    import pickle
    import resource
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # forked while the parent held them (_started)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)
    now = _address_space_now()
    if now is not None:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = now + QUERY_ADDRESS_SPACE
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    if query is None:
        from analyser.query import query_arrow as query
    try:
        table = query(profile, sql, temp_root=temp_root, **kwargs)
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        buf = sink.getvalue()
        del table
        send.send_bytes(b"T")
        send.send_bytes(memoryview(buf))
    except MemoryError:
        send.send_bytes(b"M")
    except BaseException as exc:  # handed to the parent, which says it in one sentence
        try:
            blob = pickle.dumps(exc)
        except Exception:
            blob = pickle.dumps(RuntimeError(str(exc).splitlines()[0] if str(exc) else repr(exc)))
        send.send_bytes(b"E")
        send.send_bytes(blob)


def _out_of_memory():
    from analyser.query import QueryError

    return QueryError(
        f"the query needed more memory than it may use ({QUERY_ADDRESS_SPACE >> 30} GiB beyond "
        "what analyse holds) and was stopped; aggregate, filter or LIMIT it."
    )


def _context(method: str) -> ForkContext | ForkServerContext | SpawnContext:
    """The multiprocessing context of a start method (typeshed types ``get_context(str)`` as the
    base context, which has no ``Process``; each method's own context has one)."""
    import multiprocessing

    if method == "fork":
        return multiprocessing.get_context("fork")
    if method == "forkserver":
        return multiprocessing.get_context("forkserver")
    if method == "spawn":
        return multiprocessing.get_context("spawn")
    raise ValueError(f"cannot find context for {method!r}")  # get_context's own words


#: The signals held back while the child starts (:func:`_start`).
HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _start(child: Any) -> None:
    """``child.start()`` with Ctrl-C and SIGTERM held back until it returns. A signal that
    arrived between the fork and ``start`` returning raised in the parent before the process
    object knew its child: the cleanup could neither kill nor join it (``join``'s "can only
    join a started process", an internal error) and the forked child ran on, holding the
    command's output open (seen under load: the command printed a traceback and never
    ended). Held, the signal lands as ``start`` returns, and the child is killed and joined."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not on Windows
        child.start()
        return
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        child.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def run_bounded(
    profile: str | os.PathLike[str] | list[str],
    sql: str,
    *,
    timeout: float | None = None,
    stop: Stop | None = None,
    start_method: Literal["fork", "spawn", "forkserver"] = "fork",
    query: Callable[..., pa.Table] | None = None,
    started: Callable[[int], None] | None = None,
    **kwargs: Any,
) -> pa.Table:
    """``query_arrow(profile, sql, **kwargs)`` in a child process (module docstring): its Arrow
    table, or its error raised here. ``timeout`` seconds (None: none) end it with a QueryError;
    ``stop`` set, or Ctrl-C / SIGTERM here, end it with KeyboardInterrupt (SIGTERM as the
    exception its handler raises). ``profile`` is a path, a list of paths or a folder (an open
    Analysis cannot cross into another process). ``query``: the function the child runs (a
    test's stand-in; default :func:`analyser.query.query_arrow`). ``started``: called with the
    child's process id once it has started (the query runs there until it answers or is
    ended: a GUI can say so, a test can wait for it)."""
    import pickle
    import shutil
    import time

    from analyser.query import QueryError, _temp_dir

    ctx = _context(start_method)
    if start_method == "forkserver":
        # the server imports these once; each child then starts with them
        ctx.set_forkserver_preload(["analyser.query", "duckdb", "pyarrow", "h5py"])
    recv, send = ctx.Pipe(duplex=False)
    temp_root = _temp_dir()
    child = ctx.Process(
        target=_child,
        args=(send, query, profile, sql, temp_root, kwargs),
        name="analyse-query",
        daemon=True,
    )
    deadline = None if timeout is None else time.monotonic() + timeout
    tag, body = b"", b""
    try:
        _start(child)
        send.close()  # the child's end: EOF here once it is gone
        if started is not None and child.pid is not None:
            started(child.pid)
        while True:
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            if deadline is not None and time.monotonic() >= deadline:
                raise QueryError(
                    f"the query ran longer than its time limit ({timeout:g} s) and was "
                    "stopped; aggregate, filter or LIMIT it, or give --timeout."
                )
            if recv.poll(POLL_SECONDS):
                try:
                    tag = recv.recv_bytes()
                    if tag in (b"T", b"E"):
                        body = recv.recv_bytes()
                except EOFError:  # ended without a word: killed, or aborted out of memory
                    tag = b""
                break
    finally:  # SIGTERM arrives as profiles.atomic.Interrupted, Ctrl-C as KeyboardInterrupt
        if child.pid is not None:  # started (a failed start leaves nothing to end)
            if child.is_alive() and tag not in (b"T", b"E", b"M"):
                child.kill()
            child.join()
        recv.close()
        shutil.rmtree(temp_root, ignore_errors=True)
    if tag == b"T":
        import pyarrow as pa

        return pa.ipc.open_stream(pa.py_buffer(body)).read_all()
    if tag == b"E":
        raise pickle.loads(body)
    if tag == b"M" or child.exitcode in (-6, -11):  # MemoryError, or std::bad_alloc's abort
        raise _out_of_memory()
    if child.exitcode is not None and child.exitcode > 0:
        # an exit status of its own: Python failed in the process before the query ran (its
        # start could not import what it needs, e.g. a script run from standard input under
        # the fork server), which memory does not explain
        raise QueryError(
            f"the query's process ended without an answer (exit {child.exitcode}): it failed "
            "while starting (it could not import what it runs, or ran out of memory doing so)."
        )
    raise QueryError(
        f"the query's process ended without an answer (exit {child.exitcode}); "
        "most likely it ran out of memory: aggregate, filter or LIMIT it."
    )
