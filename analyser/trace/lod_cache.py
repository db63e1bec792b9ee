"""The Execution Trace's level-of-detail cache on disk, read as untrusted input.

A cached pyramid (see :mod:`analyser.trace.window`) is a folder of ``.npy`` arrays and a
``meta.json``, found by a key of the profile's path, size and times. Anything may sit under that
key: another profile's pyramid, a link to somewhere else, an edited ``meta.json``, arrays whose
widths, starts or counts were changed. :func:`save` records, beside the arrays, a digest of the
steps the pyramid was built from (:func:`steps_digest`: the IPU's row range and three blocks of
its rows, read cheaply) and a digest of the arrays themselves; :func:`load` serves a pyramid only
when the folder and its files are real (no links) and regular, the steps digest matches the open
profile, the arrays' digest matches, and every level's shapes, types and ranges are those a build
gives (bucket widths, buckets of the starts, counts summing to the IPU's steps, rows inside the
IPU's range). Anything else is None: the caller rebuilds and replaces the folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np

from profiles.inputs import InputPathError, read_regular

VERSION = 2
FIELDS = ("key", "x0", "x1", "count", "row", "bucket", "cummax_x1")
DTYPES = {
    "key": np.int32,
    "x0": np.float64,
    "x1": np.float64,
    "count": np.int64,
    "row": np.int64,
    "bucket": np.int64,
    "cummax_x1": np.float64,
}
#: Profiles whose pyramids the cache keeps (least recently written dropped first).
PROFILES = 8
#: Rows of each of the three blocks (first, middle, last) the steps digest reads.
DIGEST_ROWS = 4096


def steps_digest(read: Callable[[int, int], dict[str, np.ndarray]], lo: int, hi: int) -> str:
    """Digest of an IPU's steps ``[lo, hi)``: the range and three blocks of :data:`DIGEST_ROWS`
    rows (first, middle, last) of the columns ``read(a, b)`` returns (those the pyramid is built
    from). Another profile's steps give another digest unless these rows are the same."""
    h = hashlib.sha256(f"{lo}:{hi}".encode())
    mid = lo + max(0, (hi - lo) // 2 - DIGEST_ROWS // 2)
    for a in sorted({lo, mid, max(lo, hi - DIGEST_ROWS)}):
        cols = read(a, min(hi, a + DIGEST_ROWS))
        for name in sorted(cols):
            h.update(name.encode())
            h.update(np.ascontiguousarray(cols[name]).tobytes())
    return h.hexdigest()


def _arrays_digest(levels: list[dict[str, np.ndarray]]) -> str:
    h = hashlib.sha256()
    for lev in levels:
        for name in FIELDS:
            a = np.ascontiguousarray(lev[name])
            h.update(f"{name}{a.dtype.str}{a.shape}".encode())
            h.update(a.data.cast("B"))
    return h.hexdigest()


def save(folder: Path, levels: list[dict[str, np.ndarray]], meta: dict) -> None:
    """Write ``levels`` (dicts of :data:`FIELDS`) and ``meta`` (with ``steps_digest``) into
    ``folder``, replacing whatever is there; atomic (a temporary folder renamed into place)."""
    import threading

    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    for i, lev in enumerate(levels):
        for name in FIELDS:
            np.save(tmp / f"L{i}-{name}.npy", lev[name], allow_pickle=False)
    doc = {**meta, "version": VERSION, "arrays_digest": _arrays_digest(levels)}
    (tmp / "meta.json").write_text(json.dumps(doc))
    discard(folder)
    try:
        os.replace(tmp, folder)
    except OSError:  # another process saved it first
        shutil.rmtree(tmp, ignore_errors=True)


def discard(folder: Path) -> None:
    """Remove a cache entry that cannot be used (a link is unlinked, never followed)."""
    try:
        st = os.lstat(folder)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        folder.unlink(missing_ok=True)


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _regular(path: Path, limit: int) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= limit


def load(
    root: Path, folder: Path, expect: dict, widths: list[float]
) -> tuple[list[dict[str, np.ndarray]], dict] | None:
    """The levels (memory-mapped) and meta saved in ``folder`` (under the cache's ``root``)
    when every check of the module's docstring passes, else None. ``expect``: ``n_rows``,
    ``lo``, ``hi``, ``t_min``, ``t_end`` (the last step's end) and ``steps_digest`` of the open
    profile; ``widths``: the bucket widths a build gives."""
    if not all(_real_dir(p) for p in (root, folder.parent, folder)):
        return None
    try:
        meta = json.loads(read_regular(folder / "meta.json", "lod cache", limit=1 << 20))
    except (InputPathError, ValueError, RecursionError):
        return None
    if not isinstance(meta, dict) or meta.get("version") != VERSION:
        return None
    for k in ("n_rows", "steps_digest", "t_min"):
        if meta.get(k) != expect[k]:
            return None
    t_max = meta.get("t_max")
    if not isinstance(t_max, int | float) or not expect["t_end"] <= t_max < 2**53:
        return None
    if meta.get("widths") != widths:
        return None
    limit = 128 + 16 * max(1, expect["n_rows"]) * 2
    levels = []
    try:
        for i in range(len(widths)):
            lev = {}
            for name in FIELDS:
                path = folder / f"L{i}-{name}.npy"
                if not _regular(path, limit):
                    return None
                lev[name] = np.load(path, mmap_mode="r", allow_pickle=False)
            levels.append(lev)
    except (OSError, ValueError):
        return None
    if meta.get("arrays_digest") != _arrays_digest(levels):
        return None
    for lev, width in zip(levels, widths):
        if not _level_ok(lev, width, expect, float(t_max)):
            return None
    return levels, meta


def _level_ok(lev: dict[str, np.ndarray], width: float, expect: dict, t_max: float) -> bool:
    """Shapes, types and ranges of one level against what a build of these steps gives."""
    m = len(lev["key"])
    for name in FIELDS:
        a = lev[name]
        want = (m, 2) if name == "count" else (m,)
        if a.dtype != DTYPES[name] or a.shape != want:
            return False
    if m > expect["n_rows"] or (m == 0) != (expect["n_rows"] == 0):
        return False
    if not m:
        return True
    key, x0, x1, count = lev["key"], lev["x0"], lev["x1"], lev["count"]
    row, bucket = lev["row"], lev["bucket"]
    t_min = float(expect["t_min"])
    checks = (
        lambda: key.min() >= 0 and key.max() < 1 << 15,
        lambda: np.isfinite(x0).all() and np.isfinite(x1).all(),
        lambda: x0.min() >= t_min and x1.max() <= t_max and (x0 <= x1).all(),
        lambda: count[:, 0].min() >= 1 and count[:, 1].min() >= 0,
        lambda: int(count[:, 0].sum(dtype=np.int64)) == expect["n_rows"],
        lambda: row.min() >= expect["lo"] and row.max() < expect["hi"],
        lambda: (np.diff(bucket) >= 0).all(),
        lambda: np.array_equal(bucket, ((x0 - t_min) // width).astype(np.int64)),
        lambda: np.array_equal(lev["cummax_x1"], np.maximum.accumulate(x1)),
    )
    with np.errstate(all="ignore"):
        return all(bool(c()) for c in checks)


__all__ = ["DIGEST_ROWS", "FIELDS", "VERSION", "discard", "load", "save", "steps_digest"]


def cache_dir() -> Path | None:
    """Folder of the trace level-of-detail cache: ``$IPU_ANALYSER_CACHE/trace-lod``, else
    ``$XDG_CACHE_HOME`` (or ``~/.cache``) ``/ipu-graph-analyser/trace-lod``; None (no cache)
    when ``IPU_ANALYSER_CACHE`` is set to an empty string."""
    env = os.environ.get("IPU_ANALYSER_CACHE")
    if env is not None:
        return Path(env) / "trace-lod" if env else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ipu-graph-analyser" / "trace-lod"


def prune(root: Path) -> None:
    """Keep the pyramids of the :data:`PROFILES` most recently written profiles."""
    try:
        entries = sorted(
            (e for e in root.iterdir() if e.is_dir() and not e.name.startswith(".")),
            key=lambda e: e.stat().st_mtime,
        )
    except OSError:
        return
    for e in entries[:-PROFILES]:
        shutil.rmtree(e, ignore_errors=True)
