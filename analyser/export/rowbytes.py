"""Vectorised byte assembly: one record of bytes per row, built from numpy columns.

The trace exporters write one record per executed step (a line of JSON, or a few protobuf
TracePackets). Formatting them one by one in Python costs microseconds per step; here a record is
a sequence of *segments* (a constant, a varint, a decimal number, a string looked up in a table),
and each segment is written for all rows at once::

    rows = RowBytes(n)
    rows.const(b'{"ts":')
    rows.decimal(ts)
    rows.const(b"}")
    data = rows.tobytes()        # the n records, concatenated

Each segment occupies a fixed-width slot of an ``(n, width)`` byte matrix plus a mask of the
bytes it really uses (a varint of 2 bytes in a 10-byte slot, a name shorter than the longest);
the result is the masked bytes in row-major order (one boolean compress). Every segment also
returns its length per row, so enclosing protobuf messages can be given their length prefixes.

Encodings follow the protobuf wire format (base-128 varints, little-endian groups, high bit set
on all but the last byte: https://protobuf.dev/programming-guides/encoding/) and JSON numbers
(RFC 8259: optional minus, no leading zeros).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO

import numpy as np

_POW10 = 10 ** np.arange(19, dtype=np.int64)


#: Rows assembled at a time: the byte matrix of a block (rows x record width) stays in the CPU
#: cache while its columns are written and compressed.
BLOCK_ROWS = 4096
#: Threads assembling blocks (the machine has 2 cores; 1 disables threading).
WORKERS = 2


class RowBytes:
    """Records of ``n`` rows, each the concatenation of the segments added in order.

    Segments are recorded with their per-row values; :meth:`toarray` assembles the bytes block
    by block of :data:`BLOCK_ROWS` rows.
    """

    def __init__(self, n: int) -> None:
        self.n = int(n)
        # (kind, width, payload, where): kind "const" (bytes), "varint" / "decimal" (values,
        # lengths), "digits" (values of a fixed-width zero-padded field), "table" (matrix,
        # lengths, index)
        self._segs: list[tuple[str, int, tuple, np.ndarray | None]] = []

    def _where(self, where: np.ndarray | None) -> np.ndarray | None:
        if where is None:
            return None
        where = np.asarray(where, bool)
        return None if where.all() else where

    # -- segments ---------------------------------------------------------------------------
    def const(self, data: bytes, where: np.ndarray | None = None) -> np.ndarray:
        """The same bytes in every row (only where ``where`` is true, when given)."""
        where = self._where(where)
        segs = self._segs
        if where is None and segs and segs[-1][0] == "const" and segs[-1][3] is None:
            data = segs[-1][2][0] + data  # merge with the previous constant
            segs.pop()
        segs.append(("const", len(data), (data,), where))
        if where is None:
            return np.full(self.n, len(data), np.int64)
        return np.where(where, len(data), 0).astype(np.int64)

    def varint(self, values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        """Protobuf base-128 varints of non-negative integers (uint64 wire values)."""
        v = np.asarray(values).astype(np.uint64)
        lens = varint_lengths(v)
        where = self._where(where)
        width = int(lens.max()) if self.n else 1
        self._segs.append(("varint", width, (v, lens), where))
        return lens if where is None else np.where(where, lens, 0)

    def decimal(self, values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        """Integers as ASCII decimal (a leading minus for negative values)."""
        v = np.asarray(values).astype(np.int64)
        neg = v < 0
        if neg.any():
            self.const(b"-", neg if where is None else neg & np.asarray(where, bool))
        a = np.abs(v)
        lens = decimal_lengths(a)
        where = self._where(where)
        width = int(lens.max()) if self.n else 1
        self._segs.append(("decimal", width, (_unsigned(a), lens), where))
        lens = lens + neg
        return lens if where is None else np.where(where, lens, 0)

    def fixed(self, values: np.ndarray, decimals: int, where: np.ndarray | None = None) -> None:
        """Non-negative numbers as ASCII with exactly ``decimals`` digits after the point
        (like ``f"{x:.{decimals}f}"``, rounding half to even on the scaled value)."""
        q = np.rint(np.asarray(values, np.float64) * 10.0**decimals).astype(np.int64)
        if self.n and q.min() < 0:
            raise ValueError("fixed() formats non-negative values only")
        scale = int(_POW10[decimals])
        self.decimal(q // scale, where)
        self.const(b".", where)
        self._segs.append(("digits", decimals, (_unsigned(q % scale),), self._where(where)))

    def lookup(
        self, table: Sequence[bytes], index: np.ndarray, where: np.ndarray | None = None
    ) -> np.ndarray:
        """``table[index[row]]`` in each row (the table is small: names, enum strings)."""
        return self.lookup_table(*byte_table(table), index, where)

    def lookup_table(
        self,
        mat_t: np.ndarray,
        lens_t: np.ndarray,
        index: np.ndarray,
        where: np.ndarray | None = None,
    ) -> np.ndarray:
        """Like :meth:`lookup` with a table prepared once by :func:`byte_table`."""
        idx = np.asarray(index, np.int64)
        lens = lens_t[idx]
        where = self._where(where)
        width = int(lens.max()) if self.n else 1
        self._segs.append(("table", width, (mat_t, lens, idx), where))
        return lens if where is None else np.where(where, lens, 0)

    def emit(
        self, *parts: bytes | np.ndarray | tuple[tuple[np.ndarray, np.ndarray], np.ndarray]
    ) -> RowBytes:
        """Append ``parts`` in order: the field-by-field sequence of a record, written once.
        ``bytes`` is a constant; an array of integers, decimals; an array of floats, fixed
        with 4 decimals (the exporters' microseconds); ``(table, index)`` a lookup in a table
        of :func:`byte_table`. Returns ``self``."""
        for part in parts:
            if isinstance(part, bytes):
                self.const(part)
            elif isinstance(part, tuple):
                self.lookup_table(*part[0], part[1])
            elif np.asarray(part).dtype.kind == "f":
                self.fixed(part, 4)
            else:
                self.decimal(part)
        return self

    # -- result -----------------------------------------------------------------------------
    def tobytes(self) -> bytes:
        """The records of all rows, in row order."""
        return self.toarray().tobytes()

    def toarray(self) -> np.ndarray:
        """The records of all rows, in row order, as one uint8 array."""
        out = list(self.blocks())
        if not out:
            return np.zeros(0, np.uint8)
        return out[0] if len(out) == 1 else np.concatenate(out)

    def write(self, fh: IO[bytes]) -> int:
        """Write the records to a binary file; returns the bytes written."""
        total = 0
        for block in self.blocks():
            fh.write(block.data)
            total += block.size
        return total

    def blocks(self, workers: int | None = None) -> Iterator[np.ndarray]:
        """The records in row order, as uint8 arrays of :data:`BLOCK_ROWS` rows each, assembled
        by ``workers`` threads (default :data:`WORKERS`; numpy releases the GIL inside its
        loops)."""
        if not self._segs or self.n == 0:
            return
        workers = WORKERS if workers is None else workers
        width = sum(s[1] for s in self._segs)
        bn = min(self.n, BLOCK_ROWS)
        variable = []
        col = 0
        for kind, w, _payload, where in self._segs:
            if kind != "const" or where is not None:
                variable.append((kind, slice(col, col + w), _payload, where))
            col += w
        local = threading.local()

        def block(r0: int) -> np.ndarray:
            bufs = getattr(local, "bufs", None)
            if bufs is None:
                bufs = local.bufs = self._buffers(bn, width)
            r1 = min(self.n, r0 + bn)
            return self._block(variable, r0, r1, bufs[0][: r1 - r0], bufs[1][: r1 - r0])

        starts = range(0, self.n, bn)
        if workers <= 1 or len(starts) == 1:
            yield from map(block, starts)
            return
        with ThreadPoolExecutor(workers) as ex:
            yield from ex.map(block, starts)

    def _buffers(self, bn: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Byte matrix and mask of one block, with the constant columns filled (the same in
        every block: the variable segments never write them)."""
        mat = np.empty((bn, width), np.uint8)
        mask = np.empty((bn, width), bool)
        col = 0
        for kind, w, payload, _where in self._segs:
            sl = slice(col, col + w)
            col += w
            if kind == "const":
                mat[:, sl] = np.frombuffer(payload[0], np.uint8)
            if kind in ("const", "digits"):
                mask[:, sl] = True
        return mat, mask

    @staticmethod
    def _block(variable: list, r0: int, r1: int, mat: np.ndarray, mask: np.ndarray) -> np.ndarray:
        for kind, sl, payload, where in variable:
            w = sl.stop - sl.start
            if kind == "varint":
                v, lens = payload[0][r0:r1], payload[1][r0:r1]
                for k in range(w):
                    byte = (v >> np.uint64(7 * k)) & np.uint64(0x7F)
                    mat[:, sl.start + k] = byte | ((lens > k + 1) * np.uint64(0x80))
                mask[:, sl] = _cols(w) < lens[:, None]
            elif kind in ("decimal", "digits"):
                q = payload[0][r0:r1]
                ten = q.dtype.type(10)
                for k in range(w):  # right-aligned digits; leading columns masked out
                    # unsigned // by a scalar is a multiply (numpy's libdivide): 3x faster
                    # than int64 divmod
                    q10 = q // ten
                    mat[:, sl.stop - 1 - k] = q - q10 * ten
                    q = q10
                mat[:, sl] += 48
                if kind == "decimal":
                    mask[:, sl] = _cols(w) >= (w - payload[1][r0:r1])[:, None]
            elif kind == "table":
                tab, lens, idx = payload
                mat[:, sl] = tab[idx[r0:r1], :w]
                mask[:, sl] = _cols(w) < lens[r0:r1, None]
            if where is not None:
                if kind == "const":
                    mask[:, sl] = where[r0:r1, None]
                else:
                    mask[:, sl] &= where[r0:r1, None]
        return mat[mask]


def _unsigned(a: np.ndarray) -> np.ndarray:
    """Non-negative integers as uint32 when they fit, else uint64 (for the digit loop)."""
    a = np.asarray(a)
    if a.size and int(a.max()) >= 1 << 32:
        return a.astype(np.uint64)
    return a.astype(np.uint32)


#: Column numbers of a slot (widths above this are rare: names longer than 256 bytes).
_RANGE = np.arange(256)


def _cols(w: int) -> np.ndarray:
    return _RANGE[:w] if w <= _RANGE.size else np.arange(w)


def varint_lengths(v: np.ndarray) -> np.ndarray:
    """Bytes of the base-128 varint of each (uint64) value: 1 for 0..127, 2 up to 16383..."""
    v = np.asarray(v).astype(np.uint64)
    lens = np.ones(v.shape, np.int64)
    if v.size == 0:
        return lens
    top = int(v.max())
    k = 1
    while k < 10 and top >= 1 << (7 * k):
        lens += v >= np.uint64(1 << (7 * k))
        k += 1
    return lens


def decimal_lengths(a: np.ndarray) -> np.ndarray:
    """Digits of each non-negative int64 value (1 for 0)."""
    a = np.asarray(a, np.int64)
    lens = np.ones(a.shape, np.int64)
    if a.size == 0:
        return lens
    top = int(a.max())
    k = 1
    while k < 19 and top >= _POW10[k]:
        lens += a >= _POW10[k]
        k += 1
    return lens


def varint(value: int) -> bytes:
    """One base-128 varint (for the constant parts of a record)."""
    out = bytearray()
    value = int(value)
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def byte_table(table: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """A list of byte strings as a padded ``(len, width)`` matrix and their lengths."""
    lens = np.fromiter((len(b) for b in table), np.int64, len(table))
    width = max(1, int(lens.max()) if lens.size else 1)
    flat = np.frombuffer(b"".join(table), np.uint8)
    mat = np.zeros((len(table), width), np.uint8)
    if flat.size:
        starts = np.cumsum(lens) - lens
        rows = np.repeat(np.arange(len(table)), lens)
        cols = np.arange(flat.size) - np.repeat(starts, lens)
        mat[rows, cols] = flat
    return mat, lens


__all__ = ["RowBytes", "byte_table", "decimal_lengths", "varint", "varint_lengths"]
