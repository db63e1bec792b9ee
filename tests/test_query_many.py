"""SQL over many profiles at once (``analyse query A.h5 B.h5 ... SQL``, a folder, a tune
folder): every table gains a ``profile`` column, ``runs`` has a row per profile, and the bounds of
one-profile queries hold over the set."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import analyser.query.many as many
from analyser.cli import main
from analyser.query import QueryError, query
from profiles import open_profile


def _write(path: Path, **kw) -> Path:
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    write_profile(path, make_synthetic_profile(**kw))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A folder as a tune leaves it: start.h5, best-1.h5, an out-of-memory best-2.h5, and
    files that are not profiles."""
    folder = tmp_path_factory.mktemp("runs")
    _write(folder / "start.h5", n_steps=3000, n_ipus=2, tiles=32, n_programs=30, seed=1)
    _write(folder / "best-1.h5", n_steps=5000, n_ipus=1, tiles=32, n_programs=40, seed=2)
    _write(folder / "best-2.h5", tiles=32, n_programs=20, oom=True)
    (folder / "tune.json").write_text("{}")
    (folder / "notes.txt").write_text("not a profile")
    return folder


def _n_steps(path: Path) -> int:
    with open_profile(path) as p:
        return p.n_steps


def test_every_table_has_a_profile_column_with_each_profiles_rows(runs):
    a, b = runs / "start.h5", runs / "best-1.h5"
    df = query([a, b], "SELECT profile, count(*) AS n, sum(cycles) AS c FROM steps GROUP BY ALL")
    got = dict(zip(df["profile"], df["n"], strict=True))
    assert got == {str(a): _n_steps(a), str(b): _n_steps(b)}
    for path in (a, b):  # the same sums as each profile queried alone
        alone = query(path, "SELECT sum(cycles) AS c FROM steps")["c"][0]
        assert df.loc[df["profile"] == str(path), "c"].iloc[0] == alone
    ops = query([a, b], "SELECT profile, count(*) AS n FROM operations GROUP BY ALL")
    assert set(ops["profile"]) == {str(a), str(b)}


def test_the_runs_table_has_one_row_per_profile_with_options_and_figures(runs):
    df = query(runs, "SELECT * FROM runs ORDER BY profile")
    assert list(df["profile"]) == [str(runs / n) for n in ("best-1.h5", "best-2.h5", "start.h5")]
    fits = dict(zip(df["profile"], df["fits"], strict=True))
    assert not fits[str(runs / "best-2.h5")]
    assert fits[str(runs / "start.h5")]
    for path in (runs / "start.h5", runs / "best-1.h5"):
        with open_profile(path) as p:
            row = df[df["profile"] == str(path)].iloc[0]
            assert row["total_cycles"] == p.execution_totals()["total_cycles"]
            assert row["num_ipus"] == p.num_ipus
            assert row["micro_batch_size"] == p.run_config["micro_batch_size"]
    # a single profile has the runs table too, labelled by its file name
    one = query(runs / "start.h5", "SELECT profile, n_steps FROM runs")
    assert list(one["profile"]) == ["start.h5"]
    assert one["n_steps"][0] == _n_steps(runs / "start.h5")


def test_a_profile_that_does_not_fit_adds_no_steps_but_is_in_runs(runs):
    df = query(runs, "SELECT DISTINCT profile FROM steps")
    assert str(runs / "best-2.h5") not in set(df["profile"])
    with pytest.raises(QueryError, match="none of the 1 profiles has executed steps"):
        query([runs / "best-2.h5"], "SELECT count(*) FROM steps")


def test_the_same_profile_named_twice_counts_once(runs):
    a = runs / "start.h5"
    df = query([a, a, runs], "SELECT profile, count(*) AS n FROM runs GROUP BY ALL")
    assert sorted(df["n"]) == [1, 1, 1]
    assert len(df) == 3


def test_the_cli_queries_a_folder_and_several_files(runs, capsys):
    code = main(
        [
            "query",
            str(runs / "start.h5"),
            str(runs / "best-1.h5"),
            "SELECT profile, fits FROM runs ORDER BY profile",
            "--format",
            "json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert [r["profile"] for r in json.loads(out)] == [
        str(runs / "best-1.h5"),
        str(runs / "start.h5"),
    ]
    assert main(["query", str(runs), "SELECT count(*) AS n FROM runs", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["3"]


def test_a_link_out_of_the_folder_is_refused_by_name(runs, tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    shutil.copy(runs / "start.h5", folder / "a.h5")
    outside = tmp_path / "outside.h5"
    shutil.copy(runs / "best-1.h5", outside)
    os.symlink(outside, folder / "b.h5")
    with pytest.raises(QueryError, match=r"b\.h5.*leaves its folder"):
        query(folder, "SELECT count(*) FROM runs")


def test_bounds_are_checked_before_anything_is_read(runs, tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(QueryError, match="has no profiles"):
        query(empty, "SELECT 1")
    monkeypatch.setattr(many, "MAX_PROFILES", 2)
    with pytest.raises(QueryError, match="more than 2 profiles"):
        query(runs, "SELECT 1")
    monkeypatch.setattr(many, "MAX_PROFILES", 256)
    monkeypatch.setattr(many, "STEP_BYTES_LIMIT", 1000)
    with pytest.raises(QueryError, match="GiB of step columns"):
        query(runs, "SELECT sum(cycles) FROM steps")
    # the runs table reads no steps: the step bound does not apply to it
    assert len(query(runs, "SELECT * FROM runs")) == 3


def test_result_bounds_hold_over_the_set(runs):
    from analyser.query import query_arrow

    t = query_arrow(runs, "SELECT a.cycles FROM steps a, steps b", max_rows=10)
    assert t.num_rows == 10 and t.schema.metadata[b"more"] == b"1"


def test_the_hostile_many_profile_cases_are_one_sentence(runs, tmp_path, capsys):
    import hostile

    hostile.assert_one_sentence_each(
        hostile.many_profile_cases(runs / "start.h5", tmp_path), capsys
    )


def test_profile_labels_are_dictionary_coded(runs):
    """The profile column costs one byte-wide code per row, not a string per row."""
    from analyser.query import query_arrow

    t = query_arrow([runs / "start.h5", runs / "best-1.h5"], "SELECT profile FROM steps")
    assert t.num_rows == _n_steps(runs / "start.h5") + _n_steps(runs / "best-1.h5")
    assert np.unique(t.column("profile").to_numpy(zero_copy_only=False)).size == 2
