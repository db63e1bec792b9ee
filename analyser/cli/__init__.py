"""The ``analyse`` command-line tool.

Each sub-command lives in its own module under ``analyser.cli`` and exposes two functions::

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int: ...   # returns the exit code

Modules are imported lazily, only for the command that is run, so ``analyse --help`` stays fast
and a command never pays for another's imports (the GUI's Qt, for instance).

Expected errors are raised as :class:`analyser.cli.errors.CliError` (or any exception class that
subclasses ``UserFacingError`` in ``profiles.errors``); ``main`` prints their one-sentence message
to stderr and exits with their code, never a traceback. Ctrl-C exits with 130 and one line; an
``OSError`` reaching ``main`` (permission denied, disk full) is one sentence too (set
``ANALYSE_TRACEBACK=1`` to see its traceback); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

# name -> (module, one-line help). The single registry of sub-commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("analyser.cli.demo", "run the reference walkthrough (ResNet-101, 2 IPUs) end to end"),
    "profile": ("analyser.cli.profile", "run the engine on a run config and write an HDF5 profile"),
    "summary": ("analyser.cli.summary", "print a summary of a profile"),
    "validate": ("analyser.cli.validate", "check a profile file against the schema"),
    "insights": ("analyser.cli.insights", "list insights (tips) with their predicted effects"),
    "report": ("analyser.cli.report", "write an HTML, Markdown or JSON report of profiles"),
    "compare": ("analyser.cli.compare", "compare two profiles; --fail-if for regression gates"),
    "export-trace": ("analyser.cli.export_trace", "export the execution trace (Chrome / Perfetto)"),
    "diff": (
        "analyser.cli.diff",
        "two runs aligned step by step: the change in cycles by step type, layer and program",
    ),
    "roofline": (
        "analyser.cli.roofline",
        "per operation: FLOPs, bytes moved, intensity, achieved and attainable FLOPs per cycle",
    ),
    "critical-path": (
        "analyser.cli.critical_path",
        "the chain of steps across IPUs, stages, syncs and the host that sets the run's length",
    ),
    "query": ("analyser.cli.query", "SQL over a profile's tables (DuckDB, read-only, sandboxed)"),
    "tune": ("analyser.cli.tune", "search the run options for the best configuration that fits"),
    "gui": ("analyser.cli.gui", "open the desktop Graph Analyser"),
    "model-info": ("analyser.cli.model_info", "describe an ONNX model and suggest split points"),
    "export-onnx": ("analyser.cli.export_onnx", "write a zoo model as an ONNX file"),
    "calibrate-host": (
        "analyser.cli.calibrate_host",
        "measure the host data-pipeline transforms here and write a host profile",
    ),
}


#: Commands that print no table or text to fit a width (no ``--width``).
NO_WIDTH = frozenset({"gui"})


def _available() -> dict[str, tuple[str, str]]:
    return {
        name: spec
        for name, spec in COMMANDS.items()
        if importlib.util.find_spec(spec[0]) is not None
    }


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ipu-graph-analyser")
    except Exception:  # not installed (run from a source tree)
        return "unknown"


class _Parser(argparse.ArgumentParser):
    """argparse with a short error: one sentence, the usage only when it fits on two lines,
    otherwise a pointer to ``--help`` (``analyse profile`` has ~50 options)."""

    def error(self, message: str) -> NoReturn:
        usage = self.format_usage().strip()
        if usage.count("\n") < 2:
            print(usage, file=sys.stderr)
        message = message[:1].lower() + message[1:]
        self.exit(2, f"{self.prog}: error: {message.rstrip('.')} (see '{self.prog} --help').\n")


def build_parser() -> argparse.ArgumentParser:
    """The top-level ``analyse`` parser: the commands and --version (for --help)."""
    parser = _Parser(
        prog="analyse",
        description="IPU Graph Analyser: simulate IPU runs, read profiles, give insights.",
        epilog="Run 'analyse COMMAND --help' for a command's options. "
        "Quick start: 'analyse demo' writes the reference walkthrough to demo/.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in _available().items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _main(argv: list[str]) -> int:
    commands = _available()
    if not argv or argv[0] not in commands:
        parser = build_parser()
        if not argv:
            parser.print_usage(sys.stderr)
            print(
                f"analyse: error: no command given; choose one of {', '.join(commands)} "
                "(see 'analyse --help').",
                file=sys.stderr,
            )
            return 2
        if not argv[0].startswith("-"):
            parser.print_usage(sys.stderr)
            close = difflib.get_close_matches(argv[0], list(commands), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            print(
                f"analyse: error: unknown command {argv[0]!r}{hint}; "
                f"choose one of {', '.join(commands)}.",
                file=sys.stderr,
            )
            return 2
        parser.parse_args(argv)  # --help / --version exit; anything else is an error
        parser.print_help()
        return 2

    # what a command's errors need, imported once a command runs (--version and --help do not)
    from analyser.cli.errors import CliError, exit_code_for, message_for
    from analyser.literal import terminal

    name = argv[0]
    module = importlib.import_module(commands[name][0])
    sub = _Parser(prog=f"analyse {name}", description=commands[name][1])
    module.add_arguments(sub)
    from analyser.cli import _common

    if name not in NO_WIDTH:
        _common.add_width_argument(sub)
    args = sub.parse_args(argv[1:])
    _common.set_width(getattr(args, "width", None))
    try:
        return int(module.run(args) or 0)
    except CliError as exc:
        print(terminal(f"analyse {name}: {exc}"), file=sys.stderr)
        return exc.exit_code
    except (KeyboardInterrupt, BrokenPipeError):
        raise
    except MemoryError:
        # an allocation above what the process may get (the estimates did not foresee it)
        print(
            f"analyse {name}: out of memory; use a smaller configuration or input, or run where "
            "more memory is available.",
            file=sys.stderr,
        )
        return 2
    except OSError as exc:
        if os.environ.get("ANALYSE_TRACEBACK"):
            raise
        # the environment, not the input: permission denied, disk full, read-only file system
        what = f" {exc.filename}" if exc.filename else ""
        reason = exc.strerror or str(exc) or type(exc).__name__
        print(terminal(f"analyse {name}: cannot access{what}: {reason}."), file=sys.stderr)
        return 2
    except Exception as exc:  # expected, user-facing errors from any layer
        if _INTERRUPTED:
            # a Ctrl-C that a library turned into its own error on the way out (Dask's nanny,
            # interrupted while starting its worker, raises "Nanny failed to start worker
            # process"): the user asked to stop, so this is an interruption, not a bug
            raise KeyboardInterrupt from exc
        code = exit_code_for(exc)
        if code is None:
            print(
                f"analyse {name}: internal error ({type(exc).__name__}); this is a bug, "
                "please report it with the traceback below.",
                file=sys.stderr,
            )
            raise
        print(terminal(f"analyse {name}: {message_for(exc)}"), file=sys.stderr)
        return code


_INTERRUPTED = False


def _note_ctrl_c(signum: int, frame: object) -> None:
    """Python's own Ctrl-C handler, remembering that it ran (see ``_main``'s error branch)."""
    global _INTERRUPTED
    _INTERRUPTED = True
    if _where_ignored(frame):
        _send_again(signum)
        return
    raise KeyboardInterrupt


# -- signals whose handler runs where Python ignores exceptions ---------------------------------
# A handler's exception raised in a garbage-collector callback (Dask's GCDiagnosis._gc_callback
# during a tune), a ``__del__`` or a weakref callback is printed as "Exception ignored in ..."
# and lost: the command went on and exited 0. The handlers see such a place in the stack and,
# instead of raising there, send the signal again a moment later (from a helper thread: sent
# from here it would run at once, still inside), until it lands in the command's own code. Any
# place the stack does not show is caught by the unraisable hook, which does the same.


def _where_ignored(frame) -> bool:
    """Whether ``frame`` (the handler's) runs inside code whose exceptions Python ignores: a
    gc callback, a ``__del__``, this module's unraisable hook."""
    import gc

    codes = {_redeliver.__code__}
    for cb in list(gc.callbacks):
        code = getattr(getattr(cb, "__func__", cb), "__code__", None)
        if code is not None:
            codes.add(code)
    while frame is not None:
        if frame.f_code in codes or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _send_again(signum: int) -> None:
    import threading
    import time

    def send() -> None:
        time.sleep(0.005)
        os.kill(os.getpid(), signum)

    threading.Thread(target=send, name="signal-again", daemon=True).start()


def _redeliver(unraisable) -> None:
    """``sys.unraisablehook``: a signal's exception that Python ignored (raised in a place the
    handler could not see) is sent again; anything else goes to the hook there before."""
    import signal

    from profiles.atomic import Interrupted

    exc = unraisable.exc_value
    if isinstance(exc, Interrupted):
        _send_again(exc.signum)
    elif type(exc) is KeyboardInterrupt and _INTERRUPTED:
        _send_again(signal.SIGINT)
    else:
        _PREVIOUS_UNRAISABLEHOOK(unraisable)


_PREVIOUS_UNRAISABLEHOOK = sys.unraisablehook


def _terminate_like_ctrl_c() -> None:
    """SIGTERM ends a command as Ctrl-C does (outputs abandoned cleanly, temporary files
    removed), with exit code 143 (128 + 15) instead of dying where it stands."""
    import signal
    import threading

    def terminate(signum: int, frame: object) -> None:
        # imported here: profiles.atomic (secrets, shutil, pathlib) is a tenth of --version's
        # start-up, and every command that writes has imported it long before a SIGTERM
        from profiles.atomic import Interrupted

        if _where_ignored(frame):
            _send_again(signum)
            return
        raise Interrupted(signum)

    if threading.current_thread() is threading.main_thread() and signal.getsignal(
        signal.SIGTERM
    ) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, terminate)
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ):
        signal.signal(signal.SIGINT, _note_ctrl_c)
    if sys.unraisablehook is not _redeliver:
        global _PREVIOUS_UNRAISABLEHOOK
        _PREVIOUS_UNRAISABLEHOOK = sys.unraisablehook
        sys.unraisablehook = _redeliver


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``analyse``; returns the exit code (0 ok, 1 a check failed (``--fail-if``, ``validate``),
    2 bad input or an output that cannot be written, 130 interrupted). Expected errors print one sentence to stderr, never a traceback."""
    if argv is None:  # the console script (sys.exit(main())): the process ends after this
        import atexit
        import gc

        # last of the exit handlers (they run in reverse): what is alive then is freed as the
        # interpreter ends without the cycle collections it runs over every object while it
        # does (0.1-0.2 s of CPU after a command that loaded pandas, pyarrow and plotly);
        # garbage cycles left then are not collected, as none is after os._exit. Never in a
        # process that goes on (the tests, a caller of main([...])).
        atexit.register(gc.freeze)
    argv = list(sys.argv[1:] if argv is None else argv)
    global _INTERRUPTED
    _INTERRUPTED = False  # this command's Ctrl-C only (tests and scripts call main() repeatedly)
    try:
        # inside the try: it imports the profiles package (h5py), where a Ctrl-C in the first
        # second of a command gave a KeyboardInterrupt traceback
        _terminate_like_ctrl_c()
        return _main(argv)
    except KeyboardInterrupt as exc:
        # Ctrl-C: 130; SIGTERM deferred by a write (profiles.atomic.Interrupted): 143
        code = getattr(exc, "exit_code", 130)
        print("analyse: interrupted." if code == 130 else "analyse: terminated.", file=sys.stderr)
        return code
    except BrokenPipeError:
        # the reader of our output went away (analyse ... | head): stop quietly, like rich does
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
