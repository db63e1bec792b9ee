"""``analyse diff`` reads four step columns and no pandas, and says what the whole computation
says: the comparison's explanations, other deltas and interval (``compare_pair`` over whole
execution summaries), tables equal to sums of the whole step table, the largest deltas of the
whole alignment, the summary's figures, and the rows its text lists."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analyser.cli.diff import _rows
from analyser.core import Analysis
from analyser.core import diff as diff_mod
from analyser.core.comparison import compare_pair
from analyser.core.diff import NO_LAYER, NOT_IN_STEPS, _read, align_steps, diff_runs
from analyser.core.diff_explain import _largest_first
from analyser.core.execution import ExecutionSummary, PartialExecutionSummary, summarise_execution
from profiles import schema

ROOT = Path(__file__).resolve().parents[1]

#: Walkthrough pairs: each step's run-option change, and a pair changing several at once.
PAIRS = [
    ("2-half", "3-accumulate"),
    ("3-accumulate", "4-device-iterations"),
    ("4-device-iterations", "5-8bit-io"),
    ("5-8bit-io", "6-async"),
    ("2-half", "6-async"),
    ("6-async", "2-half"),
]


def _names(values: np.ndarray) -> np.ndarray:
    return np.array(
        [v.decode() if isinstance(v, bytes) else str(v) for v in values.tolist()], dtype=object
    )


def _reference_table(paths: tuple[Path, Path], label: str) -> pd.DataFrame:
    """The diff's table of ``label`` ('type', 'layer', 'program') from the whole step tables
    with pandas: sums by (IPU, label) of each run, the labels either run uses, the remainder
    of each IPU's total, largest |delta| first within an IPU (ties in label order)."""
    sums, totals = [], []
    for path in paths:
        with Analysis.open(path) as an:
            src = an.src
            steps = pd.DataFrame(
                {k: src.column("/execution/steps", k) for k in ("ipu", "program", "cycles", "type")}
            )
            progs = _names(src.column("/programs/nodes", "name"))
            op = src.column("/programs/nodes", "op").astype(np.int64)
            layers = _names(src.column("/graph/operations", "layer"))
            prog_layer = np.array(
                [layers[o] if 0 <= o < layers.size else NO_LAYER for o in op], dtype=object
            )
            if label == "type":
                steps["label"] = np.array(schema.PROGRAM_TYPES, dtype=object)[steps["type"]]
            elif label == "layer":
                steps["label"] = prog_layer[steps["program"]]
            else:
                steps["label"] = progs[steps["program"]]
            g = steps.groupby(["ipu", "label"])
            sums.append(pd.DataFrame({"c": g["cycles"].sum().astype(np.int64), "n": g.size()}))
            totals.append(int(src.execution_attrs["total_cycles"]))
    both = pd.merge(
        sums[0], sums[1], how="outer", left_index=True, right_index=True, suffixes=("_a", "_b")
    ).fillna(0)
    rows = []
    for ipu in sorted(set(both.index.get_level_values(0))):
        part = both.loc[ipu]
        # labels in the diff's order: step types as the format numbers them, names sorted
        order = list(schema.PROGRAM_TYPES) if label == "type" else sorted(part.index)
        part = part.loc[[k for k in order if k in part.index]]
        used = (part["c_a"] != 0) | (part["c_b"] != 0)  # a label either run spends cycles in
        if label == "program":  # or runs
            used |= (part["n_a"] != 0) | (part["n_b"] != 0)
        part = part[used]
        tab = pd.DataFrame(
            {
                "ipu": ipu,
                label: [*part.index, NOT_IN_STEPS],
                "a": [*part["c_a"].astype(np.int64), totals[0] - int(part["c_a"].sum())],
                "b": [*part["c_b"].astype(np.int64), totals[1] - int(part["c_b"].sum())],
            }
        )
        tab["delta"] = tab["b"] - tab["a"]
        if label == "program":
            tab["steps_a"] = [*part["n_a"].astype(np.int64), 0]
            tab["steps_b"] = [*part["n_b"].astype(np.int64), 0]
        rows.append(tab.iloc[np.argsort(-tab["delta"].abs().to_numpy(), kind="stable")])
    return pd.concat(rows, ignore_index=True)


def _reference_rows(df: pd.DataFrame, key: str, top: int) -> list[tuple[str, int, int, int]]:
    """The rows ``analyse diff`` listed from its DataFrames: the first ``top`` changed rows,
    then 'others' summing every other row."""
    changed = df[df["delta"] != 0]
    head = changed.head(top)
    out = [(str(r[key]), int(r.a), int(r.b), int(r.delta)) for _, r in head.iterrows()]
    rest = df.drop(head.index)
    if len(changed) > top:
        out.append(
            (
                f"others ({len(rest):,} rows)",
                int(rest["a"].sum()),
                int(rest["b"].sum()),
                int(rest["delta"].sum()),
            )
        )
    return out


def _reference_largest(x: Analysis, y: Analysis, n: int) -> list[tuple[int, int, int, int]]:
    """(IPU, occurrence, cycles in A, cycles in B) of the ``n`` aligned steps with the largest
    |delta| over the whole alignment, ties in the alignment's order (IPU, name, occurrence)."""
    sa, sb = _read(x), _read(y)
    ia, ib, occ = align_steps(sa, sb)
    d = sb.cycles[ib] - sa.cycles[ia]
    nz = np.flatnonzero(d)
    top = nz[np.argsort(-np.abs(d[nz]), kind="stable")[:n]]
    return [
        (int(sa.ipu[ia[j]]), int(occ[j]), int(sa.cycles[ia[j]]), int(sb.cycles[ib[j]])) for j in top
    ]


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_the_diff_says_what_the_whole_computation_says(walkthrough_profiles, pair):
    paths = tuple(walkthrough_profiles[k] for k in pair)
    with Analysis.open(paths[0]) as x, Analysis.open(paths[1]) as y:
        d = diff_runs(x, y, largest=25)
        # every figure of the partial summary is the whole summary's
        for an in (x, y):
            ex = an.execution
            assert isinstance(ex, PartialExecutionSummary)
            whole = summarise_execution(an.src)
            for f in dataclasses.fields(ExecutionSummary):
                got, want = getattr(ex, f.name), getattr(whole, f.name)
                if isinstance(want, np.ndarray):
                    assert got.dtype == want.dtype and np.array_equal(got, want), f.name
                else:
                    assert got == want, f.name
    with Analysis.open(paths[0]) as x, Analysis.open(paths[1]) as y:
        p = compare_pair(x, y)  # whole summaries, pandas tables
        assert d.config_diffs == p.config_diffs
        assert d.explanations == p.explanations
        assert d.other_deltas == p.other_deltas
        assert d.interval == p.metric("total_cycles").interval
        assert d.samples_a == x.metrics.samples and d.samples_b == y.metrics.samples
        assert (d.total_a, d.total_b) == (x.metrics.total_cycles, y.metrics.total_cycles)
    assert d.explanations, "each pair changes a run option that explains something"
    # the tables: sums of the whole step tables, the same rows in the same order
    for rows, label in (
        (d.type_rows, "type"),
        (d.layer_rows, "layer"),
        (d.program_rows, "program"),
    ):
        want = _reference_table(paths, label)
        got = rows.to_frame()
        assert list(got.columns) == list(want.columns)
        assert all(got[c].dtype == np.int64 for c in got.columns if c != label)
        assert got[label].tolist() == want[label].tolist(), label
        for c in got.columns:
            if c != label:
                assert got[c].tolist() == want[c].astype(np.int64).tolist(), (label, c)
        # what the text lists of each IPU: the same rows as listed from the DataFrame
        for ipu in range(int(got["ipu"].max()) + 1):
            for top in (1, 3, 10, 10_000):
                assert _rows(rows.of_ipu(ipu), label, top) == _reference_rows(
                    got[got["ipu"] == ipu], label, top
                )
    al = d.alignment_rows.records()
    with Analysis.open(paths[0]) as x, Analysis.open(paths[1]) as y:
        ia, _, _ = align_steps(_read(x), _read(y))
        want_largest = _reference_largest(x, y, 25)
        ipu_of = _read(x).ipu[ia]
    assert [r["aligned"] for r in al] == np.bincount(ipu_of, minlength=len(al)).tolist()
    assert [(s.ipu, s.occurrence, s.cycles_a, s.cycles_b) for s in d.largest] == want_largest
    # the JSON: every table row, the same keys as the DataFrames' records
    doc = json.loads(json.dumps(d.to_dict()))
    for key, rows in (("by_type", d.by_type), ("by_layer", d.by_layer)):
        assert doc[key] == json.loads(json.dumps(rows.to_dict("records"), default=int))


def test_largest_deltas_from_the_names_that_can_hold_them(synthetic_pair, monkeypatch):
    # a bound from a short prefix of each IPU's steps: only the names with a step at least as
    # long are aligned; the largest deltas are those of the whole alignment, ties included
    a, b = synthetic_pair
    rng = np.random.default_rng(1)
    with Analysis.open(a) as x, Analysis.open(b) as y:
        sa, sb = _read(x), _read(y)
        ia, ib, _ = align_steps(sa, sb)
        for case in ("ties", "spread", "from zero"):
            sb.cycles[ib] = sa.cycles[ia]
            hit = rng.choice(ia.size, 40, replace=False)
            if case == "ties":  # small deltas, most of them tied
                sb.cycles[ib] += rng.integers(-3, 4, ia.size)
            elif case == "spread":  # a few steps changed a lot
                sb.cycles[ib[hit]] += rng.integers(10_000, 20_000, hit.size)
            else:  # steps of no cycles in A, longer than any other in B: |delta| is the bound
                # (among the first 200 steps of their IPU in both runs, so that the bound
                # comes from them)
                early = np.flatnonzero(
                    (ia - sa.offsets[sa.ipu[ia]] < 200) & (ib - sb.offsets[sb.ipu[ib]] < 200)
                )
                assert early.size > 40
                hit = rng.choice(early, 40, replace=False)
                sa.cycles[ia[hit]] = 0
                sb.cycles[ib[hit]] = 10**9
            d = sb.cycles[ib] - sa.cycles[ia]
            nz = np.flatnonzero(d)
            for prefix, grouped in ((16, True), (256, True), (256, False), (1 << 16, True)):
                # (steps not grouped by IPU: each IPU's rows gathered, the same answer)
                sa.grouped = sb.grouped = grouped
                monkeypatch.setattr(diff_mod, "_PREFIX", prefix)
                for n in (0, 1, 5, 50, ia.size + 1):
                    want = nz[np.argsort(-np.abs(d[nz]), kind="stable")[:n]]
                    aligned, tops = diff_mod._aligned_tops(sa, sb, n)
                    assert aligned.sum() == ia.size
                    cat = [np.concatenate(t) for t in zip(*tops)]
                    dd = sb.cycles[cat[1]] - sa.cycles[cat[0]]
                    got = np.argsort(-np.abs(dd), kind="stable")[:n]
                    assert np.array_equal(cat[0][got], ia[want]), (case, prefix, grouped, n)
                    assert np.array_equal(cat[1][got], ib[want]), (case, prefix, grouped, n)


def test_rows_largest_first_as_pandas_sorts_them():
    rng = np.random.default_rng(2)
    for n in (0, 1, 2, 15, 16, 17, 40, 300, 5000):
        for values in (
            rng.integers(-4, 5, n).astype(np.int64),
            rng.integers(-4, 5, n) / 3.0,
            rng.normal(size=n),
        ):
            want = pd.Series(values).abs().sort_values(ascending=False).index.to_numpy()
            assert _largest_first(values).tolist() == want.tolist()


def test_analyse_diff_reads_what_it_prints_and_imports_no_pandas(synthetic_pair, tmp_path):
    # two runs of the same options: no explanation asks for a figure beyond the diff's own
    # sums, so the whole execution summary is never made
    a, b = synthetic_pair
    with Analysis.open(a) as x, Analysis.open(b) as y:
        d = diff_runs(x, y)
        assert not d.config_diffs or all(c.key == "name" for c in d.config_diffs)
        assert x.execution._made is None and y.execution._made is None
    out = tmp_path / "d.json"
    code = (
        "import sys; from analyser.cli import main; "
        f"rc = main(['diff', {str(a)!r}, {str(b)!r}, '--json', '-o', {str(out)!r}]); "
        "print(rc, 'pandas' in sys.modules)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout.split() == ["0", "False"], r.stderr
    assert json.loads(out.read_text())["total_cycles"]["delta"] == d.delta


@pytest.fixture(scope="module")
def synthetic_pair(synthetic_profile):
    opts = dict(n_steps=30_000, n_ipus=3, tiles=16, n_programs=120)
    return synthetic_profile("a.h5", seed=1, **opts), synthetic_profile("b.h5", seed=2, **opts)


def test_steps_not_grouped_by_ipu_sum_the_same(tmp_path, monkeypatch):
    # a file whose steps are in no IPU order (the writer refuses such rows; a file from
    # elsewhere may hold them): the sums go by blocks of rows with (IPU, label) keys
    import h5py

    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    path = tmp_path / "shuffled.h5"
    write_profile(path, make_synthetic_profile(n_steps=5_000, n_ipus=3, tiles=16, n_programs=80))
    order = np.random.default_rng(3).permutation(5_000)
    with h5py.File(path, "r+") as f:
        for ds in f["execution/steps"].values():
            ds[...] = ds[()][order]
    monkeypatch.setattr(diff_mod, "_BLOCK", 1_000)  # several blocks
    with Analysis.open(path) as an:
        side = _read(an)
        assert not side.grouped
        whole = summarise_execution(an.src)
        for name in ("cycles_by_type", "program_cycles_by_ipu", "program_executions_by_ipu"):
            assert np.array_equal(getattr(an.execution, name), getattr(whole, name)), name
