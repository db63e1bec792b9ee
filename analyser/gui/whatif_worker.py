"""Subprocess entry point of a background re-simulation (no Qt).

``python -m analyser.gui.whatif_worker CONFIG.json OUT.h5`` validates the run configuration,
runs the embedded engine into ``OUT.h5`` and reports on stdout, one JSON object per line:
``{"progress": 0.42, "message": "..."}`` while it runs, then ``{"done": "OUT.h5", "status":
"ok"|"oom"}`` or ``{"error": "one sentence"}`` (exit code 1). Running the engine in its own
process means "Cancel" in the GUI really stops it (the process is killed).
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path


def _say(**kw) -> None:
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def _progress(*args, **kwargs) -> None:
    """Accepts the engine's progress callback in any of its shapes: (fraction[, message]),
    (done, total[, message]) or keyword arguments."""
    nums = [a for a in args if isinstance(a, int | float) and not isinstance(a, bool)]
    text = " ".join(str(a) for a in args if isinstance(a, str)) or str(kwargs.get("message", ""))
    frac = kwargs.get("fraction")
    if frac is None and len(nums) >= 2 and nums[1]:
        frac = nums[0] / nums[1]
    elif frac is None and nums:
        frac = nums[0]
    if frac is not None:
        frac = max(0.0, min(1.0, float(frac)))
    _say(progress=frac, message=text)


def run(config_path: str, out_path: str) -> int:
    try:
        from engine import simulate_to_file
        from engine.config import RunConfig
        from profiles.errors import UserFacingError
    except Exception as exc:  # the engine is not available in this build
        _say(error=f"the engine cannot be loaded ({exc}).")
        return 1
    try:
        data = json.loads(Path(config_path).read_text(encoding="utf-8"))
        cfg = RunConfig.from_dict(data)
        _say(progress=0.0, message="compiling")
        simulate_to_file(cfg, out_path, progress=_progress)
        from profiles import open_profile

        with open_profile(out_path) as p:
            status = str(p.status)
        _say(progress=1.0, message="done")
        _say(done=str(out_path), status=status)
        return 0
    except UserFacingError as exc:
        _say(error=str(exc))
        return 1
    except Exception as exc:  # report, never a traceback in the GUI
        _say(error=f"the simulation failed: {type(exc).__name__}: {exc}")
        return 1


def _on_terminate(_signum, _frame) -> None:
    # unwind normally so the profile writer aborts and removes its temporary file
    raise SystemExit(143)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _on_terminate)
    if len(argv) != 2:
        _say(error="usage: python -m analyser.gui.whatif_worker CONFIG.json OUT.h5")
        return 2
    return run(argv[0], argv[1])


if __name__ == "__main__":
    sys.exit(main())
