"""Host profiles and the per-sample cost of a run's data pipeline.

A *host profile* (TOML, written by ``analyse calibrate-host``) holds, for every host transform,
a fixed cost per call (``fixed_us``) and a cost per element for each element dtype it works in
(``ns_per_element``), measured on one core. A run names its transforms in order
(``RunConfig.host_transforms``); walking them gives each one's element count and dtype:

* images start at ``host_input_size`` squared x channels, uint8 (as decoded / stored);
* ``resize`` and ``random_crop`` produce ``image_size`` squared x channels (cost per output element);
* ``convert_dtype`` produces the run's input dtype (float16 / float32 from the precision), and
  ``normalise`` works in it; with ``eight_bit_input`` both run on the IPU instead, so the host
  skips them and the sample stays uint8;
* the loader's default collate (stacking the samples of a batch) is always added, per element of
  the final dtype.

The per-sample cost is the sum: ``fixed_us + ns_per_element[dtype] x elements`` per transform,
plus the profile's ``loader_us_per_sample``: what PyTorch's ``DataLoader`` itself costs per sample
whatever the transforms (the sampler's index, the dataset's ``__getitem__`` call, ``Compose``
walking its list, the batch's list and the per-batch overhead shared by its 64 samples), measured
by ``analyse calibrate-host`` in a real DataLoader with an empty ``Compose`` (0 in profiles
written before it was measured).

A profile is measured on one CPU; ``cpu_ref`` names it in ``engine/data/cpus.toml`` when known.
:func:`scale_profile` moves a profile to another CPU of that table by the ratio of their per-core
figures (``engine.host.cpus.cost_factor``) and records where it came from (``scaled_from``).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine.errors import ConfigError, first_problem
from profiles.inputs import read_regular

#: Every transform the host model knows, and what it does to the image (docs/engine.md).
TRANSFORMS: dict[str, str] = {
    "decode_jpeg": "decode a JPEG into an RGB image (Pillow Image.open + convert)",
    "from_array": "wrap a stored uint8 array as a PIL image (torchvision CIFAR10.__getitem__)",
    "flip": "RandomHorizontalFlip on a PIL image (Image.transpose)",
    "random_crop": "RandomCrop to image_size (Image.crop)",
    "resize": "Resize to image_size, bilinear (Image.resize)",
    "to_tensor": "PILToTensor: channels-first uint8 array",
    "convert_dtype": "ConvertImageDtype to the input dtype (cast, scale by 1/255)",
    "normalise": "Normalize by per-channel mean and standard deviation",
    "collate": "default collate: stack the samples of a batch",
    "tokens": "a pre-tokenised sample: each field's stored int64 ids as a tensor (from_numpy)",
}
#: The token path: what a token model's DataLoader runs per sample (``tokens`` then ``collate``
#: in int64), each costed per field (input_ids, attention_mask, ...: one tensor each).
TOKEN_TRANSFORMS = ("tokens",)
#: Transforms that move to the IPU with 8-bit input (the model casts and normalises there).
ON_IPU_WITH_8BIT = ("convert_dtype", "normalise")
RESIZING = ("resize", "random_crop")
#: The row of a SampleCost that holds the DataLoader's own per-sample overhead.
LOADER = "loader"
DTYPES = ("uint8", "float16", "float32", "int64")
#: Token ids as pre-tokenised datasets store them and torch collates them (``torch.long``).
TOKEN_DTYPE = "int64"


class TransformCost(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    fixed_us: float = Field(ge=0, description="Fixed cost per call (microseconds).")
    ns_per_element: dict[str, float] = Field(
        description="Cost per element for each element dtype (nanoseconds)."
    )

    @field_validator("ns_per_element")
    @classmethod
    def _per_element(cls, value: dict[str, float]) -> dict[str, float]:
        for dtype, ns in value.items():
            if dtype not in DTYPES:
                raise ValueError(f"{dtype!r} is not an element dtype ({', '.join(DTYPES)})")
            if not (math.isfinite(ns) and ns >= 0):
                raise ValueError(f"{dtype} cost must be a finite number >= 0, got {ns!r}")
        return value


class ScaledFrom(BaseModel):
    """Where a scaled profile's figures were measured, and by what factor they were scaled."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    cpu: str = Field(description="The CPU the costs were measured on (as the OS reported it).")
    cpu_ref: str = Field(description="Its key in engine/data/cpus.toml.")
    factor: float = Field(gt=0, description="Every cost was multiplied by this.")
    basis: str = Field(description="The per-core figures of the two CPUs and their sources.")


class PipelineCheck(BaseModel):
    """One whole pipeline timed end to end in a real DataLoader, against the sum of its parts."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    transforms: list[str]
    input_size: int = Field(gt=0)
    image_size: int = Field(gt=0)
    dtype: str
    measured_us: float = Field(ge=0, description="Per sample, measured (one core).")
    modelled_us: float = Field(ge=0, description="Per sample, the sum of the profile's terms.")


class HostProfile(BaseModel):
    """Per-transform costs of one host CPU core (measured by ``analyse calibrate-host``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str
    cpu: str = Field(description="The CPU the costs apply to (as the OS reported it).")
    cores: int = Field(ge=1, description="Cores of the measured machine (informative).")
    measured: str = ""
    method: str = ""
    measured_with: str = Field(
        default="", description="torch (the real transforms in a DataLoader) or imitation."
    )
    libraries: dict[str, str] = Field(default_factory=dict, description="Library versions.")
    load: dict[str, float] = Field(
        default_factory=dict, description="Load averages before and after the measurement."
    )
    cpu_ref: str = Field(default="", description="The CPU's key in engine/data/cpus.toml.")
    cpu_float16: list[str] = Field(
        default_factory=list,
        description="The measured CPU's float16 instructions (f16c: conversions, avx512_fp16: "
        "arithmetic), from the OS's CPU flags; empty when not recorded.",
    )
    scaled_from: ScaledFrom | None = None
    loader_us_per_sample: float = Field(
        default=0.0, ge=0, description="DataLoader overhead per sample (fetch, Compose, batch)."
    )
    transforms: dict[str, TransformCost]
    checks: list[PipelineCheck] = Field(default_factory=list)

    def cost_us(self, transform: str, dtype: str, elements: float) -> float:
        t = self.transforms.get(transform)
        if t is None:
            raise ConfigError(
                f"host_profile {self.name!r} has no cost for transform {transform!r}; "
                "re-measure it with `analyse calibrate-host`."
            )
        ns = t.ns_per_element.get(dtype)
        if ns is None:
            raise ConfigError(
                f"host_profile {self.name!r} has no {dtype} cost for transform {transform!r}; "
                "re-measure it with `analyse calibrate-host`."
            )
        return t.fixed_us + ns * elements * 1e-3


def _parse(text: str, where: str) -> HostProfile:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"host_profile {where} is not valid TOML: {exc}.") from None
    except RecursionError:
        raise ConfigError(f"host_profile {where} nests tables or arrays too deeply.") from None
    try:
        return HostProfile(**raw)
    except ValidationError as exc:
        raise ConfigError(f"host_profile {where}: {first_problem(exc, 'host profile')}.") from None
    except TypeError as exc:
        raise ConfigError(f"host_profile {where}: {exc}.") from None


@cache
def _builtin(name: str) -> HostProfile:
    text = resources.files("engine").joinpath(f"data/host/{name}.toml").read_text("utf-8")
    return _parse(text, repr(name))


def builtin_names() -> tuple[str, ...]:
    folder = resources.files("engine").joinpath("data/host")
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml")))


def load_host_profile(name_or_path: str) -> HostProfile:
    """A shipped host profile by name (``default``) or a TOML file written by calibrate-host."""
    if name_or_path in builtin_names():
        return _builtin(name_or_path)
    p = Path(name_or_path)
    if not p.suffix and not p.exists():
        raise ConfigError(
            f"host_profile: {name_or_path!r} is neither a shipped profile "
            f"({', '.join(builtin_names())}) nor a file."
        )
    what = f"host_profile {str(p)!r}"
    raw = read_regular(p, what, ConfigError, hint="(host profiles are a few kB.)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} is not a text file (not UTF-8).") from None
    return _parse(text, repr(str(p)))


@dataclass(frozen=True)
class SampleCost:
    """The per-sample host cost of a pipeline, by transform (microseconds, one core)."""

    by_transform: tuple[tuple[str, str, int, float], ...]  # (transform, dtype, elements, us)
    skipped: tuple[str, ...]  # transforms moved to the IPU (8-bit input)

    @property
    def total_us(self) -> float:
        return float(sum(us for *_, us in self.by_transform))

    def as_dict(self) -> dict:
        return {
            "per_sample_us": round(self.total_us, 4),
            "transforms": [
                {"transform": t, "dtype": d, "elements": e, "us": round(us, 4)}
                for t, d, e, us in self.by_transform
            ],
            "on_ipu": list(self.skipped),
        }


def sample_cost(
    profile: HostProfile,
    transforms: list[str] | tuple[str, ...],
    *,
    input_size: int,
    image_size: int,
    channels: int,
    input_dtype: str,
    eight_bit: bool,
) -> SampleCost:
    """Walk the transforms (module docstring) and cost each one on ``profile``."""
    side, dtype = int(input_size), "uint8"
    rows: list[tuple[str, str, int, float]] = []
    skipped: list[str] = []
    for t in transforms:
        if t not in TRANSFORMS:
            raise ConfigError(
                f"host_transforms: unknown transform {t!r}; allowed: {', '.join(TRANSFORMS)}."
            )
        if t in TOKEN_TRANSFORMS:
            raise ConfigError(
                f"host_transforms: {t!r} is a token model's pipeline (pre-tokenised ids), not "
                "an image transform; name it alone, for a model whose inputs are token ids."
            )
        if eight_bit and t in ON_IPU_WITH_8BIT:
            skipped.append(t)
            continue
        if t in RESIZING:
            side = int(image_size)
        if t == "convert_dtype":
            dtype = input_dtype
        elems = side * side * channels
        rows.append((t, dtype, elems, profile.cost_us(t, dtype, elems)))
    if "collate" not in transforms:
        elems = side * side * channels
        rows.append(("collate", dtype, elems, profile.cost_us("collate", dtype, elems)))
    if profile.loader_us_per_sample > 0:
        rows.insert(0, (LOADER, "", 0, float(profile.loader_us_per_sample)))
    return SampleCost(tuple(rows), tuple(skipped))


def has_token_costs(profile: HostProfile) -> bool:
    """Whether ``profile`` measured the token path (profiles written before it did not)."""
    t, c = profile.transforms.get("tokens"), profile.transforms.get("collate")
    return bool(t and c and TOKEN_DTYPE in t.ns_per_element and TOKEN_DTYPE in c.ns_per_element)


def token_cost(profile: HostProfile, *, fields: int, elements: int) -> SampleCost:
    """The per-sample host cost of a token model's pipeline on ``profile``: the loader's own
    overhead, then per field (``fields`` tensors of ``elements`` ids in all) the dataset's fetch
    of its stored ids (``tokens``) and the default collate's stacking (``collate``, int64)."""
    if not has_token_costs(profile):
        raise ConfigError(
            f"host_profile {profile.name!r} has no token costs (tokens and collate in "
            f"{TOKEN_DTYPE}); re-measure it with `analyse calibrate-host`."
        )
    fields = max(1, int(fields))
    rows: list[tuple[str, str, int, float]] = []
    if profile.loader_us_per_sample > 0:
        rows.append((LOADER, "", 0, float(profile.loader_us_per_sample)))
    for name in ("tokens", "collate"):
        t = profile.transforms[name]
        us = fields * t.fixed_us + t.ns_per_element[TOKEN_DTYPE] * elements * 1e-3
        rows.append((name, TOKEN_DTYPE, int(elements), us))
    return SampleCost(tuple(rows), ())


#: Element-wise float16 ops each transform runs on the CPU, from torchvision's source:
#: ConvertImageDtype of an integer image is ``image.to(dtype)`` then ``image / max``; Normalize is
#: ``tensor.sub_(mean).div_(std)`` (its ``clone`` is a copy, no arithmetic).
FLOAT16_OPS: dict[str, int] = {"convert_dtype": 2, "normalise": 2}
#: The first torch whose CPU kernels are vectorised for float16 (pytorch/pytorch#96076, 2023-03,
#: after the 2.0 release: "add explicit vectorization for Half dtype on CPU").
VECTORISED_HALF_TORCH = (2, 1)


def torch_version(profile: HostProfile) -> tuple[int, int] | None:
    """(major, minor) of the torch a profile was measured with; None without torch."""
    text = profile.libraries.get("torch", "") if profile.measured_with == "torch" else ""
    parts = text.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def with_scalar_half(profile: HostProfile, ns_per_op: float) -> HostProfile:
    """``profile`` with the float16 per-element costs of the element-wise transforms those of
    scalar float16 kernels: ``FLOAT16_OPS[t] x ns_per_op`` per element (fixed costs kept)."""
    transforms = dict(profile.transforms)
    for name, ops in FLOAT16_OPS.items():
        t = transforms.get(name)
        if t is None or "float16" not in t.ns_per_element:
            continue
        per = dict(t.ns_per_element, float16=round(ops * float(ns_per_op), 4))
        transforms[name] = t.model_copy(update={"ns_per_element": per})
    return profile.model_copy(update={"transforms": transforms})


def scale_profile(profile: HostProfile, to_cpu: str) -> HostProfile:
    """``profile`` moved to CPU ``to_cpu`` (a key of engine/data/cpus.toml) by the ratio of
    the two CPUs' per-core figures; the profile itself when it is already there."""
    from engine.host.cpus import cost_factor, get_cpu

    if not profile.cpu_ref:
        raise ConfigError(
            f"host_profile {profile.name!r} does not name its CPU (cpu_ref), so it cannot be "
            "scaled to another CPU; re-measure it with `analyse calibrate-host --cpu KEY`."
        )
    if profile.cpu_ref == to_cpu:
        return profile
    k = cost_factor(profile.cpu_ref, to_cpu)
    a, b = get_cpu(profile.cpu_ref), get_cpu(to_cpu)
    origin = profile.scaled_from or ScaledFrom(
        cpu=profile.cpu, cpu_ref=profile.cpu_ref, factor=1.0, basis=""
    )
    basis = (
        f"SPECspeed2017_int_base {a.specspeed2017_int_base:g} ({a.display_name}) / "
        f"{b.specspeed2017_int_base:g} ({b.display_name}); sources in engine/data/cpus.toml"
    )
    transforms = {
        name: TransformCost(
            fixed_us=round(t.fixed_us * k, 3),
            ns_per_element={d: round(v * k, 4) for d, v in t.ns_per_element.items()},
        )
        for name, t in profile.transforms.items()
    }
    return profile.model_copy(
        update={
            "name": f"{profile.name}, scaled to {b.display_name}",
            "cpu": b.display_name,
            "cpu_ref": to_cpu,
            "transforms": transforms,
            "loader_us_per_sample": round(profile.loader_us_per_sample * k, 3),
            "scaled_from": ScaledFrom(
                cpu=origin.cpu,
                cpu_ref=origin.cpu_ref,
                factor=round(origin.factor * k, 6),
                basis=basis,
            ),
            "checks": [
                c.model_copy(
                    update={
                        "measured_us": round(c.measured_us * k, 3),
                        "modelled_us": round(c.modelled_us * k, 3),
                    }
                )
                for c in profile.checks
            ],
        }
    )


__all__ = [
    "DTYPES",
    "FLOAT16_OPS",
    "LOADER",
    "ON_IPU_WITH_8BIT",
    "TOKEN_DTYPE",
    "TOKEN_TRANSFORMS",
    "TRANSFORMS",
    "VECTORISED_HALF_TORCH",
    "HostProfile",
    "PipelineCheck",
    "SampleCost",
    "ScaledFrom",
    "TransformCost",
    "builtin_names",
    "has_token_costs",
    "load_host_profile",
    "sample_cost",
    "scale_profile",
    "token_cost",
    "torch_version",
    "with_scalar_half",
]
