"""Colours keep their meaning (pytest-qt, offscreen; read from the drawn pixels): no two
things drawn side by side share a colour, a tile over 100% of its memory takes a colour the
scale below 100% never takes, the whole-run BSP view shows the state that dominates each cell
in that state's hue (not a grey blend), and a selection outlines or hatches what it selects
instead of tinting it into another step type's colour."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gui_helpers import open_documents, shown_report
from PySide6.QtCore import QPointF
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from profiles import write_profile
from profiles.synthetic import make_synthetic_profile

pytestmark = pytest.mark.gui


def lab(color: str | QColor | tuple) -> np.ndarray:
    """CIE L*a*b* (D65) of an sRGB colour: distances in it follow what the eye tells apart."""
    if isinstance(color, str):
        color = QColor(color)
    rgb = np.array(color.getRgb()[:3] if isinstance(color, QColor) else color[:3], float) / 255
    rgb = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = m @ rgb / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def distance(a, b) -> float:
    return float(np.linalg.norm(lab(a) - lab(b)))


def hue(color) -> float:
    """Hue angle (degrees) in L*a*b*."""
    _l, a, b = lab(color)
    return float(np.degrees(np.arctan2(b, a)) % 360)


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    out = tmp_path_factory.mktemp("gui-colours")
    specs = {"fit": dict(seed=1, grad_accum=8), "oom": dict(seed=2, oom=True)}
    paths = {}
    for name, kw in specs.items():
        p = out / f"{name}.h5"
        write_profile(
            p, make_synthetic_profile(n_steps=2000, n_ipus=2, tiles=128, n_programs=120, **kw)
        )
        paths[name] = p
    return paths


@pytest.fixture
def memory(qtbot):
    from analyser.gui.reports.memory import MemoryReport

    fixture = shown_report(qtbot, MemoryReport(), (1300, 820))
    r, docs = next(fixture)
    yield r, docs
    next(fixture, None)


# ---------------------------------------------------------------------------------------------
# One palette: what is drawn together never shares a colour
# ---------------------------------------------------------------------------------------------
def test_variable_kinds_never_take_a_memory_categorys_colour():
    """The Tile memory map draws the memory categories and, for variables, their kinds in one
    picture and one legend: 'Vertex code' and 'weight', 'Global exchange code' and
    'gradient' had the same colour."""
    from analyser.gui.palette import load_palette

    p = load_palette()
    cats, kinds = p["memory_categories"], p["variable_kinds"]
    for (k, kc), (c, cc) in itertools.product(kinds.items(), cats.items()):
        assert distance(kc, cc) >= 18, (k, kc, c, cc)
    for (a, ac), (b, bc) in itertools.combinations(kinds.items(), 2):
        assert distance(ac, bc) >= 25, (a, ac, b, bc)


def test_tile_memory_map_legend_gives_each_entry_its_own_colour(memory, paths):
    r, docs = memory
    open_documents((r, docs), paths["fit"])
    r.view_tabs.setCurrentWidget(r.memory_map)
    QApplication.processEvents()
    entries = r.memory_map.legend.entries
    names = [n for n, _c in entries]
    assert "weight" in names and "Vertex code" in names
    colors = [c.lower() for _n, c in entries]
    assert len(set(colors)) == len(colors), entries
    for (a, ac), (b, bc) in itertools.combinations(entries, 2):
        assert distance(ac, bc) >= 10, (a, ac, b, bc)


# ---------------------------------------------------------------------------------------------
# The tile map: over 100% is its own colour
# ---------------------------------------------------------------------------------------------
def _tile_pixel(tile_map, plan, tile: int) -> QColor:
    """The colour drawn on screen at the centre of ``tile`` of ``plan``."""
    plot = next(plot for plot, _img, p in tile_map.plots if p is plan)
    x, y = plan.xy[tile]
    scene = plot.getViewBox().mapViewToScene(QPointF(x + 0.5, y + 0.5))
    pos = tile_map.mapFromScene(scene)
    return tile_map.grab().toImage().pixelColor(pos.x(), pos.y())


def test_a_tile_just_over_its_memory_is_not_drawn_as_a_level_below_100(memory, paths):
    """A tile at 101% was drawn in the plasma scale's ~60% red; now every tile over 100% takes
    a colour far from all the colours the scale takes up to 100%, and the colour bar gives the
    over-100% colours a visible part of its length."""
    from analyser.gui.model import memory as memory_model
    from analyser.gui.reports.memory import oom_colormap

    r, docs = memory
    open_documents((r, docs), paths["oom"])
    r.view_tabs.setCurrentWidget(r.tile_map)
    QApplication.processEvents()
    tm = r.tile_map.content()
    plans = [p for _plot, _img, p in tm.plots]
    hi = memory_model.map_levels(plans)
    assert hi >= memory_model.MIN_OVER_TOP
    cmap = oom_colormap(hi)
    below = cmap.map(np.linspace(0.0, 1.0 / hi, 64), mode="qcolor")
    plan = next(p for p in plans if p.n_oom)
    shares = plan.grid[plan.xy[:, 0], plan.xy[:, 1]]
    over = int(np.argmin(np.where(shares > 1.0, shares, np.inf)))  # the least over 100%
    under = int(np.argmax(np.where(shares <= 1.0, shares, -np.inf)))
    drawn = _tile_pixel(tm, plan, over)
    assert min(distance(drawn, c) for c in below) >= 20, (shares[over], drawn.name())
    # a tile under 100% is drawn in the scale's colour for its share (the pixel test sees
    # the map, not just the colour map)
    want = cmap.map([shares[under] / hi], mode="qcolor")[0]
    assert distance(_tile_pixel(tm, plan, under), want) < 6


# ---------------------------------------------------------------------------------------------
# The BSP view: the whole run reads as what dominates it
# ---------------------------------------------------------------------------------------------
def _plot_pixels(plot, vb) -> np.ndarray:
    """The drawn pixels (RGB) inside the plot's view box."""
    image = plot.grab().toImage()
    rect = plot.mapFromScene(vb.sceneBoundingRect()).boundingRect().adjusted(2, 2, -2, -2)
    rgb = np.array(
        [
            image.pixelColor(x, y).getRgb()[:3]
            for y in range(rect.top(), rect.bottom(), 3)
            for x in range(rect.left(), rect.right(), 3)
        ],
        float,
    )
    return rgb


def test_whole_run_bsp_view_of_step_4_shows_compute_not_a_grey_wash(qtbot, walkthrough_profiles):
    """Walkthrough step 4's whole run: compute is most of the tiles' time, so most of the
    view's pixels are in the compute colour's hue and few are grey (the share-weighted blend
    of blue compute and orange exchange was grey, beside the sync grey)."""
    from gui_helpers import shut_down_trace

    from analyser.gui.reports.trace import TraceReport

    fixture = shown_report(qtbot, TraceReport(), (1280, 720), before_close=shut_down_trace)
    r, docs = next(fixture)
    open_documents((r, docs), walkthrough_profiles["4-device-iterations"])
    r.tabs.setCurrentWidget(r.bsp)
    r.update_bsp()
    assert r.bsp.wait_for_cells()
    bsp = r.bsp
    mean = bsp.states.mean_shares()
    # compute is the largest state (the profiled call's opening wait, in sync, is the next)
    assert mean["compute"] == max(mean.values()) and mean["compute"] > 0.4, mean
    pixels = _plot_pixels(bsp.plot, bsp.vb)
    labs = np.array([lab(tuple(p)) for p in pixels])
    chroma = np.hypot(labs[:, 1], labs[:, 2])
    hues = np.degrees(np.arctan2(labs[:, 2], labs[:, 1])) % 360
    compute = hue(bsp.legend_colors["compute"])
    near = np.abs((hues - compute + 180) % 360 - 180) < 15
    in_compute = float(np.mean(near & (chroma >= 12)))
    grey = float(np.mean(chroma < 8))
    # as much of the view in the compute hue as the tiles spend computing, give or take a cell's
    # mixing (the share blend gave 6.7% where compute was 59%)
    assert in_compute >= mean["compute"] - 0.1, (in_compute, grey, mean)
    assert grey <= mean["sync"] + mean["idle"] + 0.1, (in_compute, grey, mean)
    next(fixture, None)


# ---------------------------------------------------------------------------------------------
# Selections outline and hatch; they never tint
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def trace(qtbot, paths):
    from gui_helpers import shut_down_trace

    from analyser.gui.reports.trace import TraceReport

    fixture = shown_report(qtbot, TraceReport(), (1200, 800), before_close=shut_down_trace)
    r, docs = next(fixture)
    open_documents((r, docs), paths["fit"])
    yield r
    next(fixture, None)


def _redraw(qtbot, tl, action) -> None:
    before = tl.redraw_count
    action()
    qtbot.waitUntil(lambda: tl.redraw_count > before, timeout=15_000)


def _inside(tl, t0: float, t1: float, y0: float, y1: float, inset: int = 4):
    """Widget pixel rectangle of view cycles [t0, t1) x lanes [y0, y1), shrunk by ``inset``."""
    vb = tl.getPlotItem().getViewBox()
    a = tl.mapFromScene(vb.mapViewToScene(QPointF(t0, y0)))
    b = tl.mapFromScene(vb.mapViewToScene(QPointF(t1, y1)))
    xs = sorted((a.x(), b.x()))
    ys = sorted((a.y(), b.y()))
    return range(xs[0] + inset, xs[1] - inset), range(ys[0] + inset, ys[1] - inset)


def _unchanged_or_hatch(before, after, xs, ys, hatch: QColor) -> tuple[float, int]:
    """(share of the pixels that kept their colour, pixels that changed to anything but the
    hatch lines' colour) over ``xs`` x ``ys``."""
    kept = other = total = 0
    for y in ys:
        for x in xs:
            b, a = before.pixelColor(x, y), after.pixelColor(x, y)
            total += 1
            if a == b:
                kept += 1
            elif distance(a, hatch) > 3:
                other += 1
    return kept / max(total, 1), other


def test_a_selected_step_keeps_its_colour_under_the_selection(qtbot, trace):
    """A selected GlobalExchange turned orange (the DoExchange colour) under the yellow
    selection tint. Now the selection outlines and hatches it: inside, every pixel keeps its
    colour or is a hatch line, and most keep their colour."""
    from analyser.gui.theme import chart_colors

    r = trace
    tl = r.timeline
    tw = tl.trace
    lo, hi = tw.access.ipu_rows(0)
    d = tw.access.read(lo, hi, ("program", "start", "cycles"))
    types = tw.programs["type"][d["program"]]
    from profiles import schema

    ge = schema.PROGRAM_TYPES.index("GlobalExchange")
    i = int(np.flatnonzero(types == ge)[np.argmax(d["cycles"][types == ge])])
    start, cycles = float(d["start"][i]), float(d["cycles"][i])
    _redraw(qtbot, tl, lambda: tl.set_x_range(start - cycles * 0.2, start + cycles * 1.2))
    y = float(tl.ipu_base[0])
    xs, ys = _inside(tl, start, start + cycles, y + 0.1, y + 0.9)
    before = tl.grab().toImage()
    tl.select_row(lo + i, center=False)
    qtbot.waitUntil(tl.highlight.isVisible)
    after = tl.grab().toImage()
    kept, other = _unchanged_or_hatch(before, after, xs, ys, QColor(chart_colors().foreground))
    assert other == 0 and kept >= 0.6, (kept, other)


def test_a_selected_range_keeps_the_colours_under_it(qtbot, trace):
    """The range selection's yellow band tinted every step under it; it is now hatched with
    edges, so the steps keep their colours between the lines."""
    from analyser.gui.theme import chart_colors

    r = trace
    tl = r.timeline
    x0, x1 = tl.x_range()
    a, b = x0 + (x1 - x0) * 0.3, x0 + (x1 - x0) * 0.5
    y0 = float(tl.ipu_base[0])
    xs, ys = _inside(tl, a, b, y0 + 0.1, y0 + 0.9, inset=6)
    before = tl.grab().toImage()
    with qtbot.waitSignal(tl.rangeSelected, timeout=15_000):
        tl.set_range(a, b)
    qtbot.waitUntil(tl.band.isVisible)
    after = tl.grab().toImage()
    kept, other = _unchanged_or_hatch(before, after, xs, ys, QColor(chart_colors().foreground))
    assert other == 0 and kept >= 0.6, (kept, other)


def test_overview_names_its_rows_and_its_scale_matches_the_lanes(qtbot, trace):
    """The overview strip's heat scale had no legend and no IPU labels, and drew waiting in
    dark navy where the lanes draw compute in blue. Its rows are named, its scale runs from
    the lanes' sync grey to their compute blue and the legend shows it; the window it marks
    is outlined, so the strip's colours stay the scale's."""
    from analyser.gui.palette import busy_colors, hex_color

    r = trace
    ov = r.overview
    assert [t for _rect, t in ov.row_labels()] == ["IPU 0", "IPU 1"]
    ramp = busy_colors()
    assert ramp[-1] == hex_color("step_types", "OnTileExecute")
    assert ramp[0] == hex_color("step_types", "Sync")
    assert "Overview busy" in r.legend.text()
    for c in ramp:
        assert c in r.legend.text()
    # every pixel of the strip (inside the outline) is a colour of the busy scale
    from analyser.gui.reports.trace.overview import _lookup_table

    lut = [QColor.fromRgb(v) for v in _lookup_table()[::8]]
    image = ov.grab().toImage()
    rect = ov.plot_rect().toRect().adjusted(3, 3, -3, -3)
    a = int(ov.x_of(ov.band[0]))
    b = int(ov.x_of(ov.band[1]))
    for y in range(rect.top(), rect.bottom(), 4):
        for x in range(rect.left(), rect.right(), 7):
            if abs(x - a) <= 3 or abs(x - b) <= 3:
                continue  # the outline
            c = image.pixelColor(x, y)
            assert min(distance(c, v) for v in lut) < 4, (x, y, c.name())


def test_trace_legend_keeps_each_swatch_with_its_label():
    """At 1,400 px the legend wrapped a swatch away from its label: each swatch and label is
    one unbreakable entry."""
    from analyser.gui.reports.trace.report import legend_html

    text = legend_html({"OnTileExecute", "Sync"}, {"prepare"})
    for name in ("OnTileExecute", "Sync", "prepare"):
        assert f"■</span>&nbsp;{name}</span>" in text
    assert text.count("white-space:nowrap") >= 4
