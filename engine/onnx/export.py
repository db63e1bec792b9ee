"""Zoo model -> ONNX (``analyse export-onnx``): the same topology as engine/models, as exporters
write it (PyTorch-style node names ``/layer1.0.conv1/Conv``, MatMul + Add for linear layers,
Einsum attention, LayerNormalization and Gelu from opset 20).

Weights are zero-filled initializers in an external-data file next to the model (created sparse:
zeros cost no disk blocks), so even BERT-Large's 1.3 GB of FP32 weights write in milliseconds.
Importing the file back gives the zoo model's parameters, FLOPs, memory and cycles
(tests/test_onnx_roundtrip.py).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import onnx
from onnx import TensorProto
from onnx import helper as h

from engine.models.bert import MASK_RATE, MAX_POSITIONS, SIZES
from engine.models.resnet import BLOCKS

OPSET = 20  # Gelu and LayerNormalization as single operators
PRODUCER = "ipu-graph-analyser"


def external_weight(name: str, dims, location: str, offset: int) -> TensorProto:
    """An FP32 initializer of shape ``dims`` kept as external data: ``4 x prod(dims)`` bytes of
    file ``location`` from ``offset``."""
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(int(d) for d in dims)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (
        ("location", location),
        ("offset", str(offset)),
        ("length", str(4 * math.prod(dims))),
    ):
        e = t.external_data.add()
        e.key, e.value = key, value
    return t


class GraphWriter:
    """Nodes and zero-filled external initializers of a graph being written (also used by
    benchmarks/bench_onnx_import.py to generate its BERT-Large-sized graph)."""

    def __init__(self, data_file: str) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.offset = 0
        self.data_file = data_file
        self.count = 0

    def tensor(self) -> str:
        self.count += 1
        return f"t{self.count}"

    def weight(self, name: str, dims) -> str:
        t = external_weight(name, dims, self.data_file, self.offset)
        length = 4 * math.prod(dims)
        self.offset += -(-length // 4096) * 4096  # page-aligned, as onnx's own writer does
        self.inits.append(t)
        return name

    def const(self, values, dtype=TensorProto.INT64) -> str:
        out = self.tensor()
        self.nodes.append(
            h.make_node(
                "Constant",
                [],
                [out],
                value=h.make_tensor(out + "_value", dtype, [len(values)], list(values)),
            )
        )
        return out

    def node(self, op: str, inputs, name: str, **attrs) -> str:
        out = self.tensor()
        self.nodes.append(h.make_node(op, list(inputs), [out], name=name, **attrs))
        return out

    def linear(self, x: str, layer: str, k: int, n: int, weight: str | None = None) -> str:
        w = weight or self.weight(f"{layer}.weight", (k, n))
        y = self.node("MatMul", [x, w], f"/{layer}/MatMul")
        return self.node("Add", [y, self.weight(f"{layer}.bias", (n,))], f"/{layer}/Add")


def _mlp(b: GraphWriter, config) -> tuple[list, list]:
    sizes = (784, 784, 784, 128)
    dims = [*sizes, config.classes]
    x = "input"
    idx = 0
    for i in range(len(dims) - 1):
        x = b.linear(x, f"layers.{idx}", dims[i], dims[i + 1])
        idx += 1
        if i < len(dims) - 2:
            x = b.node("Relu", [x], f"/layers.{idx}/Relu")
            idx += 1
    inputs = [h.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 784])]
    return inputs, [(x, "logits", ["batch", config.classes])]


def _resnet(b: GraphWriter, config) -> tuple[list, list]:
    depth = int(config.model[6:])
    ch, size = config.image_channels, config.image_size

    def conv(x, name, cin, cout, k, stride, pad):
        w = b.weight(f"{name}.weight", (cout, cin, k, k))
        return b.node(
            "Conv",
            [x, w],
            f"/{name}/Conv",
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[pad] * 4,
        )

    def bn(x, name, c):
        ins = [x] + [b.weight(f"{name}.{p}", (c,)) for p in ("weight", "bias")]
        ins += [b.weight(f"{name}.running_{p}", (c,)) for p in ("mean", "var")]
        return b.node("BatchNormalization", ins, f"/{name}/BatchNormalization")

    x = conv("input", "conv1", ch, 64, 7, 2, 3)
    x = bn(x, "bn1", 64)
    x = b.node("Relu", [x], "/relu/Relu")
    x = b.node(
        "MaxPool", [x], "/maxpool/MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4
    )
    cin = 64
    for li, (nblocks, planes) in enumerate(zip(BLOCKS[depth], (64, 128, 256, 512)), start=1):
        for bi in range(nblocks):
            stride = 2 if (bi == 0 and li > 1) else 1
            p = f"layer{li}.{bi}"
            block_in = x
            y = bn(conv(x, f"{p}.conv1", cin, planes, 1, 1, 0), f"{p}.bn1", planes)
            y = b.node("Relu", [y], f"/{p}.relu/Relu")
            y = bn(conv(y, f"{p}.conv2", planes, planes, 3, stride, 1), f"{p}.bn2", planes)
            y = b.node("Relu", [y], f"/{p}.relu/Relu_1")
            y = bn(conv(y, f"{p}.conv3", planes, planes * 4, 1, 1, 0), f"{p}.bn3", planes * 4)
            if bi == 0:
                s = conv(block_in, f"{p}.downsample.0", cin, planes * 4, 1, stride, 0)
                s = bn(s, f"{p}.downsample.1", planes * 4)
            else:
                s = block_in
            y = b.node("Add", [y, s], f"/{p}/Add")
            x = b.node("Relu", [y], f"/{p}.relu/Relu_2")
            cin = planes * 4
    x = b.node("GlobalAveragePool", [x], "/avgpool/GlobalAveragePool")
    x = b.node("Flatten", [x], "/Flatten", axis=1)
    x = b.node(
        "Gemm",
        [x, b.weight("fc.weight", (cin, config.classes)), b.weight("fc.bias", (config.classes,))],
        "/fc/Gemm",
    )
    inputs = [h.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", ch, size, size])]
    return inputs, [(x, "logits", ["batch", config.classes])]


def _bert(b: GraphWriter, config) -> tuple[list, list]:
    cfg = SIZES[config.model[5:]]
    hid, heads, inter = cfg["hidden"], cfg["heads"], cfg["intermediate"]
    dh = hid // heads
    s, vocab = config.seq_length, config.vocab_size
    masked = max(1, math.ceil(MASK_RATE * s))

    def layernorm(x, name):
        return b.node(
            "LayerNormalization",
            [x, b.weight(f"{name}.weight", (hid,)), b.weight(f"{name}.bias", (hid,))],
            f"/{name}/LayerNormalization",
            axis=-1,
            epsilon=1e-12,
        )

    word = b.weight("embeddings.word_embeddings.weight", (vocab, hid))
    w = b.node("Gather", [word, "input_ids"], "/embeddings.word_embeddings/Gather")
    pos_ids = b.const(list(range(s)))
    pos_ids = b.node("Unsqueeze", [pos_ids, b.const([0])], "/embeddings/Unsqueeze")
    pos_table = b.weight("embeddings.position_embeddings.weight", (max(MAX_POSITIONS, s), hid))
    p = b.node("Gather", [pos_table, pos_ids], "/embeddings.position_embeddings/Gather")
    tt = b.weight("embeddings.token_type_embeddings.weight", (2, hid))
    t = b.node("Gather", [tt, "token_type_ids"], "/embeddings.token_type_embeddings/Gather")
    x = b.node("Add", [w, p], "/embeddings/Add")
    x = b.node("Add", [x, t], "/embeddings/Add_1")
    x = layernorm(x, "embeddings.LayerNorm")
    heads_shape = b.const([0, s, heads, dh])
    hid_shape = b.const([0, s, hid])
    for i in range(cfg["layers"]):
        pre = f"encoder.layer.{i}"
        att = f"{pre}.attention.self"
        q, k, v = (b.linear(x, f"{att}.{nm}", hid, hid) for nm in ("query", "key", "value"))
        q, k, v = (b.node("Reshape", [t_, heads_shape], f"/{att}/Reshape") for t_ in (q, k, v))
        sc = b.node("Einsum", [q, k], f"/{att}/Einsum", equation="bqhd,bkhd->bhqk")
        pr = b.node("Softmax", [sc], f"/{att}/Softmax", axis=-1)
        ctx = b.node("Einsum", [pr, v], f"/{att}/Einsum_1", equation="bhqk,bkhd->bqhd")
        ctx = b.node("Reshape", [ctx, hid_shape], f"/{att}/Reshape_3")
        o = b.linear(ctx, f"{pre}.attention.output.dense", hid, hid)
        o = b.node("Add", [o, x], f"/{pre}.attention.output/Add")
        a = layernorm(o, f"{pre}.attention.output.LayerNorm")
        y = b.linear(a, f"{pre}.intermediate.dense", hid, inter)
        y = b.node("Gelu", [y], f"/{pre}.intermediate.gelu/Gelu")
        o = b.linear(y, f"{pre}.output.dense", inter, hid)
        o = b.node("Add", [o, a], f"/{pre}.output/Add")
        x = layernorm(o, f"{pre}.output.LayerNorm")
    enc = x
    first = b.node("Gather", [enc, b.const([0])], "/pooler/Gather", axis=1)
    first = b.node("Squeeze", [first, b.const([1])], "/pooler/Squeeze")
    pool = b.linear(first, "pooler.dense", hid, hid)
    pool = b.node("Tanh", [pool], "/pooler.activation/Tanh")
    # Graphcore's BERT packs the masked tokens first, so the MLM head takes a static slice
    mt = b.node(
        "Slice", [enc, b.const([0]), b.const([masked]), b.const([1])], "/cls.predictions/Slice"
    )
    tr = b.linear(mt, "cls.predictions.transform.dense", hid, hid)
    tr = b.node("Gelu", [tr], "/cls.predictions.transform.gelu/Gelu")
    tr = layernorm(tr, "cls.predictions.transform.LayerNorm")
    word_t = b.node("Transpose", [word], "/cls.predictions.decoder/Transpose", perm=[1, 0])
    mlm = b.linear(tr, "cls.predictions.decoder", hid, vocab, weight=word_t)
    nsp = b.linear(pool, "cls.seq_relationship", hid, config.classes)
    inputs = [
        h.make_tensor_value_info(n_, TensorProto.INT64, ["batch", s])
        for n_ in ("input_ids", "token_type_ids", "attention_mask")
    ]
    outputs = [
        (mlm, "mlm_logits", ["batch", masked, vocab]),
        (nsp, "nsp_logits", ["batch", config.classes]),
    ]
    return inputs, outputs


def save(writer: GraphWriter, out: Path, name: str, inputs, outputs) -> tuple[Path, Path]:
    """Write the writer's graph to ``out`` and its zero weights to ``out`` + ``.data``."""
    data = out.with_name(writer.data_file)
    graph = h.make_graph(writer.nodes, name, inputs, outputs, writer.inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], producer_name=PRODUCER)
    model.doc_string = (
        f"{name} written by the IPU Graph Analyser (zero-filled weights in {data.name})."
    )
    _atomic(data, lambda f: f.truncate(writer.offset))
    _atomic(out, lambda f: f.write(model.SerializeToString()), check=True)
    return out, data


def export_zoo(config, out: str | Path) -> tuple[Path, Path]:
    """Write ``config.model`` (a zoo model with the config's sizes) to ``out`` as ONNX, weights in
    ``out`` + ``.data``; both files are written to temporaries and renamed (atomic)."""
    out = Path(out)
    data = out.with_name(out.name + ".data")
    b = GraphWriter(data.name)
    if config.model == "mlp":
        inputs, outputs = _mlp(b, config)
    elif config.model.startswith("resnet"):
        inputs, outputs = _resnet(b, config)
    else:
        inputs, outputs = _bert(b, config)
    outs = []
    for tensor, name, dims in outputs:
        b.nodes.append(h.make_node("Identity", [tensor], [name], name=f"/{name}/Identity"))
        outs.append(h.make_tensor_value_info(name, TensorProto.FLOAT, dims))
    return save(b, out, config.model, inputs, outs)


def written_by_analyse(path: Path) -> bool:
    """``path`` is an ONNX file this exporter wrote (so export-onnx may replace it)."""
    try:
        return onnx.load(str(path), load_external_data=False).producer_name == PRODUCER
    except Exception:
        return False


def _atomic(path: Path, write, check: bool = False) -> None:
    """Write ``path`` through a temporary file beside it, renamed into place; the file's mode
    follows the umask, as every other output's (``tempfile.mkstemp`` would make it 0600)."""
    from profiles.atomic import temp_path

    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            write(f)
        if check:  # beside its data file, before it replaces anything
            onnx.checker.check_model(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = ["OPSET", "PRODUCER", "GraphWriter", "export_zoo", "save", "written_by_analyse"]
