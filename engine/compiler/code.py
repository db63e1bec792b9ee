"""Code and other non-variable memory of a compiled program (``engine.compiler.memory``'s code
phase): control and exchange code per leaf program, vertex state and descriptors, host and global
exchange code, and the cross-replica collectives' ring programs (PopVision Graph Analyser User Guide, 'Memory
categories'; sizes in engine.targets)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from engine.compiled import (
    T_EXCHANGE,
    T_ONTILE,
    VariableTable,
)
from engine.compiler import collectives
from engine.compiler.memory_records import (
    CAT,
    KIND,
    ActivationBytes,
    LivenessSteps,
    MemoryInputs,
    ProgramCode,
    StreamedTensors,
    WeightBytes,
    _ceil_div,
    _distinct,
    _spread_ipus,
)
from engine.systems import get_system, racks_spanned
from profiles import schema

if TYPE_CHECKING:  # pragma: no cover
    from engine.targets import Target


def program_code(inputs: MemoryInputs, steps: LivenessSteps) -> ProgramCode:
    """Control, exchange and vertex figures of every leaf program (vectorised over programs).

    An exchange has code on both sides: on its receiving tiles (the op's tiles) and on the tiles
    that send (the tiles of its source tensor: the producer's output for a forward op, the op's
    own forward output and saved tensors for backward, update and loss ops), each side per tile
    a base plus one instruction per ``exchange_bytes_per_instruction`` it moves.
    """
    t, progs = inputs.target, inputs.programs
    TT = inputs.tiles_per_ipu
    fams = t.vertex_families

    def per_family(attr, distinct):
        # looked up once per distinct family (a few dozen) and spread back over the programs
        names, inverse = distinct
        per_name = np.array(
            [getattr(fams[f], attr) if f in fams else 0 for f in names], dtype=np.int64
        )
        return per_name[inverse]

    def exchange_code(nbytes, tiles):
        per_tile = _ceil_div(nbytes, np.maximum(tiles, 1))
        return t.exchange_code_base_bytes + t.exchange_code_bytes_per_instruction * _ceil_div(
            per_tile, t.exchange_bytes_per_instruction
        )

    ptype = progs["type"]
    tile_count = progs["tile_count"].astype(np.int64)
    families = _distinct(progs["family"])
    is_cs = ptype == T_ONTILE
    is_ex = ptype == T_EXCHANGE
    vertices_per_tile = np.where(is_cs, _ceil_div(progs["vertices"], np.maximum(tile_count, 1)), 0)
    receiver_code = np.where(is_ex, exchange_code(progs["bytes_in"], tile_count), 0)
    sender_start, sender_count = _exchange_sources(inputs, steps)
    p_op = progs["op"].astype(np.int64)
    s_start, s_count = sender_start[p_op], sender_count[p_op]
    sender_code = np.where(is_ex, exchange_code(progs["bytes_in"], s_count), 0)
    participates = ptype != schema.code("program_type", "Sync")
    per_program = (t.control_code_bytes_per_program + t.control_table_bytes_per_program) * TT
    code_bytes = (
        per_program
        + np.where(participates, t.control_code_bytes_per_participation * tile_count, 0)
        + receiver_code * tile_count
        + sender_code * s_count
    )
    # outlining: a duplicate's compute set / exchange is the owner's; it costs a call only
    owned = progs["owner_op"] == progs["op"]
    return ProgramCode(
        code_bytes=np.where(owned, code_bytes, per_program),
        owned=owned,
        participates=participates,
        is_compute_set=is_cs,
        vertices_per_tile=np.where(owned, vertices_per_tile, 0),
        exchange_code_per_tile=np.where(owned, receiver_code, 0),
        sender_tile_start=s_start,
        sender_tile_count=s_count,
        sender_code_per_tile=np.where(owned, sender_code, 0),
        state_bytes=per_family("state_bytes", families),
        field_bytes=per_family("field_bytes", families),
        vector_list_bytes=per_family("vector_list_bytes", families),
        vertex_type_code_bytes=per_family(
            "code_bytes", _distinct(inputs.tile_plan.vertex_types["family"])
        ),
    )


def _exchange_sources(inputs: MemoryInputs, steps: LivenessSteps) -> tuple[np.ndarray, np.ndarray]:
    """First tile and tile count of the tensor each lowered op's exchange reads: a forward (or
    recomputed) op reads its first input's producer (the graph input: the op's own tiles, where
    it is streamed); other ops read their forward op's output and saved tensors."""
    lowered, P = inputs.lowered, inputs.tile_plan
    cols = inputs.graph.cols
    fwd = lowered["fwd"].astype(np.int64)
    own_forward = np.where(fwd >= 0, steps.forward_row[np.maximum(fwd, 0)], -1)
    producer = np.where(fwd >= 0, cols["in0"][np.maximum(fwd, 0)].astype(np.int64), -1)
    producer_row = np.where(producer >= 0, steps.forward_row[np.maximum(producer, 0)], -1)
    reads_producer = np.isin(lowered["role"], ("fwd", "recomp"))
    source = np.where(reads_producer, producer_row, own_forward)
    source = np.where(source >= 0, source, np.arange(len(lowered)))
    # a stage-crossing input arrives as a copy on the consumer's tiles
    crosses = inputs.op_ipu[source] != inputs.op_ipu
    source = np.where(crosses, np.arange(len(lowered)), source)
    return P.tile_start[source].astype(np.int64), P.tiles_used[source].astype(np.int64)


def _code_categories(inputs: MemoryInputs, code: ProgramCode, cat: np.ndarray) -> None:
    """Control code / table / ids, internal exchange code, vertex state, descriptors, constants,
    instrumentation, stack and vertex code of every IPU's tiles (fills ``cat``, (IPUs, tiles,
    categories), in place; whole arrays over all IPUs' programs at once)."""
    t, progs, TT, n_ipus = inputs.target, inputs.programs, inputs.tiles_per_ipu, inputs.num_ipus
    ipu = progs["ipu"].astype(np.int64)
    n_programs = np.bincount(ipu, minlength=n_ipus)[:, None]
    t0s = progs["tile_start"].astype(np.int64)
    tns = progs["tile_count"].astype(np.int64)
    takes_part = code.participates & code.owned
    cs = code.is_compute_set & code.owned
    v = code.vertices_per_tile

    def spread(name: str, values) -> np.ndarray:
        # bytes per tile of each program over its tiles, summed into the category's column
        return _spread_ipus(values, ipu, t0s, tns, n_ipus, TT, out=cat[:, :, CAT[name]])

    spread("controlCode", np.where(takes_part, t.control_code_bytes_per_participation, 0))
    cat[:, :, CAT["controlCode"]] += n_programs * t.control_code_bytes_per_program
    cat[:, :, CAT["controlTable"]] = n_programs * t.control_table_bytes_per_program
    spread("controlId", np.where(cs, t.control_id_bytes_per_program, 0))
    spread("internalExchangeCode", code.exchange_code_per_tile)
    # and the exchanges' code on the tiles that send their data
    cat[:, :, CAT["internalExchangeCode"]] += _spread_ipus(
        code.sender_code_per_tile,
        ipu,
        code.sender_tile_start,
        code.sender_tile_count,
        n_ipus,
        TT,
    )
    spread("vertexInstanceState", v * code.state_bytes)
    spread("vertexFieldData", v * code.field_bytes)
    spread("vectorListDescriptor", v * code.vector_list_bytes)
    is_copy = progs["family"] == "copy"
    spread("copyDescriptor", np.where(cs & is_copy, t.copy_descriptor_bytes_per_copy * v, 0))
    spread("constant", np.where(cs, t.constant_bytes_per_op_tile, 0))
    if inputs.plan.instrumentation:
        spread(
            "instrumentationResults", np.where(takes_part, t.instrumentation_bytes_per_program, 0)
        )
    cat[:, :, CAT["stack"]] = t.stack_bytes_per_tile
    # vertex code: each vertex type present on a tile costs its code once. Per (IPU, vertex
    # type), the compute sets' tile ranges enter (+1) and leave (-1) in tile order; where the
    # running count is positive up to the next event, the type's code is on those tiles
    cs_rows = np.flatnonzero(code.is_compute_set)
    if len(cs_rows):
        n_types = len(code.vertex_type_code_bytes)
        pair = ipu[cs_rows] * n_types + progs["vt"][cs_rows].astype(np.int64)
        key = np.concatenate(
            (pair * (TT + 1) + t0s[cs_rows], pair * (TT + 1) + t0s[cs_rows] + tns[cs_rows])
        )
        delta = np.repeat(np.array([1, -1], dtype=np.int64), len(cs_rows))
        order = np.argsort(key, kind="stable")
        key, delta = key[order], delta[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        key = key[first]
        running = np.cumsum(np.add.reduceat(delta, first))  # 0 after each pair's last event
        covered = np.flatnonzero(running[:-1] > 0)
        pair_of, tile = np.divmod(key, TT + 1)
        _spread_ipus(
            code.vertex_type_code_bytes[pair_of[covered] % n_types],
            pair_of[covered] // n_types,
            tile[covered],
            tile[covered + 1] - tile[covered],
            n_ipus,
            TT,
            out=cat[:, :, CAT["vertexCode"]],
        )


def _host_exchange_categories(
    inputs: MemoryInputs, variables: VariableTable, streamed: StreamedTensors, cat: np.ndarray
) -> None:
    """Host exchange code and packet headers: input / label / output streams and remote-buffer
    copies on the variables' tiles, or the I/O tiles' share (fills ``cat``, (IPUs, tiles,
    categories), in place)."""
    t, TT, n_ipus = inputs.target, inputs.tiles_per_ipu, inputs.num_ipus
    io_tiles = inputs.plan.io_tiles
    ipu = variables.ipu.astype(np.int64)
    vt0 = variables.tile_start.astype(np.int64)
    vtn = variables.tile_count.astype(np.int64)
    kind = variables.kind
    streamed_var = np.isin(kind, (KIND["input"], KIND["label"], KIND["output"]))
    if io_tiles:
        streamed_var &= False
    remote = variables.remote
    remote_per_tile = _ceil_div(variables.remote_bytes, np.maximum(vtn, 1))
    streamed_per_tile = _ceil_div(variables.bytes, np.maximum(vtn, 1))
    n_streams = np.where(streamed_var, 1, 0) + np.where(remote, 2, 0)  # remote: load + store
    bytes_per_tile = np.where(streamed_var, streamed_per_tile, 0) + np.where(
        remote, remote_per_tile, 0
    )
    host_code = n_streams * t.host_exchange_code_base_bytes + np.where(
        n_streams > 0,
        t.exchange_code_bytes_per_instruction
        * _ceil_div(bytes_per_tile, t.exchange_bytes_per_instruction)
        * n_streams,
        0,
    )
    _spread_ipus(host_code, ipu, vt0, vtn, n_ipus, TT, out=cat[:, :, CAT["hostExchangeCode"]])
    _spread_ipus(
        n_streams * _ceil_div(bytes_per_tile, t.packet_payload_bytes) * t.packet_header_bytes,
        ipu,
        vt0,
        vtn,
        n_ipus,
        TT,
        out=cat[:, :, CAT["hostExchangePacketHeader"]],
    )
    if io_tiles:
        T = inputs.compute_tiles
        last_ipu = inputs.stages - 1
        io = slice(T, T + io_tiles)
        cat[:, io, CAT["hostExchangeCode"]] += int(t.io_tile_overhead_fraction * t.sram_per_tile)
        packets = _ceil_div(_ceil_div(streamed.input_bytes, io_tiles), t.packet_payload_bytes)
        for i in sorted({0, last_ipu} & set(range(n_ipus))):
            n_io_streams = 1 + (1 if inputs.plan.training and i == last_ipu else 0)
            cat[i, io, CAT["hostExchangePacketHeader"]] += (
                n_io_streams * packets * t.packet_header_bytes
            )


@dataclass(frozen=True)
class RingCode:
    """Per-tile code of one collective's ring programs on one IPU: on every tile of the IPU
    (``all_tiles``: control code and table per program) and on the ``tiles`` buffer tiles."""

    tiles: int
    global_exchange: int  # per buffer tile
    packet_headers: int  # per buffer tile
    control: int  # per buffer tile: participation and switch cases
    copy_descriptors: int  # per buffer tile: one copy per switch case
    control_all_tiles: int  # per tile of the IPU
    table_all_tiles: int
    internal_exchange: int = 0  # per buffer tile: the fragment copies' exchange code

    def total(self, tiles_per_ipu: int) -> int:
        """Code bytes over the IPU's tiles (as a program's ``code_bytes``)."""
        on_buffer = (
            self.global_exchange + self.control + self.copy_descriptors + self.internal_exchange
        )
        return on_buffer * self.tiles + (self.control_all_tiles + self.table_all_tiles) * (
            tiles_per_ipu
        )


def ring_code(target: Target, ring: collectives.CollectivePrograms, tiles: int) -> RingCode:
    """Per cross-replica copy its global exchange code: the transfer program's sequence and sync,
    and one exchange (a base and its instructions, as every exchange) per source -> destination
    pair of its replica map (a pair per replica of the ring, ``collectives.copy_pairs``), each
    sending and receiving one fragment on every buffer tile; per ring program its control code;
    per switch case its 12 bytes of control code, a copy, and that copy's (internal) exchange
    code moving one fragment (a dynamic slice instead costs one copy of the fragments into the
    sliceable tensor); and per pair the 12 bytes of the case that selects this replica's
    exchange."""
    t = target

    def exchange(per_tile):  # base + one instruction per region of about 1 KiB per tile
        return t.exchange_code_base_bytes + t.exchange_code_bytes_per_instruction * _ceil_div(
            per_tile, t.exchange_bytes_per_instruction
        )

    code = headers = internal = 0
    for level in ring.levels:
        per_tile = _ceil_div(level.fragment_bytes, tiles)
        # one program (its send / receive sequence and sync) per direction, holding one
        # exchange per pair of its replica map, each sending and receiving the fragment
        pair = t.exchange_code_base_bytes + 2 * t.exchange_code_bytes_per_instruction * _ceil_div(
            per_tile, t.exchange_bytes_per_instruction
        )
        code += level.directions * (
            t.global_exchange_code_bytes_per_transfer + collectives.copy_pairs(level) * pair
        )
        headers += (
            level.directions
            * (level.ranks - 1)
            * _ceil_div(per_tile, t.packet_payload_bytes)
            * t.packet_header_bytes
        )
        if level.switch_cases:
            internal += level.directions * level.switch_cases * exchange(per_tile)
        else:
            internal += exchange(per_tile * level.ranks)
    return RingCode(
        tiles=tiles,
        global_exchange=int(code),
        packet_headers=int(headers),
        control=ring.programs * t.control_code_bytes_per_participation
        + (ring.switch_cases + ring.replica_cases) * collectives.SWITCH_BYTES_PER_CASE,
        copy_descriptors=ring.switch_cases * t.copy_descriptor_bytes_per_copy,
        control_all_tiles=ring.programs * t.control_code_bytes_per_program,
        table_all_tiles=ring.programs * t.control_table_bytes_per_program,
        internal_exchange=int(internal),
    )


def _global_exchange_categories(
    inputs: MemoryInputs,
    weights: WeightBytes,
    activations: ActivationBytes,
    ipu: int,
    cat: np.ndarray,
) -> None:
    """Global exchange code and packet headers of the inter-IPU copies (one exchange per replica,
    ``collectives.replica_variants``), and the code of the cross-replica collectives compiled as
    PopLibs' ring programs (``ring_code``; fills ``cat`` in place)."""
    t, S, T = inputs.target, inputs.stages, inputs.compute_tiles
    training = inputs.plan.training
    boundary = activations.boundary
    stage_bytes = (boundary[ipu] if ipu < S - 1 else 0) + (boundary[ipu - 1] if ipu > 0 else 0)
    transfers = 0
    if S > 1:
        sends = (1 if ipu < S - 1 else 0) + (1 if ipu > 0 else 0)
        transfers += sends * (2 if training else 1)
    # one exchange per replica: the replicated graph is one executable, and the guide measures
    # its global exchange code growing linearly with the replicas (collectives.copy_pairs)
    variants = collectives.replica_variants(inputs.plan.replicas)
    code = transfers * t.global_exchange_code_bytes_per_transfer * variants
    if variants > 1:
        # each transfer selects its replica's exchange: a switch case per replica
        cat[:T, CAT["controlCode"]] += transfers * variants * collectives.SWITCH_BYTES_PER_CASE
    headers = _ceil_div(_ceil_div(int(stage_bytes), T), t.packet_payload_bytes) * (
        t.packet_header_bytes
    )
    for ring in replica_collectives(inputs, weights, ipu):
        rc = ring_code(t, ring, T)
        code += rc.global_exchange
        headers += rc.packet_headers
        cat[:, CAT["controlCode"]] += rc.control_all_tiles
        cat[:, CAT["controlTable"]] += rc.table_all_tiles
        cat[:T, CAT["controlCode"]] += rc.control
        cat[:T, CAT["copyDescriptor"]] += rc.copy_descriptors
        cat[:T, CAT["internalExchangeCode"]] += rc.internal_exchange
    if code:
        cat[:T, CAT["globalExchangeCode"]] = code
        cat[:T, CAT["globalExchangePacketHeader"]] = headers


def replica_collectives(
    inputs: MemoryInputs, weights: WeightBytes, ipu: int
) -> list[collectives.CollectivePrograms]:
    """The cross-replica collectives one IPU compiles (training with replicas): the gradients'
    reduce-scatter and all-gather (an all-reduce), or under replicated tensor sharding the
    gradients' reduce-scatter and the updated weights' all-gather."""
    plan = inputs.plan
    replicas = plan.replicas
    if not (plan.training and replicas > 1):
        return []
    system = get_system(plan.system) if plan.system else None
    ring = partial(
        collectives.collective,
        bytes_per_element=inputs.weight_bytes_per_element,
        tiles=inputs.compute_tiles,
        replicas=replicas,
        ipus_per_replica=inputs.num_ipus,
        racks=racks_spanned(inputs.num_ipus * replicas, system),
    )
    gathered = weights.weights[ipu] if plan.replicated_tensor_sharding else weights.gradients[ipu]
    return [ring(int(weights.gradients[ipu])), ring(int(gathered))]
