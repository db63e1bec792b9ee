"""A host transform's cost line through two measured points, shared by both calibration methods
(:mod:`engine.host.calibrate`'s imitations and :mod:`engine.host.calibrate_torch`'s real
transforms), so neither method's module imports the other's."""

from __future__ import annotations


def add_line(
    transforms: dict[str, dict], name: str, dtype: str, points: list[tuple[float, float]]
) -> None:
    """Record transform ``name``'s line through two (elements, seconds) points in ``transforms``:
    its cost per element for ``dtype`` (ns) and its fixed cost (us; the largest over dtypes)."""
    (e0, t0), (e1, t1) = points
    slope = max(0.0, (t1 - t0) / (e1 - e0))
    fixed = max(0.0, t0 - slope * e0)
    entry = transforms.setdefault(name, {"fixed_us": 0.0, "ns_per_element": {}})
    entry["ns_per_element"][dtype] = round(slope * 1e9, 4)
    entry["fixed_us"] = round(max(entry["fixed_us"], fixed * 1e6), 3)


__all__ = ["add_line"]
