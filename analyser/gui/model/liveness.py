"""What the Liveness Report shows, without Qt (the view only draws).

The report's state is the shown IPUs (one, or all), whether always-live bytes are added, and
the selected chart positions; the functions here turn the analysis core's liveness (through
:mod:`analyser.gui.model.data`) into the rows, tables and peak labels the view draws. With
"All IPUs" every shown IPU counts: the live variables of each (an IPU column says whose), its
not-always-live and always-live bytes at the step (IPU 0's only before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

# the compared chart's shading of steps only in A / only in B (re-exported for the view)
from analyser.core.liveness import ALIGN_ADDED as ALIGN_ADDED
from analyser.core.liveness import ALIGN_REMOVED as ALIGN_REMOVED
from analyser.core.quantities import step_type_name
from analyser.core.units import MISSING, MemoryUnits, fmt_bytes, fmt_int, fmt_pct
from analyser.gui.model import data
from analyser.gui.model.document import Document

if TYPE_CHECKING:
    from analyser.core.liveness import LivenessSummary

#: Program node types that execute (the Step tab shows their cycles and tile balance).
FIRST_EXECUTING_TYPE = 3


def live_variables(
    doc: Document, step: int, ipus: Sequence[int], include_always_live: bool
) -> pd.DataFrame:
    """The variables live at liveness step ``step`` on the shown ``ipus`` (each row with its
    IPU), largest first: every shown IPU's, not the first one's."""
    from analyser.core.liveness import live_in

    frame = live_in(data.variables(doc), step, None, include_always_live=include_always_live)
    if len(ipus) != data.target(doc).num_ipus:
        frame = frame[np.isin(frame["ipu"].to_numpy(), np.asarray(ipus, dtype=np.int64))]
    return frame


def live_variables_table(
    steps: Sequence[tuple[str, Document, int]],
    ipus: Sequence[int],
    include_always_live: bool,
    compare: bool,
) -> pd.DataFrame:
    """The Live variables tab: for each (tag, document, step) the variables live there on the
    shown IPUs, a ``profile`` column when comparing."""
    frames = []
    for tag, doc, step in steps:
        f = live_variables(doc, step, ipus, include_always_live)
        frames.append(f.assign(profile=tag) if compare else f)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def compare_steps_table(
    doc: Document, first: int, second: int, ipus: Sequence[int], include_always_live: bool
) -> pd.DataFrame:
    """The Compare steps tab: the variables live at ``first`` or ``second`` (on the shown IPUs),
    each with where it is live ("both", "step N only"), grouped so, largest first."""
    a = live_variables(doc, first, ipus, include_always_live)
    c = live_variables(doc, second, ipus, include_always_live)
    key = ["name", "ipu"]
    both = pd.concat([a, c]).drop_duplicates(key)
    in_a = pd.MultiIndex.from_frame(both[key]).isin(pd.MultiIndex.from_frame(a[key]))
    in_c = pd.MultiIndex.from_frame(both[key]).isin(pd.MultiIndex.from_frame(c[key]))
    live_at = np.where(
        in_a & in_c, "both", np.where(in_a, f"step {first} only", f"step {second} only")
    )
    both = both.assign(live_at=live_at).sort_values(["live_at", "bytes"], ascending=[True, False])
    return both.reset_index(drop=True)


def step_rows(
    doc: Document, step: int, ipus: Sequence[int], units: MemoryUnits, prefix: str = ""
) -> list[tuple[str, str]]:
    """The Step tab's rows for liveness step ``step`` of ``doc``: name, operation, program
    (type, cycles and tile balance of an executing one) and, for each shown IPU, the
    not-always-live and always-live bytes there."""
    lv = data.liveness(doc)
    steps = data.liveness_steps(doc)
    rows = [(prefix + "Name", str(steps["name"].iloc[step]))]
    op = int(steps["op"].iloc[step])
    names = data.operation_names(doc)
    rows.append((prefix + "Operation", str(names[op]) if 0 <= op < len(names) else MISSING))
    prog = int(steps["program"].iloc[step])
    rows.append((prefix + "Program", str(prog)))
    types = data.program_column(doc, "type")
    if 0 <= prog < len(types):
        t = int(types[prog])
        rows.append((prefix + "Program type", step_type_name(t)))
        if t >= FIRST_EXECUTING_TYPE:
            cycles = int(data.program_column(doc, "cycles")[prog])
            balance = float(data.program_column(doc, "tile_balance")[prog])
            rows.append((prefix + "Cycles (one execution)", fmt_int(cycles)))
            rows.append((prefix + "Tile balance", fmt_pct(balance)))
    shown = [i for i in ipus if i < lv.not_always_live.shape[0]]
    for ipu in shown:
        rows.append(
            (
                prefix + f"Not-always-live (IPU {ipu})",
                fmt_bytes(lv.not_always_live[ipu, step], units),
            )
        )
    for ipu in shown:
        rows.append((prefix + f"Always-live (IPU {ipu})", fmt_bytes(lv.always_live[ipu], units)))
    if len(shown) > 1:
        total = int(lv.not_always_live[shown, step].sum())
        rows.append((prefix + "Not-always-live (shown IPUs)", fmt_bytes(total, units)))
    return rows


@dataclass(frozen=True)
class PeakLabel:
    """One peak label of the chart: at chart position ``x`` and height ``nbytes``, ``level``
    lines above its peak (labels at similar heights stack), reading ``text``."""

    x: int
    nbytes: int
    level: int
    text: str


@dataclass(frozen=True)
class Peak:
    """A curve's peak: profile tag, IPU, chart position, the profile's step, its bytes, name."""

    tag: str
    ipu: int
    x: int
    step: int
    nbytes: int
    name: str


def peak_labels(
    peaks: Sequence[Peak], top: float, units: MemoryUnits, compare: bool
) -> list[PeakLabel]:
    """One label per (IPU, position), naming every profile that peaks there (A and B often
    peak at the same program: two labels would print on top of each other), largest first;
    a label goes one line higher for every label already placed at a similar height."""
    groups: dict[tuple[int, int], list[Peak]] = {}
    for p in peaks:
        groups.setdefault((p.ipu, p.x), []).append(p)
    several_ipus = len({k[0] for k in groups}) > 1
    placed: list[tuple[float, int]] = []
    out = []
    for (ipu, x), where in sorted(groups.items(), key=lambda kv: -max(p.nbytes for p in kv[1])):
        nbytes = max(p.nbytes for p in where)
        near = [lvl for y, lvl in placed if abs(y - nbytes) < 0.08 * top]
        level = max(near) + 1 if near else 0
        placed.append((nbytes, level))
        who = " ".join(
            ([" + ".join(p.tag for p in where)] if compare else [])
            + ([f"IPU {ipu}"] if several_ipus else [])
        )
        name = where[0].name
        if not compare:
            steps = f"step {where[0].step} ({name}) {fmt_bytes(nbytes, units)}"
        elif len({p.nbytes for p in where}) == 1:
            # each profile's own step number: the same program may sit at another index
            steps = ", ".join(f"{p.tag} step {p.step}" for p in where)
            steps += f" ({name}) {fmt_bytes(nbytes, units)}"
        else:
            steps = ", ".join(f"{p.tag} step {p.step} {fmt_bytes(p.nbytes, units)}" for p in where)
            steps += f" ({name})"
        out.append(PeakLabel(x, nbytes, level, f"peak{' ' + who if who else ''}: {steps}"))
    return out


def label_anchor(x: float, n_steps: int) -> float:
    """Horizontal anchor of a label at chart position ``x`` of ``n_steps``: left-aligned in the
    first third, right-aligned in the last, centred between, so it stays on the chart."""
    if n_steps <= 0:
        return 0.5
    where = x / n_steps
    return 0.0 if where < 1 / 3 else 1.0 if where > 2 / 3 else 0.5


def curve_peak(lv: LivenessSummary, tag: str, ipu: int, x: np.ndarray, curve: np.ndarray) -> Peak:
    """The peak of a profile's curve for ``ipu`` (its liveness ``lv``) drawn at positions ``x``."""
    step = int(lv.peak_step[ipu])
    name = lv.step_names[step] if step < len(lv.step_names) else str(step)
    return Peak(tag, ipu, int(x[step]), step, int(curve[step]), name)


def step_tile_cycles(doc: Document, step: int) -> np.ndarray:
    """Cycles of each tile in liveness step ``step`` (the Cycle estimate tab)."""
    return data.step_tile_cycles(doc, step)


def cycles_line(tag: str, step: int, name: str, cycles: np.ndarray) -> str:
    """The Cycle estimate tab's sentence for one step's per-tile cycles."""
    busy = cycles[cycles > 0]
    who = f"{tag}: " if tag else ""
    if not busy.size:
        return f"{who}step {step} ({name}): no tile computes in this step"
    return (
        f"{who}step {step} ({name}): {fmt_int(int(busy.max()))} cycles on the "
        f"slowest tile (tile {int(np.argmax(cycles))}), mean "
        f"{fmt_int(float(busy.mean()))} over {fmt_int(busy.size)} busy tiles "
        f"(balance {fmt_pct(float(busy.mean()) / float(busy.max()))})"
    )


def step_docs(
    doc: Document | None, other: Document | None, at: dict[str, int]
) -> list[tuple[str, Any, int]]:
    """(tag, document, its step) of the profiles with a step at a chart position (``at``:
    ``{"A": step, "B": step}``, -1 where a profile has none)."""
    if doc is None:
        return []
    docs = [("A", doc)] + ([("B", other)] if other is not None else [])
    return [(tag, d, at[tag]) for tag, d in docs if at.get(tag, -1) >= 0]


def vertices_table(steps: Sequence[tuple[str, Any, int]], compare: bool) -> pd.DataFrame:
    """The Vertices tab: the compute sets each (tag, document, step) runs by vertex type."""
    frames = []
    for tag, doc, step in steps:
        f = data.step_vertices(doc, step)
        frames.append(f.assign(profile=tag) if compare else f)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
