"""The Operations and Roofline reports' view-model without Qt: one share-of-
cycles definition summing to 100% at every layer, compare deltas B - A, sorting, filters, the
selected row's details and charts, the roofline's points under their roofs."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import synthetic_documents

from analyser.core.quantities import SHARE_OF_CYCLES, TABLES
from analyser.core.units import MemoryUnits
from analyser.gui.model import operations as om


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    yield from synthetic_documents(
        tmp_path_factory, "model-operations", 7, n_steps=800, n_ipus=2, tiles=64, n_programs=80
    )


@pytest.mark.parametrize("layer", om.SOFTWARE_LAYERS)
def test_share_of_cycles_sums_to_100_percent_with_one_definition(docs, layer):
    a = docs[0]
    frame = om.shown_frame(a, None, layer)
    programs = om.shown_frame(a, None, "programs")
    # every executed step is one program's: the programs' shares make the whole run; the
    # operations (and layers) cover the programs that have an operation
    assert programs["cycles_share"].sum() == pytest.approx(1.0)
    with_op = programs.loc[programs["operation"] != "-", "cycles_share"].sum()
    assert frame["cycles_share"].sum() == pytest.approx(1.0 if layer == "programs" else with_op)
    run = float(np.asarray(a.analysis.execution.program_cycles).sum())
    np.testing.assert_allclose(frame["cycles_share"], frame["total_cycles"] / run)
    cols = om.table_columns(layer, MemoryUnits.KIB, compare=False)
    assert ("cycles_share" in [k for k, _t, _f in cols]) and (
        TABLES[om.LAYER_TABLES[layer]]["cycles_share"].tip == SHARE_OF_CYCLES
    )
    assert cols[0][1] == om.NAME_TITLES[layer]
    # a profile that never ran shows no measured-looking zeros
    keys = [k for k, _t, _f in om.table_columns(layer, MemoryUnits.KIB, False, executed=False)]
    assert not set(keys) & set(om.EXECUTED_ONLY)
    assert om.first_sort_key(frame, True, False) == "total_cycles"
    assert om.first_sort_key(frame, False, False) in ("memory_bytes", "cycles")


@pytest.mark.parametrize("layer", om.SOFTWARE_LAYERS)
def test_compare_deltas_are_b_minus_a_largest_first(docs, layer):
    a, b = docs
    m = om.compare_frame(a, b, layer)
    assert (m["total_cycles_delta"] == m["total_cycles_b"] - m["total_cycles_a"]).all()
    change = np.abs(m["total_cycles_delta"].to_numpy())
    assert (np.diff(change) <= 0).all()  # largest change first
    assert m["name"].is_unique
    fa, fb = om.layer_frame(a, layer), om.layer_frame(b, layer)
    assert m["total_cycles_a"].sum() == fa["total_cycles"].sum()
    assert m["total_cycles_b"].sum() == fb["total_cycles"].sum()
    only_a = set(fa["name"].astype(str)) - set(fb["name"].astype(str))
    assert set(m.loc[m["status"] == "A only (removed)", "name"]) == only_a
    both = m[m["total_cycles_a"] > 0]
    np.testing.assert_allclose(
        both["total_cycles_rel"], both["total_cycles_delta"] / both["total_cycles_a"]
    )
    assert om.first_sort_key(m, True, True) == "total_cycles_delta"


def test_filters(docs):
    frame = om.shown_frame(docs[0], None, "operations")
    assert om.filter_mask(frame.head(0), "", None, None) is None
    assert om.filter_mask(frame, "", None, None).all()
    name = str(frame["name"].iloc[3])
    keep = om.filter_mask(frame, name.upper(), None, None)  # case-insensitive
    hay = (frame["name"] + " " + frame["type"] + " " + frame["layer"]).str.lower()
    assert keep[3] and (keep == hay.str.contains(name.lower(), regex=False).to_numpy()).all()
    passes, ipus = om.filter_choices(frame)
    assert passes == sorted(passes) and ipus == ["0", "1"]
    on_1 = om.filter_mask(frame, "", None, "1")
    assert (frame["ipu"][on_1] == 1).all() and on_1.sum() == (frame["ipu"] == 1).sum()
    first = om.filter_mask(frame, "", passes[0], None)
    assert first.sum() == (frame["pass"].astype(str) == passes[0]).sum()


@pytest.mark.parametrize("layer", om.SOFTWARE_LAYERS)
def test_selected_row_details_and_charts(docs, layer):
    a, b = docs
    frame = om.shown_frame(a, None, layer)
    name = str(frame.sort_values("total_cycles", ascending=False)["name"].iloc[0])
    op_ids, progs = om.selection_of(a, layer, name)
    assert op_ids.size or progs.size
    ops = a.analysis.operations
    if layer == "layers":
        assert set(ops["layer"].iloc[op_ids]) == {name}
    (one,) = om.row_details([("A", a)], layer, name, MemoryUnits.KIB)
    assert one.label == name and len(one.programs) == len(progs)
    assert "profile" not in one.variables
    pair = om.row_details([("A", a), ("B", b)], layer, name, MemoryUnits.KIB)
    assert [d.label for d in pair] == [f"A: {name}", f"B: {name}"]
    # the summaries alone: the same rows, no tables read
    alone = om.row_details([("A", a), ("B", b)], layer, name, MemoryUnits.KIB, tables=False)
    assert [(d.label, d.rows) for d in alone] == [(d.label, d.rows) for d in pair]
    assert all(d.variables is None and d.programs is None for d in alone)
    assert set(om.joined([d.variables for d in pair])["profile"]) <= {"A", "B"}
    absent = om.row_details([("A", a)], layer, "no such row", MemoryUnits.KIB)
    assert absent[0].rows == [("Status", "not in this profile")]
    assert om.joined([absent[0].variables]).empty
    charts = om.row_charts([("A", a), ("B", b)], layer, name)
    assert charts.memory.shape == (2, len(charts.categories))
    bars = charts.memory_bars()
    assert len(bars) == 2 and all(len(y) == len(charts.categories) for y, _v, _h in bars)
    assert charts.top() == pytest.approx(charts.memory.max() if charts.memory.size else 0.0)
    if charts.tile_cycles:
        k, ipu, cycles = charts.tile_cycles[0]
        assert k == 0 and f"A: IPU {ipu}: {int(cycles.max()):,} cycles" in charts.text


def test_roofline_points_lie_under_their_roofs(tmp_path):
    import engine
    from analyser.core import Analysis
    from analyser.core.roofline import roofline
    from engine.config import RunConfig

    path = tmp_path / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp", micro_batch_size=4), path)
    with Analysis.open(path) as a:
        r = roofline(a)
    pts = om.roofline_points(r, "p: ")
    assert len(pts.x) == len(pts.y) == len(pts.limits) == len(pts.names)
    assert pts.text.startswith(f"p: {len(pts.x):,} operations drawn")
    # the roof line: rising with the exchange slope, flat at the AMP peak after the ridge
    ro = r.roofs
    assert pts.roof_y[-1] == pytest.approx(np.log10(ro.peak_flops_per_cycle))
    assert pts.roof_x[0] <= pts.x.min() and pts.roof_x[-1] >= pts.x.max()
    roof = np.minimum(10.0**pts.x * ro.exchange_bytes_per_cycle, ro.peak_flops_per_cycle)
    assert (pts.y <= np.log10(roof) + 1e-9).all()
