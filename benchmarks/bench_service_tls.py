"""What the embedded cluster's TLS costs. Prints figures; asserts nothing.

    python benchmarks/bench_service_tls.py [--workers 2] [--repeat 3]

For each repeat, alternately with and without TLS: the credentials (``Security.temporary()``,
an RSA-2048 key and a self-signed certificate), the start of a ``LocalCluster`` like the
simulation service's (N single-threaded worker processes, loopback, the service's preload) up
to a connected client, 50 tiny tasks one after the other (the per-task round trip), and the
close. The "tls" start includes the credentials. Run from a guarded ``__main__`` (the
workers are spawned).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _one(tls: bool, workers: int) -> dict[str, float]:
    from distributed import Client, LocalCluster
    from distributed.security import Security

    t0 = time.perf_counter()
    security = Security.temporary() if tls else None
    t_cred = time.perf_counter() - t0
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        protocol="tls://" if tls else "tcp://",
        security=security,
        scheduler_port=0,
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        silence_logs=logging.CRITICAL,
        preload=["analyser.sim.service.worker"],
    )
    client = Client(cluster, set_as_default=False)
    t_start = time.perf_counter() - t0
    t1 = time.perf_counter()
    for i in range(50):
        client.submit(abs, -i, pure=False).result()
    t_rt = (time.perf_counter() - t1) / 50
    t2 = time.perf_counter()
    client.close()
    cluster.close()
    return {
        "credentials": t_cred,
        "start": t_start,
        "round_trip": t_rt,
        "close": time.perf_counter() - t2,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.repeat):
        for tls in (False, True):
            runs[tls].append(_one(tls, args.workers))
    print(f"workers {args.workers}, repeats {args.repeat}, load {os.getloadavg()[0]:.1f}")
    print(f"{'':6} {'credentials':>12} {'start':>8} {'task round trip':>16} {'close':>8}")
    for tls in (False, True):
        med = {k: statistics.median(r[k] for r in runs[tls]) for k in runs[tls][0]}
        print(
            f"{'tls' if tls else 'plain':6} {med['credentials'] * 1e3:10.0f} ms "
            f"{med['start']:6.2f} s {med['round_trip'] * 1e3:13.2f} ms {med['close']:6.2f} s"
        )


if __name__ == "__main__":
    main()
