"""A Range longer than the folding bound (4,096 elements): a GPT's position ids at 8,192 tokens.

Folding stops at the bound, so such a Range is never computed: its length comes from shape
inference on its constant inputs, and the nodes after it are costed (or are constants) from
shapes only. A Range that never ends or cannot be simulated is refused in one sentence.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from engine.onnx.importer import import_onnx
from engine.onnx.reader import SMALL, OnnxError
from tests import onnx_models as om

SEQ = 8192


@pytest.mark.parametrize("mask", ["sdpa", "buffer"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_a_gpt_at_8192_tokens_imports(tmp_path, monkeypatch, mask, dynamic):
    assert SEQ > SMALL
    original = om.Exported.buffer

    def buffer(self, name, array):
        # a causal-mask buffer of 8,192^2 floats lives in the sparse external file
        if array.size > SMALL:
            return self.weight(name, *array.shape, trained=False)
        return original(self, name, array)

    monkeypatch.setattr(om.Exported, "buffer", buffer)
    e = om.gpt(layers=2, ctx=SEQ, seq="seq" if dynamic else SEQ, mask=mask)
    path = e.save(e.result, tmp_path / "gpt8k.onnx")
    g, info = import_onnx(path, input_shapes={"idx": [1, SEQ]} if dynamic else None)
    assert g.num_params == e.params
    assert info.outcomes["Range"] == {"constant": 1}  # not costed, not folded
    pos = g.ops_of("transformer")[1]  # the position embedding's lookup: T rows
    assert g.cols["type"][pos] == "Embedding" and g.cols["in_elems"][pos] == SEQ
    bmm = np.flatnonzero(g.cols["type"] == "BatchMatMul")
    assert len(bmm) == 4 and set(g.cols["m"][bmm]) == {SEQ}
    assert set(g.cols["groups"][bmm]) == {4}
    softmax = np.flatnonzero(g.cols["type"] == "Softmax")
    assert set(g.cols["out_elems"][softmax]) == {4 * SEQ * SEQ}


def _range_model(tmp_path, limit, step):
    n = h.make_node
    nodes = [
        n("Range", ["start", "limit", "delta"], ["pos"], name="arange"),
        n("Gather", ["wpe", "pos"], ["emb"], name="wpe"),
        n("Add", ["x", "emb"], ["y"], name="add"),
    ]
    inits = [
        nh.from_array(np.array(0, np.int64), "start"),
        nh.from_array(np.array(limit, np.int64), "limit"),
        nh.from_array(np.array(step, np.int64), "delta"),
        nh.from_array(np.zeros((16, 8), np.float32), "wpe"),
    ]
    g = h.make_graph(
        nodes,
        "r",
        [h.make_tensor_value_info("x", T.FLOAT, [1, 8])],
        [h.make_tensor_value_info("y", T.FLOAT, ["a", "b", "c"])],
        inits,
    )
    path = tmp_path / "range.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def test_a_long_range_is_costed_from_its_inferred_length(tmp_path):
    g, _ = import_onnx(_range_model(tmp_path, SEQ, 1))
    assert list(g.cols["type"]) == ["Embedding", "Add"]
    assert g.cols["in_elems"][0] == SEQ and g.cols["out_elems"][0] == SEQ * 8


@pytest.mark.parametrize(
    "limit, step, message",
    [
        (10, 0, "Range node 'arange' never ends"),
        (2**40, 1, "Range node 'arange' cannot be simulated: dimension 0 is 1,099,511,627,776"),
    ],
)
def test_a_range_that_cannot_be_simulated_is_refused(tmp_path, limit, step, message):
    with pytest.raises(OnnxError, match=message) as err:
        import_onnx(_range_model(tmp_path, limit, step))
    assert "\n" not in str(err.value)
