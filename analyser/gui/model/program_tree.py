"""What the Program Tree report shows, without Qt (the view only draws): the
control-program hierarchy of /programs/nodes as rows (children of each node, the row of each in
its parent), the text of each column (a step's own cycles and bytes per execution from the
profile, its executed cycles and waits over the run from the analysis core, tile balance for
compute and exchange steps, B - A in compare mode), search, the path of a node, the details of
the selected step and the steps related to it, and how A's programs match B's.

The Qt tree model (``analyser.gui.reports.program_tree.ProgramTreeModel``) answers Qt's
``index`` / ``parent`` / ``data`` from a :class:`ProgramTree`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analyser.core.quantities import STEP_TYPES, TABLES
from analyser.core.units import NEW, MemoryUnits, fmt_bytes, fmt_count, fmt_pct, fmt_signed_int
from analyser.gui.model import data

if TYPE_CHECKING:
    from analyser.gui.model.document import Document

#: The tree's columns (the catalogue, analyser.core.quantities.TABLES["program_tree"]); the last
#: one, "delta", only in compare mode.
_COLUMNS = tuple(TABLES["program_tree"].values())
COLUMN_SPECS = tuple((c.key, c.title, c.tip) for c in _COLUMNS if c.key != "delta")
COLUMNS = tuple(h for _k, h, _t in COLUMN_SPECS)
KEYS = tuple(k for k, _h, _t in COLUMN_SPECS)
DELTA_HEADER = TABLES["program_tree"]["delta"].title
DELTA_TIP = "Change of executed cycles against the program of A with the same name"
#: Step types whose tile balance means something (compute and exchange).
BALANCED_TYPES = frozenset(
    STEP_TYPES.index(t) for t in ("OnTileExecute", "DoExchange", "GlobalExchange")
)
#: Step types that can wait (their executed cycles can exceed own work x executions).
WAITING_TYPES = frozenset(
    STEP_TYPES.index(t) for t in ("Sync", "SyncAns", "StreamCopyBegin", "GlobalExchange")
)
#: Program node types below this are control flow (Sequence, Repeat, Call); from it, steps.
FIRST_STEP_TYPE = 3
#: The initial view expands the first levels up to this many nodes (as PopVision's) ...
EXPANDED_NODES = 256
#: ... while the rows it shows stay within this many (about twenty screens): a node with more
#: children than are left stays collapsed, so one wide Sequence (1,874 steps in walkthrough
#: step 3) does not lay out thousands of rows nobody scrolls through before the first paint.
#: The selected step's path is expanded whatever its width.
SHOWN_ROWS = 500
#: Related steps listed in the details (and listed expanded up to the second figure).
RELATED_SHOWN, RELATED_EXPANDED = 200, 50


class ProgramTree:
    """The program-node table (pre-order rows with a parent column) as a tree.

    Children lists are built once with numpy (a stable sort by parent), so ``children`` and the
    Qt model's ``index`` / ``parent`` / ``rowCount`` are O(1); ``executions`` / ``total`` /
    ``wait`` are per node over the run (None without execution)."""

    def __init__(
        self,
        nodes: pd.DataFrame,
        executions: np.ndarray | None,
        total: np.ndarray | None,
        units: MemoryUnits,
        wait: np.ndarray | None = None,
        delta: np.ndarray | None = None,
    ) -> None:
        self.units = units
        self.names = nodes["name"].to_numpy().astype(str)
        self.types = nodes["type"].to_numpy().astype(np.int64)
        self.parents = nodes["parent"].to_numpy().astype(np.int64)
        self.ipus = nodes["ipu"].to_numpy()
        self.repeat = nodes["repeat"].to_numpy()
        self.cycles = nodes["cycles"].to_numpy()
        self.balance = nodes["tile_balance"].to_numpy()
        self.bytes = nodes["bytes"].to_numpy()
        self.code = nodes["code_bytes"].to_numpy()
        self.ops = nodes["op"].to_numpy().astype(np.int64)
        n = len(nodes)
        self.executions = executions if executions is not None and len(executions) == n else None
        self.total = total if total is not None and len(total) == n else None
        self.wait = wait if wait is not None and len(wait) == n else None
        #: Compare mode (B pane): change of total cycles against the matching program of A
        #: (NaN when A has no such program); adds a column.
        self.delta = delta if delta is not None and len(delta) == n else None
        self.columns: tuple[str, ...] = COLUMNS + (
            (DELTA_HEADER,) if self.delta is not None else ()
        )
        # children of each node (index n = the invisible root), in row (execution) order
        key = np.where(self.parents < 0, n, self.parents)
        order = np.argsort(key, kind="stable")
        counts = np.bincount(key, minlength=n + 1)
        bounds = np.concatenate(([0], np.cumsum(counts)))
        self.order = order
        self.bounds = bounds
        # the same as Python lists for the Qt model's index() / rowCount(), which the view calls
        # for every shown row on each layout (a numpy scalar per call costs more than the call)
        self.order_list: list[int] = order.tolist()
        self.bounds_list: list[int] = bounds.tolist()
        self.row_in_parent = np.empty(n, np.int64)
        self.row_in_parent[order] = np.arange(n) - bounds[key[order]]
        self.n = n
        # a view-model is handed to the GUI thread complete and never changed there: its
        # arrays are read-only views (the core's own arrays stay as they are; a new delta is a
        # new tree, see with_delta)
        for name, value in list(vars(self).items()):
            if isinstance(value, np.ndarray):
                setattr(self, name, _read_only(value))

    def children(self, node: int) -> np.ndarray:
        """Child nodes of ``node`` (-1: the top-level nodes), in row order."""
        k = self.n if node < 0 else node
        return self.order[self.bounds[k] : self.bounds[k + 1]]

    def n_children(self, node: int) -> int:
        """How many children ``node`` has (-1: top-level nodes)."""
        k = self.n if node < 0 else node
        return self.bounds_list[k + 1] - self.bounds_list[k]

    def with_delta(self, delta: np.ndarray | None) -> ProgramTree:
        """This tree showing ``delta``, the change of total cycles against the other profile
        (compare mode; None: no change column): a new tree sharing these arrays."""
        out = copy.copy(self)
        out.delta = _read_only(delta) if delta is not None and len(delta) == self.n else None
        out.columns = COLUMNS + ((DELTA_HEADER,) if out.delta is not None else ())
        return out

    def tip(self, section: int) -> str:
        """The tooltip of column ``section``."""
        return COLUMN_SPECS[section][2] if section < len(COLUMN_SPECS) else DELTA_TIP

    def column(self, key: str) -> int:
        """Column number of column ``key`` (see COLUMN_SPECS; ``"delta"`` in compare mode)."""
        return len(KEYS) if key == "delta" else KEYS.index(key)

    def text(self, node: int, col: int) -> str:
        """The text of ``node`` in column ``col`` ("" where the column means nothing for it)."""
        t = int(self.types[node])
        leaf = t >= FIRST_STEP_TYPE
        key = KEYS[col] if col < len(KEYS) else "delta"
        if key == "name":
            return self.names[node]
        if key == "type":
            return STEP_TYPES[t] if 0 <= t < len(STEP_TYPES) else str(t)
        if key == "ipu":
            return "all" if self.ipus[node] < 0 else str(int(self.ipus[node]))
        if key == "repeat":
            return fmt_count(int(self.repeat[node])) if t == 1 else ""
        if key == "cycles":
            return fmt_count(int(self.cycles[node])) if leaf else ""
        if key == "balance":
            return fmt_pct(float(self.balance[node])) if t in BALANCED_TYPES else ""
        if key == "executions":
            return (
                fmt_count(int(self.executions[node]))
                if self.executions is not None and leaf
                else ""
            )
        if key == "total":
            return fmt_count(int(self.total[node])) if self.total is not None and leaf else ""
        if key == "wait":
            if self.wait is None or not leaf:
                return ""
            w = int(self.wait[node])
            return fmt_count(w) if w or t in WAITING_TYPES else ""
        if key == "bytes":
            return fmt_bytes(int(self.bytes[node]), self.units) if self.bytes[node] else ""
        if key == "code":
            return fmt_bytes(int(self.code[node]), self.units) if self.code[node] else ""
        if key == "delta" and self.delta is not None and leaf:
            d = self.delta[node]
            return NEW if np.isinf(d) else fmt_signed_int(d)
        return ""

    def search(self, text: str) -> np.ndarray:
        """Node ids whose name contains ``text`` (case-insensitive), in tree order."""
        if not text:
            return no_matches()
        hits = pd.Series(self.names).str.contains(text, case=False, regex=False).to_numpy()
        return np.flatnonzero(hits)

    def ancestors(self, node: int) -> list[int]:
        """The nodes above ``node``, the top-level one first."""
        out = []
        p = int(self.parents[node])
        while p >= 0:
            out.append(p)
            p = int(self.parents[p])
        return out[::-1]

    def initially_expanded(
        self, budget: int = EXPANDED_NODES, levels: int = 3, rows: int = SHOWN_ROWS
    ) -> list[int]:
        """The nodes the initial view expands: the first ``levels`` levels, level by level, at
        most ``budget`` nodes, each only if its children fit in the ``rows`` the view may show
        (the top level counts too); a wider node stays collapsed and its later siblings may
        still expand. A walk over at most ``budget`` nodes."""
        out: list[int] = []
        frontier = self.children(-1)
        shown = len(frontier)
        for _level in range(levels):
            expanded = []
            for n in frontier.tolist():
                if len(out) >= budget:
                    break
                width = len(self.children(n))
                if width and shown + width <= rows:
                    shown += width
                    out.append(n)
                    expanded.append(n)
            if len(out) >= budget or not expanded:
                break
            frontier = np.concatenate([self.children(n) for n in expanded])
        return out

    def start_node(self) -> int | None:
        """The node selected first: the step with the most cycles over the run (or the root);
        None for an empty tree."""
        if self.total is not None and self.n:
            return int(np.argmax(self.total))
        return 0 if self.n else None


def _read_only(values: np.ndarray) -> np.ndarray:
    view = values.view()
    view.setflags(write=False)
    return view


def no_matches() -> np.ndarray:
    """An empty search result (node ids)."""
    return np.zeros(0, np.int64)


def program_tree(doc: Document, units: MemoryUnits) -> ProgramTree:
    """``doc``'s program tree (executed cycles and waits when the profile ran)."""
    ex = data.execution(doc)
    return ProgramTree(
        data.program_nodes(doc),
        None if ex is None else ex.program_executions,
        None if ex is None else ex.program_cycles,
        units,
        wait=data.program_wait_cycles(doc),
    )


#: The details' row of a step's per-tile cycles while they are read (off the GUI thread).
TILES_PENDING = "reading..."


@dataclass(frozen=True)
class TileFigures:
    """One execution of a step on its tiles: how many tiles it uses and their cycles."""

    node: int
    used: int
    low: int = 0
    mean: float = 0.0
    high: int = 0

    @classmethod
    def of(cls, node: int, cycles: np.ndarray) -> TileFigures:
        used = cycles[cycles > 0]
        if not used.size:
            return cls(node, 0)
        return cls(node, int(used.size), int(used.min()), float(used.mean()), int(used.max()))

    def rows(self) -> tuple[tuple[str, str], ...]:
        if not self.used:
            return ()
        return (
            ("Tiles used", fmt_count(self.used)),
            (
                "Cycles per tile (min / mean / max)",
                f"{self.low:,} / {self.mean:,.0f} / {self.high:,}",
            ),
        )


@dataclass(frozen=True)
class NodeDetails:
    """The details pane of a selected node."""

    title: str  # the node's name
    rows: tuple[tuple[str, str], ...]  # its columns, path, operation, children, per-tile cycles
    related_title: str | None = None  # the related steps' section (None: no operation)
    related: tuple[tuple[str, str, str], ...] | None = None  # (name, type, own cycles) of each
    related_expanded: bool = False  # few enough to list open


def node_details(
    tree: ProgramTree,
    operation_names: tuple[str, ...],
    node: int,
    tiles: TileFigures | None = None,
) -> NodeDetails:
    """What the details pane says of ``node`` of ``tree``: its non-empty columns, its path,
    operation (``operation_names``: the profile's, by operation id) and children, the cycles
    of its tiles (a step: ``tiles``, :data:`TILES_PENDING` while they are read), and the other
    steps of its operation. Reads nothing but its arguments."""
    rows = [
        (tree.columns[c], tree.text(node, c))
        for c in range(len(tree.columns))
        if tree.text(node, c)
    ]
    path = " > ".join(tree.names[a] for a in tree.ancestors(node))
    rows.append(("Path", path or "(root)"))
    op = int(tree.ops[node])
    rows.append(("Operation", operation_names[op] if 0 <= op < len(operation_names) else "-"))
    rows.append(("Children", fmt_count(tree.n_children(node))))
    if int(tree.types[node]) >= FIRST_STEP_TYPE:
        if tiles is None or tiles.node != node:
            rows.append(("Cycles per tile (min / mean / max)", TILES_PENDING))
        else:
            rows.extend(tiles.rows())
    if op < 0:
        return NodeDetails(tree.names[node], tuple(rows))
    related = np.flatnonzero((tree.ops == op) & (np.arange(tree.n) != node))
    cyc = tree.column("cycles")
    return NodeDetails(
        tree.names[node],
        tuple(rows),
        f"Related steps (same operation, {len(related):,})",
        tuple((tree.names[r], tree.text(r, 1), tree.text(r, cyc)) for r in related[:RELATED_SHOWN]),
        len(related) <= RELATED_EXPANDED,
    )


def tile_figures(doc: Document, node: int) -> TileFigures:
    """Per-tile cycles of one execution of program ``node`` of ``doc`` (read from the
    profile: call it off the GUI thread)."""
    return TileFigures.of(node, data.program_tile_cycles(doc, node))


def matched_cycle_change(doc_a: Document, doc_b: Document) -> np.ndarray | None:
    """Per program of B: its total cycles over the run minus those of the program of A with the
    same name (the k-th of that name matches the k-th), NaN when A has none; None when either
    profile has no execution. Totals come from the analysis core (program_cycles)."""
    ea, eb = data.execution(doc_a), data.execution(doc_b)
    if ea is None or eb is None:
        return None
    ka, kb = data.program_match_keys(doc_a), data.program_match_keys(doc_b)
    a_total = pd.Series(ea.program_cycles.astype(np.float64), index=ka)
    matched = a_total.reindex(kb).to_numpy()
    return eb.program_cycles.astype(np.float64) - matched


def b_of_a(doc_a: Document, doc_b: Document) -> np.ndarray:
    """Per program of A: the matching program of B (same name, k-th of it), -1 for none."""
    ka, kb = data.program_match_keys(doc_a), data.program_match_keys(doc_b)
    pos_b = pd.Series(np.arange(len(kb)), index=kb)
    return pos_b.reindex(ka).fillna(-1).astype(np.int64).to_numpy()
