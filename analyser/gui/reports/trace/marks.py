"""Perfetto's M on the Execution Trace: mark the selection (a range of cycles, a step or a host
event) with a pinned band that stays while the view moves and other things are selected; M on
a marked span removes its mark."""

from __future__ import annotations

import pyqtgraph as pg

from analyser.gui.palette import hex_color


class Marks:
    """The pinned bands of one timeline, keyed by their span in whole cycles."""

    def __init__(self, plot_item: pg.PlotItem) -> None:
        self.item = plot_item
        self.bands: dict[tuple[int, int], pg.LinearRegionItem] = {}

    def toggle(self, t0: float, t1: float) -> bool:
        """Mark ``[t0, t1)``, or remove the mark of that span: True when it is now marked."""
        key = (round(t0), round(t1))
        band = self.bands.pop(key, None)
        if band is not None:
            self.item.removeItem(band)
            return False
        color = pg.mkColor(hex_color("chart", "mark"))
        fill = pg.mkColor(color)
        fill.setAlpha(45)
        band = pg.LinearRegionItem(
            values=key, movable=False, brush=fill, pen=pg.mkPen(color, width=1)
        )
        band.setZValue(-5)
        self.item.addItem(band)
        self.bands[key] = band
        return True

    def spans(self) -> list[tuple[int, int]]:
        """The marked spans, in cycles, in time order."""
        return sorted(self.bands)

    def clear(self) -> None:
        for band in self.bands.values():
            self.item.removeItem(band)
        self.bands.clear()

    def restore(self) -> None:
        """Put the bands back after the plot was cleared (a redraw that cleared its items)."""
        for band in self.bands.values():
            if band.scene() is None:
                self.item.addItem(band)
