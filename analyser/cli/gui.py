"""``analyse gui [FILE...]``: open the desktop Graph Analyser (PySide6 + pyqtgraph).

Everything that can be checked before Qt starts is checked here, so that a bad file or a machine
without a display gives one sentence instead of a Qt abort: the files open as profiles (metadata
only, cheap) and, on Linux, a display is reachable (``DISPLAY`` / ``WAYLAND_DISPLAY``, or an
explicit ``QT_QPA_PLATFORM`` such as ``offscreen``).
"""

from __future__ import annotations

import argparse
import os
import sys
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


def check_display(environ: dict[str, str] | None = None, platform: str | None = None) -> None:
    """Raise CliError when Qt would find no display to open a window on (Qt aborts then)."""
    env = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux") or env.get("QT_QPA_PLATFORM"):
        return
    if env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return
    raise CliError(
        "no display to open the GUI on (neither DISPLAY nor WAYLAND_DISPLAY is set); run it in a "
        "desktop session or with 'ssh -X', or use the headless commands (summary, report, "
        "export-trace)."
    )


def run(args: argparse.Namespace) -> int:
    files = [Path(f) for f in args.files]
    if len(files) > 2:
        raise CliError(
            f"analyse gui opens at most two profiles (one to compare with); got {len(files)}."
        )
    from profiles import open_profile

    for f in files:
        with open_profile(f):  # ProfileError (one sentence) for a missing or broken file
            pass
    check_display()
    try:
        from analyser.gui.app import run as run_app
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise CliError(
            f"the GUI needs PySide6 and pyqtgraph ({exc}); install the package with its dependencies."
        ) from None
    return run_app(files, theme=args.theme)
