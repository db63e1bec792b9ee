"""Session fixtures of the simulation service.

Every simulation of the test session (the service's own tests, tune, the insights' predicted
effects, the GUI's what-ifs) runs on one Dask cluster, the process-wide service's, started on
first use (two single-threaded worker processes, loopback only), so its start-up (seconds) is
paid once. The cache is a temporary folder for the session (``ANALYSE_CACHE``, inherited by the
``analyse`` subprocesses the tests start), removed at the end.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_CACHE = None
if not os.environ.get("ANALYSE_CACHE"):
    _CACHE = tempfile.mkdtemp(prefix="analyse-test-cache-")
    os.environ["ANALYSE_CACHE"] = _CACHE


def pytest_sessionfinish(session, exitstatus):
    if _CACHE:
        shutil.rmtree(_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def sim_cluster():
    """The service that owns the session's cluster: the process-wide one's (started now if it
    was not yet). The process-wide service becomes a client of that cluster, so a test that
    reconfigures it (an in-process ``analyse tune --scheduler ...``) never closes the cluster."""
    from analyser.sim.service import SimulationService, get_service, set_service

    owner = get_service()
    owner.client()
    address = owner._cluster.scheduler_address if owner._cluster is not None else owner.scheduler
    # the cluster requires its per-run TLS credentials of every client
    set_service(SimulationService(scheduler=address, security=owner.security))
    yield owner
    get_service().close()  # the clients first: a client left on a closed cluster logs errors at exit
    owner.close()


@pytest.fixture
def scheduler_address(sim_cluster) -> str:
    cluster = sim_cluster._cluster
    return cluster.scheduler_address if cluster is not None else sim_cluster.scheduler


@pytest.fixture
def cluster_security(sim_cluster):
    """The shared cluster's TLS credentials (``distributed.security.Security``), which every
    client connecting to it by address must present."""
    return sim_cluster.security


@pytest.fixture(scope="session")
def scheduler_args(sim_cluster, tmp_path_factory) -> list[str]:
    """``analyse`` options that reach the shared cluster: its address and its credentials as
    the files ``--tls-ca-file`` / ``--tls-cert`` / ``--tls-key`` read (what a user of a
    TLS-secured cluster of their own gives)."""
    sec = sim_cluster.security
    folder = tmp_path_factory.mktemp("cluster-tls")
    files = {}
    for name, text in (
        ("ca.pem", sec.tls_ca_file),
        ("cert.pem", sec.tls_client_cert),
        ("key.pem", sec.tls_client_key),
    ):
        files[name] = folder / name
        files[name].write_text(text)
        files[name].chmod(0o600)
    address = sim_cluster._cluster.scheduler_address
    return [
        "--scheduler",
        address,
        "--tls-ca-file",
        str(files["ca.pem"]),
        "--tls-cert",
        str(files["cert.pem"]),
        "--tls-key",
        str(files["key.pem"]),
    ]


@pytest.fixture
def sim_service(sim_cluster, scheduler_address, tmp_path):
    """A service on the shared cluster (connected by address) with a fresh, empty cache."""
    from analyser.sim.service import SimulationService

    svc = SimulationService(
        scheduler=scheduler_address, cache_dir=tmp_path / "cache", security=sim_cluster.security
    )
    yield svc
    svc.close()
