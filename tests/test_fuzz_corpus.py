"""The fuzz corpus in CI. Every hostile profile of tests/hostile.py (structural,
semantic with valid checksums, injection, resource, foreign) through every analysis command:
exit 0, 1, 2 or 130, no traceback, within the time limit, nothing read from other files, no
temporary file left; plus Hypothesis property tests on the reader. The bigger run (more seeds,
subprocesses under a memory limit) is benchmarks/bench_fuzz.py."""

from __future__ import annotations

from pathlib import Path

import hostile
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: Seconds one command may take on one hostile file (the base profile takes ~0.2 s).
PROBE_SECONDS = 20.0
#: Commands run on semantic / structural / resource mutations in CI (benchmarks/bench_fuzz.py runs
#: every command on every mutation): the full validation, every analysis part (summary --json is
#: the JSON report of one profile), the insights and the trace export.
CI_SUBSET = ("validate", "summary --json", "insights", "export-trace")
CASES = [(cat, name) for cat, muts in hostile.profile_mutations().items() for name in muts]


@pytest.fixture(scope="session")
def fuzz_base(tmp_path_factory) -> Path:
    import engine
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("fuzz-base") / "base.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    return path


@pytest.mark.parametrize(("category", "name"), CASES, ids=[f"{c}/{n}" for c, n in CASES])
def test_every_command_is_clean_on_hostile_profiles(fuzz_base, tmp_path, category, name):
    mutation = hostile.profile_mutations()[category][name]
    bad = hostile.mutated(fuzz_base, tmp_path / "in", name, mutation)
    before = bad.read_bytes() if bad.exists() else b""
    out = tmp_path / "out"
    out.mkdir()
    every = category in ("injection", "foreign")  # the rest: the commands that read the most
    for argv in hostile.profile_probes(bad, fuzz_base, out / name, None if every else CI_SUBSET):
        o = hostile.run_in_process(argv, PROBE_SECONDS)
        assert not o.hung, f"{argv} ran longer than {PROBE_SECONDS} s"
        assert not o.traceback, o.traceback
        assert o.clean, (argv, o.code, o.stderr)
        if category == "foreign":
            assert o.code == 2, (argv, o.stderr)
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")], "temporary file left"
    assert bad.read_bytes() == before, "the input profile was changed"


# -- Hypothesis: the reader on randomly damaged values ------------------------------------------
@pytest.fixture(scope="module")
def datasets(fuzz_base) -> list[str]:
    return hostile.numeric_datasets(fuzz_base)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_reader_and_analysis_never_crash(fuzz_base, datasets, tmp_path_factory, data):
    """Any numeric dataset, any element, any odd value: opening and analysing either work or
    raise one ProfileError (a UserFacingError), never anything else."""
    from analyser.core import Analysis
    from profiles.errors import UserFacingError

    edits = data.draw(
        st.lists(
            st.tuples(
                st.sampled_from(datasets),
                st.integers(0, 10**6),
                st.sampled_from(hostile.ODD_VALUES),
            ),
            min_size=1,
            max_size=3,
        )
    )
    path = hostile.mutated(
        fuzz_base, tmp_path_factory.mktemp("hyp"), "p", hostile.set_elements(edits)
    )
    try:
        with Analysis.open(path) as a:
            a.metrics  # noqa: B018 - every part the reports use
            a.memory  # noqa: B018
            a.liveness  # noqa: B018
            if a.execution is not None:
                a.execution.phase_share()
            a.operations  # noqa: B018
    except UserFacingError:
        pass
