"""Memory facts as reference rows (assets/runs/reference/references.toml, ``[[memory]]``).

Each row is a statement from Graphcore's examples that a configuration trains or serves as
configured (it fits), or that it is out of memory; the engine must agree with each, or the row
says why it does not (``known_disagreement``, docs/fidelity.md). The table's bookkeeping is
checked too: every row names a source, a run configuration and a statement, and bad rows are
refused in one sentence. Also the two mechanisms the rows needed, each against its source:
PopLibs' expandDims for a strided 1 x 1 convolution, and PopTorch's Swish for ``x * sigmoid(x)``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
REF = REPO / "assets" / "runs" / "reference" / "references.toml"


def _load_bench():
    """benchmarks/bench_fidelity.py as a module (the benchmarks are not a package)."""
    name = "bench_fidelity_memory_rows"
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "bench_fidelity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


BENCH = _load_bench()


@pytest.fixture(scope="module")
def bench():
    return BENCH


ROWS = BENCH.load_memory_rows()


def test_memory_rows_cover_the_kinds_the_issue_names(bench):
    rows = bench.load_memory_rows()
    assert len(rows) >= 15
    assert all(r.url.startswith("https://") and r.source and r.statement for r in rows)
    text = " ".join(r.configuration for r in rows).lower()
    for kind in ("inference", "training", "mk2", "bow", "bert", "resnet-50", "mobilenet"):
        assert kind in text, kind
    assert any(r.cnn_table for r in rows)
    # every [[row]] still loads (the memory rows are a table of their own)
    assert all(r.quantity != "memory" for r in bench.load_rows())


def test_bad_memory_rows_are_refused_in_one_sentence(bench, tmp_path):
    good = REF.read_text(encoding="utf-8")
    cases = {
        "'fits' must be": good.replace("fits = true", 'fits = "yes"', 1),
        "'statement' is missing": good.replace(
            'statement = "configuration mobilenet-v3-small: batch_size 32, replicas 1 (trains on 1 '
            'IPU)"',
            'statement = ""',
        ),
        "unknown field": good.replace(
            'id = "mem-resnet50-infer"', 'id = "mem-resnet50-infer"\nnotes = "x"', 1
        ),
        "used twice": good.replace('id = "mem-resnet50-infer"', 'id = "mem-resnet50-train-bow"'),
        "https://": good.replace(
            'url = "https://github.com/graphcore/examples/blob/master/vision/cnns/pytorch/inference',
            'url = "github.com/graphcore/examples/blob/master/vision/cnns/pytorch/inference',
            1,
        ),
    }
    for message, text in cases.items():
        bad = tmp_path / "references.toml"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=message) as err:
            bench.load_memory_rows(bad)
        assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def ref_copy(tmp_path_factory):
    """The memory rows' run configurations in a temporary folder, where their generated ONNX
    files are written (once for the module), not in the repository."""
    folder = tmp_path_factory.mktemp("reference")
    for row in ROWS:
        src = BENCH.REFERENCE_DIR / row.config
        (folder / row.config).write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_engine_agrees_with_each_memory_row(row, bench, ref_copy):
    """The engine's answer (engine.compile: out of memory or not) is the statement's, or the
    row is a known disagreement whose reason docs/fidelity.md gives."""
    got = bench.measure_memory(bench.MemoryRow(**{**row.__dict__, "cnn_table": False}), ref_copy)
    assert got.fits is not None and got.peak_tile_bytes > 0
    if row.known_disagreement:
        assert got.fits != row.fits, f"{row.id} agrees now: drop its known_disagreement"
        doc = (REPO / "docs" / "fidelity.md").read_text(encoding="utf-8")
        assert row.id in doc
    else:
        assert got.fits == row.fits, (row.id, got.note, got.peak_tile_bytes)
        if row.fits:
            assert got.peak_tile_bytes <= got.sram_per_tile


def test_cnn_rows_report_cycles_and_an_amp_share_below_the_peak(bench, ref_copy):
    row = next(r for r in bench.load_memory_rows() if r.id == "mem-mobilenet-v3-small-train")
    got = bench.measure_memory(row, ref_copy)
    assert got.fits and got.cycles_per_sample > 0
    assert 0 < got.amp_share < 1  # no plan beats the hardware's AMP peak
    assert got.flops_per_sample == pytest.approx(6 * 56_510_400, rel=0.01)  # torchvision's MACs


def test_expand_dims_removes_a_strided_inputs_temporaries():
    """ResNet-50's stride-2 1 x 1 downsample at micro-batch 90 (inference, proportion 0.6):
    with PopLibs' expandDims the plan's tile holds no strided-away input, so its temporaries
    are below the plain plan's, and the chosen plan is no slower than the plain one."""
    from engine.compiler import conv_plan as cp
    from engine.targets import get_target

    t = get_target("mk2")
    T, limit = t.tiles_per_ipu, 0.6 * t.sram_per_tile
    a = {
        "G": np.array([1]),
        "M": np.array([90 * 28 * 28]),
        "K": np.array([256]),
        "N": np.array([512]),
        "cin": np.array([256]),
        "kernel": np.array([1]),
        "row_width": np.array([28]),
        "a_dup": np.array([1]),
        "in_width": np.array([56]),
        "db": np.array([2]),
        "conv": np.array([True]),
        "role": np.array(["fwd"], object),
    }
    s = cp.with_expanded_dims(cp.conv_shapes(a, t, 2))
    assert len(s.M) == 2 and bool(s.expand[1])
    c, e, _ = cp.search(s, t, T, limit)
    plain = cp.ConvShapes(
        **{
            f: (v[:1] if isinstance(v, np.ndarray) else v)
            for f, v in ((f, getattr(s, f)) for f in cp.ConvShapes.__dataclass_fields__)
        }
    )
    _, e0, _ = cp.search(plain, t, T, limit)
    assert int(e.total[0]) <= int(e0.total[0])
    assert int(e.temp[0]) <= limit
    if bool(s.expand[c.op[0]]):
        rows = -(-int(e.sizes.field[0]) // 28)  # the output rows the tile computes, whole
        assert int(e.sizes.inputs[0]) <= rows * 28 * 256  # their inputs, no strided-away row


def test_swish_keeps_only_its_input_for_the_backward(tmp_path):
    """``x * sigmoid(x)`` (torch's export of nn.SiLU): PopTorch runs it as one Swish whose
    gradient takes the input alone, so the sigmoid's output is not an activation kept for the
    backward; PopART runs the ONNX ops as they are and keeps it."""
    import onnx
    import onnx_cnn_models as cnn

    import engine

    path = tmp_path / "b0.onnx"
    onnx.save(cnn.efficientnet("b0"), path)
    kept = {}
    for fw in ("poptorch", "popart"):
        c = engine.compile(
            {"model": str(path), "micro_batch_size": 4, "framework": fw, "recomputation": "off"}
        )
        V = c.variables
        names = np.asarray(V.name).astype(str)
        sig = np.array(["/Sigmoid" in n or n.endswith("Sigmoid") for n in names])
        # a sigmoid output kept for the backward lives past the forward pass
        long_lived = (V.live_end - V.live_start) > 50
        kept[fw] = int((sig & long_lived & (V.kind == 1)).sum())
    assert kept["popart"] > 0 and kept["poptorch"] < kept["popart"]


def test_bad_before_memory_file_is_one_sentence(bench, tmp_path, capsys):
    """``--before-memory`` names a JSON this script wrote; anything else is refused with one
    sentence and exit 2, before any simulation."""
    bad = tmp_path / "before.json"
    bad.write_text("{not json", encoding="utf-8")
    assert bench.main(["--memory-only", "--before-memory", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not a JSON table" in err and err.strip().count("\n") == 0
    assert "Traceback" not in err


def test_group_norm_keeps_one_activation_for_the_backward(tmp_path):
    """torch's export of nn.GroupNorm (InstanceNormalization, then Mul by the weight and Add):
    PopTorch runs one GroupNormalization whose gradient takes its input, weight and statistics,
    so the whitened output is not kept for the weight's Mul; PopART keeps it."""
    import onnx
    import onnx_cnn_models as cnn

    import engine

    path = tmp_path / "rn50gn.onnx"
    onnx.save(cnn.resnext(50, groups=1, width=64, norm_groups=32), path)
    kept = {}
    for fw in ("poptorch", "popart"):
        c = engine.compile(
            {"model": str(path), "micro_batch_size": 2, "framework": fw, "recomputation": "off"}
        )
        V = c.variables
        names = np.asarray(V.name).astype(str)
        norm = np.array([n.endswith("InstanceNormalization") for n in names])
        long_lived = (V.live_end - V.live_start) > 50
        kept[fw] = int((norm & long_lived & (V.kind == 1)).sum())
    assert kept["popart"] > 0 and kept["poptorch"] == 0
