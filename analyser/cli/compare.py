"""``analyse compare A B [C ...] [--fail-if COND ...] [--json]``: explain the differences;
exit 1 when a --fail-if condition holds (B against A, or the last profile against the first)."""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="two or more profiles (compared in order: A->B->C...)",
    )
    parser.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="COND",
        help="exit 1 when COND holds for the last profile against the first, "
        "e.g. 'cycles>+5%%', 'peak_memory>+2%%', 'throughput<-3%%', 'oom_tiles>0'"
        " (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--units", choices=("KiB", "kB", "bytes"), default="KiB")


def run(args: argparse.Namespace) -> int:
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.cli._common import console, open_analysis
    from analyser.cli.errors import CliError
    from analyser.core.comparison import (
        COSMETIC_KEYS,
        METRICS,
        compare,
        fmt_share_delta,
        fmt_value,
    )
    from analyser.core.gates import parse_gate
    from analyser.core.units import fmt_delta_pct

    if len(args.files) < 2:
        raise CliError("compare needs at least two profiles.")
    gates = [parse_gate(g) for g in args.fail_if]  # bad syntax: exit 2 before any work
    analyses = []
    try:
        for f in args.files:
            analyses.append(open_analysis(f))
        cmp = compare(analyses)
        results = [g.evaluate(analyses[0].metrics, analyses[-1].metrics) for g in gates]
        failed = any(h for h, _ in results)
        if args.json:
            out = cmp.to_dict()
            out["gates"] = [
                {"condition": g.text, "holds": h, "detail": d} for g, (h, d) in zip(gates, results)
            ]
            json.dump(out, sys.stdout, indent=2, default=str)
            sys.stdout.write("\n")
            return 1 if failed else 0
        con = console()
        tab = Table(title="Comparison", title_justify="left")
        tab.add_column("metric")
        for a in analyses:
            tab.add_column(esc(a.name), justify="right")
        tab.add_column("last vs first", justify="right")
        for key, label, kind in METRICS:
            vals = [a.metrics.scalar(key) for a in analyses]
            if all(v is None for v in vals):
                continue
            delta = (
                fmt_share_delta(vals[0], vals[-1])
                if kind == "share"
                else fmt_delta_pct(vals[0], vals[-1])
            )
            tab.add_row(label, *(fmt_value(v, kind) for v in vals), delta)
        con.print(tab)
        for p in cmp.pairs:
            con.rule(f"[bold]{esc(p.a)} -> {esc(p.b)}[/]", align="left")
            diffs = [d for d in p.config_diffs if d.key not in COSMETIC_KEYS]
            if diffs:
                con.print("[bold]run options:[/] " + esc("; ".join(d.text() for d in diffs)))
            else:
                con.print("[bold]run options:[/] identical")
            for e in p.explanations:
                con.print(f"  • {esc(e.text)}")
            if p.other_deltas:
                con.print("[bold]largest other differences:[/]")
                for t in p.other_deltas:
                    con.print(f"  • {esc(t)}")
        for h, d in results:
            con.print(("[bold red]FAIL[/] " if h else "[green]pass[/] ") + esc(d))
        return 1 if failed else 0
    finally:
        for a in analyses:
            a.close()
