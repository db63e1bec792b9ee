"""`analyse summary` / `analyse insights`: output on fitting and OOM profiles, clear errors."""

from __future__ import annotations

import json

import pytest

from analyser.cli import main
from profiles import write_profile
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="session")
def cli_profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    fits, oom = d / "fits.h5", d / "oom.h5"
    write_profile(fits, make_synthetic_profile(n_steps=4000, n_ipus=2, tiles=128, seed=7))
    write_profile(oom, make_synthetic_profile(n_steps=100, n_ipus=2, tiles=128, oom=True))
    return fits, oom


def test_summary(cli_profiles, capsys):
    fits, oom = cli_profiles
    assert main(["summary", str(fits)]) == 0
    out = capsys.readouterr().out
    for word in (
        "Memory",
        "OOM tiles",
        "Cycles by step type",
        "OnTileExecute",
        "StreamCopy",
        "samples/s",
        "tile balance",
    ):
        assert word in out
    assert main(["summary", str(oom), "--units", "bytes"]) == 0
    out = capsys.readouterr().out
    assert "OUT OF MEMORY" in out and "No execution" in out


def test_insights_json(cli_profiles, capsys):
    _, oom = cli_profiles
    assert main(["insights", str(oom), "--json", "--no-resimulate"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fits"] is False and doc["oom_tiles"] > 0
    assert doc["insights"] and doc["insights"][0]["category"] == "memory"
    assert all(t["severity"] == "critical" for t in doc["insights"] if t["category"] == "memory")
    # the synthetic run config is not an engine config: the effect says so, nothing crashes
    assert main(["insights", str(oom), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for t in doc["insights"]:
        if t["change"]:
            assert t["effect"]["status"] in ("error", "unavailable")


def test_thresholds_option(cli_profiles, capsys):
    fits, _ = cli_profiles
    assert main(["insights", "--list-thresholds", str(fits)]) == 0
    assert "host_wait_high" in capsys.readouterr().out
    assert (
        main(
            [
                "insights",
                str(fits),
                "--no-resimulate",
                "--json",
                "--threshold",
                "tile_balance=0",
                "--threshold",
                "host_wait_moderate=1",
            ]
        )
        == 0
    )
    ids = {t["id"] for t in json.loads(capsys.readouterr().out)["insights"]}
    assert "throughput.tile_imbalance" not in ids and "throughput.async_loader" not in ids
    for bad in ("nonsense=1", "tile_balance", "tile_balance=abc"):
        assert main(["insights", str(fits), "--threshold", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "threshold" in err


@pytest.mark.parametrize("content", [b"", b"garbage bytes", None])
def test_bad_files(tmp_path, capsys, content):
    path = tmp_path / "bad.h5"
    if content is not None:
        path.write_bytes(content)
    for cmd in ("summary", "insights"):
        assert main([cmd, str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err and "bad.h5" in err


def test_summary_json(cli_profiles, capsys):
    fits, oom = cli_profiles
    for path in (fits, oom):
        assert main(["summary", str(path), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert {"target", "metrics", "ipus", "memory", "liveness", "execution"} <= set(doc)
        assert doc["insights"] == []
    assert doc["execution"] is None and doc["metrics"]["oom_tiles"] > 0


def test_brackets_survive_terminal_markup(tmp_path, capsys):
    """Lists such as split_points ['layer3.8'] are printed, not eaten as rich markup."""
    paths = []
    for name, split in (("a", []), ("b", ["layer3.8"])):
        data = make_synthetic_profile(n_steps=500, n_ipus=2, tiles=64, seed=1)
        data["/meta"]["run_config"] = {**data["/meta"]["run_config"], "split_points": split}
        paths.append(tmp_path / f"{name}.h5")
        write_profile(paths[-1], data)
    assert main(["compare", *map(str, paths)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "split_points [layer3.8] instead of []" in out
