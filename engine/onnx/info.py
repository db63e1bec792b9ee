"""``analyse model-info``: what an ONNX model is, as the engine sees it.

Inputs and outputs, parameters, FLOPs per sample (forward: 2 x multiply-accumulates of the
matmuls and convolutions plus the element-wise passes, the same count as the profiles' FLOPs),
layers, operator coverage, and split points for N IPUs balanced by memory and cycles: the model
is compiled once (single IPU, the given options) and each forward op carries its own cycles and
those of its backward, recompute and update ops, plus its weights' bytes; the cumulative sum of
both shares (cycles / total + memory / total) is cut at k/N, at the start of the coarsest layer.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from engine.graph import Graph
from engine.onnx.importer import ImportInfo, import_onnx


@dataclass
class Split:
    ipus: int
    points: list[str]
    cycles_share: list[float]
    memory_share: list[float]


def forward_flops(graph: Graph) -> int:
    g = graph.cols
    amp = g["family"] == "amp"
    elems = np.maximum(g["out_elems"], g["in_elems"])
    return int((2 * g["macs"][amp]).sum() + np.round(elems[~amp] * g["passes"][~amp]).sum())


def split_candidates(graph: Graph) -> dict[int, str]:
    """Op index -> the coarsest layer name that starts there (not op 0)."""
    best: dict[int, str] = {}
    seen: set[str] = set()
    for i, layer in enumerate(graph.cols["layer"]):
        parts = str(layer).split(".")
        for j in range(1, len(parts) + 1):
            name = ".".join(parts[:j])
            if name in seen:
                continue
            seen.add(name)
            if i > 0 and i not in best:
                best[i] = name
    return best


def suggest_splits(graph: Graph, cost: np.ndarray, ipus: int) -> list[int]:
    """Op indices starting stages 1..ipus-1 (cuts of the cumulative cost at k/ipus)."""
    names = split_candidates(graph)
    cand = np.array(sorted(names), dtype=np.int64)
    depth = np.zeros(len(graph), dtype=np.float64)
    for i, nm in names.items():
        depth[i] = nm.count(".")
    if ipus < 2 or len(cand) < ipus - 1:
        return []
    cum = np.concatenate([[0.0], np.cumsum(cost)])  # cum[i] = cost before op i
    total = cum[-1] or 1.0
    chosen: list[int] = []
    lo = 0
    for k in range(1, ipus):
        target = total * k / ipus
        pool = cand[cand > lo]
        need_after = ipus - 1 - k  # candidates still needed after this one
        if len(pool) <= need_after:
            return []
        pool = pool[: len(pool) - need_after]
        # near the target, prefer coarse layers (block starts) over a layer's inner ops
        score = np.abs(cum[pool] - target) / total + 0.01 * depth[pool]
        pick = int(pool[np.argmin(score)])
        chosen.append(pick)
        lo = pick
    return chosen


def model_info(path, *, input_shapes=None, ipus=(2, 4), unknown_ops="error", config=None):
    """Facts and split suggestions of an ONNX model (OnnxError on bad input)."""
    from engine.compiler import compile_program
    from engine.config import RunConfig

    graph, info = import_onnx(path, input_shapes=input_shapes, unknown_ops=unknown_ops)
    data = dict(config or {})
    data.update(model=str(path), input_shapes=dict(input_shapes or {}), unknown_ops=unknown_ops)
    cfg = RunConfig.from_dict(data)
    compiled = compile_program(cfg)
    ops = compiled.ops
    n = len(graph)
    fwd = ops.fwd.astype(np.int64)
    ok = fwd >= 0
    cycles = np.bincount(fwd[ok], weights=ops.cycles[ok], minlength=n)[:n]
    wbytes = graph.cols["weight_elems"] * (2 if cfg.weight_dtype == "float16" else 4)
    act = graph.cols["out_elems"] * cfg.micro_batch_size
    mem = wbytes + act
    share = cycles / max(cycles.sum(), 1) + mem / max(mem.sum(), 1)
    cand = split_candidates(graph)
    splits = []
    for k in ipus:
        idx = suggest_splits(graph, share, int(k))
        if not idx:
            continue
        bounds = [0, *idx, n]
        splits.append(
            Split(
                ipus=int(k),
                points=[cand[i] for i in idx],
                cycles_share=[
                    float(cycles[a:b].sum() / max(cycles.sum(), 1))
                    for a, b in itertools.pairwise(bounds)
                ],
                memory_share=[
                    float(mem[a:b].sum() / max(mem.sum(), 1)) for a, b in itertools.pairwise(bounds)
                ],
            )
        )
    top = list(dict.fromkeys(str(x).split(".")[0] for x in graph.cols["layer"]))
    return {
        "graph": graph,
        "info": info,
        "params": graph.num_params,
        "flops_per_sample": forward_flops(graph),
        "operations": n,
        "layers": len(graph.layer_names),
        "top_layers": top,
        "splits": splits,
        "config": cfg,
    }


__all__ = [
    "ImportInfo",
    "Split",
    "forward_flops",
    "model_info",
    "split_candidates",
    "suggest_splits",
]
