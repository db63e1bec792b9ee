"""Qt-free checks of what GUI reports show (defects fixed in the analysis core or a
report's view-model): no Qt needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def profile(synthetic_profile) -> Path:
    return synthetic_profile(n_steps=3000, n_ipus=2, tiles=256, n_programs=200, seed=3)


def test_share_of_cycles_has_one_denominator(profile):
    """The same operation's share read the same at every software layer
    (0.6% vs 0.4% before), and a program the compiler records with 0 cycles but which ran
    shows its measured cycles per execution."""
    from analyser.core.analysis import Analysis
    from analyser.core.operations import layer_table, program_table, run_step_cycles
    from analyser.core.quantities import SHARE_OF_CYCLES, TABLES

    with Analysis.open(profile) as a:
        ops = a.operations
        progs = program_table(a.src, a.execution, ops)
        layers = layer_table(ops)
        run = run_step_cycles(a.execution)
        assert run == pytest.approx(float(np.asarray(a.execution.program_cycles).sum()))
        assert progs["cycles_share"].sum() == pytest.approx(1.0)
        by_op = progs[progs["operation"] != "-"].groupby("operation")["cycles_share"].sum()
        shares = ops.set_index(ops["name"].astype(str))["cycles_share"]
        for name, share in by_op.items():
            assert share == pytest.approx(shares[name])
        assert layers["cycles_share"].sum() == pytest.approx(ops["cycles_share"].sum())
        ran = progs["executions"] > 0
        assert (progs.loc[ran, "cycles"] > 0).all()
    for table in ("operations", "operation_layers", "operation_programs"):
        assert TABLES[table]["cycles_share"].tip == SHARE_OF_CYCLES


def test_problem_sentences_are_one_sentence_without_python_names():
    from analyser.gui.model.errors import missing_sentence, problem_sentence
    from profiles.errors import ProfileError

    assert problem_sentence(ProfileError("profile x: dataset /a is missing")) == (
        "profile x: dataset /a is missing."
    )
    text = problem_sentence(KeyError("live_end"), "a.h5")
    assert "live_end" in text and "KeyError" not in text and text.endswith(".")
    text = problem_sentence(IndexError("index 5 is out of bounds"), "a.h5")
    assert "IndexError" not in text and "analyse validate" in text
    text = missing_sentence("a.h5", ["/x/1", "/x/2", "/x/3", "/x/4", "/x/5"])
    assert "and 2 more" in text and "datasets" in text


def test_document_missing_checks_the_file_index_only(profile, tmp_path):
    import shutil

    import h5py

    from analyser.gui.model.document import Document

    copy = tmp_path / "c.h5"
    shutil.copy(profile, copy)
    with h5py.File(copy, "r+") as h5:
        del h5["memory/tile_xy"]
    doc = Document.open(copy)
    try:
        assert doc.missing(("/memory/tile_xy", "/memory/total")) == ["/memory/tile_xy"]
    finally:
        doc.close()


@pytest.mark.gui
def test_cycle_axis_labels_never_mix_separators_and_prefixes():
    from analyser.gui.axes import format_cycles

    zoomed = format_cycles([4_870_960_000, 4_870_970_000], 10_000)
    assert zoomed == ["4,870,960,000", "4,870,970,000"]
    assert format_cycles([4.870e9, 4.871e9], 1e6) == ["4.870G", "4.871G"]
    for spacing in (1e3, 1e4, 1e5, 1e6, 1e7, 1e8):
        for label in format_cycles([0, 2.5e9, 4.8e9], spacing):
            assert not ("," in label and label[-1] in "kMG"), label


def test_byte_amounts_in_core_text_follow_the_units_preference():
    """An insight's evidence read KiB while the banner above it read kB."""
    from analyser.gui.model.units_text import in_units

    text = "tile 12 holds 952.00 KiB of 624 KiB; 1,234,567 B moved"
    assert in_units(text, "kB") == "tile 12 holds 974.85 kB of 638.98 kB; 1.23 MB moved"
    assert in_units("952.00 KiB", "bytes") == "974,848 B"
    assert in_units("no amounts, 3 tiles", "kB") == "no amounts, 3 tiles"


def test_zoomed_out_trace_stripes_every_step_type_by_its_share(profile):
    """Zoomed out, a lane showed only each pixel's dominant step type (a
    run with a quarter of GlobalExchange read as solid compute); with stripes every type of a
    pixel keeps its share of the lane's height, and a pixel's stripes fill the lane."""
    from analyser.core.analysis import Analysis
    from analyser.trace.window import TraceWindow

    with Analysis.open(profile) as a:
        tw = TraceWindow(a.src.profile)
        t0, t1 = 0.0, float(a.execution.total_cycles)
        dom = tw.window(0, t0, t1, 120)
        res = tw.window(0, t0, t1, 120, stripes=True)
        assert set(res.rects) >= set(dom.rects)
        pw = (t1 - t0) / 120
        total = {}
        cycles = {}
        for name, r in res.rects.items():
            assert r.y0 is not None and ((r.y0 >= 0) & (r.y1 <= 1 + 1e-9) & (r.y1 > r.y0)).all()
            for x0, lane, y0, y1 in zip(r.x0, r.lane, r.y0, r.y1, strict=True):
                px = int(np.floor((x0 - t0) / pw + 1e-6))
                total[(lane, px)] = total.get((lane, px), 0.0) + (y1 - y0)
                cycles.setdefault((lane, px), set()).add(name)
        mixed = [k for k, names in cycles.items() if len(names) > 1]
        assert mixed, "a zoomed-out pixel holds several step types"
        for k in mixed:
            assert total[k] == pytest.approx(1.0, abs=1e-6)


def test_pipeline_says_how_much_host_time_the_view_hides(tmp_path):
    """96.5 ms of host preparation before a 14.6 ms device run showed as a
    short block; the first view now marks an axis break with the length it hides."""
    import engine
    from analyser.gui.model import data
    from analyser.gui.model.document import Document
    from engine.config import RunConfig

    path = tmp_path / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    doc = Document.open(path)
    try:
        c = data.pipeline_chart(doc)
        start, end = c.host_before
        text = c.hidden_host_text(c.x_range[0])
        assert text.startswith("◀") and f"{round(end - start):,} cycles" in text
        assert "µs" in text or "ms" in text  # the length in time at the profile's clock
        assert c.hidden_host_text(start) == ""  # all of it in view: no break
    finally:
        doc.close()


def test_insight_rows_join_a_and_b_by_id():
    """The Insights list's rows (view-model): A's tips marked both / resolved, B's own ones
    new, each profile's severity."""
    from types import SimpleNamespace as T

    from analyser.gui.model.insights import insight_rows

    a = [T(id="x", severity="critical"), T(id="y", severity="warning")]
    b = [T(id="z", severity="critical"), T(id="x", severity="warning")]
    rows = insight_rows(a, b)
    assert [(r.tip.id, r.where, r.owner) for r in rows] == [
        ("x", "both", "A"),
        ("y", "resolved", "A"),
        ("z", "new", "B"),
    ]
    assert rows[0].severity_text == "critical → warning" and rows[1].severity_text == "warning"
    assert [r.where for r in insight_rows(a, None)] == ["", ""]
