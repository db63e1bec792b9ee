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


# ---- models as torch.onnx.export(dynamo=True, optimize=False) writes them ----------------------
# Weights are zeros; a float weight of more than 4,096 elements lives in a sparse external-data
# file (written with truncate, so a ViT-B/16 of 86 M parameters costs no disk), as the exporter
# writes models over 2 GB.


class Exported:
    """A graph written node by node as the torch.export-based exporter does: nodes named
    ``node_<Op>_<n>`` with the module path in ``pkg.torch.onnx.name_scopes``, constants as
    ``Constant`` nodes, CastLike of each Python scalar to the tensor it meets."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: list = []
        self.inits: list = []
        self.params = 0  # trained weights' elements (what model.parameters() counts)
        self.scope = [""]
        self._n = 0
        self._offset = 0
        self._external: list = []

    # -- tensors --------------------------------------------------------------------------
    def weight(self, name, *shape, trained=True):
        t = nh.from_array(np.zeros(shape, np.float32), name) if np.prod(shape) <= 4096 else None
        if t is None:  # external, never written (a sparse file)
            t = onnx.TensorProto(name=name, data_type=T.FLOAT, dims=list(shape))
            t.data_location = T.EXTERNAL
            length = int(np.prod(shape)) * 4
            for k, v in (("location", "__DATA__"), ("offset", self._offset), ("length", length)):
                e = t.external_data.add()
                e.key, e.value = k, str(v)
            self._offset += length
            self._external.append(t)
        self.inits.append(t)
        if trained:
            self.params += int(np.prod(shape))
        return name

    def buffer(self, name, array):
        self.inits.append(nh.from_array(array, name))
        return name

    def op(self, op_type, inputs, n_out=1, **attrs):
        self._n += 1
        outs = [f"{op_type.lower()}_{self._n}" + (f"_{i}" if i else "") for i in range(n_out)]
        node = h.make_node(op_type, list(inputs), outs, name=f"node_{op_type}_{self._n}", **attrs)
        prop = node.metadata_props.add()
        prop.key = "pkg.torch.onnx.name_scopes"
        prop.value = repr([*self.scope, f"{op_type.lower()}_{self._n}"])
        self.nodes.append(node)
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype=np.int64):
        arr = np.array(value, dtype)
        return self.op("Constant", [], value=nh.from_array(arr, f"c{self._n + 1}"))

    def scalar_like(self, value, like):
        """A Python scalar meeting a tensor: Constant then CastLike (torchlib's pattern)."""
        return self.op("CastLike", [self.const(value, np.float32), like])

    # -- module scopes --------------------------------------------------------------------
    def enter(self, path):
        self.scope.append(path)

    def leave(self):
        self.scope.pop()

    # -- aten ops as torchlib writes them ----------------------------------------------------
    def dim(self, x, i):
        """``x.size(i)`` as a 1-element int64 tensor: Shape(start, end)."""
        return self.op("Shape", [x], start=i, end=i + 1 if i != -1 else None)

    def view(self, x, *dims):
        """``x.view(...)``: ints become Constants, tensors (``dim``) are concatenated."""
        parts = [d if isinstance(d, str) else self.const([d]) for d in dims]
        return self.op("Reshape", [x, self.op("Concat", parts, axis=0)])

    def linear(self, path, x, n_in, n_out, bias=True):
        self.enter(path)
        w = self.weight(f"{path}.weight", n_out, n_in)
        y = self.op("MatMul", [x, self.op("Transpose", [w], perm=[1, 0])])
        if bias:
            y = self.op("Add", [y, self.weight(f"{path}.bias", n_out)])
        self.leave()
        return y

    def layer_norm(self, path, x, c):
        self.enter(path)
        w, b = self.weight(f"{path}.weight", c), self.weight(f"{path}.bias", c)
        y = self.op("LayerNormalization", [x, w, b], axis=-1, epsilon=1e-5)
        self.leave()
        return y

    def gelu(self, x):
        """torchlib's GELU for opset 18: its Erf form, each constant CastLike'd to x."""
        inner = self.op("Div", [x, self.scalar_like(2**0.5, x)])
        erf = self.op("Erf", [inner])
        inner = self.op("Add", [erf, self.scalar_like(1.0, x)])
        inner = self.op("Mul", [self.scalar_like(0.5, x), inner])
        return self.op("Mul", [x, inner])

    def sdpa(self, q, k, v, causal: bool):
        """torchlib's scaled_dot_product_attention (``_attention_scale``, the key transposed
        through Reshape, ``_causal_attention_mask``: Expand(1) -> Trilu -> Where -> CastLike)."""
        last = self.op("Slice", [self.op("Shape", [q]), self.const([-1]), self.const([2**62])])
        emb = self.op("CastLike", [last, q])
        scale = self.op("Div", [self.scalar_like(1.0, q), self.op("Sqrt", [emb])])
        root = self.op("Sqrt", [scale])
        ks = self.op("Shape", [k])
        k_last = self.op("Slice", [ks, self.const([-1]), self.const([2**62])])
        k_second = self.op("Slice", [ks, self.const([-2]), self.const([-1])])
        k_first = self.op("Slice", [ks, self.const([0]), self.const([-2])])
        squeezed = self.op("Concat", [self.const([-1]), k_second, k_last], axis=0)
        kt = self.op("Transpose", [self.op("Reshape", [k, squeezed])], perm=[0, 2, 1])
        kt_shape = self.op("Concat", [k_first, k_last, k_second], axis=0)
        kt = self.op("Reshape", [kt, kt_shape])
        scores = self.op("MatMul", [self.op("Mul", [q, root]), self.op("Mul", [kt, root])])
        if causal:
            size = self.op(
                "Concat",
                [
                    self.op("Slice", [self.op("Shape", [q]), self.const([-2]), self.const([-1])]),
                    k_second,
                ],
                axis=0,
            )
            ones = self.op("Expand", [self.const(1.0, np.float32), size])
            tri = self.op("Trilu", [ones], upper=0)
            zero = self.op("Equal", [tri, self.const(0.0, np.float32)])
            mask = self.op(
                "Where",
                [zero, self.const(-np.inf, np.float32), self.const(0.0, np.float32)],
            )
            scores = self.op("Add", [scores, self.op("CastLike", [mask, q])])
        return self.op("MatMul", [self.op("Softmax", [scores], axis=-1), v])

    def model(self, inputs, outputs, opset=18):
        return model(self.nodes, inputs, outputs, self.inits, opset=opset, name=self.name)

    def save(self, m, path):
        """Save ``m`` with its external weights pointing at a sparse ``<path>.data``."""
        data = path.with_name(path.name + ".data")
        for t in m.graph.initializer:
            for e in t.external_data:
                if e.key == "location":
                    e.value = data.name
        onnx.save(m, str(path))
        with open(data, "wb") as f:
            f.truncate(self._offset)
        return path


def gpt(
    layers=4,
    vocab=512,
    ctx=64,
    embd=64,
    heads=4,
    seq: int | str = 32,
    mask="buffer",
) -> Exported:
    """nanoGPT (Karpathy's model.py) as torch.onnx.export(dynamo=True, optimize=False) writes
    it, with a dynamic batch: ``pos = torch.arange(0, t)`` (Shape -> Squeeze, CastLike'd start
    and step, Range), token and position embeddings, per block ln_1 -> c_attn (Split into q, k,
    v; ``view(B, T, nh, hs).transpose(1, 2)``) -> attention -> c_proj -> residual, ln_2 -> c_fc
    -> GELU (Erf form) -> c_proj -> residual, ln_f and the tied lm_head.

    ``mask="buffer"``: the manual attention with the ``bias`` buffer (``tril(ones(ctx, ctx))``,
    float, registered with register_buffer) sliced to T and applied by
    ``masked_fill(bias[:, :, :T, :T] == 0, -inf)`` (Slice -> Equal -> Where); ``"sdpa"``:
    F.scaled_dot_product_attention(is_causal=True), torchlib's decomposition."""
    e = Exported("gpt")
    hs = embd // heads
    e.enter("transformer")
    wte = e.weight("transformer.wte.weight", vocab, embd)
    wpe = e.weight("transformer.wpe.weight", ctx, embd)
    idx = "idx"
    t = e.dim(idx, 1)
    t_scalar = e.op("Squeeze", [t])
    start = e.op("CastLike", [e.const(0), t_scalar])
    step = e.op("CastLike", [e.const(1), t_scalar])
    arange = e.op("Range", [start, t_scalar, step])
    x = e.op("Add", [e.op("Gather", [wte, idx]), e.op("Gather", [wpe, arange])])
    if mask == "buffer":
        tril = np.tril(np.ones((ctx, ctx), np.float32)).reshape(1, 1, ctx, ctx)
        bias = e.buffer("transformer.h.bias", tril)
    for i in range(layers):
        p = f"transformer.h.{i}"
        e.enter(p)
        a = e.layer_norm(f"{p}.ln_1", x, embd)
        e.enter(f"{p}.attn")
        qkv = e.linear(f"{p}.attn.c_attn", a, embd, 3 * embd)
        q, k, v = e.op("Split", [qkv, e.const([embd] * 3)], n_out=3, axis=2)
        b, tt = e.dim(x, 0), e.dim(x, 1)
        q, k, v = (
            e.op("Transpose", [e.view(z, b, tt, heads, hs)], perm=[0, 2, 1, 3]) for z in (q, k, v)
        )
        if mask == "sdpa":
            y = e.sdpa(q, k, v, causal=True)
        else:
            kt = e.op("Transpose", [k], perm=[0, 1, 3, 2])
            hs_f = e.op("CastLike", [e.dim(k, -1), q])
            scale = e.op("Div", [e.scalar_like(1.0, q), e.op("Sqrt", [hs_f])])
            att = e.op("Mul", [e.op("MatMul", [q, kt]), scale])
            lim = e.op("Concat", [tt, tt], axis=0)
            sl = e.op("Slice", [bias, e.const([0, 0]), lim, e.const([2, 3])])
            cond = e.op("Equal", [sl, e.const(0.0, np.float32)])
            att = e.op("Where", [cond, e.const(-np.inf, np.float32), att])
            y = e.op("MatMul", [e.op("Softmax", [att], axis=-1), v])
        y = e.view(e.op("Transpose", [y], perm=[0, 2, 1, 3]), b, tt, e.const([embd]))
        x = e.op("Add", [x, e.linear(f"{p}.attn.c_proj", y, embd, embd)])
        e.leave()
        m = e.layer_norm(f"{p}.ln_2", x, embd)
        e.enter(f"{p}.mlp")
        m = e.gelu(e.linear(f"{p}.mlp.c_fc", m, embd, 4 * embd))
        x = e.op("Add", [x, e.linear(f"{p}.mlp.c_proj", m, 4 * embd, embd)])
        e.leave()
        e.leave()
    x = e.layer_norm("transformer.ln_f", x, embd)
    e.leave()
    e.enter("lm_head")
    e.op("MatMul", [x, e.op("Transpose", [wte], perm=[1, 0])])  # tied to wte
    e.leave()
    e.nodes[-1].output[0] = "logits"
    e.result = e.model(
        [h.make_tensor_value_info("idx", T.INT64, ["batch", seq])],
        [h.make_tensor_value_info("logits", T.FLOAT, ["batch", seq, vocab])],
    )
    return e


def vit_b16(layers=12, embd=768, heads=12, mlp=3072, image=224, patch=16, classes=1000):
    """torchvision's vit_b_16 as torch.onnx.export(dynamo=True, optimize=False) writes it with a
    dynamic batch: the patch embedding Conv (16 x 16, stride 16) -> reshape to (n, 768, 196) ->
    permute, the class token expanded to the batch and concatenated, the position embedding
    added, 12 encoder blocks (ln_1 -> self-attention (in_proj, heads, F.scaled_dot_product_
    attention's decomposition with its Sqrt scale constants) -> out_proj -> residual, ln_2 ->
    MLP with GELU -> residual), ln, the class token's row and the head."""
    e = Exported("vit_b_16")
    hs = embd // heads
    tokens = (image // patch) ** 2 + 1
    e.enter("conv_proj")
    w = e.weight("conv_proj.weight", embd, 3, patch, patch)
    x = e.op(
        "Conv",
        ["x", w, e.weight("conv_proj.bias", embd)],
        kernel_shape=[patch, patch],
        strides=[patch, patch],
    )
    e.leave()
    n = e.dim("x", 0)
    x = e.view(x, n, e.const([embd]), e.const([-1]))
    x = e.op("Transpose", [x], perm=[0, 2, 1])
    cls = e.weight("class_token", 1, 1, embd)
    shape = e.op("Concat", [n, e.const([-1]), e.const([-1])], axis=0)
    cls = e.op("Expand", [cls, e.op("Abs", [shape])])  # torchlib's expand(-1) form
    x = e.op("Concat", [cls, x], axis=1)
    e.enter("encoder")
    x = e.op("Add", [x, e.weight("encoder.pos_embedding", 1, tokens, embd)])
    for i in range(layers):
        p = f"encoder.layers.encoder_layer_{i}"
        e.enter(p)
        a = e.layer_norm(f"{p}.ln_1", x, embd)
        e.enter(f"{p}.self_attention")
        qkv = e.linear(f"{p}.self_attention.in_proj", a, embd, 3 * embd)
        q, k, v = e.op("Split", [qkv, e.const([embd] * 3)], n_out=3, axis=2)
        b, t = e.dim(a, 0), e.dim(a, 1)
        q, k, v = (
            e.op("Transpose", [e.view(z, b, t, heads, hs)], perm=[0, 2, 1, 3]) for z in (q, k, v)
        )
        y = e.sdpa(q, k, v, causal=False)
        y = e.view(e.op("Transpose", [y], perm=[0, 2, 1, 3]), b, t, e.const([embd]))
        y = e.linear(f"{p}.self_attention.out_proj", y, embd, embd)
        e.leave()
        x = e.op("Add", [x, y])
        m = e.layer_norm(f"{p}.ln_2", x, embd)
        e.enter(f"{p}.mlp")
        m = e.gelu(e.linear(f"{p}.mlp.0", m, embd, mlp))
        x = e.op("Add", [x, e.linear(f"{p}.mlp.3", m, mlp, embd)])
        e.leave()
        e.leave()
    x = e.layer_norm("encoder.ln", x, embd)
    e.leave()
    x = e.op("Gather", [x, e.const(0)], axis=1)  # x[:, 0]
    e.enter("heads.head")
    y = e.linear("heads.head", x, embd, classes)
    e.leave()
    e.nodes[-1].output[0] = "logits"
    e.result = e.model(
        [h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, image, image])],
        [h.make_tensor_value_info("logits", T.FLOAT, ["batch", classes])],
    )
    return e
