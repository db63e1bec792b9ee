"""From the compiler's hand-off (``engine.compiled.CompiledProgram``) to an ExecutionPlan.

The compiler gives the compute leaves grouped in segments (forward / recompute / backward /
update per stage) and the byte counts of every transfer in ``compiled.io``; the run options come
from the RunConfig and the link figures from the target (``engine.targets``, each figure
with its public source). This module only reshapes them; every timing decision is in
:mod:`engine.execute.core` and :mod:`engine.execute.costs`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from engine.execute.plan import ExecutionPlan, HostModel, IpuPlan, LeafPrograms, Links, StagePlan

if TYPE_CHECKING:  # pragma: no cover
    from engine.compiled import ProgramIO


def _padded(values: Sequence[int], n: int) -> list[int]:
    """``values`` (per stage or per IPU) as ``n`` ints, missing ones 0."""
    return [int(x) for x in values] + [0] * (n - len(values))


def host_model(config, io: ProgramIO, target=None) -> HostModel:
    """The host model of a run (docs/execution-model.md, "Host model").

    Per-sample cost: the named host transforms costed on the host profile (engine.host.profile;
    convert_dtype and normalise move to the IPU with 8-bit input), plus the flat
    ``host_preprocess_us_per_sample`` and, for images not normalised on the IPU,
    ``host_normalise_ns_per_element`` per input element. Parallelism: the loader's workers (at
    least its own process), at most the cores of one host server; one loader instance per host
    server (data-parallel loading is per host server)."""
    from engine.host.profile import sample_cost
    from engine.systems import get_system

    elems = int(io.input_elems_per_sample)
    is_image = io.input_dtype != "int32"  # token ids (BERT, ONNX int inputs) are int32
    transforms_s, breakdown = 0.0, None
    synthetic = bool(getattr(config, "synthetic_data", False))  # nothing prepared on the host
    system = get_system(config.system) if config.system else None
    if config.host_transforms and not is_image and not synthetic:
        transforms_s, breakdown = _token_host(config, io, system)
    elif config.host_transforms and is_image and not synthetic:
        profile, scaling = host_profile_for(config, system)
        cost = sample_cost(
            profile,
            config.host_transforms,
            input_size=config.host_input_size or config.image_size,
            image_size=config.image_size,
            channels=config.image_channels,
            input_dtype=config.compute_dtype,
            eight_bit=bool(config.eight_bit_input),
        )
        transforms_s, breakdown = cost.total_us * 1e-6, {**cost.as_dict(), **scaling}
    instances = int(config.host_servers or (system.host_servers if system else 1))
    cores = default_host_cores(config, system)
    workers = int(config.loader_workers or 0)
    return HostModel(
        decode_augment_s=(
            0.0 if synthetic else float(config.host_preprocess_us_per_sample or 0.0) * 1e-6
        ),
        cast_normalise_s=(
            (elems * float(config.host_normalise_ns_per_element or 0.0) * 1e-9)
            if is_image and not synthetic
            else 0.0
        ),
        normalise_on_ipu=bool(config.eight_bit_input),
        transforms_s=transforms_s,
        workers=workers,
        parallel=max(1, min(max(1, workers), cores)),
        instances=instances,
        cores=cores,
        loader=config.loader_mode,
        call_overhead_s=config.host_call_overhead_us * 1e-6,
        profiled_wait_s=float(config.profiled_call_wait_us or 0.0) * 1e-6,
        stream_latency_s=config.host_stream_latency_us * 1e-6,
        prefetch_depth=int(config.prefetch_depth),
        breakdown=breakdown,
    )


def _token_host(config, io: ProgramIO, system) -> tuple[float, dict]:
    """A token model's measured host cost per sample (``host_transforms = ["tokens"]``): the
    host profile's token path over the model's input fields (engine.host.profile.token_cost)."""
    from engine.errors import ConfigError
    from engine.host.profile import TOKEN_TRANSFORMS, token_cost

    if tuple(config.host_transforms) != TOKEN_TRANSFORMS:
        raise ConfigError(
            f"host_transforms: the model's inputs are token ids, so its host pipeline is "
            f"{list(TOKEN_TRANSFORMS)} (pre-tokenised ids), not "
            f"{', '.join(config.host_transforms)}."
        )
    profile, scaling = host_profile_for(config, system)
    elems = int(io.input_elems_per_sample)
    cost = token_cost(profile, fields=int(io.input_fields), elements=elems)
    return cost.total_us * 1e-6, {**cost.as_dict(), **scaling}


def input_fields(graph) -> int:
    """How many tensors a sample of ``graph`` holds (BERT's ids, token types and mask: 3), as
    the graph's input shape gives them: its first dimension when it has two or more."""
    shape = tuple(getattr(graph, "input_shape", ()) or ())
    return int(shape[0]) if len(shape) > 1 and int(shape[0]) > 0 else 1


def host_cpu_of(config, system=None) -> str:
    """The host server CPU a run's loader runs on (a key of engine/data/cpus.toml, or
    ``as-measured``): the run's ``host_cpu``, else its system's, else that of the servers the
    chip's systems use (the IPU-POD reference server's AMD EPYC 7742)."""
    from engine.systems import systems

    if config.host_cpu:
        return str(config.host_cpu)
    if system is not None:
        return system.host_cpu
    from engine.targets import canonical_name

    chip = canonical_name(config.target)
    found = sorted({s.host_cpu for s in systems().values() if s.chip == chip})
    return found[0] if found else "amd-epyc-7742"


def host_profile_for(config, system=None):
    """The run's host profile on its host server CPU, and how it was scaled (for the profile's
    ``host_model``): scaled by the two CPUs' per-core figures when the profile names its CPU
    and the host is another; as measured when it does not, or with ``host_cpu = as-measured``."""
    from engine.host.cpus import get_cpu
    from engine.host.profile import load_host_profile, scale_profile

    profile = load_host_profile(config.host_profile)
    target = host_cpu_of(config, system)
    info = {"host_cpu": target, "profile_cpu": profile.cpu_ref or profile.cpu}
    if target == "as-measured" or not profile.cpu_ref:
        info["scale"] = 1.0
        info["scaling"] = (
            "as measured (host_cpu = as-measured)"
            if target == "as-measured"
            else "as measured: the profile does not name its CPU in engine/data/cpus.toml"
        )
        return _float16_kernels(config, profile, info)
    scaled = scale_profile(profile, target)
    k = scaled.scaled_from.factor if scaled.scaled_from else 1.0
    base = profile.scaled_from.factor if profile.scaled_from else 1.0
    info["scale"] = round(k / base, 6)
    info["scaling"] = f"scaled to {get_cpu(target).display_name} by per-core SPECspeed2017_int_base"
    return _float16_kernels(config, scaled, info)


def _float16_kernels(config, profile, info: dict):
    """The profile's float16 costs as the framework's torch runs them (engine/data/
    frameworks.toml ``host_float16_kernels``): PopTorch pins a torch whose CPU kernels for
    float16 are scalar, so a profile measured with a later torch (vectorised float16) gets the
    scalar cost per element and op, scaled from its CPU to the profile's like every host cost.
    Recorded in ``info["float16_kernels"]``."""
    from engine.host.cpus import cost_factor
    from engine.host.frameworks import get_framework
    from engine.host.profile import VECTORISED_HALF_TORCH, torch_version, with_scalar_half

    fw = get_framework(config.framework)
    version = torch_version(profile)
    if fw.host_float16_kernels != "scalar":
        info["float16_kernels"] = "as measured (the framework runs no torch on the host path)"
        return profile, info
    if version is None or version < VECTORISED_HALF_TORCH:
        how = "with torch" if version else f"with {profile.measured_with or 'an unnamed method'}"
        info["float16_kernels"] = f"as measured ({how}: no vectorised float16 kernels to replace)"
        return profile, info
    k = cost_factor(fw.host_float16_cpu, profile.cpu_ref) if profile.cpu_ref else 1.0
    ns = fw.host_scalar_half_ns_per_op * k
    info["float16_kernels"] = (
        f"scalar: {fw.display_name} pins a torch without vectorised float16 CPU kernels; the "
        f"profile's torch {version[0]}.{version[1]} has them, so convert_dtype and normalise "
        f"cost {ns:.2f} ns per element and op in float16 (fitted on {fw.host_float16_cpu}, "
        f"x{k:.4f})"
    )
    return with_scalar_half(profile, ns), info


def default_host_cores(config, system=None) -> int:
    """Cores of one host server: the system's, else those of the servers the chip's systems
    use (engine/data/systems.toml), else the IPU-POD reference server's 128."""
    from engine.systems import systems

    if system is not None:
        return int(system.host_server_cores)
    from engine.targets import canonical_name

    chip = canonical_name(config.target)
    cores = [s.host_server_cores for s in systems().values() if s.chip == chip]
    return int(max(cores)) if cores else 128


def links_of(target, total_ipus: int, config=None) -> Links:
    """Link and sync figures of a target, per cycle of its clock.

    The IPUs of one machine (IPU-M2000 / Bow-2000) share its host links and its gateway's
    streaming memory: each replica's input streams get the machine's host-link bandwidth over
    the replicas streaming at once in that machine (at most the one-IPU figure), and each IPU's
    remote-buffer copies the machine's streaming-memory bandwidth over the IPUs of the machine
    the run uses (at most the one-IPU figure). Replicas beyond one Pod64 rack of a system reach
    the other racks over the GW-Links (hierarchical all-reduce)."""
    from engine.systems import get_system, racks_spanned

    clock = float(target.clock_hz)
    per_machine = int(target.ipus_per_machine)
    num_ipus = int(getattr(config, "num_ipus", 1) or 1) if config is not None else 1
    replicas = max(1, total_ipus // max(1, num_ipus))
    replicas_in_machine = max(1, min(replicas, per_machine // max(1, num_ipus)))
    ipus_in_machine = max(1, min(total_ipus, per_machine))
    # stream copies get the host link's sustained rate (a measurement), and the machine's host
    # links the same share of their nominal rate
    nominal = float(target.host_link_bytes_per_s)
    sustained = float(target.host_link_sustained_bytes_per_s or nominal)
    host_rate = min(
        sustained,
        target.machine_host_link_bytes_per_s * (sustained / nominal) / replicas_in_machine,
    )
    stream_rate = min(
        target.streaming_memory_bytes_per_s,
        target.machine_streaming_memory_bytes_per_s / ipus_in_machine,
    )
    system = get_system(config.system) if config is not None and config.system else None
    return Links(
        clock_hz=clock,
        ipu_link_bytes_per_cycle=target.ipu_link_bytes_per_s / clock,
        host_link_bytes_per_cycle=host_rate / clock,
        streaming_bytes_per_cycle=stream_rate / clock,
        external_sync_cycles=int(target.external_sync_cycles(total_ipus)),
        internal_sync_cycles=int(target.internal_sync_cycles),
        exchange_setup_cycles=int(target.exchange_setup_cycles),
        racks=racks_spanned(total_ipus, system),
        gw_link_bytes_per_cycle=target.gw_link_bytes_per_s_per_machine / per_machine / clock,
    )


def plan_from_compiled(compiled, config=None) -> ExecutionPlan:
    """Build the :class:`ExecutionPlan` of a compiled program."""
    cfg = config if config is not None else compiled.config
    tgt = compiled.target
    p = compiled.programs
    io = dataclasses.replace(compiled.io, input_fields=input_fields(compiled.graph))
    leaves = LeafPrograms(
        name=np.asarray(p.name, dtype=object),
        type=np.asarray(p.type, np.uint8),
        ipu=np.asarray(p.ipu, np.int16),
        op=np.asarray(p.op, np.int32),
        cycles=np.asarray(p.cycles, np.int64),
        tile_cycles=compiled.tile_cycles,
        bytes=np.asarray(p.bytes_in, np.int64) + np.asarray(p.bytes_out, np.int64),
        code_bytes=np.asarray(p.code_bytes, np.int64),
        tile_balance=np.asarray(compiled.tile_balance(), np.float32),
        bytes_in=np.asarray(p.bytes_in, np.int64),
        bytes_out=np.asarray(p.bytes_out, np.int64),
        dest=np.asarray(p.dest, np.uint8),
        tile_start=np.asarray(p.tile_start, np.int64),
        tile_count=np.asarray(p.tile_count, np.int64),
        n_max=np.asarray(p.n_max, np.int64),
        cycles_min=np.asarray(p.cycles_min, np.int64),
    )
    S = int(cfg.stages)
    n_ipus = int(cfg.num_ipus)
    stage_ipu = [int(x) for x in np.asarray(compiled.stage_ipu).reshape(-1)[:S]]
    act = _padded(io.activation_bytes, S)
    grad = _padded(io.gradient_bytes, S)
    racc = _padded(io.remote_accumulator_bytes, n_ipus)
    first_stage_of_ipu: dict[int, int] = {}
    for s in range(S):
        first_stage_of_ipu.setdefault(stage_ipu[s], s)
    stages = [
        StagePlan(
            ipu=stage_ipu[s],
            forward=compiled.segment_programs("forward", s),
            backward=compiled.segment_programs("backward", s),
            recompute=compiled.segment_programs("recompute", s),
            activation_bytes=act[s],
            gradient_bytes=grad[s],
            remote_bytes_per_micro_batch=(
                racc[stage_ipu[s]] if first_stage_of_ipu[stage_ipu[s]] == s else 0
            ),
        )
        for s in range(S)
    ]
    wb = _padded(io.weight_bytes, n_ipus)
    gb = _padded(io.weight_gradient_bytes, n_ipus)
    rb = _padded(io.remote_bytes, n_ipus)
    ring_code = list(io.collective_code_bytes) + [()] * n_ipus
    ipus = []
    for i in range(n_ipus):
        upd = [compiled.segment_programs("update", s) for s in range(S) if stage_ipu[s] == i]
        ipus.append(
            IpuPlan(
                update=np.concatenate(upd) if upd else np.zeros(0, np.int64),
                gradient_bytes=gb[i],
                weight_bytes=wb[i],
                remote_bytes=rb[i],
                collective_code_bytes=tuple(int(x) for x in ring_code[i]),
            )
        )
    strategy = cfg.strategy
    schedule = {"single": "single", "sharded": "sharded"}.get(strategy, cfg.schedule)
    synthetic = bool(getattr(cfg, "synthetic_data", False))
    return ExecutionPlan(
        leaves=leaves,
        stages=stages,
        ipus=ipus,
        tiles_per_ipu=int(tgt.tiles_per_ipu),
        links=links_of(tgt, n_ipus * int(cfg.replication_factor), cfg),
        host=host_model(cfg, io, tgt),
        schedule=schedule,
        training=bool(cfg.training),
        micro_batch=int(cfg.micro_batch_size),
        gradient_accumulation=int(cfg.gradient_accumulation),
        device_iterations=int(cfg.device_iterations),
        replicas=int(cfg.replication_factor),
        replicated_tensor_sharding=bool(cfg.replicated_tensor_sharding),
        io_tiles=int(cfg.io_tiles),
        # synthetic data (PopTorch enableSyntheticData): no stream copies to or from the host
        input_bytes_per_sample=0 if synthetic else io.input_bytes_per_sample,
        label_bytes_per_sample=0 if synthetic else io.label_bytes_per_sample,
        output_bytes_per_micro_batch=(0 if synthetic else io.output_bytes_per_micro_batch),
        output_mode=cfg.resolved_output_mode,
        output_every_n=int(cfg.output_return_period),
        loss_stage=io.loss_stage,
        input_tiles=_variable_tiles(compiled, "input"),
        label_tiles=_variable_tiles(compiled, "labels"),
        read_request_bytes=int(getattr(tgt, "host_read_request_bytes", 0) or 0),
    )


def _variable_tiles(compiled, name: str) -> int:
    """Tiles the variable ``name`` spans (0 when the program has none)."""
    v = compiled.variables
    if v is None:
        return 0
    hit = np.flatnonzero(np.asarray(v.name, dtype=object) == name)
    return int(v.tile_count[hit[0]]) if len(hit) else 0
