"""The Summary report's view-model (no Qt): what each of its trees, tabs and its chart shows.

The figures are the summary declared once in the catalogue
(:data:`analyser.core.quantities.SUMMARY_SECTIONS`, evaluated by :mod:`analyser.core.summary`):
the same sections, figures, labels, notes and prediction ranges as ``analyse summary`` and the
reports. In compare mode every figure shows A, B, the change and the range of the change (the
fidelity table's interval, :mod:`analyser.core.intervals`). The view only displays these rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from analyser.core.intervals import range_text
from analyser.core.quantities import DESTINATIONS, EXECUTABLE_TYPES, SERIES, STEP_TYPES
from analyser.core.summary import summary_sections
from analyser.core.units import (
    MISSING,
    fmt_bytes,
    fmt_change,
    fmt_count,
    fmt_delta_pct,
    fmt_int,
    fmt_pct,
    fmt_pts_delta,
)
from analyser.gui.model import data
from analyser.gui.model.document import Document

_T = {name: i for i, name in enumerate(STEP_TYPES)}

#: The figure tree's columns, one profile and two (the note column holds words, not figures).
NOTE = "Note"
SINGLE_HEADERS = ("Name", "Value", "Range", NOTE)
COMPARE_HEADERS = ("Name", "A", "B", "Change", "Range")
#: The headers' tooltips (the short "Range" says what it is here).
HEADER_TIPS = {
    "Range": "What the real figure (compare mode: its change) may be, from the engine's errors "
    'against public figures (the fidelity table, docs/fidelity.md, "Intervals"); '
    "'no interval' where the table has no rows for it",
    NOTE: "What the figure is out of, or how it splits over the IPUs",
}

NO_EXECUTION = (
    "This profile has no execution: the program does not fit in memory, so it was not run "
    "(as with Poplar's allowOutOfMemory). See the Memory and Insights reports."
)


@dataclass(frozen=True)
class Row:
    """One row of a tree: its cells (the name first); in compare mode the change as shown
    (``delta``: B - A, 0 when the shown change is zero) and which way is better (``better``:
    ``"lower"``, ``"higher"`` or None: not coloured); a tooltip."""

    cells: tuple[str, ...]
    delta: float = 0.0
    better: str | None = None
    tip: str = ""


@dataclass(frozen=True)
class Section:
    """A titled group of rows."""

    title: str
    rows: tuple[Row, ...]


def flatten(config: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested run config -> sorted ``(dotted.key, value)`` rows."""
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


# -- the declared figures -------------------------------------------------------------------------
def declared(doc: Document, unit: str) -> list[dict[str, Any]]:
    """The declared summary of ``doc`` in memory ``unit`` (cached per document and unit)."""
    return doc.cached(f"summary:{unit}", lambda: summary_sections(doc.analysis, unit))


def change_text(kind: str, a: Any, b: Any, text_a: str, text_b: str, unit: str) -> str:
    """The change from A to B of a figure of ``kind`` as the Summary shows it."""
    if kind in ("text",):
        return "differs" if text_a != text_b else ""
    if a is None or b is None:
        return ""
    if kind == "bytes":
        return fmt_change(a, b, unit)
    if kind == "share":
        return fmt_pts_delta(a, b)
    return fmt_delta_pct(float(a), float(b))


def _shown_delta(change: str, a: Any, b: Any) -> float:
    """B - A when the change as shown is not zero ('+0.0 pts' stays plain), else 0."""
    if a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return 0.0
    shown = change.split("(")[0]
    return float(b) - float(a) if any(c in "123456789" for c in shown) else 0.0


def figure_sections(
    doc: Document, cmp: Document | None, unit: str
) -> tuple[tuple[str, ...], list[Section]]:
    """The figure tree: its headers and sections. One profile: name, value, the range of the
    prediction and the note; two: name, A, B, the change and the range of the change."""
    sa = declared(doc, unit)
    if cmp is None:
        return SINGLE_HEADERS, [
            Section(
                s["title"],
                tuple(
                    Row((r["title"], r["text"], r["range"], r["note"]), tip=r["note"])
                    for r in s["figures"]
                ),
            )
            for s in sa
        ]
    sb = declared(cmp, unit)
    by_a = {s["title"]: {r["key"]: r for r in s["figures"]} for s in sa}
    by_b = {s["title"]: {r["key"]: r for r in s["figures"]} for s in sb}
    titles = [s["title"] for s in sa] + [s["title"] for s in sb if s["title"] not in by_a]
    intervals = _change_intervals(doc, cmp)
    sections = []
    for title in titles:
        ra, rb = by_a.get(title, {}), by_b.get(title, {})
        keys = list(ra) + [k for k in rb if k not in ra]
        rows = []
        for key in keys:
            a, b = ra.get(key), rb.get(key)
            first = a or b
            va, vb = (a or {}).get("value"), (b or {}).get("value")
            ta, tb = (a or {}).get("text", MISSING), (b or {}).get("text", MISSING)
            change = change_text(first["kind"], va, vb, ta, tb, unit)
            rows.append(
                Row(
                    (first["title"], ta, tb, change, intervals.get(key, "")),
                    _shown_delta(change, va, vb),
                    first["better"],
                )
            )
        sections.append(Section(title, tuple(rows)))
    return COMPARE_HEADERS, sections


def _change_intervals(doc: Document, cmp: Document) -> dict[str, str]:
    """The range of each compared key figure's change (the core's comparison)."""
    try:
        pair = data.comparison(doc, cmp)
    except ModuleNotFoundError:
        return {}
    return {m.key: range_text(m.interval) for m in pair.metrics if m.interval}


# -- cycles by step type, per IPU -----------------------------------------------------------------
def _ipu_value(e: Any, ipu: int, fn: Callable[[Any, int], Any]) -> Any:
    if e is None or ipu >= e.num_ipus:
        return None
    return fn(e, ipu)


def ipu_headers(compare: bool) -> tuple[str, ...]:
    """The columns of the cycles-by-step-type tree."""
    if compare:
        return ("Name", "A", "B", "Change")
    return ("Step type", "Cycles", "Share", "Steps", "Tile balance")


def _imbalance_of(doc: Document | None) -> Any:
    return None if doc is None or not doc.has_execution else data.imbalance(doc)


def ipu_sections(doc: Document, cmp: Document | None) -> list[Section] | None:
    """Cycles by step type per IPU, its tile balance and the cycles lost to tile imbalance
    (as ``analyse summary``); None when neither profile has an execution."""
    ea = data.execution(doc)
    eb = data.execution(cmp) if cmp is not None else None
    if ea is None and eb is None:
        return None
    ia, ib = _imbalance_of(doc), _imbalance_of(cmp)
    n = max(e.num_ipus for e in (ea, eb) if e is not None)
    if cmp is None:
        return [Section(f"IPU {ipu}", _single_ipu_rows(ea, ia, ipu)) for ipu in range(n)]
    return [Section(f"IPU {ipu}", _compare_ipu_rows(ea, eb, ia, ib, ipu)) for ipu in range(n)]


def _single_ipu_rows(ea: Any, imb: Any, ipu: int) -> tuple[Row, ...]:
    rows = []
    total = int(ea.cycles_by_type[ipu].sum())
    for name in EXECUTABLE_TYPES:
        j = _T[name]
        cnt = int(ea.count_by_type[ipu, j])
        if cnt == 0:
            continue
        c = int(ea.cycles_by_type[ipu, j])
        rows.append(
            Row(
                (
                    name,
                    fmt_int(c),
                    fmt_pct(c / total if total else 0),
                    fmt_int(cnt),
                    fmt_pct(ea.tile_balance_by_type[ipu, j]),
                )
            )
        )
    rows.append(
        Row(
            (
                "Total",
                fmt_int(total),
                "100.0%",
                fmt_int(ea.count_by_type[ipu].sum()),
                fmt_pct(float(ea.tile_balance[ipu])),
            )
        )
    )
    if imb is not None:
        rows.append(
            Row(
                (
                    LOST,
                    fmt_int(imb.lost_cycles[ipu]),
                    fmt_pct(imb.lost_share_of_compute[ipu]),
                    "",
                    "",
                ),
                tip=LOST_TIP,
            )
        )
    return tuple(rows)


#: The per-IPU row of the cycles lost to tile imbalance (its share: of the IPU's compute).
LOST = "Lost to tile imbalance"
LOST_TIP = (
    "Slowest tile minus the mean over the IPU's tiles, summed over every compute set's "
    "executions; the share is of the IPU's OnTileExecute cycles"
)


def _lost(imb: Any, ipu: int) -> float | None:
    """IPU ``ipu``'s cycles lost to tile imbalance (None without execution or that IPU)."""
    if imb is None or ipu >= len(imb.lost_cycles):
        return None
    return float(imb.lost_cycles[ipu])


def _compare_ipu_rows(ea: Any, eb: Any, ia: Any, ib: Any, ipu: int) -> tuple[Row, ...]:
    rows = []
    for name in EXECUTABLE_TYPES:
        j = _T[name]
        ca = _ipu_value(ea, ipu, lambda e, i, j=j: int(e.cycles_by_type[i, j]))
        cb = _ipu_value(eb, ipu, lambda e, i, j=j: int(e.cycles_by_type[i, j]))
        if not ca and not cb:
            continue
        rows.append(Row((name, fmt_count(ca), fmt_count(cb), fmt_delta_pct(ca or 0, cb or 0))))
    ta = _ipu_value(ea, ipu, lambda e, i: int(e.cycles_by_type[i].sum()))
    tb = _ipu_value(eb, ipu, lambda e, i: int(e.cycles_by_type[i].sum()))
    rows.append(Row(("Total", fmt_count(ta), fmt_count(tb), fmt_delta_pct(ta or 0, tb or 0))))
    ba = _ipu_value(ea, ipu, lambda e, i: float(e.tile_balance[i]))
    bb = _ipu_value(eb, ipu, lambda e, i: float(e.tile_balance[i]))
    change = "" if ba is None or bb is None else fmt_pts_delta(ba, bb)
    rows.append(Row(("Tile balance (compute)", fmt_pct(ba), fmt_pct(bb), change)))
    la, lb = _lost(ia, ipu), _lost(ib, ipu)
    if la is not None or lb is not None:
        change = "" if la is None or lb is None else fmt_delta_pct(la, lb)
        rows.append(Row((LOST, fmt_int(la), fmt_int(lb), change), tip=LOST_TIP))
    return tuple(rows)


# -- tile imbalance ------------------------------------------------------------------------------
#: The tile-imbalance tree's columns; how many compute sets it lists per profile.
IMBALANCE_HEADERS = ("Compute set", "Lost", "IPU", "Executions", "Slowest tile", "Mean tile")
IMBALANCE_TOP = 10
IMBALANCE_TITLE = "Compute sets losing the most cycles to tile imbalance"
IMBALANCE_TIP = (
    "Slowest tile minus the mean over the IPU's tiles, per execution; Lost: summed over the run's "
    "executions (as analyse summary lists them)"
)


def imbalance_sections(doc: Document, cmp: Document | None) -> list[Section]:
    """The compute sets losing the most cycles to tile imbalance, per profile (A and B in compare
    mode)."""
    docs = [("", doc)] if cmp is None else [("A", doc), ("B", cmp)]
    if all(_imbalance_of(d) is None for _tag, d in docs):
        return [Section("No execution", ())]
    out = []
    for tag, d in docs:
        imb = _imbalance_of(d)
        if imb is None:
            if tag:
                out.append(Section(f"{tag}: {d.name}: no execution", ()))
            continue
        rows = tuple(
            Row(
                (
                    str(r.name),
                    fmt_int(r.lost_cycles),  # next to the name: what the list is sorted by
                    str(r.ipu),
                    fmt_int(r.executions),
                    fmt_int(r.max_cycles),
                    fmt_int(r.mean_cycles),
                ),
                tip=IMBALANCE_TIP,
            )
            for r in imb.compute_sets.head(IMBALANCE_TOP).itertuples()
        )
        out.append(Section(f"{tag}: {d.name}" if tag else IMBALANCE_TITLE, rows))
    return out


# -- StreamCopy -----------------------------------------------------------------------------------
_DEST_NAMES = {
    "host": "host",
    "remoteBuffer": "remote buffer",
    "mixed": "mixed",
    "ipu": "IPU",
    "tile": "tile",
    "none": "none",
}


def _dest_label(dest: str, direction: str) -> str:
    return ("from " if direction == "received" else "to ") + _DEST_NAMES.get(dest, dest)


def _bytes_row(name: str, a: int | None, b: int | None, compare: bool, unit: str) -> Row:
    """A row of bytes: ``(name, A)``, or in compare mode ``(name, A, B, change)`` (a missing
    value counts as 0)."""
    if not compare:
        return Row((name, fmt_bytes(a or 0, unit)))
    return Row(
        (name, fmt_bytes(a or 0, unit), fmt_bytes(b or 0, unit), fmt_delta_pct(a or 0, b or 0))
    )


def stream_sections(doc: Document, cmp: Document | None, unit: str) -> list[Section]:
    """StreamCopy bytes per IPU by direction and destination, and GlobalExchange bytes."""
    ea = data.execution(doc)
    eb = data.execution(cmp) if cmp is not None else None
    if ea is None and eb is None:
        return [Section("No execution", ())]
    n = max(e.num_ipus for e in (ea, eb) if e is not None)
    out = []
    for ipu in range(n):
        rows = []
        for label, attr in (
            ("received", "streamcopy_rx_by_dest"),
            ("sent", "streamcopy_tx_by_dest"),
        ):
            for k, dest in enumerate(DESTINATIONS):
                va = _ipu_value(ea, ipu, lambda e, i, a=attr, k=k: int(getattr(e, a)[i, k]))
                vb = _ipu_value(eb, ipu, lambda e, i, a=attr, k=k: int(getattr(e, a)[i, k]))
                if not va and not vb and dest != "host":
                    continue
                name = f"{label.capitalize()} ({_dest_label(dest, label)})"
                rows.append(_bytes_row(name, va, vb, cmp is not None, unit))
        for label, attr in (
            ("GlobalExchange received", "global_exchange_rx"),
            ("GlobalExchange sent", "global_exchange_tx"),
        ):
            va = _ipu_value(ea, ipu, lambda e, i, a=attr: int(getattr(e, a)[i]))
            vb = _ipu_value(eb, ipu, lambda e, i, a=attr: int(getattr(e, a)[i]))
            if not va and not vb:
                continue
            rows.append(_bytes_row(label, va, vb, cmp is not None, unit))
        out.append(Section(f"IPU {ipu}", tuple(rows)))
    return out


# -- run configuration ----------------------------------------------------------------------------
def config_sections(doc: Document, cmp: Document | None) -> list[Section]:
    """The run configuration (and target parameters) of one profile, or A against B split
    into the options that differ and those that are the same."""
    a = dict(flatten(data.run_config(doc)))
    if cmp is None:
        out = [
            Section("Run configuration", tuple(Row(r) for r in sorted(a.items()))),
            Section("Target parameters", tuple(Row(r) for r in flatten(data.target_config(doc)))),
        ]
        note = data.run_config_note(doc)
        return out + ([Section(note, ())] if note else [])
    b = dict(flatten(data.run_config(cmp)))
    keys = sorted(set(a) | set(b))
    differ = tuple(Row((k, a.get(k, "-"), b.get(k, "-"))) for k in keys if a.get(k) != b.get(k))
    same = tuple(Row((k, a.get(k, "-"), b.get(k, "-"))) for k in keys if a.get(k) == b.get(k))
    return [Section(f"Different ({len(differ)})", differ), Section(f"Same ({len(same)})", same)]


# -- the chart ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CyclesChart:
    """Cycles by step type per IPU (and profile): one bar per label, one stack per name."""

    labels: tuple[str, ...]
    #: the bars' positions (0, 1, ...: IPU 0 of A on top)
    positions: np.ndarray
    values: np.ndarray
    names: tuple[str, ...]
    palette: str
    unit: str


def cycles_chart(doc: Document, cmp: Document | None) -> CyclesChart | None:
    """The chart's bars (None when neither profile has an execution)."""
    docs = [("A", doc), ("B", cmp)] if cmp is not None else [("", doc)]
    series = SERIES["cycles_by_step_type"]
    labels: list[str] = []
    rows: list[np.ndarray] = []
    for tag, d in docs:
        e = data.execution(d)
        if e is None:
            continue
        for ipu in range(e.num_ipus):
            labels.append(f"IPU {ipu}" + (f" ({tag})" if tag else ""))
            rows.append(e.cycles_by_type[ipu, [_T[n] for n in series.names]].astype(np.float64))
    if not rows:
        return None
    return CyclesChart(
        tuple(labels),
        np.arange(len(labels), dtype=float),
        np.vstack(rows),
        series.names,
        series.palette,
        series.unit,
    )


# -- the Comparison tab ---------------------------------------------------------------------------
def comparison_html(result: Any) -> str:
    """Render the analysis core's PairComparison: explanations first, then the rest."""
    html = ["<h3>What changed and why</h3>"]
    expl = [e.text for e in getattr(result, "explanations", [])]
    if expl:
        html.append("<ul>" + "".join(f"<li>{_esc(x)}</li>" for x in expl) + "</ul>")
    else:
        html.append("<p>No measured difference is explained by a run-option difference.</p>")
    other = list(getattr(result, "other_deltas", []))
    if other:
        html.append("<h4>Other differences</h4><ul>")
        html.append("".join(f"<li>{_esc(str(x))}</li>" for x in other) + "</ul>")
    diffs = list(getattr(result, "config_diffs", []))
    html.append(f"<h4>Run options that differ ({len(diffs)})</h4>")
    if diffs:
        html.append("<ul>" + "".join(f"<li>{_esc(d.text())}</li>" for d in diffs) + "</ul>")
    added, removed = (
        list(getattr(result, "ops_added", [])),
        list(getattr(result, "ops_removed", [])),
    )
    if added or removed:
        html.append(
            f"<h4>Operations</h4><p>{len(added)} added, {len(removed)} removed"
            + (": added " + _esc(", ".join(added[:10])) if added else "")
            + ("; removed " + _esc(", ".join(removed[:10])) if removed else "")
            + "</p>"
        )
    return "".join(html)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
