"""Issue 22: hostile inputs other than profiles, from the corpus of tests/hostile.py: names that
are not regular files (FIFO, devices, a 2 GB sparse file, a folder) in every place a path is read,
ONNX folding bombs, odd dimensions and external data that leaves the model's folder. Each gives
one sentence and exit 2 (or, for a folding bomb left unfolded, any clean exit) within seconds,
with nothing written and nothing told about files outside the model's folder."""

from __future__ import annotations

from pathlib import Path

import hostile
import pytest

#: Seconds a case may take (each takes well under one; a hang is what this catches).
SECONDS = 15.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, hostile.InputCase]:
    root = tmp_path_factory.mktemp("hostile-inputs")
    return {
        **{f"nonregular/{k}": v for k, v in hostile.nonregular_cases(root / "nonregular").items()},
        **{f"onnx/{k}": v for k, v in hostile.onnx_cases(root / "onnx").items()},
    }


def _names(builder) -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return list(builder(Path(d) / "x"))


CASES = [f"nonregular/{k}" for k in _names(hostile.nonregular_cases)] + [
    f"onnx/{k}" for k in _names(hostile.onnx_cases)
]


@pytest.mark.parametrize("name", CASES)
def test_hostile_input_gives_one_sentence(corpus, name):
    case = corpus[name]
    o = hostile.run_in_process(case.argv, SECONDS)
    assert not o.hung, f"{case.argv} ran longer than {SECONDS} s"
    assert not o.traceback, o.traceback
    assert o.clean, (case.argv, o.code, o.stderr)
    if case.expect is not None:
        assert o.code == case.expect, (case.argv, o.code, o.stderr)
        assert o.stderr.strip().count("\n") == 0, o.stderr
    for text in case.hidden:
        assert text not in o.stderr, (case.argv, o.stderr)
    out = Path(case.argv[-1]) if "-o" in case.argv else None
    if out is not None and case.expect == 2:
        assert not out.exists(), f"{out} was written"
        assert not [p for p in out.parent.iterdir() if p.name.startswith(".")], "temporary left"


def test_open_regular_refuses_before_reading(tmp_path):
    """The shared helper: a FIFO is refused without blocking, a file over the limit before a
    byte is read, a regular file within it is read whole; ``inside`` confines relative paths."""
    import os

    from profiles.inputs import InputPathError, inside, read_regular

    os.mkfifo(tmp_path / "p")
    with pytest.raises(InputPathError, match="named pipe"):
        read_regular(tmp_path / "p", "input 'p'")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(InputPathError, match="more than the 99 bytes"):
        read_regular(big, "input 'big'", limit=99)
    assert read_regular(big, "input 'big'", limit=100) == b"x" * 100
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "out").symlink_to(tmp_path / "big")
    assert inside(tmp_path / "sub", "a/b.bin") == (tmp_path / "sub" / "a" / "b.bin").resolve()
    for bad in ("/etc/passwd", "../big", "a/../../big", "out", ""):
        assert inside(tmp_path / "sub", bad) is None, bad
