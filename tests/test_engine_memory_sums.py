"""build_memory's per-tile range sums: np.bincount (float64 inside) where that is exact, and
still exact for byte counts beyond float64's 2**53 (np.add.at there)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.compiler.memory_records import _spread_ipus


def _reference(values, ipu, t0, tn, n_ipus, size):
    out = np.zeros((n_ipus, size), dtype=object)  # Python integers: no rounding, no overflow
    for v, i, a, n in zip(values.tolist(), ipu.tolist(), t0.tolist(), tn.tolist()):
        out[i, a : a + n] += v
    return out


@pytest.mark.parametrize("largest", [1_000, 2**40, 2**58])
def test_tile_range_sums_are_exact(largest):
    rng = np.random.default_rng(largest % 97)
    n, n_ipus, size = 300, 3, 50
    values = rng.integers(-largest, largest, n, dtype=np.int64)
    values[:3] = largest - 1  # odd values near the top: float64 would round them
    ipu = rng.integers(0, n_ipus, n)
    t0 = rng.integers(0, size, n)
    tn = rng.integers(0, size - t0 + 1)
    want = _reference(values, ipu, t0, tn, n_ipus, size)
    got = _spread_ipus(values, ipu, t0, tn, n_ipus, size)
    assert got.dtype == np.int64 and (got.astype(object) == want).all()
