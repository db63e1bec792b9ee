"""The simulation cache's ``<key>.json`` read as untrusted input.

The cache is a folder anyone with the user's rights can edit, and its answers feed tune's table,
the insights' predicted effects and the GUI's what-ifs. :func:`cached_answer` accepts an entry
only when it is a regular file of bounded size holding a JSON object of the typed shape
:class:`CachedAnswer` (a cached status, the key it is stored under, figures that are numbers
where numbers belong, ``fits`` a boolean) and, for a simulated answer, the profile beside it is
a regular file. Anything else is a cache miss: the configuration is simulated again and the
entry rewritten.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
)

from analyser.sim.service.request import _EXECUTION_KEYS, FIGURE_KEYS
from profiles.inputs import InputPathError, read_regular, regular_stat

#: Largest cache entry read (an answer is a few kB; a refusal's sentence is short).
ENTRY_LIMIT = 256 << 10

Number = StrictInt | StrictFloat


class CachedAnswer(BaseModel):
    """The typed shape of a cache entry (``SimResponse.to_dict()`` of a cached status)."""

    model_config = ConfigDict(extra="ignore")
    key: str
    status: Literal["ok", "oom", "refused"]
    message: str = ""
    figures: dict[str, StrictBool | Number | None] = {}
    seconds: Number = Field(default=0.0, ge=0)
    attempts: StrictInt = Field(default=1, ge=1)
    tag: str = ""


#: Figures that are always numbers once simulated (memory); the execution's are numbers when
#: the configuration fits (None when it does not: no execution).
_MEMORY_KEYS = tuple(k for k in FIGURE_KEYS[: FIGURE_KEYS.index(_EXECUTION_KEYS[0])] if k != "fits")


def _number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)


def _figures_ok(status: str, figures: dict[str, Any]) -> bool:
    """The figures of a simulated answer: ``fits`` a boolean, the memory figures numbers, the
    execution's numbers (or None out of memory), any other None, a flag or a number."""
    if status == "refused":
        return True
    if not isinstance(figures.get("fits"), bool):
        return False
    if not all(_number(figures.get(k)) for k in _MEMORY_KEYS):
        return False
    for k in _EXECUTION_KEYS:
        v = figures.get(k)
        if not (_number(v) or (v is None and status == "oom")):
            return False
    rest = (v for k, v in figures.items() if k not in _MEMORY_KEYS + _EXECUTION_KEYS)
    return all(v is None or isinstance(v, bool) or _number(v) for v in rest)


def cached_answer(root: Path, key: str) -> dict[str, Any] | None:
    """The entry ``<key>.json`` of the cache ``root`` as a dict for ``SimResponse.from_dict``
    (with ``profile`` set for a simulated answer), or None when it is absent or not usable."""
    try:
        raw = read_regular(root / f"{key}.json", "cache entry", limit=ENTRY_LIMIT)
        doc = json.loads(raw.decode("utf-8"))
        answer = CachedAnswer.model_validate(doc)
    except (InputPathError, ValueError, RecursionError, ValidationError):
        return None
    if answer.key != key or not _figures_ok(answer.status, answer.figures):
        return None
    out = answer.model_dump()
    if answer.status in ("ok", "oom"):
        prof = root / f"{key}.h5"
        try:
            regular_stat(prof, "cached profile")
        except InputPathError:
            return None
        out["profile"] = str(prof)
    return out


__all__ = ["ENTRY_LIMIT", "CachedAnswer", "cached_answer"]
