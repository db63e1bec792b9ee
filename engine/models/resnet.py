"""ResNet-50 / ResNet-101 with the torchvision topology (Bottleneck v1.5: stride on conv2).

Any input size and class count. Layer names: ``conv1``, ``bn1``, ``relu``, ``maxpool``,
``layerL.B.{conv1,bn1,conv2,bn2,conv3,bn3,relu,downsample.0,downsample.1}``, ``avgpool``, ``fc``.
Batch-norm running statistics are buffers, not parameters (as in torchvision's parameter count).
"""

from __future__ import annotations

from engine.errors import ModelError
from engine.graph import INPUT, Graph, GraphBuilder

BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def _out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def resnet(
    depth: int = 50, image_size: int = 224, channels: int = 3, num_classes: int = 1000
) -> Graph:
    if depth not in BLOCKS:
        raise ModelError(f"model: ResNet depth must be one of {sorted(BLOCKS)}, got {depth}.")
    b = GraphBuilder()
    b._input_elems = channels * image_size * image_size
    h = image_size

    def conv(name, src, cin, cout, k, stride, pad, h_in):
        h_out = _out(h_in, k, stride, pad)
        if h_out < 1:
            raise ModelError(
                f"image_size: {image_size} is too small for ResNet-{depth} (layer {name})."
            )
        idx = b.add(
            name,
            "Conv",
            "amp",
            in0=src,
            out_elems=cout * h_out * h_out,
            m=h_out * h_out,
            k=cin * k * k,
            n=cout,
            cin=cin,
            kernel=k * k,
            out_width=h_out,
            weight_elems=cout * cin * k * k,
            bwd_passes=0,
            saves_input=True,
        )
        return idx, h_out

    def bn(name, src, c, hh):
        return b.add(
            name,
            "BatchNorm",
            "norm",
            in0=src,
            out_elems=c * hh * hh,
            weight_elems=2 * c,
            passes=4,
            bwd_passes=5,
            saves_input=True,
            cross_tile=True,
            stats=2 * c,
        )

    def relu(name, src, layer):
        return b.add(
            name,
            "Relu",
            "elementwise",
            layer=layer,
            in0=src,
            out_elems=b.out_elems(src),
            saves_output=True,
        )

    x, h = conv("conv1", INPUT, channels, 64, 7, 2, 3, h)
    x = bn("bn1", x, 64, h)
    x = relu("relu", x, "relu")
    h2 = _out(h, 3, 2, 1)
    x = b.add(
        "maxpool",
        "MaxPool",
        "pool",
        in0=x,
        out_elems=64 * h2 * h2,
        passes=9 * h2 * h2 / max(h * h, 1),
        bwd_passes=9 * h2 * h2 / max(h * h, 1),
        saves_input=True,
    )
    h = h2
    cin = 64
    for li, (nblocks, planes) in enumerate(zip(BLOCKS[depth], (64, 128, 256, 512)), start=1):
        for bi in range(nblocks):
            stride = 2 if (bi == 0 and li > 1) else 1
            p = f"layer{li}.{bi}"
            block_in, h_in = x, h
            y, h1 = conv(f"{p}.conv1", x, cin, planes, 1, 1, 0, h)
            y = bn(f"{p}.bn1", y, planes, h1)
            y = relu(f"{p}.relu1", y, f"{p}.relu")
            y, h2 = conv(f"{p}.conv2", y, planes, planes, 3, stride, 1, h1)
            y = bn(f"{p}.bn2", y, planes, h2)
            y = relu(f"{p}.relu2", y, f"{p}.relu")
            y, h3 = conv(f"{p}.conv3", y, planes, planes * 4, 1, 1, 0, h2)
            y = bn(f"{p}.bn3", y, planes * 4, h3)
            if bi == 0:
                s, hs = conv(f"{p}.downsample.0", block_in, cin, planes * 4, 1, stride, 0, h_in)
                s = bn(f"{p}.downsample.1", s, planes * 4, hs)
            else:
                s = block_in
            y = b.add(
                f"{p}.add",
                "Add",
                "elementwise",
                layer=p,
                in0=y,
                in1=s,
                out_elems=planes * 4 * h3 * h3,
            )
            x = relu(f"{p}.relu3", y, f"{p}.relu")
            h = h3
            cin = planes * 4
    x = b.add(
        "avgpool",
        "AvgPool",
        "reduce",
        in0=x,
        out_elems=cin,
        passes=1,
        bwd_passes=1,
        cross_tile=True,
        stats=cin,
    )
    x = b.linear("fc", x, 1, cin, num_classes)
    return b.build(
        f"resnet{depth}",
        input_elems=channels * image_size * image_size,
        input_kind="image",
        input_shape=(channels, image_size, image_size),
        label_elems=1,
        output_elems=num_classes,
        params={"loss_inputs": [x]},
    )
