"""``analyse calibrate-host``: measure the host transforms on this machine, write a host profile.

The engine's host model (docs/engine.md, "Host model") costs a run's data pipeline from a host
profile: per transform, a fixed cost per call and a cost per element and dtype, plus the
DataLoader's own overhead per sample, on one core. This command measures them here: with torch
and torchvision installed (``pip install -e ".[torch]"``) the real transforms in a real
DataLoader, else NumPy + Pillow imitations (labelled so in the profile). It writes the TOML that a
run names with ``host_profile = "host.toml"``, optionally scaled to another CPU of
``engine/data/cpus.toml`` (``--scale-to``: a CPU or a system, whose host server CPU is used).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from analyser.cli.errors import CliError

#: First line of every host profile this command writes (so it may replace its own files only).
MARKER = "# Host profile written by analyse calibrate-host"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``analyse calibrate-host`` to ``parser``."""
    parser.description = (
        "Measure the per-transform host costs (flip, resize, to_tensor, convert_dtype, "
        "normalise, decode_jpeg, random_crop, ..., and the token path of pre-tokenised ids) on this "
        "machine and write a host profile "
        "TOML that run configurations can name with host_profile."
    )
    parser.add_argument(
        "-o", "--output", default="host.toml", help="host profile to write (default host.toml)"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=4.0,
        help="measurement budget (default 4; more is steadier): about that many CPU seconds of "
        "timing with the imitation; with torch, 2.5 batches of 64 per case per second (at least "
        "4) and 2 MB of images per case per second (1 to 8 MB), so 4 takes about 10 CPU seconds",
    )
    parser.add_argument(
        "--method",
        choices=("auto", "torch", "imitation"),
        default="auto",
        help="torch: the real torchvision transforms in a DataLoader; imitation: NumPy + Pillow "
        "imitations; auto (default): torch when installed",
    )
    parser.add_argument(
        "--cpu",
        metavar="KEY",
        help="this machine's CPU in engine/data/cpus.toml when the OS reports a generic name "
        "(as under a hypervisor); needed for --scale-to",
    )
    parser.add_argument(
        "--scale-to",
        metavar="CPU_OR_SYSTEM",
        help="write the profile scaled to another CPU of engine/data/cpus.toml (or to a "
        "system's host server CPU, e.g. mk2-pod64) by the two CPUs' per-core figures",
    )
    parser.add_argument("--force", action="store_true", help="replace a file analyse did not write")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")


def _v(value) -> str:
    """One TOML value: strings as JSON strings (valid TOML basic strings), numbers as repr."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_v(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_v(v) for v in value) + "]"
    return json.dumps(str(value))


def to_toml(profile: dict) -> str:
    """The host profile as TOML (engine.host.profile.HostProfile reads it back)."""
    lines = [
        MARKER + f" on {profile['measured']}.",
        "# Per-sample costs on one core: loader_us_per_sample + for each transform",
        "# fixed_us + ns_per_element[dtype] x elements (docs/engine.md, Host model).",
    ]
    for key in ("name", "cpu", "cpu_ref", "measured", "method", "measured_with"):
        if key in profile:
            lines.append(f"{key} = {_v(str(profile[key]))}")
    lines.append(f"cores = {int(profile['cores'])}")
    if "cpu_float16" in profile:
        lines.append(f"cpu_float16 = {_v(list(profile['cpu_float16']))}")
    if "loader_us_per_sample" in profile:
        lines.append(f"loader_us_per_sample = {float(profile['loader_us_per_sample'])!r}")
    for key in ("libraries", "load"):
        if profile.get(key):
            lines.append(f"{key} = {_v(profile[key])}")
    if profile.get("scaled_from"):
        lines += ["", "[scaled_from]"]
        lines += [f"{k} = {_v(v)}" for k, v in profile["scaled_from"].items()]
    for name, t in profile["transforms"].items():
        per = ", ".join(f"{d} = {float(v)!r}" for d, v in t["ns_per_element"].items())
        lines += ["", f"[transforms.{name}]", f"fixed_us = {float(t['fixed_us'])!r}"]
        lines.append(f"ns_per_element = {{ {per} }}")
    for check in profile.get("checks") or []:
        lines += ["", "[[checks]]"] + [f"{k} = {_v(v)}" for k, v in check.items()]
    return "\n".join(lines) + "\n"


def _measure(args: argparse.Namespace) -> dict:
    """Run the measurement (with a progress bar unless quiet); one sentence on a bad choice."""
    from engine.errors import ConfigError
    from engine.host.calibrate import calibrate

    def warn(sentence: str) -> None:
        print(f"note: {sentence}", file=sys.stderr)

    def go(progress=None):
        try:
            return calibrate(
                args.seconds, progress, method=args.method, cpu_ref=args.cpu, warn=warn
            )
        except ImportError as exc:
            raise CliError(
                f"calibrate-host --method torch needs torch and torchvision ({exc}; "
                'pip install -e ".[torch]"); use --method imitation without them.'
            ) from None
        except ConfigError as exc:
            raise CliError(f"--cpu: {exc}") from None

    if args.quiet:
        return go()
    from analyser.cli._common import progress_bar

    with progress_bar() as bar:
        task = bar.add_task("measuring", total=1)

        def progress(done: int, total: int, text: str) -> None:
            bar.update(task, completed=done, total=total, description=f"measuring {text}")

        return go(progress)


def _scale_target(args: argparse.Namespace) -> str | None:
    """The CPU key ``--scale-to`` names (a CPU, or a system's host server CPU), checked before
    measuring, with this machine's CPU (``--cpu`` or the OS's model name) known."""
    from engine.host.calibrate import cpu_name
    from engine.host.cpus import cpus, identify
    from engine.systems import systems

    if args.cpu is not None and args.cpu not in cpus():
        raise CliError(
            f"--cpu: {args.cpu!r} is not a CPU of engine/data/cpus.toml; known CPUs: "
            f"{', '.join(cpus())}."
        )
    if not args.scale_to:
        return None
    key = args.scale_to
    if key not in cpus():
        wanted = key.strip().lower().replace("ipu-pod", "mk2-pod")
        if wanted not in systems():
            raise CliError(
                f"--scale-to: {args.scale_to!r} is neither a CPU of engine/data/cpus.toml "
                f"({', '.join(cpus())}) nor a system ({', '.join(systems())})."
            )
        key = systems()[wanted].host_cpu
    if not (args.cpu or identify(cpu_name())):
        raise CliError(
            f"--scale-to needs this machine's CPU in engine/data/cpus.toml; the OS reports "
            f"{cpu_name()!r}: name it with --cpu ({', '.join(cpus())})."
        )
    return key


def _print_summary(profile: dict, out: Path) -> None:
    from rich.table import Table

    from analyser.cli._common import console as make_console

    table = Table(title=f"{profile['cpu']}: cost on one core", title_justify="left")
    table.add_column("transform")
    table.add_column("fixed (us)", justify="right")
    table.add_column("per element (ns)", justify="right")
    table.add_row("loader (per sample)", f"{profile.get('loader_us_per_sample', 0.0):,.2f}", "")
    for name, t in profile["transforms"].items():
        per = ", ".join(f"{d} {v:.3g}" for d, v in t["ns_per_element"].items())
        table.add_row(name, f"{t['fixed_us']:,.2f}", per)
    console = make_console()
    console.print(table)
    console.print(f"method: {profile['method']}")
    for c in profile.get("checks") or []:
        console.print(
            f"check, {' + '.join(c['transforms'])} ({c['dtype']}): measured "
            f"{c['measured_us']:,.1f} us per sample, sum of the parts {c['modelled_us']:,.1f} us"
        )
    console.print(
        f"wrote {out}; use it with host_profile = {json.dumps(str(out))} in a run "
        "configuration (or --host-profile)."
    )


def run(args: argparse.Namespace) -> int:
    """Run ``analyse calibrate-host`` with the parsed ``args``; returns the exit code."""
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
    scale_to = _scale_target(args)
    profile = _measure(args)
    if scale_to:
        from engine.host.profile import HostProfile, scale_profile

        profile = scale_profile(HostProfile(**profile), scale_to).model_dump(exclude_none=True)
    text = to_toml(profile)
    from engine.host.profile import _parse

    _parse(text, repr(str(out)))  # what we write must read back
    with atomic_output(out) as fh:
        fh.write(text)
    if not args.quiet:
        _print_summary(profile, out)
    return 0
