"""The compile plan: every run option the compiler reads, resolved once from the RunConfig and
the target (:class:`CompilePlan`).

``compile_program`` resolves it before lowering and hands it to every phase (lowering, tile
planning, memory, code); the phases read its fields, never the RunConfig. "auto" options are
already resolved here (the accumulator and optimiser-state dtypes, the partials, the available
memory proportion of each stage, the offload of the optimiser state), and each dtype is given
both as its name (what a variable records) and as bytes per element (what the cost and memory
rules multiply by). The RunConfig itself still reaches :func:`engine.compiler.lowering.lower`
for one purpose: checking its split points and checkpoints against the graph's layers
(``assign_stages``, ``recompute_flags``), which name the options in their messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.compiler.lowering import (
    DTYPE_BYTES,
    OPTIMISER_STATE,
    POPART_FRAMEWORKS,
    final_stage_kept,
)

if TYPE_CHECKING:  # pragma: no cover
    from engine.config import RunConfig
    from engine.targets import Target


@dataclass(frozen=True)
class CompilePlan:
    """The run options the compiler reads, resolved once (see the module docstring)."""

    # -- the run ---------------------------------------------------------------------------
    model: str
    training: bool
    num_ipus: int
    stages: int  # pipeline stages / shards; stage s runs on IPU s
    micro_batch: int
    strategy: str  # single / sharded / pipelined
    schedule: str  # grouped / interleaved / sequential (pipelined training)
    framework: str  # poptorch / popart / tensorflow
    system: str | None  # the system the run spans (racks of the replicas' collectives)
    # -- tiles -----------------------------------------------------------------------------
    tiles_per_ipu: int
    io_tiles: int  # tiles per IPU reserved for streaming I/O
    compute_tiles: int  # tiles per IPU available to compute (tiles - I/O tiles)
    # -- precision: each dtype's name and its bytes per element ----------------------------
    compute_dtype: str  # inputs, activations and matmul operands
    weight_dtype: str  # stored (master) weights and the update
    accumulator_dtype: str  # the gradient accumulators ('auto' resolved)
    compute_bytes: int
    weight_bytes: int
    accumulator_bytes: int
    partials_bytes: int  # matmul / convolution partials ('auto' resolved per framework)
    weight_cast: bool  # stored weights are cast to the compute dtype before use (16.32)
    eight_bit_input: bool  # the input streams as uint8 and is normalised on the IPU
    loss_scaled: bool  # loss scaling on: one more pass to unscale
    # -- memory ----------------------------------------------------------------------------
    memory_proportions: tuple[float, ...]  # available memory proportion of each stage
    # -- recomputation ---------------------------------------------------------------------
    recomputation: str  # off / pipeline-stages / checkpoints ('auto' resolved)
    final_stage_kept: bool  # PopART keeps the final forward stage's activations
    # -- training: gradients, optimiser, replicas ------------------------------------------
    gradient_accumulation: int
    optimiser: str
    optimiser_states: tuple[tuple[str, str], ...]  # (state name, dtype) of each state tensor
    replicas: int  # the replication factor
    replicated_tensor_sharding: bool
    state_shards: int  # replicas the optimiser update is sharded over (1 without RTS)
    offload_accumulators: bool  # accumulators in streaming memory
    offload_optimiser: bool  # optimiser state in streaming memory ('auto' resolved)
    resets_accumulators: bool  # GA > 1 with on-chip accumulators: reset after the step
    popart_optimiser: bool  # PopART's per-tensor optimiser ops and batch norm (PopTorch, PopART)
    # -- programs --------------------------------------------------------------------------
    outlining: bool  # identical ops share one compiled copy of their compute sets
    instrumentation: bool  # per-program cycle counters on every tile
    training_outputs: str  # loss / output-and-loss: what a training step sends to the host
    balance_compute_sets: tuple[str, ...]  # compute sets spread evenly (what-if)

    @classmethod
    def resolve(cls, config: RunConfig, target: Target) -> CompilePlan:
        """Resolve ``config`` (a validated RunConfig) on ``target`` once."""
        gradient_accumulation = int(config.gradient_accumulation)
        replicas = int(config.replication_factor)
        rts = bool(config.replicated_tensor_sharding)
        return cls(
            model=str(config.model),
            training=bool(config.training),
            num_ipus=int(config.num_ipus),
            stages=int(config.stages),
            micro_batch=int(config.micro_batch_size),
            strategy=str(config.strategy),
            schedule=str(config.schedule),
            framework=str(config.framework),
            system=config.system or None,
            tiles_per_ipu=int(target.tiles_per_ipu),
            io_tiles=int(config.io_tiles),
            compute_tiles=int(target.tiles_per_ipu - config.io_tiles),
            compute_dtype=config.compute_dtype,
            weight_dtype=config.weight_dtype,
            accumulator_dtype=config.accumulator,
            compute_bytes=DTYPE_BYTES[config.compute_dtype],
            weight_bytes=DTYPE_BYTES[config.weight_dtype],
            accumulator_bytes=DTYPE_BYTES[config.accumulator],
            partials_bytes=4 if config.partials_dtype == "float32" else 2,
            weight_cast=config.weight_dtype != config.compute_dtype,
            eight_bit_input=bool(config.eight_bit_input),
            loss_scaled=config.loss_scaling != 1,
            memory_proportions=tuple(float(p) for p in config.amp_per_stage),
            recomputation=str(config.recomputation),
            final_stage_kept=bool(final_stage_kept(config)),
            gradient_accumulation=gradient_accumulation,
            optimiser=str(config.optimiser),
            optimiser_states=tuple(
                (name, str(getattr(config, dtype_of)))
                for name, dtype_of in OPTIMISER_STATE[config.optimiser]
            ),
            replicas=replicas,
            replicated_tensor_sharding=rts,
            state_shards=replicas if rts else 1,
            offload_accumulators=config.offload_accumulators == "on",
            offload_optimiser=bool(config.offload_optimiser),
            resets_accumulators=gradient_accumulation > 1 and config.offload_accumulators != "on",
            popart_optimiser=config.framework in POPART_FRAMEWORKS,
            outlining=bool(config.outlining),
            instrumentation=bool(config.instrumentation),
            training_outputs=str(config.training_outputs),
            balance_compute_sets=tuple(config.balance_compute_sets),
        )


__all__ = ["CompilePlan"]
