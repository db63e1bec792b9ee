"""Search strategies of ``analyse tune``: a full grid, or a guided search.

Guided search (when the space is larger than the budget):

1. simulate the start configuration and its projection onto the space, in one batch;
2. beam: from every configuration in the beam, follow the changes the insights on its profile
   recommend (each tip's change alone, and all of them together), projected onto the space;
   simulate the new configurations in parallel, keep the best ``beam`` of everything seen; repeat
   while the best improves;
3. refine: try every neighbour of the best (one step along one dimension) in parallel; move to a
   better one and repeat until none is better or the budget is spent.

"Best" is the objective among feasible configurations (fits, constraints hold); among
configurations that do not fit, fewer out-of-memory tiles and a smaller fullest tile are better,
so a beam starting out of memory walks towards fitting.

Every simulation goes through :mod:`analyser.sim.service` (cached, so an interrupted tune
resumes where it stopped and a second tune over the same space simulates nothing twice).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from analyser.core.run_options import WHAT_IF
from analyser.sim.service import SimRequest, SimResponse
from analyser.sim.tune.space import MAX_GRID, Space

#: Seconds a cluster may show no worker (a worker started again takes a few) before the tune
#: gives up on it; ``ANALYSE_NO_WORKER_SECONDS`` overrides.
NO_WORKER_SECONDS = 30.0
ENV_NO_WORKER_SECONDS = "ANALYSE_NO_WORKER_SECONDS"
#: How often the client's connection is looked at while a batch runs.
WATCH_SECONDS = 0.5
#: How often, at most, the scheduler is asked for its workers while a batch runs (a quarter of
#: the no-worker grace when that is shorter).
WORKERS_SECONDS = 5.0


class ClusterLost(Exception):
    """The cluster stopped answering mid-tune (its scheduler gone, or no worker left); the
    message is one sentence, the rows answered before are kept."""


def _no_worker_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV_NO_WORKER_SECONDS, NO_WORKER_SECONDS)))
    except ValueError:
        return NO_WORKER_SECONDS


def _where(service) -> str:
    address = getattr(service, "scheduler", None)
    return f"the Dask scheduler at {address!r}" if address else "the embedded Dask cluster"


def quiet_cluster_logs() -> None:
    """Silence ``distributed``'s and tornado's loggers for the command: a lost scheduler's
    reconnect attempts are logged with tracebacks, where the tune says what happened in one
    sentence (:class:`ClusterLost`). Done when the service first connects (or now, when
    ``distributed`` is imported already): a tune answered from the cache never imports it."""
    from analyser.sim.service.service import quiet_cluster_logs as quiet

    quiet()


class _ClusterWatch:
    """While a batch runs, looks at the service's Dask client every :data:`WATCH_SECONDS` (and
    at its workers every :data:`WORKERS_SECONDS` at most): a client that lost its scheduler (distributed then cancels every future: they were read as
    answers, "cancelled.", and the tune exited 0) or a cluster without a worker for
    :func:`_no_worker_seconds` (the tasks wait for a worker for ever: the tune hung) cancels
    the batch and records why in :attr:`lost`."""

    def __init__(self, service, batch) -> None:
        self.service, self.batch = service, batch
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tune-watch", daemon=True)

    def __enter__(self) -> _ClusterWatch:
        if getattr(self.service, "_client", None) is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def scheduler_lost(self) -> str | None:
        client = getattr(self.service, "_client", None)
        status = getattr(client, "status", "running")
        if client is None or status in ("running", "newly-created"):
            return None
        return (
            f"the connection to {_where(self.service)} was lost during the tune (the "
            "scheduler stopped or the network failed)"
        )

    def _run(self) -> None:
        since: float | None = None
        grace = _no_worker_seconds()
        # the client's status is read here; the workers are a round trip to the scheduler
        # (its identity, every worker's metrics), so asked a few times per grace period only
        every = max(WATCH_SECONDS, min(WORKERS_SECONDS, grace / 4))
        asked = time.monotonic()
        while not self._stop.wait(WATCH_SECONDS) and not self.batch.done:
            why = self.scheduler_lost()
            if why is None and time.monotonic() - asked >= every:
                asked = time.monotonic()
                try:
                    info = self.service._client.scheduler_info()
                    workers = len(info.get("workers", {}))
                except Exception:  # the client closing under us: the status says so next
                    continue
                now = time.monotonic()
                since = None if workers else (since or now)
                if since is not None and now - since >= grace:
                    why = (
                        f"{_where(self.service)} has had no worker for {grace:g} s (they "
                        "stopped or were killed)"
                    )
            if why is not None:
                self.lost = why
                self.batch.cancel()
                return


@dataclass
class Row:
    """One configuration tried."""

    id: int
    assignment: tuple[int, ...] | None
    config: dict[str, Any]
    response: SimResponse
    origin: str  # start, grid, beam, refine
    round: int = 0

    @property
    def figures(self) -> dict[str, Any]:
        return self.response.figures or {}


@dataclass
class TuneResult:
    space: Space
    strategy: str
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0
    simulations: int = 0  # answers that were not cache hits
    interrupted: bool = False
    #: the exit code of what interrupted the search: 130 Ctrl-C, 143 SIGTERM (128 + signal),
    #: 2 a cluster lost mid-tune
    exit_code: int = 0
    #: why the search stopped early when it was not a signal (a cluster lost): one sentence
    failure: str = ""
    #: ``--vary split_points=auto``: the chosen split against the user's, per stage
    #: (:meth:`analyser.sim.tune.autosplit.SplitSearch.report`)
    split: dict[str, Any] | None = None

    def feasible(self) -> list[Row]:
        return [r for r in self.rows if self.space.feasible(r.figures)]

    def ranked(self) -> list[Row]:
        """Feasible rows, best first (ties: fewer IPUs, then the earlier row)."""
        scored = [(s, r) for r in self.feasible() if (s := self.space.score(r.figures)) is not None]
        return [r for _, r in sorted(scored, key=lambda sr: (-sr[0], sr[1].id))]

    @property
    def best(self) -> Row | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    @property
    def start(self) -> Row:
        """The start configuration's row (:func:`tune` never returns a result without it)."""
        for r in self.rows:
            if r.origin == "start":
                return r
        raise LookupError("the tune has no start row")


ProgressFn = Callable[[dict[str, Any]], None]


class Tuner:
    """Runs one search over ``space`` with ``service``; ``progress(state)`` receives a dict
    (done, running, queued, total, best, phase) after every answer."""

    def __init__(
        self,
        space: Space,
        service,
        *,
        budget: int,
        beam: int = 4,
        progress: ProgressFn | None = None,
        model_file=None,
    ) -> None:
        self.space = space
        self.service = service
        self.budget = budget
        self.beam_width = beam
        self.progress = progress
        self.model_file = model_file
        self.rows: list[Row] = []
        self._by_key: dict[str, Row] = {}
        self._by_assignment: dict[tuple[int, ...], Row] = {}
        self._tried: set[tuple[int, ...]] = set()
        self._sims = 0
        self._phase = ""
        self._round = 0
        #: insight changes read ahead of the beam (the start's, while its batch runs)
        self._changes: dict[int, list[dict[str, Any]]] = {}
        #: the split search, once started (analyser.sim.tune.autosplit.SplitSearch)
        self.split: Any = None

    # -- evaluation ----------------------------------------------------------------------------
    def _spent(self) -> int:
        return len(self.rows)

    def left(self) -> int:
        return max(0, self.budget - self._spent())

    def evaluate(
        self,
        items: list[tuple[tuple[int, ...] | None, dict[str, Any], str]],
        *,
        in_order: bool = False,
        on_row: Callable[[Row], None] | None = None,
    ) -> list[Row]:
        """Simulate (config, origin) items not tried before, in parallel; returns their rows.

        An item whose request is one already answered, or one earlier in ``items``, is not
        simulated again: its assignment maps to that row. With ``in_order`` the rows are
        numbered in the items' order (not the answers'), so that one batch gives the rows the
        same ids as the same items evaluated one after another. ``on_row(row)`` is called as
        each row is answered (the rest of the batch still simulating)."""
        todo: list[
            tuple[tuple[int, ...] | None, dict[str, Any], str, SimRequest | SimResponse]
        ] = []
        aliases: list[tuple[tuple[int, ...], str]] = []  # (assignment, key) of duplicates
        batch_keys: set[str] = set()
        for assignment, cfg, origin in items:
            if assignment is not None:
                if assignment in self._tried:
                    continue
                self._tried.add(assignment)
            req = self.service.request(cfg, self.model_file)
            key = req.key if isinstance(req, SimRequest) else None
            if key is not None and (key in self._by_key or key in batch_keys):
                if assignment is not None:
                    aliases.append((assignment, key))
                continue
            if key is not None:
                batch_keys.add(key)
            todo.append((assignment, cfg, origin, req))
        new: list[Row] = []
        if todo:
            first_id = len(self.rows)
            batch = self.service.submit([t[3] for t in todo])
            unasked = False  # an answer "cancelled" that this tune did not ask for
            try:
                with _ClusterWatch(self.service, batch) as watch:
                    for i, resp in batch.as_completed():
                        if resp.status == "cancelled":
                            unasked = True  # the cluster dropped it: not a row
                            continue
                        self._answered(todo[i], i, first_id, in_order, resp, batch, new, on_row)
                if watch.lost or unasked:
                    why = (
                        watch.lost
                        or watch.scheduler_lost()
                        or (f"{_where(self.service)} cancelled the simulations during the tune")
                    )
                    raise ClusterLost(why)
            except BaseException:
                batch.cancel()
                raise
            finally:
                if in_order:
                    self.rows.sort(key=lambda r: r.id)
                    new.sort(key=lambda r: r.id)
        for assignment, key in aliases:
            if key in self._by_key:
                self._by_assignment[assignment] = self._by_key[key]
        return new

    def _answered(self, item, i, first_id, in_order, resp, batch, new, on_row) -> None:
        """One answer of a batch: its row."""
        assignment, cfg, origin, _ = item
        row_id = first_id + i if in_order else len(self.rows)
        row = Row(row_id, assignment, cfg, resp, origin, self._round)
        self.rows.append(row)
        new.append(row)
        if resp.key:
            self._by_key.setdefault(resp.key, row)
        if assignment is not None:
            self._by_assignment[assignment] = row
        if not resp.cached:
            self._sims += 1
        self._report(batch)
        if on_row is not None:
            on_row(row)  # while the rest of the batch simulates

    def _report(self, batch) -> None:
        if self.progress is None:
            return
        p = batch.progress()
        best = self.best()
        self.progress(
            {
                "tried": len(self.rows),
                "budget": self.budget,
                "done": p.done,
                "running": p.running,
                "queued": p.queued,
                "batch": p.total,
                "phase": self._phase,
                "best": None if best is None else self.space.score(best.figures),
                "simulated": self._sims,
            }
        )

    def _key(self, row: Row) -> tuple:
        f = row.figures
        if self.space.feasible(f) and self.space.score(f) is not None:
            return (2, self.space.score(f), -row.id)
        if row.response.simulated:
            return (
                1,
                -float(f.get("oom_tiles") or 0),
                -float(f.get("max_tile_memory_bytes") or 0),
                -row.id,
            )
        return (0, -row.id)

    def best(self) -> Row | None:
        rows = [r for r in self.rows if self.space.feasible(r.figures)]
        return max(rows, key=self._key) if rows else None

    # -- strategies ----------------------------------------------------------------------------
    def start_row(self) -> Row:
        """The start configuration's row (raises StopIteration before it is answered)."""
        return next(r for r in self.rows if r.origin == "start")

    def grid(self) -> None:
        """The start and every grid configuration, submitted together (the workers fan out at
        once); a grid configuration that is the start is the start's row, counted once."""
        self._phase = "grid"
        start = dict(self.space.start)
        items: list[tuple[tuple[int, ...] | None, dict[str, Any], str]] = []
        if not any(r.origin == "start" for r in self.rows):
            items.append((None, start, "start"))
        same_as_start = []
        for a in self.space.assignments():
            cfg = self.space.config(a)
            if cfg is None:
                continue
            if cfg == start:
                same_as_start.append(a)
                self._tried.add(a)
            else:
                items.append((a, cfg, "grid"))
        self.evaluate(items[: self.left()])
        start_row = next((r for r in self.rows if r.origin == "start"), None)
        for a in same_as_start:
            if start_row is not None:
                self._by_assignment[a] = start_row

    def guided(self) -> None:
        """The guided search (module docstring). The start and its projection onto the space
        are submitted together (neither needs the other's answer): rows, ids and the best are
        those of simulating them one after the other."""
        sp = self.space
        start = dict(sp.start)
        proj = sp.project(start)
        cfg = sp.config(proj)
        if not self.rows:
            self._phase = "start"
            items: list[tuple[tuple[int, ...] | None, dict[str, Any], str]] = [
                (None, start, "start")
            ]
            if cfg is not None and self.budget > 1:
                items.append((proj, cfg, "beam"))
            # the start's insights are read as soon as it is answered, while its projection
            # may still be simulating (same moves, found earlier)
            self.evaluate(items, in_order=True, on_row=self._read_start_insights)
        start_row = self.start_row()
        beam: list[Row] = [start_row]
        if cfg is not None and self.left() and proj not in self._tried:
            self._phase = "beam"
            beam += self.evaluate([(proj, cfg, "beam")])
        else:
            beam += [r for r in self.rows if r.assignment == proj and r.origin == "beam"]
        # -- beam over the insights' changes
        best_key = max((self._key(r) for r in self.rows), default=None)
        while self.left():
            self._round += 1
            self._phase = f"beam {self._round}"
            items = []
            for row in beam:
                changes = self._changes.pop(row.id, None)
                for change in self._insight_changes(row) if changes is None else changes:
                    merged = dict(row.config)
                    merged.update(change)
                    a = sp.project(merged)
                    c = sp.config(a)
                    if c is not None and a not in self._tried:
                        items.append((a, c, "beam"))
            if not items:
                break
            self.evaluate(self._dedupe(items)[: self.left()])
            pool = [r for r in self.rows if r.response.simulated]
            beam = sorted(pool, key=self._key, reverse=True)[: self.beam_width]
            top = max(self._key(r) for r in self.rows)
            if best_key is not None and top <= best_key:
                break
            best_key = top
        # -- refine around the best
        while self.left():
            self._round += 1
            self._phase = f"refine {self._round}"
            centre = max(
                (r for r in self.rows if r.assignment is not None), key=self._key, default=None
            )
            if centre is None or centre.assignment is None:  # the max is over rows with one
                break
            items = [(a, c, "refine") for a, c in self._neighbours(centre.assignment)]
            if not items:
                break
            before = self._key(centre)
            self.evaluate(items[: self.left()])
            after = max(self._key(r) for r in self.rows if r.assignment is not None)
            if after <= before:
                break

    def evaluate_configs(self, configs: list[dict[str, Any]], origin: str) -> list[Row]:
        """The row of each of ``configs`` (in order): an answer already had (the same request)
        or a new simulation, the new ones in one parallel batch. A configuration left without
        an answer (the budget spent) is left out."""
        self.evaluate([(None, c, origin) for c in configs])
        out = []
        for c in configs:
            req = self.service.request(c, self.model_file)
            row = self._by_key.get(req.key) if isinstance(req, SimRequest) else None
            if row is None:  # a refusal before simulating: its row is the one of this config
                row = next((r for r in reversed(self.rows) if r.config == c), None)
            if row is not None:
                out.append(row)
        return out

    def split_search(self) -> dict[str, Any] | None:
        """``--vary split_points=auto`` (:mod:`analyser.sim.tune.autosplit`) from the best
        configuration found so far (the start when none fits), with what is left of the
        budget; returns its report (None without budget)."""
        from analyser.sim.tune.autosplit import SplitSearch

        spec = self.space.auto_split
        if spec is None or not self.left():
            return None
        self._phase = "split"
        base = self.best() or self.start_row()
        search = SplitSearch(
            spec,
            base,
            lambda cfgs: self.evaluate_configs(cfgs, "split"),
            self._key,
            self.left,
            objective=self.space.objective,
        )
        self.split = search
        search.run()
        return search.report(self.start_row().config)

    def split_report(self) -> dict[str, Any] | None:
        """The report of a split search stopped part-way (Ctrl-C, a lost cluster): what it
        had simulated (None when it had not started)."""
        if self.split is None:
            return None
        # the answers of the batch the interrupt cut short are rows, not yet the search's
        self.split.adopt([r for r in self.rows if r.origin == "split"])
        try:
            return self.split.report(self.start_row().config)
        except Exception:  # nothing simulated yet to compare: no report
            return None

    def _dedupe(self, items):
        seen, out = set(), []
        for a, c, o in items:
            if a not in seen:
                seen.add(a)
                out.append((a, c, o))
        return out

    def _neighbours(self, assignment: tuple[int, ...]):
        out = []
        for d, dim in enumerate(self.space.dims):
            for step in (-1, 1):
                i = assignment[d] + step
                if 0 <= i < len(dim.values):
                    a = (*assignment[:d], i, *assignment[d + 1 :])
                    if a in self._tried:
                        continue
                    c = self.space.config(a)
                    if c is not None:
                        out.append((a, c))
                    else:
                        self._tried.add(a)
        return out

    def _read_start_insights(self, row: Row) -> None:
        if row.origin == "start":
            self._changes[row.id] = self._insight_changes(row)

    def _insight_changes(self, row: Row) -> list[dict[str, Any]]:
        """The run-config changes the insights on ``row``'s profile recommend: each alone, in
        rank order, then all of the category's changes together."""
        if not row.response.simulated or not row.response.profile:
            return []
        from analyser.core.analysis import Analysis
        from analyser.core.insights import find_insights

        try:
            with Analysis.open(row.response.profile) as a:
                tips = find_insights(a)
                fits = bool(a.memory.fits)
        except Exception:  # a profile that cannot be analysed: no moves from it
            return []
        want = "throughput" if fits else "memory"
        tips = [t for t in tips if t.change and not WHAT_IF.intersection(t.change)]
        changes = [dict(t.change) for t in tips if t.category == want]
        if not changes and not fits:
            changes = [dict(t.change) for t in tips]
        out = list(changes)
        if len(changes) > 1:
            merged: dict[str, Any] = {}
            for c in changes:
                merged.update(c)
            out.append(merged)
        return out


def tune(
    space: Space,
    service,
    *,
    budget: int,
    strategy: str = "auto",
    beam: int = 4,
    progress: ProgressFn | None = None,
    model_file=None,
) -> TuneResult:
    """Search ``space``: ``grid`` (every configuration and the start, submitted together; cut
    at the budget), ``guided``, or ``auto`` (grid when :func:`grid_budget` fits the budget,
    else guided).
    Ctrl-C (or SIGTERM) stops the search and returns what was found (``interrupted``, with
    the signal's ``exit_code``); one before the start configuration is answered is raised
    again, since there is nothing to write."""
    t0 = time.perf_counter()
    tuner = Tuner(
        space, service, budget=budget, beam=beam, progress=progress, model_file=model_file
    )
    first = budget
    if space.auto_split is not None:
        # the other levers first with half the budget, the split search after with the rest
        first = max(1, budget // 2) if space.dims else 1
        tuner.budget = first
    if strategy == "auto" or not space.dims:
        small = space.size <= MAX_GRID and grid_budget(space) <= first
        strategy = "grid" if small or not space.dims else "guided"
    result = TuneResult(space, strategy)
    try:
        if strategy == "grid":
            tuner.grid()  # the start in the same batch as the grid
        else:
            tuner.guided()  # the start and its projection in one batch, then its insights
        tuner.budget = budget
        if space.auto_split is not None:
            result.strategy = f"{strategy} + split" if space.dims else "split"
            result.split = tuner.split_search()
    except KeyboardInterrupt as exc:
        if not any(r.origin == "start" for r in tuner.rows):
            raise
        result.interrupted = True
        result.exit_code = getattr(exc, "exit_code", 130)
    except ClusterLost as exc:
        done = len(tuner.rows)
        if not any(r.origin == "start" for r in tuner.rows):
            from analyser.sim.tune.space import TuneError

            raise TuneError(
                f"{exc} before the start configuration was answered, so nothing was written "
                f"({done} other answer(s) are cached)."
            ) from None
        result.interrupted = True
        result.exit_code = 2
        result.failure = (
            f"{exc}; the {done} configuration(s) answered before are written and cached: run "
            "the same command again, with the cluster back, to resume."
        )
    result.rows = tuner.rows
    if result.interrupted and result.split is None:
        result.split = tuner.split_report()
    result.simulations = tuner._sims
    result.seconds = time.perf_counter() - t0
    return result


def grid_budget(space: Space) -> int:
    """Configurations a grid search simulates: the grid's, plus the start unless it is one of
    them (its row is then the grid's)."""
    start = dict(space.start)
    n, start_inside = 0, False
    for a in space.assignments():
        cfg = space.config(a)
        if cfg is not None:
            n += 1
            start_inside = start_inside or cfg == start
    return n if start_inside else n + 1


def grid_size(space: Space) -> int:
    """Configurations of the grid that meet the configuration constraints."""
    return sum(1 for a in space.assignments() if space.config(a) is not None)


def pareto_front(rows: list[Row]) -> list[Row]:
    """Fitting rows not dominated in (throughput, memory headroom): nobody is at least as
    good on both and better on one. Sorted by throughput, highest first."""
    pts = [
        r
        for r in rows
        if r.figures.get("fits") and r.figures.get("throughput_samples_per_s") is not None
    ]
    pts.sort(key=lambda r: (-r.figures["throughput_samples_per_s"], -r.figures["headroom_bytes"]))
    front: list[Row] = []
    best_headroom = None
    seen_keys = set()
    for r in pts:
        h = r.figures["headroom_bytes"]
        if r.response.key in seen_keys:
            continue
        if best_headroom is None or h > best_headroom:
            front.append(r)
            best_headroom = h
            seen_keys.add(r.response.key)
    return front
