"""``analyse insights FILE [--json] [--no-resimulate] [--threshold name=value ...]``."""

from __future__ import annotations

import argparse
import json
import sys

from analyser.cli._common import add_threshold_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse insights`` to ``parser``."""
    parser.add_argument("file", nargs="?", help="profile (.h5); not needed with --list-thresholds")
    parser.add_argument("--json", action="store_true", help="print the insights as JSON")
    parser.add_argument(
        "--no-resimulate",
        action="store_true",
        help="do not re-simulate the recommended changes (no predicted effects)",
    )
    add_threshold_argument(
        parser,
        "override a threshold (repeatable), e.g. host_wait_high=0.3; --list-thresholds shows them",
    )
    parser.add_argument(
        "--list-thresholds",
        action="store_true",
        help="list the thresholds with their defaults and exit",
    )
    from analyser.cli._service import add_service_arguments

    add_service_arguments(parser, few=True)


def run(args: argparse.Namespace) -> int:
    """Run ``analyse insights`` with the parsed ``args``; returns the exit code."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.cli._common import console, open_analysis, progress_bar
    from analyser.cli.errors import CliError
    from analyser.core import intervals
    from analyser.core.insights import ORDER, Thresholds, find_insights
    from analyser.core.insights.model import SHOWN_EFFECTS
    from analyser.core.intervals import change_note, outside_reasons, range_cell
    from analyser.core.quantities import QUANTITIES
    from analyser.core.units import fmt_bytes, fmt_delta_pct, fmt_pct

    con = console()
    if args.list_thresholds:
        tab = Table("threshold", "default", "meaning", title="Insight thresholds")
        for name, (default, doc) in Thresholds.docs().items():
            tab.add_row(name, f"{default:g}", doc)
        con.print(tab)
        return 0
    if args.file is None:
        raise CliError("give a profile (.h5) to analyse, or --list-thresholds.")
    from analyser.cli._service import configure_from_args, simulator_from_args

    simulator = None if args.no_resimulate else simulator_from_args(args)
    if simulator is None:
        configure_from_args(args)  # the options are still checked
    thresholds = Thresholds().with_overrides(args.threshold)
    with open_analysis(args.file) as a:
        if args.no_resimulate:
            tips = find_insights(a, thresholds)
        else:
            with progress_bar() as bar:
                task = bar.add_task("re-simulating the recommended changes", total=None)

                def step(done: int, total: int, iid: str) -> None:
                    if iid == "memory.combined":
                        bar.update(
                            task,
                            description="searching a combination that fits",
                            completed=done,
                            total=total,
                        )
                    else:
                        bar.update(task, completed=done, total=total)

                tips = find_insights(a, thresholds, simulator=simulator, progress=step)
        m = a.metrics
        if args.json:
            json.dump(
                {
                    "file": str(a.path),
                    "fits": m.fits,
                    "oom_tiles": m.oom_tiles,
                    "memory_share_used": m.memory_share_used,
                    "baseline_note": next(
                        (
                            t.effect.baseline_note
                            for t in tips
                            if t.effect and t.effect.baseline_note
                        ),
                        None,
                    ),
                    "insights": [t.to_dict() for t in tips],
                    # how far to trust the profile's own figures (docs/report-schema.md)
                    "prediction": intervals.profile_prediction(a, intervals.PROFILE_FIGURES),
                },
                sys.stdout,
                indent=2,
            )
            sys.stdout.write("\n")
            return 0
        mem = a.memory
        banner = (
            f"[bold green]fits[/]: {fmt_pct(mem.share_used)} of the memory used"
            if mem.fits
            else f"[bold red]OUT OF MEMORY[/]: {mem.n_oom_tiles:,} tiles, "
            f"{fmt_pct(mem.share_used)} of the memory needed"
        )
        con.print(
            f"{esc(a.path.name)}: {banner}; fullest tile {fmt_bytes(mem.max_tile_bytes)} of "
            f"{fmt_bytes(mem.sram_per_tile)}"
        )
        note = next(
            (t.effect.baseline_note for t in tips if t.effect and t.effect.baseline_note), ""
        )
        if note:
            warn = "reproduces" not in note
            con.print(f"[{'yellow' if warn else 'dim'}]{esc(note)}[/]")
        if tips:  # the order, said (the GUI's list says the same: unsaid, a warning above a critical reads as a mistake)
            con.print(f"[dim]{esc(ORDER['fits' if mem.fits else 'oom'])}[/]")
        if not tips:
            con.print("No insights: nothing crosses its threshold (see --list-thresholds).")
            return 0
        colour = {"critical": "red", "warning": "yellow", "info": "cyan"}
        low_shown = False
        for n, t in enumerate(tips, 1):
            if mem.fits and t.category == "memory" and not low_shown:
                low_shown = True
                con.rule(
                    "[dim]Low headroom: memory tips (the program fits; they free memory, usually "
                    "at some cost in throughput)[/]",
                    characters="═",
                )
            con.rule(
                f"[bold]{n}. {esc(t.title)}[/]  [{colour[t.severity]}]{t.severity}[/] [dim]({t.id})[/]",
                align="left",
            )
            con.print(esc(t.summary))
            for e in t.evidence:
                con.print(
                    f"  • {esc(e.text)}" + (f" [dim]\\[{esc(e.where)}][/]" if e.where else "")
                )
            if t.change:
                con.print(
                    "  [bold]change:[/] "
                    + esc(", ".join(f"{k} = {v!r}" for k, v in t.change.items()))
                )
            if t.trade_off:
                con.print(f"  [bold]trade-off:[/] {esc(t.trade_off)}")
            eff = t.effect
            if eff is not None and eff.after:
                now = "now (re-simulated)" if eff.baseline == "resimulated" else "now"
                tab = Table(
                    "predicted effect", now, "after", "change", "range", box=None, padding=(0, 2)
                )
                for key in SHOWN_EFFECTS:
                    q = QUANTITIES[key]
                    b, c = eff.before.get(key), eff.after.get(key)
                    iv = range_cell((eff.intervals.get(key) or {}).get("change"))
                    tab.add_row(f"  {q.short}", q.format(b), q.format(c), fmt_delta_pct(b, c), iv)
                con.print(tab)
                why = [
                    (QUANTITIES[k].short, (eff.intervals.get(k) or {}).get("change"))
                    for k in SHOWN_EFFECTS
                ]
                for line in outside_reasons(why):
                    con.print(f"  [dim]{esc(line)}[/]")
                note = change_note(
                    (eff.intervals.get("throughput_samples_per_s") or {}).get("change")
                )
                if note and not note.startswith(intervals.OUTSIDE):  # said above otherwise
                    con.print(f"  [dim]throughput change: {esc(note)}[/]")
            if eff is not None:
                style = {"good": "green", "bad": "red"}.get(eff.tone, "yellow")
                con.print(f"  [{style}]{esc(eff.message)}[/]")
    return 0
