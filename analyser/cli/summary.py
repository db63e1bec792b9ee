"""``analyse summary FILE``: target, memory, execution statistics and throughput (rich tables)."""

from __future__ import annotations

import argparse
import functools
import operator

from analyser.cli._common import at_least_one


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
        "report, docs/report-schema.md, without insights)",
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

            json.dump(profile_data(a), sys.stdout, indent=1, allow_nan=False)
            sys.stdout.write("\n")
            return 0
        from analyser.core import intervals
        from analyser.core.summary import summary_sections

        pred = intervals.profile_prediction(a, intervals.PROFILE_FIGURES)
        sections = summary_sections(a, u, pred)
        _memory_tables(con, a, args, u, sections)
        if a.execution is None:
            con.print(
                "[bold red]No execution:[/] the program does not fit in memory, so nothing "
                "ran (see `analyse insights`)."
            )
            return 0
        _section_tables(con, [s for s in sections if s["title"] == "Execution"])
        note = intervals.prediction_note(pred)
        if note:
            con.print(f"[italic]{esc(note)}[/]")
        _execution_tables(con, a, args, u)
    return 0


def _section_tables(con, sections: list[dict]) -> None:
    """The declared summary sections (analyser.core.quantities.SUMMARY_SECTIONS), one table
    each: label, value (with its note) and the range from the fidelity table (a section whose
    figures have none goes without the column)."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.core.summary import value_text

    for section in sections:
        ranged = any(row["range"] for row in section["figures"])
        tab = Table(title=section["title"], title_justify="left")
        for col in ("", "value", "range (fidelity table)")[: 3 if ranged else 2]:
            tab.add_column(col)
        for row in section["figures"]:
            cells = (esc(row["label"]), esc(value_text(row)), esc(row["range"] or "-"))
            tab.add_row(*cells[: 3 if ranged else 2])
        con.print(tab)


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


def _execution_tables(con, a, args: argparse.Namespace, u) -> None:
    """The text summary's cycles, tile imbalance, StreamCopy and run tables."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.core.units import fmt_bytes, fmt_int, fmt_pct, fmt_seconds
    from profiles import schema

    t = a.target
    ex = a.execution

    cyc = Table(title="Cycles by step type", title_justify="left")
    cyc.add_column("step type")
    for i in range(t.num_ipus):
        cyc.add_column(f"IPU {i}", justify="right")
        cyc.add_column("%", justify="right")
    for j, name in enumerate(schema.PROGRAM_TYPES):
        if not ex.count_by_type[:, j].any():
            continue
        row = []
        for i in range(t.num_ipus):
            busy = float(ex.cycles_by_type[i].sum()) or 1.0
            row += [fmt_int(ex.cycles_by_type[i, j]), fmt_pct(ex.cycles_by_type[i, j] / busy)]
        cyc.add_row(name, *row)
    cyc.add_row(
        "tile balance (compute)",
        *functools.reduce(
            operator.iadd, ([fmt_pct(ex.tile_balance[i]), ""] for i in range(t.num_ipus)), []
        ),
    )
    imb = a.imbalance
    cyc.add_row(
        "lost to tile imbalance",
        *functools.reduce(
            operator.iadd,
            (
                [fmt_int(imb.lost_cycles[i]), fmt_pct(imb.lost_share_of_compute[i])]
                for i in range(t.num_ipus)
            ),
            [],
        ),
    )
    con.print(cyc)
    worst = Table(
        title="Compute sets losing the most cycles to tile imbalance (slowest tile minus the "
        "mean over the IPU's tiles, summed over executions)",
        title_justify="left",
    )
    for col in ("compute set", "IPU", "executions", "slowest tile", "mean tile", "lost"):
        worst.add_column(col, justify="left" if col == "compute set" else "right")
    for r in imb.compute_sets.head(args.top).itertuples():
        worst.add_row(
            esc(str(r.name)),
            str(r.ipu),
            fmt_int(r.executions),
            fmt_int(r.max_cycles),
            fmt_int(r.mean_cycles),
            fmt_int(r.lost_cycles),
        )
    con.print(worst)

    sc = Table(title="StreamCopy and IPU-to-IPU bytes", title_justify="left")
    for col in ("IPU", "received", "sent", "by destination (rx / tx)", "GlobalExchange rx/tx"):
        sc.add_column(col, justify="right" if col != "by destination (rx / tx)" else "left")
    for i in range(t.num_ipus):
        dest = ", ".join(
            f"{d}: {fmt_bytes(ex.streamcopy_rx_by_dest[i, k], u)} / "
            f"{fmt_bytes(ex.streamcopy_tx_by_dest[i, k], u)}"
            for k, d in enumerate(schema.DESTINATIONS)
            if ex.streamcopy_rx_by_dest[i, k] or ex.streamcopy_tx_by_dest[i, k]
        )
        sc.add_row(
            str(i),
            fmt_bytes(ex.streamcopy_rx_bytes[i], u),
            fmt_bytes(ex.streamcopy_tx_bytes[i], u),
            dest or "-",
            f"{fmt_bytes(ex.global_exchange_rx[i], u)} / {fmt_bytes(ex.global_exchange_tx[i], u)}",
        )
    con.print(sc)

    run = Table(title="Run details", show_header=False, title_justify="left")
    run.add_column(style="bold")
    run.add_column()
    if ex.host_exposed_cycles:
        run.add_row(
            "host outside the trace",
            f"{fmt_seconds(ex.host_exposed_cycles / ex.clock_hz)} per host call not hidden "
            "behind the device (host lane)",
        )
    ps = ex.phase_share()
    run.add_row("phases", ", ".join(f"{p} {fmt_pct(v)}" for p, v in ps.items() if v > 0))
    if ex.stage_cycles.size > 1:
        run.add_row(
            "stage load",
            ", ".join(f"stage {s}: {fmt_int(v)}" for s, v in enumerate(ex.stage_cycles))
            + f" (longest / mean {ex.stage_imbalance:.2f})",
        )
    con.print(run)
