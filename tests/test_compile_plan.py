"""The compile's typed hand-offs: the compile plan (engine.compiler.compile_plan), resolved once
from the RunConfig and the target, and the executor's transfer record (engine.compiled.ProgramIO).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import engine
from engine.compiled import ProgramIO
from engine.compiler.compile_plan import CompilePlan
from engine.compiler.lowering import DTYPE_BYTES
from engine.config import RunConfig
from tests.run_configs import small_pipelined

ROOT = Path(__file__).resolve().parents[1]

#: compiler files that read the run options from the plan only (never ``config.<option>``)
PLAN_ONLY = ("__init__.py", "plan.py", "memory.py", "memory_records.py", "code.py", "variables.py")


def _config(**overrides) -> RunConfig:
    return RunConfig.from_dict(
        small_pipelined(mode="training", gradient_accumulation=4, **overrides)
    )


def test_plan_is_frozen():
    config = _config()
    plan = CompilePlan.resolve(config, config.get_target())
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.micro_batch = 2  # type: ignore[misc]


@pytest.mark.parametrize("precision", ["16.16", "16.32", "32.32"])
def test_plan_resolves_each_dtype_once_as_name_and_bytes(precision):
    config = _config(precision=precision)
    plan = CompilePlan.resolve(config, config.get_target())
    assert plan.compute_dtype == config.compute_dtype
    assert plan.compute_bytes == DTYPE_BYTES[plan.compute_dtype]
    assert plan.weight_bytes == DTYPE_BYTES[plan.weight_dtype]
    assert plan.accumulator_bytes == DTYPE_BYTES[plan.accumulator_dtype]
    assert plan.partials_bytes == DTYPE_BYTES[config.partials_dtype]
    assert plan.weight_cast == (plan.weight_dtype != plan.compute_dtype)
    # no "auto" survives the resolution
    assert "auto" not in (plan.accumulator_dtype, plan.recomputation)
    assert all(dtype in DTYPE_BYTES for _, dtype in plan.optimiser_states)


def test_plan_gives_each_stage_its_memory_proportion_and_the_compute_tiles():
    config = _config(available_memory_proportion_per_ipu=[0.3, 0.5], io_tiles=32)
    target = config.get_target()
    plan = CompilePlan.resolve(config, target)
    assert plan.memory_proportions == (0.3, 0.5)
    assert len(plan.memory_proportions) == plan.stages == 2
    assert plan.compute_tiles == target.tiles_per_ipu - 32 == plan.tiles_per_ipu - plan.io_tiles


def test_compiled_io_is_a_typed_record_per_stage_and_per_ipu():
    compiled = engine.compile(_config())
    io = compiled.io
    assert isinstance(io, ProgramIO)
    with pytest.raises(dataclasses.FrozenInstanceError):
        io.loss_stage = 0  # type: ignore[misc]
    stages, ipus = compiled.stages, compiled.num_ipus
    assert len(io.activation_bytes) == len(io.gradient_bytes) == stages
    for per_ipu in (io.weight_bytes, io.weight_gradient_bytes, io.remote_bytes, io.stash_bytes):
        assert len(per_ipu) == ipus
    assert io.loss_stage == stages - 1
    # what one stage sends forward, the next sends back as the gradient
    assert io.gradient_bytes[1:] == io.activation_bytes[:-1]
    assert io.activation_bytes[0] > 0 and io.input_bytes_per_sample > 0


def test_converted_compiler_files_never_read_the_run_config():
    reads = {}
    for name in PLAN_ONLY:
        text = (ROOT / "engine" / "compiler" / name).read_text()
        code = re.sub(r'"""[\s\S]*?"""|#[^\n]*', "", text)
        found = re.findall(r"\bconfig\.(\w+)", code)
        # compile_program's entry reads the target and builds the model from the RunConfig
        allowed = {"get_target"} if name == "__init__.py" else set()
        if set(found) - allowed:
            reads[name] = sorted(set(found) - allowed)
    assert not reads, f"compiler files reading the RunConfig instead of the plan: {reads}"
