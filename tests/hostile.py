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
from pathlib import Path

import h5py
import numpy as np

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
            data = np.frombuffer((SECRET * 8).encode()[:184], dtype="<i8")
            h5["d"] = data
            h5.create_group("g")["name"] = np.array([SECRET] * 23, dtype=object)
    return path


def external_raw(column: str = "/graph/operations/flops") -> Mutation:
    """A column whose bytes are read from another (any) file: h5py ``external=``."""

    def mutate(p: Path) -> None:
        secret = secret_file(p.parent)
        with h5py.File(p, "r+") as h5:
            n = h5[column.strip("/")].shape[0]
            del h5[column.strip("/")]
            h5.create_dataset(
                column.strip("/"),
                shape=(n,),
                dtype="<i8",
                external=[(str(secret), 0, h5py.h5f.UNLIMITED)],
            )

    return mutate


def virtual(column: str = "/graph/operations/flops") -> Mutation:
    """A virtual dataset mapping a dataset of another HDF5 file."""

    def mutate(p: Path) -> None:
        src = secret_h5(p.parent)
        with h5py.File(p, "r+") as h5:
            n = h5[column.strip("/")].shape[0]
            del h5[column.strip("/")]
            layout = h5py.VirtualLayout(shape=(n,), dtype="<i8")
            layout[:] = h5py.VirtualSource(str(src), "d", shape=(23,))[:n]
            h5.create_virtual_dataset(column.strip("/"), layout, fillvalue=0)

    return mutate


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
