"""The Memory Report's view-model: the stacked per-tile chart (per category / region / liveness
class, software or physical order, gaps), its bars and selection, the B - A tile deltas, the
Totals tab, the tile map's grids, the Variables tab's table and chart of the largest, and the
selected tiles' detail tables; and the report's way to the analysis core (the memory insights,
the modelled tile layout; per-tile details are :mod:`analyser.viewmodels.tile_details`), named
once here so that ``analyser.gui.reports`` reaches the core only through
``analyser.gui.model`` (an import contract). No Qt: the view only draws
(colours come from the view's palette by each series' ``color_keys``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analyser.core.memory_insights import EXCHANGE_CODE, MemoryInsights
from analyser.core.memory_layout import TileLayout
from analyser.core.quantities import SERIES, Series
from analyser.core.units import MemoryUnits, fmt_bytes, fmt_change
from analyser.gui.model import data
from analyser.gui.model.labels import nice_name
from analyser.viewmodels import tile_details

if TYPE_CHECKING:
    from analyser.gui.model.document import Document

__all__ = [
    "BREAKDOWNS",
    "BREAKDOWN_SERIES",
    "EXCHANGE_CODE",
    "MemoryInsights",
    "TileChart",
    "TileLayout",
    "build_chart",
    "detail_columns",
    "variables_table",
]

#: The breakdown chooser's entries and the breakdown each names (None: one total per tile).
BREAKDOWNS = {"Total": None, "Category": "category", "Region": "region", "Liveness": "liveness"}
#: Each breakdown's chart series (names, palette group) in the catalogue.
BREAKDOWN_SERIES: dict[str, Series] = {
    "category": SERIES["memory_by_category"],
    "region": SERIES["memory_by_region"],
    "liveness": SERIES["memory_by_liveness"],
}
#: The colour keys (palette group None: the view's own colour) of the one-total and gaps series.
TOTAL_KEY = (None, "Total")
GAPS_KEY = (None, "Gaps")


@dataclass(frozen=True)
class TileChart:
    """What one plot shows: [n, k] stacked values over the displayed tiles (n = shown IPUs x
    tiles per IPU, IPU by IPU, each in display order). Frozen: part of the Memory Report's
    view-model (the view picks each series' colour from ``color_keys`` and the theme)."""

    values: np.ndarray  # [n, k] bytes
    names: tuple[str, ...]
    #: (palette group, name) of each series; group None for the view's own colours
    color_keys: tuple[tuple[str | None, str], ...]
    ipu_of: np.ndarray  # [n] IPU of each displayed position
    tile_of: np.ndarray  # [n] software tile id of each displayed position
    sram: int
    ipus: tuple[int, ...]
    tiles_per_ipu: int

    @property
    def totals(self) -> np.ndarray:
        """Bytes per displayed tile (the stack's top)."""
        return self.values.sum(axis=1)

    def top(self) -> float:
        """The highest tile's bytes (0 for an empty chart)."""
        return float(self.totals.max()) if self.values.shape[0] else 0.0

    def present(self) -> list[int]:
        """The series with bytes on some tile (the ones drawn and in the legend)."""
        return [j for j in range(self.values.shape[1]) if self.values[:, j].any()]

    def stack(self, scale: float) -> tuple[np.ndarray, np.ndarray]:
        """(bar edges [n + 1], the top of each series on each tile [n, k] divided by
        ``scale``): column ``j`` of the second is the cumulative sum up to series ``j``."""
        n = self.values.shape[0]
        edges = np.arange(n + 1, dtype=np.float64) - 0.5
        return edges, np.cumsum(self.values, axis=1, dtype=np.float64) / scale

    def positions_of(self, pairs: np.ndarray) -> np.ndarray:
        """Displayed positions of the (ipu, tile) ``pairs`` shown on this chart."""
        if len(pairs) == 0:
            return np.zeros(0, np.int64)
        key = self.ipu_of.astype(np.int64) * self.tiles_per_ipu + self.tile_of
        want = np.asarray(pairs)[:, 0] * self.tiles_per_ipu + np.asarray(pairs)[:, 1]
        return np.flatnonzero(np.isin(key, want))

    def position_at(self, x: float) -> int | None:
        """The displayed position under chart x coordinate ``x`` (bars are 1 wide, centred on
        their position), None outside the chart."""
        pos = int(np.floor(x + 0.5))
        return pos if 0 <= pos < self.values.shape[0] else None


def build_chart(
    doc: Document, ipus: Sequence[int], breakdown: str | None, physical: bool, gaps: bool
) -> TileChart:
    """The stacked values of ``doc`` over the shown ``ipus`` (numbers from analyser.core): one
    total per tile (``breakdown`` None) or per category / region / liveness class, tiles in
    software or ``physical`` order, plus the gaps between blocks as a last series (``gaps``)."""
    mem = data.memory(doc)
    tgt = data.target(doc)
    order = tile_details.tile_order(doc.analysis, physical)
    keys: list[tuple[str | None, str]]
    if breakdown is None:
        names, keys = ["Total"], [TOTAL_KEY]
    else:
        series = BREAKDOWN_SERIES[breakdown]
        names = [nice_name(n) for n in series.names]
        keys = [(series.palette, n) for n in series.names]
    blocks = []
    for ipu in ipus:
        if breakdown is None:
            vals = mem.tile_total[ipu][:, None]
        else:
            vals = data.tile_breakdown(doc, ipu, breakdown)[0]
        vals = vals[order]
        if gaps:
            vals = np.concatenate([vals, mem.tile_gaps[ipu][order][:, None]], axis=1)
        blocks.append(vals)
    if gaps:
        names, keys = [*names, "Gaps"], [*keys, GAPS_KEY]
    values = np.concatenate(blocks) if blocks else np.zeros((0, len(names)))
    n = len(order)
    return TileChart(
        values=values.astype(np.int64),
        names=tuple(names),
        color_keys=tuple(keys),
        ipu_of=np.repeat(np.asarray(ipus, np.int64), n),
        tile_of=np.tile(order, len(ipus)),
        sram=int(tgt.sram_per_tile),
        ipus=tuple(ipus),
        tiles_per_ipu=n,
    )


def stack_rects(
    edges: np.ndarray, cum: np.ndarray, present: Sequence[int]
) -> tuple[list[tuple[int, np.ndarray]], tuple[float, float, float, float]]:
    """Stacked per-tile bars as one [m, 4] rectangle array (x, bottom, width 1, height) per
    series present (``(series, rects)``; tiles where the series is empty left out), and the
    bounds (x, y, width, height). Column ``j`` of ``cum`` is the top of series ``j`` on each
    tile."""
    groups = []
    lower = np.zeros(cum.shape[0])
    for j in range(cum.shape[1]):
        upper = cum[:, j]
        if j in present:
            keep = np.flatnonzero(upper > lower)
            rects = np.empty((keep.size, 4))
            rects[:, 0] = edges[keep]
            rects[:, 1] = lower[keep]
            rects[:, 2] = 1.0
            rects[:, 3] = upper[keep] - lower[keep]
            groups.append((j, rects))
        lower = upper
    top = float(cum[:, -1].max()) if cum.size else 1.0
    return groups, (float(edges[0]), 0.0, float(edges[-1] - edges[0]), top or 1.0)


def tile_delta(a: TileChart, b: TileChart) -> np.ndarray:
    """B minus A bytes per displayed tile (over the tiles both charts have)."""
    ta, tb = a.totals, b.totals
    n = min(ta.size, tb.size)
    return tb[:n].astype(np.int64) - ta[:n].astype(np.int64)


@dataclass
class DeltaBars:
    """The B - A chart: bars of the tiles that grew and of those that shrank, and the y span."""

    increase: tuple[np.ndarray, np.ndarray]  # (x, height) of tiles with more bytes in B
    decrease: tuple[np.ndarray, np.ndarray]  # (x, height) of tiles with fewer bytes in B
    span: float  # the largest change (0: none)


def delta_bars(delta: np.ndarray, scale: float) -> DeltaBars:
    """The B - A chart's bars from per-tile ``delta`` bytes, divided by ``scale``."""
    d = delta / scale
    x = np.arange(d.size, dtype=float)
    up, down = d > 0, d < 0
    span = float(np.abs(d).max()) if d.size else 0.0
    return DeltaBars((x[up], d[up]), (x[down], d[down]), span)


def totals_section(
    a: TileChart, units: MemoryUnits
) -> tuple[tuple[str, ...], str, list[tuple[str, ...]]]:
    """The Totals tab of one profile: (headers, section title, rows of each series' bytes and
    share of the shown IPUs' memory, then the total)."""
    per = a.values.sum(axis=0)
    whole = int(per.sum())
    total = float(whole) or 1.0
    rows: list[tuple[str, ...]] = [
        (name, fmt_bytes(int(per[j]), units), f"{100 * per[j] / total:.1f}%")
        for j, name in enumerate(a.names)
    ]
    rows.append(("Total", fmt_bytes(whole, units), "100.0%"))
    title = f"Memory of {', '.join(f'IPU {i}' for i in a.ipus)}"
    return ("Class", "Bytes", "Share"), title, rows


def compare_totals_section(
    a: TileChart, b: TileChart, oom_a: int, oom_b: int, units: MemoryUnits
) -> tuple[tuple[str, ...], str, list[tuple[str, ...]]]:
    """The Totals tab in compare mode: (headers, section title, rows of A, B and the change
    B - A for each series of either, the total, and the out-of-memory tiles)."""
    rows: list[tuple[str, ...]] = []
    for name, va, vb in compare_totals(a, b):
        rows.append((name, fmt_bytes(va, units), fmt_bytes(vb, units), fmt_change(va, vb, units)))
    rows.append(("Out-of-memory tiles", f"{oom_a:,}", f"{oom_b:,}", f"{oom_b - oom_a:+,}"))
    return ("Class", "A", "B", "Change"), "Memory of the shown IPUs", rows


def compare_totals(a: TileChart, b: TileChart) -> list[tuple[str, int, int]]:
    """(series, bytes in A, bytes in B) for each series of either chart (0 where a chart has
    none), then ("Total", A, B)."""
    sa, sb = a.values.sum(axis=0), b.values.sum(axis=0)
    rows = []
    for name in dict.fromkeys(a.names + b.names):
        va = int(sa[a.names.index(name)]) if name in a.names else 0
        vb = int(sb[b.names.index(name)]) if name in b.names else 0
        rows.append((name, va, vb))
    rows.append(("Total", int(sa.sum()), int(sb.sum())))
    return rows


def fullest_tile(doc: Document, ipus: Sequence[int]) -> tuple[int, int] | None:
    """(ipu, tile) of the fullest tile (bytes used, gaps included) of the shown ``ipus``."""
    if not ipus:
        return None
    used = data.memory(doc).tile_used[list(ipus)]
    k = int(np.argmax(used))
    return ipus[k // used.shape[1]], k % used.shape[1]


def tile_layouts(
    doc: Document, other: Document | None, ipu: int, tile: int
) -> tuple[TileLayout, TileLayout | None]:
    """The modelled address layouts of tile ``tile`` of IPU ``ipu`` in ``doc`` and in
    ``other`` (None without it, or when its target has no such tile): the Tile memory map."""
    a = data.tile_layout(doc, ipu, tile)
    b = None
    if other is not None:
        target = data.target(other)
        if ipu < target.num_ipus and tile < target.tiles_per_ipu:
            b = data.tile_layout(other, ipu, tile)
    return a, b


def insights_of(doc: Document, other: Document | None) -> list[tuple[str, MemoryInsights]]:
    """(prefix, vertex state and exchange code) of ``doc`` ("" alone, "A: " compared) and of
    ``other`` ("B: "): the Memory insights tab."""
    if other is None:
        return [("", data.memory_insights(doc))]
    return [("A: ", data.memory_insights(doc)), ("B: ", data.memory_insights(other))]


@dataclass
class FloorPlan:
    """One IPU's tiles over the chip floor plan (the Tile map tab)."""

    title: str
    grid: np.ndarray  # [columns, rows] share of tile memory used, NaN where no tile
    oom: np.ndarray  # [tiles] True for a tile over its memory
    ipu: int
    xy: np.ndarray  # [tiles, 2] (column, row) of each software tile

    @property
    def n_oom(self) -> int:
        """Tiles out of memory."""
        return int(np.count_nonzero(self.oom))

    def tile_at(self, cx: int, cy: int) -> int | None:
        """The software tile at floor-plan cell (``cx``, ``cy``), None for no tile."""
        if not (0 <= cx < self.grid.shape[0] and 0 <= cy < self.grid.shape[1]):
            return None
        hit = np.flatnonzero((self.xy[:, 0] == cx) & (self.xy[:, 1] == cy))
        return int(hit[0]) if hit.size else None


def floor_plans(
    docs: Sequence[tuple[str, Document]], ipus: Sequence[int], gaps: bool
) -> list[FloorPlan]:
    """One floor plan per shown IPU; with several (tag, document) pairs (compare mode) A and
    B side by side for the first shown IPU. The share is of the tile's memory, gaps included
    or not."""
    plans = []
    if len(docs) > 1:
        ipus = list(ipus)[:1]
    for ipu in ipus:
        for tag, d in docs:
            mem = data.memory(d)
            if ipu >= mem.num_ipus:
                continue
            used = mem.tile_used[ipu] if gaps else mem.tile_total[ipu]
            share = used / float(mem.sram_per_tile)
            grid = tile_details.floor_plan(d.analysis, share)
            oom = mem.tile_used[ipu] > mem.sram_per_tile
            title = f"IPU {ipu}" + (f" ({tag}: {d.name})" if len(docs) > 1 else "")
            plans.append(FloorPlan(title, grid, oom, ipu, tile_details.tile_xy(d.analysis)))
    return plans


#: Least top of the colour scale when some tile is over 100% of its memory: the over-100%
#: colours then take at least this share of the colour bar (at 101% they were a sliver of it).
MIN_OVER_TOP = 1.15


def map_levels(plans: Sequence[FloorPlan]) -> float:
    """The colour scale's top: 1 (all of a tile's memory) or, when a tile is above it, the
    fullest tile's share (at least :data:`MIN_OVER_TOP`, so the legend shows the over colours)."""
    top = max([1.0] + [float(np.nanmax(p.grid)) for p in plans if np.isfinite(p.grid).any()])
    return max(top, MIN_OVER_TOP) if top > 1.0 else 1.0


def map_stops(hi: float, n_colors: int, n_over: int = 3) -> list[float]:
    """Positions (0-1) of the sequential scale's ``n_colors`` stops up to 100% of tile memory,
    then of the ``n_over`` over-100% colours from just above 100% to ``hi`` (``hi`` > 1)."""
    edge = 1.0 / hi
    pos = list(np.linspace(0.0, edge, n_colors))
    if hi > 1.0:
        pos += list(np.linspace(min(1.0, edge + 1e-6), 1.0, n_over))
    return pos


def map_ticks(hi: float) -> list[tuple[float, str]]:
    """The colour bar's ticks: shares as percentages, 100% always among them."""
    step = 0.25 if hi <= 2.0 else 0.5 if hi <= 4.0 else 1.0
    return [(v, f"{100 * v:.0f}%") for v in np.arange(0.0, hi + 1e-9, step)]


def variables_table(
    docs: Sequence[tuple[str, Any, Sequence[int]]], compare: bool
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The Variables tab: for each (tag, document, shown IPUs) the variables on those IPUs,
    largest first (a ``profile`` column when comparing); returns (the table of all, the first
    profile's, which the chart of the largest draws)."""
    frames = []
    for tag, doc, ipus in docs:
        v = data.variables(doc)
        v = v[np.isin(v["ipu"].to_numpy(), np.asarray(ipus, dtype=np.int64))]
        v = v.sort_values("bytes", ascending=False)
        frames.append(v.assign(profile=tag) if compare else v)
    frame = pd.concat(frames).reset_index(drop=True) if frames else pd.DataFrame()
    return frame, frames[0] if frames else pd.DataFrame()


#: Detail columns that hold bytes (the selected tiles' tables).
BYTE_COLUMNS = frozenset(
    ("total", "gaps", "bytes", "bytes_on_selection", "code_bytes", "state_bytes_on_selection")
)


def detail_columns(frame: pd.DataFrame, units: MemoryUnits, class_names: set[str]) -> list:
    """``(key, title, formatter)`` of a selected-tiles table (``frame``): profile, IPU, tile and
    name first; bytes (and memory classes' and per-tile columns) in ``units``."""

    def b(v: Any) -> str:
        return fmt_bytes(v, units)

    first = [
        c for c in ("profile", "ipu", "tile", "name", "vertex_type", "type") if c in frame.columns
    ]
    cols = []
    for c in first + [c for c in frame.columns if c not in first]:
        if c == "program":
            continue
        text = str(c)
        label = {"ipu": "IPU", "share_of_sram": "Share of tile memory"}.get(
            c,
            nice_name(text) if "_" not in text else text.replace("_", " ").capitalize(),
        )
        if c in BYTE_COLUMNS or (
            c not in ("tile", "ipu") and frame[c].dtype.kind in "iu" and c in class_names
        ):
            fmt = b
        elif c == "share_of_sram":
            fmt = lambda v: f"{100 * v:.1f}%"  # noqa: E731
        elif text.startswith("tile "):
            fmt = b
        else:
            fmt = None
        cols.append((c, label, fmt))
    return cols


@dataclass
class LargestVariables:
    """The Variables tab's chart: the largest variables as horizontal bars, top first."""

    y: np.ndarray  # [n] bar positions (the largest at the top)
    sizes: np.ndarray  # [n] bytes
    kinds: list[str]  # kind of each variable (its colour)
    names: list[str]  # full names (with the IPU when one name is on two IPUs)

    def by_kind(self) -> list[tuple[str, np.ndarray]]:
        """(kind, mask of its bars) for each kind, in order of first appearance."""
        return [
            (kind, np.array([k == kind for k in self.kinds])) for kind in dict.fromkeys(self.kinds)
        ]

    def bar_at(self, y: float) -> int | None:
        """The bar at chart height ``y`` (bars are 0.8 high), None between bars."""
        hit = np.flatnonzero(np.abs(self.y - y) <= 0.4)
        return int(hit[0]) if len(hit) else None


def largest_variables(frame: pd.DataFrame, n: int = 20) -> LargestVariables | None:
    """The ``n`` first rows of ``frame`` (variables, largest first) as the chart's bars; None
    when there are none."""
    top = frame.head(n)
    if top.empty:
        return None
    full = [str(x) for x in top["name"]]
    if "ipu" in top.columns and len(set(full)) < len(full):  # the same name on two IPUs
        full = [f"{n} · IPU {i}" for n, i in zip(full, top["ipu"], strict=True)]
    return LargestVariables(
        y=np.arange(len(top), dtype=float)[::-1],
        sizes=top["bytes"].to_numpy(),
        kinds=[str(k) for k in top["kind"]],
        names=full,
    )


#: The selected tiles' detail tables: what each lists (tile_details' function of it).
DETAIL_TABLES = ("tiles", "variables", "vertices", "exchanges", "compute_sets")


def selected_tiles_table(
    docs: Sequence[tuple[str, Document]], selection: np.ndarray, table: str, breakdown: str | None
) -> pd.DataFrame:
    """One of the selected tiles' tables (``table`` in :data:`DETAIL_TABLES`) over the
    (tag, document) pairs: rows of each selected IPU's tiles with an ``ipu`` column (and a
    ``profile`` one when comparing); the tiles table breaks memory down by ``breakdown``."""
    frames = []
    ipus = np.unique(selection[:, 0]) if len(selection) else np.zeros(0, dtype=np.int64)
    for tag, d in docs:
        n_ipus = data.target(d).num_ipus
        for ipu in ipus:
            if ipu >= n_ipus:
                continue
            tiles = selection[selection[:, 0] == ipu, 1]
            analysis, i = d.analysis, int(ipu)
            if table == "tiles":
                f = tile_details.tile_memory_rows(analysis, i, tiles, breakdown or "category")
            elif table == "variables":
                f = tile_details.tile_variables(analysis, i, tiles)
            elif table == "vertices":
                f = tile_details.tile_vertices(analysis, i, tiles)
            elif table == "exchanges":
                f = tile_details.tile_exchanges(analysis, i, tiles)
            else:
                f = tile_details.tile_compute_sets(analysis, i, tiles)
            f = f.assign(ipu=i)
            if len(docs) > 1:
                f = f.assign(profile=tag)
            frames.append(f)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def memory_class_names() -> set[str]:
    """Every memory class name of the breakdowns (their columns in the tiles table hold
    bytes)."""
    return {n for series in BREAKDOWN_SERIES.values() for n in series.names}


def no_tiles() -> np.ndarray:
    """An empty tile selection ([0, 2] (ipu, tile) pairs)."""
    return np.zeros((0, 2), np.int64)


def one_tile(ipu: int, tile: int) -> np.ndarray:
    """A selection of one tile."""
    return np.array([[ipu, tile]], np.int64)


@dataclass
class LayoutBlocks:
    """The Tile memory map's blocks (of a :class:`TileLayout`) as rectangles in chart units:
    x = liveness steps, y = address divided by the axis scale."""

    rects: np.ndarray  # [n, 4] (first live step, start address, steps live, bytes), scaled
    groups: np.ndarray  # palette group of each block: memory categories or variable kinds
    names: np.ndarray  # its name in that group (the category, or the variable's kind)
    shade: np.ndarray  # [n] bool: every other block in address order, drawn darker

    def colour_groups(self) -> list[tuple[str, str, bool, np.ndarray]]:
        """(palette group, name, darker, mask of its blocks) for each colour drawn, in order of
        first appearance; neighbours in address alternate a shade so two blocks of one colour
        still read as two."""
        out = []
        for g, n in dict.fromkeys(zip(self.groups, self.names, strict=True)):
            for dark in (False, True):
                m = (self.groups == g) & (self.names == n) & (self.shade == dark)
                if m.any():
                    out.append((g, n, dark, m))
        return out


def layout_blocks(layout: TileLayout, scale: float) -> LayoutBlocks:
    """``layout``'s blocks as :class:`LayoutBlocks`, addresses divided by ``scale``: categories
    coloured by the memory-category palette, variables by kind."""
    b = layout.blocks
    x0 = b["live_start"].to_numpy().astype(float)
    w = b["live_end"].to_numpy() + 1 - x0
    y0 = b["start"].to_numpy() / scale
    h = b["bytes"].to_numpy() / scale
    variable = b["category"] == "variable"
    return LayoutBlocks(
        rects=np.stack([x0, y0, w, h], axis=1),
        groups=np.where(variable, "variable_kinds", "memory_categories"),
        names=np.where(variable, b["kind"].astype(str), b["category"]),
        shade=(np.argsort(np.argsort(b["start"].to_numpy(), kind="stable")) % 2).astype(bool),
    )


def block_rect(row: Any, scale: float) -> tuple[float, float, float, float]:
    """(first live step, start address, steps live, bytes) of one block, addresses / ``scale``."""
    return (
        float(row["live_start"]),
        row["start"] / scale,
        float(row["live_end"] + 1 - row["live_start"]),
        row["bytes"] / scale,
    )


def block_text(layout: TileLayout, row: Any, units: MemoryUnits) -> str:
    """One line naming a block: name, bytes, address range, liveness, region."""
    a, b = int(row["live_start"]), int(row["live_end"])
    if bool(row["always_live"]):
        live = "always live"
    elif a == b:
        live = f"live at step {a:,} ({layout.step_name(a)})"
    else:
        live = f"live at steps {a:,} ({layout.step_name(a)}) to {b:,} ({layout.step_name(b)})"
    what = nice_name(str(row["category"])) if row["category"] != "variable" else str(row["kind"])
    return (
        f"{row['name']} ({what}): {fmt_bytes(int(row['bytes']), units)} at addresses "
        f"0x{int(row['start']):05x}-0x{int(row['end']) - 1:05x}, {live}, "
        f"{nice_name(str(row['region'])).lower()} memory"
    )


def layout_title(layout: TileLayout, units: MemoryUnits, tag: str = "") -> str:
    """The map's header: which tile, and the figures of its layout against the profile's."""
    peak = int(layout.live_bytes().max())
    return (
        f"{tag}IPU {layout.ipu}, tile {layout.tile}: peak {fmt_bytes(peak, units)} live at step "
        f"{layout.peak_step():,} ({layout.step_name(layout.peak_step())}; profile: "
        f"{fmt_bytes(layout.profile_total, units)} + "
        f"{fmt_bytes(layout.profile_gaps, units)} gaps), highest address used "
        f"{fmt_bytes(layout.top_address, units)} of {fmt_bytes(layout.sram, units)}; "
        f"{len(layout.blocks):,} blocks."
    )


def legend_keys(layouts: Sequence[TileLayout]) -> list[tuple[str, str]]:
    """(palette group, name) of every category and variable kind drawn (the regions are named
    on their bands), in order of first appearance."""
    seen: dict[tuple[str, str], None] = {}
    for lay in layouts:
        b = lay.blocks
        for cat, kind in zip(b["category"], b["kind"], strict=True):
            seen[
                ("variable_kinds", str(kind)) if cat == "variable" else ("memory_categories", cat)
            ] = None
    return list(seen)


def insights_table(
    items: Sequence[tuple[str, MemoryInsights]], table: str, compare: bool
) -> pd.DataFrame:
    """One of the memory insights' tables (``vertices``, ``exchanges``, ``top_tiles``) of each
    (tag, insights) one under the other, with a ``profile`` column (the tag) when comparing."""
    parts = []
    for tag, ins in items:
        f = getattr(ins, table)
        parts.append(f.assign(profile=tag.rstrip(": ")) if compare else f)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
