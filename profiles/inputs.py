"""Opening an input path safely: the one helper every reader of a user-named file uses.

A path a user (or a file a user was given) names may be anything: a named pipe that blocks
``open()`` for ever, ``/dev/urandom`` or ``/dev/zero`` that never end, a 2 GB sparse file, a
folder, a link to any of these. :func:`open_regular` stats the path (after resolving links),
refuses anything that is not a regular file, opens it without blocking (``O_NONBLOCK``, so a
FIFO swapped in after the check cannot hang the open either), checks the opened file again
(``fstat``: the same regular file) and refuses one larger than the caller's limit before a byte
is read. :func:`read_regular` reads the whole of such a file. Every problem is one sentence
naming the file (raised as the caller's error class, :class:`InputPathError` by default).

Used by profiles (HDF5), run configurations and host profiles (TOML), ONNX models and their
external data (see docs/reliability.md).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from profiles.errors import UserFacingError

#: What a small text input read whole (run configuration, host profile, tune.json) may weigh.
TEXT_LIMIT = 1 << 20


class InputPathError(UserFacingError):
    """A named input is not a regular file, cannot be read, or is larger than its limit."""


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` is, in words ("a named pipe (FIFO)", "a folder"...)."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device (like /dev/zero or /dev/urandom)"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def size_words(n: int) -> str:
    """``n`` bytes in words (e.g. "2.0 GB", "12,345 bytes")."""
    if n < 10_000:
        return f"{n:,} bytes"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:,} bytes"  # pragma: no cover


def _refuse(what: str, error: type[Exception], text: str) -> Exception:
    return error(f"{what} {text}")


def regular_stat(
    path: str | os.PathLike[str],
    what: str,
    error: type[Exception] = InputPathError,
    limit: int | None = None,
    hint: str = "",
) -> os.stat_result:
    """``stat()`` of ``path`` (links resolved) when it is a regular file of at most ``limit``
    bytes; else ``error`` with one sentence starting with ``what`` (e.g. "run configuration
    'x.toml'"). ``hint`` follows a size refusal (what such a file normally weighs)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _refuse(what, error, "does not exist.") from None
    except PermissionError:
        raise _refuse(what, error, "cannot be read: permission denied.") from None
    except OSError as exc:
        raise _refuse(what, error, f"cannot be read: {exc.strerror or exc}.") from None
    return _check(st, what, error, limit, hint)


def _check(
    st: os.stat_result, what: str, error: type[Exception], limit: int | None, hint: str
) -> os.stat_result:
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(what, error, f"is {kind_of(st.st_mode)}, not a regular file.")
    if limit is not None and st.st_size > limit:
        extra = f" {hint.strip()}" if hint else ""
        raise _refuse(
            what,
            error,
            f"is {size_words(st.st_size)}, more than the {size_words(limit)} such a file may "
            f"be.{extra}",
        )
    return st


def open_regular(
    path: str | os.PathLike[str],
    what: str,
    error: type[Exception] = InputPathError,
    limit: int | None = None,
    hint: str = "",
) -> BinaryIO:
    """``path`` opened for reading (binary) once it is known to be a regular file of at most
    ``limit`` bytes (see the module's docstring); every problem is one ``error`` sentence."""
    before = regular_stat(path, what, error, limit, hint)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except PermissionError:
        raise _refuse(what, error, "cannot be read: permission denied.") from None
    except OSError as exc:
        raise _refuse(what, error, f"cannot be read: {exc.strerror or exc}.") from None
    try:
        st = _check(os.fstat(fd), what, error, limit, hint)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise _refuse(what, error, "changed while it was being opened; try again.")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: str | os.PathLike[str],
    what: str,
    error: type[Exception] = InputPathError,
    limit: int = TEXT_LIMIT,
    hint: str = "",
) -> bytes:
    """The whole of ``path`` (a regular file of at most ``limit`` bytes; never more is read,
    even if the file grows meanwhile)."""
    with open_regular(path, what, error, limit, hint) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise _refuse(what, error, f"grew past {size_words(limit)} while it was being read.")
    return data


def inside(folder: str | os.PathLike[str], relative: str | os.PathLike[str]) -> Path | None:
    """``folder / relative`` with links resolved when it stays inside ``folder`` (itself
    resolved); ``None`` for an absolute path or one that leaves the folder (``..``, a link out).
    Says nothing about whether the path exists."""
    rel = Path(relative)
    if rel.is_absolute() or not str(relative):
        return None
    root = Path(folder).resolve()
    try:
        target = (root / rel).resolve()
    except (OSError, RuntimeError):  # a loop of links
        return None
    return target if target == root or root in target.parents else None


__all__ = [
    "TEXT_LIMIT",
    "InputPathError",
    "inside",
    "kind_of",
    "open_regular",
    "read_regular",
    "regular_stat",
    "size_words",
]
