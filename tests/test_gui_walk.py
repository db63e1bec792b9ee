"""No blank panel, no traceback. A report that cannot fill shows its own "unavailable:
<one sentence>" state (defect 1), and benchmarks/gui_walk.py, which visits every report and tab
and selects something in each, finds nothing raised on a demo-like pair and on hostile profiles
(tests/hostile.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import hostile
import pytest
from gui_helpers import open_in, shown_window
from PySide6.QtWidgets import QMessageBox

pytestmark = pytest.mark.gui

WALK = Path(__file__).resolve().parents[1] / "benchmarks" / "gui_walk.py"


def _walker():
    spec = importlib.util.spec_from_file_location("gui_walk", WALK)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gui_walk"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    import engine
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("walk") / "base.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    return path


@pytest.fixture(scope="module")
def missing(base, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("missing")
    return {
        name: hostile.mutated(base, folder, name, m)
        for name, m in hostile.missing_dataset_mutations().items()
    }


@pytest.fixture
def window(qtbot, tmp_path):
    yield from shown_window(qtbot, tmp_path)


def _open(qtbot, w, path: Path) -> None:
    assert open_in(qtbot, w, path)


def test_liveness_without_live_end_says_unavailable(qtbot, window, missing):
    """The issue's first case: Liveness raised KeyError in showEvent, the header kept naming
    the previous report and the list stayed empty."""
    _open(qtbot, window, missing["no-live-end"])
    window.show_report("memory")
    report = window.show_report("liveness")
    assert window.title_label.text().startswith("Liveness Report")
    assert report.stack.currentWidget() is report.message
    text = report.message.label.text()
    assert text.startswith("Liveness Report unavailable:")
    assert "/graph/variables/live_end" in text
    # the side list says so too, from the check made when the profile opened
    row = window.report_keys.index("liveness")
    assert "live_end" in window.report_list.item(row).toolTip()


def test_tile_map_without_tile_xy_says_unavailable(qtbot, window, missing):
    _open(qtbot, window, missing["no-tile-xy"])
    report = window.show_report("memory")
    report.view_tabs.setCurrentWidget(report.tile_map)
    assert "Tile map unavailable:" in report.part_problem()
    assert "/memory/tile_xy" in report.part_problem()
    overlay = report.tile_map.findChild(type(report.message.label), "pageMessage")
    assert overlay is not None and overlay.isVisible() and "tile_xy" in overlay.text()
    # the other tabs keep working, and the line goes away on them
    report.view_tabs.setCurrentWidget(report.variables_page)
    assert report.part_problem() == ""
    assert report.variables_table.model.rowCount() > 0


def test_an_error_while_filling_is_the_reports_own_state(qtbot, window, base, monkeypatch):
    """Any error (not only the expected ones) while a report fills: its "unavailable" state in
    one sentence, no Python error text, the window carries on."""
    from analyser.gui.model import data

    def broken(doc):
        raise IndexError("index 2147483647 is out of bounds for axis 0 with size 3")

    said: list[str] = []
    monkeypatch.setattr(
        QMessageBox, "warning", staticmethod(lambda parent, title, text, *a: said.append(text))
    )
    monkeypatch.setattr(data, "liveness", broken)
    _open(qtbot, window, base)
    report = window.show_report("liveness")
    text = report.message.label.text()
    assert text.startswith("Liveness Report unavailable:") and "IndexError" not in text
    assert not said  # the panel on screen says it: no dialog on top
    assert text.count(".") >= 1 and "\n" not in text
    assert window.show_report("summary").stack.currentWidget() is not None


@pytest.mark.slow
def test_walk_is_clean_on_a_compared_pair(base, tmp_path):
    other = tmp_path / "other.h5"
    other.write_bytes(base.read_bytes())
    result = _walker().walk([base, other])
    assert result.exit_code == 0, "\n".join(result.errors)
    assert not result.notes, result.notes
    visited = " ".join(result.visited)
    for key in ("summary", "liveness", "memory", "trace", "pipeline", "operations"):
        assert f"single: {key}" in visited and f"compare: {key}" in visited


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        ("missing", "no-per-tile-rows"),
        ("structural", "truncated"),
        # found by walking the whole corpus: a trace grouping and the Operations' program layer
        # raised in their slots, and a failed grouping broke every later redraw
        ("semantic", "step-start-unsorted"),
        ("semantic", "program-parent-loop"),
        ("semantic", "peak-step-out"),
    ],
    ids=lambda c: f"{c[0]}/{c[1]}",
)
def test_walk_on_hostile_profiles(base, tmp_path, case):
    """Exit 0 (each report shows or says why) or 2 (refused in one sentence); never 1."""
    category, name = case
    muts = hostile.missing_dataset_mutations() if category == "missing" else None
    mutation = (muts or hostile.profile_mutations()[category])[name]
    bad = hostile.mutated(base, tmp_path, name, mutation)
    result = _walker().walk([bad])
    assert result.exit_code in (0, 2), "\n".join(result.errors)
    if result.exit_code == 2:
        assert result.refused.count("\n") == 0
    if category == "missing":
        assert result.exit_code == 0 and result.notes  # it opens, and says what is missing


def test_a_missing_dataset_refuses_only_the_parts_that_read_it(base, tmp_path):
    """Without the variables' live_end, the liveness views and the tile memory map (which
    place variables in time) are unavailable; what lists variables without saying when they
    live fills: the selected tiles' Variables tab (without the lifetime columns), the tabs
    after it, and a click in the Insights (their largest always-live variables) or the
    Operations (an operation's variables and memory), which had said the problem in a dialog."""
    walker = _walker()
    bad = hostile.mutated(
        base, tmp_path, "no-live-end", hostile.delete("/graph/variables/live_end")
    )
    result = walker.walk([bad])
    assert result.exit_code == 0, "\n".join(result.errors)
    noted = [n for n in result.notes if "memory, tab" in n]
    assert any("tab 'Tile memory map'" in n for n in noted), result.notes
    assert any("single: liveness" in n for n in result.notes), result.notes
    for tab in ("Variables", "Vertices", "Exchanges", "Compute sets", "Memory per tile"):
        assert not [n for n in noted if f"tab '{tab}'" in n], result.notes
    assert not [n for n in result.notes if "dialog" in n], result.notes


def test_a_profile_without_its_liveness_curve_or_compute_set_names_opens(
    qtbot, window, base, missing
):
    """Without /liveness/not_always_live the key figures and the Liveness Report use the curve
    summed from the variables' lifetimes (the report says so above it); without the compute
    sets' names the imbalance names its rows by program. Both were refused whole. (Every report
    over both: ``benchmarks/gui_walk.py``; tests/test_fuzz_gui.py opens each.)"""
    from analyser.cli import main
    from analyser.core import Analysis

    for name in ("no-not-always-live", "no-compute-set-names"):
        bad = missing[name]
        assert main(["summary", str(bad)]) == 0
        with Analysis.open(base) as a, Analysis.open(bad) as b:
            assert b.metrics.not_always_live_peak_bytes == a.metrics.not_always_live_peak_bytes
            assert b.liveness.rebuilt == (name == "no-not-always-live")
        _open(qtbot, window, bad)
        report = window.show_report("liveness")
        assert report.stack.currentWidget() is not report.message  # the report shows
        said = "summed from its variables' lifetimes" in report.part_problem()
        assert said == (name == "no-not-always-live"), report.part_problem()


def test_a_column_only_the_classification_reads_does_not_hide_the_summary(base, tmp_path):
    """Without the operations' flops the intervals cannot classify the run: the figures say
    so, and the Summary shows (it was unavailable as a whole)."""
    from analyser.core import Analysis, intervals

    bad = hostile.mutated(base, tmp_path, "no-flops", hostile.delete("/graph/operations/flops"))
    with Analysis.open(bad) as a:
        feats = intervals.features_of(a)
    assert feats.small_conv_share is None
    iv = intervals.absolute("throughput_samples_per_s", 1000.0, feats)
    assert not iv.available and "could not be read" in iv.note
    from analyser.cli import main

    assert main(["summary", str(bad)]) == 0


def test_walker_exit_codes(tmp_path):
    not_a_profile = tmp_path / "not.h5"
    not_a_profile.write_text("no\n")
    walker = _walker()
    assert walker.walk([not_a_profile]).exit_code == 2
    r = walker.WalkResult(errors=["single: summary: ValueError"])
    assert r.exit_code == 1


@pytest.mark.slow
def test_walk_is_clean_on_the_demo_profiles(walkthrough_profiles):
    """The walker over the demo's first two steps compared (out of memory, then fitting), as
    PopVision's bundled demo would be browsed: every report and tab, nothing raised, nothing
    unavailable."""
    demo = [walkthrough_profiles["1-base"], walkthrough_profiles["2-half"]]
    result = _walker().walk(demo, single=False)  # compare mode shows A's reports too
    assert result.exit_code == 0, "\n".join(result.errors)
    assert not [n for n in result.notes if "unavailable" in n], result.notes
