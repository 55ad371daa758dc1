"""The cached-share chart: per request, the share of its prompt the provider read from its cache,
as inline SVG (no script, no CDN: it renders offline). ``memwire demo --html`` and the proxy's page
draw it."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["CHART_CSS", "share_chart"]

_W, _H, _PAD = 640, 160, 32

CHART_CSS = """
svg.chart { width: 100%; height: auto; background: #fafafa; border: 1px solid #e5e5e5; }
.chart .axis { stroke: #999; stroke-width: 1; }
.chart .grid { stroke: #e5e5e5; stroke-width: 1; }
.chart .line { fill: none; stroke: #2a6fdb; stroke-width: 2; }
.chart .dot { fill: #2a6fdb; }
.chart .label { font-size: 11px; fill: #666; }
"""


def share_chart(series: Sequence[tuple[int, int]], label: str) -> str:
    """``series``: per request, (prompt tokens, cached tokens). A point per request, its numbers in
    its tooltip; ``label`` names the chart (``data-chart``, ``aria-label``)."""
    n = len(series)
    if not n:
        return '<p class="note">no requests with usage figures</p>'

    def x(i: int) -> float:
        return _PAD + (i * (_W - 2 * _PAD) / max(1, n - 1))

    def y(share: float) -> float:
        return _H - _PAD - share * (_H - 2 * _PAD)

    shares = [cached / prompt if prompt else 0.0 for prompt, cached in series]
    parts = [f'<svg class="chart" viewBox="0 0 {_W} {_H}" role="img" data-chart="{escape(label)}" '
             f'aria-label="cached share of each request, {escape(label)}">']
    for level in (0.0, 0.5, 1.0):
        parts.append(f'<line class="grid" x1="{_PAD}" x2="{_W - _PAD}" y1="{y(level):.1f}" y2="{y(level):.1f}"/>')
        parts.append(f'<text class="label" x="4" y="{y(level) + 4:.1f}">{level:.0%}</text>')
    parts.append(f'<line class="axis" x1="{_PAD}" x2="{_W - _PAD}" y1="{y(0):.1f}" y2="{y(0):.1f}"/>')
    points = " ".join(f"{x(i):.1f},{y(s):.1f}" for i, s in enumerate(shares))
    parts.append(f'<polyline class="line" points="{points}"/>')
    for i, ((prompt, cached), s) in enumerate(zip(series, shares, strict=True)):
        parts.append(f'<circle class="dot" cx="{x(i):.1f}" cy="{y(s):.1f}" r="3"><title>request {i + 1}: '
                     f'{cached:,} of {prompt:,} prompt tokens cached ({s:.0%})</title></circle>')
    parts.append(f'<text class="label" x="{_PAD}" y="{_H - 8}">request 1</text>')
    parts.append(f'<text class="label" x="{_W - _PAD}" y="{_H - 8}" text-anchor="end">request {n}</text>')
    parts.append("</svg>")
    return "".join(parts)
