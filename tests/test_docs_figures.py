"""The figures README.md and docs/gui.md quote from the walkthrough are what the engine gives
today (they went stale as the engine changed). Each quoted figure is parsed from the
text and compared with the session's walkthrough profiles (tests/fixtures_walkthrough.py), so a
change to the engine that moves one fails here, naming the sentence to update.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analyser.core import Analysis
from analyser.core.units import fmt_pct

ROOT = Path(__file__).resolve().parents[1]


def _quoted(path: str, pattern: str) -> re.Match:
    """The one match of ``pattern`` in the file, whitespace (line breaks) collapsed."""
    text = " ".join((ROOT / path).read_text().split())
    found = list(re.finditer(pattern, text))
    assert len(found) == 1, f"{path}: expected one quote matching {pattern!r}, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def step1_and_fp16(walkthrough_profiles):
    """Walkthrough step 1 and the configuration its top tip recommends: step 2 is that one
    (checked here, so the docs' 'B' is the re-simulated tip)."""
    from analyser.core.insights import find_insights

    with (
        Analysis.open(walkthrough_profiles["1-base"]) as a,
        Analysis.open(walkthrough_profiles["2-half"]) as b,
    ):
        top = find_insights(a)[0]
        assert top.id == "memory.fp16"
        assert {**a.options.to_dict(), **dict(top.change)} == {
            **b.options.to_dict(),
            "name": a.options.name,
        }
        yield a, b


def _oom_text(mem) -> tuple[str, str]:
    per_ipu = ", ".join(f"IPU {i}: {int(n):,}" for i, n in enumerate(mem.oom_tiles_per_ipu()) if n)
    return f"{mem.n_oom_tiles:,}", per_ipu


def test_readme_caption_quotes_todays_step1_and_fp16_figures(step1_and_fp16):
    a, b = step1_and_fp16
    m = _quoted(
        "README.md",
        r"A: ([\d,]+) tiles out of memory \(([^)]*)\), ([\d.]+%) of memory used\)",
    )
    assert (m.group(1), m.group(2)) == _oom_text(a.memory), "README caption: step 1's OOM tiles"
    assert m.group(3) == fmt_pct(a.memory.share_used), "README caption: step 1's memory used"
    m = _quoted("README.md", r"B: FP16 fits, ([\d.]+%) of memory used\)")
    assert b.memory.fits
    assert m.group(1) == fmt_pct(b.memory.share_used), "README caption: FP16's memory used"


def test_gui_doc_quotes_todays_fullest_tile_of_step2(step1_and_fp16):
    from analyser.core.memory_layout import tile_layout

    _a, b = step1_and_fp16
    m = _quoted(
        "docs/gui.md",
        r"walkthrough step 2's fullest tile: (\d+) KiB live at the peak, highest address "
        r"(\d+) KiB of (\d+) KiB",
    )
    top = b.memory.top_tiles[0]
    layout = tile_layout(b, top.ipu, top.tile)
    assert m.groups() == (
        f"{layout.live_bytes().max() / 1024:.0f}",
        f"{layout.top_address / 1024:.0f}",
        f"{layout.sram / 1024:.0f}",
    ), "docs/gui.md: step 2's fullest tile in the memory map"
