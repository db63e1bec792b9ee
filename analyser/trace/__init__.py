"""The trace query engine: level-of-detail window queries over a profile's executed steps.

``window.TraceWindow`` (pyramids per IPU and grouping, window queries bounded by pixels, row
ranges, range summaries, search), its on-disk level-of-detail cache (``lod_cache``) and the BSP
view's state shares (``bsp``). Qt-free; used by the GUI's Execution Trace and Pipeline views.
Kept out of the analysis core (issue 24): it owns a reader, caches and finisher threads.
"""
