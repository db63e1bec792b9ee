"""Reading a tune folder as untrusted input: typed checks before anything uses it.

A tune folder (``tune.json`` + ``results.parquet`` + profiles) may have been edited, damaged or
crafted. :func:`read_folder` checks it all before the report or the GUI sees it, each problem one
sentence naming the file and the field: both files regular, inside the folder (a link out of
it is refused before it is opened: :func:`in_folder`) and of bounded size (tune.json at
most :data:`META_LIMIT`, results.parquet at most :data:`MAX_ROWS` rows, counted from the Parquet
footer before any row is read), tune.json an object of the typed shape :class:`TuneMeta`
(integer ids, a ``dimensions`` table...), the table's key columns present with their types, the
ids unique, every id tune.json names a row of the table, every option it names a column, and
every profile it names (``files``, ``best[].file``) a plain name inside the folder.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    ValidationError,
)

from profiles.errors import UserFacingError
from profiles.inputs import InputPathError, inside, read_regular, regular_stat

#: Largest tune.json read (a tune of the largest grid writes tens of kB).
META_LIMIT = 4 << 20
#: Most rows a results table may have: the largest grid a tune runs (``space.MAX_GRID``) plus
#: the start configuration.
MAX_ROWS = 100_001
#: Largest results.parquet read (100,001 rows of the real columns take a few MB).
TABLE_LIMIT = 512 << 20
#: Columns the report and the GUI read, with the kind each must have ("i" integer, "n" number,
#: "b" boolean, "s" text).
COLUMNS: dict[str, str] = {
    "id": "i",
    "origin": "s",
    "status": "s",
    "message": "s",
    "feasible": "b",
    "pareto": "b",
    "rank": "n",
    "throughput_samples_per_s": "n",
    "cycles_per_sample": "n",
    "max_tile_memory_bytes": "n",
    "headroom_bytes": "n",
    "peak_memory_bytes": "n",
    "oom_tiles": "n",
}
KIND_WORDS = {"i": "whole numbers", "n": "numbers", "b": "true / false", "s": "text"}


class TuneResultsError(UserFacingError):
    """A folder or file that is not a tune's results, or a tune folder that cannot be used (one
    sentence naming the file and the problem)."""


TuneFolderError = TuneResultsError


class BestEntry(BaseModel):
    """One of ``best``: a profile copied into the folder and the row it belongs to."""

    model_config = ConfigDict(extra="allow")
    file: str
    id: StrictInt


_Text = Annotated[str, StringConstraints(max_length=2000)]
_Float = Annotated[float, Field(allow_inf_nan=False)]
_Count = Annotated[StrictInt, Field(ge=0)]


class IntervalMeta(BaseModel):
    """An Interval object (docs/report-schema.md) as the split report stores it."""

    model_config = ConfigDict(extra="allow")
    value: _Float | None = None
    low: _Float | None = None
    high: _Float | None = None
    level: _Float | None = None
    note: _Text = ""


class MemoryMeta(BaseModel):
    """A memory statement (analyser.core.intervals.memory_statement)."""

    model_config = ConfigDict(extra="allow")
    statement: _Text = ""


class SplitStage(BaseModel):
    """One pipeline stage of a split in ``auto_split``."""

    model_config = ConfigDict(extra="allow")
    stage: Annotated[StrictInt, Field(ge=0, le=1023)]
    cycles: _Count | None = None
    cycles_interval: IntervalMeta = IntervalMeta()
    max_tile_bytes: _Count
    ipu_bytes: _Count = 0
    oom_tiles: _Count = 0
    memory: MemoryMeta = MemoryMeta()


class SplitSide(BaseModel):
    """The user's or the chosen split in ``auto_split``."""

    model_config = ConfigDict(extra="allow")
    id: StrictInt
    split_points: list[Annotated[str, StringConstraints(max_length=500)]] = Field(max_length=1023)
    proportions: list[_Float] = Field(max_length=1024)
    fits: StrictBool
    throughput_samples_per_s: _Float | None = None
    throughput_interval: IntervalMeta = IntervalMeta()
    balance: _Float | None = None
    stages: list[SplitStage] = Field(max_length=1024)


class AutoSplitMeta(BaseModel):
    """``auto_split`` of tune.json: the split search's report (analyser.sim.tune.autosplit)."""

    model_config = ConfigDict(extra="allow")
    budget: _Count
    tried: _Count
    blocks: _Count
    stages: _Count
    proportions: list[_Float] = Field(max_length=1024)
    partitions_scored: _Count = 0
    model_basis: _Text = ""
    phases: list[_Text] = Field(default=[], max_length=64)
    user: SplitSide
    chosen: SplitSide
    throughput_change: IntervalMeta = IntervalMeta()


class TuneMeta(BaseModel):
    """The typed shape of tune.json (what the report and the GUI read)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_: str = Field(alias="schema")
    config_file: str | None = None
    start: dict[str, Any]
    dimensions: dict[str, list[Any]] = Field(min_length=1)
    constraints: list[str]
    objective: str
    objective_label: str = ""
    strategy: str
    space_size: StrictInt | None = None
    tried: StrictInt = Field(ge=0)
    simulations: StrictInt = Field(default=0, ge=0)
    seconds: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    interrupted: StrictBool = False
    engine: str = ""
    files: dict[str, str] = {}
    best: list[BestEntry] = []
    best_id: StrictInt | None = None
    start_id: StrictInt
    diff: dict[str, list[Any]] = {}
    auto_split: AutoSplitMeta | None = None


def _meta_problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]).replace("schema_", "schema") or "the file"
    if err["type"] == "missing":
        return f"has no {loc!r}"
    value = repr(err.get("input"))
    value = value if len(value) <= 60 else value[:57] + "..."
    return f"{loc!r} is {value}: {err['msg'].lower()}"


def in_folder(folder: Path, name: str, what: str) -> Path:
    """``folder / name`` with links resolved, refused (one sentence) when it is a link that
    leaves the folder: a crafted folder's tune.json linking to another file would have that
    file read (and its values quoted in the error messages)."""
    path = folder / name
    target = inside(folder, name)
    if target is None:
        raise TuneFolderError(
            f"{what} is a link out of the tune folder; refusing to follow it (copy the file "
            "into the folder instead)."
        )
    return path if not os.path.islink(path) else target


def read_meta(folder: Path, schema: str) -> dict[str, Any]:
    """tune.json of ``folder`` checked against :class:`TuneMeta` (as a plain dict)."""
    path = folder / "tune.json"
    what = f"tune results {str(path)!r}"
    try:
        raw = read_regular(
            in_folder(folder, "tune.json", what),
            what,
            TuneFolderError,
            META_LIMIT,
            "(a tune writes tens of kB.)",
        )
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TuneFolderError(f"{what} is not text (not UTF-8).") from None
    except RecursionError:
        raise TuneFolderError(f"{what} nests arrays or objects too deeply.") from None
    except json.JSONDecodeError as exc:
        raise TuneFolderError(f"{what} is not JSON ({exc.msg} at line {exc.lineno}).") from None
    if not isinstance(doc, dict):
        raise TuneFolderError(f"{what} is a JSON {type(doc).__name__}, not an object.")
    if doc.get("schema") != schema:
        raise TuneFolderError(f"{what} is not the metadata of analyse tune (schema {schema!r}).")
    try:
        meta = TuneMeta.model_validate(doc)
    except ValidationError as exc:
        raise TuneFolderError(f"{what}: {_meta_problem(exc)}.") from None
    except RecursionError:
        raise TuneFolderError(f"{what} nests arrays or objects too deeply.") from None
    for label, name in [*((f"files.{k}", v) for k, v in meta.files.items())] + [
        (f"best[{i}].file", b.file) for i, b in enumerate(meta.best)
    ]:
        if Path(name).name != name or inside(folder, name) is None:
            raise TuneFolderError(
                f"{what}: {label} {name[:80]!r} is not a file name inside the tune folder."
            )
    return meta.model_dump(by_alias=True)


def _kind(dtype: Any) -> str:
    import pyarrow as pa

    if pa.types.is_integer(dtype):
        return "i"
    if pa.types.is_boolean(dtype):
        return "b"
    if pa.types.is_floating(dtype) or pa.types.is_decimal(dtype):
        return "n"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_null(dtype):
        return "s"
    return "?"


def read_table(folder: Path) -> Any:
    """results.parquet of ``folder`` as a DataFrame, its size, row count and key columns
    checked from the file's footer before any row is read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / "results.parquet"
    what = f"tune results {str(path)!r}"
    try:
        with open_table(in_folder(folder, "results.parquet", what), what) as fh:
            pf = pq.ParquetFile(fh)
            rows = pf.metadata.num_rows
            if rows > MAX_ROWS:
                raise TuneFolderError(
                    f"{what} has {rows:,} rows, more than a tune writes ({MAX_ROWS:,} at most)."
                )
            schema = pf.schema_arrow
            for col, kind in COLUMNS.items():
                if col not in schema.names:
                    raise TuneFolderError(f"{what} has no {col!r} column.")
                got = _kind(schema.field(col).type)
                ok = got == kind or (kind == "n" and got in "ib") or (got == "s" and kind == "s")
                if not ok:
                    raise TuneFolderError(
                        f"{what}: column {col!r} holds {schema.field(col).type}, not "
                        f"{KIND_WORDS[kind]}."
                    )
            frame = pf.read().to_pandas()
    except TuneFolderError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TuneFolderError(f"{what} is not a readable Parquet table ({text[:160]}).") from None
    if not len(frame):
        raise TuneFolderError(f"{what} has no rows.")
    if frame["id"].duplicated().any():
        dup = int(frame["id"][frame["id"].duplicated()].iloc[0])
        raise TuneFolderError(f"{what}: id {dup} names more than one row.")
    return frame


def open_table(path: Path, what: str):
    """results.parquet opened once it is known to be a regular file of bounded size."""
    from profiles.inputs import open_regular

    return open_regular(path, what, TuneFolderError, TABLE_LIMIT)


def check_against(folder: Path, meta: dict[str, Any], frame: Any) -> None:
    """Every id tune.json names is a row of the table and every option a column."""
    what = f"tune results {str(folder / 'tune.json')!r}"
    ids = set(frame["id"].tolist())
    named = [("start_id", meta["start_id"]), ("best_id", meta["best_id"])]
    named += [(f"best[{i}].id", b["id"]) for i, b in enumerate(meta["best"])]
    split = meta.get("auto_split") or {}
    named += [(f"auto_split.{k}.id", split[k]["id"]) for k in ("user", "chosen") if k in split]
    for label, rid in named:
        if rid is not None and rid not in ids:
            raise TuneFolderError(
                f"{what}: {label} {rid} is not a row of results.parquet (ids "
                f"{min(ids)}..{max(ids)})."
            )
    missing = [d for d in meta["dimensions"] if d not in frame.columns]
    if missing:
        raise TuneFolderError(
            f"{what}: the dimension {missing[0][:80]!r} is not a column of results.parquet."
        )


def read_folder(folder: Path, schema: str) -> tuple[dict[str, Any], Any]:
    """(meta, frame) of a tune folder, every check of the module's docstring passed."""
    what = f"tune results {str(folder / 'tune.json')!r}"
    try:
        regular_stat(in_folder(folder, "tune.json", what), what)
    except InputPathError as exc:
        raise TuneFolderError(str(exc)) from None
    meta = read_meta(folder, schema)
    frame = read_table(folder)
    check_against(folder, meta, frame)
    return meta, frame


def confined_profile(folder: Path, name: str | None, cache: Path | None) -> Path | None:
    """The profile a row names when it lies inside the tune folder or the simulation cache
    ``cache`` (links resolved) and is a regular file; None otherwise (never opened)."""
    if not isinstance(name, str) or not name or (isinstance(name, float) and math.isnan(name)):
        return None
    p = Path(name)
    for root in (folder, cache):
        if root is None:
            continue
        rel = os.path.relpath(p, root) if p.is_absolute() else name
        target = inside(root, rel)
        if target is not None and target.is_file():
            return target
    return None


__all__ = [
    "COLUMNS",
    "MAX_ROWS",
    "META_LIMIT",
    "TuneFolderError",
    "TuneMeta",
    "TuneResultsError",
    "confined_profile",
    "read_folder",
]
