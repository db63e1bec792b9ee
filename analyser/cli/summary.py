"""``analyse summary FILE``: target, memory, execution statistics and throughput (rich tables)."""

from __future__ import annotations

import argparse
import functools
import operator

from analyser.cli._common import at_least_one


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="profile (.h5)")
    parser.add_argument(
        "--units", choices=("KiB", "kB", "bytes"), default="KiB", help="memory units (default KiB)"
    )
    parser.add_argument(
        "--top",
        type=at_least_one,
        default=5,
        metavar="N",
        help="how many of the tiles with the most memory and of the compute sets losing the most "
        "cycles to tile imbalance to list (N >= 1, default 5; "
        "all tiles when N exceeds their number)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON (the 'profiles' entry of the JSON "
        "report, docs/report-schema.md, without insights)",
    )


def _ranges(a) -> str:
    """What the real throughputs may be, from the engine's errors against public figures
    (analyser.core.intervals; docs/fidelity.md, "Intervals")."""
    from analyser.core import intervals
    from analyser.core.units import fmt_rate

    ivs = intervals.profile_prediction(
        a, ("throughput_samples_per_s", "device_throughput_samples_per_s")
    )["intervals"]
    out = []
    for key, what in (
        ("throughput_samples_per_s", "host-inclusive"),
        ("device_throughput_samples_per_s", "device only"),
    ):
        iv = ivs[key]
        if iv["low"] is None:
            out.append(f"{what}: {iv['note']}")
        else:
            rng = intervals.range_text(iv, fmt_rate)
            out.append(f"{what} {rng} ({intervals.class_words(iv['classes'])}, {iv['rows']} rows)")
    return "; ".join(out)


def _top_tiles(m, n: int) -> list[tuple[int, int, int]]:
    """The ``n`` tiles with the most memory (ipu, tile, bytes), most first; the memory summary
    keeps five, so larger ``n`` are taken from its per-tile arrays (one vectorised sort)."""
    if n <= len(m.top_tiles):
        return [(x.ipu, x.tile, x.bytes) for x in m.top_tiles[:n]]
    import numpy as np

    flat = (np.asarray(m.tile_total, np.int64) + np.asarray(m.tile_gaps, np.int64)).ravel()
    order = np.argsort(-flat, kind="stable")[:n]
    tiles = int(m.tiles_per_ipu)
    return [(int(i // tiles), int(i % tiles), int(flat[i])) for i in order]


def run(args: argparse.Namespace) -> int:
    """Print the summary of one profile (text tables, or ``--json``)."""
    from analyser.cli._common import console, open_analysis

    u = args.units
    con = console()
    with open_analysis(args.file) as a:
        if args.json:
            import json
            import sys

            from analyser.reports.data import profile_data

            json.dump(profile_data(a), sys.stdout, indent=1, allow_nan=False)
            sys.stdout.write("\n")
            return 0
        _memory_tables(con, a, args, u)
        if a.execution is None:
            con.print(
                "[bold red]No execution:[/] the program does not fit in memory, so nothing "
                "ran (see `analyse insights`)."
            )
            return 0
        _execution_tables(con, a, args, u)
    return 0


def _memory_tables(con, a, args: argparse.Namespace, u) -> None:
    """The text summary's profile, memory and memory-by-category tables."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.core.insights.thresholds import Thresholds
    from analyser.core.units import fmt_bytes, fmt_pct
    from profiles import schema

    t = a.target
    m = a.memory

    tab = Table(
        title=f"{esc(a.path.name)}: {esc(t.model)} ({'fits' if m.fits else 'OUT OF MEMORY'})",
        show_header=False,
        title_justify="left",
    )
    tab.add_column(style="bold")
    tab.add_column()
    tab.add_row(
        "target",
        f"{esc(t.target_name or t.architecture)}, {t.num_ipus} IPU(s) x "
        f"{t.replicas} replica(s), {t.tiles_per_ipu:,} tiles/IPU",
    )
    tab.add_row(
        "memory",
        f"{fmt_bytes(t.sram_per_tile, u)}/tile, "
        f"{fmt_bytes(t.memory_per_ipu, u)}/IPU, {fmt_bytes(t.memory_total, u)} total",
    )
    tab.add_row("clock", f"{t.clock_hz / 1e9:.3f} GHz")
    tab.add_row(
        "graph",
        f"{t.n_operations:,} operations, {t.n_variables:,} variables, "
        f"{t.n_compute_sets:,} compute sets, {t.n_programs:,} programs",
    )
    for note in t.notes:  # an ONNX model's operators costed as element-wise: a caveat
        if note.startswith("unknown_ops"):
            tab.add_row("caveat", esc(note))
    if a.stored_run_config.note:  # options of a newer or foreign writer, not read
        tab.add_row("caveat", esc(a.stored_run_config.note))
    con.print(tab)

    mem = Table(title="Memory", title_justify="left")
    for col in ("", "value"):
        mem.add_column(col)
    mem.add_row(
        "peak (all tiles)",
        f"{fmt_bytes(m.peak_memory_bytes, u)} "
        f"({fmt_pct(m.share_used)} of {fmt_bytes(m.capacity_bytes, u)})",
    )
    free = (
        f" ({fmt_bytes(m.headroom_bytes, u)} free"
        + (": low headroom" if m.headroom_share < Thresholds().memory_headroom else "")
        + ")"
        if m.fits
        else ""
    )
    mem.add_row(
        "fullest tile",
        f"{fmt_bytes(m.max_tile_bytes, u)} of {fmt_bytes(m.sram_per_tile, u)}{free}",
    )
    per = m.oom_tiles_per_ipu()
    mem.add_row(
        "OOM tiles",
        f"{m.n_oom_tiles:,}"
        + (
            " (" + ", ".join(f"IPU {i}: {int(n):,}" for i, n in enumerate(per) if n) + ")"
            if m.n_oom_tiles
            else ""
        ),
    )
    mem.add_row(
        "top tiles",
        ", ".join(f"{i}:{t} {fmt_bytes(b, u)}" for i, t, b in _top_tiles(m, args.top)),
    )
    liv = m.liveness_totals()
    mem.add_row(
        "always-live / not-always-live",
        f"{fmt_bytes(liv['alwaysLive'], u)} / {fmt_bytes(liv['notAlwaysLive'], u)}",
    )
    if m.remote_bytes:
        mem.add_row("remote buffers", fmt_bytes(m.remote_bytes, u))
    con.print(mem)

    cat = Table(title="Memory by category", title_justify="left")
    cat.add_column("category")
    for i in range(t.num_ipus):
        cat.add_column(f"IPU {i}", justify="right")
    cat.add_column("share", justify="right")
    tot = m.by_category.sum(axis=0)
    grand = float(tot.sum()) or 1.0
    for j in tot.argsort()[::-1]:
        if tot[j] == 0:
            continue
        cat.add_row(
            schema.MEMORY_CATEGORIES[j],
            *(fmt_bytes(m.by_category[i, j], u) for i in range(t.num_ipus)),
            fmt_pct(tot[j] / grand),
        )
    con.print(cat)


def _execution_tables(con, a, args: argparse.Namespace, u) -> None:
    """The text summary's cycles, tile imbalance, StreamCopy and run tables."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.core.quantities import QUANTITIES
    from analyser.core.units import fmt_bytes, fmt_int, fmt_pct, fmt_rate, fmt_seconds
    from profiles import schema

    t = a.target
    ex = a.execution
    mt = a.metrics

    cyc = Table(title="Cycles by step type", title_justify="left")
    cyc.add_column("step type")
    for i in range(t.num_ipus):
        cyc.add_column(f"IPU {i}", justify="right")
        cyc.add_column("%", justify="right")
    for j, name in enumerate(schema.PROGRAM_TYPES):
        if not ex.count_by_type[:, j].any():
            continue
        row = []
        for i in range(t.num_ipus):
            busy = float(ex.cycles_by_type[i].sum()) or 1.0
            row += [fmt_int(ex.cycles_by_type[i, j]), fmt_pct(ex.cycles_by_type[i, j] / busy)]
        cyc.add_row(name, *row)
    cyc.add_row(
        "tile balance (compute)",
        *functools.reduce(
            operator.iadd, ([fmt_pct(ex.tile_balance[i]), ""] for i in range(t.num_ipus)), []
        ),
    )
    imb = a.imbalance
    cyc.add_row(
        "lost to tile imbalance",
        *functools.reduce(
            operator.iadd,
            (
                [fmt_int(imb.lost_cycles[i]), fmt_pct(imb.lost_share_of_compute[i])]
                for i in range(t.num_ipus)
            ),
            [],
        ),
    )
    con.print(cyc)
    worst = Table(
        title="Compute sets losing the most cycles to tile imbalance (slowest tile minus the "
        "mean over the IPU's tiles, summed over executions)",
        title_justify="left",
    )
    for col in ("compute set", "IPU", "executions", "slowest tile", "mean tile", "lost"):
        worst.add_column(col, justify="left" if col == "compute set" else "right")
    for r in imb.compute_sets.head(args.top).itertuples():
        worst.add_row(
            esc(str(r.name)),
            str(r.ipu),
            fmt_int(r.executions),
            fmt_int(r.max_cycles),
            fmt_int(r.mean_cycles),
            fmt_int(r.lost_cycles),
        )
    con.print(worst)

    sc = Table(title="StreamCopy and IPU-to-IPU bytes", title_justify="left")
    for col in ("IPU", "received", "sent", "by destination (rx / tx)", "GlobalExchange rx/tx"):
        sc.add_column(col, justify="right" if col != "by destination (rx / tx)" else "left")
    for i in range(t.num_ipus):
        dest = ", ".join(
            f"{d}: {fmt_bytes(ex.streamcopy_rx_by_dest[i, k], u)} / "
            f"{fmt_bytes(ex.streamcopy_tx_by_dest[i, k], u)}"
            for k, d in enumerate(schema.DESTINATIONS)
            if ex.streamcopy_rx_by_dest[i, k] or ex.streamcopy_tx_by_dest[i, k]
        )
        sc.add_row(
            str(i),
            fmt_bytes(ex.streamcopy_rx_bytes[i], u),
            fmt_bytes(ex.streamcopy_tx_bytes[i], u),
            dest or "-",
            f"{fmt_bytes(ex.global_exchange_rx[i], u)} / {fmt_bytes(ex.global_exchange_tx[i], u)}",
        )
    con.print(sc)

    run = Table(title="Run", show_header=False, title_justify="left")
    run.add_column(style="bold")
    run.add_column()
    run.add_row(
        "total cycles",
        f"{fmt_int(ex.total_cycles)} "
        f"({fmt_seconds(ex.total_cycles / ex.clock_hz)} at the target clock)",
    )
    run.add_row("samples", f"{ex.samples:,} in {ex.host_round_trips:,} host call(s)")
    run.add_row("cycles per sample", fmt_rate(ex.cycles_per_sample))
    run.add_row(
        "throughput",
        f"{fmt_rate(ex.throughput_samples_per_s)} samples/s host-inclusive, "
        f"{fmt_rate(ex.device_throughput_samples_per_s)} samples/s device only",
    )
    run.add_row("range (fidelity table)", esc(_ranges(a)))
    if ex.host_exposed_cycles:
        run.add_row(
            "host outside the trace",
            f"{fmt_seconds(ex.host_exposed_cycles / ex.clock_hz)} per host call not hidden "
            "behind the device (host lane)",
        )
    ps = ex.phase_share()
    run.add_row("phases", ", ".join(f"{p} {fmt_pct(v)}" for p, v in ps.items() if v > 0))
    run.add_row(QUANTITIES["host_wait_share"].label, fmt_pct(ex.host_wait_share))
    if ex.stage_cycles.size > 1:
        run.add_row(
            "stage load",
            ", ".join(f"stage {s}: {fmt_int(v)}" for s, v in enumerate(ex.stage_cycles))
            + f" (longest / mean {ex.stage_imbalance:.2f})",
        )
    del mt
    con.print(run)
