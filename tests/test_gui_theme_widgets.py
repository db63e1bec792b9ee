"""Spin boxes keep visible up / down arrows under both themes' style sheets (issue 14 defect 6:
the light theme's bordered box drew none)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtWidgets import QSpinBox

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
