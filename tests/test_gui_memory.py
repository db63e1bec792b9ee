"""Memory Report (pytest-qt, offscreen): its layout, the per-tile memory map and
the vertex / exchange size insights."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import open_documents, shown_report
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QApplication

from analyser.gui.model.labels import distinct_labels, elide_middle
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    out = tmp_path_factory.mktemp("gui-memory")
    paths = []
    for seed, ga in ((1, 8), (1, 16)):
        p = out / f"m{ga}.h5"
        write_profile(
            p,
            make_synthetic_profile(
                n_steps=2000, n_ipus=2, tiles=128, n_programs=120, seed=seed, grad_accum=ga
            ),
        )
        paths.append(p)
    return paths


@pytest.fixture
def memory(qtbot):
    from analyser.gui.reports.memory import MemoryReport

    fixture = shown_report(qtbot, MemoryReport(), (1300, 820))
    r, docs = next(fixture)

    def show(*paths, tab=None):
        """Open ``paths`` in the report, then show its view tab ``tab`` (an attribute name)."""
        opened = open_documents((r, docs), *paths)
        QApplication.processEvents()
        if tab is not None:
            r.view_tabs.setCurrentWidget(getattr(r, tab))
            QApplication.processEvents()
        return opened

    yield r, show
    next(fixture, None)


def test_compare_delta_axis_title_is_not_clipped(memory, paths):
    """The Memory compare "B-A KiB" axis title read "B-A Ki" (the label
    kept the position computed for an empty title)."""
    r, show = memory
    show(*paths)
    plot = r.plot_delta
    axis = plot.getPlotItem().getAxis("left")
    assert axis.label.toPlainText().startswith("B−A ")
    label = axis.label.mapRectToScene(axis.label.boundingRect())
    view = plot.mapToScene(plot.viewport().rect()).boundingRect()
    assert label.top() >= view.top() - 0.5 and label.bottom() <= view.bottom() + 0.5
    axis_rect = axis.mapRectToScene(axis.rect())
    assert label.top() >= axis_rect.top() - 0.5 and label.bottom() <= axis_rect.bottom() + 0.5


def test_labels_elide_in_the_middle_and_stay_distinct():
    a = "stage0/layer3.8/conv2/weights/optimiser/momentum"
    b = "stage1/layer3.8/conv2/weights/optimiser/momentum"
    c = "stage0/layer3.8/conv2/weights/optimiser/velocity"
    assert elide_middle(a, 20).count("…") == 1 and len(elide_middle(a, 20)) == 20
    assert elide_middle("short", 20) == "short"
    labels = distinct_labels([a, b, c, "short"], 24)
    assert len(set(labels)) == 4 and all(len(x) <= 24 for x in labels)
    assert labels[3] == "short"
    # names that differ only deep in the middle still get distinct labels
    d = "x" * 20 + "A" + "y" * 20
    e = "x" * 20 + "B" + "y" * 20
    assert len(set(distinct_labels([d, e], 16))) == 2


def test_variables_chart_names_are_distinct_with_full_name_tooltips(memory, paths, monkeypatch):
    """The Variables chart cut names at the left, so two variables read the
    same. Visible names are distinct and the full name is the bar's tooltip."""
    r, show = memory
    from analyser.gui.model import data

    (doc,) = show(paths[0], tab="variables_page")
    v = data.variables(doc).sort_values("bytes", ascending=False).head(20).copy()
    long = "stage0/encoder/layer{}/attention/self/query/weights/optimiser/momentum"
    v["name"] = [long.format(i) for i in range(len(v))]  # differ only in the middle
    r._draw_largest_variables(v)
    ticks = r.variables_plot.getPlotItem().getAxis("left")._tickLevels[0]
    shown = [t for _y, t in ticks]
    assert len(shown) == len(v) and len(set(shown)) == len(v)
    assert all(len(t) <= 32 for t in shown)
    # hovering a bar gives the full name
    vb = r.variables_plot.getPlotItem().getViewBox()
    y = float(ticks[3][0])
    r._on_variables_hover(vb.mapViewToScene(QPointF(1.0, y)))
    assert r.variables_plot.toolTip().startswith(str(v["name"].iloc[3]))
    assert np.isfinite(y)


def test_tile_memory_map_shows_the_modelled_layout_and_names_clicked_blocks(qtbot, memory, paths):
    """PopVision's per-tile memory map: the fullest tile by default, regions and blocks by
    address, labelled as the simulator's modelled layout; a click on a block names the
    variable, its bytes, address range and liveness; a tile clicked in the chart is mapped."""
    from PySide6.QtCore import QPoint
    from PySide6.QtTest import QTest

    from analyser.core.units import fmt_bytes

    r, show = memory
    (doc,) = show(paths[0], tab="memory_map")
    page = r.memory_map
    assert "Modelled layout" in page.header.text() and "not a compiler" in page.header.text()
    mem = doc.analysis.memory
    ipu, tile = r.mapped_tile()
    assert mem.tile_used[ipu][tile] == mem.tile_used.max()  # the fullest tile
    lay = page.map_a.layout_
    assert (lay.ipu, lay.tile) == (ipu, tile)
    assert f"IPU {ipu}, tile {tile}" in page.map_a.title.text()
    assert page.map_a.rects.n_rects == len(lay.blocks)
    # click the middle of a not-always-live variable's block
    b = lay.blocks
    row = b[(b["category"] == "variable") & ~b["always_live"]].iloc[0]
    vb = page.map_a.plot.getPlotItem().getViewBox()
    step = (row["live_start"] + row["live_end"] + 1) / 2
    addr = (row["start"] + row["end"]) / 2 / page.map_a.scale
    pos = page.map_a.plot.mapFromScene(vb.mapViewToScene(QPointF(step, addr)))
    QTest.mouseClick(page.map_a.plot.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos))
    qtbot.waitUntil(lambda: page.details.text() != "")
    text = page.details.text()
    hit = page.map_a.selected
    assert hit is not None and text.startswith(str(hit["name"]))
    assert fmt_bytes(int(hit["bytes"]), r.units) in text
    assert f"0x{int(hit['start']):05x}-0x{int(hit['end']) - 1:05x}" in text
    assert "live at step" in text or "always live" in text
    assert lay.step_name(int(hit["live_start"])) in text
    assert page.map_a.highlight.isVisible()
    # a tile clicked in the chart is mapped
    r.click_tile(1, 3, False)
    assert r.mapped_tile() == (1, 3) and page.map_a.layout_.tile == 3


def test_tile_memory_map_in_compare_mode_shows_b_below_a(memory, paths):
    r, show = memory
    show(*paths, tab="memory_map")
    page = r.memory_map
    assert page.map_b.isVisible() and page.map_b.layout_ is not None
    assert page.map_a.title.text().startswith("A: ") and page.map_b.title.text().startswith("B: ")
    assert (page.map_b.layout_.ipu, page.map_b.layout_.tile) == r.mapped_tile()


def test_insights_tab_shows_vertex_and_exchange_sizes_and_goes_to_their_tiles(memory, paths):
    """PopVision's Memory Report insights: vertex state and exchange code by model, IPU and
    tile, the largest vertex types and exchanges; a double-click selects the row's tile."""
    from analyser.core.units import fmt_bytes
    from analyser.gui.model import data

    r, show = memory
    (doc,) = show(paths[0], tab="insights_page")
    page = r.insights_page
    ins = data.memory_insights(doc)
    assert page.totals.value("Model", "Vertex state") == fmt_bytes(
        ins.model["vertex state"], r.units
    )
    assert page.totals.value("IPU 1", "Exchange code") == fmt_bytes(
        int(ins.per_ipu["exchange_code"].iloc[1]), r.units
    )
    assert page.vertices.visible_rows() == len(ins.vertices) > 0
    assert page.exchanges.visible_rows() == len(ins.exchanges) > 0
    # double-click the fullest tile's row: the report selects that tile
    page.tabs.setCurrentWidget(page.tiles)
    view = page.tiles.view
    index = view.model().index(0, 0)
    view.doubleClicked.emit(index)
    top = ins.top_tiles.iloc[0]
    assert r.selection.tolist() == [[int(top["ipu"]), int(top["tile"])]]


def test_insights_tab_in_compare_mode_carries_both(memory, paths):
    r, show = memory
    show(*paths, tab="insights_page")
    page = r.insights_page
    assert page.totals.headerItem().text(3) == "Change"
    assert page.totals.section("A: IPU 0") is not None and page.totals.section("B: IPU 0")
    profiles = set(page.vertices.model.frame["profile"])
    assert profiles == {"A", "B"}


def test_each_breakdown_draws_its_catalogue_series(memory, paths):
    """The per-tile chart's categories, regions and liveness classes are the catalogue's series
    (analyser.core.quantities.SERIES: names in order, palette colours), and each breakdown's
    stacked bytes add up to the tile totals."""
    from analyser.core.quantities import SERIES
    from analyser.gui.palette import hex_color
    from analyser.gui.reports.memory import series_colors
    from analyser.gui.widgets import nice_name

    r, show = memory
    (doc,) = show(paths[0])
    r.gaps_check.setChecked(False)
    r.breakdown_combo.setCurrentText("Total")
    totals = r.build_chart(doc).totals
    for text, key in (
        ("Category", "memory_by_category"),
        ("Region", "memory_by_region"),
        ("Liveness", "memory_by_liveness"),
    ):
        r.breakdown_combo.setCurrentText(text)
        QApplication.processEvents()
        series = SERIES[key]
        chart = r.build_chart(doc)
        want = [(nice_name(n), hex_color(series.palette, n)) for n in series.names]
        assert list(zip(chart.names, series_colors(chart), strict=True)) == want
        assert chart.values.shape[1] == len(series.names)
        assert r.legend.entries and set(r.legend.entries) <= set(want)
        np.testing.assert_array_equal(chart.totals, totals)


def test_pages_and_compare_charts_are_built_on_first_show_and_only_once(memory, paths):
    """The report opens on 'Memory per tile' without building the other tabs' charts
    or the compare-mode charts; each is built when first shown, shows its content then, and
    is built once however often it is shown again."""
    from analyser.gui.reports.memory import MemoryPlot
    from analyser.gui.reports.memory_map import MemoryMapPlot

    r, show = memory
    show(paths[0])
    assert r._compare_plots is None and r._variables_plot is None
    # the hidden tabs' pages themselves are built on first use
    lazy = (r.tile_map, r.memory_map, r.insights_page, r.tiles_table, r.compute_sets_table)
    assert not any(page.built() for page in lazy)
    assert r.memory_map._map_a is None and r.memory_map._map_b is None
    assert r.memory_map.built() and not r.tile_map.built()
    assert len(r.findChildren(MemoryPlot)) == 1
    r.view_tabs.setCurrentWidget(r.variables_page)
    QApplication.processEvents()
    plot = r._variables_plot
    assert plot is not None and plot.isVisible()
    assert r.variables_plot.getPlotItem().getAxis("left")._tickLevels[0]  # the bars' names
    r.view_tabs.setCurrentWidget(r.memory_map)
    QApplication.processEvents()
    first_map = r.memory_map._map_a
    assert first_map is not None and first_map.isVisible() and first_map.layout_ is not None
    assert r.memory_map._map_b is None  # one profile: no B map
    for page in (r.chart_page, r.variables_page, r.memory_map, r.variables_page, r.memory_map):
        r.view_tabs.setCurrentWidget(page)
        QApplication.processEvents()
    assert r.variables_plot is plot and r.memory_map.map_a is first_map
    assert len(r.findChildren(MemoryMapPlot)) == 1
    # compare mode builds B's chart and the B - A chart, once; back to one profile hides them
    show(*paths)  # on the memory map's tab
    assert r.memory_map.map_b.isVisible() and r.memory_map.map_b.layout_ is not None
    r.view_tabs.setCurrentWidget(r.chart_page)
    QApplication.processEvents()
    plot_b, plot_delta = r.plot_b, r.plot_delta
    assert plot_b.isVisible() and plot_delta.isVisible() and plot_b.chart is not None
    assert len(r.findChildren(MemoryPlot)) == 2
    show(paths[0])
    assert not plot_b.isVisible() and not plot_delta.isVisible()
    r.view_tabs.setCurrentWidget(r.memory_map)  # the map is drawn when its tab is shown
    assert r.memory_map.map_b.isHidden()
    show(*paths)
    assert r.plot_b is plot_b and r.plot_delta is plot_delta and not plot_b.isHidden()
    assert len(r.findChildren(MemoryPlot)) == 2 and len(r.findChildren(MemoryMapPlot)) == 2
