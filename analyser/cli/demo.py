"""``analyse demo``: run the reference walkthrough end to end with the embedded engine.

Runs the six run configurations of ``assets/runs/walkthrough`` (ResNet-101 on 64 x 64 CIFAR-10
images, two Mk2 IPUs pipelined at ``layer3.8``; see docs/engine.md, "The walkthrough"), writes one
profile per step into the output folder (``1-base.h5`` ... ``6-async.h5``, named so they sort in
step order), prints a table of the steps and, when the report writer is installed
(``analyser.reports.write_report``), writes the comparative report ``report.html`` next to them.

Only those seven names are ever written in the output folder; any other file there is left alone.
An existing file under one of those names is only replaced when it is one of ours (an IPU profile,
or a report written by ``analyse``) or with ``--force``; otherwise nothing is written.
"""

from __future__ import annotations

import argparse
import importlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from analyser.cli.errors import CliError

if TYPE_CHECKING:
    from rich.console import JustifyMethod

#: The report the demo writes next to the profiles (when the report writer exists).
REPORT_NAME = "report.html"


@dataclass
class StepResult:
    """One walkthrough step as the demo wrote it: its profile and headline figures."""

    name: str
    title: str
    path: Path
    fits: bool
    peak_tile_bytes: int
    peak_memory_bytes: int
    total_cycles: int | None
    cycles_per_sample: float | None
    throughput: float | None
    rx_by_ipu: list[int]
    seconds: float


def walkthrough_configs() -> list[Path]:
    """The six walkthrough run configurations, in step order."""
    import assets.runs.walkthrough as pkg

    folder = Path(pkg.__file__).parent
    paths = sorted(folder.glob("[0-9]-*.toml"))
    if len(paths) != 6:
        raise CliError(
            f"the walkthrough needs six run configurations in {folder}; found {len(paths)} "
            "(reinstall the package)."
        )
    return paths


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse demo`` to ``parser``."""
    parser.add_argument(
        "-o",
        "--output",
        default="demo",
        metavar="DIR",
        help="folder for the six profiles and the report (created if missing; default demo/). "
        "Only 1-base.h5 ... 6-async.h5 and report.html are written there.",
    )
    parser.add_argument(
        "--no-report", action="store_true", help="do not write the comparative report"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace files named like the demo's outputs even when they are not IPU profiles "
        "or reports written by analyse",
    )


def _prepare_folder(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        raise CliError(f"output {out} exists and is not a folder; give a folder name.")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot create output folder {out}: {exc.strerror or exc}.") from None
    return out


def _check_own_names(out: Path, names: list[str], report: bool, force: bool) -> None:
    """Refuse (before anything is written) when a file the demo would write exists and is not
    one of ours: an IPU profile for the ``.h5`` names, a report written by analyse for
    ``report.html``."""
    from analyser.cli.profile import _is_profile
    from analyser.output import is_our_output, refuse_special

    for p in [out / f"{name}.h5" for name in names] + ([out / REPORT_NAME] if report else []):
        refuse_special(p)  # a device or pipe under a demo name: refused even with --force
    if force:
        return
    for name in names:
        path = out / f"{name}.h5"
        if path.exists() and not _is_profile(path):
            raise CliError(
                f"{path} exists and is not an IPU profile; refusing to overwrite it "
                "(use --force, or another -o folder)."
            )
    path = out / REPORT_NAME
    if report and path.exists() and not is_our_output(path):
        raise CliError(
            f"{path} exists and is not a report written by analyse; refusing to overwrite it "
            "(use --force, or another -o folder)."
        )


def _step_result(cfg_path: Path, config, h5: Path, seconds: float) -> StepResult:
    """Read back the figures of one written profile (the analyser's own numbers)."""
    import numpy as np

    from analyser.core import Analysis
    from profiles.schema import code

    with Analysis.open(h5) as a:
        m = a.metrics
        ex = a.execution
        if ex is not None:
            host = code("destination", "host")
            rx = [int(x) for x in np.asarray(ex.streamcopy_rx_by_dest)[:, host]]
        else:
            rx = []
        return StepResult(
            name=cfg_path.stem,
            title=config.name or cfg_path.stem,
            path=h5,
            fits=bool(m.fits),
            peak_tile_bytes=int(m.max_tile_memory_bytes),
            peak_memory_bytes=int(m.peak_memory_bytes),
            total_cycles=m.total_cycles,
            cycles_per_sample=m.cycles_per_sample,
            throughput=m.throughput_samples_per_s,
            rx_by_ipu=rx,
            seconds=seconds,
        )


def run_walkthrough(out: Path, progress=None) -> list[StepResult]:
    """Simulate the six steps into ``out``; returns their key figures (no printing)."""
    import engine
    from engine.config import RunConfig

    results = []
    for cfg_path in walkthrough_configs():
        config = RunConfig.from_toml(cfg_path)
        h5 = out / f"{cfg_path.stem}.h5"
        t0 = time.perf_counter()
        engine.simulate_to_file(config, h5, overwrite=True)
        results.append(_step_result(cfg_path, config, h5, time.perf_counter() - t0))
        if progress is not None:
            progress()
    return results


def _report_writer():
    """The analyser's comparative report function, when that module is installed."""
    try:
        mod = importlib.import_module("analyser.reports")
    except ImportError:
        return None
    return getattr(mod, "write_report", None)


def _table(results: list[StepResult]):
    from rich.table import Table

    from analyser.core.units import fmt_bytes

    t = Table(title="IPU walkthrough: ResNet-101 64x64, 2 x Mk2 IPUs pipelined at layer3.8")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("step", "left"),
        ("fits", "center"),
        ("peak tile", "right"),
        ("peak memory", "right"),
        ("total cycles", "right"),
        ("cycles/sample", "right"),
        ("StreamCopy rx from host (IPU 0 / IPU 1)", "right"),
        ("samples/s", "right"),
    )
    for col, just in columns:
        t.add_column(col, justify=just, no_wrap=True)
    for r in results:
        t.add_row(
            r.name,
            "[green]fits[/]" if r.fits else "[red]OOM[/]",
            fmt_bytes(r.peak_tile_bytes),
            fmt_bytes(r.peak_memory_bytes),
            "-" if r.total_cycles is None else f"{r.total_cycles:,}",
            "-" if r.cycles_per_sample is None else f"{r.cycles_per_sample:,.0f}",
            " / ".join(fmt_bytes(b) for b in r.rx_by_ipu) if r.rx_by_ipu else "-",
            "-" if r.throughput is None else f"{r.throughput:,.1f}",
        )
    return t


def run(args: argparse.Namespace) -> int:
    """Run ``analyse demo`` with the parsed ``args``; returns the exit code."""
    from analyser.cli._common import console, progress_bar

    out = Path(args.output)
    writer = None if args.no_report else _report_writer()
    if out.is_dir():
        names = [p.stem for p in walkthrough_configs()]
        _check_own_names(out, names, writer is not None, args.force)
    out = _prepare_folder(out)
    total = 6 + (1 if writer else 0)
    t0 = time.perf_counter()
    with progress_bar() as bar:
        task = bar.add_task("simulating the walkthrough", total=total)
        results = run_walkthrough(out, progress=lambda: bar.advance(task))
        report = None
        if writer is not None:
            bar.update(task, description="writing the comparative report")
            report = out / REPORT_NAME
            from analyser.sim.simulators import InProcessSimulator

            # five transitions, one re-simulation each: in this process, no cluster
            writer([str(r.path) for r in results], report, "html", simulator=InProcessSimulator())
            bar.advance(task)
    con = console()  # a log file gets the whole table, unwrapped (analyser.cli._common)
    con.print(_table(results))
    for r in results:
        con.print(f"  {r.path}")
    if report is not None:
        con.print(f"  {report}  (comparative report)")
    elif not args.no_report:
        con.print("  (no report: the report writer analyser.reports is not installed)")
    con.print(f"done in {time.perf_counter() - t0:.1f} s")
    return 0
