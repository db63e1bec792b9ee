"""Profiles in Jupyter: rich displays and short calls for charts.

In a notebook, ``from analyser.core import Analysis`` is enough: importing the ``analyser``
package inside IPython registers these displays (:func:`enable`; also ``%load_ext
analyser.notebook``). Then a cell that ends with

* an :class:`analyser.core.Analysis` shows its key figures, its memory and cycles charts and
  its top insights (not re-simulated: ``find_insights(a, simulator=...)`` gives their effects);
* a :class:`profiles.Profile` shows what it holds (model, status, tables and their sizes);
* a comparison (:func:`analyser.core.comparison.compare_pair`) shows the run options that
  differ, the key figures before and after with their change, and the explanations;
* a diff (:func:`analyser.core.diff.diff_runs`) shows the change by step type and the layers
  that changed most.

Charts from short calls, as interactive Plotly figures (``analysis.plot`` is an accessor, as
pandas' ``DataFrame.plot`` is)::

    a.plot.memory()            # memory per tile by category, one panel per IPU
    a.plot.liveness()          # not-always-live memory over the program's steps
    a.plot.cycles()            # cycles by step type per IPU, the host's parts beside them
    a.plot.trace((0, 200_000)) # the executed steps of a window of cycles, per IPU

and DataFrames from the analysis itself (``a.operations``, ``a.variables``,
``a.largest_variables(20)``, ``analyser.query.query(path, sql)``).

The displays are HTML built from the analysis core's figures, with the static SVG charts of
:mod:`analyser.reports.charts` (no script: a notebook saved with them opens anywhere); every
text from a profile is escaped. docs/notebook.ipynb is an example the tests run in a kernel.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analyser.core.analysis import Analysis

#: Most executed steps :meth:`Plots.trace` draws (a larger window is refused in one sentence:
#: a bar per step beyond this is slower to draw than to read).
MAX_TRACE_STEPS = 20_000
#: Insights a profile's display lists.
TOP_INSIGHTS = 5


def _e(text: object) -> str:
    from analyser.literal import terminal

    return html.escape(terminal(str(text)))


def _table(rows: Sequence[tuple[object, ...]], head: tuple[str, ...] | None = None) -> str:
    out = ['<table style="border-collapse:collapse;margin:4px 0">']
    if head:
        out.append(
            "<tr>"
            + "".join(f'<th style="text-align:left;padding:2px 8px">{_e(h)}</th>' for h in head)
            + "</tr>"
        )
    for row in rows:
        cells = "".join(f'<td style="padding:2px 8px">{_e(c)}</td>' for c in row)
        out.append(f"<tr>{cells}</tr>")
    out.append("</table>")
    return "".join(out)


def analysis_html(a: Analysis, insights: int = TOP_INSIGHTS) -> str:
    """The rich display of an analysis: key figures, charts and top insights."""
    from analyser.core.insights import find_insights
    from analyser.core.summary import summary_sections, value_text
    from analyser.reports import charts

    mem = a.memory
    status = "fits" if mem.fits else f"OUT OF MEMORY ({mem.n_oom_tiles:,} tiles)"
    parts = [f"<h3>{_e(a.name)}: {_e(a.target.model)} ({_e(status)})</h3>"]
    for section in summary_sections(a):
        rows = [(r["label"], value_text(r), r["range"] or "") for r in section["figures"]]
        parts.append(f"<b>{_e(section['title'])}</b>" + _table(rows))
    svgs = charts.profile_charts(a)
    for key in ("memory_per_tile", "cycles_by_type"):
        if svgs.get(key):
            parts.append(f'<div style="max-width:900px">{svgs[key]}</div>')
    tips = find_insights(a)[:insights]
    if tips:
        parts.append("<b>Top insights</b>")
        parts.append(_table([(t.severity, t.title, t.summary) for t in tips], ("", "insight", "")))
    return "\n".join(parts)


def profile_html(p: Any) -> str:
    """The rich display of an open profile: what it holds."""
    s = p.summary()
    rows = [
        ("model", s.get("model", "")),
        ("status", s.get("status", "")),
        ("IPUs x replicas", f"{s.get('num_ipus', 0)} x {s.get('replicas', 0)}"),
        ("executed steps", f"{int(s.get('n_steps', 0)):,}"),
        ("format", s.get("format_version", "")),
    ]
    sizes = [(k, f"{v:,} rows") for k, v in (s.get("sizes") or {}).items()]
    return f"<h3>{_e(p.path)}</h3>" + _table(rows) + "<b>Tables</b>" + _table(sizes)


def comparison_html(c: Any) -> str:
    """The rich display of a comparison of two profiles (``compare_pair``)."""
    from analyser.core.comparison import fmt_value
    from analyser.core.units import fmt_rel_change

    head = f"<h3>{_e(c.a)} &rarr; {_e(c.b)}</h3>"
    opts = _table(
        [(d.key, str(d.before), str(d.after)) for d in c.config_diffs], ("option", "A", "B")
    )
    rows = [
        (m.label, fmt_value(m.before, m.kind), fmt_value(m.after, m.kind), fmt_rel_change(m.rel))
        for m in c.metrics
    ]
    figs = _table(rows, ("figure", "A", "B", "change"))
    why = "".join(f"<li>{_e(x.text)}</li>" for x in c.explanations)
    return (
        head
        + "<b>Run options that differ</b>"
        + opts
        + "<b>Key figures</b>"
        + figs
        + (f"<b>Why</b><ul>{why}</ul>" if why else "")
    )


def diff_html(d: Any, layers: int = 10) -> str:
    """The rich display of a step-by-step diff (``diff_runs``)."""
    head = (
        f"<h3>{_e(d.a)} &rarr; {_e(d.b)}: {d.total_a:,} &rarr; {d.total_b:,} cycles "
        f"({d.delta:+,})</h3>"
    )
    return head + _frame(d.by_type, "By step type") + _frame(d.by_layer.head(layers), "Layers")


def _frame(df: Any, title: str) -> str:
    if df is None or len(df) == 0:
        return ""
    rows = [tuple(str(v) for v in r) for r in df.itertuples(index=False)]
    return f"<b>{_e(title)}</b>" + _table(rows, tuple(map(str, df.columns)))


class Plots:
    """``analysis.plot``: the analysis's charts as interactive Plotly figures."""

    def __init__(self, analysis: Analysis) -> None:
        self._a = analysis

    def memory(self):
        """Memory per tile by category, one panel per IPU, the SRAM limit dashed."""
        from analyser.reports import interactive

        return interactive.memory_per_tile_figure(self._a)

    def memory_histogram(self):
        """How many tiles hold how much memory."""
        from analyser.reports import interactive

        return interactive.memory_histogram_figure(self._a)

    def liveness(self):
        """Not-always-live memory over the program's steps, per IPU."""
        from analyser.reports import interactive

        return interactive.liveness_curve_figure(self._a)

    def cycles(self):
        """Cycles by step type per IPU, with the host's parts of the call."""
        from analyser.reports import interactive

        return interactive.cycles_by_type_figure(self._a)

    def trace(self, window: tuple[int, int], ipus: list[int] | None = None):
        """The executed steps of cycles ``window`` = (start, end) on ``ipus`` (all by default),
        one bar per step coloured by its type; at most :data:`MAX_TRACE_STEPS` steps."""
        from analyser.reports import interactive

        return interactive.trace_window_figure(self._a, window, ipus, MAX_TRACE_STEPS)


def _register(ip: Any) -> None:
    from analyser.core.analysis import Analysis
    from analyser.core.comparison import PairComparison
    from analyser.core.diff import RunDiff
    from profiles.reader import Profile

    fmt = ip.display_formatter.formatters["text/html"]
    for cls, render in (
        (Analysis, analysis_html),
        (Profile, profile_html),
        (PairComparison, comparison_html),
        (RunDiff, diff_html),
    ):
        fmt.for_type(cls, render)


def install_accessor() -> None:
    """Give every :class:`Analysis` its ``plot`` accessor."""
    from analyser.core.analysis import register_accessor

    register_accessor("plot", Plots)


def enable() -> bool:
    """Register the rich displays in the running IPython (and the ``plot`` accessor); False
    outside IPython."""
    install_accessor()
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    if ip is None:
        return False
    _register(ip)
    return True


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext analyser.notebook``."""
    install_accessor()
    _register(ip)


__all__ = [
    "MAX_TRACE_STEPS",
    "Plots",
    "analysis_html",
    "comparison_html",
    "diff_html",
    "enable",
    "install_accessor",
    "load_ipython_extension",
    "profile_html",
]
