"""Cycle costs of what execute adds to the compiled program: links, collectives, host I/O.

Every figure comes from the target (``engine.targets``, each figure with its public source) through
:class:`engine.execute.plan.Links`, or from the host model (:class:`HostModel`, RunConfig
options). Functions take and return numpy arrays where that helps vectorise.
"""

from __future__ import annotations

import math

import numpy as np

from engine.execute.plan import ExecutionPlan, HostModel, Links


def transfer_cycles(nbytes, bytes_per_cycle: float, setup: int = 0):
    """ceil(bytes / rate) + setup; zero bytes cost nothing."""
    b = np.asarray(nbytes, dtype=np.float64)
    c = np.ceil(b / bytes_per_cycle) + setup
    return np.where(b > 0, c, 0).astype(np.int64)


def global_exchange_cycles(nbytes, links: Links):
    """Inter-IPU exchange of ``nbytes`` over the IPU-Links joining two stages."""
    rate = links.ipu_link_bytes_per_cycle * max(1, links.links_between_stages)
    return transfer_cycles(nbytes, rate, links.exchange_setup_cycles)


def _ring(nbytes, n: int, rate: float, phases: int, per_step: float):
    """``phases`` rings of ``n - 1`` steps, each moving ``bytes / n`` at ``rate`` B/cycle."""
    if n <= 1:
        return np.zeros_like(nbytes)
    data = np.ceil(phases * (n - 1) / n * nbytes / rate)
    return data + phases * (n - 1) * per_step


def ring_allreduce_cycles(nbytes, replicas: int, links: Links, phases: int = 2):
    """All-reduce of ``nbytes`` per IPU across ``replicas`` (``phases=2``: a reduce-scatter and
    an all-gather; ``phases=1``: one of them, for replicated tensor sharding), hierarchical as
    PopLibs' collectives over a Pod: rings over IPU-Links among the replicas of one Pod64 rack
    (``R / racks`` of them), and between racks a ring over the GW-Links on the ``1 / (R /
    racks)`` share each IPU holds after the in-rack reduce-scatter. Every ring step pays an
    external sync and an exchange setup."""
    R = int(replicas)
    b = np.asarray(nbytes, dtype=np.float64)
    if R <= 1:
        return np.zeros_like(b, dtype=np.int64)
    racks = max(1, min(int(links.racks), R))
    r_in = max(1, R // racks)
    per_step = links.external_sync_cycles + links.exchange_setup_cycles
    total = _ring(b, r_in, links.ipu_link_bytes_per_cycle, phases, per_step)
    if racks > 1:
        gw = links.gw_link_bytes_per_cycle or links.ipu_link_bytes_per_cycle
        total = total + _ring(b / r_in, racks, gw, phases, per_step)
    return np.where(b > 0, total, 0).astype(np.int64)


def host_prep_seconds(plan: ExecutionPlan) -> float:
    """Host preparation of one host call's samples: each host server prepares its share
    (``instances``), ``parallel`` processes at a time."""
    h = plan.host
    per_instance = plan.samples_per_call / max(1, h.instances)
    return h.per_sample_s * per_instance / max(1, h.parallel)


def host_wait_seconds(plan: ExecutionPlan, device_seconds: float) -> float:
    """How long the device is idle waiting for the host per host call (steady state).

    * preparation in the main process (``sync`` loader without worker processes, PyTorch's
      ``num_workers=0``): the call's samples are prepared between device calls, then the call's
      round trip: ``prep + overhead``;
    * overlapped (``async`` / ``async-rebatched``: a separate process; or worker processes that
      prefetch): the next call is prepared while the device runs this one, so only the part of
      the preparation longer than the device time shows: ``max(0, prep - device) + overhead``.
    """
    h: HostModel = plan.host
    prep = host_prep_seconds(plan)
    hidden = max(0.0, prep - device_seconds) if h.overlapped else prep
    return hidden + h.call_overhead_s


def stream_begin_cycles(links: Links, host: HostModel, overlap_cycles: float) -> int:
    """StreamCopyBegin of a per-micro-batch stream copy: a sync with the host plus the host's
    latency to service the request, less what a prefetch depth ``d`` hides: ``d - 1`` buffers are
    filled while the device computes (``overlap_cycles`` per buffer)."""
    latency = host.stream_latency_s * links.clock_hz
    hidden = max(0, host.prefetch_depth - 1) * overlap_cycles
    return int(links.external_sync_cycles + math.ceil(max(0.0, latency - hidden)))


def external_sync_cycles(num_ipus: int, seconds_per_hop: float, clock_hz: float) -> int:
    """External sync across ``num_ipus`` IPUs: 15 ns per hop, hops = 1 + (IPUs / 2) / 2 in
    integer arithmetic, doubled for the round trip (PopLibs' test utilities; this reproduces their
    figures: 48 cycles for 2 IPUs and 240 for 16 IPUs at 1.6 GHz)."""
    hops = 1 + (int(num_ipus) // 2) // 2
    return round(2 * hops * seconds_per_hop * clock_hz)
