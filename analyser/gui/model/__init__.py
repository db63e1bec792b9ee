"""The GUI's model: what the window and its reports show, with no Qt (as napari's
``components``): the open documents and the workspace (:mod:`.document`), the per-document cache
of analysis results the reports read (:mod:`.data`), selections (:mod:`.selection`), the
pipeline chart's data (:mod:`.pipeline`) and the memory units preference (:mod:`.units`).

Views (``analyser.gui`` outside this package) read the model and subscribe to its events; the
model never imports Qt, pyqtgraph or a view (import-linter contract in pyproject.toml), so it is
usable, and tested, headless.
"""
