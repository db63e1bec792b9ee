"""Model zoo: topology, parameter counts and layer names."""

from __future__ import annotations

import pytest

from engine.config import RunConfig
from engine.models import build_model


@pytest.mark.parametrize(
    ("model", "params", "rel"),
    [
        ("resnet50", 25.557e6, 0.001),  # torchvision: 25,557,032
        ("resnet101", 44.549e6, 0.001),  # torchvision: 44,549,160
        ("bert-base", 110e6, 0.02),
        ("bert-large", 340e6, 0.02),
    ],
)
def test_parameter_counts(model, params, rel):
    g = build_model(RunConfig(model=model))
    assert g.num_params == pytest.approx(params, rel=rel)


def test_resnet50_macs_and_any_input_size():
    g = build_model(RunConfig(model="resnet50"))
    assert g["macs"].sum() == pytest.approx(4.09e9, rel=0.01)  # the well-known 4.1 GMACs
    small = build_model(RunConfig(model="resnet101", image_size=64, num_classes=10))
    assert small.output_elems == 10
    assert small.input_shape == (3, 64, 64)
    assert small["macs"].sum() < g["macs"].sum()


def test_layer_names_follow_module_paths():
    g = build_model(RunConfig(model="resnet101", image_size=64, num_classes=10))
    names = set(g.layer_names)
    for layer in ("conv1", "layer1.0.conv1", "layer3.8", "layer3.22", "layer4.2", "fc"):
        assert layer in names
    assert "layer3.23" not in names
    first = g.first_op_of("layer3.8")
    assert g["name"][first] == "layer3.8.conv1"
    b = build_model(RunConfig(model="bert-base", seq_length=128))
    bn = set(b.layer_names)
    for layer in ("embeddings", "encoder.layer.0", "encoder.layer.11", "pooler", "cls.predictions"):
        assert layer in bn
    assert "encoder.layer.12" not in bn
    assert b.params["masked_tokens"] == 20


def test_mlp_is_784_784_784_128_10():
    g = build_model(RunConfig(model="mlp"))
    mm = g["type"] == "MatMul"
    assert list(g["k"][mm]) == [784, 784, 784, 128]
    assert list(g["n"][mm]) == [784, 784, 128, 10]


def test_bert_sequence_length_and_vocabulary_are_parameters():
    a = build_model(RunConfig(model="bert-base", seq_length=128, vocab_size=30522))
    b = build_model(RunConfig(model="bert-base", seq_length=384, vocab_size=30522))
    c = build_model(RunConfig(model="bert-base", seq_length=128, vocab_size=50000))
    assert b["macs"].sum() > 2.5 * a["macs"].sum()
    assert c.num_params - a.num_params == (50000 - 30522) * (768 + 1)
