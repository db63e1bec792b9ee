"""``analyse calibrate-host`` with the real library: torchvision's transforms in a real DataLoader.

Every transform of the host model (:mod:`engine.host.profile`) is the torchvision transform (or
the Pillow call torchvision's datasets make) that a PyTorch / PopTorch pipeline runs, inside a
real ``torch.utils.data.DataLoader`` (``num_workers=0``: the main process, ``batch_size=64``,
``shuffle=True``) over a map-style dataset whose ``__getitem__`` applies ``Compose([transform])``
to one of 128 distinct prepared inputs and returns ``(sample, label)``:

* the **loader overhead** is the same loader with an empty ``Compose`` and a collate that keeps
  the batch as a list: the sampler, the fetch, ``Compose`` and the batch per sample;
* a **transform** costs its loader minus that baseline (its batches keep the list collate, since
  a PIL image cannot be collated);
* **collate** is PyTorch's ``default_collate`` (stacking the samples, making the label tensor)
  minus the baseline, per dtype;
* the **token path** (``tokens``, and ``collate`` in int64) is the same loader over pre-tokenised
  int64 rows of 128 and 512 ids: ``__getitem__`` returns ``torch.from_numpy(row)``, and the
  default collate stacks a batch of them.

Times are CPU time of this process (``time.process_time``: not wall time, so waiting for a busy
machine's other work does not count), with PyTorch's intra-op threads set to one (a one-core
measurement); the figure of a case is the minimum over its batches (the quietest batch). Each
case runs at two image sizes; a line through the two gives the fixed cost per sample and the
cost per element. Two whole pipelines (the walkthrough's, with and without 8-bit input) are then
timed end to end in the same kind of loader with ``default_collate`` and recorded beside the sum
of their parts (``checks``), so that the profile says how well its parts add up.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from functools import lru_cache

import numpy as np

#: Batch size of the measuring DataLoader (the issue's and the walkthrough's micro-batch).
BATCH = 64
#: Bytes of distinct prepared images per case (at the default budget and above), and the bounds
#: on their number: more than a core's L2 cache holds, so that a case does not run from it (a
#: real dataset's images come from memory: CIFAR-10's training set alone is 150 MB). Smaller
#: budgets use smaller pools (2 MB per second of budget, at least 1 MB).
POOL_BYTES = 8 << 20
POOL_MIN, POOL_MAX = 64, 2048


def pool_bytes(budget_s: float) -> int:
    """Bytes of prepared images per case for a measurement budget of ``budget_s`` seconds."""
    return int(min(POOL_BYTES, max(1 << 20, budget_s * (2 << 20))))


#: ImageNet statistics, torchvision's examples' Normalize (the walkthrough's IMAGENET_STATISTICS).
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def unavailable_reason() -> str | None:
    """Why torch and torchvision cannot be used here (None: they import).

    A missing library is an ImportError; a broken install (a torchvision built for another
    torch, a missing CUDA or C++ runtime library, an operator registered twice) raises other
    errors at import, most often RuntimeError or OSError: each is a reason, never a traceback."""
    for name in ("torch", "torchvision"):
        try:
            __import__(name)
        except ImportError:
            return f"{name} is not installed"
        except Exception as exc:  # a broken install fails at import in its own way
            text = " ".join(str(exc).split())[:160] or "no message"
            return f"{name} is installed but fails to import ({type(exc).__name__}: {text})"
    return None


def available() -> bool:
    """Are torch and torchvision importable (installed and not broken)?"""
    return unavailable_reason() is None


def versions() -> dict[str, str]:
    """Versions of the libraries the measurement runs."""
    import PIL
    import torch
    import torchvision

    return {
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "Pillow": PIL.__version__,
        "numpy": np.__version__,
    }


def _arrays(side: int, pool: int) -> list[np.ndarray]:
    """Distinct smooth-plus-noise RGB images (HWC uint8; JPEGs of them have real sizes), ``pool``
    bytes of them."""
    n = int(min(POOL_MAX, max(POOL_MIN, pool // (side * side * 3))))
    rng = np.random.default_rng(side)
    y, x = np.mgrid[0:side, 0:side]
    base = (np.stack([x, y, x + y], axis=-1) * (255.0 / (2 * side))).astype(np.int16)
    noise = rng.integers(-24, 25, (n, side, side, 3), dtype=np.int16)
    return list(np.clip(base[None] + noise, 0, 255).astype(np.uint8))


def _loader_sample_s(items: list, transform, collate, batches: int) -> float:
    """Minimum CPU seconds per sample over ``batches`` batches of a real DataLoader."""
    from torch.utils.data import DataLoader, Dataset

    class _Items(Dataset):
        def __len__(self) -> int:
            return (batches + 1) * BATCH

        def __getitem__(self, i: int):
            return transform(items[i % len(items)]), 0

    loader = DataLoader(_Items(), batch_size=BATCH, shuffle=True, num_workers=0, collate_fn=collate)
    it = iter(loader)
    next(it)  # warm-up batch (first calls, allocator), not timed
    best = float("inf")
    for _ in range(batches):
        t0 = time.process_time()
        next(it)
        best = min(best, time.process_time() - t0)
    return best / BATCH


def _as_list(batch: list) -> list:
    return batch


@lru_cache(maxsize=32)  # one measurement's inputs, shared by its cases; cleared at its end
def _inputs(kind: str, side: int, pool: int, dtype=None) -> list:
    """The prepared inputs of one case: numpy arrays, JPEG bytes, PIL images or tensors."""
    from PIL import Image

    arrays = _inputs("array", side, pool) if kind != "array" else _arrays(side, pool)
    if kind == "array":
        return arrays
    if kind == "jpeg":
        out = []
        for a in arrays:
            buf = io.BytesIO()
            Image.fromarray(a, "RGB").save(buf, format="JPEG", quality=90)
            out.append(buf.getvalue())
        return out
    pil = [Image.fromarray(a, "RGB") for a in arrays]
    if kind == "pil":
        return pil
    # as the pipeline hands them on: PILToTensor's output is a channels-first *view* of the
    # image's HWC buffer (not contiguous), and ConvertImageDtype keeps those strides; kernels
    # on such tensors cost up to several times those on contiguous ones
    from torchvision import transforms as T

    chw = [T.PILToTensor()(p) for p in pil]
    if kind == "uint8_tensor":
        return chw
    if kind == "float_tensor":
        return [T.ConvertImageDtype(dtype)(t) for t in chw]
    return [T.Normalize(MEAN, STD)(T.ConvertImageDtype(dtype)(t)) for t in chw]  # "normalised"


def _cases(dtype_names: tuple[str, ...], pool: int) -> list[tuple[str, str, Callable]]:
    """(transform, element dtype, factory(side) -> (inputs, transform, collate, elements))."""
    import torch
    from PIL import Image
    from torch.utils.data import default_collate
    from torchvision import transforms as T

    def pil_loader(data: bytes):  # torchvision.datasets.folder.pil_loader on bytes
        return Image.open(io.BytesIO(data)).convert("RGB")

    def fromarray(a):  # torchvision.datasets.CIFAR10.__getitem__
        return Image.fromarray(a)

    def convert(dtype):
        return T.ConvertImageDtype(dtype)

    def simple(kind: str, make_t, in_side=lambda s: s):
        def make(side):
            return _inputs(kind, in_side(side), pool), make_t(side), _as_list, side * side * 3

        return make

    def tensor_case(make_t, dtype):
        def make(side):
            kind = "uint8_tensor" if dtype == torch.uint8 else "float_tensor"
            return _inputs(kind, side, pool, dtype), make_t(side), _as_list, side * side * 3

        return make

    def collate_case(dtype):
        def make(side):
            kind = "uint8_tensor" if dtype == torch.uint8 else "normalised"
            inputs = _inputs(kind, side, pool, dtype)
            return inputs, T.Compose([]), default_collate, side * side * 3

        return make

    out = [
        ("decode_jpeg", "uint8", simple("jpeg", lambda s: T.Compose([pil_loader]))),
        ("from_array", "uint8", simple("array", lambda s: T.Compose([fromarray]))),
        ("flip", "uint8", simple("pil", lambda s: T.Compose([T.RandomHorizontalFlip()]))),
        (
            "resize",
            "uint8",
            simple("pil", lambda s: T.Compose([T.Resize((s, s))]), lambda s: s // 2),
        ),
        (
            "random_crop",
            "uint8",
            simple("pil", lambda s: T.Compose([T.RandomCrop(s)]), lambda s: s + 8),
        ),
        ("to_tensor", "uint8", simple("pil", lambda s: T.Compose([T.PILToTensor()]))),
        ("collate", "uint8", collate_case(torch.uint8)),
    ]
    for name in dtype_names:
        dt = getattr(torch, name)
        out += [
            (
                "convert_dtype",
                name,
                tensor_case(lambda s, d=dt: T.Compose([convert(d)]), torch.uint8),
            ),
            ("normalise", name, tensor_case(lambda s: T.Compose([T.Normalize(MEAN, STD)]), dt)),
            ("collate", name, collate_case(dt)),
        ]
    return out


def _token_cases() -> list[tuple[str, str, Callable]]:
    """The token path: a map-style dataset over pre-tokenised int64 rows whose ``__getitem__``
    returns ``torch.from_numpy(row)`` (``tokens``, with the list collate), and PyTorch's
    ``default_collate`` stacking a batch of those tensors (``collate`` in int64)."""
    import torch
    from torch.utils.data import default_collate
    from torchvision import transforms as T

    from engine.host.calibrate import token_store

    # in a Compose, as the image cases: the baseline's empty Compose is what is subtracted
    def fetch(length):
        rows = list(token_store(length))
        return rows, T.Compose([torch.from_numpy]), _as_list, length

    def collate(length):
        rows = [torch.from_numpy(r) for r in token_store(length)]
        return rows, T.Compose([]), default_collate, length

    return [("tokens", "int64", fetch), ("collate", "int64", collate)]


def _checks(profile: dict, batches: int, pool: int) -> list[dict]:
    """The walkthrough's pipelines (CIFAR-10 32 x 32 -> 64 x 64) end to end, against the model."""
    import torch
    from PIL import Image
    from torch.utils.data import default_collate
    from torchvision import transforms as T

    from engine.host.profile import HostProfile, sample_cost

    model = HostProfile(**profile)
    arrays = _inputs("array", 32, pool)
    out = []
    for dtype, eight_bit in (("float16", False), ("uint8", True)):
        steps = [Image.fromarray, T.RandomHorizontalFlip(), T.Resize((64, 64)), T.PILToTensor()]
        names = ["from_array", "flip", "resize", "to_tensor"]
        if not eight_bit:
            steps += [T.ConvertImageDtype(torch.float16), T.Normalize(MEAN, STD)]
            names += ["convert_dtype", "normalise"]
        measured = _loader_sample_s(arrays, T.Compose(steps), default_collate, batches)
        modelled = sample_cost(
            model,
            names,
            input_size=32,
            image_size=64,
            channels=3,
            input_dtype="float16",
            eight_bit=eight_bit,
        ).total_us
        out.append(
            {
                "transforms": names,
                "input_size": 32,
                "image_size": 64,
                "dtype": dtype,
                "measured_us": round(measured * 1e6, 3),
                "modelled_us": round(modelled, 3),
            }
        )
    return out


def measure(
    budget_s: float, sizes: tuple[int, int], progress: Callable[[int, int, str], None] | None
) -> tuple[dict, int]:
    """The torch measurement (transforms and loader overhead: part of a host profile) and the
    batches per case it used."""
    import torch

    from engine.host.cost_line import add_line

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core: PyTorch's intra-op pool would spread big tensors
    try:
        batches = int(min(200, max(4, round(budget_s * 2.5))))
        pool = pool_bytes(budget_s)
        from engine.host.calibrate import TOKEN_SIZES

        cases = [(*c, sizes) for c in _cases(("float16", "float32"), pool)]
        cases += [(*c, TOKEN_SIZES) for c in _token_cases()]
        total = len(cases) + 2
        from torchvision import transforms as T

        # the baseline does not depend on the input's size; measured twice for a steadier minimum
        inputs = _inputs("array", sizes[0], pool)
        baseline = min(_loader_sample_s(inputs, T.Compose([]), _as_list, batches) for _ in sizes)
        transforms: dict[str, dict] = {}
        for k, (name, dtype, make, at) in enumerate(cases):
            if progress is not None:
                progress(k, total, f"{name} ({dtype}) in a DataLoader")
            points = []
            for side in at:
                inputs, tf, collate, elems = make(side)
                t = _loader_sample_s(inputs, tf, collate, batches)
                points.append((elems, max(0.0, t - baseline)))
            add_line(transforms, name, dtype, points)
        partial = {"transforms": transforms, "loader_us_per_sample": round(baseline * 1e6, 3)}
        if progress is not None:
            progress(len(cases), total, "whole pipelines in a DataLoader")
        return partial, batches
    finally:
        _inputs.cache_clear()
        torch.set_num_threads(threads)


def run_checks(profile: dict, batches: int, budget_s: float) -> list[dict]:
    """:func:`_checks` with one intra-op thread (as the measurement)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _checks(profile, batches, pool_bytes(budget_s))
    finally:
        _inputs.cache_clear()
        torch.set_num_threads(threads)


__all__ = ["available", "measure", "run_checks", "unavailable_reason", "versions"]
