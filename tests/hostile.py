"""Hostile inputs: mutations of a valid profile (and of run configs) as a careful attacker or a
broken tool would make them.

Each mutation is a function ``mutate(path)`` that edits a copy of a valid profile *in place
through h5py*, so HDF5's checksums stay valid and the values reach the analyser instead of being
stopped by the file format. The corpus (:func:`profile_mutations`) groups them by category:

* ``structural``: damage to the file's structure (missing datasets, wrong shapes and types);
* ``semantic``: well-formed files whose values are wrong (ids out of range, zero clock, NaN,
  text where a number belongs, offsets that disagree with the rows);
* ``injection``: names made to fool a terminal, a Markdown or HTML viewer, matplotlib;
* ``resource``: small files that ask for huge work (dimension bombs, sizes that are not real);
* ``foreign``: data kept in other files (external links, external raw storage, virtual datasets).

Used by the CI fuzz tests (tests/test_fuzz_corpus.py) and by benchmarks/bench_fuzz.py.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from profiles import schema

Mutation = Callable[[Path], None]

#: Text that must reach every output literally: terminal escapes (clear screen, window title,
#: OSC 8 hyperlink, a C1 CSI), Markdown / HTML injection, matplotlib mathtext, bidi override.
INJECTIONS: dict[str, str] = {
    "terminal": "\x1b[2J\x1b]0;pwned\x07op\x1b]8;;http://evil/\x1b\\x\x1b]8;;\x1b\\\x9b31m",
    "markdown": "op\n# Injected heading\n[x](javascript:alert(1)) <script>alert(1)</script>",
    "html": '<img src=x onerror="alert(1)">&lt;b&gt;',
    "mathtext": r"$\foo$ $\frac{1}{0}$ \$",
    "rich": "[bold red]markup[/] [link=http://evil]x[/link]",
    "bidi": "safe\u202egnp.exe\u2066",
}


# -- primitives -------------------------------------------------------------------------------
def _replace(h5: h5py.File, path: str, values: object, **kw: object) -> None:
    """Replace dataset ``path`` with ``values`` (any dtype / shape), keeping its name."""
    key = path.strip("/")
    if key in h5:
        del h5[key]
    h5.create_dataset(key, data=values, **kw)


def set_values(path: str, values: Callable[[np.ndarray], object]) -> Mutation:
    """Dataset ``path`` := values(old) (same dtype when possible)."""

    def mutate(p: Path) -> None:
        with h5py.File(p, "r+") as h5:
            ds = h5[path.strip("/")]
            old = ds.asstr()[()] if h5py.check_string_dtype(ds.dtype) else ds[()]
            new = np.asarray(values(old))
            if h5py.check_string_dtype(ds.dtype) and new.dtype.kind in "UO":
                _replace(h5, path, new.astype(object), dtype=h5py.string_dtype())
            elif new.shape == ds.shape and new.dtype.kind == ds.dtype.kind:
                ds[...] = new
            else:
                _replace(h5, path, new)

    return mutate


def set_attr(group: str, name: str, value: object) -> Mutation:
    def mutate(p: Path) -> None:
        with h5py.File(p, "r+") as h5:
            h5[group.strip("/") or "/"].attrs[name] = value

    return mutate


def edit_json_attr(group: str, name: str, edit: Callable[[dict], object]) -> Mutation:
    def mutate(p: Path) -> None:
        with h5py.File(p, "r+") as h5:
            attrs = h5[group.strip("/") or "/"].attrs
            doc = json.loads(attrs[name])
            attrs[name] = json.dumps(edit(doc))

    return mutate


def delete(path: str) -> Mutation:
    def mutate(p: Path) -> None:
        with h5py.File(p, "r+") as h5:
            del h5[path.strip("/")]

    return mutate


def combine(*mutations: Mutation) -> Mutation:
    def mutate(p: Path) -> None:
        for m in mutations:
            m(p)

    return mutate


def _with(d: dict, **kw: object) -> dict:
    return {**d, **kw}


# -- foreign data -----------------------------------------------------------------------------
#: A file whose contents must never appear in any output.
SECRET = "TOP-SECRET-NOT-IN-ANY-PROFILE"
#: Rows of the other file's datasets: more than any base profile's table has (a virtual dataset
#: maps as many rows as the column it replaces)
SECRET_ROWS = 4096


def secret_file(folder: Path) -> Path:
    """A non-profile file with a recognisable secret (stands for /etc/passwd)."""
    path = folder / "secret.txt"
    if not path.exists():
        path.write_text((SECRET + "\n") * 64)
    return path


def secret_h5(folder: Path) -> Path:
    path = folder / "secret.h5"
    if not path.exists():
        with h5py.File(path, "w") as h5:
            text = (SECRET * (8 * SECRET_ROWS // len(SECRET) + 1)).encode()
            h5["d"] = np.frombuffer(text[: 8 * SECRET_ROWS], dtype="<i8")
            h5.create_group("g")["name"] = np.array([SECRET] * SECRET_ROWS, dtype=object)
    return path


def _foreign_column(
    column: str, source: Callable[[Path], Path], write: Callable[[h5py.File, str, int, Path], None]
) -> Mutation:
    """Column ``column`` deleted and ``write(h5, key, rows, source file)`` putting a dataset of
    as many rows in its place whose data are kept in ``source(folder)``, another file."""
    key = column.strip("/")

    def mutate(p: Path) -> None:
        src = source(p.parent)
        with h5py.File(p, "r+") as h5:
            n = h5[key].shape[0]
            del h5[key]
            write(h5, key, n, src)

    return mutate


def external_raw(column: str = "/graph/operations/flops") -> Mutation:
    """A column whose bytes are read from another (any) file: h5py ``external=``."""

    def write(h5: h5py.File, key: str, n: int, secret: Path) -> None:
        external = [(str(secret), 0, h5py.h5f.UNLIMITED)]
        h5.create_dataset(key, shape=(n,), dtype="<i8", external=external)

    return _foreign_column(column, secret_file, write)


def virtual(column: str = "/graph/operations/flops") -> Mutation:
    """A virtual dataset mapping a dataset of another HDF5 file."""

    def write(h5: h5py.File, key: str, n: int, src: Path) -> None:
        layout = h5py.VirtualLayout(shape=(n,), dtype="<i8")
        layout[:] = h5py.VirtualSource(str(src), "d", shape=(SECRET_ROWS,))[:n]
        h5.create_virtual_dataset(key, layout, fillvalue=0)

    return _foreign_column(column, secret_h5, write)


def external_link(path: str = "/graph/operations/name") -> Mutation:
    """An external link in place of a dataset (HDF5 follows it into the other file)."""

    def mutate(p: Path) -> None:
        src = secret_h5(p.parent)
        with h5py.File(p, "r+") as h5:
            del h5[path.strip("/")]
            h5[path.strip("/")] = h5py.ExternalLink(str(src), "/g/name")

    return mutate


# -- injection --------------------------------------------------------------------------------
def inject_names(text: str) -> Mutation:
    """Every name a report or a terminal shows carries ``text``: the model, the target's display
    name, operation / layer / program / variable / liveness step names."""

    def prefixed(old: np.ndarray) -> np.ndarray:
        return np.array([f"{text}{s}" for s in np.asarray(old).ravel()], dtype=object)

    return combine(
        set_attr("/meta", "model", f"{text}model"),
        edit_json_attr("/meta", "target", lambda t: _with(t, display_name=f"{text}target")),
        *(
            set_values(p, prefixed)
            for p in (
                "/graph/operations/name",
                "/graph/operations/layer",
                "/graph/operations/type",
                "/graph/variables/name",
                "/programs/nodes/name",
                "/liveness/steps/name",
            )
        ),
    )


# -- semantic ----------------------------------------------------------------------------------
BIG_ID = 2**31 - 1


def _col_set(path: str, value: object, rows: slice | None = None) -> Mutation:
    def values(old: np.ndarray) -> np.ndarray:
        new = np.array(old, copy=True)
        new[slice(None) if rows is None else rows] = value
        return new

    return set_values(path, values)


def semantic_mutations() -> dict[str, Mutation]:
    e, m = "/execution", "/meta"
    return {
        "clock-zero": set_attr(m, "clock_hz", 0.0),
        "clock-nan": set_attr(m, "clock_hz", float("nan")),
        "clock-inf": set_attr(m, "clock_hz", float("inf")),
        "clock-tiny": set_attr(m, "clock_hz", 1e-300),
        "clock-text": set_attr(m, "clock_hz", "fast"),
        "sram-zero": set_attr(m, "sram_per_tile", 0),
        "sram-text": set_attr(m, "sram_per_tile", "big"),
        "sram-negative": set_attr(m, "sram_per_tile", -1),
        "replicas-text": set_attr(m, "replicas", "two"),
        "replicas-array": set_attr(m, "replicas", np.array([1, 2])),
        "replicas-huge": set_attr(m, "replicas", 2**40),
        "samples-negative": set_attr(m, "samples_per_step", -5),
        "status-odd": set_attr(m, "status", "maybe"),
        # the partials type the roofline's compute roof is taken from (format 1.6)
        "partials-odd": set_attr(m, "partials_type", "quarter"),
        "partials-number": set_attr(m, "partials_type", 16),
        "partials-array": set_attr(m, "partials_type", np.array([1, 2])),
        "partials-injected": set_attr(m, "partials_type", INJECTIONS["rich"]),
        "total-cycles-nan": set_attr(e, "total_cycles", float("nan")),
        "throughput-text": set_attr(e, "throughput", "many"),
        "host-seconds-inf": set_attr(e, "host_seconds", float("inf")),
        "samples-zero": set_attr(e, "samples", 0),
        "run-config-list": set_attr(m, "run_config", "[1, 2]"),
        "run-config-types": edit_json_attr(
            m, "run_config", lambda c: _with(c, micro_batch_size="x", mode=5, num_ipus=[1])
        ),
        "run-config-bool": edit_json_attr(
            m, "run_config", lambda c: _with(c, micro_batch_size=True, device_iterations=1e300)
        ),
        "target-types": edit_json_attr(
            m, "target", lambda t: _with(t, tiles_per_ipu="many", clock_hz=None)
        ),
        "target-list": set_attr(m, "target", "[]"),
        "notes-dict": set_attr(m, "notes", '{"a": 1}'),
        "step-program-big": _col_set("/execution/steps/program", BIG_ID, slice(0, 1)),
        "step-program-negative": _col_set("/execution/steps/program", -7, slice(0, 1)),
        "step-ipu-out": _col_set("/execution/steps/ipu", 5, slice(0, 1)),
        "step-type-out": _col_set("/execution/steps/type", 200, slice(0, 1)),
        "step-phase-out": _col_set("/execution/steps/phase", 99, slice(0, 1)),
        "step-dest-out": _col_set("/execution/steps/dest", 77, slice(0, 1)),
        "step-stage-30000": _col_set("/execution/steps/stage", 30000),
        "step-cycles-negative": _col_set("/execution/steps/cycles", -100, slice(0, 3)),
        "step-start-unsorted": set_values("/execution/steps/start", lambda a: a[::-1].copy()),
        "step-iteration-big": _col_set("/execution/steps/iteration", BIG_ID),
        "step-micro-batch-big": _col_set("/execution/steps/micro_batch", BIG_ID),
        "op-ipu-out": _col_set("/graph/operations/ipu", 99, slice(0, 1)),
        "op-stage-huge": _col_set("/graph/operations/stage", 30000),
        "op-tiles-huge": _col_set("/graph/operations/tiles_used", BIG_ID, slice(0, 1)),
        "var-op-big": _col_set("/graph/variables/op", BIG_ID, slice(0, 1)),
        "var-ipu-out": _col_set("/graph/variables/ipu", 42, slice(0, 1)),
        "var-live-big": _col_set("/graph/variables/live_end", BIG_ID, slice(0, 1)),
        "var-kind-out": _col_set("/graph/variables/kind", 250, slice(0, 1)),
        "var-tile-start-big": _col_set("/graph/variables/tile_start", BIG_ID, slice(0, 1)),
        "cs-vertex-type-big": _col_set("/graph/compute_sets/vertex_type", BIG_ID, slice(0, 1)),
        "cs-program-negative": _col_set("/graph/compute_sets/program", -3, slice(0, 1)),
        "lstep-program-big": _col_set("/liveness/steps/program", BIG_ID, slice(0, 1)),
        "lstep-ipu-out": _col_set("/liveness/steps/ipu", 9, slice(0, 1)),
        "peak-step-out": set_values("/liveness/peak_step", lambda a: np.full_like(a, BIG_ID)),
        "peak-step-negative": set_values("/liveness/peak_step", lambda a: np.full_like(a, -4)),
        "liveness-lengths": set_values("/liveness/not_always_live", lambda a: a[:, :3].copy()),
        "program-parent-loop": set_values(
            "/programs/nodes/parent", lambda a: np.where(np.arange(a.size) == 0, 1, a)
        ),
        "program-parent-self": set_values(
            "/programs/nodes/parent", lambda a: np.arange(a.size, dtype=a.dtype)
        ),
        "program-type-out": _col_set("/programs/nodes/type", 99, slice(0, 1)),
        "program-repeat-huge": _col_set("/programs/nodes/repeat", 2**62),
        "program-balance-nan": _col_set("/programs/nodes/tile_balance", np.nan),
        "memory-negative": set_values("/memory/total", lambda a: -np.abs(a) - 1),
        "memory-huge": set_values("/memory/total", lambda a: np.full_like(a, 2**62)),
        "offsets-wrong": set_values("/execution/ipu_offsets", lambda a: a[::-1].copy()),
        "max-step-short": set_values("/execution/max_step_cycles", lambda a: np.zeros_like(a)),
        "run-starts-unsorted": set_values("/execution/run_starts", lambda a: -a - 5),
        "tile-cycles-negative": set_values(
            "/programs/tile_cycles", lambda a: np.full_like(a, -(2**31))
        ),
        "names-1mb": set_values(
            "/programs/nodes/name",
            lambda a: np.array(["n" * 2**20 if i < 3 else x for i, x in enumerate(a)], object),
        ),
        "names-empty": set_values(
            "/graph/operations/name", lambda a: np.array([""] * a.size, object)
        ),
        "version-minor-future": set_attr("/", "format_version", "1.999"),
        # -- run starts that claim no host call, or far more calls than steps (export-trace
        # --split-by-run refuses both in one sentence; the other reports read them as one run)
        "run-starts-empty": set_values("/execution/run_starts", lambda a: a[:0].copy()),
        "run-starts-200k": set_values(
            "/execution/run_starts", lambda a: np.arange(200_000, dtype=a.dtype)
        ),
    }


# -- structural --------------------------------------------------------------------------------
def structural_mutations() -> dict[str, Mutation]:
    return {
        "no-steps-program": delete("/execution/steps/program"),
        "no-memory": delete("/memory"),
        "no-meta-status": lambda p: _del_attr(p, "/meta", "status"),
        "float-ids": set_values("/execution/steps/program", lambda a: a.astype(np.float64) + 0.5),
        "text-cycles": set_values(
            "/execution/steps/cycles", lambda a: np.array([str(x) for x in a], dtype=object)
        ),
        "short-column": set_values("/execution/steps/start", lambda a: a[:-1].copy()),
        "memory-2d-wrong": set_values("/memory/total", lambda a: a.reshape(-1)),
        "group-as-dataset": combine(delete("/liveness/steps"), _dataset_at("/liveness/steps")),
        "dataset-as-group": lambda p: _group_at(p, "/execution/ipu_offsets"),
        "scalar-offsets": set_values("/execution/ipu_offsets", lambda a: np.int64(a[-1])),
        "truncated": _truncate(0.6),
        "zero-bytes": _truncate(0.0),
    }


def _del_attr(p: Path, group: str, name: str) -> None:
    with h5py.File(p, "r+") as h5:
        del h5[group.strip("/")].attrs[name]


def _dataset_at(path: str) -> Mutation:
    def mutate(p: Path) -> None:
        with h5py.File(p, "r+") as h5:
            h5[path.strip("/")] = np.arange(4)

    return mutate


def _group_at(p: Path, path: str) -> None:
    with h5py.File(p, "r+") as h5:
        del h5[path.strip("/")]
        h5.create_group(path.strip("/"))


def _truncate(fraction: float) -> Mutation:
    def mutate(p: Path) -> None:
        data = p.read_bytes()
        p.write_bytes(data[: int(len(data) * fraction)])

    return mutate


# -- resource ----------------------------------------------------------------------------------
def _unwritten(path: str, rows: int, extra: tuple[int, ...] = ()) -> Callable[[h5py.File], None]:
    """Dataset ``path`` resized to ``rows`` rows that are never written (a few bytes on disk)."""

    def edit(h5: h5py.File) -> None:
        key = path.strip("/")
        dtype = h5[key].dtype
        del h5[key]
        shape = (rows, *extra)
        chunks = (min(rows, 65536), *extra) if extra else (min(rows, 65536),)
        h5.create_dataset(key, shape=shape, dtype=dtype, chunks=chunks, compression="gzip")

    return edit


def _edit(*edits: Callable[[h5py.File], None]) -> Mutation:
    def mutate(p: Path) -> None:
        with h5py.File(p, "r+") as h5:
            for e in edits:
                e(h5)

    return mutate


def resource_mutations() -> dict[str, Mutation]:
    steps = [f"/execution/steps/{f.name}" for f in schema.STEPS.fields]
    huge = 10**9

    def offsets(h5: h5py.File) -> None:
        h5["execution/ipu_offsets"][...] = np.array([0, huge])

    def lsteps(h5: h5py.File) -> None:
        for c in ("name", "program", "op", "ipu"):
            _unwritten(f"/liveness/steps/{c}", huge)(h5)
        ipus = h5["liveness/always_live"].shape[0]
        dtype = h5["liveness/not_always_live"].dtype
        del h5["liveness/not_always_live"]
        h5.create_dataset(
            "liveness/not_always_live",
            shape=(ipus, huge),
            dtype=dtype,
            chunks=(1, 65536),
            compression="gzip",
        )

    def tile_rows(h5: h5py.File) -> None:
        tiles = h5["memory/total"].shape[1]
        for key, extra in (("per_tile_rows", (tiles,)), ("per_tile_step", ())):
            dtype = h5[f"liveness/{key}"].dtype
            del h5[f"liveness/{key}"]
            h5.create_dataset(
                f"liveness/{key}",
                shape=(huge, *extra),
                dtype=dtype,
                chunks=(64, *extra),
                compression="gzip",
            )
        h5["liveness/per_tile_ipu_offsets"][...] = np.array([0, huge])

    def tile_cycles(h5: h5py.File) -> None:
        tiles = h5["programs/tile_cycles"].shape[1]
        n = h5["programs/nodes/name"].shape[0]
        del h5["programs/tile_cycles"]
        h5.create_dataset(
            "programs/tile_cycles", shape=(n, tiles), dtype="int32", chunks=(1, tiles)
        )

    def compressed_zeros(h5: h5py.File) -> None:
        # real bytes, written: 20,000 liveness steps of per-tile rows, zeros compress ~1000:1
        tiles = h5["memory/total"].shape[1]
        n = 20_000
        for c in ("name", "program", "op", "ipu"):
            old = h5[f"liveness/steps/{c}"]
            fill = np.array([""] * n, object) if c == "name" else np.zeros(n, old.dtype)
            dt = h5py.string_dtype() if c == "name" else old.dtype
            del h5[f"liveness/steps/{c}"]
            h5.create_dataset(f"liveness/steps/{c}", data=fill, dtype=dt)
        for key in ("not_always_live", "per_tile_rows", "per_tile_step"):
            del h5[f"liveness/{key}"]
        h5.create_dataset("liveness/not_always_live", data=np.zeros((1, n), np.int64))
        h5.create_dataset("liveness/per_tile_step", data=np.arange(n, dtype=np.int32))
        h5["liveness/per_tile_ipu_offsets"][...] = np.array([0, n])
        ds = h5.create_dataset(
            "liveness/per_tile_rows",
            shape=(n, tiles),
            dtype="int32",
            chunks=(256, tiles),
            compression="gzip",
            compression_opts=9,
        )
        block = np.zeros((4096, tiles), np.int32)
        for r in range(0, n, 4096):
            ds[r : r + 4096] = block[: min(4096, n - r)]

    return {
        "unwritten-steps-1e9": _edit(*(_unwritten(c, huge) for c in steps), offsets),
        "liveness-steps-1e9": _edit(lsteps),
        "liveness-rows-1e9": _edit(tile_rows),
        "tile-cycles-unwritten": _edit(tile_cycles),
        "liveness-zeros-gzip": _edit(compressed_zeros),
        "tiles-65536": combine(set_attr("/meta", "tiles_per_ipu", 65536)),
        "ipus-1024": set_attr("/meta", "num_ipus", 1024),
        "objects-many": _edit(_many_groups),
        "attr-huge": set_attr("/meta", "notes", json.dumps(["x" * 2**20] * 16)),
    }


def _many_groups(h5: h5py.File) -> None:
    g = h5.create_group("junk")
    for i in range(3_000):
        g.create_group(str(i))


# -- random values -----------------------------------------------------------------------------
#: Values that break assumptions: zero, -1, the int32 extremes, huge, NaN / inf, tiny.
ODD_VALUES = (0, -1, 1, 2**31 - 1, -(2**31), 2**62, float("nan"), float("inf"), -1e300, 1e-300)


def numeric_datasets(path: Path) -> list[str]:
    """Every non-empty numeric dataset of a profile (the targets of value mutations)."""
    out: list[str] = []
    with h5py.File(path, "r") as h5:
        h5.visititems(
            lambda n, o: (
                out.append(n)
                if isinstance(o, h5py.Dataset) and o.dtype.kind in "iuf" and o.size
                else None
            )
        )
    return sorted(out)


def set_elements(edits: list[tuple[str, int, float]]) -> Mutation:
    """Dataset element (``index`` modulo its size) := value, for each ``(dataset, index,
    value)``; integers are clipped to the dtype, non-finite values skipped for them."""

    def mutate(p: Path) -> None:
        with h5py.File(p, "r+") as h5:
            for name, where, value in edits:
                ds = h5[name]
                flat = ds[()].reshape(-1)
                if ds.dtype.kind in "iu":
                    if not np.isfinite(value):
                        continue
                    info = np.iinfo(ds.dtype)
                    value = int(min(max(value, info.min), info.max))
                flat[where % flat.size] = value
                ds[...] = flat.reshape(ds.shape)

    return mutate


# -- missing datasets -----------------------------------------------------
def missing_dataset_mutations() -> dict[str, Mutation]:
    """Profiles that open but lack a dataset a report reads lazily: the GUI shows that report
    (or tab) "unavailable" naming the dataset (tests/test_gui_walk.py); the CLI names it in one
    sentence (the corpus's "missing" category)."""
    return {
        "no-live-end": delete("/graph/variables/live_end"),
        "no-tile-xy": delete("/memory/tile_xy"),
        "no-per-tile-rows": delete("/liveness/per_tile_rows"),
        # the curve the liveness views draw, summed from the variables' lifetimes instead
        "no-not-always-live": delete("/liveness/not_always_live"),
        # the compute sets' names label the imbalance rows; the programs' names do instead
        "no-compute-set-names": delete("/graph/compute_sets/name"),
    }


# -- corpus -----------------------------------------------------------------------------------
def profile_mutations() -> dict[str, dict[str, Mutation]]:
    """category -> {name: mutation}."""
    corpus: dict[str, dict[str, Mutation]] = {
        "foreign": {
            "external-raw": external_raw(),
            "virtual-dataset": virtual(),
            "external-link": external_link(),
            "external-raw-offsets": external_raw("/execution/ipu_offsets"),
        },
        "injection": {f"names-{k}": inject_names(v) for k, v in INJECTIONS.items()},
        "semantic": semantic_mutations(),
        "structural": structural_mutations(),
        "resource": resource_mutations(),
        "missing": missing_dataset_mutations(),
    }
    return corpus


def mutated(base: Path, folder: Path, name: str, mutation: Mutation) -> Path:
    """A mutated copy of ``base`` in ``folder`` (created fresh)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{name}.h5"
    shutil.copyfile(base, out)
    mutation(out)
    return out


def iter_corpus(
    base: Path, folder: Path, categories: tuple[str, ...] | None = None, seed: int = 0
) -> Iterator[tuple[str, str, Path]]:
    """(category, name, mutated file) for every mutation of the corpus."""
    rng = random.Random(seed)
    del rng
    for cat, muts in profile_mutations().items():
        if categories is not None and cat not in categories:
            continue
        for name, m in muts.items():
            yield cat, name, mutated(base, folder / cat, name, m)


# -- host profiles (TOML: engine.host.profile.load_host_profile) --------------------------------
def host_profile_texts() -> dict[str, str | bytes]:
    """Broken host profiles, each of which must be refused in one sentence."""
    head = 'name = "x"\ncpu = "y"\ncores = 1\n'
    t = "\n[transforms.flip]\nfixed_us = 1.0\nns_per_element = { uint8 = %s }\n"
    return {
        "not-toml": "name = = 1\n",
        "no-transforms": head,
        "negative-fixed": head + "\n[transforms.flip]\nfixed_us = -1.0\nns_per_element = {}\n",
        "negative-per-element": head + t % "-2.0",
        "nan-per-element": head + t % "nan",
        "inf-per-element": head + t % "inf",
        "unknown-dtype": head + t.replace("uint8", "int4") % "1.0",
        "unknown-key": head + "turbo = true\n" + t % "1.0",
        "negative-loader": head + "loader_us_per_sample = -3.0\n" + t % "1.0",
        "inf-loader": head + "loader_us_per_sample = inf\n" + t % "1.0",
        "scaled-from-zero": head + t % "1.0" + "\n[scaled_from]\ncpu = 'a'\ncpu_ref = 'b'\n"
        "factor = 0.0\nbasis = ''\n",
        "bad-check": head + t % "1.0" + "\n[[checks]]\ntransforms = 'flip'\n",
        "not-utf8": b'name = "\xff\xfe"\n',
        "too-big": head + "# " + "x" * (1 << 20) + "\n" + t % "1.0",
        "libraries-not-text": head + "libraries = { torch = 2 }\n" + t % "1.0",
    }


# -- probes ------------------------------------------------------------------------------------
#: Commands run on every hostile profile ({file}, {base}: a valid profile, {out}: an output stem).
PROFILE_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("validate", "{file}"),
    ("summary", "{file}"),
    ("summary", "--json", "{file}"),
    ("insights", "--no-resimulate", "{file}"),
    ("report", "{file}", "-o", "{out}.md"),
    ("compare", "{base}", "{file}"),
    ("export-trace", "{file}", "-o", "{out}.json"),
    # a trace merged to at most 300 events
    ("export-trace", "{file}", "-o", "{out}.merged.json", "--max-events", "300"),
    # one file per host call, at most 1,000 of them
    ("export-trace", "{file}", "-o", "{out}.split.json", "--split-by-run"),
    # two runs aligned step by step, with both traces and the delta lane
    ("diff", "{base}", "{file}", "--export-trace", "{out}.diff.json"),
    ("diff", "{file}", "{base}", "--json"),
    # per-operation roofline from the target's figures
    ("roofline", "{file}", "--json"),
    # SQL over every table: the steps by type and name, then the other tables
    (
        "query",
        "{file}",
        "SELECT type, name, phase, dest, count(*) AS n, sum(cycles) AS c FROM steps GROUP BY ALL",
    ),
    (
        "query",
        "{file}",
        "SELECT (SELECT count(*) FROM operations) + (SELECT count(*) FROM variables) + "
        "(SELECT count(*) FROM programs) + (SELECT count(*) FROM compute_sets) + "
        "(SELECT sum(bytes) FROM memory) + (SELECT sum(total) FROM tiles) + "
        "(SELECT max(not_always_live) FROM liveness) + (SELECT count(*) FROM host) AS x",
        "--format",
        "csv",
        "-o",
        "{out}.csv",
    ),
    # -- the HTML report's interactive charts (hover texts built from the profile's names and
    # figures) and the Markdown report's image folder beside it
    ("report", "{file}", "-o", "{out}.html"),
)
#: Exit codes a command may give on any input: ok, a check failed, bad input, interrupted.
CLEAN_EXITS = (0, 1, 2, 130)


class Hang(BaseException):
    """Raised by the probe's alarm: the command ran longer than its time limit."""


@dataclass
class Outcome:
    argv: tuple[str, ...]
    code: int | None
    seconds: float
    traceback: str = ""
    hung: bool = False
    stderr: str = ""

    @property
    def clean(self) -> bool:
        return (
            not self.hung
            and not self.traceback
            and self.code in CLEAN_EXITS
            and "Traceback" not in self.stderr
            and self.stderr.strip().count("\n") <= 3
        )


def run_in_process(argv: tuple[str, ...], seconds: float = 20.0) -> Outcome:
    """Run ``analyse argv`` in this process with a time limit (SIGALRM; main thread only)."""
    import contextlib
    import io
    import signal
    import time
    import traceback

    from analyser.cli import main

    out, err = io.StringIO(), io.StringIO()

    def alarm(signum: int, frame: object) -> None:
        raise Hang

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.perf_counter()
    code: int | None = None
    tb, hung = "", False
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    except Hang:
        hung = True
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:
        tb = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return Outcome(argv, code, time.perf_counter() - t0, tb, hung, err.getvalue())


def profile_probes(
    file: Path, base: Path, out: Path, only: tuple[str, ...] | None = None
) -> list[tuple[str, ...]]:
    """The command lines of :data:`PROFILE_COMMANDS` for ``file`` (``only``: those whose first
    words are listed, e.g. ``("validate", "summary --json")``)."""
    cmds = PROFILE_COMMANDS
    if only is not None:
        cmds = tuple(c for c in cmds if any(" ".join(c).startswith(o) for o in only))
    return [tuple(a.format(file=file, base=base, out=out) for a in cmd) for cmd in cmds]


# -- hostile inputs other than profiles ----------------------------------------------
# Each builder writes its input into ``folder`` and returns the path; :func:`input_cases` pairs
# them with the command lines that read them. Every case must end with one sentence and exit 2.


def _onnx_model(nodes, inputs, outputs, inits=(), opset: int = 17):
    from onnx import helper as oh

    g = oh.make_graph(nodes, "hostile", inputs, outputs, list(inits))
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _save_onnx(m, path: Path) -> Path:
    import onnx

    onnx.save_model(m, str(path))
    return path


def _bomb(folder: Path, name: str, nodes: list, inits: tuple = ()) -> Path:
    """A model whose ``nodes`` compute a big constant ``big``; its sum is added to the input
    ``x`` (1x4) so the graph has work: ReduceSum(big) -> Cast -> Add(x)."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    tail = [
        oh.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
        oh.make_node("Cast", ["s"], ["sf"], to=T.FLOAT),
        oh.make_node("Add", ["x", "sf"], ["y"]),
    ]
    m = _onnx_model(
        nodes + tail,
        [oh.make_tensor_value_info("x", T.FLOAT, [1, 4])],
        [oh.make_tensor_value_info("y", T.FLOAT, [1, 4])],
        inits,
    )
    return _save_onnx(m, folder / f"{name}.onnx")


def _const(name: str, values: list[int], dims: list[int]):
    from onnx import TensorProto as T
    from onnx import helper as oh

    return oh.make_node("Constant", [], [name], value=oh.make_tensor(name, T.INT64, dims, values))


def onnx_expand_bomb(
    folder: Path, dims: tuple[int, ...] = (20000, 20000), name: str = "expand-bomb"
) -> Path:
    """About 240 bytes: Constant -> Expand to 20000 x 20000 -> ReduceSum (folding it would
    fill 3.2 GB)."""
    from onnx import helper as oh

    nodes = [
        _const("c", [1], [1]),
        _const("shape", list(dims), [len(dims)]),
        oh.make_node("Expand", ["c", "shape"], ["big"]),
    ]
    return _bomb(folder, name, nodes)


def onnx_range_bomb(folder: Path) -> Path:
    """Range(0, 2.5e8, 1) -> ReduceSum: folding it would allocate 2 GB."""
    from onnx import helper as oh

    nodes = [_const("a", [0], []), _const("b", [250_000_000], []), _const("d", [1], [])]
    nodes.append(oh.make_node("Range", ["a", "b", "d"], ["big"]))
    return _bomb(folder, "range-bomb", nodes)


def onnx_where_bomb(folder: Path) -> Path:
    """Where of three small constants broadcasting to 4096^3 elements."""
    from onnx import helper as oh
    from onnx import numpy_helper as nh

    inits = (
        nh.from_array(np.ones((4096, 1, 1), bool), "c"),
        nh.from_array(np.ones((1, 4096, 1), np.int64), "p"),
        nh.from_array(np.ones((1, 1, 4096), np.int64), "q"),
    )
    return _bomb(folder, "where-bomb", [oh.make_node("Where", ["c", "p", "q"], ["big"])], inits)


def onnx_relu(folder: Path, name: str, dims: list, external: dict[str, str] | None = None) -> Path:
    """x (dims) -> MatMul(w 4x4) -> y; ``external``: w's external-data entries (not written)."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    w = oh.make_tensor("w", T.FLOAT, [4, 4], [0.0] * 16)
    if external is not None:
        w.ClearField("float_data")
        w.data_location = T.EXTERNAL
        for k, v in external.items():
            e = w.external_data.add()
            e.key, e.value = k, v
    m = _onnx_model(
        [oh.make_node("MatMul", ["x", "w"], ["y"])],
        [oh.make_tensor_value_info("x", T.FLOAT, dims)],
        [oh.make_tensor_value_info("y", T.FLOAT, [*dims[:-1], 4])],
        [w],
    )
    return _save_onnx(m, folder / f"{name}.onnx")


def onnx_many_nodes(folder: Path, n: int = 1_000_000) -> Path:
    """A chain of ``n`` Relu nodes (about 25 bytes each on disk). The nodes are written as
    protobuf bytes (GraphProto.node = 1; NodeProto input / output / op_type = 1 / 2 / 4) in a
    second ModelProto.graph field (7), which any protobuf parser merges into the first: building
    10^6 NodeProto messages took 2.2 GiB and failed inside onnx.helper.make_node (SystemError)
    under bench_fuzz.py's 4 GB address-space limit."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    m = _onnx_model(
        [],
        [oh.make_tensor_value_info("t0", T.FLOAT, [1, 4])],
        [oh.make_tensor_value_info(f"t{n}", T.FLOAT, [1, 4])],
    )
    relu = _pb_field(4, b"Relu")
    nodes = b"".join(
        _pb_field(1, _pb_field(1, b"t%d" % i) + _pb_field(2, b"t%d" % (i + 1)) + relu)
        for i in range(n)
    )
    path = folder / "many-nodes.onnx"
    path.write_bytes(m.SerializeToString() + _pb_field(7, nodes))
    return path


@dataclass
class InputCase:
    """One hostile input and the command that reads it. ``expect``: the exit code it must give
    (2: refused in one sentence; None: any clean exit, e.g. a folding bomb left unfolded)."""

    argv: tuple[str, ...]
    expect: int | None = 2
    #: text that must not appear in the output (a secret, or an answer about another path)
    hidden: tuple[str, ...] = ()
    #: text the sentence must contain (the real reason)
    says: tuple[str, ...] = ()


def _nonregular(folder: Path, kind: str, suffix: str) -> Path:
    """A name ending in ``suffix`` that is not a regular file: a FIFO, a device (through a link:
    links are resolved before the check), a 2 GB sparse file, a folder."""
    import os

    path = folder / f"{kind}{suffix}"
    if path.exists() or path.is_symlink():
        return path
    if kind == "fifo":
        os.mkfifo(path)
    elif kind in ("zero", "urandom"):
        path.symlink_to(f"/dev/{kind}")
    elif kind == "sparse-2gb":
        with open(path, "wb") as fh:
            fh.truncate(2 * 10**9)
    else:
        path.mkdir()
    return path


NONREGULAR_KINDS = ("fifo", "zero", "urandom", "sparse-2gb", "folder")


def nonregular_cases(folder: Path) -> dict[str, InputCase]:
    """Each non-regular kind as an ONNX model (model-info, profile --model, a run config's
    ``model``), as a host profile, as a run configuration and as a profile."""
    folder.mkdir(parents=True, exist_ok=True)
    out = str(folder / "never.h5")
    cases: dict[str, InputCase] = {}
    for kind in NONREGULAR_KINDS:
        onnx_path = _nonregular(folder, kind, ".onnx")
        toml_path = _nonregular(folder, kind, ".toml")
        h5_path = _nonregular(folder, kind, ".h5")
        cfg = folder / f"model-{kind}.toml"
        cfg.write_text(f'model = "{onnx_path.name}"\n')
        cases[f"{kind}/model-info"] = InputCase(("model-info", str(onnx_path)))
        cases[f"{kind}/profile-model"] = InputCase(
            ("profile", "--quiet", "--model", str(onnx_path), "-o", out)
        )
        cases[f"{kind}/config-model"] = InputCase(("profile", "--quiet", str(cfg), "-o", out))
        host = ("--model", "resnet50", "--host-transforms", "to_tensor")
        cases[f"{kind}/host-profile"] = InputCase(
            ("profile", "--quiet", *host, "--host-profile", str(toml_path), "-o", out)
        )
        cases[f"{kind}/run-config"] = InputCase(("profile", "--quiet", str(toml_path), "-o", out))
        cases[f"{kind}/summary"] = InputCase(("summary", str(h5_path)))
    return cases


def fidelity_errors_files(folder: Path) -> dict[str, Path]:
    """Hostile stored-errors files (analyser.core.intervals, ``ANALYSE_FIDELITY_ERRORS``): every
    non-regular kind, and well-formed JSON whose values are wrong or hostile."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {kind: _nonregular(folder, kind, ".json") for kind in NONREGULAR_KINDS}
    row = {"id": "r", "mechanism": "device-at-scale", "quantity": "throughput", "error": 0.1}
    doc = {"schema": "ipu-fidelity-errors", "schema_version": "1.0", "rows": [row]}
    bad = {
        "nan": json.dumps(doc).replace("0.1", "NaN"),
        "inf": json.dumps(doc).replace("0.1", "1e999"),
        "terminal-id": json.dumps({**doc, "rows": [{**row, "id": INJECTIONS["terminal"]}]}),
        "commit-injection": json.dumps({**doc, "commit": INJECTIONS["bidi"]}),
        "deep": "[" * 100_000 + "]" * 100_000,
        "rows-not-list": json.dumps({**doc, "rows": {"a": 1}}),
        "error-text": json.dumps({**doc, "rows": [{**row, "error": "0.1"}]}),
    }
    for name, text in bad.items():
        path = folder / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        out[name] = path
    return out


def onnx_cases(folder: Path) -> dict[str, InputCase]:
    """Folding bombs, a 10^6-node model, odd dimensions, hostile external data."""
    folder.mkdir(parents=True, exist_ok=True)
    out = str(folder / "never.h5")
    secret = secret_file(folder.parent)
    (folder / "w.bin").write_bytes(b"\0" * 64)
    outside = folder.parent / "outside.bin"
    outside.write_bytes(b"\0" * 12345)
    link = folder / "link-out.bin"
    if not link.is_symlink():
        link.symlink_to(outside)
    cases: dict[str, InputCase] = {}
    for name, build in (
        ("expand-20000x20000", onnx_expand_bomb),
        ("range-2.5e8", onnx_range_bomb),
        ("where-4096^3", onnx_where_bomb),
    ):
        path = str(build(folder))
        cases[f"{name}/model-info"] = InputCase(("model-info", path), expect=None)
        written = str(folder / f"{name}.h5")  # a clean run writes it (the bomb left unfolded)
        cases[f"{name}/profile"] = InputCase(
            ("profile", "--quiet", "--force", "--model", path, "-o", written), expect=None
        )
    huge_expand = onnx_expand_bomb(folder, (2**31 - 1,) * 3, "expand-2^93")
    cases["expand-2^93/model-info"] = InputCase(("model-info", str(huge_expand)), expect=None)
    from engine.onnx.reader import MAX_NODES

    many = onnx_many_nodes(folder, MAX_NODES + 1)
    cases[f"nodes-{MAX_NODES + 1}"] = InputCase(("model-info", str(many)))
    relu = onnx_relu
    huge, neg = relu(folder, "dim-2^62", [1, 2**62, 4]), relu(folder, "dim-neg", [-5, 3, 4])
    named = relu(folder, "dim-named", ["batch", "n", 4])
    cases["dim-2^62"] = InputCase(("model-info", str(huge)))
    cases["dim-negative"] = InputCase(("model-info", str(neg)))
    cases["input-shape-2^62"] = InputCase(
        ("model-info", "--input-shape", f"x=1x{2**62}x4", str(named))
    )
    cases["input-shape-2^40-product"] = InputCase(
        ("model-info", "--input-shape", f"x={2**30}x{2**30}x4", str(named))
    )
    cfg = folder / "huge-shapes.toml"
    cfg.write_text(f'model = "{named.name}"\n[input_shapes]\nx = [1, {2**62}, 4]\n')
    cases["input_shapes-2^62"] = InputCase(("profile", "--quiet", str(cfg), "-o", out))
    ext = {
        "length-abc": {"location": "w.bin", "length": "abc"},
        "offset-negative": {"location": "w.bin", "offset": "-8", "length": "64"},
        "absolute-secret": {"location": str(secret), "length": "64"},
        "absolute-missing": {"location": "/nonexistent/x.bin", "length": "64"},
        "dotdot-outside": {"location": "../outside.bin", "length": "64"},
        "dotdot-missing": {"location": "../../missing.bin", "length": "64"},
        "link-out": {"location": link.name, "length": "64"},
        "fifo": {"location": "fifo.bin", "length": "64"},
    }
    import os

    if not (folder / "fifo.bin").exists():
        os.mkfifo(folder / "fifo.bin")
    for name, entries in ext.items():
        path = str(relu(folder, f"ext-{name}", [1, 4], entries))
        # the size of a file outside the folder (12,345 bytes) must never be told
        # the sizes of files outside the folder (12,345 and 1,920 bytes) must never be told
        hidden = ("12,345", "12345", "1,920", "1920", SECRET)
        cases[f"external-{name}"] = InputCase(("model-info", path), hidden=hidden)
    cases.update(onnx_expansion_cases(folder))  # defined in the last section of this file
    return cases


def what_if_cases(folder: Path) -> dict[str, InputCase]:
    """Bad values of the engine's what-if option ``balance_compute_sets``: each is one
    sentence and exit 2, nothing written."""
    folder.mkdir(parents=True, exist_ok=True)
    out = str(folder / "never.h5")
    values = {
        "not-a-list": '"layers.0/fwd/MatMulPartials"',
        "a-number": "[3]",
        "empty-name": '[""]',
        "blank-name": '["   "]',
        "control-characters": '["layers.0\u001b[2J"]',
        "name-of-2000": '["' + "x" * 2000 + '"]',
        "10001-names": "[" + ", ".join(f'"cs{i}"' for i in range(10_001)) + "]",
        "no-such-compute-set": '["layers.0/fwd/NoSuchThing"]',
        "a-layer-not-a-compute-set": '["layers.0"]',
    }
    cases: dict[str, InputCase] = {}
    for name, value in values.items():
        cfg = folder / f"balance-{name}.toml"
        cfg.write_text(f'model = "mlp"\nbalance_compute_sets = {value}\n')
        cases[f"balance_compute_sets/{name}"] = InputCase(
            ("profile", "--quiet", str(cfg), "-o", out)
        )
    return cases


def model_option_cases(folder: Path) -> dict[str, InputCase]:
    """Bad values of BERT's dropout probabilities and of ``training_outputs`` in a run config:
    each is one sentence and exit 2, nothing written."""
    folder.mkdir(parents=True, exist_ok=True)
    values = {
        "hidden-dropout-1": "hidden_dropout = 1.0",
        "hidden-dropout-negative": "hidden_dropout = -0.1",
        "hidden-dropout-nan": "hidden_dropout = nan",
        "attention-dropout-inf": "attention_dropout = inf",
        "attention-dropout-list": "attention_dropout = [0.1]",
        "training-outputs-unknown": 'training_outputs = "everything"',
        "training-outputs-number": "training_outputs = 2",
    }
    cases: dict[str, InputCase] = {}
    for name, line in values.items():
        cfg = folder / f"{name}.toml"
        cfg.write_text(f'model = "bert-base"\nseq_length = 32\nvocab_size = 100\n{line}\n')
        out = str(folder / f"{name}-never.h5")
        cases[name] = InputCase(("profile", "--quiet", str(cfg), "-o", out))
    return cases


def many_nodes_case(folder: Path, n: int = 1_000_000) -> InputCase:
    """A model of ``n`` nodes (slow to build: not in the CI corpus)."""
    folder.mkdir(parents=True, exist_ok=True)
    return InputCase(("model-info", str(onnx_many_nodes(folder, n))))


# -- tune folders -------------------------------------------------------------
def tune_folder(folder: Path, base: Path, rows: int = 3) -> Path:
    """A valid tune folder written from scratch (no cluster): ``rows`` configurations of
    ``micro_batch_size``, the start and the best one copied from the profile ``base``."""
    import pandas as pd

    from analyser.sim.service import FIGURE_KEYS
    from analyser.sim.tune.results import META, RESULTS, SCHEMA

    folder.mkdir(parents=True, exist_ok=True)
    ids = np.arange(rows)
    frame = {
        "id": ids,
        "origin": ["start"] + ["grid"] * (rows - 1),
        "round": np.zeros(rows, np.int64),
        "status": ["ok"] * rows,
        "message": [""] * rows,
        "micro_batch_size": ids + 1,
    }
    for k in FIGURE_KEYS:
        frame[k] = np.ones(rows, bool) if k == "fits" else (ids + 1.0) * 1000.0
    frame.update(
        feasible=np.ones(rows, bool),
        objective=(ids + 1.0) * 1000.0,
        pareto=ids == rows - 1,
        rank=(rows - ids).astype(float),
        cached=np.zeros(rows, bool),
        seconds=np.ones(rows),
        profile=[str(folder / "start.h5")] * rows,
        key=[f"k{i}" for i in ids],
    )
    pd.DataFrame(frame).to_parquet(folder / RESULTS, index=False)
    shutil.copyfile(base, folder / "start.h5")
    shutil.copyfile(base, folder / "best-1.h5")
    meta = {
        "schema": SCHEMA,
        "config_file": None,
        "start": {"model": "mlp", "micro_batch_size": 1},
        "dimensions": {"micro_batch_size": [int(i + 1) for i in ids]},
        "constraints": ["fits"],
        "objective": "throughput",
        "objective_label": "samples/s",
        "strategy": "grid",
        "space_size": rows,
        "tried": rows,
        "simulations": rows,
        "seconds": 1.0,
        "interrupted": False,
        "engine": "test",
        "files": {"start": "start.h5"},
        "best": [{"file": "best-1.h5", "id": rows - 1}],
        "best_id": rows - 1,
        "start_id": 0,
        "diff": {"micro_batch_size": [1, rows]},
    }
    (folder / META).write_text(json.dumps(meta))
    return folder


def _edit_meta(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        path = folder / "tune.json"
        new = edit(json.loads(path.read_text()))
        path.write_text(new if isinstance(new, str) else json.dumps(new))

    return mutate


def _edit_frame(edit: Callable[[object], object]) -> Callable[[Path], None]:
    def mutate(folder: Path) -> None:
        import pandas as pd

        path = folder / "results.parquet"
        pd.DataFrame(edit(pd.read_parquet(path))).to_parquet(path, index=False)

    return mutate


def _set(d: dict, **kw: object) -> dict:
    return {**d, **kw}


def _drop(d: dict, key: str) -> dict:
    return {k: v for k, v in d.items() if k != key}


def _replace_file(name: str, data: bytes | None = None) -> Callable[[Path], None]:
    """``name`` in the folder becomes ``data`` (None: a FIFO)."""

    def mutate(folder: Path) -> None:
        import os

        (folder / name).unlink()
        if data is None:
            os.mkfifo(folder / name)
        else:
            (folder / name).write_bytes(data)

    return mutate


def _many_rows(n: int) -> Callable[[Path], None]:
    def edit(df):
        import pandas as pd

        big = pd.DataFrame({c: np.repeat(df[c].to_numpy(), -(-n // len(df)))[:n] for c in df})
        big["id"] = np.arange(n)
        return big

    return _edit_frame(edit)


def auto_split_block(user_id: int = 0, chosen_id: int = 2, text: str = "layers.3") -> dict:
    """A well-formed ``auto_split`` block of tune.json (the split search's report) for a
    two-stage split, its texts ``text``."""

    def side(rid: int) -> dict:
        stage = {
            "stage": 0,
            "ipu": 0,
            "cycles": 1000,
            "cycles_interval": {"value": 1000.0, "low": None, "high": None, "note": text},
            "max_tile_bytes": 2048,
            "ipu_bytes": 4096,
            "oom_tiles": 0,
            "memory": {"statement": text},
        }
        return {
            "id": rid,
            "split_points": [text],
            "proportions": [0.6, 0.6],
            "fits": True,
            "throughput_samples_per_s": 100.0,
            "throughput_interval": {"value": 100.0, "note": text},
            "balance": 1.2,
            "sram_per_tile": 638976,
            "stages": [stage, dict(stage, stage=1)],
        }

    return {
        "budget": 8,
        "tried": 2,
        "blocks": 7,
        "stages": 2,
        "proportions": [0.6],
        "partitions_scored": 6,
        "model_basis": "cycles",
        "phases": [text],
        "user": side(user_id),
        "chosen": side(chosen_id),
        "throughput_change": {"value": 0.1, "note": text},
    }


def _split_edit(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    return _edit_meta(lambda m: _set(m, auto_split=edit(auto_split_block())))


def tune_mutations(rows_bomb: int = 1_000_000) -> dict[str, Callable[[Path], None]]:
    """Crafted tune folders: tune.json of the wrong shape or with odd ids, results.parquet
    without its key columns or of ``rows_bomb`` rows, profiles named outside the folder."""
    secret = "/etc/passwd"
    return {
        "meta-list": _edit_meta(lambda m: [1, 2, 3]),
        "meta-string": _edit_meta(lambda m: "a tune"),
        "meta-deep": _edit_meta(lambda m: "[" * 100_000 + "]" * 100_000),
        "meta-deep-dict": _edit_meta(lambda m: '{"a":' * 50_000 + "1" + "}" * 50_000),
        "meta-not-json": _replace_file("tune.json", b"\x00\x01 not json"),
        "meta-5mb": _edit_meta(lambda m: _set(m, notes=["x" * 1000] * 5000)),
        "meta-fifo": _replace_file("tune.json"),
        "meta-no-dimensions": _edit_meta(lambda m: _drop(m, "dimensions")),
        "meta-no-start-id": _edit_meta(lambda m: _drop(m, "start_id")),
        "meta-dimensions-list": _edit_meta(lambda m: _set(m, dimensions=["micro_batch_size"])),
        "meta-dimension-unknown": _edit_meta(lambda m: _set(m, dimensions={"nope": [1, 2]})),
        "meta-ids-strings": _edit_meta(lambda m: _set(m, start_id="0", best_id="2")),
        "meta-ids-floats": _edit_meta(lambda m: _set(m, start_id=0.5, best_id=2.0)),
        "meta-ids-out-of-range": _edit_meta(lambda m: _set(m, start_id=999, best_id=-3)),
        "meta-id-huge": _edit_meta(lambda m: _set(m, start_id=10**30)),
        "meta-best-id-string": _edit_meta(
            lambda m: _set(m, best=[{"file": "best-1.h5", "id": "x"}])
        ),
        "meta-best-not-list": _edit_meta(lambda m: _set(m, best={"file": "best-1.h5"})),
        "meta-types": _edit_meta(
            lambda m: _set(m, tried="many", constraints="fits", objective=7, seconds="slow")
        ),
        "meta-best-file-absolute": _edit_meta(lambda m: _set(m, best=[{"file": secret, "id": 2}])),
        "meta-best-file-dotdot": _edit_meta(
            lambda m: _set(m, best=[{"file": "../../x.h5", "id": 2}])
        ),
        "meta-start-file-absolute": _edit_meta(lambda m: _set(m, files={"start": secret})),
        "split-not-object": _split_edit(lambda b: "the best split"),
        "split-no-chosen": _split_edit(lambda b: _drop(b, "chosen")),
        "split-id-not-a-row": _split_edit(lambda b: _set(b, chosen=_set(b["chosen"], id=999))),
        "split-id-text": _split_edit(lambda b: _set(b, user=_set(b["user"], id="0"))),
        "split-stage-bomb": _split_edit(
            lambda b: _set(b, user=_set(b["user"], stages=b["user"]["stages"] * 1000))
        ),
        "split-points-bomb": _split_edit(
            lambda b: _set(b, chosen=_set(b["chosen"], split_points=["x"] * 100_000))
        ),
        "split-cycles-negative": _split_edit(
            lambda b: _set(
                b, user=_set(b["user"], stages=[_set(b["user"]["stages"][0], cycles=-5)])
            )
        ),
        "split-balance-nan": _edit_meta(
            lambda m: json.dumps(_set(m, auto_split=auto_split_block())).replace(
                '"balance": 1.2', '"balance": NaN', 1
            )
        ),
        "split-note-huge": _split_edit(
            lambda b: _set(b, throughput_change={"value": 0.1, "note": "x" * 100_000})
        ),
        "parquet-no-id": _edit_frame(lambda df: df.drop(columns=["id"])),
        "parquet-no-rank": _edit_frame(lambda df: df.drop(columns=["rank"])),
        "parquet-no-status": _edit_frame(lambda df: df.drop(columns=["status"])),
        "parquet-no-figures": _edit_frame(lambda df: df.drop(columns=["headroom_bytes"])),
        "parquet-id-strings": _edit_frame(lambda df: df.assign(id=df["id"].astype(str))),
        "parquet-id-floats": _edit_frame(lambda df: df.assign(id=df["id"] + 0.5)),
        "parquet-id-duplicate": _edit_frame(lambda df: df.assign(id=0)),
        "parquet-status-numbers": _edit_frame(lambda df: df.assign(status=3)),
        "parquet-figures-text": _edit_frame(lambda df: df.assign(headroom_bytes="lots")),
        "parquet-empty": _edit_frame(lambda df: df.iloc[0:0]),
        "parquet-not-parquet": _replace_file("results.parquet", b"PAR1 garbage PAR1"),
        "parquet-fifo": _replace_file("results.parquet"),
        f"parquet-{rows_bomb}-rows": _many_rows(rows_bomb),
    }


def tune_cases(folder: Path, base: Path, rows_bomb: int = 1_000_000) -> dict[str, InputCase]:
    """Each crafted tune folder through ``analyse report DIR`` and ``analyse gui DIR``."""
    cases: dict[str, InputCase] = {}
    for name, mutate in tune_mutations(rows_bomb).items():
        d = tune_folder(folder / name, base)
        mutate(d)
        out = str(folder / f"{name}.html")
        cases[f"{name}/report"] = InputCase(("report", str(d), "-o", out), hidden=(SECRET,))
        cases[f"{name}/gui"] = InputCase(("gui", str(d)), hidden=(SECRET,))
    return cases


# -- the trace's level-of-detail cache -----------------------------------------
def _npy_edit(folder: Path, name: str, edit: Callable[[np.ndarray], np.ndarray]) -> None:
    """Level 0's array ``name`` := edit(old), and the arrays' digest in meta.json recomputed
    (as a careful attacker would: only the shape and range checks stand in the way)."""
    from analyser.trace import lod_cache

    path = folder / f"L0-{name}.npy"
    np.save(path, edit(np.load(path)), allow_pickle=False)
    meta = json.loads((folder / "meta.json").read_text())
    levels = []
    for i in range(len(meta["widths"])):
        levels.append({f: np.load(folder / f"L{i}-{f}.npy") for f in lod_cache.FIELDS})
    meta["arrays_digest"] = lod_cache._arrays_digest(levels)
    (folder / "meta.json").write_text(json.dumps(meta))


def _meta_edit(edit: Callable[[dict], dict]) -> Callable[[Path, Path], None]:
    def tamper(mine: Path, other: Path) -> None:
        meta = json.loads((mine / "meta.json").read_text())
        (mine / "meta.json").write_text(json.dumps(edit(meta)))

    return tamper


def lod_tamperings() -> dict[str, Callable[[Path, Path], None]]:
    """Ways to make the trace's level-of-detail cache lie: ``tamper(mine, other)`` edits the
    cached pyramid folder ``mine`` of a profile (``other``: the same IPU's folder of another
    profile)."""

    def foreign(mine: Path, other: Path) -> None:
        shutil.rmtree(mine)
        shutil.copytree(other, mine)

    def linked(mine: Path, other: Path) -> None:
        shutil.rmtree(mine)
        mine.symlink_to(other, target_is_directory=True)

    def shifted(mine: Path, other: Path) -> None:
        w = json.loads((mine / "meta.json").read_text())["widths"][0]
        _npy_edit(mine, "x0", lambda a: a + 3 * w)

    def overflow(mine: Path, other: Path) -> None:
        def edit(c: np.ndarray) -> np.ndarray:
            c = c.copy()
            c[0, 0] = 2**62
            c[1, 0] = -(2**62) + 1 + c[1, 0]
            return c

        _npy_edit(mine, "count", edit)

    def digest_kept(mine: Path, other: Path) -> None:  # an edit without recomputing the digest
        path = mine / "L0-x1.npy"
        a = np.load(path)
        np.save(path, a * 1.5, allow_pickle=False)

    return {
        "foreign-profile": foreign,
        "symlinked-key": linked,
        "edited-meta": _meta_edit(lambda m: {**m, "t_min": m["t_min"] + 1000, "t_max": 1e15}),
        "scaled-widths": _meta_edit(lambda m: {**m, "widths": [w * 2 for w in m["widths"]]}),
        "shifted-starts": shifted,
        "overflowing-counts": overflow,
        "edited-array": digest_kept,
    }


# -- the simulation cache's entries -------------------------------------------
def sim_cache_tamperings() -> dict[str, Callable[[Path, Path], None]]:
    """Ways to make a simulation cache entry lie: ``tamper(entry_json, profile_h5)``."""
    import os

    def edit(fn: Callable[[dict], object]) -> Callable[[Path, Path], None]:
        def tamper(entry: Path, prof: Path) -> None:
            new = fn(json.loads(entry.read_text()))
            entry.write_text(new if isinstance(new, str) else json.dumps(new))

        return tamper

    def fifo(entry: Path, prof: Path) -> None:
        entry.unlink()
        os.mkfifo(entry)

    def profile_fifo(entry: Path, prof: Path) -> None:
        prof.unlink()
        os.mkfifo(prof)

    def fig(**kw: object) -> Callable[[dict], dict]:
        return lambda d: {**d, "figures": {**d["figures"], **kw}}

    return {
        "list": edit(lambda d: []),
        "string": edit(lambda d: "ok"),
        "not-json": edit(lambda d: "{not json"),
        "deep": edit(lambda d: "[" * 100_000 + "]" * 100_000),
        "huge": edit(lambda d: {**d, "message": "x" * (1 << 20)}),
        "fifo": fifo,
        "figures-list": edit(lambda d: {**d, "figures": []}),
        "figures-strings": edit(fig(throughput_samples_per_s="fast", peak_memory_bytes="1e9")),
        "fits-text": edit(fig(fits="yes")),
        "figure-nan": edit(
            lambda d: json.dumps({**d, "figures": {**d["figures"], "headroom_bytes": float("nan")}})
        ),
        "figure-missing": edit(lambda d: {**d, "figures": {"fits": True}}),
        "other-key": edit(lambda d: {**d, "key": "0" * 64}),
        "status-failed": edit(lambda d: {**d, "status": "failed"}),
        "seconds-negative": edit(lambda d: {**d, "seconds": -1}),
        "profile-missing": lambda entry, prof: prof.unlink(),
        "profile-fifo": profile_fifo,
    }


# -- outputs where no file can be written ---------------------------------------
def output_cases(base: Path) -> dict[str, InputCase]:
    """``-o`` in a virtual file system (/proc): one sentence naming the real reason."""
    cases = {
        "profile": ("profile", "--quiet", "--model", "mlp", "-o", "/proc/x.h5"),
        "report": ("report", str(base), "-o", "/proc/x.md"),
        "export-trace": ("export-trace", str(base), "-o", "/proc/x.json"),
        "export-onnx": ("export-onnx", "--model", "mlp", "-o", "/proc/x.onnx"),
        "summary-json": ("report", str(base), "-o", "/sys/x.json"),
    }
    return {
        k: InputCase(v, hidden=("disk is full",), says=("virtual file system",))
        for k, v in cases.items()
    }


# -- schedulers that are not ---------------------------------------------------
class FakeScheduler:
    """A TCP server on 127.0.0.1 given as ``--scheduler``: ``http`` answers anything with an
    HTTP 400 and closes (any web server); ``silent`` accepts and never answers (a host that
    hangs). ``close()`` ends it."""

    def __init__(self, kind: str) -> None:
        import socket
        import threading

        self.kind = kind
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.kind != "http":
                self.held.append(conn)
                continue
            conn.settimeout(5)
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


FAKE_SCHEDULERS = {"http": "is not a Dask scheduler", "silent": "did not answer"}


def scheduler_cases(folder: Path, servers: dict[str, FakeScheduler]) -> dict[str, InputCase]:
    """``analyse tune --scheduler`` at each fake server (running while the cases run), and
    ``--tls-*`` files that cannot be used (a FIFO, a 2 GB sparse file, text that is not PEM):
    one sentence each, exit 2, within the service's bounded wait (10 s)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "mlp.toml"
    cfg.write_text('model = "mlp"\n')
    out = str(folder / "never")
    tune = ("tune", str(cfg), "--vary", "micro_batch_size=1,2", "--quiet", "-o", out)
    cases = {
        f"scheduler-{kind}": InputCase(
            (*tune[:-2], "--scheduler", servers[kind].address, *tune[-2:]),
            says=(FAKE_SCHEDULERS[kind], servers[kind].address),
        )
        for kind in servers
    }
    junk = folder / "junk.pem"
    junk.write_text("not a certificate\n")
    tls = {
        "tls-fifo": _nonregular(folder, "fifo", ".pem"),
        "tls-sparse-2gb": _nonregular(folder, "sparse-2gb", ".pem"),
        "tls-not-pem": junk,
    }
    for name, path in tls.items():
        argv = ("--scheduler", "tls://127.0.0.1:9", "--tls-ca-file", str(path))
        cases[name] = InputCase(
            (*tune[:-2], *argv, "--tls-cert", str(junk), *tune[-2:]), says=(path.name,)
        )
    return cases


# -- ONNX: expansion bombs and odd external-data locations (robustness round 4) ------------------
# A model's size is what it expands to: a model-local function that calls another twice doubles
# at each level (40 levels: 2^40 nodes from 3 kB), and control-flow subgraphs hide nodes from a
# count of the top-level graph. Each must be refused in one sentence, in bounded time and memory.


def onnx_function_bomb(folder: Path, depth: int = 40) -> Path:
    """Model-local functions F1..F``depth`` in domain ``bomb``: F1 is a Relu, Fi calls F(i-1)
    twice; the graph calls F``depth`` once (2^depth nodes once inlined, about 3 kB on disk)."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    funcs = [
        oh.make_function(
            "bomb",
            "F1",
            ["x"],
            ["y"],
            [oh.make_node("Relu", ["x"], ["y"])],
            [oh.make_opsetid("", 17)],
        )
    ]
    for i in range(2, depth + 1):
        body = [
            oh.make_node(f"F{i - 1}", ["x"], ["t"], domain="bomb"),
            oh.make_node(f"F{i - 1}", ["t"], ["y"], domain="bomb"),
        ]
        funcs.append(
            oh.make_function(
                "bomb",
                f"F{i}",
                ["x"],
                ["y"],
                body,
                [oh.make_opsetid("", 17), oh.make_opsetid("bomb", 1)],
            )
        )
    g = oh.make_graph(
        [oh.make_node(f"F{depth}", ["x"], ["y"], domain="bomb")],
        "hostile",
        [oh.make_tensor_value_info("x", T.FLOAT, [1, 4])],
        [oh.make_tensor_value_info("y", T.FLOAT, [1, 4])],
    )
    m = oh.make_model(
        g,
        opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("bomb", 1)],
        functions=funcs,
    )
    m.ir_version = 8
    return _save_onnx(m, folder / f"function-bomb-{depth}.onnx")


def onnx_recursive_function(folder: Path) -> Path:
    """A model-local function that calls itself (inlining it would never end)."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    body = [oh.make_node("Relu", ["x"], ["t"]), oh.make_node("R", ["t"], ["y"], domain="bomb")]
    f = oh.make_function(
        "bomb", "R", ["x"], ["y"], body, [oh.make_opsetid("", 17), oh.make_opsetid("bomb", 1)]
    )
    g = oh.make_graph(
        [oh.make_node("R", ["x"], ["y"], domain="bomb")],
        "hostile",
        [oh.make_tensor_value_info("x", T.FLOAT, [1, 4])],
        [oh.make_tensor_value_info("y", T.FLOAT, [1, 4])],
    )
    m = oh.make_model(
        g, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("bomb", 1)], functions=[f]
    )
    m.ir_version = 8
    return _save_onnx(m, folder / "recursive-function.onnx")


def _pb_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2): tag, varint length, payload."""
    out = bytearray()
    for v in ((number << 3) | 2, len(payload)):
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
    return bytes(out) + payload


def onnx_if_bomb(folder: Path, depth: int = 18) -> Path:
    """``If`` nested ``depth`` levels, each branch holding the next level: 2^depth leaf
    subgraphs (one Identity each) under one top-level node. The nesting is written as protobuf
    bytes (GraphProto.node = 1, NodeProto input / output / op_type / attribute = 1 / 2 / 4 / 5,
    AttributeProto name / g / type = 1 / 6 / 20): building it through protobuf messages copies
    each level three times (13 s for 2^18)."""
    from onnx import AttributeProto
    from onnx import TensorProto as T
    from onnx import helper as oh

    out = oh.make_tensor_value_info("y", T.FLOAT, [1, 4])
    tail = _pb_field(12, out.SerializeToString())  # GraphProto.output
    level = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "leaf", [], [out])
    graph = level.SerializeToString()
    kind = bytes([0xA0, 0x01, AttributeProto.GRAPH])  # field 20, varint
    for i in range(depth):
        attrs = b"".join(
            _pb_field(5, _pb_field(1, key) + _pb_field(6, graph) + kind)
            for key in (b"then_branch", b"else_branch")
        )
        node = _pb_field(1, b"c") + _pb_field(2, b"y") + _pb_field(4, b"If") + attrs
        graph = _pb_field(1, node) + _pb_field(2, f"level{i}".encode()) + tail
    m = _onnx_model(
        [],
        [
            oh.make_tensor_value_info("x", T.FLOAT, [1, 4]),
            oh.make_tensor_value_info("c", T.BOOL, []),
        ],
        [out],
    )
    # the outermost If as the graph's node: a second ModelProto.graph field (7) is merged into
    # the first by any protobuf parser, its node (GraphProto.node = 1) appended
    path = folder / f"if-bomb-{depth}.onnx"
    path.write_bytes(m.SerializeToString() + _pb_field(7, _pb_field(1, node)))
    return path


def onnx_wide_subgraph(folder: Path, n: int) -> Path:
    """One top-level ``If`` whose branch holds a chain of ``n`` Relu nodes."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    out = oh.make_tensor_value_info(f"t{n}", T.FLOAT, [1, 4])
    chain = [oh.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(n)]
    branch = oh.make_graph(chain, "wide", [], [out])
    small = oh.make_graph([oh.make_node("Identity", ["t0"], [f"t{n}"])], "small", [], [out])
    m = _onnx_model(
        [oh.make_node("If", ["c"], [f"t{n}"], then_branch=branch, else_branch=small)],
        [
            oh.make_tensor_value_info("t0", T.FLOAT, [1, 4]),
            oh.make_tensor_value_info("c", T.BOOL, []),
        ],
        [out],
    )
    return _save_onnx(m, folder / "wide-subgraph.onnx")


def onnx_expansion_cases(folder: Path) -> dict[str, InputCase]:
    """Function and subgraph bombs, and a NUL byte in an external-data location: each one
    sentence, exit 2, within the corpus' time limit."""
    from engine.onnx.reader import MAX_NODES

    folder.mkdir(parents=True, exist_ok=True)
    out = str(folder / "never.h5")
    cases: dict[str, InputCase] = {}
    bombs = {
        "function-bomb-2^40": onnx_function_bomb(folder, 40),
        "recursive-function": onnx_recursive_function(folder),
        "if-bomb-2^18": onnx_if_bomb(folder, 18),
        f"subgraph-{MAX_NODES + 1}-nodes": onnx_wide_subgraph(folder, MAX_NODES + 1),
    }
    says = {
        "function-bomb-2^40": ("nodes once",),
        "recursive-function": ("calls itself",),
        "if-bomb-2^18": ("nodes once",),
        f"subgraph-{MAX_NODES + 1}-nodes": ("nodes once",),
    }
    for name, path in bombs.items():
        cases[f"{name}/model-info"] = InputCase(("model-info", str(path)), says=says[name])
        cases[f"{name}/profile"] = InputCase(
            ("profile", "--quiet", "--model", str(path), "-o", out), says=says[name]
        )
    (folder / "w.bin").write_bytes(b"\0" * 64)
    for name, loc in (("nul", "w.bin\0.txt"), ("nul-first", "\0w.bin")):
        path = onnx_relu(folder, f"ext-{name}", [1, 4], {"location": loc, "length": "64"})
        cases[f"external-{name}"] = InputCase(("model-info", str(path)), says=("NUL",))
    return cases


# -- analyse query bounded in time, rows and bytes; 128-bit integers printed exactly ------------------


def query_bound_cases(base: Path, out: Path) -> dict[str, InputCase]:
    """``analyse query`` on ``base`` with queries that never end, hold too much, or a type the
    format cannot write: one sentence each, exit 2 (the queries run with ``--timeout 1``)."""
    q = ("query", str(base))
    endless = (
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
    )
    return {
        "endless-cte": InputCase((*q, endless, "--timeout", "1"), says=("time limit",)),
        "generate-series-1e11": InputCase(
            (*q, "SELECT sum(x) FROM generate_series(1, 100000000000) t(x)", "--timeout", "1"),
            says=("time limit",),
        ),
        "triple-cross-join": InputCase(
            (*q, "SELECT count(*) FROM steps a, steps b, steps c", "--timeout", "1"),
            says=("time limit",),
        ),
        "max-rows-1e20": InputCase((*q, "SELECT 1", "--max-rows", "100000000000000000000")),
        "interval-parquet": InputCase(
            (*q, "SELECT INTERVAL 1 DAY AS i", "--format", "parquet", "-o", str(out / "i.parquet")),
            says=("cast it",),
        ),
        "union-csv": InputCase(
            (*q, "SELECT union_value(a := 1) AS u", "--format", "csv", "-o", str(out / "u.csv")),
            says=("cast it",),
        ),
        "too-deep": InputCase(
            (*q, "SELECT " + "(" * 2000 + "1" + ")" * 2000), hidden=("SET max_expression_depth",)
        ),
    }


# -- analyse query over many profiles and folders of them -------------------------------------


def many_profile_cases(base: Path, folder: Path) -> dict[str, InputCase]:
    """``analyse query`` over sets of profiles that cannot be read as a set: a link out of the
    folder, a FIFO or a folder named like a profile, a file that is not a profile, an empty
    folder, more profiles than a query may read (hard links: cheap, each a path of its own)."""
    import os
    import shutil

    sql = "SELECT count(*) FROM runs"
    cases: dict[str, InputCase] = {}
    link = folder / "link-out"
    link.mkdir()
    shutil.copy(base, folder / "outside.h5")
    os.symlink(folder / "outside.h5", link / "a.h5")
    cases["link-out-of-folder"] = InputCase(("query", str(link), sql), says=("leaves its folder",))
    fifo = folder / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "a.h5")
    cases["fifo-in-folder"] = InputCase(("query", str(fifo), sql), says=("not a regular file",))
    junk = folder / "junk"
    junk.mkdir()
    (junk / "a.h5").write_bytes(b"not hdf5 " * 100)
    cases["not-a-profile"] = InputCase(("query", str(junk), sql), says=("a.h5",))
    empty = folder / "empty"
    empty.mkdir()
    (empty / "x.h5").mkdir()  # a folder named like a profile holds none
    cases["empty-folder"] = InputCase(("query", str(empty), sql), says=("has no profiles",))
    lots = folder / "lots"
    lots.mkdir()
    for i in range(257):
        os.link(folder / "outside.h5", lots / f"p{i:03d}.h5")
    cases["257-profiles"] = InputCase(("query", str(lots), sql), says=("more than 256",))
    cases["profiles-without-sql"] = InputCase(
        ("query", str(base), str(folder / "outside.h5")), says=("not SQL",)
    )
    cases["file-and-missing"] = InputCase(
        ("query", str(base), str(folder / "missing.h5"), sql), says=("missing.h5",)
    )
    return cases


# -- optimum-graphcore ipu_config.json (analyse profile --ipu-config) ---------------------------


def ipu_config_cases(folder: Path) -> dict[str, InputCase]:
    """IPU configs that cannot be read as run options: not JSON, not an object, a value of the
    wrong type, nesting bombs, a FIFO, a huge file, a field IPUConfig lacks. Each is one
    sentence, exit 2, and no profile written."""
    import json

    texts: dict[str, str | bytes] = {
        "not-json": "{layers_per_ipu: [1, 2]",
        "not-object": "[1, 2, 3]",
        "binary": b"\x89HDF\r\n\x1a\n" + b"\0" * 64,
        "nested": "[" * 100_000 + "]" * 100_000,
        "string-count": json.dumps({"replication_factor": "4"}),
        "bool-count": json.dumps({"gradient_accumulation_steps": True}),
        "huge-count": json.dumps({"device_iterations": 10**30}),
        "negative-layers": json.dumps({"layers_per_ipu": [-5, 6]}),
        "long-layers": json.dumps({"layers_per_ipu": [1] * 100_000}),
        "proportion-2": json.dumps({"matmul_proportion": 2.0}),
        "proportion-nan": '{"matmul_proportion": NaN}',
        "unknown-field": json.dumps({"layers_per_ipus": [6, 6]}),
        "bad-output-mode": json.dumps({"output_mode": "everything"}),
        "control-chars": json.dumps({"\x1b[31mred\u202e": 1}),
    }
    cases: dict[str, InputCase] = {}
    out = str(folder / "out.h5")
    for name, text in texts.items():
        path = folder / f"{name}.json"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        cases[name] = InputCase(
            ("profile", "--quiet", "--model", "bert-base", "--ipu-config", str(path), "-o", out)
        )
    big = folder / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(2 << 20)
    cases["big"] = InputCase(
        ("profile", "--model", "bert-base", "--ipu-config", str(big), "-o", out)
    )
    fifo = _nonregular(folder, "fifo", ".json")
    cases["fifo"] = InputCase(
        ("profile", "--model", "bert-base", "--ipu-config", str(fifo), "-o", out)
    )
    return cases


# -- host facts: a run configuration's host_profile (relative to the file, as model is) and ------
# -- calibrate-host over a broken torch install -----------------------------------------------


def host_fact_cases(folder: Path) -> dict[str, InputCase]:
    """Run configurations in ``folder/configs`` whose ``host_profile`` names a file relative to
    the configuration: missing, not a host profile, outside the folder, a NUL in the name, a
    folder. Each is refused in one sentence naming the file as resolved (exit 2), whatever the
    working directory."""
    cfgs = folder / "configs"
    cfgs.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("this is not a host profile\n")
    (cfgs / "a-folder.toml").mkdir(exist_ok=True)
    body = (
        'model = "resnet50"\nimage_size = 32\nmicro_batch_size = 1\n'
        'host_transforms = ["flip"]\nhost_profile = "{}"\n'
    )
    names = {
        "missing": ("missing.toml", ("missing.toml",)),
        "not-a-profile-above": ("../notes.txt", ("notes.txt", "not valid TOML")),
        "nul": ("a\\u0000b.toml", ()),
        "a-folder": ("a-folder.toml", ("a-folder.toml",)),
    }
    out = str(folder / "never.h5")
    cases: dict[str, InputCase] = {}
    for name, (value, says) in names.items():
        cfg = cfgs / f"run-{name}.toml"
        cfg.write_text(body.format(value))
        cases[name] = InputCase(("profile", "--quiet", str(cfg), "-o", out), says=says)
    return cases


def broken_torch(folder: Path, error: str = "RuntimeError") -> Path:
    """A package ``torch`` in ``folder`` that raises ``error`` at import, as a broken install
    does (a torchvision built for another torch, a missing runtime library); put ``folder``
    first on sys.path."""
    pkg = folder / "torch"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(
        f"raise {error}('operator torchvision::nms does not exist (injected by the tests)')\n"
    )
    return folder


def host_fact_option_cases(folder: Path) -> dict[str, InputCase]:
    """The per-call options a run may set (``host_call_overhead_us``, ``profiled_call_wait_us``;
    default the framework's) with values no call has: negative, NaN, infinite, absurd, text; as
    flags and in a run configuration. Each is refused in one sentence naming the option."""
    folder.mkdir(parents=True, exist_ok=True)
    out = str(folder / "never.h5")
    cases: dict[str, InputCase] = {}
    for opt in ("host_call_overhead_us", "profiled_call_wait_us"):
        flag = "--" + opt.replace("_", "-")
        for name, value in (("negative", "-1"), ("nan", "nan"), ("inf", "inf"), ("huge", "1e400")):
            cases[f"{opt}/flag-{name}"] = InputCase(
                ("profile", "--quiet", "--model", "mlp", flag, value, "-o", out), says=(opt,)
            )
        for name, value in (("negative", "-1.0"), ("absurd", "1e300"), ("text", '"soon"')):
            cfg = folder / f"{opt}-{name}.toml"
            cfg.write_text(f'model = "mlp"\n{opt} = {value}\n')
            cases[f"{opt}/toml-{name}"] = InputCase(
                ("profile", "--quiet", str(cfg), "-o", out), says=(opt,)
            )
    return cases


def host_fact_profile_texts() -> dict[str, str]:
    """Host profiles whose record of the measured CPU's float16 instructions is wrong in kind:
    each is refused in one sentence (``cpu_float16`` is a list of flag names)."""
    head = 'name = "x"\ncpu = "y"\ncores = 1\n'
    t = "\n[transforms.flip]\nfixed_us = 1.0\nns_per_element = { uint8 = 1.0 }\n"
    return {
        "cpu-float16-not-a-list": head + 'cpu_float16 = "f16c"\n' + t,
        "cpu-float16-numbers": head + "cpu_float16 = [16]\n" + t,
        "cpu-float16-table": head + "cpu_float16 = { f16c = true }\n" + t,
    }


# -- what a simulation's cache key is made of: every input by content ------------------------------
def slow_host_profile(factor: float = 50.0) -> str:
    """The shipped host profile with every cost (per call, per element, the loader's) times
    ``factor``: the same run configuration on it is ``factor`` times slower on the host."""
    from analyser.cli.calibrate_host import to_toml
    from engine.host.profile import load_host_profile

    prof = load_host_profile("default").model_dump(exclude_none=True)
    prof["loader_us_per_sample"] *= factor
    for cost in prof["transforms"].values():
        cost["fixed_us"] *= factor
        cost["ns_per_element"] = {k: v * factor for k, v in cost["ns_per_element"].items()}
    return to_toml({**prof, "measured": prof.get("measured", "now")})


#: Host transforms of an MLP run that reads stored arrays (what the host profile costs).
HOST_STEPS = ["from_array", "flip", "to_tensor", "convert_dtype", "normalise"]


def sim_key_changes(folder: Path) -> dict[str, tuple[dict, Callable[[], object], Path | None]]:
    """Inputs that change a simulation's figures while its run configuration reads the same:
    ``name -> (config, change, cwd)``; ``change()`` edits a file the configuration names (same
    path, new contents); ``cwd``: the folder a relative path is read from (None: any). A request
    made after the change must have another cache key."""
    from importlib import resources

    folder.mkdir(parents=True, exist_ok=True)
    default = resources.files("engine").joinpath("data/host/default.toml").read_text("utf-8")
    host = folder / "host.toml"
    host.write_text(default)
    rel = folder / "rel"
    rel.mkdir(exist_ok=True)
    (rel / "host.toml").write_text(default)
    model = onnx_relu(folder, "relu", [1, 4])
    ext = onnx_relu(folder, "relu-ext", [1, 4], {"location": "w.bin", "length": "64"})
    ext2 = onnx_relu(folder, "relu-ext2", [1, 4], {"location": "w2.bin", "length": "64"})
    (folder / "w2.bin").write_bytes(bytes(64))
    return {
        "host-profile-50x-slower": (
            {"model": "mlp", "host_transforms": HOST_STEPS, "host_profile": str(host)},
            lambda: host.write_text(slow_host_profile()),
            None,
        ),
        # a relative host_profile is read from the current folder: its contents, not its name
        "relative-host-profile-edited": (
            {"model": "mlp", "host_transforms": HOST_STEPS, "host_profile": "host.toml"},
            lambda: (rel / "host.toml").write_text(slow_host_profile(3.0)),
            rel,
        ),
        "onnx-model-rewritten": (
            {"model": str(model)},
            lambda: onnx_relu(folder, "relu", [64, 4]),
            None,
        ),
        # the model's bytes stay; the external-data file it names appears (it was refused as
        # missing; the refusal was an answer of the cache)
        "onnx-external-data-appears": (
            {"model": str(ext)},
            lambda: (folder / "w.bin").write_bytes(bytes(64)),
            None,
        ),
        "onnx-external-data-truncated": (
            {"model": str(ext2)},
            lambda: (folder / "w2.bin").write_bytes(bytes(8)),
            None,
        ),
    }


# -- scheduler addresses that cannot be one, and TLS peers that refuse each other ----------------
#: ``--scheduler`` values that name no scheduler analyse can reach, and what the sentence says.
SCHEDULER_ADDRESSES: dict[str, tuple[str, tuple[str, ...]]] = {
    "udp": ("udp://127.0.0.1:9", ("'udp'", "tcp://HOST:PORT")),
    "file": ("file:///tmp/scheduler", ("'file'", "tcp://HOST:PORT")),
    "inproc": ("inproc://10.0.0.1/1/1", ("inproc://", "within one process")),
    "host-300-letters": ("tcp://" + "a" * 300 + ":8786", ("host name",)),
    "host-300-letters-no-port": ("tcp://" + "a" * 300, ("tcp://HOST:PORT",)),
    "empty-host": ("tcp://:8786", ("tcp://HOST:PORT",)),
    # TEST-NET-1 (RFC 5737): routed nowhere; refused or timed out, never an answer
    "unroutable": ("tcp://192.0.2.1:8786", ("cannot reach",)),
    "closed-port": ("tcp://127.0.0.1:9", ("cannot reach", "refused")),
}


def scheduler_address_cases(folder: Path) -> dict[str, InputCase]:
    """``analyse tune --scheduler`` at each of :data:`SCHEDULER_ADDRESSES`: one sentence with
    the real reason (an unsupported protocol, a host name that is none, nothing reachable),
    never "not a Dask message" (nothing answered) and never a traceback; exit 2."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "mlp.toml"
    cfg.write_text('model = "mlp"\n')
    out = str(folder / "never")
    tune = ("tune", str(cfg), "--vary", "micro_batch_size=1,2", "--quiet")
    return {
        name: InputCase(
            (*tune, "--scheduler", address, "-o", out),
            says=says,
            hidden=("not a Dask message", "Traceback", "UnicodeError"),
        )
        for name, (address, says) in SCHEDULER_ADDRESSES.items()
    }


def tls_refusal_cases(folder: Path, address: str, security) -> dict[str, InputCase]:
    """``--scheduler`` at a TLS scheduler (``address``, credentials ``security``: a
    ``distributed.security.Security``) with credentials it and the client do not share: the
    scheduler's certificate not signed by the CA given (``wrong-ca``), a client certificate the
    scheduler's CA did not sign (``client-cert-refused``). Each names the TLS handshake and
    which certificate was refused, never "is not a Dask scheduler"."""
    from distributed.security import Security

    other = Security.temporary()
    folder.mkdir(parents=True, exist_ok=True)

    def pem(name: str, text: str) -> str:
        p = folder / name
        p.write_text(text)
        p.chmod(0o600)
        return str(p)

    good = {
        "ca": pem("ca.pem", security.tls_ca_file),
        "cert": pem("cert.pem", security.tls_client_cert),
        "key": pem("key.pem", security.tls_client_key),
    }
    bad = {
        "ca": pem("other-ca.pem", other.tls_ca_file),
        "cert": pem("other-cert.pem", other.tls_client_cert),
        "key": pem("other-key.pem", other.tls_client_key),
    }
    cfg = folder / "mlp.toml"
    cfg.write_text('model = "mlp"\n')
    tune = ("tune", str(cfg), "--vary", "micro_batch_size=1,2", "--quiet", "--scheduler", address)

    def case(ca: str, cert: str, key: str, says: tuple[str, ...]) -> InputCase:
        tls = ("--tls-ca-file", ca, "--tls-cert", cert, "--tls-key", key)
        return InputCase(
            (*tune, *tls, "-o", str(folder / "never")),
            says=("TLS handshake", address, *says),
            hidden=("not a Dask scheduler", "Traceback"),
        )

    return {
        "wrong-ca": case(bad["ca"], good["cert"], good["key"], ("--tls-ca-file",)),
        "client-cert-refused": case(good["ca"], bad["cert"], bad["key"], ("--tls-cert",)),
    }


# -- the record of the outputs analyse wrote without a marker (CSV, JSON records, Parquet) ---------
def output_record_tamperings() -> dict[str, Callable[[Path, Path], None]]:
    """Ways to make the record of an output say a file is analyse's when it is not (or to make
    reading it hang or fill memory): ``tamper(record_json, output)``. Each must leave the
    output refused as the user's (the safe direction), never replaced, never a traceback."""
    import os

    def edit(fn: Callable[[dict], object]) -> Callable[[Path, Path], None]:
        def tamper(record: Path, out: Path) -> None:
            new = fn(json.loads(record.read_text()))
            record.write_text(new if isinstance(new, str) else json.dumps(new))

        return tamper

    def fifo(record: Path, out: Path) -> None:
        record.unlink()
        os.mkfifo(record)

    def user_rewrote(record: Path, out: Path) -> None:
        out.write_text("x\nprecious\n")

    def same_size_same_time(record: Path, out: Path) -> None:
        # other bytes of the same length, the old modification time put back (rsync -t, touch -r)
        st = out.stat()
        data = out.read_bytes()
        out.write_bytes(bytes(b ^ 1 for b in data))
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))

    def user_copy(record: Path, out: Path) -> None:
        data = out.read_bytes()
        out.unlink()
        out.write_bytes(data)  # the same bytes, but a file of the user's (another inode)

    return {
        "not-json": edit(lambda d: "{nope"),
        "list": edit(lambda d: []),
        "deep": edit(lambda d: "[" * 100_000 + "]" * 100_000),
        "huge": edit(lambda d: {**d, "pad": "x" * (1 << 20)}),
        "other-path": edit(lambda d: {**d, "path": "/etc/passwd"}),
        "size-text": edit(lambda d: {**d, "size": str(d["size"])}),
        "digest-wrong": edit(lambda d: {**d, "sha256": "0" * 64}),
        "fifo": fifo,
        "user-rewrote-it": user_rewrote,
        "same-size-same-time": same_size_same_time,
        "user-copy": user_copy,
    }


# -- output width and a Markdown report's image folder ----------------------------------------------
def width_and_image_cases(base: Path, folder: Path) -> dict[str, InputCase]:
    """``--width`` out of its bounds, and a Markdown report whose images cannot go where they
    go (``NAME_files/`` beside ``NAME.md``): a file, a FIFO or an HDF5 file in the way. One
    sentence each, exit 2, nothing replaced."""
    import os
    import shutil

    q = ("roofline", str(base), "--width")
    cases = {
        "width-zero": InputCase((*q, "0"), says=("--width",)),
        "width-negative": InputCase((*q, "-5"), says=("--width",)),
        "width-huge": InputCase((*q, "1" + "0" * 30), says=("columns",)),
        "width-text": InputCase((*q, "wide"), says=("whole number",)),
    }
    (folder / "file_files").write_text("a file where the image folder goes")
    cases["images-folder-is-a-file"] = InputCase(
        ("report", str(base), "-o", str(folder / "file.md")), says=("not a folder",)
    )
    fifo = folder / "fifo_files"
    fifo.mkdir(exist_ok=True)
    if not (fifo / "p1-liveness.svg").exists():
        os.mkfifo(fifo / "p1-liveness.svg")
    cases["image-is-a-fifo"] = InputCase(
        ("report", str(base), "-o", str(folder / "fifo.md"), "--force"), says=("named pipe",)
    )
    h5 = folder / "h5_files"
    h5.mkdir(exist_ok=True)
    shutil.copyfile(base, h5 / "p1-memory-per-tile.svg")
    cases["image-is-a-profile"] = InputCase(
        ("report", str(base), "-o", str(folder / "h5.md"), "--force"), says=("HDF5",)
    )
    return cases


# -- tune folders: links out of the folder, control characters ---------------------------------
#: A value only the files outside the tune folder hold: it must never be shown.
TUNE_OUTSIDE_SECRET = "HOSTILE-SECRET-OUTSIDE-THE-TUNE-FOLDER"
#: Terminal escapes and a bidi override (CVE-2021-42574) in names the report shows.
CONTROL_TEXT = "\x1b[2J\x1b]0;owned\x07\u202eevil"


def _link_out(name: str, target: Path) -> Callable[[Path], None]:
    """``name`` in the folder becomes a symbolic link to ``target`` (outside the folder)."""

    def mutate(folder: Path) -> None:
        (folder / name).unlink()
        (folder / name).symlink_to(target)

    return mutate


def tune_link_cases(folder: Path, base: Path) -> dict[str, InputCase]:
    """tune.json or results.parquet as a link out of the tune folder (to a file of the right
    shape whose values hold :data:`TUNE_OUTSIDE_SECRET`, to /dev/zero, to a folder), through
    ``analyse report DIR`` and ``analyse gui DIR``: each refused in one sentence that names the
    link, the linked file's values never shown."""
    import pandas as pd

    outside = folder / "outside"
    src = tune_folder(outside / "src", base)
    meta = json.loads((src / "tune.json").read_text())
    (outside / "meta.json").write_text(json.dumps({**meta, "start_id": TUNE_OUTSIDE_SECRET}))
    (outside / "good-meta.json").write_text(json.dumps(meta))
    df = pd.read_parquet(src / "results.parquet")
    df["message"] = TUNE_OUTSIDE_SECRET
    df.to_parquet(outside / "table.parquet", index=False)
    (outside / "a-folder").mkdir()
    mutations = {
        "meta-link-out": _link_out("tune.json", outside / "meta.json"),
        "meta-link-out-valid": _link_out("tune.json", outside / "good-meta.json"),
        "meta-link-dev-zero": _link_out("tune.json", Path("/dev/zero")),
        "meta-link-folder": _link_out("tune.json", outside / "a-folder"),
        "parquet-link-out": _link_out("results.parquet", outside / "table.parquet"),
        "parquet-link-dev-zero": _link_out("results.parquet", Path("/dev/zero")),
    }
    cases: dict[str, InputCase] = {}
    for name, mutate in mutations.items():
        d = tune_folder(folder / name, base)
        mutate(d)
        out = str(folder / f"{name}.html")
        hidden = (TUNE_OUTSIDE_SECRET, SECRET)
        says = ("a link out of the tune folder",)
        cases[f"{name}/report"] = InputCase(("report", str(d), "-o", out), hidden=hidden, says=says)
        cases[f"{name}/gui"] = InputCase(("gui", str(d)), hidden=hidden, says=says)
    return cases


def tune_control_folder(folder: Path, base: Path) -> Path:
    """A valid tune folder whose own name, start configuration's file, dimension, option values
    and row messages hold :data:`CONTROL_TEXT` (what a report must show as visible escapes)."""
    import pandas as pd

    d = tune_folder(folder / f"tune{CONTROL_TEXT}", base)
    meta = json.loads((d / "tune.json").read_text())
    dim = f"micro_batch_size{CONTROL_TEXT}"
    meta["dimensions"] = {dim: meta["dimensions"]["micro_batch_size"]}
    meta["config_file"] = f"run{CONTROL_TEXT}.toml"
    meta["start"] = {**meta["start"], dim: 1}
    meta["diff"] = {dim: [f"a{CONTROL_TEXT}", f"b{CONTROL_TEXT}"]}
    (d / "tune.json").write_text(json.dumps(meta))
    df = pd.read_parquet(d / "results.parquet")
    df[dim] = [f"{v}{CONTROL_TEXT}" for v in df["micro_batch_size"]]
    df["message"] = f"note{CONTROL_TEXT}"
    df["origin"] = [f"{o}{CONTROL_TEXT}" for o in df["origin"]]
    df.to_parquet(d / "results.parquet", index=False)
    return d


# -- stored fidelity errors: the calibration's fields and the memory facts -----------------------
def fidelity_errors_calibration_files(folder: Path) -> dict[str, Path]:
    """Stored-errors files whose calibration fields (``features``, ``config``, ``source``) or
    memory facts (``memory``) are wrong or hostile: each must be one sentence, never a range."""
    folder.mkdir(parents=True, exist_ok=True)
    row = {"id": "r", "mechanism": "device-at-scale", "quantity": "throughput", "error": 0.1}
    doc = {"schema": "ipu-fidelity-errors", "schema_version": "1.0", "rows": [row]}
    fact = {"id": "m", "fits": True, "peak_tile_bytes": 1000, "sram_per_tile": 2000}
    bad = {
        "features-list": {**doc, "rows": [{**row, "features": [1, 2]}]},
        "features-nested": {**doc, "rows": [{**row, "features": {"ipus": {"a": 1}}}]},
        "features-many": {**doc, "rows": [{**row, "features": {f"k{i}": 1 for i in range(50)}}]},
        "source-terminal": {**doc, "rows": [{**row, "source": INJECTIONS["terminal"]}]},
        "config-bidi": {**doc, "rows": [{**row, "config": INJECTIONS["bidi"]}]},
        "config-huge": {**doc, "rows": [{**row, "config": "a" * 10_000}]},
        "memory-not-list": {**doc, "memory": {"m": fact}},
        "memory-fits-text": {**doc, "memory": [{**fact, "fits": "true"}]},
        "memory-zero-sram": {**doc, "memory": [{**fact, "sram_per_tile": 0}]},
        "memory-id-terminal": {**doc, "memory": [{**fact, "id": INJECTIONS["terminal"]}]},
        "memory-too-many": {**doc, "memory": [fact] * 10_001},
    }
    out = {}
    for name, d in bad.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(d), encoding="utf-8")
        out[name] = path
    return out


# -- the notebook's inputs: windows of the execution trace (analysis.plot.trace) ---------------
def trace_windows() -> dict[str, tuple[object, str]]:
    """Windows ``analysis.plot.trace`` refuses, with what its one sentence says: empty or
    reversed, not two numbers, too large to draw (with the step limit lowered to 50)."""
    return {
        "reversed": ((5, 1), "empty"),
        "empty": ((7, 7), "empty"),
        "text": (("a", 2), "(start, end)"),
        "none": (None, "(start, end)"),
        "one-number": ((5,), "(start, end)"),
        "nan": ((float("nan"), 5), "(start, end)"),
        "huge": ((0, 10**30), "narrow it"),
        "whole-run": ((0, 10**12), "narrow it"),
    }


def assert_one_sentence_each(cases: dict[str, InputCase], capsys) -> None:
    """Run each case's command in this process (``analyser.cli.main``): its exit code is the
    one it must give, its stderr one sentence (no traceback) saying what it must and nothing it
    must not."""
    from analyser.cli import main

    for name, case in cases.items():
        try:
            code = main(list(case.argv))
        except SystemExit as e:  # argparse
            code = e.code
        err = capsys.readouterr().err.strip()
        assert case.expect is None or code == case.expect, (name, code, err)
        assert "Traceback" not in err and err.count("\n") <= 1, (name, err)
        assert all(s in err for s in case.says), (name, err)
        assert not any(h in err for h in case.hidden), (name, err)


# -- the PyTorch 2 exporter's node metadata (an operation's source) -----------------------------
def onnx_hostile_sources(folder: Path) -> dict[str, Path]:
    """Models whose node metadata is hostile where the importer reads an operation's source:
    a 4 MB stack trace, a class hierarchy nested 100,000 deep, terminal escapes and a bidi
    override in the file name, a path naming the machine's folders, a line number of 40
    digits. Each imports cleanly; its source is bounded, escaped of control characters and
    holds no folder."""
    import onnx

    texts = {
        "huge-stack": ('File "a.py", line 1, in f\n' * 160_000, None),
        "deep-classes": (None, "[" * 100_000 + "]" * 100_000),
        "escapes": ('File "/home/u/\x1b[2J\u202emodel.py", line 7, in forward', None),
        "folders": ('File "/home/alice/secret-project/net.py", line 3, in forward', None),
        "long-line": ('File "net.py", line ' + "9" * 40 + ", in forward", None),
        "not-text-classes": (None, "__import__('os').system('echo hostile')"),
    }
    out = {}
    for name, (stack, classes) in texts.items():
        path = onnx_relu(folder, f"src-{name}", [1, 4])
        m = onnx.load(str(path))
        node = m.graph.node[0]
        node.name = "/block/MatMul"
        for key, value in (
            ("pkg.torch.onnx.stack_trace", stack),
            ("pkg.torch.onnx.class_hierarchy", classes),
        ):
            if value is not None:
                p = node.metadata_props.add()
                p.key, p.value = key, value
        onnx.save(m, str(path))
        out[name] = path
    return out


# -- tune's split search (--vary split_points=auto) ----------------------------------------------
def auto_split_cases(folder: Path) -> dict[str, InputCase]:
    """``analyse tune --vary split_points=auto`` where it cannot apply or is given nonsense: a
    single-IPU start (no split to move), a split varied twice, the per-IPU proportions it
    chooses itself varied by hand, proportions out of range or not numbers, a split point
    name made of terminal escapes. Each is refused in one sentence, exit 2, before any
    simulation and with nothing written."""
    folder.mkdir(parents=True, exist_ok=True)
    single = folder / "single.toml"
    single.write_text('model = "mlp"\n')
    pipe = folder / "pipe.toml"
    pipe.write_text(
        'model = "mlp"\nnum_ipus = 2\nstrategy = "pipelined"\nsplit_points = ["layers.3"]\n'
        "gradient_accumulation = 4\n"
    )
    out = str(folder / "never-written")

    def tune(cfg: Path, *vary: str) -> tuple[str, ...]:
        args: list[str] = ["tune", str(cfg)]
        for v in vary:
            args += ["--vary", v]
        return (*args, "--quiet", "-o", out)

    auto = "split_points=auto"
    return {
        "single-ipu": InputCase(tune(single, auto), says=("no split points",)),
        "alias-single-ipu": InputCase(tune(single, "splits=auto"), says=("no split points",)),
        "twice": InputCase(tune(pipe, auto, "split_points=layers.2"), says=("varied twice",)),
        "per-ipu-by-hand": InputCase(
            tune(pipe, auto, "available_memory_proportion_per_ipu=0.3+0.3"),
            says=("chooses available_memory_proportion_per_ipu itself",),
        ),
        "proportion-zero": InputCase(tune(pipe, auto, "amp=0,0.6"), says=("must be >",)),
        "proportion-above-one": InputCase(tune(pipe, auto, "amp=0.5,7"), says=("<= 1",)),
        "proportion-text": InputCase(tune(pipe, auto, "amp=lots"), says=("not a valid",)),
        "proportion-none": InputCase(tune(pipe, auto, "amp=none"), says=("give proportions",)),
        "budget-one": InputCase(
            (*tune(pipe, auto)[:-3], "--budget", "1", "--quiet", "-o", out), says=("--budget 2",)
        ),
        "escapes-in-list": InputCase(
            tune(pipe, auto, "split_points=\x1b[2Jlayers.2"), says=("varied twice",)
        ),
    }


# -- a tune's folder holding files of the user's at the names a tune writes ----------------------
#: Bytes of a file of the user's: after any tune into the folder they must still be there.
USER_BYTES = b"<html>the user's own notes, not a tune's report</html>\n"


def _user_file(name: str) -> Callable[[Path], Path]:
    def put(folder: Path) -> Path:
        (folder / name).write_bytes(USER_BYTES)
        return folder / name

    return put


def _edited(name: str) -> Callable[[Path], Path]:
    """The tune's own file, edited in place by the user (same inode; it is the user's now)."""

    def put(folder: Path) -> Path:
        with open(folder / name, "ab") as fh:
            fh.write(USER_BYTES)
        return folder / name

    return put


def _copied_over(src: str, name: str) -> Callable[[Path], Path]:
    """Another profile copied over one the tune wrote (``cp``: the same inode, new bytes)."""

    def put(folder: Path) -> Path:
        with open(folder / src, "rb") as fin, open(folder / name, "r+b") as fout:
            fout.truncate(0)
            shutil.copyfileobj(fin, fout)
            fout.write(USER_BYTES)
        return folder / name

    return put


def _linked(name: str) -> Callable[[Path], Path]:
    """``name`` as a link to a file of the user's outside the folder."""

    def put(folder: Path) -> Path:
        mine = folder.parent / f"mine-{name}"
        mine.write_bytes(USER_BYTES)
        (folder / name).unlink()
        (folder / name).symlink_to(mine)
        return mine

    return put


def tune_user_file_cases() -> dict[str, Callable[[Path], Path]]:
    """Edits of a folder a tune wrote (``--best 2``) that leave a file of the user's at a name
    the tune writes; each returns the user's file. A tune into the folder must refuse in one
    sentence naming it, --force or not, and change nothing in the folder."""
    return {
        "report-replaced": _user_file("report.html"),
        "report-edited": _edited("report.html"),
        "best-1-copied-over": _copied_over("start.h5", "best-1.h5"),
        "start-replaced": _user_file("start.h5"),
        "results-replaced": _user_file("results.parquet"),
        "best-2-link-out": _linked("best-2.h5"),
        "report-link-out": _linked("report.html"),
    }


# -- the simulation service's options on the commands that simulate -----------------------------
#: Values no simulation service can use: each one sentence and exit 2 before any work.
SERVICE_OPTION_VALUES: dict[str, tuple[str, ...]] = {
    "workers-100000": ("--workers", "100000"),
    "workers-0": ("--workers", "0"),
    "time-limit-nan": ("--time-limit", "nan"),
    "time-limit-inf": ("--time-limit", "inf"),
    "time-limit-negative": ("--time-limit", "-5"),
    "time-limit-1e300": ("--time-limit", "1e300"),
    "memory-limit-1K": ("--memory-limit", "1K"),
    "memory-limit-1e400": ("--memory-limit", "1e400"),
    "memory-limit-nan": ("--memory-limit", "nanGB"),
    "memory-limit-words": ("--memory-limit", "lots"),
    "scheduler-no-port": ("--scheduler", "foo"),
    "scheduler-empty-host": ("--scheduler", "tcp://"),
    "scheduler-udp": ("--scheduler", "udp://10.0.0.1:8786"),
    "scheduler-inproc": ("--scheduler", "inproc://x"),
    "scheduler-300-letters": ("--scheduler", "tcp://" + "a" * 300 + ":8786"),
    "scheduler-port-99999": ("--scheduler", "tcp://127.0.0.1:99999"),
}


def service_option_cases(profile: Path, folder: Path) -> dict[str, InputCase]:
    """Each of :data:`SERVICE_OPTION_VALUES` on ``analyse critical-path PROFILE --what-if``
    and on ``analyse tune`` (whose output folder must not be made), plus counts a tune
    cannot hold (``--budget``, ``--beam``, ``--best`` past the rows of a results table) and
    ``--top`` that is not a whole number."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "mlp.toml"
    cfg.write_text('model = "mlp"\nmicro_batch_size = 2\n')
    never = str(folder / "never")
    tune = ("tune", str(cfg), "--vary", "mbs=1,2", "--quiet")
    cases: dict[str, InputCase] = {}
    for name, option in SERVICE_OPTION_VALUES.items():
        says = (option[0],)
        cases[f"critical-path/{name}"] = InputCase(
            ("critical-path", str(profile), "--what-if", *option), says=says
        )
        cases[f"tune/{name}"] = InputCase((*tune, *option, "-o", never), says=says)
    for option, value in (
        ("--budget", "100000000000000000000"),
        ("--budget", "0"),
        ("--beam", "100000000000000000000"),
        ("--best", "100000000000000000000"),
        ("--best", "-1"),
    ):
        cases[f"tune/{option[2:]}-{value[:6]}"] = InputCase(
            (*tune, option, value, "-o", never), says=(option,)
        )
    for value in ("1e20", "0", "-3", "nan"):
        cases[f"critical-path/top-{value}"] = InputCase(
            ("critical-path", str(profile), "--top", value), says=("--top",)
        )
    return cases


# -- ONNX: a Range whose values onnx's data propagation would hold as a shape -------------------
def onnx_range_cast_bomb(folder: Path, length: int = 2**40) -> Path:
    """Range(0, ``length``, 1) -> Cast -> ReduceSum, from Constant nodes: onnx's data
    propagation held the Range's values as a shape (std::bad_alloc after 3.2 GiB at 2^40)."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    nodes = [_const("a", [0], []), _const("b", [length], []), _const("d", [1], [])]
    nodes.append(oh.make_node("Range", ["a", "b", "d"], ["r"], name="positions"))
    nodes.append(oh.make_node("Cast", ["r"], ["big"], to=T.FLOAT))
    return _bomb(folder, f"range-cast-{length}", nodes)


def onnx_range_of_shape(folder: Path, n: int = 100_000_000) -> Path:
    """x (1 x ``n``) -> Shape -> Gather(1) -> Range(0, n) -> Cast -> ReduceSum -> Add(x): a
    Range as long as an input dimension (the limit known only from the input's shape);
    data propagation of its 10^8 values took 2.4 GiB before it failed."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    nodes = [
        oh.make_node("Shape", ["x"], ["s"]),
        _const("i", [1], []),
        oh.make_node("Gather", ["s", "i"], ["lim"]),
        _const("a", [0], []),
        _const("d", [1], []),
        oh.make_node("Range", ["a", "lim", "d"], ["r"]),
        oh.make_node("Cast", ["r"], ["rf"], to=T.FLOAT),
        oh.make_node("ReduceSum", ["rf"], ["t"], keepdims=0),
        oh.make_node("Add", ["x", "t"], ["y"]),
    ]
    m = _onnx_model(
        nodes,
        [oh.make_tensor_value_info("x", T.FLOAT, [1, n])],
        [oh.make_tensor_value_info("y", T.FLOAT, [1, n])],
    )
    return _save_onnx(m, folder / f"range-of-shape-{n}.onnx")


def onnx_data_prop_cases(folder: Path) -> dict[str, InputCase]:
    """The Range bombs through model-info and profile: a Range longer than any dimension is one
    sentence naming the node (exit 2); one as long as an input dimension is any clean exit;
    both within a bounded memory (tests/test_onnx_data_prop.py runs them under a limit)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = str(folder / "never.h5")
    bomb = str(onnx_range_cast_bomb(folder))
    shaped = str(onnx_range_of_shape(folder))
    return {
        "range-cast-2^40/model-info": InputCase(("model-info", bomb), says=("'positions'",)),
        "range-cast-2^40/profile": InputCase(
            ("profile", "--quiet", "--model", bomb, "-o", out), says=("'positions'",)
        ),
        "range-of-shape-1e8/model-info": InputCase(
            ("model-info", shaped), expect=None, hidden=("bad_alloc",)
        ),
    }


# -- processes that outlive the command that started them ----------------------------------------
#: Runs ``analyse ARGV`` as the child of a subreaper (so every process it starts that outlives
#: it becomes this script's child, a zombie included) and prints, as JSON, the command's exit
#: code and each such process (pid, state, command line) at the moment the command returned.
SURVIVORS = r"""
import ctypes, json, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
code = subprocess.run(sys.argv[1:]).returncode
left = []
for name in os.listdir("/proc"):
    if not name.isdigit():
        continue
    try:
        stat = open(f"/proc/{name}/stat", "rb").read()
        cmd = open(f"/proc/{name}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except OSError:
        continue
    fields = stat[stat.rfind(b")") + 2 :].split()
    if int(fields[1]) == os.getpid():
        left.append([int(name), fields[0].decode(), cmd[:160]])
print(json.dumps({"code": code, "left": left}))
for pid, _state, _cmd in left:  # then end them, so that the test leaves nothing behind
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except OSError:
        pass
"""


def survivors(argv: tuple[str, ...], env: dict[str, str], timeout: float = 600) -> dict:
    """``analyse argv`` run under :data:`SURVIVORS`: {"code": exit code, "left": [[pid,
    state, command line], ...] of the processes it started that it had not ended}."""
    import subprocess
    import sys

    analyse = str(Path(sys.executable).parent / "analyse")
    run = subprocess.run(
        [sys.executable, "-c", SURVIVORS, analyse, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    lines = run.stdout.strip().splitlines()
    assert lines, run.stderr
    doc = json.loads(lines[-1])
    doc["stderr"] = run.stderr
    return doc


# -- signals while a command works -----------------------------------------------------------------
#: Commands that work for long enough to be interrupted mid-way ({profile}: a valid profile).
BUSY_COMMANDS: dict[str, tuple[str, ...]] = {
    "query-range-1e12": ("query", "{profile}", "SELECT count(*) FROM range(1000000000000)"),
}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux /proc), 0 when it is gone."""
    import os

    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """:func:`cpu_seconds` of ``pid`` and of every live process below it (Linux /proc)."""
    import os

    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                parent[int(entry)] = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, grew = {pid}, True
    while grew:
        below = {child for child, up in parent.items() if up in tree} - tree
        tree |= below
        grew = bool(below)
    return sum(cpu_seconds(p) for p in tree)


def signal_when_busy(argv: tuple[str, ...], sig: int, env: dict[str, str], busy: float = 1.0):
    """``analyse argv`` started with Ctrl-C at its default (as a terminal gives it), sent
    ``sig`` once it has used ``busy`` CPU seconds (it is working, not starting); returns
    (exit code, stderr). A command that ends first returns what it gave."""
    import signal
    import subprocess
    import sys
    import time

    analyse = str(Path(sys.executable).parent / "analyse")
    proc = subprocess.Popen(
        [analyse, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # the command's CPU with its children's (analyse query works in a child process)
    while proc.poll() is None and tree_cpu_seconds(proc.pid) < busy:
        time.sleep(0.02)
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        _out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        err += "\n(still running 120 s after the signal)"
    return proc.returncode, err
