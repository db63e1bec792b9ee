"""Modern CNNs (tests/onnx_cnn_models.py) fit where Graphcore's public examples train them.

Configurations: graphcore/examples ``vision/cnns/pytorch/train/configs.yml`` (MobileNetV3-Small
and -Large, EfficientNet-B0 and -B4 in Graphcore's group-16 variant), the TensorFlow CNN
training README (ResNeXt-101 on 2 pipelined IPUs at micro-batch 6, EfficientNet-B0 on 4 at
micro-batch 4), and ConvNeXt-T on 4 pipelined IPUs at micro-batch 4 (no published
configuration; a small micro-batch). The configs' pipeline split names (``mb_block/2/seq/0``,
``blocks/3/0/conv_pw``, ``b3/3/relu``) are mapped onto torchvision's module paths
(``features.3``, ``features.4.0``, ``layer3.4``); docs/fidelity.md lists each.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_cnn_models as cnn
import pytest

import engine

#: name -> (graph builder, torchvision's published parameter count, run options)
CASES = {
    "mobilenet_v3_small": (
        lambda: cnn.mobilenet_v3("small"),
        2_542_856,
        dict(micro_batch_size=32, precision="16.16", gradient_accumulation=32),
    ),
    "mobilenet_v3_large": (
        lambda: cnn.mobilenet_v3("large"),
        5_483_032,
        dict(
            micro_batch_size=32,
            precision="16.32",
            strategy="pipelined",
            num_ipus=4,
            split_points=["features.3", "features.8", "features.12"],
            gradient_accumulation=32,
        ),
    ),
    "efficientnet_b0_g16": (
        lambda: cnn.efficientnet("b0", group_dim=16, expand_ratio=4),
        None,
        dict(
            micro_batch_size=20,
            precision="16.32",
            strategy="pipelined",
            num_ipus=2,
            split_points=["features.4.0"],
            gradient_accumulation=5,
            available_memory_proportion=0.15,
        ),
    ),
    "efficientnet_b0": (
        lambda: cnn.efficientnet("b0"),
        5_288_548,
        dict(
            micro_batch_size=4,
            precision="16.32",
            strategy="pipelined",
            num_ipus=4,
            split_points=["features.2.1", "features.4.0", "features.6.0"],
            gradient_accumulation=128,
        ),
    ),
    "efficientnet_b4_g16": (
        lambda: cnn.efficientnet("b4", group_dim=16, expand_ratio=4),
        None,
        dict(
            micro_batch_size=6,
            precision="16.32",
            strategy="pipelined",
            num_ipus=4,
            split_points=["features.2.1", "features.4.0", "features.5.5"],
            gradient_accumulation=32,
            device_iterations=4,
            available_memory_proportion=0.15,
        ),
    ),
    "resnext101_32x4d": (
        lambda: cnn.resnext(101, norm_groups=0),
        44_177_704,
        dict(
            micro_batch_size=6,
            precision="16.16",
            strategy="pipelined",
            num_ipus=2,
            split_points=["layer3.4"],
            gradient_accumulation=16,
        ),
    ),
    "convnext_tiny": (
        cnn.convnext_tiny,
        28_589_128,
        dict(
            micro_batch_size=4,
            precision="16.32",
            strategy="pipelined",
            num_ipus=4,
            split_points=["features.3", "features.5.3", "features.6"],
            gradient_accumulation=16,
            optimiser="adamw",
        ),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_cnn_fits_at_its_published_configuration(name, tmp_path):
    build, params, opts = CASES[name]
    path = tmp_path / f"{name}.onnx"
    onnx.save(build(), path)
    cfg = {"model": str(path), "mode": "training", "partials_type": "half", **opts}
    cfg.setdefault("optimiser", "sgd-momentum")
    c = engine.compile(cfg)
    if params is not None:  # the graph is torchvision's model
        assert c.graph.num_params == params
    assert not c.oom, c.notes
    # every convolution's plan keeps its temporaries within the available memory proportion
    assert not any("exceed the available memory proportion" in n for n in c.notes), c.notes
    peak = int((c.memory.total + c.memory.gaps).max())
    assert peak <= c.target.sram_per_tile


def test_cnn_cycles_per_sample_are_bounded_by_the_amp_peak(tmp_path):
    """MobileNetV3-Small at its configuration: the cycles per sample are at least its AMP
    FLOPs at the AMP peak of the IPU (no plan beats the hardware), and no convolution takes
    more cycles than the whole forward pass's MACs would at AMP's padded 16 x 16 rate (the
    depthwise layers no longer pay for 256 times their MACs)."""
    from engine.simulation import simulate

    build, _, opts = CASES["mobilenet_v3_small"]
    path = tmp_path / "m.onnx"
    onnx.save(build(), path)
    r = simulate({"model": str(path), "mode": "training", "partials_type": "half", **opts})
    c = r.compiled
    amp = np.asarray(c.ops.family) == "amp"
    flops = int(np.asarray(c.ops.flops)[amp].sum()) / opts["micro_batch_size"]
    samples = opts["micro_batch_size"] * opts["gradient_accumulation"]
    per_sample = int(r.execution.attrs["total_cycles"]) / samples
    peak_per_cycle = 2 * c.target.amp_rate("float16", "float16") * c.target.tiles_per_ipu
    assert per_sample >= flops / peak_per_cycle
    conv = amp & np.char.startswith(np.asarray(c.ops.type).astype(str), "Conv")
    fwd_flops = np.asarray(c.ops.flops)[conv]
    assert np.asarray(c.ops.cycles)[conv].max() < fwd_flops.sum() / peak_per_cycle
