"""The main window's stack of reports, each in its own scroll area.

A QStackedWidget's minimum size is the largest of its pages' minimum sizes: the Memory
Report's controls (1,068 px) and, in compare mode, its two charts and detail tabs (667 px)
made the window at least 1,242 x 782, wider and taller than a 1,366 x 768 laptop's screen, and
every other report inherited it. Here each report sits in a scroll area that costs nothing while
the window is larger than the report's minimum and scrolls it when the window is smaller, so
the window shrinks to the screen, as a browser's window does with a wide page."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QStackedWidget, QWidget


class _PageScroll(QScrollArea):
    """A report's scroll area: invisible (no frame) and keyless (keys the report leaves go on
    to the window, as they did before: the scroll area would take arrows and page keys)."""

    def __init__(self, page: QWidget) -> None:
        super().__init__()
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidgetResizable(True)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setWidget(page)

    def keyPressEvent(self, event) -> None:
        event.ignore()


class ReportStack(QStackedWidget):
    """A stacked widget of pages, each wrapped in a scroll area; :meth:`currentWidget`,
    :meth:`setCurrentWidget` and :meth:`indexOf` take and give the pages themselves."""

    def addWidget(self, page: QWidget) -> int:
        return super().addWidget(_PageScroll(page))

    def page(self, index: int) -> QWidget | None:
        scroll = super().widget(index)
        return scroll.widget() if isinstance(scroll, _PageScroll) else scroll

    def currentWidget(self) -> QWidget | None:
        return self.page(self.currentIndex())

    def indexOf(self, page: QWidget) -> int:
        for i in range(self.count()):
            if self.page(i) is page:
                return i
        return -1

    def setCurrentWidget(self, page: QWidget) -> None:
        self.setCurrentIndex(self.indexOf(page))

    def scroll_area(self, page: QWidget) -> QScrollArea | None:
        """The scroll area around ``page`` (None when it is not in the stack)."""
        i = self.indexOf(page)
        scroll = super().widget(i) if i >= 0 else None
        return scroll if isinstance(scroll, QScrollArea) else None
