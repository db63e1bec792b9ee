"""LazyPage: a tab page built on its first visit."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication, QLabel, QTabWidget

from analyser.gui.widgets import LazyPage

pytestmark = pytest.mark.gui


def test_a_lazy_page_is_built_once_when_shown_or_read(qtbot):
    built = []

    def build() -> QLabel:
        built.append(1)
        return QLabel("content")

    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    first, lazy, read = QLabel("first"), LazyPage(build), LazyPage(build)
    tabs.addTab(first, "First")
    tabs.addTab(lazy, "Lazy")
    tabs.addTab(read, "Read")
    tabs.show()
    QApplication.processEvents()
    assert built == [] and not lazy.built() and tabs.currentWidget() is first
    tabs.setCurrentWidget(lazy)  # shown: built, and shown with it
    QApplication.processEvents()
    assert lazy.built() and built == [1] and lazy.content().isVisible()
    assert read.text() == "content" and read.built() and built == [1, 1]  # a read builds it
    for page in (first, lazy, read, lazy):
        tabs.setCurrentWidget(page)
        QApplication.processEvents()
    assert built == [1, 1] and lazy.content() is lazy.content()
    with pytest.raises(AttributeError):
        lazy.no_such_attribute  # noqa: B018
