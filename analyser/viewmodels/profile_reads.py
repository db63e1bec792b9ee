"""The raw profile reads the GUI model caches: every dataset path the GUI needs, read here from
an :class:`analyser.core.Analysis` (its ``src``), so nothing under ``analyser/gui`` names the
file's layout. Each function reads and returns; caching is the caller's (the GUI's
``Document``). Paths are the profile format's (docs/profile-format.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from analyser.core.analysis import Analysis


def reader(analysis: Analysis) -> Any:
    """The lazy profile reader behind ``analysis`` (``profiles.open_profile``)."""
    return analysis.src.profile


def has_dataset(analysis: Analysis, path: str) -> bool:
    """Whether the profile holds ``path`` (a membership test on the file's index, no read)."""
    return path in analysis.src.profile


def liveness_steps(analysis: Analysis) -> pd.DataFrame:
    """/liveness/steps (name, program, op, ipu)."""
    return analysis.src.table("/liveness/steps")


def program_nodes(analysis: Analysis) -> pd.DataFrame:
    """/programs/nodes (program tree rows, pre-order)."""
    return analysis.src.table("/programs/nodes")


def program_column(analysis: Analysis, name: str) -> np.ndarray:
    """One column of /programs/nodes alone (no name strings read through pandas)."""
    return analysis.src.column("/programs/nodes", name)


def program_ops(analysis: Analysis) -> np.ndarray:
    """[programs] the operation of each program node (-1 for none)."""
    return np.asarray(analysis.src.column("/programs/nodes", "op"), dtype=np.int64)


def operation_names(analysis: Analysis) -> np.ndarray:
    return analysis.src.column("/graph/operations", "name")


def operation_column(analysis: Analysis, name: str) -> np.ndarray:
    """One column of /graph/operations (``stage``, ``pass`` ...)."""
    return analysis.src.table("/graph/operations", [name])[name].to_numpy()


def compute_sets(analysis: Analysis) -> pd.DataFrame:
    return analysis.src.table("/graph/compute_sets")


def program_tile_cycles(analysis: Analysis, program: int) -> np.ndarray:
    """Per-tile cycles of one execution of ``program`` (from /programs/tile_cycles)."""
    return analysis.src.profile.tile_cycles([program])[0]


def stash_variables(analysis: Analysis) -> pd.DataFrame:
    """/graph/variables' kind, bytes, op and IPU (the Pipeline's stash per stage)."""
    return analysis.src.table("/graph/variables", ["kind", "bytes", "op", "ipu"])


def run_starts(analysis: Analysis) -> np.ndarray:
    """/execution/run_starts: the cycle each host call starts at."""
    return np.asarray(analysis.src.array("/execution/run_starts"), dtype=np.float64)


def step_vertices(analysis: Analysis, step: int) -> pd.DataFrame:
    """The vertices liveness step ``step`` runs (``analyser.core.liveness.step_vertices``)."""
    from analyser.core.liveness import step_vertices as build

    return build(analysis.src, step)


def step_tile_cycles(analysis: Analysis, step: int) -> np.ndarray:
    """[tiles] cycles of one execution of liveness step ``step`` on each tile of its IPU."""
    from analyser.core.liveness import step_tile_cycles as build

    return build(analysis.src, step)


def program_table(analysis: Analysis, execution: Any, operations: pd.DataFrame) -> pd.DataFrame:
    """The Operations report's Poplar-programs layer (``analyser.core.operations``)."""
    from analyser.core.operations import program_table as build

    return build(analysis.src, execution, operations)


def tile_cycles_by_ipu(analysis: Analysis, programs: np.ndarray) -> dict[int, np.ndarray]:
    """{IPU: [tiles] cycles} of one execution of ``programs`` summed per tile."""
    from analyser.core.operations import tile_cycles_by_ipu as build

    return build(analysis.src, programs)


#: Programs read at a time when checking per-tile cycles (a bounded block of rows).
CHUNK_PROGRAMS = 4096


def tile_cycles_problem(analysis: Analysis) -> str:
    """The reader's one sentence on per-tile cycles it refuses (negative counts, which ``analyse
    validate`` flags too), or "" when every count reads: /programs/tile_cycles read
    ``CHUNK_PROGRAMS`` programs at a time, 0.03-0.12 s for the walkthrough's and BERT-Large's
    7,000 programs x 1,472 tiles. "" without the dataset."""
    from profiles.errors import ProfileError

    reader_ = analysis.src.profile
    path = "/programs/tile_cycles"
    if path not in reader_:
        return ""
    rows = int(reader_.shape(path)[0])
    try:
        for a in range(0, rows, CHUNK_PROGRAMS):
            reader_.array(path, slice(a, a + CHUNK_PROGRAMS))
    except ProfileError as exc:
        return str(exc)
    return ""
