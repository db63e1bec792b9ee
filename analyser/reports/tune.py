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
#: chart shows every configuration (the interactive one in WebGL beyond :data:`VECTOR_POINTS`).
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


#: The static chart's size in pixels and its plot area's margins (left, right, top, bottom).
_SVG_W, _SVG_H = 900, 420
_SVG_MARGIN = (90, 20, 35, 60)
_SVG_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
#: The chart's series: legend label, colour (the interactive chart's).
_SERIES = {
    "infeasible": ("fits, breaks a constraint", "#bab0ac"),
    "fits": ("fits", "#4e79a7"),
    "oom": ("out of memory (no execution)", "#c62828"),
    "pareto": ("Pareto front (throughput vs headroom)", "#f28e2b"),
}


def _nice_ticks(lo: float, hi: float, target: int = 6) -> np.ndarray:
    """Round tick values covering [lo, hi]: a step of 1, 2, 2.5 or 5 times a power of ten giving
    about ``target`` intervals."""
    raw = (hi - lo) / target
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw * (1 - 1e-9))
    first = math.ceil(lo / step - 1e-9) * step
    ticks = first + step * np.arange(math.floor((hi - first) / step + 1e-9) + 1)
    return np.round(ticks, 12)


def _tick_text(ticks: np.ndarray) -> list[str]:
    """Tick labels with thousands separators and as many decimals as the step needs."""
    step = float(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0
    decimals = 0
    while decimals < 6 and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-6:
        decimals += 1
    return [f"{0.0 if abs(v) < step * 1e-9 else v:,.{decimals}f}" for v in ticks]


def _limits(values: np.ndarray, pad: float = 0.05) -> tuple[float, float]:
    lo, hi = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    if hi <= lo:
        half = max(abs(lo) * 0.05, 0.5)
        lo, hi = lo - half, hi + half
    span = hi - lo
    return lo - pad * span, hi + pad * span


def _dots(xs: np.ndarray, ys: np.ndarray) -> str:
    """Path data drawing one round dot per point (a zero-length segment with round caps): a few
    bytes a point, so thousands of configurations stay vector."""
    return "".join(f"M{x:.1f} {y:.1f}h0" for x, y in zip(xs.tolist(), ys.tolist(), strict=True))


def _crosses(xs: np.ndarray, ys: np.ndarray, r: float = 4.0) -> str:
    return "".join(
        f"M{x - r:.1f} {y - r:.1f}l{2 * r:g} {2 * r:g}M{x - r:.1f} {y + r:.1f}l{2 * r:g} {-2 * r:g}"
        for x, y in zip(xs.tolist(), ys.tolist(), strict=True)
    )


def design_space_chart(table: TuneTable) -> str:
    """The design-space scatter as inline SVG, for a viewer that runs no scripts: throughput
    against the fullest tile for every simulated configuration (the ones that fit, those that
    break a constraint greyed), the out-of-memory ones as crosses on the axis, the Pareto front
    as a line, the start and the best ringed and named, the tile's SRAM as a dashed line, axes
    with round ticks, a grid and a legend. Written from :func:`design_space_points` directly
    (drawing it with matplotlib cost about 0.8 s of CPU per tune in imports alone)."""
    p = design_space_points(table)
    left, right, top, bottom = _SVG_MARGIN
    x0, x1, y0, y1 = left, _SVG_W - right, top, _SVG_H - bottom  # y0 is the top edge
    thr = p["throughput"]
    finite = np.isfinite(thr)
    y_plot = np.where(finite, thr, 0.0)  # out of memory: on the axis
    sram = float(p["sram_kib"][0])
    xs_all = p["tile_kib"][np.isfinite(p["tile_kib"])]
    if np.isfinite(sram):
        xs_all = np.append(xs_all, sram)
    ys_all = np.append(y_plot[finite | p["oom"]], 0.0)
    xlo, xhi = _limits(xs_all)
    ylo, yhi = _limits(ys_all)

    def px(x: np.ndarray | float) -> np.ndarray:
        return x0 + (np.asarray(x, float) - xlo) / (xhi - xlo) * (x1 - x0)

    def py(y: np.ndarray | float) -> np.ndarray:
        return y1 - (np.asarray(y, float) - ylo) / (yhi - ylo) * (y1 - y0)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_SVG_W}" height="{_SVG_H}" '
        f'viewBox="0 0 {_SVG_W} {_SVG_H}" role="img" font-family="{_SVG_FONT}" '
        'fill="#1f2328"><title>Design space: throughput against the fullest tile</title>',
        f'<rect x="0" y="0" width="{_SVG_W}" height="{_SVG_H}" fill="#ffffff"/>',
    ]
    grid, labels = [], []
    xticks = _nice_ticks(xlo, xhi)
    xticks = xticks[(xticks >= xlo) & (xticks <= xhi)]
    for v, t in zip(px(xticks).tolist(), _tick_text(xticks), strict=True):
        grid.append(f"M{v:.1f} {y0}V{y1}")
        labels.append(f'<text x="{v:.1f}" y="{y1 + 16}" text-anchor="middle">{t}</text>')
        labels.append(f'<path d="M{v:.1f} {y1}v4" stroke="#1f2328"/>')
    yticks = _nice_ticks(ylo, yhi)
    yticks = yticks[(yticks >= ylo) & (yticks <= yhi)]
    for v, t in zip(py(yticks).tolist(), _tick_text(yticks), strict=True):
        grid.append(f"M{x0} {v:.1f}H{x1}")
        labels.append(f'<text x="{x0 - 7}" y="{v + 4:.1f}" text-anchor="end">{t}</text>')
        labels.append(f'<path d="M{x0} {v:.1f}h-4" stroke="#1f2328"/>')
    out.append(f'<path d="{"".join(grid)}" stroke="#b0b0b0" stroke-opacity="0.5" fill="none"/>')
    out.append(f'<g font-size="11">{"".join(labels)}</g>')

    ok = ~p["oom"] & finite
    legend: list[tuple[str, str, str]] = []  # (label, colour, kind)
    for key, sel in (("infeasible", ok & ~p["feasible"]), ("fits", ok & p["feasible"])):
        if sel.any():
            label, colour = _SERIES[key]
            d = _dots(px(p["tile_kib"][sel]), py(thr[sel]))
            out.append(f'<path d="{d}" stroke="{colour}" stroke-width="6" stroke-linecap="round"/>')
            legend.append((label, colour, "dot"))
    if p["oom"].any():
        label, colour = _SERIES["oom"]
        oom = p["oom"]
        d = _crosses(px(p["tile_kib"][oom]), py(np.zeros(int(oom.sum()))))
        out.append(f'<path d="{d}" stroke="{colour}" stroke-width="1.5" fill="none"/>')
        legend.append((label, colour, "cross"))
    front = p["pareto"] & finite
    if front.any():
        label, colour = _SERIES["pareto"]
        order = np.argsort(p["tile_kib"][front], kind="stable")
        fx, fy = px(p["tile_kib"][front][order]), py(thr[front][order])
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(fx.tolist(), fy.tolist(), strict=True))
        out.append(f'<polyline points="{line}" stroke="{colour}" stroke-width="1.7" fill="none"/>')
        out.append(
            f'<path d="{_dots(fx, fy)}" stroke="{colour}" stroke-width="7" stroke-linecap="round"/>'
        )
        legend.append((label, colour, "line"))
    meta = table.meta
    for rid, name, colour in (
        (meta.get("start_id"), "start", "#333333"),
        (meta.get("best_id"), "best", "#2e7d32"),
    ):
        hit = np.flatnonzero(p["id"] == rid) if rid is not None else np.empty(0, np.intp)
        if len(hit):
            i = int(hit[0])
            cx, cy = float(px(p["tile_kib"][i])), float(py(y_plot[i]))
            out.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="none" stroke="{colour}" '
                f'stroke-width="2"/><text x="{cx + 8:.1f}" y="{cy - 8:.1f}" font-size="12" '
                f'fill="{colour}">{name}</text>'
            )
    sx = float(px(sram)) if np.isfinite(sram) else None
    if sx is not None:
        # the label above the plot area (clear of the points and the legend), ending at the line
        # when the line is near the right edge
        tx, anchor = (sx, "end") if sx > x1 - 35 else (sx, "middle")
        out.append(
            f'<path d="M{sx:.1f} {y0}V{y1}" stroke="#c62828" stroke-width="1" '
            f'stroke-dasharray="5 3"/><text x="{tx:.1f}" y="{y0 - 6}" font-size="11" '
            f'text-anchor="{anchor}" fill="#c62828">tile SRAM</text>'
        )
    out.append(
        f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" '
        'stroke="#1f2328"/>'
        f'<text x="{(x0 + x1) / 2:g}" y="{_SVG_H - 18}" text-anchor="middle" font-size="13">'
        "fullest tile (KiB)</text>"
        f'<text transform="translate(22 {(y0 + y1) / 2:g}) rotate(-90)" text-anchor="middle" '
        'font-size="13">throughput (samples/s)</text>'
    )
    if legend:
        out.append(_legend(legend, px(p["tile_kib"]), py(y_plot), (x0, x1, y0, y1)))
    out.append("</svg>")
    return "".join(out)


def _legend(
    entries: list[tuple[str, str, str]],
    xs: np.ndarray,
    ys: np.ndarray,
    box: tuple[float, float, float, float],
) -> str:
    """The legend in the corner of the plot area that covers the fewest points."""
    from html import escape

    x0, x1, y0, y1 = box
    w = 36 + 6.6 * max(len(label) for label, *_ in entries)
    h = 8 + 17 * len(entries)
    corners = [
        (x1 - w - 8, y0 + 8),
        (x0 + 8, y0 + 8),
        (x1 - w - 8, y1 - h - 8),
        (x0 + 8, y1 - h - 8),
    ]
    covered = [
        int(((xs >= lx) & (xs <= lx + w) & (ys >= ly) & (ys <= ly + h)).sum()) for lx, ly in corners
    ]
    lx, ly = corners[covered.index(min(covered))]
    out = [
        f'<g font-size="11"><rect x="{lx:.1f}" y="{ly:.1f}" width="{w:.1f}" height="{h}" '
        'fill="#ffffff" fill-opacity="0.85" stroke="#cccccc" rx="3"/>'
    ]
    for k, (label, colour, kind) in enumerate(entries):
        cy = ly + 13 + 17 * k
        mx = lx + 16
        if kind == "dot":
            mark = f'<path d="M{mx:.1f} {cy:.1f}h0" stroke="{colour}" stroke-width="6" stroke-linecap="round"/>'
        elif kind == "cross":
            mark = f'<path d="{_crosses(np.array([mx]), np.array([cy]))}" stroke="{colour}" stroke-width="1.5"/>'
        else:
            mark = (
                f'<path d="M{mx - 10:.1f} {cy:.1f}h20" stroke="{colour}" stroke-width="1.7"/>'
                f'<path d="M{mx:.1f} {cy:.1f}h0" stroke="{colour}" stroke-width="7" '
                'stroke-linecap="round"/>'
            )
        out.append(f'{mark}<text x="{lx + 32:.1f}" y="{cy + 4:.1f}">{escape(label)}</text>')
    out.append("</g>")
    return "".join(out)


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
