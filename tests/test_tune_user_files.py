"""A tune never replaces or removes a file it did not write: a file of the user's at a name a tune
writes (report.html, best-1.h5, ...; put there, edited in place, copied over, or a link) stops
the tune before it writes anything, in one sentence naming the file, with --force too; a folder
of an older version (tune.json without the files' identities) is still written into. The cases
are tests/hostile.py's tune_user_file_cases."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import hostile
import pytest


def _argv(cfg: Path, out: Path, scheduler_args, cache: Path, *extra: str) -> list[str]:
    return [
        "tune",
        str(cfg),
        "--vary",
        "mbs=1,2",
        "--best",
        "2",
        *scheduler_args,
        "--cache",
        str(cache),
        "-o",
        str(out),
        "--quiet",
        *extra,
    ]


def _state(folder: Path) -> dict[str, tuple]:
    """Every entry of ``folder`` with its kind, identity and bytes (links not followed)."""
    out = {}
    for p in sorted(folder.iterdir()):
        st = os.lstat(p)
        data = p.read_bytes() if p.is_file() and not p.is_symlink() else None
        out[p.name] = (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, data)
    return out


@pytest.fixture(scope="module")
def written(scheduler_args, tmp_path_factory) -> tuple[Path, Path, Path]:
    """A folder a tune wrote (two best profiles and its report), its config and cache."""
    from analyser.cli import main

    root = tmp_path_factory.mktemp("tune-user-files")
    cfg = root / "mlp.toml"
    cfg.write_text('model = "mlp"\nmicro_batch_size = 2\n')
    out = root / "T"
    assert main(_argv(cfg, out, scheduler_args, root / "cache")) == 0
    meta = json.loads((out / "tune.json").read_text())
    assert "report.html" in meta["written"] and "report.html" in meta["written_ids"]
    return out, cfg, root / "cache"


@pytest.mark.parametrize("name", list(hostile.tune_user_file_cases()))
@pytest.mark.parametrize("force", [False, True])
def test_a_file_of_the_users_at_a_tune_name_is_never_replaced(
    written, scheduler_args, tmp_path, capsys, name, force
):
    from analyser.cli import main

    src, cfg, cache = written
    out = tmp_path / "T"
    shutil.copytree(src, out, copy_function=shutil.copy2)
    # the copy's identities differ from the ones recorded: record them again, as the tune did
    meta = json.loads((out / "tune.json").read_text())
    meta["written_ids"] = {
        n: [os.lstat(out / n).st_ino, os.lstat(out / n).st_size, os.lstat(out / n).st_mtime_ns]
        for n in meta["written_ids"]
    }
    (out / "tune.json").write_text(json.dumps(meta))
    mine = hostile.tune_user_file_cases()[name](out)
    theirs = mine.read_bytes()
    before = _state(out)
    capsys.readouterr()
    code = main(_argv(cfg, out, scheduler_args, cache, *(["--force"] if force else [])))
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.count("\n") == 0 and "did not write" in err, err
    taken = name.split("-")[0]
    assert {"report": "report.html", "results": "results.parquet", "start": "start.h5"}.get(
        taken, f"{taken}-{name.split('-')[1]}.h5"
    ) in err, err
    assert mine.read_bytes() == theirs
    assert _state(out) == before, "the folder changed"


def test_a_tune_rewrites_its_own_files_and_an_older_versions_report(
    written, scheduler_args, tmp_path, capsys
):
    """Unchanged files of its own are replaced (a second run is not refused); a tune.json of an
    older version (no ``written_ids``, no report.html in ``written``) owns its report when
    analyse wrote it, and a report.html of the user's beside it is still refused."""
    from analyser.cli import main

    src, cfg, cache = written
    out = tmp_path / "T"
    shutil.copytree(src, out)
    meta = json.loads((out / "tune.json").read_text())
    meta.pop("written_ids")
    meta["written"].remove("report.html")
    (out / "tune.json").write_text(json.dumps(meta))
    assert main(_argv(cfg, out, scheduler_args, cache)) == 0
    assert main(_argv(cfg, out, scheduler_args, cache)) == 0
    (out / "report.html").write_bytes(hostile.USER_BYTES)
    meta = json.loads((out / "tune.json").read_text())
    meta.pop("written_ids")
    meta["written"].remove("report.html")
    (out / "tune.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(_argv(cfg, out, scheduler_args, cache, "--force")) == 2
    assert "report.html" in capsys.readouterr().err
    assert (out / "report.html").read_bytes() == hostile.USER_BYTES


def test_a_copy_of_a_tune_folder_owns_only_its_metadata(written, tmp_path):
    """in_the_way (which write_results checks too, before writing anything): in a copy of a
    tune's folder every file is a new one, so none is the tune's any more."""
    from analyser.sim.tune.results import in_the_way

    src, _cfg, _cache = written
    out = tmp_path / "T"
    shutil.copytree(src, out)
    # copied: new inodes, so none of them is the tune's any more
    assert set(in_the_way(out, 2)) == {
        "best-1.h5",
        "best-2.h5",
        "report.html",
        "results.parquet",
        "start.h5",
    }
    assert in_the_way(src, 2) == [] and in_the_way(src, 1) == []
