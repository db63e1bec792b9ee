"""``analyse validate FILE...``: check profiles against the schema.

Prints every problem of every file (kind, where, what). Exit code: 0 when every file is valid,
1 when any file has problems, 2 when any file cannot be opened at all (missing, not HDF5,
truncated, not an IPU profile, newer major version).
"""

from __future__ import annotations

import argparse
import json
import sys

from analyser.cli._common import add_profiles_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse validate`` to ``parser``."""
    add_profiles_argument(parser, "profile files (.h5) to check")
    parser.add_argument(
        "--json", action="store_true", help="print the problems as JSON (one object per file)"
    )
    parser.add_argument(
        "--max-problems",
        type=int,
        default=50,
        metavar="N",
        help="show at most N problems per file (default 50; all are counted)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing for valid files")


def run(args: argparse.Namespace) -> int:
    """Run ``analyse validate`` with the parsed ``args``; returns the exit code."""
    from profiles.validation import is_fatal, validate

    if args.max_problems < 0:
        from analyser.cli.errors import CliError

        raise CliError("--max-problems must be 0 or more.")
    worst = 0
    reports = []
    for name in args.files:
        problems = validate(name)
        fatal = any(is_fatal(p) for p in problems)
        if not fatal:
            problems += _run_config_problems(name, problems)
        code = 2 if fatal else (1 if problems else 0)
        worst = max(worst, code)
        reports.append((name, problems, fatal))

    if args.json:
        out = [
            {
                "file": name,
                "valid": not problems,
                "openable": not fatal,
                "problems": [
                    {"kind": p.kind, "path": p.path, "message": p.message} for p in problems
                ],
            }
            for name, problems, fatal in reports
        ]
        print(json.dumps(out if len(out) > 1 else out[0], indent=2))
        return worst

    from analyser.literal import terminal

    for name, problems, fatal in reports:
        name = terminal(name)
        if fatal:
            print(f"{name}: cannot be opened: {terminal(problems[0].message)}", file=sys.stderr)
            continue
        if not problems:
            if not args.quiet:
                print(f"{name}: valid")
            continue
        shown = problems[: args.max_problems]
        print(f"{name}: {len(problems)} problem(s)")
        width = max(len(p.kind) for p in shown) if shown else 0
        for p in shown:
            print(terminal(f"  {p.kind:<{width}}  {p.path}: {p.message}"))
        if len(problems) > len(shown):
            print(f"  ... and {len(problems) - len(shown)} more (use --max-problems)")
    return worst


def _run_config_problems(name: str, found: list) -> list:
    """The stored run configuration against the engine's options (profiles cannot import the
    engine, so this check of the full pass lives here)."""
    import json

    import h5py

    from engine.config import stored_config_problem
    from profiles.problems import WrongDtype

    if any(p.path == "/meta@run_config" for p in found):
        return []
    try:
        with h5py.File(name, "r") as h5:
            raw = h5["meta"].attrs.get("run_config")
        doc = json.loads(raw)
    except Exception:  # unreadable: the validator has said so
        return []
    if not isinstance(doc, dict):
        return []
    bad = stored_config_problem(doc)
    return [WrongDtype("/meta@run_config", f"option {bad}")] if bad else []
