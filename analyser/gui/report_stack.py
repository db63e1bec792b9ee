"""The main window's stack of reports, each in its own scroll area.

A QStackedWidget's minimum size is the largest of its pages' minimum sizes: the Memory
Report's controls (1,068 px) and, in compare mode, its two charts and detail tabs (667 px)
made the window at least 1,242 x 782, wider and taller than a 1,366 x 768 laptop's screen, and
every other report inherited it. Here each report sits in a scroll area that costs nothing while
the window is larger than the report's minimum and scrolls it when the window is smaller, so
the window shrinks to the screen, as a browser's window does with a wide page."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt, QTimer
from PySide6.QtWidgets import QFrame, QScrollArea, QStackedWidget, QWidget


class _PageScroll(QScrollArea):
    """A report's scroll area: invisible (no frame) and keyless (keys the report leaves go on
    to the window, as they did before: the scroll area would take arrows and page keys). The
    report gets the whole viewport, or its minimum size where that is larger (Qt's resizable
    scroll area gave a report with wrapped labels its preferred height, taller than the
    screen: the Execution Trace's B timeline was pushed below it)."""

    def __init__(self, page: QWidget) -> None:
        super().__init__()
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidgetResizable(False)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setWidget(page)
        page.installEventFilter(self)

    def fit_page(self) -> None:
        """The report at the viewport's size, at least at its minimum size."""
        page = self.widget()
        if page is None:
            return
        room = self.maximumViewportSize()
        least = page.minimumSizeHint().expandedTo(page.minimumSize())
        width = max(room.width(), least.width())
        height = room.height()
        if width > room.width():  # a horizontal scroll bar takes some of the height
            height -= self.horizontalScrollBar().sizeHint().height()
        if least.height() > height:  # and a vertical one some of the width
            height = least.height()
            if width == room.width():
                width = max(
                    least.width(), room.width() - self.verticalScrollBar().sizeHint().width()
                )
        if page.size() != QSize(width, height):
            page.resize(width, height)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.fit_page()

    def eventFilter(self, obj, event) -> bool:
        if obj is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            QTimer.singleShot(0, self, self.fit_page)  # once the layout has its new minimum
        return False

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
