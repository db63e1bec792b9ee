"""The simulation service (analyser.sim.service): cache, refusals, cancellation, a killed
worker, limits, a scheduler reached by address, and no orphan workers after a killed CLI.

Every test shares the session's Dask cluster (tests/fixtures_service.py); tiny configurations
(the mlp) wherever the walkthrough is not needed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyser.sim.service import SimRequest, SimulationService
from analyser.sim.service.service import wait_until

ROOT = Path(__file__).resolve().parents[1]
WALK = ROOT / "assets" / "runs" / "walkthrough"
MLP = {"model": "mlp", "micro_batch_size": 4}
#: Options that make a walkthrough step a long simulation (about 1.3 s warm on a quiet machine,
#: against 0.12 s for the step itself), for the kill and time-limit tests.
SLOW = {"micro_batch_size": 48, "gradient_accumulation": 128, "device_iterations": 8}
#: the console script of this environment (its __main__ is guarded, as spawned workers need)
ANALYSE = str(Path(sys.executable).parent / "analyse")


def _walk(step: str) -> dict:
    from engine.config import RunConfig

    return RunConfig.from_toml(WALK / f"{step}.toml").to_dict()


def test_cache_hit_and_figures(sim_service):
    first = sim_service.simulate(MLP)
    assert first.status == "ok" and not first.cached
    assert Path(first.profile).is_file() and first.figures["fits"]
    assert first.figures["throughput_samples_per_s"] > 0
    # the figures are the analysis core's, read back from the profile
    from analyser.core import Analysis

    with Analysis.open(first.profile) as a:
        assert a.metrics.total_cycles == first.figures["total_cycles"]
    again = sim_service.simulate(dict(MLP))
    assert again.cached and again.key == first.key and again.profile == first.profile
    # defaults spelt out resolve to the same configuration, hence the same key
    assert SimRequest.make({**MLP, "precision": "32.32"}).key == first.key
    # identical requests in one batch are one task; a different one is another
    batch = sim_service.submit([{**MLP, "micro_batch_size": 8}] * 3)
    out = batch.results(timeout=120)
    assert len({r.key for r in out}) == 1 and all(r.status == "ok" for r in out)
    # a second service on the same cache folder answers from it
    other = SimulationService(scheduler="tcp://127.0.0.1:1", cache_dir=sim_service.cache.root)
    assert other.simulate(MLP).cached  # no connection needed for a cache hit
    other.close()


def test_refusal_is_the_engines_sentence(sim_service):
    bad = sim_service.simulate({"model": "mlp", "precision": "8.8"})
    assert bad.status == "refused" and not bad.profile
    assert "precision" in bad.message and "\n" not in bad.message
    # refused in the worker (needs the model graph): cached like an answer
    cfg = {
        "model": "mlp",
        "strategy": "pipelined",
        "num_ipus": 2,
        "split_points": ["nope"],
        "gradient_accumulation": 4,
    }
    r = sim_service.simulate(cfg)
    assert r.status == "refused" and "nope" in r.message and "\n" not in r.message
    assert sim_service.simulate(cfg).cached


def test_cancellation_drops_queued_and_stops_running(sim_service):
    base = _walk("2-half")
    configs = [{**base, "micro_batch_size": m} for m in (8, 16, 24, 32, 40, 48)]
    batch = sim_service.submit(configs)
    assert wait_until(lambda: batch.progress().running > 0, 60)
    p = batch.progress()
    assert p.total == 6 and p.done + p.running + p.queued == 6
    t0 = time.monotonic()
    assert sim_service.cancel_all() == 1  # what a closing window does; Batch.cancel() alone
    assert batch.wait(30), "cancel did not end the batch"
    stopped_in = time.monotonic() - t0
    statuses = [r.status for r in batch.results()]
    assert statuses.count("cancelled") >= 4, statuses
    assert set(statuses) <= {"ok", "cancelled"}
    assert stopped_in < 20
    # nothing cancelled was cached: asking again simulates
    again = sim_service.simulate(configs[-1])
    assert again.status == "ok" and not again.cached


def _worker_running(service, batch) -> int | None:
    """pid of the worker running the batch's (only) task, asked of the scheduler (which knows
    every worker's pid): asking a just-killed worker itself (``Client.run``) blocked for the
    30 s connect timeout, long enough for the retried attempt to finish unseen."""
    keys = {j.future.key for j in batch._jobs.values()}

    def pid_of(dask_scheduler, keys):
        for ws in dask_scheduler.workers.values():
            if any(ts.key in keys for ts in ws.processing):
                return ws.pid
        return None

    try:
        return service.client().run_on_scheduler(pid_of, keys=keys)
    except Exception:  # the scheduler busy with a worker going away
        return None


def test_killed_worker_is_retried_once_then_reported(sim_service):
    cfg = _walk("2-half")
    batch = sim_service.submit([cfg])
    assert wait_until(lambda: _worker_running(sim_service, batch) is not None, 60)
    os.kill(_worker_running(sim_service, batch), signal.SIGKILL)
    r = batch.results(timeout=180)[0]
    assert r.status == "ok" and r.attempts == 2  # retried on a worker that lives
    assert wait_until(lambda: sim_service.n_workers == 2, 60)

    # long enough (~1M executed steps) that the retried attempt is still running when the test
    # looks for it: on a quiet machine a warm worker finished the short 2-half run before the
    # second kill, and the test waited 60 s for a task that had already succeeded
    slow = {**cfg, **SLOW}
    twice = sim_service.submit([slow])
    for _ in range(2):
        assert wait_until(lambda: _worker_running(sim_service, twice) is not None, 60)
        pid = _worker_running(sim_service, twice)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda p=pid: _worker_running(sim_service, twice) not in (p,), 30)
    r = twice.results(timeout=180)[0]
    assert r.status == "killed" and "died twice" in r.message
    assert wait_until(lambda: sim_service.n_workers == 2, 60)


def test_time_and_memory_limits_are_reported(scheduler_address, cluster_security, tmp_path):
    cfg = _walk("2-half")
    # a simulation several times longer than the limit (the step alone now takes about 0.12 s,
    # under the limit since the engine got faster)
    sec = cluster_security
    with SimulationService(
        scheduler=scheduler_address, cache_dir=tmp_path, time_limit=0.3, security=sec
    ) as s:
        r = s.simulate({**cfg, **SLOW})
    assert r.status == "timeout" and "0.3 s" in r.message
    with SimulationService(
        scheduler=scheduler_address, cache_dir=tmp_path, memory_limit=40 << 20, security=sec
    ) as s:
        r = s.simulate({**cfg, "micro_batch_size": 40})
    assert r.status == "memory" and "memory limit" in r.message
    # the workers are still usable afterwards
    with SimulationService(scheduler=scheduler_address, cache_dir=tmp_path, security=sec) as s:
        after = s.simulate(MLP)
        assert after.status == "ok", after.message


def _tune_mlp(tmp_path: Path, sizes: str, *options: str) -> list[str]:
    """The command ``analyse tune`` of a one-line MLP run over ``micro_batch_size=sizes`` with
    ``options``, its cache and its output (``out``) in ``tmp_path``, without a progress bar."""
    cfg = tmp_path / "mlp.toml"
    cfg.write_text('model = "mlp"\n')
    return [
        ANALYSE,
        "tune",
        str(cfg),
        "--vary",
        f"micro_batch_size={sizes}",
        *options,
        "--cache",
        str(tmp_path / "cache"),
        "-o",
        str(tmp_path / "out"),
        "--quiet",
    ]


def test_tune_cli_on_a_scheduler_by_address(scheduler_args, tmp_path):
    """`--scheduler tls://127.0.0.1:PORT` with `--tls-*` files (a cluster this test session
    started) does the work."""
    out = tmp_path / "out"
    proc = subprocess.run(
        _tune_mlp(tmp_path, "1,2,4", *scheduler_args),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    import pandas as pd

    df = pd.read_parquet(out / "results.parquet")
    assert sorted(df["micro_batch_size"]) == [1, 2, 4]
    assert (df["status"] == "ok").all(), df.loc[df["status"] != "ok", "message"].tolist()
    assert (out / "best-1.h5").is_file() and (out / "report.html").is_file()


def test_unreachable_scheduler_is_one_sentence(tmp_path):
    proc = subprocess.run(
        _tune_mlp(tmp_path, "1,2", "--scheduler", "tcp://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "cannot reach the Dask scheduler" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_no_orphan_workers_after_the_cli_is_killed(tmp_path):
    psutil = pytest.importorskip("psutil")
    proc = subprocess.Popen(
        _tune_mlp(tmp_path, "1,2,4,8,16,32,64,128", "--workers", "1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    parent = psutil.Process(proc.pid)
    try:

        def worker_started() -> bool:
            # a process forked by the workers' fork server (a child of a child)
            return any(
                "forkserver" in " ".join(c.cmdline()) and c.ppid() != proc.pid
                for c in parent.children(True)
                if c.is_running()
            )

        assert wait_until(worker_started, 90)
        children = parent.children(recursive=True)
    finally:
        proc.kill()
        proc.wait()
    _gone, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, [p.cmdline() for p in alive]


def test_a_stopped_run_forgets_the_project_modules_it_first_imported():
    """A simulation stopped inside a first import must not leave a half-executed module of
    ours behind for the worker's next simulation; modules loaded before it, and other
    packages' (an extension cannot be loaded twice), stay."""
    import types

    from analyser.sim.service.worker import _forget_new_modules

    before = set(sys.modules)
    names = ["engine._half_imported_probe", "analyser._half_imported_probe", "_other_probe"]
    for name in names:
        sys.modules[name] = types.ModuleType(name)
    try:
        dropped = _forget_new_modules(before)
        assert sorted(dropped) == sorted(names[:2])
        assert not any(n in sys.modules for n in names[:2]) and "_other_probe" in sys.modules
        assert before <= set(sys.modules)  # nothing imported before the run is touched
    finally:
        for name in names:
            sys.modules.pop(name, None)


def test_a_stopped_run_leaves_no_binding_of_a_forgotten_module_on_its_package():
    """What a stopped run bound on a package kept from before it goes with the modules it
    imported: the submodule attribute (``from pkg import sub`` would return the half-executed
    module without importing it again) and the names a lazy package cached from it (CI saw
    every later run fail with "cannot import name 'write_profile' from 'profiles'")."""
    import types

    from analyser.sim.service.worker import _forget_new_modules

    pkg = types.ModuleType("engine._probe_pkg")
    pkg.__path__ = []
    pkg.__getattr__ = lambda name: None  # a lazy package, as profiles is
    sys.modules[pkg.__name__] = pkg
    before = set(sys.modules)
    sub = types.ModuleType("engine._probe_pkg.sub")
    sys.modules[sub.__name__] = sub

    def cached() -> None: ...

    cached.__module__ = sub.__name__
    pkg.sub, pkg.cached, pkg.kept = sub, cached, len
    try:
        assert _forget_new_modules(before) == [sub.__name__]
        assert "sub" not in vars(pkg) and "cached" not in vars(pkg)
        assert pkg.kept is len  # a binding from elsewhere stays
    finally:
        sys.modules.pop(pkg.__name__, None)
        sys.modules.pop(sub.__name__, None)
