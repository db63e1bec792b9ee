"""Benchmark: ResNet-50 on a Bow Pod64 (64 replicas, 4 host servers), end to end.

Runs ``analyse profile assets/runs/resnet50-bow-pod64.toml`` in fresh processes (the way a user
runs it: import, compile, execute, write the profile) and prints the median wall time, the
simulated throughput (host-inclusive and device-only) and the host model's figures. Target:
under 5 s end to end on a 2-core machine.

Usage: python benchmarks/bench_engine_pod.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[1] / "assets" / "runs" / "resnet50-bow-pod64.toml"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    times = []
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "pod64.h5"
        for _ in range(args.runs):
            out.unlink(missing_ok=True)
            t0 = time.perf_counter()
            subprocess.run(
                [
                    str(Path(sys.executable).with_name("analyse")),
                    "profile",
                    str(CONFIG),
                    "-o",
                    str(out),
                ],
                check=True,
                capture_output=True,
            )
            times.append(time.perf_counter() - t0)
        from profiles import open_profile

        with open_profile(out) as p:
            ex = p.execution_totals()
            meta_replicas = p.replicas
    host = ex.get("host_model") or {}
    if isinstance(host, str):
        import json

        host = json.loads(host)
    print(f"config: {CONFIG.name} ({meta_replicas} replicas)")
    print(
        f"end to end (analyse profile, fresh process): median {statistics.median(times):.2f} s "
        f"over {args.runs} runs ({', '.join(f'{t:.2f}' for t in times)}); target < 5 s"
    )
    print(
        f"throughput: {ex['throughput']:,.0f} images/s host-inclusive, "
        f"{ex.get('device_throughput', 0):,.0f} images/s device only"
    )
    if host:
        print(
            f"host: {host['per_sample_us']:.1f} us per image on one core, {host['parallel']} "
            f"processes on each of {host['host_servers']} host servers, "
            f"{host['prepare_ms_per_call']:.2f} ms to prepare a call vs "
            f"{host['device_ms_per_call']:.2f} ms of device time"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
