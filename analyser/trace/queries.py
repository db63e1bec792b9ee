"""Queries over a range of the trace, read in row chunks (no pass over the whole trace unless
the range covers it): the visible range's summary (cycles by step type, tile balance,
StreamCopy bytes), the cross-trace name search, the range statistics of an area selection
(by step name or operation) and the flows between IPUs (exchanges, external syncs).

:class:`RangeQueries` is a part of :class:`analyser.trace.window.TraceWindow`: it reads through
the window's ``access``, ``programs`` and ``row_range``."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from analyser.trace.access import CHUNK_ROWS
from analyser.trace.results import (
    _WAIT_TYPES,
    DESTINATIONS,
    NT,
    STATISTICS_BY,
    STEP_TYPES,
    Flows,
    RangeStatistics,
    RangeSummary,
    SearchResult,
    TraceError,
    _no_flows,
)
from profiles import schema

if TYPE_CHECKING:
    import pandas as pd

    from analyser.trace.access import StepAccess
    from analyser.trace.results import ColumnTable


#: Rows per read of a query polled for cancellation (~5 ms of reading on the 2-core machine of
#: docs/performance.md: the longest it runs on once cancelled).
POLLED_CHUNK_ROWS = 1 << 15


class _Cancelled(Exception):
    """A range query's ``cancelled`` said stop (a newer range superseded it)."""


class RangeQueries:
    """Range summary, search, range statistics and flows of a trace window (a mixin of
    :class:`analyser.trace.window.TraceWindow`)."""

    # provided by the window
    access: StepAccess
    n_ipus: int
    if TYPE_CHECKING:  # the window's read-only property

        @property
        def programs(self) -> ColumnTable: ...

    row_range: Callable[[int, float, float], tuple[int, int]]
    extent: Callable[[int], tuple[float, float]]
    step_count: Callable[..., int]

    def _covers(self, ipu: int, t0: float, t1: float) -> bool:
        """True when ``[t0, t1)`` holds every step of the IPU whole (none clipped): a query
        over it gives the whole run's figures (the Execution Trace opens on the whole run)."""
        if not self.step_count(ipu):
            return False
        a, b = self.extent(ipu)
        return t0 <= a and t1 >= b

    def _whole_run(self) -> dict:
        """The whole run's query results, computed once (see :meth:`range_summary` and
        :meth:`range_statistics`): a dict, filled by whichever thread computes first (the
        results are the same)."""
        return self.__dict__.setdefault("_whole_run_results", {})

    def _overlapping(
        self, spans, cols: tuple[str, ...], t0: float, t1: float, cancelled
    ) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]]:
        """The row chunks of ``spans`` (row ranges) that hold steps overlapping ``[t0, t1)``:
        ``(columns, mask of those steps, their cycles clipped to the range)``. Raises
        :class:`_Cancelled` when ``cancelled`` (polled between chunks) says so."""
        # a query that can be cancelled reads smaller chunks, so that it stops soon after
        # being told to (the Execution Trace's range panel, when a newer range supersedes it)
        chunk = POLLED_CHUNK_ROWS if cancelled is not None else CHUNK_ROWS
        for lo, hi in spans:
            for _a, d in self.access.chunks(lo, hi, cols, chunk):
                if cancelled is not None and cancelled():
                    raise _Cancelled
                s = d["start"]
                e = s + d["cycles"]
                m = (e > t0) & (s < t1)
                if m.any():
                    yield d, m, np.minimum(e[m], t1) - np.maximum(s[m], t0)

    # -- summary -------------------------------------------------------------------------------
    def range_summary(
        self, ipu: int, t0: float, t1: float, cancelled: Callable[[], bool] | None = None
    ) -> RangeSummary | None:
        """Cycles by step type, tile balance and StreamCopy bytes of the steps overlapping the
        window (cycles clipped to it; bytes counted for steps starting in it).

        ``cancelled`` is polled between row chunks; when it returns True the summary stops and
        None is returned (a newer window superseded it). A range holding all the IPU's steps
        reads them once (the whole run's summary is kept: the Execution Trace opens on the
        whole run and comes back to it with Home)."""
        whole = self._covers(ipu, t0, t1)
        kept = self._whole_run().get(("summary", ipu)) if whole else None
        if kept is not None and cancelled is not None and cancelled():
            return None  # as when read: a cancelled query answers nothing
        if kept is not None:
            # a copy (its dicts are the caller's), with the range asked for
            return dataclasses.replace(copy.deepcopy(kept), t0=int(t0), t1=int(t1))
        lo, hi = self.row_range(ipu, t0, t1)
        by_type = np.zeros(NT, dtype=np.int64)
        n_type = np.zeros(NT, dtype=np.int64)
        nd = len(DESTINATIONS)
        rx = np.zeros(nd, dtype=np.int64)
        tx = np.zeros(nd, dtype=np.int64)
        bal_num = 0.0
        bal_den = 0.0
        balance = self.programs["tile_balance"].astype(np.float64)
        ptype = self.programs["type"]
        on_tiles = ptype == STEP_TYPES.index("OnTileExecute")  # as analyser.core's tile balance
        sc_types = [STEP_TYPES.index(t) for t in STEP_TYPES if t.startswith("StreamCopy")]
        cols = ("program", "start", "cycles", "type", "bytes_in", "bytes_out", "dest")
        n = 0
        try:
            for d, m, clipped in self._overlapping([(lo, hi)], cols, t0, t1, cancelled):
                typ = d["type"][m].astype(np.int64)
                by_type += np.bincount(typ, weights=clipped, minlength=NT).astype(np.int64)
                n_type += np.bincount(typ, minlength=NT)
                n += int(m.sum())
                prog = d["program"][m]
                w = np.where(on_tiles[prog], clipped, 0)
                bal_num += float((balance[prog] * w).sum())
                bal_den += float(w.sum())
                sc = np.isin(typ, sc_types) & (d["start"][m] >= t0)
                dest = d["dest"][m][sc].astype(np.int64)
                rx += np.bincount(dest, weights=d["bytes_in"][m][sc], minlength=nd).astype(np.int64)
                tx += np.bincount(dest, weights=d["bytes_out"][m][sc], minlength=nd).astype(
                    np.int64
                )
        except _Cancelled:
            return None
        result = RangeSummary(
            ipu=ipu,
            t0=int(t0),
            t1=int(t1),
            n_steps=n,
            cycles_by_type={STEP_TYPES[i]: int(by_type[i]) for i in range(NT) if n_type[i]},
            steps_by_type={STEP_TYPES[i]: int(n_type[i]) for i in range(NT) if n_type[i]},
            tile_balance=bal_num / bal_den if bal_den else float("nan"),
            streamcopy={
                "received": {DESTINATIONS[i]: int(rx[i]) for i in range(nd) if rx[i]},
                "sent": {DESTINATIONS[i]: int(tx[i]) for i in range(nd) if tx[i]},
            },
            busy_cycles=int(by_type.sum()),
        )
        if whole:
            self._whole_run()[("summary", ipu)] = copy.deepcopy(result)
        return result

    # -- search --------------------------------------------------------------------------------
    def search(self, text: str, limit: int = 10_000, ipu: int | None = None) -> SearchResult:
        """Steps whose program name, operation name, module path (``layer``) or source (file
        and line) contains ``text`` (case-insensitive), across the whole trace (every IPU unless
        ``ipu`` is given)."""
        text = text.strip()
        p = self.programs
        mask = np.zeros(len(p), dtype=bool)
        for column in ("name", "op_name", "layer", "source"):
            if column in p:
                values = np.char.lower(p[column].astype(str))
                mask |= np.char.find(values, text.lower()) >= 0
        if not text:
            mask[:] = False
        ids = np.flatnonzero(mask)
        names = {int(i): str(p["name"][int(i)]) for i in ids[:1000]}
        if ipu is None:
            lo, hi = int(self.access.ipu_offsets[0]), int(self.access.ipu_offsets[-1])
        else:
            lo, hi = self.access.ipu_rows(ipu)
        rows: list[np.ndarray] = []
        total = 0
        got = 0
        if len(ids):
            for a, d in self.access.chunks(lo, hi, ("program",)):
                m = np.flatnonzero(mask[d["program"]])
                total += len(m)
                if got < limit and len(m):
                    take = m[: limit - got] + a
                    rows.append(take)
                    got += len(take)
        r = np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)
        if len(r):
            span = (int(r[0]), int(r[-1]) + 1)
            cols = self.access.read(*span, ("ipu", "start", "cycles", "program"))
            idx = r - span[0]
            sel = {k: v[idx] for k, v in cols.items()}
        else:
            sel = {k: np.empty(0, dtype=np.int64) for k in ("ipu", "start", "cycles", "program")}
        return SearchResult(
            text, r, sel["ipu"], sel["start"], sel["cycles"], sel["program"], total, names
        )

    # -- range statistics (area selection) -----------------------------------------------------
    def range_statistics(
        self,
        t0: float,
        t1: float,
        by: str = "name",
        ipus: tuple[int, ...] | list[int] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> RangeStatistics | None:
        """The steps overlapping ``[t0, t1)`` on ``ipus`` (default: every IPU) aggregated by
        step name or operation (see :class:`RangeStatistics`): per program id with
        ``np.bincount`` over row chunks, then per name over the (few) programs. ``cancelled``
        is polled between chunks (None returned when it says so). The per-program sums of a
        range holding every step of ``ipus`` are kept (the whole run's, as the summary)."""
        if by not in STATISTICS_BY:
            raise TraceError(
                f"Unknown statistics grouping {by!r}; choose from {', '.join(STATISTICS_BY)}."
            )
        if not t1 > t0:
            raise TraceError(f"The range must have t1 > t0 (got {t0} .. {t1}).")
        ipus = tuple(range(self.n_ipus)) if ipus is None else tuple(int(i) for i in ipus)
        whole = all(self._covers(ipu, t0, t1) or not self.step_count(ipu) for ipu in ipus)
        key = ("statistics", ipus, by)
        kept = self._whole_run().get(key) if whole else None
        if kept is not None and cancelled is not None and cancelled():
            return None  # as when read: a cancelled query answers nothing
        if kept is None:
            sums = self._program_sums(t0, t1, ipus, cancelled)
            if sums is None:
                return None
            kept = (self._grouped(sums, by), int(sums[0].sum()), float(sums[1].sum()))
            if whole:
                self._whole_run()[key] = kept
        table, n_steps, busy = kept
        room = float(t1 - t0) * max(1, len(ipus))
        # a new frame (the kept one is shared by later queries over the whole run)
        table = table.assign(share=table["total_cycles"] / room)
        return RangeStatistics(float(t0), float(t1), ipus, by, table, n_steps, busy)

    def _grouped(self, sums: tuple[np.ndarray, np.ndarray, np.ndarray], by: str) -> pd.DataFrame:
        """The per-program sums grouped by step name or operation, most cycles first (every
        column of :class:`RangeStatistics`'s table but ``share``)."""
        count, total, longest = sums
        p = self.programs
        ran = np.flatnonzero(count)
        if by == "name":
            keys = p["name"].astype(str)[ran]
        else:
            ops = p["op_name"].astype(str)[ran]
            keys = np.where(ops == "", "(no operation)", ops)
        types = np.asarray(STEP_TYPES, dtype=object)[p["type"][ran].astype(np.int64)]
        import pandas as pd  # grouping by name (after the first paint, in the background)

        frame = pd.DataFrame(
            {
                "name": keys,
                "type": types,
                "steps": count[ran],
                "total_cycles": total[ran],
                "max_cycles": longest[ran],
            }
        )
        g = frame.groupby("name", sort=False)
        table = g.agg(
            steps=("steps", "sum"),
            total_cycles=("total_cycles", "sum"),
            max_cycles=("max_cycles", "max"),
        )
        n_types = g["type"].nunique()
        table.insert(0, "type", np.where(n_types.to_numpy() > 1, "mixed", g["type"].first()))
        table["mean_cycles"] = table["total_cycles"] / table["steps"]
        table = table.reset_index().sort_values(
            ["total_cycles", "name"], ascending=[False, True], kind="stable"
        )
        columns = ["name", "type", "steps", "total_cycles", "mean_cycles", "max_cycles"]
        return table[columns].reset_index(drop=True)

    def _program_sums(
        self, t0: float, t1: float, ipus: tuple[int, ...], cancelled
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Per program id: steps overlapping ``[t0, t1)`` on ``ipus``, their clipped cycles and
        the longest (None when cancelled)."""
        n_prog = len(self.programs)
        count = np.zeros(n_prog, dtype=np.int64)
        total = np.zeros(n_prog, dtype=np.float64)
        longest = np.zeros(n_prog, dtype=np.float64)
        spans = (self.row_range(ipu, t0, t1) for ipu in ipus)
        try:
            for d, m, clipped in self._overlapping(
                spans, ("program", "start", "cycles"), t0, t1, cancelled
            ):
                prog = d["program"][m].astype(np.int64)
                count += np.bincount(prog, minlength=n_prog)
                total += np.bincount(prog, weights=clipped, minlength=n_prog)
                np.maximum.at(longest, prog, clipped)
        except _Cancelled:
            return None
        return count, total, longest

    # -- flows ---------------------------------------------------------------------------------
    def flows(self, t0: float, t1: float, max_rows: int = 200_000, limit: int = 500) -> Flows:
        """Cross-IPU exchanges and external syncs of the steps overlapping ``[t0, t1)`` (see
        :class:`Flows`), at most ``limit`` arrows (the first in time); none, with
        ``too_many``, when the IPUs hold more than ``max_rows`` steps there. Vectorised: the
        senders find their receivers with ``np.searchsorted`` over the receivers' starts, the
        syncs their partners by equal end cycles."""
        spans = [self.row_range(i, t0, t1) for i in range(self.n_ipus)]
        if sum(b - a for a, b in spans) > max_rows:
            return _no_flows(too_many=True)
        cols = ("start", "cycles", "type", "bytes_in", "bytes_out", "program")
        parts = []
        for lane, (lo, hi) in enumerate(spans):
            if hi <= lo:
                continue
            d = self.access.read_cached(lo, hi, cols)
            s = d["start"].astype(np.float64)
            e = s + d["cycles"]
            m = (e > t0) & (s < t1)
            rows = np.arange(lo, hi, dtype=np.int64)[m]
            parts.append((np.full(len(rows), lane), rows, s[m], e[m], *(d[c][m] for c in cols[2:])))
        if not parts:
            return _no_flows()
        ipu, row, s, e, typ, b_in, b_out, prog = (np.concatenate(x) for x in zip(*parts))
        out = []
        # exchanges: each send to the receives on other IPUs starting while it runs
        ge = typ == STEP_TYPES.index("GlobalExchange")
        snd = np.flatnonzero(ge & (b_out > 0))
        rcv = np.flatnonzero(ge & (b_in > 0))
        if len(snd) and len(rcv):
            rcv = rcv[np.argsort(s[rcv], kind="stable")]
            a = np.searchsorted(s[rcv], s[snd], side="left")
            b = np.searchsorted(s[rcv], e[snd], side="right")
            n = b - a
            src = np.repeat(snd, n)
            dst = rcv[np.repeat(a, n) + np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)]
            other = ipu[src] != ipu[dst]
            src, dst = src[other], dst[other]
            out.append(("exchange", src, s[src], dst, e[dst]))
        # external syncs: the last IPU to arrive releases the others (equal end cycles)
        sync_kind = self.programs["sync"]
        ext = np.flatnonzero(
            np.isin(typ, _WAIT_TYPES) & (sync_kind[prog] == schema.SYNC_KINDS.index("external"))
        )
        if len(ext):
            order = ext[np.lexsort((-s[ext], e[ext]))]  # by end, the latest arrival first
            ends = e[order]
            first = np.r_[True, ends[1:] != ends[:-1]]
            group = np.cumsum(first) - 1
            releaser = order[first][group]
            keep = (~first) & (ipu[order] != ipu[releaser])
            src, dst = releaser[keep], order[keep]
            out.append(("sync", src, s[src], dst, e[dst]))
        if not out:
            return _no_flows()
        kind = np.concatenate([np.full(len(x[1]), x[0], dtype=object) for x in out])
        src = np.concatenate([x[1] for x in out])
        x0 = np.concatenate([x[2] for x in out])
        dst = np.concatenate([x[3] for x in out])
        x1 = np.concatenate([x[4] for x in out])
        first = np.argsort(x0, kind="stable")[:limit]
        return Flows(
            kind[first],
            ipu[src][first],
            row[src][first],
            x0[first],
            ipu[dst][first],
            row[dst][first],
            x1[first],
        )
