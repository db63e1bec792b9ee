"""``analyse report FILE... --format html|md|json -o OUT``: one report of one or several
profiles (several: with a comparison), or of a tune's results (``analyse report tune-results -o
tune.html``: the folder ``analyse tune`` wrote). The output file is written atomically."""

from __future__ import annotations

import argparse

from analyser.cli._common import (
    add_output_arguments,
    add_profiles_argument,
    add_threshold_argument,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse report`` to ``parser``."""
    add_profiles_argument(parser, "profiles (.h5), in order; or the folder written by analyse tune")
    parser.add_argument(
        "--format",
        choices=("html", "md", "json"),
        default=None,
        help="report format (default: from the -o suffix, else html)",
    )
    add_output_arguments(parser)
    parser.add_argument("--title", default=None, help="report title")
    parser.add_argument(
        "--resimulate",
        action="store_true",
        help="re-simulate every insight's change to show its predicted effect "
        "(slower: one engine run per tip)",
    )
    parser.add_argument(
        "--no-step-predictions",
        action="store_true",
        help="with several profiles, do not re-simulate the insight behind each step's change "
        "(the step-by-step section then shows no predicted effect; faster)",
    )
    parser.add_argument("--no-insights", action="store_true", help="leave insights out")
    add_threshold_argument(
        parser, "override an insight threshold (see analyse insights --list-thresholds)"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``analyse report`` with the parsed ``args``; returns the exit code."""
    import os
    from pathlib import Path

    from analyser.cli._common import check_profiles, console, progress_bar
    from analyser.core.insights import Thresholds
    from analyser.output import check_output
    from analyser.reports import write_report

    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lower().lstrip(".")
        fmt = {"htm": "html", "html": "html", "md": "md", "markdown": "md", "json": "json"}.get(
            suffix, "html"
        )
    out = check_output(args.output, args.files, force=args.force)
    from analyser.sim.tune import is_tune_results

    if any(is_tune_results(f) for f in args.files):
        return _tune_report(args, out, fmt)
    thresholds = Thresholds().with_overrides(args.threshold)
    check_profiles(args.files)  # a bad input: its one sentence before the long work
    with progress_bar() as bar:
        task = bar.add_task("writing report", total=None)

        def stage(text: str) -> None:  # a new stage: a new task (the count starts again)
            nonlocal task
            bar.update(task, visible=False)
            task = bar.add_task(text, total=None)

        def tick(done: int, total: int, _id: str) -> None:
            bar.update(task, completed=done, total=total, description="re-simulating")

        from analyser.sim.simulators import InProcessSimulator, ServiceSimulator, wants_cluster

        simulator: InProcessSimulator | ServiceSimulator
        if wants_cluster():  # $ANALYSE_SCHEDULER: the user's cluster
            from analyser.sim.service import get_service

            simulator = ServiceSimulator(get_service())
        else:  # a few re-simulations (one per step, or per tip): no cluster to start
            simulator = InProcessSimulator()
        write_report(
            args.files,
            out,
            fmt,
            insights=not args.no_insights,
            resimulate=args.resimulate,
            thresholds=thresholds,
            title=args.title,
            progress=tick,
            predict_transitions=not args.no_step_predictions,
            simulator=simulator,
            stage=stage,
            force=args.force,
        )
    said = f"wrote {out} ({out.stat().st_size:,} bytes, {fmt})"
    if fmt == "md":
        from analyser.reports import images_folder

        said += f" and its charts in {images_folder(out)}{os.sep}"
    console().print(said)
    return 0


def _tune_report(args: argparse.Namespace, out, fmt: str) -> int:
    from analyser.cli._common import console
    from analyser.cli.errors import CliError
    from analyser.reports.tune import write_tune_report

    if len(args.files) != 1:
        raise CliError("a tune report takes one tune folder, not profiles beside it.")
    if fmt != "html":
        raise CliError(f"a tune report is HTML; the table is {args.files[0]}/results.parquet.")
    write_tune_report(args.files[0], out, title=args.title)
    console().print(f"wrote {out} ({out.stat().st_size:,} bytes, html)")
    return 0
