"""The summary's sections and figures are declared once
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
    SUMMARY_TABLES,
    Column,
    Quantity,
    SummaryFigure,
    SummaryTable,
    summary_quantity,
)
from analyser.core.summary import summary_sections, summary_tables, value_text
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
    assert main(["summary", str(path), "--top", str(core_summary.IMBALANCE_TOP)]) == 0
    text = capsys.readouterr().out
    assert main(["summary", str(path), "--json", "--top", str(core_summary.IMBALANCE_TOP)]) == 0
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
        _heads, per_ipu = gui_summary.ipu_view(a, None)
        for ipu, section in enumerate(per_ipu):
            lost = next(r for r in section.rows if r.cells[0] == core_summary.LOST)
            assert lost.cells[1] == f"{round(imb.lost_cycles[ipu]):,}"
        for section in gui_summary.ipu_view(a, b)[1]:
            assert any(r.cells[0] == core_summary.LOST for r in section.rows)
        # the compute sets losing the most, as analyse summary lists them
        heads, (worst,) = gui_summary.imbalance_view(a, None)
        top = imb.compute_sets.head(core_summary.IMBALANCE_TOP)
        assert [r.cells[0] for r in worst.rows] == [str(n) for n in top["name"]]
        lost = heads.index("Lost")
        assert [r.cells[lost] for r in worst.rows] == [f"{round(v):,}" for v in top["lost_cycles"]]
        assert len(gui_summary.imbalance_view(a, b)[1]) == 2  # A's and B's
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
    from analyser.core.intervals import has_range, range_cell, range_text

    monkeypatch.setenv("COLUMNS", "4000")
    paths = [small["fits"], small["fits2"]]
    assert main(["compare", *map(str, paths)]) == 0
    text = capsys.readouterr().out
    rows = [[c.strip() for c in ln.split("│")[1:-1]] for ln in text.splitlines()]
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
            # the text table's cell: the range, or the head of the sentence said under it
            assert row[-1] == (range_cell(ivs[key]) or "-"), label
            if not has_range(rng) and rng != "-":
                assert rng in " ".join(text.split()), label
        # the reports as the text table: the cell holds the range or the sentence's head, the
        # sentence is said once under the table
        cell = range_cell(ivs[key]) or "-"
        md_row = next(ln for ln in md.splitlines() if ln.startswith(f"| {md_literal(label)} |"))
        assert md_row.endswith(f"| {md_literal(cell)} |"), label
        assert f'<td class="n">{markupsafe.escape(cell)}</td></tr>' in html
        if not has_range(rng) and rng != "-":
            assert md_literal(rng.split(": ", 1)[-1]) in md, label
            assert str(markupsafe.escape(rng.split(": ", 1)[-1])) in html, label
    assert any(range_text(iv) not in ("", "no interval") for iv in ivs.values()) or all(
        iv.get("note") for iv in ivs.values()
    )


# -- the breakdown tables (quantities.SUMMARY_TABLES) ---------------------------------------------
def _text_tables(text: str) -> dict[str, list[list[str]]]:
    """The text summary's tables by title: the header's cells, then each row's cells."""
    out: dict[str, list[list[str]]] = {}
    lines = text.splitlines()
    for k, ln in enumerate(lines[:-2]):
        if lines[k + 1].startswith("┏"):
            body = lines[k + 2 :]
            body = body[: next(i for i, x in enumerate(body) if x.startswith("└"))]
            out[ln.strip()] = [
                [c.strip() for c in x[1:-1].split("┃" if x.startswith("┃") else "│")]
                for x in body
                if x[:1] in "┃│"
            ]
    return out


def _gui_table(doc: Document, key: str, title: str):
    """Where the GUI Summary's model shows declared table ``key``: its headers and rows (the
    tables without a tree of their own: rows of the figure tree, in sections named ``title``)."""
    if key in gui_summary.OWN_TREES:
        heads, sections = gui_summary.table_view(doc, None, key, "KiB")
        return heads, [r.cells for s in sections for r in s.rows]
    _h, sections = gui_summary.figure_sections(doc, None, "KiB")
    return None, [r.cells for s in sections if s.title.startswith(title) for r in s.rows]


def _check_table(r: dict[str, object], doc: Document, table: dict) -> None:
    """Declared ``table`` (as the core evaluates it) in each rendering, same title, columns
    and cells."""
    labels = [c["label"] for c in table["columns"]]
    text = _text_tables(r["text"])
    assert table["title"] in text, (table["title"], "text")
    header, *rows = text[table["title"]]
    assert header == labels, (table["title"], "text")
    g = next((i for i, c in enumerate(table["columns"]) if c["key"] == table["group"]), None)
    want = [row["cells"] for row in table["rows"]]
    if g is None:
        assert [x for x in rows if any(x)][: len(want)] == want, (table["title"], "text")
    else:  # the group's value said once per group
        got = [[c for i, c in enumerate(x) if i != g] for x in rows if any(x)]
        assert got == [[c for i, c in enumerate(w) if i != g] for w in want], table["title"]
    md_head = "| " + " | ".join(md_literal(x) for x in labels) + " |"
    assert f"**{md_literal(table['title'])}**\n\n{md_head}" in r["md"], (table["title"], "Markdown")
    for cells in want:
        assert "| " + " | ".join(md_literal(c) for c in cells) + " |" in r["md"]
    heads = "".join(f"<th>{markupsafe.escape(x)}</th>" for x in labels)
    html = r["html"][r["html"].index(f'id="p0-{table["key"]}"') :]
    assert html.index(f"<tr>{heads}</tr>") < html.index("</table>"), (table["title"], "HTML")
    assert markupsafe.escape(table["title"]) in r["html"]
    for cells in want:
        tds = "".join(
            ('<td class="n">' if c["kind"] else "<td>") + f"{markupsafe.escape(x)}</td>"
            for c, x in zip(table["columns"], cells)
        )
        assert f"<tr>{tds}</tr>" in html, (table["title"], "HTML", cells)
    js = next(t for t in r["json"]["tables"] if t["key"] == table["key"])
    assert js == json.loads(json.dumps(table)), (table["title"], "JSON")
    heads, gui_rows = _gui_table(doc, table["key"], table["title"])
    if heads is not None:
        assert heads == tuple(x[:1].upper() + x[1:] for i, x in enumerate(labels) if i != g)
        assert gui_rows == [tuple(c for i, c in enumerate(w) if i != g) for w in want]
    else:  # in the figure tree: the name, its figures in Value and its words in Note
        assert [c[0] for c in gui_rows] == [w[0] for w in want], table["title"]
        for c, w in zip(gui_rows, want):
            shown = c[1].split(" · ") + c[3].split(" · ")
            assert all(x in shown for x in w[1:] if x), (table["title"], w)


def _tables_everywhere(path, capsys, monkeypatch) -> list[str]:
    """Every declared table of ``path`` in every rendering; the tables' keys."""
    r = _renderings(path, capsys, monkeypatch)
    with Analysis.open(path) as a:
        declared = summary_tables(a)
    doc = Document.open(path)
    try:
        assert [t["key"] for t in declared] == [t["key"] for t in r["json"]["tables"]]
        for table in declared:
            _check_table(r, doc, table)
    finally:
        doc.analysis.close()
    return [t["key"] for t in declared]


def test_every_declared_table_appears_in_every_rendering(small, capsys, monkeypatch):
    """Each declared breakdown table: the same title, columns and cells in the text, Markdown,
    HTML, JSON and the GUI Summary's model; an OOM profile only has those that need no
    execution."""
    keys = _tables_everywhere(small["fits"], capsys, monkeypatch)
    assert keys == [t.key for t in SUMMARY_TABLES]
    oom = _tables_everywhere(small["oom"], capsys, monkeypatch)
    assert oom == [t.key for t in SUMMARY_TABLES if not t.execution] and oom


def test_a_table_and_a_column_added_to_the_declaration_reach_every_rendering(
    small, capsys, monkeypatch
):
    """The recipe: a SummaryTable (with its rows' producer) or a Column (with its value in the
    producer's rows) in the declaration, nothing else."""
    key = "test_added_table"
    added = SummaryTable(
        key,
        "Table added by the test",
        (Column("name", "thing"), Column("bytes", "size", "bytes"), Column("n", "count", "int")),
        execution=True,
        note="A note said under it.",
    )
    monkeypatch.setitem(
        core_summary.TABLE_ROWS,
        key,
        lambda a, top: [{"name": "alpha", "bytes": 2048, "n": 4242}, {"name": "beta", "n": 7}],
    )
    cycles = core_summary.TABLE_ROWS["cycles_by_step_type"]
    monkeypatch.setitem(
        core_summary.TABLE_ROWS,
        "cycles_by_step_type",
        lambda a, top: [{**row, "added": 1234567} for row in cycles(a, top)],
    )
    tables = [
        dataclasses.replace(t, columns=(*t.columns, Column("added", "column added", "int")))
        if t.key == "cycles_by_step_type"
        else t
        for t in SUMMARY_TABLES
    ]
    monkeypatch.setattr(quantities, "SUMMARY_TABLES", [*tables, added])
    keys = _tables_everywhere(small["fits"], capsys, monkeypatch)
    assert keys[-1] == key
    r = _renderings(small["fits"], capsys, monkeypatch)
    assert "Table added by the test" in r["text"] and "A note said under it." in r["text"]
    assert "| alpha | 2.00 KiB | 4,242 |" in r["md"] and "| beta |  | 7 |" in r["md"]
    assert "column added" in r["html"] and "1,234,567" in r["html"]
    doc = Document.open(small["fits"])
    try:
        heads, _ = gui_summary.ipu_view(doc, None)
        assert heads[-1] == "Column added"
        _h, sections = gui_summary.figure_sections(doc, None, "KiB")
        mine = next(s for s in sections if s.title == "Table added by the test")
        assert [r.cells for r in mine.rows] == [
            ("alpha", "2.00 KiB · 4,242", "", ""),
            ("beta", "7", "", ""),
        ]
    finally:
        doc.analysis.close()


def test_declared_tables_keep_the_figures(small):
    """The tables' figures are the analysis's: per IPU the step types' cycles add up to the
    busy cycles, the lost cycles are the imbalance's, StreamCopy bytes add up to the totals."""
    import numpy as np

    with Analysis.open(small["fits"]) as a:
        t = {x["key"]: x for x in summary_tables(a, "bytes")}
        ex, imb = a.execution, a.imbalance
        cols = [c["key"] for c in t["cycles_by_step_type"]["columns"]]
        rows = [dict(zip(cols, r["values"])) for r in t["cycles_by_step_type"]["rows"]]
        for ipu in range(ex.num_ipus):
            mine = [r for r in rows if r["ipu"] == ipu]
            types = [r for r in mine if r["name"] not in (core_summary.TOTAL, core_summary.LOST)]
            total = next(r for r in mine if r["name"] == core_summary.TOTAL)
            lost = next(r for r in mine if r["name"] == core_summary.LOST)
            assert (
                sum(r["cycles"] for r in types) == total["cycles"] == ex.cycles_by_type[ipu].sum()
            )
            assert lost["cycles"] == imb.lost_cycles[ipu]
        cols = [c["key"] for c in t["streamcopy"]["columns"]]
        rows = [dict(zip(cols, r["values"])) for r in t["streamcopy"]["rows"]]
        sc = [r for r in rows if r["link"].startswith("StreamCopy")]
        assert sum(r["received"] for r in sc) == int(np.sum(ex.streamcopy_rx_bytes))
        assert sum(r["sent"] for r in sc) == int(np.sum(ex.streamcopy_tx_bytes))


def test_summary_json_follows_units(small, capsys):
    """``analyse summary --json --units X``: the summary's and the tables' texts in X, said in
    ``units``; raw values stay in bytes."""
    assert main(["summary", str(small["fits"]), "--json", "--units", "bytes"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["units"] == "bytes"
    mem = next(s for s in js["summary"] if s["title"] == "Memory")
    peak = next(x for x in mem["figures"] if x["key"] == "peak_memory_bytes")
    assert peak["text"] == f"{peak['value']:,} B"
    sc = next(t for t in js["tables"] if t["key"] == "streamcopy")
    assert all(r["cells"][2] == f"{r['values'][2]:,} B" for r in sc["rows"])
