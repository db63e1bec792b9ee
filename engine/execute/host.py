"""The host's timeline of one host call, kept outside the device trace.

In PopTorch the host prepares a call's samples (or takes them from an async loader), makes the
call, and blocks while the device runs it; PopVision's execution trace shows device cycles only.
This module lays that host side out as its own timeline (``/execution/host``), in cycles of the
target clock from the start of the device trace (negative = before the device starts), for one
host call in steady state (docs/execution-model.md, "Host model"):

* preparation in the main process (``sync`` loader, no worker processes): the main lane prepares
  the call's samples, makes the call (its fixed round trip), then waits for the device;
* overlapped preparation (an async loader's process, or prefetching worker processes): the
  loader lane prepares the next call's samples while the device runs this one; the main lane
  waits for the loader only for the part of the preparation longer than the device time, then
  makes the call and waits for the device.

The host-inclusive time of a call is the device time plus the host time not hidden behind it;
throughput is reported both ways.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.execute import costs
from engine.execute.plan import ExecutionPlan
from profiles.schema import code

L_MAIN = code("host_lane", "main")
L_LOADER = code("host_lane", "loader")
E_PREPARE = code("host_event", "prepare")
E_CALL = code("host_event", "call")
E_WAIT_DEVICE = code("host_event", "waitDevice")
E_WAIT_LOADER = code("host_event", "waitLoader")


@dataclass(frozen=True)
class HostTimeline:
    """The host side of one call: its events (the ``/execution/host`` columns) and totals."""

    events: dict[str, np.ndarray]
    prep_s: float
    exposed_s: float  # host time per call not hidden behind the device
    device_s: float  # the steady-state call's device time (throughput)
    samples: int
    #: The device trace's time: the profiled call's, longer than ``device_s`` by the framework's
    #: profiled-call wait (engine.execute.core.profiled_wait_cycles).
    trace_s: float = 0.0

    @property
    def host_inclusive_s(self) -> float:
        return self.device_s + self.exposed_s

    def attrs(self, clock_hz: float, model: dict) -> dict[str, object]:
        """The ``/execution`` attributes this timeline sets."""
        return {
            "host_seconds": float(self.exposed_s),
            "throughput": float(self.samples / self.host_inclusive_s)
            if self.host_inclusive_s > 0
            else 0.0,
            "device_throughput": float(self.samples / self.device_s) if self.device_s > 0 else 0.0,
            # the profiled call's: its trace and the host time outside it (shares of the trace
            # and the host lane add up to it); throughput is the steady-state call's
            "host_inclusive_cycles": round(
                (max(self.trace_s, self.device_s) + self.exposed_s) * clock_hz
            ),
            "host_model": model,
        }


def host_timeline(
    plan: ExecutionPlan, device_cycles: int, trace_cycles: int | None = None
) -> HostTimeline:
    """The host timeline of one call of ``plan``: its device runs ``device_cycles`` in steady
    state and its trace (the profiled call) lasts ``trace_cycles`` (default the same); the host
    lane waits for the trace."""
    h = plan.host
    clock = plan.links.clock_hz
    device_s = device_cycles / clock
    trace_cycles = int(device_cycles if trace_cycles is None else trace_cycles)
    prep = costs.host_prep_seconds(plan)
    ovh = h.call_overhead_s
    # an overlapping loader prepares the next call while this one is made and runs
    exposed_prep = max(0.0, prep - device_s - ovh) if h.overlapped else prep
    per_instance = math.ceil(plan.samples_per_call / max(1, h.instances))

    def cyc(seconds: float) -> int:
        return round(seconds * clock)

    rows: list[tuple[int, int, int, int, int]] = []  # lane, kind, start, cycles, samples
    c_ovh, c_dev = cyc(ovh), trace_cycles
    if h.overlapped:
        c_wait = cyc(exposed_prep)
        if c_wait:
            rows.append((L_MAIN, E_WAIT_LOADER, -c_ovh - c_wait, c_wait, 0))
        rows.append((L_LOADER, E_PREPARE, 0, cyc(prep), per_instance))  # the next call's
    else:
        c_prep = cyc(prep)
        rows.append((L_MAIN, E_PREPARE, -c_ovh - c_prep, c_prep, per_instance))
    rows.append((L_MAIN, E_CALL, -c_ovh, c_ovh, 0))
    rows.append((L_MAIN, E_WAIT_DEVICE, 0, c_dev, 0))
    arr = np.array(rows, dtype=np.int64).reshape(-1, 5)
    order = np.lexsort((arr[:, 2], arr[:, 0]))
    arr = arr[order]
    events: dict[str, np.ndarray] = {
        "lane": arr[:, 0].astype(np.uint8),
        "kind": arr[:, 1].astype(np.uint8),
        "start": arr[:, 2],
        "cycles": arr[:, 3],
        "samples": arr[:, 4],
    }
    return HostTimeline(
        events=events,
        prep_s=float(prep),
        exposed_s=float(exposed_prep + ovh),
        device_s=float(device_s),
        samples=int(plan.samples_per_call),
        trace_s=float(trace_cycles / clock),
    )


def host_model_summary(plan: ExecutionPlan, timeline: HostTimeline) -> dict:
    """The ``host_model`` attribute: how the host side was modelled (JSON)."""
    h = plan.host
    out = {
        "loader": h.loader,
        "workers": int(h.workers),
        "parallel": int(h.parallel),
        "host_servers": int(h.instances),
        "host_server_cores": int(h.cores),
        "overlapped": bool(h.overlapped),
        "per_sample_us": round(h.per_sample_s * 1e6, 4),
        "call_overhead_us": round(h.call_overhead_s * 1e6, 4),
        "samples_per_call": int(plan.samples_per_call),
        "prepare_ms_per_call": round(timeline.prep_s * 1e3, 6),
        "exposed_ms_per_call": round(timeline.exposed_s * 1e3, 6),
        "device_ms_per_call": round(timeline.device_s * 1e3, 6),
    }
    if h.breakdown:
        out["transforms"] = h.breakdown["transforms"]
        out["on_ipu"] = h.breakdown["on_ipu"]
        for key in ("host_cpu", "profile_cpu", "scale", "scaling", "float16_kernels"):
            if key in h.breakdown:
                out[key] = h.breakdown[key]
    return out


__all__ = ["HostTimeline", "host_model_summary", "host_timeline"]
