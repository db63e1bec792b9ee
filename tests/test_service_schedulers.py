"""Wrong or missing schedulers: ``--scheduler`` at something that is not a
Dask scheduler (an HTTP server), at a host that accepts and never answers, at a Dask worker,
and a cluster whose worker lacks this project. Each is one sentence naming the address (or
the missing package) within a bounded time, exit code 2, no traceback; Ctrl-C while waiting
ends cleanly with 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import hostile
import pytest

ROOT = Path(__file__).resolve().parents[1]
ANALYSE = str(Path(sys.executable).parent / "analyse")


@pytest.fixture
def fake_server(request):
    server = hostile.FakeScheduler(request.param)
    yield server
    server.close()


@pytest.fixture
def own_service():
    """Keep an in-process ``analyse`` command's service options from reaching later tests."""
    from analyser.sim.service import service as mod

    saved, options = mod._SERVICE, dict(mod._OPTIONS)
    yield
    if mod._SERVICE is not saved and mod._SERVICE is not None:
        mod._SERVICE.close()
    mod._SERVICE = saved
    mod._OPTIONS.clear()
    mod._OPTIONS.update(options)


def _tune(tmp_path, scheduler: str) -> list[str]:
    cfg = tmp_path / "mlp.toml"
    cfg.write_text('model = "mlp"\n')
    return [
        "tune",
        str(cfg),
        "--vary",
        "micro_batch_size=1,2",
        "--scheduler",
        scheduler,
        "--cache",
        str(tmp_path / "c"),
        "-o",
        str(tmp_path / "o"),
        "--quiet",
    ]


@pytest.mark.parametrize(
    ("fake_server", "says"), list(hostile.FAKE_SCHEDULERS.items()), indirect=["fake_server"]
)
def test_a_server_that_is_not_a_scheduler_is_one_sentence(
    fake_server, says, tmp_path, capsys, own_service, monkeypatch
):
    from analyser.cli import main
    from analyser.sim.service import remote

    monkeypatch.setattr(remote, "ANSWER_TIMEOUT", 3.0)  # 10 s by default

    t0 = time.monotonic()
    assert main(_tune(tmp_path, fake_server.address)) == 2
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert says in err and fake_server.address in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and "memory" not in err, err
    assert took < 120  # bounded (the wait is 3 s here); before: for ever
    assert not (tmp_path / "o").exists()


def test_a_worker_address_is_not_a_scheduler(sim_cluster, tmp_path, capsys, own_service):
    from analyser.sim.service import ServiceError, SimulationService

    client = sim_cluster.client()
    client.wait_for_workers(1, timeout=60)  # they join once forked, after the client is up
    worker = next(iter(client.scheduler_info()["workers"]))
    svc = SimulationService(scheduler=worker, cache_dir=tmp_path, security=sim_cluster.security)
    with pytest.raises(ServiceError, match="not a scheduler") as info:
        svc.client()
    assert worker in str(info.value)
    svc.close()


def test_ctrl_c_while_waiting_for_a_silent_server_ends_cleanly(tmp_path):
    server = hostile.FakeScheduler("silent")
    try:
        proc = subprocess.Popen(
            [ANALYSE, *_tune(tmp_path, server.address)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # interrupt once it waits on the server (its connection is held open)
        end = time.monotonic() + 60
        while not server.held and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        server.close()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "StopIteration" not in err, err
    assert err.strip().splitlines() == ["analyse: interrupted."], err


HIDE = """
# a Dask worker "without the project installed": its packages cannot be imported
import sys
for name in ("analyser", "engine", "profiles"):
    sys.modules[name] = None
"""


def test_a_worker_without_the_project_is_named(tmp_path, capsys, own_service):
    """A cluster whose worker lacks this project: the command says which worker and which
    package, at once, instead of the worker shutting down and the tune waiting for ever; a
    simulation that reaches such a worker anyway is answered ``failed`` with that sentence."""
    from distributed import LocalCluster

    from analyser.cli import main
    from analyser.sim.service import SimulationService

    hide = tmp_path / "hide_project.py"
    hide.write_text(HIDE)
    cluster = LocalCluster(n_workers=0, host="127.0.0.1", scheduler_port=0, dashboard_address=None)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            cluster.scheduler_address,
            "--no-nanny",
            "--nthreads",
            "1",
            "--preload",
            str(hide),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": ""},
    )
    try:
        svc = SimulationService(scheduler=cluster.scheduler_address, cache_dir=tmp_path / "c")
        from distributed import Client

        with Client(cluster.scheduler_address, set_as_default=False) as c:
            c.wait_for_workers(1, timeout=120)
            (waddr,) = c.scheduler_info()["workers"]
        assert main(_tune(tmp_path, cluster.scheduler_address)) == 2
        err = capsys.readouterr().err
        assert "'analyser'" in err and waddr in err and "install" in err, err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        # past the check (a worker that joined later): the task answers, the worker stays
        svc._check_workers = lambda client: None  # as if the worker had joined after it
        r = svc.run([{"model": "mlp", "micro_batch_size": 3}])[0]
        assert r.status == "failed" and "'analyser'" in r.message and waddr in r.message
        assert worker.poll() is None  # the worker did not shut itself down
        svc.close()
    finally:
        worker.kill()
        worker.wait()
        cluster.close()


def test_the_hostile_scheduler_cases_are_one_sentence(tmp_path, own_service):
    """tests/hostile.py's scheduler class (the fake servers and unusable --tls-* files), as
    benchmarks/bench_fuzz.py runs it: exit 2, the sentence names the problem, no traceback."""
    servers = {"http": hostile.FakeScheduler("http")}  # the silent one: tested above
    try:
        cases = hostile.scheduler_cases(tmp_path, servers)
        for name, case in cases.items():
            o = hostile.run_in_process(case.argv, 60)
            assert o.code == case.expect and not o.traceback and not o.hung, (name, o)
            assert all(t in o.stderr for t in case.says), (name, o.stderr)
            assert o.stderr.count("\n") == 1, (name, o.stderr)
    finally:
        for s in servers.values():
            s.close()


def test_a_scheduler_without_workers_is_one_sentence(tmp_path, own_service, monkeypatch):
    from distributed import LocalCluster

    from analyser.sim.service import ServiceError, SimulationService, remote

    monkeypatch.setattr(remote, "ANSWER_TIMEOUT", 2.0)
    with LocalCluster(n_workers=0, host="127.0.0.1", scheduler_port=0, dashboard_address=None) as c:
        svc = SimulationService(scheduler=c.scheduler_address, cache_dir=tmp_path)
        with pytest.raises(ServiceError, match="has no workers") as info:
            svc.client()
        assert c.scheduler_address in str(info.value)
        svc.close()
