"""The run configuration: every option the engine honours, validated, with its default.

One pydantic model, :class:`RunConfig` (``extra="forbid"``, so a misspelt option is an error).
It loads from TOML (:meth:`RunConfig.from_toml`), from a dict (:meth:`RunConfig.from_dict`) and
from command-line flags (``analyser.cli.run_flags``: one flag per field, for ``analyse
profile``); it writes back with :meth:`RunConfig.to_toml` /
:meth:`RunConfig.to_dict`. What-if changes are ``config.model_copy(update={...})`` followed by
:meth:`RunConfig.revalidate` (or ``RunConfig.from_dict({**config.to_dict(), ...})``).

Errors are one sentence naming the field and the allowed values: field-level problems come from
pydantic (``from_dict`` / ``from_toml`` turn them into :class:`engine.errors.ConfigError`), and
cross-field problems are raised as ``ConfigError`` directly. Checks that need the model graph (a
split point that names no layer) are made by :meth:`RunConfig.check_layers`, which the compiler
calls.

Precision ``"a.b"`` follows Graphcore's examples: ``a`` is the dtype of inputs, activations and
matmul / convolution operands (16 = float16, 32 = float32); ``b`` is the dtype of the stored
(master) weights, their gradients' accumulation and the weight update. ``16.32`` therefore keeps
FP32 master weights and casts them to FP16 for compute.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engine.config_values import fields_problem, stored_config_problem
from engine.errors import ConfigError, TargetError
from engine.run_option import option
from profiles.inputs import read_regular

ModelName = Literal["mlp", "resnet50", "resnet101", "bert-base", "bert-large"]
MODEL_NAMES: tuple[str, ...] = ("mlp", "resnet50", "resnet101", "bert-base", "bert-large")

#: The first bytes of every HDF5 file (a profile given where a run configuration is expected).
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: Model defaults for ``num_classes`` when not given.
DEFAULT_CLASSES = {"mlp": 10, "resnet50": 1000, "resnet101": 1000, "bert-base": 2, "bert-large": 2}


class RunConfig(BaseModel):
    """Every run option of the engine, each with its default (docs/engine.md, 'Run options')."""

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=False)

    # -- identity -----------------------------------------------------------------------------
    name: str = Field(
        "",
        description="Free-form run label shown in reports. Default ''.",
        json_schema_extra=option(section="Run"),
    )

    # -- model and input ----------------------------------------------------------------------
    model: str = Field(
        "resnet50",
        description="Zoo model: mlp (784-784-784-128-10), resnet50, resnet101, bert-base, "
        "bert-large; or an ONNX file (path ending in .onnx, relative to the run config file "
        "or, on the command line, to the current folder; see docs/onnx.md). Default 'resnet50'.",
        json_schema_extra=option(section="Model and input"),
    )
    input_shapes: dict[str, list[int]] = Field(
        default_factory=dict,
        description="ONNX models: shapes binding the dynamic dimensions of graph inputs, e.g. "
        "{input_ids = [1, 128]}; a dynamic first (batch) dimension not given here is bound by "
        "the micro-batch. Default none.",
        json_schema_extra=option(
            cli_flag="--input-shape",
            cli_metavar="NAME=DIMS",
            cli_repeat=True,
            cli_help="ONNX models: bind the shape of graph input NAME, e.g. input_ids=1x128 (repeatable); a dynamic batch dimension not given is bound by the micro-batch.",
        ),
    )
    unknown_ops: Literal["error", "elementwise"] = Field(
        "error",
        description="ONNX models: an operator the engine cannot cost is an error (error), or is "
        "costed as an element-wise operation over its output and noted in the profile "
        "(elementwise). Default error.",
    )
    image_size: int = Field(
        224, ge=8, le=4096, description="Image height = width for ResNets (pixels). Default 224."
    )
    image_channels: int = Field(
        3, ge=1, le=64, description="Input channels for ResNets. Default 3."
    )
    num_classes: int | None = Field(
        None,
        ge=1,
        description="Classes of the classifier head; default per model (mlp 10, ResNets 1000, "
        "BERT next-sentence 2).",
    )
    seq_length: int = Field(128, ge=1, le=8192, description="BERT sequence length. Default 128.")
    vocab_size: int = Field(30522, ge=2, description="BERT vocabulary size. Default 30522.")
    hidden_dropout: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="BERT hidden dropout in training, after the embeddings' layer norm and on "
        "both residual branches (Hugging Face hidden_dropout_prob); 0 removes it. Default 0.1.",
    )
    attention_dropout: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="BERT attention-probability dropout in training (Hugging Face "
        "attention_probs_dropout_prob); 0 removes it. Default 0.1.",
    )
    mode: Literal["training", "inference"] = Field(
        "training", description="training (fwd + bwd + update) or inference. Default training."
    )

    # -- target -------------------------------------------------------------------------------
    target: str = Field(
        "mk2",
        description="Hardware target: mk1 (GC2), mk2 (GC200), bow. Default mk2 (or the chip of "
        "the system).",
        json_schema_extra=option(section="Target"),
    )
    system: str | None = Field(
        None,
        description="IPU system (engine/data/systems.toml): mk2-pod16, mk2-pod64, mk2-pod128, "
        "mk2-pod256, bow-pod16, bow-pod64, bow-pod128, bow-pod256. Sets the target and, unless "
        "given, the replication factor that fills it. Default none (one machine's chips).",
    )
    host_servers: int | None = Field(
        None,
        ge=1,
        description="Host servers preparing the data, one loader instance each (data-parallel "
        "loading is per host server). Default the system's (1 without a system).",
    )
    target_overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Target parameters to override, e.g. {clock_hz = 1.6e9}. Default none.",
        json_schema_extra=option(
            cli_flag="--target-override",
            cli_metavar="KEY=VALUE",
            cli_repeat=True,
            cli_help="Override one target parameter, e.g. clock_hz=1.6e9 (repeatable).",
        ),
    )
    num_ipus: int = Field(
        1,
        ge=1,
        le=64,
        description="IPUs per replica. Default 1.",
        json_schema_extra=option(aliases=("ipus",), explains=("ipu_memory",), explain_rank=140),
    )
    replication_factor: int = Field(
        1,
        ge=1,
        le=256,
        description="Model replicas. Default 1 (with a system: as many as fit).",
        json_schema_extra=option(
            aliases=("replicas",), explains=("memory", "allreduce"), explain_rank=210
        ),
    )

    # -- batch and loops ----------------------------------------------------------------------
    micro_batch_size: int = Field(
        1,
        ge=1,
        le=65536,
        description="Samples per micro-batch. Default 1.",
        json_schema_extra=option(
            section="Batch",
            aliases=("batch_size", "micro_batch", "mbs"),
            explains=("memory", "input"),
            explain_rank=60,
            lever_rank=10,
        ),
    )
    gradient_accumulation: int = Field(
        1,
        ge=1,
        le=65536,
        description="Micro-batches accumulated per weight update. Default 1.",
        json_schema_extra=option(
            aliases=("ga",),
            explains=("memory", "input", "compute_share"),
            explain_rank=190,
            lever_rank=120,
        ),
    )
    device_iterations: int = Field(
        1,
        ge=1,
        le=1_000_000,
        description="Steps run on the device per host call. Default 1.",
        json_schema_extra=option(
            aliases=("di",),
            explains=("input", "host_wait", "host_round_trips"),
            explain_rank=220,
            lever_rank=130,
        ),
    )

    # -- numerics -----------------------------------------------------------------------------
    precision: Literal["32.32", "16.32", "16.16"] = Field(
        "32.32",
        description="inputs-and-compute.weights dtypes: 32.32, 16.32 or 16.16. Default 32.32.",
        json_schema_extra=option(
            section="Precision and optimiser",
            explains=("memory",),
            explain_rank=50,
            tune=("16.16", "16.32", "32.32"),
            lever_rank=0,
        ),
    )
    partials_type: Literal["auto", "float", "half"] = Field(
        "auto",
        description="Matmul / convolution partials: auto (the framework's default: float, as "
        "PopLibs' default, for PopTorch and PopART; half for a 16.16 TensorFlow model), "
        "float or half; FP32 operands always accumulate in float (the AMP has no FP32-in / "
        "half-partials mode), so half applies to FP16 operands only. Default auto.",
        json_schema_extra=option(
            aliases=("partials",),
            # float partials: twice the bytes of the AMP's partial sums and their reductions,
            # and half the AMP's rate (8 conv units per tile instead of 16; docs/engine.md)
            explains=("memory",),
            explain_rank=55,
        ),
    )
    optimiser: Literal["sgd", "sgd-momentum", "adam", "adamw", "lamb"] = Field(
        "sgd",
        description="Optimiser: sgd, sgd-momentum, adam, adamw, lamb. Default sgd.",
        json_schema_extra=option(explains=("memory",), explain_rank=110),
    )
    first_moment_dtype: Literal["auto", "float32", "float16"] = Field(
        "auto",
        description="Momentum / Adam first moment dtype: auto = float16 for 16.16 models, else "
        "float32. Default auto.",
        json_schema_extra=option(explains=("memory",), explain_rank=160),
    )
    second_moment_dtype: Literal["auto", "float32", "float16"] = Field(
        "auto",
        description="Adam / LAMB second moment dtype: auto = float32. Default auto.",
        json_schema_extra=option(explains=("memory",), explain_rank=170),
    )
    accumulator_dtype: Literal["auto", "float32", "float16"] = Field(
        "auto",
        description="Gradient accumulator dtype (GA > 1): auto = the weight dtype. Default auto.",
    )
    loss_scaling: float = Field(
        1.0, gt=0, description="Static loss scaling factor (1 = none). Default 1."
    )

    # -- execution strategy -------------------------------------------------------------------
    strategy: Literal["single", "sharded", "pipelined"] = Field(
        "single",
        description="single IPU, sharded (one IPU at a time) or pipelined. Default single.",
        json_schema_extra=option(section="Execution strategy"),
    )
    schedule: Literal["grouped", "interleaved", "sequential"] = Field(
        "grouped",
        description="Pipeline schedule: grouped, interleaved, sequential. Default grouped.",
        json_schema_extra=option(
            explains=("memory",),
            explain_rank=80,
            tune=("grouped", "interleaved", "sequential"),
            lever_rank=40,
        ),
    )
    split_points: list[str] = Field(
        default_factory=list,
        description="Layer names where each new stage / IPU begins (e.g. ['layer3.8']). Default [].",
        json_schema_extra=option(
            aliases=("splits",),
            explains=("memory", "ipu_memory", "stage_balance"),
            explain_rank=130,
            lever_rank=70,
            cli_metavar="LAYER[,LAYER...]",
            cli_help="Layer names where each new stage / IPU begins (e.g. layer3.8 or layer2.3,layer3.8). Comma-separated; default none.",
        ),
    )
    recomputation: Literal["auto", "off", "pipeline-stages", "checkpoints"] = Field(
        "auto",
        description="auto (the framework's default: PopTorch recomputes pipeline stages when "
        "pipelining over more than one IPU, PopART and TensorFlow do not), off, pipeline-stages "
        "(stash stage inputs only, recompute the forward in the backward) or checkpoints (at "
        "recompute_checkpoints). Default auto.",
        json_schema_extra=option(
            aliases=("recompute",),
            explains=("memory",),
            explain_rank=70,
            tune=("pipeline-stages", "off"),
            lever_rank=20,
        ),
    )
    recompute_checkpoints: list[str] = Field(
        default_factory=list,
        description="Layers whose outputs are kept (checkpoints) when recomputation = checkpoints; "
        "the ops between checkpoints are recomputed in the backward. Default [].",
        json_schema_extra=option(
            cli_metavar="LAYER[,LAYER...]",
            cli_help="Layers whose outputs are kept (checkpoints) when recomputation = checkpoints; the ops between checkpoints are recomputed in the backward. Comma-separated; default none.",
        ),
    )
    available_memory_proportion: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Share of tile memory an AMP plan may use for temporaries; default the "
        "target's (0.6).",
        json_schema_extra=option(
            section="Memory",
            aliases=("amp",),
            explains=("memory",),
            explain_rank=90,
            tune=(0.3, 0.45, 0.6, 0.8),
            lever_rank=30,
        ),
    )
    available_memory_proportion_per_ipu: list[float] = Field(
        default_factory=list,
        description="One available memory proportion per IPU of a replica (PopTorch's "
        "setAvailableMemoryProportion({'IPU0': ..}), optimum-graphcore's matmul_proportion "
        "list), in place of available_memory_proportion. Default [] (the same on every IPU).",
        json_schema_extra=option(
            explains=("memory", "ipu_memory"),
            explain_rank=150,
            cli_metavar="X[,X...]",
            cli_help="One available memory proportion per IPU of a replica (PopTorch's setAvailableMemoryProportion({'IPU0': ..}), optimum-graphcore's matmul_proportion list), in place of available_memory_proportion. Comma-separated; default none (the same on every IPU).",
        ),
    )

    outlining: bool = Field(
        True,
        description="Share the compute sets, vertex state and exchange code of identical "
        "operations (PopART outlining, on by default in Poplar's frameworks). Default true.",
    )

    # -- memory placement ---------------------------------------------------------------------
    offload_optimiser_state: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Optimiser state in remote buffers: auto = the framework's default (PopTorch "
        "and PopART: on chip; TensorFlow's pipelining API: offloaded when pipelined), on, off. "
        "Default auto.",
        json_schema_extra=option(
            explains=("memory", "remote_buffers"),
            explain_rank=100,
            tune=("on", "off"),
            lever_rank=50,
        ),
    )
    offload_accumulators: Literal["on", "off"] = Field(
        "off",
        description="Gradient accumulators in remote buffers: on or off. Default off.",
        json_schema_extra=option(
            explains=("memory", "remote_buffers"),
            explain_rank=180,
            tune=("on", "off"),
            lever_rank=60,
        ),
    )
    replicated_tensor_sharding: bool = Field(
        False,
        description="Shard optimiser state across replicas (needs replication_factor > 1). "
        "Default false.",
        json_schema_extra=option(explains=("memory",), explain_rank=120),
    )

    # -- host I/O -----------------------------------------------------------------------------
    io_tiles: int = Field(
        0,
        ge=0,
        description="Tiles reserved for overlapped I/O (even number; 0 = none). Default 0.",
        json_schema_extra=option(
            section="Host I/O and data loader",
            explains=("memory", "ipu_memory", "host_wait"),
            explain_rank=200,
            tune=(0, 32, 64),
            lever_rank=80,
        ),
    )
    prefetch_depth: int = Field(
        1,
        ge=1,
        le=16,
        description="Stream prefetch depth. Default 1.",
        json_schema_extra=option(
            aliases=("prefetch",),
            explains=("host_wait",),
            explain_rank=20,
            tune=(1, 2, 3),
            lever_rank=90,
        ),
    )
    eight_bit_input: bool = Field(
        False,
        description="Send images as uint8 and normalise on the IPU (image models). Default false.",
        json_schema_extra=option(
            explains=("input", "host_wait", "host_time"),
            explain_rank=30,
            tune=(False, True),
            lever_rank=100,
        ),
    )
    framework: Literal["poptorch", "popart", "tensorflow"] = Field(
        "poptorch",
        description="Framework whose defaults apply to the options left unset (loader workers "
        "and mode, optimiser-state location, recomputation; engine/data/frameworks.toml). "
        "Default poptorch.",
    )
    loader_mode: Literal["sync", "async", "async-rebatched"] | None = Field(
        None,
        description="Data loader: sync (prepared between device calls), async (a separate "
        "process overlaps the device), async-rebatched. Default the framework's (PopTorch: "
        "sync).",
        json_schema_extra=option(
            aliases=("loader",),
            explains=("host_wait",),
            explain_rank=0,
            tune=("sync", "async"),
            lever_rank=110,
        ),
    )
    loader_workers: int | None = Field(
        None,
        ge=0,
        le=512,
        description="Data loader worker processes (0 = in the loader's own process). Default "
        "the framework's (PyTorch DataLoader: 0).",
        json_schema_extra=option(explains=("host_wait",), explain_rank=10),
    )
    host_transforms: list[str] = Field(
        default_factory=list,
        description="Host transforms per sample, in order: decode_jpeg, from_array, flip, "
        "random_crop, resize, to_tensor, convert_dtype, normalise, collate; each costed from the "
        "host profile (convert_dtype and normalise run on the IPU with eight_bit_input). Default "
        "none (then host_preprocess_us_per_sample and host_normalise_ns_per_element apply).",
        json_schema_extra=option(cli_metavar="NAME[,NAME...]"),
    )
    host_input_size: int | None = Field(
        None,
        ge=1,
        le=16384,
        description="Side of the stored / decoded image before resize or random_crop (pixels). "
        "Default image_size.",
    )
    host_profile: str = Field(
        "default",
        description="Host profile with the per-transform costs: 'default' (shipped, see "
        "docs/engine.md) or a TOML file written by `analyse calibrate-host`. Default 'default'.",
    )
    host_cpu: str | None = Field(
        None,
        description="CPU of the host server the loader runs on (a key of engine/data/cpus.toml, "
        "e.g. amd-epyc-7742), or 'as-measured' to use the host profile unscaled. The host "
        "profile is scaled to it by the two CPUs' per-core figures. Default the system's host "
        "server CPU (the IPU-POD reference server's AMD EPYC 7742 without a system).",
    )
    host_preprocess_us_per_sample: float | None = Field(
        None,
        ge=0,
        description="Extra host time per sample on one core beyond the named transforms "
        "(microseconds). Default 0 with host_transforms, else 50 (a flat decode / augment cost).",
        json_schema_extra=option(explains=("host_wait",), explain_rank=40),
    )
    host_normalise_ns_per_element: float | None = Field(
        None,
        ge=0,
        description="Extra host cast + normalise time per input element on one core when not "
        "done on the IPU (nanoseconds). Default 0 with host_transforms, else 1.",
    )
    host_call_overhead_us: float | None = Field(
        None,
        ge=0,
        description="Fixed host cost per device call in steady state (per device-iteration "
        "loop), microseconds. Default: the framework's (PopTorch 8,254, fitted to the "
        "walkthrough's published figures; PopART and TensorFlow 150, an estimate).",
    )
    profiled_call_wait_us: float | None = Field(
        None,
        ge=0,
        description="What the device trace of a profiled call (the one a profiler shows) holds "
        "beyond a steady-state call: a wait in the call's opening host sync, microseconds; "
        "not in throughput. 0 gives the steady-state call's trace. Default: the framework's "
        "(PopTorch 25,049, fitted to the walkthrough's published traces; others 0).",
    )
    host_stream_latency_us: float = Field(
        5.0,
        ge=0,
        description="Host latency to service one stream-copy request (StreamCopyBegin wait per "
        "micro-batch copy; a prefetch depth d > 1 hides it behind d - 1 compute steps), "
        "microseconds. Default 5 (a PCIe / RoCE round trip through the gateway plus the "
        "runtime's callback).",
    )
    output_mode: Literal["auto", "all", "sum", "final", "every-n"] = Field(
        "auto",
        description="Outputs sent back: auto (final for training, all for inference), all, sum, "
        "final, every-n. Default auto.",
        json_schema_extra=option(section="Outputs and instrumentation"),
    )
    output_return_period: int = Field(1, ge=1, description="N of output_mode every-n. Default 1.")
    training_outputs: Literal["auto", "loss", "output-and-loss"] = Field(
        "auto",
        description="What a training model returns to the host (its anchors): loss, or "
        "output-and-loss (the model's output, e.g. the logits, beside the loss). Default: the "
        "framework's (PopTorch output-and-loss, as its user guide's training model returns; "
        "PopART and TensorFlow loss).",
        json_schema_extra=option(section="Outputs and instrumentation"),
    )
    synthetic_data: bool = Field(
        False,
        description="Inputs made on the IPU, no data copied between host and device (PopTorch "
        "opts.enableSyntheticData(True), PopART syntheticDataMode): no input, label or output "
        "stream copies and no host preparation; the host call remains. For benchmarking the "
        "device. Default false.",
    )

    # -- profiling ----------------------------------------------------------------------------
    instrumentation: bool = Field(
        False,
        description="Reserve per-program cycle counters on every tile (instrumentationResults). "
        "Default false.",
    )

    # -- what-ifs (no real framework offers these) ----------------------------------------------
    balance_compute_sets: list[str] = Field(
        default_factory=list,
        max_length=10_000,
        description="What-if, not a framework option: these compute sets (OnTileExecute program "
        "names) run perfectly balanced, their vertices spread over the IPU's compute tiles so "
        "that every tile does the mean of the compute set's per-tile work (docs/engine.md, "
        "'What-if: balanced compute sets'). A name no compute set has is an error at compile "
        "time. Default [].",
        json_schema_extra=option(section="What-ifs (no framework offers these)", what_if=True),
    )

    # ------------------------------------------------------------------------------------------
    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str) -> str:
        if value in MODEL_NAMES or is_onnx_path(value):
            return value
        raise ValueError(
            f"allowed values are {', '.join(repr(m) for m in MODEL_NAMES)} or the path of an "
            f"ONNX file ending in .onnx; got {value!r}"
        )

    @field_validator("input_shapes")
    @classmethod
    def _input_shapes(cls, value: dict[str, list[int]]) -> dict[str, list[int]]:
        from engine.graph import dims_problem

        for name, dims in value.items():
            if not dims or any(d < 1 for d in dims):
                raise ValueError(
                    f"input {name!r}: give every dimension as a whole number >= 1, e.g. [1, 128]"
                )
            problem = dims_problem(dims)
            if problem:
                raise ValueError(f"input {name!r}: {problem}")
        return value

    @field_validator("balance_compute_sets")
    @classmethod
    def _balance_compute_sets(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.strip() or len(name) > 1000 or not name.isprintable():
                raise ValueError(
                    "give each compute set by its name (printable text of 1 to 1,000 "
                    f"characters, e.g. 'layers.0/fwd/MatMulPartials'); got {name[:60]!r}"
                )
        return list(dict.fromkeys(value))

    @property
    def is_onnx(self) -> bool:
        """The model is an ONNX file (``model`` is its path)."""
        return is_onnx_path(self.model)

    @model_validator(mode="before")
    @classmethod
    def _system_defaults(cls, data: Any) -> Any:
        """A system sets the target (its chip) and, unless given, the replicas that fill it."""
        if not isinstance(data, dict) or not data.get("system"):
            return data
        from engine.systems import get_system
        from engine.targets import canonical_name

        system = get_system(str(data["system"]))
        data = dict(data, system=system.name)
        if "target" in data:
            try:
                chip = canonical_name(str(data["target"]))
            except TargetError as exc:
                raise ConfigError(str(exc)) from None
            if chip != system.chip:
                raise ConfigError(
                    f"target: {data['target']!r} is not the chip of system {system.name!r} "
                    f"({system.chip}); leave target out or pick a {data['target']} system."
                )
        data["target"] = system.chip
        if data.get("replication_factor") is None:
            try:
                ipus = int(data.get("num_ipus") or 1)
            except (TypeError, ValueError):
                return data  # num_ipus's own validation names the problem
            data["replication_factor"] = max(1, system.ipus // max(1, ipus))
        return data

    @model_validator(mode="before")
    @classmethod
    def _strict_values(cls, data: Any) -> Any:
        """The strict-value policy for every field (engine.config_values.value_problem)."""
        if isinstance(data, dict):
            bad = fields_problem(data)
            if bad:
                raise ConfigError(bad)
        return data

    @model_validator(mode="after")
    def _cross_checks(self) -> RunConfig:
        from engine.config_checks import check_across
        from engine.targets import get_target

        try:
            target = get_target(self.target, self.target_overrides)
        except TargetError as exc:
            raise ConfigError(str(exc)) from None
        self._check_system()
        self._apply_framework_defaults(target)
        check_across(self, target)
        return self

    def _check_system(self) -> None:
        if self.system is None:
            if self.host_servers not in (None, 1):
                raise ConfigError(
                    f"host_servers: {self.host_servers} host servers need a system (e.g. "
                    "system = 'mk2-pod64'); without one the run has a single host."
                )
            return
        from engine.systems import get_system

        system = get_system(self.system)
        need = self.num_ipus * self.replication_factor
        if need > system.ipus:
            raise ConfigError(
                f"system: {self.replication_factor} replica(s) x {self.num_ipus} IPU(s) = "
                f"{need} IPUs do not fit in {system.display_name}, which has {system.ipus}."
            )
        if self.host_servers is not None and self.host_servers > system.machines:
            raise ConfigError(
                f"host_servers: {system.display_name} takes at most {system.machines} host "
                f"servers (one per machine); got {self.host_servers}."
            )

    def _apply_framework_defaults(self, target) -> None:
        """Fill the options left unset from the framework's defaults (frameworks.toml)."""
        from engine.host.frameworks import get_framework

        fw = get_framework(self.framework)
        pipelined = self.strategy == "pipelined"
        if self.loader_workers is None:
            self.loader_workers = fw.loader_workers
        if self.loader_mode is None:
            self.loader_mode = fw.loader_mode
        if self.host_call_overhead_us is None:
            self.host_call_overhead_us = fw.host_call_overhead_us
        if self.profiled_call_wait_us is None:
            self.profiled_call_wait_us = fw.profiled_call_wait_us
        if self.training_outputs == "auto":
            self.training_outputs = fw.training_outputs
        if self.recomputation == "auto":
            self.recomputation = fw.recomputation(pipelined and self.num_ipus > 1)
        if self.offload_optimiser_state == "auto":
            has_remote = target.streaming_memory_bytes > 0
            self.offload_optimiser_state = "on" if fw.offload(pipelined, has_remote) else "off"
        if self.host_transforms:
            from engine.host.profile import TRANSFORMS

            for t in self.host_transforms:
                if t not in TRANSFORMS:
                    close = difflib.get_close_matches(t, list(TRANSFORMS), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    raise ConfigError(
                        f"host_transforms: {t!r} is not a host transform{hint}; allowed: "
                        f"{', '.join(TRANSFORMS)}."
                    )
            from engine.host.profile import load_host_profile

            load_host_profile(self.host_profile)  # a missing or broken profile: one sentence now
            ts = list(self.host_transforms)
            if "normalise" in ts and (
                "convert_dtype" not in ts or ts.index("convert_dtype") > ts.index("normalise")
            ):
                raise ConfigError(
                    "host_transforms: normalise works on a float tensor (as torchvision's "
                    "Normalize); put convert_dtype before it."
                )
        if self.host_cpu not in (None, "as-measured"):
            from engine.host.cpus import cpus

            if self.host_cpu not in cpus():
                raise ConfigError(
                    f"host_cpu: {self.host_cpu!r} is not a CPU of engine/data/cpus.toml; allowed: "
                    f"{', '.join(cpus())} or as-measured."
                )
        named = bool(self.host_transforms)
        if self.host_preprocess_us_per_sample is None:
            self.host_preprocess_us_per_sample = 0.0 if named else 50.0
        if self.host_normalise_ns_per_element is None:
            self.host_normalise_ns_per_element = 0.0 if named else 1.0

    # ------------------------------------------------------------------------------------------
    # Resolved values ("auto" options) used by the engine
    # ------------------------------------------------------------------------------------------
    @property
    def training(self) -> bool:
        """Whether the run trains (else it infers)."""
        return self.mode == "training"

    @property
    def stages(self) -> int:
        """Pipeline stages / shards (1 for a single IPU)."""
        return len(self.split_points) + 1

    @property
    def compute_dtype(self) -> str:
        """Dtype of inputs, activations and matmul operands."""
        return "float16" if self.precision.startswith("16") else "float32"

    @property
    def weight_dtype(self) -> str:
        """Dtype of the stored (master) weights and the update."""
        return "float16" if self.precision.endswith("16") else "float32"

    @property
    def partials_dtype(self) -> str:
        """The dtype of matmul / convolution partials."""
        if self.partials_type == "float" or self.compute_dtype == "float32":
            return "float32"
        if self.partials_type == "half":
            return "float16"
        if self.precision != "16.16":
            return "float32"
        from engine.host.frameworks import get_framework

        # auto: the framework's default (PopTorch and PopART leave PopLibs' float)
        return "float16" if get_framework(self.framework).partials_16_16 == "half" else "float32"

    @property
    def first_moment(self) -> str:
        """The dtype of the optimiser's first moment."""
        if self.first_moment_dtype != "auto":
            return self.first_moment_dtype
        return self.weight_dtype

    @property
    def second_moment(self) -> str:
        """The dtype of the optimiser's second moment."""
        return "float32" if self.second_moment_dtype == "auto" else self.second_moment_dtype

    @property
    def accumulator(self) -> str:
        """The dtype of the gradient accumulator."""
        return self.weight_dtype if self.accumulator_dtype == "auto" else self.accumulator_dtype

    @property
    def offload_optimiser(self) -> bool:
        """Optimiser state in streaming memory ('auto' was resolved from the framework)."""
        return self.offload_optimiser_state == "on"

    @property
    def amp(self) -> float:
        """Available memory proportion (the target default when not set; the smallest of the
        per-IPU ones when they are given)."""
        if self.available_memory_proportion_per_ipu:
            return min(self.available_memory_proportion_per_ipu)
        if self.available_memory_proportion is not None:
            return self.available_memory_proportion
        return self.get_target().default_available_memory_proportion

    @property
    def amp_per_stage(self) -> tuple[float, ...]:
        """The available memory proportion of each stage (stage i runs on IPU i)."""
        if self.available_memory_proportion_per_ipu:
            return tuple(self.available_memory_proportion_per_ipu)
        return (self.amp,) * self.stages

    @property
    def resolved_output_mode(self) -> str:
        """The output mode, 'auto' resolved ('final' when training, else 'all')."""
        if self.output_mode == "auto":
            return "final" if self.training else "all"
        return self.output_mode

    @property
    def classes(self) -> int:
        """The number of classes (the model's default when not set)."""
        if self.num_classes is not None:
            return self.num_classes
        return DEFAULT_CLASSES.get(self.model, 0)  # ONNX models: the graph's outputs decide

    @property
    def samples_per_step(self) -> int:
        """Samples per run step: micro-batch x GA x device iterations x replicas."""
        return (
            self.micro_batch_size
            * self.gradient_accumulation
            * self.device_iterations
            * self.replication_factor
        )

    def get_target(self):
        """The hardware target with the overrides applied (engine.targets.Target)."""
        from engine.targets import get_target

        return get_target(self.target, self.target_overrides)

    def check_layers(self, layer_names: set[str] | list[str] | tuple[str, ...]) -> None:
        """Check split points and checkpoints against the model's layer names (ConfigError)."""
        names = set(layer_names)
        for field in ("split_points", "recompute_checkpoints"):
            for point in getattr(self, field):
                if point not in names:
                    near = sorted(n for n in names if n.startswith(point.split(".")[0]))[:5]
                    hint = f" (e.g. {', '.join(near)})" if near else ""
                    raise ConfigError(f"{field}: {point!r} names no layer of {self.model}{hint}.")

    # ------------------------------------------------------------------------------------------
    # Loading and saving
    # ------------------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """Validate a dict; any problem raises ConfigError with one sentence."""
        if not isinstance(data, dict):
            raise ConfigError("run configuration: expected a table of options.")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(validation_message(exc)) from None
        except RecursionError:
            raise ConfigError("run configuration: values are nested too deeply.") from None

    @classmethod
    def from_toml(cls, path: str | Path) -> RunConfig:
        """Load a TOML run configuration (keys are the field names; a [run] table is accepted).

        Every problem is one ConfigError sentence naming the file: missing, a folder, unreadable,
        binary (an HDF5 profile given by mistake), not TOML, no options at all (an empty file
        would silently simulate the default model), or an unknown key (with the close option).
        """
        p = Path(path)
        name = repr(str(p))
        if p.is_dir():
            raise ConfigError(
                f"run configuration {name} is a folder; give a .toml file such as "
                f"{str(p / 'run.toml')!r}."
            )
        # a profile given by mistake is named as such before the size limit, which it exceeds
        head = b""
        if p.is_file() and not p.is_symlink():
            with contextlib.suppress(OSError), p.open("rb") as f:
                head = f.read(8)
        raw = head if head == _HDF5_SIGNATURE else b""
        if not raw:
            raw = read_regular(
                p,
                f"run configuration {name}",
                ConfigError,
                hint="(run configurations are a few kB.)",
            )
        if raw.startswith(_HDF5_SIGNATURE):
            raise ConfigError(
                f"run configuration {name} is an HDF5 file (a profile?), not a TOML run "
                "configuration."
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(
                f"run configuration {name} is not a text file (not UTF-8); give a TOML run "
                "configuration."
            ) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"run configuration {name} is not valid TOML: {exc}.") from None
        except RecursionError:
            raise ConfigError(
                f"run configuration {name} nests arrays or tables too deeply to be a run "
                "configuration."
            ) from None
        if set(data) == {"run"} and isinstance(data["run"], dict):
            data = data["run"]
        if not data:
            raise ConfigError(
                f"run configuration {name} sets no options; give at least `model` "
                '(e.g. model = "resnet50").'
            )
        model = data.get("model")
        if isinstance(model, str) and is_onnx_path(model):
            # an ONNX model path is relative to the run configuration file
            # (made absolute, links kept: a model.onnx linked to a blob keeps its name)
            data["model"] = os.path.abspath(p.parent / Path(model).expanduser())
        host_profile = data.get("host_profile")
        if isinstance(host_profile, str) and host_profile and "\0" not in host_profile:
            from engine.host.profile import builtin_names

            if host_profile not in builtin_names():
                # a host profile file is relative to the run configuration, as the model is
                data["host_profile"] = os.path.abspath(p.parent / Path(host_profile).expanduser())
        try:
            return cls.from_dict(data)
        except ConfigError as exc:
            raise ConfigError(f"run configuration {name}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """Every option (defaults included), JSON-compatible."""
        return self.model_dump(mode="json")

    def to_toml(self) -> str:
        """The configuration as TOML text that :meth:`from_toml` reads back unchanged."""
        lines = ["# IPU run configuration (engine.config.RunConfig)"]
        data = self.to_dict()
        overrides = data.pop("target_overrides")
        for key, value in data.items():
            if value is None:
                lines.append(f"# {key} = (default)")
                continue
            lines.append(f"{key} = {_toml_value(value)}")
        if overrides:
            lines.append("")
            lines.append("[target_overrides]")
            for key, value in overrides.items():
                lines.append(f"{key} = {_toml_value(value)}")
        return "\n".join(lines) + "\n"

    def revalidate(self) -> RunConfig:
        """Re-run all validation (after ``model_copy(update=...)``, which does not validate)."""
        return RunConfig.from_dict(self.to_dict())


def is_onnx_path(model: str) -> bool:
    """``model`` names an ONNX file (ends in .onnx, any case) rather than a zoo model."""
    return isinstance(model, str) and model.lower().endswith(".onnx")


def parse_input_shape(text: str) -> tuple[str, list[int]]:
    """``NAME=DIMS`` (``input_ids=1x128`` or ``input_ids=1,128``) -> (name, dims)."""
    name, sep, dims = text.partition("=")
    parts = [d.strip() for d in dims.replace(",", "x").replace("X", "x").split("x")]
    if not sep or not name.strip() or not all(d.isdigit() and int(d) > 0 for d in parts):
        raise ConfigError(
            f"--input-shape: expected NAME=DIMS with whole dimensions >= 1, such as "
            f"input_ids=1x128; got {text!r}."
        )
    return name.strip(), [int(d) for d in parts]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise ConfigError(f"cannot write {value!r} to TOML.")


def _toml_key(key: str) -> str:
    """A bare TOML key when it is one (``clock_hz``), else quoted (ONNX input ``input.1``)."""
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else json.dumps(key)


def validation_message(exc: ValidationError) -> str:
    """One sentence for a pydantic ValidationError of RunConfig."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "run configuration"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            close = difflib.get_close_matches(loc, RunConfig.model_fields, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            msg = f"is not a run option ({hint}see `analyse profile --help` for the options)"
        elif err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")
        elif err["type"] == "literal_error":
            msg = msg.replace("Input should be", "allowed values are")
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts) + "."


__all__ = [
    "DEFAULT_CLASSES",
    "MODEL_NAMES",
    "RunConfig",
    "fields_problem",
    "is_onnx_path",
    "parse_input_shape",
    "stored_config_problem",
    "validation_message",
]
