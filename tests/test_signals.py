"""Signals and early interrupts: SIGTERM to the GUI goes through the same
safe quit as Ctrl-C (exit 143, no traceback); SIGTERM / Ctrl-C while ``analyse tune`` starts
its embedded cluster ends with 143 / 130 and one line, no ``distributed`` tracebacks, and
leaves nothing that blocks the documented resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyser.sim.service.service import wait_until

psutil = pytest.importorskip("psutil")

ANALYSE = str(Path(sys.executable).parent / "analyse")


def _idle(pid: int, quiet: float = 0.6, timeout: float = 90) -> bool:
    """Wait until process ``pid`` uses no CPU for ``quiet`` seconds (its event loop idle)."""
    proc = psutil.Process(pid)
    end = time.monotonic() + timeout
    last = sum(proc.cpu_times()[:2])
    since = time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.1)
        now = sum(proc.cpu_times()[:2])
        if now - last > 0.01:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return True
    return False


def test_sigterm_quits_the_gui_like_ctrl_c():
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen(
        [ANALYSE, "gui"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert _idle(proc.pid), "the GUI never settled"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "Interrupted" not in err, err
    assert err.strip().splitlines()[-1:] == ["analyse: terminated."], err


@pytest.mark.parametrize(
    ("signum", "code", "line"),
    [
        (signal.SIGTERM, 143, "analyse: terminated."),
        (signal.SIGINT, 130, "analyse: interrupted."),
    ],
)
def test_a_signal_while_the_cluster_starts_is_one_line(signum, code, line, tmp_path):
    cfg = tmp_path / "mlp.toml"
    cfg.write_text('model = "mlp"\n')
    out = tmp_path / "o"
    argv = [ANALYSE, "tune", str(cfg), "--vary", "micro_batch_size=1,2", "--workers", "2"]
    proc = subprocess.Popen(
        [*argv, "--cache", str(tmp_path / "c"), "-o", str(out), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    parent = psutil.Process(proc.pid)
    try:
        # a worker process is being spawned: the cluster is starting
        assert wait_until(lambda: bool(parent.children(recursive=True)), 90)
        time.sleep(0.3)  # into the workers' start (the nannies are up, the workers starting)
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert "Traceback" not in err and "distributed" not in err, err
    assert err.strip().splitlines() == [line], err
    # nothing half-written that would block running the same command again
    assert not out.exists() or (out / "tune.json").exists() or not any(out.iterdir())


def test_ctrl_c_while_the_command_starts_is_one_line(monkeypatch, capsys):
    """Ctrl-C while ``main`` sets up (it imports the profiles package, h5py, first): 130 and one
    line; it was raised before main's handler and printed a KeyboardInterrupt traceback."""
    import analyser.cli as cli

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_terminate_like_ctrl_c", interrupted)
    assert cli.main(["summary", "x.h5"]) == 130
    assert capsys.readouterr().err == "analyse: interrupted.\n"


def test_interrupted_tune_folder_resumes(tmp_path):
    """A folder that holds only a temporary file of an interrupted tune takes the same command
    again; anything else is still refused, and a results.parquet no tune.json records (one a
    kill -9 left, or the user's) is never replaced, --force or not: nothing says it is the
    tune's."""
    from analyser.cli.errors import CliError
    from analyser.cli.tune import _check_output

    out = tmp_path / "tune-results"
    out.mkdir()
    (out / ".report.html.123.abc.tmp").write_text("")
    _check_output(out, force=False, best_k=3)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(CliError, match="not empty"):
        _check_output(out, force=False, best_k=3)
    (out / "results.parquet").write_bytes(b"PAR1")
    for force in (False, True):
        with pytest.raises(CliError, match=r"results\.parquet, which analyse tune did not write"):
            _check_output(out, force=force, best_k=3)


class _Batch:
    """A batch of the stub service below: answers its first ``answered`` requests, then the
    signal arrives (None: answers every request)."""

    def __init__(self, requests, signum, answered):
        self.requests, self.signum, self.answered = requests, signum, answered

    def as_completed(self):
        from analyser.sim.service import SimResponse
        from profiles.atomic import Interrupted

        for i, r in enumerate(self.requests):
            if self.signum is not None and i >= self.answered:
                raise Interrupted(self.signum)
            yield i, SimResponse(r.key, "refused", "stub.", cached=True)

    def progress(self):
        from analyser.sim.service import Progress

        return Progress(0, 0, 0, len(self.requests))

    def cancel(self):
        pass


class _StubService:
    """A simulation service whose batch is interrupted after ``answered`` answers."""

    def __init__(self, signum, answered):
        self.signum, self.answered = signum, answered

    def request(self, config, model_file=None, tag=""):
        from analyser.sim.service import SimRequest

        return SimRequest.make(config, model_file, tag)

    def submit(self, requests):
        return _Batch(list(requests), self.signum, self.answered)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_search_keeps_the_signals_exit_code(signum, code):
    """SIGTERM during the search: the result carries 143 (analyse tune returned 130 for it);
    a signal before the start configuration is answered is raised again (nothing to write)."""
    from analyser.sim.tune import build_space, tune
    from profiles.atomic import Interrupted

    space = build_space({"model": "mlp"}, ["micro_batch_size=1,2"], [], "throughput")
    result = tune(space, _StubService(signum, answered=1), budget=8, strategy="grid")
    assert result.interrupted and result.exit_code == code
    assert result.start.response.status == "refused"
    with pytest.raises(Interrupted):  # before the start configuration's answer
        tune(space, _StubService(signum, answered=0), budget=8, strategy="grid")
