"""The Execution Trace timeline's view-model (no Qt): where every lane sits and what the view
draws there, so that :mod:`analyser.gui.reports.trace.timeline` only paints and handles input.

* :class:`LaneLayout`: the lanes (one block per IPU, its lanes in a grouped view; then the
  host's lanes), folded groups (one lane) and pinned lanes (Perfetto's pinned tracks: drawn
  first and kept at the top while the other lanes scroll under them), and their placement on
  the screen for a scroll position: the y of every lane, the labels, the separators and the
  inverse (which lane is at a height).
* :func:`step_rects`: a window query's rectangles (striped by step-type share per pixel, see
  :meth:`analyser.trace.window.TraceWindow.window`) as ``(x, y, width, height)`` arrays per
  step type, and the single steps wide enough to carry their name (:func:`pick_labels`).
* :func:`kept_flows`, the host lane's hit test and details, and the tooltip texts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analyser.gui.model.trace import HOST_LANES, ColumnTable, Flows, TraceWindow, WindowResult

#: Height of a step rectangle inside its lane (1.0 = whole lane).
LANE_FILL = 0.8
#: Most step names drawn at once (the widest slices first).
MAX_LABELS = 3000
#: Most flow arrows a query returns.
MAX_FLOWS = 500
FLOW_FIELDS = ("kind", "src_ipu", "src_row", "x0", "dst_ipu", "dst_row", "x1")
#: The mark of a pinned group's label.
PIN = "⚑ "

#: A lane group: ("ipu", i) for an IPU's lanes, ("host",) for the host's.
Group = tuple


def lane_label(ipu: int, name: str, width: int = 30) -> str:
    """'IPU i · name', without a repeated 'ipuI/' prefix, elided in the middle."""
    prefix = f"ipu{ipu}/"
    if name.startswith(prefix):
        name = name[len(prefix) :]
    if len(name) > width:
        keep = width - 1
        name = name[: keep // 2] + "…" + name[-(keep - keep // 2) :]
    return f"IPU {ipu} · {name}"


@dataclass
class _Block:
    """The lanes of one group: an IPU's (global lane ids) or the host's (host lane indices)."""

    key: Group
    ids: np.ndarray
    #: the lanes' names (an IPU's: its lanes under the grouping, "n lanes" when folded)
    names: tuple[str, ...]
    labels: list[str]
    #: folded: one lane standing for ``n_group`` lanes
    folded: bool = False


@dataclass
class LaneLayout:
    """The timeline's lanes for one trace, grouping, fold and pin state, and their placement.

    Rows run: the pinned lanes (in the order pinned), then every IPU's other lanes in IPU order,
    then the host's. :meth:`place` puts them on the screen: pinned lane ``i`` at ``y = i``
    always, every other row ``j`` at ``y = pins + j - scroll``, hidden when ``j < scroll`` (it
    has scrolled away under the pinned lanes). A pin names its lane (``("ipu", i, name)`` or
    ``("host", name)``), so it holds across folds and comes back with its grouping."""

    group: str = "flat"
    blocks: list[_Block] = field(default_factory=list)
    host_lanes: tuple[str, ...] = ()
    #: the pinned lanes shown: (group, row of the group), in the order pinned
    pins: tuple[tuple[Group, int], ...] = ()
    n_ipus: int = 0
    # placement (see place)
    scroll: int = 0
    ipu_base: dict[int, int] = field(default_factory=dict)
    host_base: int = 0
    labels: list[tuple[float, str]] = field(default_factory=list)
    separators: list[float] = field(default_factory=list)
    _y: dict[Group, np.ndarray] = field(default_factory=dict)
    _at: dict[int, tuple[Group, int]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        trace: TraceWindow | None,
        group: str,
        host: ColumnTable,
        folded: set,
        pinned: list | tuple = (),
    ) -> LaneLayout:
        """The lanes of ``trace`` under ``group`` with the ``folded`` groups and the
        ``pinned`` lanes (pins naming no lane of this layout are left out)."""
        blocks: list[_Block] = []
        n_ipus = 0 if trace is None else trace.n_ipus
        for ipu in range(n_ipus):
            assert trace is not None  # n_ipus is 0 without a trace
            names, ids = trace.ipu_lanes(group, ipu)
            if not len(ids):
                names, ids = ("(no steps)",), np.zeros(1, dtype=np.int64)
            n_group = len(names)
            key = ("ipu", ipu)
            fold = key in folded and group != "flat"
            if fold:
                labels = [f"▸ IPU {ipu} · {n_group} lanes"]
                names, ids = (f"{n_group} lanes",), np.zeros(1, dtype=np.int64)
            elif group == "flat":
                labels = [f"IPU {ipu}"]
            else:
                labels = [
                    ("▾ " if i == 0 else "") + lane_label(ipu, n) for i, n in enumerate(names)
                ]
            blocks.append(_Block(key, np.asarray(ids, dtype=np.int64), tuple(names), labels, fold))
        present = set(host["lane"]) if len(host) else set()
        host_lanes = tuple(lane for lane in HOST_LANES if lane in present)
        if host_lanes:
            fold = ("host",) in folded and len(host_lanes) > 1
            names = host_lanes
            if fold:
                labels = [f"▸ Host · {len(host_lanes)} lanes"]
                names = (f"{len(host_lanes)} lanes",)
            else:
                mark = "▾ " if len(host_lanes) > 1 else ""
                labels = [
                    (mark if i == 0 else "") + f"Host · {h}" for i, h in enumerate(host_lanes)
                ]
            ids = np.arange(len(labels), dtype=np.int64)
            blocks.append(_Block(("host",), ids, names, labels, fold))
        out = cls(group, blocks, host_lanes, (), n_ipus)
        rows = [out.row_of_pin(p) for p in pinned]
        out.pins = tuple(dict.fromkeys(r for r in rows if r is not None))
        out.place(0)
        return out

    # -- structure --------------------------------------------------------------------------
    @property
    def n_lanes(self) -> int:
        """Rows (at least one)."""
        return max(1, sum(len(b.labels) for b in self.blocks))

    @property
    def n_pinned(self) -> int:
        """Pinned lanes (kept at the top)."""
        return len(self.pins)

    def block(self, key: Group) -> _Block | None:
        """The block of group ``key``, or None."""
        return next((b for b in self.blocks if b.key == key), None)

    def _known_block(self, key: Group) -> _Block:
        """The block of group ``key``, which the caller took from this layout (a key of
        another layout is a bug: KeyError naming it)."""
        b = self.block(key)
        if b is None:
            raise KeyError(f"no lane group {key!r} in this layout")
        return b

    def pin_of(self, key: Group, index: int) -> tuple:
        """The pin naming row ``index`` of group ``key``."""
        return (*key, self._known_block(key).names[index])

    def row_of_pin(self, pin: tuple) -> tuple[Group, int] | None:
        """(group, row) of the lane ``pin`` names, or None when this layout has no such lane."""
        b = self.block(tuple(pin[:-1]))
        if b is None or pin[-1] not in b.names:
            return None
        return b.key, b.names.index(pin[-1])

    def pin_label(self, key: Group, index: int) -> str:
        """The name of a lane in a menu: its label without the fold mark."""
        return self._known_block(key).labels[index].removeprefix("▾ ").removeprefix("▸ ")

    @property
    def ipu_lanes(self) -> dict[int, tuple[str, ...]]:
        """The names of every IPU's lanes (one "n lanes" when folded)."""
        return {b.key[1]: b.names for b in self.blocks if b.key[0] == "ipu"}

    @property
    def ipu_lane_ids(self) -> dict[int, np.ndarray]:
        """The global lane ids of every IPU's rows, in display order."""
        return {b.key[1]: b.ids for b in self.blocks if b.key[0] == "ipu"}

    def folded(self, key: Group) -> bool:
        """True when group ``key`` is drawn folded into one lane."""
        b = self.block(key)
        return b is not None and b.folded

    @property
    def host_folded(self) -> bool:
        """True when the host's lanes are folded into one."""
        return self.folded(("host",))

    @property
    def n_host_rows(self) -> int:
        """Rows the host takes (0 without host lanes)."""
        b = self.block(("host",))
        return 0 if b is None else len(b.labels)

    def longest_label(self) -> int:
        """Characters of the longest label (pin mark included): the label axis' width."""
        longest = max((len(lab) for b in self.blocks for lab in b.labels), default=6)
        return longest + (len(PIN) if self.pins else 0)

    # -- placement ---------------------------------------------------------------------------
    def max_scroll(self, visible: int) -> int:
        """The largest scroll position with ``visible`` rows on the screen."""
        return max(0, self.n_lanes - max(visible, self.n_pinned + 1))

    def place(self, scroll: int) -> None:
        """Place the rows for scroll position ``scroll`` (the unpinned rows scrolled away are
        hidden): y of every row, labels, separators, the row at each height."""
        self.scroll = scroll = max(0, int(scroll))
        p = self.n_pinned
        self._y = {b.key: np.full(len(b.labels), np.nan) for b in self.blocks}
        self._at, self.labels, self.separators = {}, [], []
        for y, (key, i) in enumerate(self.pins):
            self._y[key][i] = y
            self.labels.append((y + 0.5, PIN + self.pin_label(key, i)))
            self._at[y] = (key, i)
        if p:
            self.separators.append(float(p))
        pinned = set(self.pins)
        self.ipu_base = {}
        j = 0  # row among the unpinned
        for b in self.blocks:
            first, end = True, None
            for i in range(len(b.labels)):
                if (b.key, i) in pinned:
                    continue
                y = p + j - scroll
                if first:
                    if b.key[0] == "ipu":
                        self.ipu_base[b.key[1]] = y
                    else:
                        self.host_base = y
                    first = False
                if j >= scroll:
                    self._y[b.key][i] = end = y
                    self.labels.append((y + 0.5, b.labels[i]))
                    self._at[y] = (b.key, i)
                j += 1
            if end is not None:
                self.separators.append(float(end + 1))
        if self.block(("host",)) is None:
            self.host_base = p + j - scroll

    def row_y(self, key: Group, index: np.ndarray | int) -> np.ndarray:
        """Screen y of rows ``index`` of group ``key`` (NaN: hidden or no such group)."""
        y = self._y.get(key)
        index = np.asarray(index, dtype=np.int64)
        if y is None:
            return np.full(index.shape, np.nan)
        return y[np.clip(index, 0, len(y) - 1)]

    def lane_y(self, ipu: int, lanes: np.ndarray) -> np.ndarray:
        """Screen y of IPU ``ipu``'s global lane ids ``lanes`` (its first row when folded or
        for a lane it does not show; NaN when hidden)."""
        b = self.block(("ipu", ipu))
        lanes = np.asarray(lanes, dtype=np.int64)
        if b is None:
            return np.full(lanes.shape, np.nan)
        if b.folded:
            return self.row_y(b.key, np.zeros(lanes.shape, dtype=np.int64))
        local = np.zeros(int(max(b.ids.max(), lanes.max(initial=0))) + 1, dtype=np.int64)
        local[b.ids] = np.arange(len(b.ids))
        return self.row_y(b.key, local[np.clip(lanes, 0, len(local) - 1)])

    def at(self, y: float) -> tuple[Group, int] | None:
        """(group, row of the group) of the lane at screen height ``y``, or None."""
        if not y >= 0:
            return None
        return self._at.get(int(y))

    def lane_at(self, y: float) -> tuple[int, int] | None:
        """(IPU, global lane id) of the IPU lane at screen height ``y``, or None."""
        hit = self.at(y)
        if hit is None or hit[0][0] != "ipu":
            return None
        key, i = hit
        return key[1], int(self._known_block(key).ids[i])

    def host_row_at(self, y: float) -> int | None:
        """Index in :attr:`host_lanes` of the host lane at height ``y`` (0 when folded)."""
        hit = self.at(y)
        if hit is None or hit[0] != ("host",):
            return None
        return hit[1]

    def group_at(self, y: float) -> Group | None:
        """The lane group at screen height ``y``."""
        hit = self.at(y)
        return None if hit is None else hit[0]

    def ipus_between(self, y0: float, y1: float) -> list[int]:
        """The IPUs with a row shown between screen heights ``y0`` and ``y1``, in IPU order."""
        out = []
        for b in self.blocks:
            y = self._y[b.key]
            if b.key[0] == "ipu" and ((y + 1 >= y0) & (y <= y1)).any():
                out.append(b.key[1])
        return sorted(out)

    def scroll_to(self, key: Group, index: int, visible: int) -> int | None:
        """The scroll position that shows row ``index`` of group ``key`` (None: it shows)."""
        y = self.row_y(key, index)
        if (key, index) in self.pins or (np.isfinite(y) and y < visible - 0.5):
            return None
        pinned = set(self.pins)
        j = 0
        for b in self.blocks:
            if b.key == key:
                j += sum((key, i) not in pinned for i in range(index))
                break
            j += sum((b.key, i) not in pinned for i in range(len(b.labels)))
        room = max(1, visible - self.n_pinned)
        return max(0, min(j - room // 2, self.max_scroll(visible)))


# -- what the view draws ------------------------------------------------------------------
def step_rects(
    res: WindowResult, lane_y: Callable[[np.ndarray], np.ndarray], min_label: float
) -> tuple[dict[str, np.ndarray], list[tuple[str, np.ndarray, np.ndarray]]]:
    """The window's rectangles as ``(x, y, width, height)`` rows per step type, placed by
    ``lane_y`` (global lane ids to screen y; hidden lanes left out), each pixel's stripes
    (their share of the lane's height) inside the lane; and, per type, the single steps at
    least ``min_label`` cycles wide (rectangles and rows) that carry their name."""
    parts: dict[str, np.ndarray] = {}
    labelled = []
    for name, r in res.rects.items():
        y = lane_y(np.asarray(r.lane))
        shown = np.isfinite(y)
        arr = np.empty((len(r), 4), dtype=np.float64)
        arr[:, 0] = r.x0
        arr[:, 1] = y + (1 - LANE_FILL) / 2
        arr[:, 2] = r.x1 - r.x0
        arr[:, 3] = LANE_FILL
        if r.y0 is not None:
            arr[:, 1] += r.y0 * LANE_FILL
            arr[:, 3] = (r.y1 - r.y0) * LANE_FILL
        if not shown.all():
            arr, rows, count = arr[shown], r.row[shown], r.count[shown]
        else:
            rows, count = r.row, r.count
        parts[name] = arr
        wide = np.flatnonzero((count == 1) & (arr[:, 2] >= min_label))
        if len(wide):
            labelled.append((name, arr[wide], rows[wide]))
    return parts, labelled


def pick_labels(
    rects: np.ndarray, rows: np.ndarray, dark: np.ndarray, t0: float, t1: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The :data:`MAX_LABELS` labelled slices with the most of their width in ``[t0, t1]``."""
    if len(rows) <= MAX_LABELS:
        return rects, rows, dark
    seen = np.minimum(rects[:, 0] + rects[:, 2], t1) - np.maximum(rects[:, 0], t0)
    keep = np.argsort(-seen, kind="stable")[:MAX_LABELS]
    return rects[keep], rows[keep], dark[keep]


def kept_flows(cache: Any, t0: float, t1: float) -> Flows | None:
    """The flows of ``[t0, t1)`` from the kept query ``cache`` (``((c0, c1), flows)``) when it
    covers the window (and is not more than 6 times wider), else None."""
    if cache is None:
        return None
    (c0, c1), fl = cache
    span = t1 - t0
    if not (c0 <= t0 and t1 <= c1 and (c1 - c0) <= 6 * span + 1):
        return None
    if fl.too_many:
        return fl
    if len(fl) >= MAX_FLOWS:  # capped: the kept arrows may miss some of this window
        if (c0, c1) != (t0, t1):
            return None
        return fl
    keep = (np.maximum(fl.x0, fl.x1) >= t0) & (np.minimum(fl.x0, fl.x1) <= t1)
    return Flows(**{f: getattr(fl, f)[keep] for f in FLOW_FIELDS}, too_many=False)


# -- the host lanes -----------------------------------------------------------------------
def host_rects(layout: LaneLayout, host: ColumnTable) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y, width, height)`` of every host event on the screen, and its kind."""
    if not layout.host_lanes or not len(host):
        return np.zeros((0, 4)), np.zeros(0, dtype=object)
    index = {h: i for i, h in enumerate(layout.host_lanes)}
    lane = np.array([index[x] for x in host["lane"]], dtype=np.int64)
    if layout.host_folded:
        lane[:] = 0
    y = layout.row_y(("host",), lane)
    rects = np.empty((len(host), 4), dtype=np.float64)
    rects[:, 0] = host["start"].astype(np.float64)
    rects[:, 1] = y + (1 - LANE_FILL) / 2
    rects[:, 2] = (host["end"] - host["start"]).astype(np.float64)
    rects[:, 3] = LANE_FILL
    shown = np.isfinite(y)
    return rects[shown], host["kind"][shown]


def host_at(
    layout: LaneLayout, host: ColumnTable, x: float, y: float, tolerance: float = 0.0
) -> int | None:
    """Row of the host event under (x, y), the shortest when several touch it."""
    i = layout.host_row_at(y)
    if i is None:
        return None
    lanes = host["lane"]
    on_lane = (
        np.ones(len(host), dtype=bool) if layout.host_folded else lanes == layout.host_lanes[i]
    )
    hit = np.flatnonzero(
        on_lane & (host["start"] <= x + tolerance) & (host["end"] >= x - tolerance)
    )
    if not len(hit):
        return None
    length = (host["end"] - host["start"])[hit]
    return int(hit[np.argmin(length)])


def host_details(host: ColumnTable, row: int) -> dict:
    """The fields of host event ``row`` for the details panel."""
    r = host.row(row)
    return {
        "kind": str(r["kind"]),
        "lane": f"host {r['lane']}",
        "start": int(r["start"]),
        "end": int(r["end"]),
        "cycles": int(r["end"] - r["start"]),
        "samples": int(r["samples"]),
    }


def host_lane_index(layout: LaneLayout, host: ColumnTable, row: int) -> int:
    """The host lane (index in ``layout.host_lanes``; 0 when folded) of host event ``row``."""
    return 0 if layout.host_folded else layout.host_lanes.index(host["lane"][row])


# -- tooltips -----------------------------------------------------------------------------
def host_text(d: dict) -> str:
    """Tooltip of a host event (:func:`host_details`)."""
    samples = f", {d['samples']:,} samples" if d["samples"] else ""
    return f"{d['kind']} ({d['lane']}): {d['cycles']:,} cycles at {d['start']:,}" + samples


def aggregate_text(res: WindowResult, ipu: int, lane: int, x: float, pw: float) -> str:
    """Tooltip of an aggregated pixel: how many steps lane ``lane`` holds around ``x``."""
    n = 0
    for r in res.rects.values():
        m = (r.lane == lane) & (r.x0 <= x + pw) & (r.x1 >= x - pw)
        n += int(r.count[m].sum())
    return f"IPU {ipu}: {n:,} steps around cycle {x:,.0f}; zoom in (W) for details" if n else ""


def step_text(d: dict, ipu: int) -> str:
    """Tooltip of a step (:meth:`TraceWindow.step_details`)."""
    return (
        f"{d['type']}: {d['name']}\n{d['cycles']:,} cycles at {d['start']:,} on IPU {ipu}"
        + (f"\noperation {d['operation']}" if d["operation"] else "")
        + (f"\nmodule {d['layer']}" if d.get("layer") else "")
        + (f" ({d['source']})" if d.get("layer") and d.get("source") else "")
        + (f"\nsource {d['source']}" if d.get("source") and not d.get("layer") else "")
        + (f"\ntile balance {100 * d['tile balance']:.1f}%" if d["tile balance"] else "")
    )
