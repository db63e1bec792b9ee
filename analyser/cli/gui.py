"""``analyse gui [FILE...]``: open the desktop Graph Analyser (PySide6 + pyqtgraph)."""

from __future__ import annotations

import argparse
from pathlib import Path

from analyser.cli.errors import CliError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="profile(s) to open; with two files the second is compared with the first",
    )
    parser.add_argument("--theme", choices=("light", "dark"), help="colour theme (remembered)")


def run(args: argparse.Namespace) -> int:
    files = [Path(f) for f in args.files]
    if len(files) > 2:
        raise CliError(
            f"analyse gui opens at most two profiles (one to compare with); got {len(files)}."
        )
    for f in files:
        if not f.exists():
            raise CliError(f"{f} does not exist.")
    try:
        from analyser.gui.app import run as run_app
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise CliError(
            f"the GUI needs PySide6 and pyqtgraph ({exc}); install the package with its dependencies."
        ) from None
    return run_app(files, theme=args.theme)
