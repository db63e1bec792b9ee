"""Comparing profiles: which run options differ and which measured differences they explain.

``compare([a, b, c, ...])`` compares consecutive pairs (a->b, b->c, ...: the walkthrough's steps)
and returns a :class:`Comparison` with, per pair, the run-option differences, plain-language
explanations linking each difference to the measured deltas it explains (e.g. "StreamCopy received
by IPU 0 fell 50.0%: eight_bit_input true instead of false"), the largest deltas per step type /
IPU, per memory category, per IPU and per operation, and operations added / removed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.core import intervals
from analyser.core.analysis import Analysis, Metrics
from analyser.core.quantities import FORMATTERS, QUANTITIES
from analyser.core.run_options import options_explaining
from analyser.core.units import fmt_bytes, fmt_int, fmt_pct, rel_change
from profiles import schema

if TYPE_CHECKING:
    # pandas (about 0.4 s of CPU to import) is imported where a table is made: `analyse diff`
    # takes the rules and sentences of this module without its tables
    import pandas as pd

#: Run options that change nothing measurable (labels): listed as differences, never as reasons.
COSMETIC_KEYS = frozenset({"name"})

#: Run options that change what runs (another model, chip or system): every figure may move
#: either way with them, so when one differs it is the first reason given for every change.
IDENTITY_KEYS = ("model", "target", "system")

#: The metrics shown in comparisons, in order (labels and formats: analyser.core.quantities).
COMPARED = (
    "oom_tiles",
    "peak_memory_bytes",
    "max_tile_memory_bytes",
    "remote_buffer_bytes",
    "total_cycles",
    "cycles_per_sample",
    "throughput_samples_per_s",
    "compute_share",
    "ramp_share",
    "host_wait_share",
    "host_round_trips",
    "streamcopy_rx_bytes",
    "streamcopy_tx_bytes",
    "tile_balance",
)
#: (key, label, kind) of each compared metric.
METRICS: tuple[tuple[str, str, str], ...] = tuple(
    (k, QUANTITIES[k].label, QUANTITIES[k].kind) for k in COMPARED
)


def fmt_value(v: Any, kind: str) -> str:
    """``v`` formatted as a quantity of ``kind`` ('-' for None)."""
    return "-" if v is None else FORMATTERS[kind](v)


def _ops(n: int) -> str:
    return f"{n} operation" + ("" if n == 1 else "s")


def _num(x: float) -> str:
    return fmt_int(x) if abs(x) >= 100 or x == 0 else f"{x:,.2f}"


def change_words(a: float | None, b: float | None) -> str:
    """'fell 50.0%', 'rose 12.3%', 'is unchanged', 'appeared', 'went to zero'."""
    if a is None or b is None:
        return "is not available in both"
    if a == b:
        return "is unchanged"
    if a == 0:
        return "appeared"
    if b == 0:
        return "fell to zero"
    r = (b - a) / abs(a)
    return f"{'rose' if r > 0 else 'fell'} {abs(r) * 100:,.1f}%"


def share_words(a: float | None, b: float | None) -> str:
    """A change of a share in percentage points: 'fell 1.5 points', 'rose 0.7 points'."""
    if a is None or b is None:
        return "is not available in both"
    d = (b - a) * 100
    if abs(d) < 0.05:
        return "is unchanged"
    return f"{'rose' if d > 0 else 'fell'} {abs(d):.1f} point" + ("" if abs(d) == 1 else "s")


def fmt_share_delta(a: float | None, b: float | None) -> str:
    """'+0.7 pt' (percentage points) for shares; '-' when either is missing."""
    if a is None or b is None:
        return "-"
    return f"{(b - a) * 100:+.1f} pt"


@dataclass(frozen=True)
class ConfigDiff:
    """One run option that differs between two profiles."""

    key: str
    before: Any
    after: Any

    def text(self) -> str:
        """The change in words ('micro_batch_size 8 instead of 16')."""
        return f"{self.key} {_show(self.after)} instead of {_show(self.before)}"


def _show(v: Any) -> str:
    if v is None or v == "":
        return '""' if v == "" else "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)


@dataclass(frozen=True)
class MetricDelta:
    """One key figure of two profiles, with its label, kind and direction."""

    key: str
    label: str
    kind: str
    before: float | None
    after: float | None
    #: The change's interval (analyser.core.intervals.Interval.to_dict): the range the fidelity
    #: table allows for ``rel``, or the note saying why there is none.
    interval: dict[str, Any] | None = None

    @property
    def delta(self) -> float | None:
        """After minus before; None when either is missing."""
        return None if self.before is None or self.after is None else self.after - self.before

    @property
    def rel(self) -> float | None:
        """The relative change (after / before - 1); None when either is missing."""
        return rel_change(self.before, self.after)


@dataclass(frozen=True)
class Explanation:
    """A measured difference and the run-option difference(s) that explain it."""

    text: str
    metric: str
    config_keys: tuple[str, ...] = ()
    rel: float | None = None


@dataclass
class PairComparison:
    """Profile ``a`` (before) against ``b`` (after)."""

    a: str
    b: str
    config_diffs: list[ConfigDiff]
    metrics: list[MetricDelta]
    explanations: list[Explanation]
    #: rows (step type, ipu): cycles before / after / delta / rel; largest |delta| first.
    step_types: pd.DataFrame
    #: rows category: bytes before / after / delta / rel.
    categories: pd.DataFrame
    #: rows ipu: memory, cycles, StreamCopy rx / tx before and after.
    ipus: pd.DataFrame
    #: rows operation name (present in both): total cycles before / after / delta.
    operations: pd.DataFrame
    ops_added: list[str] = field(default_factory=list)
    ops_removed: list[str] = field(default_factory=list)
    #: plain-language list of the largest deltas not explained by a run-option difference
    other_deltas: list[str] = field(default_factory=list)

    def metric(self, key: str) -> MetricDelta:
        """The figure ``key`` of this pair; KeyError when it is not compared."""
        for m in self.metrics:
            if m.key == key:
                return m
        raise KeyError(key)

    def to_dict(self) -> dict[str, Any]:
        """The pair as plain data (the JSON report's comparison)."""

        def df(d: pd.DataFrame) -> list[dict]:
            return [
                {k: _plain(v) for k, v in r.items()} for r in d.reset_index().to_dict("records")
            ]

        return {
            "a": self.a,
            "b": self.b,
            "config_diffs": [
                {"key": c.key, "before": c.before, "after": c.after} for c in self.config_diffs
            ],
            "metrics": [
                {
                    "key": m.key,
                    "label": m.label,
                    "before": m.before,
                    "after": m.after,
                    "delta": m.delta,
                    "rel": _plain(m.rel),
                    "interval": m.interval,
                }
                for m in self.metrics
            ],
            "explanations": [
                {
                    "text": e.text,
                    "metric": e.metric,
                    "config_keys": list(e.config_keys),
                    "rel": _plain(e.rel),
                }
                for e in self.explanations
            ],
            "other_deltas": self.other_deltas,
            "step_types": df(self.step_types),
            "categories": df(self.categories),
            "ipus": df(self.ipus),
            "operations": df(self.operations),
            "ops_added": self.ops_added,
            "ops_removed": self.ops_removed,
        }


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


@dataclass
class Comparison:
    """Several profiles: a metrics table over all of them and consecutive pair comparisons."""

    names: list[str]
    metrics: list[Metrics]
    pairs: list[PairComparison]

    def table(self) -> pd.DataFrame:
        """Rows = METRICS labels, columns = profile names."""
        import pandas as pd

        rows = {label: [m.scalar(k) for m in self.metrics] for k, label, _ in METRICS}
        return pd.DataFrame(rows, index=self.names).T

    def to_dict(self) -> dict[str, Any]:
        """The comparison as plain data: the profiles' names and each consecutive pair."""
        return {"names": self.names, "pairs": [p.to_dict() for p in self.pairs]}


# ---------------------------------------------------------------------------------------------


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def config_diffs(a: Analysis, b: Analysis) -> list[ConfigDiff]:
    """The run options that differ, in RunConfig's order (typed: an option one profile does not
    store compares as its default)."""
    fa, fb = (_flatten(x.options.model_dump(mode="json", warnings=False)) for x in (a, b))
    keys = sorted(set(fa) | set(fb), key=lambda k: (list(fa) + list(fb)).index(k))
    return [ConfigDiff(k, fa.get(k), fb.get(k)) for k in keys if fa.get(k) != fb.get(k)]


def _scales(a: Analysis, b: Analysis) -> tuple[float, float, str]:
    """Divisors that make cycle totals comparable: per sample when the runs process different
    numbers of samples (e.g. another GA or DI), else 1."""
    ea, eb = a.execution, b.execution
    if ea is not None and eb is not None and ea.samples and eb.samples and ea.samples != eb.samples:
        return float(ea.samples), float(eb.samples), "cycles per sample"
    return 1.0, 1.0, "cycles"


def step_type_pairs(a: Analysis, b: Analysis) -> tuple[list[tuple[str, int, float, float]], str]:
    """(step type, IPU, A's cycles, B's cycles) of every step type either run executed on an
    IPU, per sample when the sample counts differ, and the unit that says which."""
    ea, eb = a.execution, b.execution
    sa, sb, unit = _scales(a, b)
    n = max(a.target.num_ipus, b.target.num_ipus)
    pairs = []
    for i in range(n):
        for j, t in enumerate(schema.PROGRAM_TYPES):
            ca = int(ea.cycles_by_type[i, j]) if ea is not None and i < ea.num_ipus else 0
            cb = int(eb.cycles_by_type[i, j]) if eb is not None and i < eb.num_ipus else 0
            if ca or cb:
                pairs.append((t, i, ca / sa, cb / sb))
    return pairs, unit


def _step_type_table(a: Analysis, b: Analysis) -> pd.DataFrame:
    """Cycles by step type and IPU (per sample when the sample counts differ: ``unit``)."""
    import pandas as pd

    pairs, unit = step_type_pairs(a, b)
    rows = [(t, i, x, y, y - x, _plain(rel_change(x, y)), unit) for t, i, x, y in pairs]
    df = pd.DataFrame(rows, columns=["step_type", "ipu", "before", "after", "delta", "rel", "unit"])
    return df.reindex(df["delta"].abs().sort_values(ascending=False).index).reset_index(drop=True)


def _category_table(a: Analysis, b: Analysis) -> pd.DataFrame:
    import pandas as pd

    ca = a.memory.by_category.sum(axis=0)
    cb = b.memory.by_category.sum(axis=0)
    df = pd.DataFrame({"category": list(schema.MEMORY_CATEGORIES), "before": ca, "after": cb})
    df["delta"] = df["after"] - df["before"]
    df["rel"] = [_plain(rel_change(x, y)) for x, y in zip(ca, cb)]
    df = df[(df["before"] != 0) | (df["after"] != 0)]
    return df.reindex(df["delta"].abs().sort_values(ascending=False).index).reset_index(drop=True)


def _ipu_table(a: Analysis, b: Analysis) -> pd.DataFrame:
    import pandas as pd

    rows = []
    ia = {m.ipu: m for m in a.metrics.ipus}
    ib = {m.ipu: m for m in b.metrics.ipus}
    for i in sorted(set(ia) | set(ib)):
        x, y = ia.get(i), ib.get(i)
        rows.append(
            {
                "ipu": i,
                "memory_before": x.memory_bytes if x else None,
                "memory_after": y.memory_bytes if y else None,
                "cycles_before": x.cycles if x else None,
                "cycles_after": y.cycles if y else None,
                "rx_before": x.streamcopy_rx_bytes if x else None,
                "rx_after": y.streamcopy_rx_bytes if y else None,
                "tx_before": x.streamcopy_tx_bytes if x else None,
                "tx_after": y.streamcopy_tx_bytes if y else None,
            }
        )
    return pd.DataFrame(rows)


def _op_tables(
    a: Analysis, b: Analysis, top: int = 20
) -> tuple[pd.DataFrame, list[str], list[str]]:
    import pandas as pd

    sa, sb, _unit = _scales(a, b)
    oa = a.operations.groupby("name")["total_cycles"].sum() / sa
    ob = b.operations.groupby("name")["total_cycles"].sum() / sb
    added = sorted(set(ob.index) - set(oa.index))
    removed = sorted(set(oa.index) - set(ob.index))
    common = oa.index.intersection(ob.index)
    df = pd.DataFrame({"before": oa[common], "after": ob[common]})
    df["delta"] = df["after"] - df["before"]
    df.index.name = "operation"
    df = df.reindex(df["delta"].abs().sort_values(ascending=False).index).head(top)
    return df, added, removed


_HOST = schema.DESTINATIONS.index("host")


# -- which way an option's change moves a figure ----------------------------------------------
#: ``sign(before, after)``: +1 when the change can only raise the figure, -1 when it can only
#: lower it, 0 when it may move it either way (or the values are not comparable).
Sign = Callable[[Any, Any], int]


def _num_sign(before: Any, after: Any) -> int:
    try:
        x, y = float(before or 0), float(after or 0)
    except (TypeError, ValueError):
        return 0
    return (y > x) - (y < x)


def _up(before: Any, after: Any) -> int:
    """More of the option, more of the figure."""
    return _num_sign(before, after)


def _down(before: Any, after: Any) -> int:
    """More of the option, less of the figure."""
    return -_num_sign(before, after)


def _ranked(rank: dict[Any, int]) -> Sign:
    """The figure follows the values' rank (a value not ranked, such as 'auto': either way)."""

    def sign(before: Any, after: Any) -> int:
        if before not in rank or after not in rank:
            return 0
        return (rank[after] > rank[before]) - (rank[after] < rank[before])

    return sign


def _from_one(before: Any, after: Any) -> int:
    """Gradient accumulation: going from 1 to more adds the accumulators (and back removes
    them); between two values above 1 they stay."""
    try:
        x, y = int(before or 1), int(after or 1)
    except (TypeError, ValueError):
        return 0
    return (y > 1 == x) - (x > 1 == y)


def _count(before: Any, after: Any) -> int:
    """More entries (split points: pipeline stages), more of the figure."""
    x = len(before) if isinstance(before, list) else 0
    y = len(after) if isinstance(after, list) else 0
    return (y > x) - (y < x)


def _opposite(sign: Sign) -> Sign:
    return lambda before, after: -sign(before, after)


_ON = {"off": 0, False: 0, "on": 1, True: 1}
#: bytes of weights and activations: FP16 everywhere < FP16 compute with FP32 master < FP32
_PRECISION = _ranked({"16.16": 0, "16.32": 1, "32.32": 2})
#: float partials hold partial sums in 4 bytes instead of 2 and run the AMP at half the rate of
#: half partials (8 conv units per tile instead of 16: PopLibs' conv_partial_1x1 codelets);
#: 'auto' resolves by framework and precision, so against it either way
_PARTIALS = _ranked({"half": 0, "float": 1})
#: optimiser state per weight: none, momentum, two moments (Adam, AdamW, LAMB)
_OPTIMISER = _ranked({"sgd": 0, "sgd-momentum": 1, "adam": 2, "adamw": 2, "lamb": 2})
_MOMENT = _ranked({"float16": 0, "float32": 1})
#: recomputing activations keeps fewer of them live, at the cost of computing them twice
_RECOMPUTE = _ranked({"off": 1, "pipeline-stages": 0, "checkpoints": 0})
#: a synchronous loader waits for every batch; asynchronous ones prepare the next meanwhile
_LOADER = _ranked({"sync": 1, "async": 0, "async-rebatched": 0})
#: input shapes: a larger image or sequence, more activations, bytes and work
_SHAPE: dict[str, Sign] = {"image_size": _up, "image_channels": _up, "seq_length": _up}
_MEMORY: dict[str, Sign] = {
    **_SHAPE,
    "num_classes": _up,
    "vocab_size": _up,
    "precision": _PRECISION,
    "partials_type": _PARTIALS,
    "micro_batch_size": _up,
    "recomputation": _RECOMPUTE,
    "available_memory_proportion": _up,
    "offload_optimiser_state": _opposite(_ranked(_ON)),
    "optimiser": _OPTIMISER,
    "replicated_tensor_sharding": _opposite(_ranked(_ON)),
    "first_moment_dtype": _MOMENT,
    "second_moment_dtype": _MOMENT,
    "offload_accumulators": _opposite(_ranked(_ON)),
    "gradient_accumulation": _from_one,
    "replication_factor": _up,
}
_CYCLES: dict[str, Sign] = {
    **_SHAPE,
    "precision": _PRECISION,
    "partials_type": _PARTIALS,
    "recomputation": _opposite(_RECOMPUTE),
    "gradient_accumulation": _down,
    "device_iterations": _down,
    "offload_optimiser_state": _ranked(_ON),
    "offload_accumulators": _ranked(_ON),
}
#: The sign of each option's change on each explained figure (an option not named for a
#: figure may move it either way). Throughput is the inverse of cycles per sample, plus the
#: host options that only it sees, and the replicas that multiply it.
SIGNS: dict[str, dict[str, Sign]] = {
    "oom_tiles": _MEMORY,
    "peak_memory_bytes": _MEMORY,
    "streamcopy_rx_bytes": {
        **_SHAPE,
        "eight_bit_input": _opposite(_ranked(_ON)),
        "micro_batch_size": _up,
        "gradient_accumulation": _up,
        "device_iterations": _up,
    },
    "host_seconds": {"eight_bit_input": _opposite(_ranked(_ON))},
    "host_wait_share": {
        "loader_mode": _LOADER,
        "loader_workers": _down,
        "prefetch_depth": _down,
        "eight_bit_input": _opposite(_ranked(_ON)),
        "host_preprocess_us_per_sample": _up,
    },
    "remote_buffer_bytes": {
        "offload_optimiser_state": _ranked(_ON),
        "offload_accumulators": _ranked(_ON),
    },
    "compute_share": {"gradient_accumulation": _up},
    # a pipeline fills and drains once per step: more stages, longer ramps; more
    # micro-batches per step, a smaller share of it
    "ramp_share": {
        "gradient_accumulation": _down,
        "strategy": _ranked({"single": 0, "sharded": 0, "pipelined": 1}),
        "split_points": _count,
    },
    "host_round_trips": {"device_iterations": _down},
    "globalExchangeCode": {"replication_factor": _up},
    "cycles_per_sample": _CYCLES,
    "throughput_samples_per_s": {
        **{k: _opposite(v) for k, v in _CYCLES.items()},
        "loader_mode": _opposite(_LOADER),
        "loader_workers": _up,
        "prefetch_depth": _up,
        "host_preprocess_us_per_sample": _down,
        "replication_factor": _up,
    },
}


def option_sign(metric: str, diff: ConfigDiff) -> int:
    """Which way ``diff`` moves ``metric`` (+1 up, -1 down, 0 either way; :data:`SIGNS`)."""
    sign = SIGNS.get(metric, {}).get(diff.key)
    return 0 if sign is None else sign(diff.before, diff.after)


def _direction(r: float | None) -> int:
    """The sign of a relative change (0 when there is none to read)."""
    if r is None or r != r:  # None or NaN
        return 0
    return (r > 0) - (r < 0)


def causes(
    metric: str, by: dict[str, ConfigDiff], keys: tuple[str, ...], direction: int
) -> list[ConfigDiff]:
    """The differences among ``keys`` that can explain ``metric`` moving in ``direction``
    (+1, -1; 0: no direction, as a stage balance): a model, target or system change first
    (every figure may move with it), then the options whose sign agrees with the change, then
    those that may move it either way. An option whose sign is against the change is left out:
    FP16 halves memory, so it is no reason for memory that rose."""
    first = [by[k] for k in IDENTITY_KEYS if k in by]
    first += [d for k, d in by.items() if k.startswith("target_overrides.")]
    signed, either = [], []
    for k in dict.fromkeys(keys):
        d = by.get(k)
        if d is None or k in COSMETIC_KEYS or d in first:
            continue
        s = option_sign(metric, d)
        if s == 0:
            either.append(d)
        elif direction == 0 or s == direction:
            signed.append(d)
    return first + signed + either


def may_explain(by: dict[str, ConfigDiff], keys: tuple[str, ...]) -> bool:
    """Whether :func:`causes` can name any difference for a figure explained by ``keys`` (a
    model, target or system change, a target override, or one of ``keys``): when not, the
    figure need not be read (some take a pass over the step table)."""
    return (
        any(k in by for k in IDENTITY_KEYS)
        or any(k.startswith("target_overrides.") for k in by)
        or any(k in by and k not in COSMETIC_KEYS for k in keys)
    )


def _input_ipu(x: Analysis) -> int:
    """The IPU receiving the most bytes from the host (the first stage's IPU, for inputs)."""
    ex = x.execution
    return int(np.argmax(ex.streamcopy_rx_by_dest[:, _HOST])) if ex is not None else 0


def _explain(
    a: Analysis,
    b: Analysis,
    diffs: list[ConfigDiff],
    ivs: dict[str, dict[str, Any]] | None = None,
) -> list[Explanation]:
    ea, eb = a.execution, b.execution
    by = {d.key: d for d in diffs}
    out: list[Explanation] = []
    ivs = ivs or {}

    def add(
        metric: str,
        sentence: str,
        keys: tuple[str, ...],
        r: float | None = None,
        signs: str | None = None,
        direction: int | None = None,
    ) -> None:
        """Explain ``metric``'s change by the differences of ``keys`` that agree with its
        direction (the sign of ``r`` unless given; the signs of ``signs``' figure if named)."""
        d = _direction(r) if direction is None else direction
        present = causes(signs or metric, by, keys, d)
        if present:
            reason = "; ".join(x.text() for x in present)
            out.append(
                Explanation(f"{sentence}: {reason}.", metric, tuple(x.key for x in present), r)
            )

    mem_keys = options_explaining("memory")
    _explain_memory(a, b, by, add)
    if ea is None and eb is not None:
        if not any(e.metric == "oom_tiles" for e in out):
            add(
                "total_cycles",
                "It now executes (the first profile did not fit, so it has no execution)",
                mem_keys,
                signs="peak_memory_bytes",  # it fits: reasons that lower memory
                direction=-1,
            )
        return out
    if ea is None or eb is None:
        return out

    _explain_execution(a, b, diffs, by, add, ivs)
    return out


def _explain_memory(
    a: Analysis, b: Analysis, by: dict[str, ConfigDiff], add: Callable[..., None]
) -> None:
    """Explanations of the memory figures (out-of-memory tiles, peak memory, per IPU)."""
    ma, mb = a.metrics, b.metrics
    mem_keys = options_explaining("memory")
    if ma.oom_tiles != mb.oom_tiles:
        if mb.oom_tiles == 0:
            s = f"the program now fits (OOM tiles fell from {ma.oom_tiles:,} to 0)"
        elif ma.oom_tiles == 0:
            s = f"the program no longer fits ({mb.oom_tiles:,} tiles out of memory)"
        else:
            s = (
                f"OOM tiles {change_words(ma.oom_tiles, mb.oom_tiles)} "
                f"({ma.oom_tiles:,} to {mb.oom_tiles:,})"
            )
        add("oom_tiles", s[0].upper() + s[1:], mem_keys, rel_change(ma.oom_tiles, mb.oom_tiles))
    if ma.peak_memory_bytes != mb.peak_memory_bytes:
        r = rel_change(ma.peak_memory_bytes, mb.peak_memory_bytes)
        if r is not None and abs(r) >= 0.01:
            add(
                "peak_memory_bytes",
                f"Peak memory {change_words(ma.peak_memory_bytes, mb.peak_memory_bytes)} "
                f"({fmt_bytes(ma.peak_memory_bytes)} to {fmt_bytes(mb.peak_memory_bytes)})",
                mem_keys,
                r,
            )
    split_keys = options_explaining("ipu_memory")
    if any(k in by for k in split_keys) and a.target.num_ipus == b.target.num_ipus > 1:
        pa, pb = a.memory.ipu_total(), b.memory.ipu_total()
        moved = [
            f"on IPU {i} {change_words(int(x), int(y))} ({fmt_bytes(x)} to {fmt_bytes(y)})"
            for i, (x, y) in enumerate(zip(pa, pb))
            if x != y
        ]
        if moved:
            add("ipu_memory", "Memory " + ", ".join(moved), split_keys)


def _explain_execution(
    a: Analysis,
    b: Analysis,
    diffs: list[ConfigDiff],
    by: dict[str, ConfigDiff],
    add: Callable[..., None],
    ivs: dict[str, dict[str, Any]],
) -> None:
    """Explanations of the execution figures (both profiles executed)."""
    ma, mb = a.metrics, b.metrics
    ea, eb = a.execution, b.execution
    if ea is None or eb is None:  # the caller asks only when both ran
        return
    # compute share / ramp share / cycles per sample
    if "gradient_accumulation" in by:
        add(
            "compute_share",
            f"OnTileExecute share of cycles {share_words(ma.compute_share, mb.compute_share)} "
            f"({fmt_pct(ma.compute_share)} to {fmt_pct(mb.compute_share)})",
            options_explaining("compute_share"),
            rel_change(ma.compute_share, mb.compute_share),
        )
    # the options first: the ramp share needs the phases of every step
    if ("gradient_accumulation" in by or "strategy" in by or "split_points" in by) and (
        ma.ramp_share or 0
    ) != (mb.ramp_share or 0):
        add(
            "ramp_share",
            f"Pipeline ramp-up + ramp-down share {share_words(ma.ramp_share, mb.ramp_share)} "
            f"({fmt_pct(ma.ramp_share)} to {fmt_pct(mb.ramp_share)})",
            (*options_explaining("compute_share"), "strategy", "split_points"),
            rel_change(ma.ramp_share or 0, mb.ramp_share or 0),
        )
    if "device_iterations" in by:
        ra, rb = ea.round_trips_per_sample, eb.round_trips_per_sample
        add(
            "host_round_trips",
            f"Host round trips per sample {change_words(ra, rb)} ({ra:.4f} to {rb:.4f})",
            options_explaining("host_round_trips"),
            rel_change(ra, rb),
        )
    io_keys = options_explaining("input")
    # the bytes only when a difference may explain them: they need the bytes of every step
    if may_explain(by, io_keys):
        i = _input_ipu(b)
        rxa = int(ea.streamcopy_rx_by_dest[i, _HOST]) if i < ea.num_ipus else 0
        rxb = int(eb.streamcopy_rx_by_dest[i, _HOST])
        if rxa != rxb:
            add(
                "streamcopy_rx_bytes",
                f"StreamCopy received from the host by IPU {i} "
                f"{change_words(rxa, rxb)} ({fmt_bytes(rxa)} to {fmt_bytes(rxb)})",
                io_keys,
                rel_change(rxa, rxb),
            )
    if "eight_bit_input" in by and ea.samples and eb.samples:
        ha, hb = ea.host_seconds / ea.samples, eb.host_seconds / eb.samples
        if ha != hb:
            add(
                "host_seconds",
                f"Host time per sample {change_words(ha, hb)} "
                f"({ha * 1e6:,.2f} µs to {hb * 1e6:,.2f} µs)",
                options_explaining("host_time"),
                rel_change(ha, hb),
            )
    wait_keys = options_explaining("host_wait")
    if any(k in by for k in wait_keys) and ma.host_wait_share != mb.host_wait_share:
        add(
            "host_wait_share",
            f"{QUANTITIES['host_wait_share'].label[:1].upper()}"
            f"{QUANTITIES['host_wait_share'].label[1:]} "
            f"{share_words(ma.host_wait_share, mb.host_wait_share)} "
            f"({fmt_pct(ma.host_wait_share)} to {fmt_pct(mb.host_wait_share)})",
            wait_keys,
            rel_change(ma.host_wait_share, mb.host_wait_share),
        )
    if "offload_optimiser_state" in by or "offload_accumulators" in by:
        d = schema.DESTINATIONS.index("remoteBuffer")
        xa = int(ea.streamcopy_rx_by_dest[:, d].sum() + ea.streamcopy_tx_by_dest[:, d].sum())
        xb = int(eb.streamcopy_rx_by_dest[:, d].sum() + eb.streamcopy_tx_by_dest[:, d].sum())
        add(
            "remote_buffer_bytes",
            f"Remote-buffer StreamCopy bytes {change_words(xa, xb)} "
            f"({fmt_bytes(xa)} to {fmt_bytes(xb)})",
            options_explaining("remote_buffers"),
            rel_change(xa, xb),
        )
    if "replication_factor" in by:
        ga_, gb_ = (
            a.memory.category_totals()["globalExchangeCode"],
            b.memory.category_totals()["globalExchangeCode"],
        )
        add(
            "globalExchangeCode",
            f"Global exchange code {change_words(ga_, gb_)} ({fmt_bytes(ga_)} to {fmt_bytes(gb_)})",
            options_explaining("allreduce"),
            rel_change(ga_, gb_),
        )
    if "split_points" in by and ea.stage_cycles.size and eb.stage_cycles.size:
        add(
            "stage_imbalance",
            f"Longest / mean stage went from {ea.stage_imbalance:.2f} to {eb.stage_imbalance:.2f}",
            options_explaining("stage_balance"),
        )
    perf_keys = tuple(d.key for d in diffs if d.key not in COSMETIC_KEYS)
    if ma.cycles_per_sample != mb.cycles_per_sample:
        add(
            "cycles_per_sample",
            f"Cycles per sample {change_words(ma.cycles_per_sample, mb.cycles_per_sample)} "
            f"({fmt_int(ma.cycles_per_sample)} to {fmt_int(mb.cycles_per_sample)}"
            f"{_range_words(ivs.get('cycles_per_sample'))})",
            perf_keys,
            rel_change(ma.cycles_per_sample, mb.cycles_per_sample),
        )
    if ma.throughput_samples_per_s != mb.throughput_samples_per_s:
        add(
            "throughput_samples_per_s",
            f"Throughput {change_words(ma.throughput_samples_per_s, mb.throughput_samples_per_s)} "
            f"({ma.throughput_samples_per_s:,.1f} to {mb.throughput_samples_per_s:,.1f} "
            f"samples/s{_range_words(ivs.get('throughput_samples_per_s'))})",
            perf_keys,
            rel_change(ma.throughput_samples_per_s, mb.throughput_samples_per_s),
        )


def change_intervals(
    a: Analysis, b: Analysis, keys: tuple[str, ...] = COMPARED
) -> dict[str, dict[str, Any]]:
    """The interval of each compared metric's change from ``a`` to ``b`` (both are the engine's
    predictions): the range the fidelity table allows, or the note saying why there is none
    (of ``keys`` only, when given)."""
    fa, fb = intervals.features_of(a), intervals.features_of(b)
    table = intervals.default_table()
    out = {}
    for k in keys:
        va, vb = a.metrics.scalar(k), b.metrics.scalar(k)
        if k in intervals.FIGURE_KINDS:
            iv = intervals.relative(k, va, vb, fa, fb, table)
        else:
            rel = rel_change(va, vb)
            ok = rel is not None and np.isfinite(rel)
            iv = intervals.Interval(rel if ok else None, None, None, note=intervals.NO_ROWS_NOTE)
        out[k] = iv.to_dict()
    return out


def _range_words(iv: dict[str, Any] | None) -> str:
    """'; change's 80% range +60% to +110%' (or '; outside the validated range: <why>') for
    an explanation."""
    if not iv:
        return ""
    text = intervals.range_text(iv)
    return f"; change's {text}" if intervals.has_range(text) else f"; {text}"


def other_deltas(
    a: Analysis,
    b: Analysis,
    expl: list[Explanation],
    steps: list[tuple[str, int, float, float, float]],
    cats: list[tuple[str, int, int, int]],
    ops: list[tuple[str, float, float, float]],
    added: list[str],
    removed: list[str],
) -> list[str]:
    """The largest deltas no run-option difference explains, in words: out-of-memory tiles and
    peak memory (when ``expl`` does not explain them), then the first three rows of the step
    type, memory category and operation tables (largest change first: (step type, IPU, before,
    after, delta), (category, before, after, delta), (operation, before, after, delta)) and the
    operations added and removed."""
    ma, mb = a.metrics, b.metrics
    other = []
    if ma.oom_tiles != mb.oom_tiles and not any(e.metric == "oom_tiles" for e in expl):
        other.append(
            f"OOM tiles {change_words(ma.oom_tiles, mb.oom_tiles)} ({ma.oom_tiles:,} "
            f"to {mb.oom_tiles:,}) with no run-option difference to explain it"
        )
    r = rel_change(ma.peak_memory_bytes, mb.peak_memory_bytes)
    if r is not None and abs(r) >= 0.01 and not any(e.metric == "peak_memory_bytes" for e in expl):
        other.append(
            f"peak memory {change_words(ma.peak_memory_bytes, mb.peak_memory_bytes)} "
            f"({fmt_bytes(ma.peak_memory_bytes)} to {fmt_bytes(mb.peak_memory_bytes)}) with no "
            f"run-option difference that {'raises' if r > 0 else 'lowers'} it"
        )
    unit = _scales(a, b)[2]
    both_ran = a.execution is not None and b.execution is not None
    if not both_ran and (a.execution is not None or b.execution is not None):
        gone, ran = (a, b) if a.execution is None else (b, a)
        other.append(
            f"{gone.name} has no execution (out of memory): execution figures (step types, "
            f"operation cycles) are only in {ran.name}"
        )
    for step_type, ipu, before, after, delta in steps if both_ran else ():
        if abs(delta) > 1e-9 * max(abs(before), abs(after), 1):
            other.append(
                f"{step_type} on IPU {ipu} {change_words(before, after)} "
                f"({_num(before)} to {_num(after)} {unit})"
            )
    for category, before, after, delta in cats:
        if delta:
            other.append(
                f"{category} memory {change_words(before, after)} "
                f"({fmt_bytes(before)} to {fmt_bytes(after)})"
            )
    for name, before, after, delta in ops if both_ran else ():
        if abs(delta) > 1e-9 * max(abs(before), abs(after), 1):
            other.append(
                f"operation {name} {change_words(before, after)} "
                f"({_num(before)} to {_num(after)} {unit})"
            )
    if added:
        other.append(f"{_ops(len(added))} added (e.g. {', '.join(added[:3])})")
    if removed:
        other.append(f"{_ops(len(removed))} removed (e.g. {', '.join(removed[:3])})")
    return other


def compare_pair(a: Analysis, b: Analysis) -> PairComparison:
    """Compare two profiles: run options changed, key figures, explanations, tables."""
    diffs = config_diffs(a, b)
    ma, mb = a.metrics, b.metrics
    ivs = change_intervals(a, b)
    metrics = [
        MetricDelta(k, label, kind, ma.scalar(k), mb.scalar(k), ivs.get(k))
        for k, label, kind in METRICS
    ]
    steps = _step_type_table(a, b)
    cats = _category_table(a, b)
    ops, added, removed = _op_tables(a, b)
    expl = _explain(a, b, diffs, ivs)
    both_ran = a.execution is not None and b.execution is not None
    other = other_deltas(
        a,
        b,
        expl,
        [(r.step_type, r.ipu, r.before, r.after, r.delta) for r in steps.head(3).itertuples()]
        if both_ran
        else [],
        [(r.category, r.before, r.after, r.delta) for r in cats.head(3).itertuples()],
        [(name, r["before"], r["after"], r["delta"]) for name, r in ops.head(3).iterrows()]
        if both_ran
        else [],
        added,
        removed,
    )
    return PairComparison(
        a.name,
        b.name,
        diffs,
        metrics,
        expl,
        steps,
        cats,
        _ipu_table(a, b),
        ops,
        added,
        removed,
        other,
    )


def compare(analyses: list[Analysis]) -> Comparison:
    """Compare two or more profiles (consecutive pairs)."""
    if len(analyses) < 2:
        raise ValueError("compare needs at least two profiles")
    pairs = [compare_pair(x, y) for x, y in itertools.pairwise(analyses)]
    return Comparison([x.name for x in analyses], [x.metrics for x in analyses], pairs)
