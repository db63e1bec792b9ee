"""``analyse tune`` folders and clusters under attack or failure: tune.json / results.parquet as
links out of the folder, control characters in what the report shows, tunes into one folder at
once, a full disk, and a remote cluster whose workers or scheduler die mid-tune. Each ends in
one sentence and a non-zero exit, the folder's files intact, and what was simulated kept."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import hostile
import pytest

#: Seconds a crafted-folder case may take (each well under one; a hang is what this catches).
SECONDS = 15.0


def _base(root: Path) -> Path:
    import engine
    from engine.config import RunConfig

    base = root / "base.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), base)
    return base


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return _base(tmp_path_factory.mktemp("tune-hardening"))


@pytest.fixture(scope="module")
def link_cases(tmp_path_factory, base) -> dict[str, hostile.InputCase]:
    return hostile.tune_link_cases(tmp_path_factory.mktemp("tune-links"), base)


def _link_names() -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        b = _base(Path(d))
        return list(hostile.tune_link_cases(Path(d) / "x", b))


LINK_CASES = _link_names()


# -- links out of the folder --------------------------------------------------------------------
@pytest.mark.parametrize("name", LINK_CASES)
def test_a_link_out_of_the_tune_folder_is_refused(link_cases, name):
    case = link_cases[name]
    o = hostile.run_in_process(case.argv, SECONDS)
    assert not o.hung and not o.traceback, o.traceback
    assert o.code == 2 and o.clean, (case.argv, o.code, o.stderr)
    assert o.stderr.strip().count("\n") == 0, o.stderr
    for word in case.says:
        assert word in o.stderr, o.stderr
    for secret in case.hidden:
        assert secret not in o.stderr
    if "-o" in case.argv:
        assert not Path(case.argv[-1]).exists()


def test_a_link_inside_the_tune_folder_is_read(base, tmp_path):
    """A tune.json that links to a file inside the folder is the folder's own: read."""
    d = hostile.tune_folder(tmp_path / "t", base)
    (d / "tune.json").rename(d / "real.json")
    (d / "tune.json").symlink_to("real.json")
    o = hostile.run_in_process(("report", str(d), "-o", str(tmp_path / "r.html")), SECONDS)
    assert o.code == 0 and o.clean, o.stderr


# -- control characters -------------------------------------------------------------------------
def test_control_characters_reach_the_report_only_as_visible_escapes(base, tmp_path):
    d = hostile.tune_control_folder(tmp_path, base)
    out = tmp_path / "r.html"
    o = hostile.run_in_process(("report", str(d), "-o", str(out)), SECONDS)
    assert o.code == 0 and o.clean, o.stderr
    html = out.read_text(encoding="utf-8")
    for ch in ("\x1b", "\x07", "\u202e"):
        assert ch not in html, repr(ch)
    # shown, not dropped: the escapes are visible where the names are
    assert "\\x1b[2J" in html and "\\u202eevil" in html and "note" in html


# -- temporaries and a full disk ----------------------------------------------------------------
def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".tmp.h5")))


def test_writers_into_one_folder_at_once_each_use_their_own_temporary(tmp_path):
    """Four writers of one file at once: every write lands whole, none fails, no temporary is
    left (they shared one name: one of four exited "cannot access ...")."""
    from analyser.sim.tune.results import _write_atomic

    final = tmp_path / "results.parquet"
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def writer(n: int) -> None:
        def write(tmp: Path) -> None:
            start.wait()  # all four hold a temporary at the same moment
            tmp.write_bytes(bytes([n]) * 100_000)

        try:
            _write_atomic(final, write)
        except BaseException as exc:  # pragma: no cover - what the test looks for
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    data = final.read_bytes()
    assert len(data) == 100_000 and len(set(data)) == 1
    assert _temporaries(tmp_path) == []


def test_a_full_disk_names_the_file_and_leaves_no_temporary(tmp_path):
    from analyser.sim.tune.results import TuneResultsError, _write_atomic

    final = tmp_path / "tune.json"
    final.write_text("before")

    def write(tmp: Path) -> None:
        tmp.write_bytes(b"x" * 4096)  # part written, then the disk fills
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(TuneResultsError) as err:
        _write_atomic(final, write)
    msg = str(err.value)
    assert str(final) in msg and "the disk is full" in msg and "\n" not in msg
    assert final.read_text() == "before" and _temporaries(tmp_path) == []


@pytest.fixture
def small_fs(tmp_path):
    """A 256 kB tmpfs (root only), unmounted afterwards."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    subprocess.run(["umount", str(mnt)])


def _mlp(tmp_path: Path) -> Path:
    cfg = tmp_path / "mlp.toml"
    cfg.write_text('model = "mlp"\nmicro_batch_size = 2\n')
    return cfg


def _tune(cfg: Path, out: Path, scheduler_args, cache: Path, *extra: str) -> list[str]:
    return [
        "tune",
        str(cfg),
        "--vary",
        "mbs=1,2",
        *scheduler_args,
        "--cache",
        str(cache),
        "-o",
        str(out),
        "--quiet",
        *extra,
    ]


def test_a_tune_onto_a_full_disk_is_one_sentence_naming_the_file(
    scheduler_args, small_fs, tmp_path, capsys
):
    from analyser.cli import main

    out = small_fs / "T"
    out.mkdir()
    # fill the file system (the profiles a tune copies are larger than what is left)
    fd = os.open(small_fs / "fill", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    code = main(_tune(_mlp(tmp_path), out, scheduler_args, tmp_path / "cache"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0, err
    assert "the disk is full" in err and str(out) in err, err
    assert _temporaries(out) == []


# -- two tunes into one folder ------------------------------------------------------------------
def test_a_second_tune_into_a_folder_being_written_is_refused(scheduler_args, tmp_path, capsys):
    """While one tune runs into T, another into T is refused in one sentence (they raced on the
    same files); once the first is done, the same command runs."""
    from analyser.cli import main
    from analyser.sim.service import SimulationService

    cfg = _mlp(tmp_path)
    out = tmp_path / "T"
    argv = _tune(cfg, out, scheduler_args, tmp_path / "cache")
    seen: dict[str, object] = {}
    real_submit = SimulationService.submit

    def submit(self, requests, *a, **kw):
        if "code" not in seen:  # the first tune is searching: a second one starts now
            seen["code"] = main(argv)
            seen["err"] = capsys.readouterr().err
        return real_submit(self, requests, *a, **kw)

    SimulationService.submit = submit  # type: ignore[method-assign]
    try:
        assert main(argv) == 0
    finally:
        SimulationService.submit = real_submit  # type: ignore[method-assign]
    err = str(seen["err"]).strip()
    assert seen["code"] == 2 and err.count("\n") == 0, err
    assert "another analyse tune" in err and str(out) in err, err
    assert (out / "tune.json").is_file() and (out / "results.parquet").is_file()
    capsys.readouterr()
    assert main(argv) == 0
