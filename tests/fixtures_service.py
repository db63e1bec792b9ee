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
    from analyser.core.service import SimulationService, get_service, set_service

    owner = get_service()
    owner.client()
    address = owner._cluster.scheduler_address if owner._cluster is not None else owner.scheduler
    set_service(SimulationService(scheduler=address))
    yield owner
    get_service().close()  # the clients first: a client left on a closed cluster logs errors at exit
    owner.close()


@pytest.fixture
def scheduler_address(sim_cluster) -> str:
    cluster = sim_cluster._cluster
    return cluster.scheduler_address if cluster is not None else sim_cluster.scheduler


@pytest.fixture
def sim_service(sim_cluster, scheduler_address, tmp_path):
    """A service on the shared cluster (connected by address) with a fresh, empty cache."""
    from analyser.core.service import SimulationService

    svc = SimulationService(scheduler=scheduler_address, cache_dir=tmp_path / "cache")
    yield svc
    svc.close()
