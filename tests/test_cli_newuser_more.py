"""More of a new user's mistakes (QA round 3): files that are not ours are never replaced without
--force, run configurations that are not TOML files, option values out of range, and the
insights' re-simulation failure said once. Small synthetic profiles, so the module runs fast."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from analyser.cli import main
from analyser.core.insights import find_insights


@pytest.fixture(scope="module")
def prof(synthetic_profile) -> Path:
    return synthetic_profile("run.h5", n_steps=400, n_ipus=2, tiles=32, n_programs=20, seed=3)


def one_sentence(err: str) -> str:
    """The error output is one line (the sentence), with no traceback."""
    assert "Traceback" not in err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("usage:")]
    assert len(lines) == 1, err
    return lines[0]


# -- 1. analyse demo never replaces a file that is not one of its own profiles -----------------
def test_demo_refuses_a_non_profile_named_like_a_step(tmp_path, prof, capsys):
    out = tmp_path / "demo"
    out.mkdir()
    shutil.copy(prof, out / "1-base.h5")  # an earlier profile: the demo may replace it
    (out / "2-half.h5").write_text("my notes\n")  # not a profile: must not be replaced
    before = (out / "1-base.h5").read_bytes()
    assert main(["demo", "-o", str(out), "--no-report"]) == 2
    line = one_sentence(capsys.readouterr().err)
    assert "2-half.h5" in line and "not an IPU profile" in line and "--force" in line
    assert (out / "2-half.h5").read_text() == "my notes\n"
    assert (out / "1-base.h5").read_bytes() == before  # nothing written
    assert sorted(p.name for p in out.iterdir()) == ["1-base.h5", "2-half.h5"]


def test_demo_refuses_a_foreign_report_html(tmp_path, capsys):
    out = tmp_path / "demo"
    out.mkdir()
    (out / "report.html").write_text("<html>my page</html>\n")
    assert main(["demo", "-o", str(out)]) == 2
    line = one_sentence(capsys.readouterr().err)
    assert "report.html" in line and "not a report written by analyse" in line
    assert (out / "report.html").read_text() == "<html>my page</html>\n"
    assert [p.name for p in out.iterdir()] == ["report.html"]


# -- 5. report / export-trace never replace a file analyse did not write ------------------------
@pytest.mark.parametrize(
    ("cmd", "name"),
    [
        (["report", "--no-insights"], "notes.html"),
        (["report", "--no-insights", "--format", "md"], "notes.txt"),
        (["export-trace"], "notes.txt"),
        (["export-trace", "--format", "perfetto"], "notes.pftrace"),
        (["export-trace", "--split-by-run"], "t.run0003.json"),
    ],
    ids=["report-html", "report-md", "trace-chrome", "trace-perfetto", "trace-split"],
)
def test_outputs_refuse_a_file_not_written_by_analyse(cmd, name, tmp_path, prof, capsys):
    notes = tmp_path / name
    notes.write_text("precious\n")
    out = tmp_path / "t.json" if name.startswith("t.run") else notes
    argv = [cmd[0], str(prof), *cmd[1:], "-o", str(out)]
    assert main(argv) == 2
    line = one_sentence(capsys.readouterr().err)
    assert name in line and "not written by analyse" in line and "--force" in line
    assert notes.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    # --force replaces it; then the file is ours, and a second run replaces it without --force
    assert main([*argv, "--force"]) == 0
    assert notes.read_bytes() != b"precious\n"
    assert main(argv) == 0


def test_force_never_replaces_an_hdf5_file(tmp_path, prof, capsys):
    other = tmp_path / "other.h5"
    shutil.copy(prof, other)
    before = other.read_bytes()
    assert main(["report", str(prof), "--no-insights", "-o", str(other), "--force"]) == 2
    assert "existing HDF5 file" in one_sentence(capsys.readouterr().err)
    assert other.read_bytes() == before


# -- 2. run configurations: one sentence naming the file ----------------------------------------
@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("profile", "is an HDF5 file"),
        ("big-profile", "is an HDF5 file"),
        ("folder", "is a folder"),
        ("binary", "is not a text file"),
        ("misspelt", "did you mean 'micro_batch_size'"),
        ("empty", "sets no options; give at least `model`"),
        ("empty-run-table", "sets no options"),
    ],
)
def test_run_config_that_is_not_a_config(kind, words, tmp_path, prof, capsys):
    cfg = {
        "profile": prof,
        # a profile over the run configurations' size limit is still named a profile
        "big-profile": tmp_path / "big.h5",
        "folder": tmp_path / "configs",
        "binary": tmp_path / "bin.toml",
        "misspelt": tmp_path / "typo.toml",
        "empty": tmp_path / "empty.toml",
        "empty-run-table": tmp_path / "run-table.toml",
    }[kind]
    texts = {"misspelt": 'model = "mlp"\nmicro_bach_size = 4\n', "empty": "# nothing yet\n"}
    if kind == "big-profile":
        cfg.write_bytes(prof.read_bytes() + b"\0" * (2 << 20))
    elif kind == "folder":
        cfg.mkdir()
    elif kind == "binary":
        cfg.write_bytes(b"\xff\xfe\x00model" + bytes(range(256)))
    elif kind == "empty-run-table":
        cfg.write_text("[run]\n")
    elif kind in texts:
        cfg.write_text(texts[kind])
    out = tmp_path / "out.h5"
    assert main(["profile", str(cfg), "-o", str(out), "--quiet"]) == 2
    line = one_sentence(capsys.readouterr().err)
    assert words in line and repr(str(cfg)) in line, line
    assert "codec" not in line and "Errno" not in line
    assert not out.exists()


def test_config_errors_from_the_api_name_the_file(tmp_path):
    from engine.config import RunConfig
    from engine.errors import ConfigError

    cfg = tmp_path / "typo.toml"
    cfg.write_text('[run]\nmodel = "mlp"\nprecison = "16.16"\n')
    with pytest.raises(ConfigError, match=r"typo\.toml.*precison.*did you mean 'precision'"):
        RunConfig.from_toml(cfg)
    cfg.write_text('model = "mlp"\n')
    assert RunConfig.from_toml(cfg).model == "mlp"


def test_list_option_help_is_not_a_python_list(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    # the option's help entry (the last mention: the usage line comes first)
    i = out.rindex("--split-points LAYER[,LAYER...]")
    text = out[i : i + 200]
    assert "[]" not in text and "['" not in text and "comma-separated" in text.lower()


# -- 3. summary --top: validated, and larger values honoured -------------------------------------
def _top_row(out: str) -> list[str]:
    row = next(ln for ln in out.splitlines() if "top tiles" in ln)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    return [t.strip() for t in cells[1].split(",")]


@pytest.mark.parametrize("bad", ["0", "-3", "two"])
def test_summary_top_must_be_at_least_one(bad, prof, capsys):
    with pytest.raises(SystemExit) as exc:  # argparse's error: usage line + one sentence
        main(["summary", str(prof), "--top", bad])
    assert exc.value.code == 2
    line = one_sentence(capsys.readouterr().err)
    assert "--top" in line and ("whole number" in line or ">= 1" in line)


def test_summary_top_above_five_is_honoured(prof, capsys, monkeypatch):
    import numpy as np

    from analyser.core import Analysis

    monkeypatch.setenv("COLUMNS", "4000")  # one table line per row
    assert main(["summary", str(prof), "--top", "5"]) == 0
    five = _top_row(capsys.readouterr().out)
    assert main(["summary", str(prof), "--top", "12"]) == 0
    twelve = _top_row(capsys.readouterr().out)
    assert len(five) == 5 and len(twelve) == 12 and twelve[:5] == five
    assert main(["summary", str(prof), "--top", "100000"]) == 0  # more than there are tiles
    with Analysis.open(prof) as a:
        m = a.memory
        used = np.sort((m.tile_total + m.tile_gaps).ravel())[::-1]
        assert len(_top_row(capsys.readouterr().out)) == used.size == 64
        from analyser.cli.summary import _top_tiles

        listed = [b for _i, _t, b in _top_tiles(m, 12)]
        assert listed == [int(x) for x in used[:12]]


# -- 4. insights on a profile the engine cannot re-simulate: the reason is said once -------------
def test_insights_say_the_engine_rejection_once(prof, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "4000")
    assert main(["insights", str(prof)]) == 0
    out = capsys.readouterr().out
    # the synthetic profile's run configuration names a model the engine does not know
    reason = "model: allowed values are 'mlp', "
    assert out.count(reason) == 1, out
    assert "rejects the profile's own configuration" in out
    assert ".)" + ";" not in out and ".)." not in out and "..)" not in out
    changed = out.count("  change: ")
    assert changed >= 1
    assert out.count("not predicted: the engine cannot re-simulate") == changed


def test_a_rejected_change_still_gives_its_own_reason(prof):
    from analyser.core import Analysis
    from analyser.core.insights import resimulate
    from analyser.sim.simulators import InProcessSimulator

    with Analysis.open(prof) as a:
        tips = [t for t in find_insights(a) if t.change]
        assert tips
        resimulate.predict_effects(a, tips, InProcessSimulator(), baseline=False)
    for t in tips:  # no baseline re-simulated: each rejection carries the engine's sentence
        assert t.effect.status == "error"
        assert t.effect.message.startswith("the engine rejected the changed configuration: ")
        assert "got 'synthetic'" in t.effect.message
