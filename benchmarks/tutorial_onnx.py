"""The CNN of Graphcore's PopTorch tutorial "Efficient data loading" as an ONNX file.

graphcore/examples tutorials/tutorials/pytorch/efficient_data_loading (walkthrough.py and its
README) trains this model on random 1 x 128 x 128 images and publishes the throughput it measured
(docs/fidelity.md, rows data-loading-*):

    conv1 = Conv2d(1, 5, 3); pool = MaxPool2d(2, 2); conv2 = Conv2d(5, 12, 5)
    norm = GroupNorm(3, 12); fc1 = Linear(41772, 100); fc2 = Linear(100, 10)
    forward: pool(relu(conv1(x))) -> norm(relu(conv2(.))) -> flatten -> relu(fc1) -> fc2
             -> LogSoftmax(dim=0) (-> NLLLoss)

GroupNorm is written as PyTorch's exporter writes it below opset 18 (Reshape to the groups,
InstanceNormalization, Reshape back, per-channel Mul and Add). The weights are zero-filled
external data in a sparse file next to the model: only shapes matter to the engine. Both files
are generated (not committed): ``prepare(folder)`` writes them when they are missing;
``python benchmarks/tutorial_onnx.py [FOLDER]`` does the same from the command line.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

MODEL = "data-loading-tutorial.onnx"
DATA = "data-loading-tutorial.bin"
REFERENCE_DIR = Path(__file__).resolve().parent.parent / "assets" / "runs" / "reference"


class _ExternalWeights:
    """FP32 weights kept as external data in one file, each at the next offset (zero-filled:
    only shapes matter to the engine)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.weights: list = []
        self.offset = 0

    def add(self, name: str, dims: list[int]) -> str:
        """Add the weight ``name`` of shape ``dims``; returns its name."""
        from engine.onnx.export import external_weight

        self.weights.append(external_weight(name, dims, self.location, self.offset))
        self.offset += 4 * math.prod(dims)
        return name

    def save(self, graph, opset: int, folder: Path, model: str) -> Path:
        """Write the model of ``graph`` as ``folder / model`` and its weights' data file."""
        import onnx
        from onnx import helper as h

        proto = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
        proto.producer_name = "ipu-graph-analyser benchmarks/tutorial_onnx.py"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / self.location, "wb") as fh:
            fh.truncate(self.offset)  # sparse: zeros cost no disk blocks
        onnx.save(proto, str(folder / model))
        return folder / model


def build(folder: Path) -> Path:
    """Write the ONNX model and its zero-filled external data into ``folder``."""
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper
    from onnx import helper as h

    ext = _ExternalWeights(DATA)
    w, weights = ext.add, ext.weights

    def n(op: str, inputs: list[str], out: str, name: str, **attrs) -> onnx.NodeProto:
        return h.make_node(op, inputs, [out], name=name, **attrs)

    def layer(
        op: str, x: str, name: str, weight_dims: list[int], out: str, **attrs
    ) -> onnx.NodeProto:
        """Node ``/name/op`` on ``x`` with layer ``name``'s weight and bias."""
        params = [w(f"{name}.weight", weight_dims), w(f"{name}.bias", weight_dims[:1])]
        return n(op, [x, *params], out, f"/{name}/{op}", **attrs)

    nodes = [
        layer("Conv", "x", "conv1", [5, 1, 3, 3], "c1", kernel_shape=[3, 3]),
        n("Relu", ["c1"], "r1", "/relu/Relu"),
        n("MaxPool", ["r1"], "p1", "/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        layer("Conv", "p1", "conv2", [12, 5, 5, 5], "c2", kernel_shape=[5, 5]),
        n("Relu", ["c2"], "r2", "/relu_1/Relu"),
        n("Reshape", ["r2", "groups_shape"], "g1", "/norm/Reshape"),
        n(
            "InstanceNormalization",
            ["g1", "groups_scale", "groups_bias"],
            "g2",
            "/norm/InstanceNormalization",
            epsilon=1e-5,
        ),
        n("Reshape", ["g2", "channels_shape"], "g3", "/norm/Reshape_1"),
        n("Mul", ["g3", w("norm.weight", [12, 1, 1])], "g4", "/norm/Mul"),
        n("Add", ["g4", w("norm.bias", [12, 1, 1])], "g5", "/norm/Add"),
        n("Flatten", ["g5"], "f", "/Flatten", axis=1),
        layer("Gemm", "f", "fc1", [100, 41772], "h1", transB=1),
        n("Relu", ["h1"], "h2", "/relu_2/Relu"),
        layer("Gemm", "h2", "fc2", [10, 100], "logits", transB=1),
        n("LogSoftmax", ["logits"], "y", "/log_softmax/LogSoftmax", axis=0),
    ]
    consts = [
        numpy_helper.from_array(np.array([0, 3, -1], np.int64), "groups_shape"),
        numpy_helper.from_array(np.array([0, 12, 59, 59], np.int64), "channels_shape"),
        numpy_helper.from_array(np.ones(3, np.float32), "groups_scale"),
        numpy_helper.from_array(np.zeros(3, np.float32), "groups_bias"),
    ]
    graph = h.make_graph(
        nodes,
        "efficient_data_loading_tutorial",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 128, 128])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        initializer=weights + consts,
    )
    return ext.save(graph, 17, folder, MODEL)


#: The MLP of Graphcore's PopXL MNIST tutorials (graphcore/examples tutorials/tutorials/popxl,
#: e.g. 5_remote_variables_and_rts/mnist.ipynb, class Net): x.reshape(-1, 784) -> fc1 (512) ->
#: gelu -> fc2 (512) -> gelu -> fc3 (512) -> gelu -> fc4 (10), FP32, biases on every layer.
MNIST_MODEL = "popxl-mnist-mlp.onnx"
MNIST_DATA = "popxl-mnist-mlp.bin"


def build_mnist_mlp(folder: Path) -> Path:
    """Write the PopXL tutorials' MNIST MLP and its zero-filled external data into ``folder``."""
    from onnx import TensorProto
    from onnx import helper as h

    ext = _ExternalWeights(MNIST_DATA)
    nodes = [h.make_node("Flatten", ["x"], ["a0"], name="/Flatten", axis=1)]
    widths = [784, 512, 512, 512, 10]
    for i, (k, m) in enumerate(itertools.pairwise(widths), start=1):
        ext.add(f"fc{i}.weight", [k, m])
        ext.add(f"fc{i}.bias", [m])
        out = f"h{i}" if i < 4 else "logits"
        nodes.append(
            h.make_node(
                "Gemm", [f"a{i - 1}", f"fc{i}.weight", f"fc{i}.bias"], [out], name=f"/fc{i}"
            )
        )
        if i < 4:
            nodes.append(h.make_node("Gelu", [out], [f"a{i}"], name=f"/gelu{i}"))
    graph = h.make_graph(
        nodes,
        "popxl_mnist_mlp",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 28, 28])],
        [h.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializer=ext.weights,
    )
    return ext.save(graph, 20, folder, MNIST_MODEL)


#: The generated models, by file name: (their external data file, their builder).
MODELS = {MODEL: (DATA, build), MNIST_MODEL: (MNIST_DATA, build_mnist_mlp)}


def prepare(folder: Path = REFERENCE_DIR, model: str = MODEL) -> Path:
    """The model ``model`` in ``folder``, built when it or its data file is missing."""
    folder = Path(folder)
    data, builder = MODELS[model]
    if not (folder / model).is_file() or not (folder / data).is_file():
        builder(folder)
    return folder / model


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else REFERENCE_DIR
    print(build(where))
    print(build_mnist_mlp(where))
