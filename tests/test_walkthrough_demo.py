"""``analyse demo``: writes the six walkthrough profiles (only its own names) and a table."""

from __future__ import annotations

import pytest

from analyser.cli import main
from profiles import open_profile, validate

NAMES = ["1-base", "2-half", "3-accumulate", "4-device-iterations", "5-8bit-io", "6-async"]


@pytest.mark.slow
def test_demo_writes_six_profiles_and_leaves_other_files_alone(tmp_path, capsys):
    out = tmp_path / "demo"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "2-half.h5").write_bytes(b"stale")  # one of the demo's names, but not a profile:
    assert main(["demo", "-o", str(out), "--no-report"]) == 2  # refused, nothing written
    assert "2-half.h5" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["2-half.h5", "notes.txt"]
    # replaced on request (wide enough that the table cuts no cell)
    assert main(["demo", "-o", str(out), "--no-report", "--force", "--width", "200"]) == 0
    text = capsys.readouterr().out
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["notes.txt", *(f"{n}.h5" for n in NAMES)]
    )
    for n in NAMES:
        assert validate(out / f"{n}.h5") == []
        with open_profile(out / f"{n}.h5") as p:
            assert p.has_execution == (n != "1-base")
    assert "OOM" in text and "fits" in text and "6-async" in text


def test_demo_refuses_an_output_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "demo"
    f.write_text("not a folder")
    assert main(["demo", "-o", str(f)]) == 2
    err = capsys.readouterr().err
    assert "not a folder" in err and "Traceback" not in err
    assert f.read_text() == "not a folder"
