"""The read path's codec: scanning and writing the step table's columns with each candidate
filter, in one run (prints figures; asserts nothing).

    python benchmarks/bench_codec.py [--profile P.h5] [--steps 4000000] [--repeats 3]

The columns come from ``--profile`` (e.g. bench_10m.py's BERT-Large profile, kept with its
``--keep``) or from a synthetic profile of ``--steps`` steps. Each candidate writes the 12
columns in the profile's 65,536-row chunks, then the columns are read whole ``--repeats`` times
(best CPU time). Ratios are against deflate level 1 after shuffle, the codec of formats up to
1.3; the writer's codec from 1.4 is Blosc2-LZ4 with byte shuffle (profiles/codec.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _candidates() -> dict[str, dict]:
    import hdf5plugin

    from profiles import codec

    return {
        "deflate 1 + shuffle + fletcher32 (format <= 1.3)": dict(
            compression="gzip", compression_opts=1, shuffle=True, fletcher32=True
        ),
        "blosc2-lz4 + shuffle + fletcher32 (format 1.4)": codec.filters(),
        "blosc-lz4 + shuffle + fletcher32": dict(
            **hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE),
            fletcher32=True,
        ),
        "blosc-zstd 1 + shuffle + fletcher32": dict(
            **hdf5plugin.Blosc(cname="zstd", clevel=1, shuffle=hdf5plugin.Blosc.SHUFFLE),
            fletcher32=True,
        ),
        "lzf + shuffle + fletcher32": dict(compression="lzf", shuffle=True, fletcher32=True),
        "none + fletcher32": dict(fletcher32=True),
    }


def main() -> int:
    import h5py

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", type=Path)
    ap.add_argument("--steps", type=int, default=4_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-codec-"))
    src = args.profile
    if src is None:
        from profiles.synthetic import write_synthetic_profile

        src = tmp / "synthetic.h5"
        write_synthetic_profile(src, n_steps=args.steps)
    with h5py.File(src, "r") as f:
        g = f["execution/steps"]
        cols = {k: g[k][:] for k in g}
        chunk = g["start"].chunks
    n = len(next(iter(cols.values())))
    print(
        f"{n:,} steps x {len(cols)} columns, chunks of {chunk[0]:,} rows; load {os.getloadavg()[0]:.1f}"
    )
    base = None
    out = tmp / "codec.h5"
    for name, kw in _candidates().items():
        t = time.process_time()
        with h5py.File(out, "w") as f:
            for k, v in cols.items():
                f.create_dataset(k, data=v, chunks=chunk, **kw)
        write = time.process_time() - t
        size = out.stat().st_size
        scan = float("inf")
        for _ in range(args.repeats):
            t = time.process_time()
            with h5py.File(out, "r") as f:
                for k in cols:
                    f[k][:]
            scan = min(scan, time.process_time() - t)
        out.unlink()
        if base is None:
            base = (write, size, scan)
        print(
            f"{name:50s} write {write:6.2f} s ({write / base[0]:4.2f}x)  size "
            f"{size / 2**20:8.1f} MiB ({size / base[1]:4.2f}x)  scan {scan:5.2f} s CPU "
            f"({base[2] / scan:4.2f}x faster)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
