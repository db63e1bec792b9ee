"""Benchmark: importing a BERT-Large-sized ONNX graph.

The graph is generated here, as PyTorch exports Hugging Face BERT-Large (opset 20, 24 layers,
hidden 1024, 16 heads, sequence 128): attention as MatMul + Transpose + Div + Add(mask) +
Softmax, merged-heads Reshape targets computed from Shape / Gather / Unsqueeze / Concat, GELU in
its Erf form, about 1,000 nodes and 335M parameters. Weights are zero-filled external data (a
sparse file), as exporters write models over 2 GB; the importer never reads them.

Prints, as medians over fresh processes: the import time (read, check, shape inference, walk)
and the import's peak resident memory beyond the interpreter with the engine loaded, then the
same for a whole simulation of the imported model (inference, 16.16) for comparison. Targets:
import under 2 s and under 1 GB beyond the simulation itself.

Usage: python benchmarks/bench_onnx_import.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
import engine, engine.onnx, engine.compiler  # loaded before the baseline
from engine.config import RunConfig
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
graph, info = engine.onnx.import_onnx(sys.argv[1], input_shapes={})
t1 = time.perf_counter()
imp_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {"import_s": t1 - t0, "import_mb": imp_rss - base, "nodes": info.nodes,
       "params": graph.num_params, "ops": len(graph)}
if sys.argv[2] == "sim":
    cfg = RunConfig.from_dict({"model": sys.argv[1], "mode": "inference", "precision": "16.16"})
    t2 = time.perf_counter()
    r = engine.simulate(cfg)
    out["simulate_s"] = time.perf_counter() - t2
    out["total_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
print(json.dumps(out))
"""


def generate(path: Path, layers=24, hid=1024, heads=16, inter=4096, seq=128, vocab=30522):
    """Write the BERT-Large-sized graph to ``path`` (+ ``.data``)."""
    from onnx import TensorProto
    from onnx import helper as h

    from engine.onnx.export import GraphWriter, save

    b = GraphWriter(path.name + ".data")
    dh = hid // heads
    consts: dict = {}
    new_const = b.const

    def const(values, dtype=TensorProto.INT64):  # one Constant node per value, as exporters share
        key = (tuple(values), dtype)
        if key not in consts:
            consts[key] = new_const(values, dtype)
        return consts[key]

    b.const = const

    def ln(x, layer):
        ins = [x, b.weight(f"{layer}.weight", (hid,)), b.weight(f"{layer}.bias", (hid,))]
        return b.node("LayerNormalization", ins, f"/{layer}/LayerNormalization", axis=-1)

    def dims_of(x, scope, keep, tail):
        """Concat(Shape(x)[:keep], tail): a Reshape target computed as PyTorch exports
        ``x.size()[:-1] + (heads, head_dim)`` (Shape, Slice, Concat and their constants)."""
        s = b.node("Shape", [x], f"/{scope}/Shape")
        s = b.node("Slice", [s, b.const([0]), b.const([keep])], f"/{scope}/Slice")
        return b.node("Concat", [s, b.const(tail)], f"/{scope}/Concat", axis=0)

    we = b.weight("bert.embeddings.word_embeddings.weight", (vocab, hid))
    x = b.node("Gather", [we, "input_ids"], "/bert/embeddings/word_embeddings/Gather")
    pos = b.node("Unsqueeze", [b.const(list(range(seq))), b.const([0])], "/bert/embeddings/Unsq")
    pe = b.weight("bert.embeddings.position_embeddings.weight", (512, hid))
    p = b.node("Gather", [pe, pos], "/bert/embeddings/position_embeddings/Gather")
    te = b.weight("bert.embeddings.token_type_embeddings.weight", (2, hid))
    t = b.node("Gather", [te, "token_type_ids"], "/bert/embeddings/token_type_embeddings/Gather")
    x = b.node("Add", [x, t], "/bert/embeddings/Add")
    x = b.node("Add", [x, p], "/bert/embeddings/Add_1")
    x = ln(x, "bert/embeddings/LayerNorm")
    # the additive attention mask: (1 - mask) * -10000, broadcast over heads and queries
    m = b.node("Unsqueeze", ["attention_mask", b.const([1, 2])], "/bert/Unsqueeze")
    m = b.node("Cast", [m], "/bert/Cast", to=TensorProto.FLOAT)
    one = b.const([1.0], TensorProto.FLOAT)
    m = b.node("Sub", [one, m], "/bert/Sub")
    m = b.node("Mul", [m, b.const([-10000.0], TensorProto.FLOAT)], "/bert/Mul")
    scale = b.const([float(dh) ** 0.5], TensorProto.FLOAT)
    for i in range(layers):
        a = f"bert/encoder/layer.{i}/attention/self"
        split = dims_of(x, f"{a}/heads", 2, [heads, dh])
        q, k, v = (b.linear(x, f"{a}/{n}", hid, hid) for n in ("query", "key", "value"))
        q, k, v = (
            b.node("Reshape", [y, split], f"/{a}/Reshape_{j}") for j, y in enumerate((q, k, v))
        )
        q = b.node("Transpose", [q], f"/{a}/Transpose", perm=[0, 2, 1, 3])
        k = b.node("Transpose", [k], f"/{a}/Transpose_1", perm=[0, 2, 3, 1])
        v = b.node("Transpose", [v], f"/{a}/Transpose_2", perm=[0, 2, 1, 3])
        s = b.node("MatMul", [q, k], f"/{a}/MatMul")
        s = b.node("Div", [s, scale], f"/{a}/Div")
        s = b.node("Add", [s, m], f"/{a}/Add")
        s = b.node("Softmax", [s], f"/{a}/Softmax", axis=-1)
        c = b.node("MatMul", [s, v], f"/{a}/MatMul_1")
        c = b.node("Transpose", [c], f"/{a}/Transpose_3", perm=[0, 2, 1, 3])
        merged = dims_of(c, f"{a}/merge", 2, [hid])
        c = b.node("Reshape", [c, merged], f"/{a}/Reshape_3")
        o = b.linear(c, f"bert/encoder/layer.{i}/attention/output/dense", hid, hid)
        o = b.node("Add", [o, x], f"/bert/encoder/layer.{i}/attention/output/Add")
        o = ln(o, f"bert/encoder/layer.{i}/attention/output/LayerNorm")
        f = b.linear(o, f"bert/encoder/layer.{i}/intermediate/dense", hid, inter)
        g = f"bert/encoder/layer.{i}/intermediate/intermediate_act_fn"
        e = b.node("Div", [f, b.const([2.0**0.5], TensorProto.FLOAT)], f"/{g}/Div")
        e = b.node("Erf", [e], f"/{g}/Erf")
        e = b.node("Add", [e, one], f"/{g}/Add")
        e = b.node("Mul", [f, e], f"/{g}/Mul")
        e = b.node("Mul", [e, b.const([0.5], TensorProto.FLOAT)], f"/{g}/Mul_1")
        y = b.linear(e, f"bert/encoder/layer.{i}/output/dense", inter, hid)
        y = b.node("Add", [y, o], f"/bert/encoder/layer.{i}/output/Add")
        x = ln(y, f"bert/encoder/layer.{i}/output/LayerNorm")
    first = b.node("Gather", [x, b.const([0])], "/bert/pooler/Gather", axis=1)
    pool = b.linear(first, "bert/pooler/dense", hid, hid)
    pool = b.node("Tanh", [pool], "/bert/pooler/activation/Tanh")
    logits = b.linear(pool, "classifier", hid, 2)
    b.nodes.append(h.make_node("Identity", [logits], ["logits"], name="/logits/Identity"))
    inputs = [
        h.make_tensor_value_info(n, TensorProto.INT64, ["batch", seq])
        for n in ("input_ids", "token_type_ids", "attention_mask")
    ]
    outputs = [h.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1, 2])]
    return save(b, path, "bert-large-sized", inputs, outputs)


def run(path: Path, mode: str, runs: int) -> dict:
    results = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), mode],
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "bert-large-sized.onnx"
        generate(path)
        print(f"generated {path.name}: {path.stat().st_size / 1e6:.2f} MB graph + sparse weights")
        imp = run(path, "import", args.runs)
        print(
            f"import: {imp['nodes']:,.0f} nodes -> {imp['ops']:,.0f} operations, "
            f"{imp['params'] / 1e6:.1f}M parameters; median {imp['import_s']:.2f} s, "
            f"peak memory +{imp['import_mb']:.0f} MB (targets: < 2 s, < 1 GB)"
        )
        sim = run(path, "sim", max(1, args.runs // 2))
        print(
            f"import + simulate (inference, 16.16): import {sim['import_s']:.2f} s, simulate "
            f"{sim['simulate_s']:.2f} s, peak memory +{sim['total_mb']:.0f} MB"
        )


if __name__ == "__main__":
    main()
