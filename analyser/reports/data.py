"""The report content as plain data: one JSON-compatible dict that the HTML, Markdown and JSON
writers all render, so the three formats always carry the same numbers.

The layout is documented in docs/report-schema.md (``REPORT_SCHEMA`` / ``REPORT_SCHEMA_VERSION``).
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.core import Analysis, intervals
from analyser.core.summary import IMBALANCE_TOP, summary_sections, summary_tables
from profiles import schema

if TYPE_CHECKING:
    from analyser.core.insights.model import Insight

REPORT_SCHEMA = "ipu-analyser-report"
REPORT_SCHEMA_VERSION = "2.1"


#: The Metrics figures given an interval in ``prediction.intervals`` (the numeric ones).
PREDICTED_METRICS: tuple[str, ...] = intervals.PROFILE_FIGURES


def plain(v: Any) -> Any:
    """numpy / non-finite values to JSON-compatible Python values (NaN, inf -> None)."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return plain(v.tolist())
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _records(df, columns: list[str]) -> list[dict[str, Any]]:
    cols = [c for c in columns if c in df.columns]
    out = df[cols].copy()
    for c in cols:
        if str(out[c].dtype) == "category":
            out[c] = out[c].astype(str)
    return plain(out.to_dict("records"))


def profile_data(
    analysis: Analysis, insights: list | None = None, unit: str = "KiB", top: int = IMBALANCE_TOP
) -> dict[str, Any]:
    """Everything the report says about one profile; the texts of its ``summary`` and
    ``tables`` give bytes in memory ``unit`` (said in ``units``), and its compute-set table
    lists the ``top`` compute sets losing the most cycles to tile imbalance."""
    t = analysis.target
    m = analysis.memory
    lv = analysis.liveness
    ex = analysis.execution
    met = analysis.metrics
    d: dict[str, Any] = {
        "file": str(analysis.path),
        "name": analysis.name,
        "model": t.model,
        "status": t.status,
        "fits": m.fits,
        "target": {**asdict(t), "memory_per_ipu": t.memory_per_ipu, "memory_total": t.memory_total},
        "run_config": analysis.run_config,
        "metrics": {k: v for k, v in met.to_dict().items() if k not in ("ipus", "file")},
        "ipus": [asdict(x) for x in met.ipus],
        "memory": {
            "sram_per_tile": m.sram_per_tile,
            "capacity_bytes": m.capacity_bytes,
            "headroom_bytes": m.headroom_bytes,
            "by_category": m.category_totals(),
            "by_category_per_ipu": [m.category_totals(i) for i in range(m.num_ipus)],
            "by_region": m.region_totals(),
            "by_liveness": m.liveness_totals(),
            "oom_tiles_per_ipu": m.oom_tiles_per_ipu().tolist(),
            "top_tiles": [asdict(x) for x in m.top_tiles],
            "histogram": {
                "edges": m.histogram_edges.tolist(),
                "counts": m.histogram_counts.tolist(),
            },
            "largest_variables": _records(
                analysis.largest_variables(10),
                ["name", "kind", "dtype", "shape", "bytes", "ipu", "always_live"],
            ),
            "largest_vertices": _records(
                analysis.largest_vertices(5),
                ["name", "code_bytes", "state_bytes", "instances", "total_state_bytes"],
            ),
        },
        "liveness": {
            "steps": lv.n_steps,
            "always_live": lv.always_live.tolist(),
            "peak_step": lv.peak_step.tolist(),
            "peak_step_name": [
                lv.step_names[int(s)] if lv.step_names else "" for s in lv.peak_step
            ],
            "peak_bytes": lv.peak_bytes.tolist(),
            "peak_live_variables": [
                _records(analysis.peak_live_variables(i, 5), ["name", "kind", "bytes"])
                for i in range(t.num_ipus)
            ]
            if lv.n_steps
            else [],
        },
        "execution": None,
        "operations_top": [],
        "insights": [x.to_dict() for x in insights] if insights is not None else [],
        # schema 1.1: how far to trust the profile's predicted figures (docs/report-schema.md)
        "prediction": intervals.profile_prediction(analysis, PREDICTED_METRICS),
    }
    # schema 1.2: the summary's sections and figures, as every rendering shows them
    d["summary"] = summary_sections(analysis, unit, prediction=d["prediction"])
    # schema 1.3: the breakdown tables, declared once (quantities.SUMMARY_TABLES), and the
    # memory units of the summary's and the tables' texts (raw values are in bytes)
    d["tables"] = summary_tables(analysis, unit, top)
    d["units"] = unit
    if ex is not None:
        imbalance = analysis.imbalance
        assert imbalance is not None  # summarised whenever there is an execution
        d["execution"] = {
            "total_cycles": ex.total_cycles,
            "device_cycles": ex.device_cycles,
            "host_seconds": ex.host_seconds,
            "host_inclusive_cycles": ex.host_inclusive_cycles,
            "device_throughput": ex.device_throughput_samples_per_s,
            "samples": ex.samples,
            "host_round_trips": ex.host_round_trips,
            "cycles_by_type_per_ipu": [
                {
                    tn: int(ex.cycles_by_type[i, j])
                    for j, tn in enumerate(schema.PROGRAM_TYPES)
                    if ex.count_by_type[i, j]
                }
                for i in range(ex.num_ipus)
            ],
            "type_share": ex.type_share(),
            "phase_share": ex.phase_share(),
            "stage_cycles": ex.stage_cycles.tolist(),
            "stage_compute_cycles": ex.stage_compute_cycles.tolist(),
            "streamcopy_by_destination_per_ipu": [
                {
                    dn: {
                        "rx": int(ex.streamcopy_rx_by_dest[i, k]),
                        "tx": int(ex.streamcopy_tx_by_dest[i, k]),
                    }
                    for k, dn in enumerate(schema.DESTINATIONS)
                    if ex.streamcopy_rx_by_dest[i, k] or ex.streamcopy_tx_by_dest[i, k]
                }
                for i in range(ex.num_ipus)
            ],
            "imbalance": imbalance.to_dict(top=10),
        }
        ops = analysis.operations.sort_values("total_cycles", ascending=False).head(15)
        d["operations_top"] = _records(
            ops,
            [
                "name",
                "type",
                "pass",
                "ipu",
                "stage",
                "executions",
                "total_cycles",
                "cycles_share",
                "flops",
                "memory_bytes",
                "code_bytes",
            ],
        )
    return plain(d)


def build_report(
    analyses: list[Analysis],
    *,
    insights: bool = True,
    resimulate: bool = False,
    thresholds: Any = None,
    progress: Any = None,
    predict_transitions: bool = True,
    simulator: Any = None,
    stage: Any = None,
) -> dict[str, Any]:
    """The whole report (one or several profiles, with a comparison when several).

    Re-simulation (``resimulate``: every insight's change; ``predict_transitions``: below) runs
    on ``simulator`` (:class:`analyser.core.simulator.Simulator`, chosen by the caller); without
    one nothing is re-simulated. ``stage(text)`` is told each stage as it starts.

    Several profiles also get ``transitions`` (analyser.core.transitions): for each profile to
    the next, the change, the insight that recommended it and its predicted effect, and the
    measured effect. With ``predict_transitions`` the linked insights are re-simulated (only
    those) even when ``resimulate`` is off.
    """
    from analyser.core.comparison import change_intervals, compare
    from analyser.core.insights import find_insights
    from analyser.core.transitions import explain_transitions

    say = stage or (lambda text: None)
    tips_all: list[list[Insight] | None] = []
    for i, a in enumerate(analyses):
        if not insights and len(analyses) == 1:
            tips_all.append(None)
            continue
        say(f"insights of {a.name} ({i + 1}/{len(analyses)})")
        tips_all.append(
            find_insights(
                a,
                thresholds,
                simulator=simulator if resimulate and insights else None,
                progress=progress,
            )
        )
    if len(analyses) > 1:
        predicting = simulator is not None and (predict_transitions or resimulate)
        say("explaining each step" + (" (re-simulating its tip)" if predicting else ""))
    transitions = (
        [
            t.to_dict()
            for t in explain_transitions(
                analyses,
                tips_all,
                simulator=simulator if predict_transitions or resimulate else None,
            )
        ]
        if len(analyses) > 1
        else None
    )
    say("summarising the profiles" + (" and comparing them" if len(analyses) > 1 else ""))
    profiles = [profile_data(a, tips if insights else None) for a, tips in zip(analyses, tips_all)]
    comparison = compare(analyses).to_dict() if len(analyses) > 1 else None
    if comparison is not None:
        # schema 1.2: the interval of each compared figure's change, last profile vs first
        comparison["last_vs_first"] = change_intervals(analyses[0], analyses[-1])
    from dataclasses import asdict as _asdict

    from analyser.core.insights import Thresholds

    used = _asdict(thresholds if thresholds is not None else Thresholds())
    import analyser

    return plain(
        {
            "schema": REPORT_SCHEMA,
            "schema_version": REPORT_SCHEMA_VERSION,
            "generated": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "tool_version": getattr(analyser, "__version__", "0.1.0"),
            "profiles": profiles,
            "comparison": comparison,
            "transitions": transitions,
            "thresholds": used,
            "resimulated": bool(resimulate and insights and simulator is not None),
        }
    )
