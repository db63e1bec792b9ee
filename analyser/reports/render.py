"""Renderers of the report data: HTML (Jinja2 template in assets/templates), Markdown, JSON."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

from analyser.core.comparison import METRICS, fmt_share_delta, fmt_value
from analyser.core.insights.model import SHOWN_EFFECTS
from analyser.core.intervals import (
    change_note,
    outside_reasons,
    prediction_note,
    range_cell,
    range_text,
)
from analyser.core.quantities import QUANTITIES
from analyser.core.summary import value_text
from analyser.core.units import fmt_bytes, fmt_delta_pct, fmt_int, fmt_pct
from analyser.literal import markdown as lit
from analyser.literal import one_line, terminal

#: (key, label, kind) of the predicted-effect rows (analyser.core.quantities).
EFFECT_ROWS = tuple((k, QUANTITIES[k].label, QUANTITIES[k].kind) for k in SHOWN_EFFECTS)


def _template() -> str:
    return resources.files("assets").joinpath("templates/report.html.j2").read_text("utf-8")


def render_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, allow_nan=False) + "\n"


def render_html(data: dict[str, Any], analyses: list, title: str) -> str:
    import jinja2
    import markupsafe

    from analyser.reports import interactive

    def literal(value: Any) -> Any:
        """Every value shown: control characters as visible escapes (autoescape does the rest)."""
        if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
            return terminal(value)
        return value

    env = jinja2.Environment(
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=literal,
    )
    tpl = env.from_string(_template())
    with interactive.in_template():  # every chart's figure in the charts' template at once
        charts = [interactive.profile_charts(a) for a in analyses]
        compared = interactive.comparison_charts(analyses, data) if len(analyses) > 1 else {}
    return tpl.render(
        r=data,
        title=title,
        fmt=fmt_value,
        delta=fmt_delta_pct,
        compare_metrics=METRICS,
        effect_rows=EFFECT_ROWS,
        range_text=range_text,
        shape_text=_shape_text,
        change_of=_change,
        change_note=change_note,
        prediction_note=prediction_note,
        value_text=value_text,
        last_vs_first=last_vs_first,
        last_vs_first_reasons=last_vs_first_reasons(data),
        fmt_int=lambda v: fmt_value(v, "int"),
        fmt_float=lambda v: fmt_value(v, "float"),
        charts=charts,
        comparison_charts=compared,
        plotly_js=markupsafe.Markup(interactive.script()),
    )


def summary_tables(p: dict[str, Any]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Profile ``p``'s summary as ``(section, [(label, value, range), ...])``: the sections and
    figures declared once in the catalogue (analyser.core.quantities.SUMMARY_SECTIONS, the
    profile's ``summary``), for the Markdown and the HTML report alike."""
    return [
        (s["title"], [(r["label"], value_text(r), r["range"]) for r in s["figures"]])
        for s in p.get("summary") or []
    ]


def last_vs_first(data: dict[str, Any], key: str, kind: str) -> tuple[str, str]:
    """The change of compared figure ``key`` from the first profile to the last, and the range
    the fidelity table allows for it (as ``analyse compare`` shows them)."""
    profs = data["profiles"]
    a, b = profs[0]["metrics"].get(key), profs[-1]["metrics"].get(key)
    change = fmt_share_delta(a, b) if kind == "share" else fmt_delta_pct(a, b)
    iv = ((data.get("comparison") or {}).get("last_vs_first") or {}).get(key)
    # the cell holds the range or only its head ("outside the validated range"): the reasons
    # are listed once under the table (:func:`last_vs_first_reasons`)
    return change, range_cell(iv) or "-"


def last_vs_first_reasons(data: dict[str, Any]) -> list[str]:
    """Why a compared figure's change has no range, one line per figure (under the table)."""
    ivs = (data.get("comparison") or {}).get("last_vs_first") or {}
    return outside_reasons((label, ivs.get(key)) for key, label, _ in METRICS)


def _change(eff: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The interval of an effect's change of ``key`` (None for effects without intervals)."""
    return ((eff.get("intervals") or {}).get(key) or {}).get("change")


class Md(str):
    """Markdown written by this module (trusted); any other text is escaped by :func:`_cell`."""


class _Images:
    """The charts of a Markdown report, each written as its own SVG file in ``folder`` (a path
    relative to the .md) and linked by that relative path: GitHub and most Markdown viewers do
    not show an image inlined as a data URI."""

    def __init__(self, folder: str, files: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.files = {} if files is None else files  # file name -> SVG text

    def link(self, name: str, svg: str, alt: str) -> str:
        """``svg`` as the file ``name``.svg in the folder, and the Markdown image linking it."""
        from urllib.parse import quote

        file = f"{name}.svg"
        self.files[file] = svg
        return f"![{lit(alt)}]({quote(f'{self.folder}/{file}')})"


def _code(text: object) -> str:
    """``text`` as a Markdown code span (literal; a fence longer than any backtick run in it)."""
    s = one_line(text).replace("|", "\\|")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _cell(value: Any) -> str:
    return str(value) if isinstance(value, Md) else lit(value)


def _md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(_cell(c) for c in r) + " |")
    return [*out, ""]


def render_markdown(
    data: dict[str, Any],
    analyses: list,
    title: str,
    images: dict[str, str] | None = None,
    folder: str = "report_files",
) -> str:
    """The report as Markdown: the step-by-step story and the comparison (several profiles),
    then each profile's section. Its charts are images linked by a relative path in ``folder``;
    their SVG texts are put in ``images`` (file name -> text) for the caller to write there."""
    img = _Images(folder, images)
    L: list[str] = [
        f"# {lit(title)}",
        "",
        f"Generated {data['generated']} by IPU Graph Analyser "
        f"{data['tool_version']} (report schema {data['schema']} "
        f"{data['schema_version']}).",
        "",
    ]
    profs = data["profiles"]
    if data.get("transitions"):
        L += _md_transitions(data["transitions"])
    if data.get("comparison"):
        L += _md_comparison(data, analyses, img)
    for i, (p, a) in enumerate(zip(profs, analyses), 1):
        L += _md_profile_head(p)
        L += _md_insights(p)
        L += _md_profile_charts(p, a, img, f"p{i}")
    return "\n".join(L) + "\n"


def _md_transitions(transitions: list[dict[str, Any]]) -> list[str]:
    """The Markdown of the step-by-step section: a table, then each step's story."""
    L: list[str] = []
    L += ["## Step by step: change, insight, predicted and measured effect", ""]
    rows = []
    for tr in transitions:
        shown = [c for c in tr["changes"] if c["key"] not in tr["uncovered"]] or tr["changes"]
        rows.append(
            [
                f"{tr['a']} → {tr['b']}",
                Md(
                    "; ".join(
                        f"{_code(c['key'])} {lit(json.dumps(c['before']))} → "
                        f"{lit(json.dumps(c['after']))}"
                        for c in shown
                    )
                ),
                "; ".join(
                    f"#{t['position']} {t['title']}"
                    if t["fired"]
                    else f"none ({t['title'].lower()} stays below its threshold)"
                    for t in tr["insights"]
                )
                or "no insight addresses it",
                "; ".join(
                    t["predicted"]["message"] if t["predicted"] else "not re-simulated"
                    for t in tr["insights"]
                ),
                tr["text"][-1].removeprefix("Measured: "),
            ]
        )
    L += _md_table(["step", "change", "recommended by", "predicted", "measured"], rows)
    for tr in transitions:
        L += [f"**{lit(tr['a'])} → {lit(tr['b'])}**", ""]
        L += [f"- {lit(line)}" for line in tr["text"]]
        L.append("")
    return L


def _md_comparison(data: dict[str, Any], analyses: list, img: _Images) -> list[str]:
    """The Markdown of the comparison section: the metrics, charts and each pair."""
    from analyser.reports import charts

    profs = data["profiles"]
    L: list[str] = []
    L += ["## Comparison", ""]
    L += _md_table(
        ["metric", *[p["name"] for p in profs], "last vs first", "range of the change"],
        [
            [
                label,
                *[fmt_value(p["metrics"][k], kind) for p in profs],
                *last_vs_first(data, k, kind),
            ]
            for k, label, kind in METRICS
        ],
    )
    L += [*(f"- {lit(line)}" for line in last_vs_first_reasons(data)), ""]
    cc = charts.comparison_charts(analyses)
    L += [
        img.link("comparison-metrics", cc["metrics"], "key metrics per profile"),
        "",
        img.link("comparison-step-types", cc["step_types"], "cycles by step type per profile"),
        "",
    ]
    for pair in data["comparison"]["pairs"]:
        L += [f"### {lit(pair['a'])} → {lit(pair['b'])}", ""]
        diffs = (
            "; ".join(
                f"{_code(d['key'])} {lit(json.dumps(d['before']))} → {lit(json.dumps(d['after']))}"
                for d in pair["config_diffs"]
            )
            or "identical"
        )
        L += [f"**Run options:** {diffs}", ""]
        L += [f"- {lit(e['text'])}" for e in pair["explanations"]]
        if pair["other_deltas"]:
            L += ["", "Largest other differences:", ""]
            L += [f"- {lit(t)}" for t in pair["other_deltas"]]
        L.append("")
    return L


def _md_profile_head(p: dict[str, Any]) -> list[str]:
    """The Markdown of a profile's heading: fits or not, target, key figures."""
    L: list[str] = []
    m = p["metrics"]
    L += [f"## {lit(p['name'])} — {lit(p['model'])}", ""]
    if p["fits"]:
        L += [
            f"**Fits:** {fmt_pct(m['memory_share_used'])} of the memory used; fullest tile "
            f"{fmt_bytes(m['max_tile_memory_bytes'])} of "
            f"{fmt_bytes(p['memory']['sram_per_tile'])}.",
            "",
        ]
    else:
        L += [
            f"**Out of memory:** {m['oom_tiles']:,} tiles; the fullest needs "
            f"{fmt_bytes(m['max_tile_memory_bytes'])} of "
            f"{fmt_bytes(p['memory']['sram_per_tile'])}. No execution.",
            "",
        ]
    t = p["target"]
    # an ONNX model's operators costed as element-wise (--unknown-ops elementwise): a caveat
    L += [f"**Caveat:** {lit(n)}" for n in t["notes"] if n.startswith("unknown_ops")]
    L += [""] if any(n.startswith("unknown_ops") for n in t["notes"]) else []
    pred = p.get("prediction") or {}
    for section, rows in summary_tables(p):
        n = 3 if any(rng for _label, _value, rng in rows) else 2
        L += _md_table(
            [section, "value", "range (fidelity table)"][:n],
            [[label, value, rng or "-"][:n] for label, value, rng in rows],
        )
    if pred:
        L += ["", f"_{lit(prediction_note(pred))}_"]
    return L


def _md_insights(p: dict[str, Any]) -> list[str]:
    """The Markdown of a profile's insights, with their predicted effects."""
    L: list[str] = []
    L += ["### Insights", ""]
    if not p["insights"]:
        L += ["No insight crosses its threshold.", ""]
    low_shown = False
    for n, tip in enumerate(p["insights"], 1):
        if p["fits"] and tip["category"] == "memory" and not low_shown:
            low_shown = True
            L += [
                "_Low headroom: the memory tips below free memory, usually at some cost in "
                "throughput; the program fits, so apply one only if you need the headroom._",
                "",
            ]
        L += [
            f"**{n}. {lit(tip['title'])}** ({lit(tip['severity'])}, {_code(tip['id'])})",
            "",
            lit(tip["summary"]),
            "",
        ]
        L += [
            f"- {lit(e['text'])}" + (f" _\\[{lit(e['where'])}\\]_" if e["where"] else "")
            for e in tip["evidence"]
        ]
        if tip["change"]:
            L += [
                "- change: "
                + ", ".join(_code(f"{k} = {json.dumps(v)}") for k, v in tip["change"].items())
            ]
        if tip["trade_off"]:
            L += [f"- trade-off: {lit(tip['trade_off'])}"]
        eff = tip["effect"]
        if eff:
            if eff["after"]:
                L += [
                    "",
                    *_md_table(
                        ["predicted effect", "now", "after", "change", "range"],
                        [
                            [
                                label,
                                fmt_value(eff["before"].get(k), kind),
                                fmt_value(eff["after"].get(k), kind),
                                fmt_delta_pct(eff["before"].get(k), eff["after"].get(k)),
                                range_text(_change(eff, k)) or "-",
                            ]
                            for k, label, kind in EFFECT_ROWS
                        ],
                    ),
                ]
                note = change_note(_change(eff, "throughput_samples_per_s"))
                L += [f"- range of the throughput change: {lit(note)}"] if note else []
            L += [f"- predicted: {lit(eff['message'])}"]
        elif tip["change"]:
            L += ["- predicted effect not computed (write the report with `--resimulate`)"]
        L.append("")
    return L


def _md_profile_charts(p: dict[str, Any], a: Any, img: _Images, key: str) -> list[str]:
    """The Markdown of a profile's memory, liveness and execution sections."""
    from analyser.reports import charts

    L: list[str] = []
    t = p["target"]
    ch = charts.profile_charts(a)
    L += [
        "### Memory",
        "",
        img.link(f"{key}-memory-per-tile", ch["memory_per_tile"], "memory per tile by category"),
        "",
    ]
    L += _md_table(
        ["category", *[f"IPU {i}" for i in range(t["num_ipus"])]],
        [
            [c, *[fmt_bytes(per[c]) for per in p["memory"]["by_category_per_ipu"]]]
            for c, v in sorted(p["memory"]["by_category"].items(), key=lambda kv: -kv[1])
            if v
        ],
    )
    L += _md_table(
        ["tile", "bytes", "of SRAM"],
        [
            [f"{x['ipu']}:{x['tile']}", fmt_bytes(x["bytes"]), fmt_pct(x["share"])]
            for x in p["memory"]["top_tiles"]
        ],
    )
    L += _md_table(
        ["largest variables", "kind", "dtype", "shape", "IPU", "bytes"],
        [
            [v["name"], v["kind"], v["dtype"], _shape_text(v), v["ipu"], fmt_bytes(v["bytes"])]
            for v in p["memory"]["largest_variables"]
        ],
    )
    if "liveness" in ch:
        L += ["### Liveness", "", img.link(f"{key}-liveness", ch["liveness"], "liveness"), ""]
        lv = p["liveness"]
        L += _md_table(
            ["IPU", "peak step", "peak bytes"],
            [
                [
                    i,
                    f"{lv['peak_step'][i]} {lv['peak_step_name'][i]}",
                    fmt_bytes(lv["peak_bytes"][i]),
                ]
                for i in range(t["num_ipus"])
            ],
        )
    if p["execution"]:
        L += [
            "### Execution",
            "",
            img.link(f"{key}-cycles-by-type", ch["cycles_by_type"], "cycles by step type"),
            "",
            img.link(f"{key}-pipeline-phases", ch["pipeline_phases"], "pipeline phases"),
            "",
        ]
        L += _md_tables(p)
        L += _md_table(
            ["operation", "type", "pass", "IPU", "total cycles", "share"],
            [
                [
                    o["name"],
                    o["type"],
                    o["pass"],
                    o["ipu"],
                    fmt_int(o["total_cycles"]),
                    fmt_pct(o["cycles_share"]),
                ]
                for o in p["operations_top"]
            ],
        )
    return L + _md_tables(p, collapsed=True)


def _md_tables(p: dict[str, Any], collapsed: bool = False) -> list[str]:
    """The Markdown of a profile's breakdown tables (``tables``: declared once in
    analyser.core.quantities.SUMMARY_TABLES; those the HTML folds, or the others): title,
    columns, rows and note of each."""
    L: list[str] = []
    for table in p.get("tables") or []:
        if table["collapsed"] != collapsed:
            continue
        L += [f"**{lit(table['title'])}**", ""]
        L += _md_table([c["label"] for c in table["columns"]], [r["cells"] for r in table["rows"]])
        L += [f"_{lit(table['note'])}_", ""] if table["note"] else []
    return L


def _shape_text(v: dict) -> str:
    """A variable's shape, or when the profile records none (a pool of temporaries, say) its
    element count from its bytes and dtype, so the column is never blank."""
    shape = str(v.get("shape") or "").strip()
    if shape:
        return shape
    import numpy as np

    try:
        size = np.dtype({"half": "float16"}.get(str(v.get("dtype")), str(v.get("dtype")))).itemsize
    except TypeError:
        size = 0
    if size and v.get("bytes"):
        return f"{int(v['bytes']) // size:,} elements (no shape recorded)"
    return "not recorded"
