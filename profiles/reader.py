"""Reading profiles lazily (the libpva role).

``open_profile(path)`` reads only metadata: root and /meta attributes, the /execution totals and
the shapes of the datasets. Everything else is read on demand, and only the rows asked for::

    with open_profile("run.h5") as p:
        print(p.status, p.num_ipus, p.tiles_per_ipu, p.execution_totals())
        ops = p.table("/graph/operations", decode=True)         # pandas DataFrame
        total = p.array("/memory/total")                          # numpy (ipus, tiles)
        first = p.steps(ipu=0, rows=slice(0, 10_000))             # DataFrame, index = row ids
        window = p.step_window(1, 2_000_000, 2_100_000)           # steps overlapping a window
        cyc = p.tile_cycles(first["program"].unique())            # (programs, tiles)

Every failure to open raises :class:`profiles.errors.ProfileError` with one sentence naming the
file and the problem.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import h5py
import numpy as np

from profiles import (
    codec,  # noqa: F401  (importing it registers the Blosc2 filter these files use)
    schema,
    semantic,
)
from profiles._layout import MAX_IPUS, MAX_ROWS, MAX_TILES, dtype_ok
from profiles.errors import ForeignDataError, ProfileError
from profiles.foreign import foreign_data, foreign_sentence
from profiles.inputs import open_regular

if TYPE_CHECKING:
    import pandas as pd

F = TypeVar("F", bound=Callable[..., Any])
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
STEPS = "/execution/steps"


def _read_error(path: Path, exc: BaseException) -> ProfileError:
    """Turn an exception raised while opening into one sentence naming the file."""
    text = str(exc)
    low = text.lower()
    if "truncated" in low or "eof" in low:
        msg = "is truncated (it ends before the data it declares; was the write interrupted?)"
    elif "signature" in low or "not an hdf5" in low or "file format" in low:
        msg = "is not an HDF5 file"
    elif isinstance(exc, PermissionError) or "permission" in low:
        msg = "cannot be read: permission denied"
    elif any(w in low for w in ("bad object header", "corrupt", "checksum", "superblock")):
        msg = f"is corrupt (damaged HDF5 structures: {_hdf5_reason(text)})"
    else:
        msg = f"cannot be read ({text.strip().rstrip('.') or type(exc).__name__})"
    return ProfileError(f"profile {path} {msg}.")


def _hdf5_reason(text: str) -> str:
    """The innermost reason of an h5py message ("Unable to ... (bad superblock version number)")."""
    text = text.strip().rstrip(".")
    if text.endswith(")") and "(" in text:
        text = text[text.rindex("(") + 1 : -1]
    return text or "unknown damage"


def check_openable(path: Path) -> None:
    """Raise ProfileError when ``path`` is clearly not an openable HDF5 file (cheap checks)."""
    if not path.exists():
        raise ProfileError(f"profile {path} does not exist.")
    if path.is_dir():
        raise ProfileError(f"profile {path} is a folder, not a profile file.")
    with open_regular(path, f"profile {path}", ProfileError) as fh:
        head = fh.read(8)
    if not head:
        raise ProfileError(f"profile {path} is empty (0 bytes).")
    if head != HDF5_SIGNATURE and not h5py.is_hdf5(str(path)):
        raise ProfileError(
            f"profile {path} is not an HDF5 file (it does not start with the HDF5 signature)."
        )


#: Exceptions h5py / HDF5 raise on damaged files (bad checksums, broken heaps, bad chunks,
#: undecodable strings). Public reading methods turn them into one-sentence ProfileErrors.
_DAMAGE = (OSError, RuntimeError, KeyError, UnicodeError)


def _guarded(fn: F) -> F:
    """Turn an HDF5 failure inside a reading method into a ProfileError naming the file."""

    @functools.wraps(fn)
    def wrapper(self: Profile, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except ProfileError:
            raise
        except _DAMAGE as exc:
            if not self._h5.id.valid:
                raise ProfileError(f"profile {self.path} is closed.") from None
            text = str(exc).strip().strip("'\"").rstrip(".")
            raise ProfileError(
                f"profile {self.path} could not be read in {fn.__name__}(): the file is damaged "
                f"({text})."
            ) from None

    return wrapper  # type: ignore[return-value]


def open_h5(path: Path, **kwargs: Any) -> h5py.File:
    """Open read-only with HDF5's default locking (so that the same file opened elsewhere in this
    process with h5py defaults does not clash), retrying without a lock on file systems that do
    not support one (some network and read-only mounts). Profiles are never written in place,
    so a reader needs no lock. A file that keeps data in other files is refused
    (:class:`ForeignDataError`) before anything is read."""
    try:
        h5 = h5py.File(path, "r", **kwargs)
    except OSError as exc:
        if "lock" not in str(exc).lower():
            raise
        h5 = h5py.File(path, "r", locking=False, **kwargs)
    try:
        found = foreign_data(h5)
    except BaseException:
        h5.close()
        raise
    if found is not None:
        h5.close()
        raise ForeignDataError(foreign_sentence(f"profile {path}", *found))
    return h5


def _decode(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_attrs(obj: h5py.HLObject) -> dict[str, Any]:
    """An HDF5 object's attributes as Python values (bytes decoded as UTF-8, numpy scalars as
    Python numbers); shared with :mod:`profiles.validation`."""
    return {k: _decode(v) for k, v in obj.attrs.items()}


def _as_int(name: str, value: Any, path: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ProfileError(f"profile {path}: /meta attribute {name!r} is not an integer.")
    return int(value)


class Profile:
    """An open profile. Cheap to open; reads data only when asked. Close it (or use ``with``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        check_openable(self.path)
        try:
            self._h5 = open_h5(self.path, rdcc_nbytes=8 * 1024 * 1024)
        except ProfileError:
            raise
        except Exception as exc:
            raise _read_error(self.path, exc) from None
        try:
            self._read_metadata()
        except ProfileError:
            self._h5.close()
            raise
        except Exception as exc:
            self._h5.close()
            raise _read_error(self.path, exc) from None
        self._starts: dict[int, np.ndarray] = {}

    # -- metadata -------------------------------------------------------------------------------
    def _read_metadata(self) -> None:
        root = read_attrs(self._h5)
        fmt = root.get("format")
        if fmt != schema.FORMAT_NAME:
            what = "has no 'format' attribute" if fmt is None else f"has format {fmt!r}"
            raise ProfileError(
                f"profile {self.path} is not an IPU profile (the file {what}, "
                f"expected {schema.FORMAT_NAME!r})."
            )
        try:
            version = schema.parse_version(str(root.get("format_version", "")))
        except ValueError:
            raise ProfileError(
                f"profile {self.path} has an unreadable format version "
                f"{root.get('format_version')!r} (expected 'major.minor')."
            ) from None
        if version[0] != schema.FORMAT_VERSION[0]:
            newer = "a newer" if version[0] > schema.FORMAT_VERSION[0] else "an older"
            raise ProfileError(
                f"profile {self.path} uses {newer} profile format "
                f"{schema.version_string(version)}; this build reads profile format "
                f"{schema.FORMAT_VERSION[0]}.x."
            )
        self.version: tuple[int, int] = version
        self.root_attrs: dict[str, Any] = root
        if "meta" not in self._h5:
            raise ProfileError(f"profile {self.path} has no /meta group.")
        meta = read_attrs(self._h5["meta"])
        for name in ("status", "num_ipus", "tiles_per_ipu"):
            if name not in meta:
                raise ProfileError(f"profile {self.path}: /meta attribute {name!r} is missing.")
        self.meta: dict[str, Any] = meta
        self.num_ipus = _as_int("num_ipus", meta["num_ipus"], self.path)
        self.tiles_per_ipu = _as_int("tiles_per_ipu", meta["tiles_per_ipu"], self.path)
        if not 0 < self.num_ipus <= MAX_IPUS:
            raise ProfileError(f"profile {self.path} claims {self.num_ipus} IPUs, an absurd size.")
        if not 0 < self.tiles_per_ipu <= MAX_TILES:
            raise ProfileError(
                f"profile {self.path} claims {self.tiles_per_ipu} tiles per IPU, an absurd size."
            )
        self.status: str = str(meta["status"])
        self.has_execution: bool = "execution" in self._h5 and "steps" in self._h5["execution"]
        if self.status == "ok" and not self.has_execution:
            # the writer never produces this: without the check, readers would present a damaged
            # file as an out-of-memory compile ("nothing ran"), which it is not
            raise ProfileError(
                f"profile {self.path} is incomplete: its status is 'ok' (it fits) but "
                f"/execution/steps is missing; 'analyse validate {self.path}' lists the problems."
            )
        for name in ("run_config", "target", "notes"):
            if name in meta:
                self._json_attr(name)  # a damaged JSON attribute fails here, not in a comparison
        self._exec_attrs = read_attrs(self._h5["execution"]) if "execution" in self._h5 else {}
        for group, attrs in (("/meta", meta), ("/execution", self._exec_attrs)):
            bad = semantic.attribute_problems(group, attrs)
            if bad:
                raise ProfileError(f"profile {self.path}: {bad[0]}")
        self._check_storage()
        if self.has_execution:
            off = self._dataset("/execution/ipu_offsets")
            if off.shape != (self.num_ipus + 1,):
                raise ProfileError(
                    f"profile {self.path}: /execution/ipu_offsets has shape {off.shape}, "
                    f"expected ({self.num_ipus + 1},)."
                )
            self.ipu_offsets: np.ndarray = off[()].astype(np.int64)
            n = self.n_rows(STEPS)
            if (
                self.ipu_offsets[0] != 0
                or self.ipu_offsets[-1] != n
                or np.any(np.diff(self.ipu_offsets) < 0)
            ):
                raise ProfileError(
                    f"profile {self.path}: /execution/ipu_offsets {self.ipu_offsets.tolist()} "
                    f"does not split the {n} executed steps."
                )
        else:
            self.ipu_offsets = np.zeros(self.num_ipus + 1, dtype=np.int64)

    def _check_storage(self) -> None:
        """Every schema dataset: its declared size against the bytes it stores (metadata only),
        so a file that declares 10^9 rows it never wrote is refused before any work."""
        for g in schema.GROUPS:
            grp = self._h5.get(g.path.strip("/")) if g.path != "/" else None
            if not isinstance(grp, h5py.Group):
                continue
            for f in g.datasets:
                ds = grp.get(f.name)
                if not isinstance(ds, h5py.Dataset) or not ds.shape:
                    continue
                itemsize = 8 if ds.dtype.kind == "O" else ds.dtype.itemsize
                bad = semantic.storage_problem(
                    ds.name, ds.shape, itemsize, ds.id.get_storage_size()
                )
                if bad is not None:
                    raise ProfileError(f"profile {self.path}: {bad}")

    @property
    def format_version(self) -> str:
        """The profile's format version ('1.3')."""
        return schema.version_string(self.version)

    @property
    def engine_version(self) -> str:
        """The engine version that wrote the profile ('unknown' when not stored)."""
        return str(self.root_attrs.get("engine_version", "unknown"))

    @property
    def created(self) -> str:
        """When the profile was written (ISO 8601; '' when not stored)."""
        return str(self.root_attrs.get("created", ""))

    @cached_property
    def run_config(self) -> dict[str, Any]:
        """The run configuration (decoded JSON)."""
        return self._json_attr("run_config")

    @cached_property
    def target(self) -> dict[str, Any]:
        """The hardware target (decoded JSON)."""
        return self._json_attr("target")

    @cached_property
    def notes(self) -> list[str]:
        """The writer's notes (``/meta@notes``)."""
        return self._json_attr("notes", []) if "notes" in self.meta else []

    @cached_property
    def enums(self) -> dict[str, tuple[str, ...]]:
        """Enumerations stored in the file (falls back to this build's)."""
        raw = self.root_attrs.get("enums")
        try:
            stored = json.loads(raw) if isinstance(raw, str) else {}
        except ValueError:
            stored = {}
        out = {k: tuple(v) for k, v in schema.ENUMS.items()}
        out.update({k: tuple(v) for k, v in stored.items() if isinstance(v, list)})
        return out

    def _json_attr(self, name: str, default: Any = None) -> Any:
        raw = self.meta.get(name)
        if raw is None:
            if default is not None:
                return default
            raise ProfileError(f"profile {self.path}: /meta attribute {name!r} is missing.")
        try:
            return json.loads(raw)
        except (TypeError, ValueError):
            raise ProfileError(
                f"profile {self.path}: /meta attribute {name!r} is not valid JSON."
            ) from None

    @property
    def model(self) -> str:
        """The model's name."""
        return str(self.meta.get("model", ""))

    @property
    def replicas(self) -> int:
        """The number of replicas."""
        return int(self.meta.get("replicas", 1))

    @property
    def sram_per_tile(self) -> int:
        """Bytes of SRAM per tile."""
        return int(self.meta.get("sram_per_tile", 0))

    @property
    def clock_hz(self) -> float:
        """The clock in Hz."""
        return float(self.meta.get("clock_hz", 0.0))

    @property
    def samples_per_step(self) -> int:
        """Samples per step (one run of the program)."""
        return int(self.meta.get("samples_per_step", 0))

    @property
    def is_oom(self) -> bool:
        """Whether the program did not fit (no execution)."""
        return self.status == "oom"

    @property
    def n_steps(self) -> int:
        """Executed steps over all IPUs (0 without an execution)."""
        return int(self.ipu_offsets[-1])

    def execution_totals(self) -> dict[str, Any]:
        """The /execution attributes (total_cycles, samples, throughput...) as a dict."""
        return dict(self._exec_attrs)

    @cached_property
    @_guarded
    def sizes(self) -> dict[str, int]:
        """Rows of every table present (from dataset shapes; nothing is read)."""
        out = {}
        for g in schema.GROUPS:
            if g.table and g.path.lstrip("/") in self._h5:
                out[g.path] = self.n_rows(g.path)
        return out

    @_guarded
    def summary(self) -> dict[str, Any]:
        """A small summary from metadata plus the per-tile memory totals (tiny arrays)."""
        out: dict[str, Any] = {
            "path": str(self.path),
            "format_version": self.format_version,
            "engine_version": self.engine_version,
            "model": self.model,
            "status": self.status,
            "num_ipus": self.num_ipus,
            "tiles_per_ipu": self.tiles_per_ipu,
            "replicas": self.replicas,
            "sram_per_tile": self.sram_per_tile,
            "clock_hz": self.clock_hz,
            "n_steps": self.n_steps,
            "sizes": self.sizes,
        }
        if "memory" in self._h5 and "total" in self._h5["memory"]:
            has_gaps = "gaps" in self._h5["memory"]
            per_ipu, biggest, oom = [], 0, 0
            for i in range(self.num_ipus):  # one IPU at a time (bounded memory)
                used = self.array("/memory/total", i).astype(np.int64)
                if has_gaps:
                    used = used + self.array("/memory/gaps", i)
                per_ipu.append(int(used.sum()))
                biggest = max(biggest, int(used.max()) if used.size else 0)
                oom += int((used > self.sram_per_tile).sum()) if self.sram_per_tile else 0
            out["memory_per_ipu"] = per_ipu
            out["max_tile_memory"] = biggest
            out["oom_tiles"] = oom
        out.update(self.execution_totals())
        return out

    # -- generic access -------------------------------------------------------------------------
    @_guarded
    def __contains__(self, path: str) -> bool:
        return path.strip("/") in self._h5 if path.strip("/") else True

    def _dataset(self, path: str) -> h5py.Dataset:
        key = path.strip("/")
        try:
            obj = self._h5[key]
        except KeyError as exc:
            if "doesn't exist" in str(exc) or "not found" in str(exc):
                raise ProfileError(f"profile {self.path}: dataset {path} is missing.") from None
            raise _read_error(self.path, exc) from None
        except Exception as exc:
            raise _read_error(self.path, exc) from None
        if not isinstance(obj, h5py.Dataset):
            raise ProfileError(f"profile {self.path}: {path} is a group, not a dataset.")
        gpath, _, name = ("/" + key).rpartition("/")
        g = schema.GROUPS_BY_PATH.get(gpath or "/")
        if g is not None:
            try:
                f = g.field(name)
            except KeyError:
                f = None
            if f is not None and f.kind != "attribute":
                if not dtype_ok(f.dtype, obj.dtype, exact=False) and not (
                    f.dtype == "str" and h5py.check_string_dtype(obj.dtype)
                ):
                    raise ProfileError(
                        f"profile {self.path}: dataset {path} has type {obj.dtype}, "
                        f"expected {f.dtype}."
                    )
                if f.dtype == "str" and h5py.check_string_dtype(obj.dtype) is None:
                    raise ProfileError(
                        f"profile {self.path}: dataset {path} has type {obj.dtype}, expected str."
                    )
                want = self._expected_shape(f)
                if len(obj.shape) != len(want) or any(
                    w is not None and w != s for s, w in zip(obj.shape, want)
                ):
                    shown = tuple("any" if w is None else w for w in want)
                    raise ProfileError(
                        f"profile {self.path}: dataset {path} has shape {obj.shape}, "
                        f"expected {shown}."
                    )
        if obj.shape and obj.shape[0] > MAX_ROWS:
            raise ProfileError(
                f"profile {self.path}: dataset {path} claims {obj.shape[0]} rows, an absurd size."
            )
        return obj

    def _expected_shape(self, f: schema.Field) -> tuple[int | None, ...]:
        """The field's shape with the dimensions this profile fixes (``n``: checked by table)."""
        fixed = {
            "ipus": self.num_ipus,
            "ipus+1": self.num_ipus + 1,
            "tiles": self.tiles_per_ipu,
            "categories": len(schema.MEMORY_CATEGORIES),
            "regions": len(schema.MEMORY_REGIONS),
        }
        tables = {"lsteps": "/liveness/steps", "programs": "/programs/nodes"}

        def dim(d: object) -> int | None:
            if isinstance(d, int):
                return d
            if not isinstance(d, str):
                return None
            if d in tables:  # rows of the table the dimension counts (when it is present)
                return self.sizes.get(tables[d])
            return fixed.get(d)

        return tuple(dim(d) for d in f.shape)

    def _read(self, ds: h5py.Dataset, sel: Any = ()) -> np.ndarray:
        if isinstance(sel, _Reindexed):
            return self._read(ds, sel.uniq)[sel.inverse]
        if isinstance(sel, np.ndarray) and sel.size == 0:
            sel = slice(0, 0)
        self._check_read_size(ds, sel)
        try:
            if h5py.check_string_dtype(ds.dtype) is not None:
                out = np.asarray(ds.asstr()[sel], dtype=object)
            else:
                out = ds[sel]
        except (OSError, RuntimeError, UnicodeError) as exc:
            raise ProfileError(
                f"profile {self.path}: dataset {ds.name} cannot be read, the file is damaged "
                f"({str(exc).rstrip('.')})."
            ) from None
        self._check_values(ds.name, np.asarray(out), sel)
        return out

    def _check_read_size(self, ds: h5py.Dataset, sel: Any) -> None:
        """Refuse a read that would allocate more than :func:`semantic.read_limit` (a file may
        declare sizes it never wrote; nothing is allocated for them)."""
        from h5py._hl import selections

        try:
            shape = selections.select(
                ds.shape, sel if isinstance(sel, tuple) else (sel,), ds
            ).mshape
        except Exception:  # h5py raises the precise error when it reads
            return
        itemsize = 8 if ds.dtype.kind == "O" else ds.dtype.itemsize
        need = int(np.prod(shape, dtype=np.float64)) * itemsize
        limit = semantic.within_read_limit(need)
        if limit is not None:
            raise ProfileError(
                f"profile {self.path}: reading {ds.name} {tuple(shape)} would need "
                f"{semantic.fmt_size(need)}, more than the {semantic.fmt_size(limit)} this machine "
                "can spare (half its free memory)."
            )

    def _check_values(self, name: str, values: np.ndarray, sel: Any) -> None:
        """Raise ProfileError when the values read break a rule of :mod:`profiles.semantic`."""
        group, _, field = name.rpartition("/")
        if group not in schema.GROUPS_BY_PATH or values.size == 0:
            return
        if isinstance(sel, slice):
            row0: Any = sel.start or 0
        elif isinstance(sel, np.ndarray):
            row0 = sel
        else:
            row0 = 0
        bad = semantic.column_problem(group, field, values, self._dims, row0)
        if bad is not None:
            raise ProfileError(
                f"profile {self.path}: {bad.path} {bad.message[:1].lower()}{bad.message[1:]}"
            )

    @cached_property
    def _dims(self) -> semantic.Dims:
        return semantic.Dims(self.num_ipus, self.tiles_per_ipu, dict(self.sizes))

    @_guarded
    def array(self, path: str, sel: Any = ()) -> np.ndarray:
        """A dataset (or a selection of it: ``sel`` as for numpy, read on demand) as numpy."""
        return self._read(self._dataset(path), sel)

    @_guarded
    def shape(self, path: str) -> tuple[int, ...]:
        """The shape of the dataset at ``path``."""
        return tuple(self._dataset(path).shape)

    @_guarded
    def n_rows(self, table: str) -> int:
        """Rows of a table (from the shape of its first column; nothing is read)."""
        g = self._table_decl(table)
        for c in g.columns:
            key = f"{g.path}/{c.name}".strip("/")
            if key in self._h5:
                return int(self._dataset(f"{g.path}/{c.name}").shape[0])
        raise ProfileError(f"profile {self.path}: table {table} has no columns.")

    def _table_decl(self, table: str) -> schema.Group:
        tp = "/" + table.strip("/")
        g = schema.GROUPS_BY_PATH.get(tp)
        if g is None or not g.table:
            raise ProfileError(f"{tp} is not a table of the profile schema.")
        if tp.strip("/") not in self._h5:
            raise ProfileError(f"profile {self.path} has no table {tp}.")
        return g

    @_guarded
    def table(
        self,
        path: str,
        columns: Sequence[str] | None = None,
        rows: slice | np.ndarray | Sequence[int] | None = None,
        *,
        decode: bool = False,
    ) -> pd.DataFrame:
        """A table (or some of its columns / rows) as a pandas DataFrame.

        ``rows``: a slice (read on demand) or an array of row indices. The DataFrame index holds
        the row numbers within the table. ``decode=True`` turns enumerated columns into pandas
        Categoricals with the enumeration's names.
        """
        import pandas as pd

        g = self._table_decl(path)
        n = self.n_rows(g.path)
        if columns is None:
            cols = [c for c in g.columns if f"{g.path}/{c.name}".strip("/") in self._h5]
        else:
            cols = []
            for name in columns:
                try:
                    cols.append(g.field(name))
                except KeyError:
                    raise ProfileError(
                        f"table {g.path} has no column {name!r}; its columns are "
                        f"{', '.join(c.name for c in g.columns)}."
                    ) from None
        sel, index = _row_selection(rows, n)
        data = {}
        for c in cols:
            ds = self._dataset(f"{g.path}/{c.name}")
            if ds.shape[0] != n:
                raise ProfileError(
                    f"profile {self.path}: column {g.path}/{c.name} has {ds.shape[0]} rows, "
                    f"the table has {n}."
                )
            values = self._read(ds, sel)
            if decode and c.enum is not None:
                values = _categorical(values, self.enums[c.enum])
            data[c.name] = values
        return pd.DataFrame(data, index=pd.RangeIndex(0, 0) if index is None else index)

    # -- executed steps -------------------------------------------------------------------------
    def _require_execution(self) -> None:
        if not self.has_execution:
            raise ProfileError(
                f"profile {self.path} has no execution (status {self.status!r}): "
                "the program did not fit, so nothing ran."
            )

    def ipu_rows(self, ipu: int) -> tuple[int, int]:
        """Row range [start, stop) of ``ipu``'s steps in /execution/steps."""
        self._require_execution()
        if not 0 <= ipu < self.num_ipus:
            raise ProfileError(f"IPU {ipu} does not exist; the profile has {self.num_ipus} IPU(s).")
        return int(self.ipu_offsets[ipu]), int(self.ipu_offsets[ipu + 1])

    @_guarded
    def steps(
        self,
        ipu: int | None = None,
        rows: slice | None = None,
        columns: Sequence[str] | None = None,
        *,
        decode: bool = False,
    ) -> pd.DataFrame:
        """Executed steps, of one IPU (``rows`` then counts within that IPU) or of all."""
        self._require_execution()
        if ipu is None:
            return self.table(STEPS, columns, rows, decode=decode)
        lo, hi = self.ipu_rows(ipu)
        if rows is None:
            sl = slice(lo, hi)
        else:
            if not isinstance(rows, slice) or rows.step not in (None, 1):
                raise ProfileError("steps(ipu=...) takes rows as a contiguous slice.")
            a, b, _ = rows.indices(hi - lo)
            sl = slice(lo + a, lo + max(a, b))
        return self.table(STEPS, columns, sl, decode=decode)

    @_guarded
    def step_starts(self, ipu: int) -> np.ndarray:
        """Start cycles of one IPU's steps (read once, then cached)."""
        if ipu not in self._starts:
            lo, hi = self.ipu_rows(ipu)
            self._starts[ipu] = self.array(f"{STEPS}/start", slice(lo, hi))
        return self._starts[ipu]

    @cached_property
    @_guarded
    def max_step_cycles(self) -> np.ndarray:
        """Longest step per IPU (stored by the writer; computed once for older files)."""
        self._require_execution()
        if "max_step_cycles" in self._h5["execution"]:
            return self.array("/execution/max_step_cycles").astype(np.int64)
        out = np.zeros(self.num_ipus, dtype=np.int64)
        for i in range(self.num_ipus):
            lo, hi = self.ipu_rows(i)
            if hi > lo:
                out[i] = int(self.array(f"{STEPS}/cycles", slice(lo, hi)).max())
        return out

    @_guarded
    def window_rows(self, ipu: int, start_cycle: int, end_cycle: int) -> tuple[int, int]:
        """Row range (global) of ``ipu``'s steps that may overlap [start_cycle, end_cycle)."""
        starts = self.step_starts(ipu)
        lo, _ = self.ipu_rows(ipu)
        reach = int(self.max_step_cycles[ipu])
        a = int(np.searchsorted(starts, start_cycle - reach, side="right"))
        b = int(np.searchsorted(starts, end_cycle, side="left"))
        return lo + a, lo + max(a, b)

    @_guarded
    def step_window(
        self,
        ipu: int,
        start_cycle: int,
        end_cycle: int,
        columns: Sequence[str] | None = None,
        *,
        decode: bool = False,
    ) -> pd.DataFrame:
        """Steps of ``ipu`` overlapping the cycle window [start_cycle, end_cycle).

        A step overlaps when it starts before ``end_cycle`` and ends after ``start_cycle``
        (zero-length steps count when they start inside the window). Steps that start before the
        window but reach into it are included. Only the rows in range are read.
        """
        a, b = self.window_rows(ipu, start_cycle, end_cycle)
        need = None if columns is None else list(dict.fromkeys([*columns, "start", "cycles"]))
        df = self.table(STEPS, need, slice(a, b), decode=decode)
        s = df["start"].to_numpy()
        keep = ((s + df["cycles"].to_numpy()) > start_cycle) | (s >= start_cycle)
        df = df[keep]
        return df if columns is None else df[list(columns)]

    @_guarded
    def tile_cycles(self, program_ids: Iterable[int] | np.ndarray) -> np.ndarray:
        """Per-tile cycles of one execution of each program: shape (len(ids), tiles)."""
        ids = np.asarray(
            list(program_ids) if not isinstance(program_ids, np.ndarray) else program_ids
        )
        ids = ids.astype(np.int64).ravel()
        ds = self._dataset("/programs/tile_cycles")
        if ids.size and (ids.min() < 0 or ids.max() >= ds.shape[0]):
            raise ProfileError(
                f"program ids must be in 0..{ds.shape[0] - 1}; got {ids.min()}..{ids.max()}."
            )
        if ids.size == 0:
            return np.zeros((0, ds.shape[1]), dtype=ds.dtype)
        uniq = np.unique(ids)
        if (uniq[-1] - uniq[0] + 1) <= 4 * uniq.size:
            block = self._read(ds, slice(int(uniq[0]), int(uniq[-1]) + 1))
            return block[ids - uniq[0]]
        # scattered ids: read each chunk that holds some of them once, as a slice (much faster
        # than an h5py point selection, which walks the chunks once per row)
        rows_per_chunk = ds.chunks[0] if ds.chunks else max(1, ds.shape[0])
        out = np.empty((uniq.size, ds.shape[1]), dtype=ds.dtype)
        which = uniq // rows_per_chunk
        bounds = np.flatnonzero(np.r_[True, which[1:] != which[:-1]])
        ends = np.r_[bounds[1:], uniq.size]
        for b, e in zip(bounds.tolist(), ends.tolist()):
            a, z = int(uniq[b]), int(uniq[e - 1]) + 1
            out[b:e] = self._read(ds, slice(a, z))[uniq[b:e] - a]
        return out[np.searchsorted(uniq, ids)]

    @_guarded
    def liveness_per_tile(
        self, ipu: int | None = None, steps: slice | np.ndarray | None = None
    ) -> np.ndarray:
        """Not-always-live bytes per tile and liveness step: ``(ipus, steps, tiles)``, or
        ``(steps, tiles)`` for one IPU; ``steps`` selects liveness steps (default all).

        Format 1.1 files store the values as changes (``/liveness/per_tile_*``, see
        :mod:`profiles.liveness`), format 1.0 files densely (``/liveness/per_tile``); both read
        the same values.
        """
        from profiles import liveness

        if ipu is not None and not 0 <= ipu < self.num_ipus:
            raise ProfileError(f"IPU {ipu} does not exist; the profile has {self.num_ipus} IPU(s).")
        n_steps = self.n_rows("/liveness/steps")
        want = np.arange(n_steps)[steps if steps is not None else slice(None)]
        if "liveness/per_tile_ipu_offsets" not in self._h5:
            ds = self._dataset("/liveness/per_tile")
            sel = want if want.size != n_steps else slice(None)
            if ipu is not None:
                return self._read(ds, (ipu, sel)) if want.size else ds[ipu, :0]
            return self._read(ds, (slice(None), sel)) if want.size else ds[:, :0]
        off = self.array("/liveness/per_tile_ipu_offsets").astype(np.int64)
        step = self.array("/liveness/per_tile_step").astype(np.int64)
        rows_ds = self._dataset("/liveness/per_tile_rows")
        bad = liveness.problems(off, step, rows_ds.shape[0], n_steps)
        if bad:
            raise ProfileError(f"profile {self.path}: {bad[0]}")
        out = []
        for i in range(self.num_ipus) if ipu is None else [ipu]:
            a, b = int(off[i]), int(off[i + 1])
            rows = self._read(rows_ds, slice(a, b))
            out.append(liveness.expand(step[a:b], rows, want, self.tiles_per_ipu))
        return out[0] if ipu is not None else np.stack(out)

    @_guarded
    def cycles_by_type(self, ipu: int | None = None) -> dict[str, int]:
        """Sum of step cycles per step type (reads two columns of the selected IPU's steps)."""
        self._require_execution()
        sl = slice(*self.ipu_rows(ipu)) if ipu is not None else slice(None)
        types = self.array(f"{STEPS}/type", sl)
        cyc = self.array(f"{STEPS}/cycles", sl)
        names = self.enums["program_type"]
        sums = np.bincount(types, weights=cyc, minlength=len(names))
        return {names[i]: int(sums[i]) for i in range(len(names))}

    # -- lifetime -------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the file."""
        with contextlib.suppress(Exception):  # already closed
            self._h5.close()

    def __enter__(self) -> Profile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Profile({str(self.path)!r}, format {self.format_version}, status {self.status!r}, "
            f"{self.num_ipus} IPU(s) x {self.tiles_per_ipu} tiles, {self.n_steps} steps)"
        )


def _row_selection(rows: Any, n: int) -> tuple[Any, Any]:
    """(h5py selection, pandas index) for a row selection of an n-row table."""
    import pandas as pd

    if rows is None:
        return slice(None), pd.RangeIndex(0, n)
    if isinstance(rows, slice):
        a, b, st = rows.indices(n)
        if st != 1:
            idx = np.arange(a, b, st)
            return (idx if idx.size else slice(0, 0)), pd.Index(idx)
        b = max(a, b)
        return slice(a, b), pd.RangeIndex(a, b)
    idx = np.asarray(rows)
    if idx.dtype == bool:
        if idx.shape != (n,):
            raise ProfileError(f"a boolean row mask must have {n} entries, got {idx.shape}.")
        idx = np.flatnonzero(idx)
    idx = idx.astype(np.int64).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ProfileError(f"row indices must be in 0..{n - 1}.")
    if idx.size and np.all(np.diff(idx) > 0):
        return idx, pd.Index(idx)
    uniq, inv = np.unique(idx, return_inverse=True)
    return _Reindexed(uniq, inv), pd.Index(idx)


class _Reindexed:
    """Marker selection: read sorted unique rows, then reorder (h5py needs increasing indices)."""

    def __init__(self, uniq: np.ndarray, inverse: np.ndarray) -> None:
        self.uniq, self.inverse = uniq, inverse


def _categorical(codes: np.ndarray, names: tuple[str, ...]) -> Any:
    import pandas as pd

    codes = np.asarray(codes).astype(np.int64)
    codes = np.where((codes >= 0) & (codes < len(names)), codes, -1)
    return pd.Categorical.from_codes(codes, categories=list(names))


def open_profile(path: str | os.PathLike[str]) -> Profile:
    """Open a profile lazily; raises :class:`ProfileError` (one sentence) when it cannot."""
    return Profile(path)


__all__ = ["Profile", "check_openable", "open_profile"]
