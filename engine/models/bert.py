"""BERT-Base / BERT-Large pre-training graphs (Hugging Face module paths).

``embeddings.{word_embeddings,position_embeddings,token_type_embeddings,LayerNorm}``,
``encoder.layer.N.attention.self.{query,key,value}``, ``...attention.self`` (scores, softmax,
context), ``...attention.output.{dense,LayerNorm}``, ``...intermediate.dense``,
``...output.{dense,LayerNorm}``, ``pooler.dense``, ``cls.predictions.transform.*``,
``cls.predictions.decoder`` (tied to the word embeddings: bias only), ``cls.seq_relationship``.

The masked-LM head runs on the masked positions only, ceil(15% x sequence length) of them (the
standard BERT masking rate; Graphcore's BERT uses 20 for sequence length 128, the same figure).
Inputs per sample: token ids, token-type ids and attention mask (int32, sequence length each).
Labels per sample: one per masked token plus the next-sentence label.

Dropout (training only: ``build_model`` passes 0 in inference) sits where Hugging Face's
``BertModel`` and Graphcore's PopART BERT (``bert_model.py``: ``embedding``, ``attention``,
``feed_forward``) put it: after the embeddings' layer norm, on the attention probabilities
(``attention.self.dropout``, before the context matmul) and on both residual branches before
their add (``attention.output.dropout``, ``output.dropout``); the heads have none. Each is one
``poprand::dropout`` (lib/poprand/RandomGen.cpp: the ``DropoutSupervisor`` compute set between
saving the hardware seeds and setting the op's seed, and restoring them); its gradient is the
same op on the incoming gradient with the same seed (PopART's ``DropoutGradOp`` regenerates the
mask), so nothing is saved for the backward, and a recomputed forward regenerates the same mask
from the same seed. ``engine.compiler.lowering.RANDOM_OPS`` adds the seed programs' cost.
"""

from __future__ import annotations

import math

from engine.graph import DROPOUT_PASSES, INPUT, Graph, GraphBuilder

SIZES = {
    "base": dict(hidden=768, layers=12, heads=12, intermediate=3072),
    "large": dict(hidden=1024, layers=24, heads=16, intermediate=4096),
}
MASK_RATE = 0.15
MAX_POSITIONS = 512


def _dropout(b: GraphBuilder, name: str, src: int, layer: str, p: float) -> int:
    """``poprand::dropout`` of ``src`` with probability ``p`` (``src`` itself when ``p`` is 0)."""
    if p <= 0:
        return src
    return b.add(
        name,
        "Dropout",
        "elementwise",
        layer=layer,
        in0=src,
        out_elems=b.out_elems(src),
        passes=DROPOUT_PASSES,
        bwd_passes=DROPOUT_PASSES,
    )


def bert(
    size: str = "base",
    seq_length: int = 128,
    vocab_size: int = 30522,
    num_classes: int = 2,
    hidden_dropout: float = 0.0,
    attention_dropout: float = 0.0,
) -> Graph:
    cfg = SIZES[size]
    hid, heads, inter = cfg["hidden"], cfg["heads"], cfg["intermediate"]
    dh = hid // heads
    s = seq_length
    masked = max(1, math.ceil(MASK_RATE * s))
    b = GraphBuilder()
    b._input_elems = 3 * s

    linear = b.linear

    def layernorm(name, src, rows):
        return b.add(
            name,
            "LayerNorm",
            "norm",
            in0=src,
            out_elems=rows * hid,
            weight_elems=2 * hid,
            passes=4,
            bwd_passes=5,
            saves_input=True,
        )

    def dense_gelu(module, src, rows, n_in, n_out):
        """``module``.dense then its GELU (the intermediate layer, the MLM head's transform)."""
        x = linear(f"{module}.dense", src, rows, n_in, n_out)
        return b.add(
            f"{module}.gelu",
            "Gelu",
            "nonlinearity",
            in0=x,
            out_elems=rows * n_out,
            passes=4,
            bwd_passes=5,
            saves_input=True,
        )

    def attention_matmul(name, layer, x, y, m, k, n):
        """Scores (Q x K^T) or context (softmax x V): one batched matmul per head."""
        return b.add(
            f"{layer}.{name}",
            "BatchMatMul",
            "amp",
            layer=layer,
            in0=x,
            in1=y,
            out_elems=heads * m * n,
            groups=heads,
            m=m,
            k=k,
            n=n,
            bwd_passes=0,
            saves_input=True,
        )

    def add(name, x, y, layer):
        return b.add(
            name, "Add", "elementwise", layer=layer, in0=x, in1=y, out_elems=b.out_elems(x)
        )

    def dropout(name, src, layer, p):
        return _dropout(b, name, src, layer, p)

    def emb(name, rows):
        return b.add(
            name,
            "Embedding",
            "embedding",
            in0=INPUT,
            in_elems=s,
            out_elems=s * hid,
            weight_elems=rows * hid,
        )

    w = emb("embeddings.word_embeddings", vocab_size)
    p = emb("embeddings.position_embeddings", max(MAX_POSITIONS, s))
    t = emb("embeddings.token_type_embeddings", 2)
    x = add("embeddings.add0", w, p, "embeddings")
    x = add("embeddings.add1", x, t, "embeddings")
    x = layernorm("embeddings.LayerNorm", x, s)
    x = dropout("embeddings.dropout", x, "embeddings", hidden_dropout)
    for i in range(cfg["layers"]):
        p = f"encoder.layer.{i}"
        q = linear(f"{p}.attention.self.query", x, s, hid, hid)
        k = linear(f"{p}.attention.self.key", x, s, hid, hid)
        v = linear(f"{p}.attention.self.value", x, s, hid, hid)
        sc = attention_matmul("scores", f"{p}.attention.self", q, k, s, dh, s)
        pr = b.add(
            f"{p}.attention.self.softmax",
            "Softmax",
            "nonlinearity",
            layer=f"{p}.attention.self",
            in0=sc,
            out_elems=heads * s * s,
            passes=4,
            bwd_passes=3,
            saves_output=True,
        )
        pr = dropout(f"{p}.attention.self.dropout", pr, f"{p}.attention.self", attention_dropout)
        ctx = attention_matmul("context", f"{p}.attention.self", pr, v, s, s, dh)
        o = linear(f"{p}.attention.output.dense", ctx, s, hid, hid)
        o = dropout(f"{p}.attention.output.dropout", o, f"{p}.attention.output", hidden_dropout)
        o = add(f"{p}.attention.output.add", o, x, f"{p}.attention.output")
        a = layernorm(f"{p}.attention.output.LayerNorm", o, s)
        h = dense_gelu(f"{p}.intermediate", a, s, hid, inter)
        o = linear(f"{p}.output.dense", h, s, inter, hid)
        o = dropout(f"{p}.output.dropout", o, f"{p}.output", hidden_dropout)
        o = add(f"{p}.output.add", o, a, f"{p}.output")
        x = layernorm(f"{p}.output.LayerNorm", o, s)
    enc = x
    pool = linear("pooler.dense", enc, 1, hid, hid)
    pool = b.add(
        "pooler.activation",
        "Tanh",
        "nonlinearity",
        in0=pool,
        out_elems=hid,
        passes=2,
        bwd_passes=2,
        saves_output=True,
    )
    tr = dense_gelu("cls.predictions.transform", enc, masked, hid, hid)
    tr = layernorm("cls.predictions.transform.LayerNorm", tr, masked)
    mlm = linear("cls.predictions.decoder", tr, masked, hid, vocab_size, weight=False)
    nsp = linear("cls.seq_relationship", pool, 1, hid, num_classes)
    return b.build(
        f"bert-{size}",
        input_elems=3 * s,
        input_kind="tokens",
        input_shape=(3, s),
        label_elems=masked + 1,
        output_elems=masked * vocab_size + num_classes,
        params={"loss_inputs": [mlm, nsp], "masked_tokens": masked},
    )
