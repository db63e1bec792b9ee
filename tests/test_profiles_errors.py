"""Bad input: every way a profile can fail to open or write gives one clear sentence."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from profiles import ProfileWriter, open_profile, schema, write_profile
from profiles.errors import ProfileError, ProfileWriteError, SchemaMismatchError, UserFacingError
from profiles.synthetic import make_synthetic_profile


@pytest.fixture(scope="module")
def data() -> dict:
    return make_synthetic_profile(n_steps=400, n_ipus=2, tiles=16, n_programs=40, seed=5)


@pytest.fixture(scope="module")
def good(tmp_path_factory, data) -> Path:
    path = tmp_path_factory.mktemp("good") / "good.h5"
    write_profile(path, data)
    return path


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def _one_sentence(exc: BaseException, path: Path | str) -> str:
    msg = str(exc)
    assert str(path) in msg, msg
    assert "\n" not in msg and "Traceback" not in msg
    assert msg.endswith(".")
    return msg


def test_missing_file(tmp_path):
    with pytest.raises(ProfileError) as e:
        open_profile(tmp_path / "nope.h5")
    assert "does not exist" in _one_sentence(e.value, tmp_path / "nope.h5")


def test_directory(tmp_path):
    with pytest.raises(ProfileError) as e:
        open_profile(tmp_path)
    assert "is a folder" in _one_sentence(e.value, tmp_path)


def test_empty_file(tmp_path):
    p = tmp_path / "empty.h5"
    p.touch()
    with pytest.raises(ProfileError) as e:
        open_profile(p)
    assert "is empty" in _one_sentence(e.value, p)


def test_not_hdf5(tmp_path):
    p = tmp_path / "notes.h5"
    p.write_text("this is not a profile\n" * 50)
    with pytest.raises(ProfileError) as e:
        open_profile(p)
    assert "not an HDF5 file" in _one_sentence(e.value, p)


@pytest.mark.parametrize("fraction", [0.02, 0.5, 0.95])
def test_truncated(tmp_path, good, fraction):
    raw = good.read_bytes()
    p = tmp_path / "cut.h5"
    p.write_bytes(raw[: int(len(raw) * fraction)])
    with pytest.raises(ProfileError) as e:
        open_profile(p)
    assert "truncated" in _one_sentence(e.value, p)


def test_unreadable(tmp_path, good, monkeypatch):
    p = _copy(good, tmp_path / "locked.h5")
    os.chmod(p, 0)
    try:
        try:
            with open(p, "rb"):
                readable = True  # running as root: permissions do not apply
        except PermissionError:
            readable = False
        if readable:

            def denied(*args, **kwargs):
                raise PermissionError(13, "Permission denied")

            monkeypatch.setattr(os, "open", denied)  # profiles.inputs.open_regular opens so
        with pytest.raises(ProfileError) as e:
            open_profile(p)
        assert "permission denied" in _one_sentence(e.value, p)
    finally:
        os.chmod(p, 0o644)


def test_not_an_ipu_profile(tmp_path):
    p = tmp_path / "other.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.arange(3)
    with pytest.raises(ProfileError) as e:
        open_profile(p)
    assert "not an IPU profile" in _one_sentence(e.value, p)


def test_newer_major_refused_with_version_message(tmp_path, good):
    p = _copy(good, tmp_path / "v2.h5")
    with h5py.File(p, "a") as f:
        f.attrs["format_version"] = "2.0"
    with pytest.raises(ProfileError) as e:
        open_profile(p)
    msg = _one_sentence(e.value, p)
    assert "2.0" in msg and f"this build reads profile format {schema.FORMAT_VERSION[0]}.x" in msg


def test_older_and_newer_minor_open(tmp_path, good, monkeypatch):
    # a file written at this build's version opens in a build that reads a later minor ...
    written = schema.FORMAT_VERSION
    monkeypatch.setattr(schema, "FORMAT_VERSION", (1, written[1] + 3))
    with open_profile(good) as p:
        assert p.version == written
    monkeypatch.undo()
    # ... and a file claiming a newer minor opens in this build (added fields are optional)
    p2 = _copy(good, tmp_path / "v1_9.h5")
    with h5py.File(p2, "a") as f:
        f.attrs["format_version"] = "1.99"
    with open_profile(p2) as p:
        assert p.format_version == "1.99"


def test_deleted_dataset(tmp_path, good):
    p = _copy(good, tmp_path / "deleted.h5")
    with h5py.File(p, "a") as f:
        del f["graph/operations/flops"]
    with open_profile(p) as prof:
        with pytest.raises(ProfileError) as e:
            prof.table("/graph/operations", columns=["flops"])
        assert "/graph/operations/flops is missing" in _one_sentence(e.value, p)
        # the rest of the table is still readable
        assert "flops" not in prof.table("/graph/operations").columns


def test_mistyped_dataset(tmp_path, good):
    p = _copy(good, tmp_path / "mistyped.h5")
    with h5py.File(p, "a") as f:
        del f["memory/total"]
        f["memory/total"] = np.zeros((2, 16), dtype="S4")
    with open_profile(p) as prof, pytest.raises(ProfileError) as e:
        prof.array("/memory/total")
    assert "expected int64" in _one_sentence(e.value, p)


def test_absurd_sizes_refused_without_allocation(tmp_path, good):
    p = _copy(good, tmp_path / "absurd.h5")
    with h5py.File(p, "a") as f:
        f["meta"].attrs["num_ipus"] = 10**15
    with pytest.raises(ProfileError) as e:
        open_profile(p)
    assert "absurd" in _one_sentence(e.value, p)
    p2 = _copy(good, tmp_path / "absurd_rows.h5")
    with h5py.File(p2, "a") as f:
        del f["graph/operations/flops"]
        f["graph/operations"].create_dataset(
            "flops", shape=(10**15,), dtype=np.int64, chunks=(4096,)
        )
    # refused on open now (profiles.semantic: the declared size is not stored), not at the read
    with pytest.raises(ProfileError) as e, open_profile(p2) as prof:
        prof.table("/graph/operations")
    assert "size is not real" in _one_sentence(e.value, p2)


def test_errors_are_user_facing():
    assert issubclass(ProfileError, UserFacingError)
    assert issubclass(SchemaMismatchError, ProfileWriteError)
    assert issubclass(ProfileWriteError, UserFacingError)


# -- writing -------------------------------------------------------------------------------------


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _leftovers(folder: Path) -> list[str]:
    return sorted(x.name for x in folder.iterdir() if x.name.endswith(".tmp"))


def test_interrupted_write_keeps_previous_file(tmp_path, data, monkeypatch):
    path = tmp_path / "run.h5"
    write_profile(path, data)
    before = _digest(path)
    calls = {"n": 0}
    real = ProfileWriter._create_dataset

    def interrupted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 12:  # part-way through the datasets
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ProfileWriter, "_create_dataset", interrupted)
    changed = make_synthetic_profile(n_steps=400, n_ipus=2, tiles=16, n_programs=40, seed=6)
    with pytest.raises(KeyboardInterrupt):
        write_profile(path, changed)
    assert calls["n"] == 12
    assert _digest(path) == before
    assert _leftovers(tmp_path) == []
    with open_profile(path) as p:
        assert p.n_steps == 400


def test_exception_inside_writer_context_leaves_nothing(tmp_path, data):
    path = tmp_path / "partial.h5"
    with pytest.raises(RuntimeError), ProfileWriter(path) as w:
        w.write_group("/meta", data["/meta"])
        raise RuntimeError("producer crashed")
    assert not path.exists() and _leftovers(tmp_path) == []


def test_schema_mismatch_detected_before_writing(tmp_path, data):
    path = tmp_path / "keep.h5"
    path.write_bytes(b"user data")
    bad = {k: dict(v) for k, v in data.items()}
    bad["/memory"]["total"] = bad["/memory"]["total"][:, :3]
    with pytest.raises(SchemaMismatchError, match=r"/memory/total: has shape \(2, 3\), expected"):
        write_profile(path, bad)
    assert path.read_bytes() == b"user data" and _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d["/graph/operations"].pop("flops"), r"/graph/operations/flops: required"),
        (lambda d: d["/meta"].pop("num_ipus"), r"/meta@num_ipus: required attribute"),
        (lambda d: d.pop("/memory"), r"required group /memory is missing"),
        (lambda d: d["/graph/operations"].update(flops=[1.5] * 2), r"rows but the other"),
        (
            lambda d: d["/graph/variables"].update(bytes=d["/graph/variables"]["bytes"] * 0.5),
            "float64",
        ),
        (
            lambda d: d["/graph/variables"].update(
                ipu=d["/graph/variables"]["ipu"].astype(np.int64) + 40000
            ),
            "do not fit int16",
        ),
        (lambda d: d["/meta"].update(status="maybe"), "status is 'maybe'"),
        (lambda d: d.update({"/extra": {"x": [1]}}), "unknown group '/extra'"),
        (lambda d: d["/memory"].update(colour=[1]), "unknown field 'colour'"),
        (lambda d: d.pop("/execution/steps"), "status is 'ok', so the execution is required"),
    ],
)
def test_writer_names_group_and_field(tmp_path, data, edit, match):
    bad = {k: dict(v) for k, v in data.items()}
    edit(bad)
    with pytest.raises(SchemaMismatchError, match=match):
        write_profile(tmp_path / "bad.h5", bad)
    assert list(tmp_path.iterdir()) == []


def test_overwrite_refused_when_off(tmp_path, data):
    path = tmp_path / "mine.h5"
    path.write_bytes(b"precious")
    with pytest.raises(ProfileWriteError, match="refusing to overwrite"):
        write_profile(path, data, overwrite=False)
    assert path.read_bytes() == b"precious"
    # refused even when the file appears while writing (checked again at the final rename)
    late = tmp_path / "late.h5"
    w = ProfileWriter(late, overwrite=False)
    for gp, fields in data.items():
        w.write_group(gp, fields)
    late.write_bytes(b"appeared")
    with pytest.raises(ProfileWriteError, match="refusing to overwrite"):
        w.close()
    assert late.read_bytes() == b"appeared" and _leftovers(tmp_path) == []


def test_overwrite_replaces_atomically(tmp_path, data):
    path = tmp_path / "run.h5"
    path.write_bytes(b"old")
    write_profile(path, data)
    with open_profile(path) as p:
        assert p.status == "ok"


def test_write_target_problems(tmp_path, data):
    with pytest.raises(ProfileWriteError, match="does not exist"):
        write_profile(tmp_path / "no" / "such" / "x.h5", data)
    with pytest.raises(ProfileWriteError, match="is a folder"):
        write_profile(tmp_path, data)


def test_oom_profile_has_no_execution(tmp_path):
    d = make_synthetic_profile(n_steps=10, n_ipus=2, tiles=16, n_programs=30, oom=True)
    path = tmp_path / "oom.h5"
    write_profile(path, d)
    with open_profile(path) as p:
        assert p.is_oom and not p.has_execution and p.n_steps == 0
        assert p.summary()["oom_tiles"] > 0
        with pytest.raises(ProfileError, match="has no execution"):
            p.steps()


def test_given_ipu_offsets_must_match_steps(tmp_path, data):
    bad = {k: dict(v) for k, v in data.items()}
    bad["/execution"]["ipu_offsets"] = np.array([0, 100, 400], dtype=np.int64)
    with pytest.raises(SchemaMismatchError, match="does not match the steps' ipu column"):
        write_profile(tmp_path / "off.h5", bad)
    assert list(tmp_path.iterdir()) == []


def test_json_attribute_must_serialise(tmp_path, data):
    bad = {k: dict(v) for k, v in data.items()}
    bad["/meta"]["run_config"] = {"model": object()}
    with pytest.raises(SchemaMismatchError, match="/meta@run_config"):
        write_profile(tmp_path / "json.h5", bad)
    ok = {k: dict(v) for k, v in data.items()}
    ok["/meta"]["run_config"] = {"shape": (3, 64, 64), "n": np.int64(4), "p": tmp_path}
    write_profile(tmp_path / "json_ok.h5", ok)
    with open_profile(tmp_path / "json_ok.h5") as p:
        assert p.run_config == {"shape": [3, 64, 64], "n": 4, "p": str(tmp_path)}


def test_shape_not_matching_metadata_is_refused_on_read(tmp_path, good):
    p = _copy(good, tmp_path / "shape.h5")
    with h5py.File(p, "a") as f:
        del f["memory/gaps"]
        f["memory/gaps"] = np.zeros((2, 5), dtype=np.int64)
    with open_profile(p) as prof, pytest.raises(ProfileError) as e:
        prof.array("/memory/gaps")
    assert "expected (2, 16)" in _one_sentence(e.value, p)


def test_damaged_bytes_never_crash(tmp_path):
    """Overwrite random byte runs: opening, reading and validating either work or say so."""
    from profiles import validate

    d = make_synthetic_profile(n_steps=12_000, n_ipus=2, tiles=32, n_programs=40, seed=2)
    base = tmp_path / "base.h5"
    write_profile(base, d)
    raw = base.read_bytes()
    rng = np.random.default_rng(0)
    outcomes = set()
    for trial in range(25):
        b = bytearray(raw)
        pos = int(rng.integers(0, len(b) - 64))
        n = int(rng.integers(1, 64))
        b[pos : pos + n] = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        path = tmp_path / f"damaged{trial}.h5"
        path.write_bytes(bytes(b))
        problems = validate(path)  # never raises
        outcomes.add("problems" if problems else "valid")
        try:
            with open_profile(path) as p:
                p.summary()
                for t in p.sizes:
                    p.table(t)
                p.array("/programs/tile_cycles")
                p.step_window(0, 0, 10**6)
            outcomes.add("read")
        except ProfileError as exc:
            assert str(path) in str(exc) and "\n" not in str(exc)
            outcomes.add("error")
        path.unlink()
    assert {"problems", "error"} <= outcomes


def test_written_file_has_ordinary_permissions(tmp_path, data):
    path = tmp_path / "perm.h5"
    old = os.umask(0o022)
    try:
        write_profile(path, data)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(("bad", "words"), [("a\x00b", "NUL"), ("\ud800", "not valid Unicode")])
def test_strings_that_hdf5_would_mangle_are_refused(tmp_path, data, bad, words):
    d = {k: dict(v) for k, v in data.items()}
    names = list(d["/graph/operations"]["name"])
    names[1] = bad
    d["/graph/operations"]["name"] = names
    with pytest.raises(
        SchemaMismatchError, match=rf"/graph/operations/name: string at row 1 .*{words}"
    ):
        write_profile(tmp_path / "s.h5", d)


def test_profile_and_plain_h5py_can_open_the_same_file(good):
    with open_profile(good) as p, h5py.File(good, "r") as f:
        assert f.attrs["format"] == "ipu-profile" and p.n_steps == 400
    from profiles import validate

    with open_profile(good):
        assert validate(good) == []


def test_missing_variables_column_is_one_sentence_in_summary(tmp_path, good, capsys):
    """A variables table without a column the analysis reads (``live_end``) gives the reader's
    sentence naming it and exit 2 in ``analyse summary`` (it was an internal KeyError)."""
    from analyser.cli import main

    bad = _copy(good, tmp_path / "no-live-end.h5")
    with h5py.File(bad, "r+") as f:
        del f["/graph/variables/live_end"]
    assert main(["summary", "--json", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "/graph/variables/live_end" in err and "Traceback" not in err
    # the text summary reads no liveness: it still works, and says nothing of a traceback
    assert main(["summary", str(bad)]) in (0, 2)
    assert "Traceback" not in capsys.readouterr().err
    assert main(["summary", "--json", str(good)]) == 0
