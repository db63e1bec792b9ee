"""The Design space report of a tune folder (pytest-qt, offscreen)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

pytestmark = pytest.mark.gui


class _Window:
    """Records what the Design space asks the main window to open."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def open_files(self, paths) -> None:
        self.calls.append(("open", *paths))

    def open_compare(self, a, b) -> None:
        self.calls.append(("compare", a, b))


@pytest.fixture
def tune_folder(sim_service, tmp_path, monkeypatch) -> Path:
    from analyser.sim.tune import build_space, tune, write_results

    # the service's cache is the user's default cache here (a row's profile is only ever read
    # from the tune folder or the default simulation cache)
    monkeypatch.setenv("ANALYSE_CACHE", str(sim_service.cache.root))
    from engine.config import RunConfig

    start = RunConfig.from_dict({"model": "mlp", "micro_batch_size": 2}).to_dict()
    space = build_space(start, ["mbs=1,2,4", "precision=32.32,16.16"], [], "throughput")
    result = tune(space, sim_service, budget=10, strategy="grid")
    out = tmp_path / "tune-results"
    write_results(result, out, best_k=2)
    return out


def test_design_space_click_opens_and_compares(qtbot, tune_folder):
    from analyser.gui.design_space import DesignSpaceWindow

    win = _Window()
    view = DesignSpaceWindow(tune_folder, win)
    qtbot.addWidget(view)
    view.show()
    meta = view.table.meta
    # the best configuration is selected at first, and said to be
    assert view.selected == meta["best_id"] and "best" in view.details.text()
    # every simulated configuration is one point
    n_points = sum(len(s.points()) for s in view.scatters)
    assert n_points == int(view.table.frame["status"].isin(["ok", "oom"]).sum())
    # clicking another point selects it; the buttons open its profile / compare it with start
    other = next(p for s in view.scatters for p in s.points() if int(p.data()) != meta["best_id"])
    view._on_clicked(None, [other])
    assert view.selected == int(other.data())
    assert f"#{view.selected}" in view.details.text()
    view.open_selected()
    view.compare_selected()
    prof = view.table.profile(view.selected)
    assert prof is not None and prof.is_file()
    assert win.calls[0] == ("open", prof)
    if view.selected != meta["start_id"]:
        assert win.calls[1] == ("compare", tune_folder / "start.h5", prof)
    view.grab().save(str(tune_folder / "design-space.png"))


def test_out_of_memory_points_are_marked(qtbot, tune_folder):
    """A configuration that does not fit sits on the axis as a red cross, off the front."""
    from analyser.gui.design_space import OOM, DesignSpaceWindow
    from analyser.reports.tune import design_space_points
    from analyser.sim.tune import load_results

    table = load_results(tune_folder)
    df = table.frame
    i = df.index[df["id"] != table.meta["best_id"]][0]
    df.loc[i, ["status", "fits", "feasible", "pareto"]] = ["oom", False, False, False]
    df.loc[i, "throughput_samples_per_s"] = np.nan
    df.to_parquet(tune_folder / "results.parquet", index=False)
    p = design_space_points(load_results(tune_folder))
    assert p["oom"].sum() == 1 and not p["pareto"][p["oom"]].any()
    view = DesignSpaceWindow(tune_folder, _Window())
    qtbot.addWidget(view)
    crosses = [s for s in view.scatters if s.opts["symbol"] == "x"]
    assert len(crosses) == 1 and len(crosses[0].points()) == 1
    assert crosses[0].points()[0].pos().y() == 0.0
    assert crosses[0].opts["pen"].color().name() == OOM.lower()


def test_menu_action_and_bad_folder(qtbot, tmp_path, monkeypatch):
    from analyser.gui import design_space, reports

    actions = {text: fn for _menu, text, fn in reports.menu_actions()}
    assert "&Design space (tune results)…" in actions
    shown = []
    monkeypatch.setattr(design_space.QMessageBox, "warning", lambda *a: shown.append(a[2]))
    assert design_space.open_design_space(None, tmp_path) is None
    assert len(shown) == 1 and "not the output of analyse tune" in shown[0]


def test_nothing_fits_plots_what_each_trial_needed(qtbot, tune_folder):
    """A tune where nothing fits drew an empty chart (y from 0 to -4e-306);
    it now draws each trial at the memory its fullest tile needed, with the tile's memory, and
    the trials table lists every configuration (failed ones included), sortable, filterable,
    selecting the point; "Compare with start" says why when the best is the start."""
    from analyser.gui.design_space import DesignSpaceWindow

    df = load_df(tune_folder)
    df["status"] = "oom"
    df[["fits", "feasible", "pareto"]] = False
    df["throughput_samples_per_s"] = np.nan
    df.loc[df.index[-1], ["status", "max_tile_memory_bytes"]] = ["refused", np.nan]
    df.loc[df.index[-1], "message"] = "the engine refused: micro batch too large."
    df.to_parquet(tune_folder / "results.parquet", index=False)
    win = _Window()
    view = DesignSpaceWindow(tune_folder, win)
    qtbot.addWidget(view)
    view.show()
    assert view.needed is not None and view.needed.refused == 1
    ys = [p.pos().y() for s in view.scatters for p in s.points()]
    assert len(ys) == len(df) - 1 and min(ys) > 0
    y0, y1 = view.plot.getPlotItem().getViewBox().viewRange()[1]
    assert y0 >= -1e-9 and y1 > max(ys)
    trials = view.trials
    assert trials.model.rowCount() == len(df)
    statuses = {trials.model.raw(r, trials.model.column_of("status")) for r in range(len(df))}
    assert statuses == {"oom", "refused"}
    trials.filter.setText("refused")
    assert trials.visible_rows() == 1
    trials.view.setCurrentIndex(trials.proxy.index(0, 0))
    assert view.selected == int(df["id"].iloc[-1]) and "refused" in view.details.text()
    trials.filter.setText("")
    view.grab().save(str(tune_folder / "design-space-nothing-fits.png"))


def test_compare_with_start_says_when_the_best_is_the_start(qtbot, tune_folder):
    import json

    from analyser.gui.design_space import DesignSpaceWindow

    meta_path = tune_folder / "tune.json"
    meta = json.loads(meta_path.read_text())
    meta["best_id"] = meta["start_id"]
    meta_path.write_text(json.dumps(meta))
    view = DesignSpaceWindow(tune_folder, _Window())
    qtbot.addWidget(view)
    view.select(meta["start_id"])
    assert not view.compare_button.isEnabled()
    assert "start itself" in view.compare_button.toolTip()
    assert "nothing to compare" in view.details.text()


def load_df(folder):
    import pandas as pd

    return pd.read_parquet(folder / "results.parquet")


# ---------------------------------------------------------------------------------------------
# A window that belongs to the main window: Quit, Esc, theme, units, whole trial numbers
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def main_window(qtbot, tmp_path):
    from gui_helpers import shown_window

    from analyser.gui.theme import apply_theme

    fixture = shown_window(qtbot, tmp_path)
    w = next(fixture)
    yield w
    w.set_theme("light")
    apply_theme("light")
    next(fixture, None)


def test_design_space_closes_with_quit_and_with_esc(qtbot, tune_folder, main_window):
    """It outlived File > Quit (the process ran on until it was closed too), and Esc did not
    close it."""
    from analyser.gui import design_space

    view = design_space.open_design_space(main_window, tune_folder)
    qtbot.waitExposed(view)
    with qtbot.waitSignal(view.destroyed, timeout=10_000):
        main_window.close()  # File > Quit
    main_window.show()
    again = design_space.open_design_space(main_window, tune_folder)
    qtbot.waitExposed(again)
    with qtbot.waitSignal(again.destroyed, timeout=10_000):
        qtbot.keyClick(again, Qt.Key.Key_Escape)


def test_design_space_follows_the_theme_and_the_units(qtbot, tune_folder, main_window):
    """It kept the light theme in dark mode and KiB after View > Units > kB."""
    from PySide6.QtGui import QColor

    from analyser.gui import design_space
    from analyser.gui.theme import CHART_COLORS

    view = design_space.open_design_space(main_window, tune_folder)
    qtbot.addWidget(view)
    qtbot.waitExposed(view)
    selected = view.selected
    bottom = view.plot.getPlotItem().getAxis("bottom")
    assert "KiB" in bottom.labelText
    main_window.set_units("kB")
    assert "kB" in bottom.labelText and "KiB" not in bottom.labelText
    header = [
        view.trials.model.headerData(c, Qt.Orientation.Horizontal)
        for c in range(view.trials.model.columnCount())
    ]
    assert not any("KiB" in str(h) for h in header)
    assert view.selected == selected
    main_window.set_theme("dark")
    qtbot.waitUntil(
        lambda: view.plot.backgroundBrush().color() == QColor(CHART_COLORS["dark"].background)
    )
    pixel = view.plot.grab().toImage().pixelColor(5, 5)
    assert pixel.lightness() < 80  # the chart is drawn dark, not white
    ring = view.rings["start_id"]
    assert ring  # the start is ringed in the theme's foreground (visible on the dark chart)


def test_nothing_fits_chart_numbers_whole_trials(qtbot, tune_folder):
    """'trial # -0.5' on the x axis: the ticks are whole trial numbers."""
    from analyser.gui.design_space import DesignSpaceWindow

    df = load_df(tune_folder)
    df["status"] = "oom"
    df[["fits", "feasible", "pareto"]] = False
    df["throughput_samples_per_s"] = np.nan
    df.to_parquet(tune_folder / "results.parquet", index=False)
    view = DesignSpaceWindow(tune_folder, _Window())
    qtbot.addWidget(view)
    view.show()
    axis = view.plot.getPlotItem().getAxis("bottom")
    x0, x1 = view.plot.getPlotItem().getViewBox().viewRange()[0]
    ticks = [v for _spacing, values in axis.tickValues(x0, x1, axis.width()) for v in values]
    assert ticks and all(float(v).is_integer() for v in ticks), ticks
