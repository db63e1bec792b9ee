"""The GUI window imports what a single profile opened on the Summary uses: the comparison's
alignment (``analyser.core.diff``) comes with the first compared pair, not with the window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
from analyser.gui import reports
import analyser.gui.main_window  # noqa: F401
reports.report_classes()  # what the window imports when it is built
print(json.dumps(sorted(m for m in sys.modules if m.startswith("analyser.core.diff"))))
"""


def test_the_window_does_not_import_the_diff_alignment() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=True,
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
