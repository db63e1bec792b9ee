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


# -- a remote cluster that fails mid-tune ------------------------------------------------------
ANALYSE = str(Path(__import__("sys").executable).parent / "analyse")
ROOT = Path(__file__).resolve().parents[1]
#: Worker preload: a simulation of micro-batch 3 or more says it runs (a file) and never ends,
#: so the cluster can be broken while the tune waits on it, with micro-batches 1 and 2 done.
HOLD = """
import os
import threading
from pathlib import Path

import analyser.sim.service.worker as w

# dask imports a preload file twice (its own copy too): wrap the engine's function once
if not hasattr(w, "_unheld"):
    w._unheld = w._simulate

    def _held(config, out):
        if config.get("micro_batch_size", 0) >= 3:
            Path(os.environ["TUNE_HOLD_DIR"], f"running-{config['micro_batch_size']}").touch()
            threading.Event().wait()
        return w._unheld(config, out)

    w._simulate = _held
"""


def _wait_for(predicate, proc, what: str) -> None:
    """Wait for ``predicate`` (an event the processes make true); fail if ``proc`` ends first."""
    import time

    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"the tune ended (exit {proc.returncode}) before {what}")
        time.sleep(0.05)


def _wait_file(path: Path, proc=None) -> None:
    """Wait until ``path`` exists and, for a JSON file (Dask's scheduler file), until it is
    whole: the scheduler creates the file before it has written its contents."""
    import json
    import time

    while True:
        if path.exists():
            if path.suffix != ".json":
                return
            try:
                json.loads(path.read_text())
                return
            except ValueError:
                pass
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{proc.args[:3]} ended before writing {path}")
        time.sleep(0.05)


@pytest.fixture
def remote_cluster(tmp_path):
    """A scheduler and four single-threaded workers in processes of their own (held by
    :data:`HOLD`; one per configuration of the test's tune, so the held ones never queue the
    others behind them); yields (address, scheduler process, worker processes, hold folder)."""
    import json
    import subprocess
    import sys

    hold = tmp_path / "hold"
    hold.mkdir()
    (tmp_path / "hold_preload.py").write_text(HOLD)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TUNE_HOLD_DIR": str(hold)}
    sfile = tmp_path / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    sched = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(sfile),
        ],
        start_new_session=True,
        **quiet,
    )
    workers = []
    try:
        _wait_file(sfile, sched)
        address = json.loads(sfile.read_text())["address"]
        for _ in range(4):
            workers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        address,
                        "--no-nanny",
                        "--nthreads",
                        "1",
                        "--preload",
                        str(tmp_path / "hold_preload.py"),
                    ],
                    start_new_session=True,
                    **quiet,
                )
            )
        from distributed import Client

        with Client(address, set_as_default=False, timeout=60) as c:
            c.wait_for_workers(4, timeout=120)
        yield address, sched, workers, hold
    finally:
        for p in [*workers, sched]:
            p.kill()
            p.wait()


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["workers", "scheduler"])
def test_a_cluster_lost_mid_tune_is_one_sentence_and_keeps_what_was_done(
    remote_cluster, tmp_path, kill
):
    """Every worker killed (the tune waited for ever) or the scheduler killed (the tune exited 0
    with distributed's reconnect traceback, every row "cancelled."): one sentence, exit 2, no
    traceback, the configurations answered before written (and cached) for the resume."""
    import subprocess

    import pandas as pd

    address, sched, workers, hold = remote_cluster
    cfg = _mlp(tmp_path)
    out = tmp_path / "T"
    argv = [ANALYSE, *_tune(cfg, out, ["--scheduler", address], tmp_path / "cache")]
    argv[argv.index("mbs=1,2")] = "mbs=1,2,3,4"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANALYSE_NO_WORKER_SECONDS": "2"}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        # two workers hold micro-batches 3 and 4; 1 and 2 are answered (in the cache)
        _wait_for(lambda: len(list(hold.iterdir())) == 2, proc, "two workers were held")
        _wait_for(lambda: len(list((tmp_path / "cache").glob("*.json"))) >= 2, proc, "two answers")
        for p in workers if kill == "workers" else [sched]:
            p.kill()
            p.wait()
        # bounded: the no-worker grace (2 s) or the lost connection, then the writing
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = err.strip()
    assert proc.returncode == 2, err[-2000:]
    assert err.count("\n") == 0 and "Traceback" not in err, err[-2000:]
    assert address in err and "resume" in err, err
    df = pd.read_parquet(out / "results.parquet")
    assert sorted(df["micro_batch_size"]) == [1, 2] and set(df["status"]) == {"ok"}
    assert all(Path(p).is_file() for p in df["profile"])
