"""Query: SQL over the open profile (the same sandboxed DuckDB query as ``analyse query``), the
result as a sortable table, exported as CSV. A list of the tables (each with what it holds)
beside the editor; a double-click writes a table's name into the query. In compare mode a
choice of profile A, B or both (every table then gains a ``profile`` column, and ``runs`` has a
row per profile).

The report paints two view-models (:mod:`analyser.gui.model.query_view`) and reads no
document: what the open profiles offer a query (built off the GUI thread when they are shown),
and each query's answer, built by ``run_query`` on the report's pool thread when asked (Run or
Ctrl+Return; a GROUP BY over 10,000,000 steps takes about a second) and painted when it
arrives: its table, or the one sentence saying why there is none, under the editor. The query
runs in a process of its own under a memory bound; Stop ends that process, and a new query
stops the one still running. The last result stays until the next one succeeds."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt, QThreadPool, Signal
from PySide6.QtGui import QFontDatabase, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from analyser.gui.model.errors import problem_sentence
from analyser.gui.model.query_view import (
    EXAMPLE,
    TABLE_DOCS,
    QueryResult,
    QuerySource,
    QueryView,
    build_query_view,
    run_query,
)
from analyser.gui.reports.base import Report
from analyser.gui.table_view import TextTableView
from analyser.gui.widgets import DataFrameModel, PoolTask, Relay, connect_header_sort
from profiles.errors import UserFacingError

#: The widest a result column is made to fit its values (a longer text stays cut).
MAX_COLUMN_PX = 420


class QueryReport(Report):
    """SQL over the profile's tables, the result as a table."""

    title = "Query"
    key = "query"
    data_needs = ("target",)
    view_builder = staticmethod(build_query_view)

    #: A query's answer (its table or its sentence) was painted, or its stop shown.
    resultShown = Signal()
    #: The running query's process started (its id): the query runs there until it answers
    #: or is stopped.
    queryStarted = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = self.content_column()
        self.editor = QPlainTextEdit()
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setPlainText(EXAMPLE)
        self.editor.setToolTip(
            "One SELECT over the tables: "
            + "; ".join(f"{n} ({doc})" for n, doc in TABLE_DOCS)
            + ". Ctrl+Return runs it."
        )
        row = QHBoxLayout()
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Run the query (Ctrl+Return)")
        self.run_button.clicked.connect(self.run_query)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the running query")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop_query)
        self.which = QComboBox()
        self.which.setToolTip("The profile the query reads (compare mode)")
        # the whole profile name (it was cut to "A: 4-dev" in a real X server)
        self.which.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.which.currentIndexChanged.connect(lambda _i: self.run_query())
        self.export_button = QPushButton("Export CSV…")
        self.export_button.setToolTip("Write the whole result (every row) to a CSV file")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self.export_dialog)
        #: the last query's answer that had a table (the table shows its first rows)
        self.result: QueryResult | None = None
        #: the view-model shown (the profiles a query may read)
        self.view_model: QueryView | None = None
        self.table_list = QListWidget()
        self.table_list.setToolTip("The tables a query can read; double-click to insert a name")
        for name, doc in TABLE_DOCS:
            item = QListWidgetItem(name)
            item.setToolTip(doc)
            self.table_list.addItem(item)
        self.table_list.itemDoubleClicked.connect(
            lambda item: self.editor.insertPlainText(item.text())
        )
        self.table_list.setMaximumWidth(
            self.table_list.sizeHintForColumn(0) + 2 * self.table_list.frameWidth() + 24
        )
        self.status = QLabel("Tables: " + ", ".join(n for n, _doc in TABLE_DOCS) + ".")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        row.addWidget(self.run_button)
        row.addWidget(self.stop_button)
        row.addWidget(self.which)
        row.addWidget(self.export_button)
        row.addWidget(self.status, 1)
        self.model = DataFrameModel()
        self.view = TextTableView()
        self.view.setModel(self.model)
        self.view.setSortingEnabled(False)
        connect_header_sort(self.view, self.model)
        split = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        editor_row = QHBoxLayout()
        editor_row.addWidget(self.table_list)
        editor_row.addWidget(self.editor, 1)
        tl.addLayout(editor_row)
        tl.addLayout(row)
        split.addWidget(top)
        split.addWidget(self.view)
        split.setSizes([160, 600])
        layout.addWidget(split)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            QShortcut(QKeySequence(keys), self.editor, activated=self.run_query)
        self.error: str | None = None
        #: what the last result shown was read from (None: nothing ran since the profiles
        #: were shown)
        self._ran_on: QuerySource | None = None
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._relay = Relay(self)
        self._relay.done.connect(self._finished)
        self._started_relay = Relay(self)  # (gen, the query's process id)
        self._started_relay.done.connect(self._started)
        self._gen = 0
        self._running = False
        self._stop = threading.Event()  # the running query's stop

    # -- the view-model --------------------------------------------------------------------
    def show_view(self, view: QueryView) -> None:
        self.view_model = view
        self.which.blockSignals(True)
        self.which.clear()
        for source in view.sources:
            self.which.addItem(source.label)
        self.which.setVisible(len(view.sources) > 1)
        self.which.blockSignals(False)
        if self._ran_on is None and self.editor.toPlainText() == EXAMPLE:
            self.editor.setPlainText(view.example)
        self.run_query()

    def clear(self) -> None:
        self.model.set_frame(None)
        self.view_model = None
        self._ran_on = None
        self.result = None
        self.export_button.setEnabled(False)

    def current_source(self) -> QuerySource | None:
        """What the query reads: the chosen profile, or A and B together."""
        view = self.view_model
        if view is None:
            return None
        index = self.which.currentIndex()
        return view.sources[index if 0 <= index < len(view.sources) else 0]

    # -- running (on a pool thread; Stop ends the query's process) ---------------------------
    @property
    def running(self) -> bool:
        return self._running

    def run_query(self) -> None:
        """Run the editor's query on the chosen profile on a pool thread (a query still running
        is stopped first); its answer is painted when it arrives."""
        source = self.current_source()
        if source is None:
            return
        self.stop_query()
        self._gen += 1
        sql = self.editor.toPlainText()
        stop = threading.Event()
        self._stop = stop
        self._running = True
        self.stop_button.setEnabled(True)
        self.status.setStyleSheet("")
        self.status.setText(f"Running on {source.names}…")
        gen, relay = self._gen, self._started_relay
        self._pool.start(
            PoolTask(
                lambda: run_query(source, sql, stop, lambda pid: relay.done.emit(gen, pid)),
                gen,
                self._relay,
            )
        )

    def stop_query(self) -> None:
        """Stop the running query, if any (its result is dropped)."""
        if self._running:
            self._stop.set()  # the pool thread ends the query's process
            self._gen += 1
            self._running = False
            self.stop_button.setEnabled(False)
            self.status.setText("Stopped.")

    def shutdown(self) -> None:
        self.stop_query()
        self._pool.waitForDone(10_000)

    def _fit_columns(self) -> None:
        """Each column as wide as its header and values (up to MAX_COLUMN_PX), so that values
        such as "StreamCopyBegin" are not cut to "StreamCopy…"."""
        self.view.resizeColumnsToContents()
        header = self.view.horizontalHeader()
        for col in range(header.count()):
            if header.sectionSize(col) > MAX_COLUMN_PX:
                header.resizeSection(col, MAX_COLUMN_PX)

    def _started(self, gen: int, pid: object) -> None:
        if gen == self._gen and isinstance(pid, int):  # not a query stopped or replaced since
            self.queryStarted.emit(pid)

    def _finished(self, gen: int, result: object) -> None:
        if gen != self._gen:
            return  # a query stopped or replaced since
        self._running = False
        self.stop_button.setEnabled(False)
        if not isinstance(result, QueryResult):  # a bug in the pool's work: one sentence
            source = self.current_source()
            name = source.names if source is not None else "the profile"
            text = problem_sentence(
                result if isinstance(result, BaseException) else TypeError(result), name
            )
            result = QueryResult("", source or QuerySource("", (), name), error=text)
        self.show_result(result)
        self.resultShown.emit()

    def show_result(self, result: QueryResult) -> None:
        """Paint a query's answer: its table, or its sentence under the editor (the last
        table stays)."""
        self.status.setText(result.status())
        if result.stopped:
            return
        if result.error:
            self.error = result.error
            self.status.setStyleSheet("color: #c62828;")
            return
        self.error = None
        self._ran_on = result.source
        self.result = result
        self.export_button.setEnabled(True)
        self.model.set_frame(result.shown)
        self._fit_columns()

    # -- export -------------------------------------------------------------------------------
    def export_csv(self, path: str) -> None:
        """Write the last result, every row, to ``path`` as CSV (through a temporary file in
        the same folder; never over an open profile or an HDF5 file). Raises the output's
        one-sentence UserFacingError."""
        from analyser.output import atomic_output, check_output

        result = self.result
        if result is None or result.frame is None:
            raise UserFacingError("no query result to export yet; run a query first.")
        # never over an open profile (the one the result was read from included)
        inputs = {*result.source.paths, *(self.view_model.inputs if self.view_model else ())}
        out = check_output(path, sorted(inputs), force=True)  # the dialog asked about replacing
        with atomic_output(out) as fh:
            result.frame.to_csv(fh, index=False)

    def export_dialog(self) -> None:
        if self.result is None:
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export the query result", "query.csv", "CSV (*.csv);;All files (*)"
        )
        if not path:
            return
        try:
            self.export_csv(path)
        except UserFacingError as exc:
            QMessageBox.warning(self, "Cannot export the result", str(exc))
            return
        self.statusMessage.emit(f"Saved {path}")
