"""Byte amounts written into text by the analysis core (an insight's evidence and summary read
"952.00 KiB") shown in the user's memory units, so one page never mixes kB and KiB.
No Qt."""

from __future__ import annotations

import re

from analyser.core.units import MemoryUnits, fmt_bytes

#: Bytes per unit the core's formatters write (decimal and binary prefixes, plain bytes).
_FACTORS = {
    "B": 1,
    "bytes": 1,
    "kB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
_AMOUNT = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?) (KiB|MiB|GiB|TiB|kB|MB|GB|TB|bytes|B)\b")


def in_units(text: str, units: MemoryUnits | str) -> str:
    """``text`` with every byte amount ('952.00 KiB', '1.2 MB', '4,096 B') rewritten in
    ``units`` (the amount is read back from its printed digits: within the last digit)."""
    units = MemoryUnits.parse(units)

    def sub(match: re.Match[str]) -> str:
        value = float(match.group(1).replace(",", "")) * _FACTORS[match.group(2)]
        return fmt_bytes(round(value), units)

    return _AMOUNT.sub(sub, text)
