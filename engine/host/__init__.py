"""The host side of a run: framework defaults, host profiles and the data-pipeline cost model.

* :mod:`engine.host.frameworks`: the defaults a run gets from its framework (PopTorch, PopART,
  TensorFlow), loaded from ``engine/data/frameworks.toml`` with each value's source.
* :mod:`engine.host.profile`: host profiles (per-transform costs measured by
  ``analyse calibrate-host``) and the per-sample cost of a run's named host transforms.
* :mod:`engine.host.cpus`: host CPUs and their sourced per-core figures
  (``engine/data/cpus.toml``), by which a profile measured on one CPU is scaled to another.
* :mod:`engine.host.calibrate`: the measurement itself: :mod:`engine.host.calibrate_torch` (the
  real torchvision transforms in a real DataLoader, with the optional torch extra) or NumPy +
  Pillow imitations (the labelled fallback).
"""
