"""A column key a catalogue table does not declare is an error naming it, not a column dropped
without a word (analyser.core.quantities.columns)."""

from __future__ import annotations

import pytest

from analyser.core.quantities import TABLES, columns


def test_declared_keys_resolve_in_order():
    keys = list(TABLES["variables"])[:3]
    assert [c[0] for c in columns("variables", keys=keys)] == keys


@pytest.mark.parametrize(
    "call",
    [
        lambda: columns("variables", keys=["name", "byts"]),
        lambda: columns("variables", nmae="Name"),
        lambda: columns("no_such_table"),
    ],
)
def test_an_unknown_key_or_table_is_an_error(call):
    with pytest.raises(ValueError, match=r"byts|nmae|no_such_table"):
        call()
