"""The summary of one profile, laid out once (issue 24 item 2).

The sections and figures are declared in the catalogue
(:data:`analyser.core.quantities.SUMMARY_SECTIONS`); this module evaluates them on an
:class:`~analyser.core.Analysis`: each figure's value, its text in the memory units asked for,
the note said after it and, for a prediction, its range from the fidelity table
(:mod:`analyser.core.intervals`). The text ``analyse summary``, the JSON report (a profile's
``summary``), the Markdown and HTML reports and the GUI Summary all render these rows, so a
figure added to the declaration reaches every one of them.

    from analyser.core.summary import summary_sections
    for section in summary_sections(analysis):
        for row in section["figures"]:
            print(section["title"], row["label"], row["text"], row["range"])
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from analyser.core import intervals, quantities
from analyser.core.analysis import Analysis
from analyser.core.insights.thresholds import Thresholds
from analyser.core.quantities import SummaryFigure, summary_quantity
from analyser.core.units import fmt_bytes, fmt_pct

#: Figures derived for the summary (a :class:`SummaryFigure` ``source`` without a dot).
DERIVED: dict[str, Callable[[Analysis], Any]] = {
    "target_name": lambda a: a.target.target_name or a.target.architecture,
    "created": lambda a: a.target.created[:16].replace("T", " "),
    "status": lambda a: "fits" if a.memory.fits else "OUT OF MEMORY",
    "run_seconds": lambda a: (
        None if a.execution is None else a.execution.total_cycles / a.execution.clock_hz
    ),
    "imbalance_lost_cycles": lambda a: (
        None if a.imbalance is None else float(a.imbalance.lost_cycles.sum())
    ),
}


def _headroom(a: Analysis, unit: str) -> str:
    m = a.memory
    text = f"of {fmt_bytes(m.sram_per_tile, unit)}"
    if m.fits:
        low = m.headroom_share < Thresholds().memory_headroom
        text += f", {fmt_bytes(m.headroom_bytes, unit)} free" + (": low headroom" if low else "")
    return text


def _oom_per_ipu(a: Analysis, unit: str) -> str:
    per = a.memory.oom_tiles_per_ipu()
    return ", ".join(f"IPU {i}: {int(n):,}" for i, n in enumerate(per) if n)


def _imbalance_share(a: Analysis, unit: str) -> str:
    imb = a.imbalance
    if imb is None:
        return ""
    shares = ", ".join(f"IPU {i} {fmt_pct(s)}" for i, s in enumerate(imb.lost_share_of_compute))
    return f"of compute: {shares}"


#: The notes said after a figure's value (a :class:`SummaryFigure` ``note``), in memory ``unit``.
NOTES: dict[str, Callable[[Analysis, str], str]] = {
    "capacity": lambda a, u: f"of {fmt_bytes(a.memory.capacity_bytes, u)}",
    "headroom": _headroom,
    "oom_per_ipu": _oom_per_ipu,
    "at_clock": lambda a, u: "at the target clock",
    "imbalance_share": _imbalance_share,
}


def figure_value(analysis: Analysis, figure: SummaryFigure) -> Any:
    """The value of ``figure`` for ``analysis`` (None where the profile has none)."""
    if "." in figure.source:
        head = figure.source.split(".", 1)[0]
        if head == "execution" and analysis.execution is None:
            return None
        return operator.attrgetter(figure.source)(analysis)
    return DERIVED[figure.source](analysis)


def _plain(v: Any) -> Any:
    """numpy scalars as Python values (the rows are JSON-compatible)."""
    return v.item() if hasattr(v, "item") and not isinstance(v, str | bytes) else v


def summary_sections(
    analysis: Analysis,
    unit: str = "KiB",
    prediction: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The declared summary of ``analysis``: ``[{title, figures: [row, ...]}]``, each row
    ``{key, label, title, kind, better, value, text, note, range}``; sections shown only with
    an execution are left out of a profile without one. ``range`` is the text of the figure's
    interval (``prediction``: the profile's ``prediction`` block, computed when not given), or
    ``""`` when the fidelity table gives the figure none."""
    if prediction is None:
        prediction = intervals.profile_prediction(analysis, intervals.PROFILE_FIGURES)
    ivs = prediction.get("intervals") or {}
    out = []
    for section in quantities.SUMMARY_SECTIONS:  # read at each call: the declaration
        if section.execution and analysis.execution is None:
            continue
        rows = []
        for fig in section.figures:
            q = summary_quantity(fig.key)
            value = _plain(figure_value(analysis, fig))
            iv = ivs.get(fig.key)
            rng = intervals.range_text(iv, lambda v, q=q: q.format(v, unit)) if iv else ""
            rows.append(
                {
                    "key": fig.key,
                    "label": q.label,
                    "title": q.title,
                    "kind": q.kind,
                    "better": q.better,
                    "value": value,
                    "text": q.format(value, unit),
                    "note": NOTES[fig.note](analysis, unit) if fig.note else "",
                    "range": rng,
                }
            )
        out.append({"title": section.title, "figures": rows})
    return out


def value_text(row: Mapping[str, Any]) -> str:
    """A row's value as one text: the value, then its note in parentheses when it has one."""
    return f"{row['text']} ({row['note']})" if row.get("note") else str(row["text"])
