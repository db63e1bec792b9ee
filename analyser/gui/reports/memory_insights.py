"""The Memory Report's "Insights" tab, as PopVision has it: vertex state and exchange code for
the model, per IPU and per tile, the largest vertex types and exchanges and where they sit.
Numbers from :func:`analyser.core.memory_insights.memory_insights`; this module lays them out.
Double-click a row that names a tile to select that tile in the report."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QSplitter, QWidget

from analyser.core.units import MemoryUnits, fmt_bytes, fmt_change, fmt_count
from analyser.gui.model import memory as memory_model
from analyser.gui.model.memory import EXCHANGE_CODE, MemoryInsights
from analyser.gui.widgets import FilterTable, KeyValueTree, headed_column, nice_name, tab_widget

#: (column, header, kind) of each table; kind "bytes" / "count" / None picks the formatter.
VERTEX_COLUMNS = (
    ("vertex_type", "Vertex type", None),
    ("total_state_bytes", "State (stored)", "bytes"),
    ("instances", "Instances listed", "count"),
    ("state_bytes", "State per instance", "bytes"),
    ("listed_state_bytes", "Listed state (instances x state)", "bytes"),
    ("code_bytes", "Code per tile", "bytes"),
    ("tiles", "Tiles", "count"),
    ("largest_tile_ipu", "Largest on IPU", None),
    ("largest_tile", "tile", None),
    ("largest_tile_bytes", "State on that tile", "bytes"),
)
EXCHANGE_COLUMNS = (
    ("name", "Exchange", None),
    ("type", "Type", None),
    ("ipu", "IPU", None),
    ("code_bytes", "Code (all tiles)", "bytes"),
    ("tiles", "Tiles", "count"),
    ("first_tile", "First tile", None),
    ("last_tile", "Last tile", None),
    ("code_per_tile", "Code per tile", "bytes"),
    ("bytes", "Bytes moved", "bytes"),
)
TILE_COLUMNS = (
    ("what", "What", None),
    ("ipu", "IPU", None),
    ("tile", "Tile", None),
    ("bytes", "Bytes", "bytes"),
)


def _columns(spec, units: MemoryUnits, compare: bool) -> list:
    fmt = {"bytes": lambda v: fmt_bytes(v, units), "count": fmt_count, None: None}
    cols = [(c, h, fmt[k]) for c, h, k in spec]
    return ([("profile", "Profile", None)] if compare else []) + cols


class MemoryInsightsPage(QWidget):
    """Totals (model and IPUs) over three tables: vertex types, exchanges, tiles."""

    #: (ipu, tile) double-clicked in a table
    tileChosen = Signal(int, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay, self.note = headed_column(
            self,
            "Vertex state is the stored vertexInstanceState; exchange code is internal + host + "
            "global exchange code. The profile lists every compute set's vertices, outlined "
            "copies included (they share the first one's state), so each tile's stored state "
            "is split among the vertex types in proportion to their listed state there. "
            "Double-click a row to select its tile.",
        )
        split = QSplitter(Qt.Orientation.Horizontal)
        self.totals = KeyValueTree()
        split.addWidget(self.totals)
        self.tabs = tab_widget()
        self.vertices = FilterTable("Filter vertex types")
        self.exchanges = FilterTable("Filter exchanges")
        self.tiles = FilterTable("Filter tiles")
        self.tabs.addTab(self.vertices, "Largest vertex types")
        self.tabs.addTab(self.exchanges, "Largest exchanges")
        self.tabs.addTab(self.tiles, "Fullest tiles")
        split.addWidget(self.tabs)
        split.setSizes([380, 900])
        lay.addWidget(split, 1)
        self.vertices.view.doubleClicked.connect(lambda i: self._chosen(self.vertices, i, "v"))
        self.exchanges.view.doubleClicked.connect(lambda i: self._chosen(self.exchanges, i, "x"))
        self.tiles.view.doubleClicked.connect(lambda i: self._chosen(self.tiles, i, "t"))

    def _chosen(self, table: FilterTable, index: Any, kind: str) -> None:
        frame = table.model.frame
        if frame is None or frame.empty:
            return
        row = frame.iloc[table.model.source_row(table.proxy.mapToSource(index).row())]
        ipu, tile = {
            "v": ("largest_tile_ipu", "largest_tile"),
            "x": ("ipu", "first_tile"),
            "t": ("ipu", "tile"),
        }[kind]
        if int(row[ipu]) >= 0 and int(row[tile]) >= 0:
            self.tileChosen.emit(int(row[ipu]), int(row[tile]))

    def show_insights(self, items: list[tuple[str, MemoryInsights]], units: MemoryUnits) -> None:
        """``items``: (tag, insights) of A, and of B in compare mode (tags "A: ..." / "B: ...";
        one item with an empty tag otherwise)."""
        compare = len(items) > 1
        tree = self.totals
        tree.clear()
        b = lambda v: fmt_bytes(int(v), units)  # noqa: E731
        label = {"vertex state": "Vertex state", "exchange code": "Exchange code"}
        if compare:
            (_ta, a), (_tb, bb) = items
            tree.set_headers(("Figure", "A", "B", "Change"))
            rows = [
                (
                    label.get(k, nice_name(k)),
                    b(a.model[k]),
                    b(bb.model.get(k, 0)),
                    fmt_change(a.model[k], bb.model.get(k, 0), units),
                )
                for k in a.model
            ]
        else:
            tree.set_headers(("Figure", "Bytes"))
            a = items[0][1]
            rows = [(label.get(k, nice_name(k)), b(v)) for k, v in a.model.items()]
        tree.add_section("Model", rows)
        for tag, ins in items:
            for r in ins.per_ipu.itertuples(index=False):
                section = f"{tag}IPU {r.ipu}"
                vals = [
                    ("Vertex state", b(r.vertex_state)),
                    (
                        "Largest vertex state",
                        f"{b(r.largest_vertex_state_bytes)} on tile {r.largest_vertex_state_tile}",
                    ),
                    ("Exchange code", b(r.exchange_code)),
                    *[(nice_name(c), b(getattr(r, c))) for c in EXCHANGE_CODE],
                    (
                        "Largest exchange code",
                        f"{b(r.largest_exchange_code_bytes)} on tile "
                        f"{r.largest_exchange_code_tile}",
                    ),
                ]
                if compare:
                    vals = [(k, v, "", "") for k, v in vals]
                tree.add_section(section, vals)
        tree.expandAll()

        def frame(table: str) -> Any:
            return memory_model.insights_table(items, table, compare)

        self.vertices.set_frame(frame("vertices"), _columns(VERTEX_COLUMNS, units, compare))
        self.exchanges.set_frame(frame("exchanges"), _columns(EXCHANGE_COLUMNS, units, compare))
        self.tiles.set_frame(frame("top_tiles"), _columns(TILE_COLUMNS, units, compare))


__all__ = ["MemoryInsightsPage"]
