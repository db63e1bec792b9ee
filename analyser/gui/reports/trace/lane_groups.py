"""The timeline's lane groups (an IPU's lanes, the host's) and lanes: folding a group into one
lane, pinning a lane to the top (Perfetto's pinned tracks: it stays there while the other lanes
scroll), the lane menu of a right click, and the host lanes' drawing and hit test. Where the lanes sit is
the view-model's (:class:`analyser.gui.model.timeline.LaneLayout`); this is the part of
:class:`analyser.gui.reports.trace.timeline.TimelineView` that changes it."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QMenu

from analyser.gui.model import timeline as model
from analyser.gui.model.trace import HOST_EVENTS
from analyser.gui.palette import qcolor
from analyser.gui.reports.trace.lane_items import light_fill


class LaneGroups:
    """Fold, pin and the host lanes of a :class:`TimelineView` (a mixin: the view owns the
    trace, the layout, the items and the per-trace state it reads)."""

    # -- the layout's figures, as the view's (tests and the report read them) --------------------
    @property
    def ipu_base(self) -> dict[int, int]:
        """Screen row of each IPU's first lane."""
        return self.lane_layout.ipu_base

    @property
    def ipu_lanes(self) -> dict[int, tuple[str, ...]]:
        """The names of each IPU's lanes."""
        return self.lane_layout.ipu_lanes

    @property
    def host_lanes(self) -> tuple[str, ...]:
        """The host lanes the profile records (main, loader)."""
        return self.lane_layout.host_lanes

    @property
    def host_base(self) -> int:
        """Screen row of the first host lane."""
        return self.lane_layout.host_base

    @property
    def n_lanes(self) -> int:
        """Lanes of the view (IPUs' and host's; folded groups count one)."""
        return self.lane_layout.n_lanes

    # -- lane groups (folded / unfolded, pinned, per IPU and the host) ---------------------------
    def _lane_state(self) -> dict:
        """The folded and pinned groups of the shown trace (kept per trace)."""
        if self.trace is None:
            return {"folded": set(), "pinned": []}
        return self._lanes_by_trace.setdefault(self.trace, {"folded": set(), "pinned": []})

    @property
    def folded(self) -> set:
        """The folded lane groups of the shown trace: ("ipu", i) and / or ("host",)."""
        return self._lane_state()["folded"]

    @property
    def pinned(self) -> list:
        """The pinned lanes of the shown trace (their pins), in the order pinned."""
        return self._lane_state()["pinned"]

    def group_of(self, ipu: int) -> str:
        """The grouping IPU ``ipu``'s lanes are drawn with: "flat" (one lane) when folded."""
        return "flat" if ("ipu", ipu) in self.folded else self.group

    @property
    def host_folded(self) -> bool:
        """True when the host's lanes are folded into one."""
        return self.lane_layout.host_folded

    @property
    def n_host_rows(self) -> int:
        """Lanes the host takes."""
        return self.lane_layout.n_host_rows

    def _relayout(self) -> None:
        """Lay out again and redraw, the selection kept."""
        self._layout_lanes()
        self.redraw()
        if self.selected_row is not None:
            self.select_row(self.selected_row, center=False)
        elif self.selected_host is not None:
            self.select_host(self.selected_host)

    def toggle_group(self, key: tuple) -> None:
        """Fold or unfold a lane group (an IPU's lanes in a grouped view, or the host's)."""
        self.folded.symmetric_difference_update({key})
        self._relayout()

    def toggle_group_at(self, y: float) -> None:
        """A click on the lane label at height ``y``: fold / unfold its group."""
        key = self.lane_layout.group_at(y)
        if key == ("host",):
            if len(self.host_lanes) > 1:
                self.toggle_group(key)
        elif key is not None and self.group != "flat":
            self.toggle_group(key)

    def toggle_pin(self, pin: tuple) -> bool:
        """Pin the lane ``pin`` names (``("ipu", i, lane name)`` or ``("host", lane name)``,
        :meth:`LaneLayout.pin_of`) to the top, where it stays while the other lanes scroll, or
        unpin it: True when it is pinned now."""
        pins = self.pinned
        if pin in pins:
            pins.remove(pin)
        else:
            pins.append(pin)
        self._relayout()
        return pin in pins

    def pin_key(self) -> tuple | None:
        """The lane P acts on: the one under the pointer, else the selected step's or host
        event's (its pin, see :meth:`toggle_pin`)."""
        vb = self.getPlotItem().getViewBox()
        scene = self.mapToScene(self.viewport().mapFromGlobal(QCursor.pos()))
        hit = None
        if vb.sceneBoundingRect().contains(scene):
            hit = self.lane_layout.at(float(vb.mapSceneToView(scene).y()))
        if hit is None and self._highlighted is not None:
            hit = self._highlighted[2:]
        return None if hit is None else self.lane_layout.pin_of(*hit)

    def lane_menu(self, y: float) -> QMenu | None:
        """The menu of the lane at height ``y``: pin / unpin it, fold / unfold its group."""
        hit = self.lane_layout.at(y)
        if hit is None:
            return None
        key, index = hit
        menu = QMenu(self)
        pin = self.lane_layout.pin_of(key, index)
        verb = "Unpin " if pin in self.pinned else "Pin to top: "
        action = menu.addAction(verb + self.lane_layout.pin_label(key, index) + " (P)")
        action.setToolTip("A pinned lane stays at the top while the other lanes scroll.")
        action.triggered.connect(lambda: self.toggle_pin(pin))
        if (key == ("host",) and len(self.host_lanes) > 1) or (
            key != ("host",) and self.group != "flat"
        ):
            name = "the host lanes" if key == ("host",) else f"IPU {key[1]}"
            fold = menu.addAction(("Unfold " if key in self.folded else "Fold ") + name)
            fold.triggered.connect(lambda: self.toggle_group(key))
        return menu

    def show_lane_menu(self, y: float, screen_pos) -> None:
        """Open :meth:`lane_menu` at ``screen_pos`` (a right click on a lane or its label)."""
        menu = self.lane_menu(y)
        if menu is not None:
            menu.exec(screen_pos)

    # -- the host lanes --------------------------------------------------------------------------
    def host_lane_of(self, row: int) -> float:
        """The screen row (y) of host event ``row`` (NaN when scrolled away)."""
        index = model.host_lane_index(self.lane_layout, self.host, row)
        return float(self.lane_layout.row_y(("host",), index))

    def _draw_host(self) -> None:
        """The host events, one group per kind (a handful of rows: drawn once, whole)."""
        rects, kind = model.host_rects(self.lane_layout, self.host)
        if not len(rects):
            self.host_items.set_groups([])
            self.host_labels.set_labels(np.zeros((0, 4)), [], np.zeros(0, dtype=bool))
            return
        self.host_items.set_groups(
            [(self._host_brushes[k], rects[kind == k]) for k in HOST_EVENTS if (kind == k).any()]
        )
        dark = np.array([light_fill(qcolor("host_events", k)) for k in kind], dtype=bool)
        if self.host_folded:  # the lanes' events overlap in one lane: no names over each other
            rects, kind, dark = rects[:0], kind[:0], dark[:0]
        self.host_labels.set_labels(rects, [str(k) for k in kind], dark)

    def host_at(self, x: float, y: float, tolerance: float = 0.0) -> int | None:
        """Row of the host event under data point (x, y), the shortest when several touch it."""
        return model.host_at(self.lane_layout, self.host, x, y, tolerance)

    def host_details(self, row: int) -> dict:
        """The fields of host event ``row`` for the details panel."""
        return model.host_details(self.host, row)
