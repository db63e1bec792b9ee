"""``analyse query PROFILE "SQL" [--format table|csv|json|parquet] [-o FILE]``: SQL over a
profile's tables through DuckDB, sandboxed to the profile (analyser.query)."""

from __future__ import annotations

import argparse
import os
import sys

from analyser.cli._common import at_least_one

#: Seconds a query may run (``--timeout``).
DEFAULT_TIMEOUT = 300.0
#: Most rows ``--format table`` prints.
MAX_TABLE_ROWS = 1_000_000


def _max_rows(text: str) -> int:
    n = at_least_one(text)
    if n > MAX_TABLE_ROWS:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_TABLE_ROWS:,} rows are printed as a table (got {text}); "
            "use --format csv, json or parquet for more"
        )
    return n


def _seconds(text: str) -> float:
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return v


def _epilog() -> str:
    from analyser.query.tables import TABLES

    return "tables: " + "; ".join(f"{n} ({s.doc})" for n, s in TABLES.items())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse query`` to ``parser``."""
    parser.add_argument(
        "files",
        nargs="+",
        metavar="PROFILE",
        help="profile (.h5); several profiles, or a folder of them (a tune folder), query them "
        "all at once: every table gains a profile column and runs has one row per profile",
    )
    parser.add_argument(
        "sql",
        help="one SELECT query over the tables steps, operations, variables, programs, "
        "compute_sets, memory, tiles, liveness, host, runs (docs/analysis.md)",
    )
    parser.add_argument(
        "--format",
        choices=("table", "csv", "json", "parquet"),
        default="table",
        help="table (default, on the terminal), csv, json (a list of records) or parquet "
        "(needs -o)",
    )
    parser.add_argument("-o", "--output", help="write the result to this file (atomically)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace OUT even when the existing file was not written by analyse",
    )
    parser.add_argument(
        "--max-rows",
        type=_max_rows,
        default=100,
        metavar="N",
        help=f"rows shown by --format table (default 100, at most {MAX_TABLE_ROWS:,}; only "
        "these are computed)",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"stop the query after this many seconds (default {DEFAULT_TIMEOUT:g}; exit 2)",
    )
    parser.epilog = _epilog()


def _records(table) -> list[dict]:
    return table.to_pylist()


def _json_text(table) -> str:
    import json
    import math
    from decimal import Decimal

    def plain(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, Decimal) and v == v.to_integral_value():
            return int(v)  # a 128-bit integer: a JSON number, exact
        return v

    rows = [{k: plain(v) for k, v in r.items()} for r in _records(table)]
    return json.dumps(rows, indent=1, default=str, allow_nan=False) + "\n"


def _csv_text(table) -> str:
    import io

    import pyarrow as pa
    import pyarrow.csv as pcsv

    # dictionary columns (the enumerations) as their names; pandas is not needed to print
    cols = [
        c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns
    ]
    import csv

    head = io.StringIO()
    csv.writer(head, lineterminator="\n").writerow(table.column_names)  # quoted only if needed
    buf = io.BytesIO()
    pcsv.write_csv(
        pa.table(cols, names=table.column_names),
        buf,
        pcsv.WriteOptions(include_header=False, quoting_style="needed"),
    )
    return head.getvalue() + buf.getvalue().decode("utf-8")


def _unwritable(table, fmt: str, exc: Exception):
    """The sentence for a column type that ``fmt`` cannot hold (interval, union, ...)."""
    import pyarrow as pa

    from analyser.query import QueryError

    bad = [
        f"{f.name} ({f.type})"
        for f in table.schema
        if pa.types.is_interval(f.type) or pa.types.is_union(f.type)
    ]
    what = ", ".join(bad) if bad else str(exc).splitlines()[0].rstrip(".")
    return QueryError(
        f"{fmt} cannot hold the result's column {what}; cast it in the query "
        "(CAST(x AS VARCHAR)) or use --format json."
    )


def _print_table(table, max_rows: int) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.cli._common import console

    con = console()
    names = table.column_names
    rows = [[_cell(v) for v in row.values()] for row in table.to_pylist()]
    widths = [
        max([con.measure(name).maximum] + [len(r[i]) for r in rows]) for i, name in enumerate(names)
    ]
    shown = _columns_that_fit(widths, con.width)
    tab = Table(show_lines=False)
    for i in shown:
        if i < 0:
            tab.add_column("…", no_wrap=True)
        else:
            tab.add_column(esc(names[i]), overflow="fold")  # a number is never cut
    for r in rows:
        tab.add_row(*(("…" if i < 0 else esc(r[i])) for i in shown))
    con.print(tab)
    n = table.num_rows
    if (table.schema.metadata or {}).get(b"more") == b"1":
        # the rest were never computed (the query ran with a LIMIT): not counted
        con.print(
            f"the first {n:,} row{'' if n == 1 else 's'} shown; more not computed "
            "(--max-rows, or --format csv / json / parquet)"
        )
    else:
        con.print(f"{n:,} row" + ("" if n == 1 else "s"))
    kept = sum(1 for i in shown if i >= 0)
    if kept < len(names):
        hidden = [names[i] for i in range(len(names)) if i not in shown]
        con.print(
            f"{len(names)} columns, {kept} shown; not shown: {esc(', '.join(hidden))} "
            "(a wider terminal or --width, fewer columns in the SELECT, or --format csv / json)"
        )


#: a column's cost beyond its text in rich's table: a space either side and its left border
_COLUMN_FRAME = 3


def _columns_that_fit(widths: list[int], width: int) -> list[int]:
    """The columns a table of these text widths shows on a terminal ``width`` cells wide, in
    order, with -1 where the ones left out would be: every column when they all fit; else,
    as the DuckDB shell's box mode does, columns from both ends (the first, the last, the
    second, ...) around a narrow "..." column, as many as fit whole, at least the first. A
    column is never folded to a few characters a line, which made a 15-column table of steps
    unreadable at 80 columns."""
    total = sum(w + _COLUMN_FRAME for w in widths) + 1
    if total <= width or len(widths) <= 1:
        return list(range(len(widths)))
    budget = width - 1 - (1 + _COLUMN_FRAME)  # the outer border and the "..." column
    left: list[int] = []
    right: list[int] = []
    lo, hi = 0, len(widths) - 1
    take_left = True
    while lo <= hi:
        i = lo if take_left else hi
        cost = widths[i] + _COLUMN_FRAME
        if cost > budget:
            if not left:  # the first column always shows (folded if it must)
                left.append(i)
            break
        budget -= cost
        if take_left:
            left.append(i)
            lo += 1
        else:
            right.append(i)
            hi -= 1
        take_left = not take_left
    return [*left, -1, *right[::-1]]


def _cell(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _run_stoppable(query_arrow, path, sql: str, timeout: float, **kwargs):
    """The query in a process of its own (analyser.query.process), ended by Ctrl-C, SIGTERM
    (whose handlers run in this process) and ``timeout``."""
    from analyser.query.process import run_bounded

    return run_bounded(path, sql, timeout=timeout, query=query_arrow, **kwargs)


def run(args: argparse.Namespace) -> int:
    """Run ``analyse query`` with the parsed ``args``; returns the exit code."""
    from analyser.cli.errors import CliError
    from analyser.literal import terminal
    from analyser.output import atomic_output, check_output
    from analyser.query import query_arrow

    if args.sql.strip().lower().endswith(".h5") or os.path.isdir(args.sql):
        # "analyse query a.h5 b.h5": the last profile was taken for the query
        raise CliError(
            f"{args.sql!r} is a profile or a folder, not SQL; give the query after the "
            'profiles: analyse query A.h5 B.h5 "SELECT ...".'
        )
    if args.format == "parquet" and not args.output:
        raise CliError("--format parquet writes a binary file; give it with -o FILE.")
    if args.format == "table" and args.output:
        raise CliError("-o writes csv, json or parquet; choose one with --format.")
    out = check_output(args.output, list(args.files), force=args.force) if args.output else None
    max_rows = args.max_rows if args.format == "table" else None
    files = args.files[0] if len(args.files) == 1 else list(args.files)
    table = _run_stoppable(query_arrow, files, args.sql, args.timeout, max_rows=max_rows)
    if args.format == "table":
        _print_table(table, args.max_rows)
        return 0
    import pyarrow as pa

    if args.format == "parquet":
        import pyarrow.parquet as pq

        assert out is not None  # --format parquet without -o was refused above
        try:
            with atomic_output(out, "wb") as fh:
                pq.write_table(table, fh)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:
            raise _unwritable(table, "parquet", exc) from None
    else:
        try:
            text = _json_text(table) if args.format == "json" else _csv_text(table)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:
            raise _unwritable(table, args.format, exc) from None
        if out is None:
            # csv carries the profile's names raw: on a terminal their control characters are
            # shown as escapes (JSON escapes them itself)
            sys.stdout.write(terminal(text) if sys.stdout.isatty() else text)
            return 0
        with atomic_output(out, "w") as fh:
            fh.write(text)
    from analyser.cli._common import console

    console(stderr=True).print(f"wrote {out} ({table.num_rows:,} rows)")
    return 0
