"""Re-simulation: the simulation service (a Dask cluster of engine workers) and the tune search.

The only package of the analyser that imports Dask or starts threads and processes of its own; the
analysis core (analyser.core) never imports it, so scripts and the CLI load no Dask.
"""
