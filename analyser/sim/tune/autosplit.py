"""``--vary split_points=auto``: pipeline split points and per-stage memory proportions chosen
by re-simulation.

Graphcore's PopLiner (github.com/graphcore/popliner) chooses split points from a profile's
memory with a greedy solver and, its README says, may suggest non-optimal or unfeasible ones
when it cannot interpret the memory. Here a cost model only proposes; every choice is
re-simulated by the engine:

1. **Model.** The base configuration's profile (the start, or the best the rest of the tune
   found) gives each block's cycles and memory (its operations', all passes, as the insights'
   split tips read them), scaled so that each stage's blocks add up to that stage's measured
   busy cycles and its IPU's measured memory. Every contiguous partition of the blocks into
   the base's number of stages is scored by its longest predicted stage (the pipeline's pace),
   partitions whose predicted fullest tile exceeds the tile's memory ranked last; at most
   :data:`MAX_SCORED` partitions are scored (beyond that, a neighbourhood of the one that cuts
   the running total nearest equal shares, sized to stay under it: :func:`_partitions`). A base that does not fit has no cycles: its
   partitions are scored by their fullest predicted tile instead.
2. **Re-simulate** the best-scored :func:`model_share` of them at the base's proportions.
3. **Climb**: the neighbours of the best simulated split (each boundary one block earlier or
   later), simulated, while one is better.
4. **Proportions**: each of the :data:`PROPORTION_SPLITS` best splits with every proportion
   choice on all IPUs at once; each stage then takes the choice that gives it the fewest
   cycles (the fullest tile, for ``memory_headroom``) among those where its IPU fits (a
   stage's plans use its own IPU's proportion: PopTorch's
   ``setAvailableMemoryProportion({"IPU0": ...})``), and that per-stage combination is
   simulated. A uniform run out of memory on one IPU has no cycles for the others: their
   fitting choices all stay and their combinations are simulated (at most as many as there
   are choices). Then 3 again from the best with its proportions.

"Best" is tune's own ranking (the objective among configurations that fit and meet the
constraints; else fewer out-of-memory tiles). Everything is bounded by the simulation budget
the search is given (stated in the output).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Most partitions the cost model scores (they are scored as one numpy array).
MAX_SCORED = 200_000
#: Beyond :data:`MAX_SCORED`: blocks either side of each boundary of the best-balanced split.
WINDOW = 3
#: Most model candidates simulated before the climb.
MAX_MODEL = 6
#: Splits (the best at the base's proportions) given the per-stage proportion pick.
PROPORTION_SPLITS = 3


@dataclass
class AutoSplit:
    """What ``--vary split_points=auto`` searches: the blocks (split-point candidates, forward
    order), the number of stages, and the proportion choices per stage."""

    blocks: list[str]
    stages: int
    proportions: list[float]


def model_blocks(start: dict[str, Any]) -> list[str]:
    """The model's blocks in forward order: each operation's layer cut after its first
    numbered part (``layer3.8.conv2`` -> ``layer3.8``), as the insights' split tips name them;
    every one a layer name the engine accepts as a split point."""
    from analyser.core.insights.context import block_name
    from engine.config import RunConfig
    from engine.models import build_model

    graph = build_model(RunConfig.from_dict(start))
    names = set(graph.layer_names)
    layers = [str(x) for x in graph["layer"].tolist()]
    return [b for b in dict.fromkeys(block_name(x) for x in layers) if b in names]


def auto_split(start: dict[str, Any], proportions: list[float] | None, spec: str) -> AutoSplit:
    """The auto-split search of ``start`` (TuneError naming ``spec`` when it cannot apply)."""
    from analyser.sim.tune.space import TuneError

    splits = list(start.get("split_points") or [])
    if not splits:
        raise TuneError(
            f"{spec}: the start configuration has no split points (one stage); give it a "
            "pipelined or sharded strategy with split points to search them."
        )
    try:
        blocks = model_blocks(start)
    except Exception as exc:  # the engine refuses the start: say so in its words
        raise TuneError(f"{spec}: the model's blocks cannot be read ({exc}).") from None
    stages = len(splits) + 1
    if len(blocks) < stages:
        raise TuneError(
            f"{spec}: the model has {len(blocks)} block(s), too few for {stages} stages."
        )
    if proportions is None:
        from analyser.sim.tune.space import _meta

        proportions = [float(v) for v in _meta()["available_memory_proportion"].tune]
    values = sorted({float(v) for v in proportions} | set(base_proportions(start)))
    return AutoSplit(blocks, stages, values)


def base_proportions(cfg: dict[str, Any]) -> tuple[float, ...]:
    """The available memory proportion of each stage of ``cfg`` (the engine's reading)."""
    from engine.config import RunConfig

    try:
        return tuple(float(v) for v in RunConfig.from_dict(cfg).amp_per_stage)
    except Exception:  # a configuration the engine refuses: the targets' default
        stages = len(cfg.get("split_points") or []) + 1
        return (_default_proportion(cfg),) * stages


def _default_proportion(cfg: dict[str, Any]) -> float:
    """The default available memory proportion of ``cfg``'s target (PopLibs' 0.6), as the
    engine declares it; the default target's when ``cfg`` names none the engine knows."""
    from engine.targets import get_target

    try:
        return float(
            get_target(str(cfg.get("target") or "mk2")).default_available_memory_proportion
        )
    except Exception:  # an unknown target: the default one's
        return float(get_target().default_available_memory_proportion)


def with_split(cfg: dict[str, Any], splits: Sequence[str], amps: Sequence[float]) -> dict:
    """``cfg`` with split points ``splits`` and one proportion per stage ``amps``."""
    out = dict(cfg)
    out["split_points"] = list(splits)
    out["available_memory_proportion"] = None
    out["available_memory_proportion_per_ipu"] = [float(a) for a in amps]
    return out


# -- the cost model -----------------------------------------------------------------------------
@dataclass
class BlockCosts:
    """Per block (forward order): cycles and bytes scaled to the base's measured stages."""

    names: list[str]
    cycles: np.ndarray
    memory: np.ndarray
    #: per stage of the base: fullest tile / mean tile of its IPU (how peaked its memory is)
    peak_ratio: np.ndarray
    tiles_per_ipu: int
    sram_per_tile: int
    #: what the partitions are balanced by: "cycles" or "memory"
    basis: str


def block_costs(profile: str, blocks: list[str]) -> BlockCosts | None:
    """The block costs of a base profile (None when it cannot be read or has no blocks)."""
    from analyser.core.analysis import Analysis
    from analyser.core.insights.context import Context, block_stages, layer_order
    from analyser.core.insights.thresholds import Thresholds

    try:
        with Analysis.open(profile) as a:
            ctx = Context(a, Thresholds())
            names, cyc, mem = layer_order(ctx)
            stage = block_stages(ctx, names)
            m = a.memory
            ex = a.execution
            ipu_tot = m.ipu_total().astype(float)
            ipu_max = m.tile_used.max(axis=1).astype(float) if m.tile_used.size else ipu_tot
            stage_cyc = ex.stage_cycles.astype(float) if ex is not None else np.zeros(0)
            tiles, sram = int(m.tiles_per_ipu), int(m.sram_per_tile)
    except Exception:  # an unreadable profile: no model, the search climbs from the base
        return None
    index = {n: i for i, n in enumerate(names)}
    keep = [index[b] for b in blocks if b in index]
    if len(keep) < 2:
        return None
    n_st = int(stage.max()) + 1 if stage.size else 1
    cyc_s = _scale(cyc, stage, stage_cyc, n_st)
    mem_s = _scale(mem, stage, ipu_tot, n_st)
    mean_tile = ipu_tot[:n_st] / max(1, tiles)
    with np.errstate(divide="ignore", invalid="ignore"):
        peak = np.where(mean_tile > 0, ipu_max[:n_st] / mean_tile, 1.0)
    basis = "cycles" if stage_cyc.size and cyc_s[keep].sum() > 0 else "memory"
    return BlockCosts([names[i] for i in keep], cyc_s[keep], mem_s[keep], peak, tiles, sram, basis)


def _scale(w: np.ndarray, stage: np.ndarray, totals: np.ndarray, n_st: int) -> np.ndarray:
    """``w`` scaled per stage so that a stage's blocks add up to its measured total."""
    out = w.astype(float).copy()
    for s in range(min(n_st, totals.size)):
        sel = stage == s
        tot = out[sel].sum()
        if tot > 0:
            out[sel] *= totals[s] / tot
    return out


def _partitions(n: int, stages: int, centre: np.ndarray | None) -> np.ndarray:
    """Boundary indices [k, stages - 1] (first block of stages 1...) of contiguous partitions
    of ``n`` blocks: all of them, or those near ``centre``: every boundary within a window of
    it (:data:`WINDOW` blocks, narrower when there are many boundaries, so that at most
    :data:`MAX_SCORED` are scored); with too many boundaries for even one block either side,
    ``centre`` and each of its boundaries moved alone by up to :data:`WINDOW` blocks."""
    k = stages - 1
    if centre is None:
        combos = itertools.combinations(range(1, n), k)
        return np.array(list(combos), dtype=np.int64).reshape(-1, k)
    width = min(WINDOW, int((MAX_SCORED ** (1.0 / k) - 1) // 2))
    if width >= 1:
        offsets = np.arange(-width, width + 1)
        mesh = np.meshgrid(*([offsets] * k), indexing="ij")
        grid = centre[None, :] + np.stack([m.ravel() for m in mesh], axis=1)
    else:
        moves = [np.zeros(k, np.int64)]
        for j in range(k):
            for step in range(-WINDOW, WINDOW + 1):
                if step:
                    d = np.zeros(k, np.int64)
                    d[j] = step
                    moves.append(d)
        grid = centre[None, :] + np.stack(moves)
    ok = (grid >= 1).all(axis=1) & (grid <= n - 1).all(axis=1)
    if k > 1:
        ok &= (np.diff(grid, axis=1) > 0).all(axis=1)
    return np.unique(grid[ok], axis=0)


def _balanced(weights: np.ndarray, stages: int) -> np.ndarray:
    """The boundaries that cut the running total of ``weights`` nearest equal shares."""
    run = np.cumsum(weights)
    total = run[-1] if run.size else 0.0
    want = total * np.arange(1, stages) / stages
    b = np.clip(np.searchsorted(run, want) + 1, 1, len(weights) - 1)
    # strictly increasing, each stage at least one block (stages <= blocks)
    b = np.maximum(b, np.arange(1, stages))
    b = np.minimum(b, len(weights) - stages + np.arange(1, stages))
    return np.maximum.accumulate(b + np.arange(stages - 1)) - np.arange(stages - 1)


def score_partitions(costs: BlockCosts, stages: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Partitions ranked best first by the cost model: (boundaries [k, stages - 1], predicted
    longest stage [k], partitions scored)."""
    n = len(costs.names)
    weights = costs.cycles if costs.basis == "cycles" else costs.memory
    count = math.comb(n - 1, stages - 1)
    centre = None if count <= MAX_SCORED else _balanced(weights, stages)
    bounds = _partitions(n, stages, centre)
    edges = np.concatenate(
        [np.zeros((len(bounds), 1), np.int64), bounds, np.full((len(bounds), 1), n)], axis=1
    )
    pc = np.concatenate([[0.0], np.cumsum(costs.cycles)])
    pm = np.concatenate([[0.0], np.cumsum(costs.memory)])
    stage_cyc = pc[edges[:, 1:]] - pc[edges[:, :-1]]
    stage_mem = pm[edges[:, 1:]] - pm[edges[:, :-1]]
    peak = np.resize(costs.peak_ratio, stages) if costs.peak_ratio.size else np.ones(stages)
    tile = stage_mem / max(1, costs.tiles_per_ipu) * peak
    over = (tile > costs.sram_per_tile).any(axis=1)
    pace = stage_cyc.max(axis=1) if costs.basis == "cycles" else tile.max(axis=1)
    order = np.lexsort((pace, over))
    return bounds[order], pace[order], len(bounds)


# -- per-stage figures of a simulated profile ---------------------------------------------------
def stage_figures(profile: str | None) -> dict[str, Any]:
    """Per stage (stage i on IPU i) of a simulated profile: busy cycles, the fullest tile,
    the IPU's bytes and out-of-memory tiles; {} when it cannot be read."""
    if not profile:
        return {}
    from analyser.core.analysis import Analysis

    try:
        with Analysis.open(profile) as a:
            m = a.memory
            ex = a.execution
            return {
                "cycles": [int(v) for v in ex.stage_cycles] if ex is not None else [],
                "balance": float(ex.stage_imbalance) if ex is not None else None,
                "max_tile_bytes": [int(v) for v in m.tile_used.max(axis=1)],
                "ipu_bytes": [int(v) for v in m.ipu_total()],
                "oom_tiles": [int(v) for v in m.oom_tiles_per_ipu()],
                "sram_per_tile": int(m.sram_per_tile),
            }
    except Exception:  # an unreadable profile: no per-stage figures
        return {}


# -- the search ---------------------------------------------------------------------------------
@dataclass
class SplitSearch:
    """One auto-split search over ``spec`` from ``base_row`` (a tune Row), its simulations
    through ``evaluate(configs) -> rows`` and ranked by ``key(row)`` (higher is better)."""

    spec: AutoSplit
    base: Any  # search.Row
    evaluate: Callable[[list[dict[str, Any]]], list[Any]]
    key: Callable[[Any], tuple]
    left: Callable[[], int]
    objective: str = "throughput"
    budget: int = 0
    #: rows of this search, by (split points, proportions)
    tried: dict[tuple, Any] = field(default_factory=dict)
    figures: dict[int, dict[str, Any]] = field(default_factory=dict)
    scored: int = 0
    basis: str = ""
    phases: list[str] = field(default_factory=list)
    _amps0: tuple[float, ...] = ()

    def run(self) -> None:
        self.budget = self.left()
        base = self.base.config
        amps0 = base_proportions(base)
        if len(amps0) != self.spec.stages:
            amps0 = (amps0[0] if amps0 else _default_proportion(base),) * self.spec.stages
        self._amps0 = amps0
        self.tried[(tuple(base.get("split_points") or []), tuple(amps0))] = self.base
        costs = block_costs(self.base.response.profile, self.spec.blocks)
        names = costs.names if costs is not None else self.spec.blocks
        if costs is not None:
            bounds, _, self.scored = score_partitions(costs, self.spec.stages)
            self.basis = costs.basis
            top = [tuple(names[i] for i in b) for b in bounds[: model_share(self.budget)]]
            self.phases.append(f"model: {len(top)} of {self.scored:,} partitions")
            self._simulate([(s, amps0) for s in top])
        self._climb(names, amps0)
        if len(self.spec.proportions) > 1 and self.left() > 0:
            # the best few splits each get their per-stage pick: a split out of memory at the
            # base's proportions may fit, and win, with a lower one on its fullest IPU
            ranked = sorted(
                ((k, r) for k, r in self.tried.items() if k[1] == tuple(amps0)),
                key=lambda kr: self.key(kr[1]),
                reverse=True,
            )
            for (split, _), _row in ranked[:PROPORTION_SPLITS]:
                if self.left() <= 0:
                    break
                self._proportions(split)
            best = self.best()
            amps = next(k[1] for k, r in self.tried.items() if r is best)
            self._climb(names, amps)

    def best(self) -> Any:
        return max(self.tried.values(), key=self.key)

    def adopt(self, rows: list[Any]) -> None:
        """Rows of this search's configurations answered outside :meth:`_simulate` (a batch
        cut short), keyed like its own."""
        known = {id(r) for r in self.tried.values()}
        for r in rows:
            if id(r) not in known:
                k = (
                    tuple(r.config.get("split_points") or []),
                    tuple(float(x) for x in base_proportions(r.config)),
                )
                self.tried.setdefault(k, r)

    def _simulate(self, items: list[tuple[tuple[str, ...], tuple[float, ...]]]) -> None:
        todo: list[tuple[tuple[tuple[str, ...], tuple[float, ...]], dict[str, Any]]] = []
        for s, a in items:
            k = (tuple(s), tuple(float(x) for x in a))
            if k not in self.tried and k not in [t[0] for t in todo]:
                todo.append((k, with_split(self.base.config, s, a)))
        todo = todo[: self.left()]
        if not todo:
            return
        rows = self.evaluate([c for _, c in todo])
        by_config = {_config_key(r.config): r for r in rows}
        for k, c in todo:
            r = by_config.get(_config_key(c))
            if r is not None:
                self.tried[k] = r

    def _climb(self, names: list[str], amps: tuple[float, ...]) -> None:
        """Move to the best neighbour (a boundary one block earlier or later) while one is
        better than the centre."""
        pos = {n: i for i, n in enumerate(names)}
        rounds, why = 0, "the budget is spent"
        while self.left() > 0:
            mine = [(k, r) for k, r in self.tried.items() if k[1] == tuple(amps)]
            mine = [(k, r) for k, r in mine if all(s in pos for s in k[0])]
            if not mine:
                why = "no split of whole blocks to start from"
                break
            (split, _), centre = max(mine, key=lambda kr: self.key(kr[1]))
            idx = [pos[s] for s in split]
            items = []
            for j in range(len(idx)):
                for step in (-1, 1):
                    new = list(idx)
                    new[j] += step
                    ok = 0 < new[j] < len(names) and all(a < b for a, b in itertools.pairwise(new))
                    if ok:
                        items.append((tuple(names[i] for i in new), amps))
            before = len(self.tried)
            self._simulate(items)
            if len(self.tried) == before:
                why = "every neighbour of the best was simulated already"
                break
            rounds += 1
            if self.key(self.best_of(amps)) <= self.key(centre):
                why = "no neighbour of the best is better"
                break
        self.phases.append(
            f"climb at proportions {_amps_text(amps)}: {rounds} round(s), stopped as {why}"
        )

    def best_of(self, amps: tuple[float, ...]) -> Any:
        return max((r for k, r in self.tried.items() if k[1] == tuple(amps)), key=self.key)

    def _proportions(self, split: tuple[str, ...]) -> None:
        """``split`` at every proportion choice on all IPUs, then the per-stage pick."""
        n = self.spec.stages
        self._simulate([(split, (v,) * n) for v in self.spec.proportions])
        runs: list[tuple[float, dict[str, Any]]] = []
        for v in self.spec.proportions:
            r = self.tried.get((split, (v,) * n))
            f = self._stage_figures(r) if r is not None else {}
            if f.get("max_tile_bytes") and len(f["max_tile_bytes"]) >= n:
                runs.append((v, f))
        if not runs:
            return
        # per stage, the choices with which its IPU fits; of those, the one with the fewest
        # cycles when every one ran (a run out of memory on another IPU has no cycles: then
        # each fitting choice stays and their combinations are simulated)
        choices = []
        mine = self._amps0
        for s in range(n):
            fits = [(v, f) for v, f in runs if f["oom_tiles"][s] == 0] or runs
            near = sorted(fits, key=lambda vf: abs(vf[0] - mine[s]))
            if self.objective == "memory_headroom":
                v = min(near, key=lambda vf: vf[1]["max_tile_bytes"][s])[0]
                choices.append([v])
            elif all(len(f["cycles"]) > s for _, f in near):
                # equal figures keep the base's proportion: no change without a measured gain
                v = min(near, key=lambda vf: vf[1]["cycles"][s])[0]
                choices.append([v])
            else:
                choices.append([v for v, _ in near])
        picks = [tuple(c) for c in itertools.product(*choices)][: len(self.spec.proportions)]
        self._simulate([(split, amps) for amps in picks])
        self.phases.append(
            f"proportions at {'+'.join(split)}: {len(runs)} uniform run(s), per-stage "
            f"pick{'s' if len(picks) > 1 else ''} {', '.join(map(_amps_text, picks))}"
        )

    def _stage_figures(self, row: Any) -> dict[str, Any]:
        if row.id not in self.figures:
            self.figures[row.id] = stage_figures(row.response.profile)
        return self.figures[row.id]

    def report(self, start_config: dict[str, Any], table=None) -> dict[str, Any]:
        """The chosen split against the user's (the base's), per stage with intervals."""
        from analyser.core import intervals

        best = self.best()
        out: dict[str, Any] = {
            "budget": self.budget,
            "tried": len(self.tried) - 1,
            "blocks": len(self.spec.blocks),
            "stages": self.spec.stages,
            "proportions": self.spec.proportions,
            "partitions_scored": self.scored,
            "model_basis": self.basis or "none (the base profile could not be read)",
            "phases": self.phases,
            "user": self._side(self.base, table),
            "chosen": self._side(best, table),
            "chosen_id": best.id,
            "user_id": self.base.id,
            # the options the base (the best the other levers found) changed from the start:
            # "your split" is the start's split with them
            "base_changes": {
                k: [start_config.get(k), v]
                for k, v in self.base.config.items()
                if start_config.get(k) != v and k != "name"
            },
        }
        key = "throughput_samples_per_s"
        fb, fa = self.base.figures, best.figures
        ch = intervals.relative(
            key,
            _num(fb.get(key)),
            _num(fa.get(key)),
            intervals.features_from(fb, self.base.config),
            intervals.features_from(fa, best.config),
            intervals.default_table() if table is None else table,
        )
        out["throughput_change"] = ch.to_dict()
        return out

    def _side(self, row: Any, table) -> dict[str, Any]:
        from analyser.core import intervals

        table = intervals.default_table() if table is None else table
        f = self._stage_figures(row)
        feats = intervals.features_from(row.figures, row.config)
        key = "throughput_samples_per_s"
        thr = intervals.absolute(key, _num(row.figures.get(key)), feats, table)
        stages = []
        sram = f.get("sram_per_tile")
        for s in range(len(f.get("max_tile_bytes", []))):
            cyc = f["cycles"][s] if s < len(f.get("cycles", [])) else None
            # a stage's busy cycles carry the range of the device's cycles (the same engine
            # time error of the prediction's class)
            civ = intervals.absolute("device_cycles", _num(cyc), feats, table)
            mem = intervals.memory_statement(
                feats, f["oom_tiles"][s] == 0, f["max_tile_bytes"][s], sram, table
            )
            stages.append(
                {
                    "stage": s,
                    "ipu": s,
                    "cycles": cyc,
                    "cycles_interval": civ.to_dict(),
                    "max_tile_bytes": f["max_tile_bytes"][s],
                    "ipu_bytes": f["ipu_bytes"][s],
                    "oom_tiles": f["oom_tiles"][s],
                    "memory": mem,
                }
            )
        return {
            "id": row.id,
            "split_points": list(row.config.get("split_points") or []),
            "proportions": list(base_proportions(row.config)),
            "fits": bool(row.figures.get("fits")),
            "throughput_samples_per_s": row.figures.get(key),
            "throughput_interval": thr.to_dict(),
            "balance": f.get("balance"),
            "sram_per_tile": sram,
            "stages": stages,
        }


def model_share(budget: int) -> int:
    """Model candidates simulated before the climb: a third of the budget, at most
    :data:`MAX_MODEL`, at least one."""
    return max(1, min(MAX_MODEL, budget // 3))


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _amps_text(amps: Sequence[float]) -> str:
    return "+".join(f"{a:g}" for a in amps)


def _config_key(cfg: dict[str, Any]) -> str:
    import json

    return json.dumps(cfg, sort_keys=True, default=str)
