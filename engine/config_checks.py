"""The checks across run options (a pipeline's split points and IPUs, a system's replicas...)
that :class:`engine.config.RunConfig` runs after its field-level validation; each problem is a
:class:`engine.errors.ConfigError` of one sentence naming the option."""

from __future__ import annotations

from typing import Any

from engine.errors import ConfigError


def check_across(cfg: Any, target: Any) -> None:
    """Raise ConfigError on the first cross-option problem of RunConfig ``cfg`` on ``target``
    (its system checked and framework defaults applied already)."""
    stages = len(cfg.split_points) + 1
    if cfg.strategy == "single":
        if cfg.split_points:
            raise ConfigError(
                "split_points: a single-IPU run takes no split points; set strategy to "
                "'sharded' or 'pipelined', or remove them."
            )
        if cfg.num_ipus != 1:
            raise ConfigError(
                f"num_ipus: strategy 'single' uses 1 IPU per replica, not {cfg.num_ipus}; "
                "use 'sharded' or 'pipelined' with split points."
            )
    else:
        if not cfg.split_points:
            raise ConfigError(
                f"split_points: strategy {cfg.strategy!r} needs at least one split point "
                "(a layer name such as 'layer3.8')."
            )
        if len(set(cfg.split_points)) != len(cfg.split_points):
            raise ConfigError("split_points: each split point may appear only once.")
        if cfg.num_ipus > stages:
            raise ConfigError(
                f"num_ipus: {cfg.num_ipus} IPUs is too many for {len(cfg.split_points)} "
                f"split point(s) ({stages} stages, one IPU each); add split points or use "
                f"num_ipus = {stages}."
            )
        if cfg.num_ipus < stages:
            raise ConfigError(
                f"num_ipus: {len(cfg.split_points)} split point(s) make {stages} stages, "
                f"one per IPU, but num_ipus is {cfg.num_ipus}; set num_ipus = {stages}."
            )
    per_ipu = cfg.available_memory_proportion_per_ipu
    if per_ipu:
        if len(per_ipu) != cfg.num_ipus:
            raise ConfigError(
                f"available_memory_proportion_per_ipu: {len(per_ipu)} value(s) for "
                f"{cfg.num_ipus} IPU(s) per replica; give one per IPU."
            )
        bad = [x for x in per_ipu if not (0 < x <= 1)]
        if bad:
            raise ConfigError(
                f"available_memory_proportion_per_ipu: {bad[0]} is not a proportion "
                "(each must be above 0 and at most 1)."
            )
        if cfg.available_memory_proportion is not None:
            raise ConfigError(
                "available_memory_proportion_per_ipu: give either one proportion for every "
                "IPU (available_memory_proportion) or one per IPU, not both."
            )
    if cfg.mode == "inference" and cfg.gradient_accumulation != 1:
        raise ConfigError(
            "gradient_accumulation: only training accumulates gradients; use 1 for inference."
        )
    # Training pipelines run the backward passes as extra pipeline stages (PopART / PopTorch:
    # 2S - 1 stages for S forward stages under Grouped / Interleaved), so the accumulation
    # must cover them (engine.execute.schedule, docs/execution-model.md).
    need = 2 * stages - 1 if cfg.schedule in ("grouped", "interleaved") else stages
    if cfg.strategy == "pipelined" and cfg.mode == "training" and cfg.gradient_accumulation < need:
        raise ConfigError(
            f"gradient_accumulation: a {stages}-stage {cfg.schedule} training pipeline needs "
            f"gradient_accumulation >= {need} (it is {cfg.gradient_accumulation})."
        )
    if cfg.strategy == "pipelined" and cfg.mode == "inference" and cfg.device_iterations < stages:
        # PopART fills an inference pipeline with the batches of one step (batchesPerStep)
        raise ConfigError(
            f"device_iterations: a {stages}-stage inference pipeline needs device_iterations "
            f">= {stages} to fill it (it is {cfg.device_iterations})."
        )
    if cfg.recomputation == "pipeline-stages" and cfg.strategy != "pipelined":
        raise ConfigError(
            "recomputation: 'pipeline-stages' needs strategy 'pipelined'; use 'checkpoints' "
            "or 'off'."
        )
    if cfg.recomputation == "checkpoints" and not cfg.recompute_checkpoints:
        raise ConfigError(
            "recompute_checkpoints: recomputation 'checkpoints' needs at least one layer name."
        )
    if cfg.recompute_checkpoints and cfg.recomputation != "checkpoints":
        raise ConfigError("recompute_checkpoints: only used with recomputation = 'checkpoints'.")
    if cfg.replicated_tensor_sharding and cfg.replication_factor < 2:
        raise ConfigError("replicated_tensor_sharding: needs replication_factor > 1 (it is 1).")
    if (cfg.input_shapes or cfg.unknown_ops != "error") and not cfg.is_onnx:
        raise ConfigError(
            f"input_shapes / unknown_ops: only ONNX models take them (model is {cfg.model!r})."
        )
    if cfg.is_onnx:
        sizes = ("image_size", "image_channels", "num_classes", "seq_length", "vocab_size")
        changed = [f for f in sizes if getattr(cfg, f) != type(cfg).model_fields[f].default]
        if changed:
            raise ConfigError(
                f"{changed[0]}: an ONNX model takes its sizes from the file; bind its dynamic "
                "dimensions with input_shapes (--input-shape NAME=DIMS) instead."
            )
    if cfg.eight_bit_input and cfg.model.startswith("bert"):
        raise ConfigError(
            "eight_bit_input: BERT inputs are token ids, not images; use it with mlp or "
            "the ResNets."
        )
    if cfg.io_tiles:
        if cfg.io_tiles % 2:
            raise ConfigError(
                f"io_tiles: must be even (a supertile is two tiles); got {cfg.io_tiles}."
            )
        if cfg.io_tiles > target.tiles_per_ipu // 2:
            raise ConfigError(
                f"io_tiles: at most {target.tiles_per_ipu // 2} of the "
                f"{target.tiles_per_ipu} tiles may be I/O tiles; got {cfg.io_tiles}."
            )
    if cfg.output_mode == "every-n" and cfg.device_iterations % cfg.output_return_period:
        raise ConfigError(
            f"output_return_period: must divide device_iterations ({cfg.device_iterations}); "
            f"got {cfg.output_return_period}."
        )
