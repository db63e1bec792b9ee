"""The critical path (analyser.core.critical_path, ``analyse critical-path``): a known path on a
hand-made timeline, links that add up to the call's length on the walkthrough, the pointer
doubling against a step-by-step walk, and the command's outputs and refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analyser.cli import main
from analyser.core import Analysis
from analyser.core.critical_path import critical_path, path_from, step_predecessors
from profiles.schema import PROGRAM_TYPES

T = {t: i for i, t in enumerate(PROGRAM_TYPES)}


def _timeline(rows):
    """Arrays of a two-IPU timeline from (ipu, start, cycles, own, type) rows, IPU by IPU."""
    rows = sorted(rows, key=lambda r: (r[0], r[1]))
    a = np.array([r[:4] for r in rows], dtype=np.int64)
    types = np.array([T[r[4]] for r in rows], dtype=np.int64)
    offsets = np.searchsorted(a[:, 0], np.arange(3))
    return a[:, 0], a[:, 1], a[:, 2], a[:, 3], types, offsets


def test_a_known_path_through_two_ipus_and_a_host_wait():
    # IPU 0: compute 0-100, sync waits 100-300 (released by IPU 1), sync 300-310, compute to 350
    # IPU 1: host wait 0-50 then stream 50-60, compute 60-300, sync 300-310 (arrives last)
    rows = [
        (0, 0, 100, 100, "OnTileExecute"),  # row 0
        (0, 100, 210, 10, "Sync"),  # row 1: waits 200, released at 300
        (0, 310, 40, 40, "OnTileExecute"),  # row 2: ends last (350)
        (1, 0, 60, 10, "StreamCopyBegin"),  # row 3: waits 50 for the host
        (1, 60, 240, 240, "OnTileExecute"),  # row 4
        (1, 300, 10, 10, "Sync"),  # row 5: arrives last
        (1, 310, 5, 5, "OnTileExecute"),  # row 6
    ]
    ipu, start, cycles, own, types, offsets = _timeline(rows)
    pred, wait = step_predecessors(ipu, start, cycles, own, types, offsets)
    assert pred.tolist() == [-1, 4, 1, -1, 3, 4, 5]  # row 1 continues on IPU 1 before its sync
    assert wait.tolist() == [0, 200, 0, 50, 0, 0, 0]
    chain = path_from(pred, int(np.argmax(start + cycles)))
    assert chain.tolist() == [1, 2, 3, 4]  # IPU 0's first compute is not on the path
    end = start + cycles
    contrib = end[chain] - np.where(pred[chain] >= 0, end[np.maximum(pred[chain], 0)], 0)
    assert contrib.sum() == 350  # the links add up to the end of the trace
    assert contrib.tolist() == [10, 40, 60, 240]


def test_pointer_doubling_matches_a_step_by_step_walk():
    rng = np.random.default_rng(7)
    n = 50_000
    pred = np.arange(n) - 1 - rng.integers(0, 3, n)  # a forest whose edges go back
    pred[pred < -1] = -1
    last = n - 1
    walk, k = [], last
    while k >= 0:
        walk.append(k)
        k = pred[k]
    assert path_from(pred, last).tolist() == sorted(walk)


@pytest.mark.parametrize("step", ["2-half", "3-accumulate", "6-async"])
def test_links_add_up_to_the_call_on_the_walkthrough(walkthrough_profiles, step):
    with Analysis.open(walkthrough_profiles[step]) as a:
        cp = critical_path(a.src)
        ex = a.execution
    assert cp.device_cycles == ex.total_cycles
    assert cp.call_cycles == ex.host_inclusive_cycles
    assert sum(link.cycles for link in cp.links) == cp.call_cycles
    assert int(cp.contribution.sum()) == cp.device_cycles
    assert (cp.contribution >= 0).all()
    assert abs(sum(link.share for link in cp.links) - 1) < 1e-9
    # the walkthrough is host-bound: the host's preparation is the longest link
    assert cp.links[0].kind == "host"
    stages = [link for link in cp.links if link.kind == "stage"]
    assert {(s.ipu, s.stage) for s in stages} == {(0, 0), (1, 1)}
    assert all(link.layers for link in stages)
    assert int(cp.per_call.sum()) == cp.device_cycles


def test_the_command_prints_and_writes_json(walkthrough_profiles, tmp_path, capsys):
    prof = str(walkthrough_profiles["3-accumulate"])
    assert main(["critical-path", prof]) == 0
    out = capsys.readouterr().out
    assert "critical path" in out and "stage 0 on IPU 0" in out
    dest = tmp_path / "cp.json"
    assert main(["critical-path", prof, "--json", "-o", str(dest)]) == 0
    doc = json.loads(dest.read_text())
    assert sum(link["cycles"] for link in doc["links"]) == doc["call_cycles"]
    assert doc["links"][0]["options"]  # what run options act on it
    capsys.readouterr()


def test_a_profile_that_does_not_fit_has_no_path(walkthrough_profiles, capsys):
    assert main(["critical-path", str(walkthrough_profiles["1-base"])]) == 2
    err = capsys.readouterr().err
    assert "no critical path" in err and "Traceback" not in err


def test_the_summary_names_the_top_links(walkthrough_profiles, capsys, monkeypatch):
    import analyser.core.critical_path as cp

    prof = str(walkthrough_profiles["3-accumulate"])
    assert main(["summary", prof]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Critical path (analyse critical-path): the host preparing the samples" in out
    monkeypatch.setattr(cp, "SUMMARY_STEPS", 10)  # a long trace: a pointer, not the walk
    assert main(["summary", prof]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "not computed for a summary of" in out
