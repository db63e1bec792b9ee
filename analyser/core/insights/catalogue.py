"""The catalogue of insight rules: the rule modules, listed once, and the rules they declare.

The one registration of the insights: a rule module joins the catalogue by its line in
:data:`RULE_MODULES` (memory first, in the IPU memory guide's order), its rules by their
``@rule`` (:mod:`analyser.core.insights.registry`). Nothing registers itself on import.
"""

from __future__ import annotations

import functools

from analyser.core.insights import memory_rules, throughput_rules
from analyser.core.insights.registry import CATEGORIES, Rule, rules_in

#: The rule modules in catalogue order (the order breaks ranking ties).
RULE_MODULES = (memory_rules, throughput_rules)


@functools.cache
def all_rules() -> tuple[Rule, ...]:
    """Every rule, memory rules first, each category in catalogue order; an id declared twice
    is an error."""
    rules = [r for m in RULE_MODULES for r in rules_in(m)]
    seen: set[str] = set()
    for r in rules:
        twice = seen.intersection(r.ids)
        if twice:
            raise ValueError(f"insight id {sorted(twice)[0]!r} is declared twice")
        seen.update(r.ids)
    return tuple(r for c in CATEGORIES for r in rules if r.category == c)


def rules_of(category: str) -> tuple[Rule, ...]:
    """The rules of ``category`` (``memory`` or ``throughput``) in catalogue order."""
    return tuple(r for r in all_rules() if r.category == category)
