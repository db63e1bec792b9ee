"""Insights report: fits / out-of-memory banner with the share of memory used, the five tiles
with the most memory, a histogram of memory over all tiles, the largest vertex state / code and
always-live variables, and the insight list (evidence, recommended change, trade-off, predicted
effect). "Predict effects" re-simulates every tip with the engine in the background; "Apply"
hands the tip to the what-if handler registered in :mod:`analyser.gui.reports`.

In compare mode both banners are shown, the histograms are overlaid, and each insight is marked
as present in A only ("resolved" by B), B only ("new") or "both"."""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import quote, unquote

import pyqtgraph as pg
from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTextBrowser,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from analyser.core.quantities import QUANTITIES, columns
from analyser.core.units import fmt_bytes, fmt_count
from analyser.gui import reports as registry
from analyser.gui.model.document import Document
from analyser.gui.model.insights import (
    EFFECT_KEYS,
    GAIN_TIP,
    InsightRow,
    cancel_predictions,
    change_note,
    gain_text,
    largest_tables,
    predict,
    range_text,
    ranking,
    rerank,
)
from analyser.gui.model.insights_view import InsightsView, build_insights_view
from analyser.gui.model.places import place_of, tile_place
from analyser.gui.model.units_text import in_units
from analyser.gui.palette import hex_color
from analyser.gui.reports.base import Report, lay_out, shows_profile_problems
from analyser.gui.widgets import (
    Banner,
    FilterTable,
    LegendLabel,
    chart_panel,
    make_plot,
    tab_widget,
)

EFFECT_LABELS = {k: QUANTITIES[k].title for k in EFFECT_KEYS}


#: What the compare column's words mean (its tooltip).
WHERE_TIPS = {
    "both": "fires on A and on B",
    "resolved": "fires on A only: B resolved it",
    "new": "fires on B only: new in B",
}


class PredictSignals(QObject):
    """Owned by the report, never by the runnable (see analyser.gui.loader.LoadSignals)."""

    progress = Signal(int, int, str)
    finished = Signal(object, str)  # insights list, error message


class PredictTask(QRunnable):
    """Re-simulate every insight's change (analysis core's predict_effects) off the GUI thread."""

    def __init__(self, analysis: Any, insights: list, signals: PredictSignals) -> None:
        super().__init__()
        self.analysis = analysis
        self.insights = insights
        self.signals = signals

    def run(self) -> None:
        try:
            out = predict(
                self.analysis,
                self.insights,
                progress=lambda d, t, name: self.signals.progress.emit(d, t, name),
            )
            self.signals.finished.emit(out, "")
        except Exception as exc:  # report it in the panel; the app carries on
            self.signals.finished.emit(self.insights, f"{type(exc).__name__}: {exc}")


class InsightsReport(Report):
    title = "Insights"
    key = "insights"
    data_needs = ("target", "memory", "insights", "largest_vertices", "largest_always_live")
    view_builder = staticmethod(build_insights_view)
    #: how many times A's and B's insights were re-ranked (see view_options)
    default_view_options = (0, 0)
    compare_cost = 1

    applyTipRequested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        self._predict_signals = PredictSignals(self)
        self._predict_signals.progress.connect(self._on_progress)
        self._predict_signals.finished.connect(self._on_predicted)
        self._predicting = False
        self.banner_a = Banner()
        self.banner_b = Banner()

        self.plot = make_plot(left="tiles", bottom="memory per tile", mouse=False)
        self.legend = LegendLabel()
        self.chart_panel = chart_panel(self.plot, self.legend)

        self.top_tiles = FilterTable("Filter tiles")
        self.top_tiles.view.doubleClicked.connect(self._open_top_tile)
        self.top_tiles.view.setToolTip("Double-click a tile to show it in the Memory Report")
        self.vertices = FilterTable("Filter vertex types")
        self.always_live = FilterTable("Filter variables")
        side = tab_widget()
        side.addTab(self.top_tiles, "Top tiles")
        side.addTab(self.vertices, "Largest vertex state")
        side.addTab(self.always_live, "Largest always-live variables")
        self.side_tabs = side
        self._largest_stale = True
        side.currentChanged.connect(lambda _i: self._fill_largest())

        upper = QSplitter(Qt.Orientation.Horizontal)
        upper.addWidget(self.chart_panel)
        upper.addWidget(side)
        upper.setSizes([650, 550])

        self.list = QTreeWidget()
        self.list.setRootIsDecorated(False)
        self.list.setAlternatingRowColors(True)
        self.list.setHeaderLabels(["Severity", "Insight", "Category", "Gain"])
        self.list.currentItemChanged.connect(lambda *_: self._show_selected())
        #: how the list is ordered, said above it (a warning above a critical read
        #: as a mistake while the order went unsaid)
        self.order_label = QLabel("")
        self.order_label.setWordWrap(True)
        self.order_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        list_panel = QWidget()
        lp = QVBoxLayout(list_panel)
        lp.setContentsMargins(0, 0, 0, 0)
        lp.addWidget(self.order_label)
        lp.addWidget(self.list, 1)
        self.details = QTextBrowser()
        self.details.setOpenLinks(False)  # a link is a place in a report: go_to opens it
        self.details.anchorClicked.connect(self._on_link)
        self.predict_one_button = QPushButton("Predict effect")
        self.predict_one_button.setToolTip(
            "Re-simulate this tip's changed run configuration with the embedded engine"
        )
        self.predict_one_button.clicked.connect(lambda: self.predict_effects(selected_only=True))
        self.predict_button = QPushButton("Predict all")
        self.predict_button.setToolTip(
            "Re-simulate every tip's changed run configuration with the embedded engine"
        )
        self.predict_button.clicked.connect(lambda: self.predict_effects())
        self.apply_button = QPushButton("Apply tip and compare...")
        self.apply_button.clicked.connect(self._apply)
        self.progress_label = QLabel("")
        buttons = QHBoxLayout()
        buttons.addWidget(self.predict_one_button)
        buttons.addWidget(self.predict_button)
        buttons.addWidget(self.apply_button)
        buttons.addStretch(1)
        # the status goes on its own row, word-wrapped: beside the buttons a long message
        # widened the pane and squeezed the insight list
        self.progress_label.setWordWrap(True)
        self.progress_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addLayout(buttons)
        rl.addWidget(self.progress_label)
        rl.addWidget(self.details)
        lower = QSplitter(Qt.Orientation.Horizontal)
        lower.addWidget(list_panel)
        lower.addWidget(right)
        lower.setSizes([520, 680])

        lay_out(self, [self.banner_a, self.banner_b], upper, lower, (330, 420))
        self._entries: list[tuple[str, Any, Any]] = []
        #: the view-model shown (None while there is none)
        self._view: InsightsView | None = None
        self._focus_order()

    def _focus_order(self) -> None:
        """Tab from the side list lands on the insight list (in a real X server it went to the
        histogram, which takes no key, so Down did nothing): the list, its buttons, the details,
        then the tile tables. The histogram takes no focus (it has no mouse or key use)."""
        chain = [
            self.plot,  # first in the report's chain: what follows it is reached first
            self.list,
            self.predict_one_button,
            self.predict_button,
            self.apply_button,
            self.details,
        ]
        for a, b in itertools.pairwise(chain):
            QWidget.setTabOrder(a, b)
        for w in (self.plot, self.plot.viewport()):  # after: Qt orders only focusable widgets
            w.setFocusPolicy(Qt.FocusPolicy.NoFocus)

    def chart_widget(self) -> QWidget:
        return self.chart_panel

    # ------------------------------------------------------------------ refresh
    def clear(self) -> None:
        self._view = None
        self.list.clear()
        self.order_label.setText("")
        self.details.clear()
        self.plot.getPlotItem().clear()

    def view_options(self) -> tuple[int, int]:
        """How many times A's and B's insights were re-ranked by predicted effects: a
        re-ranked profile's view-model is built again (in its new order), not taken from
        the cache."""
        doc, other = self.document, self.compare_doc
        return (
            ranking(doc) if doc is not None else 0,
            ranking(other) if other is not None else 0,
        )

    def show_view(self, view: InsightsView) -> None:
        self.clear()
        self._view = view
        b = view.b
        self.banner_b.setVisible(b is not None)
        state, text = view.a.banner
        self.banner_a.show_state(state, ("A: " if b is not None else "") + text)
        if b is not None:
            state_b, text_b = b.banner
            self.banner_b.show_state(state_b, "B: " + text_b)
        self._draw_histogram(view)
        self._fill_tables(view)
        self._fill_list()
        self._update_buttons()
        if getattr(self, "_applied", None) is not None and b is not None:
            QTimer.singleShot(0, self._predict_applied_tip)

    def _draw_histogram(self, view: InsightsView) -> None:
        item = self.plot.getPlotItem()
        item.clear()
        entries = []
        unit_scale = 1.0
        top = 0.0
        for k, side in enumerate(view.sides):
            tag, mem = side.tag, side.memory
            counts, edges = mem.histogram_counts, mem.histogram_edges
            unit_scale = (
                1024.0 if self.units.value == "KiB" else 1000.0 if self.units.value == "kB" else 1.0
            )
            color = hex_color("compare", "a" if k == 0 else "b")
            brush = pg.mkColor(color)
            brush.setAlpha(200 if k == 0 else 120)
            centers = (edges[:-1] + edges[1:]) / 2 / unit_scale
            width = float(edges[1] - edges[0]) / unit_scale if len(edges) > 1 else 1.0
            if k == 0:
                bars = pg.BarGraphItem(
                    x=centers, height=counts, width=width * 0.95, brush=brush, pen=pg.mkPen(None)
                )
                item.addItem(bars)
            else:  # B as an outline over A's bars, so both stay visible
                item.addItem(
                    pg.PlotDataItem(
                        edges / unit_scale, counts, stepMode="center", pen=pg.mkPen(color, width=2)
                    )
                )
            top = max(top, float(counts.max()) if counts.size else 0.0)
            entries.append(((f"{tag}: " if tag else "") + "tiles per memory bin", color))
            sram = mem.sram_per_tile / unit_scale
        line_color = hex_color("chart", "max_memory_line")
        item.addItem(
            pg.InfiniteLine(
                pos=sram,
                angle=90,
                pen=pg.mkPen(line_color, width=1.5, style=Qt.PenStyle.DashLine),
                label="tile memory",
                labelOpts={"position": 0.9, "color": line_color},
            )
        )
        entries.append(("memory per tile (SRAM)", line_color))
        self.legend.set_entries(entries)
        unit = {"KiB": "KiB", "kB": "kB"}.get(self.units.value, "bytes")
        item.setLabel("bottom", f"memory per tile ({unit}, gaps included)")
        item.setLabel("left", "tiles")
        item.setYRange(0, top * 1.1 if top else 1, padding=0)

    def _fill_tables(self, view: InsightsView) -> None:
        self.top_tiles.set_frame(view.top_tiles, columns("tiles", self.units))
        self._largest_stale = True
        self._fill_largest()

    @shows_profile_problems
    def _fill_largest(self) -> None:
        """The largest vertex state and always-live variables of A (and B), filled when one of
        their tabs is shown: the first visit shows the top tiles, and reading both profiles'
        variables cold was a fifth of a compare-mode first visit."""
        shown = self.side_tabs.currentWidget()
        if not self._largest_stale or shown not in (self.vertices, self.always_live):
            return
        self._largest_stale = False
        if self.document is None:
            return
        verts, alive = largest_tables(self.document, self.compare_doc)
        self.vertices.set_frame(verts, columns("vertex_types", self.units))
        self.always_live.set_frame(
            alive,
            columns(
                "variables",
                self.units,
                ("profile", "name", "kind", "dtype", "shape", "ipu", "bytes"),
            ),
        )

    def _fill_list(self) -> None:
        self.list.clear()
        self._entries = []
        view, doc, cmp = self._view, self.document, self.compare_doc
        if view is None or doc is None:
            return
        # the column count follows the labels (setHeaderLabels never removes a column: an
        # empty "In" column stayed after Stop comparing)
        labels = ["Severity", "Insight", "Category"] + ([] if cmp is None else ["In"]) + ["Gain"]
        self.list.setColumnCount(len(labels))
        self.list.setHeaderLabels(labels)
        self.list.headerItem().setToolTip(len(labels) - 1, GAIN_TIP)
        self.order_label.setText(view.order_text)
        for row in view.rows:
            self._add_item(row, cmp if row.owner == "B" and cmp is not None else doc)
        # the title column takes the width left by the short columns (elided when narrow; the
        # details pane has it in full), so the compare column stays in view
        header = self.list.header()
        header.setStretchLastSection(False)
        for c in range(self.list.columnCount()):
            mode = (
                QHeaderView.ResizeMode.Stretch
                if c == 1
                else QHeaderView.ResizeMode.ResizeToContents
            )
            header.setSectionResizeMode(c, mode)
        if self.list.topLevelItemCount():
            self.list.setCurrentItem(self.list.topLevelItem(0))
        else:
            self.details.setHtml(
                "<p>No insight fires on this profile with the current thresholds.</p>"
            )

    def _add_item(self, row: InsightRow, doc: Document) -> None:
        tip, where, severity_b = row.tip, row.where, row.severity_b
        gain, gain_tip = gain_text(tip)
        cols = [row.severity_text, tip.title, tip.category] + ([where] if where else []) + [gain]
        item = QTreeWidgetItem(cols)
        item.setToolTip(1, tip.title)
        item.setToolTip(len(cols) - 1, gain_tip)
        item.setTextAlignment(len(cols) - 1, Qt.AlignmentFlag.AlignRight)
        if where:
            item.setToolTip(3, WHERE_TIPS[where])
        if severity_b is not None:
            item.setToolTip(0, f"A: {tip.severity}, B: {severity_b}")
        # coloured by where the tip stands now: B's severity when both profiles have it
        item.setForeground(0, QColor(hex_color("status_text", severity_b or tip.severity)))
        item.setData(0, Qt.ItemDataRole.UserRole, len(self._entries))
        self._entries.append((tip.id, tip, doc))
        self.list.addTopLevelItem(item)

    def insight_titles(self) -> list[str]:
        return [self.list.topLevelItem(i).text(1) for i in range(self.list.topLevelItemCount())]

    def selected_insight(self) -> Any | None:
        item = self.list.currentItem()
        if item is None:
            return None
        return self._entries[int(item.data(0, Qt.ItemDataRole.UserRole))][1]

    def select_insight(self, index: int) -> None:
        self.list.setCurrentItem(self.list.topLevelItem(index))

    def _show_selected(self) -> None:
        tip = self.selected_insight()
        self._update_buttons()
        if tip is None:
            return
        self.details.setHtml(insight_html(tip, self.units))

    def _update_buttons(self) -> None:
        tip = self.selected_insight()
        has_handler = registry.apply_tip_handler() is not None
        self.apply_button.setVisible(has_handler)
        self.apply_button.setEnabled(bool(tip is not None and tip.change) and has_handler)
        self.predict_button.setEnabled(self.document is not None and not self._predicting)
        self.predict_one_button.setEnabled(
            tip is not None and bool(tip.change) and tip.effect is None and not self._predicting
        )

    def _apply(self) -> None:
        tip = self.selected_insight()
        if tip is not None and tip.change:
            # the what-if result opens compared with A (fresh documents): A's tip then gets its
            # predicted effect from the same (cached) simulation instead of "Not predicted yet"
            self._applied = (str(self.document.path), tip.id) if self.document else None
            self.applyTipRequested.emit(tip)

    def _predict_applied_tip(self) -> None:
        """After "Apply tip and compare": select the applied tip of A and predict it (the
        simulation service answers from its cache: the what-if just ran it)."""
        applied, self._applied = getattr(self, "_applied", None), None
        doc, view = self.document, self._view
        if applied is None or doc is None or self.compare_doc is None or view is None:
            return
        path, tip_id = applied
        tip = next((t for t in view.a.insights if t.id == tip_id), None)
        if str(doc.path) != path or tip is None or tip.effect is not None:
            return
        self._select_tip(tip)
        self.predict_effects(selected_only=True)

    # ------------------------------------------------------------------ prediction
    def predict_effects(self, selected_only: bool = False) -> None:
        """Re-simulate the tips (or only the selected one, with the profile it belongs to) in
        the background; the effects are stored on the insights (cached). In compare mode
        "Predict all" re-simulates A's tips and the tips only B has (one profile after the
        other), so every row of the list gets its effect."""
        doc, view = self.document, self._view
        if doc is None or view is None or self._predicting:
            return
        if selected_only:
            item = self.list.currentItem()
            if item is None:
                return
            _id, tip, doc = self._entries[int(item.data(0, Qt.ItemDataRole.UserRole))]
            if not tip.change:
                return
            jobs = [(doc, [tip])]
        else:
            tips = list(view.a.insights)
            jobs = [(doc, tips)]
            if self.compare_doc is not None and view.b is not None:
                ids_a = {t.id for t in tips}
                only_b = [t for t in view.b.insights if t.id not in ids_a]
                if only_b:
                    jobs.append((self.compare_doc, only_b))
        self._jobs = jobs
        self._order_before = self.insight_titles()
        self._predicted_docs: list[Any] = []
        self._predicting = True
        self.progress_label.setText("Re-simulating...")
        self._update_buttons()
        self._start_next_job()

    def _start_next_job(self) -> None:
        doc, tips = self._jobs.pop(0)
        task = PredictTask(doc.analysis, tips, self._predict_signals)
        self._predicted_doc = doc
        self._task = task
        self.pool.start(task)

    def _on_progress(self, done: int, total: int, name: str) -> None:
        self.progress_label.setText(
            f"Re-simulated {done} of {total} tips" + (f" ({name})" if name else "")
        )

    def _on_predicted(self, insights: list, error: str) -> None:
        self._task = None
        doc, self._predicted_doc = getattr(self, "_predicted_doc", None), None
        if doc is not None and not error:
            # the predicted effects may change the order (analysis core's rank_insights)
            rerank(doc)
            self._predicted_docs.append(doc)
        if error:
            self._jobs = []
        if self._jobs:
            self._start_next_job()
            return
        self._predicting = False
        if self._predicted_docs and any(
            d is self.document or d is self.compare_doc for d in self._predicted_docs
        ):
            self._show_reranked()
        self.progress_label.setText(error or self._order_message())
        self._update_buttons()
        self._show_selected()

    def _show_reranked(self) -> None:
        """The list in its new order (a view-model built for the re-ranked insights: the one
        shown holds the old order), keeping the selected tip selected. A view-model still
        awaited was asked for in the old order: the report asks again."""
        if self.awaiting_view:
            self._mark_dirty()
            return
        if self._view is None or self.document is None:
            return
        current = self.selected_insight()
        self._view = self.view_request(self.document, self.compare_doc).build()
        self._fill_list()
        if current is not None:
            self._select_tip(current)

    def _order_message(self) -> str:
        """What the prediction did to the list, as it is (it used to say "re-ranked" when the
        order stayed as it was)."""
        before = getattr(self, "_order_before", [])
        if self.insight_titles() != before:
            return "Predicted effects are shown with each tip; tips re-ranked by them."
        why = ""
        if any(not self._fits(d) for d in self._predicted_docs):
            why = (
                " (out of memory: the memory tips keep the IPU memory guide's order, "
                "whatever their predicted effect)"
            )
        return "Predicted effects are shown with each tip; the order is unchanged" + why + "."

    def _fits(self, doc: Document) -> bool:
        """True when ``doc`` (A or B shown) fits in memory."""
        view = self._view
        if view is None:
            return True
        side = view.a if doc is self.document or view.b is None else view.b
        return bool(side.memory.fits)

    def _select_tip(self, tip: Any) -> None:
        for i in range(self.list.topLevelItemCount()):
            item = self.list.topLevelItem(i)
            if self._entries[int(item.data(0, Qt.ItemDataRole.UserRole))][1] is tip:
                self.list.setCurrentItem(item)
                return

    def _on_link(self, url) -> None:
        if url.scheme() == PLACE_SCHEME:
            self.go_to(place_of(unquote(url.path())))

    def _open_top_tile(self, index) -> None:
        """Double-click on a Top tiles row: that tile in the Memory Report."""
        model = self.top_tiles.model
        row = self.top_tiles.proxy.mapToSource(index).row()
        ipu = int(model.raw(row, model.column_of("ipu")))
        tile = int(model.raw(row, model.column_of("tile")))
        self.go_to(tile_place(ipu, tile))

    def is_busy(self) -> bool:
        return self._predicting

    def shutdown(self) -> None:
        if self._predicting:  # stop the re-simulations on the service rather than wait for them
            cancel_predictions()
        self.pool.waitForDone(120000)


def effect_message(status: str, message: str) -> str:
    """``message`` without a leading ``status:`` (the status is shown before it: the effect
    read "fits: fits: no tile out of memory")."""
    head = f"{status}:"
    return message[len(head) :].lstrip() if message.lower().startswith(head.lower()) else message


#: The scheme of the evidence's links to places in the reports.
PLACE_SCHEME = "place"


def insight_html(tip: Any, units) -> str:
    esc = _esc
    color = hex_color("status_text", tip.severity)
    parts = [
        f"<h3 style='margin-bottom:2px'>{esc(tip.title)}</h3>",
        f"<p><span style='color:{color}; font-weight:600'>{esc(tip.severity.upper())}</span>"
        f" &middot; {esc(tip.category)} &middot; <code>{esc(tip.id)}</code></p>",
        f"<p>{esc(in_units(tip.summary, units))}</p>",
    ]
    if tip.evidence:
        parts.append("<h4>Evidence</h4><ul>")
        for ev in tip.evidence:
            where = ""
            if ev.where:
                # a place another report shows is a link there (it was plain text)
                target = esc(ev.where)
                if place_of(ev.where) is not None:
                    target = f"<a href='{PLACE_SCHEME}:{quote(ev.where)}'>{target}</a>"
                where = f" <i>(see {target})</i>"
            parts.append(f"<li>{esc(in_units(ev.text, units))}{where}</li>")
        parts.append("</ul>")
    parts.append("<h4>Recommended change</h4>")
    if tip.change:
        parts.append(
            "<ul>"
            + "".join(
                f"<li><code>{esc(k)} = {esc(repr(v))}</code></li>" for k, v in tip.change.items()
            )
            + "</ul>"
        )
    else:
        parts.append(
            "<p>No run option expresses this change (it is a model or mapping change).</p>"
        )
    if tip.trade_off:
        parts.append(f"<h4>Trade-off</h4><p>{esc(tip.trade_off)}</p>")
    parts.append("<h4>Predicted effect</h4>")
    eff = tip.effect
    if eff is None:
        parts.append(
            "<p>Not predicted yet: press <b>Predict effect</b> to re-simulate the changed "
            "configuration with the engine.</p>"
        )
    else:
        said = "not recommended" in eff.message.lower()
        verdict = "" if eff.recommended or said else " <b>(not recommended)</b>"
        tone = hex_color("tone", eff.tone or ("good" if eff.recommended else "bad"))
        parts.append(
            f"<p><span style='color:{tone}; font-weight:600'>{esc(eff.status)}</span>: "
            f"{esc(effect_message(eff.status, eff.message))}{verdict}</p>"
        )
        if eff.baseline_note:
            parts.append(f"<p><i>{esc(eff.baseline_note)}</i></p>")
        if eff.after:
            parts.append(
                "<table cellspacing='0' cellpadding='3' border='1'><tr><th>Metric</th><th>Now</th><th>Predicted</th><th>Change</th><th>Range</th></tr>"
            )
            for key in EFFECT_KEYS:
                a, b = eff.before.get(key), eff.after.get(key)
                if a is None and b is None:
                    continue
                fmt = (lambda v: fmt_bytes(v, units)) if "bytes" in key else fmt_count
                rel = eff.rel(key)
                change = "-" if rel is None else f"{100 * rel:+.1f}%"
                rng = range_text((eff.intervals.get(key) or {}).get("change")) or "-"
                parts.append(
                    f"<tr><td>{EFFECT_LABELS.get(key, key)}</td><td align='right'>{fmt(a) if a is not None else '-'}</td>"
                    f"<td align='right'>{fmt(b) if b is not None else '-'}</td><td align='right'>{change}</td>"
                    f"<td align='right'>{esc(rng)}</td></tr>"
                )
            parts.append("</table>")
            # how far to trust it: the fidelity table's range (docs/fidelity.md, "Calibrated intervals")
            note = change_note((eff.intervals.get("throughput_samples_per_s") or {}).get("change"))
            if note:
                parts.append(f"<p><i>Range of the throughput change: {esc(note)}.</i></p>")
    return "".join(parts)


def _esc(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
