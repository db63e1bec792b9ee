"""Reports: the HTML parses and holds its charts; Markdown and JSON carry the same content; the
JSON follows docs/report-schema.md."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from analyser.cli import main
from analyser.reports import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, write_report
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="session")
def report_profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("reports")
    oom, fits = d / "a-oom.h5", d / "b-fits.h5"
    write_profile(oom, make_synthetic_profile(n_steps=500, n_ipus=2, tiles=128, oom=True))
    write_profile(fits, make_synthetic_profile(n_steps=5000, n_ipus=2, tiles=128, seed=2))
    return [oom, fits]


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.stack: list[str] = []
        self.text: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v and v.startswith(("http:", "https:", "//")):
                self.external.append(v)

    def handle_data(self, data):
        self.text.append(data)


def test_html_report(report_profiles, tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", *map(str, report_profiles), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    p = _Collect()
    p.feed(html)
    p.close()
    text = " ".join(p.text)
    # charts: memory per tile + histogram + liveness for both profiles, cycles by step type and
    # pipeline phases for the fitting one, and the two comparison charts; interactive (plotly)
    assert html.count('class="plotly-graph-div"') == 3 + 5 + 2
    assert "Comparison" in text and "Out of memory" in text and "Fits" in text
    assert "Insights" in text and "Cycles by step type" in html
    assert not p.external  # self-contained: opens offline
    assert not re.search(r"<script[^>]*\ssrc=", html)  # plotly.js inlined, no CDN
    assert html.count("Plotly.newPlot") == 10


def test_markdown_and_json_same_content(report_profiles, tmp_path):
    md = write_report(report_profiles, tmp_path / "r.md", fmt="md").read_text()
    js = json.loads((write_report(report_profiles, tmp_path / "r.json", fmt="json")).read_text())
    assert js["schema"] == REPORT_SCHEMA and js["schema_version"] == REPORT_SCHEMA_VERSION
    assert js["thresholds"]["host_wait_high"] == 0.2 and js["resimulated"] is False
    assert len(js["profiles"]) == 2 and js["comparison"]["pairs"]
    for prof in js["profiles"]:
        assert prof["name"] in md
        m = prof["metrics"]
        for key in (
            "total_cycles",
            "cycles_per_sample",
            "peak_memory_bytes",
            "oom_tiles",
            "throughput_samples_per_s",
        ):
            assert key in m
        for ipu in prof["ipus"]:
            assert {"streamcopy_rx_bytes", "streamcopy_tx_bytes"} <= set(ipu)
        for tip in prof["insights"]:
            assert tip["title"] in md
    oom, fits = js["profiles"]
    assert oom["metrics"]["total_cycles"] is None and oom["execution"] is None
    assert oom["metrics"]["oom_tiles"] > 0
    assert fits["metrics"]["total_cycles"] > 0
    assert "data:image" not in md  # charts are files beside it (test_markdown_images_...)


def test_report_errors(report_profiles, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:  # argparse: usage + one-line error
        main(["report", str(report_profiles[0]), "--format", "pdf", "-o", str(tmp_path / "x")])
    assert exc.value.code == 2
    capsys.readouterr()
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5 at all")
    out = tmp_path / "keep.html"
    out.write_text("previous")
    assert main(["report", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert out.read_text() == "previous"  # the previous output is never lost
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.h5", "keep.html"]


def test_the_schema_document_lists_every_key_figure(report_profiles):
    """docs/report-schema.md's Metrics table names every key of a profile's ``metrics`` (a key
    figure added by docs/design.md's recipe reaches the JSON at once; its documentation did
    not)."""
    from pathlib import Path

    from analyser.core import Analysis
    from analyser.reports.data import build_report

    doc = (Path(__file__).resolve().parents[1] / "docs" / "report-schema.md").read_text("utf-8")
    table = doc.split("### Metrics (`profiles[i].metrics`)")[1].split("\n#")[0]
    rows = {
        key
        for line in table.splitlines()
        if line.startswith("| `")
        for key in line.split("|")[1].replace("`", "").replace(" ", "").split(",")
    }
    with Analysis.open(report_profiles[1]) as a:
        keys = build_report([a], insights=False)["profiles"][0]["metrics"]
    missing = sorted(set(keys) - rows)
    assert missing == [], f"add to docs/report-schema.md's Metrics table: {missing}"


def test_html_report_shows_the_host_time_and_every_shape(tmp_path):
    """An engine profile whose host time before the device is most of the run: the "Cycles by
    step type" chart has the host's preparation and call (hatched, labelled), and no cell of the
    largest-variables table's shape column is blank (pooled temporaries record no shape)."""
    import re

    import engine
    from engine.config import RunConfig

    path = tmp_path / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    out = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert "host: prepare" in html and "host: call" in html
    assert "hatched: the host before the device starts" in html
    table = html[html.index("largest variables") :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)[1:]
    assert rows
    for row in rows:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
        assert cells[3].strip(), row


def _image_links(md_path):
    import re
    from urllib.parse import unquote

    text = md_path.read_text(encoding="utf-8")
    return [unquote(x) for x in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)]


def test_markdown_images_are_files_beside_it(report_profiles, tmp_path, capsys):
    """A Markdown report links its charts by relative paths to SVG files written beside it
    (GitHub shows no data-URI image); each link resolves to a well-formed SVG, and the .md stays
    small."""
    import xml.etree.ElementTree as ET

    out = tmp_path / "my report.md"
    assert main(["report", *map(str, report_profiles), "-o", str(out)]) == 0
    # the sentence may wrap at a space of the path (the console is 80 columns under pytest)
    assert "my report_files" in " ".join(capsys.readouterr().out.split())
    text = out.read_text(encoding="utf-8")
    assert "data:image" not in text and "base64" not in text
    links = _image_links(out)
    # memory per tile + liveness for both, cycles by type + phases for the fitting one, and the
    # two comparison charts
    assert len(links) == 2 + 2 + 2 + 2
    for link in links:
        assert not link.startswith(("/", "http")), link  # relative
        path = tmp_path / link
        assert path.parent == tmp_path / "my report_files"
        assert ET.parse(path).getroot().tag.endswith("svg")
    assert sorted(p.name for p in (tmp_path / "my report_files").iterdir()) == sorted(
        (tmp_path / x).name for x in links
    )
    assert out.stat().st_size < 100_000


def test_markdown_images_touch_only_files_analyse_wrote(report_profiles, tmp_path, capsys):
    """Writing the report again replaces its images and removes those it no longer has (only
    ones analyse wrote); a file of the user's in the folder stays; a file of the user's where an
    image goes is refused in one sentence (exit 2), unless --force; a file where the folder goes
    is refused."""
    out = tmp_path / "r.md"
    folder = tmp_path / "r_files"
    assert main(["report", *map(str, report_profiles), "-o", str(out)]) == 0
    two = {p.name for p in folder.iterdir()}
    (folder / "notes.svg").write_text("<svg>mine</svg>")
    (folder / "p2-custom.svg").write_text("<svg>also mine</svg>")
    assert main(["report", str(report_profiles[0]), "-o", str(out)]) == 0
    one = {p.name for p in folder.iterdir()}
    assert {"notes.svg", "p2-custom.svg"} <= one  # the user's files stay
    stale = two - {x.split("/")[-1] for x in _image_links(out)}
    assert stale and not (stale & one)  # the second profile's and the comparison's: removed
    capsys.readouterr()

    target = folder / "p1-liveness.svg"
    target.write_text("<svg>the user's own chart</svg>")
    assert main(["report", str(report_profiles[0]), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--force" in err
    assert target.read_text() == "<svg>the user's own chart</svg>"
    assert main(["report", str(report_profiles[0]), "-o", str(out), "--force"]) == 0
    assert "IPU Graph Analyser" in target.read_text()

    blocked = tmp_path / "b.md"
    (tmp_path / "b_files").write_text("a file, not a folder")
    assert main(["report", str(report_profiles[0]), "-o", str(blocked)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "b_files" in err
    assert not blocked.exists()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _rendered_dom(path, tmp_path) -> str:
    """The report's DOM after headless Chromium ran its scripts, with every network name
    unresolvable (a chart that needs a CDN would not draw)."""
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--window-size=1280,900",
            "--virtual-time-budget=15000",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (headless) to run the charts")
def test_html_charts_draw_offline_with_readable_text(report_profiles, tmp_path):
    """In a browser with no network every chart draws (plotly.js is in the file), and no text
    of a chart is smaller than 11 px (the static charts were scaled to 7 px)."""
    out = tmp_path / "r.html"
    assert main(["report", *map(str, report_profiles), "-o", str(out)]) == 0
    dom = _rendered_dom(out, tmp_path)
    charts = dom.split('class="plotly-graph-div')[1:]
    assert len(charts) == 10
    for chart in charts:
        assert 'class="main-svg"' in chart  # drawn
    sizes = [float(x) for x in re.findall(r"font-size: ?([0-9.]+)px", "".join(charts))]
    assert sizes and min(sizes) >= 11, sorted(set(sizes))


def test_comparison_charts_hover_the_run_option_change(walkthrough_profiles):
    """Hovering a profile's bar in the step-by-step charts shows the run-option change that led
    to it (the hover text carries each changed option)."""
    from analyser.core import Analysis
    from analyser.reports import interactive
    from analyser.reports.data import build_report

    steps = ("2-half", "3-accumulate", "4-device-iterations")
    analyses = [Analysis.open(walkthrough_profiles[s]) for s in steps]
    try:
        data = build_report(analyses, insights=False)
        charts = interactive.comparison_charts(analyses, data)
    finally:
        for a in analyses:
            a.close()
    pairs = data["comparison"]["pairs"]
    keys = [d["key"] for p in pairs for d in p["config_diffs"] if d["key"] != "name"]
    assert {"gradient_accumulation", "device_iterations"} <= set(keys)
    for div in charts.values():
        for key in keys:
            assert f"{key}: " in div
        assert "the start" in div


def test_tune_design_space_hovers_each_configuration(tmp_path):
    """The tune report's design space is interactive: each point's hover names its
    configuration (its number, its options, its figures); plotly.js is in the file (no CDN) and
    the static chart stays for a viewer without scripts."""
    import hostile

    import engine
    from engine.config import RunConfig

    base = tmp_path / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), base)
    folder = hostile.tune_folder(tmp_path / "tune", base, rows=4)
    out = tmp_path / "tune.html"
    assert main(["report", str(folder), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert html.count('class="plotly-graph-div"') == 1
    assert not re.search(r"<script[^>]*\ssrc=", html)
    for rid in range(4):
        assert f"configuration #{rid}" in html
    assert html.count("micro_batch_size = ") >= 4
    noscript = html[html.index("<noscript>") : html.index("</noscript>")]
    assert "<svg" in noscript


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (headless) to run the charts")
def test_html_chart_labels_keep_names_literal(report_profiles, tmp_path):
    """A profile named like an HTML element, with HTML in its step names: the charts draw it as
    text (the axis shows it, no element is made from it)."""
    import hostile

    text = hostile.INJECTIONS["html"]
    bad = hostile.mutated(report_profiles[1], tmp_path, "inj", hostile.inject_names(text))
    named = tmp_path / f"{text}.h5"
    bad.rename(named)
    out = tmp_path / "r.html"
    assert main(["report", str(report_profiles[0]), str(named), "-o", str(out)]) == 0
    dom = _rendered_dom(out, tmp_path)
    assert not re.search(r"<img[^>]*src=\"?x", dom)
    charts = "".join(dom.split('class="plotly-graph-div')[1:])
    assert "&lt;img src=x onerror" in charts  # shown as text in a chart


def _hovered(path, tmp_path, chart: int, points: list[tuple[int, int]], subplot: str = "xy"):
    """The hover label's text after hovering ``points`` (trace, point) of chart number ``chart``
    of the report at ``path`` in headless Chromium (the label a mouse over them shows)."""
    import html as html_lib

    page = tmp_path / f"hover-{path.name}"
    pts = ",".join(f"{{curveNumber:{c},pointNumber:{p}}}" for c, p in points)
    script = (
        "<script>window.addEventListener('load',function(){"
        f"var g=document.querySelectorAll('.plotly-graph-div')[{chart}];"
        f"Plotly.Fx.hover(g,[{pts}],'{subplot}');}});</script></body>"
    )
    page.write_text(path.read_text("utf-8").replace("</body>", script), "utf-8")
    dom = _rendered_dom(page, tmp_path)
    layer = dom[dom.index('class="hoverlayer"') :]
    layer = layer[: layer.index("</g></svg>")] if "</g></svg>" in layer else layer
    return html_lib.unescape(re.sub(r"<[^>]+>", " ", layer))


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (headless) to run the charts")
def test_hovering_a_tune_point_shows_its_configuration(tmp_path):
    """A mouse over a point of the tune report's design space shows that configuration: its
    number and options (what a user asked the chart for)."""
    import hostile

    import engine
    from engine.config import RunConfig

    base = tmp_path / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), base)
    folder = hostile.tune_folder(tmp_path / "tune", base, rows=3)
    out = tmp_path / "tune.html"
    assert main(["report", str(folder), "-o", str(out)]) == 0
    text = _hovered(out, tmp_path, 0, [(0, 1)])
    assert "configuration #1" in text and "micro_batch_size = 2" in text, text


def test_every_chart_is_in_the_white_template_inside_a_report_or_alone(walkthrough_profiles):
    """A chart made for a report (the template set once for all of them) and one made alone
    (a notebook's) have the same template, and the default template is left as it was."""
    import plotly.io as pio

    from analyser.core import Analysis
    from analyser.reports import interactive

    before = pio.templates.default
    with Analysis.open(walkthrough_profiles["2-half"]) as a:
        alone = interactive.cycles_by_type_figure(a).to_dict()["layout"]["template"]
        with interactive.in_template():
            inside = interactive.cycles_by_type_figure(a).to_dict()["layout"]["template"]
    white = pio.templates[interactive.TEMPLATE].to_plotly_json()
    assert alone == inside == white
    assert pio.templates.default == before
