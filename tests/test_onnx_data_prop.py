"""A Range whose values onnx's shape inference would propagate as a shape (tens of bytes per
element): refused in one sentence naming the node when it is longer than any dimension, left to
shape inference without data propagation when it is merely long; either way the command's
memory stays bounded. Each case (tests/hostile.py's onnx_data_prop_cases) runs in a process of
its own under an address-space limit, its peak resident memory measured."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import hostile
import pytest

ANALYSE = str(Path(sys.executable).parent / "analyse")
ROOT = Path(__file__).resolve().parents[1]
#: Address space the command may reserve (Python with onnx and numpy reserve about 1 GiB).
LIMIT = 3 << 30
#: Peak resident memory a case may reach (each needs under 100 MiB; the unbounded propagation
#: reached 2.4 to 5.4 GiB).
PEAK = 600 << 20


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, hostile.InputCase]:
    return hostile.onnx_data_prop_cases(tmp_path_factory.mktemp("onnx-data-prop"))


with tempfile.TemporaryDirectory() as _d:
    NAMES = list(hostile.onnx_data_prop_cases(Path(_d)))


#: Runs ``analyse`` under the limit and prints the peak resident memory of that one child (a
#: fresh process, so RUSAGE_CHILDREN counts only it) after its exit code.
WRAPPER = """
import resource, subprocess, sys
limit = int(sys.argv[1])
def limited():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
code = subprocess.run(sys.argv[2:], preexec_fn=limited).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


@pytest.mark.parametrize("name", NAMES)
def test_a_range_bomb_is_bounded(cases, name):
    import os

    case = cases[name]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(LIMIT), ANALYSE, *case.argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    err = run.stderr
    code, peak = (int(x) for x in run.stdout.split()[-2:])
    assert "Traceback" not in err, err
    assert peak < PEAK, f"{case.argv} reached {peak / 2**20:,.0f} MiB"
    if case.expect is not None:
        assert code == case.expect, (code, err)
        assert err.strip().count("\n") == 0, err
    else:
        assert code in hostile.CLEAN_EXITS, (code, err)
    for text in case.says:
        assert text in err, err
    for text in case.hidden:
        assert text not in err, err
