"""``analyse gui [FILE...]``: open the desktop Graph Analyser (PySide6 + pyqtgraph).

Everything that can be checked before Qt starts is checked here, so that a bad file or a machine
without a display gives one sentence instead of a Qt abort: the files open as profiles (metadata
only, cheap) and, on Linux, a display is reachable (``DISPLAY`` / ``WAYLAND_DISPLAY``, or an
explicit ``QT_QPA_PLATFORM`` such as ``offscreen``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from analyser.cli._common import add_profiles_argument
from analyser.cli.errors import CliError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse gui`` to ``parser``."""
    add_profiles_argument(
        parser,
        "profile(s) to open; with two files the second is compared with the first; or the "
        "folder analyse tune wrote (its Design space)",
        nargs="*",
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


#: Seconds the display check waits for the X server to answer (a local one answers in
#: milliseconds; a forwarded one over a slow link in well under a second).
DISPLAY_SECONDS = 5.0

_XCB_PROBE = """
import ctypes, sys
xcb = ctypes.CDLL("libxcb.so.1")
xcb.xcb_connect.restype = ctypes.c_void_p
xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
c = xcb.xcb_connect(None, None)
sys.exit(xcb.xcb_connection_has_error(c) if c else 1)
"""
#: xcb_connection_has_error codes (xcb.h) and what they mean for the user.
_XCB_ERRORS = {
    1: "no X server accepts connections there, or it refused this user (check the display "
    "number, that the X server runs, and xauth / 'ssh -X')",
    5: "the value is not a display name (expected e.g. ':0' or 'localhost:10.0')",
    6: "it has no such screen",
}


def check_display_answers(
    environ: dict[str, str] | None = None,
    platform: str | None = None,
    seconds: float = DISPLAY_SECONDS,
) -> None:
    """Raise CliError when Qt would connect to the X display ``DISPLAY`` and no X server
    answers there (Qt then aborts with exit 134 and a misleading hint about libxcb-cursor0).
    The connection is tried in a subprocess through libxcb (what Qt's xcb plugin uses), with a
    time limit: a host that accepts and never answers cannot hang the check."""
    env = dict(os.environ if environ is None else environ)
    platform = sys.platform if platform is None else platform
    qpa = env.get("QT_QPA_PLATFORM", "")
    display = env.get("DISPLAY", "")
    if not platform.startswith("linux") or not display or (qpa and not qpa.startswith("xcb")):
        return
    if not qpa and env.get("WAYLAND_DISPLAY"):
        return  # Qt may choose Wayland there
    try:
        done = subprocess.run(
            [sys.executable, "-c", _XCB_PROBE],
            env=env,
            capture_output=True,
            timeout=seconds,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise CliError(
            f"the display DISPLAY={display!r} did not answer within {seconds:g} s; check that its "
            "X server (or the 'ssh -X' forwarding) is alive, or use the headless commands "
            "(summary, report, export-trace)."
        ) from None
    code = done.returncode
    if code == 0 or b"libxcb" in done.stderr:  # answered, or no libxcb: the plugin check speaks
        return
    reason = _XCB_ERRORS.get(code, f"the connection failed (xcb error {code})")
    raise CliError(
        f"the display DISPLAY={display!r} does not answer: {reason}; or use the headless commands "
        "(summary, report, export-trace)."
    )


# Debian package names that do not follow the library-packaging policy's "soname -> package" rule
# (Debian Policy 8.1: libfoo.so.N -> libfooN, libfoo-1.so.N -> libfoo-1-N).
_PACKAGE_EXCEPTIONS = {"libglib-2.0.so.0": "libglib2.0-0", "libgthread-2.0.so.0": "libglib2.0-0"}

#: Every Debian package Qt 6's xcb platform plugin (PySide6's ``plugins/platforms/libqxcb.so``)
#: links against beyond the C library: ``ldd libqxcb.so`` on PySide6 6.11. README lists them.
XCB_PACKAGES = (
    "libxcb-cursor0",
    "libxcb-icccm4",
    "libxcb-image0",
    "libxcb-keysyms1",
    "libxcb-randr0",
    "libxcb-render-util0",
    "libxcb-shape0",
    "libxcb-xkb1",
    "libxkbcommon-x11-0",
    "libegl1",
    "libgl1",
    "libfontconfig1",
    "libdbus-1-3",
)


def debian_package(soname: str) -> str:
    """The Debian package that ships a shared library, by the packaging policy's naming rule:
    ``libxcb-cursor.so.0`` -> ``libxcb-cursor0``, ``libxkbcommon-x11.so.0`` -> ``libxkbcommon-x11-0``,
    ``libEGL.so.1`` -> ``libegl1``."""
    if soname in _PACKAGE_EXCEPTIONS:
        return _PACKAGE_EXCEPTIONS[soname]
    m = re.fullmatch(r"(.+?)\.so\.(\d+).*", soname)
    if not m:
        return soname
    name, major = m.group(1).lower(), m.group(2)
    return f"{name}-{major}" if name[-1].isdigit() else f"{name}{major}"


def _xcb_plugin() -> Path | None:
    """PySide6's xcb plugin, found without importing Qt (only analyser.gui imports Qt)."""
    import importlib.util

    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        plugin = Path(folder) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if plugin.is_file():
            return plugin
    return None


def missing_libraries(plugin: Path) -> list[str]:
    """Shared libraries the plugin needs that the dynamic loader cannot find: every one that
    ``ldd`` reports "not found", else the one named by the loader's own error; [] when it loads."""
    import ctypes

    try:
        ctypes.CDLL(str(plugin))
        return []
    except OSError as exc:
        first = str(exc).split(":", 1)[0].strip()
    missing: list[str] = []
    if shutil.which("ldd"):
        out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, check=False)
        for line in out.stdout.splitlines():
            if "not found" in line:
                soname = line.split("=>", 1)[0].strip()
                if soname not in missing:
                    missing.append(soname)
    return missing or [Path(first).name]


def check_xcb_libraries(
    environ: dict[str, str] | None = None,
    platform: str | None = None,
    plugin: Path | None = None,
) -> None:
    """Raise CliError when Qt would use its xcb plugin and a system library it needs is missing:
    Qt itself then prints a raw plugin error and aborts (exit 134)."""
    env = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        return
    qpa = env.get("QT_QPA_PLATFORM", "")
    if qpa and not qpa.startswith("xcb"):
        return
    if not qpa and not env.get("DISPLAY"):
        return  # Wayland or no display: check_display speaks for that case
    plugin = plugin or _xcb_plugin()
    if plugin is None:
        return
    missing = missing_libraries(plugin)
    if not missing:
        return
    packages = sorted({debian_package(s) for s in missing})
    raise CliError(
        f"the GUI cannot start: Qt's X11 (xcb) platform plugin needs system libraries that are "
        f"not installed ({', '.join(missing)}); on Debian or Ubuntu install them with "
        f"'sudo apt-get install {' '.join(packages)}'."
    )


def run(args: argparse.Namespace) -> int:
    """Run ``analyse gui`` with the parsed ``args``; returns the exit code."""
    files = [Path(f) for f in args.files]
    from analyser.sim.tune import is_tune_results, load_results

    tune = None
    if len(files) == 1 and is_tune_results(files[0]):
        load_results(files[0])  # one sentence for unreadable results, before Qt starts
        tune, files = files[0], []
    if len(files) > 2:
        raise CliError(
            f"analyse gui opens at most two profiles (one to compare with); got {len(files)}."
        )
    from profiles import open_profile

    for f in files:
        with open_profile(f):  # ProfileError (one sentence) for a missing or broken file
            pass
    check_display()
    check_xcb_libraries()
    check_display_answers()
    try:
        from analyser.gui.app import run as run_app
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise CliError(
            f"the GUI needs PySide6 and pyqtgraph ({exc}); install the package with its dependencies."
        ) from None
    return run_app(files, theme=args.theme, tune=tune)
