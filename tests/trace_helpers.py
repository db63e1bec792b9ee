"""A synthetic profile opened as a :class:`TraceWindow`, shared by the trace query tests
(tests/test_trace_window.py, tests/test_core_bsp.py), which check it against brute force over
the profile's own data."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from analyser.trace.window import TraceWindow
from profiles import open_profile, write_profile
from profiles.synthetic import make_synthetic_profile


@contextmanager
def synthetic_window(folder: Path, **profile: object) -> Iterator[tuple[TraceWindow, dict]]:
    """``make_synthetic_profile(**profile)`` written in ``folder`` and opened as a TraceWindow:
    yields the window and the profile's data, and closes the file after."""
    data = make_synthetic_profile(**profile)
    path = folder / "small.h5"
    write_profile(path, data)
    with open_profile(path) as prof:
        yield TraceWindow(prof), data


def step_columns(data: dict) -> dict[str, np.ndarray]:
    """The profile data's execution steps, a numpy array per column."""
    return {k: np.asarray(v) for k, v in data["/execution/steps"].items()}


def ipu_steps(steps: dict[str, np.ndarray], ipu: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The steps of one IPU (a numpy array per column) and their rows in the whole table."""
    m = steps["ipu"] == ipu
    return {k: v[m] for k, v in steps.items()}, np.flatnonzero(m)
