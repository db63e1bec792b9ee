"""HTML report of a tune (``analyse report TUNE-DIR``): the design space (throughput against the
fullest tile's memory, out-of-memory configurations marked, the Pareto front of throughput vs
memory headroom), the best configuration's diff from the start, the split search's chosen split
against the user's per stage (``--vary split_points=auto``), the front and every row."""

from __future__ import annotations

import math
import os
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from analyser.core.intervals import change_note, range_text
from analyser.core.units import fmt_bytes, fmt_delta_pct, fmt_pct
from analyser.sim.tune.results import TuneTable, load_results

#: Rows listed in the report's tables (the best first); the rest stay in results.parquet. The
#: chart shows every configuration (rasterised beyond :data:`VECTOR_POINTS`).
REPORT_ROWS = 1000
VECTOR_POINTS = 2000


def _template() -> str:
    return resources.files("assets").joinpath("templates/tune.html.j2").read_text("utf-8")


def _num(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def design_space_points(table: TuneTable) -> dict[str, np.ndarray]:
    """Arrays for the design-space chart (shared with the GUI report): ``id``, ``tile_kib``
    (fullest tile), ``throughput`` (NaN without execution), ``oom``, ``pareto``, ``feasible``,
    and the SRAM per tile in ``sram_kib`` (a 1-element array)."""
    df = table.frame
    sim = df[df["status"].isin(["ok", "oom"])]
    tile = sim["max_tile_memory_bytes"].to_numpy(float) / 1024
    thr = sim["throughput_samples_per_s"].to_numpy(float)
    sram = (sim["max_tile_memory_bytes"] + sim["headroom_bytes"]).to_numpy(float) / 1024
    return {
        "id": sim["id"].to_numpy(int),
        "tile_kib": tile,
        "throughput": thr,
        "oom": (sim["status"] == "oom").to_numpy(bool),
        "pareto": sim["pareto"].to_numpy(bool),
        "feasible": sim["feasible"].to_numpy(bool),
        "sram_kib": sram[:1] if len(sram) else np.array([np.nan]),
    }


def design_space_chart(table: TuneTable) -> str:
    """The design-space scatter as inline SVG."""
    from analyser.reports.charts import _fig, to_svg

    p = design_space_points(table)
    fig = _fig(9.0, 4.2, left=0.9, bottom=0.6)
    ax = fig.add_subplot(1, 1, 1)
    ok = ~p["oom"]
    for sel, style in (
        (ok & ~p["feasible"], {"s": 18, "c": "#bab0ac", "label": "fits, breaks a constraint"}),
        (ok & p["feasible"], {"s": 18, "c": "#4e79a7", "label": "fits"}),
    ):
        if sel.any():
            ax.scatter(
                p["tile_kib"][sel],
                p["throughput"][sel],
                rasterized=len(p["id"]) > VECTOR_POINTS,
                **style,
            )
    ymax = np.nanmax(p["throughput"]) if np.isfinite(p["throughput"]).any() else 1.0
    if p["oom"].any():
        ax.scatter(
            p["tile_kib"][p["oom"]],
            np.zeros(int(p["oom"].sum())),
            marker="x",
            s=26,
            c="#c62828",
            label="out of memory (no execution)",
            rasterized=len(p["id"]) > VECTOR_POINTS,
        )
    front = p["pareto"]
    if front.any():
        order = np.argsort(p["tile_kib"][front])
        ax.plot(
            p["tile_kib"][front][order],
            p["throughput"][front][order],
            "-o",
            c="#f28e2b",
            ms=5,
            lw=1.2,
            label="Pareto front (throughput vs headroom)",
            rasterized=int(front.sum()) > VECTOR_POINTS,
        )
    meta = table.meta
    for rid, label, colour in (
        (meta.get("start_id"), "start", "#333333"),
        (meta.get("best_id"), "best", "#2e7d32"),
    ):
        hit = np.flatnonzero(p["id"] == rid) if rid is not None else []
        if len(hit):
            i = hit[0]
            y = p["throughput"][i] if np.isfinite(p["throughput"][i]) else 0.0
            ax.scatter([p["tile_kib"][i]], [y], s=90, facecolors="none", edgecolors=colour, lw=1.6)
            ax.annotate(
                label,
                (p["tile_kib"][i], y),
                xytext=(6, 6),
                textcoords="offset points",
                fontsize=9,
                color=colour,
            )
    sram = p["sram_kib"][0]
    if np.isfinite(sram):
        ax.axvline(sram, color="#c62828", lw=0.8, ls="--")
        ax.annotate(
            "tile SRAM",
            (sram, ymax),
            xytext=(4, -12),
            textcoords="offset points",
            fontsize=8,
            color="#c62828",
        )
    ax.set_xlabel("fullest tile (KiB)")
    ax.set_ylabel("throughput (samples/s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return to_svg(fig)


def _fmt_figure(key: str, v: Any) -> str:
    v = _num(v)
    if v is None:
        return "-"
    if key.endswith("_bytes"):
        return fmt_bytes(v)
    if key.endswith("_share") or key == "memory_share_used":
        return fmt_pct(v)
    if key in ("oom_tiles", "total_cycles", "samples"):
        return f"{int(v):,}"
    return f"{v:,.1f}"


FIGURE_COLUMNS = (
    ("throughput_samples_per_s", "samples/s"),
    ("cycles_per_sample", "cycles / sample"),
    ("max_tile_memory_bytes", "fullest tile"),
    ("headroom_bytes", "headroom"),
    ("peak_memory_bytes", "peak memory"),
    ("oom_tiles", "OOM tiles"),
)


def build_tune_report(table: TuneTable) -> dict[str, Any]:
    from analyser.reports import interactive

    df = table.frame
    meta = table.meta
    dims = list(meta["dimensions"])
    extra = [c for c in df.columns if c not in dims and c in meta["start"]]
    options = dims + extra

    def row_dict(r) -> dict[str, Any]:
        return {
            "id": int(r["id"]),
            "origin": r["origin"],
            "status": r["status"],
            "message": r["message"] or "",
            "options": [("-" if r[o] is None else str(r[o])) for o in options],
            "figures": [_fmt_figure(k, r[k]) for k, _ in FIGURE_COLUMNS],
            "feasible": bool(r["feasible"]),
            "pareto": bool(r["pareto"]),
            "rank": None if _num(r["rank"]) is None else int(r["rank"]),
        }

    ordered = df.sort_values(["rank", "id"], na_position="last")
    rows = [row_dict(r) for _, r in ordered.head(REPORT_ROWS).iterrows()]
    front = [row_dict(r) for _, r in ordered[ordered["pareto"]].head(REPORT_ROWS).iterrows()]
    named = df[df["id"].isin([meta["start_id"], meta.get("best_id")])]
    by_id = {r["id"]: r for r in (row_dict(r) for _, r in named.iterrows())}
    start = df[df["id"] == meta["start_id"]].iloc[0]
    best = df[df["id"] == meta["best_id"]].iloc[0] if meta.get("best_id") is not None else None
    from analyser.core.intervals import outside_reasons, range_cell

    compare = []
    reasons = []
    ivs = meta.get("best_intervals") or {}  # tune.json before intervals: none
    for k, label in FIGURE_COLUMNS:
        a = _num(start[k])
        b = None if best is None else _num(best[k])
        change = ivs.get(k, {}).get("change") if isinstance(ivs.get(k), dict) else None
        # a cell holds the range, or only "outside the validated range": the reasons, long
        # sentences, are listed once under the table (in the cell they ran off the page)
        iv = range_cell(change) if isinstance(change, dict) else ""
        if isinstance(change, dict):
            reasons.append((label, change))
        compare.append((label, _fmt_figure(k, a), _fmt_figure(k, b), fmt_delta_pct(a, b), iv))
    thr = ivs.get("throughput_samples_per_s") if isinstance(ivs, dict) else None
    ch = thr.get("change") if isinstance(thr, dict) else None
    # how the range was made, when there is one (without, the reason is listed above)
    note = change_note(ch) if isinstance(ch, dict) and ch.get("low") is not None else ""
    counts = df["status"].value_counts().to_dict()
    return {
        "meta": meta,
        "options": options,
        "figure_labels": [label for _, label in FIGURE_COLUMNS],
        "rows": rows,
        "front": front,
        "rows_hidden": max(0, len(df) - len(rows)),
        "front_hidden": max(0, int(df["pareto"].sum()) - len(front)),
        "start": by_id.get(int(meta["start_id"])),
        "best": None if best is None else by_id.get(int(meta["best_id"])),
        "compare": compare,
        "compare_reasons": outside_reasons(reasons),
        "interval_note": note,
        "diff": meta.get("diff", {}),
        "counts": counts,
        "chart": interactive.design_space(table),
        "split": split_report(meta.get("auto_split")),
    }


def split_report(split: dict[str, Any] | None) -> dict[str, Any] | None:
    """The split search's report (tune.json ``auto_split``, already checked by
    analyser.sim.tune.folder) as table rows: per stage, each side's cycles with their range and
    fullest tile with its memory statement; the sentences of ranges that are missing once."""
    from analyser.core.intervals import outside_reasons, range_cell

    if not split:
        return None
    sides = (split["user"], split["chosen"])
    rows, reasons = [], []
    for s in range(max(len(x["stages"]) for x in sides)):
        cells: list[str] = []
        for side, who in zip(sides, ("yours", "chosen"), strict=True):
            st = side["stages"][s] if s < len(side["stages"]) else None
            if st is None:
                cells += ["-", "", "-", ""]
                continue
            iv = st["cycles_interval"]
            cyc = st["cycles"]
            cells += [
                "-" if cyc is None else f"{cyc:,}",
                range_cell(iv, lambda v: f"{v:,.0f}"),
                fmt_bytes(st["max_tile_bytes"]) + (" (out of memory)" if st["oom_tiles"] else ""),
                st["memory"]["statement"],
            ]
            reasons.append((f"stage {s} cycles ({who})", iv))
        rows.append((s, cells))

    def words(side: dict[str, Any]) -> dict[str, str]:
        thr = side["throughput_samples_per_s"]
        bal = side["balance"]
        return {
            "split": "+".join(side["split_points"]),
            "proportions": "+".join(f"{v:g}" for v in side["proportions"]),
            "throughput": "-" if thr is None else f"{thr:,.1f}",
            "throughput_range": range_text(side["throughput_interval"], lambda v: f"{v:,.1f}"),
            "balance": "-" if bal is None else f"{bal:.2f}",
        }

    ch = split.get("throughput_change") or {}
    return {
        "rows": rows,
        "reasons": outside_reasons(reasons),
        "user": words(split["user"]),
        "chosen": words(split["chosen"]),
        "change": None if ch.get("value") is None else fmt_pct_signed(ch["value"]),
        "change_range": range_text(ch),
        "search": (
            f"{split['tried']} configuration(s) of a budget of {split['budget']} ("
            + "; ".join(split.get("phases") or [])
            + f"); {split['blocks']} blocks, {split['stages']} stages, proportions "
            + "+".join(f"{v:g}" for v in split["proportions"])
            + " per stage"
        ),
    }


def fmt_pct_signed(v: float) -> str:
    return f"{100 * v:+,.1f}%"


def render_tune_html(table: TuneTable, title: str | None = None) -> str:
    import jinja2
    import markupsafe

    import analyser
    from analyser.literal import terminal

    def literal(value: Any) -> Any:
        """A tune folder's names and messages (its folder, options, values) may hold terminal
        escapes or bidi overrides: shown as visible escapes (autoescape does the rest)."""
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
    data = build_tune_report(table)
    cfg = table.meta.get("config_file") or "the start configuration"
    return env.from_string(_template()).render(
        r=data,
        title=title or f"Tune: {os.path.basename(str(cfg))}",
        tool_version=getattr(analyser, "__version__", "0.1.0"),
    )


def write_tune_report(
    folder: str | os.PathLike[str], out: str | os.PathLike[str], title: str | None = None
) -> Path:
    """Write the HTML report of the tune in ``folder`` to ``out`` (atomically)."""
    from analyser.output import atomic_output

    table = load_results(folder)
    text = render_tune_html(table, title)
    out = Path(out)
    with atomic_output(out) as fh:
        fh.write(text)
    return out
