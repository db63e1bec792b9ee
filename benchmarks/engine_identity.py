"""Check that an engine change leaves its profiles bit-identical (a speed-only change must).

    python benchmarks/engine_identity.py write DIR     # write the reference set of profiles
    python benchmarks/engine_identity.py compare A B   # compare two such directories

The reference set: the six walkthrough steps, mlp-inference, ResNet-50 on one IPU and on a Bow
Pod64, BERT-Large 4 IPUs x 4 replicas pipelined and BERT-Large pipelined over 16 IPUs. ``compare``
reads every dataset and attribute of every profile (values, dtypes, shapes; the root's
``created`` time stamp excepted) and prints each difference; exit 1 when any. Run ``write`` on the
base commit and on the change (each in its own worktree or checkout) and compare the two.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import hdf5plugin  # noqa: F401  registers the Blosc2 filter the profiles are written with
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "assets" / "runs"

#: attributes that differ between two runs of the same code
VOLATILE = {("/", "created")}


def configs() -> dict[str, object]:
    from engine.config import RunConfig

    out = {p.stem: RunConfig.from_toml(p) for p in sorted((RUNS / "walkthrough").glob("*.toml"))}
    for name in (
        "mlp-inference",
        "resnet50-single-ipu",
        "resnet50-bow-pod64",
        "bert-large-pretraining",
    ):
        out[name] = RunConfig.from_toml(RUNS / f"{name}.toml")
    cfg = RunConfig.from_toml(RUNS / "bert-large-pretraining.toml").model_dump()
    cuts = sorted({round(24 * k / 16) for k in range(1, 16)})
    cfg.update(
        name="BERT-Large over 16 IPUs",
        num_ipus=16,
        split_points=[f"encoder.layer.{c}" for c in cuts],
    )
    out["bert-large-16ipu"] = RunConfig.from_dict(cfg)
    return out


def write(directory: Path) -> int:
    import engine

    directory.mkdir(parents=True, exist_ok=True)
    for name, cfg in configs().items():
        engine.simulate_to_file(cfg, directory / f"{name}.h5", max_memory=0)
        print(f"wrote {directory / name}.h5")
    return 0


def _items(f) -> dict[str, object]:
    import h5py

    out: dict[str, object] = {}

    def visit(name: str, obj) -> None:
        out[f"/{name}"] = obj

    out["/"] = f
    f.visititems(visit)
    return {k: v for k, v in out.items() if isinstance(v, h5py.Dataset | h5py.Group)}


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def compare(a_dir: Path, b_dir: Path) -> int:
    import h5py

    problems = 0
    checked = 0
    names = sorted(p.name for p in a_dir.glob("*.h5"))
    if not names:
        print(f"no profiles in {a_dir}")
        return 2
    for name in names:
        pb = b_dir / name
        if not pb.exists():
            print(f"{name}: missing in {b_dir}")
            problems += 1
            continue
        with h5py.File(a_dir / name, "r") as fa, h5py.File(pb, "r") as fb:
            ia, ib = _items(fa), _items(fb)
            for path in sorted(set(ia) | set(ib)):
                if path not in ia or path not in ib:
                    print(f"{name}: {path} only in {'A' if path in ia else 'B'}")
                    problems += 1
                    continue
                oa, ob = ia[path], ib[path]
                for key in sorted(set(oa.attrs) | set(ob.attrs)):
                    if (path, key) in VOLATILE:
                        continue
                    if key not in oa.attrs or key not in ob.attrs:
                        print(f"{name}: {path}@{key} only in {'A' if key in oa.attrs else 'B'}")
                        problems += 1
                    elif not _same(oa.attrs[key], ob.attrs[key]):
                        print(f"{name}: {path}@{key} differs")
                        problems += 1
                if isinstance(oa, h5py.Dataset):
                    checked += 1
                    if not _same(oa[()], ob[()]):
                        print(
                            f"{name}: {path} differs ({oa.dtype}{oa.shape} vs {ob.dtype}{ob.shape})"
                        )
                        problems += 1
    print(f"{len(names)} profiles, {checked} datasets compared, {problems} differences")
    return 1 if problems else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.cmd == "write":
        return write(args.dir)
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
