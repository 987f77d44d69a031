"""Charts as inline SVG: the nightly report is one self-contained file (no script library, no
network), readable in any browser and archived as it is. Two kinds are enough for it: lines
(a CDF, bandwidth against size, figures across runs) and grouped bars (one figure per lab or
per fault type). Every mark has class `mark`, so a test can count what was drawn."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 36, 52  # the legend sits in the right margin
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")

Point = tuple[float, float]


def _ticks(low: float, high: float, log: bool) -> list[float]:
    if log:
        return [10.0 ** e for e in range(math.floor(math.log10(low)),
                                         math.ceil(math.log10(high)) + 1)]
    if high <= low:
        high = low + 1
    raw = (high - low) / 5
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if raw <= step * m)
    return [step * i for i in range(math.floor(low / step), math.ceil(high / step) + 1)]


def _label(value: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:.3g}"


class _Frame:
    """Data coordinates to pixels for one chart."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float], x_log: bool, y_log: bool,
                 y_from_zero: bool) -> None:
        self.x_log, self.y_log = x_log, y_log
        low_y = min(ys) if not y_from_zero else min(0.0, min(ys))
        self.x_ticks = _ticks(min(xs), max(xs), x_log)
        self.y_ticks = _ticks(low_y, max(ys), y_log)
        self.x_range = (self.x_ticks[0], self.x_ticks[-1]) if x_log else (min(xs), max(xs))
        self.y_range = (self.y_ticks[0], self.y_ticks[-1])

    @staticmethod
    def _scale(value: float, span: tuple[float, float], log: bool, pixels: float) -> float:
        low, high = (math.log10(v) for v in span) if log else span
        value = math.log10(value) if log else value
        return 0.0 if high == low else (value - low) / (high - low) * pixels

    def x(self, value: float) -> float:
        return LEFT + self._scale(value, self.x_range, self.x_log, WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - self._scale(value, self.y_range, self.y_log,
                                             HEIGHT - TOP - BOTTOM)


def _open(chart_id: str, title: str) -> list[str]:
    return [f'<svg class="plot" id="{escape(chart_id)}" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img">',
            f'<title>{escape(title)}</title>',
            f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" class="title">{escape(title)}'
            '</text>']


def _empty(chart_id: str, title: str, why: str) -> str:
    return "".join([*_open(chart_id, title),
                    f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" '
                    f'class="empty">{escape(why)}</text></svg>'])


def _axes(frame: _Frame, x_label: str, y_label: str, x_names: Sequence[str] = ()) -> list[str]:
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    out = [f'<line x1="{LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>',
           f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" class="axis"/>']
    for tick in frame.y_ticks:
        y = frame.y(tick)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(tick)}'
                   '</text>')
    if not x_names:
        for tick in frame.x_ticks:
            if frame.x_range[0] <= tick <= frame.x_range[1]:
                x = frame.x(tick)
                out.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">'
                           f'{_label(tick)}</text>')
    out.append(f'<text x="{(LEFT + right) / 2}" y="{HEIGHT - 10}" text-anchor="middle" '
               f'class="axis-label">{escape(x_label)}</text>')
    out.append(f'<text x="16" y="{(TOP + bottom) / 2}" text-anchor="middle" class="axis-label" '
               f'transform="rotate(-90 16 {(TOP + bottom) / 2})">{escape(y_label)}</text>')
    return out


def _legend(names: Sequence[str]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        y = TOP + 8 + 18 * i
        out.append(f'<rect x="{WIDTH - RIGHT + 12}" y="{y - 9}" width="10" height="10" '
                   f'fill="{COLOURS[i % len(COLOURS)]}"/><text x="{WIDTH - RIGHT + 27}" '
                   f'y="{y}" class="legend">{escape(name[:22])}</text>')
    return out


def line_chart(chart_id: str, title: str, series: Mapping[str, Sequence[Point]], *,
               x_label: str, y_label: str, x_log: bool = False, y_log: bool = False,
               step: bool = False, empty: str = "no data in this run") -> str:
    """One line per series; `step` draws a staircase (a CDF)."""
    series = {k: sorted(v) for k, v in series.items() if v}
    points = [p for v in series.values() for p in v]
    if not points:
        return _empty(chart_id, title, empty)
    frame = _Frame([x for x, _ in points], [y for _, y in points], x_log, y_log,
                   y_from_zero=not y_log)
    out = [*_open(chart_id, title), *_axes(frame, x_label, y_label)]
    for i, (name, values) in enumerate(series.items()):
        path, last_y = [], None
        for x, y in values:
            if step and last_y is not None:
                path.append(f"{frame.x(x):.1f},{frame.y(last_y):.1f}")
            path.append(f"{frame.x(x):.1f},{frame.y(y):.1f}")
            last_y = y
        colour = COLOURS[i % len(COLOURS)]
        out.append(f'<polyline class="mark" fill="none" stroke="{colour}" stroke-width="2" '
                   f'points="{" ".join(path)}"><title>{escape(name)}</title></polyline>')
        if len(values) == 1 or not step:
            out += [f'<circle class="dot" cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="3" '
                    f'fill="{colour}"/>' for x, y in values]
    return "".join([*out, *_legend(list(series)), "</svg>"])


def bar_chart(chart_id: str, title: str, groups: Mapping[str, Mapping[str, float]], *,
              y_label: str, x_label: str = "") -> str:
    """Bars grouped by category (the outer keys), one colour per series (the inner keys)."""
    names = list(dict.fromkeys(s for bars in groups.values() for s in bars))
    values = [v for bars in groups.values() for v in bars.values()]
    if not values:
        return _empty(chart_id, title, "no data in this run")
    frame = _Frame([0.0, 1.0], values, False, False, y_from_zero=True)
    out = [*_open(chart_id, title), *_axes(frame, x_label, y_label, x_names=list(groups))]
    slot = (WIDTH - LEFT - RIGHT) / len(groups)
    width = slot * 0.8 / max(1, len(names))
    for g, (category, bars) in enumerate(groups.items()):
        x0 = LEFT + g * slot + slot * 0.1
        for s, name in enumerate(names):
            if name not in bars:
                continue
            top, base = frame.y(bars[name]), frame.y(0.0)
            out.append(f'<rect class="mark" x="{x0 + s * width:.1f}" y="{min(top, base):.1f}" '
                       f'width="{width * 0.9:.1f}" height="{abs(base - top):.1f}" '
                       f'fill="{COLOURS[s % len(COLOURS)]}"><title>{escape(category)} '
                       f'{escape(name)}: {bars[name]:.4g}</title></rect>')
        out.append(f'<text x="{LEFT + (g + 0.5) * slot:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                   f'text-anchor="middle">{escape(category[:14])}</text>')
    return "".join([*out, *_legend(names), "</svg>"])
