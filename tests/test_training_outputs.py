"""What a training step sends back to the host: the loss, and the model's output when the
framework's training model returns it (PopTorch's trainingModel returns what forward returns)."""

from __future__ import annotations

import pytest

import engine
from engine.config import RunConfig

MLP = dict(model="mlp", micro_batch_size=16, precision="16.16")


@pytest.mark.parametrize(
    ("framework", "expected"),
    [("poptorch", "output-and-loss"), ("popart", "loss"), ("tensorflow", "loss")],
)
def test_the_framework_decides_unless_the_run_says(framework, expected):
    assert RunConfig(**MLP, framework=framework).training_outputs == expected
    assert RunConfig(**MLP, framework=framework, training_outputs="loss").training_outputs == (
        "loss"
    )


def _outputs(c):
    names = c.variables.name.tolist()
    return {n: int(b) for n, b in zip(names, c.variables.bytes) if n in ("loss", "logits")}


def test_poptorch_training_sends_the_logits_of_the_micro_batch_and_the_loss():
    B, classes, half = 16, 10, 2
    c = engine.compile(dict(MLP, framework="poptorch"))
    assert _outputs(c) == {"loss": 4 * B, "logits": B * classes * half}
    assert c.io.output_bytes_per_micro_batch == 4 * B + B * classes * half
    plain = engine.compile(dict(MLP, framework="poptorch", training_outputs="loss"))
    assert _outputs(plain) == {"loss": 4 * B}
    assert plain.io.output_bytes_per_micro_batch == 4 * B
    # inference returns the logits whatever the option says
    inf = engine.compile(dict(MLP, framework="poptorch", mode="inference"))
    assert _outputs(inf) == {"logits": B * classes * half}


def _tx_bytes(**kw) -> int:
    """Bytes one call sends from the device to the host (outputs and read requests)."""
    from profiles.schema import code

    st = engine.simulate(dict(MLP, framework="poptorch", gradient_accumulation=4, **kw)).execution
    st = st.steps
    return int(st["bytes_out"][st["dest"] == code("destination", "host")].sum())


def test_final_mode_sends_the_logits_once_per_call_and_all_mode_per_micro_batch():
    logits = 16 * 10 * 2
    final = _tx_bytes() - _tx_bytes(training_outputs="loss")
    every = _tx_bytes(output_mode="all") - _tx_bytes(output_mode="all", training_outputs="loss")
    assert final == logits
    assert every == 4 * logits
