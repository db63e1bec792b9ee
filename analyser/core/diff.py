"""An aligned diff of two runs: where the change in total cycles comes from, step by step.

``diff_runs(a, b)`` aligns the two profiles' executed steps on each IPU by program name and
occurrence (the k-th execution of program ``layer3.8.conv2/fwd`` on IPU 0 in A against the k-th
in B; the Liveness compare aligns its steps the same way) and splits the change in total cycles
into deltas by step type, by layer and by program that add up **exactly** to it:

* on every IPU, the total cycles are the IPU's executed steps plus a remainder the steps do not
  cover (``(not in steps)``: idle gaps when positive, overlapping steps when negative; zero for
  the engine's profiles, whose steps tile each IPU's timeline), so
  ``sum(delta by type) == sum(delta by layer) == sum(delta by program) == B.total - A.total``
  for each IPU, as integers;
* a step of A with no partner in B (a program run fewer times, e.g. a smaller gradient
  accumulation) counts as removed, one of B without a partner as added;
* the run-option differences and the plain-language explanations come from the explained
  comparison (:func:`analyser.core.comparison.compare_pair`).

Vectorised: one stable sort per IPU and side (a radix sort of 16-bit name codes); no Python
loop over steps. Each run's step table is read once, for four columns (IPU, program, cycles,
step type); no pandas: the tables are :class:`Rows` of numpy columns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from analyser.core.execution import PartialExecutionSummary, exact_sums, summarise_execution
from profiles import schema
from profiles.errors import ProfileError, UserFacingError

if TYPE_CHECKING:
    # pandas (about 0.4 s of CPU to import) only for the tables as DataFrames (notebooks,
    # the GUI); the explanations are imported where a diff is computed, not when the module
    # is: the CLI and the GUI import this module to name its types and functions
    import pandas as pd

    from analyser.core.analysis import Analysis
    from analyser.core.comparison import ConfigDiff, Explanation

#: Rows summed at a time when the steps are not grouped by IPU (bounded temporaries).
_BLOCK = 1 << 20
#: Name of the remainder row: total cycles not covered by executed steps.
NOT_IN_STEPS = "(not in steps)"
#: Layer of steps whose program belongs to no operation (syncs, stream copies, host calls).
NO_LAYER = "(no layer)"


class DiffError(UserFacingError):
    """The two profiles cannot be diffed (one did not run)."""


def _names(values: np.ndarray) -> np.ndarray:
    return np.array(
        [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values.tolist()],
        dtype=object,
    )


@dataclass
class _Side:
    """One run's steps (IPU, program row, cycles; start when asked) and their sums."""

    name: str
    total: int
    n_ipus: int
    ipu: np.ndarray
    prog: np.ndarray
    cycles: np.ndarray
    start: np.ndarray | None  # read only for the trace's delta lane (else per row on demand)
    prog_names: np.ndarray  # per program row: its name
    prog_layers: np.ndarray  # per program row: its layer (or NO_LAYER)
    #: [IPUs]: steps of each IPU; whether the steps are grouped by IPU (rows of IPU i are
    #: [offsets[i], offsets[i + 1]), as the format stores them)
    per_ipu: np.ndarray
    grouped: bool
    #: exact sums: [IPUs, program rows] cycles and steps, [IPUs * step types] cycles
    per_prog: np.ndarray | None = None
    steps: np.ndarray | None = None
    per_type: np.ndarray | None = None

    @property
    def offsets(self) -> np.ndarray:
        """The first row of each IPU's steps (when grouped), and the total at the end."""
        return np.r_[0, np.cumsum(self.per_ipu)]


def _read(a: Analysis, *, starts: bool = False) -> _Side:
    """One run's steps: the columns the alignment needs (IPU, program row, cycles; the start
    when asked) and, summed in the same pass from those and the step type, the cycles and steps
    by (IPU, program row) and the cycles by (IPU, step type), exact integers. Only these
    columns are read: the other figures of the execution summary come on first use
    (:class:`analyser.core.execution.PartialExecutionSummary`, kept as the analysis's summary
    when none is made yet)."""
    if not a.has_execution:
        raise DiffError(
            f"profile {a.path} has no execution (the program does not fit in memory); "
            "diff needs two runs."
        )
    src = a.src
    prog_names = _names(src.column("/programs/nodes", "name"))
    op_of_prog = src.column("/programs/nodes", "op").astype(np.int64)
    layers = _names(src.column("/graph/operations", "layer"))
    ok = (op_of_prog >= 0) & (op_of_prog < layers.size)
    prog_layers = np.full(prog_names.size, NO_LAYER, dtype=object)
    prog_layers[ok] = layers[op_of_prog[ok]]
    n, n_ipus, n_prog = src.n_steps, int(a.target.num_ipus), prog_names.size
    n_types = len(schema.PROGRAM_TYPES)
    kt, kp = n_ipus * n_types, n_ipus * n_prog
    per_type = np.zeros(kt, np.int64)
    per_prog, steps = np.zeros(kp, np.int64), np.zeros(kp, np.int64)
    # whole columns, one read each (the reader checks their values: every program row and step
    # type exists, every IPU is one of the profile's, cycles are >= 0): the diff keeps them
    # anyway, and one read per column spares a fresh buffer per chunk and column (fresh pages
    # the kernel zeroes: in one measurement 9x the page faults of a whole-column read)
    cols = {c: _step_column(src, c, n) for c in ("ipu", "program", "cycles", "type")}
    if starts:
        cols["start"] = _step_column(src, "start", n)
    ipu, prog, typ = cols["ipu"], cols["program"], cols["type"]
    if ipu.dtype.kind not in "iu":
        ipu = ipu.astype(np.int64)
    cycles = cols["cycles"].astype(np.int64, copy=False)
    grouped = bool((ipu[1:] >= ipu[:-1]).all()) if n else True
    # the sums: by slices of one IPU's steps when grouped (by program row and step type alone),
    # else by blocks of rows with (IPU, label) keys; exact while every partial sum of a part is
    # below 2**53 (float64 holds those integers exactly), else exact_sums sorts
    if grouped:
        # searched in the column's own type: a search with int64 values would first copy the
        # whole int16 column to int64
        t = ipu.dtype if n_ipus - 1 <= np.iinfo(ipu.dtype).max else np.dtype(np.int64)
        bounds = np.r_[np.searchsorted(ipu, np.arange(n_ipus, dtype=t)), n]
        parts = [(int(bounds[i]), int(bounds[i + 1]), i) for i in range(n_ipus)]
    else:
        parts = [(lo, min(n, lo + _BLOCK), -1) for lo in range(0, n, _BLOCK)]
    # one buffer of each kind for every part: a fresh array per part would be fresh pages
    # the kernel zeroes each time (the parts are 10-100 MB), and bincount casts its keys to
    # intp itself unless given them so
    size = max((hi - lo for lo, hi, _ in parts), default=0)
    w_buf, k_buf = np.empty(size, np.float64), np.empty(size, np.intp)
    for lo, hi, i in parts:
        if hi <= lo:
            continue
        cy = cycles[lo:hi]
        big = float(cy.max()) * cy.size
        if big < 2.0**53:
            w = w_buf[: hi - lo]
            np.copyto(w, cy, casting="unsafe")
        else:
            w = cy
        key = k_buf[: hi - lo]
        if i >= 0:
            at_t = slice(i * n_types, (i + 1) * n_types)
            at_p = slice(i * n_prog, (i + 1) * n_prog)
            np.copyto(key, typ[lo:hi], casting="unsafe")
            per_type[at_t] += exact_sums(key, w, n_types, big)
            np.copyto(key, prog[lo:hi], casting="unsafe")
            per_prog[at_p] += exact_sums(key, w, n_prog, big)
            steps[at_p] += np.bincount(key, minlength=n_prog)
        else:
            np.copyto(key, ipu[lo:hi], casting="unsafe")
            key *= n_types
            key += typ[lo:hi]
            per_type += exact_sums(key, w, kt, big)
            np.copyto(key, ipu[lo:hi], casting="unsafe")
            key *= n_prog
            key += prog[lo:hi]
            per_prog += exact_sums(key, w, kp, big)
            steps += np.bincount(key, minlength=kp)
    del w_buf, k_buf
    del typ, cols["type"]
    if "execution" not in a.__dict__:
        # the summary of these sums (what the explanations read first); the rest on demand
        a.__dict__["execution"] = PartialExecutionSummary(
            src,
            cycles_by_type=per_type.reshape(n_ipus, n_types),
            program_cycles_by_ipu=per_prog.reshape(n_ipus, n_prog),
            program_executions_by_ipu=steps.reshape(n_ipus, n_prog),
            full=lambda: summarise_execution(src),
        )
    steps2 = steps.reshape(n_ipus, n_prog)
    return _Side(
        a.name,
        int(a.execution.total_cycles),
        n_ipus,
        ipu,
        prog,
        cycles,
        cols["start"].astype(np.int64, copy=False) if starts else None,
        prog_names,
        prog_layers,
        steps2.sum(axis=1),
        grouped,
        per_prog.reshape(n_ipus, n_prog),
        steps2,
        per_type,
    )


def _step_column(src: Any, name: str, n: int) -> np.ndarray:
    """The whole step column ``name`` (its ``n`` rows), as stored."""
    values = np.asarray(src.array(f"/execution/steps/{name}"))
    if values.shape != (n,):
        raise ProfileError(
            f"profile {src.path}: column /execution/steps/{name} has "
            f"{values.shape[0] if values.ndim else 0} rows, the table has {n} steps."
        )
    return values


@dataclass(frozen=True)
class StepDelta:
    """One aligned step whose cycles changed."""

    ipu: int
    program: str
    occurrence: int
    start_a: int
    start_b: int
    cycles_a: int
    cycles_b: int

    @property
    def delta(self) -> int:
        """Cycles of B minus cycles of A."""
        return self.cycles_b - self.cycles_a


@dataclass(frozen=True)
class Rows:
    """One table of a diff as named columns of one length (numpy arrays), in row order: what
    the CLI prints and the JSON holds, made without pandas (:meth:`to_frame` for a
    DataFrame)."""

    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def take(self, rows: np.ndarray) -> Rows:
        """The rows ``rows`` (positions), in that order."""
        return Rows({k: v[rows] for k, v in self.columns.items()})

    def of_ipu(self, ipu: int) -> Rows:
        """The rows of IPU ``ipu``."""
        return self.take(np.flatnonzero(self.columns["ipu"] == ipu))

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts of plain Python values (ints, strings)."""
        keys = list(self.columns)
        values = [v.tolist() for v in self.columns.values()]
        return [dict(zip(keys, r)) for r in zip(*values)]

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (pandas imported here)."""
        import pandas as pd

        return pd.DataFrame(self.columns)


@dataclass
class RunDiff:
    """Two runs aligned step by step (see the module docstring)."""

    a: str
    b: str
    total_a: int
    total_b: int
    samples_a: int | None
    samples_b: int | None
    #: rows (ipu, type, a, b, delta): cycles by step type on each IPU, with NOT_IN_STEPS
    type_rows: Rows
    #: rows (ipu, layer, a, b, delta), with NOT_IN_STEPS
    layer_rows: Rows
    #: rows (ipu, program, a, b, delta, steps_a, steps_b), with NOT_IN_STEPS
    program_rows: Rows
    #: rows ipu: steps in A, in B, aligned, removed (A only), added (B only)
    alignment_rows: Rows
    #: the aligned steps with the largest |delta| (largest first)
    largest: list[StepDelta]
    config_diffs: list[ConfigDiff] = field(default_factory=list)
    explanations: list[Explanation] = field(default_factory=list)
    other_deltas: list[str] = field(default_factory=list)
    #: the calibrated range of the total cycles' change (an Interval object, docs/report-schema.md;
    #: both runs are predictions), or the sentence saying it is outside the validated range
    interval: dict[str, Any] = field(default_factory=dict)

    @property
    def delta(self) -> int:
        """Total of B minus total of A."""
        return self.total_b - self.total_a

    # the tables as DataFrames, for notebooks and the GUI (pandas imported on first use)
    @property
    def by_type(self) -> pd.DataFrame:
        """:attr:`type_rows` as a DataFrame."""
        return self.type_rows.to_frame()

    @property
    def by_layer(self) -> pd.DataFrame:
        """:attr:`layer_rows` as a DataFrame."""
        return self.layer_rows.to_frame()

    @property
    def by_program(self) -> pd.DataFrame:
        """:attr:`program_rows` as a DataFrame."""
        return self.program_rows.to_frame()

    @property
    def alignment(self) -> pd.DataFrame:
        """:attr:`alignment_rows` as a DataFrame."""
        return self.alignment_rows.to_frame()

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the JSON of ``analyse diff --json``)."""
        return {
            "a": self.a,
            "b": self.b,
            "total_cycles": {
                "a": self.total_a,
                "b": self.total_b,
                "delta": self.delta,
                "interval": self.interval,
            },
            "samples": {"a": self.samples_a, "b": self.samples_b},
            "by_type": self.type_rows.records(),
            "by_layer": self.layer_rows.records(),
            "by_program": self.program_rows.records(),
            "alignment": self.alignment_rows.records(),
            "largest_step_deltas": [{**s.__dict__, "delta": s.delta} for s in self.largest],
            "config_diffs": [
                {"key": c.key, "before": c.before, "after": c.after} for c in self.config_diffs
            ],
            "explanations": [
                {"text": e.text, "metric": e.metric, "config_keys": list(e.config_keys)}
                for e in self.explanations
            ],
            "other_deltas": list(self.other_deltas),
        }


def _table(
    ipus: int,
    labels: np.ndarray,
    a_sums: np.ndarray,
    b_sums: np.ndarray,
    rest: tuple[np.ndarray, np.ndarray],
    key: str,
    extra: dict[str, np.ndarray] | None = None,
) -> Rows:
    """Rows (ipu, key, a, b, delta[, extra]) of the labels used by either run on each IPU,
    plus the NOT_IN_STEPS remainder of each IPU; largest |delta| first within an IPU."""
    n = labels.size
    a2, b2 = a_sums.reshape(ipus, n), b_sums.reshape(ipus, n)
    used = (a2 != 0) | (b2 != 0)
    ex2 = {name: e.reshape(ipus, n) for name, e in (extra or {}).items()}
    for e in ex2.values():
        used |= e != 0
    # each IPU's used labels then its remainder, as one array per column
    ipu_of, lab = np.nonzero(used)  # by IPU, then label: each IPU's used labels in order
    counts = used.sum(axis=1)
    ends = np.cumsum(counts + 1)  # each IPU's remainder row after its labels
    at = np.arange(ipu_of.size) + ipu_of  # rows of the labels (one remainder row per IPU before)
    m = int(ends[-1]) if ipus else 0
    ipu_col = np.repeat(np.arange(ipus, dtype=np.int64), counts + 1)
    names = np.full(m, NOT_IN_STEPS, dtype=object)
    names[at] = labels[lab]
    cols: dict[str, np.ndarray] = {"ipu": ipu_col, key: names}
    for name, x, r in (("a", a2, rest[0]), ("b", b2, rest[1])):
        v = np.empty(m, np.int64)
        v[at] = x[ipu_of, lab]
        v[ends - 1] = r[:ipus]
        cols[name] = v
    cols["delta"] = cols["b"] - cols["a"]
    for name, e in ex2.items():
        v = np.zeros(m, np.int64)
        v[at] = e[ipu_of, lab]
        cols[name] = v
    # largest |delta| first within each IPU, ties in label order (a stable sort by IPU, then
    # by -|delta|)
    order = np.lexsort((-np.abs(cols["delta"]), ipu_col))
    cols = {k: cols[k][order] for k in ("ipu", key, "a", "b", "delta", *ex2)}
    return Rows(cols)


def _starts(an: Analysis, rows: np.ndarray) -> np.ndarray:
    """Start cycles of some steps (a few rows read, not the column)."""
    if not rows.size:
        return np.zeros(0, np.int64)
    uniq, inverse = np.unique(rows, return_inverse=True)
    values = np.asarray(an.src.profile.array("/execution/steps/start", uniq), np.int64)
    return values[inverse]


def _top(
    a: _Side, b: _Side, rows: tuple[np.ndarray, np.ndarray, np.ndarray], n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The aligned steps (rows of A, of B, occurrence) with the ``n`` largest |delta|, in the
    order given: a stable sort of the concatenated tops of several parts by |delta| gives the
    order of one sort over all of them."""
    ra, rb, occ = rows
    size = np.abs(b.cycles[rb] - a.cycles[ra])
    if n < size.size:  # only the steps at least as large as the n-th largest can be in it
        floor = max(1, int(np.partition(size, size.size - n)[size.size - n]) if n else 1)
        top = np.flatnonzero(size >= floor)
    else:
        top = np.flatnonzero(size)
    top = np.sort(top[np.argsort(-size[top], kind="stable")[:n]])
    return ra[top], rb[top], occ[top]


def _largest(
    runs: tuple[Analysis, Analysis],
    a: _Side,
    b: _Side,
    tops: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    n: int,
) -> list[StepDelta]:
    if tops:
        ia, ib, occ = (np.concatenate(x) for x in zip(*tops))
    else:
        ia = ib = occ = np.zeros(0, np.int64)
    d = b.cycles[ib] - a.cycles[ia]
    top = np.argsort(-np.abs(d), kind="stable")[:n]
    start_a, start_b = _starts(runs[0], ia[top]), _starts(runs[1], ib[top])
    return [
        StepDelta(
            int(a.ipu[ia[j]]),
            str(a.prog_names[a.prog[ia[j]]]),
            int(occ[j]),
            int(start_a[k]),
            int(start_b[k]),
            int(a.cycles[ia[j]]),
            int(b.cycles[ib[j]]),
        )
        for k, j in enumerate(top)
    ]


def _by_code(codes: np.ndarray) -> np.ndarray:
    """Stable order of ``codes``: a radix sort of 16-bit codes (numpy's stable sort of 8 /
    16-bit integers), else a merge sort."""
    return np.argsort(codes, kind="stable")


def _ipu_rows(s: _Side, i: int) -> tuple[int, np.ndarray | None, np.ndarray]:
    """IPU ``i``'s steps of one run: (first row, None, program rows) when the steps are grouped
    by IPU (a slice, nothing gathered), else (0, rows, program rows)."""
    if s.grouped:
        lo, hi = (int(x) for x in s.offsets[i : i + 2])
        return lo, None, s.prog[lo:hi]
    rows = np.flatnonzero(s.ipu == i)
    return 0, rows, s.prog[rows]


def _codes(a: _Side, b: _Side) -> tuple[np.ndarray, np.ndarray, int]:
    """Codes of the program names of A's and B's program rows (one code per distinct name,
    16-bit when they fit: half the bytes gathered per step, and numpy's radix sort), and the
    number of codes."""
    names, codes = np.unique(np.r_[a.prog_names, b.prog_names], return_inverse=True)
    n = max(1, names.size)
    codes = codes.astype(np.uint16 if n <= 1 << 16 else np.int64)
    return codes[: a.prog_names.size], codes[a.prog_names.size :], n


def _pairs(ka: np.ndarray, kb: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions in ``ka``, positions in ``kb``, occurrence) of the aligned steps of two
    sequences of name codes: the k-th occurrence of a code in one with the k-th in the other,
    ordered by code, then occurrence.

    A stable sort of each sequence by code puts the k-th occurrence of a code at its code's
    first position + k; the first min(count in A, count in B) of each code pair up."""
    oa, ob = _by_code(ka), _by_code(kb)
    ca, cb = np.bincount(ka, minlength=n), np.bincount(kb, minlength=n)
    m = np.minimum(ca, cb)
    first_a, first_b = np.cumsum(ca) - ca, np.cumsum(cb) - cb
    total = int(m.sum())
    occ = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(m) - m, m)
    return oa[np.repeat(first_a, m) + occ], ob[np.repeat(first_b, m) + occ], occ


def _aligned_by_ipu(a: _Side, b: _Side) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """(IPU, rows of A, rows of B, occurrence) of the aligned steps of each IPU with steps in
    both runs: same program name, same occurrence of that name on that IPU (:func:`_pairs`),
    ordered by name, then occurrence."""
    code_a, code_b, n = _codes(a, b)
    for i in range(min(a.n_ipus, b.n_ipus)):
        if not a.per_ipu[i] or not b.per_ipu[i]:
            continue
        (lo_a, ra, pa), (lo_b, rb, pb) = _ipu_rows(a, i), _ipu_rows(b, i)
        sel_a, sel_b, occ = _pairs(code_a[pa], code_b[pb], n)
        yield (
            i,
            (lo_a + sel_a if ra is None else ra[sel_a]).astype(np.int32),
            (lo_b + sel_b if rb is None else rb[sel_b]).astype(np.int32),
            occ.astype(np.int32),
        )


#: Steps of each run whose codes bound the largest deltas (:func:`_aligned_tops`).
_PREFIX = 1 << 16


def _aligned_tops(
    a: _Side, b: _Side, n: int
) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The aligned steps of each IPU (their number) and those with the ``n`` largest |delta|
    (:func:`_top` of each IPU's :func:`_aligned_by_ipu`: the same steps in the same order),
    aligning only the names that can hold them.

    An aligned pair's |delta| is at most the larger of its two cycles (cycles are >= 0). The
    first :data:`_PREFIX` steps of each run on an IPU pair up as in the whole alignment (the
    k-th occurrence of a name among them is its k-th in the run), so the ``n``-th largest
    |delta| L among those pairs bounds the IPU's ``n``-th largest from below: a pair of the top
    has a step of at least L cycles on one side, and only the names of such steps need
    aligning (all their steps, so occurrences stay exact); a pair of any other name has
    |delta| < L. When the prefix pairs give no bound, or the names to align hold a quarter of
    the steps or more, the whole IPU is aligned."""
    code_a, code_b, nc = _codes(a, b)
    ipus = max(a.n_ipus, b.n_ipus)
    aligned = np.zeros(ipus, np.int64)
    tops = []
    for i in range(min(a.n_ipus, b.n_ipus)):
        if not a.per_ipu[i] or not b.per_ipu[i]:
            continue
        (lo_a, ra, pa), (lo_b, rb, pb) = _ipu_rows(a, i), _ipu_rows(b, i)
        # steps per name from the runs' steps per program row (no pass over the steps)
        per_name = [
            np.rint(np.bincount(c, np.asarray(s.steps)[i], nc)).astype(np.int64)
            for c, s in ((code_a, a), (code_b, b))
        ]
        m = np.minimum(*per_name)
        aligned[i] = int(m.sum())
        ya = a.cycles[lo_a : lo_a + pa.size] if ra is None else a.cycles[ra]
        yb = b.cycles[lo_b : lo_b + pb.size] if rb is None else b.cycles[rb]
        names = None  # the codes to align (None: all)
        if n and pa.size + pb.size > 4 * _PREFIX:
            pa_, pb_, _ = _pairs(code_a[pa[:_PREFIX]], code_b[pb[:_PREFIX]], nc)
            d = np.abs(yb[pb_] - ya[pa_])
            if np.count_nonzero(d) >= n:
                bound = int(np.partition(d, d.size - n)[d.size - n])
                names = np.zeros(nc, bool)
                names[code_a[pa[ya >= bound]]] = True
                names[code_b[pb[yb >= bound]]] = True
                names &= m > 0
        if names is not None:
            # the steps of those names (a program row's name decides: no codes gathered)
            sub_a = np.flatnonzero(names[code_a][pa])
            sub_b = np.flatnonzero(names[code_b][pb])
            if 4 * (sub_a.size + sub_b.size) >= pa.size + pb.size:
                names = None
        if names is None:  # the whole IPU
            sel_a, sel_b, occ = _pairs(code_a[pa], code_b[pb], nc)
        else:
            sel_a, sel_b, occ = _pairs(code_a[pa[sub_a]], code_b[pb[sub_b]], nc)
            sel_a, sel_b = sub_a[sel_a], sub_b[sel_b]
        rows = (
            (lo_a + sel_a if ra is None else ra[sel_a]).astype(np.int32),
            (lo_b + sel_b if rb is None else rb[sel_b]).astype(np.int32),
            occ.astype(np.int32),
        )
        tops.append(_top(a, b, rows, n))
    return aligned, tops


def align_steps(a: _Side, b: _Side) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows of A, rows of B, occurrence) of the aligned steps: same IPU, same program name,
    same occurrence of that name on that IPU (one IPU at a time: memory of one IPU's steps);
    ordered by IPU, name, then occurrence."""
    out = [np.empty(min(a.cycles.size, b.cycles.size), np.int32) for _ in range(3)]
    t = 0
    for _, *part in _aligned_by_ipu(a, b):
        k = part[0].size
        for o, x in zip(out, part):
            o[t : t + k] = x
        t += k
    return out[0][:t], out[1][:t], out[2][:t]


def diff_runs(a: Analysis, b: Analysis, *, largest: int = 10) -> RunDiff:
    """Align ``b`` against ``a`` and split the change in total cycles (module docstring)."""
    from analyser.core.diff_explain import explain_pair

    sa, sb = _read(a), _read(b)
    ipus = max(sa.n_ipus, sb.n_ipus)

    def rows(x: np.ndarray | None, n: int) -> np.ndarray:  # a run's [IPUs, n] sums on ipus rows
        x = np.asarray(x).reshape(-1, n)
        return np.pad(x, ((0, ipus - x.shape[0]), (0, 0)))

    # cycles and steps per (IPU, program row), summed in the pass over each run's steps: the
    # layer and program tables and the remainder are sums of these (exact integers)
    per_prog = [rows(s.per_prog, s.prog_names.size) for s in (sa, sb)]
    steps = [rows(s.steps, s.prog_names.size) for s in (sa, sb)]
    rest = tuple(
        s.total - p.sum(axis=1) for s, p in zip((sa, sb), per_prog)
    )  # cycles of each IPU's total the steps do not cover
    n_types = len(schema.PROGRAM_TYPES)
    by_type = _table(
        ipus,
        np.array(schema.PROGRAM_TYPES, dtype=object),
        *(rows(s.per_type, n_types).ravel() for s in (sa, sb)),
        rest,
        "type",
    )
    # the alignment, one IPU at a time: only its counts and largest deltas are kept
    aligned, tops = _aligned_tops(sa, sb, largest)

    def by_label(per_prog_label: str, key: str, with_counts: bool) -> Rows:
        labels, codes = np.unique(
            np.r_[getattr(sa, per_prog_label), getattr(sb, per_prog_label)], return_inverse=True
        )
        n = labels.size
        ca, cb = codes[: sa.prog_names.size], codes[sa.prog_names.size :]
        # (IPU, program row) -> (IPU, label)
        keys = [(np.arange(ipus)[:, None] * n + c[None, :]).ravel() for c in (ca, cb)]
        sums = [exact_sums(k, p.ravel(), ipus * n) for k, p in zip(keys, per_prog)]
        extra = None
        if with_counts:
            extra = {
                f"steps_{side}": np.bincount(k, st.ravel(), ipus * n).astype(np.int64)
                for side, k, st in zip("ab", keys, steps)
            }
        return _table(ipus, labels, *sums, rest, key, extra)

    n_a, n_b = (np.pad(s.per_ipu, (0, ipus - s.n_ipus)).astype(np.int64) for s in (sa, sb))
    alignment = Rows(
        {
            "ipu": np.arange(ipus, dtype=np.int64),
            "steps_a": n_a,
            "steps_b": n_b,
            "aligned": aligned,
            "removed": n_a - aligned,
            "added": n_b - aligned,
        }
    )
    why = explain_pair(a, b)
    return RunDiff(
        a=a.name,
        b=b.name,
        total_a=sa.total,
        total_b=sb.total,
        samples_a=a.execution.samples,
        samples_b=b.execution.samples,
        type_rows=by_type,
        layer_rows=by_label("prog_layers", "layer", False),
        program_rows=by_label("prog_names", "program", True),
        alignment_rows=alignment,
        largest=_largest((a, b), sa, sb, tops, largest),
        config_diffs=why.config_diffs,
        explanations=why.explanations,
        other_deltas=why.other_deltas,
        interval=why.interval,
    )


def aligned_deltas(a: Analysis, b: Analysis) -> dict[str, np.ndarray]:
    """The differences along B's timeline, for the delta lane of a trace: every aligned step
    whose cycles changed and every step only B runs (``cycles_a`` -1, ``delta`` its cycles),
    as B's IPU, start, cycles, program and the delta (B - A), sorted by IPU and B's start;
    ``removed``: [steps only A runs, their cycles]."""
    sa, sb = _read(a), _read(b, starts=True)
    ia, ib, _ = align_steps(sa, sb)
    d = sb.cycles[ib] - sa.cycles[ia]
    keep = np.flatnonzero(d)
    added = np.setdiff1d(np.arange(sb.cycles.size), ib, assume_unique=True)
    removed = np.setdiff1d(np.arange(sa.cycles.size), ia, assume_unique=True)
    rows = np.r_[ib[keep], added]
    cycles_a = np.r_[sa.cycles[ia[keep]], np.full(added.size, -1, np.int64)]
    delta = np.r_[d[keep], sb.cycles[added]]
    order = np.lexsort((sb.start[rows], sb.ipu[rows]))
    rows = rows[order]
    return {
        "ipu": sb.ipu[rows].astype(np.int64),
        "start": sb.start[rows],
        "cycles": sb.cycles[rows],
        "cycles_a": cycles_a[order],
        "delta": delta[order],
        "program": sb.prog[rows],
        "removed": np.array([removed.size, int(sa.cycles[removed].sum())], np.int64),
    }
