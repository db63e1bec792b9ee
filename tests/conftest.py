"""Test configuration shared by every test.

Qt runs on the offscreen platform so that a bare ``pytest`` works on a machine with no display.
This must be set before any Qt module is imported, hence at the top of the root conftest.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("MPLBACKEND", "Agg")
# no trace level-of-detail cache in the user's cache folder (tests that check it set their own)
os.environ.setdefault("IPU_ANALYSER_CACHE", "")

# Shared session fixtures provided by plugin modules in tests/ (walkthrough_profiles: the six
# walkthrough profiles simulated once per session; sim_cluster: one Dask cluster for the
# simulation service).
pytest_plugins = ["fixtures_walkthrough", "fixtures_service"]
