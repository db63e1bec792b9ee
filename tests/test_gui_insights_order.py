"""The Insights list puts a critical above a warning (severity first, the
predicted gain within a severity, as ``analyse insights`` does), shows the gain in its own
column and says the order in a sentence; Tab from outside lands on the list."""

from __future__ import annotations

import itertools

import pytest
from gui_helpers import open_documents, shown_report

pytestmark = pytest.mark.gui

SEVERITY = {"critical": 0, "warning": 1, "info": 2}


@pytest.fixture
def report(qtbot):
    from analyser.gui.reports.insights import InsightsReport

    yield from shown_report(qtbot, InsightsReport(), before_close=lambda r: r.shutdown())


def test_list_reads_critical_first_with_gain_and_order_sentence(
    qtbot, report, walkthrough_profiles
):
    from analyser.core.insights import ORDER
    from analyser.core.insights.model import benefit
    from analyser.core.units import fmt_pct
    from analyser.gui.model import data

    r, _docs = report
    (doc,) = open_documents(report, walkthrough_profiles["2-half"])
    tips = data.insights(doc)
    # the walkthrough's step 2 has a critical (the host) and warnings: the case of the issue
    assert {"critical", "warning"} <= {t.severity for t in tips}
    rows = [r.list.topLevelItem(i) for i in range(r.list.topLevelItemCount())]
    shown = [SEVERITY[item.text(0)] for item in rows]
    assert shown == sorted(shown)  # no warning above a critical
    gain_col = r.list.columnCount() - 1
    assert r.list.headerItem().text(gain_col) == "Gain"
    for item, tip in zip(rows, tips, strict=True):
        assert item.text(1) == tip.title
        assert item.text(gain_col) == fmt_pct(benefit(tip))
    # within a severity, the larger gain first
    for a, b in itertools.pairwise(tips):
        if a.severity == b.severity and a.category == b.category:
            assert benefit(a) >= benefit(b)
    assert r.order_label.text() == ORDER["fits"]


def test_tab_reaches_the_insight_list_first(qtbot, report, walkthrough_profiles):
    """Seen in a real X server: Tab into the report went to the histogram, which takes no key,
    so Down did nothing."""
    from PySide6.QtCore import Qt

    r, _docs = report
    open_documents(report, walkthrough_profiles["2-half"])
    first = r.nextInFocusChain()
    while first is not r and not (
        (first.focusPolicy() & Qt.FocusPolicy.TabFocus) == Qt.FocusPolicy.TabFocus
        and first.isVisibleTo(r)
    ):
        first = first.nextInFocusChain()
    assert first is r.list
    assert r.plot.focusPolicy() == Qt.FocusPolicy.NoFocus


def test_memory_tips_of_an_oom_profile_show_no_gain(qtbot, report, walkthrough_profiles):
    """Seen in the README's screenshot: the memory tips of the out-of-memory step 1 read
    "0.0%" (they save memory, not time) above throughput tips with a gain."""
    r, _docs = report
    open_documents(report, walkthrough_profiles["1-base"])
    gain_col = r.list.columnCount() - 1
    rows = [r.list.topLevelItem(i) for i in range(r.list.topLevelItemCount())]
    memory = [item for item in rows if item.text(2) == "memory"]
    assert memory and all(item.text(gain_col) == "" for item in memory)
    assert all("memory tip" in item.toolTip(gain_col) for item in memory)
