"""Ctrl-C held back while the simulation service's workers start (analyser._sigint)."""

from __future__ import annotations

import os
import signal

import pytest

from analyser._sigint import sigint_deferred
from profiles.atomic import Interrupted


def test_a_ctrl_c_during_the_block_is_raised_when_it_ends():
    ran_to_end = False
    with pytest.raises(Interrupted) as info, sigint_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        ran_to_end = True
    assert ran_to_end, "the block was cut short instead of deferred"
    assert info.value.exit_code == 130


def test_a_failure_caused_by_the_same_ctrl_c_is_an_interruption():
    """The whole process group gets a terminal's Ctrl-C: a worker still starting dies of it, and
    Dask reports "Nanny failed to start worker process". That failure is the user's stop."""
    with pytest.raises(Interrupted) as info, sigint_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        raise RuntimeError("Nanny failed to start worker process")
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_failure_without_ctrl_c_stays_what_it_is():
    with pytest.raises(RuntimeError, match="no signal"), sigint_deferred():
        raise RuntimeError("no signal")


def test_the_handlers_are_restored():
    before = signal.getsignal(signal.SIGINT)
    with sigint_deferred():
        pass
    assert signal.getsignal(signal.SIGINT) is before
