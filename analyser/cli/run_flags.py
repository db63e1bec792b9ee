"""Command-line flags for the run options: one ``--option`` per ``engine.config.RunConfig`` field.

:func:`add_config_arguments` adds them to a parser (``analyse profile``), with defaults
suppressed so that only the flags given count; :func:`config_from_args` lays the given flags over
a base configuration (a run config file's, or the defaults) and validates the result with
``RunConfig`` (one sentence on a bad value). The options themselves, their types, defaults and
descriptions, aliases and command-line forms are declared once, on the fields of
``engine.config.RunConfig`` (:mod:`engine.run_option`).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, Literal, get_origin

from engine.config import RunConfig, is_onnx_path, parse_input_shape
from engine.errors import ConfigError
from engine.run_option import option_meta


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def flag_aliases(model: type[RunConfig] = RunConfig) -> dict[str, tuple[str, ...]]:
    """Each option's alias flags, from the ``aliases`` declared on its field."""
    out = {}
    for name, field in model.model_fields.items():
        aliases = option_meta(field).aliases
        if aliases:
            out[name] = tuple(_flag(a) for a in aliases)
    return out


#: Short aliases for common flags.
FLAG_ALIASES: dict[str, tuple[str, ...]] = flag_aliases()


def add_config_arguments(
    parser: argparse.ArgumentParser, model: type[RunConfig] = RunConfig
) -> None:
    """Add one ``--option`` per field of ``model`` (defaults suppressed: only given flags count).

    Each flag follows its field: the type gives the kind of value, the description (or the
    field's ``cli_help``) the help, and the field's aliases more flags."""
    group = parser.add_argument_group("run options (override the run config file)")
    for name, field in model.model_fields.items():
        meta = option_meta(field)
        help_text = (meta.cli_help or field.description or "").replace("%", "%%")
        if meta.cli_repeat:  # one value per flag, the flag given again for the next
            group.add_argument(
                meta.cli_flag or _flag(name),
                dest=name,
                action="append",
                metavar=meta.cli_metavar,
                default=argparse.SUPPRESS,
                help=help_text,
            )
            continue
        flags = (_flag(name), *(_flag(a) for a in meta.aliases))
        ann = field.annotation
        choices = _literal_choices(ann)
        kw: dict[str, Any] = dict(dest=name, default=argparse.SUPPRESS, help=help_text)
        # Values stay strings here and RunConfig validates them (pydantic converts "16" to 16),
        # so a bad value gives RunConfig's one sentence instead of argparse's usage dump.
        if ann is bool:
            group.add_argument(*flags, action=argparse.BooleanOptionalAction, **kw)
        elif choices:
            group.add_argument(*flags, metavar="{" + ",".join(choices) + "}", type=str, **kw)
        elif get_origin(ann) is list and meta.cli_metavar:
            # a list, comma-separated on the command line (its TOML form is a list)
            group.add_argument(*flags, metavar=meta.cli_metavar, type=_csv, **kw)
        elif ann in (int, int | None):
            group.add_argument(*flags, type=str, metavar="N", **kw)
        elif ann in (float, float | None):
            group.add_argument(*flags, type=str, metavar="X", **kw)
        else:
            group.add_argument(*flags, type=str, metavar=meta.cli_metavar, **kw)


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


def config_from_args(
    args: argparse.Namespace,
    base: RunConfig | dict | None = None,
    model: type[RunConfig] = RunConfig,
) -> RunConfig:
    """Build a RunConfig from the flags given (over ``base``: a config, dict, or defaults)."""
    if isinstance(base, RunConfig):
        data = base.to_dict()
    else:
        data = dict(base or {})
    for name in model.model_fields:
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
    return model.from_dict(data)


__all__ = ["FLAG_ALIASES", "add_config_arguments", "config_from_args", "flag_aliases"]
