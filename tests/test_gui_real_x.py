"""The GUI in a real X server (Xvfb, xdotool key presses and a Shift + drag, screenshots):
benchmarks/gui_real_x.py on a small synthetic profile. Skipped when Xvfb, xdotool or
ImageMagick's import is absent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from profiles import write_profile
from profiles.synthetic import make_synthetic_profile

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gui_real_x.py"
spec = importlib.util.spec_from_file_location("gui_real_x", SCRIPT)
gui_real_x = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gui_real_x)

pytestmark = pytest.mark.gui

needs_tools = pytest.mark.skipif(
    bool(gui_real_x.missing_tools()),
    reason=f"{', '.join(gui_real_x.missing_tools())} not installed",
)


def test_readme_quotes_what_is_said_when_the_tools_are_missing():
    """README names the system packages of the real-X path with the program's own sentence."""
    readme = " ".join((SCRIPT.parents[1] / "README.md").read_text(encoding="utf-8").split())
    said = gui_real_x.missing_message(list(gui_real_x.TOOLS))
    assert f"*{said}*" in readme
    assert gui_real_x.main(["/nonexistent.h5"]) == 2  # tools missing, or no such file


@pytest.mark.slow  # about 75 s of wall time (sleeps while the GUI paints), 15 s of CPU
@needs_tools
def test_keys_in_a_real_x_server(tmp_path):
    path = tmp_path / "p.h5"
    write_profile(path, make_synthetic_profile(n_steps=3000, n_ipus=2, tiles=256, n_programs=200))
    checks = gui_real_x.drive([path], tmp_path / "shots")
    failed = [f"{name} ({detail})" for name, ok, detail in checks if not ok]
    assert not failed, failed
    assert len(list((tmp_path / "shots").glob("*.png"))) >= 13
