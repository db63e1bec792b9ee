"""Files that the suite's pytest-xdist workers build once and share.

Each xdist worker runs its own session, so a session fixture that simulates profiles ran once per
worker: with ``--dist worksteal`` both workers usually reach the same modules, and the costliest
fixtures (the insights' 25 simulations, the walkthrough's six, the split search's cache) were
built twice. Here the first worker to ask builds a folder under the run's common temporary root
(the parent of each worker's ``basetemp``, pytest-xdist's documented way to share data between
workers) while holding an exclusive lock on it; the other waits on that lock (an event, not a
time) and reuses what was built. Without xdist the folder is simply built in the session's own
temporary root.

The builders write files only; the folders are read-only for the tests, as the per-worker
fixtures were. A build that fails leaves no marker, so the next worker builds again and reports
the same failure itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

_DONE = ".built"


def _root(tmp_path_factory) -> Path:
    base = Path(tmp_path_factory.getbasetemp())
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def shared_folder(tmp_path_factory, key: str) -> Iterator[tuple[Path, bool]]:
    """Hold the run-wide lock of folder ``key`` for the block; yields (folder, fresh), where
    ``fresh`` says the folder is new and the block is to fill it. The folder is marked built
    when a fresh block ends without an exception."""
    root = _root(tmp_path_factory)
    folder = root / f"shared-{key}"
    with open(root / f"shared-{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            fresh = not (folder / _DONE).exists()
            if fresh:
                shutil.rmtree(folder, ignore_errors=True)  # a half-built folder of a failed build
                folder.mkdir()
            yield folder, fresh
            if fresh:
                (folder / _DONE).write_text("ok\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def built_once(tmp_path_factory, key: str, build: Callable[[Path], object]) -> Path:
    """Folder ``key``, filled by ``build(folder)`` by the first worker of the run to ask."""
    with shared_folder(tmp_path_factory, key) as (folder, fresh):
        if fresh:
            build(folder)
    return folder
