"""One door per report: every report reads one frozen view-model, built by the builder it
declares off the GUI thread and handed over complete (analyser.gui.model.views); none imports
the raw model (analyser.gui.model.data) or the SQL engine (analyser.query), and nothing under
analyser/gui reads the profile (``.src``). No report is exempt: the import contracts
(pyproject.toml) have no ignore_imports."""

from __future__ import annotations

import ast
import dataclasses
import threading
import tomllib
from pathlib import Path

import pytest
from gui_helpers import open_documents, open_in, shown_report, shown_window

from analyser.gui import reports as registry

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[1]
GUI = ROOT / "analyser" / "gui"
RAW_MODEL = "analyser.gui.model.data"
#: What only a view-model's builder imports, never a report: the raw model, the SQL engine.
BUILDERS_ONLY = (RAW_MODEL, "analyser.query")


def _classes() -> dict[str, type]:
    return {cls.key: cls for cls in registry.report_classes()}


def _imports(path: Path) -> set[str]:
    """The modules ``path`` imports (``from a import b`` counts as ``a`` and ``a.b``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _source(cls: type) -> Path:
    return ROOT / (cls.__module__.replace(".", "/") + ".py")


def _contract(forbidden: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c.get("forbidden_modules") == [forbidden]
    ]
    return contract


def test_every_report_declares_a_view_model_and_paints_it():
    classes = _classes()
    assert {"program_tree", "query"} <= set(classes)
    for key, cls in classes.items():
        assert callable(cls.view_builder), key
        assert "show_view" in vars(cls), key


def test_no_report_module_imports_what_only_builders_may():
    reports = sorted((GUI / "reports").rglob("*.py"))
    assert len(reports) > 10
    for path in reports:
        imported = _imports(path)
        for module in BUILDERS_ONLY:
            hits = {m for m in imported if m == module or m.startswith(module + ".")}
            assert not hits, (path.relative_to(ROOT), hits)


@pytest.mark.parametrize("forbidden", BUILDERS_ONLY)
def test_the_contracts_cover_every_report_with_no_exemption(forbidden):
    contract = _contract(forbidden)
    assert contract["type"] == "forbidden"
    assert contract["source_modules"] == ["analyser.gui.reports"]
    assert not contract.get("ignore_imports"), contract["ignore_imports"]


def test_nothing_under_the_gui_reads_the_profile_through_src():
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in GUI.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "src"
    ]
    assert not found, found


# -- the view-models and their hand-off -----------------------------------------------------------
@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two engine runs (a synthetic profile's target has no roofline figures)."""
    import engine
    from engine.config import RunConfig

    out = tmp_path_factory.mktemp("view-models")
    paths = []
    for mb in (1, 8):
        path = out / f"mlp-mb{mb}.h5"
        engine.simulate_to_file(RunConfig(model="mlp", micro_batch_size=mb), path)
        paths.append(path)
    return paths


def _frozen(value, seen: set[int], depth: int = 0) -> None:
    """``value`` and the GUI model's dataclasses it holds are frozen (their fields cannot be
    set) and hold tuples, not lists, dicts or sets."""
    if id(value) in seen or depth > 6:
        return
    seen.add(id(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not type(value).__module__.startswith("analyser.gui.model"):
            return  # an analysis core result the view-model passes on (the core's own type)
        assert type(value).__dataclass_params__.frozen, type(value).__name__
        first = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, first, None)
        for f in dataclasses.fields(value):
            _frozen(getattr(value, f.name), seen, depth + 1)
    elif isinstance(value, tuple):
        for item in value[:20]:
            _frozen(item, seen, depth + 1)
    else:
        assert not isinstance(value, list | dict | set), type(value)


@pytest.mark.parametrize("compare", [False, True], ids=["single", "compare"])
def test_every_view_model_is_frozen_all_the_way_down(pair, compare):
    from analyser.core.units import MemoryUnits
    from analyser.gui.model.document import Document

    docs = [Document.open(p) for p in pair]
    try:
        for key, cls in _classes().items():
            if cls.view_builder is None:
                continue
            view = cls.view_builder(docs[0], docs[1] if compare else None, MemoryUnits.KIB)
            assert dataclasses.is_dataclass(view), key
            _frozen(view, set())
    finally:
        for d in docs:
            d.close()


def test_a_view_model_arriving_for_documents_no_longer_shown_is_dropped(qtbot, pair):
    """The report asks for its view-model, then for another document's; the first arriving
    late is not painted over the second, and an error building it is said in the report."""
    from analyser.core.units import MemoryUnits
    from analyser.gui.model.views import ViewRequest
    from analyser.gui.reports.summary import SummaryReport

    fixture = shown_report(qtbot, SummaryReport())
    report, docs = next(fixture)
    asked: list[ViewRequest] = []
    report.view_source = lambda r, request: asked.append(request)
    open_documents((report, docs), pair[0])
    assert report.awaiting_view and len(asked) == 1
    assert report.message.label.text() == f"Reading {pair[0].name}..."
    open_documents((report, docs), pair[1])
    assert len(asked) == 2
    assert not report.receive_view(asked[0], asked[0].build())
    assert report.awaiting_view
    assert report.receive_view(asked[1], asked[1].build())
    assert not report.awaiting_view
    assert report.stack.currentWidget() is report.splitter
    assert report.tree.topLevelItemCount() > 0
    report.set_units(MemoryUnits.BYTES)
    assert report.receive_view(asked[2], None, OSError("the file went away"))
    assert "the file went away" in report.message.label.text()
    next(fixture, None)


@pytest.mark.parametrize(
    "key",
    [
        "summary",
        "roofline",
        "operations",
        "pipeline",
        "liveness",
        "trace",
        "insights",
        "memory",
        "program_tree",
        "query",
    ],
)
def test_the_window_builds_view_models_off_the_gui_thread_and_hands_them_over(
    qtbot, tmp_path, pair, monkeypatch, key
):
    """Clicked in the side list, the report's view-model is built on the window's pool (the
    warm-up's or a task of its own) and handed over: the report then shows its content.
    (That it paints pixel for pixel what the in-place fill painted before is checked by
    benchmarks/view_model_grabs.py, before and after a change.)"""
    import functools

    cls = _classes()[key]
    builder = cls.view_builder
    threads: list[threading.Thread] = []

    @functools.wraps(builder)
    def recording(*args):
        threads.append(threading.current_thread())
        return builder(*args)

    monkeypatch.setattr(cls, "view_builder", staticmethod(recording))
    gen = shown_window(qtbot, tmp_path)
    window = next(gen)
    assert open_in(qtbot, window, *pair)
    window.report_list.setCurrentRow(window.report_keys.index(key))
    report = window.report(key)
    qtbot.waitUntil(lambda: not report.awaiting_view and not report.needs_refresh, timeout=30000)
    assert threads and all(t is not threading.main_thread() for t in threads), threads
    assert report.stack.currentWidget() is report._content
    assert report.part_problem() == ""
    window.close()
    next(gen, None)


def test_a_reranked_profile_gets_a_new_insights_view_model(pair, monkeypatch):
    """Predicted effects re-rank a profile's insights: the re-ranking is counted on the
    document and the count is part of the request, so the list is built again in the new order
    (the view-model built before keeps its own order: it is frozen, never updated in place)."""
    import analyser.core.insights as core_insights
    from analyser.core.units import MemoryUnits
    from analyser.gui.model.document import Document
    from analyser.gui.model.insights import ranking, rerank
    from analyser.gui.model.insights_view import build_insights_view
    from analyser.gui.model.views import ViewRequest

    doc = Document.open(pair[0])
    try:

        def request() -> ViewRequest:
            return ViewRequest(build_insights_view, doc, None, MemoryUnits.KIB, (ranking(doc), 0))

        before = request().build()
        titles = [row.tip.title for row in before.rows]
        assert len(titles) >= 2, titles
        # a ranking that reverses the list: whatever the core's order, it changes
        monkeypatch.setattr(core_insights, "rank_insights", lambda _a, tips: tips[::-1])
        rerank(doc)
        assert ranking(doc) == 1 and not request().ready()
        after = request().build()
        assert [row.tip.title for row in after.rows] == titles[::-1]
        assert [row.tip.title for row in before.rows] == titles
        assert request().build() is after  # cached under its new key
    finally:
        doc.close()


def test_each_memory_choice_is_its_own_view_model(pair):
    """The Memory Report's choices (IPU, breakdown, order, gaps) are its view options: each
    combination is a view-model of its own, cached apart, its charts frozen."""
    from analyser.core.units import MemoryUnits
    from analyser.gui.model.document import Document
    from analyser.gui.model.memory_view import build_memory_view
    from analyser.gui.model.views import ViewRequest

    docs = [Document.open(p) for p in pair]
    try:

        def view(*options):
            return ViewRequest(build_memory_view, docs[0], docs[1], MemoryUnits.KIB, options)

        default = view(0, "category", False, False).build()
        total = view(0, None, False, True).build()
        assert default.a.chart.names != total.a.chart.names
        assert total.a.chart.names == ("Total", "Gaps")
        assert default.b is not None and default.b.name == docs[1].name
        # a choice past the IPUs shown falls back to all IPUs
        far = view(99, "category", False, False).build()
        assert far.ipu_index == 0 and far.a.shown_ipus == default.a.shown_ipus
        with pytest.raises(dataclasses.FrozenInstanceError):
            default.a.chart.names = ("x",)  # type: ignore[misc]
    finally:
        for d in docs:
            d.close()
