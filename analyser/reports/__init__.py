"""Headless reports of one or several profiles: HTML (one self-contained file, charts inline as
SVG), Markdown (same content, charts as data-URI images) and JSON (docs/report-schema.md).

    from analyser.reports import write_report
    write_report(["1-base.h5", "2-half.h5"], "report.html", fmt="html")
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analyser.reports.data import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, build_report
from analyser.reports.render import render_html, render_json, render_markdown
from profiles.errors import UserFacingError

FORMATS = ("html", "md", "json")


class ReportError(UserFacingError):
    """The report cannot be written (bad format, no profiles)."""


def write_report(
    paths: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    fmt: str = "html",
    *,
    insights: bool = True,
    resimulate: bool = False,
    thresholds: Any = None,
    title: str | None = None,
    progress: Any = None,
    predict_transitions: bool = True,
    simulator: Any = None,
    stage: Any = None,
) -> Path:
    """Write a report of ``paths`` (several profiles: with a comparison) to ``out`` atomically.

    This is the function ``analyse demo`` calls for the comparative walkthrough report. With
    several profiles it tells the story step by step (``predict_transitions``: re-simulate the
    insight behind each step's change, a few simulations, to show its predicted effect).
    Re-simulations run on ``simulator`` (:mod:`analyser.sim`'s, chosen by the caller); without
    one nothing is re-simulated. ``stage(text)`` is told each stage as it starts (the CLI's
    progress).
    """
    from analyser.core import Analysis
    from analyser.output import atomic_output

    if fmt not in FORMATS:
        raise ReportError(f"unknown report format {fmt!r}; choose html, md or json.")
    if not paths:
        raise ReportError("a report needs at least one profile.")
    out = Path(out)
    say = stage or (lambda text: None)
    analyses = []
    try:
        say(f"reading {len(paths)} profile{'s' if len(paths) > 1 else ''}")
        for p in paths:
            analyses.append(Analysis.open(p))
        data = build_report(
            analyses,
            insights=insights,
            resimulate=resimulate,
            thresholds=thresholds,
            progress=progress,
            predict_transitions=predict_transitions,
            simulator=simulator,
            stage=stage,
        )
        say(f"writing {fmt}")
        title = title or (
            f"IPU profile report: {analyses[0].name}"
            if len(analyses) == 1
            else f"IPU profile comparison: {len(analyses)} profiles"
        )
        if fmt == "json":
            text = render_json(data)
        elif fmt == "md":
            text = render_markdown(data, analyses, title)
        else:
            text = render_html(data, analyses, title)
        with atomic_output(out) as fh:
            fh.write(text)
    finally:
        for a in analyses:
            a.close()
    return out


__all__ = [
    "FORMATS",
    "REPORT_SCHEMA",
    "REPORT_SCHEMA_VERSION",
    "ReportError",
    "build_report",
    "write_report",
]
