"""Memory counters in exported traces: not-always-live bytes per IPU by variable kind
(Chrome "C" events, Perfetto counter tracks), consistent with the liveness report and its peak."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analyser.core import Analysis
from analyser.export import export_trace


@pytest.fixture(scope="module")
def half(walkthrough_profiles):
    return walkthrough_profiles["2-half"]


def test_chrome_counters_by_kind_match_the_liveness_peak(half, tmp_path):
    out = tmp_path / "t.json"
    export_trace(half, out)
    events = json.loads(out.read_text())["traceEvents"]
    total = [e for e in events if e.get("name") == "memory"]
    kinds = [e for e in events if e.get("name") == "not-always-live memory by kind (bytes)"]
    with Analysis.open(half) as a:
        lv = a.liveness
        n_ipus = a.target.num_ipus
    assert len(kinds) == len(total) > 0
    for t, k in zip(total, kinds):
        assert (t["pid"], t["ts"]) == (k["pid"], k["ts"])
        # by kind, they add up to the total minus the always-live bytes
        assert sum(k["args"].values()) == t["args"]["bytes"] - int(lv.always_live[t["pid"]])
        assert {"activation", "gradient", "temporary"} <= set(k["args"])
    for i in range(n_ipus):
        peak = max(sum(k["args"].values()) for k in kinds if k["pid"] == i)
        assert peak == int(lv.not_always_live[i].max())
        assert peak + int(lv.always_live[i]) == int(lv.peak_bytes[i])


def test_perfetto_counter_tracks(half, tmp_path):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    out = tmp_path / "t.pftrace"
    export_trace(half, out, fmt="perfetto")
    trace = Trace.FromString(out.read_bytes())
    names, values = {}, {}
    for pk in trace.packet:
        if pk.HasField("track_descriptor") and pk.track_descriptor.name:
            names[pk.track_descriptor.uuid] = pk.track_descriptor.name
        if pk.HasField("track_event") and pk.track_event.type == 4:  # TYPE_COUNTER
            values.setdefault(pk.track_event.track_uuid, []).append(pk.track_event.counter_value)
    with Analysis.open(half) as a:
        lv = a.liveness
        n_ipus = a.target.num_ipus
    for i in range(n_ipus):
        tracks = [u for u, n in names.items() if n.startswith(f"IPU {i} not-always-live: ")]
        assert len(tracks) >= 3
        lengths = {len(values[u]) for u in tracks}
        assert len(lengths) == 1  # one value of every kind at each change
        stacked = np.sum([values[u] for u in tracks], axis=0)
        assert stacked.max() == int(lv.not_always_live[i].max())
        memory = next(u for u, n in names.items() if n == f"IPU {i} memory (bytes)")
        np.testing.assert_array_equal(np.asarray(values[memory]) - int(lv.always_live[i]), stacked)
