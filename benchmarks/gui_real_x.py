"""Drive ``analyse gui`` in a real X server (Xvfb) with xdotool key presses and grab screenshots.

The pytest-qt tests run on Qt's offscreen platform, which has no window manager, no real focus
and no xcb plugin: this script checks what a person sees in an X server. It starts
Xvfb on a free display, opens the profile(s) in ``analyse gui``, steps through every report with
Ctrl+PgDown (from the side list and from inside a report), zooms the Execution Trace with W
about the mouse pointer and back with Home, selects a range of cycles with a Shift + drag over
the lanes (the mouse held down with xdotool), fits it with F, clears it with Esc, and grabs the
screen after each step with ImageMagick's ``import``. With ``--screen 1280x720`` it runs on a
small laptop's screen and checks that the window fits it; keyboard only, it searches the
trace with Ctrl+F, Enter and zooms with W afterwards (the keys reach the trace, not the search
box), Esc from the box; with ``--tune DIR`` it opens that tune folder's Design space, closes it
with Esc, opens it again and quits with Ctrl+Q (the process ends: it outlived Quit). It prints
one line per step and the screenshot's path; exit code 0 when every check held, 1 otherwise,
2 when Xvfb / xdotool / import are missing.

    python benchmarks/gui_real_x.py PROFILE [PROFILE_B] [-o DIR] [--screen WxH] [--tune DIR]

tests/test_gui_real_x.py runs it on a small synthetic profile (skipped without Xvfb).
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

TOOLS = ("Xvfb", "xdotool", "import")
SCREEN = (1600, 1000)
#: Window y of the first IPU's lane on the Execution Trace (under the menus, the trace's
#: controls, its legend and overview strip, whose heights do not depend on the screen's).
LANE_Y = 250
WINDOW_MANAGER = "openbox"  # used when installed: real focus, dialogs placed as on a desktop


class GuiExited(RuntimeError):
    """``analyse gui`` ended before its window showed (its own sentence attached)."""


def _report_specs() -> list[str]:
    """The side list's reports ("module:Class"), in order (the GUI's own list)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from analyser.gui.reports import REPORTS as specs

    return list(specs)


REPORTS = len(_report_specs())  # Summary ... Query in the side list
TRACE = next(i for i, s in enumerate(_report_specs()) if s.endswith(":TraceReport"))


def missing_tools() -> list[str]:
    """The programs of TOOLS that are not on the PATH."""
    return [t for t in TOOLS if shutil.which(t) is None]


def missing_message(missing: list[str]) -> str:
    """The sentence printed when ``missing`` programs are absent (README quotes it)."""
    names = ", ".join("ImageMagick's import" if t == "import" else t for t in missing)
    return (
        f"error: {names} not found; on Debian or Ubuntu install them with "
        "'sudo apt-get install xvfb xdotool imagemagick' (openbox too, for a window manager)."
    )


def _free_display() -> int:
    for n in range(90, 200):
        if not Path(f"/tmp/.X{n}-lock").exists() and not Path(f"/tmp/.X11-unix/X{n}").exists():
            return n
    raise RuntimeError("no free X display number between :90 and :199")


class RealX:
    """An Xvfb server and the GUI running in it (both stopped by :meth:`close`)."""

    def __init__(self, profiles: list[Path], out: Path, timeout: float = 60.0) -> None:
        # absolute: Qt ignores a relative XDG_CONFIG_HOME and would use (and change) the
        # user's own settings
        self.out = out = out.resolve()
        out.mkdir(parents=True, exist_ok=True)
        self.display = f":{_free_display()}"
        self.env = dict(os.environ, DISPLAY=self.display)
        self.env.pop("QT_QPA_PLATFORM", None)  # the real xcb platform, not offscreen
        self.xvfb: subprocess.Popen | None = None
        self.wm: subprocess.Popen | None = None
        self.gui: subprocess.Popen | None = None
        self.log = None
        self.window = ""
        try:
            self._start(profiles, timeout)
        except BaseException:
            self.close()  # no Xvfb, window manager or GUI left behind
            raise

    def _start(self, profiles: list[Path], timeout: float) -> None:
        w, h = SCREEN
        self.xvfb = subprocess.Popen(
            ["Xvfb", self.display, "-screen", "0", f"{w}x{h}x24", "-nolisten", "tcp"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait(lambda: self._run("xdotool", "getdisplaygeometry").returncode == 0, timeout)
        if shutil.which(WINDOW_MANAGER):  # focus and dialogs as on a desktop
            self.wm = subprocess.Popen(
                [WINDOW_MANAGER], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            time.sleep(1.0)
        settings = self.out / "settings"
        settings.mkdir(exist_ok=True)
        env = dict(self.env, XDG_CONFIG_HOME=str(settings))
        analyse = Path(sys.executable).with_name("analyse")
        cmd = [str(analyse)] if analyse.exists() else [sys.executable, "-m", "analyser.cli"]
        self.log = open(self.out / "gui.log", "w")  # noqa: SIM115 (closed in close())
        self.gui = subprocess.Popen(
            [*cmd, "gui", *map(str, profiles)], env=env, stdout=self.log, stderr=self.log
        )
        self._wait(self._find_window, timeout)
        # the window is shown before the profile has loaded: wait for its reports to fill
        time.sleep(3.0)
        self._run("xdotool", "windowmove", self.window, "0", "0")
        time.sleep(0.5)
        top = self._client_top()  # the window manager's title bar, if any
        self._run("xdotool", "windowsize", self.window, str(w), str(h - top))
        time.sleep(1.0)

    def _client_top(self) -> int:
        """Where the window's inside starts on the screen (below a title bar)."""
        r = self._run("xdotool", "getwindowgeometry", self.window)
        for line in r.stdout.splitlines():
            if "Position:" in line:
                try:
                    return max(0, int(line.split(":")[1].split()[0].split(",")[1]))
                except (IndexError, ValueError):
                    return 0
        return 0

    def focus(self, window: str) -> None:
        """Give ``window`` the keyboard: activated through the window manager, or without one
        (no _NET_ACTIVE_WINDOW) the input focus set directly. Keys sent to a window without
        the focus go as synthetic events, which Qt ignores."""
        if self._run("xdotool", "windowactivate", "--sync", window).returncode != 0:
            self._run("xdotool", "windowfocus", "--sync", window)

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=30)

    def _wait(self, ok, timeout: float) -> None:
        end = time.monotonic() + timeout
        while not ok():
            if self.gui is not None and self.gui.poll() is not None:
                said = (self.out / "gui.log").read_text(errors="replace").strip()
                raise GuiExited(f"analyse gui exited with {self.gui.returncode}: {said}")
            if time.monotonic() > end:
                raise RuntimeError("timed out waiting for the X server or the GUI window")
            time.sleep(0.3)

    def _find_window(self) -> bool:
        r = self._run("xdotool", "search", "--onlyvisible", "--name", "Graph Analyser")
        ids = r.stdout.split()
        if ids:
            self.window = ids[-1]
        return bool(ids)

    def key(self, *keys: str, settle: float = 1.0) -> None:
        self._run("xdotool", "key", "--window", self.window, *keys)
        time.sleep(settle)

    def _at(self, x: int, y: int) -> list[str]:
        """xdotool's pointer move to (x, y) in the window (under a window manager the window
        sits below its title bar, not at the screen's origin)."""
        return ["mousemove", "--window", self.window, str(x), str(y)]

    def click(self, x: int, y: int, settle: float = 1.0) -> None:
        self._run("xdotool", *self._at(x, y), "click", "1")
        time.sleep(settle)

    def move(self, x: int, y: int) -> None:
        self._run("xdotool", *self._at(x, y))
        time.sleep(0.3)

    def drag(self, x0: int, x1: int, y: int, modifier: str = "", settle: float = 1.5) -> None:
        """A left-button drag from (x0, y) to (x1, y) in steps, with ``modifier`` held."""
        steps = [str(int(x0 + (x1 - x0) * k / 6)) for k in range(1, 7)]
        args = ["keydown", modifier] if modifier else []
        args += [*self._at(x0, y), "mousedown", "1"]
        for sx in steps:
            args += [*self._at(int(sx), y), "sleep", "0.05"]
        args += ["mouseup", "1"] + (["keyup", modifier] if modifier else [])
        self._run("xdotool", *args)
        time.sleep(settle)

    def geometry(self) -> tuple[int, int, int, int]:
        """The window's (x, y, width, height) on the screen, as xdotool reads it."""
        r = self._run("xdotool", "getwindowgeometry", self.window)
        x = y = w = h = 0
        for line in r.stdout.splitlines():
            if "Position:" in line:
                x, y = (int(v) for v in line.split(":")[1].split()[0].split(","))
            if "Geometry:" in line:
                w, h = (int(v) for v in line.split(":")[1].strip().split("x"))
        return x, y, w, h

    def shot(self, name: str) -> Path:
        path = self.out / f"{name}.png"
        self._run("import", "-window", "root", str(path))
        return path

    def shot_changed(
        self, name: str, previous: Path, timeout: float = 20.0, steady: float = 1.0
    ) -> Path:
        """A screenshot once the screen differs from ``previous`` (a report shown for the first
        time builds itself, which takes longer on a busy machine), or after ``timeout``."""
        end = time.monotonic() + timeout
        path = self.shot(name)
        while _same(path, previous) and time.monotonic() < end:
            time.sleep(1.0)
            path = self.shot(name)
        return self._settled(path, end, steady)

    def _settled(self, path: Path, end: float, steady: float = 1.0) -> Path:
        """``path`` retaken until two grabs a second apart agree (a report still filling in
        the background was caught half laid out: a header squeezed, a lane "aligning"), or
        until ``end``; ``steady`` seconds between the grabs."""
        again = path.with_name(path.stem + ".steady.png")
        while time.monotonic() < end:
            time.sleep(steady)
            self._run("import", "-window", "root", str(again))
            if _same(again, path):
                break
            again.replace(path)
        again.unlink(missing_ok=True)
        return path

    def shot_same(self, name: str, reference: Path, timeout: float = 20.0) -> Path:
        """A screenshot once the screen equals ``reference`` again (the background range
        summary of the restored view takes a while on a busy machine), or after ``timeout``."""
        end = time.monotonic() + timeout
        path = self.shot(name)
        while not _same(path, reference) and time.monotonic() < end:
            time.sleep(1.0)
            path = self.shot(name)
        return path

    def close(self) -> int | None:
        """Quit the GUI (Ctrl+Q; its exit code), then the window manager and Xvfb."""
        code = None
        if self.gui is not None:
            if self.window and self.gui.poll() is None:
                self.key("ctrl+q", settle=0.5)
            try:
                code = self.gui.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.gui.kill()
                self.gui.wait()
        if self.log is not None:
            self.log.close()
        for proc in (self.wm, self.xvfb):
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return code


#: Pixels two screenshots may differ by and still count as the same screen: a flow arrow
#: (one-pixel lines) may land a pixel apart when the same window's flows come from another
#: query (seen: 4 pixels of 1.6 million).
SAME_PIXELS = 64


def _same(a: Path, b: Path, box: str = "") -> bool:
    """True when screenshots ``a`` and ``b`` agree (in ``box``, an ImageMagick geometry
    WxH+X+Y, when given)."""
    crop = f"[{box}]" if box else ""
    r = subprocess.run(
        ["compare", "-metric", "AE", f"{a}{crop}", f"{b}{crop}", "null:"],
        capture_output=True,
        text=True,
    )
    try:
        return float(r.stderr.split()[0]) <= SAME_PIXELS
    except (ValueError, IndexError):
        return a.read_bytes() == b.read_bytes()


def _keyboard_checks(x: RealX, summary: Path, checks: list) -> None:
    """From the side list: Down shows Insights, Tab moves into the report and Down there
    selects the next tip; Shift+Tab and Up come back to the Summary."""
    x.key("Down")
    insights = x.shot_changed("kbd-insights-down", summary)
    checks.append(
        ("Down in the side list shows the next report", not _same(summary, insights), insights.name)
    )
    x.key("Tab")
    x.key("Down")
    moved = x.shot_changed("kbd-insights-tab-down", insights)
    checks.append(("Tab then Down moves within the report", not _same(insights, moved), moved.name))
    x.click(60, 35)
    back = x.shot_changed("kbd-summary-again", moved)
    checks.append(("A click on the side list shows Summary again", _same(summary, back), back.name))


def _help_check(x: RealX, before: Path, checks: list) -> None:
    """F1 opens the keyboard and mouse reference; Esc closes it."""
    x.key("F1", settle=2.0)
    found = x._run("xdotool", "search", "--onlyvisible", "--name", "Keyboard and mouse")
    shown = x.shot_changed("help-f1", before)
    checks.append(("F1 opens Keyboard and mouse", bool(found.stdout.split()), shown.name))
    if found.stdout.split():
        # focused first, then a real key press (XTEST): an event sent to a window that does
        # not have the focus (``key --window``) is a synthetic XSendEvent, which Qt ignores
        x.focus(found.stdout.split()[-1])
        time.sleep(0.5)
        x._run("xdotool", "key", "Escape")
        time.sleep(1.0)
    gone = x._run("xdotool", "search", "--onlyvisible", "--name", "Keyboard and mouse")
    checks.append(("Esc closes it", not gone.stdout.split(), "help dialog closed"))
    x.focus(x.window)
    time.sleep(0.5)


def _fits_check(x: RealX, checks: list) -> None:
    """The window, resized to the screen, is inside it (its minimum was 1,242 x 782)."""
    w, h = SCREEN
    _left, top, width, height = x.geometry()
    fits = width <= w and height <= h - top  # the size asked for (the screen under a title bar)
    checks.append((f"the window fits a {w} x {h} screen", fits, f"{width} x {height} at {top}"))


def _search_keys_check(x: RealX, before: Path, checks: list) -> Path:
    """Keyboard only on the trace: Ctrl+F, a name, Enter (the first match selected), then W
    zooms the trace (it used to type into the search box); Ctrl+F and Esc leave the box."""
    x.key("ctrl+f", settle=1.0)
    # a word in step names of real and synthetic profiles ("conv1/fwd/Exchange", "DoExchange/7")
    x._run("xdotool", "type", "--window", x.window, "--delay", "60", "Exchange")
    x.key("Return", settle=2.0)
    found = x.shot_changed("kbd-search-enter", before, steady=1.5)
    checks.append(("Ctrl+F, a name, Enter selects a match", not _same(before, found), found.name))
    x.key("w")
    x.key("w")
    zoomed = x.shot_changed("kbd-search-then-w", found, steady=1.5)
    lanes = _lanes_box()
    moved = not _same(found, zoomed, lanes)  # the lanes, not the search box, changed
    checks.append(("W after the search zooms the trace", moved, zoomed.name))
    x.key("ctrl+f", settle=1.0)
    x.key("Escape")
    x.key("s")
    back = x.shot_changed("kbd-search-esc-s", zoomed, steady=1.5)
    moved = not _same(zoomed, back, lanes)
    checks.append(("Esc leaves the search box: S zooms out", moved, back.name))
    return back


def _lanes_box() -> str:
    """ImageMagick's geometry of the Execution Trace's lanes on the screen (the timeline
    between the overview strip and the tabs below; the side list left out)."""
    w, h = SCREEN
    return f"{w - 300}x{max(60, int(h * 0.45) - LANE_Y + 60)}+290+{LANE_Y - 40}"


def drive_design_space(tune: Path, out: Path) -> list[tuple[str, bool, str]]:
    """``analyse gui TUNE-FOLDER``: the Design space shows; Esc closes it; Ctrl+Q from the main
    window ends the process even with a Design space open (it outlived Quit)."""
    checks: list[tuple[str, bool, str]] = []
    # analyse gui TUNE-FOLDER: the main window and the Design space (slow to show on a
    # loaded machine: a minute was seen)
    x = RealX([tune], out, timeout=240.0)
    code = None
    try:
        time.sleep(2.0)
        found = x._run("xdotool", "search", "--onlyvisible", "--name", "Design space")
        ids = found.stdout.split()
        shot = x.shot("design-space")
        checks.append(("the Design space shows", bool(ids), shot.name))
        if ids:
            x._run("xdotool", "windowactivate", ids[-1])
            time.sleep(0.5)
            x._run("xdotool", "key", "--window", ids[-1], "Escape")
            time.sleep(1.5)
        gone = x._run("xdotool", "search", "--onlyvisible", "--name", "Design space")
        checks.append(("Esc closes it", not gone.stdout.split(), "Design space closed"))
    finally:
        code = x.close()
    checks.append(("Ctrl+Q ends the GUI (Design space open)", code == 0, f"exit {code}"))
    return checks


def drive(profiles: list[Path], out: Path) -> list[tuple[str, bool, str]]:
    """Run the key-press walk; returns (check, held, detail) rows."""
    checks: list[tuple[str, bool, str]] = []
    x = RealX(profiles, out)
    try:
        # once loaded: the loading panel's seconds change the screen until the report shows
        shots = [x._settled(x.shot("00-summary"), time.monotonic() + 120.0, steady=2.5)]
        _fits_check(x, checks)
        x.click(60, 35)  # the side list's first entry (Summary) takes the focus
        _keyboard_checks(x, shots[0], checks)
        for i in range(1, REPORTS):
            x.key("ctrl+Next")
            shots.append(x.shot_changed(f"{i:02d}-report", shots[-1]))
        changed = [not _same(a, b) for a, b in itertools.pairwise(shots)]
        checks.append(("Ctrl+PgDown steps through every report", all(changed), str(changed)))
        for _ in range(REPORTS - 1 - TRACE):
            x.key("ctrl+Prior")  # back to the Execution Trace
        # once it has painted and its background work (range summary, differences) is done:
        # an immediate grab caught the Pipeline on the way back in compare mode
        trace = x.shot_changed("trace-whole-run", shots[-1], timeout=60.0, steady=2.0)
        w, _h = SCREEN
        x.move(int(w * 0.35), LANE_Y)  # over the timeline, left of centre
        x.key("w")
        zoomed = x.shot("trace-zoom-w")
        checks.append(("W zooms the trace", not _same(trace, zoomed), zoomed.name))
        x.key("Home")
        x.move(60, 35)  # where the pointer was for the first shot (no tooltip, same hover)
        time.sleep(0.7)
        home = x.shot_same("trace-home", trace, timeout=40.0)  # the range summary catches up
        checks.append(("Home shows the whole run again", _same(trace, home), home.name))
        # Perfetto's area selection: Shift + drag over the lanes, then F fits it, Esc clears it
        x.drag(int(w * 0.30), int(w * 0.45), LANE_Y, modifier="shift")
        x.move(60, 35)
        selected = x.shot_changed("trace-range-selected", home)
        checks.append(("Shift + drag selects a range", not _same(home, selected), selected.name))
        x.move(int(w * 0.35), LANE_Y)
        x.key("f")
        x.move(60, 35)
        fitted = x.shot_changed("trace-range-fit-f", selected)
        checks.append(("F fits the selected range", not _same(selected, fitted), fitted.name))
        x.key("m")  # Perfetto's M: mark the selected range (a band that stays)
        marked = x.shot_changed("trace-range-marked-m", fitted)
        checks.append(("M marks the selected range", not _same(fitted, marked), marked.name))
        x.key("m")
        unmarked = x.shot_same("trace-range-unmarked-m", fitted)
        checks.append(("M again removes the mark", _same(fitted, unmarked), unmarked.name))
        x.key("Escape")
        x.key("Home")
        cleared = x.shot_same("trace-range-cleared", home)
        checks.append(("Esc clears the range, Home", _same(home, cleared), cleared.name))
        _search_keys_check(x, cleared, checks)
        _help_check(x, cleared, checks)
    finally:
        code = x.close()
    checks.append(("Ctrl+Q ends the GUI with exit code 0", code == 0, f"exit {code}"))
    return checks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="+", type=Path)
    ap.add_argument("-o", "--output", type=Path, default=Path("gui-real-x"))
    ap.add_argument("--screen", default="", help="screen size WxH (default 1600x1000)")
    ap.add_argument("--tune", type=Path, help="a tune folder: check its Design space too")
    args = ap.parse_args(argv)
    global SCREEN
    if args.screen:
        try:
            w, h = (int(v) for v in args.screen.lower().split("x"))
        except ValueError:
            print(f"error: --screen {args.screen}: write it as WIDTHxHEIGHT, e.g. 1280x720.")
            return 2
        SCREEN = (w, h)
    missing = missing_tools()
    if missing:
        print(missing_message(missing))
        return 2
    for p in args.profiles:
        if not p.is_file():
            print(f"error: {p} is not a file.")
            return 2
    try:
        checks = drive(args.profiles[:2], args.output)
        if args.tune is not None:
            try:
                checks += drive_design_space(args.tune, args.output / "design-space")
            except RuntimeError as exc:  # no window in time: a failed check, not a traceback
                checks.append(("the Design space shows", False, str(exc)))
    except GuiExited as exc:
        print(f"error: {exc}")
        return 2
    for name, ok, detail in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {name} ({detail})")
    print(f"screenshots in {args.output}/")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
