"""The operations table (PopVision's Operations Summary) as a pandas DataFrame."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from analyser.core.execution import ExecutionSummary
from analyser.core.source import Source
from profiles import schema

if TYPE_CHECKING:
    import pandas as pd


def run_step_cycles(execution: ExecutionSummary | None) -> float:
    """The denominator of every ``cycles_share`` (operations, model layers, programs: one
    definition, the catalogue's ``SHARE_OF_CYCLES`` tooltip): the cycles of all executed steps
    of the run, summed over its IPUs (0 without execution)."""
    if execution is None:
        return 0.0
    return float(np.asarray(execution.program_cycles, dtype=np.float64).sum())


def operation_totals(
    src: Source, execution: ExecutionSummary | None, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per operation (``n`` of them): ``total_cycles`` (measured cycles of its executed steps over
    the run, all IPUs) and ``executions`` (times its most-run program ran), as int64."""
    total = np.zeros(n, np.int64)
    execs = np.zeros(n, np.int64)
    if execution is not None and n:
        prog_op = src.column("/programs/nodes", "op").astype(np.int64)
        m = prog_op >= 0
        total = np.bincount(prog_op[m], execution.program_cycles[m], n).astype(np.int64)
        # executions of an op = executions of its most-run program
        np.maximum.at(execs, prog_op[m], execution.program_executions[m])
    return total, execs


def operation_memory_bytes(src: Source, n: int) -> np.ndarray:
    """Per operation (``n`` of them): bytes of the variables it owns (int64)."""
    mem = np.zeros(n, np.int64)
    if src.has("/graph/variables") and n:
        op = src.column("/graph/variables", "op")
        vm = op >= 0
        mem = np.bincount(
            op[vm].astype(np.int64),
            src.column("/graph/variables", "bytes")[vm].astype(np.float64),
            n,
        ).astype(np.int64)
    return mem


def operations_table(src: Source, execution: ExecutionSummary | None) -> pd.DataFrame:
    """One row per operation: the /graph/operations columns (``pass`` decoded) plus

    ``executions`` (times its steps ran), ``total_cycles`` (measured cycles of its executed steps
    over the run, all IPUs), ``cycles_share`` (of :func:`run_step_cycles`), ``flops_per_cycle``
    (FLOPs of one execution / its cycles) and ``memory_bytes`` (bytes of the variables it owns).
    """
    import pandas as pd  # imported on first use (not by `analyse summary`)

    df = src.table("/graph/operations").copy()
    n = len(df)
    if "source" not in df:  # profiles before format 1.4, and models that do not say
        df.insert(min(3, len(df.columns)), "source", "")
    if "pass" in df and not isinstance(df["pass"].dtype, pd.CategoricalDtype):
        df["pass"] = pd.Categorical.from_codes(
            df["pass"].astype(int), categories=list(schema.PASSES)
        )
    total, execs = operation_totals(src, execution, n)
    df["executions"] = execs
    df["total_cycles"] = total
    busy = run_step_cycles(execution)
    df["cycles_share"] = total / busy if busy else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        df["flops_per_cycle"] = np.where(
            df["cycles"] > 0, df["flops"] / df["cycles"].clip(lower=1), 0.0
        )
    mem = operation_memory_bytes(src, n)
    df["memory_bytes"] = mem
    df.index.name = "op"
    return df


# ---------------------------------------------------------------------------------------------
# Software layers: the same run as framework operations, model layers or Poplar programs
# ---------------------------------------------------------------------------------------------
#: The software layers of the Operations report, in the order offered.
SOFTWARE_LAYERS = ("operations", "layers", "programs")

_FRAMEWORKS = {"poptorch": "PopTorch", "popart": "PopART", "tensorflow": "TensorFlow"}


def software_layer_titles(framework: str | None) -> dict[str, str]:
    """What each software layer is called for a run of ``framework`` (run config)."""
    fw = _FRAMEWORKS.get(str(framework or "").lower(), "framework")
    return {
        "operations": f"{fw} operations",
        "layers": "Model layers (modules)",
        "programs": "Poplar programs (compute sets, exchanges, copies)",
    }


def layer_table(ops: pd.DataFrame) -> pd.DataFrame:
    """The operations table summed by model layer (module path): one row per layer in the
    order its first operation appears, with ``operations`` (count), ``type`` (its operation
    types), ``ipu`` / ``stage`` (of its first operation), and sums of ``cycles`` (one execution
    of each), ``total_cycles``, ``cycles_share``, ``flops``, ``memory_bytes``, ``temp_bytes``
    and ``code_bytes``; ``source``, where in the model's code, from its first operation that
    has one."""
    import pandas as pd  # imported on first use (not by `analyse summary`)

    if ops.empty:
        return pd.DataFrame(columns=["name", "operations", "type", "ipu", "stage"])
    layer = ops["layer"].astype(str).to_numpy()
    g = ops.assign(_layer=layer).groupby("_layer", sort=False)
    sums = g[
        [
            "cycles",
            "total_cycles",
            "cycles_share",
            "flops",
            "memory_bytes",
            "temp_bytes",
            "code_bytes",
        ]
    ].sum()
    first = g[["ipu", "stage"]].first()
    types = g["type"].agg(lambda t: ", ".join(dict.fromkeys(map(str, t))))
    out = pd.DataFrame(
        {
            "name": sums.index.to_numpy(),
            "operations": g.size().to_numpy(),
            "type": types.to_numpy(),
            "ipu": first["ipu"].to_numpy(),
            "stage": first["stage"].to_numpy(),
        }
    )
    if "source" in ops:
        # the layer's place in the model's code: its first operation's that has one
        out.insert(
            3,
            "source",
            g["source"].agg(lambda s: next((x for x in map(str, s) if x), "")).to_numpy(),
        )
    for col in sums.columns:
        out[col] = sums[col].to_numpy()
    return out


def program_table(
    src: Source, execution: ExecutionSummary | None, ops: pd.DataFrame
) -> pd.DataFrame:
    """The executable programs (Poplar's level: compute sets, exchanges, stream copies, syncs),
    one row per leaf of /programs/nodes with ``program`` (its row), ``type`` (step type),
    ``ipu``, ``operation`` (name of the framework operation it belongs to, '-' for none),
    ``pass``, ``cycles`` (one execution, max over tiles; for a program whose duration is known
    only when it runs, a GlobalExchange or a sync that the compiler records as 0, the mean
    measured execution), ``executions``, ``total_cycles``, ``cycles_share`` (of
    :func:`run_step_cycles`), ``tile_balance``, ``bytes`` (moved by one execution) and
    ``code_bytes``."""
    import pandas as pd  # imported on first use (not by `analyse summary`)

    nodes = src.table("/programs/nodes")
    types = nodes["type"].to_numpy().astype(np.int64)
    leaf = np.flatnonzero(types >= len(schema.PROGRAM_TYPES) - len(schema.EXECUTABLE_TYPES))
    op = nodes["op"].to_numpy().astype(np.int64)[leaf]
    names = ops["name"].astype(str).to_numpy() if len(ops) else np.zeros(0, dtype=object)
    passes = ops["pass"].astype(str).to_numpy() if len(ops) else np.zeros(0, dtype=object)
    has = (op >= 0) & (op < len(names))
    safe = np.clip(op, 0, max(len(names) - 1, 0))
    total = np.zeros(leaf.size, np.int64)
    execs = np.zeros(leaf.size, np.int64)
    if execution is not None:
        total = np.asarray(execution.program_cycles, dtype=np.int64)[leaf]
        execs = np.asarray(execution.program_executions, dtype=np.int64)[leaf]
    busy = run_step_cycles(execution)
    cycles = nodes["cycles"].to_numpy().astype(np.int64)[leaf]
    measured = (cycles == 0) & (execs > 0)
    cycles = np.where(measured, total // np.maximum(execs, 1), cycles)
    return pd.DataFrame(
        {
            "name": nodes["name"].astype(str).to_numpy()[leaf],
            "program": leaf,
            "type": np.asarray(schema.PROGRAM_TYPES, dtype=object)[types[leaf]],
            "ipu": nodes["ipu"].to_numpy()[leaf],
            "operation": np.where(has, names[safe] if len(names) else "-", "-"),
            "pass": np.where(has, passes[safe] if len(passes) else "-", "-"),
            "cycles": cycles,
            "executions": execs,
            "total_cycles": total,
            "cycles_share": total / busy if busy else np.zeros(leaf.size),
            "tile_balance": nodes["tile_balance"].to_numpy().astype(np.float64)[leaf],
            "bytes": nodes["bytes"].to_numpy().astype(np.int64)[leaf],
            "code_bytes": nodes["code_bytes"].to_numpy().astype(np.int64)[leaf],
        }
    )


def tile_cycles_by_ipu(src: Source, programs: np.ndarray) -> dict[int, np.ndarray]:
    """{IPU: [tiles] cycles} of one execution of each of ``programs`` summed per tile (an
    operation's or a layer's cycle estimate by tile; /programs/tile_cycles)."""
    programs = np.asarray(programs, dtype=np.int64)
    if programs.size == 0:
        return {}
    ipu = src.column("/programs/nodes", "ipu").astype(np.int64)[programs]
    cycles = src.profile.tile_cycles(programs).astype(np.int64)
    return {int(i): cycles[ipu == i].sum(axis=0) for i in np.unique(ipu)}


def memory_by_category(variables: pd.DataFrame, ops: pd.DataFrame, op_ids: np.ndarray) -> pd.Series:
    """Bytes of operations ``op_ids`` by what they hold: the variables they own by kind
    (weights, activations, gradients, optimiser state, stashes, temporaries...; they add up to
    the table's ``memory_bytes``) and their ``code``, all IPUs (bytes over all tiles)."""
    op_ids = np.asarray(op_ids, dtype=np.int64)
    mine = variables[np.isin(variables["op"].to_numpy(), op_ids)]
    out = mine.groupby(mine["kind"].astype(str), sort=False)["bytes"].sum().astype(np.int64)
    sel = ops.iloc[op_ids] if len(op_ids) else ops.iloc[:0]
    out["code"] = int(sel["code_bytes"].sum()) if "code_bytes" in sel else 0
    return out[out > 0].sort_values(ascending=False)
