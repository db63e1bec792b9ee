"""The MLP of the PopTorch data-batching documentation: 784-784-784-128-10 with ReLUs."""

from __future__ import annotations

from engine.graph import INPUT, Graph, GraphBuilder


def mlp(num_classes: int = 10, sizes: tuple[int, ...] = (784, 784, 784, 128)) -> Graph:
    """``layers.0`` Linear(784, 784), ``layers.1`` ReLU, ... ``layers.6`` Linear(128, classes)."""
    b = GraphBuilder()
    b._input_elems = sizes[0]
    dims = [*sizes, num_classes]
    prev = INPUT
    idx = 0
    for i in range(len(dims) - 1):
        k, n = dims[i], dims[i + 1]
        prev = b.linear(f"layers.{idx}", prev, 1, k, n)
        idx += 1
        if i < len(dims) - 2:
            prev = b.add(
                f"layers.{idx}", "Relu", "elementwise", in0=prev, out_elems=n, saves_output=True
            )
            idx += 1
    return b.build(
        "mlp",
        input_elems=sizes[0],
        input_kind="image",
        input_shape=(sizes[0],),
        label_elems=1,
        output_elems=num_classes,
        params={"loss_inputs": [prev]},
    )
