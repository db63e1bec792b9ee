"""Query: SQL over the open profile (``analyser.query``, the same sandboxed DuckDB query as
``analyse query``), the result as a sortable table, exported as CSV. A list of the tables (each
with what it holds) beside the editor; a double-click writes a table's name into the query. In
compare mode a choice of profile A, B or both (``analyser.query.many``: every table then gains a
``profile`` column, and ``runs`` has a row per profile).

The query runs when asked (Run or Ctrl+Return; a GROUP BY over 10,000,000 steps takes about a
second) in a process of its own under a memory bound (analyser.query.process), waited for on a
pool thread; Stop ends that process, and a new query stops the one still running. A
refused or failing query is its one sentence under the editor; the last result stays until the
next one succeeds."""

from __future__ import annotations

import threading
import time

import pandas as pd
from PySide6.QtCore import Qt, QThreadPool
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

from analyser.gui.model.document import Document
from analyser.gui.reports.base import Report
from analyser.gui.table_view import TextTableView
from analyser.gui.widgets import DataFrameModel, PoolTask, Relay, connect_header_sort
from analyser.query import QueryError
from analyser.query.process import run_bounded
from analyser.query.tables import TABLES
from profiles.errors import UserFacingError

#: The query shown when the report opens (cycles and steps by type and IPU).
EXAMPLE = (
    "SELECT ipu, type, count(*) AS steps, sum(cycles) AS cycles\n"
    "FROM steps\nGROUP BY ipu, type\nORDER BY ipu, cycles DESC"
)
#: The example for a profile without execution (it has no steps).
EXAMPLE_NO_STEPS = (
    "SELECT ipu, category, sum(bytes) AS bytes\nFROM memory\nGROUP BY ipu, category\n"
    "ORDER BY ipu, bytes DESC"
)
#: Rows the table shows (the rest are counted in the status line).
MAX_ROWS = 100_000
#: The widest a result column is made to fit its values (a longer text stays cut).
MAX_COLUMN_PX = 420


class QueryReport(Report):
    """SQL over the profile's tables, the result as a table."""

    title = "Query"
    key = "query"
    data_needs = ("target",)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = self.content_column()
        self.editor = QPlainTextEdit()
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setPlainText(EXAMPLE)
        self.editor.setToolTip(
            "One SELECT over the tables: "
            + "; ".join(f"{n} ({s.doc})" for n, s in TABLES.items())
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
        #: the last result, every row of it (the table shows MAX_ROWS)
        self.result: pd.DataFrame | None = None
        self.table_list = QListWidget()
        self.table_list.setToolTip("The tables a query can read; double-click to insert a name")
        for name, spec in TABLES.items():
            item = QListWidgetItem(name)
            item.setToolTip(spec.doc)
            self.table_list.addItem(item)
        self.table_list.itemDoubleClicked.connect(
            lambda item: self.editor.insertPlainText(item.text())
        )
        self.table_list.setMaximumWidth(
            self.table_list.sizeHintForColumn(0) + 2 * self.table_list.frameWidth() + 24
        )
        self.status = QLabel("Tables: " + ", ".join(TABLES) + ".")
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
        self._ran_on: Document | None = None
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._relay = Relay(self)
        self._relay.done.connect(self._finished)
        self._gen = 0
        self._running = False
        self._stop = threading.Event()  # the running query's stop

    # -- documents --------------------------------------------------------------------------
    def show_documents(self, doc: Document, other: Document | None) -> None:
        self.which.blockSignals(True)
        self.which.clear()
        self.which.addItem(f"A: {doc.name}")
        if other is not None:
            self.which.addItem(f"B: {other.name}")
            self.which.addItem("A and B (a profile column)")
        self.which.setVisible(other is not None)
        self.which.blockSignals(False)
        if self._ran_on is None and not doc.has_execution:
            self.editor.setPlainText(EXAMPLE_NO_STEPS)
        self.run_query()

    def clear(self) -> None:
        self.model.set_frame(pd.DataFrame())
        self._ran_on = None
        self.result = None
        self.export_button.setEnabled(False)

    def current_document(self) -> Document | None:
        if self.which.currentIndex() == 1 and self.compare_doc is not None:
            return self.compare_doc
        return self.document

    def current_documents(self) -> list[Document]:
        """The profiles the query reads: the chosen one, or A and B together."""
        doc = self.current_document()
        if doc is None:
            return []
        if self.which.currentIndex() == 2 and self.compare_doc is not None:
            return [self.document, self.compare_doc] if self.document is not None else []
        return [doc]

    # -- running (on a pool thread; Stop interrupts DuckDB) -----------------------------------
    @property
    def running(self) -> bool:
        return self._running

    def run_query(self) -> None:
        """Run the editor's query on the chosen profile on a pool thread (a query still running
        is stopped first); the result or its error is shown when it ends."""
        docs = self.current_documents()
        if not docs:
            return
        doc = docs[0]
        # one profile by its path; both as a set of paths (each row labelled)
        target = str(doc.path) if len(docs) == 1 else [str(d.path) for d in docs]
        names = " and ".join(d.name for d in docs)
        self.stop_query()
        self._gen += 1
        sql = self.editor.toPlainText()
        stop = threading.Event()
        self._stop = stop

        def work():
            # in a process of its own under a memory bound (analyser.query.process), forked
            # from a server without the GUI's threads; Stop ends that process
            t0 = time.perf_counter()
            try:
                table = run_bounded(target, sql, stop=stop, start_method="forkserver")
                frame = table.to_pandas()
            except QueryError as exc:
                return exc
            except KeyboardInterrupt:  # stopped: not an error of the query
                return None
            return frame, time.perf_counter() - t0, names

        self._running = True
        self.stop_button.setEnabled(True)
        self.status.setStyleSheet("")
        self.status.setText(f"Running on {names}…")
        self._pool.start(PoolTask(work, self._gen, self._relay))

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

    def _finished(self, gen: int, result) -> None:
        if gen != self._gen:
            return  # a query stopped or replaced since
        self._running = False
        self.stop_button.setEnabled(False)
        if result is None:
            self.status.setText("Stopped.")
            return
        if isinstance(result, Exception):
            self.error = str(result)
            self.status.setText(self.error)
            self.status.setStyleSheet("color: #c62828;")
            return
        frame, seconds, names = result
        self.error = None
        self._ran_on = self.current_document()
        self.result = frame
        self.export_button.setEnabled(True)
        n = len(frame)
        self.model.set_frame(frame.head(MAX_ROWS))
        self._fit_columns()
        more = f", the first {MAX_ROWS:,} shown" if n > MAX_ROWS else ""
        self.status.setText(
            f"{n:,} row{'' if n == 1 else 's'}{more} from {names} in {seconds:.2f} s."
        )

    # -- export -------------------------------------------------------------------------------
    def export_csv(self, path: str) -> None:
        """Write the last result, every row, to ``path`` as CSV (through a temporary file in
        the same folder; never over an open profile or an HDF5 file). Raises the output's
        one-sentence UserFacingError."""
        from analyser.output import atomic_output, check_output

        if self.result is None:
            raise UserFacingError("no query result to export yet; run a query first.")
        inputs = [str(d.path) for d in (self.document, self.compare_doc) if d is not None]
        out = check_output(path, inputs, force=True)  # the file dialog asked about replacing
        with atomic_output(out) as fh:
            self.result.to_csv(fh, index=False)

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
