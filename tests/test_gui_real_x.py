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

pytestmark = [
    pytest.mark.gui,
    pytest.mark.skipif(
        bool(gui_real_x.missing_tools()),
        reason=f"{', '.join(gui_real_x.missing_tools())} not installed",
    ),
]


def test_keys_in_a_real_x_server(tmp_path):
    path = tmp_path / "p.h5"
    write_profile(path, make_synthetic_profile(n_steps=3000, n_ipus=2, tiles=256, n_programs=200))
    checks = gui_real_x.drive([path], tmp_path / "shots")
    failed = [f"{name} ({detail})" for name, ok, detail in checks if not ok]
    assert not failed, failed
    assert len(list((tmp_path / "shots").glob("*.png"))) >= 13
