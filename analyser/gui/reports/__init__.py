"""The registry of reports shown in the main window's side list, in display order.

Each entry is ``"module:ClassName"`` of a :class:`analyser.gui.reports.base.Report` subclass,
listed in :mod:`analyser.gui.report_index` (with the report's name and data needs, so that the
window imports a report's module only when the report is first shown or built). A listed report
whose module is missing is an error (:func:`report_classes` raises; the window shows a message
box when the report is shown), never a report skipped silently.

To add a report: write its frozen view-model and builder (``analyser/gui/model/<name>_view.py``)
and a ``Report`` subclass (``title``, ``key``, ``data_needs``, ``view_builder``, its content
under the base class's empty states and ``show_view(view)``, optionally ``chart_widget()``,
``needs_execution``), then add its entry to :mod:`analyser.gui.report_index` (docs/design.md,
"add a GUI report").

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

from analyser.gui import report_index

#: The report specs in display order, from the window's index of the reports (their names and
#: data needs without their code: :mod:`analyser.gui.report_index`).
REPORTS: list[str] = [entry.spec for entry in report_index.REPORTS]

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


def menu_entries() -> list[tuple[str, str, str]]:
    """The contributed menu actions whose module exists, as ``(menu, text, spec)``: the window
    resolves ``spec`` when the action is triggered (importing a dialog's module, and what it
    imports, only when it is used)."""
    return [entry for entry in MENU_ACTIONS if _module_exists(entry[2].partition(":")[0])]


def menu_actions() -> list[tuple[str, str, Callable[..., Any]]]:
    out = []
    for menu, text, spec in MENU_ACTIONS:
        fn = resolve(spec)
        if fn is not None:
            out.append((menu, text, fn))
    return out
