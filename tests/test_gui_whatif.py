"""What-if (apply a tip) and the Run engine dialog (pytest-qt, offscreen).

The engine runs on the simulation service (analyser.sim.service, the session's Dask cluster):
these tests wait on Qt signals, never sleep, and check that no simulation is left running.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.gui


def _assert_stopped(job) -> None:
    assert not job.is_running()
    assert job.batch is None or job.batch.done


def test_run_dialog_has_every_runconfig_field(qtbot, tmp_path):
    from analyser.gui.run_dialog import RunEngineDialog
    from engine.config import RunConfig

    d = RunEngineDialog(None)
    qtbot.addWidget(d)
    assert list(d.editors) == list(RunConfig.model_fields)
    # the defaults of the form are the model's defaults
    assert d.config() == RunConfig().to_dict()
    # editing fields changes the configuration
    d.editors["model"].set_value("mlp")
    d.editors["precision"].set_value("16.16")
    d.editors["gradient_accumulation"].set_value(8)
    d.editors["eight_bit_input"].set_value(True)
    d.editors["split_points"].widget.setText("a, b")
    values = d.values()
    assert values["model"] == "mlp" and values["precision"] == "16.16"
    assert values["gradient_accumulation"] == 8 and values["eight_bit_input"] is True
    assert values["split_points"] == ["a", "b"]
    # TOML round trip through the dialog
    cfg = RunConfig.from_dict({**RunConfig().to_dict(), "model": "mlp", "device_iterations": 4})
    toml = tmp_path / "run.toml"
    toml.write_text(cfg.to_toml(), encoding="utf-8")
    d.load_toml(toml)
    assert d.config() == cfg.to_dict()
    # bad input gives one sentence in the dialog and starts nothing
    d.editors["target_overrides"].widget.setText("{not json")
    assert d.run() is None
    assert "target_overrides" in d.error.text() and "JSON" in d.error.text()
    d.editors["target_overrides"].widget.setText("")
    d.output.setText(str(toml))  # an existing file is never overwritten
    assert d.run() is None
    assert "already exists" in d.error.text()
    # the filter hides rows that do not match
    d.filter.setText("precision")
    assert d.form.isRowVisible(d.labels["precision"])
    assert not d.form.isRowVisible(d.labels["model"])
    # ... and the section headings of sections left empty
    assert d.form.isRowVisible(d.section_labels["Precision and optimiser"])
    assert not d.form.isRowVisible(d.section_labels["Model and input"])
    d.filter.setText("")
    assert all(d.form.isRowVisible(h) for h in d.section_labels.values())
    # every field sits under a heading, in the model's order
    assert set(d._section_of) == set(RunConfig.model_fields) and all(d._section_of.values())
    # starting from a bundled example loads it whole
    from analyser.gui.run_dialog import example_configs

    label, path = next((lab, p) for lab, p in example_configs() if lab.endswith("2-half"))
    d.examples.setCurrentIndex(d.examples.findText(label))
    d.examples.activated.emit(d.examples.currentIndex())
    assert d.config() == RunConfig.from_toml(path).to_dict()
    assert d.config()["precision"] == "16.16"


def test_apply_tip_refuses_an_invalid_change(qtbot, monkeypatch):
    from analyser.gui import whatif

    shown = []
    monkeypatch.setattr(whatif.QMessageBox, "warning", lambda *a: shown.append(a[2]))
    doc = SimpleNamespace(
        name="x.h5",
        path=Path("x.h5"),
        analysis=SimpleNamespace(run_config={"model": "mlp"}),
    )
    tip = SimpleNamespace(id="t", title="bad tip", change={"precision": "8.8"})
    assert whatif.apply_tip(None, doc, tip) is None
    assert len(shown) == 1 and "precision" in shown[0]
    tip = SimpleNamespace(id="t", title="no change", change={})
    assert whatif.apply_tip(None, doc, tip) is None
    assert "no run-config change" in shown[1]


def test_job_reports_an_engine_error_in_one_sentence(qtbot, tmp_path):
    from analyser.gui.whatif import SimulationJob

    job = SimulationJob({"model": "no-such-model"}, tmp_path / "out.h5")
    with qtbot.waitSignal(job.failed, timeout=60_000) as sig:
        job.start()
    assert "model" in sig.args[0]
    assert job.state == "failed"
    _assert_stopped(job)
    assert not (tmp_path / "out.h5").exists()


def test_cancel_really_stops_the_engine(qtbot, tmp_path):
    # a large run: the walkthrough's pipelined ResNet-101 with many more steps per host call
    from analyser.cli.demo import walkthrough_configs
    from analyser.gui.whatif import SimulationJob, validate_config
    from engine.config import RunConfig

    base = RunConfig.from_toml(walkthrough_configs()[3]).to_dict()
    cfg = validate_config({**base, "gradient_accumulation": 64, "device_iterations": 64})
    out = tmp_path / "big.h5"
    job = SimulationJob(cfg, out)
    with qtbot.waitSignal(job.progress, timeout=60_000):
        job.start()
    assert job.is_running()
    with qtbot.waitSignal(job.cancelled, timeout=10_000):
        job.cancel()
    assert job.state == "cancelled"
    _assert_stopped(job)
    # the worker stopped the simulation: nothing is left processing on the cluster
    from analyser.sim.service import get_service
    from analyser.sim.service.service import wait_until

    client = get_service().client()
    assert wait_until(lambda: not any(client.processing().values()), 15)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".h5" or ".h5" in p.name]


@pytest.fixture
def window(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from analyser.gui.main_window import MainWindow

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings)
    qtbot.addWidget(w)
    w.show()
    yield w
    w.shutdown()
    w.pool.waitForDone(30_000)
    from gui_helpers import assert_nothing_left

    assert_nothing_left(w)


def test_apply_fp16_tip_on_the_oom_walkthrough_step(qtbot, window, walkthrough_profiles, tmp_path):
    """Walkthrough step 1 does not fit; applying the top insight (FP16) re-simulates it in the
    background and shows the fitting result compared with the original."""
    import shutil

    from analyser.core.insights import find_insights
    from analyser.gui import whatif

    src = tmp_path / "1-base.h5"  # a private copy: nothing may be written beside it
    shutil.copy(walkthrough_profiles["1-base"], src)
    with qtbot.waitSignal(window.loadFinished, timeout=60_000):
        window.open_files([src])
    doc = window.workspace.document
    assert doc is not None and doc.profile.status == "oom"
    tips = find_insights(doc.analysis)
    top = tips[0]
    assert top.id == "memory.fp16"
    fractions: list[float] = []
    with qtbot.waitSignal(window.loadFinished, timeout=300_000) as loaded:
        dialog = whatif.apply_tip(window, doc, top)
        assert dialog is not None and dialog.job.is_running()
        dialog.job.progress.connect(lambda f, _text: fractions.append(f))
    assert loaded.args == [True]
    # the service's progress reached the dialog, up to the written profile
    assert fractions and fractions[-1] == 1.0
    assert dialog.bar.value() == dialog.bar.maximum()
    # the result stays in the cache, under a readable name; nothing is written beside the
    # user's profile
    assert dialog.result_path is not None and dialog.result_path.parent.name == "results"
    assert dialog.result_path.name.startswith("1-base-whatif-memory.fp16")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1-base.h5", "settings.ini"]
    _assert_stopped(dialog.job)
    ws = window.workspace
    assert ws.document.path == src
    assert ws.compare is not None and ws.compare.path == dialog.result_path
    assert ws.compare.profile.status == "ok" and ws.compare.has_execution
    # the Execution Trace shows the fitting run (the original has none)
    trace = window.show_report("trace")
    trace.ensure_refreshed()
    assert trace.trace is not None and trace.timeline.n_rects > 0
    assert "does not fit" in trace.timeline.getPlotItem().titleLabel.text
    # File > Save profile as... keeps a copy of the result (B) where the user asks
    kept = window.save_profile_as(tmp_path / "kept.h5")
    assert kept == tmp_path / "kept.h5" and kept.read_bytes() == dialog.result_path.read_bytes()


def test_run_engine_dialog_runs_and_opens_the_profile(qtbot, window, tmp_path):
    """Tools > Run engine…: a configuration built in the form is simulated in the background
    and the written profile opens in the window."""
    from analyser.gui import reports
    from analyser.gui.run_dialog import RunEngineDialog

    actions = {text: fn for _menu, text, fn in reports.menu_actions()}
    dialog = actions["&Run engine…"](window)
    assert isinstance(dialog, RunEngineDialog)
    dialog.editors["model"].set_value("mlp")
    dialog.editors["micro_batch_size"].set_value(16)
    assert dialog.output.text() == ""  # kept in the cache unless the user names a file
    assert not dialog.compare.isEnabled()  # nothing open to compare with
    with qtbot.waitSignal(window.loadFinished, timeout=120_000) as loaded:
        job = dialog.run()
        assert job is not None
    assert loaded.args == [True]
    out = job.result_path
    # named for what sets it apart (analyser.core.run_options.run_name), not "mlp-1ipu"
    assert out.parent.name == "results" and out.name.startswith("mlp-1ipu-mbs16")
    assert not list(tmp_path.glob("*.h5"))
    _assert_stopped(job.job)
    assert window.workspace.document.path == out
    assert window.workspace.document.analysis.run_config["model"] == "mlp"
