"""Benchmark: the engine's figures against public reference figures (evidence, not targets).

For every row of ``assets/runs/reference/references.toml`` (a published figure, its source and
the run configuration that expresses its setup) this script runs the engine in-process, through
the API ``analyse profile`` uses (``engine.simulate``: compile, then execute when the program
fits; no profile is written), and prints the published figure, the engine's figure, the error
and what the row measures, with the time each row took. docs/fidelity.md records the table
with its sources and the analysis of the errors; nothing here is tuned to make a row match.

Quantities:

* ``throughput``: samples per second of one host call in steady state, host-inclusive (as the
  published real-data figures are); the device-only figure (device cycles, without the wait for
  the host) is printed beside it. A configuration the engine finds out of memory has no
  throughput: the row says so and gives the fullest tile against the tile's SRAM.
* ``device_throughput``: the same run's device-only samples per second. Figures measured with
  synthetic data are ``throughput`` rows of a run configuration with ``synthetic_data = true``
  (PopTorch ``enableSyntheticData``: no stream copies, no host preparation; the timed calls keep
  their host call overhead).
* ``params``: trainable parameters of the model graph; ``gmacs``: forward multiply-accumulates
  per sample, in billions.
* ``ratio``: the engine's throughput of one row over another's, against the published ratio
  (scaling from Pod16 to Pod64, Bow vs Mk2).

Error = (engine - reference) / reference, in percent (positive: the engine is optimistic).

Every row is printed with its figure and error *before* the current engine as well: the
engine's figures of an earlier run, read from a JSON this script wrote (``--before FILE``;
default ``assets/runs/reference/before-issue21.json``, main at b40eafe before the host-model
changes; ``--before none`` leaves the columns out). A row the earlier run did not have shows
"-".

Every row names its ``mechanism`` class (what the engine must get right for the row:
``device-at-scale``, ``small-feature-maps``, ``collectives-across-pods``, ``host-bound``,
``model-facts``; analyser.core.intervals.MECHANISMS), which the prediction intervals group the
errors by. ``--write-errors FILE`` stores the errors as the data the analyser's intervals are
read from (``analyser/core/fidelity_errors.json``: each row's error, class, the classes the
analyser's classifier gives its configuration, the commit and the machine load), and prints
every row against the band of the other rows of its class (leave-one-out).

``--calibration FILE`` prints, from a stored errors file alone (no simulation), the calibrated
intervals' check with each source held out (analyser.core.intervals_calibration): per class set
and overall, coverage at the nominal 80%, median width and the interval score against a fixed
x/÷1.5 band, for figures and for changes; ``--write-errors`` prints it too.

Memory rows (``[[memory]]`` in the same file): a published statement that a configuration
fits (Graphcore's examples train or serve it as configured) or is out of memory. Each is
compiled (``engine.compile``) and the engine's answer (fits or not, the fullest tile against the
tile's SRAM) is printed against the statement, with the agreement; a row marked
``known_disagreement`` says why the engine still disagrees (docs/fidelity.md, "Grouped and
depthwise convolutions", "Memory facts as reference rows").
The CNN rows (``cnn_table = true``) are also executed: cycles per sample of one replica and the
achieved share of the AMP peak (FLOPs per sample / (cycles per sample x AMP FLOPs per cycle per
IPU x IPUs per replica), FLOPs per sample = 2 x the forward multiply-accumulates, x 3 in
training: forward, input and weight gradients). ``--before-memory FILE`` prints them before (a
JSON this script wrote with ``--json`` on an earlier engine; default
``assets/runs/reference/before-issue40-memory.json``, main at f9e6793) and after.
``--memory-only`` runs the memory rows alone.

Usage: python benchmarks/bench_fidelity.py [--rows ID[,ID...]] [--markdown] [--json FILE]
                                           [--before FILE|none] [--write-errors FILE]
                                           [--calibration FILE] [--memory-only]
                                           [--before-memory FILE|none]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cnn_onnx  # benchmarks/cnn_onnx.py: the memory rows' modern CNNs as ONNX files
import tutorial_onnx  # benchmarks/tutorial_onnx.py: the tutorial CNN as an ONNX file

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from analyser.core import intervals  # noqa: E402  (the mechanism classes and the interval model)

REFERENCE_DIR = REPO / "assets" / "runs" / "reference"
REFERENCES = REFERENCE_DIR / "references.toml"

#: Quantities a row may measure, and whether it needs a run configuration of its own.
QUANTITIES = {
    "throughput": True,
    "device_throughput": True,
    "params": True,
    "gmacs": True,
    "ratio": False,
}
#: Quantities a ratio row may divide.
RATE_QUANTITIES = ("throughput", "device_throughput")
#: Mechanism classes a row names (``mechanism``; the prediction intervals group by them).
MECHANISMS = tuple(intervals.MECHANISMS)
#: The engine's figures before the host-model engine changes (main at b40eafe).
BEFORE = REFERENCE_DIR / "before-issue21.json"
#: Text fields every row must fill (its source and configuration among them).
TEXT_FIELDS = (
    "id",
    "measures",
    "configuration",
    "source",
    "document",
    "url",
    "config_source",
    "units",
    "mechanism",
)


@dataclass(frozen=True)
class Row:
    """One published figure and how to reproduce its setup."""

    id: str
    quantity: str
    figure: float
    units: str
    measures: str
    configuration: str
    source: str
    #: A short name of the source document: one document is one group held out together.
    document: str
    url: str
    config_source: str
    mechanism: str
    config: str | None = None
    rows: tuple[str, ...] = ()
    approximate: bool = False


@dataclass
class Measured:
    """The engine's figure for one row (``value`` None: no figure, ``note`` says why)."""

    value: float | None
    device_value: float | None = None
    note: str = ""
    seconds: float = 0.0
    #: The analyser's features of the run (analyser.core.intervals.Features), when classified.
    features: dict | None = None


@dataclass
class Result:
    """A row with the engine's figure and the error against the reference."""

    row: Row
    measured: Measured
    error_pct: float | None = field(default=None)


def load_rows(path: str | Path = REFERENCES) -> list[Row]:
    """Read and check the reference table; a problem raises ValueError with one sentence."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    raw = data.get("row")
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{path}: no [[row]] entries.")
    rows: list[Row] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        where = f"{path}: row {i + 1} ({entry.get('id', '?')})"
        for name in TEXT_FIELDS:
            if not str(entry.get(name, "")).strip():
                raise ValueError(f"{where}: '{name}' is missing or empty.")
        quantity = entry.get("quantity")
        if quantity not in QUANTITIES:
            raise ValueError(f"{where}: quantity must be one of {sorted(QUANTITIES)}.")
        figure = entry.get("figure")
        if not isinstance(figure, int | float) or isinstance(figure, bool) or figure <= 0:
            raise ValueError(f"{where}: figure must be a positive number.")
        if entry["mechanism"] not in MECHANISMS:
            raise ValueError(f"{where}: mechanism must be one of {', '.join(MECHANISMS)}.")
        if entry["id"] in seen:
            raise ValueError(f"{where}: the id is used twice.")
        seen.add(entry["id"])
        config = entry.get("config")
        refs = tuple(entry.get("rows", ()))
        if QUANTITIES[quantity]:
            if not config or refs:
                raise ValueError(f"{where}: a {quantity} row names one config and no rows.")
        elif config or len(refs) != 2:
            raise ValueError(f"{where}: a ratio row names two rows and no config.")
        known = {k for k in Row.__dataclass_fields__}
        extra = set(entry) - known
        if extra:
            raise ValueError(f"{where}: unknown field(s) {sorted(extra)}.")
        rows.append(
            Row(
                **{name: entry[name] for name in TEXT_FIELDS},  # as checked above
                quantity=quantity,
                figure=float(figure),
                config=config,
                rows=refs,
                approximate=bool(entry.get("approximate", False)),
            )
        )
    by_id = {r.id: r for r in rows}
    for r in rows:
        for ref in r.rows:
            if ref not in by_id or by_id[ref].quantity not in RATE_QUANTITIES:
                raise ValueError(f"{path}: ratio row {r.id} names {ref!r}, not a throughput row.")
    return rows


#: Text fields every memory row must fill.
MEMORY_TEXT_FIELDS = (
    "id",
    "statement",
    "configuration",
    "source",
    "url",
    "config_source",
    "config",
)
#: The engine's memory figures before the grouped-convolution planner (main at f9e6793).
BEFORE_MEMORY = REFERENCE_DIR / "before-issue40-memory.json"
#: CNN-table rows without a published statement (not memory rows): ConvNeXt-T, which Graphcore
#: has no example of, at a small micro-batch on 4 pipelined IPUs.
CNN_EXTRA = ("convnext-tiny-4ipu", REPO / "assets" / "runs" / "convnext-tiny-4ipu.toml")


@dataclass(frozen=True)
class MemoryRow:
    """A published statement that a configuration fits in the IPUs' memory, or does not."""

    id: str
    fits: bool
    config: str
    statement: str
    configuration: str
    source: str
    url: str
    config_source: str
    #: Why the engine still disagrees with the statement ('' when it should agree).
    known_disagreement: str = ""
    #: Also a row of the CNN table: executed for cycles per sample and the AMP share.
    cnn_table: bool = False


@dataclass
class MemoryMeasured:
    """The engine's answer for a memory row (``fits`` None: the configuration was refused)."""

    fits: bool | None
    peak_tile_bytes: int | None = None
    sram_per_tile: int | None = None
    ipus: int = 1
    cycles_per_sample: float | None = None
    flops_per_sample: float | None = None
    amp_share: float | None = None
    note: str = ""
    seconds: float = 0.0


def load_memory_rows(path: str | Path = REFERENCES) -> list[MemoryRow]:
    """Read and check the memory rows (``[[memory]]``) of the reference table; a problem raises
    ValueError with one sentence."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    raw = data.get("memory", [])
    if not isinstance(raw, list):
        raise ValueError(f"{path}: 'memory' must be a list of [[memory]] tables.")
    rows: list[MemoryRow] = []
    seen: set[str] = set()
    known = set(MemoryRow.__dataclass_fields__)
    for i, entry in enumerate(raw):
        where = f"{path}: memory row {i + 1} ({entry.get('id', '?')})"
        for name in MEMORY_TEXT_FIELDS:
            if not isinstance(entry.get(name), str) or not entry[name].strip():
                raise ValueError(f"{where}: '{name}' is missing or empty.")
        if not isinstance(entry.get("fits"), bool):
            raise ValueError(f"{where}: 'fits' must be true or false.")
        if not entry["url"].startswith("https://"):
            raise ValueError(f"{where}: 'url' must be an https:// address.")
        for flag, kind in (("known_disagreement", str), ("cnn_table", bool)):
            if flag in entry and not isinstance(entry[flag], kind):
                raise ValueError(f"{where}: '{flag}' must be a {kind.__name__}.")
        if entry["id"] in seen:
            raise ValueError(f"{where}: the id is used twice.")
        seen.add(entry["id"])
        extra = set(entry) - known
        if extra:
            raise ValueError(f"{where}: unknown field(s) {sorted(extra)}.")
        rows.append(MemoryRow(**entry))
    return rows


def measure_memory(row: MemoryRow, folder: Path = REFERENCE_DIR) -> MemoryMeasured:
    """Compile a memory row's configuration: does it fit, and its fullest tile; a CNN-table row
    that fits is also executed for its cycles per sample and achieved share of the AMP peak."""
    import engine
    from engine.config import RunConfig
    from engine.errors import EngineError

    t0 = time.perf_counter()
    try:
        config = RunConfig.from_toml(config_path(row, folder))
        prepare_model(config, folder)
        result = engine.simulate(config) if row.cnn_table else None
        compiled = result.compiled if result is not None else engine.compile(config)
    except EngineError as exc:  # the engine refuses the configuration: no answer
        return MemoryMeasured(None, note=str(exc), seconds=time.perf_counter() - t0)
    mem = compiled.memory
    got = MemoryMeasured(
        fits=not compiled.oom,
        peak_tile_bytes=int(mem.peak_tile_bytes),
        sram_per_tile=int(mem.sram_per_tile),
        ipus=int(config.num_ipus),
    )
    if compiled.oom:
        over = [n for n in compiled.notes if "exceed" in n]
        got.note = over[0] if over else "out of memory"
    if result is not None and result.execution is not None:
        attrs = result.execution.attrs
        samples = float(attrs["samples"]) / int(compiled.config.replication_factor)
        cycles = float(attrs.get("device_cycles", attrs["total_cycles"]))
        got.cycles_per_sample = cycles / samples
        passes = 3 if config.mode == "training" else 1
        got.flops_per_sample = 2.0 * passes * float(compiled.graph["macs"].sum())
        t = compiled.target
        peak = 2.0 * t.amp_rate("float16", "float16") * t.tiles_per_ipu * got.ipus
        got.amp_share = got.flops_per_sample / (got.cycles_per_sample * peak)
    got.seconds = time.perf_counter() - t0
    return got


def cnn_extra_row() -> MemoryRow:
    """The CNN table's row without a published configuration (``CNN_EXTRA``)."""
    name, path = CNN_EXTRA
    return MemoryRow(
        id=name,
        fits=True,
        config=os.path.relpath(path, REFERENCE_DIR),
        statement="no published configuration: a small micro-batch on 4 pipelined IPUs",
        configuration="ConvNeXt-T training, 4 Mk2 IPUs pipelined, micro-batch 4, 16.32",
        source="none",
        url="https://github.com/pytorch/vision",
        config_source=str(path.relative_to(REPO)),
        cnn_table=True,
    )


def agreement(row: MemoryRow, got: MemoryMeasured) -> str:
    """'agrees', 'DISAGREES' or, for a row marked with its reason, 'known disagreement'."""
    if got.fits is None:
        return "no answer"
    if got.fits == row.fits:
        return "agrees"
    return "known disagreement" if row.known_disagreement else "DISAGREES"


def _kib(value) -> str:
    return "-" if value is None else f"{value / 1024:,.0f} KiB"


def _fit(value) -> str:
    return {True: "fits", False: "OOM", None: "-"}[value]


def format_memory(
    rows: list[MemoryRow],
    measured: dict[str, MemoryMeasured],
    before: dict[str, dict] | None,
    markdown: bool,
) -> str:
    """Every memory row: the statement, the engine's answer before and after, the agreement."""
    head = ["row", "statement", "engine", "fullest tile", "agreement", "time"]
    if before is not None:
        head[2:2] = ["before", "fullest tile before"]
    lines = []
    for r in rows:
        m = measured[r.id]
        cells = [
            r.id,
            _fit(r.fits),
            _fit(m.fits),
            f"{_kib(m.peak_tile_bytes)} of {_kib(m.sram_per_tile)}",
            agreement(r, m),
            f"{m.seconds:.1f} s",
        ]
        if before is not None:
            b = before.get(r.id, {})
            cells[2:2] = [_fit(b.get("fits")), _kib(b.get("peak_tile_bytes"))]
        lines.append(cells)
    return _table(head, lines, markdown)


def format_cnn(
    rows: list[MemoryRow],
    measured: dict[str, MemoryMeasured],
    before: dict[str, dict] | None,
    markdown: bool,
) -> str:
    """The CNN rows: fit, fullest tile, cycles per sample and the achieved share of AMP peak."""
    head = ["row", "IPUs", "fits", "fullest tile", "cycles / sample", "GFLOP / sample", "AMP share"]
    if before is not None:
        head[2:2] = ["fits before", "fullest tile before"]
    lines = []
    for r in rows:
        if not r.cnn_table:
            continue
        m = measured[r.id]
        cells = [
            r.id,
            str(m.ipus),
            _fit(m.fits),
            _kib(m.peak_tile_bytes),
            "-" if m.cycles_per_sample is None else f"{m.cycles_per_sample:,.0f}",
            "-" if m.flops_per_sample is None else f"{m.flops_per_sample / 1e9:,.2f}",
            "-" if m.amp_share is None else f"{m.amp_share * 100:.1f}%",
        ]
        if before is not None:
            b = before.get(r.id, {})
            cells[2:2] = [_fit(b.get("fits")), _kib(b.get("peak_tile_bytes"))]
        lines.append(cells)
    return _table(head, lines, markdown)


def _table(head: list[str], lines: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(x) + " |" for x in lines]
        return "\n".join(out)
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    out += ["  ".join(v.ljust(w) for v, w in zip(x, widths, strict=True)) for x in lines]
    return "\n".join(out)


def config_path(row, folder: Path = REFERENCE_DIR) -> Path:
    return folder / str(row.config)


def prepare_model(config, folder: Path = REFERENCE_DIR) -> None:
    """Write the generated ONNX file a run configuration names, when it is one of ours."""
    name = Path(config.model).name
    where = Path(config.model).parent if Path(config.model).is_absolute() else folder
    if name in tutorial_onnx.MODELS:
        tutorial_onnx.prepare(where, name)
    elif name in cnn_onnx.MODELS:
        cnn_onnx.prepare(where, name)


#: Simulations already run, by (run configuration, quantity): a configuration measured for both
#: its host-inclusive and its device-only throughput is simulated once.
_SIMULATED: dict[tuple[str, str], Measured] = {}


def error_pct(engine_value: float | None, reference: float) -> float | None:
    """(engine - reference) / reference in percent; None without an engine figure."""
    if engine_value is None:
        return None
    return (engine_value - reference) / reference * 100.0


def _simulate(config, classify: bool):
    """``engine.simulate``; with ``classify`` the profile is written to a temporary file and
    read back for the analyser's features (analyser.core.intervals.features_of)."""
    import engine

    if not classify:
        return engine.simulate(config), None
    from analyser.core.analysis import Analysis

    with tempfile.TemporaryDirectory(prefix="bench-fidelity-") as tmp:
        out = Path(tmp) / "row.h5"
        result = engine.simulate_to_file(config, out)
        with Analysis.open(out) as a:
            feats = intervals.features_of(a)
    return result, {
        "ipus": feats.ipus,
        "replicas": feats.replicas,
        "host_load": feats.host_load,
        "host_overlapped": feats.host_overlapped,
        "small_conv_share": feats.small_conv_share,
        "call_share": feats.call_share,
        "grouped_conv_share": feats.grouped_conv_share,
        "micro_batch": feats.micro_batch,
        "sample_elems": feats.sample_elems,
    }


def measure(row: Row, folder: Path = REFERENCE_DIR, classify: bool = False) -> Measured:
    """The engine's figure for a throughput / device_throughput / params / gmacs row (with
    ``classify``, also the analyser's features of the run)."""
    from engine.config import RunConfig
    from engine.models import build_model

    t0 = time.perf_counter()
    config = RunConfig.from_toml(config_path(row, folder))
    prepare_model(config, folder)
    if row.quantity in ("params", "gmacs"):
        graph = build_model(config)
        if row.quantity == "params":
            value = float(graph.num_params)
        else:
            value = float(graph["macs"].sum()) / 1e9
        return Measured(value, seconds=time.perf_counter() - t0)
    key = (str(config_path(row, folder)), row.quantity)
    other = (key[0], "throughput" if row.quantity == "device_throughput" else "device_throughput")
    if other in _SIMULATED:  # the same run configuration, measured for its other quantity
        got = _SIMULATED[other]
        value = got.device_value if row.quantity == "device_throughput" else got.value
        return Measured(value, got.device_value, got.note, 0.0, got.features)
    result, feats = _simulate(config, classify)
    seconds = time.perf_counter() - t0
    if result.execution is None:
        mem = result.compiled.memory
        kib = mem.peak_tile_bytes / 1024
        sram = mem.sram_per_tile / 1024
        return Measured(
            None,
            note=f"out of memory: fullest tile {kib:,.0f} KiB of {sram:,.0f} KiB",
            seconds=seconds,
        )
    attrs = result.execution.attrs
    clock = float(result.compiled.target.clock_hz)
    samples = float(attrs["samples"])
    if "device_throughput" in attrs:  # profile format 1.1: both throughputs are recorded
        device = float(attrs["device_throughput"])
    else:  # 1.0: total cycles included the host wait; device cycles did not
        device_cycles = float(attrs.get("device_cycles", attrs["total_cycles"]))
        device = samples / (device_cycles / clock) if device_cycles > 0 else None
    host_s = float(attrs.get("host_seconds", 0.0))
    note = f"host wait {host_s * 1e3:,.2f} ms per call" if host_s > 0 else ""
    _SIMULATED[key] = Measured(float(attrs["throughput"]), device, note, seconds, feats)
    if row.quantity == "device_throughput":
        return Measured(device, device, note, seconds, feats)
    return Measured(float(attrs["throughput"]), device, note, seconds, feats)


def evaluate(rows: Iterable[Row], measure_fn: Callable[[Row], Measured] = measure) -> list[Result]:
    """Measure every non-ratio row, derive the ratio rows from them, and compute the errors."""
    rows = list(rows)
    measured: dict[str, Measured] = {}
    for row in rows:
        if row.quantity != "ratio":
            measured[row.id] = measure_fn(row)
    for row in rows:
        if row.quantity != "ratio":
            continue
        a, b = (measured.get(r) for r in row.rows)
        if a is None or b is None:
            measured[row.id] = Measured(None, note="a row of the ratio was not run")
        elif a.value is None or b.value is None or b.value == 0:
            measured[row.id] = Measured(None, note="a row of the ratio has no engine figure")
        else:
            dev = None
            if a.device_value and b.device_value:
                dev = a.device_value / b.device_value
            measured[row.id] = Measured(a.value / b.value, dev)
    return [Result(r, measured[r.id], error_pct(measured[r.id].value, r.figure)) for r in rows]


def select(rows: list[Row], ids: list[str]) -> list[Row]:
    """The rows named (with the rows their ratios need), in table order."""
    if not ids:
        return rows
    by_id = {r.id: r for r in rows}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise ValueError(f"--rows: unknown row id(s) {', '.join(unknown)}.")
    want = set(ids)
    for i in ids:
        want.update(by_id[i].rows)
    return [r for r in rows if r.id in want]


def _num(value: float | None, units: str) -> str:
    if value is None:
        return "-"
    if units == "x":
        return f"{value:.2f}"
    if units == "parameters":
        return f"{value:,.0f}"
    if abs(value) >= 1e6:
        return f"{value / 1e6:,.1f} M"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def _err(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def format_text(results: list[Result]) -> str:
    head = ("row", "reference", "engine", "device-only", "error", "units", "time", "measures")
    lines = []
    for res in results:
        r, m = res.row, res.measured
        ref = ("~" if r.approximate else "") + _num(r.figure, r.units)
        engine_fig = _num(m.value, r.units) if m.value is not None else "n/a"
        lines.append(
            (
                r.id,
                ref,
                engine_fig,
                _num(m.device_value, r.units),
                _err(res.error_pct),
                r.units,
                f"{m.seconds:.1f} s" if m.seconds else "-",
                r.measures + (f" [{m.note}]" if m.note else ""),
            )
        )
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head[:-1])]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, [*widths, 0], strict=False))]
    for x in lines:
        out.append("  ".join(v.ljust(w) for v, w in zip(x, [*widths, 0], strict=False)))
    return "\n".join(out)


def format_markdown(results: list[Result]) -> str:
    out = [
        "| row | reference | engine | device-only | error | units | what it measures |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for res in results:
        r, m = res.row, res.measured
        ref = ("about " if r.approximate else "") + _num(r.figure, r.units)
        engine_fig = _num(m.value, r.units) if m.value is not None else f"n/a ({m.note})"
        note = f" ({m.note})" if m.note and m.value is not None else ""
        out.append(
            f"| {r.id} | {ref} | {engine_fig} | {_num(m.device_value, r.units)} | "
            f"{_err(res.error_pct)} | {r.units} | {r.measures}{note} |"
        )
    return "\n".join(out)


def load_before(path: str | Path) -> dict[str, dict]:
    """An earlier run's figures by row id (a JSON this script wrote with ``--json``); a problem
    raises ValueError with one sentence."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--before {path}: not a JSON table of this benchmark ({exc}).") from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and "id" in d for d in data):
        raise ValueError(f"--before {path}: not a JSON table of this benchmark.")
    return {str(d["id"]): d for d in data}


def format_before(results: list[Result], before: dict[str, dict], markdown: bool) -> str:
    """Every row before and after: the earlier run's engine figure and error beside today's."""
    head = ("row", "reference", "before", "error before", "after", "error after", "units")
    lines = []
    for res in results:
        r, m = res.row, res.measured
        b = before.get(r.id, {})
        ref = ("about " if r.approximate and markdown else "~" if r.approximate else "") + _num(
            r.figure, r.units
        )
        lines.append(
            (
                r.id,
                ref,
                _num(b.get("value"), r.units),
                _err(b.get("error_pct")),
                _num(m.value, r.units) if m.value is not None else "n/a",
                _err(res.error_pct),
                r.units,
            )
        )
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|---|---:|---:|---:|---:|---:|---|"]
        out += ["| " + " | ".join(x) + " |" for x in lines]
        return "\n".join(out)
    widths = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    out += ["  ".join(v.ljust(w) for v, w in zip(x, widths, strict=True)) for x in lines]
    return "\n".join(out)


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def memory_fact(row_id: str, fits: bool, source: str, config) -> dict:
    """One stored memory fact (analyser.core.intervals.MemoryFact): a published fit or out of
    memory, with the engine's fullest tile and the features of its profile (the memory
    statements pool facts by the device classes of those features)."""
    import engine
    from analyser.core.analysis import Analysis

    with tempfile.TemporaryDirectory(prefix="bench-fidelity-mem-") as tmp:
        out = Path(tmp) / "mem.h5"
        engine.simulate_to_file(config, out)
        with Analysis.open(out) as a:
            f = intervals.features_of(a)
            peak = a.metrics.max_tile_memory_bytes
            sram = int(a.target.sram_per_tile)
    return {
        "id": row_id,
        "fits": bool(fits),
        "peak_tile_bytes": float(peak) if peak else None,
        "sram_per_tile": float(sram),
        "source": source,
        "features": {
            "ipus": f.ipus,
            "replicas": f.replicas,
            "host_load": None,
            "host_overlapped": None,
            "small_conv_share": f.small_conv_share,
            "call_share": None,
            "grouped_conv_share": f.grouped_conv_share,
            "micro_batch": f.micro_batch,
            "sample_elems": f.sample_elems,
        },
    }


def memory_facts(folder: Path = REFERENCE_DIR, rows: list[MemoryRow] | None = None) -> list[dict]:
    """The stored memory facts of the table's ``[[memory]]`` rows (published 'fits' / 'out of
    memory' statements with their run configurations); a configuration the engine refuses
    gives no fact (nothing to bound)."""
    from engine.config import RunConfig
    from engine.errors import EngineError

    out = []
    for r in load_memory_rows() if rows is None else rows:
        config = RunConfig.from_toml(config_path(r, folder))
        prepare_model(config, folder)
        try:
            out.append(memory_fact(r.id, r.fits, r.source, config))
        except EngineError as exc:
            print(f"memory row {r.id}: no fact stored ({exc})", file=sys.stderr)
    return out


def errors_payload(
    results: list[Result], commit: str, load: float, memory: list[dict] | None = None
) -> dict:
    """The stored errors (analyser.core.intervals reads them): one entry per row with its error
    as a fraction, its class, and the classes the analyser gives its configuration."""
    rows = []
    for res in results:
        r, m = res.row, res.measured
        feats = m.features
        classes = None
        if feats is not None:
            f = intervals.Features(**feats)
            classes = list(intervals.classify(f, host_inclusive=r.quantity == "throughput"))
        rows.append(
            {
                "id": r.id,
                "mechanism": r.mechanism,
                "quantity": r.quantity,
                "reference": r.figure,
                "approximate": r.approximate,
                "engine": m.value,
                "error": None if res.error_pct is None else res.error_pct / 100.0,
                "rows": list(r.rows),
                "features": feats,
                "classes": classes,
                # what the calibration pools and holds out by (intervals_calibration.points)
                "config": r.config,
                "source": r.source,
                "document": r.document,
            }
        )
    return {
        "schema": intervals.SCHEMA,
        "schema_version": intervals.SCHEMA_VERSION,
        "commit": commit,
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {load:.1f}",
        "references": "assets/runs/reference/references.toml",
        "rows": rows,
        # published memory facts (analyser.core.intervals.memory_statement); none: every memory
        # figure says "no memory evidence"
        "memory": list(memory or []),
    }


def format_classes(payload: dict) -> str:
    """Every performance row's classes: the analyser's classify() on the row's own simulation
    (what the calibrated intervals pool it by; the row's ``mechanism`` is only why it was added)."""
    out = ["row  error  classes (classify on its simulation)"]
    for r in payload["rows"]:
        if r["classes"] is None or r["error"] is None:
            continue
        out.append(f"{r['id']}  {r['error'] * 100:+.1f}%  {' + '.join(r['classes'])}")
    return "\n".join(out)


def calibration_report(errors: dict, rows: list[Row]) -> str:
    """The group-held-out check of the calibrated intervals (analyser.core.intervals_calibration)
    on a stored errors document: per class set and overall, the configurations, how many get an
    interval, the coverage at the nominal level, the median width (high / low) and the mean
    interval score (log scale) against a fixed x/÷1.5 band on the same configurations."""
    from analyser.core import intervals_calibration as cal

    refs = {r.id: {"config": r.config, "source": r.source, "document": r.document} for r in rows}
    pts = cal.points(errors.get("rows") or [], refs)
    summary = cal.summarise(cal.held_out(pts))
    dup = sum(len(p.ids) - 1 for p in pts)
    lines = [
        f"Calibrated intervals at {cal.LEVEL:.0%}, each source document's rows held out together "
        f"({len(pts)} configurations from {len({p.group for p in pts})} documents; "
        f"{dup} duplicate row(s) merged):",
        f"{'classes':<44} {'n':>3} {'given':>5} {'coverage':>8} {'width':>6} "
        f"{'score':>6} {'x/÷1.5':>6}",
    ]

    def f(v, fmt):
        return (
            format(v, fmt) if v is not None else format("-", ">" + fmt.rstrip("f%").split(".")[0])
        )

    for s in summary:
        lines.append(
            f"{s['classes']:<44} {s['points']:>3} {s['given']:>5} {f(s['coverage'], '8.0%')} "
            f"{f(s['median_width'], '6.2f')} {f(s['score'], '6.2f')} {f(s['fixed_score'], '6.2f')}"
        )
    lines.append(f"(a class set needs {cal.min_points()} configurations from other documents)")
    ch = cal.summarise(cal.held_out_changes(pts))
    lines.append(
        f"\nChanges at {cal.LEVEL:.0%}: every pair of configurations of one document, scored against "
        "the pairs of the other documents between the same classes:"
    )
    for s in ch:
        lines.append(
            f"{s['classes']:<44} {s['points']:>3} {s['given']:>5} {f(s['coverage'], '8.0%')} "
            f"{f(s['median_width'], '6.2f')} {f(s['score'], '6.2f')} {f(s['fixed_score'], '6.2f')}"
        )
    return "\n".join(lines)


def run_memory(
    rows: list[MemoryRow],
    before: dict[str, dict] | None,
    markdown: bool,
    json_path: str | None,
    payload: bool = False,
):
    """Measure and print the memory rows (and the CNN table); with ``payload`` return their
    JSON entries, else write them to ``json_path`` (when given) and return the exit status."""
    t0 = time.perf_counter()
    measured = {r.id: measure_memory(r) for r in rows}
    total = time.perf_counter() - t0
    extra = cnn_extra_row() if any(r.cnn_table for r in rows) else None
    if extra is not None:
        measured[extra.id] = measure_memory(extra)
    where = "" if before is None else " (before: the earlier run's JSON; after: this run)"
    print(f"Memory rows: the published statement against the engine{where}")
    print(format_memory(rows, measured, before, markdown))
    if any(r.cnn_table for r in rows):
        print(
            "\nCNNs at their published configurations: cycles per sample of one replica, "
            "FLOPs per sample 2 x forward MACs (x 3 in training), AMP share = FLOPs / "
            "(cycles x AMP FLOPs per cycle per IPU x IPUs)"
        )
        print(format_cnn([*rows, extra], measured, before, markdown))
        print(f"({extra.id}: {extra.statement})")
    agree = sum(agreement(r, measured[r.id]) == "agrees" for r in rows)
    known = sum(agreement(r, measured[r.id]) == "known disagreement" for r in rows)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\n{len(rows)} memory rows in {total:.1f} s: {agree} agree, {known} known "
        f"disagreement(s), {len(rows) - agree - known} other(s); commit {_commit()}, load {load:.1f}."
    )
    entries = [
        {
            **asdict(r),
            **asdict(measured[r.id]),
            "kind": "memory" if r is not extra else "cnn",
            "agreement": agreement(r, measured[r.id]),
        }
        for r in [*rows, *([extra] if extra is not None else [])]
    ]
    if payload:
        return entries
    if json_path:
        Path(json_path).write_text(json.dumps(entries, indent=2), encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="", help="comma-separated row ids (default: all)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument(
        "--before",
        default=str(BEFORE),
        help="an earlier run's JSON to print every row before and after ('none': leave out)",
    )
    ap.add_argument(
        "--write-errors",
        metavar="FILE",
        help="write the stored errors the analyser's intervals read "
        "(analyser/core/fidelity_errors.json) and print the rows' classes and the calibration check",
    )
    ap.add_argument(
        "--calibration",
        metavar="FILE",
        help="print the group-held-out check of the calibrated intervals on a stored errors "
        "file (no simulation) and exit",
    )
    ap.add_argument(
        "--memory-only", action="store_true", help="run the memory rows ([[memory]]) alone"
    )
    ap.add_argument(
        "--before-memory",
        default=str(BEFORE_MEMORY),
        help="an earlier run's JSON to print the memory rows before and after ('none': leave out)",
    )
    args = ap.parse_args(argv)
    if args.calibration:
        try:
            doc = json.loads(Path(args.calibration).read_text(encoding="utf-8"))
            print(calibration_report(doc, load_rows()))
        except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
            print(f"bench_fidelity: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.write_errors and args.rows.strip():
        print("bench_fidelity: --write-errors needs every row (leave out --rows).", file=sys.stderr)
        return 2
    ids = [i.strip() for i in args.rows.split(",") if i.strip()]
    try:
        memory_rows = load_memory_rows()
        mem_ids = {r.id for r in memory_rows}
        if args.memory_only or (ids and set(ids) <= mem_ids):
            picked = [r for r in memory_rows if not ids or r.id in ids]
            before_mem = (
                load_before(args.before_memory) if args.before_memory.lower() != "none" else None
            )
            return run_memory(picked, before_mem, args.markdown, args.json)
        rows = select(load_rows(), [i for i in ids if i not in mem_ids])
        before = load_before(args.before) if args.before.lower() != "none" else None
        memory_rows = [r for r in memory_rows if not ids or r.id in ids]
        before_mem = (
            load_before(args.before_memory) if args.before_memory.lower() != "none" else None
        )
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        print(f"bench_fidelity: {exc}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    if args.write_errors:
        results = evaluate(rows, lambda row: measure(row, classify=True))
    else:
        results = evaluate(rows)
    total = time.perf_counter() - t0
    print(format_markdown(results) if args.markdown else format_text(results))
    if before is not None:
        print(f"\nBefore ({args.before}) and after (this run):")
        print(format_before(results, before, args.markdown))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\n{len(results)} rows in {total:.1f} s on commit {_commit()} "
        f"({platform.machine()}, {os.cpu_count()} cores, load {load:.1f}); "
        "error = (engine - reference) / reference."
    )
    memory_payload = []
    if memory_rows:
        print()
        memory_payload = run_memory(memory_rows, before_mem, args.markdown, None, payload=True)
    if args.json:
        payload = [
            {**asdict(r.row), **asdict(r.measured), "error_pct": r.error_pct} for r in results
        ]
        Path(args.json).write_text(json.dumps(payload + memory_payload, indent=2), encoding="utf-8")
    if args.write_errors:
        errors = errors_payload(results, _commit(), load, memory_facts())
        intervals.parse_errors(json.loads(json.dumps(errors)), args.write_errors)  # readable
        Path(args.write_errors).write_text(json.dumps(errors, indent=1) + "\n", encoding="utf-8")
        print("\nClasses of the rows")
        print(format_classes(errors))
        print()
        print(calibration_report(errors, rows))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
