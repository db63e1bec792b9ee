"""One simulation service for everything that re-simulates: insights' predicted effects,
"Predict all", the GUI's what-if and run dialog, and ``analyse tune``.

A request is a validated run configuration (:class:`SimRequest`); a response
(:class:`SimResponse`) is the profile path and its key figures, or the engine's one-sentence
refusal. Work runs on Dask ``distributed`` (an embedded ``LocalCluster`` by default, or the
cluster at ``ANALYSE_SCHEDULER`` / ``--scheduler``) and answers are cached on disk by a hash of
the resolved configuration and the engine. See :mod:`analyser.sim.service.service` and
docs/tune.md.
"""

from analyser.sim.service.request import (
    FIGURE_KEYS,
    SimRequest,
    SimResponse,
    SimulationRefused,
    engine_fingerprint,
    figures_of,
)
from analyser.sim.service.service import (
    ENV_SCHEDULER,
    Batch,
    Progress,
    ServiceError,
    SimCache,
    SimulationService,
    available_cores,
    configure_service,
    default_cache_dir,
    get_service,
    set_service,
    tls_security,
)

__all__ = [
    "ENV_SCHEDULER",
    "FIGURE_KEYS",
    "Batch",
    "Progress",
    "ServiceError",
    "SimCache",
    "SimRequest",
    "SimResponse",
    "SimulationRefused",
    "SimulationService",
    "available_cores",
    "configure_service",
    "default_cache_dir",
    "engine_fingerprint",
    "figures_of",
    "get_service",
    "set_service",
    "tls_security",
]
