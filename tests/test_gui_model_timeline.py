"""The Execution Trace timeline's view-model (analyser.gui.model.timeline), without Qt: the lane
layout's placement invariants with folds, pins and scrolling, the rectangles as drawn and the
kept flows (the view only draws; pins as PopVision marks them)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analyser.gui.model.timeline import (
    LANE_FILL,
    PIN,
    LaneLayout,
    kept_flows,
    step_rects,
)
from analyser.trace.results import Flows, TypeRects, WindowResult


class FakeTrace:
    """The two things a layout asks a trace: its IPUs and each IPU's lanes under a grouping."""

    n_ipus = 3
    LANES = {0: ("a", "b", "c"), 1: ("d", "e"), 2: ("f", "g", "h", "i")}

    def ipu_lanes(self, group: str, ipu: int):
        if group == "flat":
            return ("steps",), np.zeros(1, dtype=np.int64)
        names = self.LANES[ipu]
        return names, np.arange(len(names), dtype=np.int64) + 10 * ipu


HOST = pd.DataFrame({"lane": ["main", "loader"], "kind": ["call", "waitLoader"]})


def _rows(layout: LaneLayout) -> list:
    """Every shown (group, row) with its screen y, from the inverse map."""
    return sorted((y, layout.at(y + 0.5)) for y in range(layout.n_lanes + 2) if layout.at(y + 0.5))


def test_unpinned_layout_places_every_lane_once_in_order():
    lay = LaneLayout.build(FakeTrace(), "operation", HOST, set())
    assert lay.n_lanes == 3 + 2 + 4 + 2
    assert lay.ipu_base == {0: 0, 1: 3, 2: 5} and lay.host_base == 9
    shown = _rows(lay)
    assert [y for y, _ in shown] == list(range(11))
    assert [hit[0] for _y, hit in shown] == [("ipu", 0)] * 3 + [("ipu", 1)] * 2 + [
        ("ipu", 2)
    ] * 4 + [("host",)] * 2
    # lane ids map back to their rows; labels sit at the lane centres
    assert lay.lane_at(3.5) == (1, 10) and lay.lane_y(2, np.array([21, 23])).tolist() == [6, 8]
    assert lay.labels[0] == (0.5, "▾ IPU 0 · a") and lay.labels[-1] == (10.5, "Host · loader")
    assert lay.separators == [3.0, 5.0, 9.0, 11.0]


def test_folded_groups_take_one_lane_and_map_every_lane_there():
    lay = LaneLayout.build(FakeTrace(), "operation", HOST, {("ipu", 2), ("host",)})
    assert lay.n_lanes == 3 + 2 + 1 + 1 and lay.host_folded
    assert lay.ipu_lanes[2] == ("4 lanes",)
    assert (lay.lane_y(2, np.array([20, 21, 23])) == 5).all()
    assert (5.5, "▸ IPU 2 · 4 lanes") in lay.labels and (6.5, "▸ Host · 2 lanes") in lay.labels


def test_pinned_lanes_stay_on_top_and_the_others_scroll_under_them():
    pins = [("ipu", 2, "h"), ("host", "main"), ("ipu", 9, "nowhere")]
    lay = LaneLayout.build(FakeTrace(), "operation", HOST, set(), pins)
    assert lay.n_pinned == 2  # the pin of a lane this layout does not have is left out
    assert lay.lane_at(0.5) == (2, 22) and lay.host_row_at(1.5) == 0
    assert lay.labels[0][1] == PIN + "IPU 2 · h" and lay.labels[1][1] == PIN + "Host · main"
    assert lay.separators[0] == 2.0
    n = lay.n_lanes
    for scroll in range(lay.max_scroll(5) + 1):
        lay.place(scroll)
        shown = _rows(lay)
        # the pins first, whatever the scroll; the rest in order from the scroll position
        assert [hit for _y, hit in shown[:2]] == [(("ipu", 2), 2), (("host",), 0)]
        rest = [hit for _y, hit in shown[2:]]
        assert len(rest) == n - 2 - scroll
        assert [y for y, _hit in shown] == list(range(n - scroll))
        ys = lay.row_y(("ipu", 0), np.arange(3))
        assert (np.isnan(ys) == (np.arange(3) < scroll)).all()  # scrolled away: hidden
    # the last row comes into view at the largest scroll with 5 rows on the screen
    lay.place(lay.max_scroll(5))
    assert lay.at(4.5) == (("host",), 1)
    # scroll_to: a hidden lane's scroll position shows it; a pinned one needs none
    lay.place(lay.max_scroll(5))
    top = lay.scroll_to(("ipu", 0), 0, 5)
    lay.place(top)
    assert 2 <= lay.row_y(("ipu", 0), 0) < 5
    assert lay.scroll_to(("ipu", 2), 2, 5) is None


def test_step_rects_stripes_inside_their_lane_and_leave_hidden_lanes_out():
    lay = LaneLayout.build(FakeTrace(), "operation", HOST, set(), [("ipu", 1, "e")])
    lay.place(2)  # IPU 0's first two lanes scrolled away
    rects = TypeRects(
        "OnTileExecute",
        x0=np.array([0.0, 10.0, 20.0]),
        x1=np.array([5.0, 12.0, 30.0]),
        lane=np.array([0, 2, 2], dtype=np.int32),
        count=np.array([1, 4, 1]),
        row=np.array([7, 8, 9]),
        y0=np.array([0.0, 0.25, 0.0]),
        y1=np.array([1.0, 0.75, 1.0]),
    )
    res = WindowResult(0, 0.0, 40.0, 100, "operation", (), {"OnTileExecute": rects}, "rows", 6)
    parts, named = step_rects(res, lambda lanes: lay.lane_y(0, lanes), min_label=3.0)
    arr = parts["OnTileExecute"]
    assert len(arr) == 2  # lane 0 is hidden
    lane2_y = lay.lane_y(0, np.array([2]))[0]
    stripe = arr[0]
    # a stripe keeps its share of the lane's filled height, inside the lane
    assert stripe[3] == pytest.approx(0.5 * LANE_FILL)
    assert lane2_y <= stripe[1] and stripe[1] + stripe[3] <= lane2_y + 1
    # only single steps wide enough carry their name
    assert [(n, rows.tolist()) for n, _a, rows in named] == [("OnTileExecute", [9])]


def test_kept_flows_cover_a_narrower_window_only():
    fl = Flows(
        np.array(["exchange", "sync"], dtype=object),
        np.array([0, 1]),
        np.array([3, 4]),
        np.array([10.0, 500.0]),
        np.array([1, 0]),
        np.array([5, 6]),
        np.array([20.0, 510.0]),
    )
    cache = ((0.0, 1000.0), fl)
    assert kept_flows(None, 0, 10) is None
    inside = kept_flows(cache, 0.0, 200.0)
    assert inside is not None and inside.kind.tolist() == ["exchange"]
    assert kept_flows(cache, 0.0, 100.0) is None  # the kept query is over 6 times wider
    assert kept_flows(cache, -10.0, 200.0) is None  # not covered
