"""Cross-replica collectives as the programs PopLibs compiles, and the code they need per tile.

PopLibs builds a replicated reduce-scatter and all-gather (an all-reduce is one then the other)
as a ring program (``lib/popops/CollectivesProgram.hpp``, ``lib/popops/ReplicatedCollectives.cpp``
in github.com/graphcore/poplibs):

* the tensor is split into N fragments (N replicas in the ring) with identical tile mappings
  (``replicatedSplitIntoFragments``); one fragment-sized buffer pair (``ScatterSrc`` / ``Dst``)
  is mapped over the same tiles (``mapBuffer``);
* ``Repeat(N - 1)`` of a loop body: increment the ring index (a compute set), the
  ``CrossReplicaCopy`` programs (one per ring direction), and for reduce-scatter a ``Call`` of the
  fragment-slice function and the reduction (``addInPlace``), for all-gather the copy into the
  gathered fragment; before the loop, the ring-index initialisation and one slice call;
* the fragment slice / update is a ``Switch`` over the N fragments, one ``Copy`` per case,
  whose control code is "3 instructions per case" (``createSliceableTensorIfBenefical``: jump-table
  entry, call, jump), unless copying the fragments to a sliceable tensor is judged cheaper
  (fragment elements per tile x N > N x 12 bytes x 8 expected calls), in which case one dynamic
  slice replaces the switch;
* the ring direction(s): ``pickReduceScatterMethod`` / ``pickAllGatherMethod``: clockwise for a
  ring of 2 or for several IPUs per replica; otherwise meet-in-the-middle (two directions) below
  the byte thresholds or above 16 ranks, else the bidirectional ring pair (two directions).

On a system of several Pod64 racks (``engine.systems``: ``racks_spanned``) the replicas are
joined hierarchically, as the execution times them (GW-Links between Pod64s; Graphcore's GCL
does this in closed source): a ring over the IPU-Links inside each rack, then a ring over the
racks through the GW-Links, each level one such program. Without a system the replicas form one
ring.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``createSliceableTensorIfBenefical``: bytes of control code per switch case (3 instructions)
#: and the number of collective calls PopLibs assumes when weighing switch against slice.
SWITCH_BYTES_PER_CASE = 3 * 4
EXPECTED_COLLECTIVE_CALLS = 8
#: Programs of one ring program besides its switch cases and cross-replica copies
#: (``unidirectionalSequence``): WriteUndef, the rearrangements before / after, the ring-index
#: initialisation and increment, the slice function and its two calls, the Repeat, its body
#: Sequence and the reduction (reduce-scatter) or gather copy (all-gather).
RING_PROGRAMS = 11


@dataclass(frozen=True)
class RingLevel:
    """One ring of a collective: its size, directions and how it slices fragments."""

    ranks: int
    directions: int  # CrossReplicaCopy programs per step (one per direction)
    switch_cases: int  # 0 when the fragments are sliced dynamically
    fragment_bytes: int  # bytes of one fragment on this IPU


@dataclass(frozen=True)
class CollectivePrograms:
    """The programs one replica's IPU compiles for a collective (all levels)."""

    levels: tuple[RingLevel, ...]

    @property
    def cross_replica_copies(self) -> int:
        return sum(lv.directions for lv in self.levels)

    @property
    def switch_cases(self) -> int:
        return sum(lv.switch_cases * lv.directions for lv in self.levels)

    @property
    def replica_cases(self) -> int:
        """Cases selecting this replica's exchange in the cross-replica copies (one per pair)."""
        return sum(copy_pairs(lv) * lv.directions for lv in self.levels)

    @property
    def programs(self) -> int:
        """Control programs: ring structure, switch cases and cross-replica copies."""
        return sum(RING_PROGRAMS + lv.directions * (1 + lv.switch_cases) for lv in self.levels)


def copy_pairs(level: RingLevel) -> int:
    """Source -> destination pairs of one ``CrossReplicaCopy`` of a ring level: PopLibs'
    ``crossReplicaCopy`` gives the copy a replica map with one entry per replica of the ring
    (``replicaMap.emplace(i, mapping(i))`` for every replica), and the replicated graph is one
    executable that every replica runs, so the copy's global exchange code holds every pair's
    exchange (the guide's "linearly with the number of replicas")."""
    return max(1, level.ranks)


def replica_variants(replicas: int) -> int:
    """Exchanges per inter-IPU copy of a replicated graph: one per replica. Graphcore's Memory
    and Performance Optimisation Guide (section 4.3.1, "Graph replication") measures the global
    exchange code of a replicated model growing "linearly with the number of replicas", 4x
    from 1 to 4 replicas: the one executable that every replica runs holds each replica's
    exchange (its IPUs are other IPUs of the system), as a cross-replica copy holds each pair
    of its replica map (``copy_pairs``)."""
    return max(1, int(replicas))


def ring_sizes(replicas: int, racks: int = 1) -> list[int]:
    """Replicas per ring at each level: the replicas of one rack over its IPU-Links, then the
    racks over the GW-Links."""
    if replicas <= 1:
        return []
    racks = max(1, min(int(racks), replicas))
    if racks == 1:
        return [replicas]
    return [-(-replicas // racks), racks]


def ring_directions(ranks: int, ipus_per_replica: int) -> int:
    """``pickReduceScatterMethod`` / ``pickAllGatherMethod`` (mesh topology): 1 for the
    clockwise ring, 2 for meet-in-the-middle or the bidirectional pair."""
    if ipus_per_replica > 1 or ranks <= 2:
        return 1
    # both remaining methods drive the ring in two directions; the byte thresholds only choose
    # between them (ReplicatedCollectives.cpp)
    return 2


def collective(
    nbytes: int,
    bytes_per_element: int,
    tiles: int,
    replicas: int,
    ipus_per_replica: int,
    racks: int = 1,
) -> CollectivePrograms:
    """The ring programs of a reduce-scatter or an all-gather (the same structure) of ``nbytes``
    on one IPU whose fragments spread over ``tiles`` tiles."""
    levels = []
    remaining = nbytes
    for ranks in ring_sizes(replicas, racks):
        fragment = -(-remaining // ranks)
        elems_per_tile = -(-fragment // max(bytes_per_element, 1)) // max(tiles, 1)
        # switch unless a sliceable copy of the input takes less memory than the switch code
        switch_code = ranks * SWITCH_BYTES_PER_CASE * EXPECTED_COLLECTIVE_CALLS
        sliceable = elems_per_tile * ranks
        cases = ranks if switch_code < sliceable else 0
        levels.append(
            RingLevel(
                ranks=ranks,
                directions=ring_directions(ranks, ipus_per_replica),
                switch_cases=cases,
                fragment_bytes=fragment,
            )
        )
        remaining = fragment  # the next level reduces the scattered fragment
    return CollectivePrograms(tuple(levels))


__all__ = [
    "CollectivePrograms",
    "RingLevel",
    "collective",
    "copy_pairs",
    "replica_variants",
    "ring_directions",
    "ring_sizes",
]
