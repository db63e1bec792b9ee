"""``analyse export-trace FILE --format chrome|perfetto -o OUT [--split-by-run]``."""

from __future__ import annotations

import argparse

from analyser.cli._common import add_output_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
        "--split-by-run",
        action="store_true",
        help="one file per host call (device-iteration run): OUT.runNNNN.ext",
    )


def run(args: argparse.Namespace) -> int:
    from analyser.cli._common import console, progress_bar
    from analyser.export import export_trace
    from analyser.output import check_output

    out = check_output(args.output, [args.file], force=args.force)
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
