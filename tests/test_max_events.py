"""``export-trace --max-events N``: a trace of at most N events, steps merged (loop
bodies, device iterations, time windows), every step and cycle accounted for, saying what it
merged."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analyser.cli import main
from profiles import open_profile


@pytest.fixture(scope="module")
def prof(synthetic_profile):
    return synthetic_profile(
        n_steps=8000, n_ipus=2, tiles=32, n_programs=60, device_iterations=6, grad_accum=4
    )


def _export(prof, out, n, capsys) -> dict:
    assert main(["export-trace", str(prof), "-o", str(out), "--max-events", str(n), "--force"]) == 0
    capsys.readouterr()
    return json.loads(out.read_text())


def test_bounded_and_every_step_accounted_for(prof, tmp_path, capsys):
    with open_profile(prof) as p:
        n_steps = p.n_steps
        cycles = int(p.array("/execution/steps/cycles").sum())
        total = int(p.execution_totals()["total_cycles"])
    levels = set()
    for n in (10**8, 2 * n_steps, n_steps // 2, 2000, 400, 120, 60):
        doc = _export(prof, tmp_path / f"t{n}.json", n, capsys)
        ev, info = doc["traceEvents"], doc["aggregation"]
        levels.add(info["level"])
        assert len(ev) <= n and len(ev) == info["events"], (n, info)
        x = [e for e in ev if e["ph"] == "X"]
        assert sum(e["args"].get("steps", 1) for e in x) == n_steps
        assert sum(e["args"]["cycles"] for e in x) == cycles
        clock = doc["otherData"]["clock_hz"]
        assert all(e["ts"] >= 0 and e["ts"] + e["dur"] <= total * 1e6 / clock + 1e-3 for e in x)
        if info["level"] != "steps":
            assert info["merged"] and all(e["args"]["steps"] >= 1 for e in x)
            # merged slices of one lane follow each other without overlapping
            for key in {(e["pid"], e["tid"]) for e in x}:
                lane = sorted(
                    (e["ts"], e["ts"] + e["dur"]) for e in x if (e["pid"], e["tid"]) == key
                )
                s, e_ = np.array(lane).T
                assert (s[1:] >= e_[:-1] - 1e-3).all()
    assert levels == {"steps", "loop bodies", "iterations", "time windows"}


@pytest.mark.parametrize("n", [10**8, 2000, 120])
def test_perfetto_bounded(prof, tmp_path, n):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    from analyser.export.aggregate import export_aggregated

    out = tmp_path / "t.pftrace"
    info = export_aggregated(prof, out, n, fmt="perfetto")
    trace = Trace.FromString(out.read_bytes())
    descriptors = [pk for pk in trace.packet if pk.HasField("track_descriptor")]
    events = [pk.track_event for pk in trace.packet if pk.HasField("track_event")]
    begins = [e for e in events if e.type == 1]  # TYPE_SLICE_BEGIN
    counters = [e for e in events if e.type == 4]  # TYPE_COUNTER
    assert len([e for e in events if e.type == 2]) == len(begins)  # every slice ends
    assert len(descriptors) + len(begins) + len(counters) == info["events"] <= n
    assert any(info["level"] in d.track_descriptor.name for d in descriptors)
    with open_profile(prof) as p:
        n_steps = p.n_steps
        cycles = int(p.array("/execution/steps/cycles").sum())

    def annotation(e, name, default):
        return next((a.int_value for a in e.debug_annotations if a.name == name), default)

    assert sum(annotation(e, "steps", 1) for e in begins) == n_steps
    assert sum(annotation(e, "cycles", 0) for e in begins) == cycles


def test_bad_input(prof, tmp_path, capsys):
    for argv in (
        ["export-trace", str(prof), "-o", str(tmp_path / "a.json"), "--max-events", "5"],
        [
            "export-trace",
            str(prof),
            "-o",
            str(tmp_path / "a.json"),
            "--max-events",
            "900",
            "--split-by-run",
        ],
        ["export-trace", str(prof), "-o", str(tmp_path / "a.json"), "--max-events", "0"],
    ):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse: one line, exit 2
            code = exc.code
        assert code == 2, argv
        err = capsys.readouterr().err.strip()
        assert "\n" not in err.splitlines()[-1] and "Traceback" not in err, err
    assert not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def fill_profiles(synthetic_profile):
    """Profiles of other shapes: one IPU and many loop bodies, four IPUs and few."""
    return [
        synthetic_profile("one.h5", n_steps=30_000, n_ipus=1, tiles=16, n_programs=40),
        synthetic_profile(
            "four.h5", n_steps=12_000, n_ipus=4, tiles=16, n_programs=200, grad_accum=2, seed=3
        ),
    ]


def test_fills_between_half_and_all_of_the_budget(prof, fill_profiles, tmp_path):
    """The level of detail fills the budget: N/2 <= events <= N whenever the trace of every
    step has more than N events (else every step is written); the counting pass predicts the
    events written, and every step and cycle is still in the trace."""
    from analyser.export.aggregate import export_aggregated

    for path in (prof, *fill_profiles):
        with open_profile(path) as p:
            n_steps = p.n_steps
            cycles = int(p.array("/execution/steps/cycles").sum())
        full = export_aggregated(path, tmp_path / "full.json", 10**9)["events"]
        assert full > n_steps  # steps and memory counters: the budgets below are too small
        seen = set()
        for n in sorted({full - 1, full // 2, full // 7, 5_000, 1_500, 300}):
            out = tmp_path / f"n{n}.json"
            try:
                info = export_aggregated(path, out, n)
            except Exception as exc:  # only a budget below one slice per lane is refused
                assert "too small" in str(exc) and n <= 300, (path.name, n, exc)
                continue
            doc = json.loads(out.read_text())
            ev = doc["traceEvents"]
            assert n // 2 <= len(ev) == info["events"] <= n, (path.name, n, info)
            x = [e for e in ev if e["ph"] == "X"]
            assert sum(e["args"].get("steps", 1) for e in x) == n_steps
            assert sum(e["args"]["cycles"] for e in x) == cycles
            seen.add(info["level"])
            if "window_cycles" in info:
                w = info["window_cycles"]
                assert w & (w - 1) == 0  # a power of two
        assert seen - {"steps"}, path.name
