"""Faults: Ctrl-C / SIGTERM during a write, kill -9 leftovers, a full disk, strict run
configurations, the resource estimate, HDF5 files behind a user block."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from analyser.cli import main
from profiles import atomic

#: ``analyse`` as a terminal starts it: with Ctrl-C acted on. A command started in the
#: background by a non-interactive shell (``cmd &``, nohup, some CI runners) inherits SIGINT
#: ignored, and analyse keeps an ignored signal ignored, as nohup asks; the Ctrl-C test would
#: then pass or fail with how the suite itself was started.
ANALYSE = [
    sys.executable,
    "-c",
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from analyser.cli import main; sys.exit(main())",
]
#: A run whose write takes a while (1.1 M executed steps) but whose simulation is quick.
LONG_WRITE = ["--model", "mlp", "--mode", "inference", "--device-iterations", "30000", "--quiet"]


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _temporaries(folder: Path, name: str) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(f".{name}.")]


@pytest.fixture(scope="module")
def previous(tmp_path_factory) -> Path:
    import engine
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("prev") / "previous.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    return path


def _start_write(out: Path) -> subprocess.Popen:
    """``analyse profile`` writing ``out``; returns once its temporary file exists (it is in the
    write), so a signal now lands in the middle of the HDF5 write."""
    proc = subprocess.Popen(
        [*ANALYSE, "profile", *LONG_WRITE, "-o", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not _temporaries(out.parent, out.name):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the write never started: {proc.communicate()[1][-300:]}")
        time.sleep(0.02)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_signal_during_profile_write_keeps_previous_file(previous, tmp_path, sig):
    out = tmp_path / "run.h5"
    out.write_bytes(previous.read_bytes())
    before = _digest(out)
    proc = _start_write(out)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    if _digest(out) != before:
        # on a loaded machine the signal can land after the write's last check, in the rename:
        # then the new profile is in place whole (and the command still stopped as asked)
        from profiles import validate

        assert not validate(out), "the previous profile was replaced by a broken one"
    assert not _temporaries(tmp_path, out.name)
    assert "Traceback" not in err and "Exception ignored" not in err
    assert err.strip().count("\n") == 0, err


def test_kill9_leftover_is_cleaned_by_the_next_write(previous, tmp_path):
    out = tmp_path / "run.h5"
    proc = _start_write(out)
    proc.kill()
    proc.communicate(timeout=60)
    left = _temporaries(tmp_path, out.name)
    assert left, "kill -9 leaves the temporary file (nothing can remove it then)"
    other = tmp_path / ".run.h5.notours.tmp"  # not named by a writer of ours: kept
    other.write_bytes(b"x")
    assert main(["profile", "--model", "mlp", "--quiet", "-o", str(out)]) == 0
    assert _temporaries(tmp_path, out.name) == [other.name]


def test_full_disk_is_one_sentence_and_keeps_the_previous_file(previous, tmp_path, capsys):
    out = tmp_path / "run.h5"
    out.write_bytes(previous.read_bytes())
    before = _digest(out)
    real = atomic.free_bytes
    try:
        atomic.free_bytes = lambda folder: 64 * 1024  # type: ignore[assignment]
        code = main(["profile", "--model", "mlp", "--quiet", "-o", str(out)])
    finally:
        atomic.free_bytes = real  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2 and "the disk is full" in err and err.strip().count("\n") == 0
    assert _digest(out) == before and not _temporaries(tmp_path, out.name)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_full_disk_on_a_real_small_file_system(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mnt / "fill").write_bytes(b"\0" * 700_000)
        r = subprocess.run(
            [*ANALYSE, "profile", "--model", "mlp", "--quiet", "-o", str(mnt / "run.h5")],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 2, r.stderr[-500:]
        assert "the disk is full" in r.stderr and r.stderr.strip().count("\n") == 0
        assert sorted(p.name for p in mnt.iterdir()) == ["fill"]
    finally:
        subprocess.run(["umount", str(mnt)])


# -- run configurations ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--loss-scaling", "inf"], "finite"),
        (["--host-preprocess-us-per-sample", "nan"], "finite"),
        (["--target-override", "clock_hz=1e-300"], "plausible"),
        (["--vocab-size", "1000000000000", "--model", "bert-base"], "more than any run"),
        (
            ["--model", "bert-base", "--seq-length", "8192", "--micro-batch-size", "65536"],
            # refused before simulating: the per-tile cycle count a profile's int32 columns hold
            # is passed before the 2^53 element count is reached
            "2^31 - 1",
        ),
        (["--device-iterations", "1000000", "--max-memory", "1G"], "--device-iterations"),
        (["--max-memory", "a lot"], "not a size"),
    ],
)
def test_absurd_run_configurations_are_refused(tmp_path, capsys, argv, words):
    out = tmp_path / "x.h5"
    code = main(
        [
            "profile",
            "--quiet",
            "-o",
            str(out),
            *(argv if "--model" in argv else ["--model", "mlp", *argv]),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and words in err and err.strip().count("\n") == 0, err
    assert not out.exists()


def test_toml_bool_for_a_number_and_deep_nesting(tmp_path, capsys):
    bad = tmp_path / "bool.toml"
    bad.write_text('model = "mlp"\nmicro_batch_size = true\n')
    assert main(["profile", str(bad), "-o", str(tmp_path / "x.h5")]) == 2
    assert "expected a number, got true" in capsys.readouterr().err
    deep = tmp_path / "deep.toml"
    deep.write_text('model = "mlp"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    assert main(["profile", str(deep), "-o", str(tmp_path / "x.h5")]) == 2
    err = capsys.readouterr().err
    assert "too deeply" in err and err.strip().count("\n") == 0


def test_threshold_nan_is_refused(previous, capsys):
    code = main(["insights", "--no-resimulate", "--threshold", "host_wait_high=nan", str(previous)])
    assert code == 2 and "finite" in capsys.readouterr().err


def test_resource_estimate_counts_the_executed_steps():
    """The estimate of a compiled program is at least the steps the engine executes (so the
    memory per step applies to the real count, not a fraction of it)."""
    import engine
    from engine.config import RunConfig
    from engine.resources import BYTES_PER_STEP, estimate_compiled

    for cfg in (
        RunConfig(model="mlp", device_iterations=3),
        RunConfig(model="mlp", mode="inference", device_iterations=5),
        RunConfig(model="mlp", gradient_accumulation=4),
    ):
        r = engine.simulate(cfg, max_memory=0)
        est = estimate_compiled(r.compiled)
        steps = len(r.to_profile_data()["/execution/steps"]["ipu"])
        assert steps * BYTES_PER_STEP <= est.bytes
        assert int(est.detail.split(" ")[0].replace(",", "")) <= 2 * steps + 64


# -- a profile behind a user block is never replaced -----------------------------------------------
def test_profile_with_user_block_is_never_replaced(previous, tmp_path, capsys):
    target = tmp_path / "userblock.h5"
    with h5py.File(target, "w", userblock_size=512) as h5:
        h5["x"] = np.arange(3)
    assert target.read_bytes()[:8] == b"\0" * 8
    before = _digest(target)
    for argv in (
        ["report", str(previous), "-o", str(target)],
        ["export-trace", str(previous), "-o", str(target), "--force"],
    ):
        assert main(argv) == 2
        assert "HDF5" in capsys.readouterr().err
    assert _digest(target) == before


# -- workers die with their parent ----------------------------------------------------------------
def _descendants(pid: int) -> list[int]:
    """Child processes of ``pid``, recursively (from /proc, Linux)."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_simulation_workers_die_with_their_parent(previous, tmp_path):
    """kill -9 of an `analyse insights` that re-simulates with its workers: no worker, nanny or
    resource tracker outlives it (they held ~130 MB each for minutes). Whatever runs the
    re-simulations (a process pool, the Dask service) must keep this."""
    env = {**os.environ, "ANALYSE_CACHE": str(tmp_path / "cache")}
    env.pop("ANALYSE_SCHEDULER", None)
    proc = subprocess.Popen(
        # --workers: the Dask service's workers (a few re-simulations run in process by default)
        [*ANALYSE, "insights", str(previous), "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 120
    while len(_descendants(proc.pid)) < 2 and time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.skip("the command ended before its workers were seen")
        time.sleep(0.1)
    time.sleep(0.5)
    workers = _descendants(proc.pid)
    assert workers, "no worker process was started"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while any(_running(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [w for w in workers if _running(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, f"{len(left)} worker process(es) outlived their parent"


# -- a device, pipe or socket as the output is refused, --force or not ----------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_pipe_or_socket_as_output_is_refused_and_kept(previous, tmp_path, capsys):
    """Writing renames a temporary file over the output, which would put a plain file where the
    pipe or device was (``-o /dev/full`` replaced the device node), and reading a pipe's head to
    see whose file it is blocks: each command refuses at once in one sentence."""
    import socket
    import stat

    fifo = tmp_path / "out.pipe"
    os.mkfifo(fifo)
    sock_path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    demo = tmp_path / "demo"
    demo.mkdir()
    os.mkfifo(demo / "1-base.h5")
    onnx_pipe = tmp_path / "model.onnx"
    os.mkfifo(onnx_pipe)
    cfg = str(Path(__file__).resolve().parents[1] / "assets/runs/mlp-inference.toml")
    try:
        for target, word in ((fifo, "named pipe"), (sock_path, "socket")):
            for argv in (
                ["report", str(previous), "-o", str(target)],
                ["export-trace", str(previous), "-o", str(target), "--force"],
                ["export-trace", str(previous), "-o", str(target), "--format", "perfetto"],
                ["profile", cfg, "-o", str(target), "--force", "--quiet"],
                ["calibrate-host", "-o", str(target), "--force", "--seconds", "1"],
            ):
                assert main(argv) == 2, argv
                err = capsys.readouterr().err
                assert word in err and "Traceback" not in err, (argv, err)
                assert len(err.strip().splitlines()) == 1, err
        for argv in (
            ["demo", "-o", str(demo), "--force"],
            ["export-onnx", "--model", "mlp", "-o", str(onnx_pipe), "--force"],
        ):
            assert main(argv) == 2, argv
            assert "named pipe" in capsys.readouterr().err
        assert stat.S_ISFIFO(os.stat(onnx_pipe).st_mode)
        assert stat.S_ISFIFO(os.stat(fifo).st_mode)
        assert stat.S_ISFIFO(os.stat(demo / "1-base.h5").st_mode)
        assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "demo",
            "model.onnx",
            "out.pipe",
            "s.sock",
        ]
    finally:
        sock.close()


def _signal_on_first(monkeypatch, module, name: str, sig: int) -> None:
    """``module.name`` sends ``sig`` to this process on its first call, then does its work."""
    real = getattr(module, name)
    sent = []

    def wrapped(*args, **kwargs):
        if not sent:
            sent.append(sig)
            os.kill(os.getpid(), sig)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)


def test_a_signal_during_the_writes_fsync_keeps_the_previous_file(tmp_path, monkeypatch):
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile
    from profiles.writer import os as writer_os

    data = make_synthetic_profile(n_steps=2000, tiles=32, n_programs=20)
    out = tmp_path / "run.h5"
    write_profile(out, data)
    before = _digest(out)
    _signal_on_first(monkeypatch, writer_os, "fsync", signal.SIGINT)
    # as on a terminal, whatever the suite inherited (see ANALYSE)
    previous_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(atomic.Interrupted) as caught:
            write_profile(out, data)
    finally:
        signal.signal(signal.SIGINT, previous_handler)
    assert caught.value.exit_code == 130
    assert _digest(out) == before and not _temporaries(tmp_path, out.name)


def test_a_signal_during_the_rename_stops_the_command_with_the_new_file_whole(
    tmp_path, monkeypatch
):
    from profiles import validate, write_profile
    from profiles.synthetic import make_synthetic_profile
    from profiles.writer import os as writer_os

    out = tmp_path / "run.h5"
    write_profile(out, make_synthetic_profile(n_steps=2000, tiles=32, n_programs=20))
    before = _digest(out)
    _signal_on_first(monkeypatch, writer_os, "replace", signal.SIGTERM)
    with pytest.raises(atomic.Interrupted) as caught:  # exited 0 before: the signal forgotten
        write_profile(out, make_synthetic_profile(n_steps=3000, tiles=32, n_programs=20))
    assert caught.value.exit_code == 143
    assert _digest(out) != before and not validate(out)
    assert not _temporaries(tmp_path, out.name)
