"""The summary of one profile, laid out once, so the CLI, the GUI and the reports show the same sections.

The sections and figures are declared in the catalogue
(:data:`analyser.core.quantities.SUMMARY_SECTIONS`); this module evaluates them on an
:class:`~analyser.core.Analysis`: each figure's value, its text in the memory units asked for,
the note said after it and, for a prediction, its range from the fidelity table
(:mod:`analyser.core.intervals`). The text ``analyse summary``, the JSON report (a profile's
``summary``), the Markdown and HTML reports and the GUI Summary all render these rows, so a
figure added to the declaration reaches every one of them.

    from analyser.core.summary import summary_sections, summary_tables
    for section in summary_sections(analysis):
        for row in section["figures"]:
            print(section["title"], row["label"], row["text"], row["range"])
    for table in summary_tables(analysis):      # the breakdowns (SUMMARY_TABLES)
        print(table["title"], [c["label"] for c in table["columns"]], table["rows"][0]["cells"])
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from analyser.core import intervals, quantities
from analyser.core.analysis import Analysis
from analyser.core.execution import ExecutionSummary
from analyser.core.insights.thresholds import Thresholds
from analyser.core.quantities import (
    DESTINATIONS,
    EXECUTABLE_TYPES,
    STEP_TYPES,
    SummaryFigure,
    SummaryTable,
    summary_quantity,
)
from analyser.core.units import fmt_bytes, fmt_int, fmt_pct, fmt_seconds

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


# ---------------------------------------------------------------------------------------------
# The breakdown tables (analyser.core.quantities.SUMMARY_TABLES)
# ---------------------------------------------------------------------------------------------
#: How many compute sets losing the most to tile imbalance the tables list by default.
IMBALANCE_TOP = 10
_T = {name: i for i, name in enumerate(STEP_TYPES)}
#: How a StreamCopy destination is said in the table's "link" column.
_DEST_NAMES = {"remoteBuffer": "remote buffer", "ipu": "IPU"}
#: The names of the cycles-by-step-type rows after the step types.
TOTAL = "total"
LOST = "lost to tile imbalance"


def _executed(a: Analysis) -> ExecutionSummary:
    """The execution summary of a profile that ran: the tables that read it are listed only
    for such profiles (an out-of-memory one has none)."""
    if a.execution is None:
        raise ValueError(f"{a.path}: no execution (out of memory)")
    return a.execution


def _cycles_by_step_type(a: Analysis, top: int) -> list[dict[str, Any]]:
    """Per IPU: each executed step type's cycles, share of the busy cycles, steps and tile
    balance; the total; the cycles lost to tile imbalance (share: of the IPU's compute)."""
    ex, imb = _executed(a), a.imbalance
    rows: list[dict[str, Any]] = []
    for ipu in range(ex.num_ipus):
        busy = float(ex.cycles_by_type[ipu].sum())
        for name in EXECUTABLE_TYPES:
            j = _T[name]
            if not ex.count_by_type[ipu, j]:
                continue
            c = ex.cycles_by_type[ipu, j]
            rows.append(
                {
                    "ipu": ipu,
                    "name": name,
                    "cycles": c,
                    "share": c / busy if busy else 0.0,
                    "steps": ex.count_by_type[ipu, j],
                    "tile_balance": ex.tile_balance_by_type[ipu, j],
                }
            )
        rows.append(
            {
                "ipu": ipu,
                "name": TOTAL,
                "cycles": busy,
                "share": 1.0 if busy else 0.0,
                "steps": ex.count_by_type[ipu].sum(),
                "tile_balance": ex.tile_balance[ipu],
            }
        )
        if imb is not None:
            rows.append(
                {
                    "ipu": ipu,
                    "name": LOST,
                    "cycles": imb.lost_cycles[ipu],
                    "share": imb.lost_share_of_compute[ipu],
                }
            )
    return rows


def _imbalance_compute_sets(a: Analysis, top: int) -> list[dict[str, Any]]:
    """The ``top`` compute sets losing the most cycles to tile imbalance, most first."""
    if a.imbalance is None:  # listed only for a profile that ran
        return []
    cols = a.imbalance.columns
    n = min(top, int(cols["name"].size))
    return [{k: col[r] for k, col in cols.items()} for r in range(n)]


def _streamcopy(a: Analysis, top: int) -> list[dict[str, Any]]:
    """Per IPU: StreamCopy bytes received / sent by destination (the host always), then the
    GlobalExchange bytes (between IPUs)."""
    ex = _executed(a)
    rows: list[dict[str, Any]] = []
    for ipu in range(ex.num_ipus):
        for k, dest in enumerate(DESTINATIONS):
            rx, tx = ex.streamcopy_rx_by_dest[ipu, k], ex.streamcopy_tx_by_dest[ipu, k]
            if rx or tx or dest == "host":
                name = f"StreamCopy ({_DEST_NAMES.get(dest, dest)})"
                rows.append({"ipu": ipu, "link": name, "received": rx, "sent": tx})
        rows.append(
            {
                "ipu": ipu,
                "link": "GlobalExchange",
                "received": ex.global_exchange_rx[ipu],
                "sent": ex.global_exchange_tx[ipu],
            }
        )
    return rows


def _run_details(a: Analysis, top: int) -> list[dict[str, Any]]:
    """The host time outside the trace, the pipeline phases' shares and the stages' load."""
    ex = _executed(a)
    rows = []
    if ex.host_exposed_cycles:
        rows.append(
            {
                "name": "host outside the trace",
                "value": f"{fmt_seconds(ex.host_exposed_cycles / ex.clock_hz)} per host call not "
                "hidden behind the device (host lane)",
            }
        )
    phases = ", ".join(f"{p} {fmt_pct(v)}" for p, v in ex.phase_share().items() if v > 0)
    rows.append({"name": "phases", "value": phases})
    if ex.stage_cycles.size > 1:
        stages = ", ".join(f"stage {s}: {fmt_int(v)}" for s, v in enumerate(ex.stage_cycles))
        rows.append(
            {"name": "stage load", "value": f"{stages} (longest / mean {ex.stage_imbalance:.2f})"}
        )
    return rows


def flatten(config: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested run config -> sorted ``(dotted.key, value)`` rows."""
    import json

    rows: list[tuple[str, str]] = []
    if isinstance(config, dict):
        for key in sorted(config):
            rows.extend(flatten(config[key], f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(config, list) and config and all(isinstance(v, dict) for v in config):
        for i, v in enumerate(config):
            rows.extend(flatten(v, f"{prefix}[{i}]"))
    else:
        text = (
            json.dumps(config) if isinstance(config, list | bool) or config is None else str(config)
        )
        rows.append((prefix, text))
    return rows


def _run_configuration(a: Analysis, top: int) -> list[dict[str, Any]]:
    """The run's options, one row per (dotted) option."""
    return [{"name": k, "value": v} for k, v in flatten(a.run_config)]


#: Each declared table's rows (:class:`SummaryTable` ``key``): ``rows(analysis, top)``, one dict
#: per row from column key to value (a missing key: an empty cell).
TABLE_ROWS: dict[str, Callable[[Analysis, int], list[dict[str, Any]]]] = {
    "cycles_by_step_type": _cycles_by_step_type,
    "imbalance_compute_sets": _imbalance_compute_sets,
    "streamcopy": _streamcopy,
    "run_details": _run_details,
    "run_configuration": _run_configuration,
}


def _cell(col: Any, value: Any, unit: str) -> str:
    """A table cell: ``value`` formatted by its column's kind; an absent value is empty."""
    if value is None:
        return ""
    fmt = col.formatter(unit)
    return str(value) if fmt is None else fmt(value)


def evaluate_table(
    analysis: Analysis, table: SummaryTable, unit: str = "KiB", top: int = IMBALANCE_TOP
) -> dict[str, Any]:
    """One declared table of ``analysis``: ``{key, title, note, group, collapsed, columns:
    [{key, label, kind}], rows: [{values: [...], cells: [...]}]}`` (values and cells in the
    columns' order; cells as text in memory ``unit``)."""
    rows = []
    for raw in TABLE_ROWS[table.key](analysis, top):
        values = [_plain(raw.get(c.key)) for c in table.columns]
        rows.append(
            {
                "values": values,
                "cells": [_cell(c, v, unit) for c, v in zip(table.columns, values)],
            }
        )
    return {
        "key": table.key,
        "title": table.title,
        "note": table.note,
        "group": table.group,
        "collapsed": table.collapsed,
        "compare": list(table.compare),
        "columns": [{"key": c.key, "label": c.title, "kind": c.kind} for c in table.columns],
        "rows": rows,
    }


def summary_tables(
    analysis: Analysis, unit: str = "KiB", top: int = IMBALANCE_TOP
) -> list[dict[str, Any]]:
    """The declared breakdown tables of ``analysis`` (:func:`evaluate_table` each), those
    shown only with an execution left out of a profile without one; ``top``: how many compute
    sets losing the most to tile imbalance."""
    return [
        evaluate_table(analysis, t, unit, top)
        for t in quantities.SUMMARY_TABLES  # read at each call: the declaration
        if not (t.execution and analysis.execution is None)
    ]
