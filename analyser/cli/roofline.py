"""``analyse roofline PROFILE [--json] [-o FILE] [--top N]``: per operation, FLOPs, bytes moved on
the exchange and the host link, arithmetic intensity, achieved FLOPs per cycle and the attainable
bound from the target's AMP peak (for the compiled operand and partials types, said with its
formula) and bandwidths (analyser.core.roofline)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from analyser.cli._common import at_least_one

if TYPE_CHECKING:
    from rich.console import JustifyMethod


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse roofline`` to ``parser``."""
    parser.add_argument("file", help="profile (.h5)")
    parser.add_argument("--json", action="store_true", help="every operation as JSON")
    parser.add_argument("-o", "--output", help="write the roofline (text, or JSON) to FILE")
    parser.add_argument(
        "--top",
        type=at_least_one,
        default=15,
        metavar="N",
        help="operations listed, most FLOPs first (default 15; --json lists all)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace OUT even when analyse did not write it"
    )


def _num(x: float) -> str:
    if x == float("inf"):
        return "inf"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.3g}"


def _si(x: float) -> str:
    """1.23 T / G / M / k (FLOPs)."""
    for div, unit in ((1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(x) >= div:
            return f"{x / div:,.2f}{unit}"
    return f"{x:,.0f}"


def _compute_roof(ro) -> str:
    """How the AMP peak was taken: operand and partials types, the formula, and where the
    partials type comes from."""
    ops = {"half": "FP16", "float": "FP32"}.get(ro.operands, ro.operands)
    text = (
        f"{ops} operands with {ro.partials} partials: {ro.peak_formula()} = "
        f"{_num(ro.peak_flops_per_cycle)} FLOPs/cycle"
    )
    if ro.note:
        return f"{text}. {ro.note}"
    if ro.partials_source == "operands":
        return f"{text} (FP32 operands always accumulate in float)."
    return f"{text} (the partials type the engine compiled with)."


def render(con, r, name: str, top: int) -> None:
    """The roofline as text on a rich console."""
    from rich.markup import escape as esc
    from rich.table import Table

    from analyser.core.units import fmt_bytes

    ro = r.roofs
    con.print(
        f"[bold]{esc(name)}[/]: roofs per IPU ({esc(ro.label)}): AMP peak "
        f"{_num(ro.peak_flops_per_cycle)} FLOPs/cycle, exchange {_num(ro.exchange_bytes_per_cycle)} "
        f"bytes/cycle, host link {ro.host_bytes_per_cycle:.2f} bytes/cycle"
    )
    con.print(f"compute roof: {esc(_compute_roof(ro))}")
    run = r.run.iloc[0]
    con.print(
        f"run: {run.flops:,.0f} FLOPs, {fmt_bytes(run.exchange_bytes)} exchanged, "
        f"{fmt_bytes(run.host_bytes)} over the host link; {_num(run.achieved)} FLOPs per "
        f"IPU-cycle of a bound {_num(run.bound)} ({run.share_of_bound:,.1%}, {run.limit}-bound)"
    )
    tab = Table(
        title="operations, most FLOPs first (FLOPs over the run; FLOPs per byte exchanged; "
        "FLOPs per cycle achieved and attainable)",
        title_justify="left",
    )
    ops = r.operations
    shown = ops.head(top)
    with_source = "source" in shown and bool((shown["source"].astype(str) != "").any())
    heads: tuple[tuple[str, JustifyMethod], ...] = (("operation", "left"),) + (
        (("source", "left"),) if with_source else ()
    )
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        *heads,
        ("IPU", "right"),
        ("FLOPs", "right"),
        ("exchanged", "right"),
        ("FLOP/B", "right"),
        ("achieved", "right"),
        ("bound", "right"),
        ("%", "right"),
        ("limit", "left"),
    )
    for c, j in columns:
        tab.add_column(c, justify=j)
    for o in shown.itertuples():
        tab.add_row(
            esc(str(o.name)),
            *((esc(str(o.source)),) if with_source else ()),
            str(o.ipu),
            _si(o.flops),
            fmt_bytes(o.exchange_bytes),
            _num(o.intensity_exchange),
            _num(o.achieved),
            _num(o.bound),
            f"{o.share_of_bound:,.1%}",
            o.limit,
        )
    con.print(tab)
    if len(ops) > top:
        con.print(f"{len(ops) - top:,} more operations (--top, --json)")
    counts = ops["limit"].value_counts()
    con.print(
        "bound by: "
        + ", ".join(f"{k} {int(v):,}" for k, v in counts.items())
        + " operations; none above its bound"
        if (ops["achieved"] <= ops["bound"] * (1 + 1e-9)).all()
        else "some operations are above their bound: the roofs do not fit this profile"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``analyse roofline`` with the parsed ``args``; returns the exit code."""
    from analyser.cli._common import emit, open_analysis
    from analyser.core.roofline import roofline
    from analyser.output import check_output

    out = check_output(args.output, [args.file], force=args.force) if args.output else None
    with open_analysis(args.file) as a:
        r = roofline(a)
        doc = r.to_dict() if args.json else None
        return emit(out, doc, lambda con: render(con, r, a.name, args.top))
