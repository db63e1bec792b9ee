"""A signal whose handler runs where Python ignores exceptions: a garbage-collector callback
(Dask's ``GCDiagnosis._gc_callback`` during ``analyse tune``), a ``__del__``. Python prints
"Exception ignored in ..." and drops the exception, so the command went on and exited 0. The
signal must still end the command: SIGTERM with 143, Ctrl-C with 130, one line, nothing
printed about an ignored exception, no output left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Runs ``analyse ARGV`` in a fresh interpreter whose first collection (or first ``__del__``
#: of a marked object) sends the signal to its own process and runs Python code while the
#: handler is due, so the handler raises inside the callback.
SCRIPT = """
import gc, os, signal, sys, threading
# Ctrl-C acted on, as a terminal starts a command: a suite started in the background (cmd &,
# nohup) hands its children SIGINT ignored, which analyse keeps ignored, as nohup asks
signal.signal(signal.SIGINT, signal.default_int_handler)
from analyser.cli import main

signum, where, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
fired = []

def hit():
    if fired or signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
        return  # not yet armed: analyse installs its handlers as the command starts
    if threading.current_thread() is not threading.main_thread():
        return  # a handler runs in the main thread only: a collection there is the case
    fired.append(1)
    os.kill(os.getpid(), signum)
    for _ in range(1000):  # bytecodes: the handler runs here, inside the callback
        pass

if where == "gc":
    def callback(phase, info):
        if phase == "start":
            hit()
    gc.callbacks.append(callback)
elif where == "dask-gc":  # in Dask's own callback, once its scheduler has registered it
    from distributed.gc import GCDiagnosis

    original_callback = GCDiagnosis._gc_callback
    def _gc_callback(self, phase, info):
        hit()
        return original_callback(self, phase, info)
    GCDiagnosis._gc_callback = _gc_callback
else:
    class Finalised:
        def __del__(self):
            hit()

    import analyser.cli as cli
    original = cli._main
    def _main(argv):
        Finalised()  # dropped at once: its __del__ runs inside the command
        return original(argv)
    cli._main = _main
gc.enable()
sys.exit(main(argv))
"""


@pytest.mark.parametrize("where", ["gc", "del"])
@pytest.mark.parametrize(
    ("signum", "code", "line"),
    [(signal.SIGTERM, 143, "analyse: terminated."), (signal.SIGINT, 130, "analyse: interrupted.")],
    ids=["sigterm", "ctrl-c"],
)
def test_a_signal_in_a_callback_still_ends_the_command(tmp_path, where, signum, code, line):
    out = tmp_path / "p.h5"
    argv = ["profile", "--quiet", "--model", "resnet50", "-o", str(out)]
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(int(signum)), where, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Exception ignored" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1] == line, p.stderr
    assert not out.exists()
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".tmp")]


@pytest.mark.slow
def test_sigterm_in_dasks_gc_callback_ends_the_tune(tmp_path):
    """The issue's case: ``analyse tune`` on the embedded cluster, SIGTERM handled inside
    ``GCDiagnosis._gc_callback`` (registered by the scheduler in this process)."""
    cfg = tmp_path / "mlp.toml"
    cfg.write_text('model = "mlp"\n')
    argv = ["tune", str(cfg), "--vary", "micro_batch_size=1,2,4,8", "--quiet"]
    argv += ["-o", str(tmp_path / "t"), "--cache", str(tmp_path / "cache"), "--workers", "1"]
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(int(signal.SIGTERM)), "dask-gc", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert p.returncode == 143, (p.returncode, p.stderr)
    assert "Exception ignored" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines()[-1] == "analyse: terminated.", p.stderr
