"""The Operations report's view-model: the table it shows at one software layer, built in one
go off the GUI thread (:mod:`.operations` shapes it; :mod:`.views` hands it over).

The selected row's details (its figures, variables, compute sets, programs and charts) are
still asked of :mod:`.operations` when a row is selected. No Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from analyser.core.units import MemoryUnits
from analyser.gui.model import data
from analyser.gui.model import operations as ops_model
from analyser.gui.model.document import Document
from analyser.gui.model.operations import SOFTWARE_LAYERS, software_layer_titles


@dataclass(frozen=True)
class OperationsView:
    """The table of A (A and B joined by name when ``compare``) at ``layer``."""

    layer: str
    compare: bool
    #: A ran (else no executions, total cycles or shares: columns of zeros read as measured)
    executed: bool
    #: the software layers' titles in :data:`SOFTWARE_LAYERS` order (the framework's words)
    layer_titles: tuple[str, ...]
    frame: pd.DataFrame
    #: ``(key, title, formatter)`` of each column
    columns: tuple[tuple[str, str, Any], ...]
    passes: tuple[str, ...]
    ipus: tuple[str, ...]
    #: the column sorted first (descending)
    sort_key: str


def build_operations_view(
    doc: Document, other: Document | None, units: MemoryUnits, layer: str = "operations"
) -> OperationsView:
    """The Operations view-model of ``doc`` (compared with ``other``) at ``layer``."""
    titles = software_layer_titles(data.run_config(doc).get("framework"))
    frame = ops_model.shown_frame(doc, other, layer)
    executed = bool(doc.has_execution)
    compare = other is not None
    passes, ipus = ops_model.filter_choices(frame)
    return OperationsView(
        layer=layer,
        compare=compare,
        executed=executed,
        layer_titles=tuple(titles[key] for key in SOFTWARE_LAYERS),
        frame=frame,
        columns=tuple(ops_model.table_columns(layer, units, compare, executed)),
        passes=tuple(passes),
        ipus=tuple(ipus),
        sort_key=ops_model.first_sort_key(frame, executed, compare),
    )
