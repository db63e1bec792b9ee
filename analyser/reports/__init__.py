"""Headless reports of one or several profiles: HTML (one self-contained file that opens
offline, its charts interactive: :mod:`analyser.reports.interactive`), Markdown (same content, its charts SVG files in a folder beside it, ``NAME_files/``,
linked by relative paths) and JSON (docs/report-schema.md).

    from analyser.reports import write_report
    write_report(["1-base.h5", "2-half.h5"], "report.html", fmt="html")
"""

from __future__ import annotations

import os
import re
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
    force: bool = False,
) -> Path:
    """Write a report of ``paths`` (several profiles: with a comparison) to ``out`` atomically.

    This is the function ``analyse demo`` calls for the comparative walkthrough report. With
    several profiles it tells the story step by step (``predict_transitions``: re-simulate the
    insight behind each step's change, a few simulations, to show its predicted effect).
    Re-simulations run on ``simulator`` (:mod:`analyser.sim`'s, chosen by the caller); without
    one nothing is re-simulated. ``stage(text)`` is told each stage as it starts (the CLI's
    progress).

    A Markdown report's charts are written first, into :func:`images_folder` beside ``out``
    (created when missing); an image file there that analyse did not write is refused unless
    ``force``, and images of an earlier report of that name that this one no longer has are
    removed (only those analyse wrote).
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
            images: dict[str, str] = {}
            folder = images_folder(out)
            text = render_markdown(data, analyses, title, images, folder.name)
            write_images(folder, images, force=force)
        else:
            text = render_html(data, analyses, title)
        with atomic_output(out) as fh:
            fh.write(text)
    finally:
        for a in analyses:
            a.close()
    return out


def images_folder(out: str | os.PathLike[str]) -> Path:
    """The folder of a Markdown report's images: ``NAME_files`` beside ``NAME.md``."""
    out = Path(out)
    return out.with_name(f"{out.stem}_files")


#: Names of the image files of a Markdown report (analyser.reports.render): a stale one of these
#: that analyse wrote is removed when the report is written again.
_IMAGE_NAME = re.compile(r"(comparison|p[0-9]+)-[a-z0-9-]+\.svg")


def write_images(folder: Path, images: dict[str, str], *, force: bool = False) -> None:
    """Write ``images`` (file name -> SVG text) into ``folder``, each atomically and marked as
    ours; remove the images of an earlier report there that are no longer part of it."""
    import contextlib

    import analyser
    from analyser.output import (
        OutputError,
        atomic_output,
        is_hdf5,
        is_our_output,
        refuse_foreign,
        refuse_special,
    )

    if folder.exists() and not folder.is_dir():
        raise OutputError(f"cannot write the report's images: {folder} exists and is not a folder.")
    paths = [folder / name for name in images]
    for path in paths:  # every refusal before the first write
        refuse_special(path)
        if is_hdf5(path):
            raise OutputError(f"output {path} is an existing HDF5 file; refusing to overwrite it.")
        refuse_foreign(path, force)
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {folder}: {exc.strerror or exc}.") from None
    version = getattr(analyser, "__version__", "0.1.0")
    for path in paths:
        with atomic_output(path) as fh:
            fh.write('<?xml version="1.0" encoding="utf-8" standalone="no"?>\n')
            fh.write(f"<!-- Chart of an IPU Graph Analyser report ({version}) -->\n")
            fh.write(images[path.name])
            fh.write("\n")
    for old in folder.iterdir():
        if old.name not in images and _IMAGE_NAME.fullmatch(old.name) and is_our_output(old):
            with contextlib.suppress(OSError):
                old.unlink()


__all__ = [
    "FORMATS",
    "REPORT_SCHEMA",
    "REPORT_SCHEMA_VERSION",
    "ReportError",
    "build_report",
    "write_report",
]
