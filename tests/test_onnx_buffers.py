"""Buffers are not parameters: a GPT-style model's float causal mask and position ids.

The models are built here with the onnx helper API (no torch): one decoder block with token and
position embeddings, the position ids a buffer sliced to the sequence (``position_ids[:, :T]``),
and a float additive causal mask buffer sliced to T x T and added to the scores (``att +
mask[:T, :T]``), the pattern whose consumers alone cannot tell it from a trained position
embedding (``x + pos_embedding``).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from engine.onnx.importer import TORCH_INPUT_KIND, import_onnx

VOCAB, EMBD = 64, 16


def tiny_gpt(ctx: int, seq: int, *, fill: float, kinds: bool, mask_kind: str = "BUFFER"):
    """(model, trained weights' elements). ``fill``: the mask's value above the diagonal
    (``-inf``, or a finite ``-1e4`` as Hugging Face writes it); ``kinds``: the PyTorch 2
    exporter's record of each initializer's kind in its value info."""
    n = h.make_node
    weights = {
        "wte": (VOCAB, EMBD),
        "wpe": (ctx, EMBD),
        "ln.weight": (EMBD,),
        "ln.bias": (EMBD,),
        "q.weight": (EMBD, EMBD),
        "k.weight": (EMBD, EMBD),
        "v.weight": (EMBD, EMBD),
        "proj.weight": (EMBD, EMBD),
    }
    mask = np.triu(np.full((ctx, ctx), fill, np.float32), 1)
    inits = [nh.from_array(np.zeros(s, np.float32), k) for k, s in weights.items()]
    inits += [
        nh.from_array(mask, "mask"),
        nh.from_array(np.arange(ctx, dtype=np.int64)[None], "position_ids"),
        nh.from_array(np.array([0], np.int64), "zero1"),
        nh.from_array(np.array([seq], np.int64), "t1"),
        nh.from_array(np.array([0, 0], np.int64), "zero2"),
        nh.from_array(np.array([seq, seq], np.int64), "tt"),
        nh.from_array(np.array([1], np.int64), "axis1"),
        nh.from_array(np.array([0, 1], np.int64), "axes01"),
        nh.from_array(np.array(0.25, np.float32), "scale"),
    ]
    nodes = [
        n("Slice", ["position_ids", "zero1", "t1", "axis1"], ["pos"]),
        n("Gather", ["wte", "idx"], ["tok_emb"]),
        n("Gather", ["wpe", "pos"], ["pos_emb"]),
        n("Add", ["tok_emb", "pos_emb"], ["x"]),
        n("LayerNormalization", ["x", "ln.weight", "ln.bias"], ["a"], axis=-1),
        n("MatMul", ["a", "q.weight"], ["q"]),
        n("MatMul", ["a", "k.weight"], ["k"]),
        n("MatMul", ["a", "v.weight"], ["v"]),
        n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["s0"]),
        n("Mul", ["s0", "scale"], ["s1"]),
        n("Slice", ["mask", "zero2", "tt", "axes01"], ["causal"]),
        n("Add", ["s1", "causal"], ["s2"]),
        n("Softmax", ["s2"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["y0"]),
        n("MatMul", ["y0", "proj.weight"], ["y1"]),
        n("Add", ["x", "y1"], ["y2"]),
        n("Transpose", ["wte"], ["wte_t"], perm=[1, 0]),
        n("MatMul", ["y2", "wte_t"], ["logits"]),  # the lm_head, tied to wte
    ]
    for i, node in enumerate(nodes):
        node.name = f"/block/{node.op_type}_{i}"
    g = h.make_graph(
        nodes,
        "tiny_gpt",
        [h.make_tensor_value_info("idx", T.INT64, [1, seq])],
        [h.make_tensor_value_info("logits", T.FLOAT, [1, seq, VOCAB])],
        inits,
    )
    if kinds:
        for t in g.initializer:
            kind = "PARAMETER" if t.name in weights else "BUFFER"
            if t.name == "mask":
                kind = mask_kind
            elif t.name not in weights and t.name != "position_ids":
                kind = "CONSTANT_TENSOR"
            vi = h.make_tensor_value_info(t.name, t.data_type, list(t.dims))
            prop = vi.metadata_props.add()
            prop.key, prop.value = TORCH_INPUT_KIND, kind
            g.value_info.append(vi)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    return m, sum(int(np.prod(s)) for s in weights.values())


def _import(tmp_path, m):
    path = tmp_path / "tiny_gpt.onnx"
    onnx.save(m, str(path))
    return import_onnx(path)


@pytest.mark.parametrize(
    "ctx, fill, kinds",
    [
        (128, -1e4, True),  # the exporter's mark decides (a finite mask too large to read)
        (128, -np.inf, True),
        (32, -np.inf, False),  # no mark: a mask of -inf is no trained weight
        (32, -np.inf, True),
    ],
)
def test_a_causal_mask_and_position_ids_are_not_parameters(tmp_path, ctx, fill, kinds):
    m, weights = tiny_gpt(ctx, 16, fill=fill, kinds=kinds)
    g, _ = _import(tmp_path, m)
    assert g.num_params == weights
    # the weight update and its optimiser state follow the rows' weights: the mask's Add
    # has none, and only the trained weights' rows carry any
    add = [r for r, name in enumerate(g.cols["name"]) if name.startswith("block/Add_12")]
    assert len(add) == 1 and g.cols["weight_elems"][add[0]] == 0
    assert g.cols["in_elems"][add[0]] == 16 * 16  # the scores only: the mask is a constant
    # the position ids' Slice folded: a lookup of 16 rows into wpe, which is claimed
    pos = [r for r, name in enumerate(g.cols["name"]) if name.startswith("block/Gather_2")]
    assert g.cols["type"][pos[0]] == "Embedding" and g.cols["weight_elems"][pos[0]] == ctx * EMBD


def test_the_exporters_mark_wins_over_the_consumers(tmp_path):
    """A tensor the exporter marks PARAMETER counts even when added like a mask (a learned
    additive bias is a parameter); without any mark a finite float tensor added to the scores
    reads like a trained position embedding and counts (docs/onnx.md says so)."""
    m, weights = tiny_gpt(128, 16, fill=-1e4, kinds=True, mask_kind="PARAMETER")
    g, _ = _import(tmp_path, m)
    assert g.num_params == weights + 128 * 128
    m, weights = tiny_gpt(128, 16, fill=-1e4, kinds=False)
    g, _ = _import(tmp_path, m)
    assert g.num_params == weights + 128 * 128


def test_a_mark_on_the_graph_input_of_an_initializer_counts_too(tmp_path):
    """Exporters that list initializers among the graph inputs carry the mark there."""
    m, weights = tiny_gpt(128, 16, fill=-1e4, kinds=True)
    marks = {vi.name: vi for vi in m.graph.value_info}
    m.graph.ClearField("value_info")
    m.graph.input.extend(marks[t.name] for t in m.graph.initializer)
    g, _ = _import(tmp_path, m)
    assert g.num_params == weights


def test_model_info_counts_the_weights_only(tmp_path, capsys):
    import json

    from analyser.cli import main

    m, weights = tiny_gpt(128, 16, fill=-1e4, kinds=True)
    path = tmp_path / "tiny_gpt.onnx"
    onnx.save(m, str(path))
    assert main(["model-info", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["parameters"] == weights
