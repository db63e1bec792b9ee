"""The GUI's Roofline report (analyser.core.roofline drawn on log axes)."""

from __future__ import annotations

import numpy as np
import pytest
from gui_helpers import open_documents, shown_report

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    import engine
    from engine.config import RunConfig

    out = tmp_path_factory.mktemp("gui-roofline")
    paths = []
    for mb in (1, 8):
        path = out / f"mlp-mb{mb}.h5"
        engine.simulate_to_file(RunConfig(model="mlp", micro_batch_size=mb), path)
        paths.append(path)
    return paths


@pytest.fixture
def report(qtbot):
    from analyser.gui.reports.roofline import RooflineReport

    yield from shown_report(qtbot, RooflineReport(), size=(900, 600))


def test_points_are_the_cores_roofline(report, mlp):
    from analyser.core import Analysis
    from analyser.core.roofline import roofline

    r, _ = report
    open_documents(report, mlp[0])
    with Analysis.open(mlp[0]) as a:
        ops = roofline(a).operations
    drawn = ops[np.isfinite(ops["intensity_exchange"]) & (ops["achieved"] > 0)]
    x, y = r.points["A"].getData()
    np.testing.assert_allclose(10**x, drawn["intensity_exchange"].to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(10**y, drawn["achieved"].to_numpy(), rtol=1e-9)
    assert "exchange-bound" in r.header.text()
    r._pick("A", r.points["A"].points()[:1])
    assert str(drawn["name"].iloc[0]) in r.picked.text()


def test_compare_mode_draws_both(report, mlp):
    r, _ = report
    open_documents(report, *mlp)
    assert set(r.points) == {"A", "B"}
    assert r.header.text().count("operations drawn") == 2


def test_legend_names_what_the_colours_mean(report, mlp):
    """Seen in a real X server: orange and blue points with no key."""
    from analyser.gui.palette import hex_color
    from analyser.gui.reports.roofline import LIMIT_STEP_TYPE

    r, _ = report
    open_documents(report, mlp[0])
    names = dict(r.legend.entries)
    drawn = {b.color().name() for b in r.points["A"].data["brush"]}
    assert drawn
    # one brush object per colour (pyqtgraph renders a symbol per distinct brush object:
    # a brush per point made a compare first visit render 1,244 symbols)
    assert len({id(b) for b in r.points["A"].data["brush"]}) == len(drawn)
    for lim, step_type in LIMIT_STEP_TYPE.items():
        colour = hex_color("step_types", step_type)
        if colour.lower() in drawn:
            assert names[f"{lim}-bound"] == colour
    assert r.legend.isVisibleTo(r) and "roofs" in names
    open_documents(report, *mlp)
    assert any("B triangles" in n for n in dict(r.legend.entries))


def test_log_axes_label_decades_only(report, mlp):
    """Over a decade or more only the decades are labelled (pyqtgraph's minor-tick labels,
    "2·10³ 3·10³ ...", ran into each other); inside one decade the minor ticks are."""
    from analyser.gui.axes import LogAxis

    r, _ = report
    open_documents(report, mlp[0])
    axis = r.plot.getPlotItem().getAxis("bottom")
    assert isinstance(axis, LogAxis) and axis.labelText
    levels = axis.tickValues(0.0, 4.0, 600)  # 1 to 10k
    labels = [s for spacing, values in levels for s in axis.tickStrings(values, 1.0, spacing)]
    assert [s for s in labels if s] == ["1", "10", "100", "1k", "10k"]
    assert "" in labels  # the minor ticks are drawn, without text
    inside = axis.tickValues(2.05, 2.95, 600)  # 112 to 891
    texts = [s for spacing, values in inside for s in axis.tickStrings(values, 1.0, spacing)]
    assert "200" in texts and "500" in texts


def test_a_wide_log_axis_over_a_few_decades_still_labels_its_decades(report, mlp):
    """pyqtgraph gives a decade level only when its linear tick spacing reaches one: a bottom
    axis 1,200 pixels wide over four decades had minor ticks alone, and so no label at all."""
    r, _ = report
    open_documents(report, mlp[0])
    axis = r.plot.getPlotItem().getAxis("bottom")
    levels = axis.tickValues(-1.96, 1.83, 1200)
    labels = [s for spacing, values in levels for s in axis.tickStrings(values, 1.0, spacing)]
    assert [s for s in labels if s] == ["0.1", "1", "10"]
