"""Test configuration shared by every test.

Qt runs on the offscreen platform so that a bare ``pytest`` works on a machine with no display.
This must be set before any Qt module is imported, hence at the top of the root conftest.
"""

from __future__ import annotations

import os
import tempfile

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("MPLBACKEND", "Agg")
# no trace level-of-detail cache in the user's cache folder (tests that check it set their own)
os.environ.setdefault("IPU_ANALYSER_CACHE", "")
# the GUI's settings (recent files, last report, theme) of the tests and of the `analyse gui`
# they start go to a folder of the run's own, never to the user's ~/.config (tests once filled
# the real Open Recent list with pytest's temporary files)
_SETTINGS_HOME = tempfile.mkdtemp(prefix="analyser-test-config-")
os.environ["XDG_CONFIG_HOME"] = _SETTINGS_HOME

# Shared session fixtures provided by plugin modules in tests/ (walkthrough_profiles: the six
# walkthrough profiles simulated once per session; sim_cluster: one Dask cluster for the
# simulation service).
pytest_plugins = ["fixtures_walkthrough", "fixtures_service"]


# -- Python's cycle collector runs on the main thread only, between tests ------------------------
# A collection triggered by an allocation in another thread (a Qt pool thread, a Dask thread of
# the session's cluster) can free a cycle holding Qt wrappers there: a QObject then dies on the
# wrong thread, or a weakref callback disconnects a dead object's signal inside Qt's connection
# lock while PySide waits for the interpreter lock the GUI thread holds while waiting for Qt's
# (two CI runs hung so; gdb showed both threads). The app collects on a timer in its own thread
# (analyser/gui/app.py, pyqtgraph's GarbageCollector); the tests do the same: automatic
# collection is off for the whole session, and after each test the main thread collects the
# generations whose thresholds were passed (what automatic collection would have done).
@pytest.fixture(autouse=True)
def _cycle_collection_between_tests():
    import gc

    gc.disable()
    yield
    thresholds = gc.get_threshold()
    counts = gc.get_count()
    for generation in (2, 1, 0):
        if counts[generation] > thresholds[generation]:
            gc.collect(generation)
            break


# -- a hang ends the run with every thread's stack -------------------------------------------------
# pytest-timeout (pyproject.toml: 300 s, thread method) needs the GIL to act; a run once hung in a
# futex wait with the GIL held (a GUI test, no CPU used, SIGTERM ignored), where it never fired.
# faulthandler's watchdog is a C thread that needs no GIL: after HANG_SECONDS in one test it writes
# every thread's Python stack to the real stderr and exits the process (status 1), so CI fails
# with the stacks instead of hanging until its time limit. HANG_TEST_SECONDS overrides it.
HANG_SECONDS = int(os.environ.get("HANG_TEST_SECONDS", "420"))


def _byte_compile_the_project() -> None:
    """Write the project's bytecode once, before the tests start their processes. This machine
    (and CI) runs with PYTHONDONTWRITEBYTECODE=1, so an editable install is never cached: every
    ``analyse`` a test starts, every xdist and Dask worker compiled the modules it imports from
    source again (0.05-0.1 s of CPU an ``analyse summary``: 0.64-0.68 s against 0.52-0.59 s with
    the bytecode written). ``compileall`` writes it whatever that variable says, and Python still
    reads it; a source file changed later is compiled again as usual (its timestamp differs)."""
    import compileall
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for package in ("analyser", "engine", "profiles"):
        compileall.compile_dir(root / package, quiet=2)


def pytest_configure(config):
    import faulthandler
    import gc
    import sys

    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) only
        _byte_compile_the_project()

    gc.disable()  # before any session fixture starts a thread (see _cycle_collection_between_tests)

    # a copy of the real stderr, taken before output capture starts for the tests
    config._hang_dump_fd = os.dup(sys.stderr.fileno())
    faulthandler.enable(file=config._hang_dump_fd)


def pytest_unconfigure(config):
    import shutil

    shutil.rmtree(_SETTINGS_HOME, ignore_errors=True)
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


# -- a small synthetic profile, written once for a test module -------------------------------------
@pytest.fixture(scope="session")
def synthetic_profile(tmp_path_factory):
    """Factory for module fixtures: ``synthetic_profile(name="p.h5", **options)`` writes
    ``profiles.synthetic.make_synthetic_profile(**options)`` as ``name`` in a new temporary
    folder named after it and returns its path."""
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    def write(name: str = "p.h5", **options):
        path = tmp_path_factory.mktemp(name.removesuffix(".h5")) / name
        write_profile(path, make_synthetic_profile(**options))
        return path

    return write


# -- the longest tests start first ------------------------------------------------------------------
# `--dist worksteal` (pyproject.toml) gives each of the two workers one half of the collection and
# lets an idle worker take the second half of the other's queue, so the tests that run last are
# the end of a queue. In the collection's alphabetical order the GUI walks and tune's cluster
# tests (15-45 s each at load 10) came last and the run ended with one core idle while one of them
# finished (docs/performance.md, "The suite"). Modules holding a test marked `slow` now come
# first, in their collection order; every other module follows unchanged. Whole modules move, so
# a module's fixtures are still built once per worker, and every test still runs.
def pytest_collection_modifyitems(session, config, items):
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: the order within each group stays
