"""The profile's codec (profiles.codec): new profiles compress their chunked datasets with
Blosc2-LZ4 (format 1.4); profiles written with deflate (format 1.3 and older) read the same."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from analyser.cli import main
from profiles import codec, open_profile


def _filters(ds: h5py.Dataset) -> set[str]:
    return set(ds._filters)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The same profile written with the codec of format 1.4 and with deflate (as 1.3 wrote
    it): 60,000 steps and 300 programs x 1,472 tiles, so its tables are chunked."""
    from profiles import write_profile
    from profiles.synthetic import make_synthetic_profile

    d = tmp_path_factory.mktemp("codec")
    new, old = d / "new.h5", d / "old.h5"
    data = make_synthetic_profile(n_steps=60_000, n_ipus=2, tiles=1472, n_programs=300, seed=3)
    write_profile(new, data)
    deflate = dict(compression="gzip", compression_opts=1, shuffle=True, fletcher32=True)
    mp = pytest.MonkeyPatch()
    mp.setattr(codec, "filters", lambda: dict(deflate))
    try:
        write_profile(
            old,
            make_synthetic_profile(n_steps=60_000, n_ipus=2, tiles=1472, n_programs=300, seed=3),
        )
    finally:
        mp.undo()
    return new, old


def test_new_profiles_use_blosc2_with_checksums(pair):
    new, _ = pair
    with h5py.File(new, "r") as f:
        steps = f["execution/steps/start"]
        assert str(codec.BLOSC2_FILTER_ID) in _filters(steps)
        assert steps.fletcher32
        assert str(codec.BLOSC2_FILTER_ID) in _filters(f["programs/tile_cycles"])


def _datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda k, v: out.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None
        )
    return out


def test_both_codecs_hold_the_same_values(pair):
    new, old = pair
    a, b = _datasets(new), _datasets(old)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert len(a["execution/steps/start"]) == 60_000
    with h5py.File(old, "r") as f:
        assert "gzip" in _filters(f["execution/steps/start"])
    for p in pair:
        with open_profile(p) as prof:
            assert prof.n_steps == len(a["execution/steps/start"])
        assert main(["validate", str(p)]) == 0


def test_a_damaged_blosc2_chunk_is_found(pair, tmp_path):
    """Fletcher-32 stays on: a flipped byte in a compressed chunk is a validation failure,
    not wrong figures."""
    import shutil

    new, _ = pair
    bad = tmp_path / "bad.h5"
    shutil.copy(new, bad)
    with h5py.File(bad, "r") as f:
        ds = f["execution/steps/cycles"]
        offset = ds.id.get_chunk_info(0).byte_offset
        size = ds.id.get_chunk_info(0).size
    with open(bad, "r+b") as fh:
        fh.seek(offset + size // 2)
        byte = fh.read(1)
        fh.seek(offset + size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    assert main(["validate", str(bad)]) != 0
