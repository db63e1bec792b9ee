"""Reading an ONNX file: parse, opset, external data, cycles, checker (no weight values).

Every problem is an :class:`OnnxError` with one sentence naming the file. The weights' values are
never read: external-data files are checked for presence and size only, and initializers of more
than :data:`SMALL` elements are replaced by graph inputs of the same type and shape before shape
inference (so their bytes are not copied around; parameters are counted from shapes).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from pathlib import Path

import onnx
import onnx.inliner
from onnx import AttributeProto, TensorProto

from engine.errors import ModelError
from profiles.inputs import inside, open_regular, regular_stat

#: Oldest default-domain opset the importer accepts (PopART 1.x / 2.x import opsets 6..; exporters
#: of the last years write 11 or newer).
OLDEST_OPSET = 11
#: Initializers with at most this many elements keep their values (shape computations, scales).
SMALL = 4096


#: Largest ONNX file read: a protobuf message cannot exceed 2 GiB (larger models keep their
#: weights in external data, which is never read).
MAX_FILE = 2**31 - 1
_SIZE_HINT = (
    "(ONNX files are protobuf messages of at most 2 GiB; larger models keep weights in "
    "external data.)"
)
#: Most nodes a model may have. Exports of BERT-Large have ~2,500 nodes, of GPT-2 XL ~10,000, of an
#: 80-layer decoder (Llama-2-70B) ~20,000-40,000. Import memory and time are linear but not small
#: (model-info on a 30,000-node chain: 10.5 s, 540 MB peak; 150,000 nodes: 39 s, 2.4 GB), so a
#: model beyond this is refused once parsed, before any inference or import (docs/onnx.md).
MAX_NODES = 50_000


def _protobuf_start(byte: int) -> bool:
    """Whether ``byte`` can start a serialised ModelProto: the tag of a field numbered 1..15
    (every ModelProto field has a number below 16) with a valid wire type."""
    return (byte >> 3) != 0 and (byte & 7) in (0, 1, 2, 5)


class OnnxError(ModelError):
    """An ONNX model cannot be imported (one sentence naming the file and the problem)."""


def newest_opset() -> int:
    """The newest default-domain opset of the installed onnx package."""
    return int(onnx.defs.onnx_opset_version())


def _first_line(exc: BaseException, limit: int = 240) -> str:
    text = str(exc).strip().splitlines()
    line = next((t.strip() for t in text if t.strip()), type(exc).__name__)
    line = line.removeprefix("[ONNXRuntimeError]").strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def read_model(path: str | Path) -> tuple[onnx.ModelProto, dict]:
    """Parse and check ``path``; returns the model with large initializers' data dropped and
    ``{initializer: (dims, onnx dtype)}`` of every initializer (see :func:`split_initializers`).

    The checker runs on the model without its large initializers (they are graph inputs of the
    same type and shape by then): it checks the graph, not the weights' bytes, which would be
    serialised again for it (seconds and a copy of the file's size for BERT's 0.5 GB)."""
    p = Path(path)
    name = f"ONNX model {str(p)!r}"
    with open_regular(p, name, OnnxError, MAX_FILE, _SIZE_HINT) as f:
        head = f.read(8)
        if not head:
            raise OnnxError(f"{name} is empty (0 bytes), not an ONNX model.")
        if head.startswith(b"\x89HDF"):
            raise OnnxError(f"{name} is an HDF5 file (a profile?), not an ONNX model.")
        if not _protobuf_start(head[0]):
            raise OnnxError(
                f"file {str(p)!r} is not an ONNX model (it does not start with a protobuf field)."
            )
        f.seek(0)
        try:
            model = onnx.load_model_from_string(f.read())
        except Exception as exc:  # protobuf DecodeError and friends
            raise OnnxError(
                f"file {str(p)!r} is not an ONNX model or is truncated (the protobuf parser "
                f"says: {_first_line(exc)})."
            ) from None
    if not model.HasField("graph") or not model.ir_version:
        raise OnnxError(
            f"file {str(p)!r} is not an ONNX model or is truncated (it holds no graph or IR "
            "version)."
        )
    if len(model.graph.node) > MAX_NODES:
        raise OnnxError(
            f"{name} has {len(model.graph.node):,} nodes, more than the {MAX_NODES:,} the importer "
            "takes (exports of the largest published models have tens of thousands)."
        )
    _check_expanded_size(model, name)
    if model.functions:
        # bounded above: the inlined graph has at most MAX_NODES nodes
        model = onnx.inliner.inline_local_functions(model)
    _check_opset(model, name)
    _check_external_data(model, p, name)
    _sort_or_cycle(model, name)
    init = split_initializers(model)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx.checker.ValidationError, or C++ errors for odd protos
        raise OnnxError(f"{name} fails the ONNX checker: {_first_line(exc)}") from None
    return model, init


def _subgraphs(node: onnx.NodeProto):
    """The control-flow bodies of ``node`` (If's branches, Loop's and Scan's bodies)."""
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            yield a.g
        elif a.type == AttributeProto.GRAPHS:
            yield from a.graphs


#: A model-local function: (domain, name, overload), as a node that calls it names it.
FunctionKey = tuple[str, str, str]


def _check_expanded_size(model: onnx.ModelProto, name: str) -> None:
    """Refuse a model of more than :data:`MAX_NODES` nodes once its model-local functions are
    inlined and the nodes of its control-flow subgraphs counted, or whose functions call
    themselves.

    A function called twice by another, 40 levels down, is 2^40 nodes from 3 kB; subgraphs hide
    nodes from a count of the top-level graph. Each body (the graph, each function) is walked
    once, its own nodes and its calls counted; the walk stops once the nodes it has seen pass the
    limit, and the expanded sizes are summed over the call graph (memoised, capped above the
    limit), so the check takes time and memory linear in at most MAX_NODES nodes."""
    funcs: dict[FunctionKey, onnx.FunctionProto] = {
        (f.domain, f.name, getattr(f, "overload", "")): f for f in model.functions
    }
    seen = 0

    def too_big() -> OnnxError:
        return OnnxError(
            f"{name} has more than {MAX_NODES:,} nodes once its model-local functions are "
            "inlined and its control-flow subgraphs counted (the importer takes at most "
            f"{MAX_NODES:,})."
        )

    def body(nodes: Sequence[onnx.NodeProto]) -> tuple[int, dict[FunctionKey, int]]:
        """(own nodes, {callee: calls}) of a body and its subgraphs."""
        nonlocal seen
        own = 0
        calls: dict[FunctionKey, int] = {}
        stack = [nodes]
        while stack:
            nodes = stack.pop()
            seen += len(nodes)
            if seen > MAX_NODES:
                raise too_big()
            for node in nodes:
                callee = (node.domain, node.op_type, getattr(node, "overload", ""))
                if callee in funcs:
                    calls[callee] = calls.get(callee, 0) + 1
                else:
                    own += 1
                stack.extend(g.node for g in _subgraphs(node))
        return own, calls

    # the bodies by function, the main graph's under None
    bodies: dict[FunctionKey | None, tuple[int, dict[FunctionKey, int]]] = {
        None: body(model.graph.node)
    }
    bodies.update((k, body(f.node)) for k, f in funcs.items())
    size: dict[FunctionKey | None, int] = {}
    for root in bodies:
        if root in size:
            continue
        # depth-first over the call graph, an explicit stack (no recursion limit)
        path: list[FunctionKey | None] = [root]
        callees: list[Iterator[FunctionKey]] = [iter(bodies[root][1])]
        on_path: set[FunctionKey | None] = {root}
        while path:
            # None: every callee of the body on top is sized (a callee is never the main graph)
            nxt = next((c for c in callees[-1] if c not in size), None)
            if nxt is not None:
                if nxt in on_path:
                    raise _recursive(name, nxt, [*path[path.index(nxt) :], nxt])
                path.append(nxt)
                callees.append(iter(bodies[nxt][1]))
                on_path.add(nxt)
                continue
            key = path.pop()
            callees.pop()
            on_path.discard(key)
            own, calls = bodies[key]
            size[key] = min(own + sum(n * size[c] for c, n in calls.items()), MAX_NODES + 1)
    if size[None] > MAX_NODES:
        raise too_big()


def _recursive(name: str, key: FunctionKey, path: list[FunctionKey | None]) -> OnnxError:
    def label(k: FunctionKey) -> str:
        return f"{k[0]}::{k[1]}" if k[0] else k[1]

    via = " -> ".join(label(k) for k in path if k is not None)
    return OnnxError(
        f"{name}: the model-local function {label(key)!r} calls itself ({via}); a function "
        "cannot be inlined into itself."
    )


def _check_opset(model: onnx.ModelProto, name: str) -> None:
    versions = {o.domain or "ai.onnx": int(o.version) for o in model.opset_import}
    v = versions.get("ai.onnx")
    newest = newest_opset()
    if v is None:
        raise OnnxError(f"{name} imports no default-domain (ai.onnx) opset.")
    if v > newest:
        raise OnnxError(
            f"{name} uses opset {v}, newer than {newest}, the newest the installed onnx "
            f"{onnx.__version__} supports; export with opset_version <= {newest} or upgrade onnx."
        )
    if v < OLDEST_OPSET:
        raise OnnxError(
            f"{name} uses opset {v}; the importer takes opsets {OLDEST_OPSET} to {newest}: "
            f"export with opset_version >= {OLDEST_OPSET} (or convert it with "
            "onnx.version_converter)."
        )


def _external(t: TensorProto) -> dict[str, str] | None:
    if t.data_location != TensorProto.EXTERNAL:
        return None
    return {e.key: e.value for e in t.external_data}


def external_locations(path: str | Path) -> tuple[str, ...]:
    """The external-data locations the model's initializers name, in order, each once (what
    :func:`read_model` checks for presence and size; never read). () for a file that does not
    parse as ONNX (:func:`read_model` refuses it for its bytes alone)."""
    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except Exception:  # not ONNX, damaged: read_model names the problem
        return ()
    locs = []
    for t in model.graph.initializer:
        ext = _external(t)
        if ext is not None:
            locs.append(ext.get("location", ""))
    return tuple(dict.fromkeys(locs))


def _whole(ext: dict[str, str], key: str, name: str, tensor: str) -> int:
    text = ext.get(key, "") or "0"
    if not (text.isascii() and text.isdigit()):
        raise OnnxError(
            f"{name}: initializer {tensor!r} has external data whose {key} is {text[:40]!r}, "
            "not a whole number of bytes."
        )
    return int(text)


def _check_external_data(model: onnx.ModelProto, p: Path, name: str) -> None:
    """Each external-data file lies inside the model's folder (as the ONNX checker demands: no
    absolute path, no ``..``, no link out; such a model is refused without looking at the path,
    so nothing is told about files elsewhere), is a regular file and is long enough (never
    read)."""
    sizes: dict[str, int | None] = {}
    for t in model.graph.initializer:
        ext = _external(t)
        if ext is None:
            continue
        loc = ext.get("location", "")
        if not loc:
            raise OnnxError(f"{name}: initializer {t.name!r} has external data without a location.")
        if "\0" in loc:
            raise OnnxError(
                f"{name}: the external data location {loc[:200]!r} of initializer {t.name!r} "
                "holds a NUL byte, which no file name can hold."
            )
        need = _whole(ext, "offset", name, t.name) + _whole(ext, "length", name, t.name)
        if loc not in sizes:
            f = inside(p.parent, loc)
            if f is None:
                raise OnnxError(
                    f"{name}: the external data location {loc[:200]!r} of initializer "
                    f"{t.name!r} is not inside the model's folder (absolute, '..' or a link out); "
                    "external data must sit beside the model."
                )
            try:
                sizes[loc] = regular_stat(f, "", OnnxError).st_size
            except OnnxError as exc:
                if "does not exist" not in str(exc):
                    raise OnnxError(
                        f"{name}: the external data file {loc!r} of initializer {t.name!r}"
                        f"{str(exc).rstrip('.')}."
                    ) from None
                sizes[loc] = None
        size = sizes[loc]
        if size is None:
            raise OnnxError(
                f"{name}: the external data file {loc!r} of initializer {t.name!r} is missing "
                f"(looked in {str(p.parent)!r})."
            )
        if need > size:
            raise OnnxError(
                f"{name}: the external data file {loc!r} holds {size:,} bytes but initializer "
                f"{t.name!r} needs bytes up to {need:,} (truncated?)."
            )


def _sort_or_cycle(model: onnx.ModelProto, name: str) -> None:
    """Topologically sort the nodes (exporters already do); a cycle is an error."""
    nodes = model.graph.node
    producer: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for out in node.output:
            if out:
                producer[out] = i
    users: list[list[int]] = [[] for _ in nodes]
    indeg = [0] * len(nodes)
    in_order = True
    for i, node in enumerate(nodes):
        deps = {producer[x] for x in node.input if x in producer}
        indeg[i] = len(deps)
        in_order = in_order and all(d < i for d in deps)
        for d in deps:
            users[d].append(i)
    if in_order:
        return
    # Kahn's algorithm, taking the earliest node in file order first (stable for sorted parts)
    ready = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in users[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, j)
    if len(order) < len(nodes):
        stuck = next(i for i, d in enumerate(indeg) if d > 0)
        node = nodes[stuck]
        label = node.name or f"#{stuck} ({node.op_type})"
        raise OnnxError(
            f"{name} has a cycle: node {label!r} ({node.op_type}) depends on its own output."
        )
    copies = [onnx.NodeProto() for _ in order]
    for c, i in zip(copies, order):
        c.CopyFrom(nodes[i])
    model.graph.ClearField("node")
    model.graph.node.extend(copies)


def numel(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def split_initializers(model: onnx.ModelProto) -> dict[str, tuple[tuple[int, ...], int]]:
    """Replace large or external initializers by graph inputs of their type and shape.

    Returns ``{name: (dims, onnx dtype)}`` of every initializer (the ones kept included).
    """
    g = model.graph
    info: dict[str, tuple[tuple[int, ...], int]] = {}
    keep = []
    moved = []
    input_names = {i.name for i in g.input}
    for t in g.initializer:
        dims = tuple(int(d) for d in t.dims)
        info[t.name] = (dims, int(t.data_type))
        if _external(t) is None and numel(dims) <= SMALL:
            c = TensorProto()
            c.CopyFrom(t)
            keep.append(c)
        else:
            moved.append(t)
    if moved:
        g.ClearField("initializer")
        g.initializer.extend(keep)
        for t in moved:
            if t.name not in input_names:
                g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    return info


__all__ = [
    "OLDEST_OPSET",
    "OnnxError",
    "external_locations",
    "newest_opset",
    "numel",
    "read_model",
    "split_initializers",
]
