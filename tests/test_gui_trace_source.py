"""The Execution Trace names an operation's place in the model: its module path (``layer``)
and its source (file and line, when the exporter wrote it) in the step tooltip, and the
search finds steps by either."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    import engine
    from analyser.core import Analysis
    from analyser.trace import trace_of
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("trace-source") / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp", mode="inference", micro_batch_size=1), path)
    with Analysis.open(path) as a:
        yield trace_of(a)


def test_tooltip_and_search_name_the_module_and_source(trace):
    from analyser.gui.model.timeline import step_text

    p = trace.programs
    assert {"layer", "source"} <= set(p.columns)
    layer = str(p["layer"][p["layer"] != ""][-1])
    in_layer = p["layer"] == layer
    # the exporter's file and line for that module's programs (the mlp's ONNX export has none)
    saved = p["source"].copy()
    p["source"] = np.where(in_layer, "mynet.py:42", saved).astype(object)
    try:
        found = trace.search("MYNET.PY:42")
        assert found.total > 0
        assert np.isin(found.program, np.flatnonzero(in_layer)).all()
        d = trace.step_details(int(found.rows[0]))
        assert d["layer"] == layer and d["source"] == "mynet.py:42"
        text = step_text(d, d["ipu"])
        assert f"module {layer} (mynet.py:42)" in text
        by_module = trace.search(layer)
        assert set(found.program.tolist()) <= set(by_module.program.tolist())
    finally:
        p["source"] = saved
    plain = step_text({**d, "source": ""}, d["ipu"])
    assert f"module {layer}" in plain and "(" not in plain.split("module")[-1]
