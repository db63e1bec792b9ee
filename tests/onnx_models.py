"""Small ONNX models built with onnx.helper for the importer tests (weights are zeros)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def w(name, *shape):
    return nh.from_array(np.zeros(shape, np.float32), name)


def conv3x3(inputs, output, name, **attrs):
    """A 3 x 3 Conv padded to keep its map's size (``strides``, ``group`` in ``attrs``)."""
    return h.make_node(
        "Conv", inputs, [output], name=name, kernel_shape=[3, 3], pads=[1, 1, 1, 1], **attrs
    )


def transpose(x, y, name, perm):
    """A Transpose node of ``x`` into ``y``."""
    return h.make_node("Transpose", [x], [y], name=name, perm=perm)


def einsum_node(inputs, output, name, equation):
    """An Einsum node."""
    return h.make_node("Einsum", inputs, [output], name=name, equation=equation)


def model(nodes, inputs, outputs, inits, opset=17, name="m"):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def mlp(batch="batch"):
    nodes = [
        h.make_node("MatMul", ["x", "w0"], ["a0"], name="/layers.0/MatMul"),
        h.make_node("Add", ["a0", "b0"], ["a1"], name="/layers.0/Add"),
        h.make_node("Relu", ["a1"], ["a2"], name="/layers.1/Relu"),
        h.make_node("Gemm", ["a2", "w1", "b1"], ["y"], name="/layers.2/Gemm"),
    ]
    return model(
        nodes,
        [h.make_tensor_value_info("x", T.FLOAT, [batch, 64])],
        [h.make_tensor_value_info("y", T.FLOAT, [batch, 10])],
        [w("w0", 64, 32), w("b0", 32), w("w1", 32, 10), w("b1", 10)],
    )


def cnn():
    """Strided stem, grouped 3x3, depthwise 3x3 with stride 2, pooling and a classifier."""
    nodes = [
        conv3x3(["x", "c1"], "a", "/stem/conv/Conv", strides=[2, 2]),
        h.make_node(
            "BatchNormalization",
            ["a", "s1", "b1", "m1", "v1"],
            ["b"],
            name="/stem/bn/BatchNormalization",
        ),
        h.make_node("Relu", ["b"], ["c"], name="/stem/relu/Relu"),
        conv3x3(["c", "c2"], "d", "/block/grouped/Conv", group=4),
        conv3x3(["d", "c3", "cb3"], "e", "/block/dw/Conv", strides=[2, 2], group=32),
        h.make_node("HardSwish", ["e"], ["f"], name="/block/act/HardSwish"),
        h.make_node(
            "MaxPool", ["f"], ["g"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]
        ),
        h.make_node("GlobalAveragePool", ["g"], ["i"], name="/gap/GlobalAveragePool"),
        h.make_node("Flatten", ["i"], ["j"], name="/flatten/Flatten"),
        h.make_node("Gemm", ["j", "fw", "fb"], ["y"], name="/fc/Gemm", transB=1),
    ]
    inits = [
        w("c1", 32, 3, 3, 3),
        w("s1", 32),
        w("b1", 32),
        w("m1", 32),
        w("v1", 32),
        w("c2", 32, 8, 3, 3),
        w("c3", 32, 1, 3, 3),
        w("cb3", 32),
        w("fw", 10, 32),
        w("fb", 10),
    ]
    return model(
        nodes,
        [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 32, 32])],
        [h.make_tensor_value_info("y", T.FLOAT, ["N", 10])],
        inits,
    )


def transformer(einsum: bool, seq="seq", hid=64, heads=4, opset=17):
    """One encoder block: attention as MatMul + Softmax (with the Reshape / Transpose an exporter
    writes, and a Shape-computed reshape target) or as Einsum; decomposed nothing else."""
    dh = hid // heads
    n = []
    inits = [w(f"{p}.w", hid, hid) for p in "qkvo"] + [w(f"{p}.b", hid) for p in "qkvo"]
    inits += [w("ln.w", hid), w("ln.b", hid), w("f1.w", hid, 4 * hid), w("f1.b", 4 * hid)]
    inits += [w("f2.w", 4 * hid, hid), w("f2.b", hid)]
    inits += [nh.from_array(np.array([0, 0, heads, dh], np.int64), "split_heads")]
    inits += [nh.from_array(np.array(dh**-0.5, np.float32), "scale")]
    for p in "qkv":
        n.append(h.make_node("MatMul", ["x", f"{p}.w"], [f"{p}0"], name=f"/attn/{p}/MatMul"))
        n.append(h.make_node("Add", [f"{p}0", f"{p}.b"], [f"{p}1"], name=f"/attn/{p}/Add"))
        n.append(
            h.make_node("Reshape", [f"{p}1", "split_heads"], [f"{p}2"], name=f"/attn/{p}/Reshape")
        )
    if einsum:
        n.append(einsum_node(["q2", "k2"], "s0", "/attn/Einsum", "bqhd,bkhd->bhqk"))
    else:
        n.append(transpose("q2", "qt", "/attn/Transpose", [0, 2, 1, 3]))
        n.append(transpose("k2", "kt", "/attn/Transpose_1", [0, 2, 3, 1]))
        n.append(h.make_node("MatMul", ["qt", "kt"], ["s0"], name="/attn/MatMul"))
    n.append(h.make_node("Mul", ["s0", "scale"], ["s1"], name="/attn/Mul"))
    n.append(h.make_node("Softmax", ["s1"], ["p"], name="/attn/Softmax", axis=-1))
    if einsum:
        n.append(einsum_node(["p", "v2"], "c0", "/attn/Einsum_1", "bhqk,bkhd->bqhd"))
    else:
        n.append(transpose("v2", "vt", "/attn/Transpose_2", [0, 2, 1, 3]))
        n.append(h.make_node("MatMul", ["p", "vt"], ["c1"], name="/attn/MatMul_1"))
        n.append(transpose("c1", "c0", "/attn/Transpose_3", [0, 2, 1, 3]))
    # the merged-heads shape computed from the input's Shape (exporters do this)
    n.append(h.make_node("Shape", ["x"], ["xs"], name="/attn/Shape"))
    n.append(h.make_node("Reshape", ["c0", "xs"], ["c"], name="/attn/Reshape_3"))
    n.append(h.make_node("MatMul", ["c", "o.w"], ["o0"], name="/attn/o/MatMul"))
    n.append(h.make_node("Add", ["o0", "o.b"], ["o1"], name="/attn/o/Add"))
    n.append(h.make_node("Add", ["o1", "x"], ["r"], name="/attn/Add"))
    n.append(
        h.make_node("LayerNormalization", ["r", "ln.w", "ln.b"], ["l"], name="/ln/LN", axis=-1)
    )
    n.append(h.make_node("MatMul", ["l", "f1.w"], ["f0"], name="/ffn/fc1/MatMul"))
    n.append(h.make_node("Add", ["f0", "f1.b"], ["f1"], name="/ffn/fc1/Add"))
    n.append(h.make_node("Erf", ["f1"], ["g"], name="/ffn/act/Erf"))
    n.append(h.make_node("Mul", ["f1", "g"], ["f2"], name="/ffn/act/Mul"))
    n.append(h.make_node("MatMul", ["f2", "f2.w"], ["f3"], name="/ffn/fc2/MatMul"))
    n.append(h.make_node("Add", ["f3", "f2.b"], ["y"], name="/ffn/fc2/Add"))
    return model(
        n,
        [h.make_tensor_value_info("x", T.FLOAT, ["batch", seq, hid])],
        [h.make_tensor_value_info("y", T.FLOAT, ["batch", seq, hid])],
        inits,
        opset=opset,
    )


def save_external(m: onnx.ModelProto, path) -> None:
    onnx.save_model(
        m,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=path.name + ".data",
        size_threshold=0,
    )
