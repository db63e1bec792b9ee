"""The output of a tune: a results table (Parquet), its metadata, and the best profiles.

A tune folder holds

* ``results.parquet``: one row per configuration tried (OOM and refused rows included): ``id``,
  ``origin`` (start / grid / beam / refine), ``status``, ``message``, one column per varied
  option (plus the options the space couples to them), the key figures
  (:data:`analyser.sim.service.FIGURE_KEYS`), ``feasible``, ``objective``, ``pareto``,
  ``rank`` (1 = best), ``profile`` (the cached profile) and ``key`` (the cache key);
* ``tune.json``: the start configuration, the dimensions, constraints, objective, strategy,
  budget, the engine, timing, and the file names below;
* ``start.h5`` and ``best-1.h5`` ... ``best-K.h5``: copies of those profiles (reflinks where
  the file system shares blocks copy-on-write; never hard links into the cache).

tune.json's ``written`` lists the files the tune wrote, its report included. A later tune into
the same folder replaces only those, and removes only those it does not write again (a profile
it no longer writes: ``best-3.h5`` when ``--best 2``), after checking each as untrusted input
(:func:`owned_files`). A file of the user's is never removed or replaced: one at a name a tune
writes (``report.html``, ``best-1.h5``) stops the tune before it writes anything
(:func:`in_the_way`, --force or not), and :func:`foreign_profiles` names the profiles a tune
did not write, which the command refuses to write beside unless told (``--force``).

:func:`load_results` reads a folder (or its ``results.parquet``) back for the HTML report and
the GUI's Design space report.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyser.core import intervals
from analyser.sim.service import FIGURE_KEYS, engine_fingerprint
from analyser.sim.tune.folder import TuneResultsError, confined_profile, read_folder
from analyser.sim.tune.search import TuneResult, pareto_front
from analyser.sim.tune.space import OBJECTIVES
from profiles.atomic import is_disk_full, temp_path

RESULTS = "results.parquet"
META = "tune.json"
REPORT = "report.html"
SCHEMA = "ipu-analyser-tune"
#: The names a tune writes: the only names it ever replaces or removes.
TUNE_NAMES = re.compile(r"results\.parquet|tune\.json|report\.html|start\.h5|best-[1-9]\d{0,5}\.h5")
#: The profiles among them.
PROFILE_NAMES = re.compile(r"start\.h5|best-[1-9]\d{0,5}\.h5")
#: Files that look like profiles (what a user keeps beside a tune's and must not lose).
PROFILE_LIKE = re.compile(r".*\.(h5|hdf5|he5|pvti)", re.IGNORECASE)
#: A temporary file of ours (profiles.atomic.temp_path), left by a writer that was killed.
# (only for the refusal check: a leftover temporary of an interrupted tune, of this or an earlier
# version, does not make the folder someone else's; nothing is removed by this pattern)
TEMP_NAME = re.compile(r"\..+\.tmp(\.h5)?")


def coupled_names(result: TuneResult) -> list[str]:
    """The varied options plus any option the space set alongside them (loss scaling with
    FP16, gradient accumulation under a global-batch constraint)."""
    names = list(result.space.names)
    if result.space.auto_split is not None:  # what the split search varies, always columns
        names += ["split_points", "available_memory_proportion_per_ipu"]
    start = result.space.start
    for row in result.rows:
        for k, v in row.config.items():
            if k not in names and v != start.get(k):
                names.append(k)
    return names


def to_frame(result: TuneResult):
    """The results table as a pandas DataFrame (one row per configuration)."""
    import pandas as pd

    names = coupled_names(result)
    front = {r.id for r in pareto_front(result.rows)}
    rank = {r.id: i + 1 for i, r in enumerate(result.ranked())}
    records = []
    start = next((x for x in result.rows if x.origin == "start"), None)
    for r in result.rows:
        rec: dict[str, Any] = {
            "id": r.id,
            "origin": r.origin,
            "round": r.round,
            "status": r.response.status,
            "message": r.response.message,
        }
        for n in names:
            v = r.config.get(n)
            rec[n] = (
                "+".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v)
                if isinstance(v, list)
                else v
            )
        for k in FIGURE_KEYS:
            rec[k] = r.figures.get(k)
        # the throughput's interval and its change from the start's (analyser.core.intervals)
        sf, sc = (start.figures, start.config) if start is not None else (None, None)
        rec.update(intervals.tune_columns(r.figures, r.config, sf, sc))
        rec["feasible"] = result.space.feasible(r.figures)
        score = result.space.score(r.figures)
        rec["objective"] = None if score is None else abs(score)
        rec["pareto"] = r.id in front
        rec["rank"] = rank.get(r.id)
        rec["cached"] = r.response.cached
        rec["seconds"] = r.response.seconds
        rec["profile"] = r.response.profile
        rec["key"] = r.response.key
        records.append(rec)
    df = pd.DataFrame.from_records(records)
    # mixed None / number columns: keep them numeric (Parquet wants one type per column)
    numeric = [c for c in intervals.TUNE_COLUMNS if c not in ("interval_classes", "interval_note")]
    for col in [*FIGURE_KEYS, *numeric, "objective", "rank"]:
        if col in df and col != "fits":
            df[col] = pd.to_numeric(df[col], errors="coerce")
    for n in names:
        if n in df and df[n].map(type).nunique() > 1:
            df[n] = df[n].map(lambda v: None if v is None else str(v))
    return df


def _copy_profile(src: str, dst: Path) -> None:
    """``dst`` := a copy of the cached profile ``src``: a reflink where the file system shares
    blocks copy-on-write (btrfs, XFS), else a plain copy; never a hard link, so that editing a
    tune's result never edits the cache. Written beside ``dst`` and renamed into place."""

    def copy(tmp: Path) -> None:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            try:
                import fcntl

                fcntl.ioctl(fout.fileno(), 0x40049409, fin.fileno())  # FICLONE
            except (ImportError, OSError):
                shutil.copyfileobj(fin, fout, 1 << 20)

    _write_atomic(dst, copy)


def _lstat_regular(path: Path) -> bool:
    """Whether ``path`` itself (not what a link names) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _identity(path: Path) -> list[int]:
    """What tells a file a tune wrote from one put at its name since: its inode, size and
    modification time (an edit, a copy over it or a new file changes one of them)."""
    st = os.lstat(path)
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def _read_own_meta(folder: Path) -> dict[str, Any] | None:
    """tune.json of ``folder`` when it is a regular file (not a link) of a tune's schema."""
    path = folder / META
    if not _lstat_regular(path):
        return None
    try:
        if os.lstat(path).st_size > (4 << 20):
            return None
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    return doc


def owned_files(folder: Path) -> set[str]:
    """The files of ``folder`` an earlier tune wrote, as its tune.json records them: each a
    plain name a tune writes (:data:`TUNE_NAMES`), inside the folder, a regular file and not
    a link, and (where tune.json records its identity, ``written_ids``) still the file the
    tune wrote, not one the user put at its name since. Anything else tune.json names is
    ignored (so never replaced or removed); a tune.json that cannot be read owns nothing. A
    tune.json older than ``written`` owns the profiles its ``files`` and ``best`` name; one
    older than ``written_ids`` its names as they are, and a report.html that analyse wrote."""
    doc = _read_own_meta(folder)
    if doc is None:
        return set()
    names: list[Any] = []
    if isinstance(doc.get("written"), list):
        names = doc["written"]
    else:
        if isinstance(doc.get("files"), dict):
            names += list(doc["files"].values())
        if isinstance(doc.get("best"), list):
            names += [b.get("file") for b in doc["best"] if isinstance(b, dict)]
    ids = doc.get("written_ids")
    out = set()
    for n in names:
        if not isinstance(n, str) or not TUNE_NAMES.fullmatch(n) or Path(n).name != n:
            continue
        if not _lstat_regular(folder / n):
            continue
        if isinstance(ids, dict) and n != META:
            if n in ids:
                try:
                    if ids[n] != _identity(folder / n):
                        continue
                except OSError:
                    continue
            elif n != REPORT or not _written_by_analyse(folder / n):
                # (the report is recorded after it is written: a tune stopped in between
                # leaves it unrecorded, and it is ours when analyse wrote it)
                continue
        out.add(n)
    # a tune.json older than listing the report (that version always wrote one)
    report = folder / REPORT
    if REPORT not in names and _lstat_regular(report) and _written_by_analyse(report):
        out.add(REPORT)
    return out


def _written_by_analyse(path: Path) -> bool:
    """Whether ``path`` starts as analyse's reports do (or matches analyse's record of it)."""
    from analyser.output import is_our_output

    return is_our_output(path)


def record_written(folder: Path, names: list[str]) -> None:
    """Add the identity of ``names`` (written since tune.json was: the report) to tune.json's
    ``written_ids``, so that a later tune replaces them only while they are unchanged."""
    doc = _read_own_meta(folder)
    if doc is None or not isinstance(doc.get("written_ids"), dict):
        return
    for n in names:
        with contextlib.suppress(OSError):
            doc["written_ids"][n] = _identity(folder / n)
    text = json.dumps(doc, indent=1, default=str)
    _write_atomic(folder / META, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def in_the_way(folder: Path, best_k: int, *, start: bool = True, report: bool = True) -> list[str]:
    """What ``folder`` holds (a file, a link, a folder...) at a name a tune with ``--best
    best_k`` writes (``start.h5`` when ``start``, ``report.html`` when ``report``) that no
    earlier tune recorded writing: a tune never replaces these, --force or not (sorted)."""
    owned = owned_files(folder)
    names = {RESULTS, META} | ({"start.h5"} if start else set()) | ({REPORT} if report else set())
    try:
        entries = sorted(p.name for p in folder.iterdir())
    except OSError:
        return []

    def written(n: str) -> bool:
        if n in names:
            return True
        m = re.fullmatch(r"best-([1-9]\d{0,5})\.h5", n)
        return m is not None and int(m.group(1)) <= best_k

    return [n for n in entries if n not in owned and written(n)]


def in_the_way_error(folder: Path, names: list[str]) -> str:
    """The sentence refusing to write over ``names`` (files of the user's) in ``folder``."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"output folder {folder} holds {shown}, which analyse tune did not write and would "
        "replace; refusing to write over it (move it away or give another -o; --force writes "
        "beside files analyse tune did not write, never over them)."
    )


def foreign_profiles(folder: Path) -> list[str]:
    """Profiles (and anything else at a profile's name) in ``folder`` that no tune recorded
    writing: what writing a tune there could be mistaken for or replace (sorted)."""
    owned = owned_files(folder)
    try:
        entries = sorted(p.name for p in folder.iterdir())
    except OSError:
        return []
    return [
        n
        for n in entries
        if n not in owned and (PROFILE_LIKE.fullmatch(n) or PROFILE_NAMES.fullmatch(n))
    ]


def foreign_entries(folder: Path) -> list[str]:
    """Entries of ``folder`` that are neither a tune's output (recorded or by name) nor a
    temporary file of ours (sorted)."""
    owned = owned_files(folder)
    try:
        entries = sorted(p for p in folder.iterdir())
    except OSError:
        return []
    return [
        p.name
        for p in entries
        if p.name not in owned
        and not (
            (TUNE_NAMES.fullmatch(p.name) or TEMP_NAME.fullmatch(p.name)) and _lstat_regular(p)
        )
    ]


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Held while one tune searches and writes into ``folder``: a second tune into the same
    folder is refused at once (one sentence) rather than racing on its files. An advisory
    ``flock`` on the folder itself (no lock file to leave behind; released when the process
    ends, however it ends). A folder this creates is removed again if nothing was written."""
    import fcntl

    created = False
    try:
        folder.mkdir(exist_ok=False)
        created = True
    except FileExistsError:
        pass
    except OSError as exc:
        raise TuneResultsError(
            f"cannot create the output folder {str(folder)!r}: "
            f"{(exc.strerror or type(exc).__name__).lower()}."
        ) from None
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    except OSError as exc:
        raise TuneResultsError(
            f"cannot open the output folder {str(folder)!r}: "
            f"{(exc.strerror or type(exc).__name__).lower()}."
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TuneResultsError(
                f"another analyse tune is writing into {str(folder)!r}; wait for it to finish "
                "or give another -o."
            ) from None
        except OSError:
            pass  # a file system without locks: the unique temporaries still hold
        yield
    finally:
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when still empty


def _write_atomic(final: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` into a temporary file of its own beside ``final`` (a unique name, so two
    tunes into one folder never share one), then renamed into place; the temporary is removed
    whatever happens, and a full disk is one sentence naming ``final``."""
    tmp = temp_path(final)
    try:
        write(tmp)
        os.replace(tmp, final)
    except OSError as exc:
        if is_disk_full(exc):
            why = "the disk is full"
        else:
            why = (exc.strerror or type(exc).__name__).lower()
        raise TuneResultsError(
            f"cannot write {str(final)!r}: {why} (the file there before, if any, is unchanged)."
        ) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def write_results(
    result: TuneResult,
    folder: Path,
    *,
    best_k: int = 3,
    config_file: str | None = None,
    report: bool = False,
) -> dict[str, Any]:
    """Write the table, the metadata and the profiles into ``folder``; returns the metadata.
    ``report``: the caller writes ``report.html`` next (recorded in ``written`` with the rest).

    Only files an earlier tune recorded writing (:func:`owned_files`) are replaced: when a
    name this tune writes is taken by anything else, nothing is written (TuneResultsError,
    one sentence). Of the recorded files, the profiles this one does not write again are
    removed; nothing else in the folder is touched."""
    folder.mkdir(parents=True, exist_ok=True)
    before = owned_files(folder)
    keys: set[str] = set()
    for row in result.ranked():
        if len(keys) >= best_k:
            break
        keys.add(row.response.key)
    taken = in_the_way(folder, len(keys), start=bool(result.start.response.profile), report=report)
    if taken:
        raise TuneResultsError(in_the_way_error(folder, taken))
    df = to_frame(result)
    _write_atomic(folder / RESULTS, lambda tmp: df.to_parquet(tmp, index=False))
    written = [RESULTS]
    files: dict[str, str] = {}
    start = result.start
    if start.response.profile:
        _copy_profile(start.response.profile, folder / "start.h5")
        files["start"] = "start.h5"
        written.append("start.h5")
    best: list[dict[str, str | int]] = []
    seen: set[str] = set()
    for row in result.ranked():
        if len(best) >= best_k:
            break
        if row.response.key in seen:
            continue
        seen.add(row.response.key)
        name = f"best-{len(best) + 1}.h5"
        assert row.response.profile is not None  # a ranked row fits: simulated, with a profile
        _copy_profile(row.response.profile, folder / name)
        best.append({"file": name, "id": row.id})
        written.append(name)
    b = result.best
    meta = {
        "schema": SCHEMA,
        "config_file": config_file,
        "start": result.space.start,
        "dimensions": dimensions(result),
        "constraints": ["fits"] + [c.text for c in result.space.constraints],
        "objective": result.space.objective,
        "objective_label": OBJECTIVES[result.space.objective][2],
        "strategy": result.strategy,
        "space_size": result.space.size,
        "tried": len(result.rows),
        "simulations": result.simulations,
        "seconds": result.seconds,
        "interrupted": result.interrupted,
        "engine": engine_fingerprint(),
        "files": files,
        "best": best,
        # what this tune wrote: all a later tune into the folder may replace or remove
        "written": [*written, META, *([REPORT] if report else [])],
        # each one's identity: a file put at one of these names since is the user's
        "written_ids": {n: _identity(folder / n) for n in written},
        "best_id": None if b is None else b.id,
        "start_id": start.id,
        "diff": diff_configs(start.config, b.config) if b is not None else {},
        # the best's figures against the start's, each with its interval (schema additive)
        "best_intervals": intervals.change_intervals(
            start.figures,
            b.figures,
            intervals.features_from(start.figures, start.config),
            intervals.features_from(b.figures, b.config),
            BEST_FIGURES,
        )
        if b is not None
        else {},
        "fidelity_errors": intervals.table_info(),
        # --vary split_points=auto: the chosen split against the user's, per stage
        "auto_split": result.split,
    }
    text = json.dumps(meta, indent=1, default=str)
    _write_atomic(folder / META, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    # the earlier tune's profiles this one did not write again (best-3.h5 after --best 2)
    for name in sorted(before - set(written)):
        if PROFILE_NAMES.fullmatch(name) and _lstat_regular(folder / name):
            with contextlib.suppress(OSError):
                (folder / name).unlink()
    return meta


def dimensions(result: TuneResult) -> dict[str, list[Any]]:
    """The dimensions of a tune: the varied options' values; for ``split_points=auto`` the
    split points and per-stage proportions it tried (each a column of the table)."""
    out: dict[str, list[Any]] = {d.name: d.values for d in result.space.dims}
    if result.space.auto_split is None:
        return out
    for name in ("split_points", "available_memory_proportion_per_ipu"):
        values: list[Any] = []
        for r in result.rows:
            v = r.config.get(name)
            if r.origin in ("start", "split") and v not in values:
                values.append(v)
        out[name] = values
    return out


#: Figures of the best configuration compared with the start's in ``tune.json``.
BEST_FIGURES = ("throughput_samples_per_s", "cycles_per_sample", "peak_memory_bytes")


def diff_configs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, list[Any]]:
    """``{option: [start value, new value]}`` for every option that differs (the memory
    proportions only when a stage's differs: ``[]`` and ``0.6+0.6`` spell the same run)."""
    out = {k: [a.get(k), b.get(k)] for k in b if a.get(k) != b.get(k) and k != "name"}
    amp = ("available_memory_proportion", "available_memory_proportion_per_ipu")
    if any(k in out for k in amp):
        from analyser.sim.tune.autosplit import base_proportions

        if base_proportions(a) == base_proportions(b):
            for k in amp:
                out.pop(k, None)
    return out


@dataclass
class TuneTable:
    folder: Path
    frame: Any  # pandas DataFrame
    meta: dict[str, Any]

    def profile(self, row_id: int) -> Path | None:
        """The profile of a row: its copy in the folder when there is one, else the cache's
        (only a file inside the tune folder or the simulation cache is ever named: a crafted
        table pointing at /etc/passwd or ../../x.h5 gets None)."""
        for b in self.meta.get("best", []):
            if b["id"] == row_id and (self.folder / b["file"]).is_file():
                return self.folder / b["file"]
        if row_id == self.meta.get("start_id") and (self.folder / "start.h5").is_file():
            return self.folder / "start.h5"
        rows = self.frame[self.frame["id"] == row_id]
        if len(rows) and "profile" in rows.columns:
            from analyser.sim.service import default_cache_dir

            return confined_profile(self.folder, rows.iloc[0]["profile"], default_cache_dir())
        return None

    @property
    def start_profile(self) -> Path | None:
        return self.profile(int(self.meta["start_id"]))


def is_tune_results(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is meant as a tune folder (or its results.parquet): tune.json is there
    (whatever it is: :func:`load_results` says what is wrong with it)."""
    p = Path(path)
    if p.is_dir():
        return os.path.lexists(p / META)
    return p.name == RESULTS and os.path.lexists(p.parent / META)


def load_results(path: str | os.PathLike[str]) -> TuneTable:
    """A tune folder (or its results.parquet) -> :class:`TuneTable`, validated as untrusted
    input (:mod:`analyser.sim.tune.folder`: one sentence per problem)."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    if not os.path.lexists(folder / META) or not os.path.lexists(folder / RESULTS):
        raise TuneResultsError(
            f"{str(path)!r} is not the output of analyse tune (no {META} and {RESULTS})."
        )
    meta, frame = read_folder(folder, SCHEMA)
    return TuneTable(folder, frame, meta)
