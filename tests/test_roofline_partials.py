"""The roofline's compute roof follows the partials the compile used, not the precision alone:
FP16 operands with float partials run the AMP at half the rate of half partials (PopLibs' AMP
codelets, lib/poplin/codelets/asm/conv_partial_1x1_half_float_8_and_half_half_h16.S: the same
worker loop with 16 conv units accumulating in half, 8 in float). The profile records the
partials type (format 1.6); an older profile still opens and the roofline says what it assumed.
A partials change is named by compare as the cause of the memory it moves, with its sign."""

from __future__ import annotations

import json
import shutil

import h5py
import hostile
import numpy as np
import pytest

from analyser.cli import main
from analyser.core import Analysis
from analyser.core.roofline import roofline

#: Tiles of Mk2 GC200 and of Bow (the same chip: Bow-2000 datasheet).
TILES = 1472
#: AMP multiply-accumulates per tile per cycle: 16 conv units x 4 MACs (16 input channels per
#: unit over a 4-cycle output) with half partials, 8 units with float partials; FP32 operands 16.
MACS = {("16.16", "half"): 64, ("16.16", "float"): 32, ("32.32", "float"): 16}
#: (precision, partials option) of each profile built, and the roof it must get
CASES = [
    ("32.32", "auto", "float", 2 * 16 * TILES),  # 47,104
    ("16.16", "half", "half", 2 * 64 * TILES),  # 188,416
    ("16.16", "float", "float", 2 * 32 * TILES),  # 94,208
    ("16.16", "auto", "float", 2 * 32 * TILES),  # PopTorch's default: PopLibs' float partials
    ("16.32", "half", "half", 2 * 64 * TILES),  # FP16 operands (cast weights), half partials
]


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """mlp profiles (PopTorch, micro-batch 4) on Mk2 and Bow for every case."""
    import engine
    from engine.config import RunConfig

    out = tmp_path_factory.mktemp("roof-partials")
    paths = {}
    for target in ("mk2", "bow"):
        for precision, partials, _, _ in CASES:
            path = out / f"{target}-{precision}-{partials}.h5"
            cfg = RunConfig(
                model="mlp",
                micro_batch_size=4,
                target=target,
                precision=precision,
                partials_type=partials,
                framework="poptorch",
            )
            engine.simulate_to_file(cfg, path)
            paths[target, precision, partials] = path
    return paths


@pytest.mark.parametrize("target", ["mk2", "bow"])
@pytest.mark.parametrize(("precision", "option", "partials", "peak"), CASES)
def test_the_compute_roof_is_the_compiled_partials_rate(
    profiles, target, precision, option, partials, peak
):
    path = profiles[target, precision, option]
    with h5py.File(path, "r") as f:
        assert f["meta"].attrs["partials_type"] == partials
    with Analysis.open(path) as a:
        r = roofline(a)
    ro = r.roofs
    assert ro.peak_flops_per_cycle == peak
    assert ro.partials == partials and ro.operands == ("float" if precision == "32.32" else "half")
    assert ro.partials_source == ("operands" if precision == "32.32" else "recorded")
    assert ro.tiles == TILES and ro.note == ""
    assert ro.peak_flops_per_cycle == 2 * ro.amp_macs_per_tile_per_cycle * ro.tiles
    # the engine's costs never beat the roof of the partials it costed with
    o = r.operations
    assert len(o) and (o["achieved"] <= o["bound"]).all()
    assert (o["bound"] <= peak).all()


def test_float_partials_halve_the_fp16_roof_on_both_chips(profiles):
    for target in ("mk2", "bow"):
        peaks = {}
        for option in ("half", "float"):
            with Analysis.open(profiles[target, "16.16", option]) as a:
                peaks[option] = roofline(a).roofs.peak_flops_per_cycle
        assert peaks == {"half": 188_416, "float": 94_208}, target


def test_cli_states_the_roof_and_its_partials(profiles, capsys):
    path = profiles["mk2", "16.16", "auto"]
    assert main(["roofline", str(path), "--top", "3"]) == 0
    # the header wraps at the terminal's width (another test may have set COLUMNS): read words
    out = " ".join(capsys.readouterr().out.split())
    assert "(16.16, float partials)" in out and "AMP peak 94,208 FLOPs/cycle" in out
    assert "FP16 operands with float partials: 32 MACs/tile/cycle x 1,472 tiles x 2" in out
    assert "the partials type the engine compiled with" in out
    assert "188,416" not in out
    assert main(["roofline", str(profiles["mk2", "32.32", "auto"]), "--top", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "FP32 operands with float partials: 16 MACs/tile/cycle" in out
    assert "always accumulate in float" in out
    assert main(["roofline", str(path), "--json"]) == 0
    roofs = json.loads(capsys.readouterr().out)["roofs"]
    assert roofs["partials"] == "float" and roofs["partials_source"] == "recorded"
    assert roofs["peak_flops_per_cycle"] == 94_208 and roofs["note"] == ""


def _old(src, dst, vertex_types=None):
    """A copy of ``src`` as format 1.5 wrote it: no /meta partials_type (and, when given, the
    vertex type names replaced)."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        del f["meta"].attrs["partials_type"]
        f.attrs["format_version"] = "1.5"
        if vertex_types is not None:
            names = f["graph/vertex_types/name"][:].astype(str)
            del f["graph/vertex_types/name"]
            f["graph/vertex_types"].create_dataset(
                "name",
                data=np.array([vertex_types(n) for n in names], dtype=object),
                dtype=h5py.string_dtype(),
            )
    return dst


def test_an_old_profile_opens_and_says_where_its_partials_come_from(profiles, tmp_path, capsys):
    half = profiles["mk2", "16.16", "half"]
    # the AMP vertex types name the partials the compile used
    old = _old(half, tmp_path / "old.h5")
    assert main(["validate", str(old)]) == 0
    capsys.readouterr()
    with Analysis.open(old) as a:
        ro = roofline(a).roofs
    assert (ro.partials, ro.partials_source, ro.peak_flops_per_cycle) == (
        "half",
        "vertex types",
        188_416,
    )
    assert main(["roofline", str(old), "--top", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(16.16, half partials, from the vertex types)" in out
    assert "does not record the partials type it was compiled with" in out
    assert "takes half partials from its AMP vertex types" in out

    # no AMP vertex type names its partials: the run options' resolution, said as assumed
    auto = profiles["mk2", "16.16", "auto"]
    bare = _old(auto, tmp_path / "bare.h5", lambda n: n.split("<")[0])
    assert main(["roofline", str(bare), "--top", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(16.16, float partials, assumed)" in out and "AMP peak 94,208" in out
    assert "the roof assumes float partials" in out
    assert "partials_type auto, framework poptorch, precision 16.16" in out
    assert main(["roofline", str(bare), "--json"]) == 0
    roofs = json.loads(capsys.readouterr().out)["roofs"]
    assert roofs["partials_source"] == "assumed" and "assumes float" in roofs["note"]

    # an FP32 run needs no record: its operands always accumulate in float
    fp32 = _old(profiles["mk2", "32.32", "auto"], tmp_path / "fp32.h5", lambda n: "x")
    with Analysis.open(fp32) as a:
        ro = roofline(a).roofs
    assert (ro.partials_source, ro.note, ro.peak_flops_per_cycle) == ("operands", "", 47_104)


def test_mixed_vertex_partials_take_the_faster_rate(profiles, tmp_path):
    half = profiles["mk2", "16.16", "half"]
    both = _old(half, tmp_path / "both.h5")
    with h5py.File(both, "r+") as f:  # one more AMP type, with float partials
        names = f["graph/vertex_types/name"][:].astype(str)
        assert any("Partial" in n and "<half,half" in n for n in names)
        names[-1] = "poplin::ConvPartialnx1<half,float,true>"
        f["graph/vertex_types/name"][...] = names.astype(object)
    with Analysis.open(both) as a:
        ro = roofline(a).roofs
    assert ro.partials == "half" and ro.peak_flops_per_cycle == 188_416
    assert "some half, some float" in ro.note


@pytest.mark.parametrize("name", ["partials-odd", "partials-number", "partials-array"])
def test_a_bad_partials_record_is_one_sentence(profiles, tmp_path, capsys, name):
    mutation = hostile.semantic_mutations()[name]
    bad = hostile.mutated(profiles["mk2", "16.16", "half"], tmp_path, name, mutation)
    assert main(["roofline", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("analyse roofline:") and "\n" not in err, err
    assert "partials_type" in err and "neither 'half' nor 'float'" in err


def test_an_injected_partials_record_reaches_the_output_literally(profiles, tmp_path, capsys):
    mutation = hostile.semantic_mutations()["partials-injected"]
    bad = hostile.mutated(profiles["mk2", "16.16", "half"], tmp_path, "inj", mutation)
    assert main(["roofline", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "[bold red]markup[/]" in err and "\x1b" not in err


def test_fp32_operands_with_half_partials_recorded_are_refused(profiles, tmp_path, capsys):
    bad = tmp_path / "fp32-half.h5"
    shutil.copyfile(profiles["mk2", "32.32", "auto"], bad)
    with h5py.File(bad, "r+") as f:
        f["meta"].attrs["partials_type"] = "half"
    assert main(["roofline", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "half partials for FP32 operands" in err and "\n" not in err


# -- the run option --------------------------------------------------------------------------
def test_the_partials_option_has_its_metadata_and_flag():
    import argparse

    from analyser.cli.run_flags import FLAG_ALIASES, add_config_arguments, config_from_args
    from analyser.core.run_options import EXPLAINS, OPTIONS, options_explaining

    opt = OPTIONS["partials_type"]
    assert opt.section == OPTIONS["precision"].section == "Precision and optimiser"
    assert "memory" in EXPLAINS["partials_type"]
    mem = options_explaining("memory")
    assert mem.index("precision") < mem.index("partials_type")
    assert FLAG_ALIASES["partials_type"] == ("--partials",)
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    args = parser.parse_args(["--partials", "half", "--model", "mlp"])
    assert config_from_args(args).partials_type == "half"


def test_compare_names_the_partials_as_the_cause_with_its_sign(profiles):
    from analyser.core.comparison import ConfigDiff, compare_pair, option_sign

    down = ConfigDiff("partials_type", "float", "half")
    up = ConfigDiff("partials_type", "half", "float")
    for metric in ("peak_memory_bytes", "oom_tiles", "cycles_per_sample"):
        assert option_sign(metric, down) == -1 and option_sign(metric, up) == 1, metric
    assert option_sign("throughput_samples_per_s", down) == 1
    # 'auto' resolves by framework and precision: either way
    assert option_sign("peak_memory_bytes", ConfigDiff("partials_type", "auto", "half")) == 0

    fl, hf = profiles["mk2", "16.16", "float"], profiles["mk2", "16.16", "half"]
    for a_path, b_path, word in ((fl, hf, "fell"), (hf, fl, "rose")):
        with Analysis.open(a_path) as a, Analysis.open(b_path) as b:
            assert a.metrics.peak_memory_bytes != b.metrics.peak_memory_bytes
            c = compare_pair(a, b)
        mem = [e for e in c.explanations if e.metric == "peak_memory_bytes"]
        assert mem and mem[0].config_keys == ("partials_type",), c.explanations
        assert mem[0].text.startswith(f"Peak memory {word}"), mem[0].text


def test_the_gui_header_names_the_partials(profiles, tmp_path):
    from analyser.gui.model.operations import roofline_points

    with Analysis.open(profiles["bow", "16.16", "auto"]) as a:
        r = roofline(a)
    text = roofline_points(r, "").text
    assert "Roofs per IPU (16.16, float partials): AMP peak 94,208 FLOPs/cycle" in text
    bare = _old(profiles["bow", "16.16", "auto"], tmp_path / "bare.h5", lambda n: "x")
    with Analysis.open(bare) as a:
        r = roofline(a)
    assert "(16.16, float partials, assumed)" in roofline_points(r, "").text
