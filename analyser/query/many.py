"""SQL over many profiles at once: ``analyse query A.h5 B.h5 ... "SQL"``, or a folder of them.

Every table of :mod:`analyser.query.tables` then holds the rows of every profile, with a
``profile`` column first (the file as it was named, or ``folder/file`` for a folder's), and the
``runs`` table has one row per profile: its run options and key figures. "Which of my 40 CI
runs regressed, and in what" becomes one query::

    SELECT profile, throughput, max_tile_memory FROM runs ORDER BY throughput

A folder contributes the profiles (``*.h5``) directly in it, as a tune folder holds its
``start.h5`` and ``best-N.h5``; an entry that is a link leaving the folder, or that is not a
regular file, is refused by name, as any other input path is. The bounds of one-profile queries
hold over the whole set (time, result rows and bytes, DuckDB's memory), plus the number of
profiles (:data:`MAX_PROFILES`) and the step columns held in memory for them
(:data:`STEP_BYTES_LIMIT`), checked before any step is read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from profiles.errors import UserFacingError
from profiles.inputs import inside

if TYPE_CHECKING:
    from analyser.core.source import Source

#: Most profiles one query reads (each holds an open HDF5 file while the query runs).
MAX_PROFILES = 256
#: Most bytes of step columns one query may hold for all its profiles (estimated from their
#: row counts and stored column widths before anything is read).
STEP_BYTES_LIMIT = 4 << 30


class ManyProfilesError(UserFacingError):
    """The set of profiles cannot be queried (one sentence; exit 2)."""


@dataclass(frozen=True)
class Named:
    """A profile of the set: the label its rows carry and its path."""

    label: str
    path: Path


def is_many(profile: object) -> bool:
    """Whether ``profile`` names a set (a list or tuple of paths, or a folder), not one file."""
    if isinstance(profile, (list, tuple)):
        return True
    if isinstance(profile, (str, os.PathLike)):
        return os.path.isdir(profile)
    return False


def _folder_entries(folder: Path) -> list[Named]:
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".h5"))
    except OSError as exc:
        raise ManyProfilesError(
            f"folder {str(folder)!r} cannot be listed: {exc.strerror or exc}."
        ) from None
    out = []
    for name in names:
        target = inside(folder, name)
        if target is None:
            raise ManyProfilesError(
                f"{str(folder / name)!r} is a link that leaves its folder; only the folder's "
                "own profiles are read (name the file itself to read it)."
            )
        if os.path.isdir(target):
            continue  # a folder called x.h5 holds no profile of its own
        out.append(Named(str(folder / name), target))
    return out


def resolve(profiles: Sequence[str | os.PathLike[str]] | str | os.PathLike[str]) -> list[Named]:
    """The profiles a set names, each once (by resolved path), in the order given: files as
    they are, folders as their ``*.h5`` entries. One sentence when the set is empty or too
    large."""
    items = [profiles] if isinstance(profiles, (str, os.PathLike)) else list(profiles)
    if not items:
        raise ManyProfilesError("give at least one profile (.h5) or folder of profiles.")
    out: list[Named] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise ManyProfilesError(
                f"a profile is named by its path, not by a {type(item).__name__}."
            )
        p = Path(item)
        found = _folder_entries(p) if os.path.isdir(p) else [Named(os.fspath(item), p)]
        if os.path.isdir(p) and not found:
            raise ManyProfilesError(f"folder {str(p)!r} has no profiles (*.h5) in it.")
        for named in found:
            key = os.path.realpath(named.path)
            if key in seen:
                continue
            seen.add(key)
            out.append(named)
            if len(out) > MAX_PROFILES:
                raise ManyProfilesError(
                    f"the query names more than {MAX_PROFILES} profiles; query fewer at once "
                    "(or aggregate per folder)."
                )
    return out


def check_step_bytes(sources: Sequence[tuple[str, Source]], columns: int) -> None:
    """Refuse, before any step is read, a set whose step columns would pass
    :data:`STEP_BYTES_LIMIT` (``columns`` stored columns of 8 bytes at most per step)."""
    rows = sum(src.n_steps for _, src in sources)
    need = rows * max(1, columns) * 8
    if need > STEP_BYTES_LIMIT:
        raise ManyProfilesError(
            f"the query would hold {need / 2**30:.1f} GiB of step columns for "
            f"{len(sources)} profiles ({rows:,} steps), more than its "
            f"{STEP_BYTES_LIMIT / 2**30:g} GiB; name fewer columns of steps, query fewer "
            "profiles, or use the runs table."
        )


__all__ = [
    "MAX_PROFILES",
    "STEP_BYTES_LIMIT",
    "ManyProfilesError",
    "Named",
    "check_step_bytes",
    "is_many",
    "resolve",
]
