"""Modern CNNs as ONNX graphs, built with onnx.helper at test time (weights are zeros).

The operators, shapes and node names are those torchvision's exporter writes for its models
(``torch.onnx.export`` with the module scopes, docs/onnx.md): ``Conv`` with a ``group``
attribute for the depthwise and grouped convolutions, ``BatchNormalization`` /
``GroupNormalization``, ``HardSwish`` / ``HardSigmoid`` and ``Sigmoid`` x ``Mul`` (SiLU), the
squeeze-and-excite's ``GlobalAveragePool`` -> 1 x 1 ``Conv`` -> gate -> ``Mul``, ConvNeXt's
``Transpose`` -> ``LayerNormalization`` -> ``MatMul`` (+ bias ``Add``) -> ``Gelu`` blocks with
its layer scale ``Mul``. Layer paths follow torchvision's modules (``features.3.block.1``,
``layer3.4.conv2``) so that split points name them.

Architectures: torchvision's ``mobilenet_v3_small`` / ``_large`` (``_mobilenet_v3_conf``),
``efficientnet_b0`` / ``_b4`` (``_efficientnet_conf``: width 1.0 / 1.4, depth 1.0 / 1.8),
Graphcore's EfficientNet variant with group convolutions of 16 channels, expansion ratio 4 and
group norm (graphcore/examples ``efficientnet_group_dim: 16``, ``efficientnet_expand_ratio: 4``,
``norm_num_groups: 4``), ResNeXt-101 32 x 4d (torchvision's ``ResNet`` with ``groups=32,
width_per_group=4``; group norm of 32 groups as Graphcore's TensorFlow example trains it) and
``convnext_tiny``.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = 20  # Gelu is a default-domain operator from opset 20


def _div8(v: float, divisor: int = 8) -> int:
    """torchvision's ``_make_divisible``."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


class Net:
    """A graph under construction: nodes named ``/scope/.../Op`` as torch's exporter names
    them, zero initializers, one tensor name per value."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: list = []
        self.inits: list = []
        self._n = 0
        self.hw: dict[str, int] = {}  # each value's map size (square), for explicit reshapes

    def _t(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def w(self, *shape) -> str:
        name = self._t("w")
        self.inits.append(nh.from_array(np.zeros(shape, np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], scope: str, **attrs) -> str:
        out = self._t(op.lower())
        path = "/" + "/".join(scope.split(".")) + "/" + op
        self.nodes.append(h.make_node(op, inputs, [out], name=path, **attrs))
        known = [self.hw[i] for i in inputs if i in self.hw]
        if known:  # a broadcast (the squeeze-and-excite's scale) keeps the larger map
            self.hw[out] = 1 if op == "GlobalAveragePool" else max(known)
        return out

    def const(self, values) -> str:
        name = self._t("shape")
        self.inits.append(nh.from_array(np.array(values, np.int64), name))
        return name

    def conv(self, x, cin, cout, k, scope, stride=1, groups=1, bias=False, pad=None):
        p = k // 2 if pad is None else pad
        ins = [x, self.w(cout, cin // groups, k, k)] + ([self.w(cout)] if bias else [])
        y = self.node(
            "Conv",
            ins,
            scope,
            kernel_shape=[k, k],
            strides=[stride] * 2,
            pads=[p] * 4,
            group=groups,
        )
        self.hw[y] = (self.hw[x] + 2 * p - k) // stride + 1
        return y

    def bn(self, x, c, scope):
        ws = [self.w(c) for _ in range(4)]
        return self.node("BatchNormalization", [x, *ws], scope)

    def gn(self, x, c, groups, scope):
        """nn.GroupNorm as torch's exporter writes it below opset 18: Reshape to (N, groups,
        -1), InstanceNormalization, Reshape back, Mul by the weight, Add the bias (onnx's
        shape inference leaves a GroupNormalization node's output unknown)."""
        hw = self.hw[x]
        # the batch as -1 (the exporter writes 0, "copy the dimension", which the engine's
        # importer reads as a zero-sized dimension)
        y = self.node("Reshape", [x, self.const([-1, groups, c // groups * hw * hw])], scope)
        y = self.node("InstanceNormalization", [y, self.w(groups), self.w(groups)], scope)
        y = self.node("Reshape", [y, self.const([-1, c, hw, hw])], scope)
        y = self.node("Mul", [y, self.w(c, 1, 1)], scope)
        return self.node("Add", [y, self.w(c, 1, 1)], scope)

    def act(self, x, kind, scope):
        if kind == "silu":  # nn.SiLU exports as x * sigmoid(x)
            return self.node("Mul", [x, self.node("Sigmoid", [x], scope)], scope)
        op = {"relu": "Relu", "hardswish": "HardSwish", "hardsigmoid": "HardSigmoid"}.get(
            kind, "Sigmoid"
        )
        return self.node(op, [x], scope)

    def se(self, x, c, squeeze, scope, act, gate):
        """SqueezeExcitation: avgpool -> fc1 (1 x 1 Conv, bias) -> act -> fc2 -> gate -> scale."""
        s = self.node("GlobalAveragePool", [x], f"{scope}.avgpool")
        s = self.conv(s, c, squeeze, 1, f"{scope}.fc1", bias=True)
        s = self.act(s, act, f"{scope}.activation")
        s = self.conv(s, squeeze, c, 1, f"{scope}.fc2", bias=True)
        s = self.act(s, gate, f"{scope}.scale_activation")
        return self.node("Mul", [s, x], scope)

    def linear(self, x, cin, cout, scope):
        y = self.node("MatMul", [x, self.w(cin, cout)], scope)
        return self.node("Add", [y, self.w(cout)], scope)

    def head(self, x, c, hidden, classes, act, scope="classifier", pool=True):
        if pool:
            x = self.node("GlobalAveragePool", [x], "avgpool")
        x = self.node("Flatten", [x], "flatten")
        if hidden:
            x = self.node("Gemm", [x, self.w(hidden, c), self.w(hidden)], f"{scope}.0", transB=1)
            x = self.act(x, act, f"{scope}.1")
            c = hidden
        return self.node("Gemm", [x, self.w(classes, c), self.w(classes)], f"{scope}.3", transB=1)

    def model(self, x: str, y: str, image: int, classes: int) -> onnx.ModelProto:
        """The model of the nodes added (input ``x`` of ``image`` x ``image``, output ``y``)."""
        inputs = [h.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", 3, image, image])]
        outputs = [h.make_tensor_value_info(y, TensorProto.FLOAT, ["batch", classes])]
        g = h.make_graph(self.nodes, self.name, inputs, outputs, self.inits)
        return h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)])


# ---- MobileNetV3 ----------------------------------------------------------------------------

#: torchvision _mobilenet_v3_conf: (input, kernel, expanded, out, SE, activation, stride)
MOBILENET_V3 = {
    "large": [
        (16, 3, 16, 16, False, "relu", 1),
        (16, 3, 64, 24, False, "relu", 2),
        (24, 3, 72, 24, False, "relu", 1),
        (24, 5, 72, 40, True, "relu", 2),
        (40, 5, 120, 40, True, "relu", 1),
        (40, 5, 120, 40, True, "relu", 1),
        (40, 3, 240, 80, False, "hardswish", 2),
        (80, 3, 200, 80, False, "hardswish", 1),
        (80, 3, 184, 80, False, "hardswish", 1),
        (80, 3, 184, 80, False, "hardswish", 1),
        (80, 3, 480, 112, True, "hardswish", 1),
        (112, 3, 672, 112, True, "hardswish", 1),
        (112, 5, 672, 160, True, "hardswish", 2),
        (160, 5, 960, 160, True, "hardswish", 1),
        (160, 5, 960, 160, True, "hardswish", 1),
    ],
    "small": [
        (16, 3, 16, 16, True, "relu", 2),
        (16, 3, 72, 24, False, "relu", 2),
        (24, 3, 88, 24, False, "relu", 1),
        (24, 5, 96, 40, True, "hardswish", 2),
        (40, 5, 240, 40, True, "hardswish", 1),
        (40, 5, 240, 40, True, "hardswish", 1),
        (40, 5, 120, 48, True, "hardswish", 1),
        (48, 5, 144, 48, True, "hardswish", 1),
        (48, 5, 288, 96, True, "hardswish", 2),
        (96, 5, 576, 96, True, "hardswish", 1),
        (96, 5, 576, 96, True, "hardswish", 1),
    ],
}


def mobilenet_v3(size: str = "large", image: int = 224, classes: int = 1000) -> onnx.ModelProto:
    """torchvision ``mobilenet_v3_<size>``."""
    n = Net(f"mobilenet_v3_{size}")
    n.hw["input"] = image
    x = n.conv("input", 3, 16, 3, "features.0.0", stride=2)
    x = n.act(n.bn(x, 16, "features.0.1"), "hardswish", "features.0.2")
    for i, (cin, k, exp, cout, se, act, s) in enumerate(MOBILENET_V3[size], start=1):
        scope, j, y = f"features.{i}.block", 0, x
        if exp != cin:
            y = n.conv(y, cin, exp, 1, f"{scope}.0.0")
            y = n.act(n.bn(y, exp, f"{scope}.0.1"), act, f"{scope}.0.2")
            j = 1
        y = n.conv(y, exp, exp, k, f"{scope}.{j}.0", stride=s, groups=exp)
        y = n.act(n.bn(y, exp, f"{scope}.{j}.1"), act, f"{scope}.{j}.2")
        if se:
            j += 1
            y = n.se(y, exp, _div8(exp // 4), f"{scope}.{j}", "relu", "hardsigmoid")
        j += 1
        y = n.bn(n.conv(y, exp, cout, 1, f"{scope}.{j}.0"), cout, f"{scope}.{j}.1")
        x = n.node("Add", [x, y], f"features.{i}") if s == 1 and cin == cout else y
    last_in = MOBILENET_V3[size][-1][3]
    last = 6 * last_in
    i = len(MOBILENET_V3[size]) + 1
    x = n.conv(x, last_in, last, 1, f"features.{i}.0")
    x = n.act(n.bn(x, last, f"features.{i}.1"), "hardswish", f"features.{i}.2")
    hidden = 1280 if size == "large" else 1024
    return n.model("input", n.head(x, last, hidden, classes, "hardswish"), image, classes)


# ---- EfficientNet ---------------------------------------------------------------------------

#: torchvision _efficientnet_conf (B0): (expand ratio, kernel, stride, input, output, layers)
EFFICIENTNET_B0 = [
    (1, 3, 1, 32, 16, 1),
    (6, 3, 2, 16, 24, 2),
    (6, 5, 2, 24, 40, 2),
    (6, 3, 2, 40, 80, 3),
    (6, 5, 1, 80, 112, 3),
    (6, 5, 2, 112, 192, 4),
    (6, 3, 1, 192, 320, 1),
]
#: (width, depth, resolution) multipliers
EFFICIENTNET_SIZES = {"b0": (1.0, 1.0, 224), "b4": (1.4, 1.8, 380)}


def efficientnet(
    size: str = "b0",
    image: int | None = None,
    classes: int = 1000,
    group_dim: int = 1,
    expand_ratio: int | None = None,
    norm_groups: int = 0,
) -> onnx.ModelProto:
    """torchvision ``efficientnet_<size>``; ``group_dim`` channels per group of the
    "depthwise" convolution, ``expand_ratio`` for the stages that expand, ``norm_groups`` > 0:
    group norm instead of batch norm (Graphcore's variant: 16, 4, 4)."""
    wm, dm, res = EFFICIENTNET_SIZES[size]
    image = image or res
    n = Net(f"efficientnet_{size}")
    n.hw["input"] = image

    def norm(x, c, scope):
        return n.gn(x, c, norm_groups, scope) if norm_groups else n.bn(x, c, scope)

    stem = _div8(32 * wm)
    x = n.conv("input", 3, stem, 3, "features.0.0", stride=2)
    x = n.act(norm(x, stem, "features.0.1"), "silu", "features.0.2")
    for si, (e, k, s, cin, cout, layers) in enumerate(EFFICIENTNET_B0, start=1):
        cin, cout = _div8(cin * wm), _div8(cout * wm)
        e = e if e == 1 or expand_ratio is None else expand_ratio
        for li in range(math.ceil(layers * dm)):
            c_in, stride = (cin, s) if li == 0 else (cout, 1)
            scope, j, y = f"features.{si}.{li}.block", 0, x
            exp = _div8(c_in * e)
            if exp != c_in:
                y = n.conv(y, c_in, exp, 1, f"{scope}.0.0")
                y = n.act(norm(y, exp, f"{scope}.0.1"), "silu", f"{scope}.0.2")
                j = 1
            groups = exp // min(group_dim, exp)
            y = n.conv(y, exp, exp, k, f"{scope}.{j}.0", stride=stride, groups=groups)
            y = n.act(norm(y, exp, f"{scope}.{j}.1"), "silu", f"{scope}.{j}.2")
            y = n.se(y, exp, max(1, c_in // 4), f"{scope}.{j + 1}", "silu", "sigmoid")
            y = norm(n.conv(y, exp, cout, 1, f"{scope}.{j + 2}.0"), cout, f"{scope}.{j + 2}.1")
            residual = stride == 1 and c_in == cout
            x = n.node("Add", [y, x], f"features.{si}.{li}") if residual else y
    last_in, last = _div8(320 * wm), 4 * _div8(320 * wm)
    x = n.conv(x, last_in, last, 1, "features.8.0")
    x = n.act(norm(x, last, "features.8.1"), "silu", "features.8.2")
    return n.model("input", n.head(x, last, 0, classes, "silu"), image, classes)


# ---- ResNeXt --------------------------------------------------------------------------------


def resnext(
    depth: int = 101,
    groups: int = 32,
    width: int = 4,
    image: int = 224,
    classes: int = 1000,
    norm_groups: int = 32,
) -> onnx.ModelProto:
    """torchvision ``ResNet(Bottleneck, layers, groups=groups, width_per_group=width)``;
    ``norm_groups`` > 0: group norm (Graphcore's TensorFlow ResNeXt on ImageNet)."""
    layers = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}[depth]
    n = Net(f"resnext{depth}_{groups}x{width}d")
    n.hw["input"] = image

    def norm(x, c, scope):
        return n.gn(x, c, norm_groups, scope) if norm_groups else n.bn(x, c, scope)

    x = n.conv("input", 3, 64, 7, "conv1", stride=2)
    x = n.act(norm(x, 64, "bn1"), "relu", "relu")
    x = n.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    n.hw[x] = (n.hw[x] - 1) // 2 + 1
    cin = 64
    for li, (blocks, planes) in enumerate(zip(layers, (64, 128, 256, 512), strict=True), 1):
        w = int(planes * width / 64) * groups
        for b in range(blocks):
            scope, stride = f"layer{li}.{b}", (2 if (b == 0 and li > 1) else 1)
            y = n.act(
                norm(n.conv(x, cin, w, 1, f"{scope}.conv1"), w, f"{scope}.bn1"),
                "relu",
                f"{scope}.relu",
            )
            y = n.conv(y, w, w, 3, f"{scope}.conv2", stride=stride, groups=groups)
            y = n.act(norm(y, w, f"{scope}.bn2"), "relu", f"{scope}.relu")
            y = norm(n.conv(y, w, planes * 4, 1, f"{scope}.conv3"), planes * 4, f"{scope}.bn3")
            if b == 0:
                x = n.conv(x, cin, planes * 4, 1, f"{scope}.downsample.0", stride=stride, pad=0)
                x = norm(x, planes * 4, f"{scope}.downsample.1")
            x = n.act(n.node("Add", [y, x], scope), "relu", f"{scope}.relu")
            cin = planes * 4
    x = n.node("GlobalAveragePool", [x], "avgpool")
    x = n.node("Flatten", [x], "flatten")
    y = n.node("Gemm", [x, n.w(classes, cin), n.w(classes)], "fc", transB=1)
    return n.model("input", y, image, classes)


# ---- ConvNeXt -------------------------------------------------------------------------------


def convnext_tiny(image: int = 224, classes: int = 1000) -> onnx.ModelProto:
    """torchvision ``convnext_tiny``: depths (3, 3, 9, 3), widths (96, 192, 384, 768)."""
    n = Net("convnext_tiny")
    n.hw["input"] = image

    def ln2d(x, c, scope):  # LayerNorm2d: permute to NHWC, layer_norm, permute back
        x = n.node("Transpose", [x], scope, perm=[0, 2, 3, 1])
        x = n.node("LayerNormalization", [x, n.w(c), n.w(c)], scope, axis=-1)
        return n.node("Transpose", [x], scope, perm=[0, 3, 1, 2])

    x = n.conv("input", 3, 96, 4, "features.0.0", stride=4, bias=True, pad=0)
    x = ln2d(x, 96, "features.0.1")
    dims, depths, f = (96, 192, 384, 768), (3, 3, 9, 3), 1
    for si, (c, d) in enumerate(zip(dims, depths, strict=True)):
        if si:
            x = ln2d(x, dims[si - 1], f"features.{f}.0")
            x = n.conv(x, dims[si - 1], c, 2, f"features.{f}.1", stride=2, bias=True, pad=0)
            f += 1
        for b in range(d):
            scope = f"features.{f}.{b}.block"
            y = n.conv(x, c, c, 7, f"{scope}.0", groups=c, bias=True)
            y = n.node("Transpose", [y], f"{scope}.1", perm=[0, 2, 3, 1])
            y = n.node("LayerNormalization", [y, n.w(c), n.w(c)], f"{scope}.2", axis=-1)
            y = n.linear(y, c, 4 * c, f"{scope}.3")
            y = n.node("Gelu", [y], f"{scope}.4")
            y = n.linear(y, 4 * c, c, f"{scope}.5")
            y = n.node("Transpose", [y], f"{scope}.6", perm=[0, 3, 1, 2])
            y = n.node("Mul", [y, n.w(c, 1, 1)], f"features.{f}.{b}")  # layer scale
            x = n.node("Add", [y, x], f"features.{f}.{b}")
        f += 1
    x = n.node("GlobalAveragePool", [x], "avgpool")
    x = ln2d(x, 768, "classifier.0")
    x = n.node("Flatten", [x], "classifier.1")
    y = n.node("Gemm", [x, n.w(classes, 768), n.w(classes)], "classifier.2", transB=1)
    return n.model("input", y, image, classes)
