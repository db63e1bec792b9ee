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

:func:`foreign_data` checks every object a reader may touch: the groups of the schema (each
link on their path) and every member of those groups, opening dataset headers only: no data is
read. It never walks the rest of the file (nothing else is read), and a schema group with more
members than any profile has is refused, so a file made of millions of objects costs nothing.
"""

from __future__ import annotations

import h5py

#: More members than this in one group is not a profile (the largest group has ~15).
MAX_OBJECTS = 10_000


def _link_problem(link: object) -> str | None:
    if isinstance(link, h5py.ExternalLink):
        return f"an external link to {link.filename!r}"
    if isinstance(link, h5py.SoftLink):
        return f"a soft link to {link.path!r} (a profile keeps its data in place)"
    return None


def _dataset_problem(obj: object) -> str | None:
    if not isinstance(obj, h5py.Dataset):
        return None
    if obj.is_virtual:
        sources = sorted({m.file_name for m in obj.virtual_sources()})
        shown = ", ".join(repr(s) for s in sources[:3]) or "other files"
        return f"a virtual dataset mapping data of {shown}"
    if obj.external:
        return f"stored in the external file {obj.external[0][0]!r}"
    return None


def foreign_data(h5: h5py.File) -> tuple[str, str] | None:
    """The first object a reader may touch whose data lives outside the file, as ``(path,
    what)``, or ``None`` when the file is self-contained. ``what`` completes "is ..."."""
    from profiles import schema

    checked: set[str] = set()
    for g in schema.GROUPS:
        node: h5py.Group = h5
        path = ""
        for part in [p for p in g.path.split("/") if p]:
            path += "/" + part
            link = node.get(part, getlink=True)
            if link is None:
                break
            bad = _link_problem(link)
            if bad:
                return path, bad
            child = node.get(part)
            if not isinstance(child, h5py.Group):
                break
            node = child
        else:
            if g.path in checked:
                continue
            checked.add(g.path)
            if len(node) > MAX_OBJECTS:
                return g.path, f"a group of {len(node):,} members (a profile has a few dozen)"
            for name in node:
                link = node.get(name, getlink=True)
                where = f"{g.path.rstrip('/')}/{name}"
                bad = _link_problem(link) or _dataset_problem(node.get(name))
                if bad:
                    return where, bad
    return None


def foreign_sentence(where: str, path: str, what: str) -> str:
    """One sentence refusing a file (``where`` names it, e.g. ``"profile run.h5"``)."""
    return (
        f"{where}: {path} is {what}; profiles must be self-contained, so nothing outside the "
        "file is read."
    )


__all__ = ["MAX_OBJECTS", "foreign_data", "foreign_sentence"]
