"""The simulation service's options (--workers, --time-limit, --memory-limit, --scheduler) are
checked the same way on every command that simulates (``analyse tune``, ``analyse
critical-path --what-if``): a value no service can use is one sentence naming the option and
exit 2 before any work, no worker started and no output folder made. The cases are
tests/hostile.py's service_option_cases."""

from __future__ import annotations

import tempfile
from pathlib import Path

import hostile
import pytest

#: Seconds a case may take: each is refused before any work (a hang or a cluster of 100,000
#: workers is what this catches).
SECONDS = 30.0


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, hostile.InputCase]:
    import engine
    from engine.config import RunConfig

    root = tmp_path_factory.mktemp("service-options")
    profile = root / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), profile)
    return hostile.service_option_cases(profile, root / "cases")


with tempfile.TemporaryDirectory() as _d:
    NAMES = list(hostile.service_option_cases(Path(_d) / "p.h5", Path(_d) / "c"))


@pytest.mark.parametrize("name", NAMES)
def test_a_service_option_no_service_can_use_is_one_sentence(cases, name, monkeypatch):
    from analyser.sim import service

    def no_service(*a, **kw):
        raise AssertionError("a simulation service was started")

    monkeypatch.setattr(service, "get_service", no_service)
    monkeypatch.setattr(service.SimulationService, "__init__", no_service)
    case = cases[name]
    o = hostile.run_in_process(case.argv, SECONDS)
    assert not o.hung and not o.traceback, (case.argv, o.traceback)
    assert o.code == 2, (case.argv, o.code, o.stderr)
    assert o.stderr.strip().count("\n") == 0, o.stderr
    for text in case.says:
        assert text in o.stderr, (case.argv, o.stderr)
    if "-o" in case.argv:
        assert not Path(case.argv[case.argv.index("-o") + 1]).exists()
