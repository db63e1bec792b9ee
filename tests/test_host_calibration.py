"""The host measured on the real library: calibrate-host with torch (skipped
without it) and its imitation fallback, the DataLoader's per-sample overhead in the host model,
host CPUs as data and a host profile scaled between two CPUs."""

from __future__ import annotations

import pytest

from engine.compiled import ProgramIO
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.execute.adapter import host_model, host_profile_for
from engine.host.cpus import cost_factor, cpus, get_cpu, identify
from engine.host.profile import (
    LOADER,
    HostProfile,
    load_host_profile,
    sample_cost,
    scale_profile,
)
from engine.systems import systems
from tests.run_configs import walkthrough_model

PIPE = walkthrough_model(gradient_accumulation=8, precision="16.16")
IMAGE_IO = ProgramIO(input_elems_per_sample=3 * 64 * 64)
STEPS = ["from_array", "flip", "resize", "to_tensor", "convert_dtype", "normalise"]
KW = dict(input_size=32, image_size=64, channels=3, input_dtype="float16")
XEON, EPYC = "intel-xeon-platinum-8570", "amd-epyc-7742"


def _profile(**kw) -> HostProfile:
    """A small profile measured (as if) on the Xeon, every cost 1 us + 1 ns per element."""
    one = {"fixed_us": 1.0, "ns_per_element": {"uint8": 1.0, "float16": 1.0, "float32": 1.0}}
    base = dict(
        name="test",
        cpu="Intel(R) Xeon(R) Processor",
        cpu_ref=XEON,
        cores=2,
        loader_us_per_sample=2.0,
        transforms={t: one for t in [*STEPS, "collate"]},
    )
    return HostProfile(**{**base, **kw})


# -- calibrate-host --------------------------------------------------------------------------
def test_calibrate_host_imitation_fallback_is_labelled(tmp_path):
    from analyser.cli import main

    out = tmp_path / "host.toml"
    argv = ["calibrate-host", "-o", str(out), "--seconds", "0.5", "-q", "--method", "imitation"]
    assert main([*argv, "--cpu", XEON]) == 0
    prof = load_host_profile(str(out))
    assert prof.measured_with == "imitation" and "imitation" in prof.method
    assert "CPU time" in prof.method and "minimum" in prof.method
    assert set(prof.libraries) == {"numpy", "Pillow"}
    assert {"before_1min", "after_1min"} <= set(prof.load)
    assert prof.cpu_ref == XEON and prof.cores >= 1 and prof.loader_us_per_sample > 0
    assert {"flip", "resize", "to_tensor", "convert_dtype", "normalise", "collate"} <= set(
        prof.transforms
    )
    assert not prof.checks  # no real DataLoader to check against
    cfg = RunConfig(**PIPE, host_transforms=["flip", "resize"], host_profile=str(out))
    assert host_model(cfg, IMAGE_IO).transforms_s > 0


def test_calibrate_host_with_torch_times_the_real_transforms_in_a_dataloader(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from analyser.cli import main

    out = tmp_path / "host.toml"
    argv = ["calibrate-host", "-o", str(out), "--seconds", "0.5", "-q", "--method", "torch"]
    assert main([*argv, "--cpu", XEON, "--scale-to", "bow-pod16"]) == 0
    prof = load_host_profile(str(out))
    assert prof.measured_with == "torch" and "DataLoader" in prof.method
    assert {"torch", "torchvision", "Pillow", "numpy"} <= set(prof.libraries)
    assert prof.loader_us_per_sample > 0
    # the real per-element work is there for every image transform and both float dtypes
    for t in ("resize", "to_tensor"):
        assert prof.transforms[t].ns_per_element["uint8"] > 0
    for d in ("float16", "float32"):
        assert prof.transforms["normalise"].ns_per_element[d] > 0
    # scaled to the Bow Pod16's host server (an EPYC 7742) from the named Xeon
    assert prof.cpu_ref == EPYC and prof.scaled_from.cpu_ref == XEON
    assert prof.scaled_from.factor == pytest.approx(cost_factor(XEON, EPYC), rel=1e-5)
    # the two whole pipelines, timed end to end, beside the sum of their parts
    assert [c.dtype for c in prof.checks] == ["float16", "uint8"]
    for c in prof.checks:
        assert c.measured_us > 0 and c.modelled_us > 0


def test_calibrate_host_bad_choices_are_one_sentence(tmp_path, capsys, monkeypatch):
    from analyser.cli import main
    from engine.host import calibrate_torch

    out = str(tmp_path / "h.toml")
    for extra, words in (
        (["--cpu", "pentium"], "--cpu: 'pentium' is not a CPU"),
        (["--cpu", XEON, "--scale-to", "cray-1"], "neither a CPU"),
    ):
        assert main(["calibrate-host", "-o", out, "-q", *extra]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1
    monkeypatch.setattr(calibrate_torch, "unavailable_reason", lambda: "torch is not installed")
    assert main(["calibrate-host", "-o", out, "-q", "--method", "torch"]) == 2
    assert "needs torch and torchvision" in capsys.readouterr().err
    assert not (tmp_path / "h.toml").exists()


# -- the loader overhead term ----------------------------------------------------------------
def test_loader_overhead_is_one_term_per_sample():
    prof = _profile()
    cost = sample_cost(prof, STEPS, eight_bit=False, **KW)
    rows = {t: us for t, _, _, us in cost.by_transform}
    assert rows[LOADER] == 2.0  # per sample, whatever the transforms
    assert cost.total_us == pytest.approx(sum(rows.values()))
    without = sample_cost(
        prof.model_copy(update={"loader_us_per_sample": 0.0}), STEPS, eight_bit=False, **KW
    )
    assert LOADER not in {t for t, *_ in without.by_transform}  # profiles written before it
    assert cost.total_us - without.total_us == pytest.approx(2.0)
    # the run's host model carries it (per sample, one core)
    cfg = RunConfig(**PIPE, host_transforms=STEPS, host_cpu="as-measured")
    h = host_model(cfg, IMAGE_IO)
    assert h.breakdown["transforms"][0]["transform"] == LOADER
    assert h.breakdown["transforms"][0]["us"] == pytest.approx(
        load_host_profile("default").loader_us_per_sample, abs=1e-4
    )


# -- host CPUs and scaling ---------------------------------------------------------------------
def test_every_system_names_a_sourced_host_cpu():
    for s in systems().values():
        cpu = get_cpu(s.host_cpu)
        assert cpu.specspeed2017_int_base > 0 and "SPEC" in cpu.source
    assert identify("AMD EPYC 7742 64-Core Processor") == EPYC
    assert identify("Intel(R) Xeon(R) Processor") is None  # a hypervisor's generic name
    assert set(cpus()) >= {EPYC, XEON}


def test_a_profile_scales_between_two_cpus_by_their_per_core_figures():
    prof = _profile()
    k = get_cpu(XEON).specspeed2017_int_base / get_cpu(EPYC).specspeed2017_int_base
    assert cost_factor(XEON, EPYC) == pytest.approx(k) and k > 1  # the 2019 EPYC is slower
    on_epyc = scale_profile(prof, EPYC)
    assert on_epyc.cpu_ref == EPYC and on_epyc.scaled_from.cpu_ref == XEON
    assert on_epyc.scaled_from.factor == pytest.approx(k, rel=1e-5)
    a = sample_cost(prof, STEPS, eight_bit=False, **KW).total_us
    b = sample_cost(on_epyc, STEPS, eight_bit=False, **KW).total_us
    assert b == pytest.approx(a * k, rel=1e-3)
    back = scale_profile(on_epyc, XEON)  # and back again: the original costs, factor 1
    assert sample_cost(back, STEPS, eight_bit=False, **KW).total_us == pytest.approx(a, rel=1e-3)
    assert back.scaled_from.factor == pytest.approx(1.0, rel=1e-5)
    assert scale_profile(on_epyc, EPYC) is on_epyc
    with pytest.raises(ConfigError, match="does not name its CPU"):
        scale_profile(prof.model_copy(update={"cpu_ref": ""}), EPYC)


def test_a_run_scales_the_profile_to_its_host_server(tmp_path):
    from analyser.cli.calibrate_host import to_toml

    path = tmp_path / "xeon.toml"
    path.write_text(to_toml({**_profile().model_dump(exclude_none=True), "measured": "now"}))
    base = dict(PIPE, host_transforms=STEPS, host_profile=str(path))
    pod = RunConfig(**base, system="mk2-pod16")
    _, info = host_profile_for(pod, systems()["mk2-pod16"])
    assert info["host_cpu"] == EPYC and info["scale"] == pytest.approx(cost_factor(XEON, EPYC))
    mine = RunConfig(**base, host_cpu="as-measured")
    h_pod, h_mine = host_model(pod, IMAGE_IO), host_model(mine, IMAGE_IO)
    assert h_pod.transforms_s == pytest.approx(
        h_mine.transforms_s * cost_factor(XEON, EPYC), rel=1e-4
    )
    assert h_pod.breakdown["host_cpu"] == EPYC and h_mine.breakdown["scale"] == 1.0
    with pytest.raises(
        ConfigError, match=r"host_cpu: .z80. is not a CPU of engine/data/cpus\.toml"
    ):
        RunConfig(**base, host_cpu="z80")


def test_the_shipped_default_is_a_torch_measurement_scaled_to_the_pod_host():
    prof = load_host_profile("default")
    assert prof.measured_with == "torch" and "torch" in prof.libraries
    assert prof.cpu_ref == systems()["mk2-pod64"].host_cpu == EPYC
    assert prof.scaled_from is not None and prof.scaled_from.cpu_ref != EPYC
    assert prof.loader_us_per_sample > 0 and len(prof.checks) == 2
    _, info = host_profile_for(RunConfig(**PIPE, host_transforms=STEPS))
    assert info["scale"] == 1.0  # already on the reference server's CPU


def test_hostile_host_profiles_fail_in_one_sentence(tmp_path):
    from tests.hostile import host_profile_texts

    for name, text in host_profile_texts().items():
        p = tmp_path / f"{name}.toml"
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(ConfigError) as e:
            load_host_profile(str(p))
        msg = str(e.value)
        assert msg.startswith("host_profile") and "\n" not in msg, (name, msg)
    import os

    fifo = tmp_path / "pipe.toml"
    if hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
        with pytest.raises(ConfigError, match="not a regular file"):
            load_host_profile(str(fifo))


# -- host facts users hit ----------------------------------------------------------------------
def test_host_profile_is_relative_to_the_run_configuration(tmp_path, monkeypatch):
    """``host_profile = "host.toml"`` in a run configuration names the file beside it, as
    ``model`` does, whatever the working directory; a shipped name stays a name."""
    import tomllib

    from analyser.cli.calibrate_host import to_toml

    sub = tmp_path / "runs"
    sub.mkdir()
    prof = _profile(name="beside the config").model_dump(exclude_none=True)
    (sub / "host.toml").write_text(to_toml(prof))
    body = 'model = "resnet50"\nimage_size = 32\nhost_transforms = ["flip"]\n'
    (sub / "run.toml").write_text(body + 'host_profile = "host.toml"\n')
    (sub / "shipped.toml").write_text(body + 'host_profile = "default"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = RunConfig.from_toml(sub / "run.toml")
    assert cfg.host_profile == str(sub / "host.toml")
    assert load_host_profile(cfg.host_profile).name == "beside the config"
    assert RunConfig.from_toml(sub / "shipped.toml").host_profile == "default"
    # the resolved path is what the profile's run_config records, and it reads back
    again = RunConfig.from_dict(tomllib.loads(cfg.to_toml()))
    assert again.host_profile == cfg.host_profile


def test_hostile_host_profile_paths_are_one_sentence(tmp_path, monkeypatch):
    import hostile

    monkeypatch.chdir(tmp_path)
    for name, case in hostile.host_fact_cases(tmp_path / "h").items():
        o = hostile.run_in_process(case.argv, 15.0)
        assert not o.traceback and o.code == 2, (name, o.code, o.stderr, o.traceback)
        assert o.stderr.strip().count("\n") == 0, (name, o.stderr)
        for text in case.says:
            assert text in o.stderr, (name, o.stderr)
        assert not (tmp_path / "h" / "never.h5").exists()


def test_calibrate_host_falls_back_over_a_broken_torch(tmp_path, capsys, monkeypatch):
    """torch installed but raising RuntimeError at import (not ImportError): ``auto`` measures
    with the imitations and says why in one sentence; ``--method torch`` refuses, naming it."""
    import sys

    import hostile

    from analyser.cli import main

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    monkeypatch.syspath_prepend(str(hostile.broken_torch(tmp_path / "site")))
    out = tmp_path / "host.toml"
    argv = ["calibrate-host", "-o", str(out), "--seconds", "0.5", "-q", "--cpu", XEON]
    assert main(argv) == 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "torch is installed but fails to import (RuntimeError" in err and "imitations" in err
    prof = load_host_profile(str(out))
    assert prof.measured_with == "imitation" and "fails to import" in prof.method
    out.unlink()
    assert main([*argv, "--method", "torch"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "fails to import (RuntimeError" in err, err
    assert not out.exists()


def test_poptorch_runs_float16_transforms_on_scalar_kernels():
    """PopTorch pins a torch without vectorised float16 CPU kernels: a profile measured with a
    later torch gets the scalar cost per element and op for convert_dtype (2 ops) and normalise
    (2 ops) in float16; other frameworks, other dtypes, the 8-bit path, profiles measured with
    an old torch or the imitation keep the measured costs."""
    from engine.host.frameworks import get_framework
    from engine.host.profile import FLOAT16_OPS

    fw = get_framework("poptorch")
    assert fw.host_float16_kernels == "scalar" and fw.host_scalar_half_ns_per_op > 0
    assert "fitted to the walkthrough's published figures" in fw.host_float16_source
    elems = 3 * 64 * 64

    def rows(**kw):
        cfg = RunConfig(**{**PIPE, "host_transforms": STEPS, **kw})
        h = host_model(cfg, IMAGE_IO)
        return {r["transform"]: r["us"] for r in h.breakdown["transforms"]}, h.breakdown

    prof = load_host_profile("default")
    assert prof.libraries["torch"].startswith("2.") and prof.cpu_float16  # what it ran on
    pt, info = rows()
    assert info["float16_kernels"].startswith("scalar")
    for t, ops in FLOAT16_OPS.items():
        fixed = prof.transforms[t].fixed_us
        assert pt[t] == pytest.approx(fixed + ops * fw.host_scalar_half_ns_per_op * elems / 1e3)
    pa, info = rows(framework="popart")
    assert info["float16_kernels"].startswith("as measured")
    for t in FLOAT16_OPS:
        assert pa[t] == pytest.approx(prof.cost_us(t, "float16", elems), rel=1e-6)
    assert {t: pt[t] for t in pt if t not in FLOAT16_OPS} == {
        t: pa[t] for t in pa if t not in FLOAT16_OPS
    }
    # the 8-bit path does not run them on the host; float32 is not float16
    e8, _ = rows(eight_bit_input=True)
    e8a, _ = rows(eight_bit_input=True, framework="popart")
    assert e8 == e8a and not set(FLOAT16_OPS) & set(e8)
    f32, _ = rows(precision="32.32")
    f32a, _ = rows(precision="32.32", framework="popart")
    assert f32 == f32a
    # profiles whose float16 costs are already scalar (old torch) or not torch's (imitation)
    for update in ({"libraries": {"torch": "1.13.1"}}, {"measured_with": "imitation"}):
        p = prof.model_copy(update=update)
        from engine.execute.adapter import _float16_kernels

        out, info = _float16_kernels(RunConfig(**PIPE), p, {})
        assert out == p and info["float16_kernels"].startswith("as measured")


def test_calibrate_host_records_the_cpus_float16_instructions(tmp_path):
    from analyser.cli import main
    from engine.host.calibrate import FLOAT16_FLAGS, cpu_float16_flags

    out = tmp_path / "host.toml"
    argv = ["calibrate-host", "-o", str(out), "--seconds", "0.5", "-q", "--method", "imitation"]
    assert main([*argv, "--cpu", XEON]) == 0
    prof = load_host_profile(str(out))
    assert prof.cpu_float16 == cpu_float16_flags()
    assert set(prof.cpu_float16) <= set(FLOAT16_FLAGS)


def test_hostile_call_options_and_float16_records_are_one_sentence(tmp_path):
    import hostile

    for name, case in hostile.host_fact_option_cases(tmp_path / "o").items():
        o = hostile.run_in_process(case.argv, 15.0)
        assert not o.traceback and o.code == 2, (name, o.code, o.stderr, o.traceback)
        assert o.stderr.strip().count("\n") == 0, (name, o.stderr)
        assert all(text in o.stderr for text in case.says), (name, o.stderr)
        assert not (tmp_path / "o" / "never.h5").exists()
    for name, text in hostile.host_fact_profile_texts().items():
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        with pytest.raises(ConfigError) as exc:
            load_host_profile(str(path))
        msg = str(exc.value)
        assert "cpu_float16" in msg and "\n" not in msg, (name, msg)
