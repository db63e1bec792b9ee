"""``analyse profile [RUN.toml] -o OUT.h5 [--option value ...]``: simulate a run, write a profile.

The run configuration comes from the TOML file (if given) with any ``--option`` flag overriding
it (every ``engine.config.RunConfig`` field has a flag: ``--model resnet50 --batch-size 16
--precision 16.16 ...``). The configuration is validated before anything runs: a bad one prints
one sentence naming the option and writes no file; ``--print-config`` prints the validated
configuration (TOML) and exits without simulating. An existing file at ``-o`` is only replaced
when it is an IPU profile (or with ``--force``); the write is atomic.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from analyser.cli.errors import CliError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse profile`` to ``parser``."""
    from analyser.cli.run_flags import add_config_arguments

    parser.add_argument("config", nargs="?", help="run configuration (.toml); flags override it")
    parser.add_argument(
        "-o", "--output", metavar="OUT.h5", help="profile to write (.h5; not with --print-config)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace OUT.h5 even when the existing file is not an IPU profile",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the full, validated run configuration (TOML) and exit: nothing is simulated "
        "or written",
    )
    parser.add_argument(
        "--ipu-config",
        metavar="ipu_config.json",
        help="optimum-graphcore's IPUConfig (layers_per_ipu, matmul_proportion, "
        "replication_factor, ...) read as run options, mapped as IPUConfig maps them to PopTorch "
        "options; over RUN.toml, under the flags (docs/engine.md)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar or summary line")
    parser.add_argument(
        "--max-memory",
        metavar="SIZE",
        help="memory the simulation may need, e.g. 8G or 512M (default: 80%% of the memory "
        "available; 0: no limit); a larger run is refused before any work",
    )
    add_config_arguments(parser)


def _check_output(out: Path, force: bool) -> None:
    from analyser.output import refuse_special

    if out.is_dir():
        raise CliError(f"output {out} is a directory; give a file name such as {out / 'run.h5'}.")
    refuse_special(out)
    if not out.parent.exists():
        raise CliError(f"output folder {out.parent} does not exist.")
    from profiles.atomic import virtual_folder

    virtual = virtual_folder(out.parent)
    if virtual:  # before simulating, not after
        raise CliError(f"cannot write profile {out}: {virtual}.")
    if out.exists() and not force and not _is_profile(out):
        raise CliError(
            f"{out} exists and is not an IPU profile; refusing to overwrite it (use --force)."
        )


def _is_profile(path: Path) -> bool:
    try:
        import h5py

        if not h5py.is_hdf5(path):
            return False
        with h5py.File(path, "r") as f:
            fmt = f.attrs.get("format")
        if isinstance(fmt, bytes):
            fmt = fmt.decode()
        from profiles.schema import FORMAT_NAME

        return fmt == FORMAT_NAME
    except OSError:
        return False


def _with_ipu_config(args: argparse.Namespace, base: dict) -> dict:
    """``base`` with the options of ``--ipu-config`` over it (its layers found in the model that
    the configuration and the flags name); the note of fields it cannot express on stderr."""
    import os
    import sys

    from engine import ipu_config
    from engine.config import is_onnx_path, parse_input_shape

    model_options = dict(base)
    for name in ipu_config.MODEL_OPTIONS:
        if hasattr(args, name):
            value = getattr(args, name)
            if name == "model" and is_onnx_path(value):
                value = os.path.abspath(Path(value).expanduser())
            model_options[name] = value
    if hasattr(args, "input_shapes"):
        shapes = dict(base.get("input_shapes") or {})
        shapes.update(dict(parse_input_shape(v) for v in args.input_shapes))
        model_options["input_shapes"] = shapes
    opts, note = ipu_config.load(args.ipu_config, model_options)
    if note and not args.quiet:
        print(note, file=sys.stderr)
    return {**base, **opts}


def run(args: argparse.Namespace) -> int:
    """Run ``analyse profile`` with the parsed ``args``; returns the exit code."""
    from analyser.cli.run_flags import config_from_args
    from engine.config import RunConfig

    base = RunConfig.from_toml(args.config).to_dict() if args.config else {}
    if getattr(args, "ipu_config", None):
        base = _with_ipu_config(args, base)
    config = config_from_args(args, base)  # ConfigError (one sentence) on a bad option
    if args.output is None and not args.print_config:
        raise CliError(
            "give the profile to write with -o OUT.h5 (or --print-config to print the "
            "configuration without simulating)."
        )
    out = None if args.print_config else Path(args.output)
    if out is not None:
        _check_output(out, args.force)
    import engine

    # model-level checks (split points naming no layer...) before any work or file
    config = engine.check(config).require()

    if out is None:  # --print-config: the resolved configuration, nothing simulated or written
        from analyser.literal import terminal

        print(terminal(config.to_toml()).rstrip("\n"))  # whole lines: the TOML stays readable
        return 0
    from rich.console import Console

    console = Console(stderr=True)

    from engine.resources import parse_size
    from engine.simulation import simulate_to_file

    limit = None if args.max_memory is None else parse_size(args.max_memory)
    if args.quiet:
        result = simulate_to_file(config, out, max_memory=limit)
    else:
        from analyser.cli._common import progress_bar

        with progress_bar(percent=True) as bar:
            task = bar.add_task("simulating", total=1.0)

            def progress(fraction: float, text: str) -> None:
                bar.update(task, completed=fraction, description=text)

            result = simulate_to_file(config, out, progress=progress, max_memory=limit)
    if not args.quiet:
        _summary_line(console, result, out)
    return 0


def _summary_line(console, result, out: Path) -> None:
    from analyser.core.units import fmt_bytes

    c = result.compiled
    peak = int((c.memory.total + c.memory.gaps).max())
    sram = c.target.sram_per_tile
    status = "fits" if result.fits else f"OUT OF MEMORY ({len(c.memory.oom_tiles):,} tiles)"
    parts = [
        f"wrote {out}",
        f"{c.config.model} on {c.num_ipus} x {c.target.display_name}"
        + (f" x {c.config.replication_factor} replicas" if c.config.replication_factor > 1 else "")
        + (f" ({c.config.system})" if c.config.system else ""),
        status,
        f"peak tile {fmt_bytes(peak)} of {fmt_bytes(sram)}",
    ]
    ex = result.execution
    if ex is not None:
        attrs = ex.attrs
        parts.append(f"{int(attrs.get('total_cycles', 0)):,} cycles")
        if attrs.get("throughput"):
            parts.append(f"{float(attrs['throughput']):,.1f} samples/s")
    console.print("; ".join(parts) + ".", markup=False, highlight=False)
