"""Run configurations shared by the engine and analyser tests, as fresh dicts each test may extend.

``walkthrough_model``: the walkthrough's model and machine (assets/runs/walkthrough/1-base.toml,
the reference walkthrough, README): ResNet-101 on CIFAR-10 resized to 64x64, pipelined in two stages split at layer3
block 8 on two Mk2 IPUs, micro-batch 64, AdamW. ``small_pipelined``: a ResNet-50 at 32x32 pipelined
in two stages split at layer3 block 0 on two IPUs, small enough to fit and simulate quickly.
Precision, gradient accumulation and the rest are each test's own choice (keyword overrides).
"""

from __future__ import annotations


def _two_stage_resnet(model: str, image_size: int, split_at: str, overrides: dict) -> dict:
    """A ResNet on CIFAR-10 (10 classes) pipelined in two stages split at ``split_at`` on two
    IPUs, with ``overrides``."""
    cfg = dict(
        model=model,
        image_size=image_size,
        num_classes=10,
        num_ipus=2,
        strategy="pipelined",
        split_points=[split_at],
    )
    cfg.update(overrides)
    return cfg


def walkthrough_model(**overrides) -> dict:
    return _two_stage_resnet(
        "resnet101", 64, "layer3.8", {"micro_batch_size": 64, "optimiser": "adamw", **overrides}
    )


def small_pipelined(**overrides) -> dict:
    return _two_stage_resnet("resnet50", 32, "layer3.0", overrides)
