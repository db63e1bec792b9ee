"""The Design space report: the results of an ``analyse tune`` (a tune folder).

A scatter of every simulated configuration, throughput against the memory of its fullest tile
(the dashed line is the tile's SRAM), out-of-memory configurations marked with red crosses on
the axis (they have no execution), the Pareto front of throughput vs memory headroom joined,
the start and the best ringed. Clicking a point selects it (its options and figures are shown
below); "Open profile" opens its profile in the main window, "Compare with start" opens the
start's profile compared with it (double-click does the latter).

Opened from Tools > Design space (tune results)… or ``analyse gui TUNE-FOLDER``. The numbers
come from the tune's results table (:mod:`analyser.sim.tune.results`), the chart's arrays from
:func:`analyser.reports.tune.design_space_points`, shared with the HTML report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from analyser.core.units import MemoryUnits, axis_scale, fmt_bytes
from analyser.gui.model import design_space as dsm
from analyser.gui.palette import hex_color
from analyser.gui.theme import chart_colors, style_plot
from analyser.gui.widgets import FilterTable, LegendLabel, make_plot, push_button, section_label
from analyser.literal import html as lit

FITS = "#4e79a7"
CONSTRAINT = "#bab0ac"
OOM = "#c62828"
FRONT = "#f28e2b"
BEST = "#2e7d32"


def _fmt(key: str, v: Any) -> str:
    from analyser.reports.tune import _fmt_figure

    return _fmt_figure(key, v)


class DesignSpaceWindow(QWidget):
    """The Design space of one tune folder (a top-level window beside the main window)."""

    def __init__(self, folder: str | Path, window=None, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        from analyser.reports.tune import design_space_points
        from analyser.sim.tune import load_results

        self.main_window = window
        self.table = load_results(folder)
        self.points = design_space_points(self.table)
        self.units = getattr(getattr(window, "workspace", None), "units", MemoryUnits.KIB)
        #: what each trial needed, when no trial has a throughput (nothing fits): drawn instead
        #: of an empty throughput chart
        self.needed = dsm.memory_needed(self.table)
        self._set_scale()
        self.selected: int | None = None
        meta = self.table.meta
        self.setWindowTitle(f"Design space: {Path(self.table.folder).name}")
        self.resize(980, 680)

        lay = QVBoxLayout(self)
        head = QLabel(self._headline())
        head.setWordWrap(True)
        lay.addWidget(head)
        if self.needed is None:
            self.plot = make_plot(
                left="throughput (samples/s)", bottom=f"fullest tile ({self._unit})"
            )
        else:
            self.plot = make_plot(left="memory of the fullest tile", bottom="trial #")
        split = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        top_lay = QVBoxLayout(top)
        top_lay.setContentsMargins(0, 0, 0, 0)
        top_lay.addWidget(self.plot, 1)
        self.legend = LegendLabel()
        if self.needed is None:
            self.legend.set_entries(
                [("fits", FITS), ("out of memory (no execution)", OOM), ("Pareto front", FRONT)]
                + ([("breaks a constraint", CONSTRAINT)] if self._any_breaking() else [])
            )
        else:
            self.legend.set_entries(
                [("out of memory: memory its fullest tile needed", OOM), ("fits", FITS)]
            )
        top_lay.addWidget(self.legend)
        split.addWidget(top)
        # the trials table sweep tools have: every configuration, failed ones included
        self.trials = FilterTable("Filter trials (status, option value, message)")
        self.trials_frame = dsm.trials_frame(self.table)
        self.trials.set_frame(self.trials_frame, dsm.trial_columns(self.trials_frame, self.units))
        self.trials.view.selectionModel().currentRowChanged.connect(self._on_trial_row)
        self.trials.view.doubleClicked.connect(lambda _i: self.compare_selected())
        split.addWidget(self.trials)
        split.setSizes([420, 220])
        lay.addWidget(split, 1)
        lay.addWidget(section_label("Selected configuration"))
        self.details = QLabel("Click a point to see its configuration.")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.RichText)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.details)
        row = QHBoxLayout()
        self.open_button = push_button("Open profile", self.open_selected)
        self.compare_button = push_button("Compare with start", self.compare_selected)
        row.addWidget(self.open_button)
        row.addWidget(self.compare_button)
        row.addStretch(1)
        lay.addLayout(row)
        if self.needed is None:
            self._draw()
        else:
            self._draw_needed(self.needed)
        best = meta.get("best_id")
        self.select(int(best) if best is not None else None)
        # it follows the main window's units and closes with it (Esc closes it: keyPressEvent)
        workspace = getattr(window, "workspace", None)
        if workspace is not None:
            workspace.units_changed.connect(self.set_units)
            self.destroyed.connect(lambda *_: workspace.units_changed.disconnect(self.set_units))
        if isinstance(window, QWidget):
            self._closer = _CloseWith(self)
            window.installEventFilter(self._closer)

    def _set_scale(self) -> None:
        tile_bytes = self.points["tile_kib"] * 1024.0
        self._scale, self._unit = axis_scale(
            self.units, float(np.nanmax(tile_bytes)) if np.isfinite(tile_bytes).any() else 0.0
        )
        self._x = tile_bytes / self._scale

    def set_units(self, units: MemoryUnits) -> None:
        """Show memory in ``units`` (the main window's View > Units changed)."""
        self.units = units
        self._set_scale()
        self.trials.set_frame(self.trials_frame, dsm.trial_columns(self.trials_frame, units))
        self.redraw()

    def redraw(self) -> None:
        """Draw the chart again (units or theme changed), the selection kept."""
        selected = self.selected
        item = self.plot.getPlotItem()
        item.clear()
        style_plot(self.plot)
        if self.needed is None:
            item.setLabel("bottom", f"fullest tile ({self._unit})")
            self._draw()
        else:
            self._draw_needed(self.needed)
        self.select(selected)

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key.Key_Escape:  # as a dialog (keys its table left come here)
            self.close()
            return
        super().keyPressEvent(event)

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        # the theme is the application's palette: the chart's colours follow it
        if event.type() == QEvent.Type.PaletteChange and hasattr(self, "scatters"):
            self.redraw()

    # -- content ---------------------------------------------------------------------------
    def _headline(self) -> str:
        m = self.table.meta
        counts = self.table.frame["status"].value_counts().to_dict()
        parts = ", ".join(f"{n} {s}" for s, n in counts.items())
        return (
            f"{m['strategy']} search over {', '.join(m['dimensions'])}: {m['tried']} "
            f"configurations ({parts}); objective {m['objective'].replace('_', ' ')}, "
            f"constraints {', '.join(m['constraints'])}."
        )

    def _any_breaking(self) -> bool:
        p = self.points
        return bool((~p["oom"] & ~p["feasible"]).any())

    def _draw(self) -> None:
        p = self.points
        item = self.plot.getPlotItem()
        ok = ~p["oom"]
        self.scatters: list[pg.ScatterPlotItem] = []
        for sel, colour, symbol in (
            (ok & ~p["feasible"], CONSTRAINT, "o"),
            (ok & p["feasible"], FITS, "o"),
            (p["oom"], OOM, "x"),
        ):
            if not sel.any():
                continue
            ys = np.where(np.isfinite(p["throughput"][sel]), p["throughput"][sel], 0.0)
            self._add_points(self._x[sel], ys, p["id"][sel], colour, symbol)
        front = p["pareto"]
        if front.any():
            order = np.argsort(self._x[front])
            item.addItem(
                pg.PlotDataItem(
                    self._x[front][order],
                    p["throughput"][front][order],
                    pen=pg.mkPen(FRONT, width=2),
                )
            )
        sram = float(p["sram_kib"][0]) * 1024.0 / self._scale
        if np.isfinite(sram):
            item.addItem(
                pg.InfiniteLine(sram, angle=90, pen=pg.mkPen(OOM, style=Qt.PenStyle.DashLine))
            )
        meta = self.table.meta
        self.rings = {}
        start = chart_colors().foreground  # dark on white, light on the dark theme
        for key, colour in (("start_id", start), ("best_id", BEST)):
            rid = meta.get(key)
            hit = np.flatnonzero(p["id"] == rid) if rid is not None else np.array([], np.intp)
            if len(hit):
                i = hit[0]
                y = p["throughput"][i] if np.isfinite(p["throughput"][i]) else 0.0
                ring = pg.ScatterPlotItem(
                    x=[self._x[i]],
                    y=[y],
                    symbol="o",
                    size=20,
                    brush=None,
                    pen=pg.mkPen(colour, width=2),
                )
                item.addItem(ring)
                label = pg.TextItem(key.split("_")[0], color=colour, anchor=(0, 1))
                label.setPos(self._x[i], y)
                item.addItem(label)
                self.rings[key] = (float(self._x[i]), float(y))
        self._add_highlight()

    def _add_points(self, x, y, ids, colour: str, symbol: str) -> None:
        """One clickable scatter of configurations (``ids``), crosses a little larger."""
        sc = pg.ScatterPlotItem(
            x=x,
            y=y,
            data=ids,
            symbol=symbol,
            size=11 if symbol == "x" else 9,
            brush=pg.mkBrush(colour),
            pen=pg.mkPen(colour),
            hoverable=True,
        )
        sc.sigClicked.connect(self._on_clicked)
        self.plot.getPlotItem().addItem(sc)
        self.scatters.append(sc)

    def _add_highlight(self) -> None:
        self.highlight = pg.ScatterPlotItem(
            symbol="o", size=16, brush=None, pen=pg.mkPen(hex_color("status", "info"), width=2)
        )
        self.plot.getPlotItem().addItem(self.highlight)

    def _draw_needed(self, n: dsm.MemoryNeeded) -> None:
        """Nothing has a throughput: each trial at its memory need (fullest tile), the tile's
        memory dashed; a click selects the trial."""
        item = self.plot.getPlotItem()
        need = np.where(np.isfinite(n.tile_bytes), n.tile_bytes, np.nan)
        top = max(float(np.nanmax(need)) if np.isfinite(need).any() else 0.0, n.sram_bytes or 0)
        scale, unit = axis_scale(self.units, top if np.isfinite(top) else 0.0)
        item.setLabel("left", f"memory of the fullest tile ({unit})")
        self._x = np.full(len(self.points["id"]), np.nan)
        self._needed_xy = {}
        self.scatters = []
        ok = np.isfinite(need)
        for sel, colour in ((ok & n.oom, OOM), (ok & ~n.oom, FITS)):
            if not sel.any():
                continue
            symbol = "x" if colour == OOM else "o"
            self._add_points(
                n.ids[sel].astype(float), need[sel] / scale, n.ids[sel], colour, symbol
            )
        for i, y in zip(n.ids[ok], need[ok] / scale, strict=True):
            self._needed_xy[int(i)] = (float(i), float(y))
        if np.isfinite(n.sram_bytes):
            line = pg.InfiniteLine(
                n.sram_bytes / scale,
                angle=0,
                pen=pg.mkPen(OOM, style=Qt.PenStyle.DashLine),
                label=f"tile memory {fmt_bytes(n.sram_bytes, self.units)}",
                labelOpts={"position": 0.05, "color": OOM, "anchors": [(0, 1), (0, 1)]},
            )
            item.addItem(line)
        item.setYRange(0, (top if np.isfinite(top) and top > 0 else 1.0) / scale * 1.15, padding=0)
        item.setXRange(float(n.ids.min()) - 0.6, float(n.ids.max()) + 0.6, padding=0)
        # trial numbers are whole: ticks at whole trials only (it read "trial # -0.5")
        span = int(n.ids.max() - n.ids.min()) + 1
        major = max(1, int(np.ceil(span / 10)))
        item.getAxis("bottom").setTickSpacing(major, major)
        title = "Nothing fits: the memory each trial needed"
        if n.refused:
            title += f" ({n.refused} refused before compiling: see the table)"
        item.setTitle(title, size="9pt")
        self._add_highlight()

    # -- selection ----------------------------------------------------------------------------
    def _on_clicked(self, _scatter, points, ev=None) -> None:
        if not len(points):
            return
        self.select(int(points[0].data()))
        if ev is not None and hasattr(ev, "double") and ev.double():
            self.compare_selected()

    def select(self, row_id: int | None) -> None:
        """Select a configuration by its row id (the results table's ``id``)."""
        self.selected = row_id
        df = self.table.frame
        rows = df[df["id"] == row_id] if row_id is not None else df.iloc[0:0]
        if row_id is None or not len(rows):
            self.details.setText("Click a point to see its configuration.")
            self.highlight.setData([], [])
            self._update_buttons()
            return
        r = rows.iloc[0]
        p = self.points
        hit = np.flatnonzero(p["id"] == row_id)
        if self.needed is not None:
            xy = self._needed_xy.get(int(row_id))
            self.highlight.setData(*([[xy[0]], [xy[1]]] if xy else [[], []]))
        elif len(hit):
            y = p["throughput"][hit[0]]
            self.highlight.setData([self._x[hit[0]]], [y if np.isfinite(y) else 0.0])
        else:
            self.highlight.setData([], [])
        meta = self.table.meta
        opts = ", ".join(f"<code>{k}</code> = {r[k]}" for k in meta["dimensions"] if k in r)
        figs = "; ".join(
            f"{label} {_fmt(k, r[k])}"
            for k, label in (
                ("throughput_samples_per_s", "samples/s"),
                ("max_tile_memory_bytes", "fullest tile"),
                ("headroom_bytes", "headroom"),
                ("peak_memory_bytes", "peak memory"),
                ("oom_tiles", "OOM tiles"),
            )
        )
        figs += _range_words(r)
        tags = []
        if row_id == meta.get("best_id"):
            tags.append("best")
        if row_id == meta.get("start_id"):
            tags.append("start")
        if bool(r["pareto"]):
            tags.append("on the Pareto front")
        tag = f" ({', '.join(tags)})" if tags else ""
        note = dsm.compare_note(self.table, row_id)
        self.details.setText(
            f"<b>#{int(r['id'])}</b>{tag}: {lit(r['status'])}; {opts}<br>{figs}"
            + (f"<br>{lit(r['message'])}" if r["message"] else "")
            + (f"<br><i>{lit(note)}</i>" if note else "")
        )
        self.compare_button.setToolTip(note)
        self._select_trial_row(row_id)
        self._update_buttons()

    def _on_trial_row(self, current, _previous=None) -> None:
        if not current.isValid():
            return
        row = self.trials.proxy.mapToSource(current).row()
        row_id = int(self.trials.model.raw(row, self.trials.model.column_of("id")))
        if row_id != self.selected:
            self.select(row_id)

    def _select_trial_row(self, row_id: int | None) -> None:
        """Show the selection in the trials table (without re-selecting)."""
        model, proxy = self.trials.model, self.trials.proxy
        if row_id is None or model.rowCount() == 0:
            return
        col = model.column_of("id")
        for r in range(model.rowCount()):
            if int(model.raw(r, col)) == row_id:
                index = proxy.mapFromSource(model.index(r, 0))
                if index.isValid() and self.trials.view.currentIndex().row() != index.row():
                    self.trials.view.setCurrentIndex(index)
                return

    def selected_profile(self) -> Path | None:
        return None if self.selected is None else self.table.profile(self.selected)

    def _update_buttons(self) -> None:
        prof = self.selected_profile()
        has_window = self.main_window is not None
        self.open_button.setEnabled(prof is not None and has_window)
        start = self.table.start_profile
        self.compare_button.setEnabled(
            prof is not None and start is not None and has_window and prof != start
        )

    def open_selected(self) -> None:
        prof = self.selected_profile()
        if prof is not None and self.main_window is not None:
            self.main_window.open_files([prof])

    def compare_selected(self) -> None:
        prof, start = self.selected_profile(), self.table.start_profile
        if prof is not None and start is not None and self.main_window is not None:
            self.main_window.open_compare(start, prof)


#: Open windows (kept alive while shown).
_OPEN: set[DesignSpaceWindow] = set()


class _CloseWith(QObject):
    """Closes its Design space when the main window closes (File > Quit left it running, and
    the process with it, until it was closed too)."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self._window = window  # its parent, kept with its type (parent() is a QObject or None)

    def eventFilter(self, obj: object, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Close:
            self._window.close()
        return False


def open_design_space(window, folder: str | Path) -> DesignSpaceWindow | None:
    """Show the Design space of ``folder``; a folder that is not a tune's output gives one
    sentence in a dialog."""
    from profiles.errors import UserFacingError

    try:
        view = DesignSpaceWindow(folder, window)
    except UserFacingError as exc:
        QMessageBox.warning(window, "Cannot open the tune results", str(exc))
        return None
    _OPEN.add(view)
    view.destroyed.connect(lambda *_: _OPEN.discard(view))
    view.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    view.show()
    return view


def open_design_space_dialog(window) -> DesignSpaceWindow | None:
    """Menu action: choose a tune folder (``analyse tune -o``), then show its Design space."""
    folder = QFileDialog.getExistingDirectory(window, "Open tune results (the analyse tune folder)")
    if not folder:
        return None
    return open_design_space(window, folder)


def _range_words(r) -> str:
    """The throughput's range and the change from the start with its range (tune's interval
    columns; docs/fidelity.md, "Calibrated intervals"), or why there is none; '' for older tables."""
    if "throughput_low" not in r.index:
        return ""
    lo, hi, ch = r["throughput_low"], r["throughput_high"], r.get("throughput_change")
    clo, chi = r.get("throughput_change_low"), r.get("throughput_change_high")
    ok = all(isinstance(v, int | float) and np.isfinite(v) for v in (lo, hi))
    level = r.get("interval_level")
    level = f"{100 * level:.0f}% " if isinstance(level, int | float) and np.isfinite(level) else ""
    if not ok:
        note = r.get("interval_note") or "outside the validated range"
        return f"<br>throughput: {lit(str(note))}"
    out = f"<br>throughput {level}range {_fmt('throughput_samples_per_s', lo)} to "
    out += f"{_fmt('throughput_samples_per_s', hi)}"
    if all(isinstance(v, int | float) and np.isfinite(v) for v in (ch, clo, chi)) and ch:
        out += f"; vs the start {100 * ch:+.0f}% ({level}range {100 * clo:+.0f}% to "
        out += f"{100 * chi:+.0f}%)"
    return out + f" [{lit(str(r.get('interval_classes') or ''))}]"
