"""What bounds a step: the critical path of a run, across IPUs, pipeline stages, syncs and the
host (the analysis Holistic Trace Analysis gives GPU traces; Poplar's BSP trace makes it exact).

An IPU's executed steps run one after another. A step's own work is its program's cycles of
one execution (``/programs/nodes/cycles``); what the step took beyond that (``cycles - own``)
it waited: at a ``Sync`` or ``GlobalExchange`` for the other IPUs, at a ``StreamCopyBegin`` for
the host. Walking back from the step that ends last:

* a step that did not wait follows the step before it on its IPU;
* a ``Sync`` / ``GlobalExchange`` that waited was released by the IPU that arrived last: the
  one whose step of the same sync starts at the release time (``start + wait``); the path
  continues on that IPU, at the step before its arrival (its wait was not on the path: the
  other IPU's work was);
* a ``StreamCopyBegin`` that waited, waited for the host: that wait is on the path (a host
  link), then the step before it on its IPU.

Each step on the path contributes its end minus its predecessor's end, so the contributions add
up exactly to the end of the device trace; the host time outside the trace (the events before
the call on the host's main lane: preparing samples or waiting for the loader, the call's
fixed round trip) completes the call, so the links add up to the host-inclusive length of the
run. The predecessor of every step is found with whole-array numpy (one ``searchsorted`` per
IPU), and the path from the last step with pointer doubling (``log2`` of its length rounds of
whole-array gathers): no loop over steps.

Links group the path by IPU and pipeline stage (and the host's parts); each says which layers
it spends its cycles in, and what shortening it could buy: at most ``cycles / (call - cycles)``
were it to take no time, and with ``what_if`` the re-simulated effect of the insights whose
run options act on it (``balancing the split`` for a stage, the loader's options for the host).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analyser.core.source import Source
from profiles.schema import PROGRAM_TYPES

_T = {t: i for i, t in enumerate(PROGRAM_TYPES)}
_STEPS = "/execution/steps"
#: Host events before the call on the host's main lane, as link labels.
HOST_KINDS = {
    "prepare": "the host preparing the samples",
    "waitLoader": "the host waiting for the data loader",
    "call": "the host call's fixed round trip",
}
#: Run options that shorten each kind of link (the insights that change them are its what-if).
LINK_OPTIONS: dict[str, tuple[str, ...]] = {
    "stage": ("split_points", "balance_compute_sets", "precision", "available_memory_proportion"),
    "ipu": ("balance_compute_sets", "precision", "available_memory_proportion", "io_tiles"),
    "stream": ("io_tiles", "prefetch_depth", "eight_bit_input", "device_iterations"),
    "host": (
        "loader_mode",
        "loader_workers",
        "eight_bit_input",
        "device_iterations",
        "gradient_accumulation",
    ),
}
_STREAM = (_T["StreamCopyBegin"], _T["StreamCopyMid"], _T["StreamCopyEnd"])


@dataclass
class PathLink:
    """One link of the critical path: an IPU's stage, an IPU outside its stages, or a part of
    the host's time, with its cycles on the path and its share of the call."""

    key: str
    kind: str  # "stage", "ipu", "stream" (an IPU's stream copies) or "host"
    label: str
    ipu: int
    stage: int
    cycles: int
    share: float
    #: cycles on the path by step type (OnTileExecute, DoExchange, Sync...)
    by_type: dict[str, int] = field(default_factory=dict)
    #: the layers (program name up to its first '/') that take most of the link's cycles
    layers: list[tuple[str, int]] = field(default_factory=list)
    #: how much faster the call would be were this link to take no time (an upper bound)
    bound: float = 0.0
    #: the insights whose run options act on this link, with their re-simulated effect
    what_if: list[dict[str, Any]] = field(default_factory=list)
    #: the link's code among the path's steps (IPU and stage; see ``_link_keys``)
    code: int = field(default=0, repr=False)

    @property
    def options(self) -> tuple[str, ...]:
        """The run options that can shorten this kind of link."""
        return LINK_OPTIONS.get(self.kind, ())

    def to_dict(self) -> dict[str, Any]:
        """The link as plain data (``analyse critical-path --json``)."""
        return {
            "key": self.key,
            "kind": self.kind,
            "label": self.label,
            "ipu": self.ipu,
            "stage": self.stage,
            "cycles": self.cycles,
            "share": self.share,
            "by_type": self.by_type,
            "layers": [{"layer": n, "cycles": c} for n, c in self.layers],
            "bound": None if self.bound == float("inf") else self.bound,  # JSON has no inf
            "options": list(self.options),
            "what_if": self.what_if,
        }


@dataclass
class CriticalPath:
    """The critical path of a profile's run (see the module docstring)."""

    #: host-inclusive cycles of the run: the device trace plus the host time outside it
    call_cycles: int
    device_cycles: int
    host_cycles: int
    #: the path's steps (rows of /execution/steps) in time order, and each one's contribution
    steps: np.ndarray
    contribution: np.ndarray
    links: list[PathLink]
    #: [host calls] cycles of the path in each device iteration (host call) of the trace
    per_call: np.ndarray
    clock_hz: float
    #: [path steps] each step's IPU, start and end cycles, pipeline stage (-1 outside stages),
    #: program and link (index into ``links``): what the GUI draws the path from without
    #: reading the step columns again
    step_ipu: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    step_start: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    step_end: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    step_stage: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    step_program: np.ndarray = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False
    )
    step_link: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The path as plain data: its lengths and links (not its steps)."""
        return {
            "call_cycles": self.call_cycles,
            "device_cycles": self.device_cycles,
            "host_cycles": self.host_cycles,
            "path_steps": int(self.steps.size),
            "clock_hz": self.clock_hz,
            "links": [link.to_dict() for link in self.links],
            "per_call_cycles": [int(x) for x in self.per_call],
        }


def step_predecessors(
    ipu: np.ndarray,
    start: np.ndarray,
    cycles: np.ndarray,
    own: np.ndarray,
    types: np.ndarray,
    offsets: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(pred, wait) of every step: the step before it on the critical path through it (-1 for
    none) and the cycles it waited. Rows are grouped by IPU (``offsets``, as the profile stores
    them) and each IPU's steps are in start order."""
    n = start.size
    wait = np.maximum(cycles - own, 0)
    prev = np.arange(n, dtype=np.int64) - 1
    firsts = offsets[:-1][offsets[:-1] < n]
    prev[firsts] = -1
    pred = prev.copy()
    syncs = (types == _T["Sync"]) | (types == _T["GlobalExchange"])
    hand = np.flatnonzero(syncs & (wait > 0))
    release = start[hand] + wait[hand]
    found = np.zeros(hand.size, dtype=bool)
    for j in range(offsets.size - 1):  # one searchsorted per IPU
        lo, hi = int(offsets[j]), int(offsets[j + 1])
        if hi <= lo or not hand.size:
            continue
        idx = np.searchsorted(start[lo:hi], release, side="left")
        cand = lo + np.minimum(idx, hi - lo - 1)
        ok = ~found & (ipu[hand] != j) & (idx < hi - lo) & (start[cand] == release)
        ok &= types[cand] == types[hand]
        pred[hand[ok]] = prev[cand[ok]]
        found |= ok
    return pred, wait


def path_from(pred: np.ndarray, last: int) -> np.ndarray:
    """The rows on the chain ``last, pred[last], pred[pred[last]], ...``, sorted.

    Most links go to the row before on the same IPU (``pred[k] == k - 1``): such rows form
    runs, and the chain enters a run at some row ``x`` and leaves it from the run's first row.
    So the chain is followed over the entry rows only (the rows that a run's first row points
    to), by pointer doubling (after round k the first 2**k entries are known, in order; one
    gather of them through the 2**k-th successors gives the next 2**k; the successor array is
    squared each round), and each entry's run, from its first row to the entry, is marked with
    a difference array: whole-array numpy, no loop over rows."""
    n = pred.size
    rows = np.arange(n, dtype=np.int64)
    cont = pred == rows - 1  # continues the run of the row before
    first = np.maximum.accumulate(np.where(cont, 0, rows))  # the first row of each row's run
    entries = np.union1d(pred[~cont][pred[~cont] >= 0], [last])
    index = np.full(n + 1, entries.size, dtype=np.int64)  # row -> entry number (size: none)
    index[entries] = np.arange(entries.size)
    after = pred[first[entries]]  # the entry row the chain goes to next (-1: it ends)
    jump = np.append(np.where(after >= 0, index[np.maximum(after, 0)], entries.size), entries.size)
    known = np.array([index[last]], dtype=np.int64)
    for _ in range(64):  # 2**64 entries: more than any trace
        ahead = jump[known]
        stop = np.flatnonzero(ahead == entries.size)
        if stop.size:
            known = np.concatenate((known, ahead[: stop[0]]))
            break
        known = np.concatenate((known, ahead))
        jump = jump[jump]
    hit = entries[known]
    marks = np.bincount(first[hit], minlength=n + 1) - np.bincount(hit + 1, minlength=n + 1)
    return np.flatnonzero(np.cumsum(marks[:n]) > 0)


def _host_parts(src: Source, exposed: int) -> list[tuple[str, int]]:
    """(kind, cycles) of the host's time outside the trace: its main lane's events before the
    call starts, the rest (if any) as one part."""
    if exposed <= 0:
        return []
    parts: dict[str, int] = {}
    if src.has("/execution/host") and src.n_rows("/execution/host"):
        lanes = src.column("/execution/host", "lane").astype(np.int64)
        kinds = src.column("/execution/host", "kind").astype(np.int64)
        starts = src.column("/execution/host", "start").astype(np.int64)
        lens = src.column("/execution/host", "cycles").astype(np.int64)
        enums = src.profile.enums
        lane_names = enums.get("host_lane", ())
        kind_names = enums.get("host_event", ())
        main = lane_names.index("main") if "main" in lane_names else 0
        before = (lanes == main) & (starts < 0)
        for k, c in zip(kinds[before].tolist(), lens[before].tolist(), strict=True):
            name = kind_names[k] if 0 <= k < len(kind_names) else "host"
            parts[name] = parts.get(name, 0) + int(c)
    total = sum(parts.values())
    if total > exposed:  # the timeline and the totals disagree: scale to the totals
        parts = {k: round(v * exposed / total) for k, v in parts.items()}
        total = sum(parts.values())
    if exposed - total > 0:
        parts["other"] = parts.get("other", 0) + exposed - total
    return [(k, v) for k, v in parts.items() if v > 0]


def critical_path(src: Source, top_layers: int = 3) -> CriticalPath | None:
    """The critical path of ``src``'s run (None without an execution)."""
    if not src.has_execution or not src.n_steps:
        return None
    col = lambda c: src.column(_STEPS, c)  # noqa: E731
    ipu = col("ipu")
    start = col("start").astype(np.int64, copy=False)
    cycles = col("cycles").astype(np.int64, copy=False)
    program = col("program")
    types = col("type")
    prog_cycles = src.column("/programs/nodes", "cycles").astype(np.int64, copy=False)
    own = prog_cycles[np.clip(program, 0, max(0, prog_cycles.size - 1))]
    offsets = src.ipu_offsets()
    pred, wait = step_predecessors(ipu, start, cycles, own, types, offsets)
    end = start + cycles
    last = int(np.argmax(end))
    chain = path_from(pred, last)
    before_end = np.where(pred[chain] >= 0, end[np.maximum(pred[chain], 0)], 0)
    contrib = end[chain] - before_end
    attrs = src.execution_attrs
    device = int(end[last])
    inclusive = int(attrs.get("host_inclusive_cycles") or 0)
    exposed = max(0, inclusive - int(attrs.get("total_cycles") or device))
    call = device + exposed
    stage = col("stage")[chain].astype(np.int64)
    keys = _link_keys(ipu[chain], stage, types[chain])
    links = _links(keys, contrib, types[chain], wait[chain])
    _add_layers(src, links, keys, contrib, program[chain], top_layers)
    for kind, cyc in _host_parts(src, exposed):
        links.append(
            PathLink(
                key=f"host.{kind}",
                kind="host",
                label=HOST_KINDS.get(kind, "the host (outside the device trace)"),
                ipu=-1,
                stage=-1,
                cycles=int(cyc),
                share=0.0,
            )
        )
    for link in links:
        link.share = link.cycles / call if call else 0.0
        rest = call - link.cycles
        link.bound = (call / rest - 1.0) if rest > 0 else float("inf")
    links.sort(key=lambda x: -x.cycles)
    iteration = col("iteration").astype(np.int64)[chain]
    calls = np.bincount(np.maximum(iteration, 0), weights=contrib).astype(np.int64)
    return CriticalPath(
        call_cycles=call,
        device_cycles=device,
        host_cycles=exposed,
        steps=chain,
        contribution=contrib,
        links=links,
        per_call=calls,
        clock_hz=float(src.meta.get("clock_hz") or 0.0),
        step_ipu=np.asarray(ipu[chain], dtype=np.int64),
        step_start=start[chain],
        step_end=end[chain],
        step_stage=stage,
        step_program=np.asarray(program[chain], dtype=np.int64),
        step_link=_link_of_steps(links, keys),
    )


def _link_of_steps(links: list[PathLink], keys: np.ndarray) -> np.ndarray:
    """[path steps] the index in ``links`` (sorted, host links among them) of each step's
    link: one ``searchsorted`` over the device links' codes."""
    device = [i for i, link in enumerate(links) if link.kind != "host"]
    if not device or not keys.size:
        return np.full(keys.size, -1, dtype=np.int64)
    codes = np.array([links[i].code for i in device], dtype=np.int64)
    order = np.argsort(codes)
    at = np.clip(np.searchsorted(codes[order], keys), 0, codes.size - 1)
    found = codes[order][at] == keys
    return np.where(found, np.asarray(device, dtype=np.int64)[order][at], -1)


def _link_keys(ipu: np.ndarray, stage: np.ndarray, types: np.ndarray) -> np.ndarray:
    """A code per path step: (IPU, stage) for a stage's steps, the IPU's stream copies outside
    stages, and the IPU's other steps outside stages (host syncs, copies between stages)."""
    stream = np.isin(types, _STREAM) & (stage < 0)
    return np.where(stage >= 0, stage, np.where(stream, -2, -1)) * 4096 + ipu.astype(np.int64)


def _links(keys, contrib, types, wait) -> list[PathLink]:
    host_wait = np.where(types == _T["StreamCopyBegin"], np.minimum(wait, contrib), 0)
    out = []
    uniq, inverse = np.unique(keys, return_inverse=True)
    total = np.bincount(inverse, weights=contrib, minlength=uniq.size)
    by_type = np.bincount(
        inverse * len(PROGRAM_TYPES) + types.astype(np.int64),
        weights=contrib,
        minlength=uniq.size * len(PROGRAM_TYPES),
    ).reshape(uniq.size, len(PROGRAM_TYPES))
    waits = np.bincount(inverse, weights=host_wait, minlength=uniq.size)
    for u, key in enumerate(uniq.tolist()):  # one per link (IPUs x stages), not per step
        i, s = int(key % 4096), int(key // 4096)
        if s >= 0:
            kind, label, name = "stage", f"stage {s} on IPU {i}", f"ipu{i}.stage{s}"
        elif s == -2:
            kind, label, name = "stream", f"IPU {i}'s stream copies", f"ipu{i}.stream"
        else:
            kind, label, name = "ipu", f"IPU {i} outside its stages", f"ipu{i}.other"
        types_here = {PROGRAM_TYPES[t]: round(by_type[u, t]) for t in np.flatnonzero(by_type[u])}
        if waits[u] > 0:
            types_here["waiting for the host"] = int(waits[u])
        link = PathLink(
            key=name,
            kind=kind,
            label=label,
            ipu=i,
            stage=s if s >= 0 else -1,
            cycles=round(total[u]),
            share=0.0,
            by_type=types_here,
            code=int(key),
        )
        out.append(link)
    return out


def _add_layers(src, links, keys, contrib, program, top) -> None:
    """Each link's layers (a program's name up to its first '/') that take most of its
    cycles: one bincount over (link, program) for all links."""
    if not links:
        return
    names = src.column("/programs/nodes", "name")
    n_prog = max(1, len(names))
    codes = np.array([link.code for link in links], dtype=np.int64)
    order = np.argsort(codes)
    where = order[np.searchsorted(codes[order], keys)]
    prog = np.clip(program.astype(np.int64), 0, n_prog - 1)
    sums = np.bincount(where * n_prog + prog, weights=contrib, minlength=len(links) * n_prog)
    sums = sums.reshape(len(links), n_prog)
    for li, link in enumerate(links):  # per link, over its distinct programs
        hit = np.flatnonzero(sums[li])
        layer_of: dict[str, float] = {}
        for p, c in zip(hit.tolist(), sums[li, hit].tolist(), strict=True):
            raw = names[p]
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
            layer = text.split("/", 1)[0] or text
            layer_of[layer] = layer_of.get(layer, 0.0) + c
        best = sorted(layer_of.items(), key=lambda kv: -kv[1])[:top]
        link.layers = [(n, round(c)) for n, c in best]


#: The summary names the path's top links for traces up to this many steps (the path reads
#: seven step columns whole: 2.8 s for 11 million steps, more than a summary should take).
SUMMARY_STEPS = 2_000_000


def headline(src: Source, n: int = 3) -> str | None:
    """One sentence for the summary: the critical path's ``n`` longest links with their share
    of the call; None without an execution; a pointer to ``analyse critical-path`` for traces
    longer than :data:`SUMMARY_STEPS`."""
    if not src.has_execution:
        return None
    if src.n_steps > SUMMARY_STEPS:
        return (
            f"Critical path: not computed for a summary of {src.n_steps:,} steps; "
            "analyse critical-path gives it."
        )
    path = critical_path(src)
    if path is None or not path.links:
        return None
    parts = ", ".join(f"{link.label} {100 * link.share:.1f}%" for link in path.links[:n])
    return f"Critical path (analyse critical-path): {parts} of the call."


def attach_what_if(path: CriticalPath, insights: list[Any], top: int = 3) -> None:
    """Give each of the ``top`` links the insights whose run options act on it, with their
    re-simulated throughput change (``insights``: :func:`analyser.core.insights.find_insights`
    with a simulator)."""
    for link in path.links[:top]:
        opts = set(link.options)
        for tip in insights:
            keys = {k.split(".", 1)[0] for k in (tip.change or {})}
            if not keys & opts:
                continue
            eff = tip.effect
            entry: dict[str, Any] = {"insight": tip.id, "title": tip.title, "change": tip.change}
            if eff is not None:
                entry["status"] = eff.status
                entry["throughput_change"] = eff.rel("throughput_samples_per_s")
                iv = (eff.intervals or {}).get("throughput_samples_per_s")
                entry["interval"] = (iv or {}).get("change") if isinstance(iv, dict) else None
            link.what_if.append(entry)


__all__ = [
    "CriticalPath",
    "PathLink",
    "attach_what_if",
    "critical_path",
    "headline",
    "path_from",
    "step_predecessors",
]
