"""What the Operations report shows, without Qt (the view only draws): the table
at each software layer (the framework's operations, model layers, Poplar programs) or A and B
joined by name, its columns, filters and first sort, the selected row's operations and
programs, its summary and detail tables, and the data of its charts (cycles by tile, memory by
category); and the Roofline report's points and roofs. Numbers come from the analysis core
(:mod:`analyser.core.operations`, :mod:`analyser.core.roofline`) through
:mod:`analyser.gui.model.data`.

Share of cycles has one definition at every layer: the core's
``cycles_share`` column, a row's total cycles over the run's executed step cycles summed over
IPUs (the catalogue's ``SHARE_OF_CYCLES``, the column's tooltip); this module passes it on and
never recomputes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analyser.core.operations import SOFTWARE_LAYERS, software_layer_titles
from analyser.core.quantities import columns, step_type_name
from analyser.core.units import MemoryUnits, fmt_bytes, fmt_count, fmt_pct
from analyser.gui.model import data

if TYPE_CHECKING:
    from analyser.core.roofline import Roofline
    from analyser.gui.model.document import Document

__all__ = [
    "SOFTWARE_LAYERS",
    "compare_frame",
    "filter_mask",
    "selection_of",
    "software_layer_titles",
    "table_columns",
]

#: The operations table's columns for a profile that never ran (out of memory).
NOT_EXECUTED_COLUMNS = (
    "name",
    "type",
    "layer",
    "source",
    "pass",
    "ipu",
    "stage",
    "memory_bytes",
    "temp_bytes",
    "code_bytes",
    "cycles",
    "flops",
    "tiles_used",
)
#: The catalogue's table (analyser.core.quantities.TABLES) of each software layer.
LAYER_TABLES = {
    "operations": "operations",
    "layers": "operation_layers",
    "programs": "operation_programs",
}
#: The name column's title at each software layer.
NAME_TITLES = {"operations": "Operation", "layers": "Layer", "programs": "Program"}
#: Columns that mean nothing for a profile that never ran (out of memory).
EXECUTED_ONLY = ("executions", "total_cycles", "cycles_share", "flops_per_cycle")
#: The figures A and B are joined on in compare mode (those the layer's table has).
COMPARED_NUMBERS = ("total_cycles", "memory_bytes", "code_bytes", "flops")
#: The labels kept from A (else B) in compare mode.
COMPARED_LABELS = ("type", "pass", "ipu")


def table_columns(layer: str, units: MemoryUnits, compare: bool, executed: bool = True) -> list:
    """``(key, title, formatter)`` of the table at ``layer``: A and B's joined columns when
    comparing; for a profile that never ran, no executions, total cycles or shares (columns of
    zeros would read as measured) and cycles titled as the compiler's estimate."""
    name = NAME_TITLES[layer]
    if compare:
        return columns("operations_compared", units, name=name)
    if layer == "operations" and not executed:
        return columns("operations", units, NOT_EXECUTED_COLUMNS, cycles="Cycles (estimate)")
    cols = columns(LAYER_TABLES[layer], units)
    if not executed:
        cols = [
            (k, "Cycles (estimate)" if k == "cycles" else t, f)
            for k, t, f in cols
            if k not in EXECUTED_ONLY
        ]
    return cols


def layer_frame(doc: Document, layer: str) -> pd.DataFrame:
    """``doc``'s table at software ``layer`` (analysis core, cached)."""
    return data.operation_layer(doc, layer)


def shown_frame(doc: Document, cmp: Document | None, layer: str) -> pd.DataFrame:
    """The table the report shows: ``doc``'s at ``layer`` (operations keep their id as a
    column), or A and B joined (:func:`compare_frame`)."""
    if cmp is None:
        return layer_frame(doc, layer).reset_index(drop=layer != "operations")
    return compare_frame(doc, cmp, layer)


def compare_frame(doc: Document, cmp: Document, layer: str) -> pd.DataFrame:
    """A and B joined by name at ``layer`` (values from each document's table; rows of the
    same name summed): each figure for A and B, a status (in both, A only, B only), the change
    of total cycles B - A and its ratio to A; largest change first."""
    first = layer_frame(doc, layer)
    labels = [c for c in COMPARED_LABELS if c in first]
    numbers = [c for c in COMPARED_NUMBERS if c in first]

    def prepared(d: Document) -> pd.DataFrame:
        f = layer_frame(d, layer)[["name", *labels, *numbers]]
        if f["name"].duplicated().any():
            agg = {c: "first" for c in labels} | {c: "sum" for c in numbers}
            f = f.groupby("name", sort=False).agg(agg).reset_index()
        return f

    a, b = prepared(doc), prepared(cmp)
    m = a.merge(b, on="name", how="outer", suffixes=("_a", "_b"), indicator=True)
    for col in labels:
        m[col] = (
            m[f"{col}_a"].astype(object).where(m[f"{col}_a"].notna(), m[f"{col}_b"].astype(object))
        )
    for col in numbers:
        m[f"{col}_a"] = m[f"{col}_a"].fillna(0).astype(np.int64)
        m[f"{col}_b"] = m[f"{col}_b"].fillna(0).astype(np.int64)
    m["status"] = (
        m["_merge"]
        .map({"both": "both", "left_only": "A only (removed)", "right_only": "B only (added)"})
        .astype(str)
    )
    if "total_cycles" in numbers:
        m["total_cycles_delta"] = m["total_cycles_b"] - m["total_cycles_a"]
        with np.errstate(divide="ignore", invalid="ignore"):
            m["total_cycles_rel"] = np.where(
                m["total_cycles_a"] > 0,
                m["total_cycles_delta"] / m["total_cycles_a"].clip(lower=1),
                np.nan,
            )
    else:
        m["total_cycles_delta"] = 0
        m["total_cycles_rel"] = np.nan
    m = m.drop(columns=["_merge", *[f"{c}_{t}" for c in labels for t in "ab"]])
    order = np.argsort(-np.abs(m["total_cycles_delta"].to_numpy()), kind="stable")
    return m.iloc[order].reset_index(drop=True)


def filter_choices(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The pass and IPU choices of ``frame`` (sorted; without the leading "All")."""
    passes = sorted({str(p) for p in frame.get("pass", pd.Series(dtype=str))})
    ipus = sorted({int(i) for i in frame.get("ipu", pd.Series(dtype=int)).dropna()})
    return passes, [str(i) for i in ipus]


def filter_mask(
    frame: pd.DataFrame, text: str, pass_: str | None, ipu: str | None
) -> np.ndarray | None:
    """Rows of ``frame`` to show: ``text`` in the name, type, layer, source or operation
    (case-insensitive), of pass ``pass_`` and on IPU ``ipu`` (None: any); None for an empty
    frame."""
    if frame.empty:
        return None
    keep = np.ones(len(frame), bool)
    if text:
        hay = frame["name"].astype(str) + " " + frame["type"].astype(str)
        for extra in ("layer", "source", "operation"):
            if extra in frame:
                hay = hay + " " + frame[extra].astype(str)
        keep &= hay.str.contains(text, case=False, regex=False).to_numpy()
    if pass_ is not None and "pass" in frame:
        keep &= (frame["pass"].astype(str) == pass_).to_numpy()
    if ipu is not None:
        keep &= (frame["ipu"].astype(float) == float(ipu)).to_numpy()
    return keep


def first_sort_key(frame: pd.DataFrame, executed: bool, compare: bool) -> str:
    """The column sorted first (descending): the change of total cycles when comparing, else
    total cycles, or memory when the profile never ran (OOM), or the cycles estimate."""
    if compare:
        return "total_cycles_delta"
    first = "total_cycles" if executed else "memory_bytes"
    return first if first in frame else "cycles"


def selection_of(doc: Document, layer: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(operation ids, program rows) of the row called ``name`` at ``layer`` in ``doc``: an
    operation and its programs, a layer's operations and their programs, or a program and its
    operation."""
    nodes = data.program_nodes(doc)
    node_op = nodes["op"].to_numpy()
    if layer == "programs":
        frame = layer_frame(doc, layer)
        progs = frame["program"].to_numpy()[frame["name"].astype(str).to_numpy() == name]
        op_ids = np.unique(node_op[progs])
        return op_ids[op_ids >= 0].astype(np.int64), progs.astype(np.int64)
    op_ids = operation_ids(doc, layer, name)
    return op_ids, np.flatnonzero(np.isin(node_op, op_ids))


def operation_ids(doc: Document, layer: str, name: str) -> np.ndarray:
    """Ids of the operations of the row called ``name`` at ``layer`` ("operations": the
    operation, "layers": the layer's operations), without reading the programs."""
    key = "name" if layer == "operations" else "layer"
    return np.flatnonzero(data.operations(doc)[key].astype(str).to_numpy() == name).astype(np.int64)


def summary_rows(
    doc: Document, layer: str, name: str, op_ids: np.ndarray, units: MemoryUnits
) -> list[tuple[str, str]]:
    """The Summary tab's rows of the selected row: an operation's figures (the first of
    ``op_ids``), or a layer's / program's row as the table shows it."""
    if layer != "operations":
        frame = layer_frame(doc, layer)
        row = frame[frame["name"].astype(str).to_numpy() == name].iloc[0]
        cols = table_columns(layer, units, False, bool(doc.has_execution))
        return [
            (title, fmt(row[key]) if fmt is not None else str(row[key]))
            for key, title, fmt in cols[1:]
            if key in row.index
        ]
    row = data.operations(doc).iloc[int(op_ids[0])]

    def b(v: Any) -> str:
        return fmt_bytes(v, units)

    return [
        ("Type", str(row["type"])),
        ("Layer", str(row["layer"])),
        ("Pass", str(row["pass"])),
        ("IPU", str(row["ipu"])),
        ("Pipeline stage", str(row["stage"])),
        ("Cycles (one execution)", fmt_count(int(row["cycles"]))),
        ("Executions", fmt_count(int(row["executions"]))),
        ("Total cycles", fmt_count(int(row["total_cycles"]))),
        ("Share of cycles", fmt_pct(float(row["cycles_share"]))),
        ("FLOPs", fmt_count(int(row["flops"]))),
        ("FLOPs per cycle", f"{float(row['flops_per_cycle']):,.1f}"),
        ("Bytes in / out", f"{b(int(row['bytes_in']))} / {b(int(row['bytes_out']))}"),
        ("Memory (variables it owns)", b(int(row["memory_bytes"]))),
        ("Temporary memory", b(int(row["temp_bytes"]))),
        ("Code", b(int(row["code_bytes"]))),
        ("Tiles", f"{int(row['tiles_used']):,} from tile {int(row['tile_start'])}"),
    ]


@dataclass
class RowDetails:
    """The selected row in one profile: its summary and what belongs to it."""

    label: str  # the summary section's title
    rows: list[tuple[str, str]]  # the summary (a "not in this profile" status when absent)
    variables: pd.DataFrame | None = None  # its operations' variables
    compute_sets: pd.DataFrame | None = None  # its operations' compute sets
    programs: pd.DataFrame | None = None  # its programs


def row_details(
    docs: Sequence[tuple[str, Document]],
    layer: str,
    name: str,
    units: MemoryUnits,
    tables: bool = True,
) -> list[RowDetails]:
    """The details of the row called ``name`` at ``layer`` in each (tag, document): summary,
    variables, compute sets and programs (each with a ``profile`` column when comparing).
    ``tables`` False: the summaries alone, without reading the variables, compute sets and
    program tables (the report reads them when one of their tabs is shown)."""
    out = []
    for tag, d in docs:
        label = f"{tag}: {name}" if len(docs) > 1 else name
        if tables or layer == "programs":
            op_ids, prog_rows = selection_of(d, layer, name)
        else:  # an operation's or a layer's programs exist only with its operations
            op_ids = operation_ids(d, layer, name)
            prog_rows = op_ids[:0]
        if not op_ids.size and not prog_rows.size:
            out.append(RowDetails(label, [("Status", "not in this profile")]))
            continue
        rows = summary_rows(d, layer, name, op_ids, units)
        if not tables:
            out.append(RowDetails(label, rows))
            continue
        v = data.listed_variables(d)
        v = v[np.isin(v["op"].to_numpy(), op_ids)]
        cs = data.compute_sets(d)
        cs = cs[np.isin(cs["op"].to_numpy(), op_ids)]
        nodes = data.program_nodes(d)
        progs = nodes.iloc[prog_rows][
            ["name", "type", "ipu", "cycles", "tile_balance", "bytes"]
        ].copy()
        progs["type"] = [str(x) for x in progs["type"].map(lambda t: step_type_name(int(t)))]
        if len(docs) > 1:
            v, cs, progs = v.assign(profile=tag), cs.assign(profile=tag), progs.assign(profile=tag)
        out.append(RowDetails(label, rows, v, cs, progs))
    return out


def joined(frames: Sequence[pd.DataFrame | None]) -> pd.DataFrame:
    """The frames one under the other (an empty frame for none)."""
    kept = [f for f in frames if f is not None]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


@dataclass
class RowCharts:
    """The Charts tab of the selected row over A (and B)."""

    #: (profile index, IPU, [tiles] cycles of one execution of its programs) per curve
    tile_cycles: list[tuple[int, int, np.ndarray]]
    #: the line under the charts: the slowest tile and the busy tiles of each IPU
    text: str
    #: memory categories (variables by kind, temporary, code) of either profile, in order
    categories: list[str]
    #: [profiles, categories] bytes
    memory: np.ndarray

    def memory_bars(self) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """Horizontal bars per profile: (y of each category, its bytes, bar height), A's and
        B's side by side within each category's row."""
        n = len(self.categories)
        width = 0.8 / max(len(self.memory), 1)
        return [
            (np.arange(n) - 0.4 + width * (k + 0.5), values, width * 0.9)
            for k, values in enumerate(self.memory)
        ]

    def top(self) -> float:
        """The largest category's bytes (0 for none)."""
        return float(self.memory.max()) if self.memory.size else 0.0


def row_charts(docs: Sequence[tuple[str, Document]], layer: str, name: str) -> RowCharts:
    """Cycles by tile (one execution of the row's programs, per IPU) and memory by category (its
    operations' variables by kind, temporary memory, code) of the row called ``name`` in each
    (tag, document)."""
    curves, lines = [], []
    categories: list[str] = []
    values: list[pd.Series] = []
    for k, (tag, d) in enumerate(docs):
        op_ids, progs = selection_of(d, layer, name)
        who = f"{tag}: " if len(docs) > 1 else ""
        for ipu, cycles in data.tile_cycles_by_ipu(d, progs).items():
            curves.append((k, ipu, cycles))
            busy = cycles[cycles > 0]
            lines.append(
                f"{who}IPU {ipu}: {fmt_count(int(cycles.max()))} cycles on the slowest tile, "
                f"{fmt_count(int(busy.size))} tiles busy"
            )
        mem = data.memory_by_category(d, op_ids)
        values.append(mem)
        categories += [c for c in mem.index if c not in categories]
    if not lines:
        lines.append("No program of this row runs on a tile.")
    memory = np.array([[float(m.get(c, 0)) for c in categories] for m in values]).reshape(
        len(values), len(categories)
    )
    return RowCharts(curves, "; ".join(lines), categories, memory)


@dataclass(frozen=True)
class RooflinePoints:
    """One profile's operations on the roofline chart (log10 axes) and its roofs."""

    x: np.ndarray  # log10 FLOPs per byte exchanged of each drawn operation
    y: np.ndarray  # log10 FLOPs per cycle achieved
    limits: tuple[str, ...]  # the roof that binds each ("compute", "exchange", "host link")
    names: np.ndarray  # operation names (object array)
    roof_x: np.ndarray  # log10 intensity of the roof line's three points (the ridge between)
    roof_y: np.ndarray  # log10 FLOPs per cycle of the roof line
    text: str  # the header line: operations drawn per bound, not drawn, the roofs


def roofline_points(r: Roofline, prefix: str) -> RooflinePoints:
    """The roofline chart of analysis core roofline ``r``: operations that exchange something
    and achieve some FLOPs (the others are counted, not drawn), and the roof (the exchange
    slope up to the AMP peak) over their range; ``prefix`` starts the header line."""
    ops = r.operations
    finite = np.isfinite(ops["intensity_exchange"].to_numpy()) & (ops["achieved"] > 0).to_numpy()
    sel = ops[finite]
    x = np.log10(sel["intensity_exchange"].to_numpy(float))
    y = np.log10(sel["achieved"].to_numpy(float))
    ro = r.roofs
    lo = float(x.min()) - 1 if x.size else -2.0
    hi = float(x.max()) + 1 if x.size else 4.0
    ridge = np.log10(ro.peak_flops_per_cycle / ro.exchange_bytes_per_cycle)
    xs = np.array([min(lo, ridge - 1), ridge, max(hi, ridge + 1)])
    ys = np.log10(np.minimum(10.0**xs * ro.exchange_bytes_per_cycle, ro.peak_flops_per_cycle))
    counts = sel["limit"].value_counts()
    nothing = int((~finite).sum())
    text = (
        prefix
        + f"{len(sel):,} operations drawn ("
        + ", ".join(f"{int(v):,} {k}-bound" for k, v in counts.items())
        + f"); {nothing:,} exchange nothing (not drawn). Roofs per IPU ({ro.label}): "
        f"AMP peak {ro.peak_flops_per_cycle:,.0f} FLOPs/cycle, exchange "
        f"{fmt_bytes(ro.exchange_bytes_per_cycle)}/cycle."
    )
    return RooflinePoints(x, y, tuple(sel["limit"]), sel["name"].to_numpy(object), xs, ys, text)
