"""Static report charts drawn with matplotlib (no pyplot, no GUI backend) as SVG: the Markdown
report's images and the tune report's fallback for a viewer without scripts (the HTML reports
draw the same figures interactively: :mod:`analyser.reports.interactive`).

Colours come from assets/palette.json, shared with the GUI.
"""

from __future__ import annotations

import io
import itertools
import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from analyser.core.analysis import Analysis
    from analyser.core.execution import ExecutionSummary

from analyser.literal import mathtext

_ids = itertools.count()

#: Points of the charts' small text (legends, labels) and titles: a 9-inch figure (864 px at
#: full size) shown 800 px wide, about GitHub's Markdown column, keeps its small text at 11 px.
SMALL = 9
TITLE = 11

#: Memory categories grouped for the per-tile chart (17 stacked series are unreadable).
CATEGORY_GROUPS: dict[str, tuple[str, ...]] = {
    "variables": ("variable",),
    "constants": ("constant",),
    "code": (
        "vertexCode",
        "controlCode",
        "internalExchangeCode",
        "hostExchangeCode",
        "globalExchangeCode",
    ),
    "vertex state": (
        "vertexInstanceState",
        "vertexFieldData",
        "vectorListDescriptor",
        "copyDescriptor",
    ),
    "control / exchange data": (
        "controlId",
        "controlTable",
        "hostExchangePacketHeader",
        "globalExchangePacketHeader",
        "instrumentationResults",
    ),
    "stack": ("stack",),
}
#: Most IPU panels in the per-tile memory chart (the fullest IPUs are shown).
MAX_IPU_PANELS = 8
#: Columns of the per-tile memory chart (tiles are binned above this).
MAX_TILE_COLUMNS = 368
_GROUP_COLOURS = ("#4e79a7", "#9c755f", "#f28e2b", "#a0cbe8", "#bab0ac", "#59a14f")


@cache
def palette() -> dict[str, Any]:
    try:
        text = resources.files("assets").joinpath("palette.json").read_text(encoding="utf-8")
        return json.loads(text)
    except (OSError, ValueError, ModuleNotFoundError):
        return {}


def _colour(group: str, name: str, default: str = "#888888") -> str:
    return palette().get(group, {}).get(name, default)


def _fig(
    w: float = 9.0,
    h: float = 3.2,
    *,
    left: float = 0.8,
    right: float = 0.2,
    top: float = 0.35,
    bottom: float = 0.5,
    hspace: float = 0.45,
    wspace: float = 0.3,
) -> Figure:
    """A figure with fixed margins in inches (constrained layout doubles the drawing time)."""
    # matplotlib on first use: the HTML report reads this module's constants and draws with
    # plotly (the import is about 1 s of CPU it would not use)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100)
    fig.subplots_adjust(
        left=left / w,
        right=1 - right / w,
        top=1 - top / h,
        bottom=bottom / h,
        hspace=hspace,
        wspace=wspace,
    )
    return fig


def to_svg(fig: Figure) -> str:
    """The figure as an inline <svg> element (unique ids, text kept as text)."""
    buf = io.StringIO()
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"c{next(_ids)}"}):
        fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    start = svg.find("<svg")
    return svg[start:].strip()


def _mib(x: np.ndarray | float) -> np.ndarray | float:
    return np.asarray(x) / 2**20 if isinstance(x, np.ndarray) else x / 2**20


def memory_per_tile(analysis: Analysis) -> str:
    """Memory per tile by category group, one panel per IPU, with the SRAM limit."""
    m = analysis.memory
    # the fullest IPUs first when there are more than MAX_IPU_PANELS
    order = np.argsort(-m.tile_used.max(axis=1), kind="stable")[:MAX_IPU_PANELS]
    ipus = sorted(int(i) for i in order)
    n = len(ipus)
    per = 2.2 if n <= 4 else 1.4
    fig = _fig(9.0, per * n + 0.6, hspace=0.35 if n <= 4 else 0.6)
    axes = fig.subplots(n, 1, squeeze=False, sharex=True)[:, 0]
    from profiles import schema

    cats = list(schema.MEMORY_CATEGORIES)
    # Bin tiles so the SVG stays small: stacked means per bin plus the max of each bin.
    per_bin = max(1, int(np.ceil(m.tiles_per_ipu / MAX_TILE_COLUMNS)))
    nb = int(np.ceil(m.tiles_per_ipu / per_bin))
    pad = nb * per_bin - m.tiles_per_ipu
    x = np.arange(nb) * per_bin + (per_bin - 1) / 2

    def binned(v: np.ndarray, how: str) -> np.ndarray:
        v = np.pad(v.astype(float), (0, pad), mode="edge").reshape(nb, per_bin)
        return v.max(axis=1) if how == "max" else v.mean(axis=1)

    for i, ax in zip(ipus, axes):
        by_cat, _ = analysis.tile_breakdown(i, "category")
        series = [
            binned(by_cat[:, [cats.index(c) for c in grp]].sum(axis=1), "mean") / 1024
            for grp in CATEGORY_GROUPS.values()
        ]
        ax.stackplot(x, series, labels=list(CATEGORY_GROUPS), colors=_GROUP_COLOURS, linewidth=0)
        ax.plot(
            x,
            binned(m.tile_used[i], "max") / 1024,
            color="#333333",
            linewidth=0.6,
            label="max incl. gaps" if per_bin > 1 else "incl. gaps",
        )
        ax.axhline(
            m.sram_per_tile / 1024,
            color=_colour("chart", "max_memory_line", "#c62828"),
            linewidth=1,
            linestyle="--",
            label="tile SRAM",
        )
        oom = m.oom_tiles[m.oom_tiles[:, 0] == i, 1] if m.n_oom_tiles else np.zeros(0, int)
        title = f"IPU {i}" + (f": {oom.size:,} tiles out of memory" if oom.size else "")
        if per_bin > 1:
            title += f"  (mean of every {per_bin} tiles; line: their max)"
        if i == ipus[0] and m.num_ipus > n:
            title += f"  [the {n} fullest of {m.num_ipus} IPUs]"
        ax.set_title(title, fontsize=TITLE, loc="left")
        ax.set_ylabel("KiB")
        ax.set_xlim(0, m.tiles_per_ipu - 1)
        ax.margins(x=0)
    axes[-1].set_xlabel("tile")
    axes[0].legend(fontsize=SMALL, ncol=4, loc="upper right", framealpha=0.85)
    return to_svg(fig)


def memory_histogram(analysis: Analysis) -> str:
    m = analysis.memory
    fig = _fig(4.5, 2.6, left=0.75)
    ax = fig.subplots()
    edges = m.histogram_edges / 1024
    ax.stairs(
        m.histogram_counts,
        edges,
        fill=True,
        color=_colour("memory_categories", "variable", "#4e79a7"),
    )
    ax.axvline(
        m.sram_per_tile / 1024,
        color=_colour("chart", "max_memory_line", "#c62828"),
        linestyle="--",
        linewidth=1,
    )
    ax.set_xlabel("KiB per tile")
    ax.set_ylabel("tiles")
    ax.set_title("Memory over all tiles", fontsize=TITLE, loc="left")
    return to_svg(fig)


def liveness_curve(analysis: Analysis) -> str:
    lv = analysis.liveness
    fig = _fig(9.0, 3.0)
    ax = fig.subplots()
    x = np.arange(lv.n_steps)
    for i in range(lv.not_always_live.shape[0]):
        y = lv.curve(i, include_always_live=True) / 2**20
        ax.plot(x, y, linewidth=1, label=f"IPU {i}")
        p = int(lv.peak_step[i])
        if 0 <= p < lv.n_steps:
            ax.plot(
                [p],
                [y[p]],
                marker="o",
                color=_colour("chart", "peak_marker", "#c62828"),
                markersize=4,
            )
            ax.annotate(
                f"peak {y[p]:,.0f} MiB",
                (p, y[p]),
                fontsize=SMALL,
                xytext=(-4, 4) if p > 0.8 * lv.n_steps else (4, 4),
                textcoords="offset points",
                ha="right" if p > 0.8 * lv.n_steps else "left",
            )
    ax.set_xlabel("program step")
    ax.set_ylabel("MiB (always-live + not-always-live)")
    ax.set_title("Liveness", fontsize=TITLE, loc="left")
    ax.legend(fontsize=SMALL)
    ax.margins(x=0)
    return to_svg(fig)


def _host_before_device(analysis: Analysis) -> dict[str, float]:
    """Cycles of the host's main lane before the device starts, by event kind (profile
    format 1.2's host timeline; empty without one)."""
    from profiles import schema

    src = analysis.src
    if not src.has("/execution/host"):
        return {}
    lane = src.array("/execution/host/lane").astype(np.int64)
    kind = src.array("/execution/host/kind").astype(np.int64)
    start = src.array("/execution/host/start").astype(np.int64)
    end = start + src.array("/execution/host/cycles").astype(np.int64)
    main = (lane == schema.HOST_LANES.index("main")) & (start < 0)
    before = np.minimum(end[main], 0) - start[main]
    out = {}
    for k in np.unique(kind[main]):
        v = float(before[kind[main] == k].sum())
        if v > 0:
            out[schema.HOST_EVENTS[int(k)]] = v
    return out


def execution_of(analysis: Analysis) -> ExecutionSummary:
    """The execution summary a chart of the run draws; the reports draw those charts only when
    the profile has one (None: its execution did not fit in memory)."""
    ex = analysis.execution
    if ex is None:
        raise ValueError(f"profile {analysis.path} has no execution (it does not fit in memory).")
    return ex


def cycles_by_type(analysis: Analysis) -> str:
    from profiles import schema

    ex = execution_of(analysis)
    n = ex.num_ipus
    fig = _fig(9.0, max(1.9, 0.55 * n + 1.0), left=0.7, right=1.7)
    ax = fig.subplots()
    left = np.zeros(n)
    # the host's time before the device (its preparation and the call's round trip, from the
    # host timeline): every IPU waits through it, and it can be most of the run
    for kind, v in _host_before_device(analysis).items():
        ax.barh(
            np.arange(n),
            np.full(n, v / 1e6),
            left=left,
            color=_colour("host_events", kind),
            hatch="//",
            edgecolor="white",
            linewidth=0,
            label=f"host: {kind}",
        )
        left += v / 1e6
    for j, t in enumerate(schema.PROGRAM_TYPES):
        col = ex.cycles_by_type[:, j].astype(float)
        if not col.any():
            continue
        ax.barh(np.arange(n), col / 1e6, left=left, color=_colour("step_types", t), label=t)
        left += col / 1e6
    ax.set_yticks(np.arange(n), [f"IPU {i}" for i in range(n)])
    ax.invert_yaxis()
    ax.set_xlabel(
        "million cycles (hatched: the host before the device starts)"
        if _host_before_device(analysis)
        else "million cycles"
    )
    ax.set_title("Cycles by step type", fontsize=TITLE, loc="left")
    ax.legend(fontsize=SMALL, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return to_svg(fig)


def pipeline_phases(analysis: Analysis) -> str:
    ex = execution_of(analysis)
    share = ex.phase_share()
    fig = _fig(9.0, 2.6, left=0.3, bottom=1.0, wspace=0.25)
    ax1, ax2 = fig.subplots(1, 2, width_ratios=(3, 2))
    left = 0.0
    for p, v in share.items():
        if v <= 0:
            continue
        ax1.barh([0], [v * 100], left=left, color=_colour("phases", p), label=p)
        if v > 0.06:
            ax1.text(
                left + v * 50,
                0,
                f"{v:.0%}",
                ha="center",
                va="center",
                fontsize=SMALL,
                color="white",
            )
        left += v * 100
    ax1.set_xlim(0, 100)
    ax1.set_yticks([])
    ax1.set_xlabel("% of the run (wall clock)")
    ax1.set_title("Pipeline phases", fontsize=TITLE, loc="left")
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=SMALL, ncol=6, loc="lower left", frameon=False)
    st = ex.stage_cycles
    if st.size:
        colours = ["#4e79a7"] * st.size
        colours[int(np.argmax(st))] = "#e15759"
        ax2.bar(np.arange(st.size), st / 1e6, color=colours)
        ax2.bar(
            np.arange(st.size),
            ex.stage_compute_cycles / 1e6,
            color="none",
            edgecolor="white",
            hatch="//",
            linewidth=0,
        )
        ax2.set_xticks(np.arange(st.size), [f"stage {s}" for s in range(st.size)])
        ax2.set_ylabel("million cycles")
        ax2.set_title("Stage load (red: bottleneck, hatched: compute)", fontsize=SMALL, loc="left")
    else:
        ax2.set_axis_off()
    return to_svg(fig)


def comparison_metrics(analyses) -> str:
    """Key metrics across profiles, one small bar chart each."""
    keys = (
        ("cycles_per_sample", "cycles per sample", 1.0),
        ("throughput_samples_per_s", "samples/s", 1.0),
        ("peak_memory_bytes", "peak memory (MiB)", 2**-20),
        ("oom_tiles", "OOM tiles", 1.0),
    )
    names = [mathtext(x.name) for x in analyses]
    fig = _fig(9.5, 2.8, left=0.6, bottom=0.95, wspace=0.45)
    axes = fig.subplots(1, len(keys))
    for ax, (k, label, scale) in zip(axes, keys):
        vals = [x.metrics.scalar(k) for x in analyses]
        v = np.array([np.nan if x is None else x * scale for x in vals])
        ax.bar(np.arange(len(v)), np.nan_to_num(v), color="#4e79a7")
        for i, x in enumerate(v):
            if np.isnan(x):
                ax.text(i, 0, "n/a", ha="center", va="bottom", fontsize=SMALL)
        ax.set_xticks(np.arange(len(v)), names, rotation=45, ha="right", fontsize=SMALL)
        ax.set_title(label, fontsize=TITLE)
        ax.tick_params(axis="y", labelsize=SMALL)
    return to_svg(fig)


def comparison_step_types(analyses) -> str:
    """Share of busy cycles by step type per profile (all IPUs)."""
    from profiles import schema

    names = [mathtext(x.name) for x in analyses]
    fig = _fig(9.5, 0.4 * len(names) + 1.2, left=1.6, right=1.7, bottom=0.6)
    ax = fig.subplots()
    left = np.zeros(len(names))
    for t in schema.PROGRAM_TYPES[3:]:
        v = np.array([x.execution.share_of(t) * 100 if x.execution else 0.0 for x in analyses])
        if not v.any():
            continue
        ax.barh(np.arange(len(names)), v, left=left, color=_colour("step_types", t), label=t)
        left += v
    ax.set_yticks(np.arange(len(names)), names, fontsize=SMALL)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of busy cycles (all IPUs); empty = no execution (OOM)")
    ax.set_title("Cycles by step type", fontsize=TITLE, loc="left")
    if not left.any():
        ax.text(
            50,
            (len(names) - 1) / 2,
            "no profile executed (all out of memory)",
            ha="center",
            va="center",
            fontsize=9,
        )
        return to_svg(fig)
    ax.legend(fontsize=SMALL, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return to_svg(fig)


def profile_charts(analysis: Analysis) -> dict[str, str]:
    charts = {
        "memory_per_tile": memory_per_tile(analysis),
        "memory_histogram": memory_histogram(analysis),
    }
    if analysis.liveness.n_steps:
        charts["liveness"] = liveness_curve(analysis)
    if analysis.execution is not None:
        charts["cycles_by_type"] = cycles_by_type(analysis)
        charts["pipeline_phases"] = pipeline_phases(analysis)
    return charts


def comparison_charts(analyses) -> dict[str, str]:
    return {"metrics": comparison_metrics(analyses), "step_types": comparison_step_types(analyses)}
