"""The Pipeline chart's data (no Qt): a run longer than the rows read at once is summarised
chunk by chunk, never cut."""

from __future__ import annotations

import numpy as np
import pytest

from analyser.core.quantities import PASSES, PHASES
from profiles.synthetic import make_synthetic_profile
from profiles.writer import write_profile


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    from analyser.gui.model.document import Document

    path = tmp_path_factory.mktemp("pipe_chunks") / "p.h5"
    write_profile(
        path,
        make_synthetic_profile(n_steps=16_000, n_ipus=2, tiles=32, n_programs=160, grad_accum=4),
    )
    d = Document.open(path)
    yield d
    d.close()


def _first_iteration_steps(doc):
    """Every step of the first device iteration, read whole (the reference)."""
    from analyser.gui.model import data

    tw = data.trace_window(doc)
    cols = ("iteration", "program", "start", "cycles", "stage", "micro_batch", "phase")
    parts = [tw.access.read(*tw.access.ipu_rows(i), cols) for i in range(tw.n_ipus)]
    steps = {k: np.concatenate([np.asarray(p[k], dtype=np.int64) for p in parts]) for k in cols}
    # the first host call (from the first run start to the next)
    runs = np.asarray(doc.analysis.src.array("/execution/run_starts"), dtype=np.float64)
    t0 = runs[0] if len(runs) else -np.inf
    t1 = runs[1] if len(runs) > 1 else np.inf
    first = (steps["iteration"] == steps["iteration"].min()) & (steps["start"] >= t0)
    first &= steps["start"] < t1
    steps = {k: v[first] for k, v in steps.items()}
    prog_op = np.asarray(tw.access.table("/programs/nodes", ["op"])["op"], dtype=np.int64)
    op_pass = (
        doc.analysis.src.table("/graph/operations", ["pass"])["pass"].to_numpy().astype(np.int64)
    )
    op = prog_op[steps["program"]]
    steps["pass"] = np.where(op >= 0, op_pass[np.clip(op, 0, None)], -1)
    return tw, steps


def test_a_run_longer_than_one_read_is_summarised_whole(doc, monkeypatch):
    """With 29 rows read at a time (the iteration has over a hundred per IPU), every step of the iteration is in
    the boxes: per-stage busy cycles and step counts equal the full data's, the chart ends at
    the iteration's last step, and the result equals reading the run in one piece."""
    from analyser.gui.model import pipeline

    tw, steps = _first_iteration_steps(doc)
    assert len(steps["start"]) > 3 * 29  # several chunks per IPU
    whole = pipeline.pipeline_chart(doc.analysis, tw)
    monkeypatch.setattr(pipeline, "CHUNK_ROWS", 29)
    chunked = pipeline.pipeline_chart(doc.analysis, tw)

    assert chunked.boxes.equals(whole.boxes)
    assert chunked.bands == whole.bands and chunked.stage_ipu == whole.stage_ipu
    assert chunked.t1 == float((steps["start"] + steps["cycles"]).max())

    wu = steps["phase"] == PHASES.index("weightUpdate")
    rest = ~wu & (steps["stage"] >= 0) & (steps["micro_batch"] >= 0) & (steps["pass"] >= 0)
    b = chunked.boxes[chunked.boxes["micro_batch"] >= 0]
    for s in range(chunked.n_stages):
        mine = rest & (steps["stage"] == s)
        sel = b["stage"] == s
        assert int(b.loc[sel, "busy"].sum()) == int(steps["cycles"][mine].sum())
        assert int(b.loc[sel, "steps"].sum()) == int(mine.sum())
    upd = chunked.boxes[chunked.boxes["micro_batch"] < 0]  # the weight update's boxes
    assert (upd["pass"] == PASSES.index("update")).all()
    assert int(upd["steps"].sum()) == int(wu.sum())  # every weight-update step has a stage
    assert int(upd["busy"].sum()) == int(steps["cycles"][wu].sum())
