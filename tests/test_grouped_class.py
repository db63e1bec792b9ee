"""The grouped-convolution class of the calibrated intervals: a profile stores each
operation's AMP groups (format 1.5), a prediction whose device time is mostly in grouped or
depthwise convolutions is classed by it, and, with no throughput row of such models in the
fidelity table, its figures say they are outside the validated range instead of borrowing
the range of dense models."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import h5py
import numpy as np
import onnx
import pytest
from onnx_cnn_models import mobilenet_v3

import engine
from analyser.core import intervals
from analyser.core.analysis import Analysis
from analyser.core.intervals_calibration import row_classes
from engine.config import RunConfig
from profiles import schema


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    """A small MobileNetV3 (64 x 64 images, 10 classes) as ONNX and its inference profile."""
    folder = tmp_path_factory.mktemp("grouped")
    model = mobilenet_v3("small", image=64, classes=10)
    onnx_path = folder / "mnv3.onnx"
    onnx.save(model, onnx_path)
    profile = folder / "mnv3.h5"
    engine.simulate_to_file(
        RunConfig(model=str(onnx_path), mode="inference", micro_batch_size=4), profile
    )
    return model, profile


def _onnx_groups(model) -> list[int]:
    out = []
    for node in model.graph.node:
        if node.op_type == "Conv":
            g = next((a.i for a in node.attribute if a.name == "group"), 1)
            out.append(int(g))
    return out


def test_the_profile_stores_each_convolutions_groups(mobilenet):
    model, profile = mobilenet
    with h5py.File(profile, "r") as f:
        ops = f["/graph/operations"]
        kind = ops["type"][:].astype(str)
        fwd = ops["pass"][:] == 0
        groups = ops["groups"][:]
        assert schema.parse_version(f.attrs["format_version"]) >= (1, 5)
    got = Counter(groups[fwd & (kind == "Conv")].tolist())
    want = Counter(_onnx_groups(model))
    assert got == want
    assert max(want) > 1, "the model has depthwise convolutions"
    # operations that are not AMP work carry one group
    assert set(groups[fwd & np.isin(kind, ("Relu", "Add", "HardSwish", "HardSigmoid"))]) <= {1}


def test_a_depthwise_model_is_classed_and_says_it_is_outside_the_table(mobilenet):
    _, profile = mobilenet
    with Analysis.open(profile) as a:
        feats = intervals.features_of(a)
    assert feats.grouped_conv_share is not None
    assert feats.grouped_conv_share >= intervals.GROUPED_CONV_SHARE
    classes = intervals.classify(feats, host_inclusive=False)
    assert "grouped-convolutions" in classes
    iv = intervals.absolute("device_throughput_samples_per_s", 1000.0, feats)
    assert not iv.available
    assert "grouped-convolutions" in iv.outside_reason
    assert iv.to_dict()["outside_reason"] and iv.to_dict()["low"] is None


def test_the_insights_json_carries_the_feature_and_the_class(mobilenet, capsys):
    from analyser.cli import main

    _, profile = mobilenet
    assert main(["insights", str(profile), "--json", "--no-resimulate"]) == 0
    pred = json.loads(capsys.readouterr().out)["prediction"]
    assert pred["features"]["grouped_conv_share"] >= intervals.GROUPED_CONV_SHARE
    assert "grouped-convolutions" in pred["classes"]
    thr = pred["intervals"]["device_throughput_samples_per_s"]
    assert thr["low"] is None and "grouped-convolutions" in thr["outside_reason"]


def test_a_dense_model_has_no_grouped_share(tmp_path):
    path = tmp_path / "resnet50.h5"
    engine.simulate_to_file(RunConfig(model="resnet50", micro_batch_size=1), path)
    with Analysis.open(path) as a:
        feats = intervals.features_of(a)
    assert feats.grouped_conv_share == 0.0
    assert "grouped-convolutions" not in intervals.classify(feats)
    # the sizes the far-outside check compares, read from the input stream
    assert (feats.micro_batch, feats.sample_elems) == (1, 3 * 224 * 224)


def test_a_profile_written_before_format_1_5_is_not_classed_blindly(mobilenet, tmp_path):
    """Without the groups column, whether grouped convolutions dominate is not known: the
    figures say so rather than take the dense models' range."""
    _, profile = mobilenet
    old = tmp_path / "old.h5"
    shutil.copy(profile, old)
    with h5py.File(old, "r+") as f:
        del f["/graph/operations/groups"]
        f.attrs["format_version"] = "1.4"
    with Analysis.open(old) as a:
        feats = intervals.features_of(a)
    assert feats.grouped_conv_share is None
    iv = intervals.absolute("device_throughput_samples_per_s", 1000.0, feats)
    assert not iv.available and "groups" in iv.note


def test_the_memory_facts_of_depthwise_models_carry_the_class():
    """The stored memory rows are classed by the same code: the MobileNet and EfficientNet
    facts are grouped-convolution facts, the ResNet-50 and BERT ones are not."""
    stored = json.loads(intervals.DEFAULT_ERRORS.read_text())
    by_id = {m["id"]: row_classes(m["features"]) for m in stored["memory"]}
    assert "grouped-convolutions" in by_id["mem-mobilenet-v3-small-train"]
    assert "grouped-convolutions" in by_id["mem-efficientnet-b0-infer"]
    assert "grouped-convolutions" not in by_id["mem-resnet50-train-mk2"]
    assert "grouped-convolutions" not in by_id["mem-bert-large-sl128-train-tf2"]
