"""Chrome / Perfetto trace export: parses, every event well formed, counts match the steps."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analyser.cli import main
from analyser.export import export_trace
from profiles import open_profile, write_profile
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="session")
def trace_profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace")
    fits, oom = d / "fits.h5", d / "oom.h5"
    write_profile(
        fits, make_synthetic_profile(n_steps=6000, n_ipus=2, tiles=128, seed=1, device_iterations=1)
    )
    write_profile(oom, make_synthetic_profile(n_steps=100, n_ipus=1, tiles=128, oom=True))
    return fits, oom


def test_chrome_trace_well_formed(trace_profiles, tmp_path):
    fits, _ = trace_profiles
    out = tmp_path / "t.json"
    assert main(["export-trace", str(fits), "--format", "chrome", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    events = doc["traceEvents"]
    with open_profile(fits) as p:
        n_steps, n_ipus = p.n_steps, p.num_ipus
    x = [e for e in events if e["ph"] == "X"]
    m = [e for e in events if e["ph"] == "M"]
    c = [e for e in events if e["ph"] == "C"]
    assert len(x) == n_steps
    assert {e["ph"] for e in events} <= {"X", "M", "C"}
    for e in x:
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["pid"], int) and 0 <= e["pid"] < n_ipus
        assert isinstance(e["tid"], int)
        assert e["ts"] >= 0 and e["dur"] >= 0
        assert e["args"]["cycles"] >= 0
    names = {(e["pid"], e["args"]["name"]) for e in m if e["name"] == "process_name"}
    assert names == {(i, f"IPU {i}") for i in range(n_ipus)}
    assert any(e["name"] == "thread_name" for e in m)
    total = [e for e in c if e["name"] == "memory"]
    assert total and all(
        isinstance(e["args"]["bytes"], int) and e["args"]["bytes"] > 0 for e in total
    )
    # the not-always-live counters by kind sit beside the total, one per change of it
    by_kind = [e for e in c if e["name"] != "memory"]
    assert all(e["name"] == "not-always-live memory by kind (bytes)" for e in by_kind)
    assert len(by_kind) in (0, len(total))
    # per lane, complete events never overlap partially (proper nesting for trace viewers)
    for pid in range(n_ipus):
        for tid in {e["tid"] for e in x if e["pid"] == pid}:
            lane = sorted(
                (e["ts"], e["ts"] + e["dur"]) for e in x if e["pid"] == pid and e["tid"] == tid
            )
            s = np.array([a for a, _ in lane])
            e_ = np.array([b for _, b in lane])
            assert (s[1:] >= e_[:-1] - 1e-3).all()


def test_split_by_run(trace_profiles, tmp_path):
    fits, _ = trace_profiles
    files = export_trace(fits, tmp_path / "t.json", split_by_run=True)
    with open_profile(fits) as p:
        runs = p.array("/execution/run_starts").size
        n_steps = p.n_steps
    assert len(files) == runs > 1
    total = 0
    for f in files:
        total += sum(1 for e in json.loads(f.read_text())["traceEvents"] if e["ph"] == "X")
    assert total == n_steps


def test_perfetto_trace(trace_profiles, tmp_path):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    fits, _ = trace_profiles
    out = tmp_path / "t.pftrace"
    assert main(["export-trace", str(fits), "--format", "perfetto", "-o", str(out)]) == 0
    trace = Trace.FromString(out.read_bytes())
    with open_profile(fits) as p:
        n_steps, n_ipus = p.n_steps, p.num_ipus
    kinds = [pk.track_event.type for pk in trace.packet if pk.HasField("track_event")]
    assert kinds.count(TrackEvent.Type.TYPE_SLICE_BEGIN) == n_steps
    assert kinds.count(TrackEvent.Type.TYPE_SLICE_END) == n_steps
    assert kinds.count(TrackEvent.Type.TYPE_COUNTER) > 0
    procs = {
        pk.track_descriptor.process.process_name
        for pk in trace.packet
        if pk.HasField("track_descriptor") and pk.track_descriptor.HasField("process")
    }
    assert procs == {f"IPU {i}" for i in range(n_ipus)}


def test_export_errors(trace_profiles, tmp_path, capsys):
    fits, oom = trace_profiles
    assert main(["export-trace", str(oom), "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "no execution trace" in err and "Traceback" not in err
    assert not (tmp_path / "x.json").exists()
    assert main(["export-trace", str(fits), "-o", str(fits)]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert main(["export-trace", str(tmp_path / "missing.h5"), "-o", str(tmp_path / "y.json")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no partial or temporary files left


def _reference_perfetto_steps(path) -> bytes:
    """The step packets of a Perfetto export built one by one with the protobuf classes (the
    exporter encodes them from numpy columns; both must give the same bytes)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    from analyser.core import Analysis
    from analyser.export.trace import _LANE_OF_TYPE, _Prepared
    from profiles import schema

    out = Trace()
    with Analysis.open(path) as a:
        p = _Prepared(a.src)
        steps = a.src.profile.steps(rows=slice(0, p.src.n_steps))
        ns = 1e9 / p.clock
        last: dict[int, int] = {}
        for r in steps.itertuples():
            uuid = 100000 + int(r.ipu) * 100 + int(_LANE_OF_TYPE[int(r.type)])
            begin = out.packet.add()
            begin.timestamp = round(int(r.start) * ns)
            begin.trusted_packet_sequence_id = 7
            begin.track_event.type = TrackEvent.Type.TYPE_SLICE_BEGIN
            begin.track_event.track_uuid = uuid
            begin.track_event.name = p.names[int(r.program)]
            begin.track_event.categories.append(schema.PROGRAM_TYPES[int(r.type)])
            da = begin.track_event.debug_annotations.add()
            da.name = "cycles"
            da.int_value = int(r.cycles)
            end = out.packet.add()
            end.timestamp = round((int(r.start) + int(r.cycles)) * ns)
            end.trusted_packet_sequence_id = 7
            end.track_event.type = TrackEvent.Type.TYPE_SLICE_END
            end.track_event.track_uuid = uuid
            mem = int(p.mem_of_prog[int(r.ipu), int(r.program)])
            if mem >= 0 and last.get(int(r.ipu)) != mem:
                last[int(r.ipu)] = mem
                c = out.packet.add()
                c.timestamp = begin.timestamp
                c.trusted_packet_sequence_id = 7
                c.track_event.type = TrackEvent.Type.TYPE_COUNTER
                c.track_event.track_uuid = 200000 + int(r.ipu)
                c.track_event.counter_value = mem
    return out.SerializeToString()


def test_perfetto_packets_are_protobufs_bytes(trace_profiles, tmp_path):
    """The vectorised encoder writes exactly what protobuf serialises for the same packets."""
    fits, _ = trace_profiles
    out = tmp_path / "t.pftrace"
    export_trace(fits, out, fmt="perfetto")
    data = out.read_bytes()
    ref = _reference_perfetto_steps(fits)
    assert len(ref) > 100_000
    assert data.endswith(ref)
    # what comes before is the track descriptors only
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    head = Trace.FromString(data[: len(data) - len(ref)])
    assert all(pk.HasField("track_descriptor") for pk in head.packet)


def test_chrome_events_match_steps(trace_profiles, tmp_path):
    """Every X event carries its step's values (the formatting is vectorised)."""
    fits, _ = trace_profiles
    out = tmp_path / "t.json"
    export_trace(fits, out)
    x = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    with open_profile(fits) as p:
        steps = p.steps(rows=slice(0, p.n_steps), decode=True)
        clock = p.meta["clock_hz"]
        names = p.table("/programs/nodes", ["name"], decode=True)["name"].to_numpy()
    assert len(x) == len(steps)
    for e, r in zip(x, steps.itertuples()):
        assert e["name"] == names[r.program]
        assert e["cat"] == r.type and e["pid"] == r.ipu and e["args"]["phase"] == r.phase
        assert e["args"]["cycles"] == r.cycles and e["args"]["start_cycle"] == r.start
        assert e["ts"] == pytest.approx(r.start * 1e6 / clock, abs=1e-4)
        assert e["dur"] == pytest.approx(r.cycles * 1e6 / clock, abs=1e-4)
        moved = bool(r.bytes_in or r.bytes_out)
        assert ("dest" in e["args"]) == moved
        if moved:
            assert e["args"]["bytes_in"] == r.bytes_in and e["args"]["dest"] == r.dest


def test_an_open_analysis_is_exported_through_its_own_reader(trace_profiles, tmp_path, monkeypatch):
    """The export reads through the analysis's profile reader (the one its
    trace query engine reads), opening no other; the bytes are those of an export by path."""
    import profiles
    from analyser.core import Analysis
    from analyser.export.aggregate import export_aggregated
    from analyser.trace import trace_of

    fits, _ = trace_profiles
    by_path = tmp_path / "path.json"
    export_trace(fits, by_path)
    export_aggregated(fits, tmp_path / "agg-path.json", 500)
    with Analysis.open(fits) as a:

        def no_second_reader(*_args, **_kwargs):
            raise AssertionError("the export opened another reader")

        monkeypatch.setattr(profiles, "open_profile", no_second_reader)
        assert trace_of(a).profile is a.src.profile
        export_trace(a, tmp_path / "analysis.json")
        export_aggregated(a, tmp_path / "agg-analysis.json", 500)
        assert a.src.profile.n_steps > 0  # still open: the export does not close it
    assert (tmp_path / "analysis.json").read_bytes() == by_path.read_bytes()
    assert (tmp_path / "agg-analysis.json").read_bytes() == (
        tmp_path / "agg-path.json"
    ).read_bytes()


@pytest.mark.parametrize(
    ("run_starts", "words"),
    [
        (np.zeros(0, np.int64), "records no host calls"),
        (np.arange(200_000, dtype=np.int64), "claims 200,000 host calls"),
    ],
)
def test_split_by_run_is_bounded(tmp_path, capsys, run_starts, words):
    """No run starts, or more than a split may write (200,000 on a 300-step profile): one
    sentence, exit 2, no file written."""
    data = make_synthetic_profile(n_steps=300, n_ipus=1, tiles=16)
    data["/execution"]["run_starts"] = run_starts
    path = tmp_path / "p.h5"
    write_profile(path, data)
    out = tmp_path / "out"
    out.mkdir()
    args = ["export-trace", str(path), "--split-by-run", "-o", str(out / "t.json")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert list(out.iterdir()) == []


@pytest.fixture(scope="module")
def host_profile(tmp_path_factory):
    """An engine profile with the host's timeline (preparation and the call before the device)."""
    import engine
    from engine.config import RunConfig

    path = tmp_path_factory.mktemp("host_trace") / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp"), path)
    with open_profile(path) as p:
        host = {k: p.array(f"/execution/host/{k}").astype(np.int64) for k in ("start", "cycles")}
        clock = float(p.meta["clock_hz"])
    assert host["start"].min() < 0  # the host's time before the device
    return path, host, clock


def test_chrome_trace_has_the_host_lane(host_profile, tmp_path):
    """The host's preparation, call and waits are events of their own "Host" process, on the
    same clock as the steps (time 0 is the host's first event)."""
    path, host, clock = host_profile
    out = tmp_path / "t.json"
    assert main(["export-trace", str(path), "-o", str(out)]) == 0
    ev = json.loads(out.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    host_pid = next(pid for pid, name in names.items() if name == "Host")
    got = [e for e in ev if e["ph"] == "X" and e["pid"] == host_pid]
    assert len(got) == host["start"].size
    assert sorted(e["args"]["start_cycle"] for e in got) == sorted(host["start"].tolist())
    steps = [e for e in ev if e["ph"] == "X" and e["pid"] != host_pid]
    xs = got + steps
    assert min(e["ts"] for e in xs) == pytest.approx(0.0)
    # one clock: times differ as the cycles do
    a, b = got[0], steps[0]
    delta = (b["args"]["start_cycle"] - a["args"]["start_cycle"]) * 1e6 / clock
    assert b["ts"] - a["ts"] == pytest.approx(delta, abs=1e-3)
    for e in got:
        assert e["dur"] == pytest.approx(e["args"]["cycles"] * 1e6 / clock)


def test_perfetto_trace_has_the_host_lane(host_profile, tmp_path):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    path, host, clock = host_profile
    out = tmp_path / "t.pftrace"
    assert main(["export-trace", str(path), "--format", "perfetto", "-o", str(out)]) == 0
    trace = Trace.FromString(out.read_bytes())
    desc = [pk.track_descriptor for pk in trace.packet if pk.HasField("track_descriptor")]
    host_proc = [d for d in desc if d.HasField("process") and d.process.process_name == "Host"]
    assert len(host_proc) == 1
    pid = host_proc[0].process.pid
    host_tracks = {d.uuid for d in desc if d.HasField("thread") and d.thread.pid == pid}
    events = [pk for pk in trace.packet if pk.HasField("track_event")]
    begins = [
        pk
        for pk in events
        if pk.track_event.type == TrackEvent.Type.TYPE_SLICE_BEGIN
        and pk.track_event.track_uuid in host_tracks
    ]
    assert len(begins) == host["start"].size
    assert {pk.track_event.name for pk in begins} >= {"prepare", "call"}
    # unsigned timestamps: the host's lead shifts every event, none wraps around
    ts = np.array([pk.timestamp for pk in events], dtype=np.float64)
    span_ns = (host["start"].min() * -1 + 10**10) * 1e9 / clock
    assert ts.min() == 0 and ts.max() < span_ns
