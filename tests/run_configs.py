"""Run configurations shared by the engine and analyser tests, as fresh dicts each test may extend.

``walkthrough_model``: the walkthrough's model and machine (assets/runs/walkthrough/1-base.toml,
walkthrough.md): ResNet-101 on CIFAR-10 resized to 64x64, pipelined in two stages split at layer3
block 8 on two Mk2 IPUs, micro-batch 64, AdamW. ``small_pipelined``: a ResNet-50 at 32x32 pipelined
in two stages split at layer3 block 0 on two IPUs, small enough to fit and simulate quickly.
Precision, gradient accumulation and the rest are each test's own choice (keyword overrides).
"""

from __future__ import annotations


def walkthrough_model(**overrides) -> dict:
    cfg = dict(
        model="resnet101",
        image_size=64,
        num_classes=10,
        micro_batch_size=64,
        num_ipus=2,
        strategy="pipelined",
        split_points=["layer3.8"],
        optimiser="adamw",
    )
    cfg.update(overrides)
    return cfg


def small_pipelined(**overrides) -> dict:
    cfg = dict(
        model="resnet50",
        image_size=32,
        num_classes=10,
        num_ipus=2,
        strategy="pipelined",
        split_points=["layer3.0"],
    )
    cfg.update(overrides)
    return cfg
