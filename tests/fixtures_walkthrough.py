"""Session fixture: the six walkthrough profiles, simulated once per test run
(shared by the pytest-xdist workers, tests/shared_files.py).

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
    from shared_files import built_once

    from analyser.cli.demo import walkthrough_configs

    def build(out: Path) -> None:
        import engine
        from engine.config import RunConfig

        for cfg in walkthrough_configs():
            engine.simulate_to_file(RunConfig.from_toml(cfg), out / f"{cfg.stem}.h5")

    out = built_once(tmp_path_factory, "walkthrough", build)
    paths = {cfg.stem: out / f"{cfg.stem}.h5" for cfg in walkthrough_configs()}
    assert tuple(paths) == WALKTHROUGH_STEPS
    return paths
