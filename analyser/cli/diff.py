"""``analyse diff A B [--json] [-o FILE] [--export-trace OUT]``: two runs aligned step by step
(program name and occurrence per IPU), the change in total cycles split exactly by step type, by
layer and by program, and the run-option differences that explain it (analyser.core.diff)."""

from __future__ import annotations

import argparse
import json
import sys

from analyser.cli._common import at_least_one


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse diff`` to ``parser``."""
    parser.add_argument("a", metavar="A", help="the first profile (before)")
    parser.add_argument("b", metavar="B", help="the second profile (after)")
    parser.add_argument(
        "--json", action="store_true", help="the diff as JSON (every IPU, every row)"
    )
    parser.add_argument("-o", "--output", help="write the diff (text, or JSON with --json) to FILE")
    parser.add_argument(
        "--export-trace",
        metavar="OUT",
        help="also write both runs and a delta track into one trace (Chrome trace-event JSON, "
        "which ui.perfetto.dev and chrome://tracing open)",
    )
    parser.add_argument(
        "--ipu",
        type=int,
        default=None,
        help="the IPU whose layers and programs are listed "
        "(default: every IPU's step types, the layers and programs of IPU 0)",
    )
    parser.add_argument(
        "--top",
        type=at_least_one,
        default=10,
        metavar="N",
        help="rows listed per table; the rest are summed in one 'others' row (default 10)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace -o / --export-trace files even when analyse did not write them",
    )


def _fmt(n: int) -> str:
    return f"{n:+,}" if n else "0"


def _rows(rows, key: str, top: int) -> list[tuple[str, int, int, int]]:
    """The ``top`` rows with a change (largest first), then 'others' summing the rest, so the
    rows listed always add up to the IPU's change."""
    import numpy as np

    a, b, delta = rows["a"], rows["b"], rows["delta"]
    changed = np.flatnonzero(delta != 0)
    head = changed[:top]
    labels = rows[key]
    out = [(str(labels[j]), int(a[j]), int(b[j]), int(delta[j])) for j in head]
    if changed.size > top:  # else every other row is unchanged: the listed rows add up
        rest = np.ones(len(rows), bool)
        rest[head] = False
        out.append(
            (
                f"others ({int(rest.sum()):,} rows)",
                int(a[rest].sum()),
                int(b[rest].sum()),
                int(delta[rest].sum()),
            )
        )
    return out


def _table(con, title: str, key: str, rows, total: int) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    tab = Table(title=esc(title), title_justify="left")
    tab.add_column(key)
    for c in ("A", "B", "delta"):
        tab.add_column(c, justify="right")
    for name, a, b, d in rows:
        tab.add_row(esc(name), f"{a:,}", f"{b:,}", _fmt(d))
    tab.add_row("total", "", "", _fmt(total), style="bold")
    con.print(tab)


def render(con, d, ipu: int | None, top: int) -> None:
    """The diff as text on a rich console."""
    from rich.markup import escape as esc

    from analyser.core.intervals import range_text

    rel = f" ({d.delta / d.total_a:+.2%})" if d.total_a else ""
    con.print(
        f"[bold]{esc(d.a)} -> {esc(d.b)}[/]: total cycles {d.total_a:,} -> {d.total_b:,}, "
        f"{_fmt(d.delta)}{rel}"
    )
    rng = range_text(d.interval)
    if rng:  # how far to trust the change (both runs are the engine's predictions)
        con.print(f"  change of the total cycles: {esc(rng)}")
    if d.samples_a != d.samples_b:
        con.print(
            f"samples per run {d.samples_a:,} -> {d.samples_b:,} (the runs do different work)"
        )
    diffs = [c.text() for c in d.config_diffs if c.key != "name"]
    con.print("run-option differences: " + (esc("; ".join(diffs)) if diffs else "none"))
    for e in d.explanations:
        con.print(f"  • {esc(e.text)}")
    for r in d.alignment_rows.records():
        con.print(
            f"IPU {r['ipu']}: {r['aligned']:,} steps aligned by program name and occurrence, "
            f"{r['removed']:,} only in A, {r['added']:,} only in B"
        )
    for i in sorted(set(d.type_rows["ipu"].tolist())):
        rows = _rows(d.type_rows.of_ipu(i), "type", top)
        _table(con, f"IPU {i}: cycles by step type", "step type", rows, d.delta)
    show = [ipu] if ipu is not None else [0]
    for i in show:
        rows = _rows(d.layer_rows.of_ipu(i), "layer", top)
        _table(con, f"IPU {i}: cycles by layer", "layer", rows, d.delta)
        rows = _rows(d.program_rows.of_ipu(i), "program", top)
        _table(con, f"IPU {i}: cycles by program", "program", rows, d.delta)
    if d.largest:
        con.print("largest changes of aligned steps:")
        for s in d.largest:
            con.print(
                f"  IPU {s.ipu} {esc(s.program)} #{s.occurrence}: {s.cycles_a:,} -> "
                f"{s.cycles_b:,} cycles ({_fmt(s.delta)}) at cycle {s.start_b:,} of B"
            )


def run(args: argparse.Namespace) -> int:
    """Run ``analyse diff`` with the parsed ``args``; returns the exit code."""
    from analyser.cli._common import console, open_analysis
    from analyser.cli.errors import CliError
    from analyser.core.diff import diff_runs
    from analyser.output import atomic_output, check_output

    out = check_output(args.output, [args.a, args.b], force=args.force) if args.output else None
    trace = None
    if args.export_trace:
        trace = check_output(args.export_trace, [args.a, args.b], force=args.force)
        if out is not None and trace.resolve() == out.resolve():
            raise CliError("-o and --export-trace name the same file; give two names.")
    with open_analysis(args.a) as a, open_analysis(args.b) as b:
        n_ipus = max(a.target.num_ipus, b.target.num_ipus)
        if args.ipu is not None and not 0 <= args.ipu < n_ipus:
            raise CliError(f"--ipu {args.ipu} does not exist; the runs have {n_ipus} IPU(s).")
        d = diff_runs(a, b, largest=args.top)
        if args.json:
            text = json.dumps(d.to_dict(), indent=1, default=str, allow_nan=False) + "\n"
            if out is None:
                sys.stdout.write(text)
            else:
                with atomic_output(out, "w") as fh:
                    fh.write(text)
        elif out is None:
            render(console(), d, args.ipu, args.top)
        else:
            with atomic_output(out, "w") as fh:
                render(console(file=fh), d, args.ipu, args.top)
        if trace is not None:
            from analyser.export.diff_trace import export_diff_trace

            export_diff_trace(a, b, trace)
    err = console(stderr=True)
    for f in (out, trace):
        if f is not None:
            err.print(f"wrote {f} ({f.stat().st_size:,} bytes)")
    return 0
