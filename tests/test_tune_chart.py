"""The tune report's design-space charts: the static one (the ``<noscript>`` copy of the
interactive one), written as SVG from the chart's arrays without matplotlib, and the interactive
one, a plotly figure written without plotly's graph objects."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd

from analyser.reports.tune import _nice_ticks, _tick_text, design_space_chart
from analyser.sim.tune.results import TuneTable

SVG = "{http://www.w3.org/2000/svg}"


def _table(n_ok: int = 5, n_oom: int = 3, infeasible: int = 2) -> TuneTable:
    n = n_ok + n_oom
    tile = np.linspace(300.0, 800.0, n) * 1024
    status = ["ok"] * n_ok + ["oom"] * n_oom
    thr = np.r_[np.linspace(500.0, 1500.0, n_ok), np.full(n_oom, np.nan)]
    frame = pd.DataFrame(
        {
            "id": np.arange(n),
            "status": status,
            "max_tile_memory_bytes": tile,
            "headroom_bytes": 624 * 1024 - tile,
            "throughput_samples_per_s": thr,
            "feasible": np.arange(n) >= infeasible,
            "pareto": np.arange(n) == n_ok - 1,
        }
    )
    return TuneTable(folder=Path("."), frame=frame, meta={"start_id": 0, "best_id": n_ok - 1})


def _paths(root: ET.Element, colour: str) -> list[str]:
    return [e.get("d", "") for e in root.iter(f"{SVG}path") if e.get("stroke") == colour]


def test_chart_shows_every_point_and_mark():
    svg = design_space_chart(_table())
    root = ET.fromstring(svg)  # well-formed
    texts = [t.text for t in root.iter(f"{SVG}text")]
    for label in (
        "fits",
        "fits, breaks a constraint",
        "out of memory (no execution)",
        "Pareto front (throughput vs headroom)",
        "start",
        "best",
        "tile SRAM",
        "fullest tile (KiB)",
        "throughput (samples/s)",
    ):
        assert label in texts, label
    # one dot per configuration that fits (3 feasible + the legend's, 2 infeasible + the legend's)
    assert sum(d.count("h0") for d in _paths(root, "#4e79a7")) == 3 + 1
    assert sum(d.count("h0") for d in _paths(root, "#bab0ac")) == 2 + 1
    # two strokes per out-of-memory cross (3 + the legend's)
    assert sum(d.count("M") for d in _paths(root, "#c62828") if "l" in d) == 2 * (3 + 1)
    # the SRAM line is dashed
    assert any(e.get("stroke-dasharray") for e in root.iter(f"{SVG}path"))
    # the start and the best are ringed
    assert len(list(root.iter(f"{SVG}circle"))) == 2
    # ticks on both axes: 1,000-style labels on the throughput axis
    assert "1,000" in texts and "500" in texts


def test_chart_of_out_of_memory_only_and_of_one_point():
    for table in (_table(n_ok=0, n_oom=4, infeasible=0), _table(n_ok=1, n_oom=0, infeasible=0)):
        root = ET.fromstring(design_space_chart(table))
        assert any(t.text and re.fullmatch(r"[\d,.]+", t.text) for t in root.iter(f"{SVG}text"))


def test_nice_ticks():
    t = _nice_ticks(-52.5, 1575.0)
    assert t[0] == 0 and t[-1] <= 1575 and 4 <= len(t) <= 9
    assert _tick_text(t)[-1].count(",") == 1
    assert _tick_text(_nice_ticks(0.0, 1.0)) == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]


def test_chart_does_not_import_matplotlib():
    code = (
        "import sys; from tests.test_tune_chart import _table;"
        "from analyser.reports.tune import design_space_chart; design_space_chart(_table());"
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _graph_objects_figure(table: TuneTable) -> dict:
    """The interactive chart as plotly's graph objects build it: the figure dict validated by
    ``go.Figure`` (every key one plotly knows, every value as plotly normalises it) in the
    report's template."""
    import plotly.graph_objects as go
    import plotly.io as pio

    from analyser.reports.interactive import TEMPLATE, design_space_figure

    fig = design_space_figure(table)
    built = go.Figure(fig)
    assert built.layout.template == pio.templates[TEMPLATE]
    return built.to_dict()


def test_interactive_chart_is_the_graph_objects_figure():
    """The interactive design space is written as a figure dict without plotly's graph objects;
    validated by them it is unchanged (nothing dropped, renamed or normalised), for the usual
    table, one with only out-of-memory rows, one point, and one drawn with WebGL."""
    from _plotly_utils.utils import convert_to_base64

    from analyser.reports.interactive import design_space_figure
    from analyser.reports.tune import VECTOR_POINTS

    tables = [
        _table(),
        _table(n_ok=0, n_oom=4, infeasible=0),
        _table(n_ok=1, n_oom=0, infeasible=0),
        _table(n_ok=VECTOR_POINTS, n_oom=5, infeasible=10),
    ]
    for table in tables:
        fig = design_space_figure(table)
        convert_to_base64(fig)
        assert fig == _graph_objects_figure(table)
    big = design_space_figure(tables[-1])
    assert {t["type"] for t in big["data"]} == {"scattergl", "scatter"}  # the marks, the rest
    usual = design_space_figure(tables[0])
    names = [t["name"] for t in usual["data"]]
    assert names == [
        "fits, breaks a constraint",
        "fits",
        "out of memory (no execution)",
        "Pareto front (throughput vs headroom)",
        "start",
        "best",
    ]
    assert [len(t["x"]) for t in usual["data"]] == [2, 3, 3, 1, 1, 1]
    assert usual["layout"]["shapes"][0]["x0"] == 624.0  # the tile's SRAM


def test_interactive_chart_builds_no_graph_object():
    """Writing the interactive chart loads neither plotly's figure class nor a validator (what
    building the figure cost); plotly's HTML writer, a few modules, is all it imports."""
    code = (
        "import sys; from tests.test_tune_chart import _table;"
        "from analyser.reports.interactive import design_space; html = design_space(_table());"
        "print('Plotly.newPlot' in html, 'plotly.graph_objs._figure' in sys.modules,"
        " any(m.startswith('plotly.validators') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True False False"
