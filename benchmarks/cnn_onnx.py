"""The modern CNNs of the memory reference rows as ONNX files (benchmarks/bench_fidelity.py).

The graphs are those of ``tests/onnx_cnn_models.py`` (torchvision's MobileNetV3, EfficientNet,
ResNeXt and ConvNeXt as torch's exporter writes them, zero weights; Graphcore's EfficientNet
variant with 16-channel groups, expansion ratio 4 and group norm of 4 groups; ResNeXt-101 32x4d
and ResNet-50 with group norm of 32 groups, as Graphcore's TensorFlow examples train them on
ImageNet). The files
are generated, not committed: ``prepare(folder, name)`` writes one when it is missing;
``python benchmarks/cnn_onnx.py [FOLDER]`` writes them all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REFERENCE_DIR = REPO / "assets" / "runs" / "reference"


def _cnn():
    sys.path.insert(0, str(REPO / "tests"))
    import onnx_cnn_models  # tests/onnx_cnn_models.py: the graph builders

    return onnx_cnn_models


def _builders() -> dict[str, Callable]:
    c = _cnn()
    return {
        "mobilenet_v3_small.onnx": lambda: c.mobilenet_v3("small"),
        "mobilenet_v3_large.onnx": lambda: c.mobilenet_v3("large"),
        "efficientnet_b0.onnx": lambda: c.efficientnet("b0"),
        "efficientnet_b4.onnx": lambda: c.efficientnet("b4"),
        "efficientnet_b0_g16_gn.onnx": lambda: c.efficientnet(
            "b0", group_dim=16, expand_ratio=4, norm_groups=4
        ),
        "efficientnet_b4_g16_gn.onnx": lambda: c.efficientnet(
            "b4", group_dim=16, expand_ratio=4, norm_groups=4
        ),
        "resnext101_32x4d_gn.onnx": lambda: c.resnext(101, norm_groups=32),
        "resnet50_gn.onnx": lambda: c.resnext(50, groups=1, width=64, norm_groups=32),
        "convnext_tiny.onnx": c.convnext_tiny,
    }


#: The generated models, by file name.
MODELS = (
    "mobilenet_v3_small.onnx",
    "mobilenet_v3_large.onnx",
    "efficientnet_b0.onnx",
    "efficientnet_b4.onnx",
    "efficientnet_b0_g16_gn.onnx",
    "efficientnet_b4_g16_gn.onnx",
    "resnext101_32x4d_gn.onnx",
    "resnet50_gn.onnx",
    "convnext_tiny.onnx",
)


def prepare(folder: Path = REFERENCE_DIR, model: str = MODELS[0]) -> Path:
    """The model ``model`` in ``folder``, built when it is missing."""
    import onnx

    folder = Path(folder)
    path = folder / model
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        onnx.save(_builders()[model](), str(tmp))
        tmp.replace(path)
    return path


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else REFERENCE_DIR
    for name in MODELS:
        print(prepare(where, name))
