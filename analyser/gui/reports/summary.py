"""Summary report: the summary declared once in the catalogue (target, graph, memory and
execution figures with their prediction ranges, as ``analyse summary`` and the reports show
them), cycles by step type per IPU with the cycles lost to tile imbalance, StreamCopy by direction
and destination, and the run configuration (with a filter). In compare mode every figure shows
A, B, the change and the range of the change. Everything shown comes in one Qt-free view-model
(:mod:`analyser.gui.model.summary_view`, built off the GUI thread); this view only displays it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QLineEdit,
    QSplitter,
    QStackedWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from analyser.gui.axes import use_cycle_axis
from analyser.gui.model import summary as model
from analyser.gui.model.summary_view import SummaryView, TreeView, build_summary_view
from analyser.gui.palette import hex_color
from analyser.gui.reports.base import MessagePanel, Report
from analyser.gui.widgets import (
    KeyValueTree,
    LegendLabel,
    chart_panel,
    color_delta_item,
    make_plot,
    stacked_bars,
    tab_widget,
)


class SummaryReport(Report):
    title = "Summary"
    key = "summary"
    data_needs = ("target", "metrics", "execution", "imbalance")
    view_builder = staticmethod(build_summary_view)
    compare_cost = 1

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tree = KeyValueTree()
        self.ipu_tree = KeyValueTree()
        self.stream_tree = KeyValueTree()
        self.config_filter = QLineEdit()
        self.config_filter.setPlaceholderText("Filter run configuration (e.g. precision, pipeline)")
        self.config_filter.setClearButtonEnabled(True)
        self.config_filter.textChanged.connect(self._apply_config_filter)
        self.config_tree = KeyValueTree(("Option", "Value"))
        self.explanation = QTextBrowser()
        self.explanation.setOpenExternalLinks(False)
        self.plot = make_plot(bottom="cycles", mouse=False)
        use_cycle_axis(self.plot, "bottom")
        self.plot.getPlotItem().getViewBox().invertY(True)  # IPU 0 on top, as in the trace
        self.plot.setMinimumHeight(140)
        self.legend = LegendLabel()
        self.chart_panel = chart_panel(self.plot, self.legend)
        self.no_exec = MessagePanel("")

        config_page = QWidget()
        cl = QVBoxLayout(config_page)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(self.config_filter)
        cl.addWidget(self.config_tree)

        exec_page = QWidget()
        el = QVBoxLayout(exec_page)
        el.setContentsMargins(0, 0, 0, 0)
        self.exec_stack = QStackedWidget()
        # the compute sets losing the most cycles to tile imbalance, under the cycles per IPU
        self.imbalance_tree = KeyValueTree()
        exec_inner = QSplitter(Qt.Orientation.Vertical)
        exec_inner.addWidget(self.chart_panel)
        exec_inner.addWidget(self.ipu_tree)
        exec_inner.addWidget(self.imbalance_tree)
        exec_inner.setSizes([220, 330, 200])
        self.exec_stack.addWidget(exec_inner)
        self.exec_stack.addWidget(self.no_exec)
        el.addWidget(self.exec_stack)

        self.tabs = tab_widget()
        self.tabs.addTab(exec_page, "Cycles by step type")
        self.tabs.addTab(self.stream_tree, "StreamCopy")
        self.tabs.addTab(config_page, "Run configuration")
        self.explanation_index = self.tabs.addTab(self.explanation, "Comparison")

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.tree)
        splitter.addWidget(self.tabs)
        splitter.setSizes([480, 700])
        self.splitter = splitter
        self.lay_out_with_empty_states()
        self.set_content(splitter)

    def chart_widget(self) -> QWidget:
        return self.chart_panel

    # ------------------------------------------------------------------ refresh
    def clear(self) -> None:
        for tree in (self.tree, self.ipu_tree, self.imbalance_tree, self.stream_tree):
            tree.clear()
        self.config_tree.clear()
        self.plot.getPlotItem().clear()
        self.explanation.clear()

    def show_view(self, view: SummaryView) -> None:
        self.clear()
        compare = view.compare
        self.tabs.setTabVisible(self.explanation_index, compare)
        self.tree.set_headers(view.figures.headers)
        for col, name in enumerate(view.figures.headers):
            self.tree.headerItem().setToolTip(col, model.HEADER_TIPS.get(name, ""))
        self.show_sections(self.tree, view.figures.sections, change_col=3 if compare else None)
        # compare mode: the change and its range matter more than the chart's width
        self._fit_figures(0.64 if compare else 0.56)
        for tree, tv in (
            (self.imbalance_tree, view.imbalance),
            (self.stream_tree, view.streamcopy),
        ):
            self._fill_tree(tree, tv)
        self._fill_ipus(view.ipus)
        self.config_tree.set_headers(view.config.headers)
        self.show_sections(self.config_tree, view.config.sections)
        self._apply_config_filter(self.config_filter.text())
        self._draw_chart(view.chart)
        if compare:
            if view.explanation_text:
                self.explanation.setPlainText(view.explanation_text)
            else:
                self.explanation.setHtml(view.explanation_html)

    def _fill_tree(self, tree: KeyValueTree, view: TreeView) -> None:
        tree.set_headers(view.headers)
        self._header_tips(tree, view.header_tip)
        self.show_sections(tree, view.sections)

    def _fit_figures(self, share: float) -> None:
        """Give the figure tree the width of its columns, at most ``share`` of the report (the
        tabs keep the rest; a cut note column scrolls and is the row's tooltip too)."""
        total = sum(self.splitter.sizes())
        want = self.tree.header().length() + self.tree.verticalScrollBar().sizeHint().width() + 12
        if total <= 0:
            self.splitter.setSizes([want, int(want * (1 - share) / share)])
            return
        left = min(want, int(total * share))
        self.splitter.setSizes([left, total - left])

    @staticmethod
    def show_sections(
        tree: KeyValueTree,
        sections: tuple[model.Section, ...] | list[model.Section],
        change_col: int | None = None,
    ) -> None:
        """Add the model's sections to ``tree``; with ``change_col``, colour each shown change
        by which way is better, and give each row its tooltip."""
        notes = [i for i in range(tree.columnCount()) if tree.headerItem().text(i) == model.NOTE]
        for section in sections:
            item = tree.add_section(section.title, [r.cells for r in section.rows])
            for i, row in enumerate(section.rows):
                child = item.child(i)
                for col in notes:  # words, not figures
                    child.setTextAlignment(
                        col, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
                    )
                if row.tip:
                    for col in range(len(row.cells)):
                        child.setToolTip(col, row.tip)
                if change_col is not None and row.better is not None:
                    color_delta_item(child, change_col, row.delta, row.better == "higher")

    def _fill_ipus(self, view: TreeView | None) -> None:
        if view is None:
            self.exec_stack.setCurrentIndex(1)
            self.no_exec.set_text(model.NO_EXECUTION)
            return
        self.exec_stack.setCurrentIndex(0)
        self._fill_tree(self.ipu_tree, view)

    @staticmethod
    def _header_tips(tree: KeyValueTree, tip: str) -> None:
        """The declared table's note as every column header's tooltip."""
        for col in range(tree.columnCount()):
            tree.headerItem().setToolTip(col, tip)

    def _apply_config_filter(self, text: str) -> None:
        needle = text.strip().lower()
        for i in range(self.config_tree.topLevelItemCount()):
            section = self.config_tree.topLevelItem(i)
            for j in range(section.childCount()):
                child = section.child(j)
                hay = " ".join(child.text(c) for c in range(child.columnCount())).lower()
                child.setHidden(bool(needle) and needle not in hay)

    def _draw_chart(self, chart: model.CyclesChart | None) -> None:
        item = self.plot.getPlotItem()
        item.clear()
        self.legend.set_entries([])
        if chart is None:
            return
        y = chart.positions
        colors = [hex_color(chart.palette, n) for n in chart.names]
        stacked_bars(
            item,
            y,
            chart.values,
            colors,
            list(chart.names),
            width=0.7,
            horizontal=True,
            legend=self.legend,
        )
        axis = item.getAxis("left")
        axis.setTicks([list(zip(y, chart.labels))])
        item.setLabel("bottom", chart.unit)
        item.getViewBox().setLimits(xMin=0)
        item.setYRange(-0.6, len(chart.labels) - 0.4, padding=0)
        item.setXRange(0, float(chart.values.sum(axis=1).max()) * 1.02, padding=0)
