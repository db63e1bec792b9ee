"""Regression gates for ``analyse compare --fail-if``: conditions such as ``cycles>+5%``,
``peak_memory>+2%``, ``throughput<-3%``, ``oom_tiles>0`` or ``cycles_per_sample>=+1000``.

Grammar: ``METRIC OP VALUE`` where METRIC is a scalar of :class:`analyser.core.Metrics` (or an
alias: cycles, peak_memory, memory, throughput, oom, max_tile_memory, host_wait, rx, tx) or a
per-IPU figure ``ipuN.FIELD`` (e.g. ``ipu0.streamcopy_rx_bytes`` or ``ipu0.rx``), OP one
of ``> >= < <= == !=``, and VALUE either a relative change (``+5%``, ``-2%``: of B against A),
a signed absolute change (``+1000``, ``-3``) or a plain number (``0``, ``0.2``: B's own value).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

from analyser.core.analysis import IPU_ALIASES, IPU_SCALAR_FIELDS, Metrics
from profiles.errors import UserFacingError


class GateSyntaxError(UserFacingError):
    """A --fail-if condition that cannot be parsed (exit code 2)."""

    exit_code = 2


_OPS = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
_RE = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\s*(>=|<=|==|!=|>|<)\s*([+-]?)\s*"
    r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(%?)\s*$"
)


def _show(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.6g}"


@dataclass(frozen=True)
class Gate:
    """One ``--fail-if`` condition: a key figure, a comparison and a value (or a change)."""

    text: str
    metric: str
    op: str
    value: float
    mode: str  # "rel" (percent change), "abs" (signed change) or "value" (B's value)

    def evaluate(self, a: Metrics, b: Metrics) -> tuple[bool, str]:
        """(holds, explanation) for profile ``a`` (baseline) against ``b`` (candidate)."""
        va, vb = a.scalar(self.metric), b.scalar(self.metric)
        if vb is None and (va is not None or self.mode == "value"):
            return True, (
                f"{self.text}: the candidate has no {self.metric} (it did not "
                "execute: out of memory) HOLDS"
            )
        if vb is None or (self.mode != "value" and va is None):
            return False, (
                f"{self.text}: {self.metric} is not available in the baseline "
                "(no execution), not evaluated"
            )
        if self.mode == "value":
            x, shown = vb, f"{vb:g}"
        elif va is None:  # refused above for every mode but "value"
            raise AssertionError(self.mode)
        elif self.mode == "abs":
            x, shown = vb - va, f"{vb - va:+g}"
        else:
            if va == 0:
                x = 0.0 if vb == 0 else float("inf") * (1 if vb > 0 else -1)
            else:
                x = 100.0 * (vb - va) / abs(va)
            shown = f"{x:+,.2f}%"
        holds = _OPS[self.op](x, self.value)
        before = "-" if va is None else _show(va)
        return holds, (
            f"{self.text}: {self.metric} {shown} ({before} -> {_show(vb)}) "
            f"{'HOLDS' if holds else 'ok'}"
        )


def _did_you_mean(name: str, names, prefix: str = "") -> str:
    """' (did you mean 'cycles'?)' for a misspelt metric name, '' when none is close."""
    import difflib

    close = difflib.get_close_matches(name.lower(), list(names), n=1, cutoff=0.6)
    return f" (did you mean {prefix + close[0]!r}?)" if close else ""


def parse_gate(text: str) -> Gate:
    """Parse a ``--fail-if`` condition such as 'cycles>+5%'; GateSyntaxError when it is not one."""
    m = _RE.match(text)
    if not m:
        raise GateSyntaxError(
            f"bad --fail-if condition {text!r}; expected METRIC OP VALUE such as 'cycles>+5%', "
            "'peak_memory>+2%' or 'oom_tiles>0'."
        )
    name, op, sign, num, pct = m.groups()
    per_ipu = re.fullmatch(r"ipu(\d+)\.(\w+)", name)
    if per_ipu:
        field_ = IPU_ALIASES.get(per_ipu.group(2), per_ipu.group(2))
        if field_ not in IPU_SCALAR_FIELDS:
            names = IPU_SCALAR_FIELDS + tuple(IPU_ALIASES)
            raise GateSyntaxError(
                f"unknown per-IPU metric {per_ipu.group(2)!r} in --fail-if {text!r}"
                f"{_did_you_mean(per_ipu.group(2), names, f'ipu{int(per_ipu.group(1))}.')}; "
                f"use ipuN. followed by one of {', '.join(names)}."
            )
        key = f"ipu{int(per_ipu.group(1))}.{field_}"
    else:
        key = Metrics.ALIASES.get(name, name)
    if not per_ipu and key not in Metrics.scalar_names():
        known = sorted(set(Metrics.scalar_names()) | set(Metrics.ALIASES))
        raise GateSyntaxError(
            f"unknown metric {name!r} in --fail-if {text!r}{_did_you_mean(name, known)}; "
            f"use one of {', '.join(known)}."
        )
    value = float(num) * (-1 if sign == "-" else 1)
    mode = "rel" if pct else ("abs" if sign else "value")
    return Gate(text.strip(), key, op, value, mode)
