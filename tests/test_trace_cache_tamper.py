"""The Execution Trace's level-of-detail cache is read as untrusted input. Each way of
making it lie (tests/hostile.py ``lod_tamperings``: another profile's pyramid under this key, a
linked key folder, an edited meta.json, scaled widths, shifted starts, overflowing counts, an
edited array) is detected on load: the pyramid is rebuilt from the profile (the trace drawn is
the fresh build's) and the cache entry replaced by a good one."""

from __future__ import annotations

import hostile
import numpy as np
import pytest

import analyser.trace.window as tw_mod
from analyser.trace.window import TraceWindow
from profiles import open_profile, write_profile
from profiles.synthetic import make_synthetic_profile


def _windows(tw):
    t0, t1 = tw.full_extent()
    out = []
    for a, b, w in ((t0, t1, 800), (t0, t0 + (t1 - t0) / 50, 400)):
        r = tw.window(1, a, b, w, "flat")
        out.append(
            {k: (v.x0.tolist(), v.lane.tolist(), v.count.tolist()) for k, v in r.rects.items()}
        )
    return out


@pytest.fixture
def cached(tmp_path, monkeypatch):
    """Two profiles whose IPU-1 pyramids are in the cache: (path A, A's windows, A's cache
    folder, B's cache folder)."""
    monkeypatch.setattr(tw_mod, "LOD_CACHE_MIN_ROWS", 1000)
    monkeypatch.setenv("IPU_ANALYSER_CACHE", str(tmp_path / "cache"))
    folders, first = [], None
    for seed, name in ((5, "a.h5"), (6, "b.h5")):
        path = tmp_path / name
        write_profile(path, make_synthetic_profile(n_steps=12_000, n_ipus=2, tiles=64, seed=seed))
        with open_profile(path) as p:
            tw = TraceWindow(p)
            w = _windows(tw)
            folders.append(tw._cache_folder(1, "flat"))
        first = first or (path, w)
    assert all((f / "meta.json").is_file() for f in folders)
    return first[0], first[1], folders[0], folders[1]


def _loaded(tw) -> bool:
    return isinstance(tw._pyramid(1, "flat").levels[0].x0, np.memmap)


def test_untouched_cache_is_memory_mapped(cached):
    path, expected, _, _ = cached
    with open_profile(path) as p:
        tw = TraceWindow(p)
        assert _loaded(tw) and _windows(tw) == expected


@pytest.mark.parametrize("name", list(hostile.lod_tamperings()))
def test_tampered_cache_is_rebuilt_not_shown(cached, name):
    path, expected, mine, other = cached
    hostile.lod_tamperings()[name](mine, other)
    with open_profile(path) as p:
        tw = TraceWindow(p)
        assert not _loaded(tw), f"the {name} cache was served"
        assert _windows(tw) == expected
    assert mine.is_dir() and not mine.is_symlink()
    assert (other / "meta.json").is_file(), "the other profile's entry was touched"
    with open_profile(path) as p:  # the entry was replaced by a good one
        tw = TraceWindow(p)
        assert _loaded(tw) and _windows(tw) == expected
