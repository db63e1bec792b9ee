"""``analyse critical-path PROFILE [--json] [--top N] [--what-if] [-o FILE]``: the chain of
steps across IPUs, pipeline stages, syncs and the host that sets the length of the run, each
link with its share of the call and what shortening it could buy (analyser.core.critical_path)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from analyser.cli._common import at_least_one

if TYPE_CHECKING:
    from rich.console import JustifyMethod


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse critical-path`` to ``parser``."""
    parser.add_argument("file", help="profile (.h5)")
    parser.add_argument("--json", action="store_true", help="the path's links as JSON")
    parser.add_argument("-o", "--output", help="write the path (text, or JSON) to FILE")
    parser.add_argument(
        "--top",
        type=at_least_one,
        default=8,
        metavar="N",
        help="links listed, longest first (default 8; --json lists all)",
    )
    parser.add_argument(
        "--what-if",
        action="store_true",
        help="re-simulate the insights whose run options act on the top three links and show "
        "their predicted effect (slower: one simulation per insight)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace OUT even when analyse did not write it"
    )
    from analyser.cli._service import add_service_arguments

    add_service_arguments(parser, few=True)


def _what_if_text(entry: dict) -> str:
    from analyser.core.intervals import describe_change
    from analyser.core.units import fmt_rel_change

    rel = entry.get("throughput_change")
    if entry.get("status") not in ("fits", "oom") or rel is None:
        return f"{entry['title']}: not re-simulated"
    interval = describe_change(entry.get("interval"), short=True)
    verdict = "" if entry.get("status") == "fits" else " (does not fit)"
    return f"{entry['title']}: throughput {fmt_rel_change(rel)} {interval}{verdict}".rstrip()


def render(con, path, name: str, top: int) -> None:
    """The critical path as text on a rich console."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.core.units import fmt_int, fmt_pct

    clock = path.clock_hz or 1.0
    con.print(
        f"[bold]{esc(name)}[/]: the critical path of the run is {fmt_int(path.call_cycles)} "
        f"cycles ({path.call_cycles / clock * 1e3:,.2f} ms): {fmt_int(path.device_cycles)} in "
        f"the device trace ({fmt_int(path.steps.size)} steps) and {fmt_int(path.host_cycles)} "
        "on the host outside it"
    )
    tab = Table(title="links, longest first", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("link", "left"),
        ("cycles", "right"),
        ("share", "right"),
        ("if it took no time", "right"),
        ("where", "left"),
    )
    for c, j in columns:
        tab.add_column(c, justify=j)
    for link in path.links[:top]:
        where = ", ".join(f"{n} {fmt_pct(c / link.cycles)}" for n, c in link.layers if link.cycles)
        if not where and link.by_type:
            where = ", ".join(f"{k} {fmt_int(v)}" for k, v in list(link.by_type.items())[:3])
        bound = "-" if link.bound == float("inf") else f"at most +{link.bound:.0%}"
        tab.add_row(esc(link.label), fmt_int(link.cycles), fmt_pct(link.share), bound, esc(where))
    con.print(tab)
    if len(path.links) > top:
        con.print(f"{len(path.links) - top:,} more links (--top, --json)")
    for link in path.links:
        for entry in link.what_if:
            con.print(f"  {esc(link.label)}: {esc(_what_if_text(entry))}")


def run(args: argparse.Namespace) -> int:
    """Run ``analyse critical-path`` with the parsed ``args``; returns the exit code once the
    processes it started (a local cluster's, with --what-if --workers N) have ended."""
    from analyser.cli._service import ending_children

    return ending_children(_run)(args)


def _run(args: argparse.Namespace) -> int:
    from analyser.cli._common import emit, open_analysis
    from analyser.cli.errors import CliError
    from analyser.core.critical_path import attach_what_if, critical_path
    from analyser.output import check_output

    out = check_output(args.output, [args.file], force=args.force) if args.output else None
    simulator = None
    if args.what_if:
        from analyser.cli._service import simulator_from_args

        simulator = simulator_from_args(args)
    else:
        from analyser.cli._service import configure_from_args

        configure_from_args(args)
    with open_analysis(args.file) as a:
        path = critical_path(a.src)
        if path is None:
            raise CliError(
                f"profile {a.path} has no execution (it does not fit in memory), so it has no "
                "critical path; see analyse insights for what makes it fit."
            )
        if simulator is not None:
            from analyser.core.insights import find_insights

            attach_what_if(path, find_insights(a, simulator=simulator))
        doc = {"file": str(a.path), **path.to_dict()} if args.json else None
        return emit(out, doc, lambda con: render(con, path, a.name, args.top))
