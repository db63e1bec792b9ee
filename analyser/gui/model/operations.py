"""The Operations report's way to the analysis core's software layers, named once here so
that ``analyser.gui.reports`` reaches the core only through ``analyser.gui.model`` (an import
contract, issue 24 item 3). No Qt."""

from __future__ import annotations

from analyser.core.operations import SOFTWARE_LAYERS, software_layer_titles

__all__ = ["SOFTWARE_LAYERS", "software_layer_titles"]
