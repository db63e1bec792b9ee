"""The final pipeline stage is not recomputed (PopART's
``setFinalFwdStageRecomputation``), a pipeline cycle's host-to-device copies run as their own
fragment before the stages' compute (PopART ``PopPrograms::addPipelineCycle``) at the host
link's sustained rate, and the per-call cost is paid once per host call."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.compiler.lowering import final_stage_kept
from engine.config import RunConfig
from engine.execute import HostModel, execute_plan
from engine.execute.adapter import links_of
from engine.targets import get_target
from profiles.schema import code
from tests.run_configs import walkthrough_model
from tests.test_engine_execute import make_plan

ONTILE = code("program_type", "OnTileExecute")
SCM = code("program_type", "StreamCopyMid")
SYNC = code("program_type", "Sync")
D_HOST = code("destination", "host")


def _recomputed_per_stage(compiled) -> list[int]:
    names = compiled.ops.name.astype(str)
    rec = np.char.endswith(names, "/recompute")
    return [int((rec & (compiled.ops.stage == s)).sum()) for s in range(compiled.stages)]


def _forward_per_stage(compiled) -> list[int]:
    fwd = compiled.ops.pass_ == code("pass", "forward")
    names = compiled.ops.name.astype(str)
    fwd &= ~np.char.startswith(names, "loss/") & ~np.char.startswith(names, "input/")
    return [int((fwd & (compiled.ops.stage == s)).sum()) for s in range(compiled.stages)]


@pytest.fixture(scope="module")
def walkthrough_poptorch():
    return engine.compile(RunConfig.from_dict(walkthrough_model(gradient_accumulation=3)))


def test_poptorch_pipeline_recomputes_every_stage_but_the_final_one(walkthrough_poptorch):
    c = walkthrough_poptorch
    assert c.config.recomputation == "pipeline-stages" and final_stage_kept(c.config)
    rec, fwd = _recomputed_per_stage(c), _forward_per_stage(c)
    assert rec[-1] == 0  # the stage that holds the loss keeps its activations
    assert rec[0] == fwd[0] > 0  # earlier stages replay their whole forward
    # the final stage's activations stay live from its forward to its backward instead
    recomputed_vars = np.char.endswith(c.variables.name.astype(str), "/recomputed")
    on_last = c.variables.ipu == c.stages - 1
    assert not (recomputed_vars & on_last).any()


def test_final_stage_kept_after_its_last_checkpoint_only():
    cfg = walkthrough_model(
        gradient_accumulation=3,
        recomputation="checkpoints",
        recompute_checkpoints=["layer2", "layer3.12"],
    )
    c = engine.compile(RunConfig.from_dict(cfg))
    names = c.ops.name.astype(str)
    rec = np.char.endswith(names, "/recompute")
    last = c.ops.stage == c.stages - 1
    ckpt = int(c.graph.ops_of("layer3.12")[-1])  # the final stage's last checkpoint
    # in the final stage only the ops up to its last checkpoint are recomputed
    assert (rec & last).any()
    assert (c.ops.fwd[rec & last] < ckpt).all()
    assert (rec & (c.ops.stage == 0)).any()


def test_tensorflow_pipeline_still_recomputes_its_final_stage():
    cfg = walkthrough_model(
        gradient_accumulation=3, framework="tensorflow", recomputation="pipeline-stages"
    )
    c = engine.compile(RunConfig.from_dict(cfg))
    assert not final_stage_kept(c.config)
    assert _recomputed_per_stage(c)[-1] == _forward_per_stage(c)[-1]


def _row_spans(e, ipu_sel, mask):
    s = e.steps
    m = mask & ipu_sel
    return s["start"][m], s["start"][m] + s["cycles"][m]


def test_to_device_copies_form_a_fragment_before_every_stage_computes():
    e = execute_plan(make_plan(S=2, G=8, DI=1))
    s, names = e.steps, e.nodes["name"].astype(str)
    frag_sync = np.char.endswith(names[s["program"]], "toDeviceStream.sync")
    assert frag_sync.any()
    copy_in = (s["type"] == SCM) & (s["dest"] == D_HOST) & (s["bytes_in"] > 0)
    # per pipeline cycle (micro-batch rows): every IPU's fragment sync ends at the same cycle,
    # after the cycle's last host-to-device copy on any IPU and before any compute of the cycle
    ends = s["start"][frag_sync] + s["cycles"][frag_sync]
    for end in np.unique(ends):
        at = frag_sync & (s["start"] + s["cycles"] == end)
        assert set(s["ipu"][at].tolist()) == {0, 1}  # both IPUs take part
        begin = s["start"][at].min()
        copies = copy_in & (s["start"] >= begin - 10**7) & (s["start"] + s["cycles"] <= end)
        row_copies = copies & (s["start"] + s["cycles"] > begin - 1)
        assert (s["start"][row_copies] + s["cycles"][row_copies] <= end).all()
    # no compute step starts while a fragment sync of its IPU runs
    for i in (0, 1):
        fs, fe = _row_spans(e, s["ipu"] == i, frag_sync)
        cs, _ = _row_spans(e, s["ipu"] == i, s["type"] == ONTILE)
        inside = (cs[:, None] >= fs[None, :]) & (cs[:, None] < fe[None, :])
        assert not inside.any()


def test_to_device_fragment_delays_the_cycle_by_its_longest_copy():
    # the IPU without input copies (stage 1: labels only) waits for stage 0's input copy
    e = execute_plan(make_plan(S=2, G=8, DI=1))
    s, names = e.steps, e.nodes["name"].astype(str)
    frag_sync = np.char.endswith(names[s["program"]], "toDeviceStream.sync")
    on1 = frag_sync & (s["ipu"] == 1)
    on0 = frag_sync & (s["ipu"] == 0)
    assert s["cycles"][on1].sum() > s["cycles"][on0].sum()
    # with I/O tiles the copies overlap compute instead: no fragment
    io = execute_plan(make_plan(S=2, G=8, DI=1, io_tiles=2))
    io_names = io.nodes["name"].astype(str)[io.steps["program"]]
    assert not np.char.endswith(io_names, "toDeviceStream.sync").any()
    # one IPU: no pipeline, no fragment
    one = execute_plan(make_plan(S=1, G=8, DI=1))
    one_names = one.nodes["name"].astype(str)[one.steps["program"]]
    assert not np.char.endswith(one_names, "toDeviceStream.sync").any()


def test_stream_copies_run_at_the_sustained_host_link_rate():
    t = get_target("bow")
    links = links_of(t, 1, RunConfig(model="mlp", target="bow"))
    rate = links.host_link_bytes_per_cycle * t.clock_hz
    assert rate == pytest.approx(t.host_link_sustained_bytes_per_s)
    assert rate < t.host_link_bytes_per_s
    # a target without the measurement (an older profile's) keeps its nominal rate
    old = t.model_copy(update={"host_link_sustained_bytes_per_s": None})
    old_rate = links_of(old, 1, RunConfig(model="mlp")).host_link_bytes_per_cycle * t.clock_hz
    assert old_rate == pytest.approx(t.host_link_bytes_per_s)


def test_per_call_cost_is_paid_once_per_host_call():
    """The call frame (the device's host sync that starts the run; Final outputs copied back at
    its end, as PopART's toHostFinalCopy) does not grow with the device iterations, and the host
    call overhead is paid once per call: per sample it falls as 1 / device iterations."""

    # no per-sample host cost: what the host adds is the call's own overhead
    host = HostModel(decode_augment_s=0.0)

    def run(di: int, mode: str = "final"):
        return execute_plan(make_plan(S=2, G=8, DI=di, output_mode=mode, host=host))

    e1, e2, e4 = run(1), run(2), run(4)
    t1, t2, t4 = (e.attrs["total_cycles"] for e in (e1, e2, e4))
    per_iteration = t2 - t1
    assert t4 - t2 == 2 * per_iteration  # the iterations repeat exactly
    frame = t1 - per_iteration
    assert frame > 0  # the call's start sync and its Final outputs, once per call
    s = e4.steps
    out = (s["type"] == SCM) & (s["dest"] == D_HOST) & (s["bytes_out"] > 0)
    assert (s["phase"][out] == code("phase", "host")).all()  # Final outputs: at the call's end
    assert out.sum() == 1
    waits = [e.attrs["host_inclusive_cycles"] - e.attrs["total_cycles"] for e in (e1, e4)]
    assert waits[0] == waits[1] > 0  # the host's per-call overhead does not grow with DI


def test_synthetic_data_copies_nothing_between_host_and_device():
    """PopTorch enableSyntheticData: no input, label or output stream copies, nothing prepared
    on the host; the call itself (its start sync, the host's call overhead) remains."""
    base = dict(walkthrough_model(gradient_accumulation=3, precision="16.16"))
    real = engine.simulate(RunConfig.from_dict(base))
    syn = engine.simulate(RunConfig.from_dict({**base, "synthetic_data": True}))
    s = syn.execution.steps
    host = s["dest"] == D_HOST
    assert s["bytes_in"][host].sum() == 0 and s["bytes_out"][host].sum() == 0
    assert real.execution.steps["bytes_in"][real.execution.steps["dest"] == D_HOST].sum() > 0
    a, b = syn.execution.attrs, real.execution.attrs
    assert a["device_throughput"] > b["device_throughput"]
    overhead = RunConfig.from_dict(base).host_call_overhead_us * 1e-6
    assert a["host_seconds"] == pytest.approx(overhead)  # no preparation, only the call


@pytest.mark.parametrize("mode,n", [("all", 1), ("every-n", 2)])
def test_to_host_copies_wait_for_every_stage(mode, n):
    """Outputs All / EveryN in a pipeline: the cycle's ToHostStream fragment starts after every
    stage's Main fragment (PopART addPipelineCycle), opened by a sync of every IPU."""
    e = execute_plan(make_plan(S=2, G=8, DI=4, output_mode=mode, output_every_n=n))
    s, names = e.steps, e.nodes["name"].astype(str)
    opens = np.char.endswith(names[s["program"]], "toHostStream.sync")
    out = (s["type"] == SCM) & (s["dest"] == D_HOST) & (s["bytes_out"] > 0)
    assert out.sum() == 8 * 4 // n
    assert opens.sum() == 2 * out.sum()  # one per IPU for every cycle that copies outputs
    ends = s["start"] + s["cycles"]
    for t in np.unique(ends[opens]):
        at = opens & (ends == t)
        assert set(s["ipu"][at].tolist()) == {0, 1}
        # the IPU with the longer Main fragment waits only the sync itself, the other waits
        # for it: both have finished the cycle's compute when the fragment starts
        cyc = s["cycles"][at]
        assert cyc.min() == 40  # make_plan's external sync
        assert cyc.max() >= cyc.min()
        # the output copy follows the fragment's sync
        assert (out & (s["start"] >= t)).any()
