"""Roofline of a run, per operation, from the profile alone (no re-profiling).

For each operation over the whole run (``executions`` x per-execution figures):

* ``flops``: its FLOPs (2 per multiply-accumulate, ``/graph/operations``) times its executions;
* ``exchange_bytes``: bytes its exchange programs (DoExchange) moved, times their executions;
* ``host_bytes``: bytes its stream-copy programs moved to or from the host or remote buffers;
* ``cycles``: the measured cycles of all its executed steps (``total_cycles`` of the operations
  table);
* ``intensity_exchange`` / ``intensity_host``: FLOPs per byte moved on the exchange / the host
  link (infinite when nothing moved);
* ``achieved``: FLOPs per cycle (per IPU: an operation runs on one IPU);
* ``bound``: the attainable FLOPs per cycle, ``min(peak, intensity_exchange x exchange roof,
  intensity_host x host roof)``, with ``limit`` naming the roof that binds.

The roofs, per IPU, from the profile's target (``/meta@target``, engine/data/chips.toml):

* ``peak``: the AMP's multiply-accumulates per tile per cycle for the compiled program's operand
  and partials types x 2 FLOPs x the IPU's tiles: no vertex computes faster than the AMP (vector
  and element-wise vertices are slower), so it bounds every operation. The rate per tile is the
  target's ``amp_macs_float`` for FP32 operands (precision 32.32; they always accumulate in
  float), else ``amp_macs_half_half`` with half partials and ``amp_macs_half_float`` with float
  partials. On Mk2 and Bow (1,472 tiles) that is 2 x 16 x 1,472 = 47,104 FLOPs per cycle for
  FP32, 2 x 64 x 1,472 = 188,416 for FP16 with half partials and 2 x 32 x 1,472 = 94,208 for
  FP16 with float partials: PopLibs runs the same AMP worker loop (4 cycles per output
  position, 16 input channels per conv unit) with 16 conv units per tile accumulating in half
  (``f16v4hihov4amp``) and 8 accumulating in float (``f16v4sisoamp``):
  ``lib/poplin/codelets/asm/conv_partial_1x1_half_float_8_and_half_half_h16.S`` and
  ``conv_partial_nx1_half_float_8_and_half_half_16.S`` (github.com/graphcore/poplibs), the
  number of units ``target.getNumConvUnits`` / ``getFp16InFp32OutConvUnitsPerTile`` that
  ``lib/poplin/ConvVertexType.cpp`` plans with. PopLibs' own default is float partials
  (``lib/poplin/ConvOptions.hpp``, ``lib/poplin/MatMul.cpp``: ``partialsType = poplar::FLOAT``),
  which PopTorch keeps unless ``opts.Precision.setPartialsType(torch.half)``.

  The partials type is the one the compile used (:func:`partials_of`): ``/meta@partials_type``
  (written by the engine since profile format 1.6); in an older profile, the partials its AMP
  vertex types name (``...Partial...<half,float>``); failing both, what its run options
  resolve to (``partials_type``, the framework's default), an assumption the roofs say;
* ``exchange roof``: every tile receiving at the exchange's broadcast rate
  (``exchange_broadcast_bytes_per_cycle``, 8 bytes per cycle per tile: the most the exchange
  fabric delivers; point-to-point exchanges get ``exchange_bytes_per_cycle``, 4) x tiles;
* ``host roof``: the IPU's host link, ``host_link_bytes_per_s / clock_hz`` bytes per cycle.

Each bound holds by construction of the measured cycles: an operation's cycles include its
exchanges (at most the exchange roof's bytes per cycle) and its compute (at most the AMP peak),
so ``achieved <= bound`` (tests check it on every operation of the engine's profiles).

In the engine's profiles no stream copy belongs to an operation (the host's input and output
copies are the run's own), so an operation's ``host_bytes`` is 0; the run's row
(:attr:`Roofline.run`) carries the host link's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analyser.core.analysis import Analysis
from profiles import schema
from profiles.errors import UserFacingError

#: AMP multiply-accumulates per tile per cycle of each (operand, partials) type (the target's field).
PEAK_FIELD = {
    ("float", "float"): "amp_macs_float",
    ("half", "half"): "amp_macs_half_half",
    ("half", "float"): "amp_macs_half_float",
}
#: Operand type of the AMP's inputs for each precision (inputs-and-compute.weights: 16.32 casts
#: its FP32 master weights to FP16 before the matmuls).
OPERANDS = {"32.32": "float", "16.32": "half", "16.16": "half"}
#: Where the partials type of :class:`Roofs` comes from.
PARTIALS_SOURCES = ("recorded", "operands", "vertex types", "assumed")
#: An AMP vertex type naming its input and partials types: the engine's ``amp:Partials<half,float>``,
#: PopLibs' ``poplin::ConvPartial1x1Out<half,float,true>``.
_AMP_TEMPLATE = r"Partial\w*<\s*(half|float)\s*,\s*(half|float)\b"
_UNRECORDED = (
    "This profile does not record the partials type it was compiled with (/meta partials_type, "
    "written by the engine since profile format 1.6)"
)
#: Vertex types read to infer an old profile's partials (a real program has tens).
_MAX_VERTEX_TYPES = 100_000
_EXCHANGE = frozenset({schema.PROGRAM_TYPES.index("DoExchange")})
_HOST = frozenset(
    schema.PROGRAM_TYPES.index(t) for t in ("StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd")
)


class RooflineError(UserFacingError):
    """The roofline cannot be drawn (no execution, a target without the figures)."""


@dataclass(frozen=True)
class Roofs:
    """The roofs of one IPU, in FLOPs per cycle and bytes per cycle, with what the compute roof
    was taken from (the AMP's rate per tile, the tiles, the operand and partials types)."""

    precision: str
    peak_flops_per_cycle: float
    exchange_bytes_per_cycle: float
    host_bytes_per_cycle: float
    #: AMP operand type, 'half' or 'float' ('' when not known)
    operands: str = ""
    #: partials type the compute roof is for, 'half' or 'float' ('' when not known)
    partials: str = ""
    #: where ``partials`` comes from (:data:`PARTIALS_SOURCES`)
    partials_source: str = ""
    amp_macs_per_tile_per_cycle: float = 0.0
    tiles: int = 0
    #: one sentence when the partials type is not the profile's record ('' when it is)
    note: str = ""

    @property
    def label(self) -> str:
        """'16.16, float partials' (', assumed' when the profile does not say)."""
        if not self.partials:
            return self.precision
        tail = {"assumed": ", assumed", "vertex types": ", from the vertex types"}
        return f"{self.precision}, {self.partials} partials{tail.get(self.partials_source, '')}"

    def peak_formula(self) -> str:
        """The compute roof as it was computed: '32 MACs/tile/cycle x 1,472 tiles x 2'."""
        return f"{self.amp_macs_per_tile_per_cycle:,.0f} MACs/tile/cycle x {self.tiles:,} tiles x 2"

    def bound(
        self, intensity_exchange: np.ndarray, intensity_host: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(attainable FLOPs per cycle, the binding roof's name) for each intensity pair."""
        with np.errstate(invalid="ignore", over="ignore"):
            cand = np.stack(
                [
                    np.full(np.shape(intensity_exchange), self.peak_flops_per_cycle),
                    np.asarray(intensity_exchange, float) * self.exchange_bytes_per_cycle,
                    np.asarray(intensity_host, float) * self.host_bytes_per_cycle,
                ]
            )
        cand = np.where(np.isnan(cand), np.inf, cand)
        which = np.argmin(cand, axis=0)
        return cand.min(axis=0), np.array(["compute", "exchange", "host link"])[which]


def _vertex_partials(analysis: Analysis) -> set[str]:
    """The partials types the profile's AMP vertex types with FP16 inputs name."""
    src = analysis.src
    if not src.has("/graph/vertex_types") or src.n_rows("/graph/vertex_types") > _MAX_VERTEX_TYPES:
        return set()
    names = pd.Series(src.column("/graph/vertex_types", "name"), dtype=object).astype(str)
    found = names.str.extract(_AMP_TEMPLATE).dropna()
    return set(found.loc[found[0] == "half", 1])


def partials_of(analysis: Analysis, operands: str) -> tuple[str, str, str]:
    """(partials type, its source in :data:`PARTIALS_SOURCES`, a note when it is not the
    profile's record) of ``analysis``'s compiled AMP work with ``operands``."""
    where = f"profile {analysis.path}"
    raw = analysis.src.meta.get("partials_type")
    if raw is not None and (not isinstance(raw, str) or raw not in ("half", "float")):
        raise RooflineError(
            f"{where}: its /meta partials_type {str(raw)[:40]!r} is neither 'half' nor 'float'."
        )
    if operands == "float":
        if raw == "half":
            raise RooflineError(
                f"{where}: it records half partials for FP32 operands, which the AMP does not "
                "have (FP32 operands accumulate in float)."
            )
        return "float", "operands", ""
    if raw is not None:
        return raw, "recorded", ""
    seen = _vertex_partials(analysis)
    if seen:
        # mixed: the roof must bound every operation, so the faster half-partials rate
        partials = "half" if "half" in seen else "float"
        mixed = (
            " (some half, some float: the roof takes the faster half rate)" if len(seen) > 1 else ""
        )
        return (
            partials,
            "vertex types",
            f"{_UNRECORDED}; the roof takes {partials} partials from its AMP vertex types{mixed}.",
        )
    opts = analysis.options
    try:
        resolved = "float" if opts.partials_dtype == "float32" else "half"
        how = (
            f"its run options give (partials_type {opts.partials_type}, framework "
            f"{opts.framework}, precision {opts.precision})"
        )
    except Exception:  # a framework this engine does not know: PopLibs' own default
        resolved, how = "float", "PopLibs' default (partialsType float)"
    return (
        resolved,
        "assumed",
        f"{_UNRECORDED} and no AMP vertex type names one; the roof assumes {resolved} "
        f"partials, what {how}.",
    )


def roofs_of(analysis: Analysis) -> Roofs:
    """The roofs of ``analysis``'s target and compiled operand / partials types (module
    docstring)."""
    t = analysis.target_config
    precision = str(analysis.options.precision)
    operands = OPERANDS.get(precision)
    if operands is None:
        raise RooflineError(
            f"profile {analysis.path}: its precision {precision[:20]!r} is none of "
            f"{', '.join(OPERANDS)}, so the AMP's rate is not known."
        )
    partials, source, note = partials_of(analysis, operands)
    try:
        macs = float(t[PEAK_FIELD[operands, partials]])
        tiles = int(analysis.target.tiles_per_ipu)
        broadcast = float(t["exchange_broadcast_bytes_per_cycle"])
        host = float(t["host_link_bytes_per_s"]) / float(analysis.target.clock_hz)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        raise RooflineError(
            f"profile {analysis.path}: its target does not give the AMP, exchange and host-link "
            "figures a roofline needs."
        ) from None
    if not all(np.isfinite(x) and x > 0 for x in (macs, broadcast, host)) or tiles <= 0:
        raise RooflineError(
            f"profile {analysis.path}: its target's roofline figures are not positive."
        )
    return Roofs(
        precision,
        2.0 * macs * tiles,
        broadcast * tiles,
        host,
        operands,
        partials,
        source,
        macs,
        tiles,
        note,
    )


def _intensity(flops: np.ndarray, moved: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(moved > 0, flops / np.maximum(moved, 1), np.inf)


def roofline_frame(
    names: np.ndarray,
    flops: np.ndarray,
    exchange_bytes: np.ndarray,
    host_bytes: np.ndarray,
    cycles: np.ndarray,
    roofs: Roofs,
) -> pd.DataFrame:
    """The roofline rows of operations given their run totals (see the module docstring)."""
    flops = np.asarray(flops, np.float64)
    ix = _intensity(flops, np.asarray(exchange_bytes, np.float64))
    ih = _intensity(flops, np.asarray(host_bytes, np.float64))
    bound, limit = roofs.bound(ix, ih)
    with np.errstate(divide="ignore", invalid="ignore"):
        achieved = np.where(cycles > 0, flops / np.maximum(cycles, 1), 0.0)
        share = np.where(bound > 0, achieved / bound, 0.0)
    return pd.DataFrame(
        {
            "name": names,
            "flops": flops,
            "exchange_bytes": np.asarray(exchange_bytes, np.int64),
            "host_bytes": np.asarray(host_bytes, np.int64),
            "cycles": np.asarray(cycles, np.int64),
            "intensity_exchange": ix,
            "intensity_host": ih,
            "achieved": achieved,
            "bound": bound,
            "share_of_bound": share,
            "limit": limit,
        }
    )


@dataclass
class Roofline:
    """Per-operation roofline of one run and the run's own point."""

    roofs: Roofs
    #: one row per executed operation with FLOPs (module docstring), most FLOPs first
    operations: pd.DataFrame
    #: the whole run as one point (per IPU-cycle: every IPU's FLOPs over the run's cycles x IPUs)
    run: pd.DataFrame

    def to_dict(self) -> dict:
        """The roofline as plain data (the JSON output of ``analyse roofline``)."""

        def rows(df: pd.DataFrame) -> list[dict]:
            out = []
            for r in df.to_dict("records"):
                out.append(
                    {
                        k: (
                            None
                            if isinstance(v, float) and not np.isfinite(v)
                            else v.item()
                            if isinstance(v, np.generic)
                            else v
                        )
                        for k, v in r.items()
                    }
                )
            return out

        return {
            "roofs": self.roofs.__dict__,
            "run": rows(self.run)[0],
            "operations": rows(self.operations),
        }


def roofline(analysis: Analysis) -> Roofline:
    """The roofline of ``analysis`` (RooflineError for a profile that never ran)."""
    ex = analysis.execution
    if ex is None:
        raise RooflineError(
            f"profile {analysis.path} has no execution (the program does not fit in memory), so "
            "no roofline."
        )
    roofs = roofs_of(analysis)
    src = analysis.src
    ops = analysis.operations
    n = len(ops)
    prog_op = src.column("/programs/nodes", "op").astype(np.int64)
    prog_type = src.column("/programs/nodes", "type").astype(np.int64)
    prog_bytes = src.column("/programs/nodes", "bytes").astype(np.int64)
    moved = prog_bytes * np.asarray(ex.program_executions, np.int64)
    has_op = (prog_op >= 0) & (prog_op < n)
    is_x = np.isin(prog_type, list(_EXCHANGE))
    is_h = np.isin(prog_type, list(_HOST))
    xb = np.bincount(prog_op[has_op & is_x], moved[has_op & is_x], n).astype(np.int64)
    hb = np.bincount(prog_op[has_op & is_h], moved[has_op & is_h], n).astype(np.int64)
    flops = ops["flops"].to_numpy(np.float64) * ops["executions"].to_numpy(np.float64)
    cycles = ops["total_cycles"].to_numpy(np.int64)
    frame = roofline_frame(ops["name"].to_numpy(object), flops, xb, hb, cycles, roofs)
    frame.insert(1, "type", ops["type"].to_numpy(object))
    frame.insert(2, "ipu", ops["ipu"].to_numpy(np.int64))
    frame.insert(3, "layer", ops["layer"].astype(str).to_numpy(object))
    frame.insert(4, "source", ops["source"].astype(str).to_numpy(object))
    keep = (frame["flops"] > 0) & (frame["cycles"] > 0)
    frame = frame[keep].sort_values("flops", ascending=False, kind="stable").reset_index(drop=True)
    ipus = int(analysis.target.num_ipus)
    run = roofline_frame(
        np.array(["(run)"], object),
        np.array([flops.sum()]),
        np.array([int(moved[is_x].sum())]),
        np.array([int(moved[is_h].sum())]),
        np.array([int(ex.total_cycles) * ipus]),
        roofs,
    )
    return Roofline(roofs, frame, run)
