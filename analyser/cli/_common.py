"""Helpers shared by the analysis sub-commands (summary, insights, report, compare,
export-trace): opening profiles with clear errors, the console and progress bars. Output files
are checked and written by :mod:`analyser.output`."""

from __future__ import annotations

import os


def open_analysis(path: str | os.PathLike[str]):
    """Open a profile as an :class:`analyser.core.Analysis` (ProfileError on a bad file)."""
    from analyser.core import Analysis

    return Analysis.open(path)


def add_output_arguments(parser) -> None:
    """``-o/--output OUT`` and ``--force`` of the sub-commands that write a file (report,
    export-trace), checked by :func:`analyser.output.check_output`."""
    parser.add_argument("-o", "--output", required=True, help="output file")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace OUT even when the existing file was not written by analyse "
        "(an HDF5 file is never replaced)",
    )


def console(stderr: bool = False, file=None):
    """A rich console that shows every control character of the text it prints as an escape
    (:func:`analyser.literal.terminal`): names from a profile never reach the terminal raw."""
    from rich.console import Console

    from analyser.literal import terminal

    class LiteralConsole(Console):
        def render_str(self, text: str, **kwargs):  # every str printed or put in a table
            return super().render_str(terminal(text), **kwargs)

    if file is not None:  # a text file (analyse diff -o): plain text, a fixed width
        return LiteralConsole(
            file=file, highlight=False, soft_wrap=False, width=120, color_system=None
        )
    return LiteralConsole(stderr=stderr, highlight=False, soft_wrap=False)


def progress_bar(*, percent: bool = False, status: bool = False):
    """The progress bar of every command: a transient rich bar on stderr (hidden when stderr is
    not a terminal) with the task's description, the bar, ``done/total`` (the percentage with
    ``percent``, for a fraction), the task's ``state`` field with ``status``, the elapsed time."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%") if percent else MofNCompleteColumn(),
    ]
    if status:
        columns.append(TextColumn("{task.fields[state]}"))
    return Progress(*columns, TimeElapsedColumn(), console=console(stderr=True), transient=True)


def at_least_one(text: str) -> int:
    """argparse type: a whole number >= 1 (one sentence otherwise)."""
    import argparse

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {n}")
    return n
