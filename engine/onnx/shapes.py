"""Shapes: bind dynamic dimensions, fold shape computations, infer every tensor's shape.

Graph inputs' dynamic dimensions are bound by ``input_shapes`` (``--input-shape NAME=DIMS``) and a
dynamic first (batch) dimension by 1: the engine's graph is per sample and the lowering multiplies
by the micro-batch (a fixed batch N in the file divides each operation's work by N instead).
Shape inference is ``onnx.shape_inference`` in strict mode with data propagation; what it cannot
resolve (a ``Reshape`` whose target is computed from ``Shape`` of a tensor) is folded here with
numpy on small integer tensors, and inference runs again until nothing new folds.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
from onnx import numpy_helper

from engine.graph import MAX_DIM, dims_problem
from engine.onnx.reader import SMALL, OnnxError, _first_line

#: ONNX float element types (FLOAT, FLOAT16, DOUBLE, BFLOAT16): initializers of these with more
#: than one element are parameters.
FLOAT_TYPES = frozenset({1, 10, 11, 16})
#: Opset assumed when a model names none (the reader refuses such models before this).
OPSET = 17
#: Most inference rounds (each folds everything it can; chains resolve in a few).
MAX_ROUNDS = 64


def _dims(vi: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    out = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            out.append(int(d.dim_value))
        else:
            return None
    return tuple(out)


def bind_inputs(
    model: onnx.ModelProto, name: str, input_shapes: dict[str, list[int]], initializers
) -> tuple[list[str], int]:
    """Set every graph input's shape; returns (true input names, the file's batch N)."""
    g = model.graph
    inputs = [i for i in g.input if i.name not in initializers]
    names = [i.name for i in inputs]
    unknown = sorted(set(input_shapes) - set(names))
    if unknown:
        raise OnnxError(
            f"{name} has no graph input {unknown[0]!r} to bind (--input-shape); its inputs are "
            f"{', '.join(names) or 'none'}."
        )
    symbols: dict[str, int] = {}
    # inputs given explicitly first: they bind the symbols they share with others
    order = sorted(inputs, key=lambda i: i.name not in input_shapes)
    bound: dict[str, list[int]] = {}
    for vi in order:
        t = vi.type.tensor_type
        dims = list(t.shape.dim) if t.HasField("shape") else None
        given = input_shapes.get(vi.name)
        if given is not None:
            if dims is not None and len(dims) != len(given):
                raise OnnxError(
                    f"{name}: input {vi.name!r} has {len(dims)} dimensions but --input-shape gives "
                    f"{len(given)} ({'x'.join(map(str, given))})."
                )
            for i, v in enumerate(given):
                if dims is None:
                    continue
                d = dims[i]
                if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != v:
                    raise OnnxError(
                        f"{name}: dimension {i} of input {vi.name!r} is fixed at {d.dim_value} in "
                        f"the file; --input-shape gives {v}."
                    )
                if d.HasField("dim_param") and d.dim_param:
                    symbols.setdefault(d.dim_param, v)
            bound[vi.name] = list(given)
            continue
        if dims is None:
            raise OnnxError(
                f"{name}: input {vi.name!r} has no shape in the file; give it with "
                f"--input-shape {vi.name}=DIMS."
            )
        out = []
        for i, d in enumerate(dims):
            if d.HasField("dim_value") and d.dim_value < 0:
                raise OnnxError(
                    f"{name}: dimension {i} of input {vi.name!r} is {d.dim_value} in the file; "
                    "dimensions are whole numbers (give it with --input-shape "
                    f"{vi.name}=DIMS)."
                )
            if d.HasField("dim_value") and d.dim_value > 0:
                out.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param in symbols:
                out.append(symbols[d.dim_param])
            elif i == _batch_axis(dims):
                out.append(1)  # the batch: per sample (the micro-batch multiplies in lowering)
                if d.HasField("dim_param") and d.dim_param:
                    symbols[d.dim_param] = 1
            else:
                sym = d.dim_param if d.HasField("dim_param") and d.dim_param else "?"
                example = "x".join(
                    str(e.dim_value)
                    if e.HasField("dim_value") and e.dim_value > 0
                    else ("1" if j == _batch_axis(dims) else f"<{e.dim_param or 'size'}>")
                    for j, e in enumerate(dims)
                )
                raise OnnxError(
                    f"{name}: dimension {i} ({sym!r}) of input {vi.name!r} is dynamic and "
                    f"nothing binds it; give --input-shape {vi.name}={example} (or input_shapes "
                    "in the run configuration)."
                )
        bound[vi.name] = out
    for vi in inputs:
        problem = dims_problem(bound[vi.name])
        if problem:
            raise OnnxError(f"{name}: input {vi.name!r} cannot be simulated: {problem}.")
    axis = _batch_axis(list(inputs[0].type.tensor_type.shape.dim)) if inputs else 0
    first = bound[names[0]] if names else []
    batch = int(first[axis]) if len(first) > axis else 1
    for vi in inputs:
        t = vi.type.tensor_type
        t.ClearField("shape")
        for v in bound[vi.name]:
            t.shape.dim.add().dim_value = int(v)
    # stale intermediate shapes (symbolic) and output shapes are re-inferred
    g.ClearField("value_info")
    for o in g.output:
        o.type.tensor_type.ClearField("shape")
    return names, batch


def _batch_axis(dims) -> int:
    """The batch axis of an input: the dimension whose symbol names a batch (``batch``,
    ``batch_size``, ``N``, ``B``, ``bs``: sequence-first layouts put it second), else the first."""
    for i, d in enumerate(dims):
        sym = d.dim_param.lower() if d.HasField("dim_param") else ""
        if "batch" in sym or sym in ("n", "b", "bs"):
            return i
    return 0


# ---- constant folding of shape computations -----------------------------------------------


def _attr(node, key, default=None):
    for a in node.attribute:
        if a.name == key:
            return onnx.helper.get_attribute_value(a)
    return default


def _axes(node, vals, pos):
    ax = _attr(node, "axes")
    if ax is None and len(node.input) > pos and node.input[pos]:
        ax = vals[pos]
    return None if ax is None else [int(a) for a in np.asarray(ax).reshape(-1)]


def _shape_of(v) -> tuple[int, ...]:
    return tuple(np.shape(v))


def _folded_size(node, vals: list) -> int | None:
    """How many elements ``node``'s folded output would hold, computed from its inputs' values
    and shapes before anything is allocated (None: unknown here, the op cannot grow its input)."""
    op = node.op_type
    if op == "Range":
        start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in vals[:3])
        if delta == 0 or not all(map(math.isfinite, (start, limit, delta))):
            return SMALL + 1  # never ends (or no number): leave it to shape inference
        return max(0, math.ceil((limit - start) / delta))
    if op in ("Expand", "ConstantOfShape"):
        target = [int(d) for d in np.asarray(vals[1 if op == "Expand" else 0]).reshape(-1)]
        if any(d < 0 for d in target):
            return SMALL + 1
        if op == "ConstantOfShape":
            return math.prod(target)
        return _broadcast_size(_shape_of(vals[0]), tuple(target))
    if op in _BINARY or op == "Where":
        return _broadcast_size(*(_shape_of(v) for v in vals if v is not None))
    if op == "Gather":
        shape = _shape_of(vals[0])
        if not shape:
            return None
        axis = int(_attr(node, "axis", 0)) % len(shape)
        return math.prod(shape) // max(1, shape[axis]) * int(np.size(vals[1]))
    if op == "Concat":
        return sum(int(np.size(v)) for v in vals if v is not None)
    return None


def _broadcast_size(*shapes: tuple[int, ...]) -> int:
    """Elements of the numpy broadcast of ``shapes`` (Python integers: no overflow)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        big = {d for d in dims if d != 1}
        out.append(max(big) if big else 1)
    return math.prod(out)


def _fold(node, vals: list, shapes_in: list, like: int = 1):
    """numpy value of ``node``'s first output from constant inputs (None = cannot fold, or the
    result would hold more than :data:`SMALL` elements: checked before it is computed)."""
    op = node.op_type
    if op not in ("Shape", "Size", "Constant") and all(v is not None for v in vals[:1]):
        size = _folded_size(node, vals)
        if size is not None and size > SMALL:
            return None
    if op == "Shape":
        s = np.array(shapes_in[0], dtype=np.int64)
        start, end = _attr(node, "start", 0), _attr(node, "end", None)
        return s[start:end]
    if op == "Size":
        return np.array(int(np.prod(shapes_in[0])), dtype=np.int64)
    if op == "Constant":
        for a in node.attribute:
            v = onnx.helper.get_attribute_value(a)
            if a.name == "value":
                return numpy_helper.to_array(v)
            if a.name in ("value_int", "value_float"):
                return np.array(v)
            if a.name in ("value_ints", "value_floats"):
                return np.array(v)
        return None
    if any(v is None for v in vals[:1]):
        return None
    x = vals[0]
    if op == "Identity":
        return x
    if op == "Cast":
        to = onnx.helper.tensor_dtype_to_np_dtype(_attr(node, "to"))
        return x.astype(to)
    if op == "CastLike":  # to the second input's type (its value is not needed)
        return x.astype(onnx.helper.tensor_dtype_to_np_dtype(like))
    if op == "Flatten":
        axis = int(_attr(node, "axis", 1)) % max(x.ndim, 1) if x.ndim else 0
        return x.reshape(math.prod(x.shape[:axis]), -1)
    if op == "Trilu":
        k = int(np.asarray(vals[1]).reshape(-1)[0]) if len(vals) > 1 and vals[1] is not None else 0
        return np.triu(x, k) if _attr(node, "upper", 1) else np.tril(x, k)
    if op == "Gather":
        return np.take(x, vals[1], axis=_attr(node, "axis", 0))
    if op == "Unsqueeze":
        for a in sorted(a % (x.ndim + len(_axes(node, vals, 1))) for a in _axes(node, vals, 1)):
            x = np.expand_dims(x, a)
        return x
    if op == "Squeeze":
        ax = _axes(node, vals, 1)
        return np.squeeze(x, axis=None if ax is None else tuple(ax))
    if op == "Concat":
        return np.concatenate([np.atleast_1d(v) for v in vals], axis=_attr(node, "axis", 0))
    if op == "Slice":
        if len(node.input) > 1:
            starts, ends = vals[1], vals[2]
            axes = vals[3] if len(vals) > 3 and vals[3] is not None else range(len(starts))
            steps = vals[4] if len(vals) > 4 and vals[4] is not None else [1] * len(starts)
        else:
            starts, ends = _attr(node, "starts"), _attr(node, "ends")
            axes = _attr(node, "axes", list(range(len(starts))))
            steps = [1] * len(starts)
        idx = [slice(None)] * x.ndim
        for s, e, a, st in zip(starts, ends, axes, steps):
            idx[int(a)] = slice(int(s), int(e), int(st))
        return x[tuple(idx)]
    if op == "Reshape":
        shape = [int(d) for d in vals[1]]
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return x.reshape(shape)
    if op == "ConstantOfShape":
        value = _attr(node, "value")
        v = numpy_helper.to_array(value).reshape(-1)[0] if value is not None else np.float32(0)
        shape = [int(d) for d in x]
        return np.full(shape, v)
    if op == "Range":
        return np.arange(x, vals[1], vals[2])
    if op == "Expand":
        return x * np.ones([int(d) for d in vals[1]], dtype=x.dtype)
    if op == "Transpose":
        return np.transpose(x, _attr(node, "perm"))
    if op in _UNARY:
        return _UNARY[op](x)
    if op in _BINARY and len(vals) > 1:
        return _BINARY[op](x, vals[1])
    if op == "Where":
        return np.where(x, vals[1], vals[2])
    if op in ("ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin"):
        ax = _axes(node, vals, 1)
        fn: dict[str, Callable[..., np.ndarray]] = {
            "ReduceProd": np.prod,
            "ReduceSum": np.sum,
            "ReduceMax": np.max,
            "ReduceMin": np.min,
        }
        return fn[op](
            x, axis=None if ax is None else tuple(ax), keepdims=bool(_attr(node, "keepdims", 1))
        )
    return None


_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Neg": np.negative,
    "Abs": np.abs,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Sqrt": np.sqrt,
    "Not": np.logical_not,
    "Reciprocal": np.reciprocal,
    "Exp": np.exp,
    "Log": np.log,
    "Sign": np.sign,
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": lambda a, b: (a // b) if a.dtype.kind in "iu" and b.dtype.kind in "iu" else a / b,
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "Max": np.maximum,
    "Min": np.minimum,
    "Mod": np.mod,
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
    "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal,
    "Pow": lambda a, b: np.power(a, b).astype(a.dtype),
}
#: Folded here with numpy (the common shape and mask computations: fast, sizes checked first).
FOLDABLE = (
    {"Shape", "Size", "Constant", "Identity", "Cast", "CastLike", "Gather", "Unsqueeze"}
    | {"Squeeze", "Concat", "Slice", "Reshape", "ConstantOfShape", "Range", "Expand"}
    | {"Transpose", "Where", "Flatten", "Trilu", "ReduceProd", "ReduceSum", "ReduceMax"}
    | {"ReduceMin"}
    | set(_UNARY)
    | set(_BINARY)
)
#: Never evaluated (not constants, or no bounded evaluation): control flow, random numbers,
#: sequences and optionals, strings and regular expressions, and ops whose evaluation loops in
#: Python over boxes or windows. Any other default-domain op whose inputs are all constants is
#: folded by onnx's reference implementation when inference has given its outputs' shapes and
#: they hold at most SMALL elements.
NOT_FOLDED = frozenset(
    {"If", "Loop", "Scan", "SequenceMap", "Dropout", "Multinomial", "Bernoulli"}
    | {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike"}
    | {"SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert"}
    | {"SequenceLength", "SplitToSequence", "ConcatFromSequence", "Optional"}
    | {"OptionalGetElement", "OptionalHasElement", "StringNormalizer", "StringConcat"}
    | {"StringSplit", "RegexFullMatch", "TfIdfVectorizer", "NonMaxSuppression", "RoiAlign"}
    | {"MaxRoiPool", "Col2Im", "DeformConv", "GridSample", "ImageDecoder", "AffineGrid"}
)
#: Most elements all folded values may hold together (each holds at most SMALL): a model of
#: tens of thousands of constant nodes cannot fill the memory with them (32 MB of float64).
MAX_FOLDED = 1 << 22


def infer(
    model: onnx.ModelProto, name: str
) -> tuple[onnx.ModelProto, dict[str, tuple[int, ...]], dict[str, int], dict[str, np.ndarray]]:
    """Strict shape inference, folding shape computations until nothing new folds.

    Returns (inferred model, shapes {tensor: dims}, dtypes {tensor: onnx dtype}, constant
    values {tensor: ndarray} of the small constants).
    """
    values: dict[str, np.ndarray] = {}
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), OPSET)
    for t in model.graph.initializer:  # only the small ones are left
        if t.data_type in FLOAT_TYPES and math.prod(t.dims) > 1:
            continue  # a parameter: never folded (Transpose(W) stays a view of the weight)
        values[t.name] = numpy_helper.to_array(t)
    for _ in range(MAX_ROUNDS):
        # data propagation only while every Range's length is known and short (see
        # DATA_PROP_RANGE); the folding below makes the lengths known round by round
        lengths = _range_lengths(model, values, name)
        prop = all(n is not None and n <= DATA_PROP_RANGE for n in lengths)
        try:
            inferred = onnx.shape_inference.infer_shapes(
                model, check_type=True, strict_mode=True, data_prop=prop
            )
        except Exception as exc:  # onnx.shape_inference.InferenceError
            raise OnnxError(f"{name} fails shape inference: {_first_line(exc)}") from None
        shapes, dtypes = _collect(inferred)
        new = _fold_pass(inferred, shapes, dtypes, values, opset)
        if not new:
            return inferred, shapes, dtypes, values
        # the folded outputs become initializers, so inference sees their values
        g = model.graph
        producers = {o for n in g.node for o in n.output if o in new}
        g.initializer.extend(numpy_helper.from_array(values[t], t) for t in sorted(producers))
        keep = [n for n in g.node if not (n.output and all(o in values for o in n.output if o))]
        copies = []
        for n in keep:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            copies.append(c)
        g.ClearField("node")
        g.node.extend(copies)
    raise OnnxError(f"{name}: shape computations did not settle after {MAX_ROUNDS} rounds.")


#: Longest Range onnx's data propagation is asked to compute. It holds a Range's values as the
#: dimensions of a shape, tens of bytes each, however long the Range: a Range of 2^40 elements
#: followed by a Cast ended in std::bad_alloc after 3 GiB, one of 10^8 (from a Shape) after
#: 2.4 GiB. A longer Range, or one whose length is not known yet, gets its length from shape
#: inference on constant inputs, which allocates nothing per element.
DATA_PROP_RANGE = 1 << 16


def _scalars(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> dict[str, float]:
    """The one-element constants of the graph: folded values, initializers and Constant nodes
    (only their element counts are looked at before a value is read)."""
    out: dict[str, float] = {}
    for k, v in values.items():
        if np.size(v) == 1 and np.asarray(v).dtype.kind in "iufb":
            out[k] = float(np.asarray(v).reshape(-1)[0])
    for t in model.graph.initializer:
        if t.name not in out and math.prod(t.dims) == 1 and t.data_location != t.EXTERNAL:
            with _suppress():
                out[t.name] = float(numpy_helper.to_array(t).reshape(-1)[0])
    for node in model.graph.node:
        if node.op_type != "Constant" or not node.output or node.domain not in ("", "ai.onnx"):
            continue
        for a in node.attribute:
            with _suppress():
                if a.name == "value" and math.prod(a.t.dims) == 1:
                    out[node.output[0]] = float(numpy_helper.to_array(a.t).reshape(-1)[0])
                elif a.name in ("value_int", "value_float"):
                    out[node.output[0]] = float(a.i if a.name == "value_int" else a.f)
    return out


def _suppress():
    import contextlib

    return contextlib.suppress(ValueError, TypeError, OverflowError, IndexError)


def _range_lengths(model: onnx.ModelProto, values: dict[str, np.ndarray], name: str) -> list:
    """The length of each Range of the graph from its constant inputs (None when an input is
    not a known constant yet, or the Range never ends: shape inference says which); a Range
    longer than any dimension the engine takes is refused (one sentence naming it) before
    onnx allocates anything for it."""
    scalars: dict[str, float] | None = None
    out: list[int | None] = []
    for node in model.graph.node:
        if node.op_type != "Range" or node.domain not in ("", "ai.onnx"):
            continue
        if scalars is None:
            scalars = _scalars(model, values)
        ends = [e for e in (scalars.get(x) for x in node.input[:3]) if e is not None]
        if len(ends) < 3:  # fewer than three inputs, or one not a known constant
            out.append(None)
            continue
        start, limit, delta = (float(e) for e in ends)
        if delta == 0 or not all(map(math.isfinite, (start, limit, delta))):
            out.append(None)
            continue
        n = max(0, math.ceil((limit - start) / delta))
        if n > MAX_DIM:
            who = repr(node.name) if node.name else f"computing {node.output[0]!r}"
            raise OnnxError(f"{name}: Range node {who} cannot be simulated: {dims_problem((n,))}.")
        out.append(n)
    return out


def _collect(model: onnx.ModelProto) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, int] = {}
    g = model.graph
    for vi in (*g.input, *g.value_info, *g.output):
        d = _dims(vi)
        if d is not None:
            shapes[vi.name] = d
        dtypes[vi.name] = int(vi.type.tensor_type.elem_type)
    for t in g.initializer:
        shapes[t.name] = tuple(int(x) for x in t.dims)
        dtypes[t.name] = int(t.data_type)
    return shapes, dtypes


def _fold_pass(model, shapes, dtypes, values, opset: int) -> set[str]:
    """Fold every node whose inputs are known constants (Shape and Size: a known shape;
    CastLike: its second input's type), in one pass in graph order."""
    new: set[str] = set()
    budget = MAX_FOLDED - sum(int(v.size) for v in values.values())
    for node in model.graph.node:
        op = node.op_type
        if not node.output or node.output[0] in values or node.domain not in ("", "ai.onnx"):
            continue
        if op in NOT_FOLDED:
            continue
        ins = list(node.input)
        if op in ("Shape", "Size"):
            if ins[0] not in shapes:
                continue
            vals: list = [None]
        elif op == "CastLike":
            if ins[0] not in values or ins[1] not in dtypes:
                continue
            vals = [values[ins[0]], None]
        else:
            if not all((not x) or x in values for x in ins):
                continue
            vals = [values.get(x) if x else None for x in ins]
        try:
            if op in FOLDABLE:
                like = dtypes.get(ins[1], 1) if op == "CastLike" else 1
                outs: list | None = [_fold(node, vals, [shapes.get(x) for x in ins], like)]
            else:
                outs = _reference(node, vals, shapes, opset)
        except Exception:  # an unusual form: leave it to the importer
            outs = None
        if outs is None or any(o is None for o in outs):
            continue
        # the type inference gave (numpy may widen: a Python float constant, Sqrt of an int)
        outs = [_as_type(np.asarray(o), dtypes.get(n)) for n, o in zip(node.output, outs)]
        size = sum(int(o.size) for o in outs)
        if any(o.size > SMALL for o in outs) or size > budget:
            continue
        budget -= size
        for name, o in zip(node.output, outs):
            if name:
                values[name] = o
                new.add(name)
    return new


def _as_type(a: np.ndarray, dtype: int | None) -> np.ndarray:
    if not dtype:
        return a
    want = onnx.helper.tensor_dtype_to_np_dtype(dtype)
    return a if a.dtype == want else a.astype(want)


def _reference(node, vals: list, shapes, opset: int) -> list | None:
    """Outputs of ``node`` by onnx's reference implementation (numpy), when shape inference
    gave every output's shape and each holds at most SMALL elements (checked before)."""
    for out in node.output:
        if out and (out not in shapes or math.prod(shapes[out]) > SMALL):
            return None
    from onnx.reference.ops import load_op

    cls = load_op("", node.op_type, opset)
    run = cls(node, {"opsets": {"": opset}, "new_ops": None, "log": lambda *a: None, "verbose": 0})
    outs = run.run(*[v for v in vals])
    return list(outs) if isinstance(outs, (tuple, list)) else [outs]


__all__ = ["bind_inputs", "infer"]
