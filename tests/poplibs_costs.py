"""Cycle estimates shared by the tests that check the engine's costs against PopLibs
(tests/test_vertex_costs.py, tests/test_conv_plan.py).

:func:`reduce_cycles` follows github.com/graphcore/poplibs ``lib/poplin/PerformanceEstimation.hpp``
``getReduceCycleEstimate`` line by line, with scalar loops as the C++ has them; :func:`engine_amp`
is the engine's AMP vertex cost (``engine.compiler.vertex_costs.amp_partials_cycles``) of one tile,
the form in which both files compare it.
"""

from __future__ import annotations

import math

import numpy as np

from engine.compiler import vertex_costs as vc

#: Worker contexts per tile.
WORKERS = 6


def reduce_cycles(out_size, partials, float_out, float_partials, single=False):
    """getReduceCycleEstimate: ``partials`` partial sums into ``out_size`` outputs on one tile
    (``single``: the single-input vertex)."""
    acc = 4 if float_partials else 8
    in_dp = 64 // ((4 if float_partials else 2) * 8)
    if single:
        per_loop = acc // min(acc, in_dp)
        loops = out_size // acc
        per_worker = loops // WORKERS + (1 if loops % WORKERS else 0)
        outer = (8 if float_out else 7) if float_partials else (10 if float_out else 9)
        return (20 + (per_loop * partials + outer) * per_worker) * WORKERS + 33
    cycles = 32
    per_loop = acc // min(acc, in_dp) + 1
    loops = out_size // acc
    for i in range(math.ceil(math.log2(acc))):
        if out_size & (1 << i):
            loops += 1
    per_worker = loops // WORKERS
    if loops % WORKERS:
        if out_size & (acc - 1):
            cycles += 2 * partials + (13 if float_partials else 11)
        else:
            per_worker += 1
    tail = (7 if float_partials else 9) if float_out else (6 if float_partials else 8)
    return (cycles + (per_loop * partials + tail) * per_worker) * WORKERS


def engine_amp(target, field, row_width, kernel_h, kernel_w, ig, og, cg, ab, pb, one_by_one=None):
    """The engine's AMP vertex cycles of one tile: a field of ``field`` outputs in rows of
    ``row_width``, a ``kernel_h`` x ``kernel_w`` kernel, ``ig`` / ``og`` / ``cg`` input, output and
    conv groups, ``ab`` / ``pb`` bytes per activation and partial; ``one_by_one`` (the 1 x 1
    vertex) by default where the kernel has one position."""
    if one_by_one is None:
        one_by_one = kernel_h * kernel_w == 1
    return int(
        vc.amp_partials_cycles(
            target,
            field=np.array([field]),
            row_width=np.array([row_width]),
            kernel_positions=np.array([kernel_h * kernel_w]),
            kernel_width=np.array([kernel_w]),
            in_groups=np.array([ig]),
            out_groups=np.array([og]),
            conv_groups=np.array([cg]),
            acts_bytes=ab,
            partials_bytes=pb,
            one_by_one=np.array([one_by_one]),
        )[0]
    )
