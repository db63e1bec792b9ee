"""Host-to-device stream copies carry their receiving tiles' read requests back towards the host.

Each tile that receives a micro-batch's input or labels sends one read request per copy
(``Target.host_read_request_bytes``), whatever the bytes it receives: PopVision's StreamCopy Tx
of the walkthrough's IPU 0 is the same with FP16 and 8-bit input. Device-to-host copies send
their data and nothing else; the requests take no cycles of their own.
"""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.config import RunConfig
from profiles.schema import code

HOST = code("destination", "host")
SCM = code("program_type", "StreamCopyMid")
CNN = dict(model="resnet50", image_size=32, micro_batch_size=8, precision="16.16")


def _copies(cfg: dict):
    r = engine.simulate(RunConfig.from_dict(cfg))
    st = r.execution.steps
    mid = (st["dest"] == HOST) & (st["type"] == SCM)
    v = r.compiled.variables
    tiles = {n: int(v.tile_count[i]) for i, n in enumerate(v.name) if n in ("input", "labels")}
    return r, st, mid, tiles


@pytest.fixture(scope="module")
def fp16():
    return _copies(CNN)


def test_each_receiving_tile_sends_one_request_per_copy(fp16):
    r, st, mid, tiles = fp16
    req = r.compiled.target.host_read_request_bytes
    assert req > 0
    inbound = mid & (st["bytes_in"] > 0)
    n_mb = r.config.gradient_accumulation * r.config.device_iterations
    # one input and one labels copy per micro-batch, each with its tiles' requests
    assert int(st["bytes_out"][inbound].sum()) == n_mb * req * (tiles["input"] + tiles["labels"])
    assert tiles["input"] > tiles["labels"] >= 1
    # the outputs copied back carry only their data
    outbound = mid & (st["bytes_in"] == 0)
    assert int(st["bytes_out"][outbound].sum()) == r.compiled.io.output_bytes_per_micro_batch


def test_requests_do_not_scale_with_the_bytes_received():
    # the walkthrough's input (64 x 3 x 64 x 64): FP16 and 8-bit both land on every tile
    big = {**CNN, "image_size": 64, "micro_batch_size": 64}
    (r, st, mid, t) = _copies(big)
    _, st8, mid8, t8 = _copies({**big, "eight_bit_input": True})
    assert t["input"] == t8["input"] == r.compiled.target.tiles_per_ipu
    inb, inb8 = mid & (st["bytes_in"] > 0), mid8 & (st8["bytes_in"] > 0)
    images, images8 = st["bytes_in"] == 64 * 3 * 64 * 64 * 2, st8["bytes_in"] == 64 * 3 * 64 * 64
    assert (inb & images).sum() == (inb8 & images8).sum() > 0  # half the bytes, as many copies
    assert st8["bytes_out"][inb8].sum() == st["bytes_out"][inb].sum()


def test_requests_take_no_cycles(fp16):
    r = fp16[0]
    # untimed: the same copy without requests takes the same cycles
    r0, st0, mid0, _ = _copies({**CNN, "target_overrides": {"host_read_request_bytes": 0}})
    assert st0["bytes_out"][mid0 & (st0["bytes_in"] > 0)].sum() == 0
    assert r0.execution.attrs["total_cycles"] == r.execution.attrs["total_cycles"]


def test_io_tiles_receive_the_copies_and_send_the_requests():
    r, st, mid, _ = _copies({**CNN, "io_tiles": 32})
    req = r.compiled.target.host_read_request_bytes
    out = st["bytes_out"][mid & (st["bytes_in"] > 0)]
    assert len(out) and np.all(out == 32 * req)
