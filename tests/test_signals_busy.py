"""Ctrl-C and SIGTERM while a command is busy (tests/hostile.py's BUSY_COMMANDS): exit 130 / 143
with one sentence, whatever the command was doing (the signal is sent once the command has used
a second of CPU: it is working, not starting)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import hostile
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> Path:
    import engine
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("busy") / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    return path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("name", list(hostile.BUSY_COMMANDS))
def test_a_signal_while_busy_ends_in_one_sentence(profile, name, sig):
    argv = tuple(a.format(profile=profile) for a in hostile.BUSY_COMMANDS[name])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code, err = hostile.signal_when_busy(argv, sig, env)
    assert code == 128 + sig, (code, err)
    assert err.strip().count("\n") == 0 and "terminate called" not in err, err
