"""Formatting of bytes, cycles, shares and rates for the CLI, reports and GUI."""

from __future__ import annotations

import math

_BIN = ("B", "KiB", "MiB", "GiB", "TiB")
_DEC = ("B", "kB", "MB", "GB", "TB")


def fmt_bytes(n: float | None, unit: str = "KiB") -> str:
    """Bytes in binary (``KiB``), decimal (``kB``) or plain (``bytes``) units."""
    if n is None:
        return "-"
    if unit == "bytes":
        return f"{int(n):,} B"
    base, names = (1000.0, _DEC) if unit == "kB" else (1024.0, _BIN)
    v = float(n)
    i = 0
    while abs(v) >= base and i < len(names) - 1:
        v /= base
        i += 1
    return f"{int(v)} {names[i]}" if i == 0 else f"{v:,.2f} {names[i]}"


def fmt_int(n: float | None) -> str:
    return "-" if n is None else f"{round(n):,}"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    return (
        "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}%"
    )


def fmt_delta_pct(a: float | None, b: float | None) -> str:
    """Relative change from ``a`` to ``b`` as '+12.3%' ('-' when undefined)."""
    if a is None or b is None:
        return "-"
    if a == 0:
        return "0.0%" if b == 0 else "new"
    return f"{100 * (b - a) / abs(a):+.1f}%"


def rel_change(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if a == 0:
        return 0.0 if b == 0 else math.inf
    return (b - a) / abs(a)


def fmt_rate(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} µs"
