"""Regenerate the small real PyTorch exports used by tests/test_onnx.py (not run by the tests).

Needs torch (2.13.0 made the committed files) and transformers (4.57.6); run from this folder:
``python make_exports.py``. Each model is tiny (weights inside the file) so the files stay small,
and the parameter counts PyTorch reports are written to ``exports.json`` for the tests.
"""

import json

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, c, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 2 * c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(2 * c)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(2 * c, 2 * c, 3, 1, 1, groups=2, bias=False)
        self.bn2 = nn.BatchNorm2d(2 * c)
        self.downsample = nn.Sequential(
            nn.Conv2d(c, 2 * c, 1, stride, bias=False), nn.BatchNorm2d(2 * c)
        )

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + self.downsample(x))


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(Block(8, 2), Block(16, 1))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.layer1(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _keep_scopes_only(path):
    """Drop the exporter's bulky node metadata (stack traces, FX nodes) but the module scopes."""
    import onnx

    model = onnx.load(path)
    for node in model.graph.node:
        keep = [
            (p.key, p.value) for p in node.metadata_props if p.key == "pkg.torch.onnx.name_scopes"
        ]
        del node.metadata_props[:]
        for key, value in keep:
            prop = node.metadata_props.add()
            prop.key, prop.value = key, value
    onnx.save(model, path)


def main():
    counts = {}
    m = TinyResNet().train()
    x = torch.randn(2, 3, 16, 16)
    counts["tiny_resnet"] = sum(p.numel() for p in m.parameters())
    torch.onnx.export(
        m,
        (x,),
        "tiny_resnet_torchscript.onnx",
        dynamo=False,
        opset_version=17,
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}},
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
    )
    torch.onnx.export(
        m,
        (x,),
        "tiny_resnet_dynamo.onnx",
        dynamo=True,
        optimize=False,
        external_data=False,
        input_names=["input"],
        output_names=["logits"],
        dynamic_shapes=({0: torch.export.Dim("batch")},),
    )
    from transformers import BertConfig, BertForSequenceClassification

    cfg = BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    b = BertForSequenceClassification(cfg).train()
    counts["tiny_bert"] = sum(p.numel() for p in b.parameters())
    ids = torch.zeros(2, 16, dtype=torch.long)
    batch = torch.export.Dim("batch")
    torch.onnx.export(
        b,
        (ids, torch.ones_like(ids)),
        "tiny_bert_dynamo.onnx",
        dynamo=True,
        optimize=False,
        external_data=False,
        input_names=["input_ids", "attention_mask"],
        output_names=["logits"],
        dynamic_shapes=({0: batch}, {0: batch}),
    )
    for name in ("tiny_resnet_dynamo.onnx", "tiny_bert_dynamo.onnx"):
        _keep_scopes_only(name)
    with open("exports.json", "w") as f:
        json.dump({"torch": torch.__version__, "parameters": counts}, f, indent=1)


if __name__ == "__main__":
    main()
