"""Per-tile liveness stored as changes (format 1.1): the reader gives the per-step per-tile values
of the dense form, on the walkthrough profiles and a 16-IPU pipeline; format 1.0 files (dense
/liveness/per_tile) still open and read the same."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest

from profiles import open_profile, schema, validate


def dense_from_variables(p, ipu: int) -> np.ndarray:
    """Not-always-live bytes of one IPU per liveness step and tile, straight from
    /graph/variables: every variable adds its bytes (spread evenly over its tile interval,
    remainder bytes one each on the first tiles) from live_start to live_end inclusive
    (a difference over steps, summed down the steps)."""
    v = p.table("/graph/variables")
    n_steps = p.n_rows("/liveness/steps")
    diff = np.zeros((n_steps + 1, p.tiles_per_ipu), np.int64)
    sel = v[(v["ipu"] == ipu) & ~v["always_live"] & (v["bytes"] > 0)]
    for r in sel.itertuples():
        n = max(int(r.tile_count), 1)
        base, rem = divmod(int(r.bytes), n)
        t0 = int(r.tile_start)
        for s, sign in ((int(r.live_start), 1), (int(r.live_end) + 1, -1)):
            diff[s, t0 : t0 + int(r.tile_count)] += sign * base
            diff[s, t0 : t0 + rem] += sign
    return np.minimum(np.cumsum(diff, axis=0)[:-1], np.iinfo(np.int32).max)


@pytest.fixture(scope="module")
def pipeline16(tmp_path_factory):
    """BERT-Large pipelined over 16 IPUs (micro-batch 1, GA 32: small but every stage stashes)."""
    import engine
    from engine.config import RunConfig

    cuts = sorted({round(24 * k / 16) for k in range(1, 16)})
    cfg = RunConfig.from_dict(
        dict(
            model="bert-large",
            seq_length=128,
            num_ipus=16,
            strategy="pipelined",
            split_points=[f"encoder.layer.{c}" for c in cuts],
            micro_batch_size=1,
            gradient_accumulation=32,
            precision="16.16",
        )
    )
    path = tmp_path_factory.mktemp("lv16") / "bert16.h5"
    engine.simulate_to_file(cfg, path)
    return path


def _check(path) -> None:
    with open_profile(path) as p:
        assert p.version == schema.FORMAT_VERSION
        nal = p.array("/liveness/not_always_live")
        peak = p.array("/memory/by_liveness")[:, :, 1]
        off = p.array("/liveness/per_tile_ipu_offsets")
        step = p.array("/liveness/per_tile_step")
        rows = p.array("/liveness/per_tile_rows")
        n_steps = p.n_rows("/liveness/steps")
        # stored as changes: far fewer rows than IPUs x steps, each differing from the one before
        assert rows.shape[0] < 0.5 * p.num_ipus * n_steps
        for i in range(p.num_ipus):
            dense = p.liveness_per_tile(ipu=i)
            np.testing.assert_array_equal(dense, dense_from_variables(p, i))
            np.testing.assert_array_equal(dense.sum(axis=1, dtype=np.int64), nal[i])
            np.testing.assert_array_equal(dense.max(axis=0), peak[i])
            s, r = step[off[i] : off[i + 1]], rows[off[i] : off[i + 1]]
            assert s[0] == 0 and (np.diff(s) > 0).all()
            assert (r[1:] != r[:-1]).any(axis=1).all()
        # all IPUs, a step range or a list of steps
        picks = np.array([0, 7, 3, n_steps - 1])
        every = p.liveness_per_tile(steps=picks)
        assert every.shape == (p.num_ipus, 4, p.tiles_per_ipu)
        np.testing.assert_array_equal(every[1], p.liveness_per_tile(1)[picks])
        np.testing.assert_array_equal(
            p.liveness_per_tile(1, slice(5, 40)), dense_from_variables(p, 1)[5:40]
        )


def test_walkthrough_profiles_read_back_dense_values(walkthrough_profiles):
    for path in walkthrough_profiles.values():
        _check(path)


def test_16_ipu_pipeline_reads_back_dense_values(pipeline16):
    _check(pipeline16)
    assert validate(pipeline16) == []


def test_format_1_0_dense_profile_still_opens(walkthrough_profiles, tmp_path):
    """A file in the 1.0 layout (dense /liveness/per_tile, no changes) opens, validates and reads
    the same values."""
    old = tmp_path / "v1_0.h5"
    shutil.copy(walkthrough_profiles["4-device-iterations"], old)
    with open_profile(old) as p:
        dense = p.liveness_per_tile()
    with h5py.File(old, "a") as f:
        for name in ("per_tile_ipu_offsets", "per_tile_step", "per_tile_rows"):
            del f["liveness"][name]
        f["liveness"].create_dataset("per_tile", data=dense, compression="lzf", shuffle=True)
        f.attrs["format_version"] = "1.0"
    assert validate(old) == []
    with open_profile(old) as p:
        assert p.version == (1, 0)
        np.testing.assert_array_equal(p.liveness_per_tile(), dense)
        np.testing.assert_array_equal(p.liveness_per_tile(1, slice(3, 9)), dense[1, 3:9])


def test_broken_changes_are_reported(pipeline16, tmp_path):
    bad = tmp_path / "bad.h5"
    shutil.copy(pipeline16, bad)
    with h5py.File(bad, "a") as f:
        step = f["liveness/per_tile_step"]
        step[1] = step[0]  # not increasing
    problems = validate(bad)
    assert any("per_tile_step" in pr.path and "increase" in pr.message for pr in problems)
    from profiles.errors import ProfileError

    with open_profile(bad) as p, pytest.raises(ProfileError, match="per_tile_step"):
        p.liveness_per_tile()


def test_the_curve_summed_from_the_lifetimes_is_the_profiles_own(walkthrough_profiles):
    """What a profile without /liveness/not_always_live is shown (analyser.core.liveness
    ``curve_from_lifetimes``) is, on the engine's profiles, the stored curve to the byte."""
    from analyser.core import Analysis
    from analyser.core.liveness import curve_from_lifetimes

    for path in walkthrough_profiles.values():
        with Analysis.open(path) as a:
            lv = a.liveness
            rebuilt = curve_from_lifetimes(a.variables, *lv.not_always_live.shape)
            np.testing.assert_array_equal(rebuilt, lv.not_always_live)
            assert not lv.rebuilt
