"""Compare mode and the Liveness / Pipeline / Insights / Operations reports: steps
aligned by program, one cycle axis for A and B, the host's wait drawn, labels that do not
overlap, Predict effect re-ranking in compare mode, per-step and per-operation tabs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from gui_helpers import open_documents as _open
from gui_helpers import shown_report, wait_until_idle

from analyser.core.liveness import ALIGN_ADDED, ALIGN_BOTH, ALIGN_REMOVED, align_steps


# ---------------------------------------------------------------------------------------------
# Core (no Qt)
# ---------------------------------------------------------------------------------------------
def test_align_steps_matches_programs_as_a_diff():
    """A step inserted in B shifts nothing after it; a changed step is removed + added; repeated
    names pair by occurrence."""
    a = ["in", "conv", "relu", "conv", "relu", "loss"]
    b = ["norm", "in", "conv", "relu", "conv", "gelu", "loss"]
    al = align_steps(a, b)
    for row in range(al.n_rows):
        i, j = int(al.a[row]), int(al.b[row])
        if i >= 0 and j >= 0:
            assert a[i] == b[j]
            assert al.status(row) == ALIGN_BOTH
    # every step of each profile appears once, in order
    assert list(al.a[al.a >= 0]) == list(range(len(a)))
    assert list(al.b[al.b >= 0]) == list(range(len(b)))
    assert al.status(0) == ALIGN_ADDED and b[al.b[0]] == "norm"
    # the second relu of A faces nothing in B (gelu there), so it is removed, gelu added
    removed = [a[al.a[r]] for r in range(al.n_rows) if al.status(r) == ALIGN_REMOVED]
    added = [b[al.b[r]] for r in range(al.n_rows) if al.status(r) == ALIGN_ADDED]
    assert removed == ["relu"] and added == ["norm", "gelu"]
    assert al.a_pos[5] == al.b_pos[6]  # the losses face each other
    assert [s for s, _lo, _hi in al.unmatched_runs()] == [ALIGN_ADDED, ALIGN_REMOVED, ALIGN_ADDED]


# ---------------------------------------------------------------------------------------------
# Liveness
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def liveness(qtbot):
    from analyser.gui.reports.liveness import LivenessReport

    yield from shown_report(qtbot, LivenessReport())


def _scene_rect(item):
    return item.mapRectToScene(item.boundingRect())


@pytest.mark.gui
def test_compare_liveness_aligns_steps_by_program(qtbot, liveness, walkthrough_profiles):
    """Walkthrough step 5 has one more liveness step than step 4 (the input
    normalisation at the front); A's step N faces B's step N + 1 of the same program, the peaks
    (same program) share one label giving each profile's step, the added step is marked."""
    r, _ = liveness
    a_doc, b_doc = _open(
        liveness, walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"]
    )
    la, lb = a_doc.analysis.liveness, b_doc.analysis.liveness
    assert lb.n_steps == la.n_steps + 1
    al = r.alignment()
    for row in range(al.n_rows):
        i, j = int(al.a[row]), int(al.b[row])
        if i >= 0 and j >= 0:
            assert la.step_names[i] == lb.step_names[j]
    assert al.status(0) == ALIGN_ADDED
    pa, pb = int(la.peak_step[0]), int(lb.peak_step[0])
    assert la.step_names[pa] == lb.step_names[pb] and pb == pa + 1
    x = int(r.positions("A", la.n_steps)[pa])
    assert x == int(r.positions("B", lb.n_steps)[pb])
    # the default selection (the peak) reads each profile's own step of the same program
    assert r.steps == [x]
    assert r.steps_at(x) == {"A": pa, "B": pb}
    text = [t.textItem.toPlainText() for t in r.peak_labels]
    assert any(f"A step {pa}" in t and f"B step {pb}" in t for t in text), text
    # B's curves are dashed, and so are their legend swatches (a square read as solid beside
    # "(B, dashed)" in a real X server); A's are solid lines
    swatch = dict(zip((name for name, _c in r.legend.entries), r.legend.swatches))
    assert swatch["IPU 0 (A)"] == "line" and swatch["IPU 0 (B)"] == "dashed", swatch
    section = r.step_tree.topLevelItem(0)
    rows = {section.child(k).text(0): section.child(k).text(1) for k in range(section.childCount())}
    assert rows["A: Name"] == rows["B: Name"] == la.step_names[pa], rows
    # the step only B has: selected, it says so for A
    r.click_step(0, False)
    section = r.step_tree.topLevelItem(0)
    rows = {section.child(k).text(0): section.child(k).text(1) for k in range(section.childCount())}
    assert rows["A: Step"].startswith("none") and rows["B: Step"] == "0"
    # B's live variables are B's own at its step 0
    assert set(r.live_table.model.frame["profile"]) == {"B"}


@pytest.mark.gui
def test_liveness_selection_labels_do_not_sit_on_peak_labels(qtbot, liveness, walkthrough_profiles):
    """The 'step N' / 'vs N' labels printed on the peak labels."""
    r, _ = liveness
    _open(liveness, walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"])
    x = r.steps[0]
    r.click_step(x + 3, True)
    wait_until_idle(qtbot)  # the markers' labels placed in the relaid-out chart
    peak_rects = [_scene_rect(t) for t in r.peak_labels]
    assert peak_rects
    for line in r._markers:
        label = _scene_rect(line.label)
        for rect in peak_rects:
            assert not label.intersects(rect), (line.label.toPlainText(), label, rect)


# ---------------------------------------------------------------------------------------------
# Insights
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def insights(qtbot, monkeypatch):
    """The Insights report with the engine's re-simulation replaced by a fixed verdict (each
    tip with a change is predicted as not recommended), so the tests run in milliseconds."""
    from analyser.core.insights.model import Effect
    from analyser.gui.reports.insights import InsightsReport, PredictTask

    def fake_run(self):
        for t in self.insights:
            if t.change:
                t.effect = Effect("oom", "would not fit", {}, {}, recommended=False, tone="bad")
        self.signals.finished.emit(self.insights, "")

    monkeypatch.setattr(PredictTask, "run", fake_run)
    yield from shown_report(qtbot, InsightsReport())


def _predict(qtbot, r, selected_only):
    (r.predict_one_button if selected_only else r.predict_button).click()
    qtbot.waitUntil(lambda: not r.is_busy(), timeout=10000)


@pytest.mark.gui
def test_compare_predict_effect_reranks_and_says_what_it_did(qtbot, insights, walkthrough_profiles):
    """In compare mode "Predict effect" re-ranks the list (a tip predicted as
    not recommended moves to the end, after the core's rank_insights) and the status says so;
    when the order cannot change (memory tips of an out-of-memory profile keep the memory
    guide's order) the status says that instead of "re-ranked"."""
    from analyser.core.insights import rank_insights
    from analyser.gui.model import data

    r, _ = insights
    a, _b = _open(insights, walkthrough_profiles["3-accumulate"], walkthrough_profiles["5-8bit-io"])
    before = r.insight_titles()
    first = r.selected_insight()
    assert first.change and r.insight_titles()[0] == first.title
    _predict(qtbot, r, True)
    after = r.insight_titles()
    tips = {t.title: t for t in data.insights(a)}
    mine = [t for t in after if t in tips]  # A's tips, in the order shown

    def advised(title: str) -> bool:
        eff = tips[title].effect
        return eff is None or eff.recommended

    # among A's tips, one predicted as not recommended goes after every recommended one
    flags = [advised(t) for t in mine]
    assert flags == sorted(flags, reverse=True), list(zip(mine, flags, strict=True))
    order_a = [t.title for t in rank_insights(a.analysis, data.insights(a))]
    assert [t for t in after if t in order_a] == order_a
    said = r.progress_label.text()
    assert ("re-ranked" in said) if after != before else ("order is unchanged" in said), said
    assert r.selected_insight() is first


@pytest.mark.gui
def test_compare_predict_on_oom_memory_tips_says_order_unchanged(
    qtbot, insights, walkthrough_profiles
):
    r, _ = insights
    _open(insights, walkthrough_profiles["1-base"], walkthrough_profiles["2-half"])
    before = r.insight_titles()
    tip = r.selected_insight()
    assert tip.category == "memory" and tip.change
    _predict(qtbot, r, True)
    assert r.insight_titles() == before
    text = r.progress_label.text()
    assert "re-ranked" not in text and "order is unchanged" in text
    # Predict all in compare mode gives every row (B's own tips too) an effect
    _predict(qtbot, r, False)
    for _id, t, _doc in r._entries:
        assert not t.change or t.effect is not None, t.title


@pytest.mark.gui
def test_status_label_does_not_squeeze_the_insight_list(qtbot, insights, walkthrough_profiles):
    """A long status message beside the buttons widened the details pane."""
    r, _ = insights
    _open(insights, walkthrough_profiles["3-accumulate"])
    wait_until_idle(qtbot)  # laid out with the profile's tips
    width = r.list.width()
    r.progress_label.setText("Predicted effects are shown with each tip; " * 6)
    wait_until_idle(qtbot)  # the relayout the longer text asked for
    assert r.list.width() == width


def test_insights_largest_tables_fill_when_shown(qtbot, insights, walkthrough_profiles):
    """The largest vertex state and always-live variables of A and B are read
    when their tab is shown (the first visit shows the top tiles)."""
    from analyser.gui.model import data

    r, _ = insights
    a, b = _open(
        insights, walkthrough_profiles["3-accumulate"], walkthrough_profiles["4-device-iterations"]
    )
    assert r.top_tiles.model.rowCount() > 0
    assert r.vertices.model.rowCount() == 0 and r.always_live.model.rowCount() == 0
    r.side_tabs.setCurrentWidget(r.always_live)
    for table, rows in (
        (r.vertices, data.largest_vertices),
        (r.always_live, data.largest_always_live),
    ):
        frame = table.model.frame
        assert list(frame["profile"]) == ["A"] * len(rows(a)) + ["B"] * len(rows(b))
        shown_b = frame[frame["profile"] == "B"].drop(columns="profile").reset_index(drop=True)
        pd.testing.assert_frame_equal(shown_b, rows(b).reset_index(drop=True))


# ---------------------------------------------------------------------------------------------
# Liveness: per-step Vertices and Cycle estimate tabs
# ---------------------------------------------------------------------------------------------
def test_step_vertices_against_the_profile_tables(walkthrough_profiles):
    """The core's per-step vertices: the step program's compute sets, their vertex type, and
    the max / mean of the program's per-tile cycles over each compute set's tiles."""
    from analyser.core.analysis import Analysis
    from analyser.core.liveness import step_program, step_tile_cycles, step_vertices

    with Analysis.open(walkthrough_profiles["3-accumulate"]) as a:
        src = a.src
        step = int(a.liveness.peak_step[0])
        prog = step_program(src, step)
        cs = src.table("/graph/compute_sets")
        mine = cs[cs["program"] == prog]
        f = step_vertices(src, step)
        assert len(f) == len(mine) >= 1
        cycles = src.profile.tile_cycles([prog])[0]
        assert (step_tile_cycles(src, step) == cycles).all()
        vt = src.table("/graph/vertex_types")
        for row in f.itertuples():
            m = mine[mine["name"] == row.compute_set].iloc[0]
            assert row.vertex_type == vt["name"].iloc[int(m["vertex_type"])]
            assert row.vertices == int(m["vertices"])
            tiles = cycles[int(m["tile_start"]) : int(m["tile_start"]) + int(m["tile_count"])]
            assert row.max_tile_cycles == int(tiles.max())
            assert row.mean_tile_cycles == pytest.approx(float(tiles.mean()))
            assert row.state_bytes == int(m["vertices"]) * int(
                vt["state_bytes"].iloc[int(m["vertex_type"])]
            )


@pytest.mark.gui
def test_liveness_vertices_and_cycle_tabs_fill_when_shown(qtbot, liveness, walkthrough_profiles):
    """The Liveness report's per-step Vertices and Cycle estimate tabs (A and B at
    the aligned step), filled only when shown."""
    from analyser.core.liveness import step_tile_cycles, step_vertices

    r, _ = liveness
    a, b = _open(
        liveness, walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"]
    )
    # nothing computed while the tabs are hidden
    assert r.vertices_table.model.rowCount() == 0 and r.cycles_plot is None
    assert r.details.tabText(1) == "Vertices" and r.details.tabText(2) == "Cycle estimate"
    r.details.setCurrentWidget(r.vertices_table)
    at = r.steps_at(r.steps[0])
    frame = r.vertices_table.model.frame
    assert set(frame["profile"]) == {"A", "B"}
    expected = step_vertices(a.analysis.src, at["A"])["vertices"]
    assert list(frame.loc[frame["profile"] == "A", "vertices"]) == list(expected)
    r.details.setCurrentWidget(r.cycles_panel)
    assert r.cycles_plot is not None
    top = int(step_tile_cycles(b.analysis.src, at["B"]).max())
    assert f"B: step {at['B']}" in r.cycles_text.text()
    assert f"{top:,} cycles on the slowest tile" in r.cycles_text.text()
    # a new step refreshes the shown tab
    r.click_step(5, False)
    assert "A: step 4 (" in r.cycles_text.text() and "B: step 5 (" in r.cycles_text.text()


# ---------------------------------------------------------------------------------------------
# Operations: software layers, column chooser, per-operation charts
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def operations(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from analyser.gui.reports.operations import OperationsReport

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    report = OperationsReport()
    report.set_settings(settings)
    for r, docs in shown_report(qtbot, report):
        yield r, docs, settings


def test_software_layers_add_up_to_the_operations(walkthrough_profiles):
    """Core: layers and programs cover the same run as the operations table (cycles of the
    whole run, memory, code)."""
    from analyser.core.analysis import Analysis
    from analyser.core.operations import layer_table, memory_by_category, program_table

    with Analysis.open(walkthrough_profiles["3-accumulate"]) as a:
        ops = a.operations
        layers = layer_table(ops)
        assert layers["operations"].sum() == len(ops)
        for col in ("total_cycles", "memory_bytes", "code_bytes", "flops"):
            assert layers[col].sum() == ops[col].sum()
        progs = program_table(a.src, a.execution, ops)
        with_op = progs[progs["operation"] != "-"]
        assert with_op["total_cycles"].sum() == ops["total_cycles"].sum()
        assert progs["cycles_share"].sum() == pytest.approx(1.0)
        mem = memory_by_category(a.variables, ops, np.array([0]))
        v = a.variables
        assert mem.drop("code").sum() == v.loc[v["op"] == 0, "bytes"].sum()
        assert mem.drop("code").sum() == ops["memory_bytes"].iloc[0]
        assert mem["code"] == ops["code_bytes"].iloc[0]


@pytest.mark.gui
def test_operations_layer_selector_columns_and_charts(qtbot, operations, walkthrough_profiles):
    """The software-layer selector (PopTorch operations / model layers / Poplar
    programs), the column chooser remembered in the settings per layer, and the selected
    row's charts (cycles by tile, memory by category) drawn only when shown."""
    from PySide6.QtCore import Qt

    from analyser.gui.reports.operations import OperationsReport

    r, docs, settings = operations
    (doc,) = _open((r, docs), walkthrough_profiles["3-accumulate"])
    assert r.layer_combo.itemText(0) == "PopTorch operations"
    n_ops = r.model.rowCount()
    r.set_layer("layers")
    layers = r.model.frame
    assert r.model.headerData(0, Qt.Orientation.Horizontal) == "Layer" and 0 < len(layers) < n_ops
    top = r.selected_name()
    top_cycles = layers.loc[layers["name"] == top, "total_cycles"].iloc[0]
    assert top_cycles == layers["total_cycles"].max()  # most expensive first
    ops = doc.analysis.operations
    section = r.summary_tree.topLevelItem(0)
    assert section.text(0) == top
    # the layer's programs are its operations' programs
    op_ids, progs = r.selection_of(doc, top)
    assert set(ops["layer"].iloc[op_ids]) == {top}
    # the tables: read when one of their tabs is shown
    assert r.progs_table.model.rowCount() == 0
    r.details.setCurrentWidget(r.progs_table)
    assert r.progs_table.model.rowCount() == len(progs)
    # charts: nothing drawn until shown, then the core's figures
    assert r.tile_plot is None
    r.details.setCurrentWidget(r.charts_panel)
    assert r.tile_plot is not None and r.tile_plot.getPlotItem().listDataItems()
    from analyser.core.operations import tile_cycles_by_ipu

    by_ipu = tile_cycles_by_ipu(doc.analysis.src, progs)
    ipu, cycles = next(iter(by_ipu.items()))
    assert f"IPU {ipu}: {int(cycles.max()):,} cycles on the slowest tile" in r.charts_text.text()
    ticks = r.memory_plot.getPlotItem().getAxis("left")._tickLevels[0]
    assert "code" in {t for _p, t in ticks}
    # programs: one row per executable program, its operation named
    r.set_layer("programs")
    assert r.model.headerData(0, Qt.Orientation.Horizontal) == "Program"
    assert "operation" in [r.model.column_key(c) for c in range(r.model.columnCount())]
    # column chooser: hiding a column hides it, the choice is remembered per layer
    r.set_layer("operations")
    col = r.model.column_of("flops")
    action = next(a for a in r.columns_menu.actions() if a.text() == "FLOPs")
    action.setChecked(False)
    assert r.view.isColumnHidden(col)
    assert "flops" in settings.value("operations/hidden/operations")
    r.set_layer("layers")
    assert not r.view.isColumnHidden(r.model.column_of("flops"))
    r2 = OperationsReport()
    qtbot.addWidget(r2)
    r2.set_settings(settings)
    r2.show()
    r2.set_document(doc, None)
    assert r2.view.isColumnHidden(r2.model.column_of("flops"))
    r2.close()


@pytest.mark.gui
def test_operations_layers_in_compare_mode(qtbot, operations, walkthrough_profiles):
    r, docs, _s = operations
    a, b = _open((r, docs), walkthrough_profiles["2-half"], walkthrough_profiles["3-accumulate"])
    r.set_layer("layers")
    f = r.model.frame
    la, lb = a.analysis.operations, b.analysis.operations
    row = f.set_index("name").loc["conv1"]
    assert row["total_cycles_a"] == la.loc[la["layer"] == "conv1", "total_cycles"].sum()
    assert row["total_cycles_b"] == lb.loc[lb["layer"] == "conv1", "total_cycles"].sum()
    r.details.setCurrentWidget(r.charts_panel)
    assert "A: IPU" in r.charts_text.text() and "B: IPU" in r.charts_text.text()


@pytest.mark.gui
def test_compare_warms_the_liveness_alignment_in_the_background(
    qtbot, tmp_path, walkthrough_profiles
):
    """Opening two profiles computes the pair's aligned steps off the GUI thread (seconds for
    10^5 program steps), so the compared Liveness report's first visit draws from the cache."""
    from PySide6.QtCore import QSettings

    from analyser.gui.main_window import COMPARE_OPEN_NEEDS, MainWindow

    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    # what the two documents hold when the open finishes (the warm-up has only just started)
    at_open = []
    w.loadFinished.connect(
        lambda ok: at_open.extend(
            set(d._cache) for d in (w.workspace.document, w.workspace.compare)
        )
    )
    with qtbot.waitSignal(w.loadFinished, timeout=60000):
        w.open_compare(
            walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"]
        )
    # the loader computed the data the reports clicked right after a compare open read,
    # Liveness's tables among them
    assert {"variables", "liveness_steps"} <= set(COMPARE_OPEN_NEEDS)
    for keys in at_open:
        assert set(COMPARE_OPEN_NEEDS) <= keys
    assert w.pool.waitForDone(60000)
    a, b = w.workspace.document, w.workspace.compare
    assert any(k.startswith(f"liveness_alignment:{b.path}") for k in a._cache)
    assert any(k.startswith(f"compare:{b.path}") for k in a._cache)
    w.close()
