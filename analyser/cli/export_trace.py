"""``analyse export-trace FILE --format chrome|perfetto -o OUT [--split-by-run]``."""

from __future__ import annotations

import argparse

from analyser.cli._common import add_output_arguments, at_least_one


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse export-trace`` to ``parser``."""
    parser.add_argument("file", help="profile (.h5)")
    parser.add_argument(
        "--format",
        choices=("chrome", "perfetto"),
        default="chrome",
        help="chrome: trace-event JSON (chrome://tracing, ui.perfetto.dev); "
        "perfetto: protobuf (default chrome)",
    )
    add_output_arguments(parser)
    parser.add_argument(
        "--max-events",
        type=at_least_one,
        metavar="N",
        help="write at most N events: repeated loop bodies, device iterations or, "
        "if needed, time windows merged into slices with their step counts and cycles; the "
        "file says what it merged",
    )
    parser.add_argument(
        "--split-by-run",
        action="store_true",
        help="one file per host call (device-iteration run): OUT.runNNNN.ext",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``analyse export-trace`` with the parsed ``args``; returns the exit code."""
    from analyser.cli._common import check_profiles, console, progress_bar
    from analyser.export import export_trace
    from analyser.output import check_output

    out = check_output(args.output, [args.file], force=args.force)
    check_profiles([args.file])  # a bad input: its one sentence before the long work
    if args.max_events is not None:
        return _aggregated(args, out)
    if args.split_by_run:  # the files written are OUT-stem.runNNNN.OUT-suffix
        for part in sorted(out.parent.glob(f"{out.stem}.run[0-9][0-9][0-9][0-9]{out.suffix}")):
            check_output(part, [args.file], force=args.force)
    with progress_bar() as bar:
        task = bar.add_task("exporting trace", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        files = export_trace(
            args.file, out, fmt=args.format, split_by_run=args.split_by_run, progress=tick
        )
    con = console()
    if len(files) == 1:
        con.print(f"wrote {files[0]} ({files[0].stat().st_size:,} bytes)")
    else:
        con.print(f"wrote {len(files)} files: {files[0]} ... {files[-1]}")
    return 0


def _aggregated(args: argparse.Namespace, out) -> int:
    from analyser.cli._common import console, progress_bar
    from analyser.cli.errors import CliError
    from analyser.export.aggregate import export_aggregated

    if args.split_by_run:
        raise CliError("--max-events writes one file; drop --split-by-run.")
    with progress_bar() as bar:
        task = bar.add_task("exporting trace", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        info = export_aggregated(args.file, out, args.max_events, progress=tick, fmt=args.format)
    con = console()
    con.print(
        f"wrote {out} ({out.stat().st_size:,} bytes, {info['events']:,} events for "
        f"{info['steps']:,} steps; merged {info['merged']})"
    )
    return 0
