"""Chart axes that read like PopVision's: cycle counts with units (k / M / G) instead of
pyqtgraph's scientific notation ("1e+08"), exact (with thousands separators) once zoomed in."""

from __future__ import annotations

import math

import pyqtgraph as pg

from analyser.gui.plots import LightAxisItem
from analyser.gui.theme import style_plot

#: Unit prefixes for counts, largest first (SI, decimal: 1 M cycles = 10**6 cycles).
PREFIXES = ((1e9, "G"), (1e6, "M"), (1e3, "k"))


def _decimals(step: float) -> int:
    """Fewest decimals (at most 6) that write ``step`` exactly enough."""
    for d in range(7):
        if abs(round(step, d) - step) <= 1e-9 * max(1.0, abs(step)):
            return d
    return 6


def format_cycles(values, spacing: float) -> list[str]:
    """Tick labels for ``values`` cycles ``spacing`` apart, with one prefix for all of them:
    the largest (G, M, k) that keeps at most three integer digits and needs at most three
    decimals to tell neighbouring ticks apart (``50M``, ``1.25G``, ``2.5k``, ``4.871G``);
    otherwise the full count with thousands separators (``120,000,020`` once zoomed in). A
    label never mixes both (``4,870.96M``)."""
    vals = [float(v) for v in values]
    finite = [abs(v) for v in vals if math.isfinite(v)]
    top = max(finite, default=0.0)
    spacing = abs(float(spacing)) or 1.0
    scale, prefix = 1.0, ""
    for s, p in PREFIXES:
        if top >= s and spacing / s >= 0.001 and top / s < 1000:
            scale, prefix = s, p
            break
    return _tick_labels(vals, scale, _decimals(spacing / scale), prefix)


def _tick_labels(values, scale: float, digits: int, suffix: str) -> list[str]:
    """``values / scale`` with ``digits`` decimals and thousands separators, then ``suffix``;
    a tick that rounds to zero reads ``0`` and a non-finite one is left blank."""
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append("")
            continue
        text = f"{v / scale:,.{digits}f}"
        out.append("0" if float(text.replace(",", "")) == 0 else text + suffix)
    return out


#: Time units of a time axis, largest first.
TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def format_time(values, spacing: float, clock_hz: float) -> list[str]:
    """Tick labels of ``values`` cycles ``spacing`` apart as time at ``clock_hz``: one unit for
    all of them (the largest of s, ms, µs, ns in which the ticks' spacing is at least 0.01),
    with the decimals that tell neighbouring ticks apart (``0.25 ms``, ``120 µs``)."""
    secs = [float(v) / clock_hz for v in values]
    step = abs(float(spacing)) / clock_hz or 1e-9
    scale, unit = TIME_UNITS[-1]
    for s, u in TIME_UNITS:
        if step / s >= 0.01:
            scale, unit = s, u
            break
    return _tick_labels(secs, scale, _decimals(step / scale), f" {unit}")


class CycleAxis(LightAxisItem):
    """An axis of cycle counts: ``50M`` / ``1.25G`` ticks, never ``1e+08``; or, with
    :meth:`set_time` given the IPU clock, the same positions read as time (``1.5 ms``)."""

    def __init__(self, orientation: str = "bottom", **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)
        #: the IPU clock (Hz) when the axis reads in time, else None (cycles)
        self.clock_hz: float | None = None

    def set_time(self, clock_hz: float | None) -> None:
        """Read the axis as time at ``clock_hz`` (None: back to cycles)."""
        self.clock_hz = clock_hz
        self.picture = None  # the tick labels change
        self.update()

    def tickValues(self, minVal, maxVal, size):
        if not self.clock_hz:
            return super().tickValues(minVal, maxVal, size)
        # ticks at round times (1, 2, 5 x 10^k seconds), not at round cycle counts
        c = self.clock_hz
        levels = super().tickValues(minVal / c, maxVal / c, size)
        return [(spacing * c, [v * c for v in values]) for spacing, values in levels]

    def tickStrings(self, values, scale, spacing) -> list[str]:
        if self.clock_hz:
            return format_time([v * scale for v in values], spacing * scale, self.clock_hz)
        return format_cycles([v * scale for v in values], spacing * scale)


def use_cycle_axis(plot: pg.PlotWidget | pg.PlotItem, side: str = "bottom") -> CycleAxis:
    """Replace the ``side`` axis of ``plot`` with a :class:`CycleAxis` (label kept, themed)."""
    item = plot.getPlotItem() if isinstance(plot, pg.PlotWidget) else plot
    old = item.getAxis(side)
    label = old.labelText
    axis = CycleAxis(side)
    item.setAxisItems({side: axis})
    if label:
        axis.setLabel(label)
    if isinstance(plot, pg.PlotWidget):
        style_plot(plot)
    return axis


def fixed_prefix_axes(plot: pg.PlotWidget | pg.PlotItem) -> None:
    """Turn pyqtgraph's automatic SI prefix off on every axis of ``plot`` (for axes whose
    labels carry no units, or that format their own ticks): with it on, every range change of
    every axis (the hidden top and right ones too) re-sets the axis label's HTML, about 450
    ``setHtml`` calls when the Pipeline fills two profiles."""
    item = plot.getPlotItem() if isinstance(plot, pg.PlotWidget) else plot
    # the axes built (a light plot's hidden top and right ones, built when first asked for,
    # take the bottom and left ones' choice)
    for entry in list(item.axes.values()):
        axis = entry["item"]
        if axis.autoSIPrefix:
            axis.enableAutoSIPrefix(False)


def short_cycles(value: float) -> str:
    """A cycle count to three significant digits with a prefix: ``245M``, ``1.25G``, ``980``."""
    v = float(value)
    for scale, prefix in PREFIXES:
        if abs(v) >= scale:
            x = v / scale
            digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2
            return f"{x:.{digits}f}{prefix}"
    return f"{v:,.0f}"


def decade_label(exponent: int) -> str:
    """``10 ** exponent`` as a short label: ``1``, ``10``, ``100``, ``1k``, ``10k``, ``1M`` ...,
    below one ``0.1``, ``0.01``, then ``1e-3``."""
    for scale, prefix in PREFIXES:
        power = round(math.log10(scale))
        if exponent >= power:
            return f"{10 ** (exponent - power):,}{prefix}"
    if exponent >= 0:
        return f"{10**exponent:,}"
    return f"{10.0**exponent:g}" if exponent >= -2 else f"1e{exponent}"


class LogAxis(LightAxisItem):
    """A log axis whose labels do not crowd: when the view spans a decade or more only the
    decades are labelled (``1k``, ``10k``, ``100k``; pyqtgraph labels every minor tick too,
    ``2·10³ 3·10³ ...``, which ran into each other), the minor ticks drawn without text; a
    view inside one decade labels its minor ticks (``200``, ``300``)."""

    def __init__(self, orientation: str = "bottom", **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        self.enableAutoSIPrefix(False)
        self.setLogMode(True)
        self._span = 0.0

    def logTickValues(self, minVal, maxVal, size, stdTicks):
        self._span = float(maxVal - minVal)
        levels = super().logTickValues(minVal, maxVal, size, stdTicks)
        if self._span >= 1.0 and not any(sp is not None and sp >= 1.0 for sp, _ in levels):
            # pyqtgraph gives a decade level only when its linear spacing reaches 1; a view
            # of 2-4 decades on a wide axis got minor ticks alone, and so no label at all
            decades = [float(d) for d in range(math.ceil(minVal), math.floor(maxVal) + 1)]
            levels = [(1.0, decades), *levels]
        return levels

    def logTickStrings(self, values, scale, spacing) -> list[str]:
        if spacing is None and self._span >= 1.0:
            # the minor level (its decades repeat the major level's): drawn without text
            return [""] * len(values)
        out = []
        for v in values:
            x = float(v) + math.log10(scale) if scale > 0 else float(v)
            if not math.isfinite(x):
                out.append("")
            elif abs(x - round(x)) < 1e-6:
                out.append(decade_label(round(x)))
            elif self._span >= 1.0:
                out.append("")  # between decades: the decades' labels say where it is
            else:
                out.append(f"{10**x:,.3g}")
        return out
