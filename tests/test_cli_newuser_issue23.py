"""CLI and docs, as a new user found them: the dead ends of a first session with
``analyse`` (model-info's suggestions, ``--print-config``, silent long commands in a log, a
gradient-accumulation change failing a cycles gate) each as a behaviour.

Small inputs only: synthetic profiles and a 32 x 32 ResNet-50 exported as ONNX.
"""

from __future__ import annotations

import io
import re
import time
import tomllib
from pathlib import Path

import pytest

from analyser.cli import main
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="module")
def r50_onnx(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("onnx") / "r50.onnx"
    assert main(["export-onnx", "--model", "resnet50", "--image-size", "32", "-o", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("syn") / "run.h5"
    write_profile(path, make_synthetic_profile(n_steps=300, n_ipus=2, tiles=16, seed=5))
    return path


# -- model-info -------------------------------------------------------------------------------
def test_model_info_prints_every_split_point_whole_at_80_columns(r50_onnx, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["model-info", str(r50_onnx), "--ipus", "2,4,8", "--json"]) == 0
    import json

    splits = {s["ipus"]: s["split_points"] for s in json.loads(capsys.readouterr().out)["splits"]}
    assert len(splits[8]) == 7
    assert main(["model-info", str(r50_onnx), "--ipus", "2,4,8"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out  # nothing cut with an ellipsis
    words = set(re.findall(r"[\w.]+", out))
    for points in splits.values():
        for name in points:
            assert name in words, (name, out)
    # the suggested command is one line, whole, ready to copy
    (cmd,) = [ln for ln in out.splitlines() if ln.startswith("e.g. analyse profile")]
    assert cmd.rstrip().endswith("-o run.h5")
    assert f"--split-points {','.join(splits[2])} " in cmd


def test_model_info_suggests_only_flags_profile_accepts_and_lists(r50_onnx, capsys):
    assert main(["model-info", str(r50_onnx)]) == 0
    (cmd,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("e.g. ")]
    flags = set(re.findall(r"(?<!\S)(--?[a-z][\w-]*)", cmd))
    assert {"--ipus", "--ga", "--split-points"} <= flags
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    helptext = capsys.readouterr().out
    for flag in flags:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", helptext), flag
    # and the suggestion itself is a valid configuration (printed, not simulated)
    argv = cmd.split()[2:]
    assert main([*argv, "--print-config"]) == 0
    config = tomllib.loads(capsys.readouterr().out)
    assert config["num_ipus"] == 2 and config["strategy"] == "pipelined"


# -- profile --print-config -------------------------------------------------------------------
def test_print_config_prints_the_resolved_config_and_simulates_nothing(tmp_path, capsys):
    out = tmp_path / "never.h5"
    argv = ["profile", "--model", "mlp", "--ga", "4", "--ipus", "1", "--print-config"]
    assert main(argv) == 0  # no -o needed
    cap = capsys.readouterr()
    config = tomllib.loads(cap.out)
    assert config["model"] == "mlp" and config["gradient_accumulation"] == 4
    assert "wrote" not in cap.err and "simulating" not in cap.err
    assert main([*argv, "-o", str(out)]) == 0  # with -o: still only printed
    assert not out.exists()
    assert tomllib.loads(capsys.readouterr().out) == config


def test_print_config_still_refuses_a_bad_option(capsys):
    assert main(["profile", "--model", "mlp", "--ga", "zero", "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "gradient_accumulation" in err


def test_profile_without_output_says_so(capsys):
    assert main(["profile", "--model", "mlp"]) == 2
    err = capsys.readouterr().err
    assert "-o" in err and "--print-config" in err and "Traceback" not in err


# -- long commands in a log -------------------------------------------------------------------
def test_stage_lines_when_stderr_is_not_a_terminal():
    from analyser.cli._common import StageLines

    buf = io.StringIO()
    with StageLines(stream=buf, delay=0) as bar:
        task = bar.add_task("writing report", total=None)
        bar.update(task, completed=0, total=2, description="re-simulating")
        bar.update(task, completed=1, total=2, description="re-simulating")
        bar.update(task, completed=1, total=2, description="re-simulating")  # no change: no line
        bar.advance(task)
    lines = buf.getvalue().splitlines()
    assert [ln.split("] ", 1)[1] for ln in lines] == [
        "writing report",
        "re-simulating 0/2",
        "re-simulating 1/2",
        "re-simulating 2/2",
    ]
    buf = io.StringIO()
    with StageLines(percent=True, stream=buf, delay=0) as bar:  # a fraction: by stage only
        task = bar.add_task("simulating", total=1.0)
        for f in (0.1, 0.2, 0.3):
            bar.update(task, completed=f, description="compiling")
        bar.update(task, completed=0.9, description="executing\x1b[2J")
    assert [ln.split("] ", 1)[1] for ln in buf.getvalue().splitlines()] == [
        "simulating",
        "compiling",
        "executing\\x1b[2J",  # shown literally
    ]


def test_stage_lines_wait_for_a_long_command():
    """A command that ends (or fails) quickly prints no stage line (its one sentence stays
    alone); one still running after the delay shows the stage it is in, even if it is silent."""
    from analyser.cli._common import StageLines

    buf = io.StringIO()
    with StageLines(stream=buf, delay=3600) as bar:
        task = bar.add_task("exporting trace", total=None)
        bar.update(task, completed=1, total=3)
    assert buf.getvalue() == ""
    buf = io.StringIO()
    with StageLines(stream=buf, delay=0.01) as bar:
        bar.add_task("writing report", total=None)
        for _ in range(1000):  # the timer prints the silent stage (no fixed wait: poll)
            if buf.getvalue():
                break
            time.sleep(0.01)
        assert buf.getvalue().split("] ", 1)[1] == "writing report\n"
        bar.add_task("rendering", total=None)  # from then on, at once
        assert buf.getvalue().count("\n") == 2
    bar.add_task("after the end", total=None)
    assert "after the end" not in buf.getvalue()


def test_report_and_calibrate_host_say_what_they_do_in_a_log(
    synthetic, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr("analyser.cli._common.STAGE_DELAY", 0.0)
    assert main(["report", str(synthetic), str(synthetic), "-o", str(tmp_path / "r.html")]) == 0
    stages = [ln.split("] ", 1)[1] for ln in capsys.readouterr().err.splitlines()]
    assert "reading 2 profiles" in stages and "writing html" in stages, stages
    assert "insights of run.h5 (2/2)" in stages and "explaining each step" in " ".join(stages)
    out = tmp_path / "host.toml"
    assert (
        main(["calibrate-host", "--method", "imitation", "--seconds", "0.5", "-o", str(out)]) == 0
    )
    err = capsys.readouterr().err
    assert len([ln for ln in err.splitlines() if "measuring" in ln]) >= 2


# -- compare --fail-if on runs of different sizes ---------------------------------------------
@pytest.fixture(scope="module")
def ga_pair(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("ga")
    paths = []
    for ga in (2, 8):
        path = folder / f"ga{ga}.h5"
        # the steady-state trace (no profiled run's opening wait, which would dwarf an MLP's
        # accumulation in total cycles)
        argv = ["profile", "--model", "mlp", "--ga", str(ga), "--profiled-call-wait-us", "0"]
        assert main([*argv, "-o", str(path), "--quiet"]) == 0
        paths.append(path)
    return paths[0], paths[1]


def test_cycles_gate_on_a_change_of_gradient_accumulation_says_per_sample(ga_pair, capsys):
    """More samples per run: total cycles rise while cycles per sample fall. The failing gate
    says so, with the per-sample change and the gate to use instead."""
    a, b = ga_pair
    assert main(["compare", str(a), str(b), "--fail-if", "cycles>+5%"]) == 1
    fail = [ln for ln in capsys.readouterr().out.splitlines() if "HOLDS" in ln]
    text = " ".join(fail)
    assert "total_cycles" in text and "samples" in text
    per_sample = re.search(r"cycles per sample ([+-][\d.]+)%", text)
    assert per_sample and float(per_sample.group(1)) < 0, text
    assert "'cycles_per_sample>+5%'" in text  # the suggested gate parses and passes
    assert main(["compare", str(a), str(b), "--fail-if", "cycles_per_sample>+5%"]) == 0
    capsys.readouterr()
    # JSON carries the same sentence; a per-sample gate or same-size runs get no such note
    import json

    assert main(["compare", str(a), str(b), "--fail-if", "cycles>+5%", "--json"]) == 1
    (gate,) = json.loads(capsys.readouterr().out)["gates"]
    assert "cycles_per_sample" in gate["detail"]
    assert main(["compare", str(a), str(a), "--fail-if", "cycles>=+0%", "--json"]) == 1
    (gate,) = json.loads(capsys.readouterr().out)["gates"]
    assert "per sample" not in gate["detail"]


# -- tune: the start inside the grid ----------------------------------------------------------
class _Batch:
    def __init__(self, reqs):
        from analyser.sim.service import SimResponse

        self.answers = [
            r
            if isinstance(r, SimResponse)
            else SimResponse(
                r.key,
                "ok",
                figures={
                    "fits": True,
                    "throughput_samples_per_s": float(r.config["micro_batch_size"]),
                },
            )
            for r in reqs
        ]

    def as_completed(self):
        yield from reversed(list(enumerate(self.answers)))  # the start is not answered first

    def progress(self):
        from analyser.sim.service.service import Progress

        return Progress(len(self.answers), 0, 0, len(self.answers))

    def cancel(self):
        pass


class _CountingService:
    """Answers at once; records every batch submitted (what the workers would get together)."""

    def __init__(self):
        self.batches: list[list[str]] = []

    def request(self, cfg, model_file=None, tag=""):
        from analyser.sim.service import SimRequest

        return SimRequest.make(cfg, model_file, tag)

    def submit(self, reqs):
        reqs = list(reqs)
        self.batches.append([r.key for r in reqs])
        return _Batch(reqs)


def test_a_grid_holding_the_start_fits_a_budget_of_its_size_and_runs_as_one_batch(tmp_path):
    from analyser.sim.tune import build_space, grid_budget, tune
    from engine.config import RunConfig

    start = RunConfig.from_dict({"model": "mlp", "micro_batch_size": 2}).to_dict()
    space = build_space(start, ["mbs=1,2,4"], [], "throughput")  # the start is mbs=2
    assert grid_budget(space) == 3
    service = _CountingService()
    result = tune(space, service, budget=3)  # auto: the whole grid, not the guided search
    assert result.strategy == "grid"
    assert [len(b) for b in service.batches] == [3]  # start and grid submitted together
    assert len(result.rows) == 3 and len({r.response.key for r in result.rows}) == 3
    assert result.start.config == start and result.best.config["micro_batch_size"] == 4
    # the start outside the grid costs one more configuration
    other = build_space(start, ["mbs=4,8"], [], "throughput")
    assert grid_budget(other) == 3
    service = _CountingService()
    assert tune(other, service, budget=2).strategy == "guided"
    service = _CountingService()
    result = tune(other, service, budget=3)
    assert result.strategy == "grid" and [len(b) for b in service.batches] == [3]


def test_tune_strategy_grid_accepts_a_budget_of_the_grid_with_the_start(
    tmp_path, capsys, monkeypatch
):
    cfg = tmp_path / "start.toml"
    cfg.write_text('model = "mlp"\nmicro_batch_size = 2\n')
    base = ["tune", str(cfg), "--vary", "mbs=1,2,4", "--strategy", "grid", "-o"]
    # refused (one sentence, nothing simulated) when the grid needs more than the budget
    assert main([*base, str(tmp_path / "t1"), "--budget", "2"]) == 2
    err = capsys.readouterr().err
    assert "3 configurations" in err and "--budget 2" in err

    class Searched(Exception):
        pass

    def search(args, space, service, tune):
        raise Searched(args.budget)

    monkeypatch.setattr("analyser.cli.tune._search", search)
    with pytest.raises(Searched):  # a budget of 3 holds the grid, the start among it
        main([*base, str(tmp_path / "t2"), "--budget", "3"])
