"""Code sizes of the cross-replica collectives, compiled as PopLibs' ring programs, and of
exchanges and streams (engine.compiler.collectives, engine.compiler.memory)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

import engine
from engine.compiler import collectives
from profiles.schema import MEMORY_CATEGORIES

BASE = dict(model="resnet50", image_size=32, micro_batch_size=8, num_classes=10, precision="16.16")
REPLICAS = (1, 2, 8, 64, 256)


def _per_tile_peak(compiled, cat: str) -> int:
    return int(compiled.memory.by_category[..., MEMORY_CATEGORIES.index(cat)].max())


def _total(compiled, cat: str) -> int:
    return int(compiled.memory.by_category[..., MEMORY_CATEGORIES.index(cat)].sum())


@pytest.fixture(scope="module")
def by_replicas():
    return {r: engine.compile(dict(BASE, replication_factor=r)) for r in REPLICAS}


def test_global_exchange_and_control_code_grow_with_replicas_host_exchange_stays(by_replicas):
    c = by_replicas
    glob = [_per_tile_peak(c[r], "globalExchangeCode") for r in REPLICAS]
    control = [_total(c[r], "controlCode") for r in REPLICAS]
    host = [_total(c[r], "hostExchangeCode") for r in REPLICAS]
    assert glob[0] == 0 and min(glob[1:]) > 0
    # two ring directions from 3 replicas on (PopLibs' method choice)
    assert glob[-1] > glob[1]
    # the fragment switches add control code per replica in the ring (1..64) until the fragments
    # are so small per tile that PopLibs slices them dynamically instead (256: no switch); the
    # cases selecting each replica's exchange keep growing, so control code never falls
    assert all(a < b for a, b in pairwise(control[:4]))
    assert control[4] >= control[3]
    assert len(set(host)) == 1
    # the ring is a Repeat loop, not one program per step: far below 2(R-1) transfers
    assert glob[-1] < 2 * 255 * 192


def test_other_code_categories_do_not_depend_on_replicas(by_replicas):
    grown = {
        "globalExchangeCode",
        "internalExchangeCode",  # the fragment switches' copies
        "controlCode",
        "controlTable",
        "copyDescriptor",
        "globalExchangePacketHeader",
    }
    one, many = by_replicas[1], by_replicas[64]
    for cat in MEMORY_CATEGORIES:
        if cat in grown or cat == "variable":
            continue
        assert _total(many, cat) == pytest.approx(_total(one, cat), rel=0.01), cat


def test_replicated_tensor_sharding_keeps_the_stream_regions():
    cfg = dict(BASE, optimiser="adam", offload_optimiser_state="on", replication_factor=4)
    plain = engine.compile(cfg)
    sharded = engine.compile(dict(cfg, replicated_tensor_sharding=True))
    h_plain, h_sharded = _total(plain, "hostExchangeCode"), _total(sharded, "hostExchangeCode")
    # one stream region per offloaded tensor either way: only the instructions for fewer bytes
    assert h_sharded == pytest.approx(h_plain, rel=0.1)
    assert h_sharded > 0.75 * h_plain  # far from divided by the replicas
    # the sharded state itself is a quarter of the on-tile buffers
    kind = sharded.variables.kind
    assert (
        np.asarray(sharded.variables.remote_bytes).sum()
        < np.asarray(plain.variables.remote_bytes).sum()
    )
    del kind


def test_internal_exchange_code_sits_on_senders_and_receivers():
    c = engine.compile(dict(BASE, mode="inference"))
    code = _total(c, "internalExchangeCode")
    p = c.programs
    # receivers only would be sum over exchanges of (base + instructions) x receiving tiles
    t = c.target
    is_ex = np.char.endswith(p.name.astype(str), "/Exchange")
    per_tile = -(-p.bytes_in[is_ex] // np.maximum(p.tile_count[is_ex], 1))
    receivers = int(
        (
            (
                t.exchange_code_base_bytes
                + t.exchange_code_bytes_per_instruction
                * -(-per_tile // t.exchange_bytes_per_instruction)
            )
            * p.tile_count[is_ex]
        ).sum()
    )
    assert code > receivers


def test_a_pod_of_several_racks_adds_a_gw_link_ring():
    # IPU-POD256: 4 Pod64 racks; 256 replicas ring inside each rack, then across the racks
    one_rack = engine.compile(dict(BASE, replication_factor=64, system="mk2-pod64"))
    four = engine.compile(dict(BASE, replication_factor=256, system="mk2-pod256"))
    flat = engine.compile(dict(BASE, replication_factor=256))
    g = {
        k: _per_tile_peak(c, "globalExchangeCode")
        for k, c in (("pod64", one_rack), ("pod256", four), ("flat", flat))
    }
    # the GW-Link ring adds its copies; a flat ring of 256 holds a pair per replica in each copy,
    # more than the rack's 64 and the racks' 4 of the two levels
    assert g["flat"] > g["pod256"] > g["pod64"]


def test_ring_levels_and_directions_follow_poplibs():
    assert collectives.ring_sizes(2) == [2]
    assert collectives.ring_sizes(64) == [64]
    assert collectives.ring_sizes(256, racks=4) == [64, 4]
    assert collectives.ring_sizes(32, racks=2) == [16, 2]
    assert collectives.ring_directions(2, 1) == 1  # clockwise ring
    assert collectives.ring_directions(8, 1) == 2  # meet in the middle / bidirectional pair
    assert collectives.ring_directions(8, 2) == 1  # several IPUs per replica: clockwise
    big = collectives.collective(64 << 20, 2, 1472, replicas=16, ipus_per_replica=1)
    small = collectives.collective(64 << 10, 2, 1472, replicas=16, ipus_per_replica=1)
    assert big.switch_cases == 2 * 16  # a switch case per fragment, per direction
    assert small.switch_cases == 0  # a sliceable copy costs less than the switch code


def test_collective_programs_in_the_tree_carry_their_code(by_replicas):
    from engine.execute import execute

    code = {}
    for r in (2, 64):
        nodes = execute(by_replicas[r]).nodes
        leaf = np.asarray(nodes["name"]).astype(str) == "replicas.AllReduce"
        assert leaf.sum() == 1
        code[r] = int(nodes["code_bytes"][leaf][0])
        # the node's code is the compile's reduce-scatter and all-gather ring programs
        assert code[r] == sum(by_replicas[r].io.collective_code_bytes[0]) > 0
    assert code[64] > code[2]


# Code that grows with the replicas: Graphcore's Memory and Performance Optimisation Guide,
# section 4.3.1 ("Graph replication"), measures the global exchange code growing linearly with
# the number of replicas, 4x from 1 to 4.

PIPELINED = dict(
    model="bert-base",
    seq_length=128,
    num_ipus=4,
    strategy="pipelined",
    split_points=["encoder.layer.3", "encoder.layer.6", "encoder.layer.9"],
    micro_batch_size=2,
    gradient_accumulation=8,
    precision="16.16",
)


def test_global_exchange_code_is_four_times_larger_at_four_replicas():
    """A pipelined model served on 1 and 4 replicas: no collectives, only the inter-IPU copies,
    whose global exchange code the one executable holds for each replica: exactly 4x."""
    one, four = (
        engine.compile(
            dict(
                PIPELINED,
                mode="inference",
                gradient_accumulation=1,
                device_iterations=4,
                replication_factor=r,
            )
        )
        for r in (1, 4)
    )
    g1, g4 = _total(one, "globalExchangeCode"), _total(four, "globalExchangeCode")
    assert g1 > 0 and g4 == 4 * g1
    # and the replicated graph selects its replica's exchange: control code grows too
    assert _total(four, "controlCode") > _total(one, "controlCode")


def test_training_code_grows_linearly_with_replicas():
    """Training on 1 to 16 replicas of 4 IPUs: global exchange code, internal exchange code
    (the fragment switches' copies) and control code grow with the replicas; the global
    exchange code's growth per added replica is about constant (linear, not the ring's
    constant cost the fragments' shrinking would give)."""
    rs = (1, 2, 4, 8, 16)
    c = {r: engine.compile(dict(PIPELINED, replication_factor=r)) for r in rs}
    glob = [_total(c[r], "globalExchangeCode") for r in rs]
    internal = [_total(c[r], "internalExchangeCode") for r in rs]
    control = [_total(c[r], "controlCode") for r in rs]
    for series in (glob, internal, control):
        assert all(a < b for a, b in pairwise(series)), series
    assert glob[2] >= 4 * glob[0]  # 1 -> 4: at least the guide's factor (plus the collectives)
    slopes = [(glob[i + 1] - glob[i]) / (rs[i + 1] - rs[i]) for i in range(1, len(rs) - 1)]
    assert max(slopes) < 1.25 * min(slopes), slopes
    # code other than exchange and control does not depend on the replicas
    for cat in ("vertexCode", "vertexInstanceState", "stack", "constant"):
        assert _total(c[16], cat) == _total(c[1], cat), cat


def test_one_replica_compiles_no_replica_code():
    """At one replica the inter-IPU copies keep one exchange each and there is no collective."""
    one = engine.compile(dict(PIPELINED, replication_factor=1))
    t = one.target
    per_tile = one.memory.by_category[..., MEMORY_CATEGORIES.index("globalExchangeCode")]
    # a training stage sends and receives activations and gradients: at most 4 transfers
    assert per_tile.max() <= 4 * t.global_exchange_code_bytes_per_transfer


def test_a_cross_replica_copy_holds_one_exchange_per_pair():
    """Each replica added to a ring adds one pair's exchange to each of its copies, and one
    case selecting it."""
    from engine.compiler.code import ring_code
    from engine.targets import get_target

    t = get_target("mk2")
    nbytes = 16 << 20
    codes = {}
    for r in (4, 8):
        ring = collectives.collective(nbytes * r, 2, 1472, replicas=r, ipus_per_replica=4)
        (level,) = ring.levels
        assert level.directions == 1 and collectives.copy_pairs(level) == r
        codes[r] = ring_code(t, ring, 1472)
    # the fragment is the same 16 MiB either way: the 4 more pairs add 4 exchanges of it
    pair = t.exchange_code_base_bytes + 2 * t.exchange_code_bytes_per_instruction * (
        -(-(nbytes // 1472 + 1) // t.exchange_bytes_per_instruction)
    )
    assert codes[8].global_exchange - codes[4].global_exchange == pytest.approx(4 * pair, rel=0.05)
    assert codes[8].control > codes[4].control


@pytest.mark.parametrize(
    "config",
    [
        "resnet50-bow-pod64.toml",
        "resnet50-bow-pod256.toml",
        "bert-large-sl128-popart-bow-pod64.toml",
        "bert-large-sl128-tf2-bow-pod64.toml",
    ],
)
def test_published_pod_configurations_still_fit(config):
    """Graphcore trains these on 64 and 256 replicas: with code growing with the replicas they
    still fit in memory."""
    from pathlib import Path

    from engine.config import RunConfig

    path = Path(__file__).resolve().parents[1] / "assets/runs/reference" / config
    compiled = engine.compile(RunConfig.from_toml(path))
    assert int(np.sum(compiled.memory.oom_tiles)) == 0
