"""The ``analyse`` command-line tool.

Each sub-command lives in its own module under ``analyser.cli`` and exposes two functions::

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int: ...   # returns the exit code

Modules are imported lazily, only for the command that is run, so ``analyse --help`` stays fast
and a command never pays for another's imports (the GUI's Qt, for instance).

Expected errors are raised as :class:`analyser.cli.errors.CliError` (or any exception class that
subclasses ``UserFacingError`` in ``profiles.errors``); ``main`` prints their one-sentence message
to stderr and exits with their code, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

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
    "gui": ("analyser.cli.gui", "open the desktop Graph Analyser"),
}


def _available() -> dict[str, tuple[str, str]]:
    return {
        name: spec
        for name, spec in COMMANDS.items()
        if importlib.util.find_spec(spec[0]) is not None
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="analyse",
        description="IPU Graph Analyser: simulate IPU runs, read profiles, give insights.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in _available().items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from analyser.cli.errors import CliError, exit_code_for, message_for

    argv = list(sys.argv[1:] if argv is None else argv)
    commands = _available()
    if not argv or argv[0] not in commands:
        parser = build_parser()
        if argv and not argv[0].startswith("-"):
            parser.print_usage(sys.stderr)
            print(
                f"analyse: error: unknown command {argv[0]!r}; choose from {', '.join(commands)}.",
                file=sys.stderr,
            )
            return 2
        parser.parse_args(argv)  # handles --help
        parser.print_help()
        return 0 if argv else 2

    name = argv[0]
    module = importlib.import_module(commands[name][0])
    sub = argparse.ArgumentParser(prog=f"analyse {name}", description=commands[name][1])
    module.add_arguments(sub)
    args = sub.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        print("analyse: interrupted.", file=sys.stderr)
        return 130
    except CliError as exc:
        print(f"analyse {name}: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # expected, user-facing errors from any layer
        code = exit_code_for(exc)
        if code is None:
            raise
        print(f"analyse {name}: {message_for(exc)}", file=sys.stderr)
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
