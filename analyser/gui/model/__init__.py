"""The GUI's model: what the window and its reports show, with no Qt (as napari's
``components``): the open documents and the workspace (:mod:`.document`), the per-document cache
of analysis results the reports read (:mod:`.data`), selections (:mod:`.selection`), and one
view-model per report: what the report shows, shaped here so that its view only
draws (:mod:`.summary`, :mod:`.pipeline`, :mod:`.liveness`, :mod:`.design_space`, :mod:`.memory`,
:mod:`.operations` (with the Roofline's points), :mod:`.program_tree`, :mod:`.insights`, ...).
A report converted to one door reads a single frozen view-model built by its declared builder
(:mod:`.views`: :mod:`.summary_view`, :mod:`.roofline_view`, :mod:`.operations_view`,
:mod:`.pipeline_view`, :mod:`.liveness_view`), off the GUI thread, and never :mod:`.data`.

Views (``analyser.gui`` outside this package) read the model and subscribe to its events; the
model never imports Qt, pyqtgraph or a view (import-linter contract in pyproject.toml), so it is
usable, and tested, headless.
"""
