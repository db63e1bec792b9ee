"""SQL over a profile, through DuckDB (in-process), sandboxed to the profile's own tables.

::

    from analyser.query import query
    df = query("demo/2-half.h5", "SELECT type, sum(cycles) AS cycles FROM steps GROUP BY type")

The tables (``steps``, ``operations``, ``variables``, ``programs``, ``compute_sets``, ``memory``,
``tiles``, ``liveness``, ``host``) are described in :mod:`analyser.query.tables` and
docs/analysis.md. Only the tables a query names are read, and of ``steps`` only the columns it
names, as Arrow arrays over the HDF5 columns (no copy of the numbers).

The sandbox: one ``SELECT`` statement (``WITH`` included) on a fresh in-memory database with
DuckDB's external access off (no file, URL or database outside the profile: ``read_csv``,
``COPY ... TO``, ``ATTACH``, ``INSTALL`` / ``LOAD`` fail), extensions neither installed nor
loaded automatically, and the configuration locked so that a query cannot turn any of it back
on. Anything refused, and any SQL error, is a :class:`QueryError` (one sentence; the CLI exits 2).

Only this package imports ``duckdb`` (an import contract in pyproject.toml); ``profiles`` never
does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.query.many import is_many
from analyser.query.tables import (
    STEP_COLUMNS,
    TABLES,
    needed_columns,
    plan_from_ast,
    tables_named,
)
from profiles.errors import UserFacingError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from analyser.core import Analysis
    from analyser.core.source import Source

__all__ = ["TABLES", "QueryError", "query", "query_arrow"]

#: Memory DuckDB may use for a query's intermediate results (joins, sorts, aggregates).
MEMORY_LIMIT = "2GB"
#: Bytes of result (Arrow) a query may return; the rows are fetched in batches and the query
#: stops with a QueryError at the first batch past it (DuckDB's memory limit does not count the
#: result handed to Python).
RESULT_LIMIT = 1 << 30
#: Rows per fetched batch.
BATCH_ROWS = 65_536
#: Most bytes DuckDB may spill to its temporary folder (under the cache folder, one per query).
TEMP_LIMIT = "4GB"
#: DuckDB's threads (the machine's cores, at most 4).
THREADS = max(1, min(4, os.cpu_count() or 1))


class QueryError(UserFacingError):
    """A query that is not allowed, does not parse or fails (one sentence; exit 2)."""


def _temp_root() -> Path:
    """The folder DuckDB's spill files go under: ``$XDG_CACHE_HOME`` (or ``~/.cache``)
    ``/ipu-graph-analyser/query-tmp`` (never the current folder, DuckDB's default ``./.tmp``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ipu-graph-analyser" / "query-tmp"


def _temp_dir(root: str | os.PathLike[str] | None = None) -> str:
    """A fresh folder for one query's spill files (removed when the query ends), under
    ``root`` when given (a caller that may have to end the query's process removes ``root``
    itself), else under :func:`_temp_root`; the system's temporary folder when neither can be
    made."""
    import tempfile

    try:
        base = Path(root) if root is not None else _temp_root()
        base.mkdir(parents=True, exist_ok=True)
        return tempfile.mkdtemp(prefix="duckdb-", dir=base)
    except OSError:
        return tempfile.mkdtemp(prefix="ipu-analyser-duckdb-")


def _connect(temp_dir: str):
    import duckdb

    # the spill folder first: with external access off DuckDB refuses to change it
    con = duckdb.connect(
        ":memory:",
        config={
            "temp_directory": temp_dir,
            "max_temp_directory_size": TEMP_LIMIT,
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "allow_community_extensions": False,
            "memory_limit": MEMORY_LIMIT,
            "threads": THREADS,
        },
    )
    con.execute("SET enable_external_access = false")
    return con


def _lock(con) -> None:
    con.execute("SET lock_configuration = true")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    # DuckDB suggests raising a limit with SET, which the locked sandbox refuses
    line = re.sub(r"\s*Use \"SET [^\"]*\"[^.]*\.?", "", line)
    if "expression depth" in line:
        line += " (the sandbox keeps this limit: write the query with fewer nested expressions)"
    return line.rstrip(".!")


def _check_statement(sql: str) -> None:
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"the query does not parse: {_first_line(exc)}.") from None
    if len(statements) != 1:
        raise QueryError(f"give one SELECT query (this text holds {len(statements)} statements).")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        name = getattr(kind, "name", str(kind))
        raise QueryError(
            f"only a SELECT query can run on a profile (this statement is {name}); "
            "the profile's tables are read-only and nothing outside them can be read or written."
        )


def _source(profile: str | os.PathLike[str] | Analysis) -> tuple[Source, bool]:
    """(Source, close?) of a path or an open Analysis."""
    from analyser.core.source import Source

    src = getattr(profile, "src", None)
    if isinstance(src, Source):
        return src, False
    if not isinstance(profile, (str, os.PathLike)):
        # neither a path nor an Analysis over a Source (opening it as a path failed the same way)
        raise TypeError(f"a profile path or an open Analysis, not {type(profile).__name__}")
    from profiles import open_profile

    return Source(open_profile(profile), Path(profile)), True


def _plan(con, sql: str) -> tuple[list[str], frozenset[str] | None]:
    """The tables a query reads and the step columns it needs, from DuckDB's own parse of it
    (``json_serialize_sql``), else from its words (:func:`tables_named`, :func:`needed_columns`)."""
    import duckdb

    try:
        text = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0]
    except duckdb.Error:
        text = None
    plan = plan_from_ast(text) if text else None
    return plan if plan is not None else (tables_named(sql), needed_columns(sql))


def query_arrow(
    profile: str | os.PathLike[str] | Analysis | Sequence[str | os.PathLike[str]],
    sql: str,
    *,
    on_connect: Callable[[Any], None] | None = None,
    max_rows: int | None = None,
    max_bytes: int = RESULT_LIMIT,
    temp_root: str | os.PathLike[str] | None = None,
) -> pa.Table:
    """Run one SELECT ``sql`` on ``profile`` (a path or an open Analysis); an Arrow table.

    ``profile`` may also name a set: a list of paths, or a folder (its ``*.h5``): every table
    then holds every profile's rows with a ``profile`` column first, and ``runs`` has a row per
    profile (:mod:`analyser.query.many`).

    ``on_connect(connection)`` is called with the DuckDB connection before the query runs, so a
    caller running it on another thread can stop it (``connection.interrupt()``); an
    interrupted query raises KeyboardInterrupt.

    ``max_rows``: at most this many rows are computed (a LIMIT on the query, so DuckDB stops
    early); the table's schema metadata ``b"more"`` is ``b"1"`` when the query had more.
    ``max_bytes``: the result is fetched in batches and a result past this many bytes is a
    QueryError (one sentence) before it is all in memory. ``temp_root``: the folder DuckDB's
    spill folder is made in (default: the cache folder's ``query-tmp``)."""
    import duckdb

    if not isinstance(sql, str):
        raise QueryError(f"the query must be SQL text (a str), not {type(sql).__name__}.")
    if not sql.strip():
        raise QueryError("the query is empty; give one SELECT statement.")
    if max_rows is not None and (not isinstance(max_rows, int) or max_rows < 0):
        raise QueryError(f"max_rows must be a whole number of rows, not {max_rows!r}.")
    _check_statement(sql)
    opened: list[tuple[str, Source, bool]] = []
    temp = None
    try:
        opened = _open_all(profile)
        temp = _temp_dir(temp_root)
        con = _connect(temp)
        if on_connect is not None:
            on_connect(con)
        try:
            names, cols = _plan(con, sql)
            if len(opened) == 1 and not is_many(profile):
                _register_one(con, opened[0][1], names, cols)
            else:
                _register_many(con, [(label, src) for label, src, _ in opened], names, cols)
            _lock(con)
            try:
                rel = con.sql(sql)
                if rel is None:
                    return _empty()
                table, more = _fetch(rel, max_rows, max_bytes)
                return _unique_names(table).replace_schema_metadata(
                    {b"more": b"1" if more else b"0"}
                )
            except RuntimeError as exc:
                # Ctrl-C (or SIGTERM) while DuckDB runs: it stops the query and says so
                if "interrupt" in str(exc).lower():
                    raise KeyboardInterrupt from None
                raise
            except duckdb.InterruptException:  # connection.interrupt() from another thread
                raise KeyboardInterrupt from None
            except duckdb.PermissionException as exc:
                raise QueryError(
                    "the query tried to reach outside the profile, which is not allowed "
                    f"(only the profile's tables can be read): {_first_line(exc)}."
                ) from None
            except duckdb.OutOfMemoryException as exc:
                raise QueryError(
                    f"the query needs more memory than it may use ({MEMORY_LIMIT} in DuckDB, "
                    f"{TEMP_LIMIT} spilled to disk, and its process's own bound when it runs in "
                    f"one): {_first_line(exc)}; aggregate, filter or LIMIT it."
                ) from None
            except duckdb.Error as exc:
                known = ", ".join(TABLES)
                hint = f" (the tables are {known})" if "Table with name" in str(exc) else ""
                raise QueryError(f"the query failed: {_first_line(exc)}{hint}.") from None
        finally:
            con.close()
    finally:
        import shutil

        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)  # the folder made for this query
        for _label, src, close in opened:
            if close:
                src.close()


def _open_all(profile) -> list[tuple[str, Source, bool]]:
    """(label, Source, close?) of one profile or of every profile of a set (each opened and
    checked as one profile is; all closed again when one cannot be opened)."""
    from analyser.query.many import ManyProfilesError, resolve

    if not is_many(profile):
        src, close = _source(profile)
        return [(str(src.path), src, close)]
    try:
        named = resolve(profile)
    except ManyProfilesError as exc:
        raise QueryError(str(exc)) from None
    opened: list[tuple[str, Source, bool]] = []
    try:
        for n in named:
            src, close = _source(n.path)
            opened.append((n.label, src, close))
    except BaseException:
        for _label, src, close in opened:
            if close:
                src.close()
        raise
    return opened


def _register_one(con, src: Source, names: list[str], cols: frozenset[str] | None) -> None:
    for name in names:
        spec = TABLES[name]
        if spec.needs_execution and not src.has_execution:
            raise QueryError(
                f"profile {src.path} has no executed steps (the program does not fit in "
                f"memory), so it has no table {name!r}."
            )
        con.register(name, spec.build(src, cols if spec.lazy_columns else None))


def _register_many(
    con, sources: list[tuple[str, Source]], names: list[str], cols: frozenset[str] | None
) -> None:
    """Each table the query names as the union (by column name, so profiles of older formats
    with fewer columns join with NULLs) of every profile's, with a ``profile`` column first. A
    profile without an execution (out of memory) has no steps; the runs table says so."""
    import pyarrow as pa

    from analyser.query.many import ManyProfilesError, check_step_bytes

    if "steps" in names:
        wanted = len(cols) if cols is not None else len(STEP_COLUMNS)
        try:
            check_step_bytes(sources, wanted)
        except ManyProfilesError as exc:
            raise QueryError(str(exc)) from None
    for name in names:
        spec = TABLES[name]
        parts = []
        for label, src in sources:
            if spec.needs_execution and not src.has_execution:
                continue
            table = spec.build(src, cols if spec.lazy_columns else None)
            labels = pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(table.num_rows, np.int32)), pa.array([label], pa.string())
            )
            if "profile" in table.column_names:  # runs: the label replaces the file name
                table = table.drop_columns(["profile"])
            parts.append(table.add_column(0, "profile", labels))
        if not parts:
            raise QueryError(
                f"none of the {len(sources)} profiles has executed steps (none fits in memory), "
                f"so there is no table {name!r}; the runs table says which fit."
            )
        for k, part in enumerate(parts):
            con.register(f"__{name}_{k}", part)
        union = " UNION ALL BY NAME ".join(f"SELECT * FROM __{name}_{k}" for k in range(len(parts)))
        con.execute(f"CREATE VIEW {name} AS {union}")


_WIDE_INTEGERS = frozenset({"HUGEINT", "UHUGEINT"})


def _fetch(rel, max_rows: int | None, max_bytes: int) -> tuple[pa.Table, bool]:
    """(table, more rows?): the relation's rows as Arrow, in batches: at most ``max_rows`` (pushed into the query as
    a LIMIT, one more row to know there are more), at most ``max_bytes``; 128-bit integers
    exact (DuckDB's Arrow export wraps an UHUGEINT above 2^127 round to negative)."""
    import pyarrow as pa

    names = list(rel.columns)
    types = [str(t) for t in rel.types]
    wide = [i for i, t in enumerate(types) if t in _WIDE_INTEGERS]
    if wide:
        cols = ", ".join(
            f"CAST(#{i + 1} AS VARCHAR)" if i in wide else f"#{i + 1}" for i in range(len(names))
        )
        rel = rel.query("_result", f"SELECT {cols} FROM _result")
    if max_rows is not None:
        rel = rel.limit(max_rows + 1)
    reader = rel.to_arrow_reader(BATCH_ROWS)
    batches, size, rows = [], 0, 0
    for batch in reader:
        size += batch.nbytes
        if size > max_bytes:
            reader.close()
            raise QueryError(
                f"the result passed {max_bytes / 2**30:.3g} GiB after {rows:,} rows; aggregate, "
                "filter or LIMIT the query (or give fewer columns)."
            )
        batches.append(batch)
        rows += batch.num_rows
    table = pa.Table.from_batches(batches, reader.schema)
    more = max_rows is not None and table.num_rows > max_rows
    if more:
        table = table.slice(0, max_rows)
    table = table.rename_columns(names)
    for i in wide:
        table = table.set_column(i, names[i], _exact_integers(table.column(i)))
    return _integers(table), more


def _exact_integers(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Decimal text of 128-bit integers as int64 when every value fits, else as
    decimal256(39, 0) (exact: 2^128 has 39 digits)."""
    import pyarrow as pa

    try:
        return col.cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return col.cast(pa.decimal256(39, 0))


def _unique_names(table: pa.Table) -> pa.Table:
    """Result columns with the same name (``SELECT a.id, b.id``) made unique (``id``, ``id_2``),
    so that a DataFrame, a JSON record or a table row keeps every column."""
    seen: dict[str, int] = {}
    names = []
    for c in table.column_names:
        seen[c] = seen.get(c, 0) + 1
        names.append(c if seen[c] == 1 else f"{c}_{seen[c]}")
    return table if names == table.column_names else table.rename_columns(names)


def _integers(table: pa.Table) -> pa.Table:
    """DuckDB's sums of integers are 128-bit (decimal128 with scale 0 in Arrow): as int64 when
    every value fits, so the DataFrame holds integers rather than Decimal objects."""
    import pyarrow as pa

    for i, f in enumerate(table.schema):
        if pa.types.is_decimal(f.type) and f.type.scale == 0:
            try:
                col = table.column(i).cast(pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
            table = table.set_column(i, pa.field(f.name, pa.int64()), col)
    return table


def _empty() -> pa.Table:
    import pyarrow as pa

    return pa.table({})


def query(
    profile: str | os.PathLike[str] | Analysis | Sequence[str | os.PathLike[str]], sql: str
) -> pd.DataFrame:
    """Run one SELECT ``sql`` on ``profile`` (a path or an open :class:`Analysis`) and return
    the result as a pandas DataFrame (QueryError, one sentence, when it is refused or fails)."""
    return query_arrow(profile, sql).to_pandas()


def describe_tables() -> list[tuple[str, str]]:
    """(name, description) of every table a query can read."""
    return [(name, spec.doc) for name, spec in TABLES.items()]
