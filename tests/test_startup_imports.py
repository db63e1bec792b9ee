"""The fast commands import only what they use: ``analyse --version`` and ``--help`` (of the
tool and of the commands that read profiles) start without numpy, h5py or pandas, and the
modules a command imports to name its functions do not import pandas before they need it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "h5py", "pandas", "pyarrow", "duckdb", "pydantic", "distributed", "PySide6")

_PROBE = """
import contextlib, io, json, sys
argv = json.loads(sys.argv[1])
with contextlib.redirect_stdout(io.StringIO()):
    if argv and argv[0] == "import":
        __import__(argv[1])
        code = 0
    else:
        from analyser.cli import main
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's --help and --version
            code = exc.code
print(json.dumps([code, sorted(m for m in sys.modules if m.split(".")[0] in {heavy})]))
"""


def _imported(argv: list[str]) -> tuple[int, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=set(HEAVY)), json.dumps(argv)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=True,
    ).stdout
    code, modules = json.loads(out.strip().splitlines()[-1])
    return code, sorted({m.split(".")[0] for m in modules})


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        *(
            [cmd, "--help"]
            for cmd in (
                "summary",
                "validate",
                "diff",
                "compare",
                "export-trace",
                "report",
                "insights",
                "roofline",
                "gui",
            )
        ),
    ],
    ids=" ".join,
)
def test_fast_commands_import_no_heavy_module(argv):
    code, heavy = _imported(argv)
    assert code == 0
    assert heavy == [], f"analyse {' '.join(argv)} imported {heavy}"


def test_the_diff_module_imports_pandas_only_for_a_diff():
    _, heavy = _imported(["import", "analyser.core.diff"])
    assert "pandas" not in heavy and "h5py" not in heavy


def test_a_light_module_of_profiles_does_not_import_the_reader():
    """profiles.errors and profiles.atomic (what every command needs at start-up) come without
    h5py, and the package's names are still there on first use."""
    _, heavy = _imported(["import", "profiles.atomic"])
    assert heavy == []
    import profiles

    assert profiles.open_profile.__module__ == "profiles.reader"
    assert set(profiles.__all__) <= set(dir(profiles))
    with pytest.raises(AttributeError):
        profiles.no_such_name  # noqa: B018


def test_the_html_reports_charts_come_without_matplotlib():
    """The HTML report draws with plotly; matplotlib (about 1 s of CPU to import) is for the
    Markdown report's static images only."""
    code = (
        "import sys, analyser.reports.interactive, analyser.reports.render; "
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    ).stdout
    assert out.strip() == "False"
