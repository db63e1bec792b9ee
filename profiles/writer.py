"""Writing profiles: schema-checked, chunked and compressed, streamed, atomic.

Two ways in:

* :func:`write_profile` takes the whole ``data`` dict (``{group path: {field: value}}``, see
  docs/design.md), checks it against the schema *before* touching the disk, and writes it.
* :class:`ProfileWriter` is a context manager for producers that build a profile piece by piece:
  ``write_group(path, fields)`` for each group and ``append_steps(columns)`` to add executed steps
  in chunks, so a profile with millions of steps never needs two copies in memory. The final
  structural check runs at ``close()``.

Both write to a temporary file in the destination folder, ``fsync`` it and ``os.replace`` it onto
the final name: an interrupted or refused write never leaves a broken file under the final name
and never destroys an existing one. Large datasets are chunked (about ``CHUNK_BYTES`` per chunk,
or the group's ``chunk_rows``) and compressed as :mod:`profiles.codec` says (Blosc2-LZ4 with
byte shuffle and Fletcher-32 checksums); small ones are stored contiguous. Arrays are converted to the schema dtype block by block, never as a whole copy; a
:class:`profiles.runs.RunRows` (an array given as runs of equal values) is laid out block by
block, never whole.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import h5py
import numpy as np

from profiles import atomic, codec, schema, semantic
from profiles._layout import (
    Layout,
    _json_default,
    check_layout,
    dims_of,
    dtype_ok,
    field_path,
    layout_of_data,
)
from profiles.errors import ProfileWriteError, SchemaMismatchError
from profiles.problems import MissingDataset, MissingGroup, Problem, WrongDtype, WrongShape
from profiles.runs import RunRows

#: Datasets smaller than this are stored contiguous and uncompressed (compression would not pay).
SMALL_BYTES = 64 * 1024
#: Target uncompressed size of one chunk (of datasets whose group sets no ``chunk_rows``): big
#: enough for good compression and few chunk lookups, small enough that reading a slice
#: decompresses little more than it needs and that shuffle + deflate work in the processor's
#: cache. Walkthrough step 4's per-tile liveness rows (1,529 x 1,472 int32): 128 KiB chunks
#: write in 16 ms against 23 ms for 512 KiB, read whole in 11 against 14 ms and one row in 0.36
#: against 0.81 ms, 0.5% larger (docs/performance.md).
CHUNK_BYTES = 128 * 1024
#: Rows converted and written per block when streaming a large array.
BLOCK_BYTES = 8 * 1024 * 1024
#: Rows laid out and written per block from an array given as runs (:class:`RunRows`): a block
#: that stays in the processor's cache between being laid out and being compressed, and whose
#: memory is reused block after block (walkthrough step 4's per-tile cycles: 15 ms less CPU than
#: in 8 MiB blocks, docs/performance.md).
RUN_BLOCK_BYTES = 1024 * 1024
# The compression of chunked datasets: profiles.codec (Blosc2-LZ4 from format 1.4).

STR_DTYPE = h5py.string_dtype("utf-8")
STEPS = schema.group("/execution/steps")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _engine_version() -> str:
    try:
        from importlib.metadata import version

        return version("ipu-graph-analyser")
    except Exception:  # not installed as a distribution
        return "unknown"


def _raise_problems(problems: list[Problem], what: str) -> None:
    if not problems:
        return
    first = problems[:3]
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    raise SchemaMismatchError(
        f"{what} does not match profile schema {schema.version_string()}: "
        + "; ".join(str(p).rstrip(".") for p in first)
        + more
        + "."
    )


def _attr_value(f: schema.Field | None, value: object) -> object:
    if f is None:
        return value
    if f.dtype == "json":
        if isinstance(value, str | bytes):
            return value if isinstance(value, str) else value.decode()
        return json.dumps(value, default=_json_default, separators=(",", ":"))
    if f.dtype == "str":
        return value if isinstance(value, str) else bytes(value).decode()  # type: ignore[call-overload]
    return np.dtype(f.dtype).type(value)


def _chunks(shape: tuple[int, ...], itemsize: int, chunk_rows: int | None) -> tuple[int, ...]:
    if chunk_rows:
        return (max(1, min(shape[0], chunk_rows)), *(max(1, s) for s in shape[1:]))
    chunk = [max(1, s) for s in shape]
    # shrink leading dimensions to 1 until a chunk is small enough, then fit the next one
    for axis in range(len(chunk)):
        rest = math.prod(chunk[axis + 1 :]) * itemsize
        if rest * chunk[axis] <= CHUNK_BYTES:
            break
        chunk[axis] = max(1, CHUNK_BYTES // max(1, rest))
        if chunk[axis] > 1 or rest <= CHUNK_BYTES:
            break
    return tuple(chunk)


class ProfileWriter:
    """Write a profile group by group, appending executed steps in chunks.

    Use as a context manager; on a clean exit the file is checked and moved into place, on an
    exception the temporary file is removed and the destination is left untouched::

        with ProfileWriter("run.h5", overwrite=False) as w:
            w.write_group("/meta", {...})
            ...
            for chunk in step_chunks:          # rows grouped by IPU, sorted by start
                w.append_steps(chunk)
            w.write_group("/execution", {"run_starts": ..., "total_cycles": ...})

    ``/execution/ipu_offsets`` and ``/execution/max_step_cycles`` are computed from the steps when
    not given (steps must then be appended in IPU order).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        overwrite: bool = True,
        engine_version: str | None = None,
    ) -> None:
        self.path = Path(path).expanduser()
        self.overwrite = overwrite
        self._engine_version = engine_version
        parent = self.path.parent
        if self.path.is_dir():
            raise ProfileWriteError(f"cannot write profile {self.path}: it is a folder.")
        if not parent.is_dir():
            raise ProfileWriteError(
                f"cannot write profile {self.path}: folder {parent} does not exist."
            )
        if not overwrite and self.path.exists():
            raise ProfileWriteError(
                f"refusing to overwrite existing file {self.path} (overwrite is off)."
            )
        atomic.clean_stale(self.path)  # temporaries of writers that were killed (kill -9)
        self._room = -1  # bytes the disk can still take as last seen (-1: ask it)
        self._space(0)
        self._signals = atomic.deferred_signals()
        self._pending = self._signals.start()  # Ctrl-C / SIGTERM: abandon at the next check
        try:
            self._tmp = atomic.temp_path(self.path)  # mode from the umask, like any new file
        except OSError as exc:
            self._signals.stop()
            raise ProfileWriteError(
                f"cannot write profile {self.path}: {exc.strerror or exc}."
            ) from exc
        try:
            self._h5 = h5py.File(self._tmp, "w", libver=("v110", "latest"))
        except Exception as exc:
            self._tmp.unlink(missing_ok=True)
            self._signals.stop()
            if atomic.is_disk_full(exc):
                raise ProfileWriteError(
                    f"cannot write profile {self.path}: the disk is full."
                ) from None
            raise
        self._layout = Layout(groups={"/"}, attrs={"/": {}}, datasets={"/": {}})
        self._closed = False
        # executed steps appended in chunks
        self._step_ds: dict[str, h5py.Dataset] = {}
        self._step_rows = 0
        self._ipu_counts: dict[int, int] = {}
        self._ipu_max: dict[int, int] = {}
        self._last_ipu = -1
        self._last_start: int | None = None
        self._steps_written_whole = False

    # -- context manager ------------------------------------------------------------------------
    def __enter__(self) -> ProfileWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # -- public API -----------------------------------------------------------------------------
    def write_group(self, path: str, fields: Mapping[str, object]) -> None:
        """Write one group of the schema: datasets / columns from arrays, attributes from values.

        May be called again for the same group to add fields (e.g. the /execution attributes
        after the steps). Raises :class:`SchemaMismatchError` for unknown groups or fields, wrong
        dtypes or values out of the dtype's range; shapes are checked at :meth:`close`.
        """
        self._check_open()
        gp = "/" + path.strip("/") if path.strip("/") else "/"
        layout, converted, problems = layout_of_data({gp: dict(fields)})
        g = schema.GROUPS_BY_PATH.get(gp)
        if g is None:
            problems.append(
                MissingGroup(
                    gp, f"unknown group {gp!r}; the schema has {', '.join(schema.GROUPS_BY_PATH)}."
                )
            )
        else:
            names = {f.name for f in g.fields}
            for name in fields:
                if name not in names:
                    problems.append(
                        MissingDataset(
                            field_path(gp, name),
                            f"unknown field {name!r}; {gp} has {', '.join(sorted(names))}.",
                        )
                    )
            for name, (_shape, dt) in layout.datasets[gp].items():
                if name in names and not dtype_ok(g.field(name).dtype, dt, exact=False):
                    problems.append(
                        WrongDtype(
                            field_path(gp, name), f"should be {g.field(name).dtype}, got {dt}."
                        )
                    )
            if gp == "/execution/steps" and self._step_rows:
                problems.append(WrongShape(gp, "steps were already appended with append_steps()."))
        _raise_problems(problems, f"group {gp}")
        assert g is not None
        self._write_converted(g, converted[gp])

    def append_steps(self, columns: Mapping[str, object]) -> None:
        """Append executed-step rows (every column of /execution/steps, equal lengths).

        Rows must come grouped by IPU in increasing IPU order and sorted by start within an IPU
        (the order of the table); this is checked as rows arrive.
        """
        self._check_open()
        gp = STEPS.path
        if self._steps_written_whole:
            raise SchemaMismatchError(f"{gp} was already written whole with write_group().")
        layout, conv, problems = layout_of_data({gp: dict(columns)})
        names = {c.name for c in STEPS.columns}
        missing = sorted(names - set(columns))
        unknown = sorted(set(columns) - names)
        if missing:
            problems.append(
                MissingDataset(gp, f"append_steps() needs every column; missing {missing}.")
            )
        if unknown:
            problems.append(MissingDataset(gp, f"unknown step columns {unknown}."))
        lengths = {shape for shape, _ in layout.datasets[gp].values()}
        if len(lengths) > 1 or any(len(s) != 1 for s in lengths):
            problems.append(WrongShape(gp, "step columns must be 1-D and of equal length."))
        for name, (_s, dt) in layout.datasets[gp].items():
            if name in names and not dtype_ok(STEPS.field(name).dtype, dt, exact=False):
                problems.append(
                    WrongDtype(
                        field_path(gp, name), f"should be {STEPS.field(name).dtype}, got {dt}."
                    )
                )
        _raise_problems(problems, "appended steps")
        cols = conv[gp]
        n = len(cols["ipu"])
        if n == 0:
            return
        self._track_steps(np.asarray(cols["ipu"]), np.asarray(cols["start"]), cols["cycles"])
        if not self._step_ds:
            grp = self._h5.require_group(gp)
            for f in STEPS.columns:
                self._step_ds[f.name] = grp.create_dataset(
                    f.name,
                    shape=(0,),
                    maxshape=(None,),
                    dtype=np.dtype(f.dtype),
                    chunks=(STEPS.chunk_rows or 65536,),
                    **codec.filters(),
                )
            self._layout.groups.add(gp)
            self._layout.groups.add("/execution")
            self._layout.attrs.setdefault(gp, {})
            self._layout.attrs.setdefault("/execution", {})
            self._layout.datasets.setdefault("/execution", {})
        r0, r1 = self._step_rows, self._step_rows + n
        self._check(n * sum(np.dtype(f.dtype).itemsize for f in STEPS.columns))
        for f in STEPS.columns:
            ds = self._step_ds[f.name]
            ds.resize((r1,))
            ds[r0:r1] = np.asarray(cols[f.name]).astype(f.dtype, copy=False)
        self._step_rows = r1
        self._layout.datasets[gp] = {f.name: ((r1,), np.dtype(f.dtype)) for f in STEPS.columns}

    def close(self) -> None:
        """Fill derived fields, check the whole profile, and move it into place atomically."""
        if self._closed:
            return
        try:
            self._finish_execution()
            problems = check_layout(self._layout, for_writer=True)
            _raise_problems(problems, f"profile {self.path.name}")
            self._write_root()
            self._space(0)
            self._h5.flush()
            self._h5.close()
            self._pending.check()  # the last moment a Ctrl-C / SIGTERM keeps the previous file
            self._commit()
        except BaseException as exc:
            self.abort()
            if atomic.is_disk_full(exc) and not isinstance(exc, ProfileWriteError):
                raise ProfileWriteError(
                    f"cannot write profile {self.path}: the disk is full."
                ) from None
            raise
        self._closed = True
        self._signals.stop()
        # a signal during the rename itself: the profile is in place and whole, and the command
        # still stops as asked (exit 130 / 143) instead of forgetting the signal and exiting 0
        self._pending.check()

    def abort(self) -> None:
        """Discard everything written; the destination is left as it was."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._h5.close()
        with contextlib.suppress(OSError):
            self._tmp.unlink()
        self._signals.stop()

    def _space(self, need: int) -> None:
        """ProfileWriteError when the disk cannot take ``need`` more bytes (and a margin). The
        disk is asked only when the room it showed at the last look, less the bytes checked since,
        could be short of ``need`` (once a profile on a disk with room; every time on a disk
        nearly full). A disk filled by others between looks still ends the write in one
        sentence: HDF5's "no space" error is read as a full disk."""
        if need <= self._room:
            self._room -= need
            return
        free = atomic.free_bytes(self.path.parent)
        problem = atomic.virtual_folder(self.path.parent) or atomic.short_of_space(free, need)
        if problem:
            raise ProfileWriteError(f"cannot write profile {self.path}: {problem}.")
        self._room = -1 if free is None else free - atomic.SPACE_MARGIN - need

    def _check(self, need: int = 0) -> None:
        """Between blocks: a deferred Ctrl-C / SIGTERM ends the write here, as does a disk too
        full for the next ``need`` bytes (before HDF5 sees it)."""
        self._pending.check()
        if need:
            self._space(need)

    # -- internals ------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise ProfileWriteError(f"profile writer for {self.path} is already closed.")

    def _track_steps(self, ipu: np.ndarray, start: np.ndarray, cycles: object) -> None:
        cyc = np.asarray(cycles)
        if ipu.size == 0:
            return
        first_ipu = int(ipu[0])
        if first_ipu < self._last_ipu or np.any(np.diff(ipu) < 0):
            raise SchemaMismatchError(
                "/execution/steps rows must be grouped by IPU in increasing IPU order; "
                "append_steps() received an IPU after a higher one."
            )
        # sorted by start within each IPU (including across chunk boundaries)
        same = ipu[1:] == ipu[:-1]
        if np.any(same & (np.diff(start) < 0)) or (
            self._last_start is not None
            and first_ipu == self._last_ipu
            and int(start[0]) < self._last_start
        ):
            raise SchemaMismatchError(
                "/execution/steps rows must be sorted by start cycle within each IPU."
            )
        bounds = np.flatnonzero(np.r_[True, ipu[1:] != ipu[:-1]])
        ends = np.r_[bounds[1:], ipu.size]
        maxes = np.maximum.reduceat(cyc, bounds) if cyc.size else cyc
        for b, e, m in zip(bounds, ends, maxes):
            i = int(ipu[b])
            self._ipu_counts[i] = self._ipu_counts.get(i, 0) + int(e - b)
            self._ipu_max[i] = max(self._ipu_max.get(i, 0), int(m))
        self._last_ipu = int(ipu[-1])
        self._last_start = int(start[-1])

    def _finish_execution(self) -> None:
        if STEPS.path not in self._layout.groups:
            return
        have = self._layout.datasets.get("/execution", {})
        meta = self._layout.attrs.get("/meta", {})
        ipus = meta.get("num_ipus")
        if not isinstance(ipus, int | np.integer):
            return  # reported by check_layout
        ipus = int(ipus)
        grp = self._h5.require_group("/execution")
        self._layout.groups.add("/execution")
        counts = np.array([self._ipu_counts.get(i, 0) for i in range(ipus)], dtype=np.int64)
        if any(i < 0 or i >= ipus for i in self._ipu_counts):
            raise SchemaMismatchError(
                f"/execution/steps ipu column holds IPUs outside 0..{ipus - 1} "
                f"(/meta num_ipus is {ipus})."
            )
        if "ipu_offsets" in have and STEPS.path in self._h5 and self._ipu_counts:
            given = self._h5["/execution/ipu_offsets"][()]
            derived = np.r_[0, np.cumsum(counts)]
            if given.shape != derived.shape or np.any(given != derived):
                raise SchemaMismatchError(
                    f"/execution/ipu_offsets {given.tolist()[:9]} does not match the steps' ipu "
                    f"column, which gives {derived.tolist()[:9]}."
                )
        if "ipu_offsets" not in have:
            offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
            grp.create_dataset("ipu_offsets", data=offsets)
            have["ipu_offsets"] = (offsets.shape, offsets.dtype)
        if "max_step_cycles" not in have:
            mx = np.array([self._ipu_max.get(i, 0) for i in range(ipus)], dtype=np.int64)
            grp.create_dataset("max_step_cycles", data=mx)
            have["max_step_cycles"] = (mx.shape, mx.dtype)
        self._layout.datasets["/execution"] = have

    def _write_converted(self, g: schema.Group, fields: dict[str, object]) -> None:
        h5g = self._h5.require_group(g.path) if g.path != "/" else self._h5
        self._layout.groups.add(g.path)
        lattrs = self._layout.attrs.setdefault(g.path, {})
        ldsets = self._layout.datasets.setdefault(g.path, {})
        for name, value in fields.items():
            f = g.field(name)
            if f.kind == "attribute":
                h5g.attrs[name] = _attr_value(f, value)
                lattrs[name] = value
                continue
            arr = value if isinstance(value, np.ndarray | RunRows) else np.asarray(value)
            if name in h5g:
                del h5g[name]
            self._create_dataset(h5g, f, arr, g.chunk_rows)
            ldsets[name] = (tuple(arr.shape), arr.dtype)
            if g.path == STEPS.path and name == "ipu":
                self._steps_written_whole = True
        if g.path == STEPS.path and {"ipu", "start", "cycles"} <= set(fields):
            self._track_steps(
                np.asarray(fields["ipu"]), np.asarray(fields["start"]), fields["cycles"]
            )

    def _create_dataset(
        self, h5g: h5py.Group, f: schema.Field, arr: np.ndarray | RunRows, chunk_rows: int | None
    ) -> None:
        if f.dtype == "str":
            assert isinstance(arr, np.ndarray), "tile runs hold numbers, never strings"
            self._check(sum(map(len, arr.ravel().tolist())) * 4 + 16 * arr.size)
            data = arr.astype(object) if arr.dtype.kind in "US" else arr
            big = arr.size > 4096
            h5g.create_dataset(
                f.name,
                data=data,
                dtype=STR_DTYPE,
                chunks=(min(max(arr.shape[0], 1), 16384),) if big and arr.ndim == 1 else None,
            )
            return
        target = np.dtype(f.dtype)
        nbytes = arr.size * target.itemsize
        if nbytes <= SMALL_BYTES or arr.ndim == 0 or arr.size == 0:
            self._check(nbytes)
            h5g.create_dataset(f.name, data=np.asarray(arr).astype(target, copy=False))
            return
        chunks = _chunks(arr.shape, target.itemsize, chunk_rows)
        ds = h5g.create_dataset(
            f.name,
            shape=arr.shape,
            dtype=target,
            chunks=chunks,
            **codec.filters(),
        )
        row_bytes = max(1, math.prod(arr.shape[1:]) * target.itemsize)
        block_bytes = RUN_BLOCK_BYTES if isinstance(arr, RunRows) else BLOCK_BYTES
        step = max(chunks[0], (block_bytes // row_bytes) // chunks[0] * chunks[0])
        for r0 in range(0, arr.shape[0], step):  # a RunRows is laid out block by block here
            block = arr[r0 : r0 + step].astype(target, copy=False)
            self._check(block.nbytes)
            ds[r0 : r0 + step] = block

    def _write_root(self) -> None:
        root = self._h5.attrs
        root["format"] = schema.FORMAT_NAME
        root["format_version"] = schema.version_string()
        ev = self._layout.attrs["/"].get("engine_version") or self._engine_version
        root["engine_version"] = str(ev or _engine_version())
        created = self._layout.attrs["/"].get("created")
        root["created"] = str(
            created or _dt.datetime.now(_dt.UTC).astimezone().isoformat(timespec="seconds")
        )
        root["schema"] = schema.schema_json()
        root["enums"] = json.dumps({k: list(v) for k, v in schema.ENUMS.items()})

    def _commit(self) -> None:
        try:
            fd = os.open(self._tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            # the fsync of a large file can take seconds on a busy disk: a signal that came
            # meanwhile still keeps the previous file
            self._pending.check()
            if self.overwrite:
                os.replace(self._tmp, self.path)
            else:
                try:
                    os.link(self._tmp, self.path)  # atomic and never replaces an existing file
                except FileExistsError as exc:
                    raise ProfileWriteError(
                        f"refusing to overwrite existing file {self.path} (overwrite is off)."
                    ) from exc
                except OSError:  # file systems without hard links
                    if self.path.exists():
                        raise ProfileWriteError(
                            f"refusing to overwrite existing file {self.path} (overwrite is off)."
                        ) from None
                    os.replace(self._tmp, self.path)
                self._tmp.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                dfd = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        except ProfileWriteError:
            raise
        except OSError as exc:
            raise ProfileWriteError(
                f"cannot write profile {self.path}: {exc.strerror or exc}."
            ) from exc


#: Order in which write_profile writes groups (the dims other groups need come first).
_ORDER = [g.path for g in schema.GROUPS]


def write_profile(
    path: str | os.PathLike[str],
    data: Mapping[str, Mapping[str, object]],
    *,
    overwrite: bool = True,
) -> Path:
    """Check ``data`` against the schema and write it atomically to ``path``.

    ``data`` maps group paths (``"/meta"``, ``"/graph/operations"``, ``"/execution/steps"``...)
    to ``{field: value}``. Root attributes are filled in (``engine_version`` may be given in
    ``data["/"]``). Returns the path written. Raises :class:`SchemaMismatchError` (naming the
    group and field) before anything is written when the data does not match the schema, and
    :class:`ProfileWriteError` when the file cannot be written or exists and ``overwrite`` is off.
    """
    norm = {("/" + k.strip("/")) if k.strip("/") else "/": dict(v) for k, v in data.items()}
    norm.setdefault("/", {})
    layout, converted, problems = layout_of_data(norm)
    _derived_layout(layout, converted)
    problems += check_layout(layout, for_writer=True)
    if not problems:  # values: the rules the reader enforces, so nothing written is refused later
        problems += _semantic_problems(layout, converted)
    _raise_problems(problems, "profile data")
    with ProfileWriter(path, overwrite=overwrite) as w:
        for gp in sorted(converted, key=lambda p: _ORDER.index(p) if p in _ORDER else 99):
            w._write_converted(schema.group(gp), converted[gp])
    return Path(path).expanduser()


def _semantic_problems(layout: Layout, converted: dict[str, dict]) -> list[Problem]:
    dims = dims_of(layout)
    sem = semantic.Dims(
        int(dims["ipus"] or 0),
        int(dims["tiles"] or 0),
        {g.path: n for g in schema.GROUPS if g.table and (n := layout.rows(g.path)) is not None},
    )
    out: list[Problem] = []
    for gp in ("/meta", "/execution"):
        out += semantic.attribute_problems(gp, layout.attrs.get(gp, {}))
    for gp, fields in converted.items():
        if gp not in schema.GROUPS_BY_PATH:
            continue
        for name, value in fields.items():
            if isinstance(value, RunRows):  # its values are those of its runs
                bad = semantic.column_problem(gp, name, value.present(), sem)
                if bad is not None:  # said of the array as written (row, element)
                    bad = semantic.column_problem(gp, name, np.asarray(value), sem) or bad
                    out.append(bad)
            elif isinstance(value, np.ndarray) and value.ndim:
                bad = semantic.column_problem(gp, name, value, sem)
                if bad is not None:
                    out.append(bad)
    return out


def _derived_layout(layout: Layout, converted: dict[str, dict]) -> None:
    """Account for the fields the writer derives (ipu_offsets, max_step_cycles) in the check."""
    steps = converted.get(STEPS.path)
    if not steps or "ipu" not in steps:
        return
    ex = layout.datasets.setdefault("/execution", {})
    ipus = layout.attrs.get("/meta", {}).get("num_ipus")
    if isinstance(ipus, int | np.integer):
        for name, shape in (("ipu_offsets", (int(ipus) + 1,)), ("max_step_cycles", (int(ipus),))):
            ex.setdefault(name, (shape, np.dtype(np.int64)))


__all__ = ["ProfileWriter", "RunRows", "write_profile"]
