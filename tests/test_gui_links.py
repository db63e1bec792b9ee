"""Reports link to each other (pytest-qt, offscreen): evidence naming a place in another report
("see Memory Report > IPU 1 tile 221") opens it there, and a double-click on a Top tiles row
shows that tile in the Memory Report."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from gui_helpers import open_in, shown_window
from PySide6.QtCore import QUrl

from analyser.gui.model.places import Place, place_of, tile_place

pytestmark = pytest.mark.gui


def test_places_are_read_from_the_evidence_text():
    p = place_of("Memory Report > IPU 1 tile 221")
    assert p == Place("memory", "IPU 1 tile 221") and p.tile() == (1, 221)
    assert place_of("Execution Trace > host lane") == Place("trace", "host lane")
    assert place_of("Pipeline view") == Place("pipeline", "")
    assert place_of("Memory Report > Variables").tile() is None
    assert place_of("Somewhere else > x") is None
    assert tile_place(0, 7).tile() == (0, 7)


@pytest.fixture
def window(qtbot, tmp_path, walkthrough_profiles):
    fixture = shown_window(qtbot, tmp_path)
    w = next(fixture)
    assert open_in(qtbot, w, walkthrough_profiles["1-base"])  # out of memory on IPU 1
    yield w
    next(fixture, None)


def _links(html: str) -> list[str]:
    return [unquote(h) for h in re.findall(r"href=[\"']place:([^\"']*)[\"']", html)]


def test_evidence_naming_a_tile_opens_the_memory_report_on_it(qtbot, window):
    w = window
    r = w.show_report("insights")
    qtbot.waitUntil(lambda: r.list.topLevelItemCount() > 0, timeout=30_000)
    found = None
    for i in range(r.list.topLevelItemCount()):
        r.list.setCurrentItem(r.list.topLevelItem(i))
        links = [x for x in _links(r.details.toHtml()) if place_of(x) and place_of(x).tile()]
        if links:
            found = links[0]
            break
    assert found is not None, "no evidence names a tile"
    ipu, tile = place_of(found).tile()
    assert "(see " in r.details.toPlainText() and found in r.details.toPlainText()
    r.details.anchorClicked.emit(QUrl(f"place:{found}"))
    m = w.current_report()
    assert m.key == "memory"
    qtbot.waitUntil(lambda: len(m.selection) == 1)
    assert tuple(int(v) for v in m.selection[0]) == (ipu, tile)
    assert m.details.currentWidget() is m.tiles_table
    # a place of another kind: the Variables tab, filtered by the kind
    r = w.show_report("insights")
    r.details.anchorClicked.emit(QUrl("place:Memory Report > Variables (optimiserState)"))
    m = w.current_report()
    assert m.view_tabs.currentWidget() is m.variables_page
    assert m.variables_table.filter.text() == "optimiserstate"


def test_double_click_on_a_top_tile_shows_it_in_the_memory_report(qtbot, window):
    w = window
    r = w.show_report("insights")
    table = r.top_tiles
    qtbot.waitUntil(lambda: table.model.rowCount() > 0, timeout=30_000)
    index = table.proxy.index(0, table.model.column_of("tile"))
    want = (
        int(table.model.raw(0, table.model.column_of("ipu"))),
        int(table.model.raw(0, table.model.column_of("tile"))),
    )
    table.view.doubleClicked.emit(index)
    m = w.current_report()
    assert m.key == "memory"
    qtbot.waitUntil(lambda: len(m.selection) == 1)
    assert tuple(int(v) for v in m.selection[0]) == want


def test_a_predicted_effect_says_its_status_once():
    """'fits: fits: no tile out of memory' in the predicted effect."""
    from types import SimpleNamespace

    from analyser.core.units import MemoryUnits
    from analyser.gui.reports.insights import insight_html

    effect = SimpleNamespace(
        status="fits",
        message="fits: no tile out of memory (from 12); peak memory 600 KiB.",
        recommended=True,
        tone="good",
        baseline_note="",
        after={},
    )
    tip = SimpleNamespace(
        title="t",
        severity="warning",
        category="memory",
        id="memory.x",
        summary="s",
        evidence=[],
        change={},
        trade_off="",
        effect=effect,
    )
    text = re.sub(r"<[^>]+>", "", insight_html(tip, MemoryUnits.KIB))
    assert "fits: no tile out of memory" in text and "fits: fits" not in text


def test_open_demo_says_it_replaces_b_when_comparing(monkeypatch, tmp_path):
    """'Open demo profile' silently replaced B when two profiles were compared: its dialog
    says it opens in place of B."""
    from types import SimpleNamespace

    from analyser.gui import help as help_parts

    said = []

    class Dialog:
        def __init__(self, title, text, *args, **kwargs) -> None:
            said.append(text)

        def start(self) -> None:
            pass

    monkeypatch.setattr(help_parts, "WhatIfDialog", Dialog)
    a = SimpleNamespace(path=str(tmp_path / "a.h5"), name="a.h5")
    b = SimpleNamespace(path=str(tmp_path / "b.h5"), name="b.h5")
    config = help_parts.demo_configs()[0]
    window = SimpleNamespace(workspace=SimpleNamespace(document=a, compare=b))
    help_parts.open_demo(window, config)
    window = SimpleNamespace(workspace=SimpleNamespace(document=a, compare=None))
    help_parts.open_demo(window, config)
    assert "in place of B (b.h5)" in said[0] and "a.h5" in said[0]
    assert "in place of B" not in said[1] and "compared with the open profile" in said[1]
