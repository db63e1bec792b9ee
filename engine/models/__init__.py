"""The model zoo: forward graphs (engine.graph.Graph) of the models the engine simulates.

``build_model(config)`` returns the graph for ``config.model`` with the config's input size,
class count, sequence length and vocabulary. Layer names follow the familiar PyTorch module paths
(torchvision ResNets: ``conv1``, ``layer1.0.conv1``, ``layer3.8``, ``fc``; Hugging Face BERT:
``embeddings``, ``encoder.layer.11``, ``pooler``, ``cls.predictions``) so that users can name
pipeline split points and recomputation checkpoints.
"""

from __future__ import annotations

from engine.graph import Graph
from engine.models.bert import bert
from engine.models.mlp import mlp
from engine.models.resnet import resnet

ZOO = ("mlp", "resnet50", "resnet101", "bert-base", "bert-large")


def build_model(config) -> Graph:
    """The forward graph of ``config.model`` (a RunConfig) with its size parameters; an ``.onnx``
    path is imported by ``engine.onnx`` (docs/onnx.md)."""
    name = config.model
    if getattr(config, "is_onnx", False):
        from engine.onnx import load_graph  # the onnx package only when an ONNX model is used

        return load_graph(config)
    if name == "mlp":
        return mlp(num_classes=config.classes)
    if name in ("resnet50", "resnet101"):
        return resnet(
            depth=int(name[6:]),
            image_size=config.image_size,
            channels=config.image_channels,
            num_classes=config.classes,
        )
    if name in ("bert-base", "bert-large"):
        return bert(
            size=name[5:],
            seq_length=config.seq_length,
            vocab_size=config.vocab_size,
            num_classes=config.classes,
            # dropout runs in training only (PopART's DropoutOp is an identity in inference)
            hidden_dropout=config.hidden_dropout if config.training else 0.0,
            attention_dropout=config.attention_dropout if config.training else 0.0,
        )
    raise ValueError(f"unknown model {name!r}")  # RunConfig validation makes this unreachable


__all__ = ["ZOO", "bert", "build_model", "mlp", "resnet"]
