"""The report's charts as inline SVG, drawn here with no chart library: lines (loss, accuracy,
per-replica figures), bars (examples/s per replica, the step-time split). Each chart scales to
its column (``viewBox``, ``width: 100%`` in the page's style) and carries its figures in text too:
each line's ``<title>`` names its lowest and highest point, which a browser shows on hover and
which a reader of the file (or a test) can check against the run."""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np

from gui_app.core.report.downsample import thin

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 58, 24, 12, 34  # the plot area's margins: tick labels, the x label
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf")  # matplotlib's tab10, the window's replica colours too


@dataclass
class Line:
    name: str
    x: np.ndarray
    y: np.ndarray
    color: str = COLORS[0]
    dashed: bool = False
    dots: bool = False  # a point per value (the validation, one per epoch)
    width: float = 1.5


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round values covering [low, high] (1, 2 or 5 times a power of ten apart)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else []
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def number_text(value: float) -> str:
    """A tick or a figure: ``0.25``, ``1,200``, ``3.2e-05``."""
    if value == 0:
        return "0"
    if abs(value) >= 1e6 or abs(value) < 1e-3:
        return f"{value:.2g}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _extremes(line: Line) -> str:
    """``loss: lowest 0.0123 at 9,800, highest 50 at 5,000`` from the whole series, not the thinned one."""
    y = np.asarray(line.y, dtype=float)
    finite = np.flatnonzero(np.isfinite(y))
    if not len(finite):
        return f"{line.name}: no values"
    lo, hi = finite[np.argmin(y[finite])], finite[np.argmax(y[finite])]
    return (f"{line.name}: lowest {y[lo]:.6g} at {number_text(line.x[lo])}, "
            f"highest {y[hi]:.6g} at {number_text(line.x[hi])}")


def line_chart(lines: list[Line], x_label: str, y_label: str, *, y_range: tuple[float, float] | None = None,
               height: int = HEIGHT) -> str:
    """One chart of ``lines`` over a shared x; "" when no line has a value."""
    drawn = [(line, *thin(line.x, line.y)) for line in lines if np.isfinite(np.asarray(line.y, float)).any()]
    if not drawn:
        return ""
    xs = np.concatenate([x for _, x, y in drawn])
    ys = np.concatenate([y[np.isfinite(y)] for _, _, y in drawn])
    x_lo, x_hi = float(np.nanmin(xs)), float(np.nanmax(xs))
    y_lo, y_hi = y_range if y_range else (float(ys.min()), float(ys.max()))
    if x_hi <= x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    if y_hi <= y_lo:
        y_lo, y_hi = y_lo - 0.5, y_hi + 0.5
    plot_w, plot_h = WIDTH - LEFT - RIGHT, height - TOP - BOTTOM

    def px(x: Any) -> Any:  # an array, or one value
        return LEFT + (np.asarray(x) - x_lo) / (x_hi - x_lo) * plot_w

    def py(y: Any) -> Any:
        return TOP + (y_hi - np.asarray(y)) / (y_hi - y_lo) * plot_h

    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(y_label)}">']
    for tick in nice_ticks(y_lo, y_hi):
        if y_lo <= tick <= y_hi:
            ty = float(py(tick))
            out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{ty:.1f}" y2="{ty:.1f}"/>'
                       f'<text class="tick" x="{LEFT - 4}" y="{ty + 3:.1f}" text-anchor="end">'
                       f'{number_text(tick)}</text>')
    for tick in nice_ticks(x_lo, x_hi, 6):
        if x_lo <= tick <= x_hi:
            tx = float(px(tick))
            out.append(f'<line class="grid" x1="{tx:.1f}" x2="{tx:.1f}" y1="{TOP}" y2="{height - BOTTOM}"/>'
                       f'<text class="tick" x="{tx:.1f}" y="{height - BOTTOM + 13}" text-anchor="middle">'
                       f'{number_text(tick)}</text>')
    out.append(f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}"/>')
    out.append(f'<text class="axis" x="{LEFT + plot_w / 2:.0f}" y="{height - 4}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    for line, x, y in drawn:
        title = f"<title>{escape(_extremes(line))}</title>"
        dash = ' stroke-dasharray="5 3"' if line.dashed else ""
        d = _path(px(x), py(np.clip(y, y_lo, y_hi)))
        out.append(f'<path class="series" data-name="{escape(line.name)}" d="{d}" stroke="{line.color}" '
                   f'stroke-width="{line.width}"{dash}>{title}</path>')
        if line.dots:
            out.extend(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{line.color}"/>'
                       for cx, cy in zip(px(x), py(y)) if math.isfinite(cy))
    out.append("</svg>")
    legend = "".join(f'<span class="key"><span class="swatch" style="background:{line.color}"></span>'
                     f'{escape(line.name)}</span>' for line, _, _ in drawn)
    return (f'<figure><figcaption>{escape(y_label)}</figcaption>{"".join(out)}'
            f'<div class="legend">{legend}</div></figure>')


def _path(x: np.ndarray, y: np.ndarray) -> str:
    """``M x y L x y ...``, a new ``M`` after each gap (NaN)."""
    parts, pen_down = [], False
    for cx, cy in zip(x.tolist(), y.tolist()):
        if not math.isfinite(cy):
            pen_down = False
            continue
        parts.append(f"{'L' if pen_down else 'M'}{cx:.1f} {cy:.1f}")
        pen_down = True
    return "".join(parts)


@dataclass
class Bar:
    label: str
    parts: list[tuple[float, str, str]]  # (value, colour, what it is) stacked left to right
    highlight: bool = False
    note: str = ""  # after the bar: "1,234 examples/s"


def bar_chart(bars: list[Bar], unit: str) -> str:
    """Horizontal bars, one row each, stacked parts; the highlighted one outlined (the slowest
    replica). HTML and inline SVG rows, so long labels wrap on a phone."""
    total = max((sum(v for v, _, _ in bar.parts) for bar in bars), default=0.0)
    if total <= 0:
        return ""
    rows = []
    for bar in bars:
        rects, x = [], 0.0
        for value, color, what in bar.parts:
            w = 100.0 * max(value, 0.0) / total
            rects.append(f'<rect x="{x:.2f}" y="0" width="{w:.2f}" height="14" fill="{color}">'
                         f'<title>{escape(what)}: {number_text(value)} {escape(unit)}</title></rect>')
            x += w
        outline = (f'<rect class="slowest" x="0" y="0" width="{x:.2f}" height="14"/>' if bar.highlight else "")
        rows.append(f'<div class="bar{" highlight" if bar.highlight else ""}"><span class="label">{escape(bar.label)}'
                    f'</span><svg viewBox="0 0 100 14" preserveAspectRatio="none">{"".join(rects)}{outline}</svg>'
                    f'<span class="note">{escape(bar.note)}</span></div>')
    return f'<div class="bars">{"".join(rows)}</div>'
