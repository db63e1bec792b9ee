"""The strict-value policy of run options: one rule for every field, present and future
(used by :mod:`engine.config`'s validators and by the checks of stored run configurations)."""

from __future__ import annotations

import math
from typing import Any

#: Whole numbers without an explicit upper bound stop here (more than any run uses; larger
#: values only overflow the engine's arithmetic).
MAX_INT = 2**31 - 1
#: Non-zero real numbers must lie within this magnitude range (1e-300 Hz, 1e300 loss scaling...
#: are not configurations, and they overflow or underflow the engine's arithmetic).
REAL_RANGE = (1e-12, 1e15)


def _kinds(annotation: Any) -> set[type]:
    from typing import get_args

    args = get_args(annotation)
    if not args:
        return {annotation} if isinstance(annotation, type) else set()
    out: set[type] = set()
    for a in args:
        out |= _kinds(a)
    return out


def _has_upper_bound(field: Any) -> bool:
    return any(
        getattr(m, "le", None) is not None or getattr(m, "lt", None) is not None
        for m in field.metadata
    )


def value_problem(name: str, value: Any, kinds: set[type], bounded: bool = True) -> str | None:
    """Why ``value`` is refused for a field of the given types, or ``None``: no bool for a
    number (TOML ``true`` was taken as 1), numbers finite (no inf / NaN, also as text), whole
    numbers below :data:`MAX_INT` unless the field has its own bound, non-zero reals within
    :data:`REAL_RANGE`."""
    numeric = kinds & {int, float}
    if not numeric:
        return None
    if isinstance(value, bool):
        if bool in kinds:
            return None
        return f"{name}: expected a number, got {str(value).lower()}."
    x: float | None = None
    if isinstance(value, int | float):
        x = float(value) if not isinstance(value, int) or abs(value) < 2**1000 else math.inf
    elif isinstance(value, str):
        try:
            x = float(value.strip())
        except ValueError:
            return None  # pydantic gives its own sentence
    if x is None:
        return None
    if not math.isfinite(x):
        return f"{name}: must be a finite number, got {value!r}."
    if float not in kinds and not bounded and abs(x) > MAX_INT:
        return f"{name}: {value} is more than any run uses (at most {MAX_INT:,})."
    if float in kinds and x != 0 and not REAL_RANGE[0] <= abs(x) <= REAL_RANGE[1]:
        return (
            f"{name}: {value!r} is not a plausible value (non-zero values lie within "
            f"{REAL_RANGE[0]:g}..{REAL_RANGE[1]:g} in magnitude)."
        )
    return None


def _bounds_problem(name: str, value: float, field: Any) -> str | None:
    for m in field.metadata:
        for attr, ok, word in (
            ("ge", lambda b: value >= b, ">="),
            ("gt", lambda b: value > b, ">"),
            ("le", lambda b: value <= b, "<="),
            ("lt", lambda b: value < b, "<"),
        ):
            b = getattr(m, attr, None)
            if b is not None and not ok(b):
                return f"{name}: {value!r} is out of range (must be {word} {b})."
    return None
