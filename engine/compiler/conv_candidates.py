"""The candidate partitions of PopLibs' convolution planner, as the engine searches them.

``lib/poplin/ConvPlan.cpp`` enumerates a plan's partition variables and vertex types
(``getConvVertexType*Candidates``) before its cost model picks one; here every op's candidates
are one flat numpy grid (:class:`Candidates`), deduplicated, for
:mod:`engine.compiler.conv_plan` to cost and search. The letters are conv_plan's (see its
docstring): ``pg`` ... ``po`` the splits, ``si`` / ``so`` the serial splits, ``cg`` / ``ci`` /
``co`` the vertex's channel groupings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.compiler.conv_params import ConvShapes, _cdiv

#: Candidate splits per dimension: powers of two up to 2^EXP_MAX (clipped to the grains).
EXP_MAX = 11
#: Kernel-row splits tried: these and the kernel's height.
KERNEL_SPLITS = (1, 2, 3, 4)
#: HMAC input channels per group tried (``getConvVertexHMACCandidates`` lists every even
#: grouping up to the channels; the engine tries these powers of four, a subset).
HMAC_IN_CHANS = (16, 64, 256, 1024)
#: ``Plan::Slic::windowWidth``: the only SLIC kernel window PopLibs implements (1 x 4).
SLIC_WINDOW = 4


@dataclass
class Candidates:
    """Flattened (op, partition) pairs: op index and the splits, serial splits included."""

    op: np.ndarray
    pg: np.ndarray
    pf: np.ndarray
    pkh: np.ndarray
    pi: np.ndarray
    po: np.ndarray
    si: np.ndarray  # input-channel serial splits
    so: np.ndarray  # output-channel serial splits
    cg: np.ndarray  # convGroupsPerGroup of the vertex (1: AMP)
    ci: np.ndarray  # inChansPerGroup of the vertex
    co: np.ndarray  # partialChansPerGroup of the vertex
    chains: np.ndarray  # SLIC: conv-unit chains (2 or 4); 0: the AMP vertex
    hmac: np.ndarray  # the HMAC vertex (chains 0)
    bibl: np.ndarray  # broadcastInputBeforeLoop: the inputs exchanged once, before the loop


def _dedup(op: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Indices of the first of each distinct (op, key) pair, sorted by op then key."""
    order = np.lexsort((key, op))
    op_sorted, key_sorted = op[order], key[order]
    new = np.ones(len(order), bool)
    new[1:] = (op_sorted[1:] != op_sorted[:-1]) | (key_sorted[1:] != key_sorted[:-1])
    return order[new]


def _grid(
    shapes: ConvShapes,
    compute_tiles: int,
    op: np.ndarray,
    pg: np.ndarray,
    cg: int,
    ci: int,
    co: int,
    chains: int,
    hmac: bool = False,
) -> Candidates:
    """The candidate partitions of rows ``op`` (an op may repeat, once per conv-group split
    ``pg``) for one vertex type (``cg`` conv groups, ``ci`` / ``co`` channels per group;
    ``chains`` > 0: SLIC, whose tile holds one group of input and of output channels): the
    distinct channel and kernel-row splits first, then the field splits of each."""
    powers = 2 ** np.arange(10)
    kernel_splits = np.array((*KERNEL_SPLITS, 0))  # 0 stands for the kernel's own height
    in_splits, out_splits, kh_splits = (
        axis_grid.ravel() for axis_grid in np.meshgrid(powers, powers, kernel_splits, indexing="ij")
    )
    in_grains, out_grains = _cdiv(shapes.C[op], ci), _cdiv(shapes.N[op], co)
    tiles_per_group = np.maximum(compute_tiles // pg, 1)
    kernel_rows = shapes.kh[op]
    if chains:  # every input and output channel group on its own tiles
        in_splits = np.zeros_like(in_splits)
        out_splits = np.zeros_like(out_splits)
        pi = np.broadcast_to(in_grains[:, None], (len(op), len(in_splits)))
        po = np.broadcast_to(out_grains[:, None], (len(op), len(out_splits)))
        chan_ok = np.ones(pi.shape, bool)
    else:
        pi = np.minimum(in_splits[None, :], in_grains[:, None])
        po = np.minimum(out_splits[None, :], out_grains[:, None])
        chan_ok = (pi == np.minimum(in_splits, in_grains[:, None])) & (po <= out_splits)
    pkh = np.minimum(
        np.where(kh_splits == 0, kernel_rows[:, None], kh_splits[None, :]), kernel_rows[:, None]
    )
    tiles_per_field = pi * po * pkh
    fits = (tiles_per_field <= tiles_per_group[:, None]) & chan_ok
    row, col = np.nonzero(fits)
    pi, po, pkh, tiles_per_field = (
        pi[row, col],
        po[row, col],
        pkh[row, col],
        tiles_per_field[row, col],
    )
    keep = _dedup(row, (pi * 4096 + po) * 8 + pkh)
    row, pi, po, pkh, tiles_per_field = (
        row[keep],
        pi[keep],
        po[keep],
        pkh[keep],
        tiles_per_field[keep],
    )
    # field splits: powers of two and "all the tiles left"
    field_splits = np.r_[2 ** np.arange(EXP_MAX + 1), 0]
    field = shapes.M[op[row]]
    pf_max = np.minimum(np.maximum(tiles_per_group[row] // tiles_per_field, 1), field)
    pf = np.where(
        field_splits[None, :] == 0,
        pf_max[:, None],
        np.minimum(field_splits[None, :], field[:, None]),
    )
    fits = tiles_per_field[:, None] * pf <= tiles_per_group[row][:, None]
    field_row, col = np.nonzero(fits)
    pf = pf[field_row, col]
    keep = _dedup(field_row, pf)
    field_row, pf = field_row[keep], pf[keep]
    ones = np.ones(len(field_row), np.int64)
    rows = row[field_row]
    return Candidates(
        op[rows],
        pg[rows],
        pf,
        pkh[field_row],
        pi[field_row],
        po[field_row],
        ones,
        ones,
        ones * cg,
        ones * ci,
        ones * co,
        ones * chains,
        np.full(len(field_row), hmac),
        np.zeros(len(field_row), bool),
    )


def _group_splits(groups: np.ndarray, compute_tiles: int) -> tuple[np.ndarray, np.ndarray]:
    """Conv-group splits tried per op (``PartitionVariables::convGroupSplit`` over the conv
    group grains): the powers of two below the grains, the grains themselves and as many as
    the tiles allow. Returns (row's op index, split)."""
    powers = 2 ** np.arange(EXP_MAX + 1)
    cand = np.concatenate(
        [np.minimum(powers[None, :], groups[:, None]), np.minimum(groups, compute_tiles)[:, None]],
        axis=1,
    )
    row, col = np.nonzero(np.ones(cand.shape, bool))
    split = cand[row, col]
    keep = _dedup(row, split)
    return row[keep], split[keep]


def slic_types(shapes: ConvShapes) -> tuple[tuple[int, int, int], ...]:
    """``getConvVertexSLICCandidates``: (convGroupsPerGroup, chansPerGroup, conv chains) of
    the SLIC vertices for half activations: groupings 1 x 4, 2 x 2, 4 x 1 and, with half
    partials and 16 conv units, 8 x 1 and 16 x 1; 4 chains with 16 conv units and half
    partials, 2 chains otherwise (float partials: 2 only). None for float activations."""
    if shapes.eb != 2:
        return ()
    units = shapes.co  # numConvUnits (partialChansPerGroup of the AMP vertex)
    half_partials = shapes.pb == 2
    chains = ((4,) if units == 16 else ()) + (2,) if half_partials else (2,)
    groupings = [(1, 4), (2, 2), (4, 1)]
    if half_partials and units == 16:
        groupings += [(8, 1), (16, 1)]
    return tuple(
        (conv_groups, chans, chain_count)
        for chain_count in chains
        for conv_groups, chans in groupings
    )


def candidates(shapes: ConvShapes, compute_tiles: int) -> Candidates:
    """Every candidate partition of every op within the tiles (numpy, no loop over ops).

    Dense convolutions and matmuls (batched ones included) keep every conv group on its own
    tiles (``pg = min(G, tiles)``) with the AMP vertex. Grouped convolutions (``G > 1``) also
    split their conv groups (``_group_splits``) and, where their shape allows, try the SLIC
    vertex (``slic_types``; a field of rows, stride at most 2, not a weight update) besides
    AMP, as ``getConvVertexTypeCandidates`` lists them."""
    n_ops = len(shapes.M)
    ops = np.arange(n_ops)
    grouped = shapes.conv & (shapes.G > 1)
    parts = []
    dense = ops[~grouped]
    if len(dense):
        parts.append(
            _grid(
                shapes,
                compute_tiles,
                dense,
                np.minimum(shapes.G[dense], compute_tiles),
                1,
                shapes.ci,
                shapes.co,
                0,
            )
        )
    gops = ops[grouped]
    if len(gops):
        row, pg = _group_splits(shapes.G[gops], compute_tiles)
        parts.append(_grid(shapes, compute_tiles, gops[row], pg, 1, shapes.ci, shapes.co, 0))
        slic_ok = (
            (shapes.width[gops] > 0) & (shapes.role[gops] != "gw") & (shapes.stride[gops] <= 2)
        )
        sops = gops[slic_ok]
        for cg, chans, chains in slic_types(shapes) if len(sops) else ():
            row, pg = _group_splits(_cdiv(shapes.G[sops], cg), compute_tiles)
            parts.append(_grid(shapes, compute_tiles, sops[row], pg, cg, chans, chans, chains))
        # the weight update: HMAC (partialChansPerGroup 1, or 2 with half partials)
        hops = gops[
            (shapes.role[gops] == "gw") & (shapes.width[gops] == 0) & (shapes.kernel[gops] == 1)
        ]
        if len(hops):
            row, pg = _group_splits(shapes.G[hops], compute_tiles)
            for in_chans in HMAC_IN_CHANS:
                parts.append(
                    _grid(
                        shapes,
                        compute_tiles,
                        hops[row],
                        pg,
                        1,
                        in_chans,
                        1 if shapes.pb >= 4 else 2,
                        0,
                        True,
                    )
                )
    cands = parts[0]
    for part in parts[1:]:
        cands = _concat(cands, part)
    return cands


def _concat(first: Candidates, second: Candidates) -> Candidates:
    return Candidates(
        *(
            np.concatenate([getattr(first, name), getattr(second, name)])
            for name in Candidates.__dataclass_fields__
        )
    )
