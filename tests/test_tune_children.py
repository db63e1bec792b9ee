"""``analyse tune`` returns only once the processes it started are gone: the embedded cluster's
worker processes and multiprocessing's resource tracker (which outlived the command by
seconds). Checked with a subreaper (tests/hostile.py's survivors): any process the command
started that is still there when it returns, a zombie included, becomes the subreaper's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hostile
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux subreaper")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["done", "refused-after-start"])
def test_no_process_of_a_tune_outlives_it(tmp_path, how):
    cfg = tmp_path / "mlp.toml"
    cfg.write_text('model = "mlp"\nmicro_batch_size = 2\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANALYSE_CACHE": str(tmp_path / "cache")}
    env.pop("ANALYSE_SCHEDULER", None)
    argv: tuple[str, ...] = ("tune", str(cfg), "--vary", "mbs=1,2", "--workers", "2", "--quiet")
    if how == "refused-after-start":
        # the grid needs more than the budget: refused once the cluster has started
        argv = (*argv, "--vary", "ga=1,2,4", "--strategy", "grid", "--budget", "2")
    doc = hostile.survivors((*argv, "-o", str(tmp_path / "T")), env)
    assert doc["code"] == (0 if how == "done" else 2), doc["stderr"]
    assert doc["left"] == [], doc["left"]
