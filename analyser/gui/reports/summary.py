"""Summary report: target, run configuration (with a filter), graph statistics, memory and
execution statistics per IPU (cycles by step type, tile balance, StreamCopy by direction and
destination) and throughput. In compare mode every figure shows A, B and the change."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QLineEdit,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from analyser.core.quantities import (
    DESTINATIONS,
    EXECUTABLE_TYPES,
    QUANTITIES,
    SERIES,
    STEP_TYPES,
)
from analyser.core.units import (
    MISSING,
    fmt_bytes,
    fmt_change,
    fmt_count,
    fmt_delta_pct,
    fmt_int,
    fmt_pct,
    fmt_pts_delta,
    fmt_seconds,
)
from analyser.gui.axes import use_cycle_axis
from analyser.gui.model import data
from analyser.gui.palette import hex_color
from analyser.gui.reports.base import MessagePanel, Report
from analyser.gui.widgets import (
    KeyValueTree,
    LegendLabel,
    color_delta_item,
    make_plot,
    stacked_bars,
)

EXEC_TYPES = EXECUTABLE_TYPES
_T = {name: i for i, name in enumerate(STEP_TYPES)}


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


class Figure:
    """One summary row: a label, how to read the value from a document, how to format it."""

    def __init__(
        self,
        label: str,
        get: Callable[[Any], Any],
        fmt: Callable[[Any], str],
        kind: str = "count",
        higher_is_better: bool | None = None,
    ) -> None:
        self.label = label
        self.get = get
        self.fmt = fmt
        self.kind = kind  # "count", "bytes", "share", "text"
        self.higher_is_better = higher_is_better


class SummaryReport(Report):
    title = "Summary"
    key = "summary"
    data_needs = ("target", "metrics", "execution")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tree = KeyValueTree()
        self.ipu_tree = KeyValueTree()
        self.stream_tree = KeyValueTree()
        self.config_filter = QLineEdit()
        self.config_filter.setPlaceholderText("Filter run configuration (e.g. precision, pipeline)")
        self.config_filter.setClearButtonEnabled(True)
        self.config_filter.textChanged.connect(self._apply_config_filter)
        self.config_tree = KeyValueTree(("Option", "Value"))
        self.explanation = QTextBrowser()
        self.explanation.setOpenExternalLinks(False)
        self.plot = make_plot(bottom="cycles", mouse=False)
        use_cycle_axis(self.plot, "bottom")
        self.plot.getPlotItem().getViewBox().invertY(True)  # IPU 0 on top, as in the trace
        self.plot.setMinimumHeight(140)
        self.legend = LegendLabel()
        self.chart_panel = QWidget()
        chart_layout = QVBoxLayout(self.chart_panel)
        chart_layout.setContentsMargins(0, 0, 0, 0)
        chart_layout.addWidget(self.plot, 1)
        chart_layout.addWidget(self.legend)
        self.no_exec = MessagePanel("")

        config_page = QWidget()
        cl = QVBoxLayout(config_page)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(self.config_filter)
        cl.addWidget(self.config_tree)

        exec_page = QWidget()
        el = QVBoxLayout(exec_page)
        el.setContentsMargins(0, 0, 0, 0)
        self.exec_stack = QStackedWidget()
        exec_inner = QSplitter(Qt.Orientation.Vertical)
        exec_inner.addWidget(self.chart_panel)
        exec_inner.addWidget(self.ipu_tree)
        exec_inner.setSizes([220, 400])
        self.exec_stack.addWidget(exec_inner)
        self.exec_stack.addWidget(self.no_exec)
        el.addWidget(self.exec_stack)

        self.tabs = QTabWidget()
        self.tabs.addTab(exec_page, "Cycles by step type")
        self.tabs.addTab(self.stream_tree, "StreamCopy")
        self.tabs.addTab(config_page, "Run configuration")
        self.explanation_index = self.tabs.addTab(self.explanation, "Comparison")

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.tree)
        splitter.addWidget(self.tabs)
        splitter.setSizes([480, 700])
        self.splitter = splitter
        self.lay_out_with_empty_states()
        self.set_content(splitter)

    def chart_widget(self) -> QWidget:
        return self.chart_panel

    # ------------------------------------------------------------------ figures
    def _figures(self) -> list[tuple[str, list[Figure]]]:
        u = self.units

        def b(v: Any) -> str:
            return fmt_bytes(v, u)

        def t(doc: Any) -> Any:
            return data.target(doc)

        def m(doc: Any) -> Any:
            return data.metrics(doc)

        target = [
            Figure("Model", lambda d: t(d).model, str, "text"),
            Figure("Target", lambda d: t(d).target_name or t(d).architecture, str, "text"),
            Figure("Architecture", lambda d: t(d).architecture, str, "text"),
            Figure("IPUs", lambda d: t(d).num_ipus, fmt_count),
            Figure("Replicas", lambda d: t(d).replicas, fmt_count),
            Figure("Tiles per IPU", lambda d: t(d).tiles_per_ipu, fmt_count),
            # the target's memory: more is better (a change of target)
            Figure("Memory per tile", lambda d: t(d).sram_per_tile, b, "bytes", True),
            Figure("Memory per IPU", lambda d: t(d).memory_per_ipu, b, "bytes", True),
            Figure("Total memory", lambda d: t(d).memory_total, b, "bytes", True),
            Figure("Clock", lambda d: t(d).clock_hz / 1e9, lambda v: f"{v:.3f} GHz", "count"),
            Figure("Samples per step", lambda d: t(d).samples_per_step, fmt_count),
        ]
        graph = [
            Figure("Operations", lambda d: t(d).n_operations, fmt_count),
            Figure("Variables", lambda d: t(d).n_variables, fmt_count),
            Figure("Vertex types", lambda d: t(d).n_vertex_types, fmt_count),
            Figure("Compute sets", lambda d: t(d).n_compute_sets, fmt_count),
            Figure("Programs", lambda d: t(d).n_programs, fmt_count),
            Figure("Liveness steps", lambda d: t(d).n_liveness_steps, fmt_count),
            Figure("Executed steps", lambda d: t(d).n_executed_steps, fmt_count),
            Figure("Engine version", lambda d: t(d).engine_version, str, "text"),
            Figure("Created", lambda d: t(d).created[:16].replace("T", " "), str, "text"),
        ]

        def metric(key: str) -> Figure:
            """A key figure of the catalogue (analyser.core.quantities): its title, formatter
            and direction."""
            q = QUANTITIES[key]
            return Figure(
                q.title,
                lambda d: getattr(m(d), key),
                lambda v: q.format(v, u),
                {"bytes": "bytes", "share": "share"}.get(q.kind, "count"),
                q.higher_is_better,
            )

        memory = [
            Figure(
                "Status",
                lambda d: "fits" if m(d).fits else "OUT OF MEMORY",
                str,
                "text",
            ),
            metric("peak_memory_bytes"),
            metric("memory_share_used"),
            metric("max_tile_memory_bytes"),
            metric("oom_tiles"),
            metric("always_live_bytes"),
            metric("not_always_live_peak_bytes"),
            metric("code_bytes"),
            metric("remote_buffer_bytes"),
        ]
        execution = [
            metric("total_cycles"),
            metric("device_cycles"),
            Figure(
                "Run time",
                lambda d: None if m(d).total_cycles is None else m(d).total_cycles / t(d).clock_hz,
                fmt_seconds,
                "count",
                False,
            ),
            metric("host_seconds"),
            metric("samples"),
            metric("cycles_per_sample"),
            metric("throughput_samples_per_s"),
            metric("host_round_trips"),
            metric("compute_share"),
            metric("host_wait_share"),
            metric("ramp_share"),
            metric("tile_balance"),
            metric("streamcopy_rx_bytes"),
            metric("streamcopy_tx_bytes"),
        ]
        return [("Target", target), ("Graph", graph), ("Memory", memory), ("Execution", execution)]

    # ------------------------------------------------------------------ refresh
    def clear(self) -> None:
        for tree in (self.tree, self.ipu_tree, self.stream_tree, self.config_tree):
            tree.clear()
        self.plot.getPlotItem().clear()
        self.explanation.clear()

    def show_documents(self, doc: Any, cmp: Any) -> None:
        self.clear()
        self.tabs.setTabVisible(self.explanation_index, cmp is not None)
        compare = cmp is not None
        self.splitter.setSizes([760, 640] if compare else [480, 700])
        headers = ("Name", "A", "B", "Change") if compare else ("Name", "Value")
        for tree in (self.tree, self.stream_tree):
            tree.set_headers(headers)
        self.ipu_tree.set_headers(
            headers if compare else ("Step type", "Cycles", "Share", "Steps", "Tile balance")
        )
        self.config_tree.set_headers(("Option", "A", "B") if compare else ("Option", "Value"))

        for section, figures in self._figures():
            if section == "Execution" and not (doc.has_execution or (cmp and cmp.has_execution)):
                continue
            self._add_figures(section, figures, doc, cmp)
        self._fill_ipus(doc, cmp)
        self._fill_streams(doc, cmp)
        self._fill_config(doc, cmp)
        self._draw_chart(doc, cmp)
        if compare:
            self._fill_explanation(doc, cmp)

    def _add_figures(self, section: str, figures: list[Figure], doc: Any, cmp: Any) -> None:
        rows = []
        deltas = []
        for f in figures:
            a = f.get(doc)
            fa = f.fmt(a) if a is not None else MISSING
            if cmp is None:
                rows.append((f.label, fa))
                continue
            bval = f.get(cmp)
            fb = f.fmt(bval) if bval is not None else MISSING
            change, delta = "", 0.0
            if f.kind != "text" and a is not None and bval is not None:
                delta = float(bval) - float(a)
                if f.kind == "bytes":
                    change = fmt_change(a, bval, self.units)
                elif f.kind == "share":
                    change = fmt_pts_delta(a, bval)
                else:
                    change = fmt_delta_pct(float(a), float(bval))
            elif f.kind == "text" and fa != fb:
                change = "differs"
            rows.append((f.label, fa, fb, change))
            # coloured only when the change as shown is not zero ("+0.0 pts" stays plain)
            shown = change.split("(")[0]
            deltas.append(
                (delta if any(c in "123456789" for c in shown) else 0.0, f.higher_is_better)
            )
        item = self.tree.add_section(section, rows)
        if cmp is not None:
            for i, (delta, hib) in enumerate(deltas):
                if hib is not None:
                    color_delta_item(item.child(i), 3, delta, hib)

    def _fill_ipus(self, doc: Any, cmp: Any) -> None:
        ea, eb = data.execution(doc), data.execution(cmp) if cmp is not None else None
        if ea is None and eb is None:
            self.exec_stack.setCurrentIndex(1)
            self.no_exec.set_text(
                "This profile has no execution: the program does not fit in memory, so it was "
                "not run (as with Poplar's allowOutOfMemory). See the Memory and Insights reports."
            )
            return
        self.exec_stack.setCurrentIndex(0)
        n = max(e.num_ipus for e in (ea, eb) if e is not None)
        for ipu in range(n):
            rows = []
            for name in EXEC_TYPES:
                j = _T[name]
                if cmp is None:
                    c = int(ea.cycles_by_type[ipu, j])
                    cnt = int(ea.count_by_type[ipu, j])
                    if cnt == 0:
                        continue
                    total = int(ea.cycles_by_type[ipu].sum())
                    rows.append(
                        (
                            name,
                            fmt_int(c),
                            fmt_pct(c / total if total else 0),
                            fmt_int(cnt),
                            fmt_pct(ea.tile_balance_by_type[ipu, j]),
                        )
                    )
                else:
                    ca = _ipu_value(ea, ipu, lambda e, i, j=j: int(e.cycles_by_type[i, j]))
                    cb = _ipu_value(eb, ipu, lambda e, i, j=j: int(e.cycles_by_type[i, j]))
                    if not ca and not cb:
                        continue
                    rows.append(
                        (
                            name,
                            fmt_count(ca),
                            fmt_count(cb),
                            fmt_delta_pct(ca or 0, cb or 0),
                        )
                    )
            if cmp is None:
                rows.append(
                    (
                        "Total",
                        fmt_int(ea.cycles_by_type[ipu].sum()),
                        "100.0%",
                        fmt_int(ea.count_by_type[ipu].sum()),
                        fmt_pct(float(ea.tile_balance[ipu])),
                    )
                )
            else:
                ta = _ipu_value(ea, ipu, lambda e, i: int(e.cycles_by_type[i].sum()))
                tb_ = _ipu_value(eb, ipu, lambda e, i: int(e.cycles_by_type[i].sum()))
                rows.append(
                    (
                        "Total",
                        fmt_count(ta),
                        fmt_count(tb_),
                        fmt_delta_pct(ta or 0, tb_ or 0),
                    )
                )
                ba = _ipu_value(ea, ipu, lambda e, i: float(e.tile_balance[i]))
                bb = _ipu_value(eb, ipu, lambda e, i: float(e.tile_balance[i]))
                rows.append(
                    (
                        "Tile balance (compute)",
                        fmt_pct(ba),
                        fmt_pct(bb),
                        "" if ba is None or bb is None else fmt_pts_delta(ba, bb),
                    )
                )
            self.ipu_tree.add_section(f"IPU {ipu}", rows)

    def _fill_streams(self, doc: Any, cmp: Any) -> None:
        ea, eb = data.execution(doc), data.execution(cmp) if cmp is not None else None
        if ea is None and eb is None:
            self.stream_tree.add_section("No execution", [])
            return
        n = max(e.num_ipus for e in (ea, eb) if e is not None)
        u = self.units
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
                    rows.append(_bytes_row(name, va, vb, cmp is not None, u))
            for label, attr in (
                ("GlobalExchange received", "global_exchange_rx"),
                ("GlobalExchange sent", "global_exchange_tx"),
            ):
                va = _ipu_value(ea, ipu, lambda e, i, a=attr: int(getattr(e, a)[i]))
                vb = _ipu_value(eb, ipu, lambda e, i, a=attr: int(getattr(e, a)[i]))
                if not va and not vb:
                    continue
                rows.append(_bytes_row(label, va, vb, cmp is not None, u))
            self.stream_tree.add_section(f"IPU {ipu}", rows)

    def _fill_config(self, doc: Any, cmp: Any) -> None:
        a = dict(flatten(data.run_config(doc)))
        if cmp is None:
            self.config_tree.add_section("Run configuration", sorted(a.items()))
            tc = flatten(data.target_config(doc))
            self.config_tree.add_section("Target parameters", tc)
            note = data.run_config_note(doc)
            if note:
                self.config_tree.add_section(note, [])
        else:
            b = dict(flatten(data.run_config(cmp)))
            keys = sorted(set(a) | set(b))
            differ = [(k, a.get(k, "-"), b.get(k, "-")) for k in keys if a.get(k) != b.get(k)]
            same = [(k, a.get(k, "-"), b.get(k, "-")) for k in keys if a.get(k) == b.get(k)]
            self.config_tree.add_section(f"Different ({len(differ)})", differ)
            self.config_tree.add_section(f"Same ({len(same)})", same)
        self._apply_config_filter(self.config_filter.text())

    def _apply_config_filter(self, text: str) -> None:
        needle = text.strip().lower()
        for i in range(self.config_tree.topLevelItemCount()):
            section = self.config_tree.topLevelItem(i)
            for j in range(section.childCount()):
                child = section.child(j)
                hay = " ".join(child.text(c) for c in range(child.columnCount())).lower()
                child.setHidden(bool(needle) and needle not in hay)

    def _draw_chart(self, doc: Any, cmp: Any) -> None:
        item = self.plot.getPlotItem()
        item.clear()
        self.legend.set_entries([])
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
            return
        values = np.vstack(rows)
        y = np.arange(len(labels), dtype=float)
        colors = [hex_color(series.palette, n) for n in series.names]
        stacked_bars(
            item,
            y,
            values,
            colors,
            list(series.names),
            width=0.7,
            horizontal=True,
            legend=self.legend,
        )
        axis = item.getAxis("left")
        axis.setTicks([list(zip(y, labels))])
        item.setLabel("bottom", series.unit)
        item.getViewBox().setLimits(xMin=0)
        item.setYRange(-0.6, len(labels) - 0.4, padding=0)
        item.setXRange(0, float(values.sum(axis=1).max()) * 1.02, padding=0)

    def _fill_explanation(self, doc: Any, cmp: Any) -> None:
        try:
            result = data.comparison(doc, cmp)
        except ModuleNotFoundError:
            self.explanation.setPlainText(
                "The analysis core in this build has no comparison module; only the figures are "
                "compared."
            )
            return
        self.explanation.setHtml(comparison_html(result))


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


def _ipu_value(e: Any, ipu: int, fn: Callable[[Any, int], Any]) -> Any:
    if e is None or ipu >= e.num_ipus:
        return None
    return fn(e, ipu)


def _bytes_row(name: str, a: int | None, b: int | None, compare: bool, unit: str) -> tuple:
    """A row of bytes: ``(name, A)``, or in compare mode ``(name, A, B, change)`` (a missing
    value counts as 0)."""
    if not compare:
        return (name, fmt_bytes(a or 0, unit))
    return (name, fmt_bytes(a or 0, unit), fmt_bytes(b or 0, unit), fmt_delta_pct(a or 0, b or 0))


def _dest_label(dest: str, direction: str) -> str:
    names = {
        "host": "host",
        "remoteBuffer": "remote buffer",
        "mixed": "mixed",
        "ipu": "IPU",
        "tile": "tile",
        "none": "none",
    }
    return ("from " if direction == "received" else "to ") + names.get(dest, dest)
