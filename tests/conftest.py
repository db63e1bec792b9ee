"""Test configuration shared by every test.

Qt runs on the offscreen platform so that a bare ``pytest`` works on a machine with no display.
This must be set before any Qt module is imported, hence at the top of the root conftest.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("MPLBACKEND", "Agg")
# no trace level-of-detail cache in the user's cache folder (tests that check it set their own)
os.environ.setdefault("IPU_ANALYSER_CACHE", "")

# Shared session fixtures provided by plugin modules in tests/ (walkthrough_profiles: the six
# walkthrough profiles simulated once per session; sim_cluster: one Dask cluster for the
# simulation service).
pytest_plugins = ["fixtures_walkthrough", "fixtures_service"]


# -- Python's cycle collector never runs on a Qt pool thread during a test -------------------------
# A collection triggered by an allocation in a pool thread can run a weakref callback that
# disconnects a dead object's Qt signal: Qt's connection lock is then held while PySide waits for
# the interpreter lock, which the GUI thread holds while it waits for Qt's lock (two CI runs hung
# so; gdb showed both threads). The app collects on a timer in its own thread (analyser/gui/app.py,
# pyqtgraph's GarbageCollector); a test may run no event loop, so collection is off during each
# test and happens between tests, on the main thread.
@pytest.fixture(autouse=True)
def _cycle_collection_between_tests():
    import gc

    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# -- a hang ends the run with every thread's stack -------------------------------------------------
# pytest-timeout (pyproject.toml: 300 s, thread method) needs the GIL to act; a run once hung in a
# futex wait with the GIL held (a GUI test, no CPU used, SIGTERM ignored), where it never fired.
# faulthandler's watchdog is a C thread that needs no GIL: after HANG_SECONDS in one test it writes
# every thread's Python stack to the real stderr and exits the process (status 1), so CI fails
# with the stacks instead of hanging until its time limit. HANG_TEST_SECONDS overrides it.
HANG_SECONDS = int(os.environ.get("HANG_TEST_SECONDS", "420"))


def pytest_configure(config):
    import faulthandler
    import sys

    # a copy of the real stderr, taken before output capture starts for the tests
    config._hang_dump_fd = os.dup(sys.stderr.fileno())
    faulthandler.enable(file=config._hang_dump_fd)


def pytest_unconfigure(config):
    fd = getattr(config, "_hang_dump_fd", None)
    if fd is not None:
        import faulthandler

        faulthandler.cancel_dump_traceback_later()
        os.close(fd)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    import faulthandler

    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True, file=item.config._hang_dump_fd)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
