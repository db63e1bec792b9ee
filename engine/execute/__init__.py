"""Execute: the program tree and every executed step of a compiled program.

Public API
----------
* :func:`execute` ``(compiled) -> Execution``: run the compile engineer's hand-off object
  (``engine.compiled.CompiledProgram``) through the adapter and :func:`execute_plan`.
* :func:`execute_plan` ``(plan) -> Execution``: the core, on a small documented input
  (:class:`ExecutionPlan`, see :mod:`engine.execute.plan`), usable without the compiler.
* :class:`Execution`: ``nodes`` (``/programs/nodes`` columns), ``tile_cycles``, ``leaf_node``
  (compiler leaf id -> node id), ``steps`` (``/execution/steps`` columns), ``attrs``
  (``/execution`` datasets and totals); ``engine.profile_data`` lays them out for the writer.

The model is described in docs/execution-model.md.
"""

from __future__ import annotations

from engine.execute.core import Execution, execute_plan
from engine.execute.plan import (
    ExecutionPlan,
    HostModel,
    IpuPlan,
    LeafPrograms,
    Links,
    StagePlan,
)
from engine.execute.schedule import build_activity, program_stages


def execute(compiled, config=None) -> Execution:
    """Execute a compiled program (``engine.compiled.CompiledProgram``)."""
    from engine.execute.adapter import plan_from_compiled

    return execute_plan(plan_from_compiled(compiled, config))


__all__ = [
    "Execution",
    "ExecutionPlan",
    "HostModel",
    "IpuPlan",
    "LeafPrograms",
    "Links",
    "StagePlan",
    "build_activity",
    "execute",
    "execute_plan",
    "program_stages",
]
