"""The token path of the host model: a token model's host cost measured by calibrate-host
(pre-tokenised int64 rows through a DataLoader, or its NumPy imitation) instead of a flat guess."""

from __future__ import annotations

import pytest

from analyser.cli.calibrate_host import to_toml
from engine.compiled import ProgramIO
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.execute.adapter import host_model, input_fields
from engine.host.calibrate import TOKEN_SIZES, calibrate
from engine.host.profile import (
    TOKEN_DTYPE,
    HostProfile,
    _parse,
    has_token_costs,
    load_host_profile,
    sample_cost,
    token_cost,
)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A profile measured here with the imitation (torch or not), written and read back."""
    profile = calibrate(0.5, method="imitation")
    path = tmp_path_factory.mktemp("host") / "host.toml"
    path.write_text(to_toml(profile), encoding="utf-8")
    return path, _parse(path.read_text(encoding="utf-8"), "host.toml")


def test_the_imitation_measures_the_token_path(measured):
    _, profile = measured
    assert has_token_costs(profile)
    for name in ("tokens", "collate"):
        t = profile.transforms[name]
        assert t.fixed_us >= 0 and t.ns_per_element[TOKEN_DTYPE] >= 0
    # the image path is still all there
    assert {"flip", "resize", "to_tensor", "normalise"} <= set(profile.transforms)
    assert not has_token_costs(load_host_profile("default"))  # measured before the token path


def test_token_cost_is_per_field_and_per_id(measured):
    _, p = measured
    one = token_cost(p, fields=1, elements=128)
    three = token_cost(p, fields=3, elements=3 * 128)
    long = token_cost(p, fields=3, elements=3 * 512)
    rows = {name: us for name, _, _, us in three.by_transform}
    assert set(rows) >= {"tokens", "collate"}
    # three fields of 128 ids cost three of one field (the loader's own row is per sample)
    loader = p.loader_us_per_sample
    assert three.total_us - loader == pytest.approx(3 * (one.total_us - loader))
    assert long.total_us >= three.total_us
    fixed = sum(p.transforms[t].fixed_us for t in ("tokens", "collate"))
    per_id = sum(p.transforms[t].ns_per_element[TOKEN_DTYPE] for t in ("tokens", "collate"))
    assert long.total_us - three.total_us == pytest.approx(per_id * 3 * 384 * 1e-3)
    assert three.total_us == pytest.approx(loader + 3 * fixed + per_id * 384 * 1e-3)


def _bert(profile_path, **kw):
    return RunConfig(model="bert-base", host_profile=str(profile_path), **kw)


TOKEN_IO = ProgramIO(input_elems_per_sample=3 * 128, input_dtype="int32", input_fields=3)


def test_a_token_model_naming_its_pipeline_uses_the_measured_costs(measured):
    path, p = measured
    named = host_model(_bert(path, host_transforms=["tokens"], host_cpu="as-measured"), TOKEN_IO)
    expect = token_cost(p, fields=3, elements=384).total_us
    assert named.transforms_s == pytest.approx(expect * 1e-6)
    assert named.decode_augment_s == 0.0  # named: no flat guess beside it
    assert [r["transform"] for r in named.breakdown["transforms"]][-2:] == ["tokens", "collate"]
    flat = host_model(_bert(path), TOKEN_IO)
    assert flat.transforms_s == 0.0 and flat.decode_augment_s == pytest.approx(50e-6)
    # scaled to the Pod host's CPU like every host cost, when the profile names its CPU
    synthetic = host_model(_bert(path, host_transforms=["tokens"], synthetic_data=True), TOKEN_IO)
    assert synthetic.transforms_s == 0.0


def test_the_fields_come_from_the_models_input_shape():
    from engine.models import build_model

    assert input_fields(build_model(RunConfig(model="bert-base"))) == 3  # ids, types, mask
    assert input_fields(build_model(RunConfig(model="mlp"))) == 1
    assert input_fields(None) == 1


def test_a_bert_run_costs_its_host_from_the_profile(measured):
    """Compiled and planned as a run is: the plan's host carries the token path's cost."""
    import engine
    from engine.execute.adapter import plan_from_compiled

    path, p = measured
    cfg = _bert(path, host_transforms=["tokens"], host_cpu="as-measured")
    host = plan_from_compiled(engine.compile(cfg)).host
    elems = 3 * cfg.seq_length
    assert host.transforms_s == pytest.approx(
        token_cost(p, fields=3, elements=elems).total_us * 1e-6
    )


def test_wrong_pipelines_are_one_sentence(measured):
    path, p = measured
    with pytest.raises(ConfigError, match="inputs are token ids") as err:
        host_model(_bert(path, host_transforms=["flip", "to_tensor"]), TOKEN_IO)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="token model's pipeline"):
        sample_cost(
            p,
            ["tokens"],
            input_size=32,
            image_size=32,
            channels=3,
            input_dtype="float16",
            eight_bit=False,
        )
    with pytest.raises(ConfigError, match=r"has no token costs.*calibrate-host"):
        host_model(RunConfig(model="bert-base", host_transforms=["tokens"]), TOKEN_IO)


def test_a_profile_without_token_costs_still_reads(measured):
    _, p = measured
    old = p.model_dump()
    del old["transforms"]["tokens"]
    for t in old["transforms"].values():
        t["ns_per_element"].pop(TOKEN_DTYPE, None)
    assert not has_token_costs(HostProfile(**old))


def test_the_torch_path_measures_tokens_in_a_real_dataloader():
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    from engine.host import calibrate_torch

    part, _ = calibrate_torch.measure(0.5, (32, 64), None)
    costs = part["transforms"]
    assert TOKEN_DTYPE in costs["tokens"]["ns_per_element"]
    assert TOKEN_DTYPE in costs["collate"]["ns_per_element"]
    assert TOKEN_SIZES == (128, 512)
