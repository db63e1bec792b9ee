"""The common interface of every report shown in the main window's side list.

A report is a QWidget subclass with:

* ``title`` (shown in the side list) and ``key`` (stable id used in settings and tests);
* ``set_document(doc, compare_doc=None)``: show ``doc`` (an :class:`analyser.gui.model.document.Document`
  or ``None`` to clear), side by side with / overlaid on ``compare_doc`` in compare mode;
* ``set_units(units)``: the memory units preference changed (bytes / kB / KiB);
* ``export_image(path)``: save the report's chart (``chart_widget()``) as a PNG / JPG image;
* ``shutdown()``: stop any background work before the window closes.

Every report leaves its empty states to this class: it lays its content out with
:func:`lay_out` (header rows, chart over details) or :meth:`Report.lay_out_with_empty_states` and
:meth:`Report.set_content`, and implements ``show_documents(doc, other)`` (and ``clear()`` when
it holds something to drop); the base ``refresh()`` shows "No profile open." without a document
and, for a report with ``needs_execution``, its ``no_execution_text`` for a profile that never
ran (showing B alone when only B ran), else the content. Most reports also give
``chart_widget()``. Every report declares what it reads (``data_needs``), warmed in the
background on opening. ``set_document`` and ``set_units`` call ``refresh()`` lazily: a report
that is not visible refreshes when it is next shown, so switching documents stays cheap.

Reports never compute numbers themselves, and none imports :mod:`analyser.gui.model.data` (an
import contract): a report declares ``view_builder`` (:mod:`analyser.gui.model.views`) and
implements ``show_view(view)`` instead of ``show_documents``; it reads only the frozen view-model
its builder returns (the builder reads :mod:`analyser.core` through the per-document caches of
``model.data``), which the main window builds on its thread pool and hands over complete
(:meth:`Report.receive_view`); the report paints when it arrives. A report outside a window
(``view_source`` None) builds it in place. No report is exempt: the Program Tree builds a
selected step's per-tile cycles, and the Query each query's answer, as small view-models of
their own on the report's pool thread (none imports :mod:`analyser.query` either).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from PySide6.QtCore import QCoreApplication, QEvent, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter
from PySide6.QtWidgets import (
    QLabel,
    QLayout,
    QMessageBox,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from analyser.core.units import MemoryUnits
from analyser.gui.model.document import Document
from analyser.gui.model.errors import (
    GuiError,
    missing_sentence,
    problem_sentence,
    unavailable_text,
)
from analyser.gui.model.places import Place
from analyser.gui.model.views import ViewBuilder, ViewRequest
from analyser.gui.palette import hex_color
from analyser.gui.theme import chart_colors

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


def lay_out(
    owner: QWidget,
    header: list[QWidget | QLayout],
    upper: QWidget,
    lower: QWidget,
    sizes: tuple[int, int],
) -> None:
    """``owner``'s layout, without margins: the ``header`` rows on top, then ``upper`` over
    ``lower`` in a vertical splitter (initial heights ``sizes``) that takes the rest. For a
    :class:`Report` this is its content, under the base class's empty states."""
    split = QSplitter(Qt.Orientation.Vertical)
    split.addWidget(upper)
    split.addWidget(lower)
    split.setSizes(list(sizes))
    layout = owner.content_column() if isinstance(owner, Report) else QVBoxLayout(owner)
    layout.setContentsMargins(0, 0, 0, 0)
    for row in header:
        if isinstance(row, QLayout):
            layout.addLayout(row)
        else:
            layout.addWidget(row)
    layout.addWidget(split, 1)


#: Pixels around an exported image's title.
EXPORT_MARGIN = 8


def compose_export(title: str, parts: list[QWidget], legend: QWidget | None) -> QImage:
    """An image of ``parts`` (their grabs, one under the other) under ``title``, ``legend``
    below them: Ctrl+E saved the shown widget alone, tab bar and scroll bars included and no
    title or legend to say what it was."""
    grabs = [w.grab() for w in parts if w.isVisible()]
    if legend is not None:
        grabs.append(legend.grab())
    grabs = [g for g in grabs if not g.isNull()]
    if not grabs:
        return QImage()
    font = QFont(parts[0].font())
    font.setPointSizeF(font.pointSizeF() * 1.25)
    font.setBold(True)
    metrics = QFontMetrics(font)
    width = max(g.width() for g in grabs)
    top = metrics.height() + 2 * EXPORT_MARGIN
    image = QImage(width, top + sum(g.height() for g in grabs), QImage.Format.Format_RGB32)
    colors = chart_colors()
    image.fill(QColor(colors.background))
    p = QPainter(image)
    try:
        p.setFont(font)
        p.setPen(QColor(colors.foreground))
        text = metrics.elidedText(title, Qt.TextElideMode.ElideRight, width - 2 * EXPORT_MARGIN)
        p.drawText(EXPORT_MARGIN, EXPORT_MARGIN + metrics.ascent(), text)
        y = top
        for g in grabs:
            p.drawPixmap(0, y, g)
            y += g.height()
    finally:
        p.end()
    return image


class Report(QWidget):
    """Base class of the reports in the registry (:mod:`analyser.gui.reports`)."""

    title: ClassVar[str] = ""
    key: ClassVar[str] = ""
    #: True when the report needs the execution (absent from OOM profiles).
    needs_execution: ClassVar[bool] = False
    #: What the report reads: names of :mod:`analyser.gui.model.data` accessors, computed in the
    #: loader thread before the report is first shown (and for the other reports afterwards).
    data_needs: ClassVar[tuple[str, ...]] = ("target",)
    #: (attribute, property) of a compare-mode part built on first use: the attribute is None
    #: until the property builds it (``prebuild`` builds it while the window is idle)
    compare_part: ClassVar[tuple[str, str] | None] = None
    #: What the report's construction and its compare-mode part cost to build for a comparison,
    #: in plain pyqtgraph plots (pages built on their first visit not counted): the window's idle
    #: build takes the costliest first. A plot is the costliest widget to build (4-6 ms) and
    #: to paint first (about 1.7 ms per axis); an Execution Trace timeline counts two (its
    #: lanes' items, step labels, flows and their pool: 10.9 ms to build against 4.8 ms for a
    #: plain plot, docs/performance.md). A test counts them.
    compare_cost: ClassVar[int] = 0
    #: Datasets the report cannot show anything without (checked when a profile opens and
    #: before filling: membership tests only); a profile lacking one shows the report's
    #: "unavailable" state naming it instead of a blank panel
    requires: ClassVar[tuple[str, ...]] = ()
    #: Builds the report's frozen view-model from the shown documents (any thread; see
    #: :mod:`analyser.gui.model.views`); a report that declares one implements ``show_view``.
    #: Declared as ``staticmethod(build_...)``.
    view_builder: ClassVar[ViewBuilder | None] = None
    #: The report's choices its view-model depends on before any is made (see
    #: :meth:`view_options`; the window's warm-up builds the view-model for these).
    default_view_options: ClassVar[tuple[Any, ...]] = ()
    #: Shown while the view-model is built in the background (``{name}``: A's name).
    building_text: ClassVar[str] = "Reading {name}..."

    #: Ask the window to show a status-bar message.
    statusMessage = Signal(str)
    #: Ask the window to open profiles: (path, compare_path or "").
    openRequested = Signal(str, str)
    #: The report was painted (after its own paint event: what it shows is on screen). Tests
    #: and benchmarks wait for this, or for the ready state it shows, never for a time.
    painted = Signal()

    #: Shown (by the base ``refresh()``) when no profile is open.
    no_document_text: ClassVar[str] = "No profile open."
    #: Shown for a profile without execution when ``needs_execution`` (``{name}``: its name).
    no_execution_text: ClassVar[str] = "{name} has no execution: it does not fit in memory."

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._content: QWidget | None = None
        self.document: Document | None = None
        self.compare_doc: Document | None = None
        self.units: MemoryUnits = MemoryUnits.KIB
        self._dirty = True
        #: set by the main window: called as ``view_source(report, request)`` to build a
        #: view-model off the GUI thread and hand it to :meth:`receive_view`; None: built here
        self.view_source: Callable[[Report, ViewRequest], None] | None = None
        #: the view-model asked for and not yet received (see show_documents)
        self._awaited: ViewRequest | None = None

    # -- interface used by the main window ------------------------------------------------------
    def report_key(self, event) -> bool:
        """A key pressed on the window's side list while this report is shown: True when the
        report used it (the Execution Trace takes its zoom and pan keys, so W or Home after
        choosing the report in the list drive the trace, not the list)."""
        return False

    def show_place(self, place: Place) -> bool:
        """Show ``place``'s item in this report (a tile, a tab, a search); True when the report
        knows it. The base shows the report as it is."""
        return False

    def go_to(self, place: Place | None) -> Report | None:
        """Show ``place`` (another report, or this one) in the main window: the report, filled,
        then its item. Evidence that names a place opens it (a place named in plain text could not be followed)."""
        window = self.window()
        if place is None or not hasattr(window, "show_report"):
            return None
        report = window.show_report(place.report)
        report.ensure_refreshed()
        if place.item and not report.show_place(place):
            self.statusMessage.emit(f"{place.item}: not found in {report.title}")
        return report

    def set_document(self, doc: Document | None, compare_doc: Document | None = None) -> None:
        self.document = doc
        self.compare_doc = compare_doc if doc is not None else None
        self.keep_state = False
        self._mark_dirty()

    #: True while a refresh only restyles (a theme switch): the same documents, so a report
    #: keeps its selection (tiles, step, view range) instead of starting over
    keep_state: bool = False

    def restyle(self) -> None:
        """Redraw with the current theme's colours, keeping what the user selected."""
        if self.document is not None and not self._dirty:
            self.keep_state = True
        self._mark_dirty()

    def set_units(self, units: MemoryUnits) -> None:
        if units != self.units:
            self.units = units
            self._mark_dirty()

    def export_image(self, path: str | Path) -> Path:
        path = Path(path)
        if path.suffix.lower() not in IMAGE_SUFFIXES:
            raise GuiError(
                f"cannot save {path.name}: choose a file name ending in "
                + ", ".join(IMAGE_SUFFIXES)
                + "."
            )
        self.ensure_refreshed()
        image = compose_export(self.export_title(), self.export_parts(), self.export_legend())
        if image.isNull() or not image.save(str(path)):
            raise GuiError(f"could not write the image {path}.")
        return path

    def chart_widget(self) -> QWidget:
        """The widget that ``export_image`` saves (default: the whole report)."""
        return self

    def export_parts(self) -> list[QWidget]:
        """The widgets an exported image shows, top to bottom (default: the chart widget;
        the Execution Trace gives its plots without their scroll bars and the tabs below)."""
        return [self.chart_widget()]

    def export_title(self) -> str:
        """The exported image's title: the report and what it shows."""
        doc, other = self.document, self.compare_doc
        if doc is None:
            return self.title
        shown = f"{doc.name} (A) compared with {other.name} (B)" if other else doc.name
        return f"{self.title}: {shown}"

    def export_legend(self) -> QWidget | None:
        """The report's legend, when the exported parts do not hold it already."""
        legend = getattr(self, "legend", None)
        if not isinstance(legend, QWidget) or not legend.isVisible():
            return None
        inside = any(p is legend or p.isAncestorOf(legend) for p in self.export_parts())
        return None if inside else legend

    def shutdown(self) -> None:
        """Stop background work (default: nothing to stop)."""

    def prebuild(self, compare: bool) -> bool:
        """Build, while the window is idle, the compare-mode part the report builds on first
        use (``compare_part``) when ``compare``; True when it built something, False when
        nothing is left to build."""
        part = self.compare_part
        if compare and part is not None and getattr(self, part[0]) is None:
            getattr(self, part[1])  # the property builds it
            return True
        return False

    # -- empty states ---------------------------------------------------------------------------
    def lay_out_with_empty_states(self) -> None:
        """Make the report a stack of a message panel (the empty states) and, once
        :meth:`set_content` is called, its content."""
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        # a part of the report (a tab, a chart) that could not be shown says so here, above
        # the rest, which keeps working (see run_part)
        self.problem_label = QLabel("")
        self.problem_label.setObjectName("partProblem")
        self.problem_label.setWordWrap(True)
        self.problem_label.setVisible(False)
        self.problem_label.setStyleSheet(f"color: {hex_color('status', 'oom')};")
        outer.addWidget(self.problem_label)
        self.stack = QStackedWidget()
        outer.addWidget(self.stack)
        self.message = MessagePanel(self.no_document_text)
        self.stack.addWidget(self.message)

    def set_content(self, content: QWidget) -> None:
        """Show ``content`` under the empty states (:meth:`lay_out_with_empty_states`)."""
        self.stack.addWidget(content)
        self._content = content

    def content_column(self) -> QVBoxLayout:
        """Lay the report out with its empty states over a content widget, and return the
        content's column layout for the caller to fill."""
        self.lay_out_with_empty_states()
        content = QWidget()
        self.set_content(content)
        return QVBoxLayout(content)

    def show_message(self, text: str) -> None:
        """Show ``text`` instead of the content (after :meth:`clear`)."""
        self.clear()
        self.message.set_text(text)
        self.stack.setCurrentWidget(self.message)

    def clear(self) -> None:
        """Drop what the content shows (an empty state is about to be shown)."""

    def only_compare_has_execution(self, doc: Document, other: Document) -> None:
        """Called before B is shown alone because A never ran (default: nothing)."""

    def show_documents(self, doc: Document, other: Document | None) -> None:
        """Show ``doc`` (compared with ``other``): reports using the base empty states. A report
        with a ``view_builder`` gets its view-model: at once when it is built already (a
        revisit, a theme switch, the warm-up's), else from the window's thread pool, saying
        :attr:`building_text` until it arrives (built here outside a window)."""
        builder = type(self).view_builder
        if builder is None:
            raise NotImplementedError(f"{type(self).__name__} must implement show_documents()")
        request = self.view_request(doc, other)
        self._awaited = None
        if self.view_source is not None and not request.ready():
            self.show_message(self.building_text.format(name=doc.name))
            self._awaited = request
            self.view_source(self, request)
            return
        self.show_view(request.build())

    def view_options(self) -> tuple[Any, ...]:
        """The report's choices its view-model depends on (passed to its builder after the
        units; default :attr:`default_view_options`)."""
        return self.default_view_options

    def view_request(self, doc: Document, other: Document | None) -> ViewRequest:
        """The request for the view-model showing ``doc`` (compared with ``other``) now."""
        builder = type(self).view_builder
        if builder is None:
            raise NotImplementedError(f"{type(self).__name__} has no view_builder")
        return ViewRequest(builder, doc, other, self.units, self.view_options())

    def show_view(self, view: Any) -> None:
        """Show the view-model ``view_builder`` built (reports that declare one)."""
        raise NotImplementedError

    def receive_view(
        self, request: ViewRequest, view: Any = None, error: BaseException | None = None
    ) -> bool:
        """The view-model built for ``request`` (or the error building it met), handed over on
        the GUI thread: shown when it is still the one awaited (not after another document,
        units or theme was asked for meanwhile); True when it was."""
        if not request.same_as(self._awaited):
            return False
        self._awaited = None
        try:
            if error is not None:
                raise error
            if self._content is not None:
                self.stack.setCurrentWidget(self._content)
            self.show_view(view)
        except Exception as exc:
            self.show_unavailable(self.problem_sentence(exc))
        return True

    def await_view(self) -> None:
        """Show the awaited view-model now, waiting for its background build (or building it
        here: :meth:`ViewRequest.build` shares one build per key): for callers that need the
        report filled at once (a link followed, an image exported, ``show_report``)."""
        request = self._awaited
        if request is None:
            return
        try:
            view, error = request.build(), None
        except Exception as exc:
            view, error = None, exc
        self.receive_view(request, view, error)

    @property
    def awaiting_view(self) -> bool:
        """True while the report waits for its view-model (it says :attr:`building_text`)."""
        return self._awaited is not None

    # -- refresh machinery ----------------------------------------------------------------------
    def refresh(self) -> None:
        """The base empty states, then :meth:`show_documents` (reports with their own
        ``refresh`` override this)."""
        if self._content is None:  # pragma: no cover - a report without content overrides it
            raise NotImplementedError(f"{type(self).__name__} must implement refresh()")
        doc, other = self.document, self.compare_doc
        self.show_part_problem("")
        if doc is None:
            self.show_message(self.no_document_text)
            return
        if self.needs_execution:
            if not doc.has_execution and other is not None and other.has_execution:
                # e.g. an OOM original compared with its re-simulated fix: show the fix alone
                self.only_compare_has_execution(doc, other)
                doc, other = other, None
            if not doc.has_execution:
                self.show_message(self.no_execution_text.format(name=doc.name))
                return
        problem = self.missing_text(doc, other)
        if problem:
            self.show_message(unavailable_text(self.title, problem))
            self.message.set_text(unavailable_text(self.title, problem), strong=True)
            return
        self.stack.setCurrentWidget(self._content)
        self.show_documents(doc, other)

    def run_part(
        self,
        title: str,
        fill: Callable[[], Any],
        requires: tuple[str, ...] = (),
        page: QWidget | None = None,
    ) -> bool:
        """Fill one part of the report (a tab, a chart) with ``fill()``; when a shown profile
        lacks one of ``requires`` or ``fill`` raises, the part's "unavailable: <sentence>" line
        shows above the report and over ``page`` (the part's widget, instead of a blank
        panel); the rest keeps working. True when the part filled."""
        overlay = PageMessage.of(page) if page is not None else None
        try:
            problem = self.missing_text(self.document, self.compare_doc, requires)
            if not problem:
                fill()
                if overlay is not None:
                    overlay.set_text("")
                    # the line above the report said another tab was unavailable; that tab
                    # keeps its own message over its page, and this one filled: a line left
                    # there would read as this tab's problem
                    if getattr(self, "_problem_from_page", False):
                        self.show_part_problem("")
                return True
        except Exception as exc:
            problem = self.problem_sentence(exc)
        text = unavailable_text(title, problem)
        self.show_part_problem(text)
        self._problem_from_page = overlay is not None
        if overlay is not None:
            overlay.set_text(text)
        return False

    def show_part_problem(self, text: str) -> None:
        """Show ``text`` (a part unavailable) above the report; '' hides it."""
        label = getattr(self, "problem_label", None)
        if label is not None:
            label.setText(text)
            label.setVisible(bool(text))
        if text:
            self.statusMessage.emit(text)

    def part_problem(self) -> str:
        """The part-unavailable line shown above the report ('' when none)."""
        label = getattr(self, "problem_label", None)
        return label.text() if label is not None and label.isVisibleTo(self) else ""

    def missing_text(
        self,
        doc: Document | None,
        other: Document | None = None,
        requires: tuple[str, ...] | None = None,
    ) -> str:
        """One sentence naming the required datasets (``requires``, default the report's) a
        shown profile lacks, '' when none is missing."""
        requires = self.requires if requires is None else requires
        for d in (doc, other):
            if d is not None and requires and (missing := d.missing(requires)):
                return missing_sentence(d.name, missing)
        return ""

    def show_unavailable(self, sentence: str) -> None:
        """Show the report's own "unavailable: <sentence>" state instead of its content (an
        error while it filled: never a blank or half-filled panel)."""
        try:
            self.show_message(unavailable_text(self.title, sentence))
        except Exception:  # clear() met the same problem: the message panel alone
            self.stack.setCurrentWidget(self.message)
        self.message.set_text(unavailable_text(self.title, sentence), strong=True)
        self.statusMessage.emit(unavailable_text(self.title, sentence))

    def ensure_refreshed(self, wait: bool = True) -> None:
        """Fill the report if it is out of date; with ``wait``, also show a view-model still
        being built in the background (see :meth:`await_view`)."""
        if self._dirty:
            self._dirty = False
            self._awaited = None
            try:
                self.refresh()
                self.keep_state = False
            except Exception as exc:
                self.keep_state = False
                # a profile problem found while reading lazily (a missing or damaged dataset,
                # an inconsistent value): the report says what it is in its own panel (no
                # dialog: the panel is what is on screen); the window and the other reports
                # carry on
                self.show_unavailable(self.problem_sentence(exc))
        if wait:
            self.await_view()

    def problem_sentence(self, exc: BaseException) -> str:
        """One sentence for ``exc`` met while reading the shown profiles."""
        doc = self.document
        return problem_sentence(exc, doc.name if doc is not None else "the profile")

    def say_profile_problem(self, exc: BaseException) -> None:
        """A problem met where the user acted (a click, a selection): a dialog with one
        sentence; the report keeps what it showed and the window carries on."""
        text = self.problem_sentence(exc)
        self.statusMessage.emit(text)
        QMessageBox.warning(self, f"Cannot show the {self.title}", text)

    @property
    def needs_refresh(self) -> bool:
        """True when the report refreshes (fills from its documents) when next shown."""
        return self._dirty

    def _mark_dirty(self) -> None:
        self._dirty = True
        if self.isVisible():
            self.ensure_refreshed(wait=False)

    @property
    def ready(self) -> bool:
        """True when the report shows what it was asked to (filled, its view-model painted)."""
        return not self._dirty and self._awaited is None

    def paintEvent(self, event) -> None:
        super().paintEvent(event)
        self.painted.emit()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.ensure_refreshed(wait=False)
        # every widget shown posted an UpdateLater of its area; a plot's scene flushes the
        # window's pending repaint when its own queued update runs, so interleaved with those
        # the window was painted in several passes: merged into the
        # window's dirty region now, one pass paints the report
        QCoreApplication.sendPostedEvents(None, QEvent.Type.UpdateLater)


class MessagePanel(QWidget):
    """A centred message ("No profile open", "This profile has no execution ...")."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.label = QLabel(text)
        self.label.setWordWrap(True)
        self.label.setObjectName("messagePanel")
        self.label.setStyleSheet(self.MUTED)
        layout.addStretch(1)
        layout.addWidget(self.label)
        layout.addStretch(2)
        from PySide6.QtCore import Qt

        self.label.setAlignment(Qt.AlignmentFlag.AlignCenter)

    #: the label's style: an empty state in the muted colour; a report that cannot be shown
    #: ("unavailable: ...") in the text colour, so it does not read as an empty state
    MUTED = "font-size: 14px; color: palette(mid);"
    STRONG = "font-size: 14px;"

    def set_text(self, text: str, strong: bool = False) -> None:
        self.label.setStyleSheet(self.STRONG if strong else self.MUTED)
        self.label.setText(text)


class PageMessage(QLabel):
    """A message covering a page whose part could not be shown (see :meth:`Report.run_part`):
    the page keeps its widgets, hidden under it, and comes back when the part fills."""

    @classmethod
    def of(cls, page: QWidget) -> PageMessage:
        """The page's message (created hidden on first use)."""
        found = page.findChild(PageMessage, "pageMessage")
        return found if found is not None else cls(page)

    def __init__(self, page: QWidget) -> None:
        super().__init__(page)
        self.setObjectName("pageMessage")
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setAutoFillBackground(True)
        self.setMargin(24)
        self.setStyleSheet("font-size: 14px;")
        self.setVisible(False)
        # the page it covers (its parent: parentWidget() is typed as possibly None)
        self._page = page
        page.installEventFilter(self)

    def set_text(self, text: str) -> None:
        self.setText(text)
        self.setVisible(bool(text))
        if text:
            self.setGeometry(self._page.rect())
            self.raise_()

    def eventFilter(self, obj: object, event: QEvent) -> bool:
        if obj is self._page and event.type() == QEvent.Type.Resize:
            self.setGeometry(self._page.rect())
        return False


def shows_profile_problems(method: Callable[..., Any]) -> Callable[..., Any]:
    """For a report's slots that read the profile (selection details, ...): a problem met there
    is said in one sentence in a dialog (:meth:`Report.say_profile_problem`) instead of escaping
    into Qt's event loop as a traceback."""

    @functools.wraps(method)
    def slot(self: Report, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            self.say_profile_problem(exc)
            return None

    return slot
