"""A re-run replaces its own output even when the format has no room for a marker (CSV, JSON
records, Parquet, the text of ``diff`` and ``roofline``): analyse records each output it wrote
(path, file identity, size, time and a digest of its bytes, in its cache folder) and a later run
replaces a file that still matches its record. Any other file at that path is the user's and is
refused as before; a record that is damaged or does not match is no record (tamperings:
tests/hostile.py, ``output_record_tamperings``)."""

from __future__ import annotations

import hostile
import pytest

from analyser.cli import main


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


@pytest.fixture(scope="module")
def prof(tmp_path_factory):
    import engine
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("record") / "p.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    return path


def _commands(prof, out):
    q = ["query", str(prof), "SELECT 1 AS x"]
    return {
        "query-csv": [*q, "--format", "csv", "-o", str(out)],
        "query-json": [*q, "--format", "json", "-o", str(out)],
        "query-parquet": [*q, "--format", "parquet", "-o", str(out)],
        "diff-text": ["diff", str(prof), str(prof), "-o", str(out)],
        "diff-json": ["diff", str(prof), str(prof), "--json", "-o", str(out)],
        "roofline-text": ["roofline", str(prof), "-o", str(out)],
    }


NAMES = list(_commands("p", "o"))


@pytest.mark.parametrize("name", NAMES)
def test_a_rerun_replaces_its_own_output(name, prof, tmp_path, cache, capsys):
    out = tmp_path / "out.data"
    argv = _commands(prof, out)[name]
    assert main(argv) == 0
    first = out.stat().st_mtime_ns
    assert main(argv) == 0, capsys.readouterr().err
    assert out.stat().st_mtime_ns >= first
    # a file of the user's at the same path is still refused
    out.write_text("precious\n")
    capsys.readouterr()
    assert main(argv) == 2
    assert "not written by analyse" in capsys.readouterr().err
    assert out.read_text() == "precious\n"


@pytest.mark.parametrize("name", list(hostile.output_record_tamperings()))
def test_a_record_that_does_not_match_is_no_record(name, prof, tmp_path, cache, capsys):
    out = tmp_path / "out.csv"
    argv = _commands(prof, out)["query-csv"]
    assert main(argv) == 0
    records = list((cache / "ipu-graph-analyser" / "outputs").glob("*.json"))
    assert len(records) == 1
    hostile.output_record_tamperings()[name](records[0], out)
    before = out.read_bytes()
    capsys.readouterr()
    o = hostile.run_in_process(tuple(argv), 20)
    assert o.clean and o.code == 2, (name, o)
    assert "not written by analyse" in o.stderr, (name, o.stderr)
    assert out.read_bytes() == before


def test_without_a_cache_folder_the_output_is_written_and_a_rerun_is_refused(
    prof, tmp_path, monkeypatch, capsys
):
    """A cache folder that cannot be written (here: a file in its place) does not stop the
    output; the re-run then cannot know the file is ours and refuses it, as before."""
    blocker = tmp_path / "xdg"
    blocker.write_text("a file where the cache folder would be\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    out = tmp_path / "out.csv"
    argv = _commands(prof, out)["query-csv"]
    assert main(argv) == 0 and out.exists()
    capsys.readouterr()
    assert main(argv) == 2
    assert "not written by analyse" in capsys.readouterr().err


def test_the_record_keeps_the_newest_outputs_only(tmp_path, cache, monkeypatch):
    """The record folder is bounded: beyond MAX_RECORDS the oldest records go (only files of
    the record's own naming; anything else there is left alone)."""
    import os

    from analyser import output

    monkeypatch.setattr(output, "MAX_RECORDS", 3)
    folder = output.record_folder()
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("not a record\n")
    outs = []
    for i in range(5):
        out = tmp_path / f"o{i}.csv"
        with output.atomic_output(out) as fh:
            fh.write(f"x\n{i}\n")
        rec = output._record_path(out)
        os.utime(rec, ns=(i * 10**9, i * 10**9))  # distinct ages, oldest first
        outs.append(out)
    left = sorted(p.name for p in folder.iterdir())
    assert "notes.txt" in left and len(left) == 4, left
    assert [output.is_our_output(o) for o in outs] == [False, False, True, True, True]
