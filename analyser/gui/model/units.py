"""Memory units preference (bytes / kB / KiB) and number formatting. No Qt.

PopVision users choose how memory is shown: plain bytes, decimal kilobytes (1 kB = 1000 B) or
binary kibibytes (1 KiB = 1024 B). Larger values step up within the same family (MB / MiB, ...).
"""

from __future__ import annotations

import math
from enum import StrEnum


class MemoryUnits(StrEnum):
    BYTES = "bytes"
    KB = "kB"
    KIB = "KiB"

    @classmethod
    def parse(cls, value: object, default: MemoryUnits | None = None) -> MemoryUnits:
        for unit in cls:
            if value == unit.value or value == unit:
                return unit
        if default is not None:
            return default
        raise ValueError(f"unknown memory unit {value!r}; choose bytes, kB or KiB")

    @property
    def base(self) -> int:
        return 1024 if self is MemoryUnits.KIB else 1000

    @property
    def prefixes(self) -> tuple[str, ...]:
        if self is MemoryUnits.KIB:
            return ("B", "KiB", "MiB", "GiB", "TiB")
        return ("B", "kB", "MB", "GB", "TB")


def format_bytes(value: float | int | None, units: MemoryUnits = MemoryUnits.KIB) -> str:
    """Human-readable bytes: ``'1,234,567 B'`` (bytes), ``'1.18 MiB'`` (KiB), ``'1.23 MB'`` (kB)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if units is MemoryUnits.BYTES:
        return f"{round(value):,} B"
    sign = "-" if value < 0 else ""
    v = abs(float(value))
    prefixes = units.prefixes
    i = 0
    while v >= units.base and i < len(prefixes) - 1:
        v /= units.base
        i += 1
    if i == 0:
        return f"{sign}{round(v):,} B"
    return f"{sign}{v:,.2f} {prefixes[i]}"


def format_delta_bytes(value: float | int, units: MemoryUnits = MemoryUnits.KIB) -> str:
    """Signed bytes: ``'+1.50 MiB'``, ``'-512 B'``, ``'0 B'``."""
    text = format_bytes(value, units)
    return text if value <= 0 else "+" + text


def axis_scale(units: MemoryUnits, max_value: float = 0.0) -> tuple[float, str]:
    """(divisor, label) for a memory chart axis: bytes, or kB / KiB (MB / MiB when large)."""
    if units is MemoryUnits.BYTES:
        return 1.0, "bytes"
    base = units.base
    if max_value >= base**3:
        return float(base**3), units.prefixes[3]
    if max_value >= base**2 * 10:
        return float(base**2), units.prefixes[2]
    return float(base), units.prefixes[1]


def format_count(value: float | int | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def format_percent(fraction: float | None, digits: int = 1) -> str:
    if fraction is None or (isinstance(fraction, float) and math.isnan(fraction)):
        return "-"
    return f"{100.0 * fraction:.{digits}f}%"


def format_delta_percent(a: float, b: float) -> str:
    """Relative change from a to b as '+12.5%' ('n/a' when a is 0 and b is not)."""
    if a == 0:
        return "0.0%" if b == 0 else "n/a"
    return f"{100.0 * (b - a) / abs(a):+.1f}%"
