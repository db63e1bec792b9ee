"""Code that grows with the replicas: the code categories of BERT-Large (the pre-training run
config, 4 pipelined IPUs per replica) compiled at 1 to 64 replicas, training and inference.
Prints figures; asserts nothing.

    python benchmarks/bench_replica_code.py [--replicas 1,4,16,64]

Per category: the bytes over the replica's IPUs (MiB) and the factor against one replica; the
fullest tile and the tiles out of memory. Graphcore's Memory and Performance Optimisation Guide
(section 4.3.1, "Graph replication") measures the global exchange code growing linearly with
the replicas, 4x from 1 to 4.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CATEGORIES = (
    "globalExchangeCode",
    "internalExchangeCode",
    "controlCode",
    "copyDescriptor",
    "hostExchangeCode",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", default="1,4,16,64")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import engine
    from engine.config import RunConfig
    from profiles.schema import MEMORY_CATEGORIES

    base = RunConfig.from_toml(ROOT / "assets/runs/bert-large-pretraining.toml")
    modes = {
        "training": {},
        "inference": dict(
            mode="inference", gradient_accumulation=1, device_iterations=4, recomputation="none"
        ),
    }
    for mode, update in modes.items():
        print(f"BERT-Large, 4 pipelined IPUs per replica, {mode}:")
        first = None
        for r in (int(x) for x in args.replicas.split(",")):
            c = engine.compile(base.model_copy(update={**update, "replication_factor": r}))
            cat = np.asarray(c.memory.by_category)
            tot = cat.reshape(-1, cat.shape[-1]).sum(0)
            row = {k: int(tot[MEMORY_CATEGORIES.index(k)]) for k in CATEGORIES}
            first = first or row
            cells = " ".join(
                f"{k} {v / 2**20:.2f} MiB (x{v / first[k]:.2f})" if first[k] else f"{k} 0"
                for k, v in row.items()
            )
            peak = int(np.max(c.memory.peak_tile_bytes))
            oom = int(np.sum(c.memory.oom_tiles))
            print(f"  {r:3d} replicas: {cells}; fullest tile {peak:,} B, {oom:,} tiles OOM")
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
