"""Round trips through the writer and the lazy reader, and the synthetic profile's invariants."""

from __future__ import annotations

import h5py
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiles import ProfileWriter, open_profile, schema, validate, write_profile
from profiles.errors import ProfileError, SchemaMismatchError
from profiles.liveness import TileChanges
from profiles.synthetic import make_synthetic_profile, write_synthetic_profile

STEPS = "/execution/steps"


@pytest.fixture(scope="session")
def small_data() -> dict:
    return make_synthetic_profile(n_steps=3000, n_ipus=3, tiles=48, n_programs=120, seed=7)


@pytest.fixture(scope="session")
def small_file(tmp_path_factory, small_data) -> str:
    path = tmp_path_factory.mktemp("profiles") / "small.h5"
    write_profile(path, small_data)
    return str(path)


def _assert_same(data: dict, path: str) -> None:
    with open_profile(path) as p:
        for gp, fields in data.items():
            g = schema.group(gp)
            for name, value in fields.items():
                f = g.field(name)
                if f.kind == "attribute":
                    if gp == "/":
                        continue
                    stored = p._h5[gp.strip("/")].attrs[name] if gp != "/" else None
                    if f.dtype == "json":
                        import json

                        assert json.loads(stored) == json.loads(json.dumps(value, default=list))
                    elif f.dtype == "float64":
                        assert float(stored) == pytest.approx(float(value))
                    else:
                        assert stored == value, (gp, name)
                    continue
                got = p.array(f"{gp}/{name}")
                want = np.asarray(value)
                if f.dtype == "str":
                    assert got.tolist() == want.tolist(), (gp, name)
                else:
                    assert got.dtype == np.dtype(f.dtype), (gp, name)
                    np.testing.assert_array_equal(got, want.astype(f.dtype), err_msg=f"{gp}/{name}")


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    args=st.fixed_dictionaries(
        {
            "n_steps": st.integers(0, 400),
            "n_ipus": st.integers(1, 3),
            "tiles": st.integers(8, 40),
            "n_programs": st.integers(10, 60),
            "seed": st.integers(0, 2**16),
            "oom": st.booleans(),
        }
    )
)
def test_round_trip_of_generated_profiles(tmp_path, args):
    data = make_synthetic_profile(**args, liveness_steps=16)
    n_steps, n_ipus, tiles, seed, oom = (
        args[k] for k in ("n_steps", "n_ipus", "tiles", "seed", "oom")
    )
    path = tmp_path / f"p{seed}_{n_steps}_{oom}.h5"
    write_profile(path, data)
    _assert_same(data, str(path))
    assert validate(path) == []
    with open_profile(path) as p:
        assert p.status == ("oom" if oom else "ok")
        assert p.has_execution is (not oom)
        assert p.num_ipus == n_ipus and p.tiles_per_ipu == tiles
        assert p.version == schema.FORMAT_VERSION
        if not oom:
            assert p.n_steps == n_steps
            assert p.ipu_offsets[-1] == n_steps
            # the writer's derived maximum matches the data
            cyc = np.asarray(data[STEPS]["cycles"])
            ipu = np.asarray(data[STEPS]["ipu"])
            for i in range(n_ipus):
                expect = cyc[ipu == i].max() if (ipu == i).any() else 0
                assert p.max_step_cycles[i] == expect


def test_chunked_writer_equals_whole_writer(tmp_path):
    kw = dict(n_steps=2500, n_ipus=2, tiles=24, n_programs=50, seed=3, liveness_steps=16)
    a = tmp_path / "chunked.h5"
    write_synthetic_profile(a, chunk_rows=333, **kw)
    data = make_synthetic_profile(**kw)
    _assert_same({k: v for k, v in data.items() if k != "/execution"}, str(a))
    with open_profile(a) as p:
        np.testing.assert_array_equal(p.ipu_offsets, data["/execution"]["ipu_offsets"])
        assert p.execution_totals()["total_cycles"] == data["/execution"]["total_cycles"]
    assert validate(a) == []


def test_open_reads_metadata(small_file, small_data):
    with open_profile(small_file) as p:
        assert p.run_config == small_data["/meta"]["run_config"]
        assert p.target["tiles_per_ipu"] == 48
        assert p.sizes[STEPS] == 3000
        assert p.sizes["/programs/nodes"] == 120
        assert set(p.execution_totals()) >= {"total_cycles", "samples", "throughput"}
        s = p.summary()
        assert s["oom_tiles"] == 0 and len(s["memory_per_ipu"]) == 3
        assert "3 IPU(s) x 48 tiles" in repr(p)


def test_table_columns_rows_and_decode(small_file, small_data):
    with open_profile(small_file) as p:
        ops = p.table("/graph/operations")
        assert list(ops.columns) == [c.name for c in schema.group("/graph/operations").columns]
        part = p.table(
            "/programs/nodes", columns=["type", "cycles"], rows=slice(5, 15), decode=True
        )
        assert list(part.index) == list(range(5, 15))
        assert isinstance(part["type"].dtype, pd.CategoricalDtype)
        want = np.asarray(schema.PROGRAM_TYPES)[small_data["/programs/nodes"]["type"][5:15]]
        assert part["type"].astype(str).tolist() == want.tolist()
        picked = p.table("/programs/nodes", columns=["cycles"], rows=[9, 2, 9])
        assert (
            picked["cycles"].tolist() == small_data["/programs/nodes"]["cycles"][[9, 2, 9]].tolist()
        )
        with pytest.raises(ProfileError, match="no column 'nope'"):
            p.table("/graph/operations", columns=["nope"])
        with pytest.raises(ProfileError, match="not a table"):
            p.table("/memory")


def test_steps_by_ipu_and_rows(small_file, small_data):
    steps = small_data[STEPS]
    with open_profile(small_file) as p:
        lo, _hi = p.ipu_rows(1)
        df = p.steps(ipu=1, rows=slice(10, 30))
        assert df.index[0] == lo + 10 and len(df) == 20
        assert (df["ipu"] == 1).all()
        np.testing.assert_array_equal(df["start"], steps["start"][lo + 10 : lo + 30])
        tail = p.steps(ipu=2, rows=slice(-5, None), columns=["start"])
        assert len(tail) == 5 and tail.index[-1] == p.n_steps - 1
        with pytest.raises(ProfileError, match="IPU 7 does not exist"):
            p.steps(ipu=7)


def _brute_window(steps, ipu, a, b):
    s, c, i = steps["start"], steps["cycles"], steps["ipu"]
    keep = (i == ipu) & (s < b) & (((s + c) > a) | (s >= a))
    return np.flatnonzero(keep)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ipu=st.integers(0, 2), a=st.integers(-1000, 3 * 10**7), width=st.integers(0, 5 * 10**6))
def test_step_window_matches_brute_force(small_file, small_data, ipu, a, width):
    with open_profile(small_file) as p:
        got = p.step_window(ipu, a, a + width, columns=["program"])
        assert list(got.columns) == ["program"]
        np.testing.assert_array_equal(
            got.index.to_numpy(), _brute_window(small_data[STEPS], ipu, a, a + width)
        )


def test_step_window_includes_long_step_starting_before(tmp_path):
    # one very long step followed by short ones: a window late in the long step must find it
    data = make_synthetic_profile(n_steps=200, n_ipus=1, tiles=8, n_programs=20, seed=1)
    st_ = data[STEPS]
    st_["cycles"] = st_["cycles"].copy()
    st_["cycles"][3] = 10**9
    st_["start"] = np.r_[0, np.cumsum(st_["cycles"][:-1])].astype(np.int64)
    path = tmp_path / "long.h5"
    write_profile(path, data)
    with open_profile(path) as p:
        mid = int(st_["start"][3]) + 10**8
        w = p.step_window(0, mid, mid + 10)
        assert w.index.tolist() == [3]


def test_tile_cycles(small_file, small_data):
    tc = small_data["/programs"]["tile_cycles"]
    with open_profile(small_file) as p:
        ids = [50, 3, 50, 119]
        np.testing.assert_array_equal(p.tile_cycles(ids), tc[ids])
        np.testing.assert_array_equal(p.tile_cycles(np.arange(10, 20)), tc[10:20])
        assert p.tile_cycles([]).shape == (0, 48)
        with pytest.raises(ProfileError, match="program ids"):
            p.tile_cycles([120])


def test_cycles_by_type(small_file, small_data):
    steps = small_data[STEPS]
    with open_profile(small_file) as p:
        by = p.cycles_by_type()
        assert sum(by.values()) == int(steps["cycles"].sum())
        assert by["OnTileExecute"] == int(steps["cycles"][steps["type"] == 3].sum())


def test_reading_a_slice_reads_only_those_rows(small_file, monkeypatch):
    """Spy on h5py reads: a step slice touches only the asked rows of the steps columns."""
    reads: list[tuple[str, object]] = []
    real = h5py.Dataset.__getitem__

    def spy(self, args, *a, **kw):
        reads.append((self.name, args))
        return real(self, args, *a, **kw)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    p = open_profile(small_file)
    try:
        opened = [name for name, _ in reads]
        assert all(not n.startswith(STEPS) for n in opened)  # opening reads no step data
        assert all(not n.startswith("/programs") and not n.startswith("/liveness") for n in opened)
        reads.clear()
        lo, _ = p.ipu_rows(2)
        p.steps(ipu=2, rows=slice(100, 150))
        step_reads = [(n, s) for n, s in reads if n.startswith(STEPS)]
        assert len(step_reads) == len(schema.group(STEPS).columns)
        assert all(s == slice(lo + 100, lo + 150) for _, s in step_reads)
        reads.clear()
        p.tile_cycles([4])
        assert [n for n, _ in reads] == ["/programs/tile_cycles"]
    finally:
        p.close()


def test_synthetic_invariants(small_data):
    d = small_data
    mem = d["/memory"]
    total = mem["total"]
    for name in ("by_category", "by_region", "by_liveness"):
        np.testing.assert_array_equal(mem[name].sum(axis=2), total)
    lv = d["/liveness"]
    n_steps = len(d["/liveness/steps"]["program"])
    per_tile = TileChanges(
        lv["per_tile_ipu_offsets"], lv["per_tile_step"], lv["per_tile_rows"], n_steps
    ).dense()
    np.testing.assert_array_equal(per_tile.max(axis=1), mem["by_liveness"][:, :, 1])
    curve = d["/liveness"]["not_always_live"][0]
    peak = int(np.argmax(curve))
    assert 0 < peak < curve.size - 1 and curve[0] < curve[peak] > curve[-1]
    nodes = d["/programs/nodes"]
    leaves = nodes["cycles"] > 0
    np.testing.assert_array_equal(d["/programs"]["tile_cycles"].max(axis=1), nodes["cycles"])
    assert (nodes["tile_balance"][leaves] <= 1).all() and (nodes["tile_balance"][leaves] > 0).all()
    assert (nodes["parent"] < np.arange(nodes["parent"].size)).all()  # pre-order
    steps = d[STEPS]
    for i in range(3):
        s = steps["start"][steps["ipu"] == i]
        c = steps["cycles"][steps["ipu"] == i]
        assert (s[1:] >= s[:-1] + c[:-1]).all()  # sorted, no overlap
    mids = steps["type"] == schema.code("program_type", "StreamCopyMid")
    assert (steps["bytes_in"][mids] > 0).all()
    assert set(steps["dest"][mids]) <= {
        schema.code("destination", "host"),
        schema.code("destination", "remoteBuffer"),
    }
    phases = set(steps["phase"].tolist())
    assert {
        schema.code("phase", n) for n in ("rampUp", "main", "rampDown", "weightUpdate")
    } <= phases
    oom = make_synthetic_profile(n_steps=10, n_ipus=2, tiles=32, n_programs=40, oom=True)
    assert "/execution" not in oom and oom["/meta"]["status"] == "oom"
    assert oom["/memory"]["oom_tiles"].shape[0] > 0


def test_profile_writer_append_order_is_checked(tmp_path):
    data = make_synthetic_profile(n_steps=100, n_ipus=2, tiles=8, n_programs=20)
    steps = data.pop(STEPS)
    ex = data.pop("/execution")
    ex.pop("ipu_offsets")
    path = tmp_path / "order.h5"
    with pytest.raises(SchemaMismatchError, match="increasing IPU order"), ProfileWriter(path) as w:
        for gp, fields in data.items():
            w.write_group(gp, fields)
        back = {k: v[::-1].copy() for k, v in steps.items()}
        w.append_steps(back)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []
    # in order it works, and the offsets are derived
    with ProfileWriter(path) as w:
        for gp, fields in data.items():
            w.write_group(gp, fields)
        w.append_steps({k: v[:30] for k, v in steps.items()})
        w.append_steps({k: v[30:] for k, v in steps.items()})
        w.write_group("/execution", ex)
    with open_profile(path) as p:
        assert p.ipu_offsets.tolist() == [0, 50, 100]


def test_table_rows_by_boolean_mask(small_file, small_data):
    cyc = small_data["/programs/nodes"]["cycles"]
    with open_profile(small_file) as p:
        df = p.table("/programs/nodes", columns=["cycles"], rows=cyc > 1000)
        assert df.index.tolist() == np.flatnonzero(cyc > 1000).tolist()
        with pytest.raises(ProfileError, match="boolean row mask"):
            p.table("/programs/nodes", rows=np.ones(3, dtype=bool))


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    names=st.lists(st.text(max_size=40), min_size=1, max_size=30),
    flops=st.lists(st.integers(0, 2**53 - 1), min_size=1, max_size=30),
    balance=st.floats(0, 1, width=32),
)
def test_round_trip_of_arbitrary_values(tmp_path_factory, small_data, names, flops, balance):
    """Any unicode names (empty, emoji, NUL-free) and counts over the whole plausible range
    (0..2^53, profiles.semantic) survive a round trip."""
    names = [n.replace("\x00", "") for n in names]
    n = min(len(names), len(flops))
    data = {k: dict(v) for k, v in small_data.items()}
    ops = {k: np.asarray(v)[:n] for k, v in data["/graph/operations"].items()}
    ops["name"] = names[:n]
    ops["flops"] = np.asarray(flops[:n], dtype=np.int64)
    data["/graph/operations"] = ops
    # keep references valid: operations referenced by other tables now have n rows
    for gp in ("/graph/variables", "/graph/compute_sets", "/liveness/steps", "/programs/nodes"):
        data[gp] = dict(data[gp])
        data[gp]["op"] = np.where(np.asarray(data[gp]["op"]) < n, data[gp]["op"], -1)
    data["/programs/nodes"]["tile_balance"] = np.full(
        len(data["/programs/nodes"]["cycles"]), balance, dtype=np.float32
    )
    path = tmp_path_factory.mktemp("arb") / "arb.h5"
    write_profile(path, data)
    with open_profile(path) as p:
        ops_back = p.table("/graph/operations", columns=["name", "flops"])
        assert ops_back["name"].tolist() == names[:n]
        assert ops_back["flops"].tolist() == flops[:n]
        assert (p.array("/programs/nodes/tile_balance") == np.float32(balance)).all()
    assert validate(path) == []


def test_caller_mistakes_are_not_reported_as_damage(small_file):
    with open_profile(small_file) as p:
        with pytest.raises(IndexError):
            p.array("/memory/total", (0, 10**7))
        with pytest.raises(ValueError, match="compound"):
            p.array("/memory/total", "bad")


def test_writer_refuses_values_the_reader_refuses(tmp_path, small_data):
    """Negative or absurd counts, ids past their table: refused before writing (the reader
    would refuse the file)."""
    data = {k: dict(v) for k, v in small_data.items()}
    flops = np.asarray(data["/graph/operations"]["flops"]).copy()
    flops[0] = -1
    data["/graph/operations"]["flops"] = flops
    with pytest.raises(SchemaMismatchError, match="flops"):
        write_profile(tmp_path / "bad.h5", data)
    assert not list(tmp_path.iterdir())
