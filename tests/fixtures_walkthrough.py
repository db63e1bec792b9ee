"""Session fixture: the six walkthrough profiles, simulated once per test session.

Registered in tests/conftest.py (``pytest_plugins``), so any test can ask for
``walkthrough_profiles``: a dict step name -> Path of the written profile, in step order::

    {"1-base": .../1-base.h5, "2-half": ..., "3-accumulate": ..., "4-device-iterations": ...,
     "5-8bit-io": ..., "6-async": ...}

The profiles are written with the embedded engine from assets/runs/walkthrough/*.toml exactly as
``analyse demo`` writes them. Treat the files as read-only (they are shared by every test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

WALKTHROUGH_STEPS = (
    "1-base",
    "2-half",
    "3-accumulate",
    "4-device-iterations",
    "5-8bit-io",
    "6-async",
)


@pytest.fixture(scope="session")
def walkthrough_profiles(tmp_path_factory) -> dict[str, Path]:
    import engine
    from analyser.cli.demo import walkthrough_configs
    from engine.config import RunConfig

    out = tmp_path_factory.mktemp("walkthrough")
    paths: dict[str, Path] = {}
    for cfg in walkthrough_configs():
        path = out / f"{cfg.stem}.h5"
        engine.simulate_to_file(RunConfig.from_toml(cfg), path)
        paths[cfg.stem] = path
    assert tuple(paths) == WALKTHROUGH_STEPS
    return paths
