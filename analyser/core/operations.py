"""The operations table (PopVision's Operations Summary) as a pandas DataFrame."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyser.core.execution import ExecutionSummary
from analyser.core.source import Source
from profiles import schema


def operations_table(src: Source, execution: ExecutionSummary | None) -> pd.DataFrame:
    """One row per operation: the /graph/operations columns (``pass`` decoded) plus

    ``executions`` (times its steps ran), ``total_cycles`` (measured cycles of its executed steps
    over the run, all IPUs), ``cycles_share`` (of all busy cycles), ``flops_per_cycle``
    (FLOPs of one execution / its cycles) and ``memory_bytes`` (bytes of the variables it owns).
    """
    df = src.table("/graph/operations").copy()
    n = len(df)
    if "pass" in df and not isinstance(df["pass"].dtype, pd.CategoricalDtype):
        df["pass"] = pd.Categorical.from_codes(
            df["pass"].astype(int), categories=list(schema.PASSES)
        )
    total = np.zeros(n, np.int64)
    execs = np.zeros(n, np.int64)
    if execution is not None and n:
        prog_op = src.column("/programs/nodes", "op").astype(np.int64)
        m = prog_op >= 0
        total = np.bincount(prog_op[m], execution.program_cycles[m], n).astype(np.int64)
        # executions of an op = executions of its most-run program
        ex = np.zeros(n, np.int64)
        np.maximum.at(ex, prog_op[m], execution.program_executions[m])
        execs = ex
    df["executions"] = execs
    df["total_cycles"] = total
    busy = float(total.sum())
    df["cycles_share"] = total / busy if busy else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        df["flops_per_cycle"] = np.where(
            df["cycles"] > 0, df["flops"] / df["cycles"].clip(lower=1), 0.0
        )
    mem = np.zeros(n, np.int64)
    if src.has("/graph/variables") and n:
        v = src.table("/graph/variables", ["op", "bytes"])
        vm = v["op"].to_numpy() >= 0
        mem = np.bincount(
            v["op"].to_numpy()[vm].astype(np.int64), v["bytes"].to_numpy()[vm].astype(np.float64), n
        ).astype(np.int64)
    df["memory_bytes"] = mem
    df.index.name = "op"
    return df
