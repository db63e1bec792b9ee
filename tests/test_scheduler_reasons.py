"""``--scheduler`` addresses that name no reachable Dask scheduler, and TLS peers that refuse
each other's certificates: one sentence with the real reason (an unsupported protocol, a host
name that is none, nothing reachable, an HTTP server, a certificate refused in the TLS
handshake), exit 2, no traceback (cases: tests/hostile.py, ``scheduler_address_cases`` and
``tls_refusal_cases``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import hostile
import pytest

#: Seconds a case may take: the reachability check waits at most 5 s, the handshake 10 s.
SECONDS = 60.0


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


def _check(name: str, case: hostile.InputCase) -> None:
    o = hostile.run_in_process(case.argv, SECONDS)
    assert not o.hung and not o.traceback, (name, o)
    assert o.code == case.expect, (name, o.code, o.stderr)
    assert o.stderr.count("\n") == 1, (name, o.stderr)
    for text in case.says:
        assert text in o.stderr, (name, text, o.stderr)
    for text in case.hidden:
        assert text not in o.stderr, (name, text, o.stderr)
    assert not Path(case.argv[-1]).exists()


@pytest.mark.parametrize("name", list(hostile.SCHEDULER_ADDRESSES))
def test_an_address_that_names_no_scheduler_gives_the_reason(name, tmp_path, own_service):
    _check(name, hostile.scheduler_address_cases(tmp_path)[name])


def test_an_http_server_is_named_as_one(tmp_path, own_service, monkeypatch):
    from analyser.sim.service import remote

    monkeypatch.setattr(remote, "ANSWER_TIMEOUT", 3.0)
    server = hostile.FakeScheduler("http")
    try:
        case = hostile.scheduler_cases(tmp_path, {"http": server})["scheduler-http"]
        _check("http", hostile.InputCase(case.argv, says=(*case.says, "HTTP")))
    finally:
        server.close()


def _names() -> list[str]:
    from distributed.security import Security

    with tempfile.TemporaryDirectory() as d:
        return list(hostile.tls_refusal_cases(Path(d), "tls://x:1", Security.temporary()))


@pytest.fixture(scope="module")
def tls_scheduler():
    """A TLS scheduler of its own (no workers: the handshake is what is tested)."""
    from distributed import LocalCluster
    from distributed.security import Security

    sec = Security.temporary()
    with LocalCluster(
        n_workers=0,
        host="127.0.0.1",
        scheduler_port=0,
        dashboard_address="127.0.0.1:0",  # its HTTP routes on a free loopback port
        protocol="tls",
        security=sec,
    ) as cluster:
        yield cluster.scheduler_address, sec


@pytest.mark.parametrize("name", _names())
def test_a_refused_certificate_names_the_tls_handshake(name, tls_scheduler, tmp_path, own_service):
    address, sec = tls_scheduler
    _check(name, hostile.tls_refusal_cases(tmp_path, address, sec)[name])


def test_tls_to_a_server_without_tls_says_so(tmp_path, own_service):
    """``tls://`` at an HTTP server: not a certificate problem, the server speaks no TLS."""
    from distributed.security import Security

    server = hostile.FakeScheduler("http")
    try:
        address = server.address.replace("tcp://", "tls://")
        case = hostile.tls_refusal_cases(tmp_path, address, Security.temporary())["wrong-ca"]
        said = ("TLS handshake", address, "does not speak TLS", "HTTP")
        _check("tls-to-http", hostile.InputCase(case.argv, says=said, hidden=case.hidden))
    finally:
        server.close()
