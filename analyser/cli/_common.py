"""Helpers shared by the analysis sub-commands (summary, insights, report, compare,
export-trace): opening profiles with clear errors, the console and progress bars. Output files
are checked and written by :mod:`analyser.output`."""

from __future__ import annotations

import os


def open_analysis(path: str | os.PathLike[str]):
    """Open a profile as an :class:`analyser.core.Analysis` (ProfileError on a bad file)."""
    from analyser.core import Analysis

    return Analysis.open(path)


def check_profiles(paths) -> None:
    """Open each profile's metadata and close it: a missing or damaged input is refused in one
    sentence before a command's long work (and its progress) starts."""
    from profiles import open_profile

    for path in paths:
        with open_profile(path):
            pass


def add_profiles_argument(parser, help: str, nargs: str = "+") -> None:
    """``FILE...``: the profiles a command reads, in order (``args.files``)."""
    parser.add_argument("files", nargs=nargs, metavar="FILE", help=help)


def add_threshold_argument(parser, help: str) -> None:
    """``--threshold NAME=VALUE``, repeatable (``args.threshold``, a list): insight thresholds
    overridden through :meth:`analyser.core.insights.Thresholds.with_overrides`."""
    parser.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE", help=help)


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


#: Columns of the command's output given by ``--width`` (None: the terminal's width on a
#: terminal, else :data:`UNBOUNDED`). Set by :func:`set_width` for each command.
_WIDTH: int | None = None
#: Width of an output that is not a terminal (a pipe, a log, a file written with ``-o``): wide
#: enough that no table column is cut or folded and no line wrapped; a table is as wide as its
#: content (rich pads nothing to the console's width), a rule :data:`RULE_WIDTH`.
UNBOUNDED = 10_000
#: Width of a rule (a section's heading line) in an output of :data:`UNBOUNDED` width.
RULE_WIDTH = 100


def set_width(width: int | None) -> None:
    """The width of this command's output (``--width``; None: the terminal's, or unbounded)."""
    global _WIDTH
    _WIDTH = width


def add_width_argument(parser) -> None:
    """``--width N``: the columns of the command's tables and text (``args.width``)."""
    parser.add_argument(
        "--width",
        type=_width,
        default=None,
        metavar="N",
        help="columns of the output (default: the terminal's width; when the output is not a "
        "terminal, such as a pipe or a log, as wide as the tables need, nothing cut)",
    )


def _width(text: str) -> int:
    """argparse type of ``--width``: 20 to :data:`UNBOUNDED` columns."""
    import argparse

    n = at_least_one(text)
    if not 20 <= n <= UNBOUNDED:
        raise argparse.ArgumentTypeError(f"expected 20 to {UNBOUNDED:,} columns, got {n:,}")
    return n


def console(stderr: bool = False, file=None):
    """A rich console that shows every control character of the text it prints as an escape
    (:func:`analyser.literal.terminal`): names from a profile never reach the terminal raw.

    Its width is ``--width``'s when given; else the terminal's; else (stdout a pipe or a log, or
    ``file``) :data:`UNBOUNDED`, so that no name or header is cut at 80 columns. The ``COLUMNS``
    environment variable, when set, is the terminal's width, as rich reads it."""
    import os

    from rich.console import Console

    from analyser.literal import terminal

    class LiteralConsole(Console):
        def render_str(self, text: str, **kwargs):  # every str printed or put in a table
            return super().render_str(terminal(text), **kwargs)

        def rule(self, title="", *, characters="\u2500", style="rule.line", align="center"):
            if self.width <= RULE_WIDTH:
                return super().rule(title, characters=characters, style=style, align=align)
            from rich.rule import Rule
            from rich.text import Text

            # as wide as its title needs (rich cuts a title longer than the rule)
            shown = Text.from_markup(title) if isinstance(title, str) else title
            width = min(self.width, max(RULE_WIDTH, shown.cell_len + 8))
            self.print(Rule(title, characters=characters, style=style, align=align), width=width)
            return None

    if file is not None:  # a text file (analyse diff -o): plain text
        return LiteralConsole(
            file=file,
            highlight=False,
            soft_wrap=False,
            width=_WIDTH or UNBOUNDED,
            color_system=None,
        )
    con = LiteralConsole(stderr=stderr, highlight=False, soft_wrap=False, width=_WIDTH)
    if _WIDTH is None and not stderr and not con.is_terminal and not os.environ.get("COLUMNS"):
        con.width = UNBOUNDED
    return con


def progress_bar(*, percent: bool = False, status: bool = False):
    """The progress bar of every command: a transient rich bar on stderr with the task's
    description, the bar, ``done/total`` (the percentage with ``percent``, for a fraction), the
    task's ``state`` field with ``status``, the elapsed time. When stderr is not a terminal (a
    log, CI, a pipe) a bar would show nothing: :class:`StageLines` prints a line per stage."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = console(stderr=True)
    if not err.is_terminal:
        return StageLines(percent=percent, status=status, delay=STAGE_DELAY)

    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%") if percent else MofNCompleteColumn(),
    ]
    if status:
        columns.append(TextColumn("{task.fields[state]}"))
    return Progress(*columns, TimeElapsedColumn(), console=err, transient=True)


#: Seconds a command runs before its stage lines start (stderr not a terminal; StageLines).
STAGE_DELAY = 5.0


class StageLines:
    """The progress bar's interface (``add_task``, ``update``, ``advance``) for a stderr that is
    not a terminal: one line per stage on stderr (``[elapsed] description done/total: state``),
    written when the description changes and, for counted work, when the count moves; a
    fraction (``percent``) only by stage. Text is shown literally (control characters escaped).

    A command that ends (or fails) within ``delay`` seconds prints no stage line, so a quick
    command's output, or an error's one sentence, is all there is; from ``delay`` on the stage
    then running is printed (by a timer, even when the stage reports nothing), and every later
    one as it starts. Nothing is printed once the ``with`` block is left."""

    def __init__(
        self, *, percent: bool = False, status: bool = False, stream=None, delay: float = 2.0
    ) -> None:
        import sys
        import threading

        self._percent = percent
        self._status = status
        self._stream = stream or sys.stderr
        self._delay = delay
        self._tasks: dict[int, dict] = {}
        self._start = 0.0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._pending: str | None = None
        self._shown = False
        self._closed = False

    def __enter__(self) -> StageLines:
        import time

        self._start = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()

    def add_task(self, description: str, total: float | None = None, **fields) -> int:
        """Start a task (its first stage line); returns its id."""
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
        import threading
        import time

        from analyser.literal import one_line

        state = self._tasks[task]
        elapsed = time.monotonic() - self._start
        text = f"{state['description']}{self._count(state)}"
        if self._status and state.get("state"):
            text += f": {state['state']}"
        text = one_line(text)
        with self._lock:
            if self._closed:
                return
            if self._shown or elapsed >= self._delay:
                self._write(f"[{elapsed:6.1f} s] {text}")
                return
            self._pending = text
            if self._timer is None:
                self._timer = threading.Timer(self._delay - elapsed, self._flush)
                self._timer.daemon = True
                self._timer.start()

    def _flush(self) -> None:
        import time

        with self._lock:
            if self._closed or self._pending is None:
                return
            self._write(f"[{time.monotonic() - self._start:6.1f} s] {self._pending}")
            self._pending = None

    def _write(self, line: str) -> None:
        self._shown = True
        self._stream.write(line + "\n")
        self._stream.flush()


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


def emit(out, doc: dict | None, render) -> int:
    """A command's result on stdout, or written atomically to ``out`` (then "wrote OUT (N
    bytes)" on stderr): ``doc`` as JSON when it is given, else what ``render(console)``
    prints; returns the exit code (0)."""
    import json
    import sys

    from analyser.output import atomic_output

    if doc is not None:
        text = json.dumps(doc, indent=1, allow_nan=False, default=str) + "\n"
        if out is None:
            sys.stdout.write(text)
            return 0
        with atomic_output(out, "w") as fh:
            fh.write(text)
    elif out is None:
        render(console())
        return 0
    else:
        with atomic_output(out, "w") as fh:
            render(console(file=fh))
    console(stderr=True).print(f"wrote {out} ({out.stat().st_size:,} bytes)")
    return 0
