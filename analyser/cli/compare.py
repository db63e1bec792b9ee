"""``analyse compare A B [C ...] [--fail-if COND ...] [--json]``: explain the differences;
exit 1 when a --fail-if condition holds (B against A, or the last profile against the first)."""

from __future__ import annotations

import argparse
import json
import sys

from analyser.cli._common import add_profiles_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse compare`` to ``parser``."""
    add_profiles_argument(parser, "two or more profiles (compared in order: A->B->C...)")
    parser.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="COND",
        help="exit 1 when COND holds for the last profile against the first, "
        "e.g. 'cycles>+5%%', 'peak_memory>+2%%', 'throughput<-3%%', 'oom_tiles>0'"
        " (repeatable); between runs of different sizes (gradient accumulation, device "
        "iterations, batch) gate per sample: 'cycles_per_sample>+5%%'",
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--units", choices=("KiB", "kB", "bytes"), default="KiB")


def run(args: argparse.Namespace) -> int:
    """Run ``analyse compare`` with the parsed ``args``; returns the exit code."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.cli._common import console, open_analysis
    from analyser.cli.errors import CliError
    from analyser.core.comparison import (
        COSMETIC_KEYS,
        METRICS,
        change_intervals,
        compare,
        fmt_share_delta,
        fmt_value,
    )
    from analyser.core.gates import parse_gate
    from analyser.core.intervals import outside_reasons, range_cell
    from analyser.core.units import fmt_delta_pct

    if len(args.files) < 2:
        raise CliError("compare needs at least two profiles.")
    gates = [parse_gate(g) for g in args.fail_if]  # bad syntax: exit 2 before any work
    analyses = []
    try:
        for f in args.files:
            analyses.append(open_analysis(f))
        cmp = compare(analyses)
        first, last = analyses[0].metrics, analyses[-1].metrics
        results = [
            (h, d + per_sample_note(g, first, last))
            for g, (h, d) in ((g, g.evaluate(first, last)) for g in gates)
        ]
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
        # the range the fidelity table allows for that change (both profiles are predictions)
        tab.add_column("range of the change", justify="right")
        ivs = change_intervals(analyses[0], analyses[-1])
        shown = []
        for key, label, kind in METRICS:
            vals = [a.metrics.scalar(key) for a in analyses]
            if all(v is None for v in vals):
                continue
            delta = (
                fmt_share_delta(vals[0], vals[-1])
                if kind == "share"
                else fmt_delta_pct(vals[0], vals[-1])
            )
            rng = range_cell(ivs.get(key)) or "-"
            shown.append((label, ivs.get(key)))
            tab.add_row(label, *(fmt_value(v, kind) for v in vals), delta, rng)
        con.print(tab)
        for line in outside_reasons(shown):  # why a change has no range, once per reason
            con.print(f"[dim]{esc(line)}[/]")
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
            # one line per gate, whatever the width: a CI log is searched line by line
            con.print(("[bold red]FAIL[/] " if h else "[green]pass[/] ") + esc(d), soft_wrap=True)
        return 1 if failed else 0
    finally:
        for a in analyses:
            a.close()


#: Run totals, which grow with the samples a run processes (``ipuN.`` figures are all run
#: totals but memory), and the per-sample figure to gate on instead, when there is one.
_RUN_TOTALS = {
    "total_cycles": "cycles_per_sample",
    "device_cycles": "cycles_per_sample",
    "host_seconds": None,
    "host_round_trips": None,
    "streamcopy_rx_bytes": None,
    "streamcopy_tx_bytes": None,
}


def per_sample_note(gate, a, b) -> str:
    """A sentence to add to a gate's result on a run total when A and B process different
    numbers of samples (a change of gradient accumulation, device iterations, replicas or batch):
    B's total grows with its work; the change in cycles per sample and the gate to use."""
    import re

    from analyser.core.analysis import IPU_MEMORY_FIELDS

    per_ipu = gate.metric.startswith("ipu") and "." in gate.metric
    if per_ipu and gate.metric.split(".", 1)[1] in IPU_MEMORY_FIELDS:
        return ""
    if not per_ipu and gate.metric not in _RUN_TOTALS:
        return ""
    if not a.samples or not b.samples or a.samples == b.samples:
        return ""
    note = (
        f"; but the runs differ in size ({a.samples:,} -> {b.samples:,} samples), so their "
        "totals differ with the work"
    )
    ca, cb = a.cycles_per_sample, b.cycles_per_sample
    if ca and cb:
        note += f": cycles per sample {100.0 * (cb - ca) / ca:+,.2f}% ({ca:,.0f} -> {cb:,.0f})"
    better = None if per_ipu else _RUN_TOTALS[gate.metric]
    if better and gate.mode == "rel":
        suggestion = re.sub(r"^\s*[\w.]+", better, gate.text)
        note += f"; to gate per sample use '{suggestion}'"
    else:
        note += "; compare per-sample figures (cycles_per_sample, throughput)"
    return note
