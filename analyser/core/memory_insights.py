"""The Memory Report's "Insights" (no Qt), as PopVision Graph Analyser has them: how much
memory vertex state and exchange code take, for the whole model, per IPU and per tile, and the
largest vertex types and exchanges with where they sit.

Sources, all from the profile:

* totals per IPU and per tile: ``/memory/by_category`` (``vertexInstanceState``; exchange code
  is ``internalExchangeCode + hostExchangeCode + globalExchangeCode``);
* vertex types: ``/graph/vertex_types`` (state bytes per instance, instances, code bytes per
  tile) and, for where their state sits, ``/graph/compute_sets`` (a compute set's vertices spread
  evenly over its tile interval, as the engine lays them out; the compute set's main vertex
  type stands for all its vertices). Both list every compute set's instances, outlined copies
  included, which share the first one's state (on the walkthrough's step 2, 84.8 MB listed
  against 15.1 MB of vertexInstanceState stored), so each tile's stored state is split among
  the types in proportion to their listed state there: the types then add up to the stored
  total, tile by tile;
* exchanges: the exchange and stream-copy programs of ``/programs/nodes`` with their code bytes
  ("control and exchange code of the program over all tiles"), spread over the tiles that take
  part in them (``/programs/tile_cycles`` > 0).

Everything is vectorised over compute sets, programs and tiles (difference arrays along each
IPU's tiles); nothing loops over tiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analyser.core.quantities import MEMORY_CATEGORIES, STEP_TYPES

EXCHANGE_CODE = ("internalExchangeCode", "hostExchangeCode", "globalExchangeCode")
VERTEX_STATE = ("vertexInstanceState",)
#: Program types whose code is exchange code (``STEP_TYPES`` names).
EXCHANGE_TYPES = (
    "DoExchange",
    "GlobalExchange",
    "StreamCopyBegin",
    "StreamCopyMid",
    "StreamCopyEnd",
)


@dataclass
class MemoryInsights:
    """Vertex state and exchange code by model, IPU and tile, largest vertices and exchanges."""

    #: Whole model: {"vertex state": bytes, "exchange code": bytes, and each exchange-code
    #: category}.
    model: dict[str, int]
    #: One row per IPU: ipu, vertex_state, exchange_code (+ each exchange-code category),
    #: largest tile of each (tile, bytes).
    per_ipu: pd.DataFrame
    #: The tiles holding the most vertex state / exchange code: what, ipu, tile, bytes.
    top_tiles: pd.DataFrame
    #: Vertex types by total state: vertex_type, instances (listed), state_bytes (per instance),
    #: total_state_bytes (their share of the stored vertexInstanceState, summed over tiles),
    #: listed_state_bytes (instances x state, outlined copies included), code_bytes (per tile),
    #: tiles, largest_tile_ipu, largest_tile, largest_tile_bytes.
    vertices: pd.DataFrame
    #: Exchange programs by code: name, type, ipu, code_bytes, tiles, first_tile, last_tile,
    #: code_per_tile, bytes (moved, one execution).
    exchanges: pd.DataFrame


def _largest_per_ipu(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    tile = values.argmax(axis=1)
    return tile, values[np.arange(values.shape[0]), tile]


def _top_tiles(values: np.ndarray, what: str, n: int) -> pd.DataFrame:
    flat = values.ravel()
    k = min(n, flat.size)
    idx = np.argpartition(-flat, k - 1)[:k] if k else np.zeros(0, np.int64)
    idx = idx[np.argsort(-flat[idx], kind="stable")]
    ipu, tile = np.divmod(idx, values.shape[1])
    return pd.DataFrame({"what": what, "ipu": ipu, "tile": tile, "bytes": flat[idx]})


def vertex_state_per_tile(src: Any, n_ipus: int, tiles: int) -> tuple[pd.DataFrame, np.ndarray]:
    """(vertex types, state bytes per type per IPU and tile ``[types, ipus, tiles]``) from the
    compute sets' vertices spread over their tiles."""
    vt = src.table("/graph/vertex_types")
    n_types = len(vt)
    state = np.zeros((n_types, n_ipus * tiles + 1), np.float64)
    if src.has("/graph/compute_sets") and n_types:
        cs = src.table("/graph/compute_sets")
        typ = cs["vertex_type"].to_numpy().astype(np.int64)
        ok = (typ >= 0) & (typ < n_types)
        cs, typ = cs[ok], typ[ok]
        count = np.maximum(cs["tile_count"].to_numpy().astype(np.int64), 1)
        per_tile = (
            cs["vertices"].to_numpy().astype(np.float64)
            / count
            * vt["state_bytes"].to_numpy()[typ].astype(np.float64)
        )
        base = cs["ipu"].to_numpy().astype(np.int64) * tiles
        start = base + cs["tile_start"].to_numpy().astype(np.int64)
        np.add.at(state, (typ, start), per_tile)
        np.add.at(state, (typ, np.minimum(start + count, n_ipus * tiles)), -per_tile)
    per = np.cumsum(state, axis=1)[:, :-1].reshape(n_types, n_ipus, tiles)
    return vt, np.rint(per).astype(np.int64)


def memory_insights(analysis: Any, n: int = 20) -> MemoryInsights:
    """The insights of one profile (``n`` rows in each "largest" table)."""
    src = analysis.src
    by_cat = np.asarray(src.profile.array("/memory/by_category"), np.int64)  # [ipus, tiles, cats]
    n_ipus, tiles = by_cat.shape[0], by_cat.shape[1]
    cat = {name: by_cat[..., i] for i, name in enumerate(MEMORY_CATEGORIES)}
    zero = np.zeros((n_ipus, tiles), np.int64)
    vstate = sum((cat[c] for c in VERTEX_STATE), zero)
    xcode = sum((cat[c] for c in EXCHANGE_CODE), zero)

    model = {"vertex state": int(vstate.sum()), "exchange code": int(xcode.sum())}
    model.update({c: int(cat[c].sum()) for c in EXCHANGE_CODE})
    vt_tile, vt_bytes = _largest_per_ipu(vstate)
    xc_tile, xc_bytes = _largest_per_ipu(xcode)
    per_ipu = pd.DataFrame(
        {
            "ipu": np.arange(n_ipus),
            "vertex_state": vstate.sum(axis=1),
            "largest_vertex_state_tile": vt_tile,
            "largest_vertex_state_bytes": vt_bytes,
            "exchange_code": xcode.sum(axis=1),
            **{c: cat[c].sum(axis=1) for c in EXCHANGE_CODE},
            "largest_exchange_code_tile": xc_tile,
            "largest_exchange_code_bytes": xc_bytes,
        }
    )
    top = pd.concat(
        [_top_tiles(vstate, "vertex state", n), _top_tiles(xcode, "exchange code", n)],
        ignore_index=True,
    )

    # vertex types, and the tile holding most of each. The vertex types table (and the compute
    # sets) count every compute set's instances, outlined copies included, which share the
    # first one's vertex state; so each tile's stored vertexInstanceState is split among the
    # types in proportion to their listed state on that tile, and the types add up to it
    vt, listed = vertex_state_per_tile(src, n_ipus, tiles)
    denom = listed.sum(axis=0, keepdims=True).astype(np.float64)
    share = np.divide(listed, denom, out=np.zeros(listed.shape), where=denom > 0)
    per = np.rint(share * vstate[None]).astype(np.int64)
    flat = per.reshape(len(vt), -1)
    where = flat.argmax(axis=1) if flat.size else np.zeros(len(vt), np.int64)
    vertices = pd.DataFrame(
        {
            "vertex_type": vt["name"].astype(str).to_numpy(),
            "instances": vt["instances"].to_numpy().astype(np.int64),
            "state_bytes": vt["state_bytes"].to_numpy().astype(np.int64),
            "total_state_bytes": flat.sum(axis=1),
            "listed_state_bytes": (vt["state_bytes"] * vt["instances"]).to_numpy().astype(np.int64),
            "code_bytes": vt["code_bytes"].to_numpy().astype(np.int64),
            "tiles": (flat > 0).sum(axis=1) if flat.size else np.zeros(len(vt), np.int64),
            "largest_tile_ipu": where // tiles,
            "largest_tile": where % tiles,
            "largest_tile_bytes": flat.max(axis=1, initial=0) if flat.size else 0,
        }
    )
    vertices = vertices.sort_values("total_state_bytes", ascending=False, kind="stable").head(n)

    # exchange programs by code, with the tiles that take part
    nodes = src.table("/programs/nodes", ["name", "type", "ipu", "code_bytes", "bytes"])
    codes = [STEP_TYPES.index(t) for t in EXCHANGE_TYPES]
    ex = np.flatnonzero(np.isin(nodes["type"].to_numpy(), codes))
    code = nodes["code_bytes"].to_numpy()[ex].astype(np.int64)
    ex = ex[np.argsort(-code, kind="stable")][:n]
    tc = np.asarray(src.profile.tile_cycles(ex)) if len(ex) else np.zeros((0, tiles))
    on = tc > 0
    n_on = on.sum(axis=1)
    first = np.where(n_on > 0, on.argmax(axis=1), -1)
    last = np.where(n_on > 0, tiles - 1 - on[:, ::-1].argmax(axis=1), -1)
    code = nodes["code_bytes"].to_numpy()[ex].astype(np.int64)
    exchanges = pd.DataFrame(
        {
            "name": nodes["name"].to_numpy()[ex].astype(str),
            "type": [STEP_TYPES[int(t)] for t in nodes["type"].to_numpy()[ex]],
            "ipu": nodes["ipu"].to_numpy()[ex].astype(np.int64),
            "code_bytes": code,
            "tiles": n_on,
            "first_tile": first,
            "last_tile": last,
            "code_per_tile": np.where(n_on > 0, code // np.maximum(n_on, 1), 0),
            "bytes": nodes["bytes"].to_numpy()[ex].astype(np.int64),
        }
    )
    return MemoryInsights(model, per_ipu, top, vertices.reset_index(drop=True), exchanges)


__all__ = ["EXCHANGE_CODE", "EXCHANGE_TYPES", "VERTEX_STATE", "MemoryInsights", "memory_insights"]
