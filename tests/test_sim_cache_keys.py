"""The simulation cache answers only for the inputs it was filled with: its key holds every input
that changes a figure by content (the run configuration, the host profile's and the ONNX model's
bytes, the engine's code and data tables, the code that reads the figures back), so editing a
file a run configuration names is a cache miss, never a stale answer (cases: tests/hostile.py,
``sim_key_changes``)."""

from __future__ import annotations

import sys
from pathlib import Path

import hostile
import pytest

from analyser.sim.service.request import SimRequest, fingerprint_files
from analyser.sim.simulators import InProcessSimulator

ROOT = Path(__file__).resolve().parent.parent


def _names() -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return list(hostile.sim_key_changes(Path(d)))


@pytest.mark.parametrize("name", _names())
def test_an_edited_input_file_changes_the_key(tmp_path, monkeypatch, name):
    config, change, cwd = hostile.sim_key_changes(tmp_path)[name]
    if cwd is not None:
        monkeypatch.chdir(cwd)
    before = SimRequest.make(config).key
    change()
    assert SimRequest.make(config).key != before, f"{name}: the key did not change"


def test_the_same_contents_elsewhere_give_the_same_figures(tmp_path):
    """Content, not the folder: a copy of the host profile answers like the original (the key
    may name the path too; the figures must agree)."""
    config, _, _ = hostile.sim_key_changes(tmp_path / "a")["host-profile-50x-slower"]
    copy = tmp_path / "b" / "host.toml"
    copy.parent.mkdir()
    copy.write_text(Path(config["host_profile"]).read_text())
    sim = InProcessSimulator(tmp_path / "cache", time_limit=None)
    one = sim.simulate(config)
    two = sim.simulate({**config, "host_profile": str(copy)})
    assert one.status == two.status == "ok"
    assert one.figures["throughput_samples_per_s"] == two.figures["throughput_samples_per_s"]


def test_a_slower_host_profile_is_not_answered_from_the_cache(tmp_path):
    """The issue's case: host.toml made 50x slower, the same run configuration: a miss, and the
    answer is the one a fresh cache gives."""
    config, change, _ = hostile.sim_key_changes(tmp_path)["host-profile-50x-slower"]
    sim = InProcessSimulator(tmp_path / "cache", time_limit=None)
    fast = sim.simulate(config)
    assert fast.status == "ok" and not fast.cached
    change()
    slow = sim.simulate(config)
    fresh = InProcessSimulator(tmp_path / "fresh", time_limit=None).simulate(config)
    assert not slow.cached, "the cache answered for the old host profile"
    assert slow.figures["throughput_samples_per_s"] == fresh.figures["throughput_samples_per_s"]
    assert slow.figures["throughput_samples_per_s"] < fast.figures["throughput_samples_per_s"] / 5
    again = sim.simulate(config)
    assert again.cached and again.figures == slow.figures


def test_a_file_edited_after_the_request_is_not_cached_under_its_key(tmp_path):
    """The key is taken when the request is made; a host profile edited before the simulation
    reads it would put the new file's figures under the old contents' key. The simulation sees
    the change, answers a non-cached failure naming the file, and caches nothing."""
    config, change, _ = hostile.sim_key_changes(tmp_path)["host-profile-50x-slower"]
    sim = InProcessSimulator(tmp_path / "cache", time_limit=None)
    req = SimRequest.make(config)
    change()
    resp = sim.answer(req)
    assert resp.status == "failed" and "host.toml" in resp.message and "changed" in resp.message
    assert resp.message.count(". ") == 0 and resp.message.endswith(".")
    assert sim.cache.get(req.key) is None


def test_the_fingerprint_covers_the_engine_its_tables_and_the_figures_code(tmp_path):
    """Every data table of the engine (chips, systems, CPUs, frameworks, host profiles) and
    every project module a simulation and its figures run through is in the fingerprint that
    the key holds (a module of the engine, the profile format or the analysis core that is not
    would change figures without changing keys)."""
    covered = {p.resolve() for p in fingerprint_files()}
    data = {p.resolve() for p in (ROOT / "engine" / "data").rglob("*") if p.is_file()}
    assert data and data <= covered, sorted(map(str, data - covered))
    config, _, _ = hostile.sim_key_changes(tmp_path)["host-profile-50x-slower"]
    assert InProcessSimulator(tmp_path / "cache", time_limit=None).simulate(config).simulated
    figure_code = ("engine", "profiles", str(Path("analyser", "core")))
    loaded = set()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not f:
            continue
        p = Path(f).resolve()
        if p.is_relative_to(ROOT) and str(p.relative_to(ROOT)).startswith(figure_code):
            loaded.add(p)
    loaded.add((ROOT / "analyser/sim/service/request.py").resolve())  # figures_of
    loaded.add((ROOT / "analyser/sim/service/worker.py").resolve())  # the simulation task
    assert loaded <= covered, sorted(map(str, loaded - covered))


def test_a_refusal_for_missing_external_data_is_not_served_once_it_is_there(tmp_path):
    config, change, _ = hostile.sim_key_changes(tmp_path)["onnx-external-data-appears"]
    sim = InProcessSimulator(tmp_path / "cache", time_limit=None)
    missing = sim.simulate(config)
    assert missing.status == "refused" and "missing" in missing.message
    change()
    there = sim.simulate(config)
    assert not there.cached and there.status == "ok", there
