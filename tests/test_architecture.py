"""The structure the import contracts cannot say on their own: every module of the
analysis core is named in its layers contract, and the CLI re-simulates a few configurations in
this process unless the user asks for the Dask cluster."""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _core_layers() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [
        c
        for c in data["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers" and c.get("containers") == ["analyser.core"]
    ]
    return {name for layer in contract["layers"] for name in re.split(r"[|:]", layer) if name}


def test_every_core_module_is_in_the_core_layers_contract():
    core = ROOT / "analyser" / "core"
    modules = {p.stem for p in core.glob("*.py") if p.stem != "__init__"}
    modules |= {p.parent.name for p in core.glob("*/__init__.py")}
    named = {n.strip() for n in _core_layers()}
    assert modules - named == set(), "name these core modules in pyproject.toml's core layers"
    assert named - modules == set(), "the core layers contract names modules that do not exist"


def _args(*argv: str) -> argparse.Namespace:
    from analyser.cli._service import add_service_arguments

    parser = argparse.ArgumentParser()
    add_service_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def service_calls(monkeypatch):
    """The process-wide service left alone: its configuration recorded, get_service a stub."""
    import analyser.sim.service as svc

    calls: dict = {}
    monkeypatch.delenv("ANALYSE_SCHEDULER", raising=False)
    monkeypatch.setattr(svc, "configure_service", lambda **kw: calls.update(kw))
    monkeypatch.setattr(svc, "get_service", lambda: "the service")
    return calls


@pytest.mark.parametrize(
    "argv, local",
    [
        ((), True),
        (("--time-limit", "30"), True),
        (("--workers", "2"), False),
        (("--memory-limit", "2GiB"), False),
    ],
)
def test_the_cli_chooses_the_simulator(argv, local, service_calls, tmp_path):
    from analyser.cli._service import simulator_from_args
    from analyser.sim.simulators import InProcessSimulator, ServiceSimulator

    sim = simulator_from_args(_args(*argv, "--cache", str(tmp_path)))
    assert service_calls["cache_dir"] == str(tmp_path)  # the options are checked and kept
    if local:
        assert isinstance(sim, InProcessSimulator)
        assert sim.cache.root == tmp_path
        assert sim.time_limit == (30.0 if argv else 600.0)
    else:
        assert isinstance(sim, ServiceSimulator) and sim.service == "the service"


def test_a_scheduler_in_the_environment_means_the_cluster(service_calls, monkeypatch, tmp_path):
    from analyser.cli._service import simulator_from_args
    from analyser.sim.simulators import ServiceSimulator

    monkeypatch.setenv("ANALYSE_SCHEDULER", "tls://127.0.0.1:1")
    assert isinstance(simulator_from_args(_args("--cache", str(tmp_path))), ServiceSimulator)


def test_in_process_and_service_simulators_agree(tmp_path):
    """The same configuration gives the same figures in this process as on a Dask worker (one
    task function), and the in-process answer is cached like the service's."""
    from analyser.sim.service import get_service
    from analyser.sim.simulators import InProcessSimulator, ServiceSimulator

    cfg = {"model": "mlp", "micro_batch_size": 2, "device_iterations": 4}
    local = InProcessSimulator(tmp_path)
    ((i, here),) = list(local.simulate_many([cfg]))
    ((j, there),) = list(ServiceSimulator(get_service()).simulate_many([cfg]))
    assert i == j == 0 and here.status == there.status == "ok" and not here.cached
    assert here.figures == there.figures
    assert local.simulate(cfg).cached  # the second time from the cache
    assert Path(here.profile).parent == tmp_path


def test_a_rule_types_its_id_once():
    """@rule declares the id and category; the finding a rule returns gets them stamped, a
    variant only among the ids the rule declares; the catalogue lists every rule once."""
    from analyser.core.insights.catalogue import RULE_MODULES, all_rules
    from analyser.core.insights.model import finding
    from analyser.core.insights.registry import CatalogueEntry, rule, rules_in

    variant = CatalogueEntry("memory.test_variant", "", "", "")

    @rule(
        "memory.test",
        thresholds=(),
        changes=(),
        fires_when="",
        change="",
        trade_off="",
        also=(variant,),
    )
    def found(ctx):
        return finding("Title", "info", "Summary", id=ctx)

    tip = found.rule.run("")
    assert (tip.id, tip.category) == ("memory.test", "memory")
    assert found.rule.run("memory.test_variant").id == "memory.test_variant"
    with pytest.raises(ValueError, match="not one of its ids"):
        found.rule.run("memory.other")
    ids = [i for r in all_rules() for i in r.ids]
    assert len(ids) == len(set(ids)) and len(all_rules()) == sum(
        len(rules_in(m)) for m in RULE_MODULES
    )


def test_every_module_declaring_rules_is_in_the_catalogue():
    """A rule module joins the insights by its line in RULE_MODULES: one left out would declare
    rules that never run, silently (docs/design.md, "add an insight")."""
    import importlib
    import pkgutil

    import analyser.core.insights as package
    from analyser.core.insights.catalogue import RULE_MODULES
    from analyser.core.insights.registry import rules_in

    declaring = {
        info.name
        for info in pkgutil.iter_modules(package.__path__)
        if rules_in(importlib.import_module(f"{package.__name__}.{info.name}"))
    }
    assert declaring == {m.__name__.rpartition(".")[2] for m in RULE_MODULES}


def test_a_refused_simulation_is_a_user_facing_error():
    """The engine's refusal of a configuration is shown as its one sentence, like every other
    expected error (the user-facing error tree), not as a bare ValueError."""
    from analyser.sim.service import SimRequest, SimulationRefused
    from profiles.errors import UserFacingError

    assert issubclass(SimulationRefused, UserFacingError)
    with pytest.raises(SimulationRefused) as refused:
        SimRequest.make({"model": "mlp", "precision": "8.8"})
    assert refused.value.exit_code == 2 and "precision" in str(refused.value)


def test_the_trace_engine_is_reached_from_the_analysis(tmp_path):
    """One TraceWindow per open Analysis, on the analysis's own profile reader (no second
    reader); None for a profile without execution."""
    import engine
    from analyser.core import Analysis
    from analyser.trace import trace_of
    from engine.config import RunConfig

    path = tmp_path / "mlp.h5"
    engine.simulate_to_file(RunConfig(model="mlp", micro_batch_size=2), path)
    with Analysis.open(path) as a:
        window = trace_of(a)
        assert window is trace_of(a) and window.profile is a.src.profile
        assert window.n_ipus == a.target.num_ipus


# ---------------------------------------------------------------------------------------------
# Size limits of the developers' guide: no function over 150 lines, no source file over 1,000
# ---------------------------------------------------------------------------------------------
MAX_FUNCTION_LINES = 150
MAX_FILE_LINES = 1000
#: Files allowed over the file limit (the function limit holds everywhere); none today:
#: analyser/trace/window.py and analyser/gui/reports/trace/timeline.py were split by other
#: structure changes, engine/execute/core.py into core.py and program.py. An entry no longer
#: needed fails the test.
SIZE_ALLOWED: tuple[str, ...] = ()


def _size_violations() -> list[tuple[str, str, str]]:
    """``(file, "file" or "function", what)`` for every file and function over its limit."""
    import ast

    found = []
    for package in ("engine", "profiles", "analyser"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text(encoding="utf-8")
            n_lines = len(text.splitlines())
            if n_lines > MAX_FILE_LINES:
                found.append((rel, "file", f"{n_lines:,} lines (limit {MAX_FILE_LINES:,})"))
            for node in ast.walk(ast.parse(text, filename=rel)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        what = f"line {node.lineno}: {node.name}, {length} lines"
                        found.append((rel, "function", f"{what} (limit {MAX_FUNCTION_LINES})"))
    return found


def test_no_function_or_file_over_the_size_limits():
    """engine/, profiles/ and analyser/: functions <= 150 lines (from the ``def`` to their last
    line), files <= 1,000 lines, but for the files being split right now (SIZE_ALLOWED)."""
    violations = _size_violations()
    unexpected = [
        f"{rel} ({kind}): {what}"
        for rel, kind, what in violations
        if not (kind == "file" and rel in SIZE_ALLOWED)
    ]
    assert unexpected == [], "split these (developers' guide: size limits):\n" + "\n".join(
        unexpected
    )
    stale = sorted(set(SIZE_ALLOWED) - {rel for rel, kind, _ in violations if kind == "file"})
    assert stale == [], f"within the limits now: drop these from SIZE_ALLOWED: {stale}"


#: What ``analyse insights`` must not import: the GUI's, the query engine's and the cluster's
#: libraries, and pandas (about 0.4 s of CPU per run; the rules read numpy columns).
INSIGHTS_NEVER_IMPORTS = (
    "pandas",
    "pyarrow",
    "dask",
    "distributed",
    "duckdb",
    "pyqtgraph",
    "PySide6",
)


def test_analyse_insights_imports_no_heavy_library(tmp_path):
    """``analyse insights --json`` on a profile with an execution, in a fresh process: none of
    INSIGHTS_NEVER_IMPORTS is imported (the re-simulations read their figures the same way)."""
    import subprocess
    import sys

    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    path = tmp_path / "small.h5"
    write_profile(path, make_synthetic_profile(n_steps=2000, tiles=16, n_programs=50, seed=1))
    code = (
        "import sys, io, contextlib\n"
        "from analyser.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['insights', {str(path)!r}, '--json', '--no-resimulate'])\n"
        f"heavy = {INSIGHTS_NEVER_IMPORTS!r}\n"
        "print(rc, sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split(None, 1) == ["0", "[]\n"], done.stdout + done.stderr


def _time_waits(folder: Path) -> list[str]:
    """Every call in ``folder``'s Python files that waits for a time in the GUI's event loop:
    ``qtbot.wait(...)`` (whatever its argument: a name holding milliseconds is a time too) and
    ``QTest.qWait(...)``. pytest-qt's ``waitUntil`` / ``waitSignal`` and the waits of
    tests/gui_helpers.py wait for an event; they are not calls of these."""
    import ast

    found = []
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else None
            if (name, node.func.attr) in (("qtbot", "wait"), ("QTest", "qWait")):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_test_waits_for_a_time():
    """The developers' guide: a test waits for the event it needs, never for a time (a wait
    long enough on an idle machine is too short with the other core busy, and too long
    everywhere else). Wait for a signal (``qtbot.waitSignal``), for an observable state
    (``qtbot.waitUntil``), or with tests/gui_helpers.py (``show_painted``, ``wait_until_idle``,
    ``settle_trace``)."""
    found = _time_waits(ROOT / "tests")
    assert found == [], "wait for an event instead:\n" + "\n".join(found)


def test_the_time_wait_check_finds_one(tmp_path, monkeypatch):
    """The check above finds a wait for a time, and not a wait for an event."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "test_x.py").write_text(
        "def test_a(qtbot, w):\n"
        "    qtbot.waitUntil(lambda: w.ready, timeout=5_000)\n"
        "    with qtbot.waitSignal(w.painted):\n"
        "        w.show()\n"
        "    qtbot.wait(50)\n"
        "    QTest.qWait(ms)\n",
        encoding="utf-8",
    )
    assert _time_waits(tmp_path) == ["test_x.py:5: qtbot.wait(50)", "test_x.py:6: QTest.qWait(ms)"]
