"""The HTML reports' interactive charts, drawn with Plotly: hovering a point or a bar shows its
figures (a tile's memory by category, a step's name and live bytes, a profile's run-option
change, a tune configuration's options), the legend toggles series, and a drag zooms. Each
chart is a ``<div>`` with its figure's data; :func:`script` is plotly.js itself, inlined once
per report so the file opens offline (no CDN, no network).

The Markdown report keeps the static matplotlib images of :mod:`analyser.reports.charts`; the
figures here are the same arrays, from the same analyses.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.core.units import fmt_bytes, fmt_int, fmt_pct
from analyser.reports.charts import (
    _GROUP_COLOURS,
    CATEGORY_GROUPS,
    MAX_IPU_PANELS,
    MAX_TILE_COLUMNS,
    _colour,
    _host_before_device,
    execution_of,
)

if TYPE_CHECKING:
    from analyser.core.analysis import Analysis

#: Text of every chart, in CSS pixels: the report's own small text (12 px), never smaller.
FONT_SIZE = 13
TICK_SIZE = 12
#: Run-option changes a comparison bar's hover lists (the rest counted).
MAX_HOVER_CHANGES = 6
#: Most points a line chart carries (the liveness curve): above this, the maximum of each bin.
MAX_LINE_POINTS = 20_000
#: The toolbar: no logo (a link to plotly's site), no "Share chart" (it would post the chart's
#: data to plotly's cloud: a report stays on the user's machine), SVG export.
CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "plotlyServerURL": "",
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "sendChartToCloud"],
    "toImageButtonOptions": {"format": "svg"},
}
_FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif'


@cache
def script() -> str:
    """plotly.js (minified), to inline in one ``<script>`` of the report's head."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


#: The charts' plotly template (white background, light grid).
TEMPLATE = "plotly_white"
_TEMPLATE_LOCK = threading.RLock()


@contextmanager
def in_template() -> Iterator[None]:
    """Figures made inside (the charts of a whole report) take :data:`TEMPLATE` the way plotly
    gives a new figure its default template, without validating it: set on a figure's layout,
    the template's name is validated into a deep copy of the whole template each time (about
    15 ms a figure, 30 of them in the demo's report), while swapping the default costs two
    validations once. The default is swapped back under a lock, so another thread's figures
    keep theirs; nested uses swap once."""
    import plotly.io as pio

    with _TEMPLATE_LOCK:
        before = pio.templates.default
        if before == TEMPLATE:
            yield
            return
        pio.templates.default = TEMPLATE
        try:
            yield
        finally:
            pio.templates.default = before


def _themed(fig):
    """``fig`` in :data:`TEMPLATE`: already, inside :func:`in_template`; else set on it."""
    import plotly.io as pio

    if pio.templates.default != TEMPLATE:
        fig.update_layout(template=TEMPLATE)
    return fig


def _figure(*args: Any, **kw: Any):
    """``plotly.graph_objects.Figure(*args, **kw)`` in :data:`TEMPLATE`."""
    import plotly.graph_objects as go

    return _themed(go.Figure(*args, **kw))


def _subplots(**kw: Any):
    """``plotly.subplots.make_subplots(**kw)`` in :data:`TEMPLATE`."""
    from plotly.subplots import make_subplots

    return _themed(make_subplots(**kw))


def _layout(fig, *, title: str, height: int, **kw: Any) -> None:
    # the legend in the order the series stack (plotly reverses it for stacked bars)
    legend = {"font": {"size": TICK_SIZE}, "traceorder": "normal", **kw.pop("legend", {})}
    fig.update_layout(
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": FONT_SIZE + 2}},
        height=height,
        font={"family": _FONT, "size": FONT_SIZE, "color": "#1f2328"},
        margin={"l": 70, "r": 20, "t": 50, "b": 50},
        hoverlabel={"font": {"size": FONT_SIZE}, "align": "left"},
        legend=legend,
        **kw,
    )
    fig.update_xaxes(tickfont={"size": TICK_SIZE}, separatethousands=True)
    fig.update_yaxes(tickfont={"size": TICK_SIZE}, separatethousands=True)


def to_div(fig) -> str:
    """The figure as a ``<div>`` and the script that draws it (plotly.js from :func:`script`)."""
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        include_mathjax=False,
        config=CONFIG,
        default_width="100%",
        default_height=f"{int(fig.layout.height or 400)}px",
    )


def _esc(text: object) -> str:
    """Text for a hover label (plotly renders a subset of HTML: tags must not come through)."""
    import html

    from analyser.literal import terminal

    return html.escape(terminal(str(text)), quote=False)


# -- one profile -----------------------------------------------------------------------------------
def memory_per_tile_figure(analysis: Analysis):
    """Memory per tile by category group, one panel per IPU (the fullest first beyond
    :data:`MAX_IPU_PANELS`), the SRAM limit dashed; hover: the tile's memory by group."""
    import plotly.graph_objects as go

    from profiles import schema

    m = analysis.memory
    order = np.argsort(-m.tile_used.max(axis=1), kind="stable")[:MAX_IPU_PANELS]
    ipus = sorted(int(i) for i in order)
    cats = list(schema.MEMORY_CATEGORIES)
    per_bin = max(1, int(np.ceil(m.tiles_per_ipu / MAX_TILE_COLUMNS)))
    nb = int(np.ceil(m.tiles_per_ipu / per_bin))
    pad = nb * per_bin - m.tiles_per_ipu
    first = np.arange(nb) * per_bin
    last = np.minimum(first + per_bin, m.tiles_per_ipu) - 1
    # hover (every series of the panel at once, under the bin's first tile): each group's KiB;
    # the total line names the tiles of the bin ("tiles 12 to 15": the groups are their mean)
    where = "tile %{x:,}" if per_bin == 1 else "tiles %{x:,} to %{customdata:,}"
    tiles = None if per_bin == 1 else last

    def binned(v: np.ndarray, how: str) -> np.ndarray:
        v = np.pad(v.astype(float), (0, pad), mode="edge").reshape(nb, per_bin)
        return v.max(axis=1) if how == "max" else v.mean(axis=1)

    titles = []
    for i in ipus:
        oom = int((m.oom_tiles[:, 0] == i).sum()) if m.n_oom_tiles else 0
        titles.append(f"IPU {i}" + (f": {oom:,} tiles out of memory" if oom else ""))
    fig = _subplots(
        rows=len(ipus), cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.08
    )
    for row, i in enumerate(ipus, 1):
        by_cat, _ = analysis.tile_breakdown(i, "category")
        for (group, members), colour in zip(CATEGORY_GROUPS.items(), _GROUP_COLOURS):
            y = binned(by_cat[:, [cats.index(c) for c in members]].sum(axis=1), "mean") / 1024
            fig.add_trace(
                go.Scatter(
                    x=first,
                    y=y,
                    name=group,
                    legendgroup=group,
                    showlegend=row == 1,
                    stackgroup=f"ipu{i}",
                    mode="lines",
                    line={"width": 0, "color": colour},
                    fillcolor=colour,
                    customdata=tiles,
                    hovertemplate=f"{group}: %{{y:,.1f}} KiB"
                    + (" (mean)" if per_bin > 1 else "")
                    + "<extra></extra>",
                ),
                row=row,
                col=1,
            )
        used = binned(m.tile_used[i], "max") / 1024
        fig.add_trace(
            go.Scatter(
                x=first,
                y=used,
                name="total incl. gaps" + (" (max of the bin)" if per_bin > 1 else ""),
                legendgroup="used",
                showlegend=row == 1,
                mode="lines",
                line={"width": 1, "color": "#333333"},
                customdata=tiles,
                hovertemplate=f"IPU {i}, {where}: total incl. gaps "
                + ("%{y:,.1f} KiB (the max)" if per_bin > 1 else "%{y:,.1f} KiB")
                + "<extra></extra>",
            ),
            row=row,
            col=1,
        )
        fig.add_hline(
            y=m.sram_per_tile / 1024,
            line={"color": _colour("chart", "max_memory_line", "#c62828"), "dash": "dash"},
            annotation_text=f"tile SRAM {fmt_bytes(m.sram_per_tile)}",
            annotation_position="top left",
            row=row,
            col=1,
        )
        fig.update_yaxes(title_text="KiB", row=row, col=1)
    fig.update_xaxes(title_text="tile", row=len(ipus), col=1)
    note = "" if m.num_ipus <= len(ipus) else f" (the {len(ipus)} fullest of {m.num_ipus} IPUs)"
    _layout(
        fig,
        title="Memory per tile by category" + note,
        height=160 + 230 * len(ipus),
        hovermode="x unified",
        legend={"orientation": "h", "y": -0.12 if len(ipus) > 1 else -0.25},
    )
    return fig


def memory_per_tile(analysis: Analysis) -> str:
    """:func:`memory_per_tile_figure` as a ``<div>`` of the report."""
    return to_div(memory_per_tile_figure(analysis))


def memory_histogram_figure(analysis: Analysis):
    """Tiles by memory used (bins of the memory analysis), the SRAM limit dashed."""
    import plotly.graph_objects as go

    m = analysis.memory
    edges = np.asarray(m.histogram_edges, float) / 1024
    counts = np.asarray(m.histogram_counts)
    fig = _figure(
        go.Bar(
            x=(edges[:-1] + edges[1:]) / 2,
            y=counts,
            width=np.diff(edges),
            marker_color=_colour("memory_categories", "variable", "#4e79a7"),
            customdata=np.stack([edges[:-1], edges[1:]], axis=1),
            hovertemplate="%{y:,} tiles use %{customdata[0]:,.1f} to %{customdata[1]:,.1f} KiB"
            "<extra></extra>",
        )
    )
    fig.add_vline(
        x=m.sram_per_tile / 1024,
        line={"color": _colour("chart", "max_memory_line", "#c62828"), "dash": "dash"},
        annotation_text="tile SRAM",
    )
    _layout(fig, title="Memory over all tiles", height=340, bargap=0)
    fig.update_xaxes(title_text="KiB per tile")
    fig.update_yaxes(title_text="tiles")
    return fig


def memory_histogram(analysis: Analysis) -> str:
    """:func:`memory_histogram_figure` as a ``<div>`` of the report."""
    return to_div(memory_histogram_figure(analysis))


def liveness_curve_figure(analysis: Analysis):
    """Live memory over the program steps per IPU, the peak marked; hover: the step's name."""
    import plotly.graph_objects as go

    lv = analysis.liveness
    n = lv.n_steps
    names = np.asarray([_esc(x) for x in lv.step_names] if lv.step_names else [""] * n, object)
    fig = _figure()
    step = max(1, int(np.ceil(n / MAX_LINE_POINTS)))
    for i in range(lv.not_always_live.shape[0]):
        y = lv.curve(i, include_always_live=True) / 2**20
        if step > 1:  # the maximum of each bin, at the step where it is reached
            nb = int(np.ceil(n / step))
            padded = np.pad(y, (0, nb * step - n), constant_values=-np.inf).reshape(nb, step)
            x = np.arange(nb) * step + padded.argmax(axis=1)
        else:
            x = np.arange(n)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y[x],
                name=f"IPU {i}",
                mode="lines",
                customdata=names[x],
                hovertemplate=f"IPU {i}, step %{{x:,}}: %{{y:,.1f}} MiB<br>%{{customdata}}"
                "<extra></extra>",
            )
        )
        p = int(lv.peak_step[i])
        if 0 <= p < n:
            fig.add_trace(
                go.Scatter(
                    x=[p],
                    y=[y[p]],
                    mode="markers+text",
                    marker={"color": _colour("chart", "peak_marker", "#c62828"), "size": 9},
                    text=[f"peak {y[p]:,.0f} MiB"],
                    textposition="top left" if p > 0.8 * n else "top right",
                    showlegend=False,
                    customdata=[names[p]],
                    hovertemplate=f"IPU {i} peak, step %{{x:,}}: %{{y:,.1f}} MiB<br>"
                    "%{customdata}<extra></extra>",
                )
            )
    _layout(fig, title="Live memory per IPU", height=380, hovermode="closest")
    fig.update_xaxes(title_text="program step")
    fig.update_yaxes(title_text="MiB (always-live + not-always-live)", rangemode="tozero")
    if step > 1:
        fig.update_layout(
            title_text=f"Live memory per IPU (the maximum of every {step:,} steps, at its step)"
        )
    return fig


def liveness_curve(analysis: Analysis) -> str:
    """:func:`liveness_curve_figure` as a ``<div>`` of the report."""
    return to_div(liveness_curve_figure(analysis))


def cycles_by_type_figure(analysis: Analysis):
    """Cycles by step type per IPU, after the host's time before the device (hatched)."""
    import plotly.graph_objects as go

    from profiles import schema

    ex = execution_of(analysis)
    n = ex.num_ipus
    ipus = [f"IPU {i}" for i in range(n)]
    fig = _figure()
    host = _host_before_device(analysis)
    totals = ex.cycles_by_type.sum(axis=1).astype(float) + sum(host.values())
    for kind, v in host.items():
        fig.add_trace(
            go.Bar(
                y=ipus,
                x=np.full(n, v),
                orientation="h",
                name=f"host: {kind}",
                marker={"color": _colour("host_events", kind), "pattern": {"shape": "/"}},
                customdata=np.full(n, v) / np.maximum(totals, 1),
                hovertemplate=f"%{{y}}: host {kind} before the device starts<br>"
                "%{x:,.0f} cycles (%{customdata:.1%})<extra></extra>",
            )
        )
    for j, t in enumerate(schema.PROGRAM_TYPES):
        col = ex.cycles_by_type[:, j].astype(float)
        if not col.any():
            continue
        fig.add_trace(
            go.Bar(
                y=ipus,
                x=col,
                orientation="h",
                name=t,
                marker_color=_colour("step_types", t),
                customdata=col / np.maximum(totals, 1),
                hovertemplate=f"%{{y}}: {t}<br>%{{x:,.0f}} cycles (%{{customdata:.1%}})"
                "<extra></extra>",
            )
        )
    _layout(
        fig,
        title="Cycles by step type"
        + (" (hatched: the host before the device starts)" if host else ""),
        height=200 + 60 * n,
        barmode="stack",
        legend={"orientation": "h", "y": -0.35 if n < 3 else -0.2},
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="cycles")
    return fig


def cycles_by_type(analysis: Analysis) -> str:
    """:func:`cycles_by_type_figure` as a ``<div>`` of the report."""
    return to_div(cycles_by_type_figure(analysis))


def pipeline_phases(analysis: Analysis) -> str:
    """The run's pipeline phases (share of the wall clock) and each stage's load."""
    import plotly.graph_objects as go

    ex = execution_of(analysis)
    share = ex.phase_share()
    st = ex.stage_cycles
    fig = _subplots(
        rows=1,
        cols=2,
        column_widths=[0.6, 0.4],
        subplot_titles=("Pipeline phases", "Stage load (red: the bottleneck)" if st.size else ""),
    )
    for p, v in share.items():
        if v <= 0:
            continue
        fig.add_trace(
            go.Bar(
                y=["run"],
                x=[v * 100],
                orientation="h",
                name=p,
                marker_color=_colour("phases", p),
                text=[fmt_pct(v)] if v > 0.06 else [""],
                textposition="inside",
                hovertemplate=f"{p}: %{{x:.1f}}% of the run<extra></extra>",
            ),
            row=1,
            col=1,
        )
    fig.update_xaxes(title_text="% of the run (wall clock)", range=[0, 100], row=1, col=1)
    fig.update_yaxes(showticklabels=False, row=1, col=1)
    if st.size:
        colours = ["#4e79a7"] * st.size
        colours[int(np.argmax(st))] = "#e15759"
        compute = np.asarray(ex.stage_compute_cycles, float)
        fig.add_trace(
            go.Bar(
                x=[f"stage {s}" for s in range(st.size)],
                y=st,
                marker_color=colours,
                showlegend=False,
                customdata=np.stack([compute, compute / np.maximum(st, 1)], axis=1),
                hovertemplate="%{x}: %{y:,.0f} cycles<br>compute %{customdata[0]:,.0f} "
                "(%{customdata[1]:.0%})<extra></extra>",
            ),
            row=1,
            col=2,
        )
        fig.update_yaxes(title_text="cycles", row=1, col=2)
    _layout(fig, title="", height=340, barmode="stack", legend={"orientation": "h", "y": -0.3})
    fig.update_layout(margin={"t": 40})
    return to_div(fig)


def profile_charts(analysis: Analysis) -> dict[str, str]:
    """The interactive charts of one profile's section, keyed as charts.profile_charts."""
    out = {
        "memory_per_tile": memory_per_tile(analysis),
        "memory_histogram": memory_histogram(analysis),
    }
    if analysis.liveness.n_steps:
        out["liveness"] = liveness_curve(analysis)
    if analysis.execution is not None:
        out["cycles_by_type"] = cycles_by_type(analysis)
        out["pipeline_phases"] = pipeline_phases(analysis)
    return out


# -- several profiles (the step by step) ------------------------------------------------------------
def _changes(data: dict[str, Any] | None, n: int) -> list[str]:
    """Each profile's run-option change from the one before (the step's configuration), as hover
    text; the first profile: "the start"."""
    import json

    pairs = ((data or {}).get("comparison") or {}).get("pairs") or []
    out = ["the start"]
    for k in range(1, n):
        pair = pairs[k - 1] if k - 1 < len(pairs) else {}
        diffs = [d for d in pair.get("config_diffs") or [] if d.get("key") != "name"]
        lines = [
            _esc(f"{d['key']}: {json.dumps(d['before'])} → {json.dumps(d['after'])}")
            for d in diffs[:MAX_HOVER_CHANGES]
        ]
        if len(diffs) > MAX_HOVER_CHANGES:
            lines.append(f"and {len(diffs) - MAX_HOVER_CHANGES:,} more run options")
        out.append("<br>".join(lines) or "run options identical")
    return out


def comparison_metrics(analyses: list, data: dict[str, Any] | None = None) -> str:
    """Key metrics across profiles, one bar chart each; hover: the value and the run-option
    change that led to the profile."""
    import plotly.graph_objects as go

    keys = (
        ("cycles_per_sample", "cycles per sample", fmt_int),
        ("throughput_samples_per_s", "samples/s", lambda v: f"{v:,.1f}"),
        ("peak_memory_bytes", "peak memory", fmt_bytes),
        ("oom_tiles", "OOM tiles", fmt_int),
    )
    names = [_esc(a.name) for a in analyses]
    changes = _changes(data, len(analyses))
    fig = _subplots(
        rows=1, cols=len(keys), subplot_titles=[k[1] for k in keys], horizontal_spacing=0.08
    )
    for col, (key, label, fmt) in enumerate(keys, 1):
        vals = [a.metrics.scalar(key) for a in analyses]
        y = [np.nan if v is None else float(v) for v in vals]
        shown = [("n/a: no execution" if v is None else fmt(v)) for v in vals]
        scale = 2**-20 if key == "peak_memory_bytes" else 1.0
        fig.add_trace(
            go.Bar(
                x=names,
                y=[v * scale for v in y],
                marker_color="#4e79a7",
                showlegend=False,
                customdata=np.stack([shown, changes], axis=1),
                hovertemplate=f"<b>%{{x}}</b><br>{label}: %{{customdata[0]}}<br>"
                "%{customdata[1]}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        for k, v in enumerate(vals):
            if v is None:
                fig.add_annotation(
                    x=names[k], y=0, text="n/a", showarrow=False, yanchor="bottom", row=1, col=col
                )
        if key == "peak_memory_bytes":
            fig.update_yaxes(title_text="MiB", row=1, col=col)
    _layout(fig, title="Key metrics per profile", height=420)
    fig.update_xaxes(tickangle=-35)
    return to_div(fig)


def comparison_step_types(analyses: list, data: dict[str, Any] | None = None) -> str:
    """Share of busy cycles by step type per profile; hover: the share and the profile's
    run-option change."""
    import plotly.graph_objects as go

    from profiles import schema

    names = [_esc(a.name) for a in analyses]
    changes = _changes(data, len(analyses))
    fig = _figure()
    for t in schema.PROGRAM_TYPES[3:]:
        v = np.array([a.execution.share_of(t) * 100 if a.execution else 0.0 for a in analyses])
        if not v.any():
            continue
        fig.add_trace(
            go.Bar(
                y=names,
                x=v,
                orientation="h",
                name=t,
                marker_color=_colour("step_types", t),
                customdata=changes,
                hovertemplate=f"<b>%{{y}}</b><br>{t}: %{{x:.1f}}% of busy cycles<br>"
                "%{customdata}<extra></extra>",
            )
        )
    for k, a in enumerate(analyses):
        if a.execution is None:
            fig.add_annotation(
                x=50, y=names[k], text="no execution (out of memory)", showarrow=False
            )
    _layout(
        fig,
        title="Cycles by step type (% of busy cycles, all IPUs)",
        height=160 + 48 * len(names),
        barmode="stack",
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(range=[0, 100], title_text="% of busy cycles")
    return to_div(fig)


def comparison_charts(analyses: list, data: dict[str, Any] | None = None) -> dict[str, str]:
    """The comparison section's interactive charts, keyed as charts.comparison_charts."""
    return {
        "metrics": comparison_metrics(analyses, data),
        "step_types": comparison_step_types(analyses, data),
    }


# -- a tune's design space ---------------------------------------------------------------------------
def _template_json(name: str = TEMPLATE) -> dict[str, Any]:
    """Plotly's template ``name`` as a figure carries it (``layout.template``), read from the
    plotly package's own file of it: what ``plotly.io.templates[name]`` loads and serialises
    again, without importing plotly's figure classes and validators."""
    import importlib.util
    import json
    import os

    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("plotly is not installed")
    path = os.path.join(
        spec.submodule_search_locations[0], "package_data", "templates", f"{name}.json"
    )
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def design_space_figure(table: Any) -> dict[str, Any]:
    """The design-space chart of :func:`design_space` as a plotly figure dict (``data`` and
    ``layout``), written as plotly's ``Figure.to_plotly_json()`` gives it for the figure the
    graph objects would build (tests/test_tune_chart.py builds that figure and compares), but
    without them: building and validating it with plotly's graph objects took about 0.2 s of
    CPU of a tune, the chart's whole cost."""
    import json

    from analyser.reports.tune import VECTOR_POINTS, design_space_points

    p = design_space_points(table)
    df = table.frame.set_index("id", drop=False)
    meta = table.meta
    dims = list(meta.get("dimensions") or [])
    extra = [c for c in df.columns if c not in dims and c in (meta.get("start") or {})]
    options = dims + extra

    def hover(rid: int) -> str:
        r = df.loc[rid]

        def shown(v: Any) -> str:  # as the report's diff table (JSON), numpy scalars as numbers
            return json.dumps(v.item() if isinstance(v, np.generic) else v, default=str)

        opts = "<br>".join(_esc(f"{o} = {shown(r[o])}") for o in options)
        thr = r.get("throughput_samples_per_s")
        figs = (
            "no execution (out of memory)"
            if r["status"] == "oom" or thr is None or thr != thr
            else f"{float(thr):,.1f} samples/s"
        )
        tile = fmt_bytes(float(r["max_tile_memory_bytes"]))
        return f"<b>configuration #{rid}</b> ({_esc(r['status'])})<br>{figs}, fullest tile {tile}<br>{opts}"

    text = np.array([hover(int(i)) for i in p["id"]], dtype=object)
    y = np.where(np.isfinite(p["throughput"]), p["throughput"], 0.0)
    data: list[dict[str, Any]] = []
    ok = ~p["oom"]
    for sel, name, colour, symbol in (
        (ok & ~p["feasible"], "fits, breaks a constraint", "#bab0ac", "circle"),
        (ok & p["feasible"], "fits", "#4e79a7", "circle"),
        (p["oom"], "out of memory (no execution)", "#c62828", "x"),
    ):
        if sel.any():
            data.append(
                {
                    "hovertemplate": "%{text}<extra></extra>",
                    "marker": {"color": colour, "size": 8, "symbol": symbol},
                    "mode": "markers",
                    "name": name,
                    "text": text[sel].tolist(),
                    "x": p["tile_kib"][sel],
                    "y": y[sel],
                    # SVG markers (hover works everywhere); WebGL beyond VECTOR_POINTS
                    "type": "scattergl" if len(p["id"]) > VECTOR_POINTS else "scatter",
                }
            )
    front = p["pareto"]
    if front.any():
        order = np.argsort(p["tile_kib"][front])
        data.append(
            {
                "hovertemplate": "%{text}<extra>Pareto front</extra>",
                "line": {"color": "#f28e2b", "width": 2},
                "marker": {"size": 9},
                "mode": "lines+markers",
                "name": "Pareto front (throughput vs headroom)",
                "text": text[front][order].tolist(),
                "x": p["tile_kib"][front][order],
                "y": y[front][order],
                "type": "scatter",
            }
        )
    for rid, label, colour in (
        (meta.get("start_id"), "start", "#333333"),
        (meta.get("best_id"), "best", "#2e7d32"),
    ):
        hit = np.flatnonzero(p["id"] == rid) if rid is not None else np.empty(0, np.intp)
        if len(hit):
            i = int(hit[0])
            data.append(
                {
                    "customdata": [text[i]],
                    "hovertemplate": "%{customdata}<extra>" + label + "</extra>",
                    "marker": {
                        "color": "rgba(0,0,0,0)",
                        "line": {"color": colour, "width": 2},
                        "size": 18,
                    },
                    "mode": "markers+text",
                    "name": label,
                    "text": [label],
                    "textfont": {"color": colour, "size": FONT_SIZE},
                    "textposition": "top right",
                    "x": [float(p["tile_kib"][i])],
                    "y": [float(y[i])],
                    "type": "scatter",
                }
            )
    layout: dict[str, Any] = {"template": _template_json()}
    sram = float(p["sram_kib"][0])
    if np.isfinite(sram):
        # what Figure.add_vline(x=sram, annotation_text=...) adds: a line over the plot's
        # height and its label at the top right of it
        layout["shapes"] = [
            {
                "line": {"color": "#c62828", "dash": "dash", "width": 1},
                "type": "line",
                "x0": sram,
                "x1": sram,
                "xref": "x",
                "y0": 0,
                "y1": 1,
                "yref": "y domain",
            }
        ]
        layout["annotations"] = [
            {
                "font": {"color": "#c62828"},
                "showarrow": False,
                "text": "tile SRAM",
                "x": sram,
                "xanchor": "left",
                "xref": "x",
                "y": 1,
                "yanchor": "top",
                "yref": "y domain",
            }
        ]
    top = float(np.nanmax(y)) if len(y) and np.nanmax(y) > 0 else 1.0
    axis = {"tickfont": {"size": TICK_SIZE}, "separatethousands": True}
    layout.update(
        {
            # _layout's, with the top margin of this chart (no title)
            "title": {"font": {"size": FONT_SIZE + 2}, "text": "", "x": 0, "xanchor": "left"},
            "font": {"family": _FONT, "size": FONT_SIZE, "color": "#1f2328"},
            "margin": {"l": 70, "r": 20, "t": 20, "b": 50},
            "hoverlabel": {"font": {"size": FONT_SIZE}, "align": "left"},
            "legend": {"font": {"size": TICK_SIZE}, "traceorder": "normal"},
            "height": 520,
            "hovermode": "closest",
            "xaxis": {**axis, "title": {"text": "fullest tile (KiB)"}},
            # below zero too: the out-of-memory crosses on the axis are drawn whole
            "yaxis": {
                **axis,
                "title": {"text": "throughput (samples/s)"},
                "range": [-0.05 * top, 1.1 * top],
            },
        }
    )
    return {"data": data, "layout": layout}


def design_space(table: Any) -> str:
    """A tune's design space (``analyse report TUNE-DIR``): throughput against the fullest tile
    for every simulated configuration, out-of-memory ones on the axis, the Pareto front, the
    start and the best; hover: the configuration's options and figures. plotly.js is inlined in
    the chart (the tune report's only one), and the static chart follows in a ``<noscript>``
    for a viewer that runs no scripts. The figure (:func:`design_space_figure`) is written
    by plotly's own HTML writer, unvalidated (it is the graph objects' figure already)."""
    import plotly.io as pio
    from _plotly_utils.utils import convert_to_base64

    from analyser.reports.tune import design_space_chart

    fig = design_space_figure(table)
    convert_to_base64(fig)  # the numpy arrays as typed arrays, as Figure.to_dict() gives them
    div = pio.to_html(
        fig,
        validate=False,
        full_html=False,
        include_plotlyjs=True,
        include_mathjax=False,
        config=dict(CONFIG),
        default_width="100%",
        default_height="520px",
    )
    return f"{div}<noscript>{design_space_chart(table)}</noscript>"


def trace_window_figure(
    analysis: Analysis,
    window: tuple[int, int],
    ipus: list[int] | None = None,
    max_steps: int = 20_000,
):
    """The executed steps of cycles ``window`` = (start, end) on ``ipus`` (all by default), one
    lane per IPU and a bar per step coloured by its type; hover: the step's program, type, start
    and cycles. A window of more than ``max_steps`` steps, an empty or malformed window or an
    IPU the profile lacks is a ValueError of one sentence."""
    import plotly.graph_objects as go

    from profiles import schema

    try:
        start, end = (int(window[0]), int(window[1]))
    except (TypeError, ValueError, IndexError, OverflowError):
        raise ValueError(f"give the window as (start, end) cycles, not {window!r:.80}.") from None
    if end <= start:
        raise ValueError(f"the window ({start:,}, {end:,}) is empty: give start < end.")
    src = analysis.src
    if not src.has_execution:
        raise ValueError(f"profile {analysis.path} has no execution (it does not fit in memory).")
    prof = src.profile
    lanes = list(range(prof.num_ipus)) if ipus is None else list(ipus)
    bad = [i for i in lanes if not isinstance(i, int) or not 0 <= i < prof.num_ipus]
    if bad:
        raise ValueError(f"IPU {bad[0]!r:.40} is not one of the profile's {prof.num_ipus} IPUs.")
    count = sum(int(np.subtract(*prof.window_rows(i, start, end)[::-1])) for i in lanes)
    if count > max_steps:
        raise ValueError(
            f"the window holds about {count:,} steps, more than the {max_steps:,} a chart draws; "
            "narrow it (the Execution Trace report draws long windows at a coarser detail)."
        )
    names = np.array(
        [
            v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for v in src.column("/programs/nodes", "name")
        ],
        dtype=object,
    )
    cols = ["start", "cycles", "type", "program"]
    frames = [(i, prof.step_window(i, start, end, cols)) for i in lanes]  # one read per IPU
    fig = _figure()
    for code, t in enumerate(schema.PROGRAM_TYPES):
        ys, base, length, text = [], [], [], []
        for i, df in frames:
            sel = df["type"].to_numpy() == code
            if not sel.any():
                continue
            st = df["start"].to_numpy()[sel]
            cy = df["cycles"].to_numpy()[sel]
            prog = df["program"].to_numpy()[sel]
            ys.append(np.full(st.size, f"IPU {i}", dtype=object))
            base.append(st)
            length.append(np.maximum(cy, 1))
            text.append([_esc(n) for n in names[np.clip(prog, 0, len(names) - 1)]])
        if not ys:
            continue
        fig.add_trace(
            go.Bar(
                y=np.concatenate(ys),
                base=np.concatenate(base),
                x=np.concatenate(length),
                orientation="h",
                name=t,
                marker_color=_colour("step_types", t),
                hovertext=np.concatenate([np.asarray(x, dtype=object) for x in text]),
                hovertemplate="%{hovertext}<br>"
                + t
                + ": %{x:,} cycles from %{base:,}<extra></extra>",
            )
        )
    _layout(
        fig,
        title=f"Execution trace, cycles {start:,} to {end:,}",
        height=160 + 50 * len(lanes),
        barmode="overlay",
        legend={"orientation": "h", "y": -0.3},
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="cycles", range=[start, end])
    return fig
