"""The GUI's report registry: a report listed in REPORTS whose module is missing is an error at
start-up, naming the report, not a report left out of the side list without a word."""

from __future__ import annotations

import pytest

from analyser.gui import reports as registry


def test_a_listed_report_whose_module_is_missing_is_an_error(monkeypatch):
    spec = "analyser.gui.reports.no_such_report:NoSuchReport"
    monkeypatch.setattr(registry, "REPORTS", [*registry.REPORTS[:1], spec])
    with pytest.raises(ImportError, match="no_such_report"):
        registry.report_classes()


def test_every_listed_report_resolves():
    assert len(registry.report_classes()) == len(registry.REPORTS)
