"""``analyse calibrate-host``: measure the host transforms on this machine, write a host profile.

The engine's host model (docs/engine.md, "Host model") costs a run's data pipeline from a host
profile: per transform, a fixed cost per call and a cost per element and dtype, on one core. This
command measures them here (NumPy + Pillow implementations of the transforms, a few seconds) and
writes the TOML that a run names with ``host_profile = "host.toml"``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from analyser.cli.errors import CliError

#: First line of every host profile this command writes (so it may replace its own files only).
MARKER = "# Host profile written by analyse calibrate-host"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Measure the per-transform host costs (flip, resize, to_tensor, convert_dtype, "
        "normalise, decode_jpeg, random_crop, ...) on this machine and write a host profile "
        "TOML that run configurations can name with host_profile."
    )
    parser.add_argument(
        "-o", "--output", default="host.toml", help="host profile to write (default host.toml)"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=4.0,
        help="measurement budget in seconds (default 4; more is steadier)",
    )
    parser.add_argument("--force", action="store_true", help="replace a file analyse did not write")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")


def to_toml(profile: dict) -> str:
    """The host profile as TOML (engine.host.profile.HostProfile reads it back)."""
    lines = [
        MARKER + f" on {profile['measured']}.",
        "# Per-transform costs on one core: fixed_us per call + ns_per_element[dtype] x elements.",
    ]
    for key in ("name", "cpu", "measured", "method"):
        lines.append(f"{key} = {json.dumps(str(profile[key]))}")
    lines.append(f"cores = {int(profile['cores'])}")
    for name, t in profile["transforms"].items():
        per = ", ".join(f"{d} = {float(v)!r}" for d, v in t["ns_per_element"].items())
        lines += ["", f"[transforms.{name}]", f"fixed_us = {float(t['fixed_us'])!r}"]
        lines.append(f"ns_per_element = {{ {per} }}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from analyser.output import atomic_output

    if not (0.5 <= args.seconds <= 600):
        raise CliError(f"--seconds must be between 0.5 and 600; got {args.seconds:g}.")
    out = Path(args.output)
    if out.is_dir():
        raise CliError(
            f"output {out} is a directory; give a file name such as {out / 'host.toml'}."
        )
    if not out.parent.exists():
        raise CliError(f"output folder {out.parent} does not exist.")
    from analyser.output import refuse_special

    refuse_special(out)
    if out.exists() and not args.force:
        try:
            head = out.read_bytes()[:200]
        except OSError:
            head = b""
        if not head.startswith(MARKER.encode()):
            raise CliError(
                f"output {out} exists and was not written by analyse calibrate-host; refusing "
                "to overwrite it (use --force)."
            )
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise CliError("calibrate-host needs Pillow (pip install pillow).") from None
    from engine.host.calibrate import calibrate

    if args.quiet:
        profile = calibrate(args.seconds)
    else:
        from analyser.cli._common import progress_bar

        with progress_bar() as bar:
            task = bar.add_task("measuring", total=1)

            def progress(done: int, total: int, text: str) -> None:
                bar.update(task, completed=done, total=total, description=f"measuring {text}")

            profile = calibrate(args.seconds, progress)
    text = to_toml(profile)
    from engine.host.profile import _parse

    _parse(text, repr(str(out)))  # what we write must read back
    with atomic_output(out) as fh:
        fh.write(text)
    if not args.quiet:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{profile['cpu']}: cost on one core", title_justify="left")
        table.add_column("transform")
        table.add_column("fixed (us)", justify="right")
        table.add_column("per element (ns)", justify="right")
        for name, t in profile["transforms"].items():
            per = ", ".join(f"{d} {v:.3g}" for d, v in t["ns_per_element"].items())
            table.add_row(name, f"{t['fixed_us']:.2f}", per)
        Console().print(table)
        Console().print(
            f"wrote {out}; use it with host_profile = {json.dumps(str(out))} in a run "
            "configuration (or --host-profile)."
        )
    return 0
