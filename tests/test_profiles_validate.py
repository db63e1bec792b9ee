"""profiles.validate: typed problems, never stopping at the first; `analyse validate` exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from analyser.cli import main
from profiles import validate, write_profile
from profiles.problems import (
    AbsurdSize,
    DanglingReference,
    Inconsistent,
    MissingAttribute,
    MissingDataset,
    MissingGroup,
    OutOfRange,
    UnknownVersion,
    Unreadable,
    WrongDtype,
    WrongShape,
)
from profiles.synthetic import make_synthetic_profile
from profiles.validation import is_fatal


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    data = make_synthetic_profile(n_steps=600, n_ipus=2, tiles=16, n_programs=40, seed=11)
    path = tmp_path_factory.mktemp("valid") / "good.h5"
    write_profile(path, data)
    return path


def _edited(good: Path, tmp_path: Path, name: str, edit) -> Path:
    p = tmp_path / name
    shutil.copyfile(good, p)
    with h5py.File(p, "a") as f:
        edit(f)
    return p


def _kinds(problems) -> set[type]:
    return {type(p) for p in problems}


def test_valid_file_has_no_problems(good):
    assert validate(good) == []


def test_many_problems_reported_together(good, tmp_path):
    def edit(f):
        del f["graph/operations/flops"]  # missing dataset
        del f["liveness/steps"]  # missing group
        del f["meta"].attrs["clock_hz"]  # missing attribute
        v = f["graph/variables/ipu"][()]
        del f["graph/variables/ipu"]
        f["graph/variables/ipu"] = v.astype(np.float64)  # mistyped
        del f["memory/gaps"]
        f["memory/gaps"] = np.zeros((2, 5), dtype=np.int64)  # wrong shape
        f["programs/nodes/type"][0] = 77  # enum out of range
        f["programs/nodes/parent"][4] = 4000  # dangling reference
        f["graph/compute_sets/vertex_type"][0] = -5  # dangling (below -1)

    problems = validate(_edited(good, tmp_path, "many.h5", edit))
    by_path = {p.path: p for p in problems}
    assert isinstance(by_path["/graph/operations/flops"], MissingDataset)
    assert isinstance(by_path["/liveness/steps"], MissingGroup)
    assert isinstance(by_path["/meta@clock_hz"], MissingAttribute)
    assert isinstance(by_path["/graph/variables/ipu"], WrongDtype)
    assert isinstance(by_path["/memory/gaps"], WrongShape)
    assert isinstance(by_path["/programs/nodes/type"], OutOfRange)
    assert "first at row 0" in by_path["/programs/nodes/type"].message
    assert isinstance(by_path["/programs/nodes/parent"], DanglingReference)
    assert isinstance(by_path["/graph/compute_sets/vertex_type"], DanglingReference)
    for p in problems:
        assert str(p).startswith(p.path + ": ") and p.message.endswith(".")
        assert not is_fatal(p)


def test_steps_consistency(good, tmp_path):
    def edit(f):
        s = f["execution/steps/start"]
        s[5], s[6] = s[6], s[5] + 10**6  # unsorted within IPU 0
        f["execution/steps/ipu"][1] = 1  # a row of IPU 0's range holding IPU 1
        f["execution/max_step_cycles"][...] = 0

    problems = validate(_edited(good, tmp_path, "steps.h5", edit))
    msgs = {p.path: p for p in problems}
    assert isinstance(msgs["/execution/steps/start"], Inconsistent)
    assert isinstance(msgs["/execution/steps/ipu"], Inconsistent)
    assert isinstance(msgs["/execution/max_step_cycles"], Inconsistent)

    def offsets(f):
        f["execution/ipu_offsets"][-1] = 5

    problems = validate(_edited(good, tmp_path, "offsets.h5", offsets))
    assert [type(p) for p in problems] == [Inconsistent]
    assert "does not split the 600 steps" in problems[0].message


def test_memory_and_status_consistency(good, tmp_path):
    def edit(f):
        f["memory/by_category"][0, 3, 0] += 1
        f["memory/total"][1, 2] = 10**7  # way over SRAM while status is 'ok'

    problems = validate(_edited(good, tmp_path, "mem.h5", edit))
    paths = {p.path for p in problems}
    assert {"/memory/by_category", "/meta@status", "/memory/oom_tiles"} <= paths


def test_absurd_sizes_without_memory_blow_up(good, tmp_path):
    def edit(f):
        del f["execution/steps/start"]
        f["execution/steps"].create_dataset(
            "start", shape=(10**15,), dtype=np.int64, chunks=(65536,)
        )
        f["meta"].attrs["tiles_per_ipu"] = 10**12

    problems = validate(_edited(good, tmp_path, "absurd.h5", edit))
    kinds = _kinds(problems)
    assert AbsurdSize in kinds and WrongShape in kinds
    assert any("10000000000000" in p.message for p in problems)


@pytest.mark.parametrize(
    ("make", "kind", "words"),
    [
        (lambda p: p.write_bytes(b""), Unreadable, "is empty"),
        (lambda p: p.write_bytes(b"GIF89a" + bytes(500)), Unreadable, "not an HDF5 file"),
        (lambda p: h5py.File(p, "w").close(), UnknownVersion, "not an IPU profile"),
    ],
)
def test_unopenable_files(tmp_path, make, kind, words):
    p = tmp_path / "x.h5"
    make(p)
    problems = validate(p)
    assert len(problems) == 1 and isinstance(problems[0], kind) and is_fatal(problems[0])
    assert words in problems[0].message


def test_unknown_version(good, tmp_path):
    def edit(f):
        f.attrs["format_version"] = "3.1"

    (problem,) = validate(_edited(good, tmp_path, "v3.h5", edit))
    assert (
        isinstance(problem, UnknownVersion)
        and "this build reads profile format 1.x" in problem.message
    )


def test_truncated_is_unreadable(good, tmp_path):
    p = tmp_path / "cut.h5"
    p.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    (problem,) = validate(p)
    assert isinstance(problem, Unreadable) and "truncated" in problem.message


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_valid(good, capsys):
    assert main(["validate", str(good)]) == 0
    assert f"{good}: valid" in capsys.readouterr().out


def test_cli_problems_exit_1(good, tmp_path, capsys):
    def edit(f):
        del f["graph/operations/flops"]

    bad = _edited(good, tmp_path, "bad.h5", edit)
    assert main(["validate", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "1 problem(s)" in out and "MissingDataset" in out and "/graph/operations/flops" in out


def test_cli_unopenable_exit_2(good, tmp_path, capsys):
    missing = tmp_path / "missing.h5"
    assert main(["validate", str(good), str(missing)]) == 2
    captured = capsys.readouterr()
    assert "does not exist" in captured.err and "Traceback" not in captured.err


def test_cli_json(good, tmp_path, capsys):
    def edit(f):
        f["programs/nodes/type"][0] = 99

    bad = _edited(good, tmp_path, "bad.h5", edit)
    assert main(["validate", "--json", str(bad)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is False and out["openable"] is True
    assert out["problems"][0]["kind"] == "OutOfRange"


def test_cli_max_problems(good, tmp_path, capsys):
    def edit(f):
        for name in ("flops", "bytes_in", "bytes_out"):
            del f[f"graph/operations/{name}"]

    bad = _edited(good, tmp_path, "bad.h5", edit)
    assert main(["validate", "--max-problems", "1", str(bad)]) == 1
    assert "and 2 more" in capsys.readouterr().out


def test_huge_dimensions_with_sparse_datasets_are_absurd(good, tmp_path):
    """Plausible-looking dims (1,024 IPUs x 65,536 tiles) backed by unwritten chunks."""

    def edit(f):
        f["meta"].attrs["num_ipus"] = 1024
        f["meta"].attrs["tiles_per_ipu"] = 65536
        for name, extra in (("total", ()), ("gaps", ()), ("by_category", (17,))):
            del f[f"memory/{name}"]
            f["memory"].create_dataset(
                name, shape=(1024, 65536, *extra), dtype=np.int64, chunks=(1, 4096, *extra)
            )

    problems = validate(_edited(good, tmp_path, "sparse.h5", edit))
    absurd = {p.path for p in problems if isinstance(p, AbsurdSize)}
    assert {"/memory/total", "/memory/by_category"} <= absurd
