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
    """The progress bar of every command: a transient rich bar on stderr with the task's
    description, the bar, ``done/total`` (the percentage with ``percent``, for a fraction), the
    task's ``state`` field with ``status``, the elapsed time. When stderr is not a terminal (a
    log, CI, a pipe) a bar would show nothing: :class:`StageLines` prints a line per stage."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = console(stderr=True)
    if not err.is_terminal:
        return StageLines(percent=percent, status=status)

    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%") if percent else MofNCompleteColumn(),
    ]
    if status:
        columns.append(TextColumn("{task.fields[state]}"))
    return Progress(*columns, TimeElapsedColumn(), console=err, transient=True)


class StageLines:
    """The progress bar's interface (``add_task``, ``update``, ``advance``) for a stderr that is
    not a terminal: one line per stage on stderr (``[elapsed] description done/total: state``),
    written when the description changes and, for counted work, when the count moves; a
    fraction (``percent``) only by stage. Text is shown literally (control characters escaped)."""

    def __init__(self, *, percent: bool = False, status: bool = False, stream=None) -> None:
        self._percent = percent
        self._status = status
        self._stream = stream
        self._tasks: dict[int, dict] = {}
        self._start = 0.0

    def __enter__(self) -> StageLines:
        import time

        self._start = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, **fields) -> int:
        """Start a task (prints its first line); returns its id."""
        task = len(self._tasks)
        self._tasks[task] = {"description": description, "total": total, "completed": 0}
        self._tasks[task].update(fields)
        self._line(task)
        return task

    def update(self, task: int, *, advance: float | None = None, **changes) -> None:
        """Change a task's description, total, completed count or fields (a line when that is a
        new stage or, for counted work, a new count)."""
        state = self._tasks[task]
        before = (state["description"], self._count(state))
        if advance is not None:
            state["completed"] = (state["completed"] or 0) + advance
        state.update({k: v for k, v in changes.items() if v is not None})
        if (state["description"], self._count(state)) != before:
            self._line(task)

    def advance(self, task: int, advance: float = 1) -> None:
        """Move a task's count on by ``advance``."""
        self.update(task, advance=advance)

    def _count(self, state: dict) -> str:
        if self._percent or state.get("total") is None:
            return ""
        return f" {int(state['completed'] or 0):,}/{int(state['total']):,}"

    def _line(self, task: int) -> None:
        import sys
        import time

        from analyser.literal import one_line

        state = self._tasks[task]
        text = f"[{time.monotonic() - self._start:6.1f} s] {state['description']}"
        text += self._count(state)
        if self._status and state.get("state"):
            text += f": {state['state']}"
        stream = self._stream or sys.stderr
        stream.write(one_line(text) + "\n")
        stream.flush()


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
