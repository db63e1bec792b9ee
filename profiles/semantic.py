"""Semantic rules of the profile format, beside the schema: what the values must mean.

The schema (``profiles.schema``) says which datasets exist, their dtypes and shapes. A file can
satisfy all of it, with valid HDF5 checksums, and still hold values no analysis can use: a clock
of 0 Hz, ``NaN`` cycles, text where a number belongs, an executed step whose program id is
``2**31 - 1``, a liveness peak outside the liveness steps, a program tree whose parent links form
a loop, or a dataset that declares 10^9 rows it never wrote. This module states those rules once;
they are enforced in three places:

* on open (:func:`attribute_problems`, :func:`storage_problems`): the small metadata attributes
  (types, finiteness, ranges) and every dataset's declared size against the bytes it stores and
  against the memory this machine has, all without reading bulk data;
* on read (:func:`column_problem`): every column the reader returns is checked for the rows read
  (ids against the tables they index, enumeration codes, IPU and tile numbers, counts and sizes,
  finiteness), a vectorised min / max that costs a fraction of the read itself;
* in ``validate`` (:mod:`profiles.validation`): the same column rules over whole columns, in
  blocks, reported as typed problems.

An analysis therefore never sees a value that breaks these rules: it gets one
:class:`~profiles.errors.ProfileError` sentence naming the file, the dataset and the rule.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import dataclass

import numpy as np

from profiles import schema
from profiles.atomic import available_memory, fmt_size
from profiles.problems import AbsurdSize, DanglingReference, OutOfRange, Problem, WrongDtype

#: Longest name (characters) of any string column: real Poplar / framework debug names are a few
#: hundred characters; a megabyte-long name only asks the GUI's tree for gigabytes of layout.
MAX_NAME_CHARS = 16_384
#: Pipeline stages per IPU above which a stage number is not real (PopART places one or a few
#: stages on each IPU; the engine one per IPU).
MAX_STAGES_PER_IPU = 16
#: Largest plausible per-execution count (cycles, bytes, flops, repeats): 2^53, where float64
#: stops holding integers exactly; above it sums and shares silently lose meaning.
MAX_COUNT = 2**53
#: Tile clock range: 1 MHz .. 100 GHz (IPUs run at 1.33-1.85 GHz).
CLOCK_RANGE = (1e6, 1e11)
#: SRAM per tile: 1 KiB .. 1 GiB (an IPU tile has 256-624 KiB).
SRAM_RANGE = (1024, 2**30)
#: Replicas: a Pod holds at most a few thousand IPUs.
MAX_REPLICAS = 1 << 16
#: A dataset this large (uncompressed) that stores less than 1/SPARSE_RATIO of it is a size claim,
#: not data (unwritten chunks): compression of real profile data is nowhere near that ratio.
SPARSE_BYTES = 256 * 2**20
SPARSE_RATIO = 2000


def read_limit() -> int:
    """Most bytes one read may allocate: half of the memory available (``IPU_ANALYSER_READ_LIMIT``
    in bytes overrides it), so a file that declares more fails in one sentence, not in the
    kernel's out-of-memory killer."""
    env = os.environ.get("IPU_ANALYSER_READ_LIMIT", "")
    if env.isdigit():
        return int(env)
    return max(READ_LIMIT_FLOOR, available_memory() // 2)


#: :func:`read_limit` is never below this (without ``IPU_ANALYSER_READ_LIMIT``).
READ_LIMIT_FLOOR = 256 * 2**20


def within_read_limit(need: int) -> int | None:
    """None when a read of ``need`` bytes is allowed, else the :func:`read_limit` it exceeds.
    A read under the floor needs no look at the machine's free memory (``available_memory``
    reads /proc and the cgroup files: about 1.5 ms, once per dataset read)."""
    if need <= READ_LIMIT_FLOOR and not os.environ.get("IPU_ANALYSER_READ_LIMIT", "").isdigit():
        return None
    limit = read_limit()
    return limit if need > limit else None


# -- attributes ---------------------------------------------------------------------------------
def _is_int(v: object) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)


def _is_real(v: object) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_)


@dataclass(frozen=True)
class AttrRule:
    kind: str  # "int" | "float" | "json-dict" | "json-list"
    lo: float | None = None
    hi: float | None = None
    meaning: str = ""


ATTRIBUTE_RULES: dict[str, dict[str, AttrRule]] = {
    "/meta": {
        "clock_hz": AttrRule("float", *CLOCK_RANGE, "the tile clock"),
        "sram_per_tile": AttrRule("int", *SRAM_RANGE, "SRAM bytes per tile"),
        "replicas": AttrRule("int", 1, MAX_REPLICAS, "the replication factor"),
        "samples_per_step": AttrRule("int", 0, MAX_COUNT, "samples per run step"),
        "run_config": AttrRule("json-dict", meaning="the run configuration"),
        "target": AttrRule("json-dict", meaning="the target"),
        "notes": AttrRule("json-list", meaning="the notes"),
    },
    "/execution": {
        "total_cycles": AttrRule("int", 0, MAX_COUNT, "total cycles"),
        "device_cycles": AttrRule("int", 0, MAX_COUNT, "device cycles"),
        "samples": AttrRule("int", 0, MAX_COUNT, "samples"),
        "host_seconds": AttrRule("float", 0, 1e9, "host seconds"),
        "cycles_per_sample": AttrRule("float", 0, MAX_COUNT, "cycles per sample"),
        "throughput": AttrRule("float", 0, 1e15, "throughput"),
    },
}


def _json_problem(value: object, want: type) -> str | None:
    try:
        doc = json.loads(value) if isinstance(value, str | bytes) else value
    except ValueError:
        return "is not valid JSON"
    if not isinstance(doc, want):
        return f"is JSON {type(doc).__name__}, expected {'an object' if want is dict else 'a list'}"
    return _json_numbers(doc)


def _json_numbers(doc: object, depth: int = 0) -> str | None:
    """Non-finite numbers anywhere in a JSON document (json accepts NaN / Infinity)."""
    if depth > 32:
        return "is nested more than 32 levels deep"
    if isinstance(doc, float) and not math.isfinite(doc):
        return f"holds the non-finite number {doc}"
    if isinstance(doc, dict):
        items = list(doc.values())
    elif isinstance(doc, list):
        items = doc
    else:
        return None
    for v in items:
        bad = _json_numbers(v, depth + 1)
        if bad:
            return bad
    return None


def attribute_problems(group: str, attrs: dict[str, object]) -> list[Problem]:
    """Problems of a group's attributes against :data:`ATTRIBUTE_RULES` (absent ones are the
    schema's business)."""
    out: list[Problem] = []
    for name, rule in ATTRIBUTE_RULES.get(group, {}).items():
        if name not in attrs:
            continue
        v = attrs[name]
        where = f"{group}@{name}"
        if rule.kind in ("json-dict", "json-list"):
            bad = _json_problem(v, dict if rule.kind == "json-dict" else list)
            if bad:
                out.append(WrongDtype(where, f"{rule.meaning} {bad}."))
            continue
        ok_type = _is_int(v) if rule.kind == "int" else _is_real(v)
        if not ok_type:
            want = "an integer" if rule.kind == "int" else "a number"
            out.append(WrongDtype(where, f"{rule.meaning} is {_show(v)}, expected {want}."))
            continue
        x = float(v)  # type: ignore[arg-type]
        if (
            not math.isfinite(x)
            or (rule.lo is not None and x < rule.lo)
            or (rule.hi is not None and x > rule.hi)
        ):
            out.append(
                OutOfRange(
                    where,
                    f"{rule.meaning} is {_show(v)}, outside the plausible range "
                    f"{rule.lo:g}..{rule.hi:g}.",
                )
            )
    return out


def _show(v: object) -> str:
    if isinstance(v, np.ndarray):
        return f"an array of shape {v.shape}"
    text = repr(v.item() if isinstance(v, np.generic) else v)
    return text if len(text) <= 40 else text[:37] + "..."


# -- columns ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dims:
    """What the column rules compare with: the profile's sizes."""

    ipus: int
    tiles: int
    rows: dict[str, int]  # table path -> rows

    def table_rows(self, table: str) -> int | None:
        """Rows of ``table`` as checked (None when not read)."""
        return self.rows.get(table)


#: Non-negative counts (cycles, bytes, flops...) per column, besides ids and enums.
_COUNTS = {
    "/graph/operations": ("flops", "bytes_in", "bytes_out", "cycles", "code_bytes", "temp_bytes"),
    "/graph/variables": ("bytes", "remote_bytes"),
    "/graph/vertex_types": ("code_bytes", "state_bytes", "instances"),
    "/graph/compute_sets": ("vertices",),
    "/programs/nodes": ("cycles", "bytes", "code_bytes"),
    "/execution/steps": ("start", "cycles", "bytes_in", "bytes_out"),
    "/memory": ("by_category", "by_region", "by_liveness", "total", "gaps"),
    "/liveness": ("not_always_live", "per_tile", "per_tile_rows", "always_live"),
    "/programs": ("tile_cycles",),
    "/execution": ("run_starts", "max_step_cycles"),
}


def bounds(group: str, name: str, dims: Dims) -> tuple[float, float, str] | None:
    """``(lo, hi_exclusive, what)`` for an integer column, ``None`` when no rule applies or the
    table it indexes is absent."""
    try:
        f = schema.group(group).field(name)
    except KeyError:
        return None
    if f.enum is not None:
        return 0, len(schema.ENUMS[f.enum]), f"codes of enumeration {f.enum!r}"
    if f.ref is not None:
        n = dims.table_rows(f.ref)
        if n is None:
            return None
        lo = -1 if "-1" in f.doc else 0
        if group == "/execution/steps" or (group, name) == ("/graph/compute_sets", "program"):
            lo = 0
        return lo, n, f"row ids of {f.ref}" + (" (or -1)" if lo < 0 else "")
    if name == "ipu":
        lo = 0 if group in ("/execution/steps", "/graph/operations", "/graph/variables") else -1
        if group == "/graph/compute_sets":
            lo = 0
        return lo, dims.ipus, "IPU numbers" + (" (or -1)" if lo < 0 else "")
    if name in ("tile_start", "tile_count", "tiles_used"):
        return 0, dims.tiles + 1, "tile numbers"
    if name == "peak_step":
        n = dims.table_rows("/liveness/steps")
        return (0, max(n, 1), "row ids of /liveness/steps") if n is not None else None
    if name == "stage":
        return -1, dims.ipus * MAX_STAGES_PER_IPU, "pipeline stages (or -1)"
    if name in ("micro_batch", "iteration"):
        return -1 if name == "micro_batch" else 0, 2**31 - 1, f"{name.replace('_', '-')} numbers"
    if name == "repeat":
        return 1, MAX_COUNT, "repeat counts"
    if name in _COUNTS.get(group, ()):
        return 0, MAX_COUNT, "counts (bytes, cycles)"
    return None


def column_problem(
    group: str,
    name: str,
    values: np.ndarray,
    dims: Dims,
    row0: int | np.ndarray = 0,
) -> Problem | None:
    """The first rule ``values`` (rows of column ``group/name``, the first at row ``row0`` or at
    the rows listed in ``row0``) break, or ``None``."""
    where = f"{group.rstrip('/')}/{name}"
    if values.size == 0:
        return None
    kind = values.dtype.kind
    if kind == "O":
        if group in _NAMED and values.ndim == 1:
            longest = max(map(len, values.tolist()))
            if longest > MAX_NAME_CHARS:
                return AbsurdSize(
                    where,
                    f"holds a name of {longest:,} characters (at most {MAX_NAME_CHARS:,} are "
                    "plausible).",
                )
        return None
    if kind == "f":
        finite = np.isfinite(values)
        if not finite.all():
            return OutOfRange(where, f"{int((~finite).sum())} value(s) are NaN or infinite.")
        if name == "tile_balance" and (values.min() < 0 or values.max() > 1):
            return OutOfRange(where, "tile balance outside 0..1.")
        return None
    if kind not in "iu":
        return None
    if name == "parent" and group == "/programs/nodes":
        rows = (
            np.arange(row0, row0 + values.size)
            if isinstance(row0, int | np.integer)
            else np.asarray(row0)
        )
        bad = (values < -1) | (values >= rows)
        if bad.any():
            i = int(np.argmax(bad))
            return DanglingReference(
                where,
                f"row {int(rows[i])} names parent {int(values[i])}; a parent precedes its "
                "children (pre-order), so the tree cannot loop.",
            )
        return None
    if name == "per_tile_ipu_offsets" and values.ndim == 1:
        if values[0] != 0 or (np.diff(values) < 0).any():
            return OutOfRange(where, "row offsets must start at 0 and never decrease.")
        return None
    b = bounds(group, name, dims)
    if b is None:
        return None
    lo, hi, what = b
    vmin, vmax = int(values.min()), int(values.max())
    if vmin >= lo and vmax < hi:
        return None
    bad = (values < lo) | (values >= hi)
    count = int(np.count_nonzero(bad))
    first = int(np.argmax(bad.reshape(-1)))
    at = (
        (row0 + first)
        if isinstance(row0, int | np.integer)
        else int(np.asarray(row0).reshape(-1)[first])
    )
    make = DanglingReference if "row ids" in what else OutOfRange
    hi_text = f"{int(hi) - 1:,}" if hi < MAX_COUNT else "2^53"
    return make(
        where,
        f"{count} value(s) outside {what} {int(lo)}..{hi_text} (values {vmin}..{vmax}, first at "
        f"{'row' if values.ndim == 1 else 'element'} {at}).",
    )


#: Tables whose string columns are names shown in tables, trees and charts.
_NAMED = {
    "/graph/operations",
    "/graph/variables",
    "/graph/vertex_types",
    "/graph/compute_sets",
    "/liveness/steps",
    "/programs/nodes",
}


# -- storage ------------------------------------------------------------------------------------
def storage_problem(
    path: str, shape: tuple[int, ...], itemsize: int, stored: int
) -> Problem | None:
    """A dataset whose declared size is not real (it stores almost nothing of it) or more than
    this machine could hold."""
    logical = math.prod(shape) * itemsize
    if logical >= SPARSE_BYTES and stored * SPARSE_RATIO < logical:
        return AbsurdSize(
            path,
            f"declares shape {tuple(shape)} ({fmt_size(logical)}) but stores only "
            f"{fmt_size(stored)}; the size is not real.",
        )
    return None


__all__ = [
    "ATTRIBUTE_RULES",
    "Dims",
    "attribute_problems",
    "available_memory",
    "bounds",
    "column_problem",
    "read_limit",
    "storage_problem",
]
