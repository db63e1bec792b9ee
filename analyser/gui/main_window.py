"""The Graph Analyser main window: side list of reports, menus, status bar, loading, settings.

The window owns a Qt-free :class:`~analyser.gui.model.document.Workspace` (the open document, the
document compared with, the memory units) and forwards its events to the reports from the
registry (:mod:`analyser.gui.reports`). Profiles are opened on a QThreadPool
(:mod:`analyser.gui.loader`) so the window never freezes; a file that cannot be read gives a
message box with the reader's one-sentence error and the window carries on.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, QSettings, Qt, QThreadPool, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
)
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from analyser.core.units import MemoryUnits
from analyser.gui import help as help_parts
from analyser.gui import reports as registry
from analyser.gui.background import Background
from analyser.gui.items import settle_item_bounds
from analyser.gui.loader import LoadResult, LoadSignals, LoadTask, make_request
from analyser.gui.loading import LoadingPanel
from analyser.gui.model.diff_lane import warm_lane
from analyser.gui.model.document import Document, Workspace
from analyser.gui.report_index import REPORTS, ReportEntry, ReportUnavailable
from analyser.gui.report_stack import ReportStack
from analyser.gui.reports.base import MessagePanel, Report
from analyser.gui.theme import SIDE_LIST, THEMES, apply_theme, current_theme, emphasised
from analyser.gui.widgets import settle_layouts
from profiles.errors import UserFacingError

APP_NAME = "IPU Graph Analyser"
ORGANISATION = "ipu-graph-analyser"
MAX_RECENT = 10
#: What the loader computes per profile, besides the shown report's data, when two profiles
#: open to be compared (see MainWindow._start_load): the Execution Trace's and the Pipeline's,
#: and the Liveness Report's step and variable tables (~30 ms per profile, which its first
#: visit clicked right after the open read on the GUI thread: 150-230 ms, the highest then;
#: its steps aligned by program stay in the background warm-up: seconds for 10^5 steps).
COMPARE_OPEN_NEEDS = (
    "trace_window",
    "pipeline_chart",
    "liveness",
    "liveness_steps",
    "variables",
    "operation_names",
)
PROFILE_FILTER = "IPU profiles (*.h5 *.hdf5 *.pvh5);;All files (*)"


def default_settings() -> QSettings:
    return QSettings(ORGANISATION, "graph-analyser")


class MainWindow(QMainWindow):
    """The application window. ``settings`` defaults to the user's QSettings (tests pass a
    temporary ini file); ``pool`` defaults to a private QThreadPool."""

    #: Emitted on the GUI thread when a load finished (successfully or not).
    loadFinished = Signal(bool)

    def __init__(
        self,
        settings: QSettings | None = None,
        pool: QThreadPool | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings if settings is not None else default_settings()
        self.pool = pool if pool is not None else QThreadPool(self)
        self.workspace = Workspace()
        self.workspace.units = MemoryUnits.parse(
            self.settings.value("units", MemoryUnits.KIB.value), MemoryUnits.KIB
        )
        #: the side list's reports by name and data needs; a report's module is imported when
        #: the report is first shown or built in idle time (see _report_at)
        self._report_classes: tuple[ReportEntry, ...] = REPORTS
        self._reports: dict[int, Report] = {}
        #: rows whose report could not be imported: the panel saying so, shown in its place
        self._failed: dict[int, MessagePanel] = {}
        self._pending_id: int | None = None
        self._tasks: dict[int, LoadTask] = {}
        #: every load's result arrives through this one object, owned here (see LoadSignals)
        self._load_signals = LoadSignals(self)
        self._load_signals.finished.connect(self._on_loaded)
        #: the warm-up and the idle build, held while a report a click showed fills
        self.background = Background(
            self.pool, self._prebuild_next, lambda: self.workspace.document is not None, self
        )
        self.setWindowTitle(APP_NAME)
        self.setAcceptDrops(True)
        self.resize(1400, 880)
        self._build_ui()
        self._build_menus()
        self.workspace.documents_changed.connect(self._on_documents_changed)
        self.workspace.units_changed.connect(self._on_units_changed)
        self.set_theme(str(self.settings.value("theme", "light")))
        self._restore_state()
        self._update_actions()

    # ------------------------------------------------------------------ construction
    def _build_ui(self) -> None:
        self.report_list = QListWidget()
        self.report_list.setObjectName(SIDE_LIST)  # its style sheet: theme.py
        self.report_list.setMinimumWidth(150)
        self.report_list.setMaximumWidth(260)
        self.report_list.installEventFilter(self)
        for cls in self._report_classes:
            item = QListWidgetItem(cls.title)
            item.setData(Qt.ItemDataRole.UserRole, cls.key)
            self.report_list.addItem(item)
        self.stack = ReportStack()
        self.empty_panel = MessagePanel(
            "No profile open.\n\nUse File > Open (Ctrl+O) or drop a profile file here.\n"
            "Drop two files to compare them."
        )
        self.stack.addWidget(self.empty_panel)
        self.title_label = QLabel("")
        self.title_label.setObjectName("reportTitle")
        emphasised(self.title_label, 17)
        self.title_label.setContentsMargins(0, 4, 0, 4)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(10, 6, 10, 6)
        right_layout.addWidget(self.title_label)
        right_layout.addWidget(self.stack, 1)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.report_list)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([190, 1200])
        self.setCentralWidget(self.splitter)
        self.report_list.currentRowChanged.connect(self._show_report_row)

        bar = self.statusBar()
        self.target_label = QLabel("")
        self.file_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)  # busy indicator
        self.progress.setMaximumWidth(160)
        self.progress.setMaximumHeight(14)
        self.progress.setVisible(False)
        bar.addWidget(self.file_label, 1)
        bar.addPermanentWidget(self.target_label)
        bar.addPermanentWidget(self.progress)
        # a temporary message (Saved ..., a link not found, a what-if's outcome) takes the whole
        # line while it shows: beside the permanent target line (long in compare mode) it was
        # cut after a few words
        bar.messageChanged.connect(lambda text: self.target_label.setVisible(not text))
        self.loading = LoadingPanel(self._load_signals, self.progress)  # shown while loading
        self.stack.addWidget(self.loading)

    def _build_menus(self) -> None:
        menu = self.menuBar().addMenu("&File")
        self.act_open = self._action(
            menu, "&Open...", QKeySequence.StandardKey.Open, self.open_dialog
        )
        self.recent_menu = menu.addMenu("Open &Recent")
        self.act_compare = self._action(
            menu, "&Compare with...", QKeySequence("Ctrl+Shift+O"), self.compare_dialog
        )
        self.act_stop_compare = self._action(menu, "Stop comparing", None, self.stop_compare)
        menu.addSeparator()
        self.act_reload = self._action(
            menu, "&Reload", QKeySequence.StandardKey.Refresh, self.reload
        )
        self.act_close = self._action(
            menu, "&Close", QKeySequence.StandardKey.Close, self.close_document
        )
        self.act_save_as = self._action(
            menu, "Save profile &as...", QKeySequence("Ctrl+Shift+S"), self.save_profile_dialog
        )
        menu.addSeparator()
        self.act_export = self._action(
            menu, "&Export chart image...", QKeySequence("Ctrl+E"), self.export_dialog
        )
        menu.addSeparator()
        self._action(menu, "&Quit", QKeySequence.StandardKey.Quit, self.close)
        self._rebuild_recent_menu()

        view = self.menuBar().addMenu("&View")
        theme_menu = view.addMenu("&Theme")
        self.theme_group = QActionGroup(self)
        self.theme_actions: dict[str, QAction] = {}
        for name in THEMES:
            act = QAction(name.capitalize(), self, checkable=True)
            act.triggered.connect(lambda _=False, n=name: self.set_theme(n))
            self.theme_group.addAction(act)
            theme_menu.addAction(act)
            self.theme_actions[name] = act
        units_menu = view.addMenu("Memory &units")
        self.units_group = QActionGroup(self)
        self.units_actions: dict[MemoryUnits, QAction] = {}
        for unit in MemoryUnits:
            act = QAction(unit.value, self, checkable=True)
            act.setChecked(unit == self.workspace.units)
            act.triggered.connect(lambda _=False, u=unit: self.set_units(u))
            self.units_group.addAction(act)
            units_menu.addAction(act)
            self.units_actions[unit] = act
        view.addSeparator()
        self._action(view, "Next report", QKeySequence("Ctrl+PgDown"), lambda: self._step_report(1))
        self._action(
            view, "Previous report", QKeySequence("Ctrl+PgUp"), lambda: self._step_report(-1)
        )

        menus: dict[str, object] = {}
        for menu_title, text, spec in registry.menu_entries():
            target = menus.get(menu_title)
            if target is None:
                target = self.menuBar().addMenu(menu_title)
                menus[menu_title] = target
            # resolved when triggered: a dialog's module is imported when it is first used
            self._action(target, text, None, lambda _=False, s=spec: self._open_contributed(s))

        help_menu = self.menuBar().addMenu("&Help")
        self._action(
            help_menu,
            "&Keyboard and mouse",
            QKeySequence(QKeySequence.StandardKey.HelpContents),
            lambda: help_parts.show_shortcuts(self),
        )
        self.demo_menu = help_menu.addMenu("Open &demo profile")
        for config in help_parts.demo_configs():
            act = self.demo_menu.addAction(config.stem)
            act.triggered.connect(lambda _=False, c=config: help_parts.open_demo(self, c))
        help_menu.addSeparator()
        self._action(help_menu, "&About", None, self._about)

    def eventFilter(self, obj, event) -> bool:
        # the shown report's own keys pressed on the side list go to the report (W / Home on
        # the list after choosing the Execution Trace zoom the trace)
        if obj is self.report_list and event.type() == QEvent.Type.KeyPress:
            report = self.current_report()
            if report is not None and report.report_key(event):
                return True
        return super().eventFilter(obj, event)

    def _open_contributed(self, spec: str) -> None:
        """Run a contributed menu action (``"module:attr"``, called with the window)."""
        opener = registry.resolve(spec)
        if opener is not None:  # None only for a missing module, which menu_entries leaves out
            opener(self)

    def _action(self, menu, text, shortcut, slot) -> QAction:
        act = QAction(text, self)
        if shortcut is not None:
            act.setShortcut(shortcut)
        act.triggered.connect(lambda _=False: slot())
        menu.addAction(act)
        return act

    # ------------------------------------------------------------------ reports
    @property
    def report_keys(self) -> list[str]:
        return [cls.key for cls in self._report_classes]

    def report(self, key: str) -> Report:
        """The report with ``key`` (its module imported and the report created on first use;
        :class:`~analyser.gui.report_index.ReportUnavailable` when it cannot be imported)."""
        return self._report_at(self.report_keys.index(key))

    def loaded_report_keys(self) -> list[str]:
        """The keys of the reports created so far (the others' modules are not imported)."""
        return [self._report_classes[row].key for row in sorted(self._reports)]

    def current_report(self) -> Report | None:
        row = self.report_list.currentRow()
        return self._reports.get(row) if row >= 0 else None

    def show_report(self, key: str) -> Report:
        """Show the report with ``key``, filled (its view-model awaited when still building)."""
        row = self.report_keys.index(key)
        self.report_list.setCurrentRow(row)
        report = self._report_at(row)
        report.await_view()
        return report

    def _report_at(self, row: int) -> Report:
        """The report of ``row``, created (and its module imported) on first use. Raises
        :class:`ReportUnavailable` when its module or class is missing."""
        report = self._reports.get(row)
        if report is None:
            report = self._report_classes[row].load()()
            # its view-model is built on the pool and handed over (Background.build_view)
            report.view_source = self.background.build_view
            report.set_units(self.workspace.units)
            report.set_document(self.workspace.document, self.workspace.compare)
            report.statusMessage.connect(lambda text: self.statusBar().showMessage(text, 5000))
            report.openRequested.connect(self._on_open_requested)
            if hasattr(report, "applyTipRequested"):
                report.applyTipRequested.connect(self._on_apply_tip)
            if hasattr(report, "set_settings"):  # choices a report remembers (columns shown)
                report.set_settings(self.settings)
            self._reports[row] = report
            self.stack.addWidget(report)
        return report

    def _prebuild_next(self) -> str | None:
        """Build one report not shown yet (or the compare-mode parts of one, when comparing),
        then wait for the next tick: a report's widgets and pyqtgraph plots cost 10-75 ms, which
        a first visit then no longer pays. Reports are built hidden and refresh when
        first shown, so what they show is the same."""

        doc, cmp = self.workspace.document, self.workspace.compare
        if doc is None:
            return None
        for row in self._prebuild_order(cmp is not None):
            if row in self._failed:
                continue
            report = self._reports.get(row)
            if report is None:
                try:
                    self._report_at(row)
                except ReportUnavailable as exc:
                    # said in a message box when the report is shown, not in idle time
                    self._failed_panel(row, str(exc))
            elif not report.prebuild(cmp is not None):
                continue
            return self._report_classes[row].key
        return None

    def _prebuild_order(self, compare: bool) -> list[int]:
        """The rows in the order the idle build takes them: the side list's, except that when
        comparing, the costliest to build for it come first (``compare_cost``, in plain plots:
        the Execution Trace five, its timelines counting two each, the Pipeline four, the
        Memory Report three). Theirs are the costliest first visits to build: a compare-mode
        Execution Trace's two timelines, differences lane and panels are 50-65 ms of the idle
        build's 220-290 ms. In side-list order the idle build reached the Trace about 0.6 s
        after the open, so a click on it at +0.35 s built it all (186-206 ms
        measured there, the worst cell)."""
        rows = range(len(self._report_classes))
        if not compare:
            return list(rows)
        return sorted(rows, key=lambda r: -self._report_classes[r].compare_cost)

    @property
    def prebuild_steps(self) -> list[tuple[str, float]]:
        """Seconds each step of the idle build took, by report key (bench_gui.py prints them)."""
        return self.background.steps

    def prebuild_pending(self) -> bool:
        """True while reports are still being built in the window's idle time (or that build
        is held while a report a click showed fills and paints)."""
        return self.background.pending()

    def _show_report_row(self, row: int) -> None:
        if row < 0 or row >= len(self._report_classes):
            return
        if self.workspace.document is None:
            self.stack.setCurrentWidget(self.loading if self.is_loading() else self.empty_panel)
            self.title_label.setText(self._report_classes[row].title)
            return
        built = row in self._reports
        if not built and not self._show_unavailable(row):
            return
        if not built:
            # the warm-up waits from here, not from the fill: the report's construction (its
            # widgets and plots, 35-70 ms) ran beside warm-up steps started meanwhile, sharing
            # the interpreter lock and, with the other core busy, the one core left (
            # 126 ms of warm-up steps seen inside a Pipeline first visit clicked
            # 0.35 s after a compare open)
            self.background.pause()
        report = self._report_at(row)
        if not built and self.workspace.compare is not None:
            # its compare-mode parts too, while it is hidden: laid out at its first show, not
            # again by its fill (the Execution Trace's timelines were resized four more times)
            while report.prebuild(True):
                pass
        hold = report.needs_refresh and report is not self.stack.currentWidget()
        if hold:
            self.background.hold_until_painted(report)
        elif not built and self.background.awaiting_paint is None:
            self.background.resume()
        self.stack.setCurrentWidget(report)  # fills the report if it was not yet
        if not hold:
            # the next idle build step waits for the report shown to be painted
            self.background.defer_build()
        self.title_label.setText(self._title_text(report))
        if hold:
            # the fill's layout requests (texts, titles, table rows) before the first paint,
            # not after it: else the report is painted again at its final geometry
            settle_layouts()
            settle_item_bounds(report)
        self.settings.setValue("report", report.key)

    def _failed_panel(self, row: int, message: str) -> MessagePanel:
        panel = self._failed.get(row)
        if panel is None:
            panel = MessagePanel()
            panel.set_text(message, strong=True)
            self._failed[row] = panel
            self.stack.addWidget(panel)
        return panel

    def _show_unavailable(self, row: int) -> bool:
        """Import the report of ``row`` for its first show: True when it can be built; else
        its panel says why in its place and a message box names the report (a report listed
        in the index whose module is missing is a broken installation, never skipped)."""
        entry = self._report_classes[row]
        if row not in self._failed:
            try:
                entry.load()
                return True
            except ReportUnavailable as exc:
                self._failed_panel(row, str(exc))
        panel = self._failed[row]
        self.stack.setCurrentWidget(panel)
        self.title_label.setText(entry.title)
        QMessageBox.critical(self, "Cannot show the report", panel.label.text())
        return False

    def _title_text(self, report: Report) -> str:
        doc, cmp = self.workspace.document, self.workspace.compare
        if doc is None:
            return report.title
        if cmp is not None:
            return f"{report.title}: {doc.name} (A) compared with {cmp.name} (B)"
        return f"{report.title}: {doc.name}"

    def _step_report(self, delta: int) -> None:
        n = self.report_list.count()
        if n:
            self.report_list.setCurrentRow((self.report_list.currentRow() + delta) % n)

    # ------------------------------------------------------------------ opening and closing
    def open_files(self, paths: Sequence[str | Path]) -> None:
        """Open one profile, or two to compare (A = first, B = second), in the background."""
        paths = [Path(p) for p in paths][:2]
        if not paths:
            return
        self._start_load(paths)

    def open_compare(self, path_a: str | Path, path_b: str | Path) -> None:
        self._start_load([Path(path_a), Path(path_b)])

    def compare_with(self, path: str | Path) -> None:
        """Compare the open document (A) with ``path`` (B)."""
        doc = self.workspace.document
        if doc is None:
            self.open_files([path])
        else:
            self._start_load([Path(path)], keep_document=True)

    def reload(self) -> None:
        doc, cmp = self.workspace.document, self.workspace.compare
        if doc is None:
            return
        paths = [doc.path] + ([cmp.path] if cmp is not None else [])
        self._start_load(paths)

    def close_document(self) -> None:
        self._pending_id = None
        self.loading.stop()
        self.workspace.close()

    def stop_compare(self) -> None:
        if self.workspace.compare is not None:
            self.workspace.set_compare(None)

    def is_loading(self) -> bool:
        return self._pending_id is not None

    def _start_load(self, paths: list[Path], keep_document: bool = False) -> None:
        from analyser.gui.model import data

        row = self.report_list.currentRow()
        needs = (
            self._report_classes[row].data_needs
            if 0 <= row < len(self._report_classes)
            else ("target",)
        )
        if len(paths) == 2 or keep_document:
            # compare mode: the Execution Trace's and the Pipeline's data per profile (their
            # level-of-detail windows and the pipeline chart, ~90 ms of CPU per profile) come
            # with the open, so that these reports clicked right after it only build and
            # paint (they read them on the GUI thread, 80-200 ms)
            needs = tuple(dict.fromkeys((*needs, *COMPARE_OPEN_NEEDS)))

        def warm_pair(a: Document, b: Document) -> None:
            # the explanations of a compared pair (the Summary's: it opens on them) and the
            # Execution Trace's differences lane (aligned steps, ~0.1 s of CPU: beside a fill
            # clicked right after the open it slowed it, and came after its first paint)
            data.comparison(a, b)
            warm_lane(a, b)

        request = make_request(
            paths,
            warm=lambda doc, step: data.warm(doc, needs, step),
            steps=len(needs),
            warm_pair=warm_pair,
        )
        task = LoadTask(request, self._load_signals)
        self._pending_id = request.request_id
        self._keep_document = keep_document
        self._tasks[request.request_id] = task
        self.progress.setVisible(True)
        self.loading.start(request.request_id, paths)
        if self.workspace.document is None:  # not "No profile open" while one opens
            self.stack.setCurrentWidget(self.loading)
        self.file_label.setText("Opening " + ", ".join(p.name for p in paths) + "...")
        self.pool.start(task)

    def current_report_key(self) -> str | None:
        row = self.report_list.currentRow()
        if 0 <= row < len(self._report_classes):
            return self._report_classes[row].key
        return None

    def _on_loaded(self, result: LoadResult) -> None:
        self._tasks.pop(result.request.request_id, None)
        if result.request.request_id != self._pending_id:
            for doc in result.documents:  # stale: a newer load (or a close) superseded it
                doc.close()
            return
        self._pending_id = None
        self.progress.setVisible(False)
        self.loading.stop()
        if result.error:
            self._update_status()
            self._show_report_row(self.report_list.currentRow())  # no longer "Opening..."
            self._drop_recent(result.request.paths)  # Open Recent lists what opens
            self._show_error(result.error)
            self.loadFinished.emit(False)
            return
        docs = result.documents
        if getattr(self, "_keep_document", False) and self.workspace.document is not None:
            self.workspace.set_documents(self.workspace.document, docs[0])
        else:
            self.workspace.set_documents(docs[0], docs[1] if len(docs) > 1 else None)
        for doc in docs:
            self._add_recent(doc.path)
        if result.warnings:  # kept on the status line until another message replaces it
            self.statusBar().showMessage("  ".join(result.warnings))
        self._prefetch(docs)
        self.loadFinished.emit(True)

    def _prefetch(self, docs) -> None:
        """Compute what the other reports need in the background, so first visits are fast."""

        ws = self.workspace
        pair = (ws.document, ws.compare) if ws.document is not None and ws.compare else None
        # each report's view-model request, made on the warm-up's thread: a report's
        # view-model module (and pandas behind several) is imported there, after the shown
        # report's first paint, not here before it
        views = [
            None
            if entry.view_builder is None or ws.document is None
            else partial(entry.view_request, ws.document, ws.compare, ws.units)
            for entry in self._report_classes
        ]
        needs = [cls.data_needs for cls in self._report_classes]
        self.background.prefetch(docs, needs, pair, views)

    def _show_error(self, message: str) -> None:
        QMessageBox.critical(self, "Cannot open profile", message)

    def _on_open_requested(self, path: str, compare_path: str) -> None:
        if compare_path:
            self.open_compare(path, compare_path)
        else:
            self.open_files([path])

    def _on_apply_tip(self, insight: object) -> None:
        handler = registry.apply_tip_handler()
        if handler is None or self.workspace.document is None:
            self.statusBar().showMessage("Applying a tip is not available in this build.", 5000)
            return
        try:
            handler(self, self.workspace.document, insight)
        except UserFacingError as exc:
            QMessageBox.warning(self, "Cannot apply the tip", str(exc))

    # ------------------------------------------------------------------ workspace events
    def _on_documents_changed(self, document: Document | None, compare: Document | None) -> None:
        for report in self._reports.values():
            report.set_document(document, compare)
        self._mark_unavailable_reports(document, compare)
        self._update_status()
        self._update_actions()
        row = self.report_list.currentRow()
        if row < 0 and self.report_list.count():
            self.report_list.setCurrentRow(0)
        else:
            self._show_report_row(row)
        if document is not None:
            self.background.start_build()  # after the shown report's first paint

    def _mark_unavailable_reports(
        self, document: Document | None, compare: Document | None
    ) -> None:
        """Say in the side list which reports a profile lacks the datasets for (checked when
        it opens: membership tests only); they still open, on their "unavailable" state."""
        from analyser.gui.model.errors import missing_sentence

        for row, cls in enumerate(self._report_classes):
            item = self.report_list.item(row)
            tip = ""
            for doc in (document, compare):
                if doc is None or not cls.requires:
                    continue
                missing = doc.missing(cls.requires)
                if missing and not tip:
                    tip = f"{cls.title} unavailable: {missing_sentence(doc.name, missing)}"
            item.setToolTip(tip)
            item.setForeground(
                self.report_list.palette().brush(
                    self.report_list.palette().ColorGroup.Disabled
                    if tip
                    else self.report_list.palette().ColorGroup.Active,
                    self.report_list.palette().ColorRole.Text,
                )
            )

    def _on_units_changed(self, units: MemoryUnits) -> None:
        for report in self._reports.values():
            report.set_units(units)
        for unit, act in self.units_actions.items():
            act.setChecked(unit == units)

    def set_units(self, units: MemoryUnits | str) -> None:
        units = MemoryUnits.parse(units)
        self.settings.setValue("units", units.value)
        self.workspace.set_units(units)

    def set_theme(self, name: str) -> None:
        if name not in THEMES:
            name = "light"
        changed = name != current_theme()
        apply_theme(name, self)
        self.settings.setValue("theme", name)
        # the side list greys the reports a profile lacks data for in the palette's colours
        self._mark_unavailable_reports(self.workspace.document, self.workspace.compare)
        if changed:
            # chart items keep the colours they were drawn with: redraw the reports (the shown
            # one now, the others when next shown)
            for report in self._reports.values():
                report.restyle()  # the selections (tiles, step, range) are kept
        if name in getattr(self, "theme_actions", {}):
            self.theme_actions[name].setChecked(True)

    def _update_status(self) -> None:
        from analyser.gui.model import data

        doc, cmp = self.workspace.document, self.workspace.compare
        if doc is None:
            self.file_label.setText("")
            self.target_label.setText("")
            self.setWindowTitle(APP_NAME)
            return
        files = str(doc.path) + (f"  vs  {cmp.path}" if cmp is not None else "")
        self.file_label.setText(files)
        line = data.target_line(doc)
        if cmp is not None:
            # both outcomes: A out of memory compared with a B that fits is the usual case
            status_b = data.target_line(cmp).rsplit("|", 1)[-1].strip()
            line = line.replace("|  ", "|  A: ", 1) + f"  ·  B: {status_b}"
        self.target_label.setText(line)
        self.setWindowTitle(f"{doc.name} - {APP_NAME}")

    def _update_actions(self) -> None:
        has_doc = self.workspace.document is not None
        for act in (
            self.act_compare,
            self.act_reload,
            self.act_close,
            self.act_export,
            self.act_save_as,
        ):
            act.setEnabled(has_doc)
        self.act_stop_compare.setEnabled(self.workspace.compare is not None)

    # ------------------------------------------------------------------ dialogs
    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open profile", self._last_dir(), PROFILE_FILTER
        )
        if path:
            self.open_files([path])

    def compare_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Compare with profile", self._last_dir(), PROFILE_FILTER
        )
        if path:
            self.compare_with(path)

    def saved_document(self) -> Document | None:
        """What File > Save profile as... saves: B when comparing (a what-if or engine run's
        result, kept in the cache), else the open profile."""
        ws = self.workspace
        return ws.compare if ws.compare is not None else ws.document

    def save_profile_dialog(self) -> None:
        doc = self.saved_document()
        if doc is None:
            return
        default = str(Path(self._last_dir()) / doc.name)
        path, _ = QFileDialog.getSaveFileName(self, f"Save {doc.name} as", default, PROFILE_FILTER)
        if path:
            self.save_profile_as(path)

    def save_profile_as(self, path: str | Path) -> Path | None:
        """Copy the profile File > Save profile as... names to ``path`` (never over a profile
        or over the source; written under a temporary name, then renamed)."""
        import shutil

        from analyser.output import atomic_output, check_output

        doc = self.saved_document()
        if doc is None:
            return None
        try:
            out = check_output(path, inputs=[str(doc.path)])
            with open(doc.path, "rb") as src, atomic_output(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except UserFacingError as exc:
            QMessageBox.warning(self, "Cannot save the profile", str(exc))
            return None
        except OSError as exc:
            QMessageBox.warning(
                self, "Cannot save the profile", f"cannot read {doc.path}: {exc.strerror or exc}."
            )
            return None
        self.statusBar().showMessage(f"Saved {out}", 5000)
        return Path(out)

    def export_dialog(self) -> None:
        report = self.current_report()
        if report is None or self.workspace.document is None:
            return
        default = str(Path(self._last_dir()) / f"{report.key}.png")
        path, _ = QFileDialog.getSaveFileName(
            self, "Export chart image", default, "PNG image (*.png);;JPEG image (*.jpg)"
        )
        if not path:
            return
        try:
            report.export_image(path)
            self.statusBar().showMessage(f"Saved {path}", 5000)
        except UserFacingError as exc:
            QMessageBox.warning(self, "Cannot export the image", str(exc))

    def _about(self) -> None:
        QMessageBox.about(
            self,
            APP_NAME,
            f"{APP_NAME}\n\nReads IPU profiles written by the embedded execution engine.",
        )

    def _last_dir(self) -> str:
        recent = self.recent_files()
        return str(Path(recent[0]).parent) if recent else str(Path.cwd())

    # ------------------------------------------------------------------ recent files
    def recent_files(self) -> list[str]:
        value = self.settings.value("recent", [])
        if isinstance(value, str):
            value = [value]
        elif not isinstance(value, list):  # nothing stored yet (None)
            value = []
        from analyser.gui.whatif import in_cache_results

        # results in the cache listed by an earlier version are left out too
        return [str(v) for v in value if not in_cache_results(str(v))]

    def _add_recent(self, path: Path) -> None:
        from analyser.gui.whatif import in_cache_results

        if in_cache_results(path):
            return  # a what-if or engine result in the cache: Save profile as... keeps one
        text = str(Path(path).resolve())
        recent = [p for p in self.recent_files() if p != text]
        recent.insert(0, text)
        self.settings.setValue("recent", recent[:MAX_RECENT])
        self._rebuild_recent_menu()

    def _drop_recent(self, paths) -> None:
        """Remove ``paths`` that failed to open from the recent files."""
        gone = set()
        for p in paths:
            try:
                gone.add(str(Path(p).resolve()))
            except (OSError, RuntimeError):
                gone.add(str(p))
        recent = self.recent_files()
        kept = [p for p in recent if p not in gone]
        if len(kept) != len(recent):
            self.settings.setValue("recent", kept)
            self._rebuild_recent_menu()

    def _rebuild_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = self.recent_files()
        for path in recent:
            act = self.recent_menu.addAction(path)
            act.triggered.connect(lambda _=False, p=path: self.open_files([p]))
        if recent:
            self.recent_menu.addSeparator()
            clear = self.recent_menu.addAction("Clear recent")
            clear.triggered.connect(self._clear_recent)
        self.recent_menu.setEnabled(bool(recent))

    def _clear_recent(self) -> None:
        self.settings.setValue("recent", [])
        self._rebuild_recent_menu()

    # ------------------------------------------------------------------ drag and drop
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.open_files(paths)

    # ------------------------------------------------------------------ state
    def _restore_state(self) -> None:
        geometry = self.settings.value("geometry")
        if isinstance(geometry, QByteArray | bytes):
            self.restoreGeometry(QByteArray(geometry))
        splitter = self.settings.value("splitter")
        if isinstance(splitter, QByteArray | bytes):
            self.splitter.restoreState(QByteArray(splitter))
        key = self.settings.value("report", "")
        row = self.report_keys.index(key) if key in self.report_keys else 0
        if self.report_list.count():
            QTimer.singleShot(0, lambda: self._select_initial(row))
            self.report_list.blockSignals(True)
            self.report_list.setCurrentRow(row)
            self.report_list.blockSignals(False)
            self.title_label.setText(self._report_classes[row].title)

    def _select_initial(self, row: int) -> None:
        if self.report_list.currentRow() == row:
            self._show_report_row(row)

    def save_state(self) -> None:
        self.settings.setValue("geometry", self.saveGeometry())
        self.settings.setValue("splitter", self.splitter.saveState())
        self.settings.sync()

    def shutdown(self) -> None:
        """Stop background work: drop pending loads, wait for workers, close documents."""
        self._pending_id = None
        self.loading.stop()
        self.background.stop()
        for report in self._reports.values():
            try:
                report.shutdown()
            except Exception as exc:  # one report's failure must not skip the others' or
                # escape closeEvent (PySide then crashed printing it: a segmentation fault)
                import sys

                print(f"{report.title}: shutdown failed: {exc}", file=sys.stderr)
        self.pool.waitForDone(10000)
        self.workspace.close()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_state()
        self.shutdown()
        super().closeEvent(event)
