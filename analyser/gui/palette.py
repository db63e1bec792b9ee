"""The shared colour palette (``assets/palette.json``) as hex strings and Qt colours.

Every view that colours step types, memory categories, regions, liveness classes, phases, passes,
variable kinds or destinations takes its colours from here, so the Program Tree, the Memory Report
and the Execution Trace agree::

    from analyser.gui.palette import qcolor, hex_color
    qcolor("step_types", "OnTileExecute")       # QColor
    hex_color("memory_categories", "variable")  # '#b07aa1'

Unknown names get a neutral grey rather than an error, so a newer profile with an extra enum value
still draws.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from PySide6.QtGui import QColor

from analyser.gui.theme import current_theme

FALLBACK = "#9e9e9e"

#: Palette groups (keys of assets/palette.json besides ``_doc``).
GROUPS = (
    "step_types",
    "bsp_states",
    "host_events",
    "memory_categories",
    "memory_regions",
    "liveness_classes",
    "phases",
    "passes",
    "variable_kinds",
    "destinations",
    "status",
    "status_text",
    "tone",
    "compare",
    "chart",
)


@lru_cache(maxsize=1)
def load_palette() -> dict:
    """The palette as plain data (cached)."""
    text = resources.files("assets").joinpath("palette.json").read_text(encoding="utf-8")
    data = json.loads(text)
    data.pop("_doc", None)
    return data


def hex_color(group: str, name: str) -> str:
    """``'#rrggbb'`` for ``name`` in palette ``group`` (grey when unknown), with the dark
    theme's override (palette ``"dark"``) when that theme is on."""
    palette = load_palette()
    value = None
    if current_theme() == "dark":
        value = palette.get("dark", {}).get(group, {}).get(name)
    if value is None:
        value = palette.get(group, {}).get(name, FALLBACK)
    return value if isinstance(value, str) else FALLBACK


def qcolor(group: str, name: str, alpha: int = 255) -> QColor:
    """A QColor for ``name`` in palette ``group``."""
    color = QColor(hex_color(group, name))
    color.setAlpha(alpha)
    return color


def heatmap_colors() -> list[str]:
    """Colour stops of the sequential scale up to 100% (low to high; no red in it)."""
    return list(load_palette()["chart"]["heatmap"])


def over_colors() -> list[str]:
    """Colour stops above 100% (just over to far over): a hue the sequential scale never
    takes, so a tile at 101% cannot be read as one of its levels."""
    return list(load_palette()["chart"]["over"])


def busy_colors() -> list[str]:
    """Colour stops of a busy share from 0 (waiting: the sync grey) to 1 (the compute blue)."""
    return list(load_palette()["chart"]["busy"])
