"""GUI shell and reports (pytest-qt, offscreen): every report of the Graph Analyser shows the
analysis core's numbers on a fitting and an out-of-memory profile, selection / filtering /
search work, compare mode shows A, B and the change, a broken file gives the error dialog and
the application carries on, and no window or worker thread is left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from gui_helpers import open_in, paint_counter
from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QThreadPool, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QApplication, QMessageBox

from analyser.core.analysis import Analysis
from analyser.core.insights import find_insights
from analyser.core.units import MemoryUnits, fmt_bytes
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile

pytestmark = pytest.mark.gui

MY_REPORTS = ("summary", "insights", "memory", "liveness", "program_tree", "operations")


@pytest.fixture(scope="session")
def profiles_dir(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("gui-app")
    specs = {
        "fit": dict(seed=1, grad_accum=8),
        "fit2": dict(seed=1, grad_accum=16),
        "oom": dict(seed=2, oom=True),
    }
    paths = {}
    for name, kw in specs.items():
        path = out / f"{name}.h5"
        write_profile(
            path, make_synthetic_profile(n_steps=3000, n_ipus=2, tiles=256, n_programs=200, **kw)
        )
        paths[name] = path
    broken = out / "broken.h5"
    broken.write_bytes(b"this is not an HDF5 file\n" * 10)
    paths["broken"] = broken
    return paths


@pytest.fixture
def settings(tmp_path) -> QSettings:
    s = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    s.clear()
    return s


@pytest.fixture
def make_window(qtbot, settings):
    """Factory of main windows with a temporary settings file; closes them at teardown and
    checks that no window is left open and no worker thread is still running."""
    from analyser.gui.main_window import MainWindow

    windows = []

    def make(s: QSettings | None = None):
        w = MainWindow(settings=s if s is not None else settings)
        qtbot.addWidget(w)
        w.resize(1300, 850)
        w.show()
        windows.append(w)
        return w

    yield make
    for w in windows:
        w.close()
        assert w.pool.activeThreadCount() == 0
    visible = [t for t in QApplication.topLevelWidgets() if t.isVisible()]
    assert not visible, f"windows left open: {visible}"


def open_and_wait(qtbot, w, *paths) -> None:
    """Open ``paths`` in ``w`` (two: compared) and check that they opened."""
    assert open_in(qtbot, w, *paths)


# ---------------------------------------------------------------------------------------------
# Reports on a fitting profile, an OOM profile and the walkthrough
# ---------------------------------------------------------------------------------------------
def check_reports(qtbot, w, path: Path) -> None:
    """Open every report of this engineer on ``path`` and compare what is shown with the core."""
    with Analysis.open(path) as a:
        m = a.metrics
        # Summary
        s = w.show_report("summary")
        assert s.tree.value("Memory", "Peak memory") == fmt_bytes(m.peak_memory_bytes)
        assert s.tree.value("Memory", "OOM tiles") == f"{m.oom_tiles:,}"
        assert s.tree.value("Target", "Tiles per IPU") == f"{a.target.tiles_per_ipu:,}"
        if a.has_execution:
            assert s.tree.value("Execution", "Total cycles") == f"{m.total_cycles:,}"
            ex = a.execution
            ipu0 = s.ipu_tree.value("IPU 0", "total")  # core.summary.TOTAL
            assert ipu0 == f"{int(ex.cycles_by_type[0].sum()):,}"
            share = s.ipu_tree.value("IPU 0", "OnTileExecute", 2)
            c0 = ex.cycles_by_type[0]
            assert share == f"{100 * c0[3] / c0.sum():.1f}%"
        else:
            assert s.tree.section("Execution") is None
            assert s.exec_stack.currentIndex() == 1  # "no execution" message
        # Insights
        r = w.show_report("insights")
        assert r.banner_a.state == ("ok" if a.memory.fits else "oom")
        assert f"{a.memory.n_oom_tiles:,}" in r.banner_a.text() or a.memory.fits
        assert r.insight_titles() == [t.title for t in find_insights(a)]
        top = r.top_tiles.model.frame
        assert list(top["tile"]) == [t.tile for t in a.memory.top_tiles]
        # Memory: the chart is the core's per-tile bytes by category, summed over the stack
        mr = w.show_report("memory")
        chart = mr.charts["A"]
        assert chart.values.shape == (a.target.num_ipus * a.target.tiles_per_ipu, 17)
        np.testing.assert_array_equal(chart.totals, a.memory.tile_total.ravel())
        assert len(mr.plot_a.paths) == int((chart.values.sum(axis=0) > 0).sum())
        # Liveness: one curve per IPU equal to the core's, peak marked
        lr = w.show_report("liveness")
        curves = lr.curves(lr.document)
        for ipu, c in curves.items():
            np.testing.assert_array_equal(c, a.liveness.curve(ipu))
        # Program tree over /programs/nodes
        pt = w.show_report("program_tree")
        model = pt.model
        assert model.n == a.target.n_programs
        roots = model.children(-1)
        assert model.rowCount() == len(roots)
        # Operations: all of the core's operations, sorted by total cycles
        op = w.show_report("operations")
        names = op.visible_names()
        assert len(names) == len(a.operations)
        totals = a.operations.set_index("name")["total_cycles"]
        assert int(totals[names[0]]) == int(totals.max())
        keys = [op.model.column_key(c) for c in range(op.model.columnCount())]
        if not a.has_execution:
            # a profile that never ran shows no zero-filled execution columns and puts the
            # operations holding the most memory first
            assert not {"executions", "total_cycles", "cycles_share"} & set(keys)
            mem = a.operations.set_index("name")["memory_bytes"]
            assert int(mem[names[0]]) == int(mem.max())
        else:
            assert {"executions", "total_cycles", "cycles_share"} <= set(keys)


def test_reports_on_fitting_and_oom_profiles(qtbot, make_window, profiles_dir):
    w = make_window()
    assert w.report_keys[: len(MY_REPORTS)] == list(MY_REPORTS)
    open_and_wait(qtbot, w, profiles_dir["fit"])
    check_reports(qtbot, w, profiles_dir["fit"])
    assert "fits" in w.target_label.text()
    open_and_wait(qtbot, w, profiles_dir["oom"])
    check_reports(qtbot, w, profiles_dir["oom"])
    assert "OUT OF MEMORY" in w.target_label.text()


@pytest.mark.parametrize("step", ["1-base", "4-device-iterations"])
def test_reports_on_walkthrough_profiles(qtbot, make_window, walkthrough_profiles, step):
    w = make_window()
    open_and_wait(qtbot, w, walkthrough_profiles[step])
    check_reports(qtbot, w, walkthrough_profiles[step])
    if step == "1-base":  # the reference OOM: FP16 is the first tip, the banner says OOM
        r = w.show_report("insights")
        assert r.banner_a.state == "oom"
        assert r.selected_insight().id == find_insights(r.document.analysis)[0].id


# ---------------------------------------------------------------------------------------------
# Selection, filtering, search
# ---------------------------------------------------------------------------------------------
def test_memory_tile_selection_and_details(qtbot, make_window, profiles_dir):
    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"])
    mr = w.show_report("memory")
    a = mr.document.analysis
    mr.click_tile(0, 5, False)
    mr.click_tile(0, 9, True)  # shift-click adds
    assert mr.selection.tolist() == [[0, 5], [0, 9]]
    mr.click_tile(0, 5, True)  # shift-click on a selected tile removes it
    assert mr.selection.tolist() == [[0, 9]]
    mr.tiles_edit.setText("0-3, 1:10")
    mr.select_typed()
    assert mr.selection.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 10]]
    assert mr.tiles_edit.text() == "0-3, 1:10"
    mr.details.setCurrentWidget(mr.tiles_table)
    frame = mr.tiles_table.model.frame
    assert len(frame) == 5
    got = {(int(i), int(t)): int(v) for i, t, v in zip(frame["ipu"], frame["tile"], frame["total"])}
    for (ipu, tile), total in got.items():
        assert total == int(a.memory.tile_total[ipu, tile])
    # Variables on the selected tiles never exceed the variable memory the tiles hold in total.
    mr.details.setCurrentWidget(mr.tile_vars_table)
    assert mr.tile_vars_table.model.rowCount() > 0
    for tab in (mr.vertices_table, mr.exchanges_table, mr.compute_sets_table):
        mr.details.setCurrentWidget(tab)  # each tab fills without error
    # A bad typed list says what is wrong and keeps the selection.
    mr.tiles_edit.setText("0-99999")
    mr.select_typed()
    assert mr.error_label.isVisible() or not mr.isVisible()
    assert "does not exist" in mr.error_label.text()
    assert len(mr.selection) == 5
    # Click on the chart selects the tile under the mouse.
    plot = mr.plot_a
    vb = plot.getPlotItem().getViewBox()
    scene = vb.mapViewToScene(QPointF(20.0, 1.0))
    assert plot.position_at(scene) == 20
    # Options redraw from the core's numbers: one IPU, regions, physical order, gaps.
    mr.ipu_combo.setCurrentIndex(2)
    mr.breakdown_combo.setCurrentText("Region")
    mr.gaps_check.setChecked(True)
    chart = mr.charts["A"]
    assert chart.ipus == (1,)
    np.testing.assert_array_equal(chart.totals, a.memory.tile_total[1] + a.memory.tile_gaps[1])
    mr.order_combo.setCurrentIndex(1)
    phys = a.src.array("/memory/physical_tile")
    np.testing.assert_array_equal(mr.charts["A"].tile_of, np.argsort(phys, kind="stable"))
    mr.view_tabs.setCurrentWidget(mr.tile_map)
    assert len(mr.tile_map.plots) == 1
    mr.view_tabs.setCurrentWidget(mr.variables_page)
    assert mr.variables_table.visible_rows() == int((a.variables["ipu"] == 1).sum())


def test_operations_filter_sort_and_details(qtbot, make_window, profiles_dir):
    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"])
    op = w.show_report("operations")
    ops = op.document.analysis.operations
    op.filter_edit.setText("conv")
    names = op.visible_names()
    expected = ops[
        (ops["name"] + " " + ops["type"] + " " + ops["layer"]).str.contains("conv", case=False)
    ]
    assert len(names) == len(expected) > 0
    assert all("conv" in (n + t).lower() for n, t in zip(expected["name"], expected["type"]))
    op.filter_edit.clear()
    op.pass_combo.setCurrentText("backward")
    assert len(op.visible_names()) == int((ops["pass"].astype(str) == "backward").sum())
    op.pass_combo.setCurrentIndex(0)
    # sort by FLOPs ascending through the header
    col = op.model.column_of("flops")
    op.view.horizontalHeader().setSortIndicator(col, Qt.SortOrder.AscendingOrder)  # a header click
    flops = [
        op.model.index(r, col).data(Qt.ItemDataRole.UserRole) for r in range(op.model.rowCount())
    ]
    assert flops == sorted(flops)
    name = ops.sort_values("total_cycles").iloc[-1]["name"]
    assert op.select_operation(name)
    assert op.selected_name() == name
    assert (
        op.summary_tree.value(name, "Total cycles")
        == f"{int(ops.set_index('name').loc[name, 'total_cycles']):,}"
    )


def test_program_tree_search_and_details(qtbot, make_window, profiles_dir):
    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"])
    pt = w.show_report("program_tree")
    pane = pt.pane_a
    names = pane.model.names
    pane.search_edit.setText("globalexchange")
    expected = [i for i, n in enumerate(names) if "globalexchange" in n.lower()]
    assert pane.matches.tolist() == expected and expected
    pane.next_match()
    assert pane.selected_node() == expected[0]
    pane.next_match()
    assert pane.selected_node() == expected[1]
    pane.previous_match()
    assert pane.selected_node() == expected[0]
    node = expected[0]
    assert pane.details.value(names[node], "Type") == "GlobalExchange"
    ex = pt.document.analysis.execution
    total = f"{int(ex.program_cycles[node]):,}"
    assert pane.details.value(names[node], "Executed (incl. waits)") == total


def test_program_tree_separates_own_work_from_waits(qtbot, make_window, walkthrough_profiles):
    """Walkthrough step 3 (two pipelined IPUs): a Sync's cycles per execution are its own work
    (from the profile) while its executed cycles include the wait for the slowest IPU, shown in
    its own column, own x executions + waiting = executed (analysis core); tile balance is shown
    for compute and exchange steps only, not for syncs or stream copies."""
    from profiles import schema

    w = make_window()
    open_and_wait(qtbot, w, walkthrough_profiles["3-accumulate"])
    m = w.show_report("program_tree").model
    ex = w.workspace.document.analysis.execution
    headers = " | ".join(m.columns)
    assert "Own cycles" in headers and "incl. waits" in headers and "waiting" in headers
    col = {k: m.column(k) for k in ("cycles", "balance", "executions", "total", "wait")}
    t = {n: schema.PROGRAM_TYPES.index(n) for n in schema.PROGRAM_TYPES}
    own = m.cycles.astype(np.int64) * ex.program_executions.astype(np.int64)
    waited = np.flatnonzero((m.types == t["Sync"]) & (ex.program_cycles > own))
    assert waited.size  # the stages wait for each other at syncs
    for node in waited[:5]:
        assert m.text(node, col["cycles"]) == f"{int(m.cycles[node]):,}"
        assert m.text(node, col["total"]) == f"{int(ex.program_cycles[node]):,}"
        wait = int(ex.program_cycles[node] - own[node])
        assert m.text(node, col["wait"]) == f"{wait:,}"
        assert m.text(node, col["balance"]) == ""
    compute = np.flatnonzero(m.types == t["OnTileExecute"])
    assert m.text(int(compute[0]), col["balance"]).endswith("%")
    assert m.text(int(compute[0]), col["wait"]) == ""  # compute never waits
    for name in ("StreamCopyBegin", "Sync", "StreamCopyEnd"):
        nodes = np.flatnonzero(m.types == t[name])
        assert all(m.text(int(i), col["balance"]) == "" for i in nodes)


def test_liveness_click_and_compare_steps(qtbot, make_window, profiles_dir):
    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"])
    lr = w.show_report("liveness")
    a = lr.document.analysis
    # it opens on the highest peak of all IPUs, its live variables listed (no empty panels)
    lv = a.liveness
    curves = {i: lv.curve(i) for i in range(lv.not_always_live.shape[0])}
    top = max(curves, key=lambda i: curves[i][int(lv.peak_step[i])])
    assert lr.steps == [int(lv.peak_step[top])]
    assert lr.live_variable_names()
    peak = int(a.liveness.peak_step[0])
    lr.ipu_combo.setCurrentIndex(1)  # IPU 0
    lr.click_step(peak, False)
    expected = list(a.live_variables(peak, 0)["name"])
    assert lr.live_variable_names() == expected
    lr.click_step(peak // 2, True)
    assert lr.steps == [peak, peak // 2]
    frame = lr.compare_table.model.frame
    early = set(a.live_variables(peak // 2, 0)["name"])
    assert set(frame["name"]) == set(expected) | early
    assert set(frame.loc[frame["live_at"] == "both", "name"]) == set(expected) & early
    lr.always_check.setChecked(True)
    np.testing.assert_array_equal(
        lr.curves(lr.document)[0], a.liveness.curve(0, include_always_live=True)
    )


# ---------------------------------------------------------------------------------------------
# Compare mode
# ---------------------------------------------------------------------------------------------
def test_compare_mode_in_every_report(qtbot, make_window, profiles_dir):
    from analyser.core.comparison import compare_pair

    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"], profiles_dir["fit2"])
    assert w.workspace.compare is not None
    with Analysis.open(profiles_dir["fit"]) as a, Analysis.open(profiles_dir["fit2"]) as b:
        s = w.show_report("summary")
        assert s.tree.headerItem().text(3) == "Change"
        assert s.tree.value("Execution", "Total cycles", 1) == f"{a.metrics.total_cycles:,}"
        assert s.tree.value("Execution", "Total cycles", 2) == f"{b.metrics.total_cycles:,}"
        pair = compare_pair(a, b)
        assert s.tabs.isTabVisible(s.explanation_index)
        html = s.explanation.toPlainText()
        for d in pair.config_diffs:
            assert d.text() in html
        r = w.show_report("insights")
        assert r.banner_b.isVisible()
        assert r.list.headerItem().text(3) == "In"
        mr = w.show_report("memory")
        assert mr.plot_b.isVisible()
        np.testing.assert_array_equal(mr.charts["B"].totals, b.memory.tile_total.ravel())
        assert mr.plot_delta.isVisible()
        np.testing.assert_array_equal(
            mr.tile_delta(), b.memory.tile_total.ravel() - a.memory.tile_total.ravel()
        )
        lr = w.show_report("liveness")
        assert lr.compare_doc is not None
        pt = w.show_report("program_tree")
        assert pt.pane_b.isVisible() and pt.pane_b.model.n == b.target.n_programs
        # B's programs carry the change of total cycles against A's program of the same name
        mb = pt.pane_b.model
        assert mb.columns[-1] == "Change vs A" and mb.column("delta") == len(mb.columns) - 1
        na = list(pt.pane_a.model.names)
        leaf = next(
            i
            for i in range(mb.n)
            if mb.types[i] >= 3
            and list(mb.names).count(mb.names[i]) == 1
            and na.count(mb.names[i]) == 1
        )
        ia = na.index(mb.names[leaf])
        expected = int(b.execution.program_cycles[leaf]) - int(a.execution.program_cycles[ia])
        assert mb.text(leaf, mb.column("delta")) == f"{expected:+,}"
        pt.pane_a.select_node(ia)  # selecting in A follows in B
        assert pt.pane_b.selected_node() == leaf
        op = w.show_report("operations")
        frame = op.frame
        row = frame.set_index("name").loc[a.operations["name"].iloc[0]]
        assert row["total_cycles_a"] == a.operations["total_cycles"].iloc[0]
        assert row["total_cycles_b"] == int(
            b.operations.set_index("name").loc[a.operations["name"].iloc[0], "total_cycles"]
        )
    w.stop_compare()
    assert w.workspace.compare is None
    from analyser.gui.model.summary import SINGLE_HEADERS

    assert w.show_report("summary").tree.columnCount() == len(SINGLE_HEADERS)


def test_reports_are_built_while_idle_once_and_show_their_documents_when_visited(
    qtbot, make_window, profiles_dir
):
    """Once profiles are open the window builds the reports not shown yet (and their
    compare-mode parts) in its idle time, each once, without filling them; a first visit then
    shows the documents as before."""
    from analyser.gui.reports.memory import MemoryPlot

    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"], profiles_dir["fit2"])
    qtbot.waitUntil(lambda: not w.prebuild_pending(), timeout=20_000)
    assert sorted(r.key for r in w._reports.values()) == sorted(w.report_keys)
    assert w.stack.count() == len(w.report_keys) + 2  # and the empty-state and loading panels
    shown = w.current_report()
    assert all(r._dirty for r in w._reports.values() if r is not shown)  # built, not filled
    mr, tr, pr = w.report("memory"), w.report("trace"), w.report("pipeline")
    assert mr._compare_plots is not None and tr._timeline_b is not None and pr._view_b is not None
    assert [k for k, _t in w.prebuild_steps].count("memory") == 2  # the report, its B charts
    # the costliest reports to build for a comparison come first
    built = list(dict.fromkeys(k for k, _t in w.prebuild_steps))
    costs = [type(w.report(k)).compare_cost for k in built]
    assert costs == sorted(costs, reverse=True) and built[:2] == ["trace", "pipeline"]
    # nothing left to build: a later tick builds nothing more
    w.background.build_step()
    assert not w.prebuild_pending() and len(w.findChildren(MemoryPlot)) == 2
    assert w.show_report("memory") is mr and mr.plot_b.isVisible() and "B" in mr.charts
    tl = w.show_report("trace").timeline_b
    assert tl is tr._timeline_b and tl.isVisible() and tl.trace is not None


# ---------------------------------------------------------------------------------------------
# Shell: errors, units, settings, export, drag and drop, recent files
# ---------------------------------------------------------------------------------------------
def test_broken_file_shows_error_and_app_carries_on(qtbot, make_window, profiles_dir, monkeypatch):
    shown = []
    monkeypatch.setattr(
        QMessageBox, "critical", staticmethod(lambda parent, title, text, *a: shown.append(text))
    )
    w = make_window()
    with qtbot.waitSignal(w.loadFinished, timeout=30000) as blocker:
        w.open_files([profiles_dir["broken"]])
    assert blocker.args == [False]
    assert len(shown) == 1 and "broken.h5" in shown[0]
    assert w.workspace.document is None
    missing = profiles_dir["fit"].parent / "missing.h5"
    with qtbot.waitSignal(w.loadFinished, timeout=30000):
        w.open_files([missing])
    assert len(shown) == 2 and "missing.h5" in shown[1]
    open_and_wait(qtbot, w, profiles_dir["fit"])  # still alive and working
    assert w.workspace.document.name == "fit.h5"


def test_units_theme_state_and_recent_files_persist(qtbot, make_window, profiles_dir, settings):
    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"])
    s = w.show_report("summary")
    peak = s.document.analysis.metrics.peak_memory_bytes
    # the shown report's view-model is rebuilt in the new units off the GUI thread and painted
    # when it arrives
    w.set_units(MemoryUnits.BYTES)
    qtbot.waitUntil(lambda: not s.awaiting_view, timeout=30000)
    assert s.tree.value("Memory", "Peak memory") == f"{peak:,} B"
    w.set_units("kB")
    qtbot.waitUntil(lambda: not s.awaiting_view, timeout=30000)
    assert s.tree.value("Memory", "Peak memory") == fmt_bytes(peak, MemoryUnits.KB)
    w.set_theme("dark")
    w.show_report("memory")
    assert w.recent_files()[0] == str(profiles_dir["fit"].resolve())
    assert w.recent_menu.actions()[0].text() == str(profiles_dir["fit"].resolve())
    w.close()
    w2 = make_window(settings)
    assert w2.workspace.units is MemoryUnits.KB
    assert w2.theme_actions["dark"].isChecked()
    assert w2.report_list.currentRow() == w2.report_keys.index("memory")
    w2.set_theme("light")


def _contrast(fg: str, bg: str) -> float:
    """WCAG contrast ratio of two '#rrggbb' colours."""

    def lum(h: str) -> float:
        c = [int(h[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    hi, lo = sorted((lum(fg), lum(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_dark_theme_keeps_text_colours_readable_and_redraws(qtbot, make_window, profiles_dir):
    """Colours written as text or thin lines on the chart background (severity, the change
    column, peak / max-memory labels) reach a 3:1 contrast in both themes (WCAG for graphics
    and large text), and switching theme redraws the shown report with them."""
    from analyser.gui.palette import hex_color
    from analyser.gui.theme import chart_colors

    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"], profiles_dir["fit2"])
    s = w.show_report("summary")
    texts = [("status_text", n) for n in ("ok", "oom", "warning", "info", "critical")] + [
        ("compare", "increase"),
        ("compare", "decrease"),
        ("tone", "good"),
        ("tone", "neutral"),
        ("tone", "bad"),
        ("chart", "max_memory_line"),
        ("chart", "peak_marker"),
    ]
    seen = {}
    for theme in ("light", "dark"):
        w.set_theme(theme)
        bg = chart_colors().background
        for group, name in texts:
            assert _contrast(hex_color(group, name), bg) >= 3.0, (theme, group, name)
        seen[theme] = hex_color("compare", "decrease")
        # the summary was redrawn: its coloured changes use this theme's colour
        colours = set()
        for k in range(s.tree.topLevelItemCount()):
            sec = s.tree.topLevelItem(k)
            for i in range(sec.childCount()):
                brush = sec.child(i).foreground(3)
                if brush.style() != Qt.BrushStyle.NoBrush:
                    colours.add(brush.color().name())
        assert colours and colours <= {hex_color("compare", k) for k in ("increase", "decrease")}
    assert seen["light"] != seen["dark"]
    w.set_theme("light")


def test_export_image_and_drag_and_drop(qtbot, make_window, profiles_dir, tmp_path):
    from analyser.gui.model.errors import GuiError

    w = make_window()
    mime = QMimeData()
    mime.setUrls(
        [
            QUrl.fromLocalFile(str(profiles_dir["fit"])),
            QUrl.fromLocalFile(str(profiles_dir["fit2"])),
        ]
    )
    event = QDropEvent(
        QPointF(50, 50),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
    with qtbot.waitSignal(w.loadFinished, timeout=30000):
        w.dropEvent(event)
    assert w.workspace.document.name == "fit.h5" and w.workspace.compare.name == "fit2.h5"
    for key in MY_REPORTS:
        path = tmp_path / f"{key}.png"
        w.show_report(key).export_image(path)
        assert path.stat().st_size > 1000
    with pytest.raises(GuiError, match="ending in"):
        w.report("summary").export_image(tmp_path / "chart.txt")
    mr = w.show_report("memory")
    w.close_document()
    assert w.workspace.document is None
    open_and_wait(qtbot, w, profiles_dir["oom"])  # reopening draws again after a close
    mr = w.show_report("memory")
    assert mr.plot_a.stack.scene() is not None and mr.plot_a.paths
    assert QThreadPool.globalInstance().activeThreadCount() == 0


def test_cli_gui_rejects_bad_arguments(capsys, tmp_path):
    from analyser.cli import main

    assert main(["gui", str(tmp_path / "nope.h5")]) == 2
    assert "does not exist" in capsys.readouterr().err
    files = []
    for i in range(3):
        f = tmp_path / f"{i}.h5"
        f.write_bytes(b"x")
        files.append(str(f))
    assert main(["gui", *files]) == 2
    assert "at most two" in capsys.readouterr().err


def test_compare_walkthrough_steps_4_and_5(qtbot, make_window, walkthrough_profiles):
    """8-bit input: the Summary's comparison tab carries the core's explanations, and the
    StreamCopy bytes shown for A and B are the core's."""
    from analyser.core.comparison import compare_pair

    a_path, b_path = walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"]
    w = make_window()
    open_and_wait(qtbot, w, a_path, b_path)
    s = w.show_report("summary")
    with Analysis.open(a_path) as a, Analysis.open(b_path) as b:
        pair = compare_pair(a, b)
        text = s.explanation.toPlainText()
        assert pair.explanations
        for e in pair.explanations:
            assert e.text in text
        got_a = s.tree.value("Execution", "StreamCopy received", 1)
        got_b = s.tree.value("Execution", "StreamCopy received", 2)
        assert got_a == fmt_bytes(a.metrics.streamcopy_rx_bytes)
        assert got_b == fmt_bytes(b.metrics.streamcopy_rx_bytes)


def test_predict_effect_of_the_fp16_tip(qtbot, make_window, walkthrough_profiles):
    """Walkthrough step 1: the first tip is FP16; "Predict effect" re-simulates it with the engine
    in the background and the details show the predicted figures beside the current ones."""
    w = make_window()
    open_and_wait(qtbot, w, walkthrough_profiles["1-base"])
    r = w.show_report("insights")
    tip = r.selected_insight()
    assert tip.change and tip.effect is None
    assert r.predict_one_button.isEnabled()
    r.predict_one_button.click()
    assert r.is_busy()
    qtbot.waitUntil(lambda: not r.is_busy(), timeout=180000)
    eff = tip.effect
    assert eff is not None and eff.status in ("fits", "oom"), eff
    text = r.details.toPlainText()
    from analyser.core.quantities import QUANTITIES

    assert QUANTITIES["oom_tiles"].title in text  # the catalogue's label ("OOM tiles")
    assert f"{int(eff.after['oom_tiles']):,}" in text
    assert eff.before["oom_tiles"] > 0
    assert eff.after["oom_tiles"] < eff.before["oom_tiles"]  # FP16 relieves the OOM


def test_profile_problem_found_by_a_report_is_shown(qtbot, make_window, profiles_dir, monkeypatch):
    """A damaged dataset found lazily by one report: the report's own "unavailable" state names
    it (a dialog before); other reports work."""
    from analyser.gui.model import data
    from profiles.errors import ProfileError

    warnings = []
    monkeypatch.setattr(
        QMessageBox, "warning", staticmethod(lambda parent, title, text, *a: warnings.append(text))
    )

    def broken(doc, ipu, by):
        raise ProfileError(f"profile {doc.path}: dataset /memory/by_category cannot be read.")

    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"])
    monkeypatch.setattr(data, "tile_breakdown", broken)
    memory = w.show_report("memory")
    assert memory.stack.currentWidget() is memory.message
    text = memory.message.label.text()
    assert text.startswith("Memory Report unavailable:") and "/memory/by_category" in text
    assert not warnings
    assert w.show_report("summary").tree.value("Memory", "Status") == "fits"


@pytest.mark.slow
def test_predict_all_reranks_and_shows_baseline_and_tone(qtbot, make_window, walkthrough_profiles):
    """Walkthrough step 3: after "Predict all" the list follows the analysis core's
    rank_insights over the predicted effects (a tip re-simulated out of memory moves to the
    end), the selected tip stays selected, and its details give the baseline note and the
    verdict in its Effect.tone colour."""
    from analyser.core.insights import rank_insights
    from analyser.gui.model import data
    from analyser.gui.palette import hex_color

    w = make_window()
    open_and_wait(qtbot, w, walkthrough_profiles["3-accumulate"])
    r = w.show_report("insights")
    before = r.insight_titles()
    r.select_insight(1)
    selected = r.selected_insight()
    r.predict_button.click()
    qtbot.waitUntil(lambda: not r.is_busy(), timeout=180000)
    tips = data.insights(r.document)
    assert all(t.effect is not None for t in tips if t.change)
    expected = [t.title for t in rank_insights(r.document.analysis, tips)]
    assert r.insight_titles() == expected
    assert sorted(expected) == sorted(before)
    bad = [t for t in tips if t.effect is not None and not t.effect.recommended]
    # tips re-simulated as not recommended (if any: under PopTorch's defaults step 3 keeps its
    # optimiser state on chip, so no offloading tip goes out of memory) come last
    assert not bad or set(r.insight_titles()[-len(bad) :]) == {t.title for t in bad}
    assert r.selected_insight() is selected
    for i, tip in enumerate(rank_insights(r.document.analysis, tips)):
        if tip.effect is None or not tip.effect.baseline_note:
            continue
        r.select_insight(i)
        assert tip.effect.baseline_note in r.details.toPlainText()
        assert hex_color("tone", tip.effect.tone) in r.details.toHtml()


def test_every_report_declares_data_the_model_can_warm():
    """Each report's data_needs names accessors of the Qt-free model (warmed on opening)."""
    from analyser.gui import reports as registry
    from analyser.gui.model import data

    classes = registry.report_classes()
    assert len(classes) == len(registry.REPORTS)
    for cls in classes:
        assert cls.data_needs, cls.key
        for name in cls.data_needs:
            data.accessor(name)
    for bad in ("warm", "accessor", "_no_such", "Document"):
        with pytest.raises(ValueError):
            data.accessor(bad)


def test_every_report_uses_the_base_empty_states(qtbot, profiles_dir):
    """Every report is a stack of the base class's message panel and its content: 'No profile
    open.' without a document, the content with one, the message again once closed."""
    from analyser.gui import reports as registry
    from analyser.gui.model.document import Document

    doc = Document.open(profiles_dir["fit"])
    try:
        for cls in registry.report_classes():
            report = cls()
            qtbot.addWidget(report)
            report.show()
            assert report.stack.currentWidget() is report.message, cls.key
            assert report.message.label.text() == report.no_document_text
            report.set_document(doc)
            if report.stack.currentWidget() is report.message:
                # a report the profile cannot feed says so in one sentence (
                # the synthetic profile's target has no roofline figures)
                assert report.message.label.text().startswith(f"{cls.title} unavailable: ")
            report.set_document(None)
            assert report.stack.currentWidget() is report.message, cls.key
            report.close()
    finally:
        doc.close()


def test_keys_reach_the_trace_and_reports_step_from_anywhere(qtbot, make_window, profiles_dir):
    """As seen in a real X server (benchmarks/gui_real_x.py): after choosing
    the Execution Trace in the side list (which keeps the focus), W zooms the trace and Home
    shows the whole run instead of jumping to the first report; Ctrl+PgDown / Ctrl+PgUp step
    to the next / previous report from the list and from a table."""
    from PySide6.QtWidgets import QAbstractItemView

    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"])
    trace_row = w.report_keys.index("trace")
    w.report_list.setFocus()
    w.report_list.setCurrentRow(trace_row)
    tl = w.current_report().timeline
    qtbot.waitUntil(lambda: tl.trace is not None, timeout=10000)
    full = tl.x_range()
    qtbot.keyClick(w.report_list, Qt.Key.Key_W)
    assert tl.x_range()[1] - tl.x_range()[0] < (full[1] - full[0]) * 0.7
    qtbot.keyClick(w.report_list, Qt.Key.Key_Home)
    assert w.report_list.currentRow() == trace_row
    assert tl.x_range() == pytest.approx(full)
    # Ctrl+PgDown / Ctrl+PgUp: one report at a time, from the list and from a table
    w.report_list.setCurrentRow(0)
    qtbot.keyClick(w.report_list, Qt.Key.Key_PageDown, Qt.KeyboardModifier.ControlModifier)
    assert w.report_list.currentRow() == 1
    ops_row = w.report_keys.index("operations")
    w.report_list.setCurrentRow(ops_row)
    # its view-model is built in the background; the table shows when it arrives
    qtbot.waitUntil(lambda: not w.current_report().awaiting_view, timeout=30000)
    table = next(t for t in w.current_report().findChildren(QAbstractItemView) if t.isVisible())
    table.setFocus()
    qtbot.keyClick(table, Qt.Key.Key_PageDown, Qt.KeyboardModifier.ControlModifier)
    assert w.report_list.currentRow() == ops_row + 1
    table.setFocus()
    qtbot.keyClick(table, Qt.Key.Key_PageUp, Qt.KeyboardModifier.ControlModifier)
    assert w.report_list.currentRow() == ops_row


def test_compare_insights_show_each_profiles_severity(
    qtbot, make_window, profiles_dir, monkeypatch
):
    """A tip present in A and B reads B's own severity too (after the FP16
    what-if B fits, yet memory tips read A's "critical - both")."""
    import dataclasses

    from analyser.gui.model import data as gui_data
    from analyser.gui.model.insights_view import build_insights_view
    from analyser.gui.reports.insights import InsightsReport

    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["oom"], profiles_dir["fit"])
    real = gui_data.insights
    tips_a = real(w.workspace.document)
    assert tips_a
    first = tips_a[0]
    other = "info" if first.severity != "info" else "warning"

    def fake(doc):
        if doc is w.workspace.document:
            return tips_a
        return [dataclasses.replace(first, severity=other)]

    def fresh(*args):
        """The report's builder under another name: its view-model is not the one the
        warm-up cached with the real insights."""
        return build_insights_view(*args)

    monkeypatch.setattr(gui_data, "insights", fake)
    monkeypatch.setattr(InsightsReport, "view_builder", staticmethod(fresh))
    r = w.show_report("insights")
    r.refresh()
    row = next(
        r.list.topLevelItem(i)
        for i in range(r.list.topLevelItemCount())
        if r.list.topLevelItem(i).text(1) == first.title
    )
    assert row.text(3) == "both"
    assert row.text(0) == f"{first.severity} → {other}"


def test_compare_summary_colours_only_changes_that_show(qtbot):
    """A share 0.02 points apart read '+0.0 pts' in red; a shown change
    (+1.0 pts, -24 MiB of a lower-is-better figure) is coloured. The view-model decides what
    counts as a shown change (analyser.gui.model.summary), the view colours it."""
    from analyser.gui.model.summary import COMPARE_HEADERS, Row, Section, _shown_delta, change_text
    from analyser.gui.reports.summary import SummaryReport

    r = SummaryReport()
    qtbot.addWidget(r)
    r.tree.set_headers(COMPARE_HEADERS)
    rows = []
    for name, kind, better, a, b in (
        ("tiny", "share", "higher", 0.5000, 0.5002),
        ("share", "share", "higher", 0.50, 0.51),
        ("peak", "bytes", "lower", 100 * 2**20, 76 * 2**20),
    ):
        change = change_text(kind, a, b, str(a), str(b), "KiB")
        rows.append(Row((name, str(a), str(b), change, ""), _shown_delta(change, a, b), better))
    r.show_sections(r.tree, [Section("Test", tuple(rows))], change_col=3)
    section = r.tree.topLevelItem(r.tree.topLevelItemCount() - 1)
    tiny, share, peak = (section.child(i) for i in range(3))
    assert tiny.text(3) == "+0.0 pts"
    assert tiny.foreground(3).style() == Qt.BrushStyle.NoBrush
    assert share.foreground(3).style() != Qt.BrushStyle.NoBrush
    assert peak.text(3).startswith("-24") or peak.text(3).startswith("−24")
    assert peak.foreground(3).style() != Qt.BrushStyle.NoBrush


def test_a_click_right_after_an_open_goes_before_the_warm_up_and_the_idle_build(
    qtbot, make_window, profiles_dir
):
    """A report clicked at once after an open is filled and painted with the
    background warm-up held (it shares the interpreter lock with the GUI thread) and the next
    idle-time build step put back after it; both carry on afterwards and build nothing twice."""
    from analyser.gui.reports.pipeline import PipelineChartView

    w = make_window()
    # idle build ticks while the clicked report waits for its first paint (there must be none)
    ticks_while_held = []
    w.background.timer.timeout.connect(
        lambda: (
            ticks_while_held.append(1)
            if getattr(w.background.awaiting_paint, "key", None) == "pipeline"
            else None
        )
    )
    open_and_wait(qtbot, w, profiles_dir["fit"])
    task = w.background.task
    pending = w.prebuild_pending()
    # the periodic cycle collection (app.py's; pytest-qt's application has none) restarts its
    # interval at the click: it comes after the fill, not inside it
    app, restarts = QApplication.instance(), []
    collector = getattr(app, "_garbage_collector", None)
    app._garbage_collector = SimpleNamespace(
        timer=SimpleNamespace(start=lambda: restarts.append(1))
    )
    try:
        pipeline = w.show_report("pipeline")
    finally:
        app._garbage_collector = collector
    assert restarts, "the collection's second restarted at the click"
    assert not task._may_run.is_set(), "the warm-up waits while the clicked report fills"
    if pending:  # held until the report's first paint
        assert not w.background.timer.isActive() and w.prebuild_pending()
    assert not pipeline.needs_refresh and pipeline.view_a.data is not None
    assert not task._may_run.is_set(), "still held: the report has not been painted yet"
    qtbot.waitUntil(lambda: w.background.awaiting_paint is None, timeout=3_000)  # painted
    assert not ticks_while_held, "no idle build step between the click and the paint"
    qtbot.waitUntil(task._may_run.is_set, timeout=3_000)
    w.pool.waitForDone()
    qtbot.waitUntil(lambda: not w.prebuild_pending(), timeout=20_000)
    assert sorted(r.key for r in w._reports.values()) == sorted(w.report_keys)
    keys = [k for k, _t in w.prebuild_steps]
    assert len(keys) == len(set(keys)) and "pipeline" not in keys
    assert len(w.findChildren(PipelineChartView)) == 1
    # the summary clicked again: nothing to fill, nothing held
    w.show_report("summary")
    assert task._may_run.is_set()


def test_the_warm_up_is_held_from_the_click_before_the_report_is_built(
    qtbot, make_window, profiles_dir
):
    """A click on a report not built yet holds the warm-up before building
    the report (its widgets and plots, 35-70 ms), not only from its fill: warm-up steps started
    meanwhile ran beside the construction (126 ms of them inside a Pipeline first visit)."""
    from analyser.gui.reports.pipeline import PipelineReport

    w = make_window()
    w.background.timer.timeout.disconnect()  # no idle build: the Pipeline is built by the click
    open_and_wait(qtbot, w, profiles_dir["fit"])
    task = w.background.task
    qtbot.waitUntil(
        lambda: w.background.awaiting_paint is None and task._may_run.is_set(), timeout=3_000
    )
    assert "pipeline" not in {r.key for r in w._reports.values()}
    held_while_built = []
    build = PipelineReport.__init__

    def spy(self, *args, **kwargs):
        held_while_built.append(not task._may_run.is_set())
        build(self, *args, **kwargs)

    PipelineReport.__init__ = spy
    try:
        w.show_report("pipeline")
    finally:
        PipelineReport.__init__ = build
    assert held_while_built == [True]
    qtbot.waitUntil(task._may_run.is_set, timeout=3_000)  # and resumed after the paint
    w.pool.waitForDone()


def test_a_first_visit_paints_the_memory_plots_once(qtbot, make_window, profiles_dir):
    """The lines of a report's plots (Memory's max-memory line and IPU
    separators) work out their bounds before the first paint (items.settle_item_bounds, for
    every report the window fills): left to the paint, each plot holding one was painted a
    second time in a pass of its own (compare mode: 6 plot paints for 3 plots)."""
    import pyqtgraph as pg

    w = make_window()
    open_and_wait(qtbot, w, profiles_dir["fit"], profiles_dir["fit2"])
    qtbot.waitUntil(lambda: w.background.awaiting_paint is None, timeout=3_000)
    counter = paint_counter()
    app = QApplication.instance()
    app.installEventFilter(counter)
    try:
        memory = w.show_report("memory")
        # the event-loop passes up to the one that paints the report (as after a click)
        deadline = time.monotonic() + 5
        while not counter.counts[memory] and time.monotonic() < deadline:
            app.processEvents()
    finally:
        app.removeEventFilter(counter)
    plots = [p for p in memory.findChildren(pg.GraphicsView) if p.isVisible()]
    painted = [counter.counts[p.viewport()] for p in plots]
    assert len(plots) >= 2 and max(painted) == 1, painted
    w.pool.waitForDone()


def test_a_held_warm_up_resumes_itself_when_nothing_resumes_it():
    """A GUI thread blocked waiting for the pool cannot run the timer that resumes the warm-up:
    the task then carries on by itself after one pause, not one pause per step."""
    from analyser.gui.background import PrefetchTask

    task = PrefetchTask((), ())
    task.PAUSE_LIMIT_S = 0.01
    task.pause()
    task._wait_if_paused()
    assert task._may_run.is_set()


def test_a_held_warm_up_stays_held_while_the_gui_thread_is_busy(monkeypatch):
    """While the GUI thread keeps busy (its CPU clock advancing: a long fill of the clicked
    report) the warm-up stays held past PAUSE_LIMIT_S, up to PAUSE_BUSY_LIMIT_S, then resumes
    by itself."""
    from analyser.gui import background
    from analyser.gui.background import PrefetchTask

    cpu = iter(range(1000))  # a GUI thread using a whole second per look: busy
    monkeypatch.setattr(background, "_cpu_seconds", lambda _clock: float(next(cpu)))
    task = PrefetchTask((), ())
    task.PAUSE_LIMIT_S, task.PAUSE_BUSY_LIMIT_S = 0.01, 0.1
    task.pause()
    task._wait_if_paused()
    assert task._may_run.is_set()
    assert time.monotonic() - task._paused_at >= task.PAUSE_BUSY_LIMIT_S


def test_the_tests_never_write_the_users_settings():
    """The GUI's default settings (what `analyse gui` writes: recent files, the last report)
    live in the test run's own folder during the tests, not in the user's ~/.config."""
    from analyser.gui.main_window import default_settings

    where = Path(default_settings().fileName()).resolve()
    assert not where.is_relative_to(Path.home() / ".config"), where
    assert where.is_relative_to(Path(os.environ["XDG_CONFIG_HOME"]).resolve()), where


def test_a_status_message_takes_the_whole_line(qtbot, make_window, profiles_dir):
    """A temporary status message is not cut by the target line beside it; the target line
    comes back when the message ends."""
    w = make_window()
    w.resize(900, 600)
    open_and_wait(qtbot, w, profiles_dir["fit"], profiles_dir["fit"])
    w.show()
    assert w.target_label.isVisible()
    text = "Saved " + "/a/long/folder/name" * 3 + "/resnet-whatif-balance-the-pipeline.h5"
    w.statusBar().showMessage(text, 5000)
    assert not w.target_label.isVisible()
    assert w.statusBar().fontMetrics().horizontalAdvance(text) < w.statusBar().width()
    w.statusBar().clearMessage()
    assert w.target_label.isVisible()


def test_cache_results_stay_out_of_open_recent(
    qtbot, make_window, profiles_dir, settings, tmp_path, monkeypatch
):
    """A result in the simulation cache's results folder (what a what-if opens) is not listed
    in File > Open Recent, nor one an earlier version listed, so the Open dialog does not start
    in the cache either."""
    import shutil

    from analyser.gui.whatif import RESULTS_FOLDER

    cache = tmp_path / "cache"
    monkeypatch.setenv("ANALYSE_CACHE", str(cache))
    result = cache / "ab" / RESULTS_FOLDER / "fit-whatif-tip.h5"
    result.parent.mkdir(parents=True)
    shutil.copy(profiles_dir["fit"], result)
    settings.setValue("recent", [str(result.resolve())])
    w = make_window(settings)
    assert w.recent_files() == [] and not w.recent_menu.isEnabled()
    open_and_wait(qtbot, w, profiles_dir["fit"], result)
    assert w.workspace.compare is not None
    assert w.recent_files() == [str(profiles_dir["fit"].resolve())]
    assert w._last_dir() == str(profiles_dir["fit"].resolve().parent)


def test_negative_tile_cycles_open_with_a_warning(qtbot, make_window, tmp_path):
    """A profile whose per-tile cycles are negative (analyse validate flags them) opens, with
    one sentence saying so on the status line; a sound profile opens without one."""
    import h5py
    import hdf5plugin  # noqa: F401  (the datasets' Blosc2 filter)

    from profiles.synthetic import make_synthetic_profile
    from profiles.writer import write_profile

    bad = tmp_path / "negative.h5"
    write_profile(bad, make_synthetic_profile(n_steps=2000, n_ipus=1, tiles=16, n_programs=40))
    with h5py.File(bad, "r+") as f:  # the writer refuses them: damage the file as written
        f["programs/tile_cycles"][3, :5] = -7
    w = make_window()
    open_and_wait(qtbot, w, bad)
    message = w.statusBar().currentMessage()
    assert message.startswith("Warning: profile ") and "negative.h5" in message
    assert "/programs/tile_cycles 5 value(s) outside counts" in message
    assert "Traceback" not in message and "\n" not in message  # one sentence
    good = tmp_path / "sound.h5"
    write_profile(good, make_synthetic_profile(n_steps=2000, n_ipus=1, tiles=16, n_programs=40))
    w.statusBar().clearMessage()
    open_and_wait(qtbot, w, good)
    assert w.statusBar().currentMessage() == ""
