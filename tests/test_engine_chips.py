"""Chips as data (engine/data/chips.toml): a chip may start from another chip (``base``) and
write only what differs."""

from __future__ import annotations

import pytest

from engine.targets import TARGETS, Target, resolve_chips


def test_a_chip_over_its_base_writes_only_what_differs():
    raw = {
        "common": {"a": 1, "b": 2, "c": 3},
        "one": {"b": 20},
        "two": {"base": "one", "c": 30},
        "three": {"base": "two", "a": 100},
    }
    chips = resolve_chips(raw)
    assert chips["one"] == {"a": 1, "b": 20, "c": 3}
    assert chips["two"] == {"a": 1, "b": 20, "c": 30}
    assert chips["three"] == {"a": 100, "b": 20, "c": 30}
    assert "base" not in chips["three"]


@pytest.mark.parametrize(
    "raw, words",
    [
        ({"common": {}, "x": {"base": "nope"}}, "not a chip"),
        ({"common": {}, "x": {"base": "y"}, "y": {"base": "x"}}, "circle"),
    ],
)
def test_a_wrong_base_is_one_sentence(raw, words):
    with pytest.raises(ValueError, match=words):
        resolve_chips(raw)


@pytest.mark.parametrize(
    "table, words",
    [
        ({"base": "mk2", "tiles_per_ipu": 736}, "must give its own name and display_name"),
        ({"base": "mk2", "name": "half", "tiles_per_ipu": 736}, "own display_name"),
        ({"base": "mk2", "name": "mk2", "display_name": "Half"}, "a chip's name is its table's"),
    ],
)
def test_a_chip_over_a_base_names_itself(table, words):
    """A chip written over a base (the recipe of docs/design.md) that left out its name or
    product name silently wrote its profiles as the base's ('1 x Mk2 GC200' with 736 tiles):
    it is refused in one sentence naming the field."""
    raw = {
        "common": {},
        "mk2": {"name": "mk2", "display_name": "Mk2 GC200", "tiles_per_ipu": 1472},
        "half": table,
    }
    with pytest.raises(ValueError, match=words):
        resolve_chips(raw)
    named = resolve_chips({**raw, "half": {**table, "name": "half", "display_name": "Half"}})
    assert named["half"]["name"] == "half" and named["half"]["display_name"] == "Half"


def test_bow_is_mk2_but_for_its_clock_links_and_machine():
    bow, mk2 = Target(**TARGETS["bow"]), Target(**TARGETS["mk2"])
    differ = {k for k, v in bow.to_dict().items() if mk2.to_dict()[k] != v}
    assert differ == {
        "name",
        "display_name",
        "architecture",
        "clock_hz",
        "ipu_link_bytes_per_s",
        "streaming_memory_bytes",
        "machine_name",
    }
