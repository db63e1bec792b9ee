"""Signal-safe atomic output: a file is replaced whole or not at all, whatever happens.

Every writer of the project (profiles, reports, traces) writes a temporary file in the
destination folder and renames it over the final name. This module holds what makes that safe
against the world outside the process:

* **Signals.** :func:`deferred_signals` takes Ctrl-C (SIGINT) and SIGTERM while a file is being
  written and only records them; the writer checks :meth:`Pending.check` between blocks and
  before the rename, and raises :class:`Interrupted` there (a ``KeyboardInterrupt`` carrying the
  exit code, 130 or 143). The previous file is left intact and the temporary file removed. A
  Ctrl-C inside HDF5's C code used to surface as "Exception ignored in WeakValueDictionary...
  KeyboardInterrupt" and the write went on, exiting 0 and replacing the output.
* **Leftovers.** Temporary files are named ``.NAME.PID.RANDOM.tmp``; :func:`clean_stale`
  removes those of ``NAME`` whose process is gone (a ``kill -9`` or a power cut), on the next
  write of the same file.
* **Room.** :func:`free_bytes` (disk) and :func:`available_memory` (memory) say what the machine
  has left, for the limits of the readers and the engine's resource estimate.
* **Full disk.** :func:`ensure_space` refuses, in one sentence, a write that needs more bytes
  than the disk has free, before HDF5 sees the full disk (HDF5's own write errors on a full disk
  surfaced as 190 lines of tracebacks and a segmentation fault).

No project imports: every layer (profiles, engine, analyser) may use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import signal
import threading
from pathlib import Path

#: Signals a write defers, with the exit code each one ends the command with (128 + number).
DEFERRED = (signal.SIGINT, signal.SIGTERM)
#: Bytes kept free beyond a write's estimate (HDF5 metadata, the file system's own blocks).
SPACE_MARGIN = 2**20


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM arrived during a write; the write was abandoned cleanly."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


class Pending:
    """Signals recorded during :func:`deferred_signals` (``check()`` raises the first)."""

    def __init__(self) -> None:
        self.signals: list[int] = []

    def check(self) -> None:
        """Raise Interrupted when a signal arrived while writing."""
        if self.signals:
            raise Interrupted(self.signals[0])


_active: list[Pending] = []


def current() -> Pending | None:
    """The innermost :func:`deferred_signals` block's record (``None`` outside one)."""
    return _active[-1] if _active else None


def check_pending() -> None:
    """Raise :class:`Interrupted` when a deferred signal is waiting (no-op outside a block)."""
    p = current()
    if p is not None:
        p.check()


class deferred_signals:
    """Record SIGINT / SIGTERM instead of acting on them while active; on leaving a ``with``
    block normally, raise :class:`Interrupted` when one came. ``start()`` / ``stop()`` do the
    same for a writer whose life spans several calls. Outside the main thread (where Python
    cannot install handlers) the record stays empty."""

    def __init__(self) -> None:
        self.pending = Pending()
        self._old: dict[int, object] | None = None

    def start(self) -> Pending:
        """Defer SIGINT / SIGTERM until the write is done (main thread only)."""
        if threading.current_thread() is not threading.main_thread() or self._old is not None:
            return self.pending
        outer = current()

        def record(signum: int, frame: object) -> None:
            self.pending.signals.append(signum)
            if outer is not None:
                outer.signals.append(signum)

        # a signal the process ignores (nohup, a background job's SIGINT) stays ignored
        self._old = {
            s: signal.signal(s, record) for s in DEFERRED if signal.getsignal(s) != signal.SIG_IGN
        }
        _active.append(self.pending)
        return self.pending

    def stop(self) -> None:
        """Restore the previous handlers (signals recorded stay in ``pending``)."""
        if self._old is None:
            return
        with contextlib.suppress(ValueError):
            _active.remove(self.pending)
        for s, h in self._old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)  # type: ignore[arg-type]
        self._old = None

    def __enter__(self) -> Pending:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.stop()
        if exc_type is None:
            self.pending.check()


def temp_path(final: Path) -> Path:
    """A new, empty temporary file beside ``final`` (created exclusively, mode from the umask)."""
    for _ in range(100):
        tmp = final.parent / f".{final.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(final))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(final: Path) -> list[Path]:
    """Remove temporary files of ``final`` left by writers that no longer run; returns them."""
    removed = []
    with contextlib.suppress(OSError):
        for p in final.parent.glob(f".{final.name}.*.tmp"):
            parts = p.name[len(final.name) + 2 : -len(".tmp")].split(".")
            if len(parts) != 2 or not parts[0].isdigit():
                continue  # not one of ours (or an older naming): leave it
            pid = int(parts[0])
            if pid != os.getpid() and not _alive(pid):
                with contextlib.suppress(OSError):
                    p.unlink()
                    removed.append(p)
    return removed


def free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def available_memory() -> int:
    """Bytes of memory this process can still get: the least of the machine's ``MemAvailable``
    (/proc/meminfo), its cgroup's room (``memory.max - memory.current``, cgroup v2) and its
    address-space limit's room (``RLIMIT_AS`` minus ``VmSize``, e.g. ``ulimit -v``); the base of
    every "too big" limit."""
    room = [_meminfo_available()]
    try:
        cg = Path("/sys/fs/cgroup")
        limit = (cg / "memory.max").read_text().strip()
        if limit.isdigit():
            room.append(int(limit) - int((cg / "memory.current").read_text().strip()))
    except (OSError, ValueError):
        pass
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            room.append(soft - _vm_size())
    except (ImportError, OSError, ValueError):
        pass
    return max(0, min(room))


def _vm_size() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30


def fmt_size(n: float) -> str:
    """Bytes for a sentence: ``1.5 GiB``, ``300.0 KiB``, ``12 bytes``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def virtual_folder(folder: Path) -> str | None:
    """Why no file can be written in ``folder`` when it lies on a virtual file system (``/proc``,
    ``/sys``: no blocks at all, so "0 bytes free" would wrongly read as a full disk), or None."""
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return None
    if usage.total == 0:
        return (
            f"the folder {folder} is on a virtual file system (like /proc or /sys) that holds no "
            "ordinary files; write to a folder on a disk"
        )
    return None


def space_problem(folder: Path, need: int) -> str | None:
    """Why ``need`` more bytes cannot be written in ``folder`` (one clause), or ``None``."""
    return virtual_folder(folder) or short_of_space(free_bytes(folder), need)


def short_of_space(free: int | None, need: int) -> str | None:
    """Why ``need`` more bytes do not fit in ``free`` bytes of a disk (one clause), or ``None``
    (also when ``free`` is unknown)."""
    if free is None or free >= need + SPACE_MARGIN:
        return None
    return f"the disk is full ({fmt_size(free)} free, about {fmt_size(need + SPACE_MARGIN)} needed)"


def is_disk_full(exc: BaseException) -> bool:
    """Whether an error (OSError, or HDF5's RuntimeError text) is a full disk or quota."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return "errno = 28" in text or "No space left" in text or "errno = 122" in text


__all__ = [
    "Interrupted",
    "Pending",
    "available_memory",
    "check_pending",
    "clean_stale",
    "deferred_signals",
    "fmt_size",
    "is_disk_full",
    "short_of_space",
    "space_problem",
    "temp_path",
]
