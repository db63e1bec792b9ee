"""Framework defaults as data (``engine/data/frameworks.toml``).

A run names its framework (``RunConfig.framework``: ``poptorch``, ``popart`` or ``tensorflow``);
every option the framework decides when the user does not (data-loader workers, sync / async
loading, optimiser-state location, recomputation, a 16.16 model's partials) comes from this table, each value with the
framework source it was read from. An option the run sets explicitly always wins.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FRAMEWORK_NAMES: tuple[str, ...] = ("poptorch", "popart", "tensorflow")


class Framework(BaseModel):
    """The defaults of one framework, each with its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    display_name: str
    loader_workers: int = Field(ge=0)
    loader_workers_source: str
    loader_mode: Literal["sync", "async", "async-rebatched"]
    loader_mode_source: str
    offload_optimiser_state: Literal["on", "off", "pipelined-if-remote-memory"]
    offload_optimiser_state_source: str
    recomputation_pipelined: Literal["off", "pipeline-stages"]
    recomputation_other: Literal["off"]
    recomputation_source: str
    #: The host's fixed cost of one call in steady state (microseconds), outside the device trace.
    host_call_overhead_us: float = Field(ge=0)
    host_call_overhead_source: str
    #: What the device trace of a *profiled* call shows beyond the steady-state call: a wait in
    #: the call's opening sync with the host (microseconds; 0: none known). Not in throughput.
    profiled_call_wait_us: float = Field(ge=0)
    profiled_call_wait_source: str
    #: How the torch the framework pins runs float16 element-wise ops on the host CPU:
    #: "scalar" (no vectorised CPU kernels for Half) or "as-measured" (the host profile's own).
    host_float16_kernels: Literal["scalar", "as-measured"]
    #: Cost of one float16 element-wise op per element in those scalar kernels on ``host_float16_cpu``
    #: (nanoseconds, one core), scaled to the run's host CPU like every host cost.
    host_scalar_half_ns_per_op: float = Field(ge=0)
    host_float16_cpu: str = ""
    host_float16_source: str
    #: Matmul / convolution partials of a 16.16 model when the run leaves ``partials_type`` auto.
    partials_16_16: Literal["float", "half"]
    partials_16_16_source: str
    #: What a training model sends back besides its loss when the run leaves
    #: ``training_outputs`` auto: "loss", or "output-and-loss" (the model's output too).
    training_outputs: Literal["loss", "output-and-loss"]
    training_outputs_source: str

    def offload(self, pipelined: bool, has_remote_memory: bool) -> bool:
        """Optimiser state in streaming memory by default?"""
        if self.offload_optimiser_state == "pipelined-if-remote-memory":
            return pipelined and has_remote_memory
        return self.offload_optimiser_state == "on"

    def recomputation(self, pipelined_multi_ipu: bool) -> Literal["off", "pipeline-stages"]:
        return self.recomputation_pipelined if pipelined_multi_ipu else self.recomputation_other


@cache
def frameworks() -> dict[str, Framework]:
    """All frameworks of ``engine/data/frameworks.toml``, validated."""
    text = resources.files("engine").joinpath("data/frameworks.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    return {name: Framework(**raw[name]) for name in FRAMEWORK_NAMES}


def get_framework(name: str) -> Framework:
    return frameworks()[name]


__all__ = ["FRAMEWORK_NAMES", "Framework", "frameworks", "get_framework"]
