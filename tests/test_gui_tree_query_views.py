"""The Program Tree's and the Query's view-models: built off the GUI thread and handed over
through the window's own hand-off (analyser.gui.background), frozen, painted by the report,
which reads no document on the GUI thread; an empty or bad input is one sentence in the
report (pytest-qt, offscreen)."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest
from gui_helpers import write_synthetic_profiles

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_synthetic_profiles(
        tmp_path_factory,
        "tree-query",
        ((5, 4), (5, 8)),
        n_steps=600,
        n_ipus=2,
        tiles=32,
        n_programs=60,
    )


class _Watched:
    """A document's analysis that records which thread reads it."""

    def __init__(self, inner, reads: list[tuple[str, bool]]) -> None:
        self._inner = inner
        self._reads = reads

    def __getattr__(self, name: str):
        self._reads.append((name, threading.current_thread() is threading.main_thread()))
        return getattr(self._inner, name)


@pytest.fixture
def watched(monkeypatch, pair):
    """The pair opened as documents whose every read (a cached result computed, an attribute of
    the analysis) is recorded with whether it ran on the GUI thread."""
    from analyser.gui.model.document import Document

    reads: list[tuple[str, bool]] = []
    original = Document.cached

    def cached(self, key, compute):
        def run():
            reads.append((key, threading.current_thread() is threading.main_thread()))
            return compute()

        return original(self, key, run)

    monkeypatch.setattr(Document, "cached", cached)
    docs = [Document.open(p) for p in pair]
    for d in docs:
        d.analysis = _Watched(d.analysis, reads)
    yield docs, reads
    for d in docs:
        d.close()


def _in_window_hand_off(qtbot, report):
    """``report`` shown, its view-models built on a pool and handed over on the GUI thread as
    the main window does (analyser.gui.background.Background.build_view)."""
    from PySide6.QtCore import QThreadPool

    from analyser.gui.background import Background

    pool = QThreadPool()
    background = Background(pool, lambda: None, lambda: True)
    report.view_source = background.build_view
    qtbot.addWidget(report)
    report.resize(1280, 720)
    report.show()
    qtbot.waitExposed(report)
    return pool, background


def _on_gui_thread(reads, since: int = 0) -> list[str]:
    return [key for key, gui in reads[since:] if gui]


def test_program_tree_paints_its_view_model_and_reads_no_document(qtbot, watched):
    from analyser.gui.model.program_tree import TILES_PENDING, ProgramTree
    from analyser.gui.model.program_tree_view import ProgramTreeView
    from analyser.gui.reports.program_tree import ProgramTreeReport

    (a, b), reads = watched
    report = ProgramTreeReport()
    pool, _background = _in_window_hand_off(qtbot, report)
    start = len(reads)
    report.set_document(a, b)
    assert report.awaiting_view  # says "Reading ..." while the pool builds it
    qtbot.waitUntil(lambda: not report.awaiting_view, timeout=30_000)
    view = report.view_model
    assert isinstance(view, ProgramTreeView) and view.b is not None
    assert [key for key, _gui in reads[start:]] and not _on_gui_thread(reads, start)
    # frozen all the way: the dataclasses' fields and the trees' arrays
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.a = view.b  # type: ignore[misc]
    assert isinstance(view.a.tree, ProgramTree)
    for array in (view.a.tree.cycles, view.b.tree.delta, view.b_of_a):
        assert array is not None and not array.flags.writeable
    # the report paints it: both trees, B's change column, the start step's details
    pane_a, pane_b = report.pane_a, report.pane_b
    assert pane_a.model.tree is view.a.tree and pane_b.model.tree is view.b.tree
    assert pane_b.isVisible() and pane_b.model.columns[-1] == view.b.tree.columns[-1]
    assert pane_a.model.rowCount() == len(view.a.tree.children(-1)) > 0
    # a step selected: its details at once from the view-model, its per-tile cycles from the
    # pane's pool thread when they arrive; selecting in A follows in B
    tree = view.a.tree
    steps = np.flatnonzero(tree.types >= 3)
    node = int(next(s for s in steps if view.b_of_a[s] >= 0 and s != pane_a.selected_node()))
    start = len(reads)
    pane_a.select_node(node)
    name = tree.names[node]
    assert pane_a.details.value(name, "Path")
    assert pane_b.selected_node() == int(view.b_of_a[node])
    qtbot.waitUntil(
        lambda: not pane_a.details_pending and not pane_b.details_pending, timeout=30_000
    )
    assert not _on_gui_thread(reads, start), _on_gui_thread(reads, start)
    cycles = a.analysis._inner.src.profile.tile_cycles([node])[0]  # the test's own read
    used = cycles[cycles > 0]
    section = pane_a.details.section(name)
    shown = {
        section.child(i).text(0): section.child(i).text(1) for i in range(section.childCount())
    }
    assert TILES_PENDING not in shown.values()
    if used.size:
        assert shown["Tiles used"] == f"{used.size:,}"
        assert shown["Cycles per tile (min / mean / max)"].startswith(f"{int(used.min()):,} / ")
    report.shutdown()
    pool.waitForDone(30_000)


def test_query_paints_its_answer_and_a_syntax_error_is_one_sentence(qtbot, watched):
    from analyser.gui.model.query_view import QueryResult, QueryView
    from analyser.gui.reports.query import QueryReport

    (a, b), reads = watched
    report = QueryReport()
    pool, _background = _in_window_hand_off(qtbot, report)
    start = len(reads)
    with qtbot.waitSignal(report.resultShown, timeout=30_000):
        report.set_document(a, b)  # the view-model arrives, then the example query's answer
    assert not _on_gui_thread(reads, start), _on_gui_thread(reads, start)
    view = report.view_model
    assert isinstance(view, QueryView) and len(view.sources) == 3
    assert [report.which.itemText(i) for i in range(3)] == [s.label for s in view.sources]
    result = report.result
    assert isinstance(result, QueryResult) and result.error == "" and result.n_rows > 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.error = "x"  # type: ignore[misc]
    assert report.model.rowCount() == result.n_rows
    assert report.status.text() == result.status()
    # a syntax error: one sentence under the editor, no traceback; the last table stays
    report.editor.setPlainText("SELEC ipu FROM steps")
    with qtbot.waitSignal(report.resultShown, timeout=30_000):
        report.run_query()
    error = report.error
    assert error and "\n" not in error and "Traceback" not in error
    assert report.status.text() == error and error.endswith(".")
    assert report.model.rowCount() == result.n_rows and report.result is result
    report.shutdown()
    pool.waitForDone(30_000)


def _tree_message(qtbot, path) -> str:
    """The Program Tree's message for the profile at ``path``, its view-model handed over."""
    from analyser.gui.model.document import Document
    from analyser.gui.reports.program_tree import ProgramTreeReport

    doc = Document.open(path)
    report = ProgramTreeReport()
    pool, _background = _in_window_hand_off(qtbot, report)
    try:
        report.set_document(doc)
        qtbot.waitUntil(lambda: not report.awaiting_view, timeout=30_000)
        assert report.stack.currentWidget() is report.message
        return report.message.label.text()
    finally:
        report.shutdown()
        pool.waitForDone(30_000)
        doc.close()


def test_a_profile_with_no_programs_is_one_sentence_in_the_program_tree(qtbot, pair, monkeypatch):
    from analyser.gui.model import data
    from analyser.gui.model import program_tree as model
    from analyser.gui.model.program_tree_view import no_programs_sentence

    def no_programs(doc, units):
        return model.ProgramTree(data.program_nodes(doc).iloc[:0], None, None, units)

    monkeypatch.setattr(model, "program_tree", no_programs)
    text = _tree_message(qtbot, pair[0])
    assert text == no_programs_sentence(pair[0].name) and "\n" not in text


def test_a_profile_the_tree_cannot_be_built_from_is_one_sentence(qtbot, pair, monkeypatch):
    """A builder meeting a damaged profile: the report says so in its panel, no traceback."""
    from analyser.gui.model import data

    def damaged(doc):
        raise KeyError("/programs/nodes/parent")

    monkeypatch.setattr(data, "program_nodes", damaged)
    text = _tree_message(qtbot, pair[0])
    assert "/programs/nodes/parent" in text and "Traceback" not in text and "\n" not in text


def test_run_query_never_raises_and_a_stop_is_no_error(pair, monkeypatch):
    """The answer's builder turns what the query's process says into the view-model: a
    stopped query is ``stopped`` (no sentence), a failure outside the query one sentence."""
    import threading as th

    from analyser.gui.model import query_view
    from analyser.gui.model.query_view import QuerySource, run_query

    source = QuerySource("A: x", (str(pair[0]),), "x")
    stop = th.Event()
    stop.set()
    stopped = run_query(source, "SELECT count(*) FROM steps", stop)
    assert stopped.stopped and not stopped.error and stopped.status() == "Stopped."

    def broken(*_args, **_kwargs):
        raise RuntimeError("the forkserver went away\nat line 2")

    monkeypatch.setattr(query_view, "run_bounded", broken)
    failed = run_query(source, "SELECT 1")
    assert failed.error == "the query could not run (the forkserver went away at line 2)."
    assert failed.frame is None and failed.status() == failed.error
