"""Where in the model is this? Each operation's module path (from ONNX node names or the
PyTorch 2 exporter's name scopes) and its place in the model's code (the exporter's stack trace
and class hierarchy), through the profile to the Operations table, query, roofline and the
insights' evidence."""

from __future__ import annotations

import ast
import json

import numpy as np
import onnx
import onnx_cnn_models as cnn
import onnx_models as om
import pytest
from onnx import helper as h

from analyser.cli import main
from analyser.core import Analysis
from engine.onnx import import_onnx
from engine.onnx.importer import SOURCE_LIMIT, torch_source

SCOPES = "pkg.torch.onnx.name_scopes"


def _node(stack=None, classes=None):
    n = h.make_node("Relu", ["x"], ["y"], name="node_Relu_1")
    for key, value in (
        ("pkg.torch.onnx.stack_trace", stack),
        ("pkg.torch.onnx.class_hierarchy", classes),
    ):
        if value is not None:
            p = n.metadata_props.add()
            p.key, p.value = key, value
    return n


def test_the_source_is_the_innermost_frame_of_the_models_own_code():
    stack = (
        'File "/home/alice/proj/train.py", line 12, in main\n    model(x)\n'
        'File "/home/alice/proj/mynet.py", line 42, in forward\n    return self.conv(x)\n'
        'File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/conv.py", line 456, in '
        "forward\n    return F.conv2d(x)"
    )
    classes = (
        "['__main__.MyNet', 'torchvision.ops.misc.Conv2dNormActivation', 'aten.conv2d.default']"
    )
    assert torch_source(_node(stack, classes)) == "mynet.py:42 in Conv2dNormActivation"
    # the file's name only: the exporting machine's folders are not carried into a profile
    assert "alice" not in torch_source(_node(stack, classes))
    assert torch_source(_node('File "C:\\\\work\\\\net.py", line 7, in forward')) == "net.py:7"
    assert torch_source(_node(classes="['__main__.Net', 'aten.add.Tensor']")) == "in Net"
    assert torch_source(_node()) == ""


@pytest.mark.parametrize(
    "classes",
    ["[", "not a list", "{'a': 1}", "[" * 100_000 + "]" * 100_000, "x" * 10_000_000],
)
def test_broken_or_huge_metadata_is_ignored_within_bounds(classes):
    stack = 'File "a.py", line 1, in f\n' * 200_000 + "\x1b[31m\u202e"
    text = torch_source(_node(stack, classes))
    assert len(text) <= SOURCE_LIMIT and "\x1b" not in text
    assert text.startswith("a.py:1")


def _with_sources(e: om.Exported) -> onnx.ModelProto:
    """The exported GPT with the stack trace and class hierarchy the exporter writes beside
    its name scopes: one line of model.py per module, its class from the module path."""
    m = e.result
    lines: dict[str, int] = {}
    for node in m.graph.node:
        scopes = next(
            (ast.literal_eval(p.value) for p in node.metadata_props if p.key == SCOPES), None
        )
        module = scopes[-2] if scopes and len(scopes) > 1 else ""
        line = lines.setdefault(module, 100 + len(lines))
        cls = "Block" if ".h." in f".{module}." else "GPT"
        for key, value in (
            (
                "pkg.torch.onnx.stack_trace",
                f'File "/home/u/nanogpt/model.py", line {line}, in forward',
            ),
            ("pkg.torch.onnx.class_hierarchy", repr(["model.GPT", f"model.{cls}", "aten.x"])),
        ):
            p = node.metadata_props.add()
            p.key, p.value = key, value
    return m


@pytest.fixture(scope="module")
def gpt_profile(tmp_path_factory):
    d = tmp_path_factory.mktemp("source")
    e = om.gpt()
    path = e.save(_with_sources(e), d / "gpt.onnx")
    out = d / "gpt.h5"
    assert main(["profile", "--model", str(path), "-o", str(out), "--quiet"]) == 0
    return out


def test_every_operation_of_the_exported_gpt_carries_its_source(gpt_profile):
    with Analysis.open(gpt_profile) as a:
        ops = a.operations
    fwd = ops[ops["pass"].astype(str) == "forward"]
    assert len(fwd) > 50
    assert (fwd["source"].str.match(r"^model\.py:\d+ in (GPT|Block)$")).all()
    blocks = fwd[fwd["layer"].str.contains(r"\.h\.\d", regex=True)]
    assert not blocks.empty and (blocks["source"].str.endswith("in Block")).all()
    # a backward or update op is where its forward op is
    bwd = ops[ops["pass"].astype(str).isin(["backward", "update"])]
    assert len(bwd) > 50
    assert (bwd["source"] != "").mean() > 0.9


def test_the_source_reaches_query_roofline_and_the_layers(gpt_profile, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # the table's source cells whole, not wrapped
    assert (
        main(
            [
                "query",
                str(gpt_profile),
                "SELECT DISTINCT source FROM operations",
                "--format",
                "json",
            ]
        )
        == 0
    )
    got = {r["source"] for r in json.loads(capsys.readouterr().out)}
    assert any(s.startswith("model.py:") for s in got)
    assert main(["roofline", str(gpt_profile), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["operations"] if isinstance(doc["operations"], list) else []
    assert rows and all("source" in r for r in rows)
    assert main(["roofline", str(gpt_profile), "--top", "5"]) == 0
    assert "model.py:" in capsys.readouterr().out
    from analyser.core.operations import layer_table

    with Analysis.open(gpt_profile) as a:
        layers = layer_table(a.operations)
    assert (layers["source"].str.startswith("model.py:") | (layers["source"] == "")).all()
    assert (layers["source"] != "").any()


def test_module_paths_of_every_operation_of_a_torchvision_cnn():
    """MobileNetV3 as the documented exporter names its nodes: every forward operation's layer
    is its node's module path."""
    m = cnn.mobilenet_v3("small", image=64)
    from engine.onnx.importer import layer_path

    scopes = {layer_path(n.name)[0] for n in m.graph.node}
    path = None
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        from pathlib import Path

        path = Path(d) / "mnv3.onnx"
        onnx.save(m, str(path))
        g, _ = import_onnx(path, input_shapes=None)
    layers = set(map(str, g.cols["layer"]))
    assert layers <= scopes | {f"{t}_{i}" for t in ("Constant",) for i in range(10_000)}
    assert any(x.startswith("features.") for x in layers)
    assert set(map(str, g.cols["source"])) == {""}  # the names say nothing of the code


def test_profiles_without_sources_still_open(tmp_path):
    """A profile of format 1.3 has no source column: it opens, and its tables have one, empty
    (a synthetic profile, which never writes it, too)."""
    import h5py

    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    old = tmp_path / "old.h5"
    assert main(["profile", "--model", "mlp", "-o", str(old), "--quiet"]) == 0
    with h5py.File(old, "r+") as f:
        del f["graph/operations/source"]
        f.attrs["format_version"] = "1.3"
    assert main(["validate", str(old)]) == 0
    with Analysis.open(old) as a:
        assert (a.operations["source"] == "").all()
    assert main(["roofline", str(old), "--top", "3"]) == 0
    syn = tmp_path / "syn.h5"
    write_profile(syn, make_synthetic_profile(n_steps=200, n_ipus=1, tiles=16, n_programs=20))
    with Analysis.open(syn) as a:
        assert (a.operations["source"] == "").all()


def test_zoo_models_have_module_paths_and_no_source(tmp_path):
    out = tmp_path / "r50.h5"
    assert main(["profile", "--model", "resnet50", "-o", str(out), "--quiet"]) == 0
    with Analysis.open(out) as a:
        ops = a.operations
    assert "layer3.2.conv2" in set(ops["layer"])
    assert (ops["source"] == "").all()
    np.testing.assert_array_equal(ops["source"].to_numpy() == "", True)


def test_hostile_node_metadata_imports_with_a_bounded_clean_source(tmp_path):
    import hostile

    for name, path in hostile.onnx_hostile_sources(tmp_path).items():
        g, _ = import_onnx(path)
        for src in map(str, g.cols["source"]):
            assert len(src) <= SOURCE_LIMIT, name
            assert not any(ord(c) < 32 or c == "\u202e" for c in src), (name, src)
            assert "alice" not in src and "/" not in src, (name, src)
