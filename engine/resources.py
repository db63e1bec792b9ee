"""How much memory a simulation will need, estimated before the work, and refused when too big.

The engine's memory grows with a few products of run options, not with the model's arithmetic:

* executed steps: every leaf program runs once per micro-batch (``gradient_accumulation`` x
  ``device_iterations`` times) or once per run step (``device_iterations`` times), and each
  executed step costs about :data:`BYTES_PER_STEP` between execution and the written profile
  (measured: 3.6 M steps of ``--model mlp --mode inference --device-iterations 100000`` peak at
  629 MB, 155 bytes per step over the 70 MB base, with the atomic write's buffers);
* per-tile arrays: cycles of each program on each tile (``/programs/tile_cycles``) and
  not-always-live bytes of each liveness step on each tile (``/liveness/per_tile``), 4 bytes
  each, plus the compile's working copies (:data:`TILE_ARRAY_COPIES`);
* the largest tensor: micro-batch x sequence (or image) x vocabulary (or channels) elements,
  whose sizes the engine computes in int64 / float64.

:func:`check_config` runs before compiling (from the configuration alone: forward ops of the
model graph, tiles of the target) and :func:`check_compiled` after compiling, before executing
(from the compiled program's exact leaf counts). Both raise :class:`ResourceError` with one
sentence naming the option that makes the run too big and the estimate, when the estimate is
above the limit: by default :data:`LIMIT_SHARE` of the memory this machine has available
(``analyse profile --max-memory`` changes it; 0 turns the check off).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.config import RunConfig
from engine.errors import ConfigError
from profiles.atomic import available_memory, fmt_size

#: Bytes per executed step from execution to the written profile (see the module docstring).
BYTES_PER_STEP = 200
#: Copies of a (programs x tiles) or (liveness steps x tiles) int32 array alive during a compile.
TILE_ARRAY_COPIES = 3
#: Memory of the process before any per-run array (Python, numpy, the model graph).
BASE_BYTES = 150 * 2**20
#: Leaf programs per forward op of the model graph, an upper bound over the zoo (measured:
#: ResNet-50 training 2,097 programs for 161 forward ops, BERT-Base 2,504 for 214; inference
#: needs about a third).
PROGRAMS_PER_FORWARD_OP = 16
#: Executed steps per iteration beyond the leaf programs (stream copies, syncs, host calls).
EXTRA_STEPS_PER_ITERATION = 16
#: Share of the available memory a run may plan to use by default.
LIMIT_SHARE = 0.8
#: Elements of one tensor above which the engine's int64 / float64 sizes lose meaning (2^53).
MAX_ELEMENTS = 2**53


class ResourceError(ConfigError):
    """The configuration would need more memory than allowed (one sentence, exit 2)."""


def default_limit() -> int:
    return int(available_memory() * LIMIT_SHARE)


def parse_size(text: str) -> int:
    """``"8G"``, ``"512M"``, ``"1.5GiB"``, ``"2000000000"`` -> bytes (``ConfigError`` else)."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}.get(t[-1:], 1)
    num = t[:-1] if scale > 1 else t
    try:
        value = float(num)
    except ValueError:
        raise ConfigError(
            f"--max-memory: {text!r} is not a size (e.g. 8G, 512M, 0 for no limit)."
        ) from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"--max-memory: {text!r} must be a finite size of 0 or more.")
    return int(value * scale)


@dataclass(frozen=True)
class Estimate:
    """Bytes a run will need, and what drives them."""

    bytes: int
    option: str  # the option (flag) whose value makes the run big
    detail: str  # what the estimate counts, e.g. "38,000,001 executed steps"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _tensor_check(config: RunConfig) -> None:
    """The largest activation or logits tensor must stay countable in the engine's int64 /
    float64 arithmetic (BERT with sequence 8192 x micro-batch 65536 x vocabulary 10^9 overflowed
    into an OverflowError)."""
    mb, model = config.micro_batch_size, config.model
    if model.startswith("bert"):
        dims = {"micro_batch_size": mb, "seq_length": config.seq_length}
        widest = ("vocab_size", config.vocab_size)
    else:
        dims = {"micro_batch_size": mb, "image_size": config.image_size**2}
        widest = ("image_channels", max(config.image_channels, 2048))
    elements = math.prod(dims.values()) * widest[1] * config.gradient_accumulation
    if elements > MAX_ELEMENTS:
        names = " x ".join(_flag(k) for k in (*dims, widest[0]))
        raise ResourceError(
            f"{names} make tensors of about {elements:.2g} elements, beyond what the engine can "
            f"count exactly (2^53); reduce {_flag(max(dims, key=dims.__getitem__))}."
        )


def estimate_config(config: RunConfig) -> Estimate:
    """Before compiling: the per-tile arrays of the compile, from the model graph's forward ops
    and the target's tiles (steps are estimated after compiling, exactly)."""
    from engine.models import build_model
    from engine.targets import get_target

    tiles = get_target(config.target, config.target_overrides).tiles_per_ipu
    fwd_ops = len(build_model(config))
    programs = fwd_ops * PROGRAMS_PER_FORWARD_OP // (1 if config.mode == "training" else 3)
    ipus = config.num_ipus
    per_tile = (programs + ipus * programs) * tiles * 4 * TILE_ARRAY_COPIES
    option = (
        "--target-override tiles_per_ipu"
        if "tiles_per_ipu" in config.target_overrides
        else _flag("num_ipus")
        if ipus > 1
        else "--model"
    )
    return Estimate(
        BASE_BYTES + per_tile,
        option,
        f"about {programs:,} programs x {ipus} IPU(s) x {tiles:,} tiles of per-tile cycles and "
        "liveness",
    )


def estimate_compiled(compiled: object) -> Estimate:
    """After compiling, before executing: executed steps from the compiled program's leaf counts
    (leaves run per micro-batch or per run step), plus the per-tile arrays."""
    import numpy as np

    config: RunConfig = compiled.config  # type: ignore[attr-defined]
    seg = compiled.segments  # type: ignore[attr-defined]
    per = np.asarray(seg.per)
    n = np.asarray(seg.stop, dtype=np.int64) - np.asarray(seg.first, dtype=np.int64)
    per_mb = int(n[per == "micro_batch"].sum())
    per_step = int(n[per != "micro_batch"].sum())
    ga, di = config.gradient_accumulation, config.device_iterations
    steps = (per_mb * ga + per_step + EXTRA_STEPS_PER_ITERATION) * di
    programs = len(compiled.programs.name)  # type: ignore[attr-defined]
    tiles = compiled.target.tiles_per_ipu  # type: ignore[attr-defined]
    per_tile = programs * (1 + config.num_ipus) * tiles * 4 * TILE_ARRAY_COPIES
    option = _flag("device_iterations") if di >= ga else _flag("gradient_accumulation")
    return Estimate(
        BASE_BYTES + steps * BYTES_PER_STEP + per_tile,
        option,
        f"{steps:,} executed steps ({per_mb:,} programs per micro-batch x "
        f"{ga:,} micro-batches x {di:,} device iterations)",
    )


def _refuse(est: Estimate, limit: int, what: str) -> None:
    if limit and est.bytes > limit:
        raise ResourceError(
            f"this run would need about {fmt_size(est.bytes)} of memory to {what} "
            f"({est.detail}), more than the {fmt_size(limit)} allowed "
            f"({fmt_size(available_memory())} free; --max-memory changes the limit); "
            + (f"reduce {est.option}." if est.option != "--model" else "choose a smaller model.")
        )


def check_config(config: RunConfig, limit: int | None = None) -> None:
    """Refuse (ResourceError) a configuration whose compile would need more than ``limit``
    bytes (``None``: :func:`default_limit`; 0: no limit)."""
    _tensor_check(config)
    _refuse(estimate_config(config), default_limit() if limit is None else limit, "compile")


def check_compiled(compiled: object, limit: int | None = None) -> None:
    """Refuse (ResourceError) executing a compiled program that would need more than ``limit``."""
    _refuse(estimate_compiled(compiled), default_limit() if limit is None else limit, "simulate")


__all__ = [
    "Estimate",
    "ResourceError",
    "check_compiled",
    "check_config",
    "default_limit",
    "estimate_compiled",
    "estimate_config",
    "parse_size",
]
