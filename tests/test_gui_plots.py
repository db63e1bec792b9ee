"""Plots built without pyqtgraph's options form up front: a LightPlotItem is
a PlotItem in everything but when its context-menu form is built."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from gui_helpers import open_in, wait_until_idle
from PySide6.QtCore import QSettings

from analyser.gui.plots import LightPlotItem, LightPlotWidget

pytestmark = pytest.mark.gui


def test_a_light_plot_item_has_what_a_plot_item_has(qtbot):
    """Every attribute pyqtgraph's PlotItem sets when built is there (the form's once read):
    a pyqtgraph upgrade that adds one to PlotItem.__init__ fails here."""
    full = pg.PlotItem(enableMenu=False)
    light = LightPlotItem(enableMenu=False)
    assert not light.form_built()
    missing = set(vars(full)) - set(vars(light))
    assert missing == {"ctrl", "ctrlMenu", "stateGroup"}
    light.ctrl  # noqa: B018 - reading it builds the form
    assert light.form_built() and set(vars(full)) <= set(vars(light))


def test_grid_without_the_form_matches_pyqtgraph_and_the_form_follows(qtbot):
    full, light = pg.PlotItem(enableMenu=False), LightPlotItem(enableMenu=False)
    for kwargs in (dict(x=False, y=True, alpha=0.25), dict(x=True), dict(alpha=0.6, y=False)):
        full.showGrid(**kwargs)
        light.showGrid(**kwargs)
        assert not light.form_built()
        for side in ("left", "bottom", "right", "top"):
            assert light.getAxis(side).grid == full.getAxis(side).grid, (kwargs, side)
    with pytest.raises(ValueError):
        light.showGrid()
    c = light.ctrl  # built now: in the state the grid was left in
    assert (c.xGridCheck.isChecked(), c.yGridCheck.isChecked()) == (True, False)
    light.showGrid(y=True, alpha=0.1)  # and from now on through the form, as pyqtgraph does
    full.showGrid(y=True, alpha=0.1)
    assert light.getAxis("left").grid == full.getAxis("left").grid


def test_curves_menus_and_close_work_with_the_form_built_on_demand(qtbot):
    """A curve added to a plot without its form gets pyqtgraph's default choices (log, FFT,
    alpha, downsampling, clipping: the same options as on a PlotItem), removing it works, and
    the context menu builds the form."""
    full, w = pg.PlotWidget(), LightPlotWidget()
    qtbot.addWidget(full)
    qtbot.addWidget(w)
    ref = full.plot([1, 2, 3], [3, 1, 2])
    curve = w.plot([1, 2, 3], [3, 1, 2])
    item = w.getPlotItem()
    assert not item.form_built() and curve in item.listDataItems()
    keys = ("logMode", "fftMode", "alphaHint", "alphaMode", "downsample", "autoDownsample")
    keys += ("downsampleMethod", "clipToView", "subtractMeanMode", "derivativeMode")
    assert {k: curve.opts.get(k) for k in keys} == {k: ref.opts.get(k) for k in keys}
    item.removeItem(curve)
    assert curve not in item.listDataItems() and not item.form_built()
    w.plot([0, 1], [1, 0])
    item.clear()
    assert item.listDataItems() == [] and not item.form_built()
    assert item.getContextMenus(None) is item.ctrlMenu and item.form_built()
    w.close()
    unbuilt = LightPlotWidget(enableMenu=False)
    qtbot.addWidget(unbuilt)
    unbuilt.close()  # closing never builds what it takes apart
    with pytest.raises(AttributeError):
        LightPlotItem().no_such_attribute  # noqa: B018


def test_every_report_plot_is_light_and_none_builds_its_form(qtbot, tmp_path):
    """Compare mode, every report visited: every plot the window built is a LightPlotItem and
    none of them built the options form (else the saving is gone for that report)."""
    from analyser.gui.main_window import MainWindow
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    paths = []
    for seed in (1, 2):
        path = tmp_path / f"p{seed}.h5"
        write_profile(
            path,
            make_synthetic_profile(n_steps=600, n_ipus=2, tiles=64, n_programs=60, seed=seed),
        )
        paths.append(path)
    w = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.show()
    try:
        assert open_in(qtbot, w, *paths)
        for key in w.report_keys:
            # filled and painted (a plot's form was built in a paint once), and what the
            # paint posted run
            with qtbot.waitSignal(w.report(key).painted, timeout=30_000):
                w.show_report(key)
            wait_until_idle(qtbot)
        plots = w.findChildren(pg.PlotWidget)
        assert len(plots) >= 8
        items = [p.getPlotItem() for p in plots]
        assert [type(i).__name__ for i in items if not isinstance(i, LightPlotItem)] == []
        assert [type(p).__name__ for p, i in zip(plots, items) if i.form_built()] == []
    finally:
        w.close()


def test_light_axes_show_what_pyqtgraph_axes_show(qtbot):
    """The default axes are LightAxisItems, shown and hidden as pyqtgraph's, and a label set,
    changed and given units reads as on a plain AxisItem (the HTML is set only on a change)."""
    from analyser.gui.plots import LightAxisItem

    full, light = pg.PlotItem(enableMenu=False), LightPlotItem(enableMenu=False)
    for side in ("top", "bottom", "left", "right"):
        assert isinstance(light.getAxis(side), LightAxisItem)
        assert light.getAxis(side).isVisible() == full.getAxis(side).isVisible(), side
    for item in (full, light):
        item.setLabel("left", "memory", units="B")
        item.getAxis("left").setTextPen(pg.mkPen("#ff0000"))
        item.setLabel("left", "bytes")
        item.setYRange(0, 5e6)
    a, b = full.getAxis("left"), light.getAxis("left")
    assert b.label.toHtml() == a.label.toHtml() and "bytes" in b.label.toPlainText()
    assert b.label.isVisible() == a.label.isVisible()


def test_axis_lines_filled_as_rectangles_cover_the_pixels_drawLine_covers(qtbot):
    """A light axis fills its axis, tick and grid lines as one-pixel rectangles (a
    translucent line is about twenty times slower for Qt's raster engine to draw): on the
    pixels ``drawLine`` covers, horizontal and vertical, either direction, at fractional
    positions (those within a hair of a pixel edge may land one pixel over, so the positions
    here keep off the edges); a diagonal line or a wide pen is not a rectangle."""
    import random

    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QColor, QImage, QPainter, QPen

    from analyser.gui.plots import _line_as_rect

    pen = QPen(QColor(48, 48, 48, 63))
    pen.setCosmetic(True)

    def pixels(draw, offset) -> set:
        img = QImage(80, 80, QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(0xFFFFFFFF)
        p = QPainter(img)
        p.translate(*offset)
        draw(p)
        p.end()
        white = QColor("white")
        return {(x, y) for x in range(80) for y in range(80) if img.pixelColor(x, y) != white}

    rng = random.Random(7)
    for _ in range(60):
        offset = (rng.randint(0, 3), rng.randint(0, 3))
        a = rng.randint(2, 20) + rng.uniform(0.1, 0.9)
        b = a + rng.randint(2, 40) + rng.uniform(0.0, 0.8)
        c = rng.randint(4, 60) + rng.uniform(0.1, 0.9)
        p1, p2 = (
            (QPointF(a, c), QPointF(b, c)) if rng.random() < 0.5 else (QPointF(c, a), QPointF(c, b))
        )
        if rng.random() < 0.5:
            p1, p2 = p2, p1
        rect = _line_as_rect(pen, p1, p2)
        assert rect is not None
        line = pixels(lambda p, a=p1, b=p2: (p.setPen(pen), p.drawLine(a, b)), offset)
        filled = pixels(lambda p, r=rect: p.fillRect(r, pen.color()), offset)
        assert filled == line, (p1, p2, offset)
    assert _line_as_rect(pen, QPointF(1, 1), QPointF(20, 9)) is None
    wide = QPen(pen)
    wide.setWidth(3)
    assert _line_as_rect(wide, QPointF(1, 1), QPointF(20, 1)) is None


def test_a_light_plot_with_a_grid_looks_as_pyqtgraph_draws_it(qtbot):
    """The whole plot with its grid (three tick levels of translucent lines) painted by the
    light axes and by pyqtgraph's own drawing differs at most where a line sits within a
    hair of a pixel edge: a line's worth of pixels, not the grid."""
    import numpy as np

    from analyser.gui.plots import LightAxisItem
    from analyser.gui.theme import style_plot

    w = LightPlotWidget(enableMenu=False)
    qtbot.addWidget(w)
    style_plot(w)
    w.resize(700, 300)
    item = w.getPlotItem()
    item.showGrid(x=True, y=True, alpha=0.25)
    item.plot(np.arange(50) * 1e5, np.linspace(0, 3e8, 50))
    w.show()
    qtbot.waitExposed(w)
    wait_until_idle(qtbot)  # laid out at its size and painted

    def painted():
        for entry in item.axes.values():
            entry["item"].picture = None
        return w.grab().toImage()

    light = painted()
    light_draw = LightAxisItem.drawPicture
    try:
        LightAxisItem.drawPicture = pg.AxisItem.drawPicture
        plain = painted()
    finally:
        LightAxisItem.drawPicture = light_draw
    assert (light.width(), light.height()) == (plain.width(), plain.height())
    differ = sum(
        light.pixel(x, y) != plain.pixel(x, y)
        for y in range(0, light.height())
        for x in range(0, light.width())
    )
    assert differ <= light.height() + light.width()  # one line's worth, at most


def test_hidden_axes_are_built_when_asked_for_and_styled_as_their_partners(qtbot):
    """A light plot builds its hidden top and right axes only when something asks for them
    (two of a plot's four axes, shown by no report); asked for, each is there
    as pyqtgraph's would be (hidden, linked to the view, in its cell) and styled as the bottom
    or left one: pens, SI prefix, depth, grid and log mode. Shown, it reads the plot's range."""
    from analyser.gui.axes import fixed_prefix_axes
    from analyser.gui.theme import style_plot

    w = LightPlotWidget(enableMenu=False)
    qtbot.addWidget(w)
    item = w.getPlotItem()
    assert set(item.axes) == {"bottom", "left"}
    style_plot(w)
    fixed_prefix_axes(w)
    item.showGrid(x=True, y=False, alpha=0.4)
    assert set(item.axes) == {"bottom", "left"}
    item.setLogMode(x=False, y=True)  # pyqtgraph's own call (its form's): asks for every side
    assert set(item.axes) == {"top", "bottom", "left", "right"}
    for side, partner in (("top", "bottom"), ("right", "left")):
        axis, other = item.getAxis(side), item.getAxis(partner)
        assert not axis.isVisible() and axis.linkedView() is item.getViewBox()
        assert axis.pen().color() == other.pen().color()
        assert axis.textPen().color() == other.textPen().color()
        assert axis.autoSIPrefix == other.autoSIPrefix is False
        assert axis.zValue() == other.zValue()
        assert axis.grid == other.grid and axis.logMode == other.logMode
        row, col = item.axes[side]["pos"]
        assert item.layout.itemAt(row, col) is axis
    # a plot asked for its top axis before any grid or style: built with the plot's grid
    fresh = LightPlotItem(enableMenu=False)
    fresh.showGrid(x=True, alpha=0.5)
    assert "top" not in fresh.axes
    assert fresh.getAxis("top").grid == fresh.getAxis("bottom").grid == int(0.5 * 255)
    # shown, the right axis gives the plot's y range its ticks
    w.resize(400, 300)
    w.show()
    qtbot.waitExposed(w)
    item.setLogMode(x=False, y=False)
    item.showAxis("right")
    item.setYRange(0, 1000, padding=0)  # the linked axis reads it at once (sigYRangeChanged)
    right = item.getAxis("right")
    assert right.isVisible() and right.range == pytest.approx([0, 1000])
    # an axis given for a side that was never built takes its place, shown
    top = pg.AxisItem("top")
    fresh.setAxisItems({"top": top})
    assert fresh.getAxis("top") is top and top.isVisible()


def test_every_report_states_what_it_builds_for_a_comparison(qtbot, monkeypatch):
    """``Report.compare_cost`` orders the window's idle build (the costliest reports to build
    for a comparison first): it is the number of plots the report's
    construction and its compare-mode part build, an Execution Trace timeline counting two,
    so a report gaining or losing a chart must say so."""
    from analyser.gui.reports import report_classes
    from analyser.gui.reports.trace.timeline import TimelineView

    built = []
    init = LightPlotItem.__init__

    def counting_init(self, *args, **kwargs):
        built.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(LightPlotItem, "__init__", counting_init)
    counted = {}
    for cls in report_classes():
        built.clear()
        report = cls()
        qtbot.addWidget(report)
        while report.prebuild(True):
            pass
        counted[cls.key] = len(built) + len(report.findChildren(TimelineView))
    assert {cls.key: cls.compare_cost for cls in report_classes()} == counted
    assert counted["trace"] >= 5 and counted["memory"] >= 3  # A's and B's charts
