"""``analyse diff``: two runs aligned step by step, the change in total cycles split by
step type, layer and program adding up exactly, the explained run-option differences, and one
trace with both runs and a delta lane."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analyser.cli import main
from analyser.core import Analysis
from analyser.core.diff import NOT_IN_STEPS, _read, align_steps, aligned_deltas, diff_runs
from profiles import schema

PAIRS = {
    "8-bit I/O": ("4-device-iterations", "5-8bit-io"),
    "gradient accumulation": ("2-half", "3-accumulate"),
}


@pytest.fixture(scope="module", params=list(PAIRS))
def pair(request, walkthrough_profiles):
    x, y = PAIRS[request.param]
    with Analysis.open(walkthrough_profiles[x]) as a, Analysis.open(walkthrough_profiles[y]) as b:
        yield request.param, a, b, diff_runs(a, b)


def test_deltas_add_up_exactly_to_the_change_in_total_cycles(pair):
    name, a, b, d = pair
    assert d.delta == b.execution.total_cycles - a.execution.total_cycles != 0
    for table, key in ((d.by_type, "type"), (d.by_layer, "layer"), (d.by_program, "program")):
        assert table["delta"].dtype == np.int64
        for _ipu, rows in table.groupby("ipu"):
            assert int(rows["delta"].sum()) == d.delta, (name, key)
            assert int(rows["a"].sum()) == d.total_a and int(rows["b"].sum()) == d.total_b
            assert rows[key].is_unique
    # each step type's cycles are the run's own (the core's cycles by type per IPU)
    for side, an in (("a", a), ("b", b)):
        got = d.by_type[d.by_type["type"] != NOT_IN_STEPS]
        for r in got.itertuples():
            j = an.execution.step_types.index(r.type)
            assert getattr(r, side) == an.execution.cycles_by_type[r.ipu, j]


def test_alignment_and_explanations(pair):
    name, _a, _b, d = pair
    al = d.alignment
    assert (al["aligned"] + al["removed"] == al["steps_a"]).all()
    assert (al["aligned"] + al["added"] == al["steps_b"]).all()
    keys = {k for e in d.explanations for k in e.config_keys}
    if name == "gradient accumulation":
        # a larger accumulation runs every step of the smaller one, and more
        assert (al["removed"] == 0).all() and (al["added"] > 0).all()
        assert "gradient_accumulation" in keys
        steps = d.by_program
        assert (steps["steps_b"] >= steps["steps_a"]).all()
    else:
        assert "eight_bit_input" in keys
        top = d.by_type[d.by_type["ipu"] == 0].iloc[0]
        assert top["type"] == "StreamCopyMid" and top["delta"] < 0  # half the bytes in
    assert all(s.delta != 0 for s in d.largest)
    assert [abs(s.delta) for s in d.largest] == sorted(
        (abs(s.delta) for s in d.largest), reverse=True
    )


def test_cli_json_trace_and_bad_input(walkthrough_profiles, tmp_path, capsys):
    # the smaller pair for the trace (2 x 17,724 and 2 x 45,849 steps), the 8-bit pair's text
    a, b = walkthrough_profiles["2-half"], walkthrough_profiles["3-accumulate"]
    trace = tmp_path / "diff.json"
    assert main(["diff", str(a), str(b), "--json", "--export-trace", str(trace)]) == 0
    d = json.loads(capsys.readouterr().out)
    delta = d["total_cycles"]["delta"]
    assert sum(r["delta"] for r in d["by_type"] if r["ipu"] == 0) == delta
    ev = json.loads(trace.read_text())
    names = {e["args"]["name"] for e in ev["traceEvents"] if e.get("name") == "process_name"}
    assert {"A: IPU 0", "A: IPU 1", "B: IPU 0", "B: IPU 1", "B - A"} <= names
    last = {}
    for e in ev["traceEvents"]:
        if e.get("ph") == "C" and e["name"].endswith("cumulative delta (cycles)"):
            last[e["name"]] = e["args"]["cycles"]
    # no step only in A and no cycles outside the steps: each IPU's running sum ends at the change
    assert ev["diff"]["steps_only_in_a"] == 0
    assert set(last.values()) == {delta} and len(last) == 2
    n_a = sum(1 for e in ev["traceEvents"] if e.get("ph") == "X" and e["pid"] in (0, 1))
    with Analysis.open(a) as an:
        assert n_a == an.target.n_executed_steps
    a, b = walkthrough_profiles["4-device-iterations"], walkthrough_profiles["5-8bit-io"]
    assert main(["diff", str(a), str(b)]) == 0
    assert (
        "run-option differences: eight_bit_input true instead of false" in capsys.readouterr().out
    )
    for argv in (
        ["diff", str(walkthrough_profiles["1-base"]), str(b)],  # out of memory: no run
        ["diff", str(a), str(b), "--ipu", "7"],
        ["diff", str(a), str(b), "-o", str(tmp_path / "x"), "--export-trace", str(tmp_path / "x")],
        ["diff", str(a), str(b), "-o", str(a)],
        ["diff", str(a), str(tmp_path / "missing.h5")],
    ):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("analyse diff:") and "\n" not in err, err


@pytest.fixture(scope="module")
def synthetic_pair(synthetic_profile):
    opts = dict(n_steps=30_000, n_ipus=3, tiles=16, n_programs=120)
    return synthetic_profile("a.h5", seed=1, **opts), synthetic_profile("b.h5", seed=2, **opts)


def test_the_same_diff_whether_the_summaries_were_made_first_or_not(synthetic_pair):
    # the diff reads each run's steps in the pass that makes its execution summary, or on its
    # own when the summary is made already (the GUI's case)
    a, b = synthetic_pair
    with Analysis.open(a) as x, Analysis.open(b) as y:
        fresh = diff_runs(x, y).to_dict()
        assert x.execution is not None and y.execution is not None  # made by that pass
    with Analysis.open(a) as x, Analysis.open(b) as y:
        assert x.execution is not None and y.execution is not None
        assert diff_runs(x, y).to_dict() == fresh
    with Analysis.open(a) as x, Analysis.open(b) as y:
        # the trace's lane: the changed aligned steps and B's added steps, less A's removed
        # ones, add up to the change of the steps' cycles
        d = aligned_deltas(x, y)
        steps_delta = sum(r["delta"] for r in fresh["by_type"] if r["type"] != NOT_IN_STEPS)
        assert int(d["delta"].sum()) - int(d["removed"][1]) == steps_delta


def test_alignment_of_steps_not_grouped_by_ipu(synthetic_pair):
    # the format stores each IPU's steps together, so the diff slices them; steps in any
    # order align the same way, by name and occurrence
    a, b = synthetic_pair
    with Analysis.open(a) as x, Analysis.open(b) as y:
        sa, sb = _read(x), _read(y)
        assert sa.grouped and sb.grouped
        got = align_steps(sa, sb)
        sa.grouped = sb.grouped = False
        assert all(np.array_equal(g, w) for g, w in zip(got, align_steps(sa, sb)))
        assert got[0].size and (sa.ipu[got[0]] == sb.ipu[got[1]]).all()
        assert (sa.prog_names[sa.prog[got[0]]] == sb.prog_names[sb.prog[got[1]]]).all()


def test_cycles_beyond_float_precision_still_add_up_exactly(tmp_path):
    # steps so long that float64 sums of them round: the tables are exact integer sums anyway
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    paths = []
    for seed in (1, 2):
        p = make_synthetic_profile(n_steps=4_000, n_ipus=2, tiles=16, n_programs=60, seed=seed)
        cycles = np.asarray(p["/execution/steps"]["cycles"], np.int64).copy()
        ipu = np.asarray(p["/execution/steps"]["ipu"])
        typ = np.asarray(p["/execution/steps"]["type"])
        for i in np.unique(ipu):  # five steps of a type of 2**51 cycles: their sum is past 2**53
            rows = np.flatnonzero((ipu == i) & (typ == np.bincount(typ).argmax()))
            cycles[rows[10:15]] += 2**51 + 2 * np.arange(5) + seed
        assert (cycles % 2).any()  # odd values, which float64 cannot add past 2**53
        p["/execution/steps"]["cycles"] = cycles
        paths.append(tmp_path / f"{seed}.h5")
        write_profile(paths[-1], p)
    with Analysis.open(paths[0]) as x, Analysis.open(paths[1]) as y:
        d = diff_runs(x, y)
        for side, path in (("a", paths[0]), ("b", paths[1])):
            with Analysis.open(path) as an:
                c = {k: an.src.column("/execution/steps", k) for k in ("ipu", "type", "cycles")}
            for r in d.by_type[d.by_type["type"] != NOT_IN_STEPS].itertuples():
                j = list(schema.PROGRAM_TYPES).index(r.type)
                want = sum(int(v) for v in c["cycles"][(c["ipu"] == r.ipu) & (c["type"] == j)])
                assert getattr(r, side) == want
        for table in (d.by_type, d.by_layer, d.by_program):
            for _ipu, rows in table.groupby("ipu"):
                assert int(rows["delta"].sum()) == d.delta
    # the execution summary's cycle sums are exact integers too, and each finer one adds up
    # to the coarser ones
    with Analysis.open(paths[0]) as an:
        ex = an.execution
        c = {k: an.src.column("/execution/steps", k) for k in ("ipu", "program", "cycles", "stage")}
    for i in range(ex.num_ipus):
        on = c["ipu"] == i
        assert int(ex.cycles_by_type[i].sum()) == sum(int(v) for v in c["cycles"][on])
        n = ex.program_cycles.size
        runs = np.bincount(c["program"][on], minlength=n)
        assert (ex.program_executions_by_ipu[i] == runs).all()
        want = np.zeros(n, np.int64)
        np.add.at(want, c["program"][on], c["cycles"][on].astype(np.int64))  # integer adds
        assert (ex.program_cycles_by_ipu[i] == want).all()
    assert (ex.program_cycles_by_ipu.sum(axis=0) == ex.program_cycles).all()
    assert (ex.program_executions_by_ipu.sum(axis=0) == ex.program_executions).all()
    assert (ex.cycles_by_type_phase.sum(axis=2) == ex.cycles_by_type).all()
    staged = c["stage"] >= 0
    assert int(ex.stage_cycles.sum()) == sum(int(v) for v in c["cycles"][staged])


def test_largest_deltas_are_those_of_one_stable_sort_over_all_aligned_steps(synthetic_pair):
    # the diff keeps each IPU's largest deltas only; ties (many equal |delta|) keep the order
    # of the aligned steps, as one stable sort of every IPU's aligned steps would give
    from analyser.core.diff import _aligned_by_ipu, _top

    a, b = synthetic_pair
    rng = np.random.default_rng(0)
    with Analysis.open(a) as x, Analysis.open(b) as y:
        sa, sb = _read(x), _read(y)
        ia, ib, _ = align_steps(sa, sb)
        # B's cycles: A's aligned ones plus small deltas, most of them tied
        sb.cycles[ib] = sa.cycles[ia] + rng.integers(-3, 4, ia.size)
        d = sb.cycles[ib] - sa.cycles[ia]
        nz = np.flatnonzero(d)
        for n in (0, 1, 5, 50, ia.size + 1):
            want = nz[np.argsort(-np.abs(d[nz]), kind="stable")[:n]]
            parts = [_top(sa, sb, (r_a, r_b, o), n) for _, r_a, r_b, o in _aligned_by_ipu(sa, sb)]
            cat = [np.concatenate(p) for p in zip(*parts)]
            dd = sb.cycles[cat[1]] - sa.cycles[cat[0]]
            got = np.argsort(-np.abs(dd), kind="stable")[:n]
            assert np.array_equal(cat[0][got], ia[want]) and np.array_equal(cat[1][got], ib[want])
