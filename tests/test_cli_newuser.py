"""A new user's first hour with ``analyse``: every mistake gives one sentence naming the problem on
stderr, a non-zero exit code, no traceback, and never loses a file.

The profiles are small synthetic ones (profiles.synthetic), so the module runs in seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import pytest

from analyser.cli import COMMANDS, main
from profiles import open_profile, validate, write_profile
from profiles.errors import ProfileError
from profiles.synthetic import make_synthetic_profile

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


@pytest.fixture(scope="module")
def prof(synthetic_profile) -> Path:
    return synthetic_profile("run.h5", n_steps=400, n_ipus=2, tiles=32, n_programs=20, seed=3)


@pytest.fixture
def work(tmp_path, prof) -> Path:
    shutil.copy(prof, tmp_path / "run.h5")
    return tmp_path


def one_sentence(err: str) -> str:
    """The error output is one line (the sentence), with no traceback."""
    assert "Traceback" not in err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("usage:")]
    assert len(lines) == 1, err
    assert lines[0].rstrip().endswith((".", ")")), err
    return lines[0]


# -- the command line itself -----------------------------------------------------------------
def test_no_command_is_an_error_not_a_help_page(capsys):
    assert main([]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    line = one_sentence(cap.err)
    assert "no command given" in line and all(name in line for name in COMMANDS)


def test_unknown_command_suggests_the_close_one(capsys):
    assert main(["sumary", "x.h5"]) == 2
    line = one_sentence(capsys.readouterr().err)
    assert "unknown command 'sumary'" in line and "did you mean 'summary'" in line


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("analyse ")


def test_unknown_flag_and_bad_values_are_one_sentence(capsys, prof):
    for argv in (
        ["summary", str(prof), "--bogus"],
        ["summary", str(prof), "--units", "MB"],
        ["export-trace", str(prof), "-o", "t.x", "--format", "protobuf"],
        ["profile", "--bogus"],  # ~50 options: no usage dump, a pointer to --help
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        line = one_sentence(capsys.readouterr().err)
        assert f"(see 'analyse {argv[0]} --help')" in line
    # the long usage of `profile` is not printed on an error
    with pytest.raises(SystemExit):
        main(["profile", "--bogus"])
    assert "usage:" not in capsys.readouterr().err
    assert main(["profile"]) == 2  # no -o (nor --print-config): one sentence, no usage
    err = capsys.readouterr().err
    assert "usage:" not in err and "-o OUT.h5" in one_sentence(err)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    assert f"usage: analyse {name}" in capsys.readouterr().out


def test_keyboard_interrupt_anywhere_is_one_line(monkeypatch, capsys):
    """Ctrl-C while a command's module is imported (before its run()) used to give a traceback."""
    import importlib

    def interrupted(name, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib, "import_module", interrupted)
    assert main(["summary", "x.h5"]) == 130
    assert capsys.readouterr().err.strip() == "analyse: interrupted."


def test_ctrl_c_in_a_real_process(tmp_path):
    """A real SIGINT during a run: exit 130, one line, no traceback, no partial output file."""
    code = textwrap.dedent(
        """
        import os, signal, sys, time
        import analyser.cli.summary as s
        def run(args):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        s.run = run
        from analyser.cli import main
        sys.exit(main(["summary", "whatever.h5"]))
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip() == "analyse: interrupted."


def test_closed_pipe_is_quiet(tmp_path, prof):
    """`analyse summary --json run.h5 | head -1` used to end with a BrokenPipeError traceback."""
    r = subprocess.run(
        f"{sys.executable} -c 'from analyser.cli import main; import sys; "
        f'sys.exit(main(["summary", "--json", "{prof}"]))\' | head -c 1',
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


# -- bad input files ---------------------------------------------------------------------------
def _bad_files(folder: Path, prof: Path) -> dict[str, tuple[Path, str]]:
    (folder / "empty.h5").write_bytes(b"")
    (folder / "text.h5").write_text("hello\n")
    (folder / "adir.h5").mkdir()
    data = prof.read_bytes()
    (folder / "trunc.h5").write_bytes(data[: len(data) // 3])
    shutil.copy(prof, folder / "nosteps.h5")
    with h5py.File(folder / "nosteps.h5", "a") as f:
        del f["execution/steps"]
    shutil.copy(prof, folder / "badjson.h5")
    with h5py.File(folder / "badjson.h5", "a") as f:
        f["meta"].attrs["run_config"] = "{not json"
    head = bytearray(data)
    head[8:200] = bytes(b ^ 0x55 for b in head[8:200])
    (folder / "headflip.h5").write_bytes(bytes(head))
    return {
        "missing": (folder / "missing.h5", "does not exist"),
        "empty": (folder / "empty.h5", "is empty"),
        "text": (folder / "text.h5", "is not an HDF5 file"),
        "dir": (folder / "adir.h5", "is a folder"),
        "truncated": (folder / "trunc.h5", "truncated"),
        "no steps": (folder / "nosteps.h5", "is incomplete"),
        "bad json": (folder / "badjson.h5", "not valid JSON"),
        "damaged header": (folder / "headflip.h5", "is corrupt"),
    }


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, prof):
    return _bad_files(tmp_path_factory.mktemp("bad"), prof)


READERS = [
    ["summary"],
    ["insights", "--no-resimulate"],
    ["export-trace", "-o", "{out}/t.json"],
    ["report", "-o", "{out}/r.html"],
    ["compare", "{good}"],
    ["gui"],
]


@pytest.mark.parametrize("cmd", READERS, ids=lambda c: c[0])
def test_bad_files_one_sentence(cmd, bad_files, prof, tmp_path, capsys):
    for what, (path, words) in bad_files.items():
        argv = [a.format(out=tmp_path, good=prof) for a in cmd] + [str(path)]
        assert main(argv) == 2, (what, argv)
        line = one_sentence(capsys.readouterr().err)
        assert words in line and path.name in line, (what, line)
    assert list(tmp_path.iterdir()) == []  # nothing written for a bad input


def test_status_ok_without_steps_is_not_presented_as_oom(bad_files):
    """Deleting /execution/steps from a fitting profile used to read as an OOM compile ("the
    program does not fit, nothing ran"): a wrong diagnosis from a damaged file."""
    path = bad_files["no steps"][0]
    with pytest.raises(ProfileError, match="status is 'ok'"):
        open_profile(path)
    kinds = {p.kind for p in validate(path)}
    assert "MissingGroup" in kinds


def test_validate_reads_every_chunk(tmp_path, prof, capsys):
    """A damaged compressed chunk (checksum failure) in a dataset the structure checks do not
    read used to pass `analyse validate` as valid."""
    path = tmp_path / "run.h5"
    # 1,472 tiles: /programs/tile_cycles is large enough to be chunked, compressed, checksummed
    write_profile(path, make_synthetic_profile(n_steps=50, n_ipus=1, tiles=1472, n_programs=20))
    with h5py.File(path, "r") as f:
        ds = f["programs/tile_cycles"]
        offset = ds.id.get_chunk_info(0).byte_offset
    raw = bytearray(path.read_bytes())
    raw[offset + 4 : offset + 12] = bytes(b ^ 0xFF for b in raw[offset + 4 : offset + 12])
    path.write_bytes(bytes(raw))
    problems = validate(path)
    assert any(p.kind == "Unreadable" and p.path == "/programs/tile_cycles" for p in problems)
    assert main(["validate", str(path)]) == 1
    assert "damaged" in capsys.readouterr().out
    assert validate(prof) == []


def test_validate_bad_files_exit_2(bad_files, capsys):
    for what, (path, _words) in bad_files.items():
        code = main(["validate", str(path)])
        assert code in (1, 2), what
        assert "Traceback" not in capsys.readouterr().err


# -- outputs: nothing lost or overwritten ------------------------------------------------------
@pytest.mark.parametrize(
    "cmd", [["report", "{p}", "-o"], ["export-trace", "{p}", "-o"]], ids=lambda c: c[0]
)
def test_outputs_never_replace_a_profile_or_land_nowhere(cmd, work, capsys):
    p = work / "run.h5"
    other = work / "other.h5"
    shutil.copy(p, other)
    before = other.read_bytes()
    notes = work / "notes.txt"
    notes.write_text("precious\n")
    cases = {
        str(other): "existing HDF5 file",  # a report written over another profile
        str(p): "one of the input profiles",
        str(work / "nofolder" / "x.out"): "does not exist",
        str(work): "is a directory",
        str(notes / "x.out"): "is a file, not a folder",
        "/proc/analyse-newuser.out": "cannot write",  # a place nobody may create files in
    }
    for out, words in cases.items():
        argv = [a.format(p=p) for a in cmd] + [out]
        assert main(argv) == 2, out
        assert words in one_sentence(capsys.readouterr().err), out
    assert other.read_bytes() == before and notes.read_text() == "precious\n"
    assert sorted(x.name for x in work.iterdir()) == ["notes.txt", "other.h5", "run.h5"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_folder(work, capsys):
    ro = work / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert main(["report", str(work / "run.h5"), "-o", str(ro / "r.html")]) == 2
        assert "permission denied" in one_sentence(capsys.readouterr().err).lower()
    finally:
        ro.chmod(0o755)


def test_profile_output_refuses_a_non_profile(work, capsys):
    notes = work / "notes.txt"
    notes.write_text("precious\n")
    assert main(["profile", "--model", "mlp", "-o", str(notes), "--quiet"]) == 2
    assert "not an IPU profile" in one_sentence(capsys.readouterr().err)
    assert notes.read_text() == "precious\n"


# -- run configurations -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('model = "mlp"\nmicro_batch_size = [\n', "not valid TOML"),
        ('model = "mlp"\nmicro_bach_size = 4\n', "micro_bach_size"),
        ('model = "mlp"\nmicro_batch_size = 0\n', "micro_batch_size"),
        ('model = "mlp"\nprecision = "16.8"\n', "precision"),
    ],
    ids=["syntax", "unknown key", "bad value", "bad choice"],
)
def test_bad_run_config(text, words, tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(text)
    out = tmp_path / "out.h5"
    assert main(["profile", str(cfg), "-o", str(out), "--quiet"]) == 2
    assert words in one_sentence(capsys.readouterr().err)
    assert not out.exists()


# -- gui: checked before Qt starts (a Qt abort is not a sentence) --------------------------------
def test_gui_needs_a_display():
    from analyser.cli.errors import CliError
    from analyser.cli.gui import check_display

    with pytest.raises(CliError, match="no display"):
        check_display({}, "linux")
    check_display({"DISPLAY": ":0"}, "linux")
    check_display({"QT_QPA_PLATFORM": "offscreen"}, "linux")
    check_display({}, "darwin")


def test_gui_without_display_in_a_real_process(prof):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.pop("QT_QPA_PLATFORM", None)
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; from analyser.cli import main; sys.exit(main(['gui', {str(prof)!r}]))",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if sys.platform.startswith("linux"):
        assert r.returncode == 2
        assert "no display" in one_sentence(r.stderr)


def test_file_system_error_is_one_sentence(monkeypatch, capsys):
    """An OSError from deep inside a command (permission, disk full) is the environment, not a
    bug: one sentence naming the file, no traceback."""
    import analyser.cli.summary as summary

    def run(args):
        raise PermissionError(13, "Permission denied", "/data/run.h5")

    monkeypatch.setattr(summary, "run", run)
    assert main(["summary", "x.h5"]) == 2
    line = one_sentence(capsys.readouterr().err)
    assert "/data/run.h5" in line and "Permission denied" in line


def test_ctrl_c_while_insights_re_simulate_in_workers(tmp_path):
    """Ctrl-C reaches the whole process group, the spawned re-simulation workers included: each
    used to print its own KeyboardInterrupt traceback. The signal is sent once the workers are
    running (seen as child processes), not after a fixed delay."""
    psutil = pytest.importorskip("psutil")
    prof = tmp_path / "r101.h5"
    args = ["--model", "resnet101", "--micro-batch-size", "8", "-o", str(prof), "--quiet"]
    assert main(["profile", *args]) == 0
    # --workers: the Dask cluster's worker processes (a few re-simulations run in process by
    # default, with no worker to reach)
    code = (
        "import sys; from analyser.cli import main; "
        f"sys.exit(main(['insights', {str(prof)!r}, '--workers', '2']))"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )

    def cmdline(c) -> str:
        try:
            return " ".join(c.cmdline())
        except psutil.Error:  # exited meanwhile (zombie or gone)
            return ""

    def alive(w) -> bool:
        try:
            return w.is_running() and w.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    try:
        proc = psutil.Process(p.pid)
        workers = []
        while p.poll() is None and len(workers) < 3:
            with contextlib.suppress(psutil.Error):
                # the workers' fork server and the workers it forked
                workers = [c for c in proc.children(True) if "forkserver" in cmdline(c)]
        assert workers, "the insights finished before any worker was seen"
        os.killpg(p.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        _out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    # stderr is a pipe: the stage lines of a long command (analyser.cli._common.StageLines),
    # then the one line of the interruption
    *stages, last = err.strip().splitlines()
    assert last == "analyse: interrupted." and all(s.startswith("[") for s in stages), err
    psutil.wait_procs(workers, timeout=30)
    assert not any(alive(w) for w in workers)


def test_ctrl_c_closes_the_gui(prof):
    """Qt's event loop never ran Python's SIGINT handler: Ctrl-C in the terminal was ignored until
    the window was closed by hand. The signal comes from another thread while the loop runs."""
    code = textwrap.dedent(
        f"""
        import os, signal, sys, threading
        from PySide6.QtCore import QTimer
        from analyser.cli import main
        from analyser.gui.app import ensure_app
        ensure_app()
        # once the event loop runs: SIGINT from another thread, as a terminal's Ctrl-C arrives
        kill = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        QTimer.singleShot(0, kill.start)
        sys.exit(main(["gui", {str(prof)!r}]))
        """
    )
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # the old behaviour: still running (Ctrl-C ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert r.returncode == 130, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().endswith("analyse: interrupted.")
