"""Model graph IR: the forward graph of a model as a struct of numpy arrays, per sample.

A :class:`Graph` holds one row per forward operation, in topological (execution) order. Every
column is a numpy array of the same length, so costs are computed for all operations at once:

``name``            unique op name, e.g. ``layer1.0.conv1``, ``encoder.layer.3.attention.scores``
``layer``           module path used for split points / checkpoints (``layer1.0.conv1``); a split
                    point may name any prefix of it (``layer3.8`` starts at the first op of block 8)
``type``            op type string (``Conv``, ``MatMul``, ``BatchMatMul``, ``BatchNorm``, ...)
``family``          codelet family (keys of ``Target.vertex_families``: amp, elementwise, norm...)
``in0``, ``in1``    producer op of each input (-1 = the graph input, -2 = none)
``macs``            multiply-accumulates per sample (AMP ops; 0 otherwise)
``groups``          independent matmul groups per sample (attention heads; 1 otherwise)
``m``, ``k``, ``n`` AMP problem per group per sample: rows (output pixels / tokens), reduction,
                    output columns (``macs = groups * m * k * n``)
``cin``, ``kernel`` reduction split as ``k = cin * kernel`` (input channels x kernel positions)
``out_width``       width of one row of an AMP op's output field (a convolution's output width;
                    0 = the field is one row, as for matmuls): PopLibs' AMP vertices run per row
``out_elems``       output elements per sample
``in_elems``        input elements read per sample (all inputs)
``weight_elems``    trainable parameter elements of the op (0 if none or tied)
``passes``          element-wise vector passes of the forward op over its elements (non-AMP)
``bwd_passes``      element-wise passes of its backward (0 = no backward work)
``saves_input``     the backward needs the op's input(s)
``saves_output``    the backward needs the op's output
``cross_tile``      the op reduces across tiles (batch-norm statistics, global pooling)
``stats``           outputs of that cross-tile reduction (batch-norm: 2 x channels per
                    micro-batch; global pooling: channels per sample)

Plus model-level facts: input elements and dtype per sample, label elements per sample, output
elements per sample (the logits), and the ordered list of layer names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.errors import ModelError

#: Column names and dtypes of the graph table.
COLUMNS: dict[str, str] = {
    "name": "object",
    "layer": "object",
    "source": "object",
    "type": "object",
    "family": "object",
    "in0": "int32",
    "in1": "int32",
    "macs": "int64",
    "groups": "int64",
    "m": "int64",
    "k": "int64",
    "n": "int64",
    "cin": "int64",
    "kernel": "int64",
    "out_width": "int64",
    "out_elems": "int64",
    "in_elems": "int64",
    "weight_elems": "int64",
    "passes": "float64",
    "bwd_passes": "float64",
    "saves_input": "bool",
    "saves_output": "bool",
    "cross_tile": "bool",
    "stats": "int64",
}

#: Element-wise passes of a dropout (forward, and its gradient: the same op on the gradient):
#: ``poprand``'s ``DropoutSupervisor`` runs 2 cycles per 64-bit vector (PopLibs
#: lib/poprand/poprandCycleEstimators.cpp: ``2 * ceil(n / vectorWidth)``) where an element-wise
#: pass costs the target's ``elementwise_cycles_per_vector`` (3): two thirds of a pass.
DROPOUT_PASSES = 2.0 / 3.0

INPUT = -1
NONE = -2
#: Largest dimension a model's tensor may have (2^31 - 1: PopART and PopLibs index tensors with
#: 32-bit sizes per dimension) and most elements one tensor may hold (2^40, 4 TiB of float32:
#: beyond any IPU system's memory, and far enough below 2^63 that costs in int64 never wrap).
MAX_DIM = 2**31 - 1
MAX_ELEMENTS = 2**40
#: Largest count (elements, MACs) of one operation per sample: the engine multiplies these by
#: micro-batches, replicas and bytes in int64.
COST_LIMIT = 2**48


def dims_problem(dims) -> str | None:
    """Why a tensor of ``dims`` cannot be simulated (None when it can): a dimension below 1 or
    above :data:`MAX_DIM`, or more than :data:`MAX_ELEMENTS` elements."""
    for i, d in enumerate(dims):
        if int(d) < 1:
            return f"dimension {i} is {int(d)}; dimensions are whole numbers >= 1"
        if int(d) > MAX_DIM:
            return (
                f"dimension {i} is {int(d):,}, more than the largest the engine takes ({MAX_DIM:,})"
            )
    n = 1
    for d in dims:
        n *= int(d)
    if n > MAX_ELEMENTS:
        return f"it holds {n:,} elements, more than the engine simulates (2^40)"
    return None


@dataclass
class Graph:
    """The forward graph of one model, per sample (see the module docstring for the columns)."""

    model: str
    cols: dict[str, np.ndarray]
    input_elems: int
    input_kind: str  # "image" (float, uint8 possible) or "tokens" (int32)
    input_shape: tuple[int, ...]
    label_elems: int
    output_elems: int
    params: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cols["name"])

    def __getitem__(self, key: str) -> np.ndarray:
        return self.cols[key]

    @property
    def num_params(self) -> int:
        """Trainable parameters (tied weights counted once)."""
        return int(self.cols["weight_elems"].sum())

    @property
    def layer_names(self) -> list[str]:
        """Every module path and every prefix of one (``layer3``, ``layer3.8``, ...), in order."""
        seen: dict[str, None] = {}
        for layer in self.cols["layer"]:
            parts = str(layer).split(".")
            for i in range(1, len(parts) + 1):
                seen.setdefault(".".join(parts[:i]), None)
        return list(seen)

    def first_op_of(self, layer: str) -> int:
        """Index of the first op whose layer is ``layer`` or inside it (-1 if none)."""
        # a plain str.startswith per op: numpy.char costs a 5 ms import in a fresh process
        prefix = layer + "."
        for i, name in enumerate(self.cols["layer"].tolist()):
            name = str(name)
            if name == layer or name.startswith(prefix):
                return i
        return -1

    def ops_of(self, layer: str) -> np.ndarray:
        prefix = layer + "."
        return np.flatnonzero(
            [name == layer or name.startswith(prefix) for name in map(str, self.cols["layer"])]
        )


class GraphBuilder:
    """Appends ops row by row (model construction is small; costing is vectorised)."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def linear(self, name: str, src: int, m: int, k: int, n: int, *, weight: bool = True) -> int:
        """A fully connected layer (``MatMul`` on the AMP): [m, k] x [k, n] plus a bias of n; its
        trainable elements are the [k, n] weight and the bias, or, with ``weight=False`` (a weight
        tied to another op's, e.g. BERT's decoder), the bias only."""
        return self.add(
            name,
            "MatMul",
            "amp",
            in0=src,
            out_elems=m * n,
            m=m,
            k=k,
            n=n,
            weight_elems=(k * n + n) if weight else n,
            bwd_passes=0,
            saves_input=True,
        )

    def add(
        self,
        name: str,
        type_: str,
        family: str,
        *,
        layer: str | None = None,
        source: str = "",
        in0: int = INPUT,
        in1: int = NONE,
        out_elems: int,
        in_elems: int | None = None,
        groups: int = 1,
        m: int = 0,
        k: int = 0,
        n: int = 0,
        cin: int = 0,
        kernel: int = 1,
        out_width: int = 0,
        weight_elems: int = 0,
        passes: float = 1.0,
        bwd_passes: float = 1.0,
        saves_input: bool = False,
        saves_output: bool = False,
        cross_tile: bool = False,
        stats: int = 0,
    ) -> int:
        if in_elems is None:
            in_elems = self.out_elems(in0) + (self.out_elems(in1) if in1 >= 0 else 0)
        self.rows.append(
            dict(
                name=name,
                layer=layer if layer is not None else name,
                source=source,
                type=type_,
                family=family,
                in0=in0,
                in1=in1,
                macs=groups * m * k * n,
                groups=groups,
                m=m,
                k=k,
                n=n,
                cin=cin if cin else k,
                kernel=kernel,
                out_width=out_width,
                out_elems=out_elems,
                in_elems=in_elems,
                weight_elems=weight_elems,
                passes=passes,
                bwd_passes=bwd_passes,
                saves_input=saves_input,
                saves_output=saves_output,
                cross_tile=cross_tile,
                stats=stats,
            )
        )
        return len(self.rows) - 1

    def out_elems(self, op: int) -> int:
        if op < 0:
            return self._input_elems
        return self.rows[op]["out_elems"]

    _input_elems: int = 0

    def build(self, model: str, **kw) -> Graph:
        """The :class:`Graph` of the rows added; a count above :data:`COST_LIMIT` (it would
        wrap int64 once multiplied by the micro-batch) is a ModelError naming the operation."""
        cols: dict[str, np.ndarray] = {}
        for c, dt in COLUMNS.items():
            values = [r[c] for r in self.rows]
            try:
                cols[c] = np.array(values, dtype=dt if dt != "object" else object)
            except OverflowError:
                cols[c] = np.array([COST_LIMIT + 1], dtype=np.int64)
            if dt == "int64" and cols[c].size and int(np.abs(cols[c]).max()) > COST_LIMIT:
                big = next(r for r in self.rows if abs(int(r[c])) > COST_LIMIT)
                raise ModelError(
                    f"model {model!r}: operation {big['name']!r} has {c} = {int(big[c]):,} per "
                    "sample, more than the engine can cost (2^48); check the model's dimensions."
                )
        return Graph(model=model, cols=cols, **kw)


__all__ = [
    "COLUMNS",
    "COST_LIMIT",
    "INPUT",
    "MAX_DIM",
    "MAX_ELEMENTS",
    "NONE",
    "Graph",
    "GraphBuilder",
    "dims_problem",
]
