"""Benchmark: the walkthrough's published figures decomposed into parts, beside the engine's.

The reference run of the walkthrough (../shared/brief/walkthrough.md, "Published figures of the
reference run") published, for steps 2-5, PopVision's Execution Trace summary (total cycles,
StreamCopy Rx / Tx per IPU) and, for steps 3-6, the training progress bar (iterations per
second, one iteration = one host call). Those steps differ in one option at a time, so the
figures can be split into parts:

* cycles of one host call = C + n_wu x W + n_mb x M, with n_wu weight updates (device
  iterations) and n_mb micro-batches (GA x DI) per call: C the per-call constant, W what each
  weight update adds (the pipeline's ramp-up and ramp-down, the optimiser step), M what each
  micro-batch adds. Steps 2 (1, 3), 3 (1, 8) and 4 (4, 32) give the three parts exactly;
  step 5 - step 4 is what 8-bit input saves per micro-batch.
* StreamCopy bytes per IPU = a + b x n_mb (per call and per micro-batch), least squares over
  steps 2-4 (the GUI rounds to three figures); IPU 1's Rx from steps 2-3 (steps 4-5 show
  "0 kB" of labels where 8 KiB were sent).
* host per call (progress bar time less the trace's device time) = K + n x h for the sync steps:
  steps 3 and 4 (FP16 input) give the host per sample h and the per-call remainder K; a
  negative K says the steady-state call is shorter than the profiled one. Step 5 (8-bit, sync)
  less step 6 (8-bit, async: the loader process bounds the call) gives K again, if the loader
  process costs what the main process did per sample.

The engine's figures go through the same formulas (its steps 2-6 simulated in-process with
``engine.simulate``: compile and execute, no profile written), so each part is compared with
its like. ``--json FILE`` writes the engine's parts; ``--before FILE`` prints them beside an
earlier run's (docs/fidelity.md, "Walkthrough parts", keeps both).

Usage: python benchmarks/bench_walkthrough_parts.py [--json FILE] [--before FILE] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

#: Published figures (../shared/brief/walkthrough.md): Execution Trace "Total Cycles"; StreamCopy
#: Rx / Tx per IPU in bytes as the GUI shows them (its kB and MB are KiB and MiB); progress bars
#: of epoch 2 as seconds per iteration (one host call).
PUBLISHED_CYCLES = {2: 60_111_417, 3: 95_653_315, 4: 283_021_420, 5: 278_393_266}
KIB, MIB = 1024, 1024 * 1024
PUBLISHED_STREAM = {  # step: ((rx0, tx0), (rx1, tx1))
    2: ((4.5 * MIB, 51.8 * KIB), (768, 141 * KIB)),
    3: ((12.0 * MIB, 138 * KIB), (2.0 * KIB, 141 * KIB)),
    4: ((48.0 * MIB, 552 * KIB), (0, 142 * KIB)),
    5: ((24.0 * MIB, 551 * KIB), (0, 142 * KIB)),
}
PUBLISHED_SECONDS_PER_CALL = {3: 1 / 2.10, 4: 1.88, 5: 1 / 1.77, 6: 1 / 2.75}
#: (weight updates, micro-batches, samples) per host call of each step.
SHAPE = {2: (1, 3, 192), 3: (1, 8, 512), 4: (4, 32, 2048), 5: (4, 32, 2048), 6: (4, 32, 2048)}
STEMS = {2: "2-half", 3: "3-accumulate", 4: "4-device-iterations", 5: "5-8bit-io", 6: "6-async"}


def _mk2_clock_hz() -> float:
    """The Mk2 GC200's clock (engine/data/chips.toml): the published cycles are Mk2 cycles."""
    from engine.targets import get_target

    return float(get_target("mk2").clock_hz)


CLOCK_HZ = _mk2_clock_hz()


def cycle_parts(cycles: dict[int, float]) -> dict[str, float]:
    """C, W, M from steps 2-4 (exact), and the 8-bit saving per micro-batch (step 4 - 5)."""
    a = np.array([[1.0, *SHAPE[s][:2]] for s in (2, 3, 4)])
    c, w, m = np.linalg.solve(a, np.array([cycles[s] for s in (2, 3, 4)], float))
    return {
        "per_call": float(c),
        "per_weight_update": float(w),
        "per_micro_batch": float(m),
        "saved_per_micro_batch_8bit": float((cycles[4] - cycles[5]) / SHAPE[4][1]),
    }


def stream_parts(stream: dict[int, tuple]) -> dict[str, float]:
    """Per IPU and direction: bytes per call and per micro-batch (least squares, steps 2-4)."""
    out = {}
    for ipu in (0, 1):
        for k, d in enumerate(("rx", "tx")):
            # IPU 1's Rx is the labels; the published steps 4-5 show "0 kB" where the labels are
            # 8 KiB, so only steps 2-3 are read for it
            steps = (2, 3) if (ipu, d) == (1, "rx") else (2, 3, 4)
            a = np.array([[1.0, SHAPE[s][1]] for s in steps])
            y = np.array([stream[s][ipu][k] for s in steps], float)
            (per_call, per_mb), *_ = np.linalg.lstsq(a, y, rcond=None)
            out[f"ipu{ipu}_{d}_per_call"] = float(per_call)
            out[f"ipu{ipu}_{d}_per_micro_batch"] = float(per_mb)
    return out


def host_parts(seconds: dict[int, float], cycles: dict[int, float]) -> dict[str, float]:
    """Host per sample and per-call remainder from the host-inclusive time of each call."""
    rest = {s: seconds[s] - cycles[s] / CLOCK_HZ for s in (3, 4, 5)}
    n3, n4 = SHAPE[3][2], SHAPE[4][2]
    h16 = (rest[4] - rest[3]) / (n4 - n3)
    k16 = rest[3] - n3 * h16
    h8 = seconds[6] / SHAPE[6][2]  # the async loader bounds step 6
    return {
        "host_us_per_sample_fp16": h16 * 1e6,
        "per_call_rest_ms_fp16": k16 * 1e3,
        "host_us_per_sample_8bit_async": h8 * 1e6,
        "per_call_rest_ms_8bit": (rest[5] - SHAPE[5][2] * h8) * 1e3,
        "host_us_per_sample_8bit_sync": rest[5] / SHAPE[5][2] * 1e6,
    }


def published() -> dict[str, float]:
    c5 = dict(PUBLISHED_CYCLES)
    return {
        **cycle_parts(c5),
        **stream_parts(PUBLISHED_STREAM),
        **host_parts(PUBLISHED_SECONDS_PER_CALL, c5),
    }


def run_engine() -> tuple[dict[str, float], dict[str, float], float]:
    """Simulate steps 2-6; their figures in the published figures' form, the parts, seconds."""
    import engine
    from analyser.cli.demo import walkthrough_configs
    from engine.config import RunConfig
    from profiles.schema import code

    host = code("destination", "host")
    t0 = time.perf_counter()
    cycles, stream, seconds, figures = {}, {}, {}, {}
    cfgs = {p.stem: p for p in walkthrough_configs()}
    for s, stem in STEMS.items():
        ex = engine.simulate(RunConfig.from_toml(cfgs[stem])).execution
        st = ex.steps
        at_host = st["dest"] == host
        per_ipu = []
        for ipu in (0, 1):
            sel = at_host & (st["ipu"] == ipu)
            per_ipu.append((float(st["bytes_in"][sel].sum()), float(st["bytes_out"][sel].sum())))
        cycles[s] = float(ex.attrs["total_cycles"])
        stream[s] = tuple(per_ipu)
        seconds[s] = SHAPE[s][2] / float(ex.attrs["throughput"])
        figures[f"step{s}_total_cycles"] = cycles[s]
        figures[f"step{s}_samples_per_s"] = float(ex.attrs["throughput"])
        for ipu in (0, 1):
            figures[f"step{s}_ipu{ipu}_rx"], figures[f"step{s}_ipu{ipu}_tx"] = per_ipu[ipu]
    parts = {**cycle_parts(cycles), **stream_parts(stream), **host_parts(seconds, cycles)}
    return figures, parts, time.perf_counter() - t0


#: (key, label, unit, scale) of the parts table, in order.
ROWS = [
    ("per_call", "cycles per host call (constant)", "M cycles", 1e-6),
    ("per_weight_update", "cycles per weight update", "M cycles", 1e-6),
    ("per_micro_batch", "cycles per micro-batch", "M cycles", 1e-6),
    ("saved_per_micro_batch_8bit", "cycles 8-bit input saves per micro-batch", "k cycles", 1e-3),
    ("ipu0_rx_per_micro_batch", "IPU 0 Rx per micro-batch", "KiB", 1 / KIB),
    ("ipu0_tx_per_micro_batch", "IPU 0 Tx per micro-batch", "KiB", 1 / KIB),
    ("ipu0_tx_per_call", "IPU 0 Tx per call", "KiB", 1 / KIB),
    ("ipu1_rx_per_micro_batch", "IPU 1 Rx per micro-batch", "B", 1.0),
    ("ipu1_tx_per_micro_batch", "IPU 1 Tx per micro-batch", "B", 1.0),
    ("ipu1_tx_per_call", "IPU 1 Tx per call", "KiB", 1 / KIB),
    ("host_us_per_sample_fp16", "host per sample, FP16 input (steps 3, 4)", "us", 1.0),
    ("per_call_rest_ms_fp16", "per-call remainder, steps 3-4", "ms", 1.0),
    (
        "host_us_per_sample_8bit_sync",
        "host per sample, 8-bit sync (step 5, incl. per call)",
        "us",
        1.0,
    ),
    ("host_us_per_sample_8bit_async", "host per sample, 8-bit async loader (step 6)", "us", 1.0),
    ("per_call_rest_ms_8bit", "per-call remainder, steps 5-6", "ms", 1.0),
]


def _fmt(v: float | None, scale: float) -> str:
    if v is None:
        return "-"
    x = v * scale
    return f"{x:,.2f}" if abs(x) < 100 else f"{x:,.0f}"


def _diff(eng: float | None, pub: float) -> str:
    if eng is None:
        return "-"
    if abs(pub) < 1e-9:
        return "-"
    return f"{(eng - pub) / abs(pub) * 100:+.0f}%"


def table(pub: dict, eng: dict, before: dict | None, markdown: bool) -> str:
    head = ["part", "unit", "published", "engine", "engine - published"]
    if before is not None:
        head[3:3] = ["engine before", "before - published"]
    rows = []
    for key, label, unit, scale in ROWS:
        row = [label, unit, _fmt(pub[key], scale)]
        if before is not None:
            b = before.get(key)
            row += [_fmt(b, scale), _diff(b, pub[key])]
        row += [_fmt(eng.get(key), scale), _diff(eng.get(key), pub[key])]
        rows.append(row)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*r) for r in [head, *rows])


def steps_table(figures: dict, before: dict | None, markdown: bool) -> str:
    """Per step: total cycles and host-inclusive samples/s against the published figures."""
    pub_sps = {s: SHAPE[s][2] / PUBLISHED_SECONDS_PER_CALL[s] for s in PUBLISHED_SECONDS_PER_CALL}
    head = [
        "step",
        "published cycles",
        "engine cycles",
        "error",
        "published samples/s",
        "engine samples/s",
        "error",
    ]
    if before is not None:
        head[3:3] = ["error before"]
        head.insert(7, "error before")
    rows = []
    for s in STEMS:
        pc, ec = PUBLISHED_CYCLES.get(s), figures[f"step{s}_total_cycles"]
        ps, es = pub_sps.get(s), figures[f"step{s}_samples_per_s"]
        r = [STEMS[s], f"{pc:,}" if pc else "-", f"{ec:,.0f}", _diff(ec, pc) if pc else "-"]
        if before is not None:
            b = before.get(f"step{s}_total_cycles")
            r.insert(3, _diff(b, pc) if pc and b else "-")
        r += [f"{ps:,.0f}" if ps else "-", f"{es:,.0f}", _diff(es, ps) if ps else "-"]
        if before is not None:
            b = before.get(f"step{s}_samples_per_s")
            r.insert(7, _diff(b, ps) if ps and b else "-")
        rows.append(r)

    # step ratios the walkthrough's story rests on
    def ratio(fig, a, b):
        return fig[f"step{b}_samples_per_s"] / fig[f"step{a}_samples_per_s"]

    pub_fig = {f"step{s}_samples_per_s": v for s, v in pub_sps.items()}
    extra = []
    for a, b, what in ((3, 4, "DI 4 / GA 8"), (4, 5, "8-bit / DI 4"), (5, 6, "async / 8-bit")):
        p, e = ratio(pub_fig, a, b), ratio(figures, a, b)
        line = f"{what}: published x{p:.3f}, engine x{e:.3f} ({(e - p) / p * 100:+.0f}%)"
        if before is not None and f"step{a}_samples_per_s" in before:
            bb = ratio(before, a, b)
            line += f", before x{bb:.3f} ({(bb - p) / p * 100:+.0f}%)"
        extra.append(line)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n\n" + "\n".join(f"- {x}" for x in extra)
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join(fmt.format(*r) for r in [head, *rows]) + "\n" + "\n".join(extra)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE", help="write the engine's figures and parts as JSON")
    ap.add_argument("--before", metavar="FILE", help="an earlier --json to print beside")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = ap.parse_args(argv)
    before = None
    if args.before:
        try:
            before = json.loads(Path(args.before).read_text())
        except (OSError, ValueError) as exc:
            print(
                f"error: --before {args.before!r} cannot be read as JSON: {exc}.", file=sys.stderr
            )
            return 2
    figures, parts, secs = run_engine()
    pub = published()
    print(steps_table(figures, before and before.get("figures"), args.markdown))
    print()
    print(table(pub, parts, before and before.get("parts"), args.markdown))
    print(f"\n(engine: steps 2-6 simulated in {secs:.1f} s)")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"figures": figures, "parts": parts, "published": pub}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
