"""Writing output files (reports, traces): the one place that decides whether a path may be
written and writes it atomically. Shared by the CLI, :mod:`analyser.reports` and
:mod:`analyser.export`, so that none of them imports another's helpers.

    from analyser.output import atomic_output, check_output
    out = check_output("report.html", inputs=["a.h5"], force=False)
    with atomic_output(out) as fh:
        fh.write(text)

Problems (missing folder, an input or an HDF5 file as the output, a file analyse did not write,
a full disk) raise :class:`OutputError`, one sentence, exit code 2 in the CLI.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from profiles.errors import UserFacingError


class OutputError(UserFacingError):
    """An output file cannot be written (bad path, refused overwrite, full disk)."""

    exit_code = 2


#: Byte strings found near the start of every file analyse writes (reports, traces): an existing
#: file with one of them is one of ours and may be replaced; any other file is the user's.
OUR_MARKERS = (
    b'<meta name="generator" content="IPU Graph Analyser',  # report.html
    b"by IPU Graph Analyser",  # report.md (the 'Generated ... by' line under the title)
    b"<!-- Chart of an IPU Graph Analyser report",  # report.md's images (report_files/*.svg)
    b'"schema": "ipu-analyser-report"',  # report.json (top-level key)
    b'{"displayTimeUnit":"ns","otherData":{"source":',  # chrome trace-event JSON
)


def _has_marker(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts the way a report or a trace export of analyse does."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    if any(m in head for m in OUR_MARKERS):
        return True
    # perfetto protobuf: the first TracePacket (field 1) holds a track_descriptor (field 60)
    # with uuid 1000 and process name "IPU 0" (analyser.export.trace._write_perfetto)
    return head[:1] == b"\x0a" and head[2:4] == b"\xe2\x03" and b"IPU 0" in head[:48]


def is_our_output(path: str | os.PathLike[str]) -> bool:
    """Whether an existing file was written by analyse: a report or a trace export (by its
    marker), or an output without room for one (CSV, JSON records, Parquet, text) that still
    matches the record analyse kept when it wrote it (:func:`_recorded`)."""
    return _has_marker(path) or _recorded(Path(path))


# -- the record of outputs that carry no marker ------------------------------------------------
# A CSV file, a JSON list of records, a Parquet table or a diff's text has no place for a line
# saying who wrote it. When analyse writes one it keeps a record in its cache folder: one JSON
# file per output path (named by a hash of it) with the file's identity (device, inode), size,
# modification time and the sha256 of its bytes. A later run may replace the file while all of
# these still match; a file put there since (another inode), edited (other bytes) or a record
# that is damaged is the user's, refused as before. Losing the folder only makes a re-run ask
# for --force.

#: Records kept (the oldest are removed beyond it): one per output path, under 300 bytes each.
MAX_RECORDS = 4096
#: Largest record read (a record is a few hundred bytes).
RECORD_LIMIT = 4096
_RECORD_KEYS = {"path": str, "dev": int, "ino": int, "size": int, "mtime_ns": int, "sha256": str}


def record_folder() -> Path:
    """``$XDG_CACHE_HOME`` (or ``~/.cache``) ``/ipu-graph-analyser/outputs``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ipu-graph-analyser" / "outputs"


def _record_path(out: Path) -> Path:
    import hashlib

    name = hashlib.sha256(os.fsencode(os.path.abspath(out))).hexdigest()[:32]
    return record_folder() / f"{name}.json"


def _digest(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _identity(out: Path) -> dict[str, object]:
    st = os.stat(out)
    return {
        "path": os.path.abspath(out),
        "dev": st.st_dev,
        "ino": st.st_ino,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
    }


def _recorded(out: Path) -> bool:
    """Whether ``out`` is, byte for byte and as the same file, what analyse wrote there
    (its record read as untrusted input: any problem means no)."""
    import json

    from profiles.inputs import read_regular

    try:
        if not out.is_file():
            return False
        raw = read_regular(_record_path(out), "output record", limit=RECORD_LIMIT)
        rec = json.loads(raw.decode("utf-8"))
        if not isinstance(rec, dict) or set(rec) != set(_RECORD_KEYS):
            return False
        if any(type(rec[k]) is not t for k, t in _RECORD_KEYS.items()):
            return False
        now = _identity(out)
        if any(rec[k] != v for k, v in now.items()):
            return False
        return rec["sha256"] == _digest(out)
    except (OSError, ValueError, RecursionError, UserFacingError):
        return False


def _record(out: Path) -> None:
    """Record ``out`` as written by analyse (when it carries no marker); a cache folder that
    cannot be written only means the next run asks for --force."""
    import json

    from profiles import atomic

    if _has_marker(out):
        return
    with contextlib.suppress(OSError):
        rec = {**_identity(out), "sha256": _digest(out)}
        final = _record_path(out)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = atomic.temp_path(final)
        try:
            tmp.write_text(json.dumps(rec), encoding="utf-8")
            os.replace(tmp, final)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        _prune(final.parent)


def _prune(folder: Path) -> None:
    """Remove the oldest records beyond :data:`MAX_RECORDS` (only names this module writes)."""
    import re

    ours = re.compile(r"[0-9a-f]{32}\.json")
    with os.scandir(folder) as it:
        names = [e for e in it if ours.fullmatch(e.name) and e.is_file(follow_symlinks=False)]
    if len(names) <= MAX_RECORDS:
        return
    names.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime_ns)
    for e in names[: len(names) - MAX_RECORDS]:
        with contextlib.suppress(OSError):
            os.unlink(e.path)


def check_output(
    path: str | os.PathLike[str], inputs: list[str] | None = None, force: bool = False
) -> Path:
    """Validate an output path: its folder exists, it is not a folder, not one of the inputs,
    not an HDF5 file, and (unless ``force``) not an existing file that analyse did not write."""
    out = Path(path)
    if out.is_dir():
        raise OutputError(f"output {out} is a directory; give a file name.")
    refuse_special(out)
    if not out.parent.exists():
        raise OutputError(f"output folder {out.parent} does not exist.")
    if not out.parent.is_dir():
        raise OutputError(f"output folder {out.parent} is a file, not a folder.")
    from profiles.atomic import virtual_folder

    virtual = virtual_folder(out.parent)
    if virtual:
        raise OutputError(f"cannot write {out}: {virtual}.")
    for p in inputs or []:
        with contextlib.suppress(OSError):
            if Path(p).resolve() == out.resolve():
                raise OutputError(
                    f"output {out} is one of the input profiles; refusing to overwrite it."
                )
    if is_hdf5(out):  # a profile (or other HDF5 data): never replace it
        raise OutputError(
            f"output {out} is an existing HDF5 file (a profile?); refusing to overwrite it."
        )
    refuse_foreign(out, force)
    return out


def refuse_special(out: str | os.PathLike[str]) -> None:
    """OutputError when ``out`` exists and is neither a regular file nor a folder: a device, a
    named pipe or a socket (``-o /dev/full``, ``-o /dev/stdout``). Writing replaces the output by
    renaming a temporary file over it, which would put a plain file in place of the device (and
    reading a pipe's head to see whose file it is would block), so these are refused even with
    ``--force``."""
    try:
        mode = os.stat(out).st_mode
    except OSError:  # missing, or a dangling link: written as a new file
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = (
            "a named pipe"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
        )
        raise OutputError(
            f"output {out} is {kind}, not a regular file; give the path of a file to write."
        )


def is_hdf5(path: Path) -> bool:
    """Whether ``path`` is an HDF5 file: the signature at offset 0 or after a user block (512,
    1024, 2048... bytes of anything, zeros included), where HDF5 itself looks for it."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            offset = 0
            while offset + 8 <= size:
                fh.seek(offset)
                if fh.read(8) == b"\x89HDF\r\n\x1a\n":
                    return True
                offset = 512 if offset == 0 else offset * 2
    except OSError:
        return False
    return False


def refuse_foreign(out: Path, force: bool) -> None:
    """OutputError when ``out`` exists and is not a file analyse wrote, unless ``force``."""
    if not force and out.is_file() and not is_our_output(out):
        raise OutputError(
            f"output {out} exists and was not written by analyse; refusing to overwrite it "
            "(use --force)."
        )


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], mode: str = "w") -> Iterator:
    """Write to a temporary file in the same folder, then rename over ``path``; on error the
    previous file (if any) is left untouched and no temporary file remains."""
    from profiles import atomic

    out = Path(path)
    atomic.clean_stale(out)  # temporaries of earlier writes that were killed (kill -9)
    try:
        tmp = atomic.temp_path(out)  # .NAME.PID.RANDOM.tmp, mode from the umask
    except OSError as exc:
        raise OutputError(f"cannot write {out}: {exc.strerror or exc}.") from None
    try:
        text = "b" not in mode
        with open(
            tmp, mode, encoding="utf-8" if text else None, newline="\n" if text else None
        ) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
        _record(out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # disk full, quota, permission on replace
            raise OutputError(f"cannot write {out}: {exc.strerror or exc}.") from None
        raise
