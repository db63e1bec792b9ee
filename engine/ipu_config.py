"""optimum-graphcore's ``ipu_config.json`` read as run options.

Hugging Face users of IPUs describe a run with optimum-graphcore's ``IPUConfig``
(``optimum/graphcore/ipu_configuration.py``); its ``_to_options`` turns it into PopTorch options.
:func:`options_from_ipu_config` maps the same fields to :class:`engine.config.RunConfig` options
as ``_to_options`` maps them to PopTorch's, in training or inference mode (the ``inference_*``
twins):

==================================  ==============================================================
IPUConfig                           run option (PopTorch option it sets)
==================================  ==============================================================
replication_factor                  replication_factor (``replicationFactor``)
gradient_accumulation_steps         gradient_accumulation (``Training.gradientAccumulation``)
device_iterations                   device_iterations (``deviceIterations``)
ipus_per_replica, layers_per_ipu    num_ipus, split_points, strategy: pipelined when training,
                                    sharded for inference (``PipelinedExecution`` /
                                    ``ShardedExecution``); the layers are the model's repeated
                                    blocks (``encoder.layer.N``, ``h.N``), split as
                                    ``_expand_layers_per_ipu_wildcard`` splits them (-1: the
                                    rest evenly, the remainder on the last wildcard IPU)
matmul_proportion                   available_memory_proportion, or one per IPU
                                    (``setAvailableMemoryProportion({"IPU0": ...})``)
optimizer_state_offchip             offload_optimiser_state (``useOnChipStorage(not ...)``)
replicated_tensor_sharding          replicated_tensor_sharding, with replicas only
enable_half_partials                partials_type half, for a float16 model
                                    (``Precision.setPartialsType(torch.float16)``)
recompute_checkpoint_every_layer    recomputation = checkpoints at every block's output
output_mode                         output_mode (inference always returns all, as
                                    ``_to_options`` sets ``OutputMode.All``)
==================================  ==============================================================

Fields with no counterpart (embedding and projection serialisation, explicit IR, automatic loss
scaling) are named in one note when set; fields that do not change what runs (the seed, the
executable cache) are accepted silently. A field IPUConfig does not have is refused, as
IPUConfig itself refuses it. The file is an untrusted input: a regular file of at most 1 MiB,
JSON, every value of its field's type; each problem is one :class:`ConfigError` sentence.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from profiles.inputs import read_regular

#: IPUConfig's fields and their defaults (``IPUConfig.__init__``).
DEFAULTS: dict[str, Any] = {
    "replication_factor": 1,
    "inference_replication_factor": 1,
    "gradient_accumulation_steps": 1,
    "layers_per_ipu": [-1],
    "inference_layers_per_ipu": None,
    "ipus_per_replica": None,
    "inference_ipus_per_replica": None,
    "optimizer_state_offchip": False,
    "replicated_tensor_sharding": False,
    "matmul_proportion": 0.2,
    "inference_matmul_proportion": None,
    "enable_half_partials": True,
    "embedding_serialization_factor": None,
    "inference_embedding_serialization_factor": None,
    "serialized_embedding_splits_per_ipu": None,
    "inference_serialized_embedding_splits_per_ipu": None,
    "projection_serialization_factor": None,
    "inference_projection_serialization_factor": None,
    "serialized_projection_splits_per_ipu": None,
    "inference_serialized_projection_splits_per_ipu": None,
    "recompute_checkpoint_every_layer": False,
    "device_iterations": 1,
    "inference_device_iterations": 1,
    "output_mode": "final",
    "seed": None,
    "auto_loss_scaling": False,
    "executable_cache_dir": "",
    "explicit_ir_inference": False,
    "parallelize_kwargs": None,
    "inference_parallelize_kwargs": None,
    "execute_encoder_on_cpu_for_generation": False,
}
#: Fields that change what runs but have no run option (named in the note when set).
UNEXPRESSED = (
    "embedding_serialization_factor",
    "serialized_embedding_splits_per_ipu",
    "projection_serialization_factor",
    "serialized_projection_splits_per_ipu",
    "explicit_ir_inference",
    "auto_loss_scaling",
    "parallelize_kwargs",
    "execute_encoder_on_cpu_for_generation",
)
#: Deprecated fields IPUConfig still accepts (it warns and drops them).
DEPRECATED = frozenset({"sharded_execution_for_inference", "enable_half_first_order_momentum"})
#: Largest ipu_config.json read (optimum-graphcore's are well under 2 kB).
LIMIT = 1 << 20
#: The model options the layer list depends on (the graph is built from these alone).
MODEL_OPTIONS = (
    "model",
    "input_shapes",
    "unknown_ops",
    "image_size",
    "image_channels",
    "num_classes",
    "seq_length",
    "vocab_size",
    "mode",
    "micro_batch_size",
    "precision",
)
_BLOCK = re.compile(r"^(.+)\.(\d+)$")


def read_ipu_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The fields of an ``ipu_config.json`` (every key known, every value of its type)."""
    name = repr(str(path))
    raw = read_regular(path, f"IPU config {name}", ConfigError, limit=LIMIT)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"IPU config {name} is not JSON: {exc}.") from None
    except RecursionError:
        raise ConfigError(f"IPU config {name} nests too deeply to be an IPU config.") from None
    return read_ipu_config_dict(data, str(path))


def read_ipu_config_dict(data: Any, source: str = "ipu_config.json") -> dict[str, Any]:
    """The fields of an IPUConfig given as a mapping (JSON already parsed), checked as
    :func:`read_ipu_config` checks a file's."""
    name = repr(source)
    if not isinstance(data, dict):
        raise ConfigError(f"IPU config {name} must be a JSON object of IPUConfig's fields.")
    out = {}
    for key, value in data.items():
        if key in DEPRECATED or (key.endswith("_version") or key.startswith("_")):
            continue  # saved by optimum itself (its version, the class name) or ignored by it
        if key not in DEFAULTS:
            from difflib import get_close_matches

            close = get_close_matches(key, list(DEFAULTS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"IPU config {name}: {ascii(key)[:80]} is not a field of optimum-graphcore's "
                f"IPUConfig{hint}."
            )
        out[key] = _checked(name, key, value)
    return out


def _checked(name: str, key: str, value: Any) -> Any:
    def bad(kind: str) -> ConfigError:
        shown = json.dumps(value)[:60]
        return ConfigError(f"IPU config {name}: {key} must be {kind}, not {shown}.")

    if value is None:
        if DEFAULTS[key] is None:
            return None
        raise bad("given (null is not allowed)")
    if key.endswith("layers_per_ipu") or key.endswith("splits_per_ipu"):
        if not isinstance(value, list) or not value or len(value) > 64:
            raise bad("a list of 1 to 64 whole numbers")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= -1 for v in value):
            raise bad("a list of whole numbers of at least -1")
        return value
    if key.endswith("matmul_proportion"):
        items = value if isinstance(value, list) else [value]
        if not items or len(items) > 64:
            raise bad("a proportion or a list of 1 to 64 proportions")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            raise bad("a proportion or a list of proportions")
        if not all(0 < v <= 1 for v in items):
            raise bad("above 0 and at most 1")
        return [float(v) for v in value] if isinstance(value, list) else float(value)
    default = DEFAULTS[key]
    if isinstance(default, bool) or key in ("explicit_ir_inference",):
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if key == "output_mode":
        if value not in ("all", "sum", "final", "default"):
            raise bad("one of all, sum, final, default")
        return value
    if key in ("executable_cache_dir",):
        if not isinstance(value, str):
            raise bad("a folder name")
        return value
    if key.endswith("parallelize_kwargs"):
        if not isinstance(value, dict):
            raise bad("an object")
        return value
    if not isinstance(value, int) or isinstance(value, bool):
        raise bad("a whole number")
    if key != "seed" and not 1 <= value <= 1 << 20:
        raise bad("a whole number from 1 to 1,048,576")
    return value


def blocks(layer_names: list[str]) -> list[str]:
    """The model's repeated blocks, in order: the children ``prefix.0``, ``prefix.1``, ... of
    the container with the most numbered children (BERT's ``encoder.layer``, GPT-2's ``h``)."""
    counts: Counter[str] = Counter()
    for n in layer_names:
        m = _BLOCK.match(n)
        if m:
            counts[m.group(1)] += 1
    if not counts or counts.most_common(1)[0][1] < 2:
        return []
    prefix = counts.most_common(1)[0][0]
    found: dict[int, str] = {}
    for n in layer_names:
        m = _BLOCK.match(n)
        if m and m.group(1) == prefix:
            found.setdefault(int(m.group(2)), n)
    return [found[k] for k in sorted(found)]


def expand_layers_per_ipu(layers_per_ipu: list[int], ipus: int, n_layers: int) -> list[int]:
    """Layers per IPU with the wildcards (-1) resolved, as optimum-graphcore's
    ``_expand_layers_per_ipu_wildcard`` resolves them (ConfigError where it raises)."""
    if ipus == 1:
        return [n_layers]
    if layers_per_ipu in ([-1], [-1] * ipus):
        q, r = divmod(n_layers, ipus)
        out = [q] * ipus
        out[-1] += r
        return out
    if len(layers_per_ipu) != ipus:
        raise ConfigError(
            f"IPU config: layers_per_ipu {layers_per_ipu} has {len(layers_per_ipu)} entries "
            f"but ipus_per_replica is {ipus}."
        )
    if -1 in layers_per_ipu:
        wild = [i for i, v in enumerate(layers_per_ipu) if v == -1]
        left = n_layers - sum(v for v in layers_per_ipu if v != -1)
        if left < 0:
            raise ConfigError(
                f"IPU config: layers_per_ipu {layers_per_ipu} places more than the model's "
                f"{n_layers} layers."
            )
        q, r = divmod(left, len(wild))
        out = list(layers_per_ipu)
        for i in wild:
            out[i] = q
        out[wild[-1]] += r
        return out
    if sum(layers_per_ipu) != n_layers:
        raise ConfigError(
            f"IPU config: layers_per_ipu {layers_per_ipu} places {sum(layers_per_ipu)} layers "
            f"but the model has {n_layers}."
        )
    return list(layers_per_ipu)


def _layer_names(model_options: dict[str, Any]) -> list[str]:
    from engine.config import RunConfig
    from engine.models import build_model

    view = {k: model_options[k] for k in MODEL_OPTIONS if k in model_options}
    return list(build_model(RunConfig.from_dict(view)).layer_names)


def options_from_ipu_config(
    fields: dict[str, Any], model_options: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """(run options, note or None) of IPUConfig ``fields`` for the model of ``model_options``
    (its model, input and mode options; training unless ``mode`` is inference)."""
    f = {**DEFAULTS, **fields}
    inference = model_options.get("mode") == "inference"

    def pick(key: str) -> Any:
        twin = f.get(f"inference_{key}") if inference else None
        return f[key] if twin is None else twin

    layers_per_ipu = pick("layers_per_ipu")
    ipus = pick("ipus_per_replica") or len(layers_per_ipu)
    opts: dict[str, Any] = {
        "framework": "poptorch",
        "replication_factor": pick("replication_factor"),
        "device_iterations": pick("device_iterations"),
        "num_ipus": ipus,
        "offload_optimiser_state": "on" if f["optimizer_state_offchip"] else "off",
        "replicated_tensor_sharding": bool(
            f["replicated_tensor_sharding"] and pick("replication_factor") > 1
        ),
        "output_mode": "all"
        if inference
        else {"default": "auto"}.get(f["output_mode"], f["output_mode"]),
    }
    if not inference:
        opts["gradient_accumulation"] = f["gradient_accumulation_steps"]
    if f["enable_half_partials"] and str(model_options.get("precision", "32.32")).startswith("16"):
        opts["partials_type"] = "half"
    proportion = pick("matmul_proportion")
    if isinstance(proportion, list):
        if len(proportion) != ipus:
            raise ConfigError(
                f"IPU config: matmul_proportion {proportion} has {len(proportion)} values for "
                f"{ipus} IPU(s) per replica."
            )
        if len(set(proportion)) == 1:
            opts["available_memory_proportion"] = proportion[0]
        else:
            opts["available_memory_proportion_per_ipu"] = proportion
    else:
        opts["available_memory_proportion"] = proportion
    needs_layers = ipus > 1 or f["recompute_checkpoint_every_layer"]
    names = blocks(_layer_names(model_options)) if needs_layers else []
    if needs_layers and not names:
        raise ConfigError(
            f"IPU config: the model {model_options.get('model')!r} has no repeated layers "
            "(numbered blocks such as encoder.layer.0) to place with layers_per_ipu; give "
            "split_points instead."
        )
    if ipus > 1:
        counts = expand_layers_per_ipu(list(layers_per_ipu), ipus, len(names))
        starts: list[str] = []
        total = 0
        for n in counts[:-1]:
            total += n
            if total >= len(names):
                raise ConfigError(
                    f"IPU config: layers_per_ipu {layers_per_ipu} leaves IPU(s) after "
                    f"{len(starts) + 1} without layers."
                )
            starts.append(names[total])
        opts["split_points"] = starts
        opts["strategy"] = "sharded" if inference else "pipelined"
    else:
        opts["strategy"] = "single"
        opts["split_points"] = []
    if f["recompute_checkpoint_every_layer"] and not inference:
        opts["recomputation"] = "checkpoints"
        opts["recompute_checkpoints"] = names
    return opts, _note(f, inference)


def _note(f: dict[str, Any], inference: bool) -> str | None:
    unset = []
    for key in UNEXPRESSED:
        twin = f.get(f"inference_{key}") if inference else None
        value = f.get(key) if twin is None else twin
        if value not in (None, False, 1, {}, "") and not (
            key.endswith("serialization_factor") and value == 1
        ):
            unset.append(key)
    if not unset:
        return None
    return (
        "IPU config: not simulated (no run option expresses them): "
        + ", ".join(unset)
        + "; the profile runs without them."
    )


def load(path: str | os.PathLike[str], model_options: dict[str, Any]):
    """:func:`read_ipu_config` then :func:`options_from_ipu_config`; errors name the file."""
    fields = read_ipu_config(path)
    try:
        return options_from_ipu_config(fields, model_options)
    except ConfigError as exc:
        text = str(exc)
        if text.startswith("IPU config: "):
            text = f"IPU config {str(Path(path))!r}: " + text[len("IPU config: ") :]
        raise ConfigError(text) from None


__all__ = [
    "DEFAULTS",
    "blocks",
    "expand_layers_per_ipu",
    "load",
    "options_from_ipu_config",
    "read_ipu_config",
    "read_ipu_config_dict",
]
