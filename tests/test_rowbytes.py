"""analyser.export.rowbytes: vectorised records equal their one-by-one Python formatting."""

from __future__ import annotations

import numpy as np
import pytest

from analyser.export import rowbytes
from analyser.export.rowbytes import RowBytes, varint


def _edge_ints(rng, n, lo, hi):
    edges = np.array([lo, hi, 0, 1, 9, 10, 99, 100, 127, 128, 16383, 16384], np.int64)
    edges = edges[(edges >= lo) & (edges <= hi)]
    return np.concatenate([edges, rng.integers(lo, hi, n, dtype=np.int64)])


@pytest.mark.parametrize("block_rows", [3, 4096])
def test_records_equal_python_formatting(block_rows, monkeypatch):
    monkeypatch.setattr(rowbytes, "BLOCK_ROWS", block_rows)
    rng = np.random.default_rng(3)
    a = _edge_ints(rng, 500, -(10**12), 10**15)
    n = a.size
    u = np.abs(a).astype(np.uint64)
    u[0] = np.uint64(2**64 - 1)
    f = rng.random(n) * 10.0 ** rng.integers(0, 10, n)
    idx = rng.integers(0, 4, n)
    table = [b"", b"x", b'"Compute"', "Ünïcode".encode() * 40]  # one entry wider than 256
    where = rng.random(n) < 0.5
    r = RowBytes(n)
    r.const(b"[")
    r.decimal(a)
    r.const(b",")
    r.varint(u)
    r.const(b";", where)
    r.lookup(table, idx)
    r.fixed(f, 4)
    r.decimal(a, where)
    r.const(b"]\n")
    expected = b"".join(
        b"[%d,%s%s%s%s%s]\n"
        % (
            int(a[i]),
            varint(int(u[i])),
            b";" if where[i] else b"",
            table[idx[i]],
            f"{f[i]:.4f}".encode(),
            b"%d" % a[i] if where[i] else b"",
        )
        for i in range(n)
    )
    assert r.tobytes() == expected
    for workers in (1, 2):
        assert b"".join(x.tobytes() for x in r.blocks(workers)) == expected


def test_varint_matches_protobuf():
    from google.protobuf.internal.encoder import _VarintBytes

    for v in (0, 1, 127, 128, 300, 2**32, 2**63 - 1, 2**64 - 1):
        assert varint(v) == _VarintBytes(v)
        r = RowBytes(1)
        r.varint(np.array([v], np.uint64))
        assert r.tobytes() == _VarintBytes(v)


def test_lengths_returned_per_row():
    r = RowBytes(3)
    assert r.decimal(np.array([-5, 0, 1234])).tolist() == [2, 1, 4]
    assert r.varint(np.array([0, 200, 2**21])).tolist() == [1, 2, 4]
    assert r.const(b"ab", np.array([True, False, True])).tolist() == [2, 0, 2]
    assert r.lookup([b"", b"xyz"], np.array([0, 1, 1])).tolist() == [0, 3, 3]
    assert RowBytes(0).tobytes() == b""
