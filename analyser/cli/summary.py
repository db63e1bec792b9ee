"""``analyse summary FILE``: target, memory, execution statistics and throughput (rich tables)."""

from __future__ import annotations

import argparse

from analyser.cli._common import at_least_one


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The summary's arguments: the profile, memory units, how many top items, JSON."""
    parser.add_argument("file", help="profile (.h5)")
    parser.add_argument(
        "--units", choices=("KiB", "kB", "bytes"), default="KiB", help="memory units (default KiB)"
    )
    parser.add_argument(
        "--top",
        type=at_least_one,
        default=5,
        metavar="N",
        help="how many of the tiles with the most memory and of the compute sets losing the most "
        "cycles to tile imbalance to list (N >= 1, default 5; "
        "all tiles when N exceeds their number)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON (the 'profiles' entry of the JSON "
        "report, docs/report-schema.md, without insights; its texts in --units)",
    )


def _top_tiles(m, n: int) -> list[tuple[int, int, int]]:
    """The ``n`` tiles with the most memory (ipu, tile, bytes), most first; the memory summary
    keeps five, so larger ``n`` are taken from its per-tile arrays (one vectorised sort)."""
    if n <= len(m.top_tiles):
        return [(x.ipu, x.tile, x.bytes) for x in m.top_tiles[:n]]
    import numpy as np

    flat = (np.asarray(m.tile_total, np.int64) + np.asarray(m.tile_gaps, np.int64)).ravel()
    order = np.argsort(-flat, kind="stable")[:n]
    tiles = int(m.tiles_per_ipu)
    return [(int(i // tiles), int(i % tiles), int(flat[i])) for i in order]


def run(args: argparse.Namespace) -> int:
    """Print the summary of one profile (text tables, or ``--json``)."""
    from rich.markup import escape as esc

    from analyser.cli._common import console, open_analysis

    u = args.units
    con = console()
    with open_analysis(args.file) as a:
        if args.json:
            import json
            import sys

            from analyser.reports.data import profile_data

            data = profile_data(a, unit=u, top=args.top)
            json.dump(data, sys.stdout, indent=1, allow_nan=False)
            sys.stdout.write("\n")
            return 0
        from analyser.core import intervals
        from analyser.core.summary import summary_sections, summary_tables

        pred = intervals.profile_prediction(a, intervals.PROFILE_FIGURES)
        sections = summary_sections(a, u, pred)
        _memory_tables(con, a, args, u, sections)
        if a.execution is None:
            con.print(
                "[bold red]No execution:[/] the program does not fit in memory, so nothing "
                "ran (see `analyse insights`)."
            )
        else:
            _section_tables(con, [s for s in sections if s["title"] == "Execution"])
            note = intervals.prediction_note(pred)
            if note:
                con.print(f"[italic]{esc(note)}[/]")
            from analyser.core.critical_path import headline

            path_line = headline(a.src)
            if path_line:
                con.print(esc(path_line))
        _breakdown_tables(con, summary_tables(a, u, top=args.top))
    return 0


def _section_tables(con, sections: list[dict]) -> None:
    """The declared summary sections (analyser.core.quantities.SUMMARY_SECTIONS), one table
    each: label, value (with its note) and the range from the fidelity table (a section whose
    figures have none goes without the column)."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.core.intervals import short_range
    from analyser.core.summary import value_text

    for section in sections:
        ranged = any(row["range"] for row in section["figures"])
        tab = Table(title=section["title"], title_justify="left")
        for col in ("", "value", "range (fidelity table)")[: 3 if ranged else 2]:
            tab.add_column(col)
        said: dict[str, list[str]] = {}  # a sentence in place of a range: once, under the table
        for row in section["figures"]:
            cell = short_range(row["range"])
            if cell != row["range"]:
                said.setdefault(row["range"], []).append(row["label"])
            cells = (esc(row["label"]), esc(value_text(row)), esc(cell or "-"))
            tab.add_row(*cells[: 3 if ranged else 2])
        con.print(tab)
        for text, labels in said.items():
            con.print(f"[dim]{esc(', '.join(labels))}: {esc(text)}[/]")


def _memory_tables(con, a, args: argparse.Namespace, u, sections: list[dict]) -> None:
    """The text summary's heading, target, graph and memory sections, caveats, top tiles and
    memory by category."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.core.units import fmt_bytes, fmt_pct
    from profiles import schema

    t = a.target
    m = a.memory
    con.print(
        f"[bold]{esc(a.path.name)}: {esc(t.model)} ({'fits' if m.fits else 'OUT OF MEMORY'})[/]"
    )
    _section_tables(con, [s for s in sections if s["title"] != "Execution"])
    for note in t.notes:  # an ONNX model's operators costed as element-wise: a caveat
        if note.startswith("unknown_ops"):
            con.print(f"[bold]caveat:[/] {esc(note)}")
    if a.stored_run_config.note:  # options of a newer or foreign writer, not read
        con.print(f"[bold]caveat:[/] {esc(a.stored_run_config.note)}")
    top = Table(title="Tiles", show_header=False, title_justify="left")
    top.add_column(style="bold")
    top.add_column()
    top.add_row(
        "top tiles",
        ", ".join(f"{i}:{t} {fmt_bytes(b, u)}" for i, t, b in _top_tiles(m, args.top)),
    )
    con.print(top)

    cat = Table(title="Memory by category", title_justify="left")
    cat.add_column("category")
    for i in range(t.num_ipus):
        cat.add_column(f"IPU {i}", justify="right")
    cat.add_column("share", justify="right")
    tot = m.by_category.sum(axis=0)
    grand = float(tot.sum()) or 1.0
    for j in tot.argsort()[::-1]:
        if tot[j] == 0:
            continue
        cat.add_row(
            schema.MEMORY_CATEGORIES[j],
            *(fmt_bytes(m.by_category[i, j], u) for i in range(t.num_ipus)),
            fmt_pct(tot[j] / grand),
        )
    con.print(cat)


def _breakdown_tables(con, tables: list[dict]) -> None:
    """The declared breakdown tables (analyser.core.quantities.SUMMARY_TABLES), one rich table
    each: its columns (figures right-aligned), its rows (a group's value said once, a line
    between groups) and its note under it."""
    from rich.markup import escape as esc
    from rich.table import Table

    for table in tables:
        tab = Table(
            title=table["title"],
            title_justify="left",
            caption=esc(table["note"]) or None,
            caption_justify="left",
        )
        cols = table["columns"]
        for col in cols:
            tab.add_column(col["label"], justify="left" if col["kind"] is None else "right")
        g = next((i for i, c in enumerate(cols) if c["key"] == table["group"]), None)
        rows = table["rows"]
        for k, row in enumerate(rows):
            cells = [esc(c) for c in row["cells"]]
            if g is not None and k and rows[k - 1]["values"][g] == row["values"][g]:
                cells[g] = ""  # the group's value once
            last = (
                g is not None and k + 1 < len(rows) and rows[k + 1]["values"][g] != row["values"][g]
            )
            tab.add_row(*cells, end_section=last)
        con.print(tab)
