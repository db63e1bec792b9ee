"""How a profile's large datasets are compressed.

From format 1.4, every chunked dataset (the step table's columns, per-tile cycles, per-tile
liveness rows...) is compressed with Blosc2 using LZ4 and its byte shuffle (HDF5 filter 32026,
registered by `hdf5plugin <https://pypi.org/project/hdf5plugin/>`_), with Fletcher-32
checksums so that a damaged chunk is found. Files of format 1.3 and older used deflate (level 1)
after HDF5's shuffle filter; they read as before (deflate is built into every HDF5).

Why Blosc2-LZ4 (benchmarks/bench_codec.py on bench_10m.py's 11,109,668-step BERT-Large
profile, 12 step columns of 65,536-row chunks; docs/performance.md "The read path"): reading
the columns takes 0.41-0.43 s of CPU against 1.41-1.57 s with deflate (3.3-3.7x faster),
writing 0.66-0.78 against 2.05-2.68 s, for 20.7 MiB against 20.0 MiB (1.04x the size).
Blosc (version 1) with LZ4 read as fast in one run and 2x slower in another, at 1.08x the
size; LZF (h5py's own filter) read slower than deflate and was 1.7x larger; Blosc-Zstd level 1
was 1.3x larger for a 1.1x faster read.

Reading a profile outside Python needs the Blosc2 filter plugin: with h5py, ``import hdf5plugin``
first; with the HDF5 command-line tools (``h5dump``, ``h5ls -d``), point ``HDF5_PLUGIN_PATH`` at
``python -c "import hdf5plugin; print(hdf5plugin.PLUGIN_PATH)"``.
"""

from __future__ import annotations

from typing import Any

import hdf5plugin  # registers its filters with the HDF5 library h5py has loaded

#: HDF5's registered id of the Blosc2 filter.
BLOSC2_FILTER_ID = 32026
#: Blosc2's compression level (LZ4: 5 is Blosc's default; higher levels change LZ4 little).
BLOSC2_LEVEL = 5


def filters() -> dict[str, Any]:
    """The ``create_dataset`` keywords of a chunked dataset: Blosc2-LZ4 with byte shuffle and
    Fletcher-32 checksums."""
    blosc = hdf5plugin.Blosc2(cname="lz4", clevel=BLOSC2_LEVEL, filters=hdf5plugin.Blosc2.SHUFFLE)
    return {**blosc, "fletcher32": True}


__all__ = ["BLOSC2_FILTER_ID", "BLOSC2_LEVEL", "filters"]
