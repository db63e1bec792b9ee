"""Lanes of the grouped trace views: the lane of every program for the operation and
program groupings (named groups in natural order, catch-all lanes last, at most
:data:`MAX_LANES` per IPU)."""

from __future__ import annotations

import re

import numpy as np

from analyser.trace.results import STEP_TYPES, ColumnTable
from profiles import schema

#: Most lanes a grouped view shows per IPU; smaller groups are merged into "other".
MAX_LANES = 48

#: Lanes of a grouped view that gather steps without a group of their own (shown last).
_CATCH_ALL = frozenset(("(none)", "(top level)", "other"))


def _natural(text: str) -> list:
    """Sort key that orders 'layer2' before 'layer10'."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _top_components(names: np.ndarray) -> np.ndarray:
    """The first dotted component of each name ("(none)" for an empty or missing one)."""
    # None as a 0-d object array: the same elementwise test, in a form NumPy's stubs accept
    text = np.where(np.equal(names, np.array(None, dtype=object)), "", names).astype(str)
    top = np.char.partition(text, ".")[:, 0] if text.size else text
    return np.where(top == "", "(none)", top).astype(object)


def program_lanes(p: ColumnTable, group: str, n_ipus: int) -> tuple[np.ndarray, tuple[str, ...]]:
    """Lane of every program id (rows of ``p``, the trace's programs) for the "operation" or
    "program" grouping of a trace of ``n_ipus`` IPUs, and the lane labels."""
    n = len(p)
    if group == "operation":
        labels = _top_components(p["layer"])
    else:  # "program": the shallowest ancestor (function, control program) that splits steps
        parent = p["parent"].astype(np.int64)
        depth = np.zeros(n, dtype=np.int64)
        anc = parent.copy()
        while (anc >= 0).any():  # pointer chasing over tree depth, vectorised over nodes
            has = anc >= 0
            depth[has] += 1
            anc[has] = parent[anc[has]]
        # the shallowest depth whose ancestors split the executed programs into more
        # groups than there are IPUs (the per-IPU wrappers are not a useful grouping)
        exe = np.isin(p["type"], [STEP_TYPES.index(t) for t in schema.EXECUTABLE_TYPES])
        max_depth = int(depth.max(initial=0))
        target = max_depth
        for d in range(0, max_depth + 1):
            anc_d = np.arange(n)
            for _ in range(max_depth):
                deeper = depth[anc_d] > d
                if not deeper.any():
                    break
                anc_d[deeper] = parent[anc_d[deeper]]
            if len(np.unique(anc_d[exe & (depth >= d)])) > max(1, n_ipus):
                target = d
                break
        anc = np.arange(n)
        for _ in range(int(depth.max(initial=0))):
            deeper = depth[anc] > target
            if not deeper.any():
                break
            anc[deeper] = parent[anc[deeper]]
        names = p["name"].astype(object)
        labels = np.where(depth[anc] >= target, names[anc], "(top level)")
    # pandas.factorize(sort=True): the distinct labels in sorted order, each row's position
    uniques_arr, codes = np.unique(labels.astype(str), return_inverse=True)
    codes = codes.reshape(-1).astype(np.int64)
    uniques = list(map(str, uniques_arr))
    # named groups first (natural order), then the catch-all lanes
    rank = sorted(
        range(len(uniques)), key=lambda i: (uniques[i] in _CATCH_ALL, _natural(uniques[i]))
    )
    remap0 = np.empty(len(uniques), dtype=np.int64)
    remap0[rank] = np.arange(len(uniques))
    codes = remap0[codes]
    uniques = [uniques[i] for i in rank]
    if len(uniques) > MAX_LANES:  # keep the most common groups, merge the rest
        freq = np.bincount(codes, minlength=len(uniques))
        keep = np.argsort(-freq, kind="stable")[: MAX_LANES - 1]
        remap = np.full(len(uniques), MAX_LANES - 1)
        remap[np.sort(keep)] = np.arange(len(keep))
        uniques = [uniques[k] for k in np.sort(keep)] + ["other"]
        codes = remap[codes]
    return codes.astype(np.int32), tuple(uniques)
