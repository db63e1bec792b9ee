"""The Memory Report's way to the analysis core: the memory insights and the modelled tile
layout (the per-tile details are :mod:`analyser.gui.model.tile_details`), named
once here so that ``analyser.gui.reports`` reaches the core only through
``analyser.gui.model`` (an import contract, issue 24 item 3). No Qt."""

from __future__ import annotations

from analyser.core.memory_insights import EXCHANGE_CODE, MemoryInsights
from analyser.core.memory_layout import TileLayout

__all__ = ["EXCHANGE_CODE", "MemoryInsights", "TileLayout"]
