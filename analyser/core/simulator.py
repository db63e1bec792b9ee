"""What the analysis asks of a simulator: run configurations in, key figures out.

The core never starts a simulation on its own: a caller that wants predicted effects
(:func:`analyser.core.insights.find_insights`, :func:`~analyser.core.insights.predict_effects`,
:func:`analyser.core.transitions.explain_transitions`) hands it a :class:`Simulator`. The
implementations live in :mod:`analyser.sim` (the only package importing Dask): an in-process one
for a few re-simulations (``analyse insights``: three to six of them) and the simulation
service's Dask cluster for many (``analyse tune``, the GUI's background predictions). The CLI or
the GUI chooses; both answer from the same on-disk cache.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, Protocol, runtime_checkable


class Outcome(Protocol):
    """One simulation's answer (``analyser.sim.service.SimResponse`` is one)."""

    #: the engine's one sentence when it refused the configuration, or why there is no answer
    message: str
    #: the key figures of the simulated configuration (``analyser.sim.service.FIGURE_KEYS``)
    figures: dict[str, Any]

    @property
    def simulated(self) -> bool:
        """Whether the engine answered with figures (fits or out of memory)."""
        ...


@runtime_checkable
class Simulator(Protocol):
    """Simulates run configurations (``engine.config.RunConfig`` dicts)."""

    def simulate_many(
        self, configs: Sequence[dict[str, Any]]
    ) -> Generator[tuple[int, Outcome], None, None]:
        """Yield ``(index into configs, outcome)`` as each simulation finishes (in any order);
        closing the iterator early cancels the simulations not yet answered."""
        ...
