"""``analyse query PROFILE "SQL" [--format table|csv|json|parquet] [-o FILE]``: SQL over a
profile's tables through DuckDB, sandboxed to the profile (analyser.query)."""

from __future__ import annotations

import argparse
import sys

from analyser.cli._common import at_least_one


def _epilog() -> str:
    from analyser.query.tables import TABLES

    return "tables: " + "; ".join(f"{n} ({s.doc})" for n, s in TABLES.items())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse query`` to ``parser``."""
    parser.add_argument("file", help="profile (.h5)")
    parser.add_argument(
        "sql",
        help="one SELECT query over the tables steps, operations, variables, programs, "
        "compute_sets, memory, tiles, liveness, host (docs/analysis.md)",
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
        type=at_least_one,
        default=100,
        metavar="N",
        help="rows shown by --format table (default 100; the rest are counted)",
    )
    parser.epilog = _epilog()


def _records(table) -> list[dict]:
    return table.to_pylist()


def _json_text(table) -> str:
    import json
    import math

    def plain(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v

    rows = [{k: plain(v) for k, v in r.items()} for r in _records(table)]
    return json.dumps(rows, indent=1, default=str, allow_nan=False) + "\n"


def _csv_text(table) -> str:
    return table.to_pandas().to_csv(index=False)


def _print_table(table, max_rows: int) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.cli._common import console

    con = console()
    tab = Table(show_lines=False)
    for name in table.column_names:
        tab.add_column(esc(name))
    shown = table.slice(0, max_rows)
    for row in shown.to_pylist():
        tab.add_row(*(esc(_cell(v)) for v in row.values()))
    con.print(tab)
    more = table.num_rows - shown.num_rows
    tail = f" ({more:,} not shown: --max-rows, or --format csv / json / parquet)" if more else ""
    con.print(f"{table.num_rows:,} row" + ("" if table.num_rows == 1 else "s") + tail)


def _cell(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _run_stoppable(query_arrow, path: str, sql: str):
    """The query on a worker thread while this (main) thread waits for it, so that Ctrl-C and
    SIGTERM, whose handlers run here, stop DuckDB (``interrupt()``) instead of waiting for it."""
    from concurrent.futures import ThreadPoolExecutor

    cons = []
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(query_arrow, path, sql, on_connect=cons.append)
        try:
            while True:
                try:
                    return fut.result(timeout=0.2)
                except TimeoutError:
                    continue
        except KeyboardInterrupt:  # SIGTERM arrives as profiles.atomic.Interrupted
            for con in cons:
                con.interrupt()
            raise


def run(args: argparse.Namespace) -> int:
    """Run ``analyse query`` with the parsed ``args``; returns the exit code."""
    from analyser.cli.errors import CliError
    from analyser.literal import terminal
    from analyser.output import atomic_output, check_output
    from analyser.query import query_arrow

    if args.format == "parquet" and not args.output:
        raise CliError("--format parquet writes a binary file; give it with -o FILE.")
    if args.format == "table" and args.output:
        raise CliError("-o writes csv, json or parquet; choose one with --format.")
    out = check_output(args.output, [args.file], force=args.force) if args.output else None
    table = _run_stoppable(query_arrow, args.file, args.sql)
    if args.format == "table":
        _print_table(table, args.max_rows)
        return 0
    if args.format == "parquet":
        import pyarrow.parquet as pq

        with atomic_output(out, "wb") as fh:
            pq.write_table(table, fh)
    else:
        text = _json_text(table) if args.format == "json" else _csv_text(table)
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
