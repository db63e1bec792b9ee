"""What the analyser knows about each run option, on top of its declaration in
``engine.config.RunConfig`` (the one place options are declared, with their types, defaults and
validation; the profile stores the run configuration as that model dumps it).

* the section an option belongs to (the GUI's run form and what-if sections): each section
  starts at a field of the model, and fields keep the model's order, so a new option falls in
  the section of the field before it;
* which figures a change of the option can explain in a comparison
  (:mod:`analyser.core.comparison`), in the order the reasons are given.

A new run option needs nothing here unless it explains a figure; a test checks that every name
used here is a RunConfig field.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import RunConfig

#: Section headings: the first RunConfig field of each section.
SECTION_STARTS: dict[str, str] = {
    "name": "Run",
    "model": "Model and input",
    "target": "Target",
    "micro_batch_size": "Batch",
    "precision": "Precision and optimiser",
    "strategy": "Execution strategy",
    "available_memory_proportion": "Memory",
    "io_tiles": "Host I/O and data loader",
    "output_mode": "Outputs and instrumentation",
}

#: Figures (groups of a comparison's explanations) whose change each option can explain, the
#: options in the order their reasons are listed:
#: ``memory`` OOM tiles and peak memory; ``ipu_memory`` memory per IPU; ``input`` bytes received
#: from the host; ``host_wait`` the host wait share; ``host_time`` host time per sample;
#: ``remote_buffers`` remote-buffer bytes; ``compute_share`` OnTileExecute and ramp shares;
#: ``host_round_trips`` round trips per sample; ``allreduce`` replica all-reduce;
#: ``stage_balance`` pipeline stage balance. (Cycles per sample and throughput are explained by
#: every option that differs.)
EXPLAINS: dict[str, tuple[str, ...]] = {
    "loader_mode": ("host_wait",),
    "loader_workers": ("host_wait",),
    "prefetch_depth": ("host_wait",),
    "eight_bit_input": ("input", "host_wait", "host_time"),
    "host_preprocess_us_per_sample": ("host_wait",),
    "precision": ("memory",),
    "micro_batch_size": ("memory", "input"),
    "recomputation": ("memory",),
    "schedule": ("memory",),
    "available_memory_proportion": ("memory",),
    "offload_optimiser_state": ("memory", "remote_buffers"),
    "optimiser": ("memory",),
    "replicated_tensor_sharding": ("memory",),
    "split_points": ("memory", "ipu_memory", "stage_balance"),
    "num_ipus": ("ipu_memory",),
    "first_moment_dtype": ("memory",),
    "second_moment_dtype": ("memory",),
    "offload_accumulators": ("memory", "remote_buffers"),
    "gradient_accumulation": ("memory", "input", "compute_share"),
    "io_tiles": ("memory", "ipu_memory", "host_wait"),
    "replication_factor": ("memory", "allreduce"),
    "device_iterations": ("input", "host_wait", "host_round_trips"),
}


@dataclass(frozen=True)
class RunOption:
    name: str
    section: str
    explains: tuple[str, ...]


def _options() -> dict[str, RunOption]:
    out: dict[str, RunOption] = {}
    section = "Run"
    for name in RunConfig.model_fields:
        section = SECTION_STARTS.get(name, section)
        out[name] = RunOption(name, section, EXPLAINS.get(name, ()))
    return out


#: Every run option, in the model's order.
OPTIONS: dict[str, RunOption] = _options()


def options_explaining(figure: str) -> tuple[str, ...]:
    """The options whose change can explain ``figure``, in the order reasons are given."""
    return tuple(name for name, figures in EXPLAINS.items() if figure in figures)
