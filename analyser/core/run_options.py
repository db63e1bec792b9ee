"""What the analyser knows about each run option, generated from its declaration in
``engine.config.RunConfig`` (the one place options are declared: type, default, bounds and, on
the field, an :class:`engine.run_option.RunOption` record with its form section, aliases, the
figures it explains, tune's values; the profile stores the run configuration as that model dumps
it).

* the section an option belongs to (the GUI's run form and what-if sections): a field that
  declares ``section`` starts one, and fields keep the model's order, so a new option falls in
  the section of the field before it;
* which figures a change of the option can explain in a comparison
  (:mod:`analyser.core.comparison`), in the order of the fields' ``explain_rank``.

Figures an option may explain: ``memory`` OOM tiles and peak memory; ``ipu_memory`` memory per
IPU; ``input`` bytes received from the host; ``host_wait`` the host wait share; ``host_time``
host time per sample; ``remote_buffers`` remote-buffer bytes; ``compute_share`` OnTileExecute
and ramp shares; ``host_round_trips`` round trips per sample; ``allreduce`` replica all-reduce;
``stage_balance`` pipeline stage balance. (Cycles per sample and throughput are explained by
every option that differs.)
"""

from __future__ import annotations

import hashlib
import json
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.run_option import bounds, option_meta
from profiles.schema import RUN_CONFIG_VERSION


@dataclass(frozen=True)
class RunOption:
    """What the analyser knows of one run option: its form section, the figures it explains,
    its aliases, tune's values and its bounds (``{"ge": 1, ...}``), all from the field."""

    name: str
    section: str
    explains: tuple[str, ...]
    explain_rank: int = 1000
    aliases: tuple[str, ...] = ()
    tune: tuple[Any, ...] = ()
    lever_rank: int | None = None
    what_if: bool = False
    bounds: dict[str, float] | None = None


def options_of(model: type[RunConfig] = RunConfig) -> dict[str, RunOption]:
    """Every run option of ``model`` (RunConfig or a subclass), in the model's order."""
    out: dict[str, RunOption] = {}
    section = "Run"
    for name, field in model.model_fields.items():
        meta = option_meta(field)
        section = meta.section or section
        out[name] = RunOption(
            name,
            section,
            meta.explains,
            meta.explain_rank,
            meta.aliases,
            meta.tune,
            meta.lever_rank,
            meta.what_if,
            bounds(field),
        )
    return out


#: Every run option, in the model's order.
OPTIONS: dict[str, RunOption] = options_of()


def section_starts(model: type[RunConfig] = RunConfig) -> dict[str, str]:
    """Section headings of ``model``'s options: the first field of each section."""
    return {
        name: meta.section
        for name, meta in ((n, option_meta(f)) for n, f in model.model_fields.items())
        if meta.section
    }


#: Section headings: the first RunConfig field of each section.
SECTION_STARTS: dict[str, str] = section_starts()

#: What-if options: the engine can simulate them, no framework can apply them (docs/engine.md),
#: so `analyse tune` never proposes them.
WHAT_IF: frozenset[str] = frozenset(n for n, o in OPTIONS.items() if o.what_if)

#: Figures whose change each option can explain, the options in the order their reasons are
#: listed (each field's ``explain_rank``).
EXPLAINS: dict[str, tuple[str, ...]] = {
    o.name: o.explains for o in sorted(OPTIONS.values(), key=lambda o: o.explain_rank) if o.explains
}


def options_explaining(figure: str, options: dict[str, RunOption] | None = None) -> tuple[str, ...]:
    """The options whose change can explain ``figure``, in the order reasons are given."""
    ranked = sorted((options or OPTIONS).values(), key=lambda o: o.explain_rank)
    return tuple(o.name for o in ranked if figure in o.explains)


# ---------------------------------------------------------------------------------------------
# Reading the run configuration a profile stores
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoredRunConfig:
    """The run configuration of a profile, read as the engine's :class:`RunConfig`.

    The read is tolerant, so that older, newer and foreign profiles open:

    * each option the analyser knows is checked against the type and bounds RunConfig declares
      (a value that cannot be one is a :class:`profiles.errors.ProfileError` naming the option,
      raised by :func:`read_run_config`);
    * an option missing from the profile (one added to RunConfig after the profile was written)
      reads as RunConfig's default;
    * an option RunConfig does not have (a newer engine's, a foreign writer's) is left out of
      :attr:`config` and named in :attr:`ignored` and :attr:`note`;
    * the checks across options (a pipeline's split points, a system's replicas) are not run
      again: the engine ran them when it wrote the profile, and a synthetic profile's model is
      no zoo model.

    ``stored`` is the dict as the file holds it (shown literally by the Summary and the JSON
    report).
    """

    config: RunConfig
    stored: dict[str, Any]
    version: int
    ignored: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """One sentence on what was not read ('' when everything was)."""
        parts = []
        if self.version > RUN_CONFIG_VERSION:
            parts.append(
                f"its run configuration follows version {self.version} of the run options, newer "
                f"than this analyser's {RUN_CONFIG_VERSION}"
            )
        if self.ignored:
            parts.append(
                "options this analyser does not know were ignored: " + ", ".join(self.ignored)
            )
        return ("This profile: " + "; ".join(parts) + ".") if parts else ""


def read_run_config(stored: Any, version: Any = None, where: str = "profile") -> StoredRunConfig:
    """The run configuration ``stored`` in a profile (``/meta@run_config``, written as version
    ``version`` of the options, ``/meta@run_config_version``; None before format 1.3) as a
    :class:`StoredRunConfig`. Raises ProfileError naming ``where`` and the option when a known
    option's value is unusable."""
    from engine.config import stored_config_problem
    from profiles.errors import ProfileError

    data = stored if isinstance(stored, dict) else {}
    if version is None:
        version = 1  # profiles written before format 1.3 hold version 1's options
    if isinstance(version, bool) or not isinstance(version, numbers.Integral) or version < 1:
        raise ProfileError(
            f"{where}: run_config_version must be a whole number >= 1, got {version!r:.40}."
        )
    version = int(version)
    bad = stored_config_problem(data)
    if bad:
        raise ProfileError(f"{where}: its stored run configuration's {bad}")
    known = {k: v for k, v in data.items() if k in RunConfig.model_fields}
    ignored = tuple(k for k in data if k not in RunConfig.model_fields)
    config = RunConfig.model_construct(**known)
    return StoredRunConfig(config, data, version, ignored)


#: Longest file-name stem :func:`run_name` gives (before ``.h5`` and a uniqueness tag).
RUN_NAME_CHARS = 72
#: Options a run's name never spells: said by its head already, or not a choice of the run.
_UNNAMED = ("name", "model", "num_ipus", "target_overrides", "input_shapes")


def _baseline(config: Mapping[str, Any]) -> dict[str, Any]:
    """The run configuration of ``config``'s model, framework and target with every other
    option at its default, as a profile stores it (some defaults depend on those three)."""
    keys = ("model", "framework", "target")
    try:
        return RunConfig.from_dict({k: config[k] for k in keys if k in config}).to_dict()
    except Exception:  # a model file that is not there: the fields' own defaults
        return {
            k: f.get_default(call_default_factory=True) for k, f in RunConfig.model_fields.items()
        }


def _name_part(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "+".join(_name_part(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", str(value).rsplit("/", 1)[-1]).strip("_")


def run_name(config: Mapping[str, Any]) -> str:
    """A file-name stem that tells runs apart: the model (an ONNX file's stem), its IPUs, then
    each option set away from its default, by its shortest alias, in the form's order
    (``bert-base-2ipu-mbs4-ga16-precision16.16-pipelined``; a word value alone). Only
    letters, digits, ``.``, ``+``, ``-`` and ``_``; longer than :data:`RUN_NAME_CHARS`, it is cut and ends with a digest of the
    whole configuration so that two long names still differ."""
    defaults = _baseline(config)
    model = Path(str(config.get("model") or "run")).name
    if model.lower().endswith(".onnx"):
        model = model[: -len(".onnx")]
    head = f"{_name_part(model).lstrip('.+-') or 'run'}-{int(config.get('num_ipus') or 1)}ipu"
    parts = [head]
    framework = config.get("framework")
    if framework and framework != RunConfig.model_fields["framework"].default:
        parts.append(_name_part(framework))
    for key, opt in OPTIONS.items():
        if key in _UNNAMED or key not in config or config[key] == defaults.get(key):
            continue
        value = config[key]
        label = min(opt.aliases, key=len) if opt.aliases else key
        if isinstance(value, bool):
            parts.append(label if value else f"no_{label}")
            continue
        if isinstance(value, str) and re.fullmatch(r"[A-Za-z][A-Za-z_-]*", value):
            parts.append(_name_part(value))  # a word says its option ("pipelined", "async")
            continue
        parts.append(f"{label}{_name_part(value)}")
    name = "-".join(parts)
    if len(name) <= RUN_NAME_CHARS:
        return name
    digest = hashlib.sha256(
        json.dumps(dict(config), sort_keys=True, default=str).encode()
    ).hexdigest()[:8]
    kept = parts[0][: RUN_NAME_CHARS - 9]
    for part in parts[1:]:  # whole parts only, then the digest
        if len(kept) + 1 + len(part) > RUN_NAME_CHARS - 9:
            break
        kept += "-" + part
    return f"{kept}-{digest}"
