"""``analyse tune CONFIG [--vary NAME=VALUES ...] [--objective ...] [--constraint ...]
[--budget N] [-o DIR]``: search the run-option space for the best configuration that fits.

Simulations run on the simulation service (an embedded Dask cluster, or ``--scheduler`` /
``ANALYSE_SCHEDULER``) and are cached, so an interrupted tune resumes where it stopped. The
output folder (default ``tune-results``) receives ``results.parquet``, ``tune.json``,
``start.h5``, ``best-1.h5`` ... and ``report.html`` (``analyse report DIR`` writes it again).
See docs/tune.md.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from analyser.cli._service import add_service_arguments, configure_from_args
from analyser.cli.errors import CliError
from analyser.core.run_options import WHAT_IF


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse tune`` to ``parser``."""
    parser.add_argument("config", help="start run configuration (.toml)")
    parser.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="NAME=VALUES",
        help="an option and its values: a list (micro_batch_size=8,16,32), a range "
        "(gradient_accumulation=8..64 doubles, 8..64:8 steps by 8) or auto (precision=auto; "
        "split_points=auto searches the pipeline split and each stage's memory proportion by "
        "re-simulation, the proportions from available_memory_proportion=... when given); "
        "repeatable; none: the levers the insights and the memory guide name",
    )
    parser.add_argument(
        "--objective",
        default="throughput",
        help="throughput (default), cycles_per_sample or memory_headroom",
    )
    parser.add_argument(
        "--constraint",
        action="append",
        default=[],
        metavar="EXPR",
        help="fits (always), global_batch=N, ipus<=N, or NAME OP VALUE on a run option or a "
        "figure (throughput, headroom, peak_memory); repeatable",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=64,
        metavar="N",
        help="most configurations to simulate, the start included (default 64)",
    )
    parser.add_argument(
        "--strategy",
        choices=("auto", "grid", "guided"),
        default="auto",
        help="grid (every configuration), guided (insights beam, then refine) or auto "
        "(grid when it fits the budget; default)",
    )
    parser.add_argument(
        "--beam",
        type=int,
        default=4,
        metavar="B",
        help="beam width of the guided search (default 4)",
    )
    parser.add_argument(
        "--best",
        type=int,
        default=3,
        metavar="K",
        help="copy the profiles of the best K configurations (default 3)",
    )
    parser.add_argument(
        "-o",
        "--output",
        default="tune-results",
        metavar="DIR",
        help="output folder (default tune-results)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="write into DIR even when it holds files analyse tune did not write (beside "
        "them: a file of yours at a name the tune writes, report.html say, is never replaced)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar or tables")
    add_service_arguments(parser)


def _check_output(out: Path, force: bool, best_k: int) -> None:
    """Refuse (one sentence, exit 2) an output that is a file, a folder whose parent does not
    exist, a folder holding a file of the user's at a name the tune writes (``report.html``:
    refused with --force too, since writing would replace it), a folder holding profiles no
    tune recorded writing (a copy of the user's in a tune folder: ``best-baseline.h5``), or a
    non-empty folder that holds no earlier tune; --force writes beside those two (a tune
    removes only files it recorded writing)."""
    from analyser.sim.tune.results import (
        foreign_entries,
        foreign_profiles,
        in_the_way,
        in_the_way_error,
    )

    if out.exists() and not out.is_dir():
        raise CliError(f"output {out} is a file; give a folder for the tune results.")
    if not out.parent.exists():
        raise CliError(f"output folder {out.parent} does not exist.")
    if not out.is_dir():
        return
    taken = in_the_way(out, best_k)
    if taken:
        raise CliError(in_the_way_error(out, taken))
    if force:
        return
    profiles = foreign_profiles(out)
    if profiles:
        shown = ", ".join(profiles[:3]) + (
            f" and {len(profiles) - 3} more" if len(profiles) > 3 else ""
        )
        raise CliError(
            f"output folder {out} holds {shown}, which analyse tune did not write; refusing "
            "to write beside it (use --force to write there anyway, keeping it, or another -o)."
        )
    if foreign_entries(out) and not _has_tune(out):
        raise CliError(
            f"output folder {out} is not empty and holds no earlier tune; refusing to write "
            "into it (use --force or another -o)."
        )


def _has_tune(out: Path) -> bool:
    from analyser.sim.tune.results import META

    return os.path.lexists(out / META)


def run(args: argparse.Namespace) -> int:
    """Run ``analyse tune`` with the parsed ``args``; returns the exit code once every process
    it started (the local cluster's workers) has ended."""
    from analyser.cli._service import ending_children

    return ending_children(_run)(args)


def _run(args: argparse.Namespace) -> int:
    from analyser.cli._service import check_count, check_service_args
    from analyser.sim.tune import build_space
    from analyser.sim.tune.folder import MAX_ROWS
    from engine.config import RunConfig

    # a table of more rows than a tune folder may hold could not be read back
    check_count("--budget", args.budget, 1, MAX_ROWS, "configurations a results table holds")
    check_count("--beam", args.beam, 1, MAX_ROWS, "configurations a results table holds")
    check_count("--best", args.best, 0, MAX_ROWS, "configurations a results table holds")
    # the service's options too, before any folder is made or any work starts (the service
    # itself is configured once the folder is held: another tune's may be running here)
    check_service_args(args)
    start = RunConfig.from_toml(args.config).to_dict()
    out = Path(args.output)
    _check_output(out, args.force, args.best)
    # parse everything that can be checked without simulating first (one sentence, exit 2)
    space = build_space(
        start, args.vary or ["precision=" + start["precision"]], args.constraint, args.objective
    )
    if space.auto_split is not None and args.budget < 2:
        raise CliError(
            "--budget 1 leaves the split search nothing to simulate besides the start; give "
            "--budget 2 or more with split_points=auto."
        )
    from analyser.sim.tune.results import folder_lock

    with folder_lock(out):
        return _run_locked(args, out, start, space)


def _run_locked(args, out: Path, start, space) -> int:
    """The search and its writing, with ``out`` held against other tunes."""
    from analyser.cli._common import console
    from analyser.sim.service import get_service
    from analyser.sim.tune import TuneError, build_space, grid_budget, tune, write_results

    configure_from_args(args)
    from analyser.sim.tune.search import quiet_cluster_logs
    from analyser.sim.tune.space import MAX_GRID

    quiet_cluster_logs()
    service = get_service()
    con = console(stderr=True)
    changes = []
    if not args.vary:
        # the insights on the start profile name the levers and their values
        if not args.quiet:
            con.print("simulating the start configuration…", highlight=False)
        first = service.simulate(start)
        if first.simulated:
            from analyser.core.analysis import Analysis
            from analyser.core.insights import find_insights

            with Analysis.open(first.profile) as a:
                changes = [
                    dict(t.change)
                    for t in find_insights(a)
                    if t.change and not WHAT_IF.intersection(t.change)
                ]
        space = build_space(start, [], args.constraint, args.objective, changes)
    if args.strategy == "grid" and space.dims:
        # the start counts once, as a grid configuration when it is one
        n = grid_budget(space) if space.size <= MAX_GRID else space.size + 1
        # with split_points=auto the grid has half the budget, the split search the rest
        have = args.budget if space.auto_split is None else max(1, args.budget // 2)
        if n > have:
            half = " (half of it: the split search takes the rest)" if have < args.budget else ""
            raise TuneError(
                f"the grid needs {n:,} configurations (the start included), more than --budget "
                f"{args.budget}{half}; raise --budget or use --strategy guided."
            )

    result = _search(args, space, service, tune)
    from analyser.reports.tune import write_tune_report
    from analyser.sim.tune.results import REPORT, record_written
    from profiles.atomic import deferred_signals

    # the table and tune.json land together: Ctrl-C / SIGTERM now waits for them (then ends
    # the command with its exit code); an earlier interrupt left a lone results.parquet
    with deferred_signals():
        meta = write_results(
            result, out, best_k=args.best, config_file=str(args.config), report=True
        )
    write_tune_report(out, out / REPORT)
    record_written(out, [REPORT])
    if not args.quiet:
        _print_summary(result, meta, out)
    if result.failure:
        raise CliError(result.failure, result.exit_code or 2)
    if result.interrupted:
        con.print(
            "analyse tune: interrupted; run the same command again to resume from the cache.",
            highlight=False,
        )
        return result.exit_code or 130
    return 0


def _search(args, space, service, tune):
    if args.quiet:
        return tune(space, service, budget=args.budget, strategy=args.strategy, beam=args.beam)
    from analyser.cli._common import progress_bar

    label = space.objective.replace("_", " ")
    with progress_bar(status=True) as bar:
        task = bar.add_task("tuning", total=args.budget, state="starting the workers…")

        def progress(s):
            best = "-" if s["best"] is None else f"{abs(s['best']):,.4g}"
            bar.update(
                task,
                completed=s["tried"],
                description=f"tuning ({s['phase']})",
                state=f"running {s['running']}, queued {s['queued']}, simulated "
                f"{s['simulated']}, best {label} {best}",
            )

        return tune(
            space,
            service,
            budget=args.budget,
            strategy=args.strategy,
            beam=args.beam,
            progress=progress,
        )


def _print_summary(result, meta, out: Path) -> None:
    from rich.table import Table

    from analyser.cli._common import console
    from analyser.core.intervals import change_note, has_range, range_text
    from analyser.core.units import fmt_bytes
    from analyser.sim.tune import pareto_front

    con = console()
    ranked = result.ranked()
    start = result.space.start
    # only the options some of the shown configurations change (a derived space has many)
    varied = list(result.space.names)
    if result.space.auto_split is not None:
        varied += ["split_points", "available_memory_proportion_per_ipu"]
    names = [n for n in varied if any(r.config.get(n) != start.get(n) for r in ranked[:5])]
    tab = Table(
        title=f"Best configurations ({result.space.objective.replace('_', ' ')}; options "
        "that differ from the start)"
    )
    tab.add_column("#", justify="right")
    for n in names:
        tab.add_column(n)
    tab.add_column("samples/s", justify="right")
    tab.add_column("headroom", justify="right")
    tab.add_column("peak memory", justify="right")
    for i, r in enumerate(ranked[:5]):
        f = r.figures
        tab.add_row(
            str(i + 1),
            *[_cell(r.config.get(n)) for n in names],
            f"{f['throughput_samples_per_s']:,.1f}",
            fmt_bytes(f["headroom_bytes"]),
            fmt_bytes(f["peak_memory_bytes"]),
        )
    if ranked:
        con.print(tab)
    oom = sum(1 for r in result.rows if r.response.status == "oom")
    refused = sum(1 for r in result.rows if r.response.status == "refused")
    other = sum(
        1 for r in result.rows if not r.response.simulated and r.response.status != "refused"
    )
    con.print(
        f"{result.strategy} search: {len(result.rows)} configurations "
        f"({result.simulations} simulated, {len(result.rows) - result.simulations} from the "
        f"cache; {oom} out of memory, {refused} refused by the engine"
        + (f", {other} without an answer" if other else "")
        + f") in {result.seconds:,.1f} s; Pareto front {len(pareto_front(result.rows))}.",
        highlight=False,
    )
    best = result.best
    if best is None:
        con.print("No configuration in the space fits and meets the constraints.", highlight=False)
    else:
        diff = ", ".join(f"{k} {_cell(a)} → {_cell(b)}" for k, (a, b) in meta["diff"].items())
        con.print(f"Best: {diff or 'the start configuration itself'}.", highlight=False)
        # how far to trust it: the change's range from the fidelity table (docs/fidelity.md)
        thr = (meta.get("best_intervals") or {}).get("throughput_samples_per_s") or {}
        ch = thr.get("change") or {}
        if diff and ch.get("value") is not None:
            rng = range_text(ch)
            said = f"{rng}: {change_note(ch)}" if has_range(rng) else rng
            con.print(
                f"Throughput {100 * ch['value']:+,.0f}% against the start ({said}).",
                highlight=False,
            )
    if result.split:
        _print_split(con, result.split)
    elif result.space.auto_split is not None and not result.interrupted:
        con.print(
            "No budget was left for the split search; raise --budget.",
            highlight=False,
        )
    con.print(
        f"wrote {out}/ (results.parquet, report.html, {len(meta['best'])} best profile(s)).",
        highlight=False,
    )


def _print_split(con, split: dict) -> None:
    """The chosen split against the user's, per stage: cycles and the fullest tile, each with
    its interval or the sentence saying why there is none (reasons listed under the table)."""
    from rich.table import Table

    from analyser.core.intervals import outside_reasons, range_cell
    from analyser.core.units import fmt_bytes

    user, chosen = split["user"], split["chosen"]

    def cyc(v) -> str:
        return f"{v:,.0f}"

    tab = Table(title="Pipeline stages: your split against the chosen one")
    tab.add_column("stage")
    for who in ("yours", "chosen"):
        tab.add_column(f"cycles ({who})", justify="right")
        tab.add_column("range", justify="left")
        tab.add_column(f"fullest tile ({who})", justify="right")
        tab.add_column("memory", justify="left")
    reasons = []
    for s in range(max(len(user["stages"]), len(chosen["stages"]))):
        cells = [str(s)]
        for side, who in ((user, "yours"), (chosen, "chosen")):
            st = side["stages"][s] if s < len(side["stages"]) else None
            if st is None:
                cells += ["-", "", "-", ""]
                continue
            iv = st["cycles_interval"]
            cells += [
                "-" if st["cycles"] is None else cyc(st["cycles"]),
                range_cell(iv, cyc),
                fmt_bytes(st["max_tile_bytes"]) + (" OOM" if st["oom_tiles"] else ""),
                st["memory"]["statement"].split(":", 1)[0],
            ]
            reasons.append((f"stage {s} cycles ({who})", iv))
        tab.add_row(*cells)
    con.print(tab)
    for line in outside_reasons(reasons):
        con.print(f"  {line}", highlight=False)

    def side_words(side) -> str:
        bal = side.get("balance")
        return (
            f"{_cell(side['split_points'])} at proportions {_cell(side['proportions'])}: "
            f"{_figure(side['throughput_samples_per_s'])} samples/s, longest stage / mean "
            f"{'-' if bal is None else f'{bal:.2f}'}"
        )

    base = split.get("base_changes") or {}
    with_base = (
        " (with the other levers' best: "
        + ", ".join(f"{k} {_cell(b)}" for k, (_, b) in base.items())
        + ")"
        if base
        else ""
    )
    con.print(f"Your split{with_base}: {side_words(user)}.", highlight=False)
    con.print(f"Chosen split: {side_words(chosen)}.", highlight=False)
    ch = split.get("throughput_change") or {}
    if ch.get("value") is not None and chosen["id"] != user["id"]:
        from analyser.core.intervals import range_text

        con.print(
            f"Throughput {100 * ch['value']:+,.1f}% against your split ({range_text(ch)}).",
            highlight=False,
        )
    con.print(
        f"Split search: {split['tried']} configuration(s) of a budget of {split['budget']} "
        f"({'; '.join(split['phases'])}); {split['blocks']} blocks, {split['stages']} stages, "
        f"proportions {_cell(split['proportions'])} per stage.",
        highlight=False,
    )


def _figure(v) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _cell(v) -> str:
    if isinstance(v, list):
        return "+".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v) or "[]"
    return str(v)
