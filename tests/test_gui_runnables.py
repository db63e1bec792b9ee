"""A QRunnable never owns a QObject. The pool deletes a finished runnable on its own thread; a
QObject it owned (a signals object made on the GUI thread) would die there while the GUI thread
may still be delivering its queued signal: CI once ended in a segmentation fault so. Every
runnable of the GUI sends its results through a signals object its caller owns."""

from __future__ import annotations

import inspect

import pytest
from PySide6.QtCore import QObject, QRunnable

pytestmark = pytest.mark.gui


def _runnable_classes():
    import analyser.gui.background
    import analyser.gui.loader
    import analyser.gui.main_window
    import analyser.gui.reports.insights
    import analyser.gui.widgets

    modules = (
        analyser.gui.background,
        analyser.gui.loader,
        analyser.gui.main_window,
        analyser.gui.reports.insights,
        analyser.gui.widgets,
    )
    found = {
        cls
        for module in modules
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, QRunnable) and cls is not QRunnable
    }
    return sorted(found, key=lambda c: c.__name__)


def _construct(cls, owned: QObject):
    """An instance of ``cls`` with every QObject it takes being ``owned`` (made by the test)."""
    from analyser.gui.loader import make_request

    args = {
        "LoadTask": lambda: cls(make_request(["x.h5"]), owned),
        "PredictTask": lambda: cls(None, [], owned),
        "PoolTask": lambda: cls(lambda: None, 0, owned),
        "PrefetchTask": lambda: cls((), ()),
        "ViewTask": lambda: cls(1, None, owned),
    }
    return args[cls.__name__]()


def test_every_gui_runnable_is_known():
    names = {cls.__name__ for cls in _runnable_classes()}
    assert names == {"LoadTask", "PredictTask", "PoolTask", "PrefetchTask", "ViewTask"}, names


@pytest.mark.parametrize("cls", _runnable_classes(), ids=lambda c: c.__name__)
def test_a_runnable_owns_no_qobject(qtbot, cls):
    from analyser.gui.background import ViewSignals
    from analyser.gui.loader import LoadSignals
    from analyser.gui.reports.insights import PredictSignals
    from analyser.gui.widgets import Relay

    owned_by_caller = {
        "LoadTask": LoadSignals,
        "PredictTask": PredictSignals,
        "PoolTask": Relay,
        "ViewTask": ViewSignals,
    }
    owned = owned_by_caller.get(cls.__name__, QObject)()
    task = _construct(cls, owned)
    qobjects = [v for v in vars(task).values() if isinstance(v, QObject)]
    assert all(q is owned for q in qobjects), (cls.__name__, qobjects)
