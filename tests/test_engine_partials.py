"""A 16.16 model's partials follow its framework: PopLibs' float under PopTorch and PopART.

PopTorch sets ``partialsType`` only in ``opts.Precision.setPartialsType``; PopART passes a
convolution's partials type only when one is named and defaults a matmul's to float; PopLibs'
``ConvOptions`` default is float. Float partials halve the AMP's conv units (8 instead of 16 on
Mk2), so the same plan search costs more cycles and more partial-sum bytes.
"""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.config import RunConfig

BASE = dict(model="resnet50", image_size=32, micro_batch_size=4, precision="16.16", mode="training")


@pytest.fixture(scope="module")
def compiled():
    runs = {
        "poptorch": RunConfig(**BASE, framework="poptorch"),
        "popart": RunConfig(**BASE, framework="popart"),
        "float": RunConfig(**BASE, framework="poptorch", partials_type="float"),
        "half": RunConfig(**BASE, framework="poptorch", partials_type="half"),
        "tensorflow": RunConfig(**BASE, framework="tensorflow"),
    }
    return {k: engine.compile(c) for k, c in runs.items()}


def _amp_cycles(c) -> int:
    return int(c.ops.cycles[c.ops.family == "amp"].sum())


def test_poptorch_and_popart_plan_float_partials(compiled):
    flt = _amp_cycles(compiled["float"])
    assert _amp_cycles(compiled["poptorch"]) == flt
    assert _amp_cycles(compiled["popart"]) == flt
    # TensorFlow keeps half; an explicit setting wins over the framework's default
    assert _amp_cycles(compiled["half"]) == _amp_cycles(compiled["tensorflow"]) < flt


def test_float_partials_cost_more_than_half(compiled):
    flt, half = compiled["float"], compiled["half"]
    assert np.array_equal(flt.ops.name, half.ops.name)
    # half the conv units: the model's convolutions and matmuls cost more in all (a single op
    # may plan a partition whose float-partial reduction is cheaper, so not op by op)
    assert _amp_cycles(flt) > 1.1 * _amp_cycles(half)
    pb = [c.ops.temp_bytes[c.ops.family == "amp"].sum() for c in (flt, half)]
    assert pb[0] > pb[1]


def test_partials_dtype_resolution():
    assert RunConfig(**BASE).partials_dtype == "float32"
    assert RunConfig(**{**BASE, "precision": "16.32"}).partials_dtype == "float32"
    assert RunConfig(**BASE, framework="tensorflow").partials_dtype == "float16"
    assert RunConfig(**BASE, partials_type="half").partials_dtype == "float16"
    # FP32 operands always accumulate in float
    assert RunConfig(**{**BASE, "precision": "32.32"}, partials_type="half").partials_dtype == (
        "float32"
    )
