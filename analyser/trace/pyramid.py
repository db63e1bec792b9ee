"""Level-of-detail pyramids of one IPU's steps, and the vectorised aggregation the window
queries use: per-pixel merging of rectangles (:func:`aggregate_pixels`), the dominant step type
of a pixel or its striping by step-type share, and the even spreading of busy cycles over time
buckets (the overview). A pyramid is built once, streaming the steps in chunks, or loaded from
the level-of-detail cache (:mod:`analyser.trace.lod_cache`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from analyser.trace import lod_cache
from analyser.trace.access import StepAccess
from analyser.trace.results import NT

#: Pyramid levels are this factor apart in bucket width.
LEVEL_FACTOR = 4
#: Target mean number of steps per bucket at the finest pyramid level.
STEPS_PER_FINEST_BUCKET = 8


def _group_reduce(order_key: np.ndarray, x0, x1, count, row):
    """Reduce runs of equal ``order_key`` (which must already be sorted)."""
    if len(order_key) == 0:
        e = np.empty(0, dtype=np.int64)
        return e, np.empty(0), np.empty(0), e, e
    starts = np.flatnonzero(np.r_[True, order_key[1:] != order_key[:-1]])
    return (
        order_key[starts],
        np.minimum.reduceat(x0, starts),
        np.maximum.reduceat(x1, starts),
        np.add.reduceat(count, starts),
        np.minimum.reduceat(row, starts),
    )


def aggregate_pixels(
    key: np.ndarray,
    x0: np.ndarray,
    x1: np.ndarray,
    count: np.ndarray,
    row: np.ndarray,
    t0: float,
    t1: float,
    width_px: int,
):
    """Merge items of the same ``key`` (lane x type) whose start falls in the same pixel.

    Returns ``(key, x0, x1, count, row)`` with at most ``keys x (width_px + 2)`` items.
    """
    pw = (t1 - t0) / max(1, width_px)
    pix = np.clip(np.floor((x0 - t0) / pw), -1, width_px).astype(np.int64) + 1
    g = key.astype(np.int64) * (width_px + 3) + pix
    order = np.argsort(g, kind="stable")
    gk, a, b, c, r = _group_reduce(g[order], x0[order], x1[order], count[order], row[order])
    return gk // (width_px + 3), a, b, c, r


def _dominant(key, x0, x1, sums, row, t0: float, pw: float, width_px: int):
    """Keep, per lane and pixel, the narrow item of the type with the most busy cycles, and
    every item at least two pixels wide."""
    wide = (x1 - x0) >= 2 * pw
    lane = key // NT
    pix = np.clip(np.floor((x0 - t0) / pw), -1, width_px).astype(np.int64) + 1
    g = lane * (width_px + 3) + pix
    narrow = np.flatnonzero(~wide)
    order = narrow[np.lexsort((-sums[narrow, 1], g[narrow]))]
    first = order[np.r_[True, g[order][1:] != g[order][:-1]]] if len(order) else order
    keep = np.sort(np.concatenate([np.flatnonzero(wide), first]))
    x0, x1 = x0[keep].copy(), x1[keep].copy()
    # a narrow aggregate fills its pixel, so a busy lane reads as busy (no hairline gaps)
    snap = ~wide[keep]
    px0 = t0 + (pix[keep][snap] - 1) * pw
    x1[snap] = np.maximum(x1[snap], px0 + pw)
    x0[snap] = np.minimum(x0[snap], np.maximum(px0, x0[snap] - pw))
    return key[keep], x0, x1, sums[keep], row[keep]


def _stripes(key, x0, x1, sums, row, t0: float, pw: float, width_px: int):
    """Keep every item; per lane and pixel, stack the narrow items (aggregates of steps) across
    the lane by their share of the pixel's busy cycles, in step-type order, so a minority type
    keeps its part of every pixel (a zoomed-out run of 75% compute and 25% GlobalExchange
    shows both, not solid compute, so a minority type stays visible); items two pixels wide or more fill
    the lane. Returns the items and their ``y0`` / ``y1`` fractions of the lane."""
    wide = (x1 - x0) >= 2 * pw
    lane = key // NT
    typ = key % NT
    pix = np.clip(np.floor((x0 - t0) / pw), -1, width_px).astype(np.int64) + 1
    g = lane * (width_px + 3) + pix
    y0 = np.zeros(len(key))
    y1 = np.ones(len(key))
    narrow = np.flatnonzero(~wide)
    x0, x1 = x0.copy(), x1.copy()
    if len(narrow):
        order = narrow[np.lexsort((typ[narrow], g[narrow]))]
        # cycles, with a trace of the step count so a pixel of zero-cycle steps still splits
        w = sums[order, 1].astype(np.float64) + 1e-6 * sums[order, 0]
        gg = g[order]
        starts = np.r_[True, gg[1:] != gg[:-1]]
        gid = np.cumsum(starts) - 1
        total = np.bincount(gid, weights=w)
        cum = np.cumsum(w)
        before = cum - w - (cum - w)[starts][gid]
        safe = np.maximum(total[gid], 1e-12)
        y0[order] = before / safe
        y1[order] = (before + w) / safe
        # a narrow aggregate fills its pixel, so the stripes of one pixel line up
        px0 = t0 + (pix[narrow] - 1) * pw
        x0[narrow] = np.maximum(np.minimum(x0[narrow], px0), px0 - pw)
        x1[narrow] = np.maximum(x1[narrow], px0 + pw)
    return key, x0, x1, sums, row, y0, y1


def _spread(x0, x1, cycles, t0: float, bw: float, buckets: int) -> np.ndarray:
    """Cycles per bucket of ``buckets`` buckets ``bw`` wide from ``t0`` when each item spreads
    its ``cycles`` evenly over ``[x0, x1)``: the two end buckets take their parts, the buckets in
    between a full bucket each (a difference array, cumulated once)."""
    t1 = t0 + bw * buckets
    length = np.maximum(x1 - x0, 1e-9)
    rate = cycles / length
    a = np.clip(x0, t0, t1)
    b = np.clip(x1, t0, t1)
    keep = b > a
    a, b, rate = a[keep], b[keep], rate[keep]
    out = np.zeros(buckets, dtype=np.float64)
    if not len(a):
        return out
    b0 = np.minimum(((a - t0) // bw).astype(np.int64), buckets - 1)
    b1 = np.minimum(((b - t0) // bw).astype(np.int64), buckets - 1)
    same = b0 == b1
    out += np.bincount(b0[same], weights=rate[same] * (b[same] - a[same]), minlength=buckets)
    d = ~same
    e0 = t0 + (b0[d] + 1) * bw  # end of the first bucket
    e1 = t0 + b1[d] * bw  # start of the last bucket
    out += np.bincount(b0[d], weights=rate[d] * (e0 - a[d]), minlength=buckets)
    out += np.bincount(b1[d], weights=rate[d] * (b[d] - e1), minlength=buckets)
    diff = np.bincount(b0[d] + 1, weights=rate[d], minlength=buckets + 1)
    diff -= np.bincount(b1[d], weights=rate[d], minlength=buckets + 1)
    out += np.cumsum(diff)[:buckets] * bw
    return out


def _extent(access: StepAccess, lo: int, hi: int) -> tuple[float, float]:
    """(first start, last step's end) of rows ``[lo, hi)`` (two one-row reads)."""
    first = access.read(lo, lo + 1, ("start",))["start"]
    last = access.read(hi - 1, hi, ("start", "cycles"))
    return float(first[0]), float(last["start"][0] + last["cycles"][0])


def _grid(n: int, t_min: float, t_end: float) -> tuple[int, float]:
    """(buckets, bucket width) of the finest pyramid level of ``n`` steps over the extent."""
    n_b = 1 << int(np.clip(np.ceil(np.log2(max(1, n / STEPS_PER_FINEST_BUCKET))), 10, 20))
    return n_b, float(max(1.0, np.ceil((t_end - t_min + 1) / n_b)))


def _widths(n: int, t_min: float, t_end: float) -> list[float]:
    """The bucket widths of every level of a full pyramid of ``n`` (> 0) steps."""
    n_b, width = _grid(n, t_min, t_end)
    out = [width]
    while (n_b := n_b // LEVEL_FACTOR) >= 64:
        width *= LEVEL_FACTOR
        out.append(width)
    return out


@dataclass
class _Level:
    width: float  # bucket width in cycles
    key: np.ndarray  # int32 lane * NT + type
    x0: np.ndarray  # float64
    x1: np.ndarray
    count: np.ndarray
    row: np.ndarray
    bucket: np.ndarray  # int64
    cummax_x1: np.ndarray  # running max of x1 in bucket order


class _Pyramid:
    """Pre-aggregated buckets of one IPU and one grouping, sorted by bucket."""

    def __init__(
        self,
        levels: list[_Level],
        n_rows: int,
        t_min: float,
        t_max: float,
        first_level: int = 0,
    ) -> None:
        self.levels = levels  # finest first
        self.n_rows = n_rows
        self.t_min = t_min
        self.t_max = t_max
        #: index, in the full pyramid, of ``levels[0]``: 0 for a full pyramid, more for the
        #: coarse levels alone (built first on a coarse-first open)
        self.first_level = first_level

    @property
    def complete(self) -> bool:
        """True when the pyramid has all its levels (not the coarse levels alone)."""
        return self.first_level == 0

    @staticmethod
    def _sorted_by_bucket(width, key, x0, x1, count, row, bucket) -> _Level:
        order = np.lexsort((key, bucket))
        x1s = x1[order]
        return _Level(
            width,
            key[order],
            x0[order],
            x1s,
            count[order],
            row[order],
            bucket[order],
            np.maximum.accumulate(x1s) if len(x1s) else x1s,
        )

    @classmethod
    def build(
        cls, access: StepAccess, ipu: int, lane_of, columns, max_buckets: int | None = None
    ) -> _Pyramid:
        """The pyramid of one IPU; with ``max_buckets``, only its levels of at most that many
        buckets (the same levels, bit for bit, as the full pyramid's coarsest ones: a bucket of
        a level is ``floor((start - t_min) / width)`` with integer cycles and widths, so
        computing it directly equals dividing a finer level's bucket by the level factor, and
        min / max / sum / min-row reductions regroup exactly)."""
        lo, hi = access.ipu_rows(ipu)
        n = hi - lo
        if n == 0:
            return cls([], 0, 0.0, 0.0)
        t_min, t_end = _extent(access, lo, hi)
        n_b, width = _grid(n, t_min, t_end)
        first_level = 0
        while max_buckets is not None and n_b > max_buckets and n_b // LEVEL_FACTOR >= 64:
            n_b //= LEVEL_FACTOR
            width *= LEVEL_FACTOR
            first_level += 1
        parts = []
        t_max = t_end
        for a, cols in access.chunks(lo, hi, columns):
            start = cols["start"].astype(np.float64)
            end = start + cols["cycles"]
            t_max = max(t_max, float(end.max()))
            key = lane_of(cols) * NT + cols["type"].astype(np.int32)
            bucket = ((start - t_min) // width).astype(np.int64)
            # rows are sorted by start, so (key, bucket) runs are contiguous after a stable key sort
            order = np.argsort(key.astype(np.uint16), kind="stable")
            g = key[order].astype(np.int64) * (n_b + 1) + bucket[order]
            rows = np.arange(a, a + len(start), dtype=np.int64)[order]
            # per item sums: [steps, busy cycles]
            sums = np.stack([np.ones(len(start), dtype=np.int64), cols["cycles"][order]], axis=1)
            parts.append(_group_reduce(g, start[order], end[order], sums, rows))
        g = np.concatenate([p[0] for p in parts])
        x0 = np.concatenate([p[1] for p in parts])
        x1 = np.concatenate([p[2] for p in parts])
        cnt = np.concatenate([p[3] for p in parts])
        rw = np.concatenate([p[4] for p in parts])
        order = np.argsort(g, kind="stable")  # merge runs split across chunks
        g, x0, x1, cnt, rw = _group_reduce(g[order], x0[order], x1[order], cnt[order], rw[order])
        key = (g // (n_b + 1)).astype(np.int32)
        bucket = g % (n_b + 1)
        levels = [cls._sorted_by_bucket(width, key, x0, x1, cnt, rw, bucket)]
        # coarser levels: entries stay sorted by (key, bucket) when buckets are divided
        while len(g) and (n_b := n_b // LEVEL_FACTOR) >= 64:
            width *= LEVEL_FACTOR
            bucket = bucket // LEVEL_FACTOR
            g = key.astype(np.int64) * (n_b + 1) + bucket
            g, x0, x1, cnt, rw = _group_reduce(g, x0, x1, cnt, rw)
            key = (g // (n_b + 1)).astype(np.int32)
            bucket = g % (n_b + 1)
            levels.append(cls._sorted_by_bucket(width, key, x0, x1, cnt, rw, bucket))
        return cls(levels, n, t_min, t_max, first_level)

    def save(self, folder: Path, steps_digest: str) -> None:
        """Write the levels to the level-of-detail cache (:func:`analyser.trace.lod_cache.save`:
        atomic, with the digest of the steps they were built from and of the arrays)."""
        meta = {
            "n_rows": self.n_rows,
            "t_min": self.t_min,
            "t_max": self.t_max,
            "widths": [lev.width for lev in self.levels],
            "steps_digest": steps_digest,
        }
        levels = [{name: getattr(lev, name) for name in lod_cache.FIELDS} for lev in self.levels]
        lod_cache.save(folder, levels, meta)

    @classmethod
    def load(cls, root: Path, folder: Path, expect: dict) -> _Pyramid | None:
        """The pyramid saved in ``folder`` (memory-mapped) when it is the one a build of these
        steps gives (:func:`analyser.trace.lod_cache.load`'s checks), else None."""
        widths = _widths(expect["n_rows"], expect["t_min"], expect["t_end"])
        found = lod_cache.load(root, folder, expect, widths)
        if found is None:
            return None
        arrays, meta = found
        levels = [_Level(float(w), **arrs) for w, arrs in zip(widths, arrays)]
        return cls(levels, expect["n_rows"], float(meta["t_min"]), float(meta["t_max"]))

    def level_for(self, pixel_cycles: float) -> int | None:
        """Index of the coarsest level whose bucket is no wider than a pixel, or None."""
        best = None
        for i, lev in enumerate(self.levels):
            if lev.width <= pixel_cycles:
                best = i
        return best

    def query(self, i: int, t0: float, t1: float):
        lev = self.levels[i]
        b_hi = int(np.floor((t1 - self.t_min) / lev.width))
        hi = int(np.searchsorted(lev.bucket, b_hi, side="right"))
        lo = int(np.searchsorted(lev.cummax_x1, t0, side="right"))
        sl = slice(lo, max(lo, hi))
        keep = (lev.x1[sl] > t0) & (lev.x0[sl] < t1)
        return (
            lev.key[sl][keep],
            lev.x0[sl][keep],
            lev.x1[sl][keep],
            lev.count[sl][keep],
            lev.row[sl][keep],
        )
