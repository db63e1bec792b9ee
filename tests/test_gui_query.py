"""Issue 25: the GUI's Query report (SQL over the open profile, the result as a table)."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import open_documents, shown_report

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    from gui_helpers import write_synthetic_profiles

    out = tmp_path_factory.mktemp("gui-query")
    return write_synthetic_profiles(
        out, "q", ((0, 4), (1, 8)), n_steps=3000, n_ipus=2, tiles=32, n_programs=40
    )


@pytest.fixture
def report(qtbot):
    from analyser.gui.reports.query import QueryReport

    yield from shown_report(qtbot, QueryReport(), size=(900, 600))


def _column(report, key):
    m = report.model
    assert key in [m.column_key(c) for c in range(m.columnCount())]
    return m.frame[key].to_numpy()


def test_query_tab_shows_the_result_and_errors(report, profiles):
    from analyser.query import query

    r, _docs = report
    (doc,) = open_documents(report, profiles[0])
    # the example query ran on showing the profile: cycles by IPU and type
    want = query(profiles[0], r.editor.toPlainText())
    assert r.model.rowCount() == len(want) > 0
    np.testing.assert_array_equal(_column(r, "cycles"), want["cycles"].to_numpy())
    r.editor.setPlainText("SELECT a.id, b.id FROM programs a JOIN programs b ON a.id = b.id")
    r.run_query()
    assert r.error is None and r.model.rowCount() == doc.analysis.target.n_programs
    assert [r.model.column_key(c) for c in range(2)] == ["id", "id_2"]
    r.editor.setPlainText("SELECT * FROM read_csv('/etc/passwd')")
    r.run_query()
    assert r.error and "outside the profile" in r.status.text()
    assert r.model.rowCount() == doc.analysis.target.n_programs  # the last result stays


def test_query_tab_in_compare_mode_reads_b(report, profiles):
    r, _docs = report
    open_documents(report, *profiles)
    assert r.which.count() == 2
    r.editor.setPlainText("SELECT count(*) AS n FROM steps")
    r.which.setCurrentIndex(1)
    from profiles import open_profile

    with open_profile(profiles[1]) as p:
        n = p.n_steps
    assert int(r.model.frame["n"][0]) == n
