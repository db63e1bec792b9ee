"""The datasets each report (or part of one) cannot show anything without, checked when a
profile opens and before a report fills (``Document.missing``: membership tests on the file's
index, no data read), so a profile lacking one gets the report's "unavailable: <sentence>"
state naming it instead of a blank panel or a traceback.

Paths are the profile format's (docs/profile-format.md); listing them here rather than reading
the schema keeps the GUI off ``profiles.schema`` (an import contract)."""

from __future__ import annotations


def _columns(table: str, *names: str) -> tuple[str, ...]:
    return tuple(f"{table}/{n}" for n in names)


#: /graph/variables as the views show it (Memory's variables, Liveness's live variables)
VARIABLES = _columns(
    "/graph/variables",
    "name",
    "kind",
    "dtype",
    "shape",
    "bytes",
    "ipu",
    "always_live",
    "live_start",
    "live_end",
    "tile_start",
    "tile_count",
    "remote_bytes",
)
#: the liveness curves and their steps (the not-always-live curve is summed from the
#: variables' lifetimes, which the views require, when a profile lacks it)
LIVENESS = (
    "/liveness/always_live",
    "/liveness/peak_step",
    *_columns("/liveness/steps", "name", "program", "op"),
)
#: the per-tile memory tables every Memory Report chart reads
MEMORY = tuple(
    f"/memory/{n}"
    for n in ("by_category", "by_region", "by_liveness", "total", "gaps", "oom_tiles")
)
#: the chip floor plan (the Tile map tab)
TILE_XY = ("/memory/tile_xy",)
#: the physical tile order (the Memory Report's "physical tile id" order)
PHYSICAL_TILE = ("/memory/physical_tile",)
#: the per-tile liveness rows the tile memory map lays out
TILE_LIVENESS = (
    "/liveness/per_tile_ipu_offsets",
    "/liveness/per_tile_step",
    "/liveness/per_tile_rows",
)
#: the program tree
PROGRAMS = _columns(
    "/programs/nodes", "name", "type", "parent", "ipu", "repeat", "op", "cycles", "tile_balance"
)
