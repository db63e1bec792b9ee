"""A benchmark's measurement repeated in fresh processes (each with its own imports and peak
resident memory), for the scripts that take ``--one NAME`` to print one measurement as JSON."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def medians(script: str, which: str, repeats: int) -> dict[str, float]:
    """The median of each figure ``script --one which`` prints (JSON, its last line) over
    ``repeats`` fresh processes; a failing run ends the benchmark with its error output."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, script, "--one", which], capture_output=True, text=True, cwd=ROOT
        )
        if out.returncode:
            sys.exit(out.stderr[-3000:])
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}
