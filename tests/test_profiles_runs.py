"""profiles.runs.RunRows: an array given as runs, written by the writer block by block with the
same bytes as the dense array, and refused in one sentence when wrong."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

import profiles.writer as writer_mod
from profiles import write_profile
from profiles.errors import SchemaMismatchError
from profiles.runs import RunRows
from profiles.synthetic import make_synthetic_profile


def _runs_of(dense: np.ndarray) -> RunRows:
    """The runs of a dense 2-D array (every row padded to the same number of runs)."""
    n, w = dense.shape
    rows = []
    for r in dense:
        cut = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
        rows.append((r[cut], np.diff(np.r_[cut, w])))
    k = max(len(v) for v, _ in rows)
    vals = np.zeros((n, k + 1), dense.dtype)  # one empty run more: empty runs are allowed
    lens = np.zeros((n, k + 1), np.int64)
    for i, (v, ln) in enumerate(rows):
        vals[i, : len(v)], lens[i, : len(v)] = v, ln
        vals[i, -1] = -7  # the value of an empty run is never laid out
    return RunRows(vals, lens, w)


@pytest.fixture(scope="module")
def data() -> dict:
    return make_synthetic_profile(n_steps=2000, n_ipus=2, tiles=300, n_programs=160, seed=3)


def test_run_rows_behave_as_the_dense_array(data):
    dense = np.asarray(data["/programs"]["tile_cycles"])
    r = _runs_of(dense)
    assert r.shape == dense.shape and r.dtype == dense.dtype and len(r) == len(dense)
    assert r.size == dense.size and r.nbytes == dense.nbytes and r.ndim == 2
    np.testing.assert_array_equal(np.asarray(r), dense)
    np.testing.assert_array_equal(np.asarray(r, dtype=np.int64), dense.astype(np.int64))
    ids = np.array([5, 0, 159, 5])
    mask = dense.max(axis=1) > np.median(dense.max(axis=1))
    for key in (7, -1, slice(10, 20), slice(150, 400), slice(None, None, 3), ids, mask, []):
        np.testing.assert_array_equal(r[key], dense[key])
    np.testing.assert_array_equal(r[3, 10:20], dense[3, 10:20])
    np.testing.assert_array_equal(r[ids, 4], dense[ids, 4])
    assert r.min() == dense.min() and r.max() == dense.max()
    np.testing.assert_array_equal(r.rows(150, 170), dense[150:170])


@pytest.mark.parametrize(
    ("values", "lengths", "width", "says"),
    [
        (np.zeros((2, 3)), np.ones((2, 3), np.int64), 3, "integer values"),
        (np.zeros((2, 3), np.int32), np.ones((2, 2), np.int64), 3, "same 2-D shape"),
        (np.zeros((2, 2), np.int32), np.array([[2, 1], [4, -1]]), 3, "row 1"),
        (np.zeros((2, 2), np.int32), np.array([[2, 1], [2, 2]]), 3, "add up to 4"),
    ],
)
def test_run_rows_that_describe_no_array_are_refused(values, lengths, width, says):
    with pytest.raises(ValueError) as err:
        RunRows(values, lengths, width)
    text = str(err.value)
    assert says in text and text.endswith(".") and "\n" not in text


def test_the_writer_writes_runs_as_it_writes_the_dense_array(tmp_path, data, monkeypatch):
    # blocks of a few rows, so the layout goes through many blocks and a short last one
    monkeypatch.setattr(writer_mod, "RUN_BLOCK_BYTES", 40 * 300 * 4)
    dense = np.asarray(data["/programs"]["tile_cycles"])
    runs = dict(data, **{"/programs": {"tile_cycles": _runs_of(dense)}})
    write_profile(tmp_path / "dense.h5", data)
    write_profile(tmp_path / "runs.h5", runs)
    with h5py.File(tmp_path / "dense.h5") as a, h5py.File(tmp_path / "runs.h5") as b:
        da, db = a["programs/tile_cycles"], b["programs/tile_cycles"]
        assert (da.shape, da.dtype, da.chunks) == (db.shape, db.dtype, db.chunks)
        # the same codec (profiles.codec) and checksums for both
        assert (da._filters, da.fletcher32) == (db._filters, True)
        np.testing.assert_array_equal(db[()], dense)


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda d: d.__setitem__((4, slice(0, 9)), -3), "outside counts"),
        (lambda d: None, "has shape"),  # one tile too few for /meta tiles_per_ipu
    ],
)
def test_the_writer_refuses_bad_runs_in_one_sentence(tmp_path, data, edit, says):
    dense = np.array(data["/programs"]["tile_cycles"])
    edit(dense)
    if says == "has shape":
        dense = dense[:, 1:]
    messages = []
    for value in (dense, _runs_of(dense)):
        path = tmp_path / f"{type(value).__name__}.h5"
        with pytest.raises(SchemaMismatchError) as err:
            write_profile(path, dict(data, **{"/programs": {"tile_cycles": value}}))
        assert not path.exists()
        messages.append(str(err.value))
    assert says in messages[0] and "/programs/tile_cycles" in messages[0]
    assert messages[0] == messages[1]  # said of the array as written, row and element included
    assert "\n" not in messages[1]


def test_tile_ranges_lay_out_a_first_and_a_rest_share_clipped_to_the_tiles():
    from profiles.runs import tile_ranges

    rng = np.random.default_rng(2)
    n, w = 200, 24
    start, count = rng.integers(-5, w + 5, n), rng.integers(0, w + 5, n)
    n_first, first, rest = rng.integers(0, w, n), rng.integers(1, 2**40, n), rng.integers(1, 9, n)
    r = tile_ranges(start, count, n_first, first, rest, w)
    want = np.zeros((n, w), np.int64)
    for i in range(n):
        for t in range(max(start[i], 0), min(start[i] + count[i], w)):
            want[i, t] = first[i] if t < start[i] + n_first[i] else rest[i]
    np.testing.assert_array_equal(np.asarray(r), want.astype(np.int32))  # wrapping as astype
    assert tile_ranges([3], [-1], [0], [1], [1], w) is None  # a negative count: no runs
    assert tile_ranges([3], [4], [-2], [1], [1], w) is None
