"""Exporters of the execution trace: Chrome trace-event JSON and Perfetto protobuf.

    from analyser.export import export_trace
    export_trace("step4.h5", "step4.json", fmt="chrome")            # one file
    export_trace("step4.h5", "step4.json", split_by_run=True)       # one file per host call

Both stream the step table in chunks (never holding the whole trace) and write atomically.
"""

from __future__ import annotations

from analyser.export.trace import TraceExportError, export_trace, lane_names

__all__ = ["TraceExportError", "export_trace", "lane_names"]
