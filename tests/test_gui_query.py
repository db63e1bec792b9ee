"""The GUI's Query report (SQL over the open profile on a pool thread, the result as a
table, Stop)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from gui_helpers import open_documents, shown_report

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    from gui_helpers import write_synthetic_profiles

    return write_synthetic_profiles(
        tmp_path_factory, "q", ((0, 4), (1, 8)), n_steps=3000, n_ipus=2, tiles=32, n_programs=40
    )


@pytest.fixture
def report(qtbot):
    from analyser.gui.reports.query import QueryReport

    yield from shown_report(
        qtbot, QueryReport(), size=(900, 600), before_close=lambda r: r.shutdown()
    )


def _run(qtbot, r, sql=None):
    if sql is not None:
        r.editor.setPlainText(sql)
        r.run_query()
    qtbot.waitUntil(lambda: not r.running, timeout=20_000)


def _column(report, key):
    m = report.model
    assert key in [m.column_key(c) for c in range(m.columnCount())]
    return m.frame[key].to_numpy()


def test_query_tab_shows_the_result_and_errors(qtbot, report, profiles):
    from analyser.query import query

    r, _docs = report
    (doc,) = open_documents(report, profiles[0])
    _run(qtbot, r)  # the example query ran on showing the profile: cycles by IPU and type
    want = query(profiles[0], r.editor.toPlainText())
    assert r.model.rowCount() == len(want) > 0
    np.testing.assert_array_equal(_column(r, "cycles"), want["cycles"].to_numpy())
    _run(qtbot, r, "SELECT a.id, b.id FROM programs a JOIN programs b ON a.id = b.id")
    assert r.error is None and r.model.rowCount() == doc.analysis.target.n_programs
    assert [r.model.column_key(c) for c in range(2)] == ["id", "id_2"]
    _run(qtbot, r, "SELECT * FROM read_csv('/etc/passwd')")
    assert r.error and "outside the profile" in r.status.text()
    assert r.model.rowCount() == doc.analysis.target.n_programs  # the last result stays


def test_stop_interrupts_a_long_query(qtbot, report, profiles):
    r, _docs = report
    open_documents(report, profiles[0])
    _run(qtbot, r)
    # 3,000^4 rows: hours, unless it is stopped
    r.editor.setPlainText("SELECT count(*) FROM steps a, steps b, steps c, steps d")
    with qtbot.waitSignal(r.queryStarted, timeout=20_000) as started:
        r.run_query()
        assert r.running and r.stop_button.isEnabled()
    (pid,) = started.args
    os.kill(pid, 0)  # the query's process is there, running it
    r.stop_query()
    assert not r.running and r.status.text() == "Stopped."
    assert r._pool.waitForDone(20_000)  # DuckDB stopped: the thread is free again
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # and its process ended


@pytest.mark.skipif(
    not __import__("pathlib").Path("/proc/self/status").exists(), reason="reads VmSize from /proc"
)
def test_a_query_whose_lists_outgrow_every_limit_is_one_sentence_in_the_tab(
    qtbot, report, profiles
):
    """The tab's query runs in a process of its own under an address-space limit: a list
    DuckDB's own limit does not count (``len(range(10^9))``, 8 GB) is one sentence, and the
    GUI's process does not grow."""
    import resource

    r, _docs = report
    open_documents(report, profiles[0])
    _run(qtbot, r)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _run(qtbot, r, "SELECT len(range(1000000000)) AS n")
    assert r.error and "memory" in r.error and "\n" not in r.error
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 1 << 20  # < 1 GiB


def test_query_tab_in_compare_mode_reads_b(qtbot, report, profiles):
    r, _docs = report
    open_documents(report, *profiles)
    _run(qtbot, r)
    assert r.which.count() == 3  # A, B, A and B
    r.editor.setPlainText("SELECT count(*) AS n FROM steps")
    r.which.setCurrentIndex(1)
    _run(qtbot, r)
    from profiles import open_profile

    with open_profile(profiles[1]) as p:
        n = p.n_steps
    assert int(r.model.frame["n"][0]) == n


def test_result_columns_and_profile_choice_are_not_cut(qtbot, report, profiles):
    """Seen in a real X server: "StreamCopyBegin" cut to "StreamCopy…" with room
    to spare, and the compare-mode profile choice cut to "A: 4-dev"."""
    r, _docs = report
    open_documents(report, *profiles)
    _run(qtbot, r)
    m, view = r.model, r.view
    metrics = view.fontMetrics()
    for col in range(m.columnCount()):
        values = m.frame.iloc[:, col].astype(str)
        widest = max(metrics.horizontalAdvance(v) for v in values)
        assert view.columnWidth(col) >= widest, m.column_key(col)
    combo = r.which
    text = combo.currentText()
    assert combo.width() >= combo.fontMetrics().horizontalAdvance(text)


def test_closing_with_a_finished_query_still_queued_is_quiet(qtbot, report, profiles):
    """The window closed while a query's result was still queued: its DuckDB connection was
    closed already, interrupting it raised from closeEvent and PySide crashed. Stopping (and
    shutting down) a query whose connection is closed does nothing more than stop."""
    import duckdb

    r, _docs = report
    open_documents(report, profiles[0])
    _run(qtbot, r)
    con = duckdb.connect()
    con.close()
    r._cons, r._running = [con], True  # as when its result is queued but not delivered yet
    r.stop_query()
    assert not r.running and r.status.text() == "Stopped."
    r.shutdown()


def test_query_lists_its_tables_exports_csv_and_reads_both_profiles(
    qtbot, report, profiles, tmp_path
):
    """The tables are listed beside the editor (a double-click writes a name); the whole result
    is exported as CSV, never over a profile; in compare mode "A and B" reads both profiles,
    each row labelled with its profile."""
    import pandas as pd

    from analyser.query.tables import TABLES
    from profiles.errors import UserFacingError

    r, _docs = report
    names = [r.table_list.item(i).text() for i in range(r.table_list.count())]
    assert names == list(TABLES) and r.table_list.item(0).toolTip()
    assert not r.export_button.isEnabled()
    a, b = open_documents(report, profiles[0], profiles[1])
    _run(qtbot, r)
    r.editor.setPlainText("SELECT count(*) AS n FROM ")
    r.editor.moveCursor(r.editor.textCursor().MoveOperation.End)
    r.table_list.itemDoubleClicked.emit(r.table_list.item(names.index("programs")))
    assert r.editor.toPlainText().endswith("FROM programs")
    _run(qtbot, r, "SELECT id, name FROM programs ORDER BY id")
    out = tmp_path / "result.csv"
    r.export_csv(str(out))
    back = pd.read_csv(out)
    assert len(back) == a.analysis.target.n_programs and list(back.columns) == ["id", "name"]
    with pytest.raises(UserFacingError):
        r.export_csv(str(profiles[0]))  # an open profile is never overwritten
    assert r.which.count() == 3
    r.which.setCurrentIndex(2)  # runs the query on both
    _run(qtbot, r, "SELECT profile, count(*) AS n FROM programs GROUP BY profile ORDER BY n")
    assert r.error is None and r.model.rowCount() == 2
    counts = sorted(int(n) for n in _column(r, "n"))
    assert counts == sorted([a.analysis.target.n_programs, b.analysis.target.n_programs])
    assert "and" in r.status.text()
