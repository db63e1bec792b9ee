"""The writer's own checks, kept cheap: string columns checked with one join, the disk asked for
its room once a profile unless the room may run short; refusals still one sentence, nothing
written."""

from __future__ import annotations

import numpy as np
import pytest

from profiles import atomic, write_profile
from profiles.errors import ProfileWriteError, SchemaMismatchError
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="module")
def data() -> dict:
    return make_synthetic_profile(n_steps=4000, n_ipus=2, tiles=64, n_programs=40, seed=11)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (b"bytes", "should hold strings, found bytes b'bytes'"),
        (7, "should hold strings, found int 7"),
        ("a\x00b", "contains a NUL character"),
        ("\ud800", "not valid Unicode"),
    ],
)
def test_a_bad_string_is_refused_in_one_sentence(tmp_path, data, value, says):
    names = np.array(data["/graph/operations"]["name"], dtype=object)
    names[3] = value
    bad = dict(data, **{"/graph/operations": dict(data["/graph/operations"], name=names)})
    with pytest.raises(SchemaMismatchError) as err:
        write_profile(tmp_path / "p.h5", bad)
    text = str(err.value)
    assert says in text and "/graph/operations/name" in text and "\n" not in text
    assert not (tmp_path / "p.h5").exists()


def test_the_disk_is_asked_once_when_it_has_room(tmp_path, data, monkeypatch):
    looks = []
    monkeypatch.setattr(atomic, "free_bytes", lambda folder: looks.append(folder) or 2**40)
    write_profile(tmp_path / "p.h5", data)
    assert len(looks) == 1


def test_a_disk_that_runs_short_mid_write_ends_it_in_one_sentence(tmp_path, data, monkeypatch):
    # room for the first datasets only: the writer asks again when its estimate runs short
    looks = []

    def free(folder):
        looks.append(folder)
        return atomic.SPACE_MARGIN + 100_000 if len(looks) < 3 else 1000

    monkeypatch.setattr(atomic, "free_bytes", free)
    (tmp_path / "p.h5").write_bytes(b"previous")
    with pytest.raises(ProfileWriteError) as err:
        write_profile(tmp_path / "p.h5", data)
    assert "the disk is full" in str(err.value) and "\n" not in str(err.value)
    assert len(looks) >= 3
    assert (tmp_path / "p.h5").read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["p.h5"]
