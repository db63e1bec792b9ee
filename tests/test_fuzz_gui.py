"""The GUI on hostile profiles (tests/hostile.py): it opens each one or shows a
one-sentence dialog, and every report shows or says why in one sentence; no exception escapes
into Qt, no raw Python error text reaches a dialog."""

from __future__ import annotations

import re
from pathlib import Path

import hostile
import pytest
from gui_helpers import wait_until_idle
from PySide6.QtWidgets import QApplication, QMessageBox

pytestmark = pytest.mark.gui

#: A sample of the corpus that reaches the GUI's readers (the CLI test runs all of it).
CASES = {
    "semantic": (
        "step-program-big",
        "program-parent-loop",
        "names-1mb",
        "peak-step-out",
        "var-op-big",
        "op-ipu-out",
        "step-stage-30000",
        "clock-zero",
        "run-config-types",
    ),
    "injection": ("names-html", "names-terminal"),
    "resource": ("unwritten-steps-1e9",),
    "foreign": ("external-raw",),
    "structural": ("short-column", "truncated"),
}
#: Python's own error texts ("IndexError: index 2147483647 is out of bounds ...").
RAW_ERROR = re.compile(r"\b[A-Z][a-zA-Z]+(Error|Exception)\b(?!.*profile)")


@pytest.fixture(scope="module")
def gui_corpus(tmp_path_factory) -> list[Path]:
    import engine
    from engine.config import RunConfig

    folder = tmp_path_factory.mktemp("fuzz-gui")
    base = folder / "base.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), base)
    muts = hostile.profile_mutations()
    return [
        hostile.mutated(base, folder / cat, name, muts[cat][name])
        for cat, names in CASES.items()
        for name in names
    ]


def test_gui_opens_each_hostile_profile_or_says_why(qtbot, gui_corpus, tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings

    from analyser.gui.main_window import MainWindow

    said: list[str] = []
    for kind in ("critical", "warning", "information"):
        monkeypatch.setattr(
            QMessageBox, kind, staticmethod(lambda parent, title, text, *a: said.append(text))
        )
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings)
    qtbot.addWidget(w)
    w.resize(1300, 850)
    w.show()
    try:
        for path in gui_corpus:
            said.clear()
            with qtbot.waitSignal(w.loadFinished, timeout=60000) as blocker:
                w.open_files([path])
            if blocker.args == [False]:
                assert len(said) == 1, (path.name, said)
            else:
                for key in w.report_keys:
                    # shown and painted, and what the paint posted run: a profile's fault
                    # met in a paint or a relayout escapes into Qt there
                    with qtbot.waitSignal(w.report(key).painted, timeout=60_000):
                        w.show_report(key)
                    wait_until_idle(qtbot)
            for text in said:
                assert text.strip().count("\n") == 0, (path.name, text)
                assert not RAW_ERROR.search(text), (path.name, text)
                assert "\x1b" not in text
    finally:
        w.close()
        assert w.pool.activeThreadCount() == 0
    assert not [t for t in QApplication.topLevelWidgets() if t.isVisible()]
