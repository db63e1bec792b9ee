"""Command-line flags for the run options: one ``--option`` per ``engine.config.RunConfig`` field.

:func:`add_config_arguments` adds them to a parser (``analyse profile``), with defaults
suppressed so that only the flags given count; :func:`config_from_args` lays the given flags over
a base configuration (a run config file's, or the defaults) and validates the result with
``RunConfig`` (one sentence on a bad value). The options themselves, their types, defaults and
descriptions are declared once, in ``engine.config``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Literal

from engine.config import RunConfig, is_onnx_path, parse_input_shape
from engine.errors import ConfigError

#: Short aliases for common flags.
FLAG_ALIASES: dict[str, tuple[str, ...]] = {
    "micro_batch_size": ("--batch-size", "--micro-batch"),
    "gradient_accumulation": ("--ga",),
    "device_iterations": ("--di",),
    "replication_factor": ("--replicas",),
    "num_ipus": ("--ipus",),
}

#: The run options given one ``NAME=VALUE`` per flag (repeatable): flag, metavar, help.
_REPEATABLE: dict[str, tuple[str, str, str]] = {
    "input_shapes": (
        "--input-shape",
        "NAME=DIMS",
        "ONNX models: bind the shape of graph input NAME, e.g. input_ids=1x128 "
        "(repeatable); a dynamic batch dimension not given is bound by the micro-batch.",
    ),
    "target_overrides": (
        "--target-override",
        "KEY=VALUE",
        "Override one target parameter, e.g. clock_hz=1.6e9 (repeatable).",
    ),
}


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one ``--option`` per RunConfig field (defaults suppressed: only given flags count)."""
    group = parser.add_argument_group("run options (override the run config file)")
    for name, field in RunConfig.model_fields.items():
        flag = "--" + name.replace("_", "-")
        flags = (flag, *FLAG_ALIASES.get(name, ()))
        help_text = (field.description or "").replace("%", "%%")
        ann = field.annotation
        choices = _literal_choices(ann)
        kw: dict[str, Any] = dict(dest=name, default=argparse.SUPPRESS, help=help_text)
        if name in _REPEATABLE:  # one value per flag, the flag given again for the next
            flag, metavar, help_text = _REPEATABLE[name]
            group.add_argument(
                flag,
                dest=name,
                action="append",
                metavar=metavar,
                default=argparse.SUPPRESS,
                help=help_text,
            )
            continue
        # Values stay strings here and RunConfig validates them (pydantic converts "16" to 16),
        # so a bad value gives RunConfig's one sentence instead of argparse's usage dump.
        if ann is bool:
            group.add_argument(*flags, action=argparse.BooleanOptionalAction, **kw)
        elif choices:
            group.add_argument(*flags, metavar="{" + ",".join(choices) + "}", type=str, **kw)
        elif name in ("split_points", "recompute_checkpoints", "host_transforms"):
            # the description shows the TOML list; on the command line it is comma-separated
            kw["help"] = help_text.replace(
                "(e.g. ['layer3.8'])", "(e.g. layer3.8 or layer2.3,layer3.8)"
            ).replace(" Default [].", " Comma-separated; default none.")
            meta = "NAME[,NAME...]" if name == "host_transforms" else "LAYER[,LAYER...]"
            group.add_argument(*flags, metavar=meta, type=_csv, **kw)
        elif name == "available_memory_proportion_per_ipu":
            kw["help"] = help_text.replace(" Default [] (", " Comma-separated; default none (")
            group.add_argument(*flags, metavar="X[,X...]", type=_csv, **kw)
        elif ann in (int, int | None):
            group.add_argument(*flags, type=str, metavar="N", **kw)
        elif ann in (float, float | None):
            group.add_argument(*flags, type=str, metavar="X", **kw)
        else:
            group.add_argument(*flags, type=str, **kw)


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _literal_choices(ann: Any) -> tuple[str, ...] | None:
    from typing import Union, get_args, get_origin

    if get_origin(ann) is Literal:
        return tuple(get_args(ann))
    if get_origin(ann) in (Union, getattr(__import__("types"), "UnionType", Union)):
        for arg in get_args(ann):
            if get_origin(arg) is Literal:
                return tuple(get_args(arg))
    return None


def _parse_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ConfigError(f"--target-override: expected KEY=VALUE, got {text!r}.")
    key, value = text.split("=", 1)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key.strip(), parsed


def config_from_args(args: argparse.Namespace, base: RunConfig | dict | None = None) -> RunConfig:
    """Build a RunConfig from the flags given (over ``base``: a config, dict, or defaults)."""
    if isinstance(base, RunConfig):
        data = base.to_dict()
    else:
        data = dict(base or {})
    for name in RunConfig.model_fields:
        if hasattr(args, name):
            value = getattr(args, name)
            if name == "target_overrides":
                merged = dict(data.get("target_overrides") or {})
                merged.update(dict(_parse_override(v) for v in value))
                value = merged
            elif name == "input_shapes":
                shapes = dict(data.get("input_shapes") or {})
                shapes.update(dict(parse_input_shape(v) for v in value))
                value = shapes
            elif name == "model" and is_onnx_path(value):
                # on the command line, an ONNX path is relative to the current folder
                value = os.path.abspath(Path(value).expanduser())
            data[name] = value
    if getattr(args, "system", None) and data.get("system") != getattr(base, "system", None):
        # a system named on the command line sets the chip and the replicas that fill it, unless
        # those are given on the command line too (the base's own values are its defaults)
        for name in ("target", "replication_factor"):
            if not hasattr(args, name):
                data.pop(name, None)
    return RunConfig.from_dict(data)


__all__ = ["FLAG_ALIASES", "add_config_arguments", "config_from_args"]
