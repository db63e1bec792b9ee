"""Issue 24 item 2: the summary's sections and figures are declared once
(analyser.core.quantities.SUMMARY_SECTIONS) and every rendering shows them: the text
``analyse summary``, the JSON, the Markdown and HTML reports and the GUI Summary's view-model.
A figure added to the declaration reaches all of them; every declared figure appears in each
with the same label."""

from __future__ import annotations

import dataclasses
import json

import markupsafe
import pytest

from analyser.cli import main
from analyser.core import Analysis, quantities
from analyser.core import summary as core_summary
from analyser.core.quantities import (
    DESCRIPTIVE,
    QUANTITIES,
    SUMMARY_SECTIONS,
    Quantity,
    SummaryFigure,
    summary_quantity,
)
from analyser.core.summary import summary_sections, value_text
from analyser.gui.model import summary as gui_summary
from analyser.gui.model.document import Document
from analyser.literal import markdown as md_literal
from analyser.reports.data import build_report
from analyser.reports.render import render_html, render_markdown
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("summary-layout")
    fits, oom, fits2 = d / "fits.h5", d / "oom.h5", d / "fits2.h5"
    write_profile(fits, make_synthetic_profile(n_steps=800, n_ipus=2, tiles=64, seed=3))
    write_profile(
        fits2, make_synthetic_profile(n_steps=800, n_ipus=2, tiles=64, seed=3, grad_accum=8)
    )
    write_profile(oom, make_synthetic_profile(n_steps=100, n_ipus=2, tiles=64, oom=True))
    return {"fits": fits, "fits2": fits2, "oom": oom}


def _renderings(path, capsys, monkeypatch) -> dict[str, object]:
    """Every rendering of the summary of ``path``: text, Markdown, HTML, JSON, GUI model."""
    monkeypatch.setenv("COLUMNS", "4000")  # one table line per row
    assert main(["summary", str(path)]) == 0
    text = capsys.readouterr().out
    assert main(["summary", str(path), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    with Analysis.open(path) as a:
        report = build_report([a], insights=False)
        md = render_markdown(report, [a], "t")
        html = render_html(report, [a], "t")
    doc = Document.open(path)
    try:
        gui = gui_summary.figure_sections(doc, None, "KiB")[1]
    finally:
        doc.analysis.close()
    return {"text": text, "md": md, "html": html, "json": js, "gui": gui}


def _check_row(r: dict[str, object], section: str, row: dict) -> None:
    """``row`` (a declared figure of ``section``, as the core evaluates it) in each rendering."""
    label, shown = row["label"], value_text(row)
    rows = [[c.strip() for c in ln.split("│")[1:-1]] for ln in r["text"].splitlines()]
    assert any(c[:2] == [label, shown] for c in rows), (label, "text")
    assert f"| {md_literal(label)} | {md_literal(shown)} |" in r["md"], (label, "Markdown")
    assert (
        f'<td>{markupsafe.escape(label)}</td><td class="n">{markupsafe.escape(shown)}' in r["html"]
    ), (label, "HTML")
    js = next(s for s in r["json"]["summary"] if s["title"] == section)
    got = next(x for x in js["figures"] if x["key"] == row["key"])
    assert (got["label"], got["text"]) == (label, row["text"]), (label, "JSON")
    gui = next(s for s in r["gui"] if s.title == section)
    cells = next(x.cells for x in gui.rows if x.cells[0] == row["title"])
    assert row["title"] == label[:1].upper() + label[1:]  # the same label, capitalised
    assert cells[1] == row["text"] and cells[2] == row["range"] and cells[3] == row["note"]


def test_a_figure_added_to_the_declaration_reaches_every_rendering(small, capsys, monkeypatch):
    """The recipe: one Quantity row, one SummaryFigure line (and its value) - nothing else."""
    key = "test_added_figure"
    monkeypatch.setitem(DESCRIPTIVE, key, Quantity(key, "figure added by the test", "int", "lower"))
    monkeypatch.setitem(core_summary.DERIVED, key, lambda a: 4242424)
    memory = next(i for i, s in enumerate(SUMMARY_SECTIONS) if s.title == "Memory")
    old = SUMMARY_SECTIONS[memory]
    new = dataclasses.replace(old, figures=(*old.figures, SummaryFigure(key, key)))
    sections = [*SUMMARY_SECTIONS]
    sections[memory] = new
    monkeypatch.setattr(quantities, "SUMMARY_SECTIONS", sections)
    r = _renderings(small["fits"], capsys, monkeypatch)
    row = {
        "key": key,
        "label": "figure added by the test",
        "title": "Figure added by the test",
        "text": "4,242,424",
        "note": "",
        "range": "",
    }
    _check_row(r, "Memory", row)


def test_every_declared_figure_appears_in_every_rendering_with_its_label(
    small, capsys, monkeypatch
):
    r = _renderings(small["fits"], capsys, monkeypatch)
    with Analysis.open(small["fits"]) as a:
        declared = summary_sections(a)
    assert [s["title"] for s in declared] == [s.title for s in SUMMARY_SECTIONS]
    for section, spec in zip(declared, SUMMARY_SECTIONS):
        assert [x["key"] for x in section["figures"]] == [f.key for f in spec.figures]
        for row in section["figures"]:
            assert row["label"] == summary_quantity(row["key"]).label
            _check_row(r, section["title"], row)
    # the JSON carries the same rows as the core
    assert r["json"]["summary"] == json.loads(json.dumps(declared))


def test_an_oom_profile_has_no_execution_section_anywhere(small, capsys, monkeypatch):
    r = _renderings(small["oom"], capsys, monkeypatch)
    assert [s["title"] for s in r["json"]["summary"]] == ["Target", "Graph", "Memory"]
    assert [s.title for s in r["gui"]] == ["Target", "Graph", "Memory"]
    assert "| Execution |" not in r["md"] and '<th colspan="2">Execution</th>' not in r["html"]
    assert "No execution" in r["text"] and "OUT OF MEMORY" in r["text"]


def test_every_key_figure_label_is_one_wording():
    """Labels are unified: the GUI's title is the label capitalised, for every figure."""
    for q in (*QUANTITIES.values(), *DESCRIPTIVE.values()):
        assert q.title == q.label[:1].upper() + q.label[1:], q.key
    keys = [f.key for s in SUMMARY_SECTIONS for f in s.figures]
    assert len(keys) == len(set(keys)), "a figure is declared twice"
    for s in SUMMARY_SECTIONS:
        for f in s.figures:
            summary_quantity(f.key)  # every declared figure is in the catalogue
            assert f.note == "" or f.note in core_summary.NOTES


def test_gui_summary_carries_ranges_intervals_and_imbalance(small):
    """The GUI Summary's model: prediction ranges in single mode, the interval of each compared
    change in compare mode (the core's comparison), and cycles lost to tile imbalance per IPU
    (as ``analyse summary``)."""
    from analyser.core.comparison import compare_pair
    from analyser.core.intervals import range_text

    a, b = Document.open(small["fits"]), Document.open(small["fits2"])
    try:
        headers, single = gui_summary.figure_sections(a, None, "KiB")
        assert headers == gui_summary.SINGLE_HEADERS
        ex = next(s for s in single if s.title == "Execution")
        pred = summary_sections(a.analysis)
        want = {r["title"]: r["range"] for s in pred for r in s["figures"]}
        assert any(r.cells[2] for r in ex.rows)  # some ranges are given ...
        assert all(r.cells[2] == want[r.cells[0]] for r in ex.rows)  # ... and they are the core's
        headers, both = gui_summary.figure_sections(a, b, "KiB")
        assert headers == gui_summary.COMPARE_HEADERS
        pair = compare_pair(a.analysis, b.analysis)
        cycles = next(
            r
            for s in both
            if s.title == "Execution"
            for r in s.rows
            if r.cells[0] == "Total cycles"
        )
        assert cycles.cells[4] == range_text(pair.metric("total_cycles").interval)
        assert cycles.cells[4]  # a range or "no interval", never blank for a compared figure
        imb = a.analysis.imbalance
        for ipu, section in enumerate(gui_summary.ipu_sections(a, None)):
            lost = next(r for r in section.rows if r.cells[0] == gui_summary.LOST)
            assert lost.cells[1] == f"{round(imb.lost_cycles[ipu]):,}"
        for section in gui_summary.ipu_sections(a, b):
            assert any(r.cells[0] == gui_summary.LOST for r in section.rows)
        # the compute sets losing the most, as analyse summary lists them
        (worst,) = gui_summary.imbalance_sections(a, None)
        top = imb.compute_sets.head(gui_summary.IMBALANCE_TOP)
        assert [r.cells[0] for r in worst.rows] == [str(n) for n in top["name"]]
        lost = gui_summary.IMBALANCE_HEADERS.index("Lost")
        assert [r.cells[lost] for r in worst.rows] == [f"{round(v):,}" for v in top["lost_cycles"]]
        assert len(gui_summary.imbalance_sections(a, b)) == 2  # A's and B's
    finally:
        a.analysis.close()
        b.analysis.close()


def test_the_gui_summary_shows_what_its_model_gives(qtbot, small):
    """The view adds no row of its own: every tree row is a model row, in order."""
    from analyser.gui.reports.summary import SummaryReport

    r = SummaryReport()
    qtbot.addWidget(r)
    doc = Document.open(small["fits"])
    try:
        r.set_document(doc)
        r.refresh()
        _headers, sections = gui_summary.figure_sections(doc, None, r.units)
        assert r.tree.topLevelItemCount() == len(sections)
        for k, section in enumerate(sections):
            item = r.tree.topLevelItem(k)
            assert item.text(0) == section.title and item.childCount() == len(section.rows)
            for i, row in enumerate(section.rows):
                shown = tuple(item.child(i).text(c) for c in range(len(row.cells)))
                assert shown == row.cells
    finally:
        doc.analysis.close()


def test_compare_tables_carry_the_range_of_the_change(small, capsys, monkeypatch):
    """``analyse compare`` and the reports' comparison table give, beside the change last vs
    first, the range the fidelity table allows for it (the core's change intervals)."""
    from analyser.core.comparison import METRICS, change_intervals
    from analyser.core.intervals import range_text

    monkeypatch.setenv("COLUMNS", "4000")
    paths = [small["fits"], small["fits2"]]
    assert main(["compare", *map(str, paths)]) == 0
    rows = [[c.strip() for c in ln.split("│")[1:-1]] for ln in capsys.readouterr().out.splitlines()]
    with Analysis.open(paths[0]) as a, Analysis.open(paths[1]) as b:
        ivs = change_intervals(a, b)
        report = build_report([a, b], insights=False, predict_transitions=False)
        md = render_markdown(report, [a, b], "t")
        html = render_html(report, [a, b], "t")
    assert report["comparison"]["last_vs_first"] == json.loads(json.dumps(ivs))
    for key, label, _kind in METRICS:
        rng = range_text(ivs[key]) or "-"
        row = next((r for r in rows if r and r[0] == label), None)
        if row is not None:  # a figure neither profile has is left out
            assert row[-1] == rng, label
        md_row = next(ln for ln in md.splitlines() if ln.startswith(f"| {md_literal(label)} |"))
        assert md_row.endswith(f"| {md_literal(rng)} |"), label
        assert f'<td class="n">{markupsafe.escape(rng)}</td></tr>' in html
    assert any(range_text(iv) not in ("", "no interval") for iv in ivs.values()) or all(
        iv.get("note") for iv in ivs.values()
    )
