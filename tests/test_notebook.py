"""Profiles in Jupyter (analyser.notebook): the rich displays, ``analysis.plot``, and the
example notebook docs/notebook.ipynb executed by a real kernel."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import analyser.notebook as nb
from analyser.core import Analysis

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pair(walkthrough_profiles):
    a = Analysis.open(walkthrough_profiles["2-half"])
    b = Analysis.open(walkthrough_profiles["3-accumulate"])
    yield a, b
    a.close()
    b.close()


def test_the_displays_hold_the_figures_and_escape_the_profiles_text(pair):
    from analyser.core.comparison import compare_pair
    from analyser.core.diff import diff_runs

    a, b = pair
    html = nb.analysis_html(a)
    assert "resnet101" in html and "Top insights" in html and "<svg" in html
    cmp = nb.comparison_html(compare_pair(a, b))
    assert "gradient_accumulation" in cmp and "Key figures" in cmp
    assert "By step type" in nb.diff_html(diff_runs(a, b))
    assert "<script" not in nb._e("<script>alert(1)</script>")
    assert "\x1b" not in nb._e("\x1b[31mred")


def test_the_plot_accessor_gives_figures(pair):
    nb.install_accessor()
    a, _ = pair
    assert a.plot is a.plot  # made once per analysis
    for fig in (a.plot.memory(), a.plot.liveness(), a.plot.cycles(), a.plot.memory_histogram()):
        assert fig.data, fig.layout.title.text
    starts = a.src.profile.step_starts(0)
    begin, end = int(starts[len(starts) // 2]), int(starts[len(starts) // 2 + 300])
    trace = a.plot.trace((begin, end))
    bars = sum(len(t.x) for t in trace.data)
    rows = sum(len(a.src.profile.step_window(i, begin, end, ["start"])) for i in range(2))
    assert bars == rows > 10  # a bar per step of the window


@pytest.mark.parametrize("name", sorted(__import__("hostile").trace_windows()))
def test_a_bad_trace_window_is_one_sentence(pair, name, monkeypatch):
    import hostile

    window, says = hostile.trace_windows()[name]
    nb.install_accessor()
    monkeypatch.setattr(nb, "MAX_TRACE_STEPS", 50)  # the walkthrough's whole run is 12,000
    a, _ = pair
    with pytest.raises(ValueError) as info:
        a.plot.trace(window)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_cycles_of_a_run_without_execution_are_one_sentence(walkthrough_profiles):
    # the first walkthrough step does not fit: its profile holds memory only
    nb.install_accessor()
    with Analysis.open(walkthrough_profiles["1-base"]) as a:
        assert a.execution is None
        assert a.plot.memory().data  # what the profile has is still drawn
        with pytest.raises(ValueError) as info:
            a.plot.cycles()
    assert "has no execution" in str(info.value) and "\n" not in str(info.value)


def test_an_accessor_cannot_hide_an_attribute():
    from analyser.core.analysis import register_accessor

    with pytest.raises(AttributeError, match="already has"):
        register_accessor("memory", nb.Plots)


def test_the_example_notebook_runs_in_a_kernel(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("NOTEBOOK_OUT", str(tmp_path))
    book = nbformat.read(ROOT / "docs" / "notebook.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        book, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()  # raises CellExecutionError on any failing cell
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    data = [o.get("data", {}) for o in outputs]
    html = [d["text/html"] for d in data if "text/html" in d]
    assert any("Top insights" in h for h in html), "the analysis's rich display"
    assert any("Run options that differ" in h for h in html), "the comparison's"
    assert any("By step type" in h for h in html), "the diff's"
    plots = [d for d in data if "application/vnd.plotly.v1+json" in d]
    assert len(plots) >= 4, "the four plot cells"
    spec = plots[-1]["application/vnd.plotly.v1+json"]
    assert json.dumps(spec).count("IPU") > 0
    assert any("3-accumulate" in h for h in html if "gradient_accumulation" in h)
