"""Memory analysis: per-tile totals, OOM tiles, top tiles, histogram, breakdowns, largest items."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from analyser.core.source import Source
from profiles import schema

if TYPE_CHECKING:
    import pandas as pd

CATEGORIES = schema.MEMORY_CATEGORIES
REGIONS = schema.MEMORY_REGIONS
LIVENESS_CLASSES = schema.LIVENESS_CLASSES

#: Memory categories that hold code (the "code dominates" insight and the code columns).
CODE_CATEGORIES = (
    "vertexCode",
    "controlCode",
    "internalExchangeCode",
    "hostExchangeCode",
    "globalExchangeCode",
)


@dataclass(frozen=True)
class TileMemory:
    """One tile's memory (for top-tile lists)."""

    ipu: int
    tile: int
    bytes: int
    share: float  # of the tile's SRAM


@dataclass
class MemorySummary:
    """Memory of one profile. Arrays are indexed [ipu, tile, ...] like /memory."""

    num_ipus: int
    tiles_per_ipu: int
    sram_per_tile: int
    #: [ipus, tiles] used bytes (always-live + peak not-always-live) and gap bytes.
    tile_total: np.ndarray = field(repr=False)
    tile_gaps: np.ndarray = field(repr=False)
    #: [ipus, categories] / [ipus, regions] / [ipus, 2] bytes summed over tiles.
    by_category: np.ndarray = field(repr=False)
    by_region: np.ndarray = field(repr=False)
    by_liveness: np.ndarray = field(repr=False)
    #: [k, 2] (ipu, tile) of every out-of-memory tile.
    oom_tiles: np.ndarray = field(repr=False)
    top_tiles: list[TileMemory]
    #: Histogram of used bytes (incl. gaps) over every tile of every IPU.
    histogram_counts: np.ndarray = field(repr=False)
    histogram_edges: np.ndarray = field(repr=False)
    #: Bytes held in streaming memory (remote buffers) by offloaded variables.
    remote_bytes: int = 0

    @property
    def tile_used(self) -> np.ndarray:
        """[ipus, tiles] bytes including gaps (what must fit in SRAM)."""
        return self.tile_total + self.tile_gaps

    @property
    def peak_memory_bytes(self) -> int:
        """Bytes the program needs over all tiles and IPUs at its peak (sum of /memory/total)."""
        return int(self.tile_total.sum())

    @property
    def capacity_bytes(self) -> int:
        """Bytes of SRAM over every tile of every IPU."""
        return self.num_ipus * self.tiles_per_ipu * self.sram_per_tile

    @property
    def share_used(self) -> float:
        """Share of the total SRAM the program uses (PopVision's Insights banner)."""
        return self.peak_memory_bytes / self.capacity_bytes if self.capacity_bytes else 0.0

    @property
    def max_tile_bytes(self) -> int:
        """Bytes used on the fullest tile."""
        return int(self.tile_used.max()) if self.tile_used.size else 0

    @property
    def headroom_bytes(self) -> int:
        """Free bytes on the fullest tile (negative when a tile is out of memory)."""
        return self.sram_per_tile - self.max_tile_bytes

    @property
    def headroom_share(self) -> float:
        """The fullest tile's headroom as a share of a tile's SRAM."""
        return self.headroom_bytes / self.sram_per_tile if self.sram_per_tile else 0.0

    @property
    def n_oom_tiles(self) -> int:
        """The number of out-of-memory tiles."""
        return int(self.oom_tiles.shape[0])

    @property
    def fits(self) -> bool:
        """Whether no tile is out of memory."""
        return self.n_oom_tiles == 0

    def oom_tiles_per_ipu(self) -> np.ndarray:
        """Out-of-memory tiles per IPU."""
        return (
            np.bincount(self.oom_tiles[:, 0], minlength=self.num_ipus)
            if self.n_oom_tiles
            else np.zeros(self.num_ipus, np.int64)
        )

    def ipu_total(self) -> np.ndarray:
        """[ipus] bytes used on each IPU."""
        return self.tile_total.sum(axis=1)

    def category_totals(self, ipu: int | None = None) -> dict[str, int]:
        """Bytes by category (on ``ipu``, or on every IPU)."""
        v = self.by_category.sum(axis=0) if ipu is None else self.by_category[ipu]
        return {c: int(v[i]) for i, c in enumerate(CATEGORIES)}

    def region_totals(self, ipu: int | None = None) -> dict[str, int]:
        """Bytes by memory region (on ``ipu``, or on every IPU)."""
        v = self.by_region.sum(axis=0) if ipu is None else self.by_region[ipu]
        return {c: int(v[i]) for i, c in enumerate(REGIONS)}

    def liveness_totals(self, ipu: int | None = None) -> dict[str, int]:
        """Bytes by liveness class (on ``ipu``, or on every IPU)."""
        v = self.by_liveness.sum(axis=0) if ipu is None else self.by_liveness[ipu]
        return {c: int(v[i]) for i, c in enumerate(LIVENESS_CLASSES)}

    @property
    def code_bytes(self) -> int:
        """Bytes of code (vertex and control code) over every IPU."""
        tot = self.category_totals()
        return sum(tot[c] for c in CODE_CATEGORIES)


def summarise_memory(src: Source, *, top: int = 5, bins: int = 50) -> MemorySummary:
    """The memory of a profile per tile and IPU, its top tiles and a histogram of tile use."""
    meta = src.meta
    n_ipus = int(meta["num_ipus"])
    tiles = int(meta["tiles_per_ipu"])
    sram = int(meta["sram_per_tile"])
    total = src.array("/memory/total").astype(np.int64)
    gaps = src.array("/memory/gaps").astype(np.int64)
    by_cat = src.array("/memory/by_category").astype(np.int64).sum(axis=1)
    by_reg = src.array("/memory/by_region").astype(np.int64).sum(axis=1)
    by_liv = src.array("/memory/by_liveness").astype(np.int64).sum(axis=1)
    used = total + gaps
    ipu_idx, tile_idx = np.nonzero(used > sram)
    oom = (
        np.stack([ipu_idx, tile_idx], axis=1).astype(np.int64)
        if ipu_idx.size
        else np.zeros((0, 2), np.int64)
    )
    flat = used.ravel()
    k = min(top, flat.size)
    best = np.argpartition(flat, flat.size - k)[flat.size - k :] if k else np.zeros(0, np.int64)
    best = best[np.argsort(-flat[best], kind="stable")]
    top_tiles = [
        TileMemory(int(i // tiles), int(i % tiles), int(flat[i]), float(flat[i]) / sram)
        for i in best
    ]
    hi = max(sram, int(flat.max()) if flat.size else sram)
    counts, edges = np.histogram(flat, bins=bins, range=(0, hi))
    remote = 0
    if src.has("/graph/variables"):
        rb = src.column("/graph/variables", "remote_bytes")
        remote = int(rb.sum())
    return MemorySummary(
        num_ipus=n_ipus,
        tiles_per_ipu=tiles,
        sram_per_tile=sram,
        tile_total=total,
        tile_gaps=gaps,
        by_category=by_cat,
        by_region=by_reg,
        by_liveness=by_liv,
        oom_tiles=oom,
        top_tiles=top_tiles,
        histogram_counts=counts,
        histogram_edges=edges,
        remote_bytes=remote,
    )


def tile_breakdown(src: Source, ipu: int, by: str = "category") -> tuple[np.ndarray, tuple]:
    """[tiles, k] bytes of one IPU's tiles by ``category``, ``region`` or ``liveness``."""
    path, names = {
        "category": ("/memory/by_category", CATEGORIES),
        "region": ("/memory/by_region", REGIONS),
        "liveness": ("/memory/by_liveness", LIVENESS_CLASSES),
    }[by]
    return np.asarray(src.profile.array(path, sel=np.s_[ipu])).astype(np.int64), names


#: the columns of /graph/variables the analysis reads (memory, liveness, insights)
_VARIABLE_COLUMNS = ("name", "kind", "bytes", "ipu", "always_live", "live_start", "live_end")
#: the lifetimes, which only what asks when a variable is live reads
_LIFETIME_COLUMNS = ("live_start", "live_end")


def variables_table(src: Source, *, lifetimes: bool = True) -> pd.DataFrame:
    """/graph/variables with ``kind`` decoded to names. A column the analysis reads that the
    file lacks is a ProfileError naming it; with ``lifetimes`` False the lifetimes may be
    absent (the table then has no such columns), for what lists variables without asking when
    they are live."""
    import pandas as pd  # imported on first use (not by `analyse summary`)

    df = src.table("/graph/variables").copy()
    needed = (
        _VARIABLE_COLUMNS
        if lifetimes
        else tuple(c for c in _VARIABLE_COLUMNS if c not in _LIFETIME_COLUMNS)
    )
    missing = [c for c in needed if c not in df]
    if missing:  # the reader leaves out a column that is not in the file: name it, in its words
        src.table("/graph/variables", missing)
    if "kind" in df and not isinstance(df["kind"].dtype, pd.CategoricalDtype):
        df["kind"] = pd.Categorical.from_codes(
            df["kind"].astype(int), categories=list(schema.VARIABLE_KINDS)
        )
    return df


def largest_variables(src: Source, n: int = 10, *, always_live: bool | None = None) -> pd.DataFrame:
    """The ``n`` largest variables (only always-live or not, when ``always_live`` is given);
    their lifetimes when the profile has them."""
    df = variables_table(src, lifetimes=False)
    if always_live is not None:
        df = df[df["always_live"] == always_live]
    return df.nlargest(n, "bytes")


def largest_vertices(src: Source, n: int = 10) -> pd.DataFrame:
    """Vertex types by total state (state bytes x instances) with their code size."""
    df = src.table("/graph/vertex_types").copy()
    df["total_state_bytes"] = df["state_bytes"] * df["instances"]
    return df.nlargest(n, "total_state_bytes")
