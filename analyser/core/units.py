"""The one set of formatters of the CLI, the reports and the GUI: bytes, counts, shares, rates,
seconds and changes, and the memory units preference (bytes / kB / KiB).

Two words are fixed here and nowhere else: :data:`MISSING` marks a value that does not exist (a
profile without execution has no cycles), and :data:`NEW` is the relative change of a figure that
was zero and is not any more. GUI modules add only presentation (colours, alignment).

PopVision users choose how memory is shown: plain bytes, decimal kilobytes (1 kB = 1000 B) or
binary kibibytes (1 KiB = 1024 B). Larger values step up within the same family (MB / MiB, ...).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typing.TypeIs is Python 3.13; the checker reads it from typing_extensions
    from typing_extensions import TypeIs

#: The mark of a missing value (every formatter returns it for None and NaN).
MISSING = "-"
#: The relative change of a figure from zero to non-zero.
NEW = "new"


class MemoryUnits(StrEnum):
    """How memory is shown (``analyse summary --units``, the GUI's preference)."""

    BYTES = "bytes"
    KB = "kB"
    KIB = "KiB"

    @classmethod
    def parse(cls, value: object, default: MemoryUnits | None = None) -> MemoryUnits:
        """The units named ``value``; ``default`` (or ValueError) when it names none."""
        for unit in cls:
            if value == unit.value or value == unit:
                return unit
        if default is not None:
            return default
        raise ValueError(f"unknown memory unit {value!r}; choose bytes, kB or KiB")

    @property
    def base(self) -> int:
        """1024 for binary units, 1000 for decimal ones."""
        return 1024 if self is MemoryUnits.KIB else 1000

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The unit names from bytes up."""
        if self is MemoryUnits.KIB:
            return ("B", "KiB", "MiB", "GiB", "TiB")
        return ("B", "kB", "MB", "GB", "TB")


def _missing(value: object) -> TypeIs[None]:
    # TypeIs: where this is False the checker knows the value is there (a NaN float is
    # missing too, which the narrowing to None on the True side does not claim to exclude)
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_bytes(n: float | None, unit: str = "KiB") -> str:
    """Bytes in binary (``KiB``: '1.18 MiB'), decimal (``kB``: '1.23 MB') or plain (``bytes``:
    '1,234,567 B') units; ``unit`` is a :class:`MemoryUnits` or its value."""
    if _missing(n):
        return MISSING
    units = MemoryUnits.parse(unit, MemoryUnits.KIB)
    if units is MemoryUnits.BYTES:
        return f"{int(n):,} B"
    v = float(n)
    i = 0
    while abs(v) >= units.base and i < len(units.prefixes) - 1:
        v /= units.base
        i += 1
    return f"{int(v):,} B" if i == 0 else f"{v:,.2f} {units.prefixes[i]}"


def fmt_bytes_delta(delta: float | None, unit: str = "KiB") -> str:
    """A signed difference of bytes: '+1.50 MiB', '-512 B', '0 B'."""
    text = fmt_bytes(delta, unit)
    return "+" + text if not _missing(delta) and delta > 0 else text


def fmt_int(n: float | None) -> str:
    """A whole number with thousands separators ('1,235' for 1234.5)."""
    return MISSING if _missing(n) else f"{round(n):,}"


def fmt_count(n: float | None) -> str:
    """A count: whole numbers as :func:`fmt_int`, fractions with two decimals ('2.50')."""
    if _missing(n):
        return MISSING
    if isinstance(n, float) and not n.is_integer():
        return f"{n:,.2f}"
    return f"{int(n):,}"


def fmt_signed_int(n: float | None) -> str:
    """A signed whole number: '+1,234', '-5', '+0'."""
    return MISSING if _missing(n) else f"{round(n):+,}"


def fmt_rel_change(change: float | None) -> str:
    """A relative change (0.05 = 5%) as '+5.0%'; :data:`NEW` for an infinite one (from zero)."""
    if _missing(change):
        return MISSING
    return NEW if math.isinf(change) else f"{_no_negative_zero(100 * change, 1):+,.1f}%"


def fmt_yes_no(value: object) -> str:
    """'yes' or 'no'."""
    return "yes" if value else "no"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    """A share (0..1) as a percentage: '12.3%' ('2,195.5%' for 21.955: thousands separated)."""
    return MISSING if _missing(x) else f"{100 * x:,.{digits}f}%"


def _no_negative_zero(value: float, digits: int) -> float:
    """``value`` rounded to ``digits`` places, with a change that rounds to zero read as +0
    (a tiny decrease would otherwise print as '-0.0')."""
    rounded = round(value, digits)
    return 0.0 if rounded == 0 else rounded


def fmt_pts_delta(before: float | None, after: float | None) -> str:
    """The change of a share in percentage points: '+1.5 pts'."""
    if _missing(before) or _missing(after):
        return MISSING
    return f"{_no_negative_zero(100 * (after - before), 1):+,.1f} pts"


def fmt_delta_pct(before: float | None, after: float | None) -> str:
    """Relative change from ``before`` to ``after`` as '+12.3%' (:data:`NEW` from zero)."""
    if _missing(before) or _missing(after):
        return MISSING
    if before == 0:
        return "0.0%" if after == 0 else NEW
    return f"{_no_negative_zero(100 * (after - before) / abs(before), 1):+,.1f}%"


def fmt_change(before: float | None, after: float | None, unit: str | None = None) -> str:
    """The change from ``before`` to ``after``, absolute and relative: '+1,234 (+5.0%)' for counts,
    '+1.50 MiB (+50.0%)' for bytes (``unit`` given); '0' / '0 B' when equal."""
    if _missing(before) or _missing(after):
        return MISSING
    delta = after - before
    text = fmt_bytes_delta(delta, unit) if unit is not None else f"{round(delta):+,}"
    if delta == 0:
        return fmt_bytes(0, unit) if unit is not None else "0"
    return f"{text} ({fmt_delta_pct(before, after)})"


def rel_change(before: float | None, after: float | None) -> float | None:
    """The relative change from ``before`` to ``after`` (inf from 0); None if either is missing."""
    if before is None or after is None:
        return None
    if before == 0:
        return 0.0 if after == 0 else math.inf
    return (after - before) / abs(before)


def fmt_rate(x: float | None) -> str:
    """A rate or a ratio with one decimal ('1,725.7')."""
    return MISSING if _missing(x) else f"{x:,.1f}"


def fmt_seconds(seconds: float | None) -> str:
    """Seconds as text ('1.250 s', '12.5 ms', ...); MISSING when missing."""
    if _missing(seconds):
        return MISSING
    if seconds >= 1:
        return f"{seconds:,.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} µs"


def axis_scale(units: MemoryUnits, max_value: float = 0.0) -> tuple[float, str]:
    """(divisor, label) for a memory chart axis: bytes, or kB / KiB (MB / MiB from one of
    them: a stash axis read "3,000 KiB")."""
    if units is MemoryUnits.BYTES:
        return 1.0, "bytes"
    base = units.base
    if max_value >= base**3:
        return float(base**3), units.prefixes[3]
    if max_value >= base**2:
        return float(base**2), units.prefixes[2]
    return float(base), units.prefixes[1]
