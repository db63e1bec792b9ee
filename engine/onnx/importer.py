"""ONNX graph -> engine.graph.Graph (the forward graph per sample, as the zoo builds it).

The walk visits the nodes once in topological order (the work is per node; nothing quadratic).
Each tensor is an activation (produced by a row or the graph input), a parameter (an initializer,
or a view of one: ``Transpose(W)``) or a constant. Parameters are counted once per initializer
(tied weights: the first user claims them), from their shapes only; float initializers of one
element are constants (scales, epsilons), and batch-norm running statistics are buffers.
"""

from __future__ import annotations

import ast
import math
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from engine.graph import INPUT, NONE, Graph, GraphBuilder, dims_problem
from engine.onnx import ops
from engine.onnx.reader import OnnxError, numel, read_model
from engine.onnx.shapes import bind_inputs, infer

INT_TYPES = frozenset({2, 3, 4, 5, 6, 7, 9, 12, 13})  # uint8..int64, bool, uint32/64


@dataclass
class Unsupported:
    count: int
    first: str


@dataclass
class ImportInfo:
    """Facts of an import that are not graph rows (model-info and notes)."""

    path: str
    opset: int
    producer: str
    inputs: list[tuple[str, tuple[int, ...], str]]
    outputs: list[tuple[str, tuple[int, ...], str]]
    batch: int
    nodes: int
    views: int
    constants: int
    unsupported: dict[str, Unsupported] = field(default_factory=dict)
    costed_as_elementwise: dict[str, int] = field(default_factory=dict)
    op_counts: dict[str, int] = field(default_factory=dict)
    #: per ONNX operator, how many of its nodes were costed, views (fused biases too), views
    #: of a weight, or constants (folded)
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)


def layer_path(node_name: str) -> tuple[str, str]:
    """(layer, leaf) of an exporter node name.

    PyTorch: ``/layer3/layer3.8/conv1/Conv`` -> (``layer3.8.conv1``, ``Conv``) and
    ``/layer1/layer1.0/downsample/downsample.0/Conv`` -> ``layer1.0.downsample.0`` (a numbered
    child repeats its container's name); TensorFlow / Hugging Face: ``bert/encoder/layer_3/attention/self/query/
    MatMul`` -> (``bert.encoder.layer_3.attention.self.query``, ``MatMul``). A name without scopes
    is its own layer.
    """
    parts = [p for p in node_name.strip().split("/") if p]
    if len(parts) <= 1:
        return (parts[0] if parts else ""), ""
    units: list[str] = []  # the path as the scopes gave it
    for c in parts[:-1]:
        path = ".".join(units)
        if units and (c == path or c.startswith(path + ".")):
            units = [c]  # the scope repeats the whole path
        elif units and c.startswith(units[-1] + "."):
            units[-1] = c  # a numbered child repeats its container's name: downsample.0
        else:
            units.append(c)
    return ".".join(units), parts[-1]


_SAFE = re.compile(r"\s+")
#: Module scopes the PyTorch 2 (torch.export-based) exporter writes into each node's metadata:
#: ``['', 'layer2', 'layer2.2', 'layer2.2.relu', 'relu_16']`` (its node names carry none).
TORCH_SCOPES = "pkg.torch.onnx.name_scopes"


def torch_scopes(node) -> tuple[str, str] | None:
    """(layer, leaf) from the PyTorch 2 exporter's name scopes, or None without them."""
    for prop in node.metadata_props:
        if prop.key != TORCH_SCOPES:
            continue
        try:
            scopes = ast.literal_eval(prop.value)
        except (ValueError, SyntaxError):
            return None
        scopes = [str(x) for x in scopes if str(x)] if isinstance(scopes, list) else []
        if not scopes:
            return None
        leaf = _SAFE.sub("_", scopes[-1])
        module = _SAFE.sub("_", scopes[-2]) if len(scopes) > 1 else leaf
        return module, leaf if module != leaf else ""
    return None


#: The PyTorch 2 exporter's record of where a node was made: the stack trace of the model's
#: code (``File "mynet.py", line 42, in forward``) and the module classes that led there
#: (``['__main__.MyNet', 'torchvision.ops.misc.Conv2dNormActivation', 'aten.conv2d.default']``).
#: PyTorch's documentation of the torch.export-based exporter, "Metadata".
TORCH_STACK = "pkg.torch.onnx.stack_trace"
TORCH_CLASSES = "pkg.torch.onnx.class_hierarchy"
_FRAME = re.compile(r'File "([^"\n]{1,4096})", line (\d{1,9})')
#: Longest source text kept per operation (a file name, a line and a class name).
SOURCE_LIMIT = 200


def torch_source(node) -> str:
    """Where in the model's code a node comes from, from the PyTorch 2 exporter's metadata:
    ``mynet.py:42 in Conv2dNormActivation``: the innermost frame outside torch's own package
    (its file's name only: the trace holds the exporting machine's absolute paths, which a
    profile does not carry) and its line, and the innermost module class; '' when the node
    carries neither."""
    where, cls = "", ""
    for prop in node.metadata_props:
        if prop.key == TORCH_STACK and not where:
            frames = [
                (path.replace("\\", "/"), line)
                for path, line in _FRAME.findall(prop.value[-65536:])
            ]
            # the innermost frame of the model's own code: torch's modules (nn.Conv2d.forward
            # calling F.conv2d) are where every convolution is made, so they say nothing
            own = [f for f in frames if "/torch/" not in f[0]] or frames
            if own:
                path, line = own[-1]
                where = f"{path.rsplit('/', 1)[-1]}:{int(line)}"
        elif prop.key == TORCH_CLASSES and not cls:
            try:
                classes = ast.literal_eval(prop.value[:65536])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(classes, list):
                modules = [str(c) for c in classes if not str(c).startswith(("aten.", "prims."))]
                cls = modules[-1].rsplit(".", 1)[-1] if modules else ""
    text = f"{where} in {cls}" if where and cls else where or (f"in {cls}" if cls else "")
    # a file or class name is text to show: no control or format characters (terminal
    # escapes, a bidi override that would reorder what a reader sees)
    text = "".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cf"))
    return _SAFE.sub(" ", text)[:SOURCE_LIMIT]


class Context:
    """The importer's state while walking the nodes (what translators see)."""

    def __init__(
        self,
        name: str,
        shapes: dict[str, tuple[int, ...]],
        dtypes: dict[str, int],
        values: dict[str, np.ndarray],
        params: dict[str, int],
        training: bool,
        unknown_ops: str,
        batch: int,
    ) -> None:
        self.name = name
        self.shapes = shapes
        self.dtypes = dtypes
        self.values = values
        self.params = params  # initializer name -> numel (parameter candidates)
        self.training = training
        self.unknown_ops = unknown_ops
        self.batch = batch
        self.b = GraphBuilder()
        self.prod: dict[str, int] = {}  # activation -> row (or INPUT)
        self.root: dict[str, str] = {}  # parameter view -> initializer
        self.claimed: set[str] = set()
        self.fusable: dict[str, int] = {}  # tensor -> AMP row whose bias it may take
        self.uses: dict[str, int] = {}
        self.row_names: dict[str, int] = {}
        self.stats_per_sample: list[bool] = []
        self.unsupported: dict[str, Unsupported] = {}
        self.elementwise: dict[str, int] = {}
        self.views = 0
        self.walked: dict[str, dict[str, int]] = {}  # op type -> {costed / view / ...: nodes}
        self._index = 0

    # ---- tensor facts ----------------------------------------------------------------------
    def is_act(self, t: str) -> bool:
        return t in self.prod

    def is_param(self, t: str) -> bool:
        return t in self.root

    def shape(self, t: str) -> tuple[int, ...]:
        s = self.shapes.get(t)
        if s is None:
            raise OnnxError(
                f"{self.name}: the shape of tensor {t!r} is unknown after shape inference "
                "(a dynamic dimension? bind the inputs with --input-shape)."
            )
        return s

    def numel(self, t: str) -> int:
        return numel(self.shape(t))

    def dtype(self, t: str) -> int:
        return int(self.dtypes.get(t, 1))

    def value(self, t: str):
        return self.values.get(t)

    @staticmethod
    def attr(node, key, default=None):
        for a in node.attribute:
            if a.name == key:
                return onnx.helper.get_attribute_value(a)
        return default

    def claim(self, t: str) -> int:
        """Parameter elements of ``t``'s initializer, the first time it is used (else 0)."""
        r = self.root.get(t)
        if r is None or r in self.claimed:
            return 0
        self.claimed.add(r)
        return self.params[r]

    # ---- outputs ---------------------------------------------------------------------------
    def view(self, node) -> None:
        """The outputs are views of the first activation input (no program on an IPU)."""
        src = next(x for x in node.input if x in self.prod)
        self.views += 1
        for out in node.output:
            if out:
                self.prod[out] = self.prod[src]
                if src in self.fusable and self.uses.get(src, 0) == 1:
                    self.fusable[out] = self.fusable[src]

    def row(
        self,
        node,
        type_: str,
        family: str,
        *,
        acts: list[str] | None = None,
        in_elems: int | None = None,
        out_elems: int | None = None,
        stats_per_sample: bool = True,
        **fields,
    ) -> int:
        """Append the node's row; its outputs become activations of that row."""
        if acts is None:
            acts = [x for x in node.input if x in self.prod]
        acts = list(dict.fromkeys(acts))
        srcs = list(dict.fromkeys(self.prod[x] for x in acts))
        if len(srcs) > 2 and family != "amp":
            # the IR keeps two producer edges: those produced earliest, whose activations the
            # op's use keeps alive longest (later ones are more likely still live anyway)
            srcs = sorted(srcs)[:2]
        in0 = srcs[0] if srcs else NONE
        in1 = srcs[1] if len(srcs) > 1 else NONE
        if in_elems is None:
            in_elems = sum(self.numel(x) for x in acts)
        name, layer = self._names(node)
        if out_elems is None:
            out_elems = self.numel(node.output[0])
        fields.setdefault("weight_elems", 0)
        r = self.b.add(
            name,
            type_,
            family,
            layer=layer,
            source=torch_source(node),
            in0=in0,
            in1=in1,
            out_elems=out_elems,
            in_elems=in_elems,
            **fields,
        )
        self.stats_per_sample.append(stats_per_sample)
        for out in node.output:
            if out:
                self.prod[out] = r
        return r

    def amp_row(
        self,
        node,
        type_: str,
        *,
        groups: int = 1,
        m: int,
        k: int,
        n: int,
        acts,
        cin: int = 0,
        kernel: int = 1,
        out_width: int = 0,
        weight_elems: int = 0,
    ) -> int:
        amp = ops.facts_of(type_ if type_ in ops.zoo_facts() else "MatMul")
        r = self.row(
            node,
            type_,
            "amp",
            acts=acts,
            groups=groups,
            m=m,
            k=k,
            n=n,
            cin=cin,
            kernel=kernel,
            out_width=out_width,
            weight_elems=weight_elems,
            bwd_passes=amp["bwd_passes"],  # the zoo's: gradients are AMP ops of their own
            saves_input=amp["saves_input"],
        )
        if type_ != "BatchMatMul" or weight_elems:
            self.fusable[node.output[0]] = r
        return r

    def fuse_bias(self, node) -> bool:
        """Add(matmul or conv output, bias vector) -> the op's bias (poplin::addBias)."""
        if len(node.input) != 2:
            return False
        x, p = node.input
        if not (x in self.prod and p in self.root):
            x, p = p, x
        if not (x in self.fusable and p in self.root) or self.uses.get(x, 0) != 1:
            return False
        r = self.fusable[x]
        row = self.b.rows[r]
        channels = row["groups"] * row["n"]
        pshape = [d for d in self.shape(p) if d != 1]
        if pshape != [channels] or self.shape(node.output[0]) != self.shape(x):
            return False
        row["weight_elems"] += self.claim(p)
        self.views += 1
        self.prod[node.output[0]] = r
        return True

    def not_costed(self, node, op_type: str) -> None:
        label = node.name or f"#{self._index} ({op_type})"
        u = self.unsupported.get(op_type)
        if u is None:
            self.unsupported[op_type] = Unsupported(1, label)
        else:
            u.count += 1
        acts = [x for x in node.input if x in self.prod]
        if self.unknown_ops == "elementwise" and node.output and acts:
            self.elementwise[op_type] = self.elementwise.get(op_type, 0) + 1
            out = node.output[0]
            # a data-dependent output shape (NonZero...): costed over the input's elements
            size = self.numel(out) if out in self.shapes else self.numel(acts[0])
            self.row(node, op_type, "elementwise", passes=1, bwd_passes=1, out_elems=size)
        else:
            src = next((x for x in node.input if x in self.prod), None)
            for out in node.output:
                if out and src is not None and out in self.shapes:
                    self.prod[out] = self.prod[src]  # keep walking to find every unsupported op

    def _names(self, node) -> tuple[str, str]:
        scoped = torch_scopes(node)
        if scoped is not None:
            layer, leaf = scoped
        else:
            layer, leaf = layer_path(_SAFE.sub("_", node.name or ""))
        if not layer:
            layer = f"{node.op_type}_{self._index}"
        name = f"{layer}/{leaf}" if leaf else layer
        if name in self.row_names:
            self.row_names[name] += 1
            name = f"{name}#{self.row_names[name]}"
        else:
            self.row_names[name] = 1
        return name, layer

    # ---- the walk --------------------------------------------------------------------------
    def walk(self, graph: onnx.GraphProto, inputs: list[str]) -> None:
        for x in inputs:
            self.prod[x] = INPUT
        for r in self.params:
            self.root[r] = r
        for node in graph.node:
            for x in node.input:
                if x:
                    self.uses[x] = self.uses.get(x, 0) + 1
        for o in graph.output:
            self.uses[o.name] = self.uses.get(o.name, 0) + 1
        for node in graph.node:
            rows, views = len(self.b.rows), self.views
            self._visit(node)
            if len(self.b.rows) > rows:
                how = "costed"
            elif self.views > views:
                how = "view"
            elif any(o in self.root for o in node.output):
                how = "weight"  # Transpose(W), Expand(cls_token): the weight, seen differently
            else:
                how = "constant"
            seen = self.walked.setdefault(node.op_type, {})
            seen[how] = seen.get(how, 0) + 1

    def _visit(self, node) -> None:
        self._index += 1
        op = node.op_type
        if node.domain not in ("", "ai.onnx"):
            self.not_costed(node, f"{node.domain}.{op}")
            return
        has_act = any(x in self.prod for x in value_inputs(node))
        param_data = op == "Gather" and node.input and node.input[0] in self.root
        if op == "Range":
            self._check_range(node)
        if op in ops.CONSTANTS or (not has_act and not param_data):
            self._constant(node)
            return
        translate = ops.TRANSLATORS.get(op)
        if translate is None:
            self.not_costed(node, op)
            return
        translate(self, node)

    def _check_range(self, node) -> None:
        """A Range too long to fold keeps the count shape inference gave it (a GPT's position
        ids at 8,192 tokens): refused in one sentence when it never ends or cannot be
        simulated, as the bound inputs are."""
        label = node.name or f"#{self._index} (Range)"
        vals = [self.values.get(x) for x in node.input[:3]]
        if len(vals) == 3 and all(v is not None and np.size(v) == 1 for v in vals):
            step = float(np.asarray(vals[2]).reshape(-1)[0])
            ends = [float(np.asarray(v).reshape(-1)[0]) for v in vals[:2]]
            if step == 0 or not all(map(math.isfinite, (*ends, step))):
                raise OnnxError(
                    f"{self.name}: Range node {label!r} never ends (start {ends[0]:g}, limit "
                    f"{ends[1]:g}, step {step:g})."
                )
        out = node.output[0] if node.output else ""
        problem = dims_problem(self.shapes[out]) if out in self.shapes else None
        if problem:
            raise OnnxError(f"{self.name}: Range node {label!r} cannot be simulated: {problem}.")

    def _constant(self, node) -> None:
        """Outputs computed without activations: constants (not costed: folded, or too large
        to fold and computed once), or a parameter seen through a float op (``Transpose(W)``,
        ``Expand(cls_token)``, ``Mul(W, c)``: the trained weight itself). A comparison of a
        buffer (``mask == 0``) is not a parameter, nor is anything of an integer or bool type."""
        p = next((x for x in value_inputs(node) if x in self.root), None)
        if p is None:
            return
        for out in node.output:
            if out and self.dtype(out) in ops.FLOAT_TYPES:
                self.root[out] = self.root[p]


#: What the PyTorch 2 (torch.export-based) exporter records of each initializer: the kind of
#: the ExportedProgram input it was lifted from (``PARAMETER``, ``BUFFER``,
#: ``CONSTANT_TENSOR``), in the metadata of the initializer's value info (onnx-ir serialises a
#: value's metadata there). Only ``PARAMETER`` is in ``model.parameters()``.
TORCH_INPUT_KIND = "pkg.torch.export.graph_signature.InputSpec.kind"


def untrained(model: onnx.ModelProto) -> set[str]:
    """Initializers that are not trained parameters whatever their consumers: those the PyTorch 2
    exporter marks as buffers or lifted constants, and (without that mark) a float initializer
    small enough to keep its values that holds an infinity or a NaN (an additive mask of
    ``-inf``: no trained weight or its initialisation holds one)."""
    g = model.graph
    out: set[str] = set()
    marked: set[str] = set()
    for holder in (*g.value_info, *g.input, *g.initializer):
        for prop in holder.metadata_props:
            if prop.key == TORCH_INPUT_KIND:
                marked.add(holder.name)
                if prop.value.strip() != "PARAMETER":
                    out.add(holder.name)
    for t in g.initializer:  # the small ones: the reader dropped the others' data
        if t.name in marked or t.data_type not in ops.FLOAT_TYPES or numel(t.dims) <= 1:
            continue
        try:
            values = onnx.numpy_helper.to_array(t)
        except Exception:  # unreadable data: the checker's business, not the count's
            continue
        if not np.isfinite(values).all():
            out.add(t.name)
    return out


#: Inputs of these ops that only lend their type or shape: a constant stays a constant.
_TYPE_ONLY = {"CastLike": (1,)}


def value_inputs(node) -> list[str]:
    """The inputs whose values ``node`` reads (CastLike reads its second input's type only;
    Shape, Size and the ``*Like`` generators are constants: see ops.CONSTANTS)."""
    skip = _TYPE_ONLY.get(node.op_type, ())
    return [x for i, x in enumerate(node.input) if x and i not in skip]


def _per_sample(cols: dict[str, np.ndarray], per_sample_stats: np.ndarray, N: int) -> None:
    """Divide the batch-proportional fields by the file's batch N (vectorised)."""
    if N <= 1:
        return

    def div(a):
        return np.maximum(-(-a // N), 1)

    for key in ("out_elems", "in_elems"):
        cols[key] = div(cols[key])
    cols["stats"] = np.where(
        per_sample_stats & (cols["stats"] > 0), div(cols["stats"]), cols["stats"]
    )
    amp = cols["family"] == "amp"
    batched = amp & (cols["type"] == "BatchMatMul") & (cols["groups"] % N == 0)
    cols["groups"] = np.where(batched, cols["groups"] // N, cols["groups"])
    other = amp & ~batched
    cols["m"] = np.where(other, div(cols["m"]), cols["m"])
    cols["macs"] = cols["groups"] * cols["m"] * cols["k"] * cols["n"]


def import_onnx(
    path: str | Path,
    *,
    input_shapes: dict[str, list[int]] | None = None,
    training: bool = True,
    unknown_ops: str = "error",
) -> tuple[Graph, ImportInfo]:
    """Import ``path`` as the engine's forward graph per sample (OnnxError on bad input)."""
    p = Path(path)
    name = f"ONNX model {str(p)!r}"
    model, init = read_model(p)
    counts: dict[str, int] = {}
    for node in model.graph.node:  # as in the file (folding removes nodes below)
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    n_nodes = len(model.graph.node)
    opset = next(int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx"))
    buffers = untrained(model)  # before binding: it clears the value infos that say so
    true_inputs, batch = bind_inputs(model, name, dict(input_shapes or {}), init)
    inferred, shapes, dtypes, values = infer(model, name)
    params = {
        k: numel(dims)
        for k, (dims, dt) in init.items()
        if dt in ops.FLOAT_TYPES and numel(dims) > 1 and k not in buffers
    }
    ctx = Context(name, shapes, dtypes, values, params, training, unknown_ops, batch)
    ctx.walk(inferred.graph, true_inputs)
    info = ImportInfo(
        path=str(p),
        opset=opset,
        producer=" ".join(x for x in (model.producer_name, model.producer_version) if x),
        inputs=[(x, shapes.get(x, ()), _dtype_name(dtypes.get(x, 0))) for x in true_inputs],
        outputs=[
            (o.name, shapes.get(o.name, ()), _dtype_name(dtypes.get(o.name, 0)))
            for o in inferred.graph.output
        ],
        batch=batch,
        nodes=n_nodes,
        views=ctx.views,
        constants=n_nodes - len(ctx.b.rows) - ctx.views,  # folded before the walk, or in it
        unsupported=ctx.unsupported,
        costed_as_elementwise=ctx.elementwise,
        op_counts=counts,
        outcomes=_outcomes(counts, ctx.walked),
    )
    if ctx.unsupported and unknown_ops != "elementwise":
        parts = [
            f"{op} ({u.count} node{'s' * (u.count > 1)}, first {u.first!r})"
            for op, u in sorted(ctx.unsupported.items())
        ]
        raise OnnxError(
            f"{name} has operators the engine cannot cost: {'; '.join(parts)}; re-run with "
            "--unknown-ops elementwise to cost them as element-wise operations."
        )
    if not ctx.b.rows:
        raise OnnxError(f"{name} has no operation with work to cost (only views and constants).")
    loss_rows = []
    label_elems = 0
    output_elems = 0
    for o in inferred.graph.output:
        r = ctx.prod.get(o.name)
        if r is None or r < 0:
            continue
        loss_rows.append(r)
        s = shapes.get(o.name, ())
        output_elems += -(-numel(s) // max(batch, 1))
        label_elems += -(-numel(s[:-1]) // max(batch, 1)) if len(s) > 1 else 1
    if not loss_rows:
        raise OnnxError(f"{name}: no graph output is computed from the inputs.")
    loss_rows = list(dict.fromkeys(loss_rows))
    in_elems = [numel(shapes[x]) for x in true_inputs]
    input_elems = -(-sum(in_elems) // max(batch, 1))
    is_tokens = all(dtypes.get(x, 1) in INT_TYPES for x in true_inputs)  # ids, no images
    per_shape = [tuple(shapes[x][1:]) for x in true_inputs]
    if len(per_shape) == 1:
        input_shape = per_shape[0] or (1,)
    elif len(set(per_shape)) == 1:
        input_shape = (len(per_shape), *per_shape[0])
    else:
        input_shape = (input_elems,)
    notes = []
    if ctx.elementwise:
        listed = ", ".join(f"{op} x{n}" for op, n in sorted(ctx.elementwise.items()))
        notes.append(
            f"unknown_ops = elementwise: operators the engine cannot cost were costed as "
            f"element-wise operations ({listed}); their figures are rough."
        )
    graph = ctx.b.build(
        p.stem,
        input_elems=max(input_elems, 1),
        input_kind="tokens" if is_tokens else "image",
        input_shape=tuple(int(d) for d in input_shape),
        label_elems=max(label_elems, 1),
        output_elems=max(output_elems, 1),
        params={"loss_inputs": loss_rows, "notes": notes, "onnx": str(p)},
    )
    _per_sample(graph.cols, np.array(ctx.stats_per_sample, dtype=bool), batch)
    return graph, info


def _outcomes(counts: dict[str, int], walked: dict[str, dict[str, int]]) -> dict:
    """Per operator: nodes costed, views and constants (those folded before the walk too)."""
    out = {}
    for op, n in counts.items():
        seen = dict(walked.get(op, {}))
        folded = n - sum(seen.values())
        if folded > 0:
            seen["constant"] = seen.get("constant", 0) + folded
        out[op] = seen
    return out


def _dtype_name(dt: int) -> str:
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(dt).name if dt else "?"
    except Exception:
        return str(dt)


__all__ = ["Context", "ImportInfo", "import_onnx", "layer_path", "math"]
