"""The themes are a palette for Qt's Fusion style, not a style sheet (under a
style sheet every widget was built and painted by QStyleSheetStyle, 2-5 times slower): spin box
arrows stay visible, the side list stays readable after a theme switch, the
reports' tables are drawn by Fusion, and a broken theme file is named."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import open_in
from PySide6.QtCore import QSettings
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QSpinBox, QTableView, QTreeView

pytestmark = pytest.mark.gui


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_spin_box_arrows_are_drawn(qtbot, theme):
    from analyser.gui.theme import apply_theme, current_theme

    before = current_theme()
    box = QSpinBox()
    qtbot.addWidget(box)
    box.resize(120, 28)
    box.show()
    try:
        apply_theme(theme)
        img = box.grab().toImage()
        w, h = img.width(), img.height()
        px = np.array(
            [[img.pixelColor(x, y).lightness() for x in range(w - 13, w - 3)] for y in range(h)]
        )
        background = int(np.median(px))
        dark = (np.abs(px - background) > 60).sum(axis=1)
        # rows crossing an arrow glyph: a few contrasting pixels, not a whole frame line
        assert ((dark >= 2) & (dark <= 7)).sum() >= 4
    finally:
        apply_theme(before)


def _luminance(color: QColor) -> float:
    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(color.redF())
        + 0.7152 * channel(color.greenF())
        + 0.0722 * channel(color.blueF())
    )


def _contrast(a: QColor, b: QColor) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_a_theme_is_a_palette_and_the_side_list_stays_readable(qtbot, tmp_path):
    """With a profile open: no style sheet on the application or the window, the reports'
    tables and trees drawn by Fusion itself, and after each theme switch every report's name
    in the side list reads at 4.5:1 or more on the list (the dark theme had kept the light
    theme's near-black names on its near-black list)."""
    from PySide6.QtWidgets import QApplication

    from analyser.gui.main_window import MainWindow
    from analyser.gui.theme import palette, ui_colors
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    path = tmp_path / "p.h5"
    write_profile(path, make_synthetic_profile(n_steps=400, n_ipus=1, tiles=64, n_programs=40))
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings)
    qtbot.addWidget(w)
    w.show()
    assert open_in(qtbot, w, path)
    try:
        for theme in ("dark", "light"):
            w.set_theme(theme)
            assert QApplication.instance().styleSheet() == "" and w.styleSheet() == ""
            report = w.show_report("memory")
            views = report.findChildren(QTableView) + report.findChildren(QTreeView)
            assert views
            assert {v.style().metaObject().className() for v in views} == {"QFusionStyle"}
            colors = ui_colors(theme)
            assert QApplication.instance().palette().color(
                palette(theme).ColorRole.Window
            ) == QColor(colors.window)
            side = QColor(colors.side_list)
            for row in range(w.report_list.count()):
                text = w.report_list.item(row).foreground().color()
                assert _contrast(text, side) >= 4.5, (theme, row, text.name())
    finally:
        w.set_theme("light")
        w.close()


def test_a_broken_theme_file_is_named():
    from analyser.gui.theme import parse_ui_colors, ui_colors

    good = {k: v for k, v in vars(ui_colors("light")).items()}
    assert parse_ui_colors("x.json", good) == ui_colors("light")
    with pytest.raises(ValueError, match=r"x\.json: missing window, text"):
        parse_ui_colors("x.json", {k: v for k, v in good.items() if k not in ("window", "text")})
    with pytest.raises(ValueError, match=r"not a colour: highlight"):
        parse_ui_colors("x.json", {**good, "highlight": "bright blue"})
    with pytest.raises(ValueError, match=r"expected an object"):
        parse_ui_colors("x.json", ["#ffffff"])
    with pytest.raises(ValueError, match="unknown theme"):
        ui_colors("sepia")
