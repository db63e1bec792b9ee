"""The profile's tables as Apache Arrow, built lazily for SQL (``analyser.query``).

Each table is a function of the open profile and of the columns a query needs; its numeric
columns are the profile's HDF5 columns read into numpy and wrapped by Arrow without a copy, and
its enumerated columns are Arrow dictionary arrays whose indices are the stored codes (again no
copy) and whose dictionary is the enumeration's names, so ``type = 'OnTileExecute'`` works in SQL
while 10,000,000 steps stay 10,000,000 bytes. Only the tables a query names are built, and of
``steps`` only the columns it names (:func:`needed_columns`).

The tables (``TABLES``; docs/analysis.md, "SQL over a profile"):

* ``steps``: every executed step (step, ipu, start, cycles, type, program, name, micro_batch,
  stage, phase, iteration, bytes_in, bytes_out, bytes, dest);
* ``operations``, ``variables``, ``programs``, ``compute_sets``: the graph and the program
  tree, one row per entry with its row number as ``id`` and enumerations as names;
* ``memory``: bytes per IPU, tile and memory category (long form, zero categories included);
* ``tiles``: per IPU and tile: total, gaps, always-live, peak not-always-live bytes, SRAM;
* ``liveness``: not-always-live bytes per IPU and liveness step, with the step's name, program,
  operation and the IPU's always-live bytes;
* ``host``: the host's timeline of one host call (lane, kind, start, cycles, samples);
* ``runs``: one row per profile: its key figures (status, fits, throughput, total cycles, peak
  tile memory...) and every run option (lists and mappings as JSON text).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from analyser.core.source import Source
from profiles import schema
from profiles.errors import ProfileError


def _names(values: np.ndarray) -> pa.Array:
    return pa.array(
        [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values.tolist()],
        pa.string(),
    )


def _dictionary(codes: np.ndarray, names: pa.Array | tuple[str, ...]) -> pa.Array:
    """Codes (any integer dtype) as an Arrow dictionary array of ``names`` (no copy of the
    codes when they are already a signed or unsigned integer array)."""
    if not isinstance(names, pa.Array):
        names = pa.array(list(names), pa.string())
    codes = np.asarray(codes)
    if codes.dtype.kind not in "iu":
        codes = codes.astype(np.int32)
    if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
        # -1 means "none" in the format: such a row has no name (NULL)
        mask = (codes < 0) | (codes >= len(names))
        idx = pa.array(np.where(mask, 0, codes).astype(codes.dtype), mask=mask)
    else:
        idx = pa.array(codes)
    return pa.DictionaryArray.from_arrays(idx, names)


def _table_columns(src: Source, path: str) -> dict[str, pa.Array]:
    """Every stored column of a schema table, enumerations as names, with ``id`` first."""
    g = schema.group(path)
    n = src.n_rows(path)
    out: dict[str, pa.Array] = {"id": pa.array(np.arange(n, dtype=np.int64))}
    enums = src.profile.enums
    for c in g.columns:
        if not src.has(f"{path}/{c.name}"):
            continue
        values = src.column(path, c.name)
        if c.dtype == "str":
            out[c.name] = _names(values)
        elif c.enum is not None:
            out[c.name] = _dictionary(values, enums[c.enum])
        else:
            out[c.name] = pa.array(values)
    return out


def _plain(path: str) -> Callable[[Source, frozenset[str] | None], pa.Table]:
    def build(src: Source, columns: frozenset[str] | None) -> pa.Table:
        del columns  # small tables: read whole
        if not src.has(path):
            return pa.table(_empty(path))
        return pa.table(_table_columns(src, path))

    return build


def _empty(path: str) -> dict[str, pa.Array]:
    g = schema.group(path)
    out: dict[str, pa.Array] = {"id": pa.array([], pa.int64())}
    for c in g.columns:
        if c.dtype == "str" or c.enum is not None:
            out[c.name] = pa.array([], pa.string())
        else:
            out[c.name] = pa.array(np.zeros(0, c.dtype))
    return out


#: Columns of ``steps`` in order; ``step`` (the row number), ``name`` (the program's name) and
#: ``bytes`` (bytes_in + bytes_out) are derived.
STEP_COLUMNS: tuple[str, ...] = (
    "step",
    "ipu",
    "start",
    "cycles",
    "type",
    "program",
    "name",
    "micro_batch",
    "stage",
    "phase",
    "iteration",
    "bytes_in",
    "bytes_out",
    "bytes",
    "dest",
)
_STORED_FOR = {"name": ("program",), "bytes": ("bytes_in", "bytes_out"), "step": ()}
_ENUM_OF = {"type": "program_type", "phase": "phase", "dest": "destination"}


def _steps(src: Source, columns: frozenset[str] | None) -> pa.Table:
    wanted = [c for c in STEP_COLUMNS if columns is None or c in columns]
    if not wanted:  # count(*) alone: one narrow column keeps the row count
        wanted = ["type"]
    n = src.n_steps
    stored = sorted({s for c in wanted for s in _STORED_FOR.get(c, (c,))})
    raw = {c: src.column("/execution/steps", c) for c in stored} if n else {}
    enums = src.profile.enums
    out: dict[str, pa.Array] = {}
    for c in wanted:
        if c == "step":
            out[c] = pa.array(np.arange(n, dtype=np.int64))
        elif not n:
            out[c] = pa.array([], pa.string() if c in _ENUM_OF or c == "name" else pa.int64())
        elif c == "name":
            names = _names(src.column("/programs/nodes", "name"))
            out[c] = _dictionary(raw["program"], names)
        elif c == "bytes":
            out[c] = pa.array(raw["bytes_in"].astype(np.int64) + raw["bytes_out"])
        elif c in _ENUM_OF:
            out[c] = _dictionary(raw[c], enums[_ENUM_OF[c]])
        else:
            out[c] = pa.array(raw[c])
    return pa.table(out)


def _grid(n_ipus: int, n_tiles: int, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    ipu = np.repeat(np.arange(n_ipus, dtype=np.int16), n_tiles * k)
    tile = np.tile(np.repeat(np.arange(n_tiles, dtype=np.int32), k), n_ipus)
    return ipu, tile


def _memory(src: Source, columns: frozenset[str] | None) -> pa.Table:
    del columns
    by_cat = src.array("/memory/by_category").astype(np.int64, copy=False)
    n_ipus, n_tiles, k = by_cat.shape
    ipu, tile = _grid(n_ipus, n_tiles, k)
    cat = np.tile(np.arange(k, dtype=np.uint8), n_ipus * n_tiles)
    return pa.table(
        {
            "ipu": ipu,
            "tile": tile,
            "category": _dictionary(cat, schema.MEMORY_CATEGORIES[:k]),
            "bytes": by_cat.reshape(-1),
        }
    )


def _tiles(src: Source, columns: frozenset[str] | None) -> pa.Table:
    del columns
    total = src.array("/memory/total").astype(np.int64, copy=False)
    n_ipus, n_tiles = total.shape
    by_live = src.array("/memory/by_liveness").astype(np.int64, copy=False)
    ipu, tile = _grid(n_ipus, n_tiles)
    return pa.table(
        {
            "ipu": ipu,
            "tile": tile,
            "total": total.reshape(-1),
            "gaps": src.array("/memory/gaps").astype(np.int64, copy=False).reshape(-1),
            "always_live": by_live[:, :, 0].reshape(-1),
            "not_always_live": by_live[:, :, 1].reshape(-1),
            "sram": np.full(n_ipus * n_tiles, int(src.meta["sram_per_tile"]), np.int64),
        }
    )


def _liveness(src: Source, columns: frozenset[str] | None) -> pa.Table:
    del columns
    nal = src.array("/liveness/not_always_live").astype(np.int64, copy=False)
    al = src.array("/liveness/always_live").astype(np.int64, copy=False)
    n_ipus, n_steps = nal.shape if nal.ndim == 2 else (0, 0)
    path = "/liveness/steps"
    if src.n_rows(path) != n_steps:
        raise ProfileError(
            f"profile {src.path}: /liveness/not_always_live has {n_steps} steps, "
            f"{path} has {src.n_rows(path)}."
        )
    names = _names(src.column(path, "name"))
    reps = np.tile(np.arange(n_steps, dtype=np.int64), n_ipus)
    return pa.table(
        {
            "ipu": np.repeat(np.arange(n_ipus, dtype=np.int16), n_steps),
            "step": reps,
            "name": names.take(pa.array(reps)),
            "program": np.tile(src.column(path, "program"), n_ipus),
            "op": np.tile(src.column(path, "op"), n_ipus),
            "step_ipu": np.tile(src.column(path, "ipu"), n_ipus),
            "not_always_live": nal.reshape(-1),
            "always_live": np.repeat(al[:n_ipus], n_steps),
        }
    )


def _host(src: Source, columns: frozenset[str] | None) -> pa.Table:
    del columns
    path = "/execution/host"
    cols = ("lane", "kind", "start", "cycles", "samples")
    if not src.has(path):
        return pa.table(
            {
                "lane": pa.array([], pa.string()),
                "kind": pa.array([], pa.string()),
                **{c: pa.array([], pa.int64()) for c in cols[2:]},
            }
        )
    out = _table_columns(src, path)
    del out["id"]
    return pa.table(out)


#: Key figures of a run (``runs``), from the profile's summary, with their Arrow types.
_RUN_FIGURES: dict[str, pa.DataType] = {
    "status": pa.string(),
    "model": pa.string(),
    "num_ipus": pa.int64(),
    "replicas": pa.int64(),
    "tiles_per_ipu": pa.int64(),
    "n_steps": pa.int64(),
    "total_cycles": pa.int64(),
    "device_cycles": pa.int64(),
    "host_inclusive_cycles": pa.int64(),
    "cycles_per_sample": pa.float64(),
    "samples": pa.int64(),
    "throughput": pa.float64(),
    "device_throughput": pa.float64(),
    "host_seconds": pa.float64(),
    "max_tile_memory": pa.int64(),
    "oom_tiles": pa.int64(),
    "engine_version": pa.string(),
    "format_version": pa.string(),
}


def _cell(value: object, kind: pa.DataType | None = None) -> pa.Array:
    """One value as a one-row Arrow array: of ``kind`` when it converts, lists and mappings as
    JSON text, anything else Arrow cannot type as text."""
    import json

    if isinstance(value, (list, dict)):
        return pa.array([json.dumps(value, sort_keys=True)], pa.string())
    if kind is not None:
        try:
            return pa.array([value], kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            pass
    try:
        return pa.array([value])
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return pa.array([str(value)], pa.string())


def _runs(src: Source, columns: frozenset[str] | None) -> pa.Table:
    """One row: the profile (its file name), its key figures and every run option."""
    del columns  # one row
    summary = src.profile.summary()
    out: dict[str, pa.Array] = {"profile": pa.array([src.path.name or str(src.path)])}
    for name, kind in _RUN_FIGURES.items():
        out[name] = _cell(summary.get(name), kind)
    out["fits"] = pa.array([summary.get("status") != "oom"])
    per_ipu = summary.get("memory_per_ipu")
    out["memory_bytes"] = _cell(sum(per_ipu) if per_ipu else None, pa.int64())
    config = src.meta.get("run_config")
    for name, value in (config if isinstance(config, dict) else {}).items():
        if isinstance(name, str) and name not in out:
            out[name] = _cell(value)
    return pa.table(out)


@dataclass(frozen=True)
class TableSpec:
    """One SQL table: its builder and a one-line description (``analyse query --help``)."""

    build: Callable[[Source, frozenset[str] | None], pa.Table]
    doc: str
    needs_execution: bool = False
    #: the builder reads only the columns a query names
    lazy_columns: bool = False


TABLES: dict[str, TableSpec] = {
    "steps": TableSpec(
        _steps,
        "every executed step: step, ipu, start, cycles, type, program, name, micro_batch, "
        "stage, phase, iteration, bytes_in, bytes_out, bytes, dest",
        needs_execution=True,
        lazy_columns=True,
    ),
    "operations": TableSpec(_plain("/graph/operations"), "operations of the graph (id, name, ...)"),
    "variables": TableSpec(_plain("/graph/variables"), "variables with liveness and tiles"),
    "programs": TableSpec(_plain("/programs/nodes"), "the program tree (id, name, type, ...)"),
    "compute_sets": TableSpec(_plain("/graph/compute_sets"), "compute sets (id, name, op, ...)"),
    "memory": TableSpec(_memory, "bytes per ipu, tile and memory category"),
    "tiles": TableSpec(_tiles, "per ipu and tile: total, gaps, always_live, not_always_live"),
    "liveness": TableSpec(_liveness, "not-always-live bytes per ipu and liveness step"),
    "host": TableSpec(_host, "the host's timeline of one host call (lane, kind, start, ...)"),
    "runs": TableSpec(
        _runs,
        "one row per profile: profile, status, fits, throughput, total_cycles, "
        "max_tile_memory, ... and every run option (micro_batch_size, precision, ...)",
    ),
}

_IDENT = re.compile(r'"((?:[^"]|"")*)"|([A-Za-z_][A-Za-z0-9_$]*)|(\*)|(\S)')
_STRING_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.S)
#: After one of these a ``*`` projects every column (``SELECT *``, ``t.*``, ``x, *``).
_STAR_AFTER = frozenset({"select", "distinct", "all", ",", ".", "by"})


def tokens(sql: str) -> list[str]:
    """The query's identifiers (lower case, quotes removed) and symbols, without its string
    literals and comments."""
    text = _STRING_OR_COMMENT.sub(" ", sql)
    out: list[str] = []
    for m in _IDENT.finditer(text):
        quoted, word, star, other = m.groups()
        if quoted is not None:
            out.append(quoted.replace('""', '"').lower())
        else:
            out.append((word or star or other).lower())
    return out


def needed_columns(sql: str) -> frozenset[str] | None:
    """The step columns a query may use: every column whose name appears in it as an
    identifier, or None (all columns) when it projects ``*``, uses ``COLUMNS(...)`` or a
    ``NATURAL`` join (which use columns without naming them)."""
    toks = tokens(sql)
    if "columns" in toks or "natural" in toks:
        return None
    for i, t in enumerate(toks):
        if t == "*" and i and toks[i - 1] in _STAR_AFTER:
            return None
        if t == "*" and i == 0:
            return None
    return frozenset(toks) & frozenset(STEP_COLUMNS)


def tables_named(sql: str) -> list[str]:
    """The profile tables whose names appear in the query (each is built only if named)."""
    toks = set(tokens(sql))
    return [name for name in TABLES if name in toks]


def _walk(node: object, found: dict[str, set]) -> None:
    """Collect from DuckDB's parsed query (``json_serialize_sql``): base tables and their
    aliases, column names (single-part ones apart), USING columns, stars, natural joins."""
    if isinstance(node, list):
        for x in node:
            _walk(x, found)
        return
    if not isinstance(node, dict):
        return
    cls, typ = node.get("class"), node.get("type")
    if cls == "COLUMN_REF":
        names = [str(n).lower() for n in node.get("column_names", [])]
        if names:
            found["columns"].add(names[-1])
            if len(names) == 1:
                found["single"].add(names[0])
    elif cls == "STAR":
        found["star"].add("*")
    elif typ == "BASE_TABLE":
        name = str(node.get("table_name", "")).lower()
        found["tables"].add(name)
        if name == "steps":
            found["aliases"].add(str(node.get("alias") or "steps").lower())
    if node.get("ref_type") == "NATURAL":
        found["star"].add("natural")
    for c in node.get("using_columns", []) or []:
        found["columns"].add(str(c).lower())
    for v in node.values():
        if isinstance(v, (dict, list)):
            _walk(v, found)


def plan_from_ast(text: str) -> tuple[list[str], frozenset[str] | None] | None:
    """(tables named, step columns needed or None for all) from ``json_serialize_sql``'s
    output, or None when it cannot be read (the caller falls back to :func:`tables_named` and
    :func:`needed_columns`). Every column name the query mentions anywhere counts (a superset);
    a star, a natural join, or a steps row used whole (``SELECT s FROM steps s``) needs all."""
    import json

    try:
        doc = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("error") or not doc.get("statements"):
        return None
    found: dict[str, set] = {k: set() for k in ("columns", "single", "star", "tables", "aliases")}
    _walk(doc["statements"], found)
    tables = [name for name in TABLES if name in found["tables"]]
    if found["star"] or found["single"] & (found["aliases"] | {"steps"}):
        return tables, None
    return tables, frozenset(found["columns"]) & frozenset(STEP_COLUMNS)
