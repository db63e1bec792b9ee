"""The Program Tree report's view-model: each profile's program tree (its rows, columns and
search, :class:`~analyser.gui.model.program_tree.ProgramTree`), its operations' names for the
details pane and, when comparing, B's change column and how A's programs match B's, built in
one go off the GUI thread (:mod:`.views` hands it over).

The selected step's per-tile cycles are a row of the profile's ``/programs/tile_cycles`` (as
large as the programs times the tiles, never read whole for a first visit): they are a small
view-model of their own (:func:`build_tile_figures`), built on the report's pool thread when a
step is selected and painted into its details when they arrive. No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analyser.core.units import MemoryUnits
from analyser.gui.model import data
from analyser.gui.model import program_tree as model
from analyser.gui.model.document import Document
from analyser.gui.model.program_tree import ProgramTree, TileFigures


@dataclass(frozen=True)
class ProgramTreeSide:
    """One profile's pane: "A" or "B"."""

    tag: str
    name: str
    #: the pane's title ("A: <name>" when comparing, "" alone)
    title: str
    #: its tree (read-only arrays; B's carries the change column when comparing)
    tree: ProgramTree
    #: the profile's operation names by operation id (the details' "Operation" row)
    operation_names: tuple[str, ...]


@dataclass(frozen=True)
class ProgramTreeView:
    """A's tree (and B's, compared with it)."""

    a: ProgramTreeSide
    b: ProgramTreeSide | None
    #: per program of A, the matching program of B (same name, k-th of it; -1: none), read-only;
    #: None unless comparing
    b_of_a: np.ndarray | None
    #: one sentence the report shows instead of its trees ('' when they show): a profile with
    #: no programs has no tree
    message: str = ""


def no_programs_sentence(name: str) -> str:
    """What the report says of a profile whose control program has no nodes."""
    return f"{name} has no programs: its control program is empty, so there is no tree to show."


def _side(tag: str, doc: Document, units: MemoryUnits, compare: bool, delta=None):
    tree = model.program_tree(doc, units)
    if delta is not None:
        tree = tree.with_delta(delta)
    names = tuple(str(n) for n in data.operation_names(doc))
    return ProgramTreeSide(tag, doc.name, f"{tag}: {doc.name}" if compare else "", tree, names)


def build_program_tree_view(
    doc: Document, other: Document | None, units: MemoryUnits
) -> ProgramTreeView:
    """The Program Tree view-model of ``doc`` (compared with ``other``) in ``units``."""
    compare = other is not None
    a = _side("A", doc, units, compare)
    if other is None:
        return ProgramTreeView(a, None, None, "" if a.tree.n else no_programs_sentence(doc.name))
    b = _side("B", other, units, compare, model.matched_cycle_change(doc, other))
    empty = next((s.name for s in (a, b) if not s.tree.n), None)
    if empty is not None:
        return ProgramTreeView(a, b, None, no_programs_sentence(empty))
    match = model.b_of_a(doc, other)
    match.setflags(write=False)
    return ProgramTreeView(a, b, match)


def build_tile_figures(
    doc: Document, other: Document | None, units: MemoryUnits, node: int
) -> TileFigures:
    """The selected step ``node``'s per-tile cycles in ``doc`` (``other`` and ``units`` unused,
    part of every builder's signature): read from the profile, so built off the GUI thread."""
    return model.tile_figures(doc, node)
