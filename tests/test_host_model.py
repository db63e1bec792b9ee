"""Framework defaults, the host model built from the data pipeline, the host lane outside the
device trace, systems (Pods) as data, per-machine sharing and hierarchical all-reduce."""

from __future__ import annotations

import numpy as np
import pytest

from engine.compiled import ProgramIO
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.execute import costs
from engine.execute.adapter import host_model, links_of
from engine.execute.core import execute_plan
from engine.execute.plan import HostModel
from engine.host.profile import load_host_profile, sample_cost
from engine.targets import get_target
from profiles.schema import code
from tests.run_configs import walkthrough_model
from tests.test_engine_execute import CLOCK, make_plan

PIPE = walkthrough_model(gradient_accumulation=8, precision="16.16")
IMAGE_IO = ProgramIO(input_elems_per_sample=3 * 64 * 64)


# -- framework defaults ------------------------------------------------------------------------
def test_poptorch_defaults_follow_its_source():
    c = RunConfig(**PIPE)
    assert c.framework == "poptorch"
    assert c.loader_workers == 0  # PyTorch DataLoader num_workers=0: the main process
    assert c.loader_mode == "sync"  # poptorch.DataLoaderMode.Sync
    assert c.offload_optimiser_state == "off"  # PopART optimiser state OnChip
    assert c.recomputation == "pipeline-stages"  # autoRecomputation=Pipeline, >1 IPU
    assert RunConfig(model="mlp").recomputation == "off"  # not pipelined


def test_other_frameworks_and_explicit_options_win():
    tf = RunConfig(**PIPE, framework="tensorflow")
    assert tf.loader_mode == "async" and tf.offload_optimiser  # infeed thread; remote memory
    assert tf.recomputation == "off"
    pa = RunConfig(**PIPE, framework="popart")
    assert pa.recomputation == "off" and not pa.offload_optimiser and pa.loader_mode == "sync"
    mine = RunConfig(
        **PIPE,
        loader_workers=6,
        loader_mode="async",
        recomputation="off",
        offload_optimiser_state="on",
    )
    assert (mine.loader_workers, mine.loader_mode, mine.recomputation) == (6, "async", "off")
    assert mine.offload_optimiser
    # a round trip keeps the values (the profile records what ran)
    assert RunConfig.from_dict(mine.to_dict()) == mine


# -- the host model from the data pipeline -------------------------------------------------------
def test_per_sample_cost_is_the_sum_of_the_transforms():
    prof = load_host_profile("default")
    steps = ["from_array", "flip", "resize", "to_tensor", "convert_dtype", "normalise"]
    kw = dict(input_size=32, image_size=64, channels=3, input_dtype="float16")
    cost = sample_cost(prof, steps, eight_bit=False, **kw)
    small, big = 32 * 32 * 3, 64 * 64 * 3
    expect = {
        "from_array": ("uint8", small),
        "flip": ("uint8", small),
        "resize": ("uint8", big),
        "to_tensor": ("uint8", big),
        "convert_dtype": ("float16", big),
        "normalise": ("float16", big),
        "collate": ("float16", big),  # the loader's default collate is always there
    }
    got = {t: (d, e) for t, d, e, _ in cost.by_transform if t != "loader"}
    assert got == expect
    total = prof.loader_us_per_sample + sum(  # the DataLoader's own per-sample overhead
        prof.transforms[t].fixed_us + prof.transforms[t].ns_per_element[d] * e * 1e-3
        for t, (d, e) in expect.items()
    )
    assert cost.total_us == pytest.approx(total)
    # 8-bit input: the cast and normalisation run on the IPU, the sample stays uint8
    eight = sample_cost(prof, steps, eight_bit=True, **kw)
    assert eight.skipped == ("convert_dtype", "normalise")
    assert dict((t, d) for t, d, *_ in eight.by_transform)["collate"] == "uint8"
    assert eight.total_us < cost.total_us


def test_unknown_transform_is_one_sentence():
    with pytest.raises(
        ConfigError,
        match=r"host_transforms: 'flipp' is not a host transform "
        r"\(did you mean 'flip'\?\)",
    ):
        RunConfig(model="mlp", host_transforms=["flipp"])
    with pytest.raises(ConfigError, match="put convert_dtype before it"):
        RunConfig(model="mlp", host_transforms=["normalise", "convert_dtype"])


def test_workers_bounded_by_the_host_servers_cores():
    base = dict(PIPE, host_transforms=["flip", "to_tensor"])
    h0 = host_model(RunConfig(**base), IMAGE_IO)
    h8 = host_model(RunConfig(**base, loader_workers=8), IMAGE_IO)
    hmax = host_model(RunConfig(**base, loader_workers=512), IMAGE_IO)
    assert (h0.parallel, h8.parallel, hmax.parallel) == (1, 8, 128)  # R6525: 2 x 64 cores
    assert not h0.overlapped and h8.overlapped  # worker processes prefetch beside the device
    plan = make_plan(S=2, G=8, host=h0)
    plan8 = make_plan(S=2, G=8, host=h8)
    assert costs.host_prep_seconds(plan8) == pytest.approx(costs.host_prep_seconds(plan) / 8)


def _run(**host):
    return execute_plan(make_plan(S=2, G=8, DI=2, host=HostModel(**host)))


def test_host_lane_is_outside_the_device_cycles_and_async_overlaps():
    sync = _run(decode_augment_s=400e-6)
    asyn = _run(decode_augment_s=400e-6, loader="async")
    cheap = _run(decode_augment_s=1e-6)
    # the device trace does not depend on the host: same total cycles whatever the host costs
    assert sync.attrs["total_cycles"] == asyn.attrs["total_cycles"] == cheap.attrs["total_cycles"]
    dev = sync.attrs["total_cycles"] / CLOCK
    samples = sync.attrs["samples"]
    prep = 400e-6 * samples  # one process
    ovh = HostModel().call_overhead_s
    assert sync.attrs["host_seconds"] == pytest.approx(prep + ovh)
    # the loader process prepares the next call while this one is made and runs
    assert asyn.attrs["host_seconds"] == pytest.approx(max(0.0, prep - dev - ovh) + ovh)
    assert asyn.attrs["throughput"] > sync.attrs["throughput"]
    assert sync.attrs["device_throughput"] == pytest.approx(samples / dev)
    # the host lane: sync prepares in the main process before the call; async in the loader
    # lane beside the device; the main lane waits for the device while it runs
    main, loader = code("host_lane", "main"), code("host_lane", "loader")
    prepare, wait_dev = code("host_event", "prepare"), code("host_event", "waitDevice")
    h = sync.host
    p = (h["kind"] == prepare) & (h["lane"] == main)
    assert p.sum() == 1 and h["start"][p][0] + h["cycles"][p][0] <= 0
    w = h["kind"] == wait_dev
    assert h["start"][w][0] == 0 and h["cycles"][w][0] == sync.attrs["total_cycles"]
    a = asyn.host
    p = (a["kind"] == prepare) & (a["lane"] == loader)
    assert p.sum() == 1 and a["start"][p][0] == 0
    inclusive = sync.attrs["host_inclusive_cycles"]
    assert inclusive == pytest.approx(
        sync.attrs["total_cycles"] + sync.attrs["host_seconds"] * CLOCK, abs=2
    )


# -- systems ---------------------------------------------------------------------------------
def test_a_pod_that_does_not_fit_is_refused_in_one_sentence():
    with pytest.raises(ConfigError) as e:
        RunConfig(model="mlp", system="bow-pod16", replication_factor=32)
    msg = str(e.value)
    assert msg.count(". ") == 0 and msg.endswith(".")
    assert "32 replica(s) x 1 IPU(s) = 32 IPUs do not fit in Bow Pod16" in msg
    with pytest.raises(ConfigError, match="not the chip of system"):
        RunConfig(model="mlp", system="bow-pod64", target="mk2")


def test_a_system_sets_the_chip_and_the_replicas():
    c = RunConfig(**PIPE, system="bow-pod64")
    assert c.target == "bow" and c.replication_factor == 32  # 64 IPUs / 2 per replica
    assert RunConfig(model="mlp", system="ipu-pod16").target == "mk2"


def test_pod64_scales_below_4x_pod16():
    import engine

    def thr(system):
        cfg = RunConfig(
            model="mlp",
            micro_batch_size=32,
            gradient_accumulation=4,
            device_iterations=4,
            system=system,
            loader_workers=16,
            host_transforms=["to_tensor", "convert_dtype", "normalise"],
            image_size=16,
            image_channels=3,
        )
        r = engine.simulate(cfg)
        return float(r.execution.attrs["throughput"]), r

    t16, r16 = thr("mk2-pod16")
    t64, r64 = thr("mk2-pod64")
    assert r64.config.replication_factor == 4 * r16.config.replication_factor
    # one host server's 16 loader processes bound both: the Pod64 gains nothing from its replicas
    # (its loader prepares while each call is made and runs, so the two are equally host-bound)
    assert t16 <= t64 < 4 * t16
    assert (
        r64.execution.attrs["host_model"]["prepare_ms_per_call"]
        > (r64.execution.attrs["host_model"]["device_ms_per_call"])
    )


def test_allreduce_is_hierarchical_over_gw_links():
    t = get_target("mk2")
    one = links_of(t, 64, RunConfig(model="mlp", system="mk2-pod64"))
    two = links_of(t, 128, RunConfig(model="mlp", system="mk2-pod128"))
    assert (one.racks, two.racks) == (1, 2)
    assert two.gw_link_bytes_per_cycle < two.ipu_link_bytes_per_cycle
    b = 50_000_000
    flat = costs.ring_allreduce_cycles(b, 64, one)
    # 128 replicas over two racks: in-rack rings over IPU-Links plus a GW-Link hop between racks
    hier = costs.ring_allreduce_cycles(b, 128, two)
    assert hier > flat


def test_host_links_and_streaming_memory_shared_by_one_machine():
    t = get_target("mk2")
    solo = links_of(t, 1, RunConfig(model="mlp"))
    four = links_of(t, 4, RunConfig(model="mlp", replication_factor=4))
    # stream copies get the host link's sustained rate (gc-hosttraffictest: 7.06 GB/s of the
    # 12.5 GB/s nominal), and the machine's links the same share of their nominal rate
    sustained = t.host_link_sustained_bytes_per_s
    assert sustained < t.host_link_bytes_per_s
    assert solo.host_link_bytes_per_cycle * t.clock_hz == pytest.approx(sustained)
    # four replicas of one IPU stream through one IPU-M2000's 2 x 100 GbE: 25 GB/s / 4 each
    # nominally, at the measured share of it
    share = sustained / t.host_link_bytes_per_s
    assert four.host_link_bytes_per_cycle * t.clock_hz == pytest.approx(25e9 * share / 4)
    assert four.streaming_bytes_per_cycle * t.clock_hz == pytest.approx(51.2e9 / 4)


def test_mk2_and_bow_differ_when_host_bound_in_sync_and_match_when_the_host_hides_them():
    import engine

    def run(target, mode):
        cfg = RunConfig(
            model="mlp",
            micro_batch_size=64,
            gradient_accumulation=4,
            target=target,
            host_transforms=["from_array", "to_tensor", "convert_dtype", "normalise"],
            image_size=28,
            image_channels=1,
            loader_mode=mode,
        )
        return engine.simulate(cfg).execution.attrs

    s_mk2, s_bow = run("mk2", "sync"), run("bow", "sync")
    assert (
        s_bow["total_cycles"] / get_target("bow").clock_hz
        < s_mk2["total_cycles"] / get_target("mk2").clock_hz
    )
    assert s_bow["throughput"] > s_mk2["throughput"]  # sync: host + device time add up
    a_mk2, a_bow = run("mk2", "async"), run("bow", "async")
    # async and host-bound: the same host server and gateway bound both (identical hardware)
    assert a_bow["throughput"] == pytest.approx(a_mk2["throughput"], rel=1e-9)


# -- old profiles and calibrate-host ------------------------------------------------------------
def test_a_format_1_0_profile_still_opens(tmp_path):
    import shutil

    import h5py

    import engine
    from analyser.core import Analysis

    path = tmp_path / "new.h5"
    engine.simulate_to_file(RunConfig(model="mlp", micro_batch_size=8), path)
    old = tmp_path / "old.h5"
    shutil.copy(path, old)
    with h5py.File(old, "a") as f:
        f.attrs["format_version"] = "1.0"
        del f["execution/host"]
        for k in ("device_throughput", "host_inclusive_cycles", "host_model"):
            del f["execution"].attrs[k]
    a = Analysis.open(old)
    ex = a.execution
    assert ex.host_inclusive_cycles == ex.total_cycles and ex.host_exposed_cycles == 0
    assert ex.throughput_samples_per_s > 0


def test_calibrate_host_writes_a_profile_runs_can_name(tmp_path):
    from analyser.cli import main

    out = tmp_path / "host.toml"
    argv = ["calibrate-host", "-o", str(out), "--seconds", "0.5", "-q", "--method", "imitation"]
    assert main(argv) == 0
    prof = load_host_profile(str(out))
    assert {"flip", "resize", "convert_dtype", "normalise"} <= set(prof.transforms)
    cfg = RunConfig(**PIPE, host_transforms=["flip", "resize"], host_profile=str(out))
    assert host_model(cfg, IMAGE_IO).transforms_s > 0
    (tmp_path / "mine.toml").write_text("x = 1\n")
    assert main(["calibrate-host", "-o", str(tmp_path / "mine.toml"), "-q"]) == 2


def test_system_on_the_command_line_fills_the_replicas(tmp_path):
    import argparse

    from analyser.cli.run_flags import add_config_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    base = RunConfig(model="mlp")  # target mk2, 1 replica by default
    cfg = config_from_args(parser.parse_args(["--system", "bow-pod16"]), base)
    assert (cfg.target, cfg.replication_factor) == ("bow", 16)
    cfg = config_from_args(parser.parse_args(["--system", "bow-pod16", "--replicas", "4"]), base)
    assert cfg.replication_factor == 4


def test_a_profiled_calls_opening_wait_is_in_the_trace_not_in_throughput():
    """The framework's profiled-call wait lengthens the trace's opening host sync on every IPU by
    the same cycles; the steady-state throughput (host-inclusive and device-only) is the call
    without it, so it does not depend on the wait."""
    base = _run(decode_augment_s=100e-6)
    waited = _run(decode_augment_s=100e-6, profiled_wait_s=0.025)
    extra = round(0.025 * CLOCK)
    assert waited.attrs["total_cycles"] - base.attrs["total_cycles"] == extra
    for key in ("throughput", "device_throughput", "host_seconds"):
        assert waited.attrs[key] == pytest.approx(base.attrs[key], rel=1e-9)
    scb = code("program_type", "StreamCopyBegin")
    for ex in (base, waited):
        s = ex.steps
        first = [int(np.flatnonzero(s["ipu"] == i)[0]) for i in range(2)]
        assert all(s["type"][j] == scb for j in first)
    d = [int(waited.steps["cycles"][j] - base.steps["cycles"][j]) for j in first]
    assert d == [extra, extra]
    assert any("profiled call" in n for n in waited.notes)
