"""The strict-value policy of run options: one rule for every field, present and future
(used by :mod:`engine.config`'s validators and by the checks of stored run configurations)."""

from __future__ import annotations

import json
import math
from typing import Any

from engine.errors import ConfigError

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


def fields_problem(data: dict[str, Any]) -> str | None:
    """The first field of ``data`` (a run-configuration dict) refused by :func:`value_problem`;
    target overrides get the same policy (their ranges are the target's own)."""
    from engine.config import RunConfig

    fields = RunConfig.model_fields
    for name, value in data.items():
        field = fields.get(name)
        if field is None:
            continue  # unknown keys: pydantic's 'did you mean'
        if name == "target_overrides" and isinstance(value, dict):
            for key, v in value.items():
                bad = value_problem(
                    f"target_overrides.{key}",
                    v,
                    {int, float} if not isinstance(v, bool) else {bool},
                )
                if bad:
                    return bad
            continue
        bad = value_problem(name, value, _kinds(field.annotation), _has_upper_bound(field))
        if bad:
            return bad
    return None


def stored_config_problem(doc: dict[str, Any]) -> str | None:
    """Why a run configuration stored in a profile cannot be used, or ``None``: each known
    option's value against the kind of value it takes (a number, a flag, a text, a list) and its
    bounds, with the strict-value policy. Option by option and without the choices of text
    options, so older and synthetic profiles (model 'synthetic') still read."""
    from types import UnionType
    from typing import Literal, Union, get_args, get_origin

    from engine.config import RunConfig

    bad = fields_problem(doc)
    if bad:
        return bad
    for name, value in doc.items():
        field = RunConfig.model_fields.get(name)
        if field is None or value is None:
            continue
        ann = field.annotation
        args = [a for a in get_args(ann) if a is not type(None)]
        if get_origin(ann) in (Union, UnionType) and len(args) == 1:
            ann = args[0]  # Optional[X]
        origin = get_origin(ann)
        kinds = {origin} if origin in (list, dict) else _kinds(ann)
        if kinds & {int, float} and not kinds & {str}:
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"{name}: expected a number, got {value!r:.40}."
            bad = _bounds_problem(name, value, field)
        elif kinds == {bool} and not isinstance(value, bool):
            bad = f"{name}: expected true or false, got {value!r:.40}."
        elif (kinds & {str} or origin is Literal) and not kinds & {list, dict}:
            bad = None if isinstance(value, str) else f"{name}: expected a text, got {value!r:.40}."
        elif kinds & {list} and not isinstance(value, list):
            bad = f"{name}: expected a list, got {value!r:.40}."
        elif kinds & {dict} and not isinstance(value, dict):
            bad = f"{name}: expected a table, got {value!r:.40}."
        if bad:
            return bad
    return None


def toml_value(value: Any) -> str:
    """``value`` (a run option's) as TOML text: booleans, numbers, strings, lists and tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise ConfigError(f"cannot write {value!r} to TOML.")


def _toml_key(key: str) -> str:
    """A bare TOML key when it is one (``clock_hz``), else quoted (ONNX input ``input.1``)."""
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else json.dumps(key)
