"""How an insight rule is declared: each rule once, with everything said about it.

A rule is a function ``evaluate(context) -> Insight | None`` decorated with :func:`rule`, which
declares its id, its category (the id's prefix: ``memory`` or ``throughput``), the thresholds it
reads, the run options (``engine.config.RunConfig`` fields) its change may set, and its
catalogue entry (when it fires, the change, the trade-off); the function returns
:func:`~analyser.core.insights.model.finding` (the id and category are stamped from here, typed
once). The decorator only attaches the :class:`Rule` to its function (``evaluate.rule``); the
catalogue (:mod:`analyser.core.insights.catalogue`) lists the rule modules and collects their
rules in definition order, so this module imports no rule module (no import circle).
``docs/insights.md``'s catalogue and threshold tables are generated from the catalogue
(:mod:`analyser.core.insights.docs`), and :func:`analyser.core.insights.find_insights` runs each
category's rules in catalogue order (which breaks ranking ties).

To add an insight: write the function in ``memory_rules.py`` or ``throughput_rules.py`` under
``@rule(...)``; nothing else to edit (run ``python -m analyser.core.insights.docs --write``).
``find_insights`` runs the memory rules only under memory pressure and the throughput rules only
on a profile with an execution: a rule does not check either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from analyser.core.insights.context import Context
    from analyser.core.insights.model import Insight

CATEGORIES = ("memory", "throughput")
#: What a throughput rule's ``addresses`` (the share of the run its change can save) is a share
#: of: the device trace (find_insights scales it by the device's share of the host-inclusive
#: time, Context.device_share) or already the host-inclusive time (the host time outside the
#: device trace included: the loader and host-call tips).
SHARES_OF = ("device trace", "host-inclusive time")


@dataclass(frozen=True)
class CatalogueEntry:
    """One row of the catalogue in docs/insights.md (Markdown cells)."""

    id: str
    fires_when: str
    change: str
    trade_off: str


@dataclass(frozen=True)
class Rule:
    """A registered insight rule."""

    id: str
    category: str
    evaluate: Callable[[Context], Insight | None]
    #: names of the :class:`~analyser.core.insights.Thresholds` fields the rule reads
    thresholds: tuple[str, ...]
    #: RunConfig fields the rule's recommended change may set (empty: advice only)
    changes: tuple[str, ...]
    entry: CatalogueEntry
    #: further ids the same rule can report (e.g. the all-reduce variant of raising GA)
    also: tuple[CatalogueEntry, ...] = ()
    #: throughput rules: what their ``addresses`` is a share of (:data:`SHARES_OF`); memory
    #: rules: None
    share_of: str | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        """The rule's id and those of the variants it can report."""
        return (self.id, *(e.id for e in self.also))

    def run(self, ctx: Context) -> Insight | None:
        """The rule's finding on ``ctx``, its id and category stamped from this declaration."""
        tip = self.evaluate(ctx)
        if tip is None:
            return None
        tip.id = tip.id or self.id
        if tip.id not in self.ids:
            raise ValueError(f"rule {self.id!r} reported {tip.id!r}, not one of its ids {self.ids}")
        tip.category = self.category
        return tip


def rule(
    id: str,
    *,
    thresholds: tuple[str, ...],
    changes: tuple[str, ...],
    fires_when: str,
    change: str,
    trade_off: str,
    also: tuple[CatalogueEntry, ...] = (),
    share_of: str | None = None,
) -> Callable[[Callable[[Context], Insight | None]], Callable[[Context], Insight | None]]:
    """Declare the decorated function as the rule ``id`` (see the module docstring)."""
    category = id.partition(".")[0]
    if category not in CATEGORIES:
        raise ValueError(f"insight id {id!r} must start with one of {CATEGORIES}")
    if (category == "throughput") != (share_of in SHARES_OF):
        raise ValueError(
            f"insight {id!r}: a throughput rule says what its addresses share is of "
            f"(share_of one of {SHARES_OF}); a memory rule does not"
        )

    def declare(evaluate: Callable[[Context], Insight | None]):
        entry = CatalogueEntry(id, fires_when, change, trade_off)
        # the rule rides on its function, which the rule modules define and import by name
        cast(Any, evaluate).rule = Rule(
            id, category, evaluate, thresholds, changes, entry, also, share_of
        )
        return evaluate

    return declare


def rules_in(module: ModuleType) -> tuple[Rule, ...]:
    """The rules declared in ``module``, in definition order."""
    return tuple(
        fn.rule for fn in vars(module).values() if isinstance(getattr(fn, "rule", None), Rule)
    )


#: Insights made by the re-simulation rather than a rule (documented in the same catalogue).
DERIVED = (
    CatalogueEntry(
        "memory.combined",
        "only with re-simulation: the profile is OOM and no single memory tip fits",
        "the memory tips' changes merged cumulatively in rank order (at most 5) until the run "
        "fits, then each tip the fit does not need is dropped "
        "(`analyser.core.insights.find_fitting_combination`)",
        "the trade-offs of the combined tips",
    ),
)
