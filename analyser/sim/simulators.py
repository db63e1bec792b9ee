"""The two :class:`analyser.core.simulator.Simulator` implementations the CLI and the GUI choose
between.

* :class:`InProcessSimulator`: one simulation after another in this process, through the same
  task function as a Dask worker (:func:`analyser.sim.service.worker.run_simulation`) and the
  same on-disk cache: for a few re-simulations (``analyse insights``: three to six of ~0.4 s),
  where starting a cluster (seconds) would cost more than the work.
* :class:`ServiceSimulator`: the simulation service (:mod:`analyser.sim.service`) on its Dask
  cluster, in parallel, cancellable from another thread: for many (``analyse tune``) or when the
  user points at a cluster, and for the GUI, which predicts in the background.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

from analyser.sim.service.request import SimRequest, SimResponse, SimulationRefused
from analyser.sim.service.service import (
    DEFAULT_TIME_LIMIT,
    ENV_SCHEDULER,
    SimCache,
    SimulationService,
    default_cache_dir,
)
from analyser.sim.service.worker import run_simulation


class InProcessSimulator:
    """Simulations in this process, one at a time, answered from and stored in the service's
    cache (so a configuration simulated here is not simulated again by the service, and back).

    ``time_limit`` stops a simulation that runs longer (as on a worker); there is no memory
    limit in process (ask for the cluster, ``--memory-limit``, for one)."""

    def __init__(
        self, cache_dir: str | Path | None = None, time_limit: float | None = DEFAULT_TIME_LIMIT
    ) -> None:
        self.cache = SimCache(cache_dir or default_cache_dir())
        self.time_limit = time_limit

    def simulate(self, config: dict[str, Any]) -> SimResponse:
        """One configuration: the cached answer, else simulated here."""
        try:
            req = SimRequest.make(config)
        except SimulationRefused as exc:
            return SimResponse("", "refused", str(exc), cached=True)
        return self.answer(req)

    def answer(self, req: SimRequest) -> SimResponse:
        """One validated request: the cached answer, else simulated here."""
        hit = self.cache.get(req.key)
        if hit is not None:
            return hit
        data = run_simulation(
            {
                "key": req.key,
                "task": f"local-{req.key}-{os.getpid()}",
                "config": req.config,
                "tag": req.tag,
                "cache_dir": str(self.cache.root),
                "token": self.cache.token,
                "model_file": req.model_file,
                "inputs": req.inputs,
                "time_limit": self.time_limit,
            }
        )
        profile_bytes = data.pop("profile_bytes", None)
        resp = SimResponse.from_dict(data)
        self.cache.put(resp, profile_bytes)
        return resp

    def simulate_many(
        self, configs: Sequence[dict[str, Any]]
    ) -> Generator[tuple[int, SimResponse], None, None]:
        """Each configuration in turn (see :class:`analyser.core.simulator.Simulator`)."""
        for i, config in enumerate(configs):
            yield i, self.simulate(config)


class ServiceSimulator:
    """The simulation service's Dask cluster (started on the first simulation)."""

    def __init__(self, service: SimulationService) -> None:
        self.service = service

    def simulate_many(
        self, configs: Sequence[dict[str, Any]]
    ) -> Generator[tuple[int, SimResponse], None, None]:
        """Submitted together, yielded as they finish; leaving early (an interrupt, closing the
        iterator) cancels the rest (see :class:`analyser.core.simulator.Simulator`)."""
        batch = self.service.submit(list(configs))
        try:
            yield from batch.as_completed()
        finally:
            if not batch.done:
                batch.cancel()


def wants_cluster(
    *, scheduler: str | None = None, workers: int | None = None, memory_limit: Any = None
) -> bool:
    """Whether the user asked for the Dask cluster: a scheduler (``--scheduler`` or
    ``$ANALYSE_SCHEDULER``), a number of worker processes or a memory limit per simulation."""
    return bool(scheduler or os.environ.get(ENV_SCHEDULER)) or (
        workers is not None or memory_limit is not None
    )
