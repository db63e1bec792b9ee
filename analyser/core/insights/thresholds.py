"""Named, documented, adjustable thresholds of the insights (like XProf's 5% / 20% grading and
Nsight Systems' rule parameters). Every default is listed in docs/insights.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import cast

from profiles.errors import UserFacingError


class ThresholdError(UserFacingError):
    """A ``--threshold name=value`` that names no threshold or has a bad value."""


def _t(default: float, doc: str) -> float:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Thresholds:
    """Trigger thresholds of the insights. Shares are fractions (0.05 = 5%)."""

    memory_headroom: float = _t(
        0.05,
        "Memory tips fire when a tile is out of memory or the fullest tile has less than "
        "this share of its SRAM free.",
    )
    offload_share: float = _t(
        0.10,
        "Disable variable offloading when remote-buffer StreamCopyMid takes at least this "
        "share of the busiest IPU's cycles.",
    )
    ramp_share: float = _t(
        0.20,
        "Raise gradient accumulation when pipeline ramp-up + ramp-down take at least this "
        "share of the run.",
    )
    weight_update_share: float = _t(
        0.15, "Raise gradient accumulation when the weight update takes at least this share."
    )
    host_call_share: float = _t(
        0.05,
        "Raise device iterations when per-call host overhead (round trips) takes at least "
        "this share of the run.",
    )
    input_stream_share: float = _t(
        0.05,
        "Use 8-bit input when input StreamCopy (host to IPU) takes at least this share of "
        "the busiest IPU's cycles and the input is an FP16/FP32 image.",
    )
    host_wait_moderate: float = _t(
        0.05,
        "Host wait share (host-inclusive: StreamCopyBegin in the trace plus host time outside "
        "it) from which the run is graded moderately input-bound (XProf's 5%).",
    )
    host_wait_high: float = _t(
        0.20, "Host wait share from which the run is graded highly input-bound (XProf's 20%)."
    )
    stage_imbalance: float = _t(
        1.25,
        "Rebalance pipeline stages when the longest stage is at least this many times the "
        "mean stage.",
    )
    io_stream_share: float = _t(
        0.10, "Use I/O tiles when host StreamCopyMid (not overlapped) takes at least this share."
    )
    prefetch_depth: float = _t(3, "Recommended prefetch depth (the documented sweet spot).")
    tile_balance: float = _t(0.5, "Flag compute sets whose tile balance is below this value ...")
    heavy_compute_share: float = _t(
        0.02, "... among those taking at least this share of the compute cycles."
    )
    prearrange_ratio: float = _t(
        1.0,
        "Flag rearrangement (PreArrange / transpose) copies taking more than this many times "
        "the cycles of the operation they feed.",
    )
    allreduce_share: float = _t(
        0.10, "Raise gradient accumulation when the replica all-reduce takes at least this share."
    )
    fp32_matmul_share: float = _t(
        0.30,
        "Suggest FP16 for speed when FP32 matmuls / convolutions take at least this share "
        "of the compute cycles and the model fits.",
    )
    half_partials_share: float = _t(
        0.30,
        "Suggest half-precision partials when FP16 matmuls / convolutions with float partials "
        "take at least this share of the operation cycles (the footprint `fp32_matmul_share` "
        "asks of FP16): half partials double only the AMP compute of those operations, so the "
        "run gains at most about half their share, up to 15% at the default: below it the gain "
        "is seldom worth accumulating in FP16.",
    )
    stash_share: float = _t(
        0.15,
        "Suggest the interleaved schedule when pipeline stashes take at least this share of "
        "the fullest IPU's memory.",
    )
    optimiser_state_share: float = _t(
        0.10,
        "Suggest offloading / sharding / a lighter optimiser when optimiser state takes at "
        "least this share of the memory.",
    )
    temporary_share: float = _t(
        0.10,
        "Suggest a lower available memory proportion when temporaries take at least this "
        "share of the fullest IPU's memory.",
    )
    code_share: float = _t(
        0.30, "Suggest outlining when code takes at least this share of the memory."
    )
    ipu_memory_imbalance: float = _t(
        1.3,
        "Suggest moving the pipeline split when the fullest IPU uses this many times the "
        "memory of the emptiest.",
    )

    @classmethod
    def docs(cls) -> dict[str, tuple[float, str]]:
        """Each threshold's default and meaning, by name."""
        return {f.name: (cast(float, f.default), f.metadata["doc"]) for f in fields(cls)}

    def with_overrides(self, items: list[str] | dict[str, float] | None) -> Thresholds:
        """Apply ``["name=value", ...]`` (or a dict); one clear error on a bad item."""
        if not items:
            return self
        known = {f.name for f in fields(self)}
        pairs: dict[str, float] = {}
        raw: object  # a number from a dict, text from "name=value"
        for item in items.items() if isinstance(items, dict) else items:
            if isinstance(item, tuple):
                name, raw = item
            else:
                if "=" not in item:
                    raise ThresholdError(
                        f"threshold {item!r} is not of the form name=value (e.g. ramp_share=0.3)."
                    )
                name, raw = (s.strip() for s in item.split("=", 1))
            if name not in known:
                raise ThresholdError(
                    f"unknown threshold {name!r}; known thresholds: {', '.join(sorted(known))}."
                )
            try:
                value = float(str(raw).rstrip("%")) / (100 if str(raw).endswith("%") else 1)
            except ValueError:
                raise ThresholdError(f"threshold {name!r} needs a number, not {raw!r}.") from None
            if not math.isfinite(value):
                raise ThresholdError(f"threshold {name!r} needs a finite number, not {raw!r}.")
            if value < 0:
                raise ThresholdError(f"threshold {name!r} must not be negative.")
            pairs[name] = value
        return replace(self, **pairs)
