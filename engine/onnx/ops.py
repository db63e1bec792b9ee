"""Operator translators: one entry per ONNX operator type -> rows of the engine's graph IR.

``TRANSLATORS[op_type](ctx, node)`` appends the node's row(s) through :class:`engine.onnx.importer
.Context` (``ctx.row``), marks its outputs as views of an existing row (``ctx.view``) or as
constants. A row carries the same fields the zoo's models write (engine.graph: family, passes,
backward passes, saved tensors, AMP problem m x k x n), so an ONNX ``Conv`` costs exactly what a zoo
convolution costs: FLOPs, bytes and vertex costs all come from the one cost model in
engine/compiler. Adding an operator is one entry here.

What each shape operator is on an IPU (PopART lowers them to Poplar tensor expressions):

- views, no program (PopART's inplace variants: ReshapeInplace, TransposeInplace, SliceInplace...;
  Poplar's ``reshape``, ``dimShuffle``, ``slice``, ``broadcast`` are views of the same tiles):
  Reshape, Flatten, Squeeze, Unsqueeze, Identity, Transpose, Slice, Split, Expand, a Cast
  between float types (the run's precision decides every float dtype), Gather with constant
  indices on an activation (a static slice), Dropout when not training;
- copies: Concat and Pad write a new tensor (one pass, gradient a view), Tile, DepthToSpace /
  SpaceToDepth (rearrangements), Gather / Scatter with dynamic indices (``popops::multiSlice`` /
  ``multiUpdateAdd``, the embedding family);
- constants, folded at import: Shape, Size, Constant, ConstantOfShape, Range and anything computed
  from constants only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from engine.graph import DROPOUT_PASSES
from engine.onnx.shapes import FLOAT_TYPES  # FLOAT, FLOAT16, DOUBLE, BFLOAT16

FAMILIES = ("amp", "elementwise", "nonlinearity", "norm", "pool", "reduce", "embedding", "copy")


#: Row fields that describe an op type (not its size).
FACT_FIELDS = ("family", "passes", "bwd_passes", "saves_input", "saves_output", "cross_tile")


@functools.cache
def zoo_facts() -> dict[str, dict]:
    """The type facts of every op type the zoo's models write (``Relu``, ``Gelu``, ``LayerNorm``,
    ``BatchNorm``, ``Conv``, ...), read from their graphs: the zoo is the one statement of them,
    so an imported op of a zoo type is costed exactly as the zoo's (graphs built at small sizes;
    the facts do not depend on sizes, except MaxPool's passes, which the importer computes)."""
    from engine.models.bert import bert
    from engine.models.resnet import resnet

    facts: dict[str, dict] = {}
    for g in (resnet(50, image_size=32), bert("base", seq_length=8, vocab_size=16)):
        c = g.cols
        for i in range(len(g)):
            facts.setdefault(
                str(c["type"][i]),
                {
                    "family": str(c["family"][i]),
                    "passes": float(c["passes"][i]),
                    "bwd_passes": float(c["bwd_passes"][i]),
                    "saves_input": bool(c["saves_input"][i]),
                    "saves_output": bool(c["saves_output"][i]),
                    "cross_tile": bool(c["cross_tile"][i]),
                },
            )
    return facts


def facts_of(type_: str) -> dict:
    """The zoo's facts of ``type_`` (KeyError when the zoo has no such op)."""
    return dict(zoo_facts()[type_])


@dataclass(frozen=True)
class Pointwise:
    """An element-wise op over its output: forward / backward vector passes, saved tensors.

    ``Pointwise(type)`` alone takes the zoo's facts of that type (:func:`zoo_facts`)."""

    type: str
    family: str | None = None
    passes: float = 1.0
    bwd: float = 1.0
    saves_input: bool = False
    saves_output: bool = False

    def fields(self) -> dict:
        if self.family is None:
            return facts_of(self.type)
        return dict(
            family=self.family,
            passes=self.passes,
            bwd_passes=self.bwd,
            saves_input=self.saves_input,
            saves_output=self.saves_output,
        )

    def __call__(self, ctx, node) -> None:
        # a comparison's operands and Where's condition are never trained weights (masks)
        skip = (0,) if self.type == "Where" else range(len(node.input) * (self.type in COMPARE))
        w = sum(
            ctx.claim(x)
            for i, x in enumerate(node.input)
            if x and i not in skip and ctx.is_param(x)
        )
        f = self.fields()
        ctx.row(node, self.type, f.pop("family"), weight_elems=w, **f)


E, NL = "elementwise", "nonlinearity"
#: Ops whose output is a comparison (bool): no operand of theirs is a trained weight.
COMPARE = frozenset(
    {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor", "Not"}
    | {"IsNaN", "IsInf"}
)

# Relu, Tanh, Gelu, Softmax (and Add, the norms, Embedding, the AMP ops, global average pooling)
# take the zoo's facts; the others follow the zoo's rule: one pass per vector operation of the
# forward / backward formula.
POINTWISE: dict[str, Pointwise] = {
    "Relu": Pointwise("Relu"),
    "LeakyRelu": Pointwise("LeakyRelu", E, 1, 1, saves_input=True),
    "PRelu": Pointwise("PRelu", E, 2, 2, saves_input=True),
    "ThresholdedRelu": Pointwise("ThresholdedRelu", E, 1, 1, saves_input=True),
    "Clip": Pointwise("Clip", E, 1, 1, saves_input=True),
    "HardSigmoid": Pointwise("HardSigmoid", E, 2, 1, saves_input=True),
    "HardSwish": Pointwise("HardSwish", E, 3, 3, saves_input=True),
    "Shrink": Pointwise("Shrink", E, 1, 1, saves_input=True),
    "Neg": Pointwise("Neg", E, 1, 1),
    "Abs": Pointwise("Abs", E, 1, 1, saves_input=True),
    "Sign": Pointwise("Sign", E, 1, 0),
    "Floor": Pointwise("Floor", E, 1, 0),
    "Ceil": Pointwise("Ceil", E, 1, 0),
    "Round": Pointwise("Round", E, 1, 0),
    "Not": Pointwise("Not", E, 1, 0),
    "IsNaN": Pointwise("IsNaN", E, 1, 0),
    "IsInf": Pointwise("IsInf", E, 1, 0),
    "Reciprocal": Pointwise("Reciprocal", E, 1, 2, saves_output=True),
    "Softsign": Pointwise("Softsign", E, 2, 2, saves_input=True),
    "Trilu": Pointwise("Trilu", E, 1, 1),
    "Sigmoid": Pointwise("Sigmoid", NL, 2, 2, saves_output=True),
    "Tanh": Pointwise("Tanh"),
    "Gelu": Pointwise("Gelu"),
    "Erf": Pointwise("Erf", NL, 2, 2, saves_input=True),
    "Exp": Pointwise("Exp", NL, 2, 1, saves_output=True),
    "Log": Pointwise("Log", NL, 2, 1, saves_input=True),
    "Sqrt": Pointwise("Sqrt", NL, 2, 2, saves_output=True),
    "Elu": Pointwise("Elu", NL, 2, 2, saves_output=True),
    "Selu": Pointwise("Selu", NL, 2, 2, saves_input=True),
    "Celu": Pointwise("Celu", NL, 2, 2, saves_input=True),
    "Softplus": Pointwise("Softplus", NL, 2, 2, saves_input=True),
    "Mish": Pointwise("Mish", NL, 4, 5, saves_input=True),
    "Sin": Pointwise("Sin", NL, 2, 2, saves_input=True),
    "Cos": Pointwise("Cos", NL, 2, 2, saves_input=True),
    "Softmax": Pointwise("Softmax"),
    "LogSoftmax": Pointwise("LogSoftmax", NL, 4, 3, saves_output=True),
    # binary and variadic element-wise
    "Sub": Pointwise("Sub", E, 1, 1),
    "Mul": Pointwise("Mul", E, 1, 2, saves_input=True),
    "Div": Pointwise("Div", E, 2, 3, saves_input=True),
    "Pow": Pointwise("Pow", NL, 2, 3, saves_input=True),
    "Max": Pointwise("Max", E, 1, 1, saves_input=True),
    "Min": Pointwise("Min", E, 1, 1, saves_input=True),
    "Mod": Pointwise("Mod", E, 1, 0),
    "Equal": Pointwise("Equal", E, 1, 0),
    "Greater": Pointwise("Greater", E, 1, 0),
    "GreaterOrEqual": Pointwise("GreaterOrEqual", E, 1, 0),
    "Less": Pointwise("Less", E, 1, 0),
    "LessOrEqual": Pointwise("LessOrEqual", E, 1, 0),
    "And": Pointwise("And", E, 1, 0),
    "Or": Pointwise("Or", E, 1, 0),
    "Xor": Pointwise("Xor", E, 1, 0),
    "BitShift": Pointwise("BitShift", E, 1, 0),
    "Where": Pointwise("Where", E, 1, 1),
    "Sum": Pointwise("Sum", E, 1, 1),
    "Mean": Pointwise("Mean", E, 2, 1),
    # copies and rearrangements (the gradient of Concat / Pad is a view: no backward work)
    "Concat": Pointwise("Concat", "copy", 1, 0),
    "Pad": Pointwise("Pad", "copy", 1, 0),
    "Tile": Pointwise("Tile", "copy", 1, 1),
    "DepthToSpace": Pointwise("DepthToSpace", "copy", 1, 1),
    "SpaceToDepth": Pointwise("SpaceToDepth", "copy", 1, 1),
    "CumSum": Pointwise("CumSum", "reduce", 1, 1),
    "GatherElements": Pointwise("GatherElements", "embedding", 1, 1),
    "GatherND": Pointwise("GatherND", "embedding", 1, 1),
    "ScatterElements": Pointwise("ScatterElements", "embedding", 1, 1),
    "ScatterND": Pointwise("ScatterND", "embedding", 1, 1),
    "OneHot": Pointwise("OneHot", E, 1, 0),
}

VIEWS = frozenset(
    {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Slice", "Split"}
    | {"Expand"}
)
#: Constant producers (folded or known-shaped constants; never a row).
CONSTANTS = frozenset(
    {"Shape", "Size", "Constant", "ConstantOfShape", "Range", "EyeLike", "RandomNormal"}
    | {"RandomUniform", "RandomNormalLike", "RandomUniformLike"}
)


def _view(ctx, node) -> None:
    ctx.view(node)


def _add(ctx, node) -> None:
    """Add; a bias vector added to a matmul / convolution output is that op's bias."""
    if ctx.fuse_bias(node):
        return
    POINTWISE_ADD(ctx, node)


POINTWISE_ADD = Pointwise("Add")


def _cast(ctx, node) -> None:
    """Cast (to ``to``) and CastLike (to its second input's type)."""
    src = ctx.dtype(node.input[0])
    to = int(ctx.attr(node, "to")) if node.op_type == "Cast" else ctx.dtype(node.input[1])
    if src in FLOAT_TYPES and to in FLOAT_TYPES:
        ctx.view(node)  # the run's precision decides every float dtype
    else:
        ctx.row(node, "Cast", "elementwise", passes=1, bwd_passes=0)


def _dropout(ctx, node) -> None:
    ratio = ctx.attr(node, "ratio", None)
    if ratio is None and len(node.input) > 1 and node.input[1]:
        v = ctx.value(node.input[1])
        ratio = float(v) if v is not None else 0.5
    if ratio is None:
        ratio = 0.5
    if ctx.training and ratio > 0:
        # poprand's dropout (PopART's DropoutOp); its gradient regenerates the mask from the
        # same seed (DropoutGradOp), so the backward saves nothing
        ctx.row(
            node,
            "Dropout",
            "elementwise",
            passes=DROPOUT_PASSES,
            bwd_passes=DROPOUT_PASSES,
        )
    else:
        ctx.view(node)


def _gather(ctx, node) -> None:
    data, idx = node.input[0], node.input[1]
    if ctx.is_param(data):
        # an embedding lookup (popops::multiSlice; its gradient a multiUpdateAdd)
        f = facts_of("Embedding")
        ctx.row(
            node,
            "Embedding",
            f.pop("family"),
            in_elems=ctx.numel(idx),
            weight_elems=ctx.claim(data),
            **f,
        )
    elif not ctx.is_act(idx):
        ctx.view(node)  # constant indices on an activation: a static slice
    else:
        ctx.row(node, "Gather", "embedding")


def _batchnorm(ctx, node) -> None:
    c = ctx.shape(node.input[0])[1] if len(ctx.shape(node.input[0])) > 1 else 1
    w = ctx.claim(node.input[1]) + ctx.claim(node.input[2])  # mean / var are buffers
    f = facts_of("BatchNorm")  # cross-tile statistics: mean and variance per channel
    ctx.row(
        node, "BatchNorm", f.pop("family"), stats=2 * c, stats_per_sample=False, weight_elems=w, **f
    )


def _norm(type_: str) -> Callable:
    """LayerNorm as the zoo's; group / instance / other norms with the same facts (statistics
    per sample over a slice of the features, then whitening and scale)."""

    def translate(ctx, node) -> None:
        w = sum(ctx.claim(x) for x in node.input[1:] if x and ctx.is_param(x))
        f = facts_of("LayerNorm")
        ctx.row(node, type_, f.pop("family"), weight_elems=w, **f)

    return translate


def _global_pool(type_: str) -> Callable:
    def translate(ctx, node) -> None:
        shape = ctx.shape(node.input[0])
        c = int(math.prod(shape[:2]))  # batch x channels
        f = facts_of("AvgPool")  # the zoo's global average pooling (ResNet's head)
        f["saves_input"] = f["saves_input"] or type_ != "AvgPool"  # max: where the max was
        ctx.row(node, type_, f.pop("family"), stats=c, stats_per_sample=True, **f)

    return translate


def _pool(type_: str) -> Callable:
    def translate(ctx, node) -> None:
        kernel = math.prod(ctx.attr(node, "kernel_shape", [1]))
        ratio = kernel * ctx.numel(node.output[0]) / max(ctx.numel(node.input[0]), 1)
        ctx.row(node, type_, "pool", passes=ratio, bwd_passes=ratio, saves_input=True)

    return translate


def _reduce(ctx, node) -> None:
    op = node.op_type
    x = node.input[0]
    shape = ctx.shape(x)
    axes = ctx.attr(node, "axes", None)
    if axes is None and len(node.input) > 1 and node.input[1]:
        v = ctx.value(node.input[1])
        axes = None if v is None else [int(a) for a in v.reshape(-1)]
    rank = len(shape)
    if (
        op == "ReduceMean"
        and rank == 4
        and axes is not None
        and sorted(a % rank for a in axes) == [2, 3]
    ):
        _global_pool("AvgPool")(ctx, node)  # global average pooling written as a mean
        return
    arg = op in ("ArgMax", "ArgMin")
    saves = op in ("ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceLogSumExp")
    ctx.row(
        node,
        op,
        "reduce",
        passes=2 if op in ("ReduceL2", "ReduceSumSquare", "ReduceLogSumExp", "ReduceL1") else 1,
        bwd_passes=0 if arg else 1,
        saves_input=saves,
    )


def _resize(ctx, node) -> None:
    mode = ctx.attr(node, "mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    taps = {"nearest": 1, "linear": 4, "bilinear": 4, "cubic": 16}.get(mode, 4)
    ctx.row(node, "Resize", "elementwise", passes=taps, bwd_passes=taps)


# ---- AMP ops (matmuls and convolutions) --------------------------------------------------


def _conv(ctx, node) -> None:
    """Conv: ``m`` output pixels, ``k = C/g x kernel``, ``n = Cout/g``, ``g`` groups.

    ConvTranspose: the useful work, every input pixel times the kernel (``m`` input pixels,
    ``n = Cout/g`` from the weight's second dimension); poplin runs it as a convolution of the
    input-dilated tensor, and the engine assumes its work lists skip the dilation zeros."""
    x, w = node.input[0], node.input[1]
    xs, ws = ctx.shape(x), ctx.shape(w)
    g = int(ctx.attr(node, "group", 1))
    kernel = math.prod(ws[2:])
    cin = xs[1] // g
    if node.op_type == "ConvTranspose":  # the useful work runs over the input's rows
        pixels, n, rows_of = xs[0] * math.prod(xs[2:]), ws[1], xs
    else:
        ys = ctx.shape(node.output[0])
        pixels, n, rows_of = ys[0] * math.prod(ys[2:]), ys[1] // g, ys
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    ctx.amp_row(
        node,
        node.op_type,
        groups=g,
        m=pixels,
        k=cin * kernel,
        n=n,
        cin=cin,
        kernel=kernel,
        out_width=rows_of[-1] if len(rows_of) > 2 else 0,  # row width (PopLibs AMP runs per row)
        weight_elems=ctx.claim(w) + (ctx.claim(bias) if bias else 0),
        acts=[x],
    )


def _matmul_shapes(a: tuple, b: tuple):
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    return a2, b2


def _matmul(ctx, node) -> None:
    a, b = node.input[0], node.input[1]
    ash, bsh = _matmul_shapes(ctx.shape(a), ctx.shape(b))
    M, K, N = ash[-2], ash[-1], bsh[-1]
    a_act, b_act = ctx.is_act(a), ctx.is_act(b)
    if a_act and b_act:
        batch = _broadcast(ash[:-2], bsh[:-2])
        ctx.amp_row(node, "BatchMatMul", groups=math.prod(batch), m=M, k=K, n=N, acts=[a, b])
    elif a_act:  # x @ W
        if len(bsh) > 2:
            batch = _broadcast(ash[:-2], bsh[:-2])
            ctx.amp_row(
                node,
                "BatchMatMul",
                groups=math.prod(batch),
                m=M,
                k=K,
                n=N,
                weight_elems=ctx.claim(b),
                acts=[a],
            )
        else:
            ctx.amp_row(
                node,
                "MatMul",
                m=math.prod(ash[:-1]),
                k=K,
                n=N,
                weight_elems=ctx.claim(b),
                acts=[a],
            )
    else:  # W @ x = (x^T W^T)^T
        ctx.amp_row(
            node,
            "MatMul",
            m=math.prod(bsh[:-2]) * N,
            k=K,
            n=M,
            weight_elems=ctx.claim(a),
            acts=[b],
        )


def _broadcast(a: tuple, b: tuple) -> tuple:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    return tuple(max(x, y) for x, y in zip(a, b))


def _gemm(ctx, node) -> None:
    a, b = node.input[0], node.input[1]
    ash, bsh = ctx.shape(a), ctx.shape(b)
    ta, tb = int(ctx.attr(node, "transA", 0)), int(ctx.attr(node, "transB", 0))
    M, K = (ash[1], ash[0]) if ta else (ash[0], ash[1])
    N = bsh[0] if tb else bsh[1]
    c = node.input[2] if len(node.input) > 2 and node.input[2] else None
    bias = ctx.claim(c) if c and ctx.is_param(c) else 0
    if ctx.is_act(a) and ctx.is_act(b):
        ctx.amp_row(node, "BatchMatMul", groups=1, m=M, k=K, n=N, weight_elems=bias, acts=[a, b])
    elif ctx.is_act(a):
        ctx.amp_row(node, "MatMul", m=M, k=K, n=N, weight_elems=ctx.claim(b) + bias, acts=[a])
    else:
        ctx.amp_row(node, "MatMul", m=N, k=K, n=M, weight_elems=ctx.claim(a) + bias, acts=[b])


def _einsum(ctx, node) -> None:
    """Two-operand matmul patterns (``bqhd,bkhd->bhqk``, ``bij,jk->bik``...)."""
    eq = ctx.attr(node, "equation")
    eq = (eq.decode() if isinstance(eq, bytes) else str(eq)).replace(" ", "")
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != 2 or not out or len(node.input) != 2:
        ctx.not_costed(node, "Einsum")
        return
    a, b = node.input
    shapes = [ctx.shape(a), ctx.shape(b)]
    terms = [_expand_ellipsis(t, len(s)) for t, s in zip(terms, shapes)]
    out = _expand_ellipsis(out, max(len(s) for s in shapes), max_len=True)
    size: dict[str, int] = {}
    for t, s in zip(terms, shapes):
        if len(t) != len(s):
            ctx.not_costed(node, "Einsum")
            return
        for ch, d in zip(t, s):
            size[ch] = max(size.get(ch, 1), int(d))
    A, B, Z = set(terms[0]), set(terms[1]), set(out)
    if (A - B - Z) or (B - A - Z) or (Z - A - B):
        ctx.not_costed(node, "Einsum")  # a sum over one operand's own index: not a matmul
        return

    def prod(letters) -> int:
        return math.prod(size[c] for c in letters)

    batch, contract = A & B & Z, (A & B) - Z
    m_l, n_l = (A - B) & Z, (B - A) & Z
    a_act, b_act = ctx.is_act(a), ctx.is_act(b)
    if a_act and b_act:
        weight, acts, m, n = 0, [a, b], prod(m_l), prod(n_l)
    else:  # one operand is a weight: rows come from the activation's own indices
        act, par, m_own, n_own = (a, b, m_l, n_l) if a_act else (b, a, n_l, m_l)
        weight, acts, m, n = ctx.claim(par), [act], prod(m_own), prod(n_own)
    batched = bool(batch) or (a_act and b_act)
    ctx.amp_row(
        node,
        "BatchMatMul" if batched else "MatMul",
        groups=prod(batch),
        m=m,
        k=prod(contract),
        n=n,
        weight_elems=weight,
        acts=acts,
    )


def _expand_ellipsis(term: str, rank: int, max_len: bool = False) -> str:
    if "..." not in term:
        return term
    k = rank - (len(term) - 3)
    fill = "".join(chr(0x391 + i) for i in range(max(k, 0)))  # Greek capitals: no clash
    return term.replace("...", fill)


TRANSLATORS: dict[str, Callable] = {
    **POINTWISE,
    **{op: _view for op in VIEWS},
    "Add": _add,
    "Cast": _cast,
    "CastLike": _cast,
    "Dropout": _dropout,
    "Gather": _gather,
    "BatchNormalization": _batchnorm,
    "LayerNormalization": _norm("LayerNorm"),
    "GroupNormalization": _norm("GroupNorm"),
    "InstanceNormalization": _norm("InstanceNorm"),
    "LpNormalization": _norm("LpNorm"),
    "MeanVarianceNormalization": _norm("MeanVarianceNorm"),
    "GlobalAveragePool": _global_pool("AvgPool"),
    "GlobalMaxPool": _global_pool("GlobalMaxPool"),
    "MaxPool": _pool("MaxPool"),
    "AveragePool": _pool("AvgPool"),
    "LpPool": _pool("LpPool"),
    **{
        op: _reduce
        for op in (
            "ReduceMean",
            "ReduceSum",
            "ReduceMax",
            "ReduceMin",
            "ReduceProd",
            "ReduceL1",
            "ReduceL2",
            "ReduceSumSquare",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ArgMax",
            "ArgMin",
        )
    },
    "Resize": _resize,
    "Upsample": _resize,
    "Conv": _conv,
    "ConvTranspose": _conv,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Einsum": _einsum,
}

__all__ = ["CONSTANTS", "POINTWISE", "TRANSLATORS", "VIEWS", "Pointwise"]
