"""A 2-D array given as runs of equal values, laid out row block by row block on demand.

The per-tile cycles of a profile (``/programs/tile_cycles``, programs x tiles) are mostly runs:
a program runs on a contiguous range of tiles, its first tiles for its longest time, the rest
for a shorter one, and every other tile is 0. Laid out whole, walkthrough step 4's array is
6,574 x 1,472 int32 = 38 MiB, of which the first touch of a fresh allocation costs 6-60 ms on
a machine whose transparent huge pages compact memory on demand (docs/performance.md, issue
15). :class:`RunRows` keeps the runs (a few values per row) and gives the rows as dense numpy
blocks when asked: the writer (:func:`profiles.write_profile`) writes it in blocks of about
1 MiB, the same values, chunks and filters as the dense array, and checks its values from the
runs. :func:`tile_ranges` makes the engine's (a first share, the rest, zeros).

Anything else may use it as a read-only array: ``shape``, ``dtype``, ``len()``, rows by index,
slice, index array or mask (``r[5]``, ``r[10:20]``, ``r[ids]``), ``np.asarray(r)`` for the whole
array, ``min()`` / ``max()``.
"""

from __future__ import annotations

import numpy as np


class RunRows:
    """Rows of ``width`` values, each row the concatenation of runs of equal values.

    Row ``i`` is ``values[i, 0]`` repeated ``lengths[i, 0]`` times, then ``values[i, 1]``
    repeated ``lengths[i, 1]`` times, and so on; the lengths of every row sum to ``width``.
    ``values`` (integers or booleans) gives the dtype of the array. Raises ``ValueError`` (one
    sentence) when the runs do not describe such an array.
    """

    def __init__(self, values: np.ndarray, lengths: np.ndarray, width: int) -> None:
        values = np.asarray(values)
        lengths = np.asarray(lengths)
        width = int(width)
        if values.ndim != 2 or lengths.shape != values.shape:
            raise ValueError(
                f"runs need values and lengths of the same 2-D shape, got {values.shape} and "
                f"{lengths.shape}."
            )
        if values.dtype.kind not in "iub" or lengths.dtype.kind not in "iu":
            raise ValueError(
                f"runs need integer values and lengths, got {values.dtype} and {lengths.dtype}."
            )
        if width < 0:
            raise ValueError(f"rows of runs need a width of at least 0, got {width}.")
        if lengths.size and lengths.min() < 0:
            i = int(np.argmax((lengths < 0).any(axis=1)))
            raise ValueError(f"row {i} of the runs has a negative run length.")
        sums = lengths.sum(axis=1, dtype=np.int64)
        if (sums != width).any():
            i = int(np.argmax(sums != width))
            raise ValueError(
                f"the run lengths of row {i} add up to {int(sums[i])}, not the width {width}."
            )
        self.values = values
        self.lengths = lengths.astype(np.int64, copy=False)
        self.width = width

    # -- array-like ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """(rows, width) of the run-length table."""
        return (len(self.values), self.width)

    @property
    def dtype(self) -> np.dtype:
        """The values' dtype."""
        return self.values.dtype

    ndim = 2

    @property
    def size(self) -> int:
        """The number of cells (rows x width)."""
        return len(self.values) * self.width

    @property
    def nbytes(self) -> int:
        """Bytes of the table once expanded."""
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return (
            f"RunRows(shape={self.shape}, dtype={self.dtype}, runs per row={self.values.shape[1]})"
        )

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Dense rows ``start:stop`` (clipped to the array, as a slice is)."""
        start, stop, _ = slice(start, stop).indices(len(self))
        stop = max(start, stop)
        return self._lay_out(self.values[start:stop], self.lengths[start:stop])

    def _lay_out(self, values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        out = np.repeat(values.ravel(), lengths.ravel())
        return out.reshape(len(values), self.width)

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, tuple):
            if len(key) == 1:
                key = key[0]
            else:  # rows first, then the rest of the index on the dense rows
                first = self[key[0]]
                rest = key[1:] if np.ndim(first) == 1 else (slice(None), *key[1:])
                return first[rest]
        if isinstance(key, slice) and key.step in (None, 1):
            return self.rows(*key.indices(len(self))[:2])
        idx = np.arange(len(self))[key]
        if idx.ndim == 0:
            i = int(idx)
            return self._lay_out(self.values[i : i + 1], self.lengths[i : i + 1])[0]
        return self._lay_out(self.values[idx], self.lengths[idx])

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.rows(0, len(self))
        return out if dtype is None else out.astype(dtype, copy=False)

    # -- values ---------------------------------------------------------------------------------
    def present(self) -> np.ndarray:
        """The values the array holds (each run's value once, empty runs left out): its min, max
        and any value rule are those of this short array."""
        return self.values[self.lengths > 0]

    def min(self):
        """The smallest present value."""
        return self.present().min()

    def max(self):
        """The largest present value."""
        return self.present().max()


def tile_ranges(start, count, n_first, first, rest, width: int, dtype=np.int32) -> RunRows | None:
    """Rows that hold ``first`` on the first ``n_first`` of ``count`` tiles from tile ``start``,
    ``rest`` on the others of them and 0 on every other tile, clipped to ``width`` tiles (the
    compile's compact per-tile cycles: a program's longest and shortest tile shares), as runs
    (four a row). Values are cast to ``dtype`` as ``astype`` would (wrapping). ``None`` when a
    run would be negative (a negative count or ``n_first``): no runs describe such a row."""
    start = np.asarray(start, np.int64)
    count = np.asarray(count, np.int64)
    a = np.clip(start, 0, width)
    b = np.clip(start + np.minimum(np.asarray(n_first, np.int64), count), 0, width)
    c = np.clip(start + count, 0, width)
    lengths = np.stack([a, b - a, c - b, width - c], axis=1)
    if lengths.min(initial=0) < 0:
        return None
    values = np.zeros((len(start), 4), dtype)
    values[:, 1] = first
    values[:, 2] = rest
    return RunRows(values, lengths, width)


__all__ = ["RunRows", "tile_ranges"]
