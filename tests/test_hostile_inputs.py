"""Hostile inputs other than profiles, from the corpus of tests/hostile.py: names that
are not regular files (FIFO, devices, a 2 GB sparse file, a folder) in every place a path is read,
ONNX folding bombs, odd dimensions and external data that leaves the model's folder. Each gives
one sentence and exit 2 (or, for a folding bomb left unfolded, any clean exit) within seconds,
with nothing written and nothing told about files outside the model's folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import hostile
import pytest

from analyser.sim.tune.folder import MAX_ROWS

#: Seconds a case may take (each takes well under one; a hang is what this catches).
SECONDS = 15.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, hostile.InputCase]:
    root = tmp_path_factory.mktemp("hostile-inputs")
    return {
        **{f"nonregular/{k}": v for k, v in hostile.nonregular_cases(root / "nonregular").items()},
        **{f"onnx/{k}": v for k, v in hostile.onnx_cases(root / "onnx").items()},
        **{f"whatif/{k}": v for k, v in hostile.what_if_cases(root / "whatif").items()},
        **{f"model/{k}": v for k, v in hostile.model_option_cases(root / "model").items()},
    }


def _names(builder) -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return list(builder(Path(d) / "x"))


CASES = (
    [f"nonregular/{k}" for k in _names(hostile.nonregular_cases)]
    + [f"onnx/{k}" for k in _names(hostile.onnx_cases)]
    + [f"whatif/{k}" for k in _names(hostile.what_if_cases)]
    + [f"model/{k}" for k in _names(hostile.model_option_cases)]
)


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


# -- crafted tune folders ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def tune_corpus(tmp_path_factory) -> tuple[Path, dict[str, hostile.InputCase]]:
    import engine
    from engine.config import RunConfig

    root = tmp_path_factory.mktemp("hostile-tune")
    base = root / "base.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), base)
    good = hostile.tune_folder(root / "good", base)
    return good, hostile.tune_cases(root / "t", base, rows_bomb=MAX_ROWS + 1)


TUNE_CASES = [
    f"{n}/{c}" for n in hostile.tune_mutations(rows_bomb=MAX_ROWS + 1) for c in ("report", "gui")
]


def test_valid_tune_folder_reports(tune_corpus, tmp_path):
    good, _ = tune_corpus
    o = hostile.run_in_process(("report", str(good), "-o", str(tmp_path / "r.html")), SECONDS)
    assert o.code == 0 and o.clean, (o.stderr, o.traceback)


@pytest.mark.parametrize("name", TUNE_CASES)
def test_crafted_tune_folder_gives_one_sentence(tune_corpus, name):
    _, cases = tune_corpus
    case = cases[name]
    o = hostile.run_in_process(case.argv, SECONDS)
    assert not o.hung and not o.traceback, o.traceback
    assert o.code == 2 and o.clean, (case.argv, o.code, o.stderr)
    assert o.stderr.strip().count("\n") == 0, o.stderr
    assert "tune" in o.stderr, o.stderr
    if "-o" in case.argv:
        assert not Path(case.argv[-1]).exists()


def test_row_profiles_are_confined_to_the_folder_or_the_cache(tune_corpus, tmp_path, monkeypatch):
    """The table's ``profile`` column may name anything; only a file inside the tune folder or
    the simulation cache is ever handed out (the rest: None, never opened)."""
    import pandas as pd

    from analyser.sim.tune import load_results

    good, _ = tune_corpus
    folder = tmp_path / "tune"
    shutil.copytree(good, folder)
    cache = tmp_path / "cache"
    (cache / "ab").mkdir(parents=True)
    cached = cache / "ab" / "p.h5"
    shutil.copyfile(folder / "start.h5", cached)
    outside = tmp_path / "elsewhere.h5"
    shutil.copyfile(folder / "start.h5", outside)
    (folder / "link.h5").symlink_to(outside)
    monkeypatch.setenv("ANALYSE_CACHE", str(cache))
    df = pd.read_parquet(folder / "results.parquet")
    df["profile"] = ["/etc/passwd", str(cached), "../elsewhere.h5"]
    df.to_parquet(folder / "results.parquet", index=False)
    meta = json.loads((folder / "tune.json").read_text())
    meta["best"] = []
    (folder / "tune.json").write_text(json.dumps(meta))
    (folder / "start.h5").unlink()
    table = load_results(folder)
    assert table.profile(0) is None
    assert table.profile(1) == cached.resolve()
    assert table.profile(2) is None
    df["profile"] = [str(folder / "link.h5"), "link.h5", None]
    df.to_parquet(folder / "results.parquet", index=False)
    table = load_results(folder)
    assert table.profile(0) is None and table.profile(1) is None and table.profile(2) is None


# -- the simulation cache -----------------------------------------------------------------------
@pytest.fixture
def sim_entry(tmp_path):
    from analyser.sim.service import FIGURE_KEYS
    from analyser.sim.service.request import SimResponse
    from analyser.sim.service.service import SimCache

    cache = SimCache(tmp_path / "cache")
    figures = {k: (True if k == "fits" else 1000.0) for k in FIGURE_KEYS}
    key = "ab" * 32
    cache.put(SimResponse(key=key, status="ok", figures=figures, seconds=1.0), b"\x89HDF fake")
    return cache, key


def test_valid_simulation_cache_entry_is_served(sim_entry):
    cache, key = sim_entry
    resp = cache.get(key)
    assert resp is not None and resp.cached and resp.profile == str(cache.profile_path(key))


@pytest.mark.parametrize("name", list(hostile.sim_cache_tamperings()))
def test_tampered_simulation_cache_entry_is_a_miss(sim_entry, name):
    cache, key = sim_entry
    hostile.sim_cache_tamperings()[name](cache.root / f"{key}.json", cache.profile_path(key))
    assert cache.get(key) is None, f"the {name} entry was served"


def test_tune_copies_profiles_out_of_the_cache(tmp_path):
    """start.h5 / best-N.h5 are copies (or reflinks), never hard links: editing a tune's result
    must not edit the cache's file."""
    import os

    from analyser.sim.tune.results import _copy_profile

    src = tmp_path / "cache.h5"
    src.write_bytes(b"cached profile")
    dst = tmp_path / "tune" / "best-1.h5"
    dst.parent.mkdir()
    dst.write_bytes(b"old")
    _copy_profile(str(src), dst)
    assert dst.read_bytes() == b"cached profile"
    assert os.stat(dst).st_ino != os.stat(src).st_ino and os.stat(src).st_nlink == 1
    with open(dst, "r+b") as fh:
        fh.write(b"EDITED")
    assert src.read_bytes() == b"cached profile"
    assert not [p for p in dst.parent.iterdir() if p.name.startswith(".")]


# -- displays and outputs -------------------------------------------------------------------------
def test_display_that_does_not_answer_is_one_sentence():
    """DISPLAY naming no X server, or a host that accepts and never answers: one sentence before
    Qt starts (Qt would abort with exit 134 and a hint about libxcb-cursor0)."""
    import socket

    from analyser.cli.errors import CliError
    from analyser.cli.gui import check_display_answers

    with pytest.raises(CliError, match="does not answer: no X server"):
        check_display_answers({"DISPLAY": ":4321"}, "linux")
    with pytest.raises(CliError, match="not a display name"):
        check_display_answers({"DISPLAY": "no-colon-here"}, "linux")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    n = silent.getsockname()[1] - 6000
    try:
        if n >= 0:
            with pytest.raises(CliError, match="did not answer within 1 s"):
                check_display_answers({"DISPLAY": f"127.0.0.1:{n}"}, "linux", seconds=1.0)
    finally:
        silent.close()
    # Qt told to use another platform, or not Linux: nothing to check
    check_display_answers({"DISPLAY": ":4321", "QT_QPA_PLATFORM": "offscreen"}, "linux")
    check_display_answers({"DISPLAY": ":4321"}, "darwin")


@pytest.mark.parametrize("name", list(hostile.output_cases(Path("base.h5"))))
def test_output_in_a_virtual_file_system_names_the_reason(tune_corpus, name):
    if not Path("/proc/self").exists():
        pytest.skip("no /proc")
    base = tune_corpus[0] / "start.h5"
    case = hostile.output_cases(base)[name]
    o = hostile.run_in_process(case.argv, SECONDS)
    assert o.code == 2 and o.clean, (case.argv, o.stderr, o.traceback)
    assert "virtual file system" in o.stderr and "disk is full" not in o.stderr, o.stderr


def test_export_onnx_files_follow_the_umask(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        o = hostile.run_in_process(
            ("export-onnx", "--model", "mlp", "-o", str(tmp_path / "m.onnx")), SECONDS
        )
    finally:
        os.umask(old)
    assert o.code == 0, o.stderr
    for p in (tmp_path / "m.onnx", tmp_path / "m.onnx.data"):
        assert p.stat().st_mode & 0o777 == 0o644, oct(p.stat().st_mode)
