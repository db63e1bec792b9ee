"""``analyse roofline``: bounds on analytic matmul shapes, the engine's MatMul FLOPs
against 2 M K N, no operation above its bound, the roofs of the target and precision."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from analyser.cli import main
from analyser.core import Analysis
from analyser.core.roofline import Roofs, roofline, roofline_frame

#: Mk2 GC200 (engine/data/chips.toml): 1,472 tiles, AMP 64 half MACs / tile / cycle, broadcast
#: exchange 8 B / tile / cycle, host link 12.5 GB/s at 1.325 GHz.
MK2_HALF = Roofs("16.16", 2 * 64 * 1472, 8 * 1472, 12.5e9 / 1.325e9)


@pytest.mark.parametrize(
    ("m", "k", "n", "to_host", "limit"),
    [
        # square, the result kept on chip: 512 FLOPs per exchanged byte, right of the ridge
        (1024, 1024, 1024, False, "compute"),
        # matrix-vector: about 1 FLOP per exchanged byte, far left of the ridge (16 FLOPs/B)
        (1, 1024, 1024, False, "exchange"),
        # the square result sent to the host: K FLOPs per host byte x 9.43 bytes per cycle
        (1024, 1024, 1024, True, "host link"),
    ],
)
def test_bounds_of_analytic_matmul_shapes(m, k, n, to_host, limit):
    flops = 2 * m * k * n
    moved = 2 * (m * k + k * n)  # FP16 operands brought to the tiles once
    host = 2 * m * n if to_host else 0
    cycles = 10**6
    f = roofline_frame(np.array(["mm"]), [flops], [moved], [host], np.array([cycles]), MK2_HALF)
    r = f.iloc[0]
    assert r.intensity_exchange == pytest.approx(flops / moved)
    roofs = {
        "compute": MK2_HALF.peak_flops_per_cycle,
        "exchange": flops / moved * 8 * 1472,
        "host link": flops / host * 12.5e9 / 1.325e9 if host else np.inf,
    }
    assert r.bound == pytest.approx(min(roofs.values()))
    assert r.limit == limit == min(roofs, key=roofs.get)
    assert r.achieved == pytest.approx(flops / cycles)
    if not host:
        assert r.intensity_host == np.inf


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    import engine
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("roofline") / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp", micro_batch_size=4), path)
    return path


def test_engine_matmuls_and_no_operation_above_its_bound(mlp):
    with Analysis.open(mlp) as a:
        r = roofline(a)
        ops = a.operations.set_index("name")
    assert r.roofs.precision == "32.32" and r.roofs.peak_flops_per_cycle == 2 * 16 * 1472
    # engine.models.mlp: 784 -> 784 -> 784 -> 128 -> 10, micro-batch 4
    sizes = (784, 784, 784, 128, 10)
    for i, (k, n) in enumerate(itertools.pairwise(sizes)):
        name = f"layers.{2 * i}/fwd"
        assert ops.loc[name, "flops"] == 2 * 4 * k * n, name
        row = r.operations.set_index("name").loc[name]
        assert row.flops == 2 * 4 * k * n * ops.loc[name, "executions"]
    o = r.operations
    assert len(o) and (o["achieved"] <= o["bound"]).all()
    assert (o["bound"] <= r.roofs.peak_flops_per_cycle).all()
    run = r.run.iloc[0]
    assert run.achieved <= run.bound and run.host_bytes > 0


def test_walkthrough_half_precision_roofs_and_bounds(walkthrough_profiles):
    with Analysis.open(walkthrough_profiles["2-half"]) as a:
        r = roofline(a)
    # PopTorch leaves PopLibs' float partials (partials_type auto): the AMP at half the rate of
    # half partials, 32 MACs per tile per cycle (tests/test_roofline_partials.py)
    assert r.roofs.precision == "16.16" and r.roofs.partials == "float"
    assert r.roofs.peak_flops_per_cycle == MK2_HALF.peak_flops_per_cycle / 2
    o = r.operations
    assert (o["achieved"] <= o["bound"]).all() and set(o["limit"]) <= {"compute", "exchange"}


def test_cli(mlp, walkthrough_profiles, tmp_path, capsys):
    assert main(["roofline", str(mlp), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["roofs"]["precision"] == "32.32" and d["operations"]
    assert main(["roofline", str(mlp), "-o", str(tmp_path / "r.txt")]) == 0
    assert "none above its bound" in (tmp_path / "r.txt").read_text()
    for argv in (
        ["roofline", str(walkthrough_profiles["1-base"])],  # out of memory: nothing ran
        ["roofline", str(mlp), "-o", str(mlp)],
        ["roofline", str(tmp_path / "missing.h5")],
    ):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("analyse roofline:") and "\n" not in err, err
