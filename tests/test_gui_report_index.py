"""The window's index of the reports (analyser.gui.report_index): a profile opens to the Summary
without importing the other reports' modules or pandas on the GUI thread; every listed report
opens; a listed report whose module or class is missing says so in a message box when it is
shown (never a report left out silently)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from analyser.gui import report_index
from analyser.gui.report_index import CLASS_FIELDS, ReportEntry, ReportUnavailable
from tests.gui_helpers import open_in

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def profile(synthetic_profile) -> Path:
    return synthetic_profile(
        "index.h5", n_steps=3000, n_ipus=2, tiles=256, n_programs=200, seed=1, grad_accum=8
    )


#: A fresh process (the other tests' imports do not count): the window opened on the profile to
#: the Summary's first paint, then the Execution Trace shown to its first paint. A finder on
#: sys.meta_path notes the thread of every pandas import; what the process had imported at each
#: paint is printed as JSON.
_PROBE = r"""
import json, os, sys, threading, time, traceback
os.environ["QT_QPA_PLATFORM"] = "offscreen"

imports = []  # (thread is the GUI thread, from the background warm-up)

class Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" and "pandas" not in sys.modules:
            stack = "".join(traceback.format_stack())
            imports.append((threading.current_thread() is threading.main_thread(),
                            "background.py" in stack))
        return None

sys.meta_path.insert(0, Finder())

from PySide6.QtCore import QEvent, QEventLoop, QObject, QSettings, QTimer
from analyser.gui.app import ensure_app
from analyser.gui.main_window import MainWindow

app = ensure_app()
state = {}

def snapshot():
    return {
        "reports": sorted(m for m in sys.modules if m.startswith("analyser.gui.reports.")),
        "pandas": "pandas" in sys.modules,
        "pandas_on_gui_thread": any(gui for gui, _ in imports),
        "pandas_elsewhere": [bg for gui, bg in imports if not gui],
    }

class Watch(QObject):
    key = ""  # the report whose first paint is awaited (with a profile open)
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Type.Paint and self.key and self.key not in state:
            page = w.stack.currentWidget()
            if (w.workspace.document is not None and getattr(page, "key", None) == self.key
                    and (obj is page or page.isAncestorOf(obj))):
                state[self.key] = snapshot()  # as the paint starts
        return False

def wait(cond, timeout=240.0):
    wake = QTimer()
    wake.start(20)
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            sys.exit(f"timed out; seen {sorted(state)}")
        app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
    wake.stop()

settings = QSettings(sys.argv[2], QSettings.Format.IniFormat)
settings.clear()  # opens on the first report, the Summary
w = MainWindow(settings=settings)
w.resize(1300, 850)
watch = Watch()
app.installEventFilter(watch)
w.show()
state["window"] = snapshot()
watch.key = "summary"
w.open_files([sys.argv[1]])
wait(lambda: "summary" in state)
watch.key = "trace"
w.show_report("trace")
wait(lambda: "trace" in state)
print(json.dumps(state), flush=True)
w.close()
os._exit(0)
"""


def test_opening_a_profile_imports_only_the_summary_and_no_pandas(profile, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(profile), str(tmp_path / "s.ini")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    state = json.loads(out.stdout.strip().splitlines()[-1])
    base = "analyser.gui.reports.base"
    # the window: no report's module; the Summary painted: its own module alone
    assert set(state["window"]["reports"]) <= {base}
    assert not state["window"]["pandas"]
    summary = state["summary"]
    assert set(summary["reports"]) <= {base, "analyser.gui.reports.summary"}, summary["reports"]
    trace = state["trace"]
    others = {m.split(".")[3] for m in trace["reports"]} - {"base", "summary", "trace"}
    assert not others, f"the Trace's first visit imported {sorted(others)}"
    # neither the open to the Summary nor the Trace's first paint imports pandas on the GUI
    # thread; the background warm-up may have imported it by then (after the Summary's paint)
    for shown in (summary, trace):
        assert not shown["pandas_on_gui_thread"]
        assert all(shown["pandas_elsewhere"]), "pandas imported by a thread other than the warm-up"


def test_every_entry_matches_its_class():
    """The index repeats each class's name and data needs: they agree, so the window's side
    list, loader and warm-up see what the report itself declares."""
    from analyser.gui import reports as registry

    assert [e.spec for e in report_index.REPORTS] == registry.REPORTS
    keys = [e.key for e in report_index.REPORTS]
    assert len(set(keys)) == len(keys)
    for entry in report_index.REPORTS:
        cls = entry.load()
        for name in CLASS_FIELDS:
            assert getattr(entry, name) == getattr(cls, name), (entry.key, name)
        # the view-model's builder: the class's own function (the warm-up's requests and the
        # report's are the same view-model only then)
        if cls.view_builder is None:
            assert entry.view_builder is None, entry.key
        else:
            module, _, attr = entry.view_builder.partition(":")
            assert getattr(importlib.import_module(module), attr) is cls.view_builder, entry.key


def test_every_report_in_the_index_opens(qtbot, profile, tmp_path):
    from analyser.gui.main_window import MainWindow
    from analyser.gui.reports.base import Report

    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1300, 850)
    w.show()
    try:
        assert open_in(qtbot, w, profile)
        assert w.report_keys == [e.key for e in report_index.REPORTS]
        for entry in report_index.REPORTS:
            report = w.show_report(entry.key)
            assert isinstance(report, Report) and report.key == entry.key
            assert w.stack.currentWidget() is report
            assert w.title_label.text().startswith(entry.title)
        assert w.loaded_report_keys() == w.report_keys
    finally:
        w.close()
    assert w.pool.activeThreadCount() == 0


@pytest.mark.parametrize(
    "spec, missing",
    [
        ("analyser.gui.reports.no_such_report:NoSuchReport", "no_such_report is missing"),
        ("analyser.gui.reports.summary:NoSuchClass", "has no NoSuchClass"),
        ("no_such_package.report:Report", "no_such_package.report is missing"),
    ],
)
def test_a_missing_report_module_is_a_message_box_not_a_skip(
    qtbot, profile, tmp_path, monkeypatch, spec, missing
):
    import analyser.gui.main_window as mw

    broken = ReportEntry(spec, "broken", "Broken Report", ("target",))
    with pytest.raises(ReportUnavailable, match="Broken Report"):
        broken.load()
    monkeypatch.setattr(mw, "REPORTS", (*report_index.REPORTS[:1], broken))
    shown: list[tuple[str, str]] = []
    monkeypatch.setattr(
        QMessageBox,
        "critical",
        staticmethod(lambda parent, title, text, *a: shown.append((title, text))),
    )
    w = mw.MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(1300, 850)
    w.show()
    try:
        # listed in the side list like the others
        assert w.report_keys == ["summary", "broken"]
        assert open_in(qtbot, w, profile)
        # the idle build meets it first: no message box in idle time, no report skipped
        qtbot.waitUntil(lambda: not w.prebuild_pending(), timeout=30000)
        assert shown == []
        w.report_list.setCurrentRow(1)  # a click on it
        assert len(shown) == 1
        title, text = shown[0]
        assert title == "Cannot show the report"
        assert "Broken Report" in text and missing in text
        panel = w.stack.currentWidget()
        assert panel.label.text() == text  # its place says so too
        with pytest.raises(ReportUnavailable):
            w.report("broken")
        w.show_report("summary")  # the window carries on
        assert w.stack.currentWidget() is w.report("summary")
    finally:
        w.close()
