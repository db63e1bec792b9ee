"""Session fixtures of the simulation service: one embedded Dask cluster (two single-threaded
worker processes, loopback only) shared by every test that simulates through the service, so
the cluster's start-up (seconds) is paid once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def sim_cluster(tmp_path_factory):
    """The embedded service (its own LocalCluster), started once per session."""
    from analyser.core.service import SimulationService

    svc = SimulationService(workers=2, cache_dir=tmp_path_factory.mktemp("simcache"))
    svc.client()
    yield svc
    svc.close()


@pytest.fixture
def scheduler_address(sim_cluster) -> str:
    return sim_cluster._cluster.scheduler_address


@pytest.fixture
def sim_service(sim_cluster, scheduler_address, tmp_path):
    """A service on the shared cluster (connected by address) with a fresh, empty cache."""
    from analyser.core.service import SimulationService

    svc = SimulationService(scheduler=scheduler_address, cache_dir=tmp_path / "cache")
    yield svc
    svc.close()
