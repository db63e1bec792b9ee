"""Lowering: the forward graph + run options -> the list of operations one step executes.

For inference: the forward ops. For training: forward, loss (softmax cross-entropy on the
logits), backward (for every matmul / convolution an input-gradient op, skipped for the first
layer whose input needs no gradient, and a weight-gradient op; one gradient op for every other
op with backward work), the accumulation of weight gradients into accumulators when GA > 1, and
one optimiser update per weighted layer. With recomputation, forward ops are replayed before the
backward (their activations are then not kept).

Stages: split points name the first layer of each new stage; stage s runs on IPU s. Canonical
order of the lowered ops (= the order of the compiled segments): forward of stages 0..S-1 (loss at
the end of the last), then per stage S-1..0 its recompute and backward ops, then the updates of
stages 0..S-1.

Optimiser passes (element-wise vector passes over the weights per update, counting the reads and
writes of weights, gradients and state; documented in docs/engine.md): SGD 2 (scale the gradient,
add), SGD + momentum 4, Adam 10, AdamW 11 (adds weight decay), LAMB 12 (plus two norm reductions,
a cross-tile reduction). Loss scaling adds one pass (unscale the gradient).
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from functools import partial

import numpy as np

from engine.errors import ConfigError
from engine.graph import INPUT, Graph
from profiles import schema

OPTIMISER_PASSES = {"sgd": 2, "sgd-momentum": 4, "adam": 10, "adamw": 11, "lamb": 12}
OPTIMISER_NAMES = {
    "sgd": "SGD",
    "sgd-momentum": "SGDMomentum",
    "adam": "Adam",
    "adamw": "AdamW",
    "lamb": "LAMB",
}
#: Optimiser state tensors per weight: (name, dtype property of RunConfig).
OPTIMISER_STATE = {
    "sgd": (),
    "sgd-momentum": (("momentum", "first_moment"),),
    "adam": (("first_moment", "first_moment"), ("second_moment", "second_moment")),
    "adamw": (("first_moment", "first_moment"), ("second_moment", "second_moment")),
    "lamb": (("first_moment", "first_moment"), ("second_moment", "second_moment")),
}
DTYPE_BYTES = {"float32": 4, "float16": 2, "int32": 4, "uint8": 1}

P_FWD = schema.code("pass", "forward")
P_BWD = schema.code("pass", "backward")
P_LOSS = schema.code("pass", "loss")
P_UPD = schema.code("pass", "update")

#: Lowered op roles (what the op does, used by the memory model).
ROLES = (
    "fwd",
    "gi",
    "gw",
    "bwd",
    "acc",
    "upd",
    "acczero",
    "loss",
    "lossgrad",
    "normin",
    "recomp",
)


@dataclass
class Lowered:
    """Lowered ops as columns (see ``COLUMNS``) plus stage facts."""

    cols: dict[str, np.ndarray]
    stage_of_fwd: np.ndarray  # stage of each forward graph op
    recompute: np.ndarray  # bool per forward graph op (recomputed in the backward)
    loss_inputs: list[int]

    def __len__(self) -> int:
        return len(self.cols["name"])

    def __getitem__(self, key: str) -> np.ndarray:
        return self.cols[key]


def assign_stages(graph: Graph, config) -> np.ndarray:
    """Stage of every forward op from the split points (ConfigError when impossible)."""
    n = len(graph)
    stage = np.zeros(n, dtype=np.int16)
    if not config.split_points:
        return stage
    config.check_layers(graph.layer_names)
    starts = []
    for point in config.split_points:
        first = graph.first_op_of(point)
        if first <= 0:
            raise ConfigError(
                f"split_points: {point!r} starts at the first layer of {config.model}, which "
                "would leave stage 0 empty; split later."
            )
        starts.append(first)
    if starts != sorted(starts):
        raise ConfigError(
            f"split_points: {config.split_points} must be listed in model order "
            f"({', '.join(p for _, p in sorted(zip(starts, config.split_points)))})."
        )
    for stage_no, (a, b) in enumerate(itertools.pairwise(starts), start=1):
        if a == b:
            point_a, point_b = config.split_points[stage_no - 1], config.split_points[stage_no]
            raise ConfigError(
                f"split_points: {point_a!r} and {point_b!r} start at the same operation, which "
                f"would leave stage {stage_no} empty; give each stage at least one layer."
            )
    return np.searchsorted(np.array(starts), np.arange(n), side="right").astype(np.int16)


# Fields of a row without AMP work (element-wise, loss, optimiser): each add() states only what
# differs from these.
ROW_DEFAULTS = dict(
    amp=False,
    G=1,
    M=0,
    K=0,
    N=0,
    cin=0,
    kernel=1,
    row_width=0,
    a_dup=1,
    b_weight=False,
    cross_tile=False,
    stats=0,
    weight_elems=0,
    wcast=0,
)


def lower(graph: Graph, config, target) -> Lowered:
    g = graph.cols
    n = len(graph)
    B = config.micro_batch_size
    training = config.training
    S = config.stages
    cdt = DTYPE_BYTES[config.compute_dtype]
    wdt = DTYPE_BYTES[config.weight_dtype]
    stage_of = assign_stages(graph, config)

    # recomputation flags per forward op
    recompute = np.zeros(n, dtype=bool)
    group = stage_of.astype(np.int64).copy()  # recompute group: stage, or checkpoint segment
    if training and config.recomputation == "pipeline-stages":
        recompute[:] = True
    elif training and config.recomputation == "checkpoints":
        config.check_layers(graph.layer_names)
        is_ckpt = np.zeros(n, dtype=bool)
        for point in config.recompute_checkpoints:
            # a checkpoint keeps the named layer's output (its last op), like
            # poptorch.recomputationCheckpoint on the layer's output tensor
            is_ckpt[graph.ops_of(point)[-1]] = True
        recompute = ~is_ckpt
        # group = segment between checkpoints (a checkpoint op closes its segment), per stage
        seg = np.concatenate([[0], np.cumsum(is_ckpt)[:-1]])
        group = seg * S + stage_of
    rows: list[dict] = []

    def add(**kw):
        rows.append({**ROW_DEFAULTS, **kw})

    is_amp = g["family"] == "amp"
    batched = g["type"] == "BatchMatMul"

    def fwd_row(i: int, role: str, seg: str, pass_code: int, suffix: str) -> None:
        amp = bool(is_amp[i])
        G = int(g["groups"][i]) * (B if batched[i] else 1)
        M = int(g["m"][i]) * (1 if batched[i] else B)
        elems = B * max(int(g["out_elems"][i]), int(g["in_elems"][i]))
        stats = int(g["stats"][i]) * (B if g["type"][i] == "AvgPool" else 1)
        add(
            name=f"{g['name'][i]}/{suffix}",
            type=str(g["type"][i]),
            layer=str(g["layer"][i]),
            family=str(g["family"][i]),
            pass_=pass_code,
            stage=int(stage_of[i]),
            fwd=i,
            seg=seg,
            role=role,
            amp=amp,
            G=G,
            M=M,
            K=int(g["k"][i]),
            N=int(g["n"][i]),
            cin=int(g["cin"][i]),
            kernel=int(g["kernel"][i]),
            row_width=int(g["out_width"][i]),
            a_dup=int(g["kernel"][i]),
            b_weight=bool(g["weight_elems"][i] > 0) and not batched[i],
            elems=0 if amp else elems,
            passes=float(g["passes"][i]),
            cross_tile=bool(g["cross_tile"][i]),
            stats=stats,
            db=cdt,
            weight_elems=int(g["weight_elems"][i]),
            flops=2 * B * int(g["macs"][i]) if amp else round(elems * g["passes"][i]),
            bytes_in=(B * int(g["in_elems"][i]) + int(g["weight_elems"][i])) * cdt,
            bytes_out=B * int(g["out_elems"][i]) * cdt,
            wcast=int(g["weight_elems"][i])
            if amp and config.weight_dtype != config.compute_dtype and not batched[i]
            else 0,
        )

    # ---- forward ------------------------------------------------------------------------
    for s in range(S):
        if s == 0 and config.eight_bit_input and graph.input_kind == "image":
            e = B * graph.input_elems
            add(
                name="input/normalise",
                type="Normalise",
                layer="input",
                family="elementwise",
                pass_=P_FWD,
                stage=0,
                fwd=-1,
                seg="forward",
                role="normin",
                elems=e,
                passes=2.0,  # cast uint8 -> float, then scale and shift
                db=cdt,
                flops=2 * e,
                bytes_in=e,
                bytes_out=e * cdt,
            )
        for i in np.flatnonzero(stage_of == s):
            fwd_row(int(i), "fwd", "forward", P_FWD, "fwd")
    loss_inputs = list(graph.params.get("loss_inputs", [n - 1]))
    if training:
        logits = B * graph.output_elems
        for role, passes, suffix in (
            ("loss", 4.0, "fwd"),
            ("lossgrad", 2.0 + (config.loss_scaling != 1), "bwd"),
        ):
            add(
                name=f"loss/{suffix}",
                type="SoftmaxCrossEntropy" + ("Grad" if role == "lossgrad" else ""),
                layer="loss",
                family="loss",
                pass_=P_LOSS,
                stage=S - 1,
                fwd=-1,
                seg="forward" if role == "loss" else "backward",
                role=role,
                elems=logits,
                passes=passes,
                db=4,  # the loss is computed in FP32
                flops=int(logits * passes),
                bytes_in=logits * cdt,
                bytes_out=logits * cdt if role == "lossgrad" else 4 * B,
            )

        # ---- backward, stage by stage in reverse ------------------------------------------
        acc_dt = DTYPE_BYTES[config.accumulator]
        GA = config.gradient_accumulation
        for s in range(S - 1, -1, -1):
            ops_s = np.flatnonzero(stage_of == s)
            seen_groups: set[int] = set()
            if config.recomputation == "pipeline-stages":
                for i in ops_s:
                    fwd_row(int(i), "recomp", "recompute", P_BWD, "recompute")
                seen_groups.add(int(s))
            for i in ops_s[::-1]:
                i = int(i)
                if config.recomputation == "checkpoints" and int(group[i]) not in seen_groups:
                    seen_groups.add(int(group[i]))
                    members = ops_s[(group[ops_s] == group[i]) & recompute[ops_s]]
                    for j in members:
                        fwd_row(int(j), "recomp", "backward", P_BWD, "recompute")
                _backward_rows(i, g, B, cdt, acc_dt, wdt, GA, stage_of, config, add)
        # ---- updates ------------------------------------------------------------------------
        opt = config.optimiser
        passes = OPTIMISER_PASSES[opt] + (1 if config.loss_scaling != 1 else 0)
        R = config.replication_factor if config.replicated_tensor_sharding else 1
        for s in range(S):
            for i in np.flatnonzero((stage_of == s) & (g["weight_elems"] > 0)):
                i = int(i)
                w = int(g["weight_elems"][i])
                e = -(-w // R)
                # this weight's per-update ops: the optimiser step, then (GA > 1) the accumulator
                # reset
                per_update = partial(
                    add,
                    layer=str(g["layer"][i]),
                    pass_=P_UPD,
                    stage=s,
                    fwd=i,
                    seg="update",
                    weight_elems=w,
                )
                per_update(
                    name=f"{g['name'][i]}/update",
                    type=f"{OPTIMISER_NAMES[opt]}Update",
                    family="optimiser",
                    role="upd",
                    elems=e,
                    passes=float(passes),
                    cross_tile=opt == "lamb",
                    stats=2 if opt == "lamb" else 0,
                    db=wdt,
                    flops=int(e * passes),
                    bytes_in=e * wdt * (2 + len(OPTIMISER_STATE[opt])),
                    bytes_out=e * wdt * (1 + len(OPTIMISER_STATE[opt])),
                )
                if GA > 1 and config.offload_accumulators != "on":
                    # the gradient accumulator is reset after the optimiser step (PopART
                    # AccumulatorZeroOp, an AccumulatorScaleOp of factor 0:
                    # willow/include/popart/op/accumulatorzero.hpp)
                    per_update(
                        name=f"{g['name'][i]}/accumulatorZero",
                        type="AccumulatorZero",
                        family="elementwise",
                        role="acczero",
                        elems=w,
                        passes=1.0,
                        db=acc_dt,
                        flops=0,
                        bytes_in=0,
                        bytes_out=w * acc_dt,
                    )
    cols = _columns(rows)
    return Lowered(cols=cols, stage_of_fwd=stage_of, recompute=recompute, loss_inputs=loss_inputs)


def _backward_rows(i, g, B, cdt, acc_dt, wdt, GA, stage_of, config, add) -> None:
    """Append the backward ops of forward op ``i``."""
    typ = str(g["type"][i])
    fam = str(g["family"][i])
    layer = str(g["layer"][i])
    name = str(g["name"][i])
    s = int(stage_of[i])
    w = int(g["weight_elems"][i])
    base = dict(
        layer=layer,
        pass_=P_BWD,
        stage=s,
        fwd=i,
        seg="backward",
        db=cdt,
    )
    if fam == "amp":
        batched = typ == "BatchMatMul"
        G = int(g["groups"][i]) * (B if batched else 1)
        M = int(g["m"][i]) * (1 if batched else B)
        K, N = int(g["k"][i]), int(g["n"][i])
        cin, kernel = int(g["cin"][i]), int(g["kernel"][i])
        macs = G * M * K * N
        common = dict(base, amp=True, family="amp", elems=0, passes=0.0, flops=2 * macs)
        if batched:
            # dA = dC x B^T and dB = A^T x dC: both operands are activations.
            add(
                **dict(
                    common,
                    name=f"{name}/gradA",
                    type=f"{typ}GradA",
                    role="gi",
                    G=G,
                    M=M,
                    K=N,
                    N=K,
                    bytes_in=(G * M * N + G * K * N) * cdt,
                    bytes_out=G * M * K * cdt,
                )
            )
            add(
                **dict(
                    common,
                    name=f"{name}/gradB",
                    type=f"{typ}GradB",
                    role="gi",
                    G=G,
                    M=K,
                    K=M,
                    N=N,
                    bytes_in=(G * M * K + G * M * N) * cdt,
                    bytes_out=G * K * N * cdt,
                )
            )
            return
        if int(g["in0"][i]) != INPUT:
            add(
                **dict(
                    common,
                    name=f"{name}/gradInput",
                    type=f"{typ}GradInput",
                    role="gi",
                    G=G,
                    M=M,
                    K=N * kernel,
                    N=cin,
                    cin=N,
                    kernel=kernel,
                    row_width=int(g["out_width"][i]),
                    a_dup=kernel,
                    b_weight=True,
                    bytes_in=(M * N + w) * cdt,
                    bytes_out=M * K * cdt // kernel,
                    wcast=w if config.weight_dtype != config.compute_dtype else 0,
                )
            )
        add(
            **dict(
                common,
                name=f"{name}/gradWeight",
                type=f"{typ}GradWeight",
                role="gw",
                G=G,
                M=K,
                K=M,
                N=N,
                cin=M,
                a_dup=kernel,
                bytes_in=(M * K // kernel + M * N) * cdt,
                bytes_out=w * wdt,
                weight_elems=w,
            )
        )
    elif float(g["bwd_passes"][i]) > 0:
        elems = B * max(int(g["out_elems"][i]), int(g["in_elems"][i]))
        stats = int(g["stats"][i]) * (B if typ == "AvgPool" else 1)
        add(
            **dict(
                base,
                name=f"{name}/grad",
                type=f"{typ}Grad",
                family=fam,
                role="bwd",
                elems=elems,
                passes=float(g["bwd_passes"][i]),
                cross_tile=bool(g["cross_tile"][i]),
                stats=stats,
                weight_elems=w,
                flops=round(elems * g["bwd_passes"][i]),
                bytes_in=(B * int(g["in_elems"][i]) + B * int(g["out_elems"][i])) * cdt,
                bytes_out=B * int(g["in_elems"][i]) * cdt + w * wdt,
            )
        )
    else:
        return
    if w > 0 and GA > 1:
        add(
            **dict(
                base,
                name=f"{name}/accumulate",
                type="AccumulateGrad",
                family="elementwise",
                role="acc",
                elems=w,
                passes=1.0,
                db=acc_dt,
                weight_elems=w,
                flops=w,
                bytes_in=w * (wdt + acc_dt),
                bytes_out=w * acc_dt,
            )
        )


COLUMNS = {
    "name": object,
    "type": object,
    "layer": object,
    "family": object,
    "pass_": np.uint8,
    "stage": np.int16,
    "fwd": np.int32,
    "seg": object,
    "role": object,
    "amp": bool,
    "G": np.int64,
    "M": np.int64,
    "K": np.int64,
    "N": np.int64,
    "cin": np.int64,
    "kernel": np.int64,
    "row_width": np.int64,
    "a_dup": np.int64,
    "b_weight": bool,
    "elems": np.int64,
    "passes": np.float64,
    "cross_tile": bool,
    "stats": np.int64,
    "db": np.int64,
    "weight_elems": np.int64,
    "flops": np.int64,
    "bytes_in": np.int64,
    "bytes_out": np.int64,
    "wcast": np.int64,
}


def _columns(rows: list[dict]) -> dict[str, np.ndarray]:
    # one C-level itemgetter per row, then the columns transposed with zip (a dict lookup per
    # row and column in Python took 3x as long)
    names = list(COLUMNS)
    if not rows:
        return {c: np.array([], dtype=dt) for c, dt in COLUMNS.items()}
    cols = zip(*map(operator.itemgetter(*names), rows))
    return {c: np.array(col, dtype=COLUMNS[c]) for c, col in zip(names, cols)}


SIGNATURE_COLUMNS = (
    "type",
    "role",
    "family",
    "stage",
    "G",
    "M",
    "K",
    "N",
    "cin",
    "kernel",
    "row_width",
    "a_dup",
    "b_weight",
    "elems",
    "passes",
    "cross_tile",
    "stats",
    "db",
    "weight_elems",
    "wcast",
)


def op_signatures(cols: dict[str, np.ndarray]) -> np.ndarray:
    """Id of each op's signature: ops with the same id are identical (outlining candidates)."""
    parts = []
    for key in SIGNATURE_COLUMNS:
        col = cols[key]
        if col.dtype == object:
            col = np.unique(col.astype(str), return_inverse=True)[1]
        elif col.dtype.kind == "f":
            col = np.round(col * 1000).astype(np.int64)
        parts.append(col.astype(np.int64))
    if not parts[0].size:
        return np.zeros(0, dtype=np.int64)
    return row_ids(parts)[0]


def row_ids(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For equal-length int64 columns: each row's id (the rank of its distinct value among
    the distinct rows, in lexicographic order: what ``np.unique(np.stack(parts, axis=1),
    axis=0, return_inverse=True)`` gives) and, per id, the first row holding it. One lexsort
    instead of ``np.unique(axis=0)``'s sort of a structured view (8x faster here)."""
    order = np.lexsort(parts[::-1])  # stable: equal rows keep their order
    new = np.zeros(len(order), bool)
    for col in parts:
        c = col[order]
        new[1:] |= c[1:] != c[:-1]
    ids = np.empty(len(order), np.int64)
    ids[order] = np.cumsum(new) if len(order) else new.astype(np.int64)
    new[:1] = True
    return ids, order[new]


__all__ = ["OPTIMISER_STATE", "Lowered", "assign_stages", "lower", "op_signatures", "row_ids"]
