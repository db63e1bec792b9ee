"""The registry of reports shown in the main window's side list, in display order.

Each entry is ``"module:ClassName"`` of a :class:`analyser.gui.reports.base.Report` subclass,
imported lazily when the window is built. An entry whose *module* does not exist (yet) is skipped,
so a report can be listed before its module lands; any other import error is a bug and raises.

To add a report: write a ``Report`` subclass (``title``, ``key``, ``data_needs``, its content
under the base class's empty states and ``show_documents(doc, other)``, optionally
``chart_widget()``, ``needs_execution``) and add one line below.

Hooks for contributed actions (looked up lazily, skipped when the module does not exist):

* ``APPLY_TIP_HANDLER``: ``"module:function"`` called as ``function(window, document, insight)``
  when the user presses "Apply" on an insight with a recommended change (the Insights report shows
  the button only when the handler's module exists). ``window`` is the
  :class:`analyser.gui.main_window.MainWindow` (``window.open_compare(path_a, path_b)`` shows a
  result compared with the original); ``insight`` is the analysis core's insight object.
* ``MENU_ACTIONS``: ``(menu title, action text, "module:function")``, the function being called
  as ``function(window)`` when the action is triggered (e.g. a "Run engine..." dialog).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

REPORTS: list[str] = [
    "analyser.gui.reports.summary:SummaryReport",
    "analyser.gui.reports.insights:InsightsReport",
    "analyser.gui.reports.memory:MemoryReport",
    "analyser.gui.reports.liveness:LivenessReport",
    "analyser.gui.reports.program_tree:ProgramTreeReport",
    "analyser.gui.reports.operations:OperationsReport",
    "analyser.gui.reports.trace:TraceReport",
    "analyser.gui.reports.pipeline:PipelineReport",
    "analyser.gui.reports.roofline:RooflineReport",
    "analyser.gui.reports.query:QueryReport",
]

APPLY_TIP_HANDLER: str = "analyser.gui.whatif:apply_tip"

MENU_ACTIONS: list[tuple[str, str, str]] = [
    ("&Tools", "&Run engine…", "analyser.gui.run_dialog:open_run_dialog"),
    (
        "&Tools",
        "&Design space (tune results)…",
        "analyser.gui.design_space:open_design_space_dialog",
    ),
]


def _module_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def resolve(spec: str) -> Any | None:
    """The object named by ``"module:attr"``, or None when the module does not exist."""
    module, _, attr = spec.partition(":")
    if not _module_exists(module):
        return None
    return getattr(importlib.import_module(module), attr)


def report_classes() -> list[type]:
    """The report classes, in display order. A report listed in :data:`REPORTS` whose module is
    missing is an error at start-up (ImportError naming it), never a report skipped silently."""
    classes = []
    for spec in REPORTS:
        cls = resolve(spec)
        if cls is None:
            raise ImportError(
                f"GUI report {spec!r} is listed in REPORTS but its module is missing."
            )
        classes.append(cls)
    return classes


def apply_tip_handler() -> Callable[..., Any] | None:
    return resolve(APPLY_TIP_HANDLER)


def menu_actions() -> list[tuple[str, str, Callable[..., Any]]]:
    out = []
    for menu, text, spec in MENU_ACTIONS:
        fn = resolve(spec)
        if fn is not None:
            out.append((menu, text, fn))
    return out
