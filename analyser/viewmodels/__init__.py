"""What the GUI's reports show, read from a profile and its analysis, with no Qt.

The GUI (:mod:`analyser.gui`) never reads the profile itself: every dataset path and every read
of the raw source (``Analysis.src``) lives here, so an import contract and a test can say that
nothing under ``analyser/gui`` touches the file's layout (napari's split between its Qt-free
``components`` and its ``_qt`` widgets). Modules:

- :mod:`.profile_reads`: the raw tables and columns the GUI model caches (program nodes,
  liveness steps, compute sets, the execution's run starts ...);
- :mod:`.tile_details`: tile order, floor plan and what lives and runs on selected tiles;
- :mod:`.datasets`: the datasets each report cannot show anything without.
- :mod:`.critical_path`: the critical path as the Execution Trace and the Pipeline show it.
"""
