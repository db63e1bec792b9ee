"""Validating a profile file against the schema: a list of typed problems, never a crash.

``validate(path)`` checks, without stopping at the first problem:

1. that the file opens and is an IPU profile of a version this build reads (``Unreadable``,
   ``UnknownVersion``; these stop the check since nothing else can be interpreted);
2. the structure, from metadata only: every required group, dataset and attribute, dtypes,
   shapes against the /meta dimensions and the table lengths, absurd sizes (``MissingGroup``,
   ``MissingDataset``, ``MissingAttribute``, ``WrongDtype``, ``WrongShape``, ``AbsurdSize``);
3. the content, reading columns in blocks of ``BLOCK_ROWS`` rows so memory stays bounded: enum
   codes in range, ids referring to existing rows, IPU and tile numbers in range, steps sorted
   and grouped as ``ipu_offsets`` says, and the memory invariants (``OutOfRange``,
   ``DanglingReference``, ``Inconsistent``). Content checks are skipped for datasets whose
   structure is already wrong;
4. that every dataset of the schema reads back whole, block by block (``Unreadable``): a damaged
   compressed chunk fails its checksum here, not later in the middle of an analysis.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from profiles import schema, semantic
from profiles._layout import (
    MAX_IPUS,
    MAX_ROWS,
    MAX_TILES,
    Layout,
    check_layout,
    dims_of,
    field_path,
)
from profiles.errors import ForeignDataError, ProfileError
from profiles.problems import (
    ForeignData,
    Inconsistent,
    OutOfRange,
    Problem,
    UnknownVersion,
    Unreadable,
    WrongShape,
)
from profiles.reader import check_openable, open_h5, read_attrs

#: Rows read at a time by the content checks (8 MB for an int64 column).
BLOCK_ROWS = 1 << 20
STEPS = "/execution/steps"
#: What h5py raises on damaged files (checksums, heaps, chunks, undecodable strings).
_DAMAGE = (OSError, RuntimeError, KeyError, ValueError, UnicodeError)


def is_fatal(problem: Problem) -> bool:
    """True for problems that mean the file cannot be opened at all."""
    return problem.path == "/" and isinstance(problem, Unreadable | UnknownVersion | ForeignData)


def validate(path: str | os.PathLike[str]) -> list[Problem]:
    """Every problem found in the profile at ``path`` (an empty list when it is valid)."""
    p = Path(path).expanduser()
    try:
        check_openable(p)
    except ProfileError as exc:
        return [Unreadable("/", str(exc))]
    try:
        h5 = open_h5(p)
    except ForeignDataError as exc:
        return [ForeignData("/", str(exc))]
    except Exception as exc:
        from profiles.reader import _read_error

        return [Unreadable("/", str(_read_error(p, exc)))]
    found: list[Problem] = []
    try:
        try:
            root = read_attrs(h5)
        except _DAMAGE as exc:
            return [Unreadable("/", f"{p} is damaged: {_text(exc)}.")]
        _validate_open(p, h5, root, found)
    except _DAMAGE as exc:  # damaged HDF5 structures: report where we got to, do not crash
        found.append(Unreadable("(content)", f"{p} is damaged: {_text(exc)}."))
    finally:
        h5.close()
    return found


def _text(exc: BaseException) -> str:
    return str(exc).strip().strip("'\"").rstrip(".")


def _validate_open(
    p: Path, h5: h5py.File, root: dict[str, object], problems: list[Problem]
) -> None:
    fmt = root.get("format")
    if fmt != schema.FORMAT_NAME:
        what = "no 'format' attribute" if fmt is None else f"format {fmt!r}"
        problems.append(
            UnknownVersion(
                "/", f"{p} is not an IPU profile ({what}; expected {schema.FORMAT_NAME!r})."
            )
        )
        return
    try:
        version = schema.parse_version(str(root.get("format_version", "")))
    except ValueError:
        problems.append(
            UnknownVersion(
                "/",
                f"{p} has an unreadable format version {root.get('format_version')!r} "
                "(expected 'major.minor').",
            )
        )
        return
    if version[0] != schema.FORMAT_VERSION[0]:
        problems.append(
            UnknownVersion(
                "/",
                f"{p} uses profile format {schema.version_string(version)}; this build reads "
                f"profile format {schema.FORMAT_VERSION[0]}.x.",
            )
        )
        return

    layout = Layout()
    for g in schema.GROUPS:
        key = g.path.strip("/")
        try:
            obj = h5 if not key else h5.get(key)
        except _DAMAGE as exc:
            problems.append(Unreadable(g.path, f"cannot be read, damaged ({exc})."))
            continue
        if obj is None:
            continue
        if isinstance(obj, h5py.Group):
            try:
                _list_group(g, obj, layout, problems)
            except _DAMAGE as exc:
                problems.append(Unreadable(g.path, f"cannot be read, damaged ({exc})."))
            continue
        problems.append(WrongShape(g.path, f"{g.path} is a dataset, expected a group."))
    problems += check_layout(layout, version=version)
    for gp in ("/meta", "/execution"):
        problems += semantic.attribute_problems(gp, layout.attrs.get(gp, {}))
    problems += _sparse_claims(h5, layout, {pr.path for pr in problems})
    bad_paths = {pr.path for pr in problems}
    problems += _content(h5, layout, bad_paths)
    problems += _read_through(h5, layout, {pr.path for pr in problems})


#: Bytes read at a time by the read-through check.
READ_BLOCK_BYTES = 32 * 2**20


def _read_through(h5: h5py.File, layout: Layout, bad: set[str]) -> list[Problem]:
    """Read every schema dataset whole, in blocks of rows, so that damaged chunks (checksum or
    decompression failures) are found; datasets already reported are skipped."""
    from profiles.reader import _hdf5_reason

    out: list[Problem] = []
    for gp, dsets in layout.datasets.items():
        for name, (shape, dtype) in dsets.items():
            fp = field_path(gp, name)
            if fp in bad or gp in bad:
                continue
            try:
                ds = h5[fp.strip("/")]
                if not shape:
                    ds[()]
                    continue
                if shape[0] > MAX_ROWS:
                    continue
                row_bytes = max(1, int(np.prod(shape[1:], dtype=np.float64)) * dtype.itemsize)
                step = max(1, READ_BLOCK_BYTES // row_bytes)
                for r0 in range(0, shape[0], step):
                    ds[r0 : r0 + step]
            except _DAMAGE as exc:
                out.append(
                    Unreadable(
                        fp,
                        f"cannot be read: the stored data is damaged ({_hdf5_reason(str(exc))}).",
                    )
                )
    return out


def _sparse_claims(h5: h5py.File, layout: Layout, bad: set[str]) -> list[Problem]:
    """Datasets whose declared size is not real (profiles.semantic.storage_problem)."""
    out: list[Problem] = []
    for gp, dsets in layout.datasets.items():
        for name, (shape, dtype) in dsets.items():
            fp = field_path(gp, name)
            if fp in bad or not shape:
                continue
            itemsize = 8 if dtype.kind == "O" else dtype.itemsize
            stored = h5[fp.strip("/")].id.get_storage_size()
            problem = semantic.storage_problem(fp, shape, itemsize, stored)
            if problem is not None:
                out.append(problem)
    return out


def _list_group(g: schema.Group, obj: h5py.Group, layout: Layout, problems: list[Problem]) -> None:
    layout.attrs[g.path] = read_attrs(obj)
    layout.groups.add(g.path)
    dsets = {}
    for name in obj:
        try:
            child = obj.get(name)
        except _DAMAGE as exc:  # broken link / corrupt header
            problems.append(Unreadable(field_path(g.path, name), f"cannot be read ({exc})."))
            continue
        if isinstance(child, h5py.Dataset):
            dsets[name] = (tuple(child.shape), child.dtype)
        elif name in {f.name for f in g.fields}:
            problems.append(WrongShape(field_path(g.path, name), "is a group, expected a dataset."))
    layout.datasets[g.path] = dsets


def _blocks(
    ds: h5py.Dataset, lo: int = 0, hi: int | None = None, *, strings: bool = False
) -> Iterator[tuple[int, np.ndarray]]:
    hi = ds.shape[0] if hi is None else hi
    if strings and h5py.check_string_dtype(ds.dtype) is None:
        return
    src = ds.asstr() if strings else ds
    row_items = max(1, int(np.prod(ds.shape[1:], dtype=np.float64)))
    step = max(1, BLOCK_ROWS // row_items)
    for r0 in range(lo, hi, step):
        block = src[r0 : min(hi, r0 + step)]
        yield r0, np.asarray(block, dtype=object) if strings else block


def _range_check(
    ds: h5py.Dataset, fp: str, lo: int, hi: int, make: type[Problem], what: str
) -> list[Problem]:
    """Values outside [lo, hi) reported once per dataset with the count and first bad row."""
    count = 0
    first = None
    vmin, vmax = None, None
    for r0, block in _blocks(ds):
        bad = (block < lo) | (block >= hi)
        nb = int(np.count_nonzero(bad))
        if nb:
            if first is None:
                first = r0 + int(np.argmax(bad))
            count += nb
            vals = block[bad]
            vmin = int(vals.min()) if vmin is None else min(vmin, int(vals.min()))
            vmax = int(vals.max()) if vmax is None else max(vmax, int(vals.max()))
    if not count:
        return []
    return [
        make(
            fp,
            f"{count} value(s) outside {what} {lo}..{hi - 1} (values {vmin}..{vmax}, "
            f"first at row {first}).",
        )
    ]


def _content(h5: h5py.File, layout: Layout, bad_paths: set[str]) -> list[Problem]:
    problems: list[Problem] = []
    dims = dims_of(layout)
    ipus, tiles = dims["ipus"], dims["tiles"]

    def usable(gp: str, name: str) -> h5py.Dataset | None:
        fp = field_path(gp, name)
        if fp in bad_paths or gp in bad_paths or name not in layout.datasets.get(gp, {}):
            return None
        shape = layout.datasets[gp][name][0]
        if shape and shape[0] > MAX_ROWS:
            return None
        return h5[fp.strip("/")]

    def read_error(fp: str, exc: Exception) -> None:
        from profiles.reader import _hdf5_reason

        problems.append(
            Unreadable(
                fp, f"cannot be read: the stored data is damaged ({_hdf5_reason(str(exc))})."
            )
        )

    sem_dims = semantic.Dims(
        ipus if ipus is not None else MAX_IPUS,
        tiles if tiles is not None else MAX_TILES,
        {g.path: n for g in schema.GROUPS if g.table and (n := layout.rows(g.path)) is not None},
    )
    for g in schema.GROUPS:
        if g.path not in layout.groups:
            continue
        for f in g.fields:
            if f.kind == "attribute":
                continue
            ds = usable(g.path, f.name)
            if ds is None or not ds.shape:
                continue
            fp = field_path(g.path, f.name)
            try:
                for r0, block in _blocks(ds, strings=f.dtype == "str"):
                    bad = semantic.column_problem(g.path, f.name, block, sem_dims, r0)
                    if bad is not None:
                        problems.append(bad)
                        break
            except _DAMAGE as exc:
                read_error(fp, exc)

    problems += _check_tile_intervals(h5, layout, usable, tiles)
    problems += _check_steps(h5, layout, usable, ipus, bad_paths)
    problems += _check_memory(h5, layout, usable)
    problems += _check_liveness_changes(h5, layout, usable)
    return problems


def _check_liveness_changes(h5, layout, usable) -> list[Problem]:
    """Per-tile liveness changes (format 1.1): offsets, steps and rows agree."""
    from profiles import liveness

    off, step, rows = (
        usable("/liveness", n) for n in ("per_tile_ipu_offsets", "per_tile_step", "per_tile_rows")
    )
    if off is None or step is None or rows is None:
        return []
    try:
        n_steps = layout.rows("/liveness/steps") or 0
        bad = liveness.problems(off[()], step[()], rows.shape[0], n_steps)
    except _DAMAGE as exc:
        return [Unreadable("/liveness", f"cannot be read ({exc}).")]
    return [Inconsistent("/liveness/per_tile_step", b) for b in bad[:3]]


def _check_tile_intervals(h5, layout, usable, tiles) -> list[Problem]:
    out: list[Problem] = []
    if tiles is None:
        return out
    for gp in ("/graph/variables", "/graph/compute_sets", "/graph/operations"):
        count_name = "tiles_used" if gp == "/graph/operations" else "tile_count"
        a, c = usable(gp, "tile_start"), usable(gp, count_name)
        if a is None or c is None:
            continue
        if a.shape != c.shape:
            continue  # reported as WrongShape
        count, first = 0, -1
        try:
            for r0, starts in _blocks(a):
                end = starts.astype(np.int64) + c[r0 : r0 + starts.size].astype(np.int64)
                bad = np.flatnonzero(end > tiles)
                if bad.size and first < 0:
                    first = r0 + int(bad[0])
                count += bad.size
        except _DAMAGE:
            continue
        if count:
            out.append(
                OutOfRange(
                    gp,
                    f"{count} row(s) map past the last tile (tile_start + {count_name} > "
                    f"{tiles}), first at row {first}.",
                )
            )
    return out


def _check_steps(h5, layout, usable, ipus, bad_paths) -> list[Problem]:
    out: list[Problem] = []
    if STEPS not in layout.groups or ipus is None:
        return out
    off_ds = usable("/execution", "ipu_offsets")
    n = layout.rows(STEPS)
    if off_ds is None or n is None:
        return out
    off = off_ds[()].astype(np.int64)
    if off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 0):
        out.append(
            Inconsistent(
                "/execution/ipu_offsets",
                f"{off.tolist()[:9]} does not split the {n} steps into IPU ranges "
                "(must start at 0, never decrease, end at the row count).",
            )
        )
        return out
    ipu_ds, start_ds, cyc_ds = usable(STEPS, "ipu"), usable(STEPS, "start"), usable(STEPS, "cycles")
    unsorted: list[int] = []
    wrong_ipu: list[int] = []
    negative = 0
    longest = np.zeros(ipus, dtype=np.int64)
    try:
        for i in range(ipus):
            last = None
            blocks = _blocks(start_ds, int(off[i]), int(off[i + 1])) if start_ds else iter(())
            for _r0, block in blocks:
                if not block.size:
                    continue
                if (np.diff(block) < 0).any() or (last is not None and block[0] < last):
                    unsorted.append(i)
                    break
                last = block[-1]
            if ipu_ds is not None:
                for _r0, block in _blocks(ipu_ds, int(off[i]), int(off[i + 1])):
                    if (block != i).any():
                        wrong_ipu.append(i)
                        break
            if cyc_ds is not None:
                for _r0, block in _blocks(cyc_ds, int(off[i]), int(off[i + 1])):
                    negative += int((block < 0).sum())
                    if block.size:
                        longest[i] = max(longest[i], int(block.max()))
    except _DAMAGE as exc:
        out.append(Unreadable(STEPS, f"cannot be read ({exc})."))
        return out
    if unsorted:
        out.append(
            Inconsistent(
                field_path(STEPS, "start"),
                f"steps of IPU(s) {unsorted} are not sorted by start cycle.",
            )
        )
    if wrong_ipu:
        out.append(
            Inconsistent(
                field_path(STEPS, "ipu"),
                f"rows of IPU(s) {wrong_ipu} (per ipu_offsets) hold steps of other IPUs.",
            )
        )
    if negative:
        out.append(
            OutOfRange(field_path(STEPS, "cycles"), f"{negative} step(s) with negative cycles.")
        )
    mx = usable("/execution", "max_step_cycles")
    if mx is not None and cyc_ds is not None and mx.shape == (ipus,):
        stored = mx[()].astype(np.int64)
        if np.any(stored < longest):
            out.append(
                Inconsistent(
                    "/execution/max_step_cycles",
                    f"{stored.tolist()} is shorter than the longest steps {longest.tolist()}; "
                    "time-window queries would miss steps.",
                )
            )
    return out


def _check_memory(h5, layout, usable) -> list[Problem]:
    out: list[Problem] = []
    total_ds = usable("/memory", "total")
    if total_ds is None:
        return out
    meta = layout.attrs.get("/meta", {})
    sram, status = meta.get("sram_per_tile"), meta.get("status")
    check_sram = isinstance(sram, int) and status in ("ok", "oom")
    parts = {name: usable("/memory", name) for name in ("by_category", "by_region", "by_liveness")}
    gaps_ds = usable("/memory", "gaps")
    mismatch: dict[str, list[Any]] = {
        name: [0, None] for name in parts
    }  # count, first (ipu, tile, got, want)
    over = 0
    negative = False
    try:
        # one IPU at a time: memory stays bounded whatever the dimensions claim
        for i in range(total_ds.shape[0]):
            total = total_ds[i].astype(np.int64)
            negative |= bool((total < 0).any())
            for name, ds in parts.items():
                if ds is None:
                    continue
                sums = ds[i].sum(axis=1, dtype=np.int64)
                bad = np.flatnonzero(sums != total)
                if bad.size:
                    if mismatch[name][1] is None:
                        t = int(bad[0])
                        mismatch[name][1] = (i, t, int(sums[t]), int(total[t]))
                    mismatch[name][0] += bad.size
            if check_sram and gaps_ds is not None:
                over += int(((total + gaps_ds[i].astype(np.int64)) > sram).sum())
        for name, (count, first) in mismatch.items():
            if count:
                i, t, got, want = first
                out.append(
                    Inconsistent(
                        field_path("/memory", name),
                        f"sums differ from /memory/total on {count} tile(s), first IPU {i} "
                        f"tile {t} ({got} vs {want} bytes).",
                    )
                )
        if negative:
            out.append(OutOfRange("/memory/total", "negative byte counts."))
        if check_sram and gaps_ds is not None:
            if status == "ok" and over:
                out.append(
                    Inconsistent(
                        "/meta@status",
                        f"status is 'ok' but {over} tile(s) exceed sram_per_tile ({sram} bytes) "
                        "with gaps included.",
                    )
                )
            if status == "oom" and not over:
                out.append(
                    Inconsistent("/meta@status", "status is 'oom' but every tile fits its SRAM.")
                )
            oom_ds = usable("/memory", "oom_tiles")
            if oom_ds is not None and oom_ds.shape[0] != over:
                out.append(
                    Inconsistent(
                        "/memory/oom_tiles",
                        f"lists {oom_ds.shape[0]} tile(s) but {over} exceed their SRAM.",
                    )
                )
    except _DAMAGE as exc:
        out.append(Unreadable("/memory", f"cannot be read ({exc})."))
    return out


__all__ = ["is_fatal", "validate"]
