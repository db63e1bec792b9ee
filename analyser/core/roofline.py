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

* ``peak``: the AMP units' multiply-accumulates per tile per cycle for the run's precision
  (``amp_macs_half_half`` for 16.16, ``amp_macs_half_float`` for 16.32, ``amp_macs_float`` for
  32.32) x 2 FLOPs x the IPU's tiles: no vertex computes faster than the AMP (vector and
  element-wise vertices are slower), so it bounds every operation;
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

#: AMP multiply-accumulates per tile per cycle of each precision (the target's field).
PEAK_FIELD = {
    "16.16": "amp_macs_half_half",
    "16.32": "amp_macs_half_float",
    "32.32": "amp_macs_float",
}
_EXCHANGE = frozenset({schema.PROGRAM_TYPES.index("DoExchange")})
_HOST = frozenset(
    schema.PROGRAM_TYPES.index(t) for t in ("StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd")
)


class RooflineError(UserFacingError):
    """The roofline cannot be drawn (no execution, a target without the figures)."""


@dataclass(frozen=True)
class Roofs:
    """The roofs of one IPU, in FLOPs per cycle and bytes per cycle."""

    precision: str
    peak_flops_per_cycle: float
    exchange_bytes_per_cycle: float
    host_bytes_per_cycle: float

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


def roofs_of(analysis: Analysis) -> Roofs:
    """The roofs of ``analysis``'s target and precision (module docstring)."""
    t = analysis.target_config
    precision = str(analysis.options.precision)
    try:
        macs = float(t[PEAK_FIELD[precision]])
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
    return Roofs(precision, 2.0 * macs * tiles, broadcast * tiles, host)


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
