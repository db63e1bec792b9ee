"""The Summary report's view-model (no Qt): what each of its trees, tabs and its chart shows.

The figures are the summary declared once in the catalogue
(:data:`analyser.core.quantities.SUMMARY_SECTIONS`, evaluated by :mod:`analyser.core.summary`):
the same sections, figures, labels, notes and prediction ranges as ``analyse summary`` and the
reports. In compare mode every figure shows A, B, the change and the range of the change (the
fidelity table's interval, :mod:`analyser.core.intervals`). The view only displays these rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from analyser.core.intervals import range_text
from analyser.core.quantities import SERIES, STEP_TYPES
from analyser.core.summary import flatten, summary_sections, summary_tables
from analyser.core.units import (
    MISSING,
    fmt_change,
    fmt_delta_pct,
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
    "Range": "What the real figure (compare mode: its change) may be at 80%, calibrated on the "
    "engine's errors against public figures (the fidelity table, docs/fidelity.md, "
    '"Calibrated intervals"); "outside the validated range" where the table does not cover it',
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
    prediction and the note; two: name, A, B, the change and the range of the change. The
    declared run details follow the figures."""
    sa = declared(doc, unit)
    if cmp is None:
        return SINGLE_HEADERS, [
            *(
                Section(
                    s["title"],
                    tuple(
                        Row((r["title"], r["text"], r["range"], r["note"]), tip=r["note"])
                        for r in s["figures"]
                    ),
                )
                for s in sa
            ),
            *table_sections_in_figures(doc, None, unit),
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
            if first is None:  # pragma: no cover - every key is a figure of A or of B
                continue
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
    return COMPARE_HEADERS, [*sections, *table_sections_in_figures(doc, cmp, unit)]


def _change_intervals(doc: Document, cmp: Document) -> dict[str, str]:
    """The range of each compared key figure's change (the core's comparison)."""
    try:
        pair = data.comparison(doc, cmp)
    except ModuleNotFoundError:
        return {}
    return {m.key: range_text(m.interval) for m in pair.metrics if m.interval}


# -- the declared breakdown tables (analyser.core.quantities.SUMMARY_TABLES) ---------------------
def tables(doc: Document, unit: str) -> dict[str, dict[str, Any]]:
    """The declared breakdown tables of ``doc`` in memory ``unit``, by key (cached)."""
    return doc.cached(
        f"summary-tables:{unit}", lambda: {t["key"]: t for t in summary_tables(doc.analysis, unit)}
    )


def _cap(label: str) -> str:
    return label[:1].upper() + label[1:]


def _group(table: dict[str, Any]) -> int | None:
    """The index of the table's grouping column (None: not grouped)."""
    return next((i for i, c in enumerate(table["columns"]) if c["key"] == table["group"]), None)


def table_headers(table: dict[str, Any]) -> tuple[str, ...]:
    """A declared table's columns as the GUI shows them: each label capitalised, the grouping
    column left out (it titles the sections)."""
    g = _group(table)
    return tuple(_cap(c["label"]) for i, c in enumerate(table["columns"]) if i != g)


def table_sections(table: dict[str, Any], title: str = "") -> list[Section]:
    """A declared table's rows: one section per value of its grouping column ("IPU 0"), or one
    section titled ``title`` (default: the table's title)."""
    g = _group(table)
    if g is None:
        rows = tuple(Row(tuple(r["cells"])) for r in table["rows"])
        return [Section(title or table["title"], rows)]
    label = table["columns"][g]["label"]
    out: dict[Any, list[Row]] = {}
    names: dict[Any, str] = {}
    for r in table["rows"]:
        key = r["values"][g]
        names.setdefault(key, f"{label} {r['cells'][g]}")
        out.setdefault(key, []).append(Row(tuple(c for i, c in enumerate(r["cells"]) if i != g)))
    return [Section(names[k], tuple(rows)) for k, rows in out.items()]


def _by_name(table: dict[str, Any] | None) -> dict[Any, dict[str, dict[str, Any]]]:
    """A table's rows by group value, then by name (the first column after the group)."""
    if table is None:
        return {}
    g = _group(table)
    first = 0 if g != 0 else 1
    out: dict[Any, dict[str, dict[str, Any]]] = {}
    for r in table["rows"]:
        key = r["values"][g] if g is not None else None
        out.setdefault(key, {})[r["cells"][first]] = r
    return out


def compare_table(ta: dict[str, Any] | None, tb: dict[str, Any] | None, unit: str) -> list[Section]:
    """A declared table of A against B: per section (group value), one row per row name and
    compared column (``compare`` of the declaration): name, A, B, the change (coloured by
    nothing: a breakdown's rows have no better direction)."""
    t = ta or tb
    if t is None:
        return []
    cols = {c["key"]: (i, c) for i, c in enumerate(t["columns"])}
    ra, rb = _by_name(ta), _by_name(tb)
    g = _group(t)
    out = []
    for key in list(ra) + [k for k in rb if k not in ra]:
        a, b = ra.get(key, {}), rb.get(key, {})
        rows = []
        for name in list(a) + [n for n in b if n not in a]:
            for ck in t["compare"]:
                i, col = cols[ck]
                va = a[name]["values"][i] if name in a else None
                vb = b[name]["values"][i] if name in b else None
                if va is None and vb is None:
                    continue
                xa = a[name]["cells"][i] if name in a else MISSING
                xb = b[name]["cells"][i] if name in b else MISSING
                shown = name if len(t["compare"]) == 1 else f"{name}: {col['label']}"
                both = name in a and name in b  # a row one profile lacks: no change
                change = change_text(col["kind"] or "text", va, vb, xa, xb, unit) if both else ""
                rows.append(Row((shown, xa, xb, change)))
        title = t["title"] if g is None else f"{t['columns'][g]['label']} {key}"
        out.append(Section(title, tuple(rows)))
    return out


#: The compare-mode columns of a compared table.
COMPARE_TABLE_HEADERS = ("Name", "A", "B", "Change")


def table_view(
    doc: Document, cmp: Document | None, key: str, unit: str
) -> tuple[tuple[str, ...], list[Section]] | None:
    """Declared table ``key`` as a tree: headers and sections; in compare mode A against B (its
    compared columns), or A's rows then B's; None when neither profile has it."""
    ta = tables(doc, unit).get(key)
    tb = tables(cmp, unit).get(key) if cmp is not None else None
    if ta is None and tb is None:
        return None
    t = ta or tb
    if t is None:  # pragma: no cover - checked above; says so to the type checker
        return None
    if cmp is None:  # t is A's table
        return table_headers(t), table_sections(t)
    if t["compare"]:
        return COMPARE_TABLE_HEADERS, compare_table(ta, tb, unit)
    out = []
    for tag, d, tt in (("A", doc, ta), ("B", cmp, tb)):
        if tt is None:
            out.append(Section(f"{tag}: {d.name}: no execution", ()))
        else:
            out += table_sections(tt, f"{tag}: {d.name}")
    return table_headers(t), out


def table_note(doc: Document, cmp: Document | None, key: str, unit: str = "KiB") -> str:
    """The sentence declared under table ``key`` (what its columns mean), or ``""``."""
    t = tables(doc, unit).get(key) or (tables(cmp, unit).get(key) if cmp is not None else None)
    return t["note"] if t else ""


NO_EXECUTION_SECTION = [Section("No execution", ())]


def ipu_view(doc: Document, cmp: Document | None, unit: str = "KiB") -> Any:
    """Cycles by step type per IPU, the total and the cycles lost to tile imbalance (the
    declared table); None when neither profile has an execution."""
    return table_view(doc, cmp, "cycles_by_step_type", unit)


def imbalance_view(doc: Document, cmp: Document | None, unit: str = "KiB") -> Any:
    """The compute sets losing the most cycles to tile imbalance (A's, then B's)."""
    return table_view(doc, cmp, "imbalance_compute_sets", unit) or (
        ("Compute set",),
        NO_EXECUTION_SECTION,
    )


def stream_view(doc: Document, cmp: Document | None, unit: str) -> Any:
    """StreamCopy bytes per IPU by destination, and GlobalExchange bytes (the declared table)."""
    return table_view(doc, cmp, "streamcopy", unit) or (("Name",), NO_EXECUTION_SECTION)


#: The declared tables with a tree of their own in the Summary's tabs; every other declared
#: table (the run details, a table added to the declaration) follows the figures in the figure
#: tree.
OWN_TREES = ("cycles_by_step_type", "imbalance_compute_sets", "streamcopy", "run_configuration")


def _fit(cells: tuple[str, ...], width: int) -> tuple[str, ...]:
    """A row's cells in a tree of ``width`` columns: padded, or the last ones joined."""
    if len(cells) > width:
        cells = (*cells[: width - 1], " · ".join(cells[width - 1 :]))
    return cells + ("",) * (width - len(cells))


def table_sections_in_figures(doc: Document, cmp: Document | None, unit: str) -> list[Section]:
    """The declared tables without a tree of their own (:data:`OWN_TREES`), as sections of the
    figure tree (in compare mode A, B and the change of their compared columns); a table the
    profiles do not have (the run details without an execution) is left out."""
    width = len(SINGLE_HEADERS if cmp is None else COMPARE_HEADERS)
    out = []
    keys = list(tables(doc, unit))
    keys += [k for k in (tables(cmp, unit) if cmp is not None else {}) if k not in keys]
    for key in keys:
        if key in OWN_TREES:
            continue
        view = table_view(doc, cmp, key, unit)
        table = tables(doc, unit).get(key)
        if table is None and cmp is not None:
            table = tables(cmp, unit).get(key)
        if view is None or table is None:  # pragma: no cover - the key is a table of A or B
            continue
        t = table["title"]
        for sec in view[1]:
            title = sec.title if sec.title.startswith(t) else f"{t}: {sec.title}"
            if cmp is None:
                rows = [
                    Row(_fit(_figure_row(table, r.cells), width), tip=" · ".join(r.cells[1:]))
                    for r in sec.rows
                ]
            else:  # A and B elided (the figures' columns stay in view), whole in the tooltip
                rows = [
                    Row(
                        _fit((r.cells[0], *map(_elide, r.cells[1:3]), *r.cells[3:]), width),
                        tip=f"A: {r.cells[1]}\nB: {r.cells[2]}",
                    )
                    for r in sec.rows
                ]
            out.append(Section(title, tuple(rows)))
    return out


#: How many characters of a text cell the compare-mode figure tree shows (a date's: A and B
#: stay as wide as their figures need).
ELIDE = 16


def _elide(text: str) -> str:
    return text if len(text) <= ELIDE else text[: ELIDE - 1] + "…"


def _figure_row(table: dict[str, Any], cells: tuple[str, ...]) -> tuple[str, ...]:
    """A single-mode row of a declared table in the figure tree (Name, Value, Range, Note): its
    first cell the name, its figures joined in Value, its words (text columns) in Note (a
    column of words, so that long ones do not widen the figures')."""
    g = _group(table)
    cols = [c for i, c in enumerate(table["columns"]) if i != g]
    figures = [x for c, x in zip(cols[1:], cells[1:]) if c["kind"] is not None and x]
    words = [x for c, x in zip(cols[1:], cells[1:]) if c["kind"] is None and x]
    return (cells[0], " · ".join(figures), "", " · ".join(words))


# -- run configuration ----------------------------------------------------------------------------
def config_sections(doc: Document, cmp: Document | None) -> list[Section]:
    """The run configuration (the declared table) and the target parameters of one profile, or
    A against B split into the options that differ and those that are the same."""
    a = {r["cells"][0]: r["cells"][1] for r in tables(doc, "KiB")["run_configuration"]["rows"]}
    if cmp is None:
        out = [
            *table_sections(tables(doc, "KiB")["run_configuration"]),
            Section("Target parameters", tuple(Row(r) for r in flatten(data.target_config(doc)))),
        ]
        note = data.run_config_note(doc)
        return out + ([Section(note, ())] if note else [])
    tb = tables(cmp, "KiB")["run_configuration"]
    b = {r["cells"][0]: r["cells"][1] for r in tb["rows"]}
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
