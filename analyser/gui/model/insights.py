"""The Insights report's way to the analysis core: predictions (re-simulation on the
simulation service), their intervals and the effect's figures, named once here so that
``analyser.gui.reports`` reaches the core only through ``analyser.gui.model`` (an import
contract, issue 24 item 3). No Qt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analyser.core.insights.model import EFFECT_KEYS
from analyser.core.intervals import change_note, range_text

__all__ = ["EFFECT_KEYS", "cancel_predictions", "change_note", "predict", "range_text"]


def predict(
    analysis: Any, tips: list, progress: Callable[[int, int, str], None] | None = None
) -> list:
    """Re-simulate ``tips``' changes of ``analysis`` (``analyser.core.insights.
    predict_effects``) on the simulation service's workers (in the background, cancelled by
    :func:`cancel_predictions`); the effects are stored on the tips."""
    from analyser.core.insights import predict_effects
    from analyser.sim.service import get_service
    from analyser.sim.simulators import ServiceSimulator

    return predict_effects(analysis, tips, ServiceSimulator(get_service()), progress=progress)


def cancel_predictions() -> None:
    """Stop the re-simulations running on the simulation service."""
    from analyser.sim.service import get_service

    get_service().cancel_all()
