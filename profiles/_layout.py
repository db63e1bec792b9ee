"""Schema-driven structural checks shared by the writer (before writing) and the validator.

A :class:`Layout` describes what a profile holds without its bulk data: which groups exist, the
attribute values, and every dataset's shape and dtype. It is built from the writer's ``data``
dict or from an open HDF5 file (metadata only), and :func:`check_layout` compares it with the
schema, returning typed :mod:`profiles.problems`.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from profiles import schema
from profiles.problems import (
    AbsurdSize,
    Inconsistent,
    MissingAttribute,
    MissingDataset,
    MissingGroup,
    OutOfRange,
    Problem,
    WrongDtype,
    WrongShape,
)
from profiles.runs import RunRows

#: Upper bounds beyond which a size is treated as corrupt rather than large. They are far above
#: anything real (an IPU-POD holds at most 1,024 IPUs; a chip at most a few thousand tiles; a
#: profile of 10^10 steps would be hundreds of GB) and only stop a broken file from asking for an
#: impossible allocation.
MAX_IPUS = 1024
MAX_TILES = 65536
MAX_ROWS = 10**10

STATUSES = ("ok", "oom")
EXECUTION_GROUPS = ("/execution", "/execution/steps")

#: Fields that the writer fills in itself when they are not given.
WRITER_FILLED: dict[str, tuple[str, ...]] = {
    "/": ("format", "format_version", "created", "schema", "enums", "engine_version"),
    "/execution": ("ipu_offsets", "max_step_cycles"),
}


@dataclass
class Layout:
    """Groups, attribute values and dataset (shape, dtype) of a profile, without bulk data."""

    groups: set[str] = field(default_factory=set)
    attrs: dict[str, dict[str, object]] = field(default_factory=dict)
    datasets: dict[str, dict[str, tuple[tuple[int, ...], np.dtype]]] = field(default_factory=dict)

    def rows(self, table: str) -> int | None:
        """Rows of a table: the length of its first present column."""
        cols = self.datasets.get(table, {})
        for f in schema.group(table).columns:
            if f.name in cols and len(cols[f.name][0]) == 1:
                return int(cols[f.name][0][0])
        return None


def field_path(group_path: str, name: str, kind: str = "dataset") -> str:
    if kind == "attribute":
        return f"{group_path}@{name}"
    return f"{group_path.rstrip('/')}/{name}"


def dtype_ok(want: str, got: np.dtype, *, exact: bool) -> bool:
    """Whether an array of dtype ``got`` can stand for schema dtype ``want``.

    ``exact`` (files): the stored dtype must be the schema's (strings: any HDF5 string).
    Otherwise (writer input): any dtype that converts without changing meaning (ints into wider or
    narrower ints, range-checked separately; ints into floats; bool into bool).
    """
    if want == "str":
        return got.kind in "OUS" or (got.kind == "O")
    target = np.dtype(want)
    if exact:
        return got == target
    if target.kind == "b":
        return got.kind == "b"
    if target.kind in "iu":
        return got.kind in "iub"
    if target.kind == "f":
        return got.kind in "iuf"
    return got == target


def _json_default(obj: object) -> object:
    """JSON encoding of the numpy / path / tuple values found in configs."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, tuple | set | frozenset):
        return list(obj)
    if hasattr(obj, "__fspath__"):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def attr_ok(f: schema.Field, value: object) -> bool:
    if f.dtype == "json":
        if isinstance(value, str | bytes):
            try:
                json.loads(value)
            except ValueError:
                return False
            return True
        if not isinstance(value, dict | list):
            return False
        try:
            json.dumps(value, default=_json_default)
        except (TypeError, ValueError):
            return False
        return True
    if f.dtype == "str":
        return isinstance(value, str | bytes)
    kind = np.dtype(f.dtype).kind
    if isinstance(value, bool | np.bool_):
        return kind == "b"
    if kind in "iu":
        return isinstance(value, numbers.Integral)
    if kind == "f":
        return isinstance(value, numbers.Real)
    return True


def dims_of(layout: Layout) -> dict[str, int | None]:
    meta = layout.attrs.get("/meta", {})

    def _int(name: str, hi: int) -> int | None:
        v = meta.get(name)
        if isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 < int(v) <= hi:
            return int(v)
        return None

    ipus = _int("num_ipus", MAX_IPUS)
    return {
        "ipus": ipus,
        "ipus+1": None if ipus is None else ipus + 1,
        "tiles": _int("tiles_per_ipu", MAX_TILES),
        "categories": len(schema.MEMORY_CATEGORIES),
        "regions": len(schema.MEMORY_REGIONS),
        "lsteps": layout.rows("/liveness/steps"),
        "programs": layout.rows("/programs/nodes"),
    }


def _expected_shape(
    f: schema.Field, dims: dict[str, int | None], n: int | None
) -> tuple[int | None, ...]:
    out: list[int | None] = []
    for d in f.shape:
        if d is None:
            out.append(None)
        elif isinstance(d, int):
            out.append(d)
        elif d == "n":
            out.append(n)
        else:
            out.append(dims.get(d))
    return tuple(out)


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join("any" if d is None else str(d) for d in shape) + ")"


def required_groups(layout: Layout) -> list[str]:
    status = layout.attrs.get("/meta", {}).get("status")
    req = [g.path for g in schema.GROUPS if g.required]
    if status == "ok":
        req += list(EXECUTION_GROUPS)
    return req


def _meta_problems(layout: Layout) -> list[Problem]:
    """Problems of the /meta attributes: absurd dimensions, an unknown status, an execution in
    an out-of-memory profile."""
    problems: list[Problem] = []
    meta = layout.attrs.get("/meta", {})
    for name, hi in (("num_ipus", MAX_IPUS), ("tiles_per_ipu", MAX_TILES), ("replicas", 1 << 20)):
        v = meta.get(name)
        if isinstance(v, numbers.Integral) and not isinstance(v, bool) and not 0 < int(v) <= hi:
            problems.append(
                AbsurdSize(
                    field_path("/meta", name, "attribute"),
                    f"{name} is {int(v)}, outside the plausible range 1..{hi}.",
                )
            )
    status = meta.get("status")
    if "status" in meta and status not in STATUSES:
        problems.append(
            OutOfRange(
                "/meta@status", f"status is {status!r}; it must be one of {', '.join(STATUSES)}."
            )
        )
    if status == "oom":
        for gp in EXECUTION_GROUPS:
            if gp in layout.groups and layout.datasets.get(gp):
                problems.append(
                    Inconsistent(gp, "status is 'oom' but the profile has an execution.")
                )
                break
    return problems


def _table_rows(
    g: schema.Group, dsets: dict[str, tuple], problems: list[Problem]
) -> tuple[int | None, set[str]]:
    """The rows of table ``g`` (the length most of its columns have; None for a group that is
    not a table or has no column) and its columns of another length, each reported."""
    n = None
    short_columns: set[str] = set()
    if not g.table:
        return n, short_columns
    lengths = {
        name: shape[0]
        for name, (shape, _) in dsets.items()
        if len(shape) == 1 and name in {c.name for c in g.columns}
    }
    if lengths:
        n = max(set(lengths.values()), key=list(lengths.values()).count)
        for name, ln in lengths.items():
            if ln != n:
                short_columns.add(name)
                problems.append(
                    WrongShape(
                        field_path(g.path, name),
                        f"column has {ln} rows but the other columns of {g.path} have {n}.",
                    )
                )
    if n is not None and n > MAX_ROWS:
        problems.append(
            AbsurdSize(g.path, f"table claims {n} rows, more than any real profile holds.")
        )
    return n, short_columns


def _attribute_problem(f: schema.Field, fp: str, attrs: dict, optional: bool) -> Problem | None:
    """The problem of attribute ``f`` (missing though required, or of the wrong type)."""
    if f.name not in attrs:
        if not optional:
            return MissingAttribute(fp, f"required attribute {f.name!r} is missing.")
        return None
    if not attr_ok(f, attrs[f.name]):
        return WrongDtype(
            fp,
            f"attribute {f.name!r} should be {f.dtype}, "
            f"got {type(attrs[f.name]).__name__} {attrs[f.name]!r:.60}.",
        )
    return None


def _dataset_problems(
    f: schema.Field, fp: str, shape: tuple, dtype: np.dtype, want: tuple, *, exact: bool
) -> list[Problem]:
    """The problems of dataset ``f`` of ``shape`` and ``dtype`` (expected shape ``want``)."""
    problems: list[Problem] = []
    if not dtype_ok(f.dtype, dtype, exact=exact):
        problems.append(WrongDtype(fp, f"should be {f.dtype}, got {dtype}."))
    if len(shape) != len(want):
        problems.append(
            WrongShape(
                fp,
                f"has {len(shape)} dimension(s) {tuple(shape)}, expected "
                f"{len(want)}: {_shape_text(want)} {tuple(f.shape)}.",
            )
        )
        return problems
    bad = [i for i, (s, w) in enumerate(zip(shape, want)) if w is not None and s != w]
    if bad:
        problems.append(
            WrongShape(
                fp,
                f"has shape {tuple(shape)}, expected {_shape_text(want)} {tuple(f.shape)}.",
            )
        )
    elif shape and math.prod(shape) > MAX_ROWS * 16:
        problems.append(
            AbsurdSize(fp, f"claims shape {tuple(shape)}, more than any real profile holds.")
        )
    return problems


def check_layout(
    layout: Layout,
    *,
    version: tuple[int, int] = schema.FORMAT_VERSION,
    for_writer: bool = False,
) -> list[Problem]:
    """Compare ``layout`` with the schema; return every problem found (never stops early).

    ``for_writer``: checking data handed to the writer (dtype conversion allowed, unknown groups and
    fields rejected, fields the writer fills itself not required). Otherwise a file is checked:
    dtypes must match exactly, unknown groups / fields are tolerated (a newer minor may add them),
    and fields added after the file's version are optional.
    """
    dims = dims_of(layout)
    problems = _meta_problems(layout)

    if for_writer:
        known = set(schema.GROUPS_BY_PATH)
        for gp in sorted(layout.groups - known):
            problems.append(
                MissingGroup(
                    gp, f"unknown group {gp!r}; the schema has {', '.join(sorted(known))}."
                )
            )

    present = layout.groups
    for gp in required_groups(layout):
        if gp not in present:
            why = (
                " (status is 'ok', so the execution is required)" if gp in EXECUTION_GROUPS else ""
            )
            problems.append(MissingGroup(gp, f"required group {gp} is missing{why}."))

    for g in schema.GROUPS:
        if g.path not in present:
            continue
        attrs = layout.attrs.get(g.path, {})
        dsets = layout.datasets.get(g.path, {})
        filled = WRITER_FILLED.get(g.path, ()) if for_writer else ()
        if for_writer:
            known_fields = {f.name for f in g.fields}
            # sub-groups (e.g. /execution/steps under /execution) are not fields
            for name in sorted((set(attrs) | set(dsets)) - known_fields):
                problems.append(
                    MissingDataset(
                        field_path(g.path, name),
                        f"unknown field {name!r} in {g.path}; its fields are "
                        f"{', '.join(f.name for f in g.fields)}.",
                    )
                )
        n, short_columns = _table_rows(g, dsets, problems)
        for f in g.fields:
            optional = (not f.required) or f.since > version or f.name in filled
            fp = field_path(g.path, f.name, f.kind)
            if f.kind == "attribute":
                problem = _attribute_problem(f, fp, attrs, optional)
                if problem is not None:
                    problems.append(problem)
                continue
            if f.name not in dsets:
                if not optional:
                    problems.append(MissingDataset(fp, f"required dataset {f.name!r} is missing."))
                continue
            if f.name in short_columns:
                continue
            shape, dtype = dsets[f.name]
            want = _expected_shape(f, dims, n)
            problems += _dataset_problems(f, fp, shape, dtype, want, exact=not for_writer)
    return problems


def layout_of_data(
    data: dict[str, dict[str, object]],
) -> tuple[Layout, dict[str, dict], list[Problem]]:
    """The layout of a writer ``data`` dict, the fields converted to arrays, and value problems.

    Returns ``(layout, converted, problems)`` where ``converted[group][field]`` is a numpy array (datasets,
    without copying arrays that are already numpy) or the attribute value.
    """
    layout = Layout()
    converted: dict[str, dict] = {}
    problems: list[Problem] = []
    for gp, fields in data.items():
        if not isinstance(fields, dict):
            raise TypeError(f"data[{gp!r}] must be a dict of field name -> value")
        gpn = gp if gp == "/" else "/" + gp.strip("/")
        layout.groups.add(gpn)
        g = schema.GROUPS_BY_PATH.get(gpn)
        attrs: dict[str, object] = {}
        dsets: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        conv: dict[str, object] = {}
        for name, value in fields.items():
            f = None
            if g is not None:
                try:
                    f = g.field(name)
                except KeyError:
                    f = None
            is_attr = (f is not None and f.kind == "attribute") or (
                f is None and (np.isscalar(value) or isinstance(value, dict))
            )
            if is_attr:
                attrs[name] = value.item() if isinstance(value, np.generic) else value
                conv[name] = attrs[name]
            else:
                arr = as_array(value, f)
                dsets[name] = (tuple(arr.shape), arr.dtype)
                conv[name] = arr
                if f is None:
                    continue
                if f.dtype == "str":
                    if arr.dtype.kind == "O" and arr.size:
                        problems += _string_problems(field_path(gpn, name), arr)
                elif dtype_ok(f.dtype, arr.dtype, exact=False):
                    problems += range_problems(gpn, f, arr)
        layout.attrs[gpn] = attrs
        layout.datasets[gpn] = dsets
        converted[gpn] = conv
    return layout, converted, problems


def _string_problems(fp: str, arr: np.ndarray) -> list[Problem]:
    """An object column must hold strings, and HDF5 strings are NUL-terminated UTF-8: refuse
    what is not a string, would be silently cut or cannot encode. (One join checks that every
    value is a string; the value that is not is looked for only then.)"""
    values = arr.ravel().tolist()
    try:
        joined = "\x1f".join(values)
    except TypeError:
        bad = next(x for x in values if not isinstance(x, str))
        return [WrongDtype(fp, f"should hold strings, found {type(bad).__name__} {bad!r:.40}.")]
    if "\x00" in joined:
        row = next(i for i, x in enumerate(arr.ravel()) if "\x00" in x)
        return [WrongDtype(fp, f"string at row {row} contains a NUL character, which HDF5 cuts.")]
    try:
        joined.encode("utf-8")
    except UnicodeEncodeError:
        row = next(i for i, x in enumerate(arr.ravel()) if not _encodes(x))
        return [WrongDtype(fp, f"string at row {row} is not valid Unicode (cannot be UTF-8).")]
    return []


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_array(value: object, f: schema.Field | None) -> np.ndarray:
    """``value`` as a numpy array without copying numpy input; strings as an object array; a
    :class:`profiles.runs.RunRows` as it is (laid out block by block when written)."""
    if isinstance(value, RunRows):
        return value  # type: ignore[return-value]
    if f is not None and f.dtype == "str":
        arr = np.asarray(value)
        if arr.dtype.kind in "US":
            arr = arr.astype(object)
        elif arr.dtype.kind != "O":
            return arr  # reported as WrongDtype
        return arr
    arr = np.asarray(value)
    if arr.size == 0 and f is not None and arr.dtype.kind == "f" and f.dtype != "float64":
        arr = arr.astype(f.dtype)  # an empty list carries no dtype
    return arr


def range_problems(gp: str, f: schema.Field, arr: np.ndarray) -> list[Problem]:
    """Writer input: values that do not fit the schema dtype (checked before converting)."""
    if f.dtype in ("str", "json") or arr.size == 0:
        return []
    target = np.dtype(f.dtype)
    if target.kind in "iu" and arr.dtype.kind in "iu" and arr.dtype != target:
        info = np.iinfo(target)
        lo, hi = arr.min(), arr.max()
        if lo < info.min or hi > info.max:
            return [
                OutOfRange(
                    field_path(gp, f.name),
                    f"values {lo}..{hi} do not fit {f.dtype} ({info.min}..{info.max}).",
                )
            ]
    if target.kind == "b" and arr.dtype.kind in "iu" and (arr.min() < 0 or arr.max() > 1):
        return [OutOfRange(field_path(gp, f.name), "boolean column holds values other than 0/1.")]
    return []
