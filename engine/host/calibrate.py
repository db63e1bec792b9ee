"""Measure the host transforms' costs on this machine (``analyse calibrate-host``).

Two methods, the first that is installed:

* ``torch`` (:mod:`engine.host.calibrate_torch`, with the optional extra
  ``pip install -e ".[torch]"``): the real torchvision transforms inside a real
  ``torch.utils.data.DataLoader``, the DataLoader's own per-sample overhead, and two whole
  pipelines timed end to end against the sum of their parts;
* ``imitation`` (this module, NumPy + Pillow only; the labelled fallback): each transform run
  with the library the PyTorch / torchvision pipelines use underneath: Pillow for the image
  operations (torchvision's ``RandomHorizontalFlip`` / ``Resize`` / ``RandomCrop`` on a PIL image
  call ``Image.transpose`` / ``Image.resize`` (bilinear) / ``Image.crop``; ``PILToTensor`` copies
  the image into a channels-first array; decoding a JPEG is ``Image.open(...).convert("RGB")``)
  and NumPy for the tensor operations (``ConvertImageDtype`` casts and scales by 1/255,
  ``Normalize`` subtracts the mean and divides by the standard deviation per channel, the default
  collate stacks the samples of a batch); the loader overhead is a plain-Python imitation of the
  DataLoader's per-sample path. On one machine the real uint8 pipeline cost about twice the
  imitation's sum (docs/engine.md), so the fallback is optimistic.

Both also measure the token path (``tokens`` and ``collate`` in int64: pre-tokenised int64
rows of 128 and 512 ids fetched and collated as a token model's DataLoader does).

Both take CPU time (``time.process_time``), not wall time, and the minimum over batches, so that
a busy machine's other work does not inflate the figures. Each transform is timed at two image
sizes; a straight line through the two gives a fixed cost per call (microseconds) and a cost per
element (nanoseconds) for each element dtype it works in. The profile records the CPU (and its
key in ``engine/data/cpus.toml`` when known), the core count, the library versions, the load
averages before and after, and the method.
"""

from __future__ import annotations

import io
import os
import platform
import time
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np

from engine.host.cost_line import add_line

#: (side of the small image, side of the large image): the two points of the line fit.
SIZES = (32, 128)
#: (short, long) sequence lengths of the token path's two points (BERT's phase-1 and phase-2
#: pre-training lengths, Graphcore's BERT examples' 128 and 512).
TOKEN_SIZES = (128, 512)
#: Distinct pre-tokenised samples the token path's dataset holds (its fetches do not all hit
#: the same rows of the cache).
TOKEN_ROWS = 4096
#: Mean / std used by the normalisation (torchvision's ImageNet statistics).
MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])


def _min_call_cpu_s(fn: Callable[[], object], budget_s: float) -> float:
    """Minimum CPU seconds of one call of ``fn`` over 7 batches filling about ``budget_s``."""
    fn()  # warm up
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    per_batch = max(1, int(budget_s / 7 / one))
    best = float("inf")
    for _ in range(7):
        t0 = time.process_time()
        for _ in range(per_batch):
            fn()
        best = min(best, (time.process_time() - t0) / per_batch)
    return best


def _loader_imitation_s(budget_s: float) -> float:
    """CPU seconds per sample of a plain-Python imitation of a DataLoader's per-sample path
    (a shuffled index, a map-style dataset's ``__getitem__``, an empty ``Compose`` loop, the
    batch's list of ``(sample, label)``), in batches of 64."""
    items = [np.zeros(3, np.uint8) for _ in range(128)]
    steps: list[Callable] = []

    def compose(x):
        for t in steps:
            x = t(x)
        return x

    class Dataset:
        def __getitem__(self, i):
            return compose(items[i % len(items)]), 0

    ds = Dataset()
    order = np.random.default_rng(0).permutation(64 * 64).tolist()

    def batch():
        return [ds[i] for i in order[:64]]

    return _min_call_cpu_s(batch, budget_s) / 64


def _image(side: int):
    from PIL import Image

    rng = np.random.default_rng(side)
    # smooth content plus noise, so a JPEG of it has a realistic size
    y, x = np.mgrid[0:side, 0:side]
    base = (np.stack([x, y, x + y], axis=-1) * (255.0 / (2 * side))).astype(np.float64)
    arr = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    return Image.fromarray(arr, "RGB"), arr


def _cases(dtype_names: tuple[str, ...]):
    """(transform, element dtype, factory(side) -> (callable, elements per call))."""
    from PIL import Image

    def decode(side):
        img, _ = _image(side)
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=90)
        data = buf.getvalue()
        return (lambda: Image.open(io.BytesIO(data)).convert("RGB").load()), side * side * 3

    def from_array(side):
        _, arr = _image(side)
        return (lambda: Image.fromarray(arr, "RGB")), side * side * 3

    def flip(side):
        img, _ = _image(side)
        return (lambda: img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)), side * side * 3

    def resize(side):
        img, _ = _image(side // 2)  # upscale by two, as 32 -> 64 (cost follows the output)
        return (lambda: img.resize((side, side), Image.Resampling.BILINEAR)), side * side * 3

    def random_crop(side):
        img, _ = _image(side + 8)
        return (lambda: img.crop((4, 4, 4 + side, 4 + side)).load()), side * side * 3

    def to_tensor(side):
        img, _ = _image(side)
        return (lambda: np.ascontiguousarray(np.asarray(img).transpose(2, 0, 1))), side * side * 3

    def convert(dt):
        def make(side):
            _, arr = _image(side)
            chw = np.ascontiguousarray(arr.transpose(2, 0, 1))
            scale = np.asarray(1 / 255, dtype=dt)
            return (lambda: chw.astype(dt) * scale), side * side * 3

        return make

    def normalise(dt):
        def make(side):
            _, arr = _image(side)
            x = (arr.transpose(2, 0, 1) / 255.0).astype(dt)
            m = MEAN.astype(dt)[:, None, None]
            s = STD.astype(dt)[:, None, None]
            return (lambda: (x - m) / s), side * side * 3

        return make

    def collate(dt):
        def make(side):
            _, arr = _image(side)
            samples = [arr.transpose(2, 0, 1).astype(dt) for _ in range(16)]
            # per sample: one sixteenth of stacking sixteen samples
            return (lambda: np.stack(samples)), 16 * side * side * 3

        return make

    out = [
        ("decode_jpeg", "uint8", decode),
        ("from_array", "uint8", from_array),
        ("flip", "uint8", flip),
        ("resize", "uint8", resize),
        ("random_crop", "uint8", random_crop),
        ("to_tensor", "uint8", to_tensor),
        ("collate", "uint8", collate(np.uint8)),
    ]
    for name in dtype_names:
        dt = np.dtype(name)
        out += [
            ("convert_dtype", name, convert(dt)),
            ("normalise", name, normalise(dt)),
            ("collate", name, collate(dt)),
        ]
    return out


def cpu_name() -> str:
    """The CPU model as the OS reports it (``/proc/cpuinfo`` model name, or platform)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info = f.read()
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        name = fields.get("model name", "")
        fam, model = fields.get("cpu family"), fields.get("model")
        extra = f" (family {fam}, model {model})" if fam and model else ""
        if name:
            return f"{name}{extra}"
    except OSError:
        pass
    return platform.processor() or platform.machine()


#: The CPU flags (Linux /proc/cpuinfo names) that decide how float16 runs on the host: F16C
#: converts between float16 and float32 (what vectorised float16 kernels use), AVX512-FP16
#: computes in float16.
FLOAT16_FLAGS = ("f16c", "avx512_fp16")


def cpu_float16_flags() -> list[str]:
    """The float16 instructions of this machine's CPU (empty where the OS does not say)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[-1].split())
                    return [f for f in FLOAT16_FLAGS if f in have]
    except OSError:
        pass
    return []


def token_store(length: int) -> np.ndarray:
    """Pre-tokenised samples as datasets store them: ``TOKEN_ROWS`` rows of ``length`` int64 ids
    (a BERT vocabulary's range), one row per sample and field."""
    rng = np.random.default_rng(length)
    return rng.integers(0, 30522, (TOKEN_ROWS, length), dtype=np.int64)


def _token_cases():
    """The token path without torch: the dataset's fetch is ``torch.from_numpy(store[i])``, a
    view of the stored row (imitated by the numpy view), and the default collate stacks the
    batch's rows into one tensor (``np.stack``, per row: a sixteenth of stacking sixteen)."""

    def fetch(length):
        store = token_store(length)
        order = iter(range(1 << 62))

        def one():
            return np.asarray(store[next(order) % TOKEN_ROWS])

        return one, length

    def collate(length):
        store = token_store(length)
        rows = [store[i] for i in range(16)]
        return (lambda: np.stack(rows)), 16 * length

    return [("tokens", "int64", fetch), ("collate", "int64", collate)]


def _imitation(budget_s: float, progress: Callable[[int, int, str], None] | None) -> dict:
    """The NumPy + Pillow measurement (part of a host profile)."""
    cases = _cases(("float16", "float32"))
    cases += [(n, d, m, TOKEN_SIZES) for n, d, m in _token_cases()]
    per_case = budget_s / (2 * len(cases) + 1)
    transforms: dict[str, dict] = {}
    for k, (name, dtype, make, *sizes) in enumerate(cases):
        if progress is not None:
            progress(k, len(cases), f"{name} ({dtype}), imitation")
        points = []
        for side in sizes[0] if sizes else SIZES:
            fn, elems = make(side)
            t = _min_call_cpu_s(fn, per_case)
            per = 16 if name == "collate" else 1
            points.append((elems / per, t / per))
        add_line(transforms, name, dtype, points)
    loader = _loader_imitation_s(per_case)
    return {"transforms": transforms, "loader_us_per_sample": round(loader * 1e6, 3)}


def _load() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:  # not on every platform
        return (0.0, 0.0, 0.0)


def calibrate(
    budget_s: float = 4.0,
    progress: Callable[[int, int, str], None] | None = None,
    *,
    method: str = "auto",
    cpu_ref: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict:
    """Measure every transform; returns the host-profile dict (see engine.host.profile).

    ``method``: ``torch`` (the real transforms in a DataLoader; needs torch and torchvision),
    ``imitation`` (NumPy + Pillow) or ``auto`` (torch when installed). ``cpu_ref``: this CPU's
    key in engine/data/cpus.toml when the OS's model name does not identify it. ``warn``
    receives one sentence when ``auto`` falls back to the imitations because torch or
    torchvision is installed but fails to import (a broken install: RuntimeError, OSError...);
    with ``torch`` that install is an ImportError naming the reason."""
    import PIL

    from engine.host import calibrate_torch
    from engine.host.cpus import get_cpu, identify

    reason = calibrate_torch.unavailable_reason() if method in ("auto", "torch") else None
    if method == "auto":
        method = "torch" if reason is None else "imitation"
        if reason is not None and "fails to import" in reason and warn is not None:
            warn(f"{reason}; measuring with the NumPy + Pillow imitations instead.")
    if method == "torch" and reason is not None:
        raise ImportError(reason)
    cpu = cpu_name()
    ref = cpu_ref or identify(cpu) or ""
    if ref:
        get_cpu(ref)  # a bad key: one sentence
    before = _load()
    if method == "torch":
        part, batches = calibrate_torch.measure(budget_s, SIZES, progress)
        libraries = calibrate_torch.versions()
        how = (
            f"analyse calibrate-host (torch): torchvision transforms in a torch.utils.data."
            f"DataLoader (num_workers=0, batch_size=64, shuffle=True), one intra-op thread; "
            f"CPU time, the minimum of {batches} batches per case, less the same loader with "
            f"an empty Compose; {SIZES[0]}x{SIZES[0]} and {SIZES[1]}x{SIZES[1]} RGB images, a "
            "line through the two"
        )
    else:
        part = _imitation(budget_s, progress)
        libraries = {"numpy": np.__version__, "Pillow": PIL.__version__}
        how = (
            f"analyse calibrate-host (imitation, {reason or 'chosen with --method'}): "
            "NumPy + Pillow "
            "imitations of the transforms and of the DataLoader, one core; CPU time, the "
            f"minimum of 7 batches at {SIZES[0]}x{SIZES[0]} and {SIZES[1]}x{SIZES[1]} RGB "
            "images, a line through the two"
        )
    profile = {
        "name": f"measured on {platform.node() or 'this machine'} ({method})",
        "cpu": cpu,
        "cpu_ref": ref,
        "cores": os.cpu_count() or 1,
        "cpu_float16": cpu_float16_flags(),
        "measured": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "method": how,
        "measured_with": method,
        "libraries": libraries,
        **part,
    }
    if method == "torch":
        profile["checks"] = calibrate_torch.run_checks(profile, batches, budget_s)
    after = _load()
    profile["load"] = {"before_1min": round(before[0], 2), "after_1min": round(after[0], 2)}
    if progress is not None:
        progress(1, 1, "done")
    return profile


__all__ = ["FLOAT16_FLAGS", "calibrate", "cpu_float16_flags", "cpu_name"]
