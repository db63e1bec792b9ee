"""Run configurations of the public reference figures (benchmarks/bench_fidelity.py)."""
