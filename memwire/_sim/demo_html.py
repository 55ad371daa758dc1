"""``memwire demo --html FILE``: the demo's comparison as one self-contained page.

The table the terminal shows, then per mode a chart of the share of each request's prompt the
provider read from its cache, request by request (inline SVG: no script, no CDN, works offline
and in any browser). Where a mode's line drops, that request's prefix stopped matching the
previous one: that is what putting memory in the system prompt costs.
"""

from __future__ import annotations

from html import escape

from .._charts import CHART_CSS, share_chart
from .demo import DemoReport, summary

__all__ = ["render_html"]

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 760px; color: #1d1d1f; }
table { border-collapse: collapse; width: 100%; margin: 1rem 0; }
th, td { padding: .3rem .5rem; text-align: right; border-bottom: 1px solid #ddd; }
th:first-child, td:first-child { text-align: left; }
figure { margin: 1.5rem 0; }
figcaption { font-weight: 600; }
.note { color: #555; font-size: 13px; }
""" + CHART_CSS


def render_html(report: DemoReport) -> str:
    """The whole page for one provider's run."""
    rows = "".join(
        f"<tr><td>{escape(r.label)}</td><td>{r.requests}</td><td>{r.injected}</td>"
        f"<td>{f'{r.recalled}/{r.needed}' if r.needed else '-'}</td><td>{r.cached_ratio:.1%}</td>"
        f"<td>{r.cost:,.0f}</td><td>{r.cost_vs_none:.2f}x</td></tr>" for r in report.results)
    charts = "".join(f"<figure><figcaption>{escape(r.label)}: {r.cached_ratio:.1%} of prompt tokens cached"
                     f"</figcaption>{share_chart(r.series, r.label)}</figure>" for r in report.results)
    costs = "0.5" if report.provider == "openai" else "read 0.1 / write 1.25"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>memwire demo: {escape(report.provider)}</title>
<style>{_CSS}</style></head><body>
<h1>memwire demo</h1>
<p>One coding-agent conversation ({report.turns} user turns in {report.sessions} sessions, tool loops, social
closers) over {report.memories} memories, played through the memwire proxy against a local fake
{escape(report.provider)} provider ({escape(report.model)}) whose usage comes from a prompt-cache simulator.</p>
<table><thead><tr><th>mode</th><th>requests</th><th>injected</th><th>recalled</th><th>cached</th>
<th>cost units</th><th>vs none</th></tr></thead><tbody>{rows}</tbody></table>
<p class="note">injected: memories put before the model per turn (startup and the profile: per session);
recalled: turns whose needed memory the model saw; cached: share of prompt tokens read from the
provider's cache; cost units: uncached input 1.0, cached {costs}; vs none: against no memory at all.</p>
<p>{escape(summary(report))}</p>
<h2>Cached share of each request's prompt</h2>
<p class="note">A drop is a request whose prefix the provider's cache did not hold: a session's first request,
or one whose prefix stopped matching the previous request's.</p>
{charts}
</body></html>
"""
