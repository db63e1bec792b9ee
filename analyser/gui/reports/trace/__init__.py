"""Execution Trace report: level-of-detail timeline, BSP view, range summary, details, search."""

from analyser.gui.reports.trace.report import TraceReport

__all__ = ["TraceReport"]
