"""tests/gui_helpers.wait_until_idle: it returns once nothing is left to deliver on the GUI
thread, however long the chain of events that were waiting (pytest-qt, offscreen)."""

from __future__ import annotations

import pytest
from gui_helpers import wait_until_idle

pytestmark = pytest.mark.gui


def test_wait_until_idle_runs_a_chain_of_posted_events_and_zero_timers(qtbot):
    """A chain of 50 posted events, each posting the next, then a zero-interval single-shot
    and a zero-interval QTimer started by the last: all ran when the wait returns (the GLib
    dispatcher's aboutToBlock, counted three times, ran three of them)."""
    from PySide6.QtCore import QCoreApplication, QEvent, QObject, QTimer

    ran: list[str] = []
    timer = QTimer()
    timer.setSingleShot(True)
    timer.setInterval(0)
    timer.timeout.connect(lambda: ran.append("timer"))

    class Chain(QObject):
        def event(self, event) -> bool:
            if event.type() != QEvent.Type.User:
                return super().event(event)
            ran.append("event")
            if ran.count("event") < 50:
                QCoreApplication.postEvent(self, QEvent(QEvent.Type.User))
            else:
                QTimer.singleShot(0, lambda: ran.append("single shot"))
                timer.start()
            return True

    chain = Chain()
    QCoreApplication.postEvent(chain, QEvent(QEvent.Type.User))
    wait_until_idle(qtbot)
    assert ran.count("event") == 50 and ran[50:] in (
        ["single shot", "timer"],
        ["timer", "single shot"],
    )
    assert not timer.isActive()
    wait_until_idle(qtbot)  # idle already: returns
