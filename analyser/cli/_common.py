"""Helpers shared by the analysis sub-commands (summary, insights, report, compare,
export-trace): opening profiles with clear errors, writing output files atomically, progress."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from analyser.cli.errors import CliError


def open_analysis(path: str | os.PathLike[str]):
    """Open a profile as an :class:`analyser.core.Analysis` (ProfileError on a bad file)."""
    from analyser.core import Analysis

    return Analysis.open(path)


#: Byte strings found near the start of every file analyse writes (reports, traces): an existing
#: file with one of them is one of ours and may be replaced; any other file is the user's.
OUR_MARKERS = (
    b'<meta name="generator" content="IPU Graph Analyser',  # report.html
    b"by IPU Graph Analyser",  # report.md (the 'Generated ... by' line under the title)
    b'"schema": "ipu-analyser-report"',  # report.json (top-level key)
    b'{"displayTimeUnit":"ns","otherData":{"source":',  # chrome trace-event JSON
)


def is_our_output(path: str | os.PathLike[str]) -> bool:
    """Whether an existing file was written by analyse (a report or a trace export)."""
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


def check_output(
    path: str | os.PathLike[str], inputs: list[str] | None = None, force: bool = False
) -> Path:
    """Validate an output path: its folder exists, it is not a folder, not one of the inputs,
    not an HDF5 file, and (unless ``force``) not an existing file that analyse did not write."""
    out = Path(path)
    if out.is_dir():
        raise CliError(f"output {out} is a directory; give a file name.")
    if not out.parent.exists():
        raise CliError(f"output folder {out.parent} does not exist.")
    if not out.parent.is_dir():
        raise CliError(f"output folder {out.parent} is a file, not a folder.")
    for p in inputs or []:
        with contextlib.suppress(OSError):
            if Path(p).resolve() == out.resolve():
                raise CliError(
                    f"output {out} is one of the input profiles; refusing to overwrite it."
                )
    if is_hdf5(out):  # a profile (or other HDF5 data): never replace it
        raise CliError(
            f"output {out} is an existing HDF5 file (a profile?); refusing to overwrite it."
        )
    refuse_foreign(out, force)
    return out


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
    """CliError when ``out`` exists and is not a file analyse wrote, unless ``force``."""
    if not force and out.is_file() and not is_our_output(out):
        raise CliError(
            f"output {out} exists and was not written by analyse; refusing to overwrite it "
            "(use --force)."
        )


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], mode: str = "w") -> Iterator:
    """Write to a temporary file in the same folder, then rename over ``path``; on error the
    previous file (if any) is left untouched and no temporary file remains."""
    out = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent or ".")
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}.") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        kw = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
        with os.fdopen(fd, mode, **kw) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # disk full, quota, permission on replace
            raise CliError(f"cannot write {out}: {exc.strerror or exc}.") from None
        raise


def console(stderr: bool = False):
    """A rich console that shows every control character of the text it prints as an escape
    (:func:`analyser.literal.terminal`): names from a profile never reach the terminal raw."""
    from rich.console import Console

    from analyser.literal import terminal

    class LiteralConsole(Console):
        def render_str(self, text: str, **kwargs):  # every str printed or put in a table
            return super().render_str(terminal(text), **kwargs)

    return LiteralConsole(stderr=stderr, highlight=False, soft_wrap=False)


def progress_bar(description: str):
    """A rich progress bar on stderr (hidden when stderr is not a terminal)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
    )
