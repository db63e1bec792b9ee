"""``analyse tune``: search the run-option space for the best configuration that fits.

:mod:`~analyser.sim.tune.space` parses the space (``--vary``, ``--constraint``,
``--objective``), :mod:`~analyser.sim.tune.search` runs a grid or a guided search through the
simulation service (:mod:`analyser.sim.service`), :mod:`~analyser.sim.tune.results` writes and
reads the results table. See docs/tune.md.
"""

from analyser.sim.tune.results import (
    TuneResultsError,
    TuneTable,
    is_tune_results,
    load_results,
    to_frame,
    write_results,
)
from analyser.sim.tune.search import (
    Row,
    TuneResult,
    grid_budget,
    grid_size,
    pareto_front,
    tune,
)
from analyser.sim.tune.space import (
    OBJECTIVES,
    Dimension,
    Space,
    TuneError,
    build_space,
    parse_constraint,
    parse_vary,
)

__all__ = [
    "OBJECTIVES",
    "Dimension",
    "Row",
    "Space",
    "TuneError",
    "TuneResult",
    "TuneResultsError",
    "TuneTable",
    "build_space",
    "grid_budget",
    "grid_size",
    "is_tune_results",
    "load_results",
    "pareto_front",
    "parse_constraint",
    "parse_vary",
    "to_frame",
    "tune",
    "write_results",
]
