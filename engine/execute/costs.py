"""Cycle costs of what execute adds to the compiled program: links, collectives, host I/O.

Every figure comes from the target (``engine.targets``, sourced in ipu-facts.md) through
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


def ring_allreduce_cycles(nbytes, replicas: int, links: Links, phases: int = 2):
    """Ring all-reduce of ``nbytes`` per IPU across ``replicas`` (ipu-facts.md: ring collectives
    over IPU-Links). A reduce-scatter and an all-gather (``phases=2``) each take ``R - 1`` steps
    moving ``bytes / R``; every step pays an external sync and an exchange setup. ``phases=1``
    gives a lone reduce-scatter or all-gather (replicated tensor sharding)."""
    R = int(replicas)
    b = np.asarray(nbytes, dtype=np.float64)
    if R <= 1:
        return np.zeros_like(b, dtype=np.int64)
    steps = phases * (R - 1)
    data = np.ceil(phases * (R - 1) / R * b / links.ipu_link_bytes_per_cycle)
    per_step = links.external_sync_cycles + links.exchange_setup_cycles
    return np.where(b > 0, data + steps * per_step, 0).astype(np.int64)


def host_prep_seconds(plan: ExecutionPlan) -> float:
    """Host preparation time of one host call's samples, spread over the loader's workers."""
    h = plan.host
    return h.per_sample_s * plan.samples_per_call / max(1, h.workers)


def host_wait_seconds(plan: ExecutionPlan, device_seconds: float) -> float:
    """How long the device waits for the host at the start of a host call (steady state).

    * ``sync``: the loader prepares the call's samples while the device waits, then the call's
      round trip: ``prep + overhead``.
    * ``async`` / ``async-rebatched``: workers prepare the next call while the device runs this
      one, so only the part of the preparation longer than the device time shows:
      ``max(0, prep - device) + overhead``. (Rebatching changes how the workers share a batch,
      which matters for the first call's latency, not for the steady state modelled here.)
    """
    h: HostModel = plan.host
    prep = host_prep_seconds(plan)
    if h.loader == "sync":
        hidden = prep
    else:
        hidden = max(0.0, prep - device_seconds)
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
    integer arithmetic, doubled for the round trip (ipu-facts.md; this reproduces its worked
    figures: 48 cycles for 2 IPUs and 240 for 16 IPUs at 1.6 GHz)."""
    hops = 1 + (int(num_ipus) // 2) // 2
    return round(2 * hops * seconds_per_hop * clock_hz)
