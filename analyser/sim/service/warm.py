"""Imported by the workers' fork server alone (the last of
:data:`analyser.sim.service.processes.PRELOAD`): runs the worker's one-off warm-up simulation
(:func:`analyser.sim.service.worker._warm_up`, a tiny simulation without limits that loads what
the engine, the profile writer and the analysis core load on first use) in the server, so every
worker forked from it starts warm instead of each running it before its first simulation (about
0.09 s of CPU per worker). The server starts no thread doing it (it has to fork safely)."""

from __future__ import annotations

from analyser.sim.service import worker

worker._warm_up()
