"""``analyse model-info MODEL.onnx``: inputs, outputs, parameters, FLOPs per sample, layers,
operator coverage and suggested split points for N IPUs (balanced by memory and cycles).

Nothing is written. Bad files give one sentence naming the file (exit 2); see docs/onnx.md.
"""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse model-info`` to ``parser``."""
    parser.add_argument("model", metavar="MODEL.onnx", help="the ONNX model file")
    parser.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=DIMS",
        help="bind graph input NAME's shape, e.g. input_ids=1x128 (repeatable)",
    )
    parser.add_argument(
        "--ipus",
        default="2,4",
        metavar="N[,N...]",
        help="IPU counts to suggest split points for (comma-separated; default 2,4)",
    )
    parser.add_argument(
        "--unknown-ops",
        choices=("error", "elementwise"),
        default="error",
        help="cost operators the engine does not know as element-wise ops (default: error)",
    )
    parser.add_argument("--json", action="store_true", help="print the facts as JSON")


def run(args: argparse.Namespace) -> int:
    """Run ``analyse model-info`` with the parsed ``args``; returns the exit code."""
    from pathlib import Path

    from analyser.cli.errors import CliError
    from engine.config import parse_input_shape

    try:
        ipus = [int(x) for x in str(args.ipus).split(",") if x.strip()]
    except ValueError:
        ipus = []
    if not ipus or any(k < 2 or k > 64 for k in ipus):
        raise CliError(f"--ipus: give IPU counts from 2 to 64, such as 2,4; got {args.ipus!r}.")
    shapes = dict(parse_input_shape(t) for t in args.input_shape)
    if not str(args.model).lower().endswith(".onnx"):
        raise CliError(f"{args.model!r} is not an .onnx file; model-info reads ONNX models.")
    from engine.onnx.info import model_info

    facts = model_info(
        Path(args.model).resolve(), input_shapes=shapes, ipus=ipus, unknown_ops=args.unknown_ops
    )
    info = facts["info"]
    if args.json:
        out = {
            "file": info.path,
            "opset": info.opset,
            "producer": info.producer,
            "inputs": [{"name": n, "shape": list(s), "dtype": d} for n, s, d in info.inputs],
            "outputs": [{"name": n, "shape": list(s), "dtype": d} for n, s, d in info.outputs],
            "parameters": facts["params"],
            "flops_per_sample": facts["flops_per_sample"],
            "nodes": info.nodes,
            "operations": facts["operations"],
            "views": info.views,
            "constants": info.constants,
            "layers": facts["layers"],
            "op_counts": info.op_counts,
            "op_outcomes": info.outcomes,
            "costed_as_elementwise": info.costed_as_elementwise,
            "splits": [
                {
                    "ipus": s.ipus,
                    "split_points": s.points,
                    "cycles_share": s.cycles_share,
                    "memory_share": s.memory_share,
                }
                for s in facts["splits"]
            ],
        }
        print(json.dumps(out, indent=2))
        return 0
    from rich.table import Table

    from analyser.cli._common import console

    con = console()

    def shape(s):
        return "x".join(map(str, s)) if s else "scalar"

    con.print(f"[bold]{info.path}[/bold]", highlight=False)
    con.print(f"opset {info.opset}; producer {info.producer or 'unknown'}", highlight=False)
    t = Table(title="Inputs and outputs (batch dimension bound to 1: per sample)")
    for c in ("", "name", "shape", "dtype"):
        t.add_column(c)
    for n, s, d in info.inputs:
        t.add_row("input", n, shape(s), d)
    for n, s, d in info.outputs:
        t.add_row("output", n, shape(s), d)
    con.print(t)
    g = facts["graph"]
    t = Table(title="Model")
    t.add_column("")
    t.add_column("value", justify="right")
    t.add_row("parameters", f"{facts['params']:,}")
    t.add_row("FLOPs per sample (forward)", f"{facts['flops_per_sample']:,}")
    t.add_row("ONNX nodes", f"{info.nodes:,}")
    t.add_row("operations costed", f"{facts['operations']:,}")
    t.add_row("views (no program)", f"{info.views:,}")
    t.add_row("constants (folded)", f"{info.constants:,}")
    t.add_row("layers (with prefixes)", f"{facts['layers']:,}")
    top = facts["top_layers"]
    t.add_row("top-level layers", ", ".join(top[:8]) + (" ..." if len(top) > 8 else ""))
    con.print(t)
    t = Table(title="Operator coverage")
    t.add_column("ONNX operator")
    t.add_column("nodes", justify="right")
    t.add_column("engine")
    from engine.onnx import ops

    for op, cnt in sorted(info.op_counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if op in info.costed_as_elementwise:
            how = "[yellow]unknown: costed as element-wise[/yellow]"
        elif info.outcomes.get(op):
            # what the import did with this operator's nodes: costed, views, folded constants
            words = {
                "costed": "costed",
                "view": "view",
                "weight": "view of a weight",
                "constant": "constant (folded)",
            }
            done = info.outcomes[op]
            parts = [(words[k], done[k]) for k in words if done.get(k)]
            how = parts[0][0] if len(parts) == 1 else ", ".join(f"{w} {n:,}" for w, n in parts)
        elif op in ops.CONSTANTS:
            how = "constant (folded)"
        elif op in ops.VIEWS:
            how = "view"
        elif op in ops.TRANSLATORS:
            how = "costed"
        else:
            how = "constant / view"
        t.add_row(op, f"{cnt:,}", how)
    con.print(t)
    if facts["splits"]:
        t = Table(title="Suggested split points (balanced by memory and cycles)")
        t.add_column("IPUs", justify="right")
        # whole layer names, wrapped between them (a name longer than the column is folded)
        t.add_column("split points", overflow="fold")
        t.add_column("cycles per IPU")
        t.add_column("memory per IPU")
        for s in facts["splits"]:
            t.add_row(
                str(s.ipus),
                ", ".join(s.points),
                " / ".join(f"{x:.0%}" for x in s.cycles_share),
                " / ".join(f"{x:.0%}" for x in s.memory_share),
            )
        con.print(t)
        first = facts["splits"][0]
        shapes_flags = "".join(
            f" --input-shape {k}={'x'.join(map(str, v))}" for k, v in shapes.items()
        )
        con.print(
            f"e.g. analyse profile --model {info.path}{shapes_flags} --strategy pipelined "
            f"--ipus {first.ipus} --split-points {','.join(first.points)} "
            f"--ga {2 * first.ipus - 1} -o run.h5",
            highlight=False,
            markup=False,
            soft_wrap=True,  # one line, ready to copy (the terminal wraps it, not us)
        )
    else:
        con.print("No split points: the model has too few layers for the IPU counts asked.")
    del g
    return 0
