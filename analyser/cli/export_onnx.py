"""``analyse export-onnx --model resnet50 -o r50.onnx``: write a zoo model as ONNX.

The zoo model is built with the run options given (``--image-size``, ``--seq-length``,
``--num-classes``...); its weights are zero-filled, in ``OUT.onnx.data`` beside it. Importing the
file back gives the zoo model's parameters, FLOPs, memory and cycles (docs/onnx.md). An existing
OUT is only replaced when analyse wrote it (or with ``--force``); writes are atomic.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse export-onnx`` to ``parser``."""
    parser.add_argument(
        "--model",
        required=True,
        metavar="{mlp,resnet50,resnet101,bert-base,bert-large}",
        help="zoo model to export",
    )
    parser.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="file to write")
    parser.add_argument(
        "--force", action="store_true", help="replace OUT even if analyse did not write it"
    )
    for flag, help_text in (
        ("--image-size", "image height = width for ResNets (default 224)"),
        ("--image-channels", "input channels for ResNets (default 3)"),
        ("--num-classes", "classes of the classifier head (default per model)"),
        ("--seq-length", "BERT sequence length (default 128)"),
        ("--vocab-size", "BERT vocabulary size (default 30522)"),
    ):
        parser.add_argument(flag, metavar="N", default=argparse.SUPPRESS, help=help_text)


def run(args: argparse.Namespace) -> int:
    """Run ``analyse export-onnx`` with the parsed ``args``; returns the exit code."""
    from analyser.cli.errors import CliError
    from engine.config import MODEL_NAMES, RunConfig

    if args.model not in MODEL_NAMES:
        raise CliError(
            f"--model: export-onnx writes zoo models ({', '.join(MODEL_NAMES)}); got {args.model!r}."
        )
    data = {"model": args.model}
    for key in ("image_size", "image_channels", "num_classes", "seq_length", "vocab_size"):
        if hasattr(args, key):
            data[key] = getattr(args, key)
    config = RunConfig.from_dict(data)
    out = Path(args.output)
    if out.suffix.lower() != ".onnx":
        raise CliError(f"output {out} must end in .onnx.")
    if out.is_dir():
        raise CliError(
            f"output {out} is a directory; give a file name such as {out / 'model.onnx'}."
        )
    if not out.parent.exists():
        raise CliError(f"output folder {out.parent} does not exist.")
    from profiles.atomic import virtual_folder

    virtual = virtual_folder(out.parent)
    if virtual:
        raise CliError(f"cannot write {out}: {virtual}.")
    from engine.onnx.export import export_zoo, written_by_analyse

    data_file = out.with_name(out.name + ".data")
    from analyser.output import refuse_special

    for p in (out, data_file):
        refuse_special(p)
        if p.exists() and not args.force and not written_by_analyse(out):
            raise CliError(
                f"{p} exists and was not written by analyse export-onnx; refusing to overwrite "
                "it (use --force)."
            )
    path, data_path = export_zoo(config, out)
    print(f"wrote {path} and {data_path.name} ({config.model}, zero-filled weights).")
    return 0
