"""Profiles are self-contained: data stored outside the file is refused, never read.

HDF5 lets a file point elsewhere: an *external link* names an object in another HDF5 file, a
dataset with *external raw storage* keeps its bytes in any other file (``/etc/passwd`` works), and
a *virtual dataset* maps regions of datasets in other HDF5 files. Opening such a file and reading
the dataset silently reads the other file, so a hostile profile could make ``analyse summary
--json`` or a report print the contents of files the user never named. The writer never produces
any of these (``profiles.writer`` writes plain contiguous or chunked datasets), so a profile that
holds one is refused before anything is read, as the HDF5 documentation's own advice for
untrusted files suggests (https://docs.hdfgroup.org/hdf5/develop/group___h5_l.html,
"External links"; H5Pset_external; H5Pset_virtual).

:func:`foreign_data` walks every link of the file once (HDF5's link iteration visits a group
reached by several hard links once, so a group linked into itself cannot loop) and opens each
dataset's header only: no data is read. It also bounds the walk, since a profile holds about a
hundred objects and a file with millions of them only asks for work.
"""

from __future__ import annotations

import h5py

#: More objects than this is not a profile (the writer makes about 100) and is refused.
MAX_OBJECTS = 20_000


def foreign_data(h5: h5py.File) -> tuple[str, str] | None:
    """The first object of ``h5`` whose data lives outside the file, as ``(path, what)``, or
    ``None`` when the file is self-contained. ``what`` completes "is ..." in a sentence."""
    found: list[tuple[str, str]] = []
    count = 0

    def visit(name: str, link: h5py.HardLink | h5py.SoftLink | h5py.ExternalLink) -> object:
        nonlocal count
        count += 1
        path = "/" + name
        if count > MAX_OBJECTS:
            found.append(("/", f"made of more than {MAX_OBJECTS:,} objects (a profile has ~100)"))
            return True
        if isinstance(link, h5py.ExternalLink):
            found.append((path, f"an external link to {link.filename!r}"))
            return True
        if isinstance(link, h5py.SoftLink):
            return None  # a path inside this file; its target is visited under its own name
        obj = h5.get(name)
        if isinstance(obj, h5py.Dataset):
            if obj.is_virtual:
                sources = sorted({m.file_name for m in obj.virtual_sources()})
                shown = ", ".join(repr(s) for s in sources[:3]) or "other files"
                found.append((path, f"a virtual dataset mapping data of {shown}"))
                return True
            if obj.external:
                found.append((path, f"stored in the external file {obj.external[0][0]!r}"))
                return True
        return None

    h5.visititems_links(visit)
    if not found:
        # the root's own attributes cannot point outside; a root that is itself a link cannot be
        return None
    return found[0]


def foreign_sentence(where: str, path: str, what: str) -> str:
    """One sentence refusing a file (``where`` names it, e.g. ``"profile run.h5"``)."""
    if path == "/":
        return f"{where} is {what}; it is not read."
    return (
        f"{where}: {path} is {what}; profiles must be self-contained, so nothing outside the "
        "file is read."
    )


__all__ = ["MAX_OBJECTS", "foreign_data", "foreign_sentence"]
