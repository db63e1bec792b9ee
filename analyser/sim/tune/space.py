"""The search space of ``analyse tune``: dimensions (``--vary``), constraints and the objective.

A :class:`Space` is the start configuration plus one :class:`Dimension` per varied run option,
each with its values in order. ``--vary`` specs:

* ``NAME=v1,v2,...``: the listed values (split points of one value joined with ``+``:
  ``split_points=layer3.6+layer4.0``);
* ``NAME=A..B``: A, 2A, 4A, ... up to B (integers; the batch-like options double);
* ``NAME=A..B:S``: A, A+S, ... up to B;
* ``NAME=auto``: the values the IPU memory and throughput guides suggest for that lever
  (:func:`lever_values`); ``split_points=auto`` is a search of its own, of the split points
  and the per-stage memory proportions together, by re-simulation
  (:mod:`analyser.sim.tune.autosplit`), with ``--vary available_memory_proportion=...`` as
  the proportions each stage may take.

Without ``--vary`` the space is derived from the start configuration: every lever of
:data:`LEVERS` that applies to it, plus every value an insight on the start profile proposes.

Constraints (``--constraint``): ``fits`` (always on), ``global_batch=N`` (micro-batch x
gradient accumulation x replicas; when gradient accumulation is not varied it is derived from
the micro-batch so the global batch stays N), ``ipus<=N`` (IPUs per replica x replicas) and
``NAME OP VALUE`` on any numeric run option (checked before simulating) or on a figure
(``throughput``, ``cycles_per_sample``, ``headroom``, ``peak_memory``, checked after).

Every mistake is one sentence naming the spec (:class:`TuneError`).
"""

from __future__ import annotations

import difflib
import itertools
import math
import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from engine.run_option import RunOption
from profiles.errors import UserFacingError

_NO_META = RunOption()


class TuneError(UserFacingError):
    """A bad ``--vary`` / ``--constraint`` / ``--objective`` (one sentence)."""


def _meta(model: Any = None) -> dict[str, Any]:
    """Each option's :class:`engine.run_option.RunOption` (RunConfig's, or ``model``'s)."""
    from engine.config import RunConfig
    from engine.run_option import option_meta

    return {n: option_meta(f) for n, f in (model or RunConfig).model_fields.items()}


def option_aliases(model: Any = None) -> dict[str, str]:
    """Short names accepted for options (the ``aliases`` declared on the fields, the same the
    command line accepts as flags)."""
    return {alias: name for name, meta in _meta(model).items() for alias in meta.aliases}


def levers(model: Any = None) -> tuple[str, ...]:
    """The options with a ``lever_rank``, in rank order: what tune varies without --vary."""
    ranked = [(m.lever_rank, n) for n, m in _meta(model).items() if m.lever_rank is not None]
    return tuple(n for _, n in sorted(ranked))


#: Short names accepted for options.
ALIASES = option_aliases()

#: The levers tune varies when no --vary is given, in the IPU memory guide's order then the
#: throughput levers (precision, micro-batch and GA at the same global batch, recomputation,
#: AMP, schedules, offloading, split points, I/O tiles, prefetch, 8-bit input, loader), as the
#: fields' ``lever_rank`` orders them.
LEVERS = levers()

#: Most configurations a space may enumerate (a grid beyond this is refused, not attempted).
MAX_GRID = 100_000

OBJECTIVES = {
    # name: (figure, direction +1 maximise / -1 minimise, label)
    "throughput": ("throughput_samples_per_s", 1, "samples/s"),
    "cycles_per_sample": ("cycles_per_sample", -1, "cycles per sample"),
    "memory_headroom": ("headroom_bytes", 1, "free bytes on the fullest tile"),
}

#: Figures a constraint may name (checked after simulating), with aliases.
FIGURES = {
    "throughput": "throughput_samples_per_s",
    "cycles_per_sample": "cycles_per_sample",
    "headroom": "headroom_bytes",
    "memory_headroom": "headroom_bytes",
    "peak_memory": "peak_memory_bytes",
    "max_tile_memory": "max_tile_memory_bytes",
    "oom_tiles": "oom_tiles",
}

_OPS = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "=": operator.eq,
}


def _fields() -> dict[str, Any]:
    from engine.config import RunConfig

    return RunConfig.model_fields


def option_name(name: str, spec: str) -> str:
    """The RunConfig field named by ``name`` (or an alias); TuneError naming ``spec``."""
    name = name.strip()
    fields = _fields()
    aliases = option_aliases()
    real = aliases.get(name, name)
    if real in fields and real not in ("name", "target_overrides"):
        return real
    close = difflib.get_close_matches(name, list(fields) + list(aliases), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise TuneError(f"{spec}: {name!r} is not a run option{hint}.")


def _kind(name: str) -> str:
    """int, float, bool, list or str: how a value of option ``name`` is parsed."""
    ann = str(_fields()[name].annotation)
    for k in ("bool", "list", "float", "int"):
        if k in ann:
            return k
    return "str"


def parse_value(name: str, text: str, spec: str) -> Any:
    """One value of option ``name`` from text, validated by the RunConfig field."""
    from pydantic import TypeAdapter, ValidationError

    f = _fields()[name]
    kind = _kind(name)
    raw: Any = text.strip()
    if kind == "list":
        raw = [p.strip() for p in raw.split("+") if p.strip()]
    elif kind == "bool":
        low = raw.lower()
        if low in ("true", "on", "yes", "1"):
            raw = True
        elif low in ("false", "off", "no", "0"):
            raw = False
        else:
            raise TuneError(f"{spec}: {text!r} is not true or false.")
    elif raw.lower() in ("none", "default") and f.default is None:
        return None
    try:
        value = TypeAdapter(f.annotation).validate_python(raw)
    except ValidationError as exc:
        why = exc.errors()[0].get("msg", "invalid value").rstrip(".")
        raise TuneError(f"{spec}: {text.strip()!r} is not a valid {name} ({why}).") from None
    for meta in f.metadata:  # ge / le / gt bounds declared on the field
        for attr, op, word in (
            ("ge", operator.ge, ">="),
            ("gt", operator.gt, ">"),
            ("le", operator.le, "<="),
        ):
            bound = getattr(meta, attr, None)
            if bound is not None and value is not None and not op(value, bound):
                raise TuneError(f"{spec}: {name} must be {word} {bound:g} (got {value!r}).")
    return value


def _range(name: str, text: str, spec: str) -> list[Any]:
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*\.\.\s*([0-9.eE+-]+)\s*(?::\s*([0-9.eE+-]+))?\s*", text)
    if not m:
        raise TuneError(f"{spec}: a range is written A..B or A..B:STEP (e.g. 8..64).")
    kind = _kind(name)
    if kind not in ("int", "float"):
        raise TuneError(f"{spec}: {name} is not numeric, so it takes a list, not a range.")
    num = int if kind == "int" else float
    try:
        a, b = num(m.group(1)), num(m.group(2))
        step = num(m.group(3)) if m.group(3) else None
    except ValueError:
        raise TuneError(
            f"{spec}: the range bounds of {name} must be {'whole ' if num is int else ''}numbers."
        ) from None
    if a > b:
        raise TuneError(f"{spec}: the range starts above its end ({a} > {b}).")
    values: list[Any] = []
    if step is None:
        if num is float or a <= 0:
            raise TuneError(
                f"{spec}: A..B doubles from a positive whole number; give a step for "
                f"{name} (A..B:STEP)."
            )
        v = a
        while v <= b:
            values.append(v)
            v *= 2
    else:
        if step <= 0:
            raise TuneError(f"{spec}: the step must be positive.")
        n = math.floor((b - a) / step + 1e-9) + 1
        if n > 10_000:
            raise TuneError(f"{spec}: the range has {n:,} values; use a larger step.")
        values = [num(round(a + i * step, 12)) for i in range(n)]
    return [parse_value(name, str(v), spec) for v in values]


@dataclass
class Dimension:
    name: str
    values: list[Any]


def parse_vary(spec: str, start: dict[str, Any], *, insight_values=None) -> Dimension:
    """One ``--vary NAME=...`` spec against the start configuration (resolved dict)."""
    label = f"--vary {spec}"
    if "=" not in spec:
        raise TuneError(f"{label}: write NAME=VALUES, e.g. micro_batch_size=8,16,32.")
    name, _, text = spec.partition("=")
    name = option_name(name, label)
    text = text.strip()
    if not text:
        raise TuneError(f"{label}: no values after '='.")
    if text == "auto":
        values = lever_values(name, start, insight_values or {})
        if len(values) < 2:
            raise TuneError(f"{label}: {name} has no alternative for this configuration.")
    elif ".." in text:
        values = _range(name, text, label)
    else:
        values = [parse_value(name, t, label) for t in text.split(",") if t.strip()]
    if not values:
        raise TuneError(f"{label}: no values.")
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return Dimension(name, out)


def _auto_split(vary: list[str], start: dict[str, Any]) -> tuple[list[str], Any]:
    """The ``--vary`` specs without ``split_points=auto`` (and without the proportions it
    takes per stage), and its search (None when not asked for)."""
    from analyser.sim.tune.autosplit import auto_split

    def name_of(spec: str) -> str | None:
        name, eq, _ = spec.partition("=")
        real = option_aliases().get(name.strip(), name.strip())
        return real if eq and real in _fields() else None

    autos = [
        s for s in vary if name_of(s) == "split_points" and s.partition("=")[2].strip() == "auto"
    ]
    if not autos:
        return vary, None
    label = f"--vary {autos[0]}"
    rest = [s for s in vary if s not in autos]
    if any(name_of(s) == "split_points" for s in rest):
        raise TuneError(f"{label}: split_points is varied twice; give auto or a list.")
    if any(name_of(s) == "available_memory_proportion_per_ipu" for s in rest):
        raise TuneError(
            f"{label}: the auto search chooses available_memory_proportion_per_ipu itself; "
            "give the proportions a stage may take with --vary available_memory_proportion=..."
        )
    amps = [s for s in rest if name_of(s) == "available_memory_proportion"]
    values = None
    if amps:
        d = parse_vary(amps[0], start)
        values = [v for v in d.values if v is not None]
        if not values:
            raise TuneError(f"--vary {amps[0]}: give proportions (0 < x <= 1) for the stages.")
        rest = [s for s in rest if s not in amps]
    return rest, auto_split(start, values, label)


def lever_values(
    name: str, start: dict[str, Any], insight_values: dict[str, list[Any]]
) -> list[Any]:
    """The values worth trying for lever ``name`` from the start configuration (the start's
    own value first), including what the insights on the start profile propose."""
    cur = start.get(name)
    vals: list[Any] = [cur]
    if not _lever_applies(name, start):
        pass
    elif name in ("micro_batch_size", "gradient_accumulation", "device_iterations"):
        n: int = start[name]  # an int field every resolved configuration holds
        if name == "micro_batch_size":
            vals += [v for v in (n // 4, n // 2, n * 2) if v >= 1]
        elif name == "gradient_accumulation":
            vals += [n * 2, n * 4] + ([8, 16] if n < 8 else [])
        else:
            vals += [4, 16] if n < 4 else [n * 2]
    elif name == "split_points":
        vals += _split_candidates(start)
    else:  # the values declared on the field
        vals += [v for v in _meta().get(name, _NO_META).tune if _value_applies(name, v, start)]
    vals += insight_values.get(name, [])
    out: list[Any] = []
    for v in vals:
        if v not in out:
            out.append(v)
    return out


def _lever_applies(name: str, start: dict[str, Any]) -> bool:
    """Whether varying lever ``name`` can change a run of ``start`` at all (training-only
    levers in inference, pipeline levers off a pipeline, 8-bit input for token ids)."""
    training = start.get("mode") == "training"
    if name in ("gradient_accumulation", "recomputation", "offload_optimiser_state"):
        return training
    if name == "offload_accumulators":
        return training and start.get("gradient_accumulation", 1) > 1
    if name == "schedule":
        return start.get("strategy") == "pipelined"
    if name == "split_points":
        return bool(start.get("split_points"))
    if name == "eight_bit_input":
        return not str(start.get("model", "")).startswith("bert")
    return True


def _value_applies(name: str, value: Any, start: dict[str, Any]) -> bool:
    """Whether one declared value of lever ``name`` is a configuration of ``start``."""
    if name == "recomputation" and value == "pipeline-stages":
        return start.get("strategy") == "pipelined"
    return True


def _split_candidates(start: dict[str, Any]) -> list[list[str]]:
    """Split points shifted by one or two blocks of the same level, all together."""
    from engine.config import RunConfig
    from engine.models import build_model

    splits = list(start.get("split_points") or [])
    try:
        graph = build_model(RunConfig.from_dict(start))
    except Exception:  # the engine refuses the start: no candidates
        return []
    names = graph.layer_names
    depth = {s: s.count(".") for s in splits}
    out = []
    for shift in (-2, -1, 1, 2):
        moved = []
        for s in splits:
            level = [n for n in names if n.count(".") == depth[s]]
            i = level.index(s) + shift if s in level else -1
            if not 0 < i < len(level):
                break
            moved.append(level[i])
        else:
            if len(set(moved)) == len(moved) and moved != splits:
                out.append(moved)
    return out


@dataclass
class Constraint:
    text: str
    name: str
    op: Any
    value: float
    #: "config" (checked before simulating) or "figure" (after)
    where: str

    def holds(self, value: Any) -> bool:
        return value is not None and bool(self.op(float(value), self.value))


def parse_constraint(text: str) -> Constraint | None:
    """``fits`` (None: always on), ``global_batch=N``, ``ipus<=N``, ``NAME OP VALUE``."""
    label = f"--constraint {text}"
    t = text.strip()
    if t == "fits":
        return None
    m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(<=|>=|==|!=|<|>|=)\s*(\S+)\s*", t)
    if not m:
        raise TuneError(
            f"{label}: write fits or NAME OP VALUE with OP one of <= >= < > = != "
            "(e.g. ipus<=4, global_batch=2048)."
        )
    name, op, raw = m.groups()
    try:
        value = float(raw)
    except ValueError:
        raise TuneError(f"{label}: {raw!r} is not a number.") from None
    if name in ("ipus", "global_batch", "samples_per_step"):
        return Constraint(t, name, _OPS[op], value, "config")
    if name in FIGURES:
        return Constraint(t, FIGURES[name], _OPS[op], value, "figure")
    real = option_name(name, label)
    if _kind(real) not in ("int", "float"):
        raise TuneError(f"{label}: {real} is not numeric; vary it instead.")
    return Constraint(t, real, _OPS[op], value, "config")


def config_quantity(cfg: dict[str, Any], name: str) -> float | None:
    if name == "ipus":
        return cfg["num_ipus"] * cfg["replication_factor"]
    if name == "global_batch":
        return cfg["micro_batch_size"] * cfg["gradient_accumulation"] * cfg["replication_factor"]
    if name == "samples_per_step":
        return global_batch(cfg) * cfg["device_iterations"]
    v = cfg.get(name)
    return None if v is None else float(v)


def global_batch(cfg: dict[str, Any]) -> int:
    return cfg["micro_batch_size"] * cfg["gradient_accumulation"] * cfg["replication_factor"]


@dataclass
class Space:
    """The start configuration, the dimensions and the constraints of a tune."""

    start: dict[str, Any]
    dims: list[Dimension]
    constraints: list[Constraint] = field(default_factory=list)
    objective: str = "throughput"
    #: ``--vary split_points=auto`` (analyser.sim.tune.autosplit.AutoSplit), searched after
    #: the dimensions
    auto_split: Any = None

    @property
    def size(self) -> int:
        return math.prod(len(d.values) for d in self.dims)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dims]

    def config(self, assignment: tuple[int, ...]) -> dict[str, Any] | None:
        """The run configuration of an assignment (value index per dimension), or None when
        it breaks a configuration constraint (e.g. the global batch)."""
        cfg = dict(self.start)
        for d, i in zip(self.dims, assignment):
            cfg[d.name] = d.values[i]
        return self.complete(cfg)

    def complete(self, cfg: dict[str, Any]) -> dict[str, Any] | None:
        """Apply the coupled options and check the configuration constraints."""
        cfg = dict(cfg)
        names = self.names
        # FP16 training needs loss scaling (the insights' FP16 tip sets 128, walkthrough step 2)
        if "precision" in names and "loss_scaling" not in names and cfg.get("mode") == "training":
            if str(cfg["precision"]).startswith("16") and self.start.get("loss_scaling") == 1.0:
                cfg["loss_scaling"] = 128.0
            elif not str(cfg["precision"]).startswith("16"):
                cfg["loss_scaling"] = self.start.get("loss_scaling", 1.0)
        for c in self.constraints:
            if c.where != "config":
                continue
            if (
                c.name == "global_batch"
                and c.op is operator.eq
                and "gradient_accumulation" not in names
            ):
                per = cfg["micro_batch_size"] * cfg["replication_factor"]
                if c.value % per:
                    return None
                cfg["gradient_accumulation"] = int(c.value // per)
            if not c.holds(config_quantity(cfg, c.name)):
                return None
        return cfg

    def assignments(self) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(len(d.values)) for d in self.dims))

    def project(self, cfg: dict[str, Any]) -> tuple[int, ...]:
        """The assignment nearest to ``cfg`` (its own value where the dimension has it; the
        nearest numeric value, else the first)."""
        out = []
        for d in self.dims:
            out.append(_nearest(d.values, cfg.get(d.name)))
        return tuple(out)

    def feasible(self, figures: dict[str, Any]) -> bool:
        """Fits, and every figure constraint holds."""
        if not figures or not figures.get("fits"):
            return False
        return all(c.holds(figures.get(c.name)) for c in self.constraints if c.where == "figure")

    def score(self, figures: dict[str, Any]) -> float | None:
        """The objective as a number to maximise (None without the figure)."""
        key, sign, _ = OBJECTIVES[self.objective]
        v = figures.get(key) if figures else None
        return None if v is None else sign * float(v)


def _nearest(values: list[Any], v: Any) -> int:
    if v in values:
        return values.index(v)
    if isinstance(v, int | float) and not isinstance(v, bool):
        nums = [
            (abs(float(x) - float(v)), i)
            for i, x in enumerate(values)
            if isinstance(x, int | float) and not isinstance(x, bool)
        ]
        if nums:
            return min(nums)[1]
    return 0


def build_space(
    start: dict[str, Any],
    vary: list[str],
    constraints: list[str],
    objective: str,
    insight_changes: list[dict[str, Any]] | None = None,
) -> Space:
    """The space of a tune from its command-line specs (TuneError on a bad one)."""
    if objective not in OBJECTIVES:
        close = difflib.get_close_matches(objective, list(OBJECTIVES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TuneError(f"--objective {objective}: choose one of {', '.join(OBJECTIVES)}{hint}.")
    ins: dict[str, list[Any]] = {}
    for change in insight_changes or []:
        for k, v in change.items():
            if k in _fields():
                ins.setdefault(k, []).append(v)
    dims: list[Dimension] = []
    auto = None
    if vary:
        vary, auto = _auto_split(vary, start)
        for spec in vary:
            d = parse_vary(spec, start, insight_values=ins)
            if any(x.name == d.name for x in dims):
                raise TuneError(f"--vary {spec}: {d.name} is varied twice; give one list.")
            dims.append(d)
    else:
        for name in levers():
            values = lever_values(name, start, ins)
            if len(values) > 1:
                dims.append(Dimension(name, values))
    cons = [c for c in (parse_constraint(t) for t in constraints) if c is not None]
    space = Space(start, dims, cons, objective, auto)
    if not dims and auto is None:
        raise TuneError("nothing to vary: give --vary NAME=VALUES.")
    # a config constraint the start already breaks is fine; one no configuration meets is not
    return space
